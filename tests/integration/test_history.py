"""History (history.c): baselines CRUD and errors, the regression check with exact items,
thresholds, the auto-picked baseline, trends, firstpass-upload --check-against exit codes,
the 1 -> 3 schema migrations, and the GPU utilization / occupancy fields (occupancy.c).

Every number comes from small synthetic Kineto traces built here (see kineto()): the head
of the regressed pair has aten::mm's kernel at twice the base's duration."""
import gzip
import json
import os
import sqlite3
import subprocess
import tempfile
import unittest
import urllib.parse

from fpserver import Server, TRACES, SERVER, SQLITE_NEWEST, SQLITE_UNDO_NEWEST, sqlite_only

UPLOAD = os.path.join(os.path.dirname(SERVER), "firstpass-upload")
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
        "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 167936, "sharedMemPerBlockOptin": 166912}


def ev(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kineto(mm_kernel_us=1000.0, add_calls=5, linear_us=5000.0, with_mm=True, device=True):
    """One 10 ms "decode" step (thread 1): 4 x aten::mm (500 us each, one cudaLaunchKernel and
    one "gemm" kernel of mm_kernel_us each, 2000 us apart), add_calls x aten::add (5 us, no
    kernel); aten::linear (linear_us) alone on thread 2. GPU busy = 4 x mm_kernel_us."""
    evs = [ev("decode", "user_annotation", 0, 10000)]
    for i in range(4 if with_mm else 0):
        ts = 100 + i * 2000
        evs += [ev("aten::mm", "cpu_op", ts, 500), ev("cudaLaunchKernel", "cuda_runtime", ts + 1, 2, correlation=10 + i),
                ev("gemm", "kernel", ts + 3, mm_kernel_us, pid=0, tid=7, correlation=10 + i, device=0, stream=7,
                   grid=[864, 1, 1], block=[256, 1, 1], **{"registers per thread": 47, "shared memory": 0})]
    for i in range(add_calls):
        evs.append(ev("aten::add", "cpu_op", 600 + i * 10, 5))
    evs.append(ev("aten::linear", "cpu_op", 0, linear_us, tid=2))
    doc = {"schemaVersion": 1, "traceEvents": evs}
    if device:
        doc["deviceProperties"] = [A100]
    return json.dumps(doc).encode()


def stepped(steps, mm_kernel_us=1000.0, adds=5):
    """steps x ProfilerStep#N of 10 ms, each with 2 aten::mm (a gemm kernel each) and adds x aten::add."""
    evs = []
    for n in range(steps):
        t0 = n * 10000
        evs.append(ev("ProfilerStep#%d" % n, "user_annotation", t0, 10000))
        for i in range(2):
            ts, c = t0 + 100 + i * 3000, 1000 + n * 10 + i
            evs += [ev("aten::mm", "cpu_op", ts, 500), ev("cudaLaunchKernel", "cuda_runtime", ts + 1, 2, correlation=c),
                    ev("gemm", "kernel", ts + 3, mm_kernel_us, pid=0, tid=7, correlation=c, device=0, stream=7)]
        for i in range(adds):
            evs.append(ev("aten::add", "cpu_op", t0 + 7000 + i * 10, 5))
    return json.dumps({"schemaVersion": 1, "traceEvents": evs, "deviceProperties": [A100]}).encode()


BASE = kineto()
CLEAN = kineto(mm_kernel_us=1040.0)               # +4% everywhere: under rel 0.10
HEAD = kineto(mm_kernel_us=2000.0, add_calls=20, linear_us=5200.0)


def q(labels):
    return "&".join("label=" + urllib.parse.quote(k + ":" + v) for k, v in labels.items())


class History(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.labels = {"model": "llama-8b", "gpu": "H100", "phase": "decode"}
        up = lambda body, name: cls.srv.upload_ok(body, "?name=%s&%s" % (name, q(cls.labels)))
        cls.base, cls.clean, cls.head = up(BASE, "base"), up(CLEAN, "clean"), up(HEAD, "head")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def req(self, method, path, body=None, headers=None):
        st, h, b = self.srv.request(method, path, body=None if body is None else json.dumps(body).encode()
                                    if not isinstance(body, bytes) else body, headers=headers)
        return st, h, json.loads(b) if b and h.get("Content-Type", "").startswith("application/json") else b

    def put(self, name, body):
        return self.req("PUT", "/api/v1/baselines/" + name, body)

    def assertError(self, st, body, status, code):
        self.assertEqual(st, status, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertTrue(body["error"]["message"])

    # ---- baselines ----

    def test_baseline_crud(self):
        st, h, b = self.put("crud-1", {"session_id": self.base})
        self.assertEqual(st, 201, b)
        self.assertEqual(h["Location"], "/api/v1/baselines/crud-1")
        self.assertEqual((b["name"], b["session_id"], b["session_name"]), ("crud-1", self.base, "base"))
        self.assertEqual(b["labels"], self.labels)  # default: the session's labels
        self.assertEqual(self.srv.json("/api/v1/baselines/crud-1"), b)
        # Replace: 200, new session and labels, created_at kept.
        st, _, b2 = self.put("crud-1", {"session_id": self.clean, "labels": {"model": "crud-model"}})
        self.assertEqual(st, 200, b2)
        self.assertEqual((b2["session_id"], b2["labels"], b2["created_at"]), (self.clean, {"model": "crud-model"}, b["created_at"]))
        names = [x["name"] for x in self.srv.json("/api/v1/baselines?label=model:crud-model")["baselines"]]
        self.assertEqual(names, ["crud-1"])
        self.assertEqual(self.srv.json("/api/v1/baselines?label=model:crud-model&label=gpu:H100")["baselines"], [])
        self.assertIn("crud-1", [x["name"] for x in self.srv.json("/api/v1/baselines")["baselines"]])
        st, _, txt = self.req("GET", "/api/v1/baselines?label=model:crud-model&format=text")
        self.assertEqual(st, 200)
        self.assertEqual(txt.decode().splitlines()[0].split(), ["name", "session_id", "session_name", "labels", "updated_at"])
        st, _, _ = self.req("DELETE", "/api/v1/baselines/crud-1")
        self.assertEqual(st, 204)
        st, _, b = self.req("GET", "/api/v1/baselines/crud-1")
        self.assertError(st, b, 404, "not_found")
        st, _, b = self.req("DELETE", "/api/v1/baselines/crud-1")
        self.assertError(st, b, 404, "not_found")

    def test_baseline_errors(self):
        for name in ("a" * 65, "bad%20name", "a$b", "%C3%A9"):
            for method in ("GET", "PUT", "DELETE"):
                st, _, b = self.req(method, "/api/v1/baselines/" + name, {"session_id": self.base} if method == "PUT" else None)
                self.assertError(st, b, 400, "invalid_parameter")
        st, _, b = self.put("x" * 64, {"session_id": self.base})  # 64 is the longest name
        self.assertEqual(st, 201, b)
        self.assertEqual(self.req("DELETE", "/api/v1/baselines/" + "x" * 64)[0], 204)
        st, _, b = self.put("e1", b"{not json")
        self.assertError(st, b, 400, "invalid_json")
        for body in ({}, {"session_id": "1"}, {"session_id": 0}, {"session_id": self.base, "labels": {"k": 1}},
                     {"session_id": self.base, "labels": ["k:v"]}, {"session_id": self.base, "labels": {"": "v"}}):
            st, _, b = self.put("e1", body)
            self.assertError(st, b, 422, "invalid_baseline")
        st, _, b = self.put("e1", {"session_id": 987654})
        self.assertError(st, b, 422, "unknown_session")
        self.assertEqual(self.req("GET", "/api/v1/baselines/e1")[0], 404)  # nothing stored
        st, _, b = self.req("GET", "/api/v1/baselines?label=nocolon")
        self.assertError(st, b, 400, "invalid_parameter")
        for method, path, allow in (("POST", "/api/v1/baselines/e1", "GET, PUT, DELETE"), ("DELETE", "/api/v1/baselines", "GET"),
                                    ("POST", "/api/v1/trends", "GET"), ("PUT", "/api/v1/sessions/%d/regressions" % self.base, "GET")):
            st, h, b = self.req(method, path, {} if method != "DELETE" else None)
            self.assertError(st, b, 405, "method_not_allowed")
            self.assertEqual(h["Allow"], allow)

    def test_deleting_the_session_deletes_its_baseline(self):
        sid = self.srv.upload_ok(BASE, "?name=doomed")
        self.assertEqual(self.put("doomed", {"session_id": sid, "labels": {"doomed": "yes"}})[0], 201)
        self.assertEqual(self.req("DELETE", "/api/v1/sessions/%d" % sid)[0], 204)
        self.assertEqual(self.req("GET", "/api/v1/baselines/doomed")[0], 404)
        self.assertEqual(self.srv.json("/api/v1/baselines?label=doomed:yes")["baselines"], [])

    # ---- regressions ----

    def regressions(self, sid, query=""):
        return self.srv.json("/api/v1/sessions/%d/regressions%s" % (sid, query))

    def test_clean_pair_is_clean(self):
        self.assertEqual(self.put("reg-main", {"session_id": self.base})[0] // 100, 2)
        r = self.regressions(self.clean, "?baseline=reg-main")
        self.assertEqual((r["regressed"], r["items"], r["baseline"]), (False, [], "reg-main"))
        self.assertEqual((r["base_session_id"], r["head_session_id"]), (self.base, self.clean))
        self.assertEqual(r["thresholds"], {"rel": 0.1, "abs_us": 100.0, "abs_calls": 10.0, "abs_share": 0.05})
        # The same 4% moves are reported once both thresholds are under them. No ProfilerStep#N
        # in these traces: values are per call (a longer window is not a regression).
        self.assertEqual(r["basis"], "per_call")
        r = self.regressions(self.clean, "?baseline=reg-main&rel=0.01&abs_us=10")
        got = {(i["kind"], i["name"], i["metric"]): (i["base"], i["head"], i["delta"], i["base_total"], i["head_total"]) for i in r["items"]}
        self.assertEqual(got, {("operator", "aten::mm", "cuda_time_per_call"): (1000.0, 1040.0, 40.0, 4000.0, 4160.0),
                               ("kernel", "gemm", "cuda_time_per_call"): (1000.0, 1040.0, 40.0, 4000.0, 4160.0),
                               ("phase", "decode", "gpu_busy_time_per_call"): (4000.0, 4160.0, 160.0, 4000.0, 4160.0)})
        self.assertTrue(r["regressed"])

    def expected_items(self):
        def it(kind, cat, name, metric, unit, base, head, rel, direction="regressed", totals=None):
            o = {"kind": kind, "category": cat, "name": name, "metric": metric, "unit": unit, "status": "changed",
                 "base": base, "head": head, "delta": head - base, "relative": rel, "direction": direction}
            if totals:
                o["base_total"], o["head_total"] = totals
            return o
        # per call (no steps): aten::add's 5 -> 20 calls is not judged without steps
        return [it("operator", "cpu_op", "aten::mm", "cuda_time_per_call", "us", 1000.0, 2000.0, 1.0, totals=(4000.0, 8000.0)),
                it("kernel", "kernel", "gemm", "cuda_time_per_call", "us", 1000.0, 2000.0, 1.0, totals=(4000.0, 8000.0)),
                it("phase", "cpu", "decode", "gpu_busy_time_per_call", "us", 4000.0, 8000.0, 1.0, totals=(4000.0, 8000.0)),
                it("session", "session", "head", "gpu_idle_fraction", "fraction", 0.6, 0.2, -2 / 3, "improved")]

    def assertItems(self, got, want):
        self.assertEqual(len(got), len(want), json.dumps(got, indent=1))
        for g, w in zip(got, want):
            for k in ("base", "head", "delta", "relative") + (("base_total", "head_total") if "base_total" in w else ()):
                self.assertAlmostEqual(g.pop(k), w.pop(k), places=9, msg=(g, k))
            self.assertEqual(g, w)

    def test_regressed_pair_exact_items(self):
        self.put("reg-exact", {"session_id": self.base})
        r = self.regressions(self.head, "?baseline=reg-exact")
        self.assertTrue(r["regressed"])
        self.assertEqual(r["counts"], {"regressed": 3, "improved": 1})
        # aten::linear moved 200 us (over abs_us) but 4% (under rel): not an item.
        self.assertItems(r["items"], self.expected_items())

    def test_thresholds_params(self):
        self.put("reg-thr", {"session_id": self.base})
        r = self.regressions(self.head, "?baseline=reg-thr&rel=0.01")
        self.assertIn(("aten::linear", "cpu_time_per_call", 5000.0, 5200.0),
                      [(i["name"], i["metric"], i["base"], i["head"]) for i in r["items"]])
        r = self.regressions(self.head, "?baseline=reg-thr&abs_us=5000")
        self.assertEqual([(i["name"], i["metric"]) for i in r["items"]], [("head", "gpu_idle_fraction")])
        self.assertFalse(r["regressed"])  # the idle fraction improved
        r = self.regressions(self.head, "?baseline=reg-thr&abs_us=5000&abs_calls=15&abs_share=0.5")
        # 15 more calls is not MORE than abs_calls=15.
        self.assertEqual((r["regressed"], r["items"]), (False, []))
        self.assertEqual(r["thresholds"], {"rel": 0.1, "abs_us": 5000.0, "abs_calls": 15.0, "abs_share": 0.5})
        for bad in ("rel=-1", "rel=abc", "abs_us=", "abs_calls=nan", "baseline=bad%2Fname", "baseline=" + "b" * 65):
            st, _, b = self.req("GET", "/api/v1/sessions/%d/regressions?%s" % (self.head, bad))
            self.assertError(st, b, 400, "invalid_parameter")

    def test_regressions_text_and_csv(self):
        self.put("reg-text", {"session_id": self.base})
        path = "/api/v1/sessions/%d/regressions?baseline=reg-text" % self.head
        for extra, headers in (("&format=text", None), ("", {"Accept": "text/plain"})):
            st, h, t = self.srv.get(path + extra, headers=headers)
            self.assertEqual(st, 200)
            self.assertTrue(h["Content-Type"].startswith("text/plain"))
            lines = t.decode().splitlines()
            self.assertEqual(lines[0], "regressed: yes (3 regressed, 1 improved); session %d against baseline 'reg-text' (session %d)"
                             % (self.head, self.base))
            # no steps in these traces: the gate falls back to the items and says so
            self.assertEqual(lines[1], "gate steps: not both sessions have steps (0 and 0): judged by the operator, kernel, phase and "
                                       "GPU idle movements past the thresholds, 3 regressed")
            self.assertTrue(lines[2].startswith("thresholds: rel 0.1, abs_us 100, abs_calls 10, abs_share 0.05"))
            self.assertEqual(lines[3].split(), ["direction", "kind", "category", "name", "metric", "base", "head", "delta", "relative"])
            self.assertIn("compared per call", lines[2])
            self.assertEqual(lines[4].split(), ["regressed", "operator", "cpu_op", "aten::mm", "cuda_time_per_call", "1000.000", "2000.000",
                                                "1000.000", "1.000"])
            self.assertEqual(lines[5].split(), ["regressed", "kernel", "kernel", "gemm", "cuda_time_per_call", "1000.000", "2000.000",
                                                "1000.000", "1.000"])
            self.assertEqual(len(lines), 8)
        st, h, t = self.srv.get(path + "&format=csv")
        self.assertEqual(st, 200)
        self.assertTrue(h["Content-Type"].startswith("text/csv"))
        rows = t.decode().splitlines()
        self.assertEqual(rows[0], "direction,kind,category,name,metric,unit,status,base,head,delta,relative")
        self.assertEqual(rows[2], "regressed,kernel,kernel,gemm,cuda_time_per_call,us,changed,1000.000,2000.000,1000.000,1.000")
        self.assertEqual(len(rows), 5)

    def test_per_step_window_is_not_a_regression(self):
        """Issue 19: 45 steps of a loop against 37 of the same loop moves every total by 22%;
        per step nothing moved. A kernel 25% slower per call, or twice the calls per step, is
        a regression; /compare's per_step names the same."""
        base = self.srv.upload_ok(stepped(37), "?name=steps-37")
        same = self.srv.upload_ok(stepped(45), "?name=steps-45")
        slow = self.srv.upload_ok(stepped(45, mm_kernel_us=1250.0), "?name=steps-45-slow")
        more = self.srv.upload_ok(stepped(45, adds=10), "?name=steps-45-more")
        self.put("steps-base", {"session_id": base})
        r = self.regressions(same, "?baseline=steps-base")
        self.assertEqual((r["basis"], r["base_steps"], r["head_steps"]), ("per_step", 37.0, 45.0))
        self.assertEqual((r["regressed"], [i for i in r["items"] if i["direction"] == "regressed"]), (False, []))
        r = self.regressions(slow, "?baseline=steps-base")
        got = {(i["kind"], i["name"], i["metric"]): (i["base"], i["head"]) for i in r["items"] if i["direction"] == "regressed"}
        self.assertEqual(got[("kernel", "gemm", "cuda_time_per_step")], (2000.0, 2500.0))
        self.assertEqual(got[("operator", "aten::mm", "cuda_time_per_step")], (2000.0, 2500.0))
        r = self.regressions(more, "?baseline=steps-base&abs_calls=1")
        got = {(i["name"], i["metric"]): (i["base"], i["head"]) for i in r["items"] if i["direction"] == "regressed"}
        self.assertEqual(got, {("aten::add", "calls_per_step"): (5, 10)})
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (base, same))
        self.assertEqual((c["per_step"]["basis"], c["per_step"]["regressions"]), ("per_step", []))
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (base, slow))
        self.assertIn("gemm", {i["name"] for i in c["per_step"]["regressions"]})

    def test_regressions_not_found(self):
        st, _, b = self.req("GET", "/api/v1/sessions/987654/regressions?baseline=x")
        self.assertError(st, b, 404, "not_found")
        st, _, b = self.req("GET", "/api/v1/sessions/%d/regressions?baseline=never-made" % self.head)
        self.assertError(st, b, 404, "not_found")
        self.assertIn("never-made", b["error"]["message"])

    def test_auto_pick_newest_matching_baseline(self):
        lab = {"model": "auto-model", "gpu": "H100"}
        base = self.srv.upload_ok(BASE, "?name=auto-base&" + q(lab))
        other = self.srv.upload_ok(CLEAN, "?name=auto-other&" + q(lab))
        head = self.srv.upload_ok(HEAD, "?name=auto-head&" + q(lab))
        st, _, b = self.req("GET", "/api/v1/sessions/%d/regressions" % head)
        self.assertError(st, b, 404, "not_found")
        self.assertIn("no baseline matches", b["error"]["message"])
        self.put("auto-older", {"session_id": other, "labels": {"model": "auto-model"}})
        self.put("auto-newer", {"session_id": base, "labels": lab})
        self.put("auto-wrong-gpu", {"session_id": other, "labels": {"model": "auto-model", "gpu": "A100"}})
        self.put("auto-extra-key", {"session_id": other, "labels": {"model": "auto-model", "gpu": "H100", "phase": "x"}})
        self.put("auto-self", {"session_id": head, "labels": lab})  # a session is never its own baseline
        r = self.regressions(head)
        self.assertEqual((r["baseline"], r["base_session_id"], r["auto_picked"]), ("auto-newer", base, True))
        self.assertEqual(r["baseline_labels"], lab)
        self.assertTrue(r["regressed"])
        # PUT again makes auto-older the newest.
        self.put("auto-older", {"session_id": other, "labels": {"model": "auto-model"}})
        r = self.regressions(head)
        self.assertEqual((r["baseline"], r["base_session_id"]), ("auto-older", other))
        r = self.regressions(head, "?baseline=auto-newer")
        self.assertEqual((r["baseline"], r["auto_picked"]), ("auto-newer", False))

    # ---- trends ----

    def test_trends(self):
        lab = {"suite": "trend"}
        ids = [self.srv.upload_ok(kineto(mm_kernel_us=us), "?name=t%d&%s" % (i, q(lab))) for i, us in enumerate((1000, 1500, 2000))]
        no_mm = self.srv.upload_ok(kineto(with_mm=False), "?name=t-no-mm&" + q(lab))
        self.srv.upload_ok(kineto(mm_kernel_us=9999), "?name=elsewhere&label=suite:other")
        r = self.srv.json("/api/v1/trends?label=suite:trend&operator=aten::mm")
        self.assertEqual((r["metric"], r["operator"], r["labels"]), ("cuda_time_total", "aten::mm", lab))
        self.assertEqual([(p["session_id"], p["name"], p["value"]) for p in r["points"]],
                         [(ids[0], "t0", 4000.0), (ids[1], "t1", 6000.0), (ids[2], "t2", 8000.0), (no_mm, "t-no-mm", None)])
        self.assertRegex(r["points"][0]["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        r = self.srv.json("/api/v1/trends?label=suite:trend&operator=aten::mm&limit=2&metric=calls")
        self.assertEqual([(p["session_id"], p["value"]) for p in r["points"]], [(ids[2], 4), (no_mm, None)])
        r = self.srv.json("/api/v1/trends?label=suite:trend&operator=aten::add&metric=cpu_time_total&limit=3")
        self.assertEqual([p["value"] for p in r["points"]], [25.0, 25.0, 25.0])
        r = self.srv.json("/api/v1/trends?label=suite:trend&metric=gpu_idle_fraction&operator=ignored")
        self.assertIsNone(r["operator"])
        for p, want in zip(r["points"], (0.6, 0.4, 0.2, None)):
            self.assertAlmostEqual(p["value"], want, places=9) if want is not None else self.assertIsNone(p["value"])
        r = self.srv.json("/api/v1/trends?label=suite:trend&metric=busy_fraction_of_wall")
        for p, want in zip(r["points"], (0.4, 0.6, 0.8, None)):
            self.assertAlmostEqual(p["value"], want, places=9) if want is not None else self.assertIsNone(p["value"])
        # gpu_utilization is the headline, the value GET /gpu gives it (issue 42: one name, one value)
        r = self.srv.json("/api/v1/trends?label=suite:trend&metric=gpu_utilization")
        for p in r["points"]:
            self.assertEqual(p["value"], self.srv.json("/api/v1/sessions/%d/gpu" % p["session_id"])["gpu_utilization"])
        st, h, t = self.srv.get("/api/v1/trends?label=suite:trend&operator=aten::mm&format=csv")
        self.assertEqual(t.decode().splitlines()[1].split(",")[::3], [str(ids[0]), "4000.000"])
        for bad in ("metric=bogus", "metric=calls", "limit=0", "limit=1001", "label=x"):
            st, _, b = self.req("GET", "/api/v1/trends?" + bad)
            self.assertError(st, b, 400, "invalid_parameter")

    # ---- GPU utilization and occupancy ----

    def test_gpu_utilization_and_occupancy(self):
        ph = {p["name"]: p for p in self.srv.json("/api/v1/sessions/%d/phases" % self.head)["phases"]}
        self.assertAlmostEqual(ph["decode"]["gpu_utilization"], 0.8, places=12)
        g = self.srv.json("/api/v1/sessions/%d/gpu" % self.head)
        self.assertAlmostEqual(g["busy_fraction_of_wall"], 0.8, places=12)
        self.assertAlmostEqual(g["busy_fraction_of_wall"], 1 - g["gpu_idle_fraction"], places=12)
        k = self.srv.json("/api/v1/sessions/%d/kernels" % self.head)["kernels"][0]
        # 47 regs -> 5 blocks of 256 threads per SM on an A100; 8 blocks per SM available.
        self.assertEqual((k["name"], k["est_occupancy"], k["est_sm_efficiency"], k["theoretical_occupancy"], k["occupancy_limiter"]),
                         ("gemm", 0.625, 1.0, 0.625, "registers"))
        nodev = self.srv.upload_ok(kineto(device=False))
        k = self.srv.json("/api/v1/sessions/%d/kernels" % nodev)["kernels"][0]
        self.assertEqual((k["est_occupancy"], k["est_sm_efficiency"], k["occupancy_limiter"]), (None, None, None))

    def test_occupancy_matches_kineto_on_real_traces(self):
        """Kineto writes "est. achieved occupancy %" (rounded) per launch from CUDA's own
        occupancy calculator; ours must agree for kernels launched with one configuration.
        Kineto ignores the shared-memory opt-in (it says 0 over 48 KB); those are skipped."""
        checked = 0
        for rel in ("hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
                    "hta/nccl_parser_config/nccl_data.json.gz"):
            raw = open(os.path.join(TRACES, rel), "rb").read()
            doc = json.loads(gzip.decompress(raw))
            want = {}
            for e in doc["traceEvents"]:
                a = e.get("args") or {}
                if e.get("cat") == "kernel" and "est. achieved occupancy %" in a:
                    want.setdefault(e["name"], set()).add((str(a["grid"]), str(a["block"]), a["registers per thread"],
                                                           a["shared memory"], a["est. achieved occupancy %"]))
            sid = self.srv.upload_ok(raw)
            for k in self.srv.json("/api/v1/sessions/%d/kernels?limit=10000" % sid)["kernels"]:
                cfg = want.get(k["name"])
                if not cfg or len(cfg) != 1 or list(cfg)[0][3] > 49152:
                    continue
                with self.subTest(trace=rel, kernel=k["name"][:80]):
                    self.assertIsNotNone(k["est_occupancy"])
                    self.assertLessEqual(abs(k["est_occupancy"] * 100 - list(cfg)[0][4]), 0.5)
                    checked += 1
        self.assertGreater(checked, 20)

    # ---- firstpass-upload --check-against ----

    def cli(self, *args):
        p = subprocess.run([UPLOAD, *args], capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def test_cli_exit_codes(self):
        self.assertTrue(os.access(UPLOAD, os.X_OK), UPLOAD)
        self.put("ci-main", {"session_id": self.base})
        d = tempfile.mkdtemp(prefix="fp-cli-")
        files = {}
        for name, body in (("clean", CLEAN), ("head", HEAD)):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "wb") as f:
                f.write(body)
        srv = ["--server", self.srv.base]
        rc, out, err = self.cli("--check-against", "ci-main", *srv, "--name", "ci-clean", files["clean"])
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"(?m)^Workload: ci-clean")
        self.assertEqual(len([ln for ln in out.splitlines() if ln.split(":")[0] in
                              ("Workload", "Hardware", "Top CUDA time", "Top CPU / orchestration cost", "Next experiment")]), 5)
        self.assertIn("regressed: no (0 regressed, 0 improved)", out)
        rc, out, err = self.cli("--check-against", "ci-main", *srv, files["head"])
        self.assertEqual(rc, 1, out + err)
        self.assertIn("regressed: yes (3 regressed, 1 improved)", out)
        self.assertRegex(out, r"(?m)^regressed +kernel +kernel +gemm +cuda_time_per_call +1000\.000 +2000\.000")
        rc, out, err = self.cli("--check-against", "ci-main", *srv, "--abs-us", "5000", "--abs-calls", "100", "--rel", "0.1",
                                "--label", "x:y", files["head"])
        self.assertEqual(rc, 0, out + err)  # only the idle fraction moved, and it improved
        self.assertIn("regressed: no (0 regressed, 1 improved)", out)
        for args, why in ((["--check-against", "no-such-baseline", *srv, files["clean"]], "unknown baseline"),
                          (["--check-against", "ci-main", "--server", "http://127.0.0.1:1", files["clean"]], "no server"),
                          (["--check-against", "ci-main", *srv, files["clean"], files["head"]], "two files"),
                          (["--check-against", "bad/name", *srv, files["clean"]], "bad name"),
                          (["--check-against", "ci-main", *srv, "--rel", "-1", files["clean"]], "bad threshold"),
                          (["--rel", "0.5", *srv, files["clean"]], "threshold without a check"),
                          (["--check-against", "ci-main", *srv, os.path.join(d, "missing.json")], "missing file")):
            with self.subTest(why=why):
                rc, out, err = self.cli(*args)
                self.assertEqual(rc, 2, (why, out, err))
                self.assertTrue(err.strip(), why)


def spread(durs, kernel_us=1000.0):
    """One ProfilerStep#N per duration in durs (us), back to back, each with one aten::mm
    launching a kernel of kernel_us well inside the step (the step is its host span)."""
    evs, t0 = [], 0.0
    for n, d in enumerate(durs):
        c = 5000 + n
        evs += [ev("ProfilerStep#%d" % n, "user_annotation", t0, d), ev("aten::mm", "cpu_op", t0 + 10, 100),
                ev("cudaLaunchKernel", "cuda_runtime", t0 + 11, 2, correlation=c),
                ev("gemm", "kernel", t0 + 20, kernel_us, pid=0, tid=7, correlation=c, device=0, stream=7)]
        t0 += d
    return json.dumps({"schemaVersion": 1, "traceEvents": evs, "deviceProperties": [A100]}).encode()


RESNET = os.path.join(TRACES, "kineto_tb_plugin", "samples")
NW0 = os.path.join(RESNET, "resnet50_num_workers_0", "worker0.1623143089861.pt.trace.json.gz")
NW4 = os.path.join(RESNET, "resnet50_num_workers_4", "worker0.1623212756351.pt.trace.json.gz")


@unittest.skipUnless(os.path.exists(NW0), "needs ../shared/data/traces")
class Gate(unittest.TestCase):
    """Issue 42, item 5: regressed follows the step time (and each named phase's) beyond a
    noise floor from the steps' own spread; operator movements are the explanation; gate=
    operators is the stricter gate; firstpass-upload --check-against exits by the verdict."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        with open(NW0, "rb") as f:
            cls.nw0 = cls.srv.upload_ok(f.read(), "?name=nw0")
        with open(NW4, "rb") as f:
            cls.nw4 = cls.srv.upload_ok(f.read(), "?name=nw4")
        for name, sid in (("gate-nw0", cls.nw0), ("gate-nw4", cls.nw4)):
            st, _, b = cls.srv.request("PUT", "/api/v1/baselines/" + name, json.dumps({"session_id": sid}).encode())
            assert st // 100 == 2, (st, b)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def regressions(self, sid, query):
        return self.srv.json("/api/v1/sessions/%d/regressions%s" % (sid, query))

    def test_faster_run_is_not_regressed(self):
        """num_workers=4 is 20.6% faster per step (tb-profiler: 141.068 ms against 177.592 ms);
        its memcpy per step rose, and that is listed, not judged."""
        r = self.regressions(self.nw4, "?baseline=gate-nw0")
        self.assertFalse(r["regressed"])  # main: true (memcpy per step rose)
        v = r["verdict"]
        self.assertEqual((r["regressed"], r["gate"], v["gate"], v["steps"]["direction"]), (False, "steps", "steps", "improved"), v["why"])
        self.assertEqual((v["steps"]["base"]["count"], v["steps"]["head"]["count"]), (6, 6))
        self.assertAlmostEqual(v["steps"]["base"]["mean_us"], 177592.1667, places=3)
        self.assertAlmostEqual(v["steps"]["head"]["mean_us"], 141068.0, places=3)
        self.assertEqual([p for p in v["phases"] if p["direction"] == "regressed"], [])
        # the explanation is still there: operators that moved the wrong way, memcpy among them
        moved = {(i["kind"], i["name"]) for i in r["items"] if i["direction"] == "regressed"}
        self.assertIn(("operator", "aten::copy_"), moved)
        self.assertGreater(r["counts"]["regressed"], 0)
        self.assertIn("improved", v["why"])

    def test_slower_run_is_regressed(self):
        r = self.regressions(self.nw0, "?baseline=gate-nw4")
        v = r["verdict"]
        self.assertTrue(r["regressed"], v["why"])
        self.assertEqual(v["steps"]["direction"], "regressed")
        self.assertGreater(v["steps"]["delta_us"], v["noise_us"])
        # the DataLoader phase the single process adds, 69.3 ms a step, is named
        self.assertEqual(v["phases"][0]["name"], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
        self.assertEqual((v["phases"][0]["status"], v["phases"][0]["direction"]), ("appeared", "regressed"))
        self.assertAlmostEqual(v["phases"][0]["head_per_step_us"], 415791.0 / 6, places=3)

    def test_operators_gate_is_stricter(self):
        r = self.regressions(self.nw4, "?baseline=gate-nw0&gate=operators")
        self.assertEqual((r["regressed"], r["gate"]), (True, "operators"), r["verdict"]["why"])
        self.assertEqual(r["verdict"]["steps"]["direction"], "improved")
        st, _, b = self.srv.request("GET", "/api/v1/sessions/%d/regressions?baseline=gate-nw0&gate=strict" % self.nw4)
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(b)["error"]["code"], "invalid_parameter")

    def test_noise_floor_from_the_steps_spread(self):
        """4 steps of 10.0, 10.2, 9.8, 10.0 ms (s = 163.3 us) against the same +x: the floor is
        2 standard errors of the difference, sqrt(s^2/4 + s^2/4) = 115.5 us, so 231 us."""
        durs = [10000.0, 10200.0, 9800.0, 10000.0]
        base = self.srv.upload_ok(spread(durs), "?name=spread-base")
        self.srv.request("PUT", "/api/v1/baselines/spread-base", json.dumps({"session_id": base}).encode())
        sd = (sum((d - 10000.0) ** 2 for d in durs) / 3) ** 0.5
        floor = 2 * (sd * sd / 4 + sd * sd / 4) ** 0.5
        for shift, want in ((200.0, "unchanged"), (300.0, "regressed"), (-300.0, "improved")):
            with self.subTest(shift=shift):
                head = self.srv.upload_ok(spread([d + shift for d in durs]), "?name=spread-%d" % shift)
                r = self.regressions(head, "?baseline=spread-base")
                v = r["verdict"]
                self.assertAlmostEqual(v["noise_us"], floor, places=6)
                self.assertAlmostEqual(v["steps"]["base"]["stdev_us"], sd, places=6)
                self.assertAlmostEqual(v["steps"]["delta_us"], shift, places=6)
                self.assertEqual((v["steps"]["direction"], r["regressed"]), (want, want == "regressed"), v["why"])
        # abs_us is the least floor: steps with no spread are judged by it alone
        flat = self.srv.upload_ok(spread([10000.0] * 4), "?name=spread-flat")
        self.srv.request("PUT", "/api/v1/baselines/spread-flat", json.dumps({"session_id": flat}).encode())
        head = self.srv.upload_ok(spread([10150.0] * 4), "?name=spread-flat-150")
        r = self.regressions(head, "?baseline=spread-flat")
        self.assertEqual((r["verdict"]["noise_us"], r["regressed"]), (100.0, True))
        r = self.regressions(head, "?baseline=spread-flat&abs_us=200")
        self.assertEqual((r["verdict"]["noise_us"], r["regressed"]), (200.0, False))

    def test_compare_carries_the_verdict(self):
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.nw0, self.nw4))
        self.assertEqual(c["per_step"]["verdict"]["steps"]["direction"], "improved")
        self.assertFalse(c["per_step"]["verdict"]["regressed"])

    def test_check_against_exits_by_the_verdict(self):
        def cli(*args):
            p = subprocess.run([UPLOAD, "--server", self.srv.base, *args], capture_output=True, text=True, timeout=300)
            return p.returncode, p.stdout + p.stderr
        rc, out = cli("--check-against", "gate-nw0", "--name", "ci-nw4", NW4)
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"(?m)^regressed: no \(\d+ regressed, \d+ improved\)")
        self.assertRegex(out, r"(?m)^gate steps: step mean 141\.068ms against 177\.592ms \(-20\.6%\), beyond the noise floor")
        rc, out = cli("--check-against", "gate-nw4", "--name", "ci-nw0", NW0)
        self.assertEqual(rc, 1, out)
        rc, out = cli("--check-against", "gate-nw0", "--gate", "operators", "--name", "ci-nw4-strict", NW4)
        self.assertEqual(rc, 1, out)
        rc, out = cli("--check-against", "gate-nw0", "--gate", "everything", NW4)
        self.assertEqual(rc, 2, out)


V1_SESSIONS = """CREATE TABLE sessions (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL, created_at INTEGER NOT NULL,
  start_us REAL NOT NULL, end_us REAL NOT NULL, event_count INTEGER NOT NULL,
  hardware TEXT NOT NULL DEFAULT '', bytes_in INTEGER NOT NULL DEFAULT 0,
  meta TEXT NOT NULL DEFAULT '{}', summary TEXT NOT NULL DEFAULT '{}')"""

# Version 3's tables of texts (schema.sql before version 4), and the tables of ids after.
V3_TABLES = {
    "operators": """CREATE TABLE operators (
  session_id    INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  grouping      INTEGER NOT NULL,
  name          TEXT NOT NULL,
  kind          TEXT NOT NULL,
  input_shapes  TEXT NOT NULL DEFAULT '',
  calls         INTEGER NOT NULL,
  cpu_total     REAL NOT NULL,
  self_cpu      REAL NOT NULL,
  cuda_total    REAL NOT NULL,
  self_cuda     REAL NOT NULL,
  cpu_mem       INTEGER NOT NULL,
  self_cpu_mem  INTEGER NOT NULL,
  cuda_mem      INTEGER NOT NULL,
  self_cuda_mem INTEGER NOT NULL
)""",
    "kernels": """CREATE TABLE kernels (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name       TEXT NOT NULL,
  kind       TEXT NOT NULL,
  calls      INTEGER NOT NULL,
  total_us   REAL NOT NULL,
  min_us     REAL NOT NULL,
  max_us     REAL NOT NULL,
  grid       TEXT,
  block      TEXT,
  regs       INTEGER,
  smem       INTEGER
)""",
    "phases": """CREATE TABLE phases (
  session_id     INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name           TEXT NOT NULL,
  kind           TEXT NOT NULL,
  count          INTEGER NOT NULL,
  total_us       REAL NOT NULL,
  gpu_busy_us    REAL NOT NULL,
  kernels        INTEGER NOT NULL,
  kernel_us      REAL NOT NULL,
  first_ts       REAL NOT NULL
)""",
}
ROWS = {"operators": "operator_rows", "kernels": "kernel_rows", "phases": "phase_rows"}


@sqlite_only
class Migration(unittest.TestCase):
    """A version-1 database (sessions without AUTOINCREMENT, no baselines tables) is brought
    to the newest version with the same DDL a new database gets from schema.sql, keeping every
    row. (Version 3 -> 4, texts by id: test_migration_3_to_4 and tests/replies/snapshot.py migrate.)"""

    TABLES = ("agents", "agents_last_seen", "baseline_labels", "baselines", "baselines_session", "captures", "captures_active", "captures_agent",
              "captures_target", "event_chunks", "event_chunks_track", "kernel_rows", "kernels", "kernels_session",
              "operator_rows", "operators", "operators_session", "phase_rows", "phases", "phases_session", "reanalysis", "replay",
              "sessions", "sessions_analysis", "sessions_created", "sessions_idempotency", "targets", "targets_agent", "upload_claims")
    NEWEST = SQLITE_NEWEST

    def schema(self, db):
        c = sqlite3.connect(db)
        try:
            v = c.execute("PRAGMA user_version").fetchone()[0]
            sql = c.execute("SELECT name, sql FROM sqlite_master WHERE name IN (%s) ORDER BY name"
                            % ",".join("?" * len(self.TABLES)), self.TABLES).fetchall()
            return v, sql
        finally:
            c.close()

    V10_UNDO = SQLITE_UNDO_NEWEST

    def make_v9(self, db):
        """Turns a new database back into what version 9 had: no Idempotency-Key, the step
        breakdown inside the report, no stored step numbers, agents without an instance."""
        c = sqlite3.connect(db)
        c.executescript(self.V10_UNDO + "PRAGMA user_version = 9;")
        c.close()

    def test_migration_9_to_10(self):
        """Sessions stored before version 10 keep their breakdown in the report: /steps pages it,
        and the regression gate and compare read their step statistics from it, as before."""
        srv = Server()
        db = srv.db
        a = srv.upload_ok(stepped(4), "?name=a")
        b = srv.upload_ok(stepped(6, mm_kernel_us=1500.0), "?name=b")
        st, _, body = srv.request("PUT", "/api/v1/baselines/m", json.dumps({"session_id": a}).encode())
        self.assertEqual(st, 201, body)
        paths = ["/api/v1/sessions/%d/steps" % b, "/api/v1/sessions/%d/steps?offset=2&limit=3" % b,
                 "/api/v1/sessions/%d/regressions?baseline=m" % b, "/api/v1/compare?base=%d&head=%d" % (a, b),
                 "/api/v1/sessions/%d/report" % b, "/api/v1/sessions/%d/suspects" % b]
        before = [srv.json(p) for p in paths]
        srv.stop()
        self.make_v9(db)
        self.assertEqual(self.schema(db)[0], 9)
        c = sqlite3.connect(db)
        self.assertIn('"breakdown"', c.execute("SELECT report FROM analysis WHERE session_id = ?", (b,)).fetchone()[0])
        c.close()
        srv2 = Server(db=db)
        try:
            after = [srv2.json(p) for p in paths]
        finally:
            srv2.stop()
        for p, x, y in zip(paths, before, after):
            self.assertEqual(x, y, p)
        self.assertEqual(len(after[0]["steps"]), 6)
        self.assertEqual([s["name"] for s in after[1]["steps"]], ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"])
        self.assertEqual(after[2]["verdict"]["steps"]["head"]["count"], 6)
        self.assertEqual(self.schema(db)[0], self.NEWEST)

    def make_v3(self, db, drop_string=None):
        """Turns a new database back into what version 3 had: operators, kernels and phases
        as tables holding their texts (foreign keys are off here). drop_string: a text to
        delete from strings, as a database whose strings missed a name would be."""
        c = sqlite3.connect(db)
        script = self.V10_UNDO
        for t, ddl in V3_TABLES.items():
            cols = ", ".join(ln.split()[0] for ln in ddl.splitlines()[1:] if ln.strip() and not ln.startswith(")"))
            script += ("CREATE TABLE %s_v3 AS SELECT %s FROM %s;" % (t, cols, t) + "DROP VIEW %s; DROP TABLE %s;" % (t, ROWS[t])
                       + ddl + ";" + "INSERT INTO %s SELECT * FROM %s_v3; DROP TABLE %s_v3;" % (t, t, t))
        # version 9's re-analysis out again
        script += ("DROP TABLE replay; DROP TABLE reanalysis; DROP INDEX sessions_analysis;"
                   "ALTER TABLE sessions DROP COLUMN analysis_version;")
        # version 8's serving agents, targets and captures out again
        script += "DROP TABLE captures; DROP TABLE targets; DROP TABLE agents;"
        # version 7's efficiency document out again (the kernels' means went with kernel_rows)
        script += "ALTER TABLE analysis DROP COLUMN effic;"
        # version 5's chunk counts out again
        script += ("DROP INDEX event_chunks_track; ALTER TABLE event_chunks DROP COLUMN drawn; ALTER TABLE event_chunks DROP COLUMN gpu;"
                   "CREATE INDEX event_chunks_track ON event_chunks(session_id, track, min_ts);")
        script += ("CREATE INDEX operators_session ON operators(session_id, grouping, cuda_total DESC);"
                   "CREATE INDEX kernels_session ON kernels(session_id, total_us DESC);"
                   "CREATE INDEX phases_session ON phases(session_id);PRAGMA user_version = 3;")
        c.executescript(script)
        if drop_string:
            c.execute("DELETE FROM strings WHERE s = ?", (drop_string,))
            c.commit()
        c.close()

    def make_v1(self, db):
        """Turns a new database back into what version 1 had (foreign keys are off here)."""
        self.make_v3(db)
        c = sqlite3.connect(db)
        # Renaming sessions itself would rewrite the children's REFERENCES: build, drop, rename.
        c.executescript("DROP TABLE baseline_labels; DROP TABLE baselines;" + V1_SESSIONS.replace("sessions", "sessions_v1") + ";"
                        "INSERT INTO sessions_v1 SELECT * FROM sessions; DROP TABLE sessions;"
                        "ALTER TABLE sessions_v1 RENAME TO sessions; DELETE FROM sqlite_sequence;"
                        "CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);"
                        "PRAGMA user_version = 1;")
        c.close()

    def test_migration_3_to_4(self):
        """Operators, kernels and phases of version 3 (texts in the rows) become ids of strings;
        every reply reads the same, a text missing from strings included (added with a new id)."""
        srv = Server()
        db = srv.db
        a = srv.upload_ok(BASE, "?name=a")
        b = srv.upload_ok(stepped(3), "?name=b")
        shaped = json.dumps({"traceEvents": [ev("aten::mm", "cpu_op", 0, 10, **{"Input Dims": [[2, 3], [3, 4]]}),
                                             ev("aten::mm", "cpu_op", 20, 10, **{"Input Dims": [[5, 3], [3, 4]]})]}).encode()
        c = srv.upload_ok(shaped, "?name=c")
        paths = ["/api/v1/sessions/%d%s" % (i, p) for i in (a, b, c)
                 for p in ("/operators", "/operators?group_by=input_shape", "/kernels", "/phases", "/report")]
        paths += ["/api/v1/compare?base=%d&head=%d" % (a, b), "/api/v1/trends?operator=aten::mm"]
        before = [srv.json(p) for p in paths]
        srv.stop()
        self.make_v3(db, drop_string="gemm")
        self.assertEqual(self.schema(db)[0], 3)
        srv2 = Server(db=db)
        try:
            after = [srv2.json(p) for p in paths]
        finally:
            srv2.stop()
        for p, x, y in zip(paths, before, after):
            if "compare" in p:  # sessions migrated from version 3 say they were analysed by version 0 (issue 52)
                for r in (x, y):
                    r.pop("analysis_versions"), r["base"].pop("analysis_version"), r["head"].pop("analysis_version")
            self.assertEqual(x, y, p)
        self.assertEqual(self.schema(db)[0], self.NEWEST)
        con = sqlite3.connect(db)
        try:
            # every text once per session: no row holds a text, and strings has no duplicate
            dup = con.execute("SELECT count(*) FROM (SELECT session_id, s FROM strings GROUP BY 1, 2 HAVING count(*) > 1)").fetchone()[0]
            gemm = con.execute("SELECT count(*) FROM strings WHERE s = 'gemm'").fetchone()[0]
        finally:
            con.close()
        self.assertEqual((dup, gemm), (0, 2))

    def test_migration_1_to_newest(self):
        srv = Server()
        db = srv.db
        sid = srv.upload_ok(BASE, "?name=m&label=k:v")
        ops = srv.json("/api/v1/sessions/%d/operators" % sid)
        srv.stop()
        fresh_version, fresh = self.schema(db)
        self.assertEqual(fresh_version, self.NEWEST)
        self.assertEqual([n for n, _ in fresh], list(self.TABLES))
        self.assertIn("AUTOINCREMENT", dict(fresh)["sessions"])
        self.make_v1(db)
        v, old = self.schema(db)
        self.assertEqual((v, [n for n, _ in old]), (1, ["event_chunks", "event_chunks_track", "kernels", "kernels_session", "operators", "operators_session", "phases",
                                                      "phases_session", "sessions", "sessions_created"]))
        srv2 = Server("--db", db)  # the later --db wins
        try:
            # The rebuild of sessions cascaded nothing: the session and its rows are all there.
            self.assertEqual(srv2.json("/api/v1/sessions/%d/operators" % sid), ops)
            self.assertEqual(srv2.json("/api/v1/sessions/%d" % sid)["labels"], {"k": "v"})
            st, _, b = srv2.request("PUT", "/api/v1/baselines/after-migration", json.dumps({"session_id": sid}).encode())
            self.assertEqual(st, 201, b)
            self.assertEqual(json.loads(b)["labels"], {"k": "v"})
            # Ids are not reused any more: delete the newest, the next upload gets a new id.
            n = srv2.upload_ok(BASE)
            self.assertEqual(srv2.request("DELETE", "/api/v1/sessions/%d" % n)[0], 204)
            self.assertGreater(srv2.upload_ok(BASE), n)
        finally:
            srv2.stop()
        version, migrated = self.schema(db)
        self.assertEqual(version, self.NEWEST)
        # Same DDL modulo whitespace, comments and the quotes ALTER TABLE RENAME adds (ADD
        # COLUMN appends ", col TYPE" after the last column's comment: "x INTEGER , col").
        norm = lambda s: None if s is None else " ".join(
            " ".join(line.split("--")[0] for line in s.replace('"', "").splitlines()).replace("( ", "(").split()).replace(" ,", ",").replace(" )", ")")
        self.assertEqual([(n, norm(s)) for n, s in migrated], [(n, norm(s)) for n, s in fresh])


if __name__ == "__main__":
    unittest.main()
