"""Jobs of several ranks (store/jobs.c, issue 25): sessions that share a `job` label, side by
side, and the straggler.

The job is recorded here, by real torch: two processes of torch.distributed with the gloo
backend (Debian's python3-torch, CPU), each step some compute then an all_reduce; one rank,
chosen at random, does ~25 ms more compute per step on purpose
(tests/triage/record_torch.py gloo_worker). The collective makes both ranks' steps equally
long, so the server must find the slow rank by its own time per step."""
import json
import os
import random
import subprocess
import tempfile
import unittest

from fpserver import ROOT, TRACES, Server


def record_job(slow_rank, steps=4):
    """Two fresh rank traces (bytes), the slow rank being slow_rank. In a process of its own:
    torch.multiprocessing's spawn re-imports the main module, which here is the test runner."""
    out = tempfile.mkdtemp(prefix="fp-job-")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "triage", "record_torch.py"), "--gloo", out, str(slow_rank),
                    str(steps)], check=True, timeout=300)
    traces = []
    for r in range(2):
        with open(os.path.join(out, "gloo_rank%d.json.gz" % r), "rb") as f:
            traces.append(f.read())
    return traces


class Jobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.slow = random.Random(os.getpid()).randrange(2)
        cls.traces = record_job(cls.slow)
        cls.ids = [cls.srv.upload_ok(t, "?name=gloo-%d&label=job:gloo-test&label=rank:%d&label=world_size:2" % (r, r))
                   for r, t in enumerate(cls.traces)]
        cls.srv.upload_ok(cls.traces[0], "?name=other-job&label=job:other&label=rank:0")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_straggler_is_the_slowed_rank(self):
        j = self.srv.json("/api/v1/jobs/gloo-test")
        self.assertEqual([r["rank"] for r in j["ranks"]], [0, 1])
        self.assertEqual([r["session_id"] for r in j["ranks"]], self.ids)
        for r in j["ranks"]:
            self.assertEqual(r["world_size"], 2)
            self.assertEqual(r["steps"]["range"], "train_step")
            self.assertEqual(r["steps"]["count"], 4)
            self.assertIsNone(r["gpu_idle_fraction"])  # CPU only
            # The fast rank waits in the collective. The slow rank's own ~25 ms of matmuls may
            # outweigh its wait when the machine is loaded (seen at load 20): then its top
            # suspect is that CPU work, which is the right answer too.
            want = ("communication", "cpu_bound_op") if r["rank"] == self.slow else ("communication",)
            self.assertIn(r["top_suspect"]["category"], want, r["top_suspect"])
        s = j["straggler"]
        self.assertEqual(s["rank"], self.slow, json.dumps(j, indent=1)[:3000])
        self.assertGreater(s["slower_by"], 1.0)  # ~25 ms against a few ms of the other's own time
        self.assertTrue(s["differs"], s)
        # the steps themselves are alike: the collective waits for the slow rank
        means = [r["steps"]["mean_us"] for r in j["ranks"]]
        self.assertLess(abs(means[0] - means[1]) / max(means), 0.2, means)
        names = {p["name"]: p for p in j["phases"]}
        fb = {x["rank"]: x["mean_us"] for x in names["forward_backward"]["ranks"]}
        self.assertGreater(fb[self.slow], 3 * fb[1 - self.slow])

    def test_list_text_csv_and_errors(self):
        jobs = {x["job"]: x for x in self.srv.json("/api/v1/jobs")["jobs"]}
        self.assertEqual((jobs["gloo-test"]["sessions"], jobs["gloo-test"]["ranks"]), (2, 2))
        self.assertEqual(jobs["other"]["sessions"], 1)
        st, h, t = self.srv.get("/api/v1/jobs/gloo-test?format=csv")
        self.assertEqual(st, 200)
        rows = t.decode().splitlines()
        self.assertEqual(rows[0].split(",")[:3], ["rank", "session_id", "name"])
        self.assertEqual(len(rows), 3)
        self.assertEqual([r.split(",")[-1] for r in rows[1:]], ["true" if self.slow == i else "false" for i in range(2)])
        st, _, t = self.srv.get("/api/v1/jobs/gloo-test", headers={"Accept": "text/plain"})
        self.assertTrue(t.decode().startswith("rank"))
        st, _, b = self.srv.get("/api/v1/jobs/no-such-job")
        self.assertEqual((st, json.loads(b)["error"]["code"]), (404, "not_found"))
        st, _, b = self.srv.request("POST", "/api/v1/jobs/gloo-test")
        self.assertEqual(st, 405)


if __name__ == "__main__":
    unittest.main()


def gpu_rank(slow, tail_us):
    """A generated rank trace: 4 ProfilerSteps of one aten::mm launch each; the slow rank
    spends 20 ms more per step in aten::slow_op before its launch (cpu_bound_op), and
    tail_us of host work after its last kernel (a tail)."""
    evs, t, corr = [], 0, 0
    for s in range(4):
        step_start = t
        t += 10
        if slow:
            evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::slow_op", "pid": 1, "tid": 1, "ts": t, "dur": 20000})
            t += 20000
        corr += 1
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 30})
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 10,
                    "args": {"correlation": corr}})
        evs.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 20, "dur": 1000,
                    "args": {"device": 0, "stream": 7, "correlation": corr}})
        t += 1100
        evs.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % (s + 1), "pid": 1, "tid": 1,
                    "ts": step_start, "dur": t - step_start})
    if tail_us:
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::postprocess", "pid": 1, "tid": 1, "ts": t + 10, "dur": tail_us})
    return json.dumps({"traceEvents": evs}).encode()


class OnceCategories(unittest.TestCase):
    def test_straggler_differs_leaves_startup_and_tail_out(self):
        """The straggler's 'differs' compares at stake per step; startup and tail happen
        once (their own at_stake_per_step_us is null), so a rank's longer tail is not a
        per-step difference. It was listed as one (tail, 125 ms 'per step')."""
        srv = Server()
        try:
            for r, (slow, tail) in enumerate(((False, 0), (True, 500000))):
                srv.upload_ok(gpu_rank(slow, tail), "?label=job:once&label=rank:%d&label=world_size:2" % r)
            s = srv.json("/api/v1/jobs/once")["straggler"]
            self.assertEqual(s["rank"], 1, s)
            cats = [d["category"] for d in s["differs"]]
            self.assertIn("cpu_bound_op", cats, s)
            self.assertNotIn("tail", cats, s)
            self.assertNotIn("startup", cats, s)
        finally:
            srv.stop()


def jitter_rank(own):
    """A generated rank trace: one ProfilerStep per entry of own, each with own[i] us of CPU
    work before a 1 ms kernel."""
    evs, t = [], 0
    for s, w in enumerate(own):
        start = t
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::work", "pid": 1, "tid": 1, "ts": t + 10, "dur": w})
        t += 10 + w
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 30})
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 10,
                    "args": {"correlation": s + 1}})
        evs.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 20, "dur": 1000,
                    "args": {"device": 0, "stream": 7, "correlation": s + 1}})
        t += 1100
        evs.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % (s + 1), "pid": 1, "tid": 1, "ts": start, "dur": t - start})
    return json.dumps({"traceEvents": evs}).encode()


class NoiseBound(unittest.TestCase):
    """Issue 51, item 4: a straggler only beyond the steps' own spread (twice the standard error
    of the difference of the mean steps), not from any difference; and each rank's mean step
    split into compute, overlapped and exposed communication and idle."""

    def job(self, srv, name, a, b):
        for r, own in enumerate((a, b)):
            srv.upload_ok(jitter_rank(own), "?label=job:%s&label=rank:%d" % (name, r))
        return srv.json("/api/v1/jobs/" + name)

    def test_within_and_beyond_the_noise(self):
        srv = Server()
        try:
            j = self.job(srv, "noisy", (1000, 9000, 1000, 9000), (6000, 6000, 6000, 6000))
            self.assertIsNone(j["straggler"], j["straggler_check"])
            c = j["straggler_check"]
            self.assertEqual((c["rank"], c["verdict"]), (1, "within_noise"))
            sd = j["ranks"][0]["steps"]["sd_us"]
            self.assertAlmostEqual(sd, 4618.8, delta=1)  # the sample sd of 1, 9, 1, 9 ms (+ the same 1.11 ms)
            self.assertAlmostEqual(c["noise_us"], 2 * (sd * sd / 4) ** 0.5, delta=1)
            self.assertLess(c["own_per_step_us"] - c["others_median_us"], c["noise_us"])
            j = self.job(srv, "clear", (1000, 9000, 1000, 9000), (20000, 20000, 20000, 20000))
            s = j["straggler"]
            self.assertEqual((s["rank"], s["verdict"]), (1, "beyond_noise"))
            self.assertGreater(s["own_per_step_us"] - s["others_median_us"], s["noise_us"])
            for r in j["ranks"]:
                b = r["breakdown"]
                self.assertAlmostEqual(b["step_us"], r["steps"]["mean_us"], delta=1)
                parts = b["compute_us"] + b["overlapped_comm_us"] + b["exposed_comm_us"] + b["idle_us"]
                self.assertAlmostEqual(parts, b["step_us"], delta=1)
                self.assertAlmostEqual(b["compute_us"], 1000, delta=1)
                self.assertEqual(b["exposed_comm_us"], 0)
        finally:
            srv.stop()


NCCL = os.path.join(TRACES, "hta/nccl_parser_config/nccl_data.json.gz")
DTYPE = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1, "Bool": 1}


class Collectives(unittest.TestCase):
    """Issue 51, item 4: the collectives table, from the NCCL kernels' args, against the trace
    read here: calls, bytes (S as nccl-tests define it), kernel time, algbw and busbw."""

    def test_against_the_trace(self):
        import gzip
        with open(NCCL, "rb") as f:
            raw = f.read()
        want = {}
        for e in json.loads(gzip.decompress(raw))["traceEvents"]:
            a = e.get("args") or {}
            if e.get("cat") != "kernel" or "Collective name" not in a:
                continue
            n = a["Collective name"]
            w = want.setdefault((n, a["Group size"]), [0, 0, 0.0])
            w[0] += 1
            w[1] += a["Out msg nelems" if "allgather" in n.replace("_", "") else "In msg nelems"] * DTYPE[a["dtype"]]
            w[2] += e["dur"]
        srv = Server()
        try:
            srv.upload_ok(raw, "?label=job:nccl&label=rank:0")
            srv.upload_ok(jitter_rank((1000, 1000)), "?label=job:nccl&label=rank:1")  # a rank with no collective
            got = srv.json("/api/v1/jobs/nccl")["collectives"]
            self.assertEqual({(c["collective"], c["group_size"]) for c in got}, set(want))
            for c in got:
                calls, nbytes, t = want[(c["collective"], c["group_size"])]
                self.assertEqual((c["calls"], c["ranks"]), (calls, 1))
                self.assertEqual(c["bytes"], nbytes)
                self.assertAlmostEqual(c["time_us"], t, places=3)
                alg = nbytes / t / 1e3
                self.assertAlmostEqual(c["algbw_gbps"], alg, places=6)
                n = c["group_size"]
                f = 2 * (n - 1) / n if c["collective"] == "allreduce" else 1.0
                self.assertAlmostEqual(c["busbw_gbps"], alg * f, places=6)
            self.assertEqual(got[0]["collective"], "allreduce", "the most kernel time first")
        finally:
            srv.stop()
