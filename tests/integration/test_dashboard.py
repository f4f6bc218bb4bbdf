"""Issue 51, the server's side of the dashboard's items: what the pages read.

  1 one busy figure: the summary's gpu_utilization is /gpu's and /efficiency's; the trace
    question and the report name any other busy figure by what it divides by
  2 compare leads with the step (steps by role, memory peaks, hardware), pairs a renamed phase of
    one family, writes flat CSV; the baselines gate may check the memory peak (gate=memory)
  5 /targets says whether tokens are on; the serving guide is served (static/docs/serving.md)
  6 the Chrome trace as a .json.gz file (?format=gzip)
  7 make run honours FIRSTPASS_PORT; a one-GPU run does not read x4 / x8; the list has the step
    and the top suspect
Every server is a real firstpass-server; traces are the real ones under ../shared/data/traces
or small synthetic ones built here."""
import csv
import gzip
import io
import json
import os
import subprocess
import unittest

import fpserver
from fpserver import ROOT, TRACES, Server, free_port

NW0 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
NW4 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz")
CLOVER = os.path.join(TRACES, "pipit_nsys/perlmutter-cloverleaf-cuda.sqlite")
SMALL = os.path.join(TRACES, "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz")

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
        "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 167936, "sharedMemPerBlockOptin": 166912}
V100 = dict(A100, name="Tesla V100-SXM2-32GB", computeMajor=7, numSms=80)


def ev(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def mem(ts, total, device=0):
    """A [memory] event with the allocator's Total Allocated (bytes) on a CUDA device."""
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": 1, "Device Id": device, "Addr": 1000 + ts, "Bytes": 1024, "Total Allocated": total,
                     "Total Reserved": total * 2}}


def stepped(steps=6, devices=(0,), props=(A100,), peak=None, loader="_SingleProcessDataLoaderIter"):
    """steps x ProfilerStep#N of 10 ms: a DataLoader range (2 ms), then an aten::mm launching a
    1 ms gemm on each device in devices; [memory] events peaking at peak bytes when given."""
    evs = []
    for n in range(steps):
        t0 = n * 10000
        evs.append(ev("ProfilerStep#%d" % n, "user_annotation", t0, 10000))
        evs.append(ev("enumerate(DataLoader)#%s.__next__" % loader, "user_annotation", t0 + 10, 2000))
        for i, d in enumerate(devices):
            ts, c = t0 + 3000 + i * 1500, 100 + n * 10 + i
            evs += [ev("aten::mm", "cpu_op", ts, 500), ev("cudaLaunchKernel", "cuda_runtime", ts + 1, 2, correlation=c),
                    ev("gemm", "kernel", ts + 3, 1000, pid=d, tid=7, correlation=c, device=d, stream=7)]
        if peak:
            evs += [mem(t0 + 3001, peak // 2), mem(t0 + 3002, peak), mem(t0 + 3003, peak // 4)]
    return json.dumps({"schemaVersion": 1, "traceEvents": evs, "deviceProperties": list(props)}).encode()


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.nw0 = cls.srv.upload_ok(read(NW0), "?name=nw0&label=model:resnet50&label=suite:dash")
        cls.nw4 = cls.srv.upload_ok(read(NW4), "?name=nw4&label=model:resnet50&label=suite:dash")
        cls.clover = cls.srv.upload_ok(read(CLOVER), "?name=clover")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    # ---- item 1: one busy figure ----

    def test_summary_gpu_busy_is_the_headline(self):
        """The session's and the list's gpu_utilization are /gpu's and /efficiency's (tb-profiler's
        55.51% on the ResNet50 sample), not busy of the wall (56.6%) nor busy after the first
        work (60.6%)."""
        for sid in (self.nw0, self.nw4, self.clover):
            s = self.srv.json("/api/v1/sessions/%d" % sid)
            g = self.srv.json("/api/v1/sessions/%d/gpu" % sid)
            e = self.srv.json("/api/v1/sessions/%d/efficiency" % sid)
            self.assertEqual(s["gpu_utilization"], g["gpu_utilization"])
            self.assertEqual(s["gpu_utilization"], e["session"]["gpu_utilization"])
            row = [x for x in self.srv.json("/api/v1/sessions?limit=1000")["sessions"] if x["id"] == sid][0]
            self.assertEqual(row["gpu_utilization"], s["gpu_utilization"])
        s = self.srv.json("/api/v1/sessions/%d" % self.nw0)
        self.assertEqual(round(s["gpu_utilization"] * 100, 2), 55.51)

    def test_question_and_report_name_the_other_busy_figures(self):
        """The trace question's figure is "busy after its first work" (60.6% on ResNet50 w0), never
        "the GPU is busy ... of its window"; the report's Top CPU line says GPU busy as the
        headline, then busy of the wall."""
        for sid in (self.nw0, self.clover):
            sus = self.srv.json("/api/v1/sessions/%d/suspects" % sid)
            q = sus["questions"]["kernels_packed"]
            busy = sus["gpu"]["busy_fraction"]
            self.assertIn("busy %.1f%% after its first work" % (busy * 100), q["summary"])
            self.assertNotIn("of its window", q["summary"])
        q = self.srv.json("/api/v1/sessions/%d/suspects" % self.nw0)["questions"]["kernels_packed"]["summary"]
        self.assertTrue(q.startswith("no: busy 60.6% after its first work"), q)
        line = self.srv.json("/api/v1/sessions/%d/report" % self.nw0)["lines"]["top_cpu_cost"]
        self.assertTrue(line.endswith("; GPU busy 55.5%, busy 56.6% of the wall"), line)
        st, _, text = self.srv.get("/api/v1/sessions/%d/suspects?format=text" % self.nw0)
        self.assertIn("busy 56.6% of the wall, 60.6% after its first work", text.decode())

    # ---- item 7: the list's step and top suspect; one-GPU runs ----

    def test_list_has_the_step_and_the_top_suspect(self):
        rows = {x["id"]: x for x in self.srv.json("/api/v1/sessions?limit=1000")["sessions"]}
        for sid in (self.nw0, self.clover):
            st = self.srv.json("/api/v1/sessions/%d/steps" % sid)
            sus = self.srv.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
            r = rows[sid]
            self.assertEqual(r["step_mean_us"], st["mean"]["dur_us"] if st["mean"] else None)
            self.assertEqual(r["top_suspect"], {k: sus[0][k] for k in ("category", "culprit", "at_stake_fraction")})
            self.assertEqual(self.srv.json("/api/v1/sessions/%d" % sid)["top_suspect"], r["top_suspect"])
        self.assertEqual(round(rows[self.nw0]["step_mean_us"] / 1000, 3), 177.592)  # tb-profiler's step
        self.assertIsNone(rows[self.clover]["step_mean_us"])

    def test_one_gpu_run_is_not_x4(self):
        """Kineto lists the node's devices; the hardware says the GPUs the run used."""
        self.assertEqual(self.srv.json("/api/v1/sessions/%d" % self.nw0)["hardware"], "Tesla V100-DGXS-32GB x1 (of 4 on the node)")
        one = self.srv.upload_ok(stepped(devices=(0,), props=(A100, dict(A100, id=1))), "?name=one-of-two")
        two = self.srv.upload_ok(stepped(devices=(0, 1), props=(A100, dict(A100, id=1))), "?name=two-of-two")
        self.assertEqual(self.srv.json("/api/v1/sessions/%d" % one)["hardware"], "NVIDIA A100-SXM4-80GB x1 (of 2 on the node)")
        self.assertEqual(self.srv.json("/api/v1/sessions/%d" % two)["hardware"], "NVIDIA A100-SXM4-80GB x2")
        rep = self.srv.json("/api/v1/sessions/%d/report" % one)["lines"]["hardware"]
        self.assertIn("x1 (of 2 on the node)", rep)

    # ---- item 2: compare ----

    def test_compare_leads_with_the_step(self):
        """ResNet50 w0 against w4: the mean step 178 -> 141 ms, DataLoader 59.3 -> 1.2 ms a step,
        each role's delta head - base, the memory peaks, the same hardware."""
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.nw0, self.nw4))
        bs, hs = (self.srv.json("/api/v1/sessions/%d/steps" % i) for i in (self.nw0, self.nw4))
        st = c["steps"]
        self.assertEqual(st["roles"], bs["roles"])
        self.assertEqual((st["base"]["count"], st["head"]["count"]), (len(bs["steps"]), len(hs["steps"])))
        self.assertEqual(st["base"]["mean"], bs["mean"])
        self.assertEqual(st["head"]["mean"], hs["mean"])
        for k in bs["roles"]:
            self.assertAlmostEqual(st["delta"][k + "_us"], hs["mean"][k + "_us"] - bs["mean"][k + "_us"], places=6)
        self.assertEqual((round(bs["mean"]["dur_us"] / 1000), round(hs["mean"]["dur_us"] / 1000)), (178, 141))
        self.assertEqual((round(bs["mean"]["data_loading_us"] / 1000, 1), round(hs["mean"]["data_loading_us"] / 1000, 1)), (59.3, 1.2))
        bm, hm = (self.srv.json("/api/v1/sessions/%d/memory" % i) for i in (self.nw0, self.nw4))
        rows = {r["device"]: r for r in c["memory"]}
        self.assertEqual(set(rows), {d["device"] for d in bm["devices"]} | {d["device"] for d in hm["devices"]})
        for d in bm["devices"]:
            h = [x for x in hm["devices"] if x["device"] == d["device"]][0]
            self.assertEqual(rows[d["device"]]["base"]["peak_bytes"], d["peak_bytes"])
            self.assertEqual(rows[d["device"]]["delta_peak_bytes"], h["peak_bytes"] - d["peak_bytes"])
        self.assertEqual(c["hardware"], {"base": c["base"]["hardware"], "head": c["head"]["hardware"], "same": True})

    def test_compare_without_steps_and_other_hardware(self):
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.nw0, self.clover))
        self.assertIsNone(c["steps"]["head"])
        self.assertIsNone(c["steps"]["delta"])
        self.assertFalse(c["hardware"]["same"])
        a = self.srv.upload_ok(stepped(props=(A100,) * 8), "?name=a100")
        v = self.srv.upload_ok(stepped(props=(V100,) * 2), "?name=v100")
        self.assertFalse(self.srv.json("/api/v1/compare?base=%d&head=%d" % (a, v))["hardware"]["same"])
        a2 = self.srv.upload_ok(stepped(props=(A100,) * 4), "?name=a100-of-4")
        # one GPU of eight against one of four: the same hardware for the run
        self.assertTrue(self.srv.json("/api/v1/compare?base=%d&head=%d" % (a, a2))["hardware"]["same"])

    def test_compare_pairs_a_renamed_dataloader(self):
        """_SingleProcessDataLoaderIter against _MultiProcessingDataLoaderIter is one phase
        changed (it read appeared and disappeared); exact matches are left alone."""
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.nw0, self.nw4))
        dl = [p for p in c["phases"] if "DataLoader" in p["name"] or "DataLoader" in p.get("base_name", "")]
        self.assertEqual(len(dl), 1, dl)
        p = dl[0]
        self.assertEqual((p["status"], p["name"], p["base_name"]), (
            "changed", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"))
        self.assertEqual(p["delta"]["total_us"], p["head"]["total_us"] - p["base"]["total_us"])
        self.assertTrue(all("base_name" not in x for x in c["phases"] if x is not p))
        # two candidates on a side could pair either way: left unpaired
        a = self.srv.upload_ok(stepped(loader="_SingleProcessDataLoaderIter"), "?name=single")
        evs = json.loads(stepped(loader="_MultiProcessingDataLoaderIter"))
        evs["traceEvents"].append(ev("enumerate(DataLoader)#_OtherIter.__next__", "user_annotation", 5000, 10))
        b = self.srv.upload_ok(json.dumps(evs).encode(), "?name=two-loaders")
        ph = self.srv.json("/api/v1/compare?base=%d&head=%d" % (a, b))["phases"]
        self.assertEqual(sorted(p["status"] for p in ph if "DataLoader" in p["name"]), ["appeared", "appeared", "disappeared"])

    def test_compare_csv_is_flat(self):
        """One value a cell: no JSON object in any cell, numbers equal to the JSON rows'."""
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.nw0, self.nw4))
        st, h, body = self.srv.get("/api/v1/compare?base=%d&head=%d&format=csv" % (self.nw0, self.nw4))
        self.assertEqual(st, 200)
        rows = list(csv.DictReader(io.StringIO(body.decode())))
        self.assertEqual(len(rows), len(c["operators"]))
        for r, o in zip(rows, c["operators"]):
            self.assertFalse(any(v.startswith("{") for v in r.values()), r)
            self.assertEqual(r["name"].lstrip("'"), o["name"])
            for side in ("base", "head"):
                if o[side] is None:
                    self.assertEqual(r[side + "_calls"], "")
                else:
                    self.assertEqual(int(r[side + "_calls"]), o[side]["calls"])
                    self.assertAlmostEqual(float(r[side + "_cuda_time_total_us"]), o[side]["cuda_time_total_us"], places=3)
            self.assertAlmostEqual(float(r["delta_cuda_time_total_us"]), o["delta"]["cuda_time_total_us"], places=3)
        st, _, text = self.srv.get("/api/v1/compare?base=%d&head=%d&format=text" % (self.nw0, self.nw4))
        self.assertTrue(text.decode().startswith("name"))
        self.assertNotIn('{"calls"', text.decode())

    def test_memory_gate(self):
        """gate=memory: the steps gate and the GPU memory peak, past rel and abs_bytes."""
        gib = 1 << 30
        base = self.srv.upload_ok(stepped(peak=gib), "?name=mem-base")
        same = self.srv.upload_ok(stepped(peak=gib + (1 << 20)), "?name=mem-same")
        fat = self.srv.upload_ok(stepped(peak=2 * gib), "?name=mem-fat")
        st, _, b = self.srv.request("PUT", "/api/v1/baselines/mem-base-%d" % os.getpid(), json.dumps({"session_id": base}).encode())
        self.assertIn(st, (200, 201), b)
        name = "mem-base-%d" % os.getpid()
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=%s" % (fat, name))
        self.assertFalse(r["regressed"], "the steps gate does not look at memory")
        self.assertNotIn("memory", r["verdict"])
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=%s&gate=memory" % (fat, name))
        self.assertTrue(r["regressed"])
        self.assertEqual(r["gate"], "memory")
        m = r["verdict"]["memory"]
        self.assertEqual((m["base_peak_bytes"], m["head_peak_bytes"], m["delta_bytes"], m["direction"]), (gib, 2 * gib, gib, "regressed"))
        self.assertIn("memory peak 2048.0 MiB against 1024.0 MiB", r["verdict"]["why"])
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=%s&gate=memory" % (same, name))
        self.assertFalse(r["regressed"])
        self.assertEqual(r["verdict"]["memory"]["direction"], "unchanged")
        # a larger abs_bytes lets the doubling through; a session without memory events is not judged
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=%s&gate=memory&abs_bytes=%d" % (fat, name, 2 * gib))
        self.assertFalse(r["regressed"])
        plain = self.srv.upload_ok(stepped(), "?name=mem-none")
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=%s&gate=memory" % (plain, name))
        self.assertIsNone(r["verdict"]["memory"])
        st, _, b = self.srv.get("/api/v1/sessions/%d/regressions?baseline=%s&gate=bogus" % (fat, name))
        self.assertEqual(st, 400)
        self.assertIn("memory", json.loads(b)["error"]["message"])

    # ---- item 6: the .json.gz download ----

    def test_trace_as_a_gzip_file(self):
        sid = self.srv.upload_ok(read(SMALL), "?name=gz")
        st, h, plain = self.srv.get("/api/v1/sessions/%d/trace" % sid)
        self.assertEqual((st, h.get("Content-Encoding")), (200, None))
        st, h, gz = self.srv.get("/api/v1/sessions/%d/trace?format=gzip" % sid)
        self.assertEqual(st, 200)
        self.assertEqual(h["Content-Type"], "application/gzip")
        self.assertNotIn("Content-Encoding", h)
        self.assertEqual(h["Content-Disposition"], 'attachment; filename="firstpass-session-%d.json.gz"' % sid)
        self.assertEqual(gz[:2], b"\x1f\x8b")
        self.assertEqual(gzip.decompress(gz), plain)
        self.assertLess(len(gz), len(plain) / 3)
        # with Accept-Encoding the plain route is gzip on the wire (curl --compressed)
        st, h, wire = self.srv.get("/api/v1/sessions/%d/trace" % sid, headers={"Accept-Encoding": "gzip"})
        self.assertEqual(h.get("Content-Encoding"), "gzip")
        self.assertEqual(gzip.decompress(wire), plain)
        st, _, b = self.srv.get("/api/v1/sessions/%d/trace?format=zip" % sid)
        self.assertEqual(st, 400)

    # ---- item 5: targets and the serving guide ----

    def test_serving_guide_is_served(self):
        st, h, b = self.srv.get("/docs/serving.md")
        self.assertEqual(st, 200)
        self.assertTrue(h["Content-Type"].startswith("text/plain"))
        self.assertEqual(b, read(os.path.join(ROOT, "docs", "serving.md")), "static/docs/serving.md is docs/serving.md")

    def test_targets_say_whether_tokens_are_on(self):
        self.assertEqual(self.srv.json("/api/v1/targets")["auth"], {"tokens": False, "read_auth": False})


class Tokens(unittest.TestCase):
    def test_targets_auth_with_tokens(self):
        import test_auth
        path = test_auth.tokens_file()
        for flags, want in (((), {"tokens": True, "read_auth": False}), (("--read-auth",), {"tokens": True, "read_auth": True})):
            srv = Server("--tokens-file", path, *flags)
            try:
                st, _, b = srv.get("/api/v1/targets", headers=test_auth.bearer(test_auth.PLAIN))
                self.assertEqual(st, 200, b)
                self.assertEqual(json.loads(b)["auth"], want)
            finally:
                srv.stop()
        os.unlink(path)


class MakeRun(unittest.TestCase):
    def test_make_run_honours_firstpass_port(self):
        """make run passes no flag that would beat a FIRSTPASS_* variable (it hard-coded
        --port 8080), and the server it runs listens on FIRSTPASS_PORT."""
        out = subprocess.run(["make", "--no-print-directory", "-n", "run", "SERVER=" + fpserver.SERVER], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
        line = [x for x in out.splitlines() if x.strip().startswith(fpserver.SERVER)]
        self.assertEqual(len(line), 1, out)
        self.assertNotRegex(line[0], r"--(port|bind|db|static)\b")
        port = free_port()
        tmp = fpserver.tempfile.mkdtemp(prefix="fp-run-")
        env = dict(os.environ, FIRSTPASS_PORT=str(port), FIRSTPASS_DB=os.path.join(tmp, "db.sqlite"), FIRSTPASS_QUIET="1")
        p = subprocess.Popen(line[0].split(), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            import time
            import urllib.request
            for _ in range(100):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as r:
                        self.assertEqual(r.status, 200)
                        break
                except OSError:
                    time.sleep(0.05)
            else:
                self.fail("make run's server did not listen on FIRSTPASS_PORT=%d" % port)
        finally:
            p.terminate()
            p.wait(10)


if __name__ == "__main__":
    unittest.main()
