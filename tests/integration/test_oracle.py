"""Oracle: Debian's python3-torch profiles a small model with record_function phases;
the server's operator table must match prof.key_averages() for every operator."""
import json
import os
import tempfile
import unittest

from fpserver import Server

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def read(path):
    with open(path, "rb") as f:
        return f.read()


def profile_model(steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    x = torch.randn(16, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("prefill"):
            y = model(x)
        with record_function("decode_loop"):
            for _ in range(steps):
                with record_function("decode_step"):
                    y = model(torch.tanh(y))
    path = os.path.join(tempfile.mkdtemp(prefix="fp-oracle-"), "trace.json")
    prof.export_chrome_trace(path)
    return prof, path


class Oracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_oracle_key_averages_match(self):
        steps = 12
        prof, path = profile_model(steps)
        sid = self.srv.upload_ok(read(path), "?name=oracle&label=model:mlp")
        rows = self.srv.json("/api/v1/sessions/%d/operators?limit=10000&sort=cpu_time_total" % sid)["operators"]
        got = {r["name"]: r for r in rows}
        n = 0
        for evt in prof.key_averages():
            with self.subTest(op=evt.key):
                self.assertIn(evt.key, got)
                g = got[evt.key]
                self.assertEqual(g["calls"], evt.count)
                # torch 1.13's legacy profiler keeps integer microseconds, in the trace and
                # in key_averages alike: the sums must agree exactly (0.5 us for float noise).
                tol = 0.5
                self.assertLessEqual(abs(g["cpu_time_total_us"] - evt.cpu_time_total), tol, (g, evt.cpu_time_total))
                self.assertLessEqual(abs(g["self_cpu_time_total_us"] - evt.self_cpu_time_total), tol,
                                     (g, evt.self_cpu_time_total))
                n += 1
        self.assertGreater(n, 8)
        self.assertEqual(len([r for r in rows if r["kind"] != "gpu_user_annotation"]), n)

        phases = {p["name"]: p for p in self.srv.json("/api/v1/sessions/%d/phases" % sid)["phases"]}
        self.assertEqual(phases["prefill"]["count"], 1)
        self.assertEqual(phases["decode_loop"]["count"], 1)
        self.assertEqual(phases["decode_step"]["count"], steps)
        # decode_step: many small repeated blocks; prefill one block.
        self.assertLess(phases["decode_step"]["mean_us"], phases["decode_loop"]["total_us"])

    def test_oracle_text_table_like_torch(self):
        prof, path = profile_model(3)
        sid = self.srv.upload_ok(read(path), "?name=oracle-text")
        st, h, body = self.srv.get("/api/v1/sessions/%d/operators?sort=self_cpu_time_total" % sid, {"Accept": "text/plain"})
        self.assertEqual(st, 200)
        self.assertTrue(h["Content-Type"].startswith("text/plain"))
        text = body.decode()
        for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
            self.assertIn(col, text)
        self.assertIn("Self CPU time total:", text)
        # First data row is the operator with the largest self CPU time, as torch sorts it.
        top = max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key
        data = [l for l in text.splitlines() if l and not l.startswith("-")][1]
        self.assertEqual(data.split("  ")[0].strip() or data.strip().split()[0], top)


if __name__ == "__main__":
    unittest.main()
