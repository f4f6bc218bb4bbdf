"""The REST API as a client sees it: bad input, limits, errors, listing, edits, compare,
and the three smells on synthetic traces with exact expected numbers."""
import gzip
import json
import os
import re
import unittest
import urllib.parse

from fpserver import Server, TRACES

SMALL = os.path.join(TRACES, "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz")


def ev(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def trace(events, **top):
    d = {"schemaVersion": 1, "traceEvents": events}
    d.update(top)
    return json.dumps(d).encode()


def launch_pair(op, kernel, ts, op_dur, k_dur, corr, kts=None, stream=7):
    """An op with one cudaLaunchKernel inside and its kernel on the GPU."""
    return [ev(op, "cpu_op", ts, op_dur), ev("cudaLaunchKernel", "cuda_runtime", ts + 1, 2, correlation=corr),
            ev(kernel, "kernel", ts + 3 if kts is None else kts, k_dur, pid=0, tid=stream, correlation=corr, device=0, stream=stream)]


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-upload", "2M")
        with open(SMALL, "rb") as f:
            cls.small = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def count(self):
        return len(self.srv.json("/api/v1/sessions?limit=1000")["sessions"])

    def assertError(self, st, body, status, code=None):
        self.assertEqual(st, status, body)
        self.assertIn("error", body)
        self.assertTrue(body["error"]["message"])
        if code:
            self.assertEqual(body["error"]["code"], code)

    def test_upload_reply_and_location(self):
        st, h, b = self.srv.upload(self.small, "?name=small&label=model:add&label=gpu:A100")
        self.assertEqual(st, 201)
        self.assertEqual(h["Location"], "/api/v1/sessions/%d" % b["id"])
        self.assertEqual(b["url"], h["Location"])
        s = self.srv.json(b["url"])
        self.assertEqual(s["name"], "small")
        self.assertEqual(s["labels"], {"model": "add", "gpu": "A100"})
        self.assertEqual(s["source"], "kineto")
        self.assertEqual(s["hardware"], "NVIDIA A100-PG509-200 x1 (of 8 on the node)")  # one GPU of eight used (issue 51)
        # Content-Encoding: gzip on a plain body, and on the gzip file itself.
        plain = gzip.decompress(self.small)
        st, _, b2 = self.srv.upload(gzip.compress(plain), headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 201, b2)
        st, _, b3 = self.srv.upload(plain)
        self.assertEqual(st, 201)
        a = self.srv.json("/api/v1/sessions/%d/operators" % b2["id"])["operators"]
        c = self.srv.json("/api/v1/sessions/%d/operators" % b3["id"])["operators"]
        self.assertEqual(a, c)

    def test_bad_input_nothing_stored(self):
        before = self.count()
        plain = gzip.decompress(self.small)
        cases = [
            (b'{"traceEvents":[{"ph":"X"', 400, "invalid_json", {}),
            (b"not json at all", 400, "invalid_json", {}),
            (self.small[: len(self.small) // 2], 400, "invalid_json", {}),  # truncated gzip
            (b'{"traceEvents":[{"ph":"X","name":"a","ts":"soon","dur":1}]}', 400, "invalid_trace", {}),
            (b'{"traceEvents":[{"ph":"X","name":["a"],"ts":1,"dur":1}]}', 400, "invalid_trace", {}),
            (b'{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":-5}]}', 400, "invalid_trace", {}),
            (b'{"traceEvents":"no"}', 422, "not_a_trace", {}),
            (b'{"foo":1}', 422, "not_a_trace", {}),
            (b"", 422, "not_a_trace", {}),
            (plain, 415, "unsupported_media_type", {"Content-Encoding": "br"}),
            (b"x" * (3 << 20), 413, "too_large", {}),
            (self.small, 400, "invalid_parameter", {"X-Ignore": "1", "__query": "?label=nocolon"}),
        ]
        for body, status, code, hdr in cases:
            with self.subTest(status=status, code=code, body=body[:40]):
                q = hdr.pop("__query", "")
                st, _, b = self.srv.upload(body, q, headers=hdr)
                self.assertError(st, b, status, code)
                self.assertTrue(self.srv.alive())
        self.assertEqual(self.count(), before)

    def test_upload_as_a_form(self):
        """curl -F file=@trace.json.gz: the form's one file part is the trace, read as it
        arrives; anything else in the form is refused with a message, and nothing is stored.
        Before form.c the form's bytes went to the JSON parser: 400 invalid_json, 'malformed
        number' (the boundary's dashes)."""
        def form(*parts, boundary="fpXbound", close=True):
            out = b""
            for name, filename, data in parts:
                fn = '; filename="%s"' % filename if filename else ""
                out += b'--%s\r\nContent-Disposition: form-data; name="%s"%s\r\n' % (
                    boundary.encode(), name.encode("utf-8", "surrogateescape"), fn.encode())
                out += b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
            return out + (b"--%s--\r\n" % boundary.encode() if close else b"")

        def post(body, query="", ctype="multipart/form-data; boundary=fpXbound"):
            return self.srv.upload(body, query, headers={"Content-Type": ctype})

        raw = self.srv.upload_ok(self.small)
        st, _, b = post(form(("file", "t.json.gz", self.small)), "?name=form&label=via:curl-F")
        self.assertEqual(st, 201, b)
        s = self.srv.json(b["url"])
        self.assertEqual((s["name"], s["labels"]), ("form", {"via": "curl-F"}))
        ops = lambda sid: self.srv.json("/api/v1/sessions/%d/operators" % sid)["operators"]
        self.assertEqual(ops(b["id"]), ops(raw))
        st, _, b = post(form(("trace", None, gzip.decompress(self.small))), ctype='multipart/form-data; boundary="fpXbound"')
        self.assertEqual(st, 201, b)  # a part named trace, no filename, a quoted boundary, plain JSON
        self.assertEqual(ops(b["id"]), ops(raw))
        self.assertEqual(self.srv.json(b["url"])["name"], "session %d" % b["id"])
        # Without ?name= the filename names the session (as the dashboard's upload does), cut
        # at 512 bytes on a character boundary; a name in the trace itself wins over it.
        st, _, b = post(form(("file", "llama-decode.json.gz", self.small)))
        self.assertEqual(self.srv.json(b["url"])["name"], "llama-decode.json.gz")
        st, _, b = post(form(("file", "é" * 300, self.small)))
        self.assertEqual(self.srv.json(b["url"])["name"], "é" * 256)
        named = trace([ev("aten::mm", "cpu_op", 1, 5)], firstpass={"name": "from-the-trace"})
        st, _, b = post(form(("file", "t.json", named)))
        self.assertEqual(self.srv.json(b["url"])["name"], "from-the-trace")

        before = self.count()
        cases = [
            (form(("file", "a.json.gz", self.small), ("file", "b.json.gz", self.small)), None, "second file part ('b.json.gz')"),
            (form(("name", None, b"decode"), ("file", "a.json.gz", self.small)), None, "form field 'name' is not read"),
            (form(("file", "a.json.gz", self.small), ("label", None, b"a:b")), None, "form field 'label' is not read"),
            (form(("file", "a.json.gz", self.small), close=False), None, "before its closing boundary"),
            (b"no parts at all", None, "no file part"),
            # A name that is not UTF-8 in the message: 240f4e7 sent 400 with an empty body.
            (form(("\udcff", None, b"x")), None, "form field '(not UTF-8)' is not read"),
            (form(("file", "a.json.gz", self.small)), "multipart/form-data", "needs a boundary="),
        ]
        for body, ctype, msg in cases:
            with self.subTest(msg=msg):
                st, _, b = post(body, ctype=ctype) if ctype else post(body)
                self.assertError(st, b, 400, "bad_request")
                self.assertIn(msg, b["error"]["message"])
        st, _, b = post(form(("file", "a.json", b'{"traceEvents":[{"ph":"X"')))
        self.assertError(st, b, 400, "invalid_json")  # the file part's own errors are the importer's
        st, _, b = post(form(("file", "big.json", b"x" * (3 << 20))))
        self.assertError(st, b, 413, "too_large")  # --max-upload holds for a form too
        self.assertEqual(self.count(), before)
        self.assertTrue(self.srv.alive())

    def test_errors_404_405_400(self):
        st, _, b = self.srv.get("/api/v1/sessions/999999")
        self.assertError(st, json.loads(b), 404, "not_found")
        st, _, b = self.srv.get("/api/v1/sessions/999999/operators")
        self.assertError(st, json.loads(b), 404)
        st, h, b = self.srv.request("DELETE", "/api/v1/compare")
        self.assertError(st, json.loads(b), 405, "method_not_allowed")
        self.assertEqual(h["Allow"], "GET")
        st, h, b = self.srv.request("PUT", "/api/v1/sessions")
        self.assertEqual(st, 405)
        self.assertEqual(h["Allow"], "GET, POST")
        sid = self.srv.upload_ok(self.small)
        for q in ("sort=bogus", "limit=0", "limit=abc", "group_by=color"):
            st, _, b = self.srv.get("/api/v1/sessions/%d/operators?%s" % (sid, q))
            self.assertError(st, json.loads(b), 400, "invalid_parameter")
        st, _, b = self.srv.get("/api/v1/nothing-here")
        self.assertError(st, json.loads(b), 404)
        for p in ("/../Makefile", "/%2e%2e/Makefile", "/..%2fMakefile"):
            st, _, b = self.srv.get(p)
            self.assertEqual(st, 404, p)

    def test_list_filter_pagination_delete(self):
        ids = [self.srv.upload_ok(self.small, "?name=pg&label=run:%d&label=team:x" % i) for i in range(5)]
        got, cursor = [], None
        while True:
            page = self.srv.json("/api/v1/sessions?label=team:x&name=pg&limit=2" + ("&next=" + cursor if cursor else ""))
            got += [s["id"] for s in page["sessions"]]
            cursor = page["next"]
            if not cursor:
                break
        self.assertEqual(got, sorted(ids, reverse=True))  # newest first, each once
        one = self.srv.json("/api/v1/sessions?label=team:x&label=run:3")["sessions"]
        self.assertEqual([s["id"] for s in one], [ids[3]])
        st, _, _ = self.srv.request("DELETE", "/api/v1/sessions/%d" % ids[0])
        self.assertEqual(st, 204)
        self.assertEqual(self.srv.get("/api/v1/sessions/%d" % ids[0])[0], 404)
        self.assertEqual(self.srv.request("DELETE", "/api/v1/sessions/%d" % ids[0])[0], 404)

    def test_list_labels_of_every_row(self):
        """Each row of a page carries its own labels, in key order: the list fetches them for
        the whole page in one query and pairs them back by id, so pages cut at every row,
        sessions without labels between labelled ones, and label filters must all agree with
        each session's own reply."""
        sets = [{}, {"model": "llama", "gpu": "a100"}, {"model": "bert"}, {}, {"z": "\u00e9t\u00e9", "a": "1", "m": "x y"},
                {"pin": "true"}, {"model": "llama"}]
        want = {}
        for labels in sets:
            q = "?name=lbl" + "".join("&label=%s:%s" % (urllib.parse.quote(k), urllib.parse.quote(v)) for k, v in labels.items())
            want[self.srv.upload_ok(self.small, q)] = labels
        for limit in (1, 2, 3, 1000):
            for extra, expect in (("", want), ("&label=model:llama", {i: l for i, l in want.items() if l.get("model") == "llama"})):
                got, cursor = {}, None
                while True:
                    page = self.srv.json("/api/v1/sessions?name=lbl&limit=%d%s%s" % (limit, extra, "&next=" + cursor if cursor else ""))
                    for s in page["sessions"]:
                        self.assertEqual(list(s["labels"]), sorted(s["labels"]), s["id"])
                        got[s["id"]] = s["labels"]
                    cursor = page["next"]
                    if not cursor:
                        break
                self.assertEqual(got, expect, (limit, extra))
        for sid, labels in want.items():
            self.assertEqual(self.srv.json("/api/v1/sessions/%d" % sid)["labels"], labels)

    def test_report_edit_persists_and_text(self):
        sid = self.srv.upload_ok(self.small)
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid,
                                    json.dumps({"lines": {"next_experiment": "pin memory"}}).encode())
        self.assertEqual(st, 200, b)
        r = self.srv.json("/api/v1/sessions/%d/report" % sid)
        self.assertEqual(r["lines"]["next_experiment"], "pin memory")
        self.assertEqual(r["edited"], ["next_experiment"])
        self.assertNotEqual(r["draft"]["next_experiment"], "pin memory")
        st, h, t = self.srv.get("/api/v1/sessions/%d/report" % sid, {"Accept": "text/plain"})
        lines = t.decode().splitlines()
        self.assertEqual(len(lines), 5)
        self.assertEqual(lines[4], "Next experiment: pin memory")
        self.assertTrue(lines[0].startswith("Workload: "))
        # null restores the draft; a bad key or type is 422; a bad body 400.
        self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid, b'{"lines":{"next_experiment":null}}')
        self.assertEqual(self.srv.json("/api/v1/sessions/%d/report" % sid)["edited"], [])
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid, b'{"lines":{"colour":"x"}}')
        self.assertError(st, json.loads(b), 422)
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid, b'{"lines":')
        self.assertError(st, json.loads(b), 400)
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/999999/report", b'{"lines":{}}')
        self.assertError(st, json.loads(b), 404)

    def test_csv_and_text(self):
        sid = self.srv.upload_ok(self.small)
        st, h, b = self.srv.get("/api/v1/sessions/%d/operators?format=csv&limit=5" % sid)
        self.assertEqual(st, 200)
        self.assertTrue(h["Content-Type"].startswith("text/csv"))
        rows = b.decode().splitlines()
        self.assertTrue(rows[0].startswith("name,kind,"))
        self.assertEqual(len(rows), 6)
        st, _, b = self.srv.get("/api/v1/sessions/%d/kernels?format=text" % sid)
        self.assertEqual(st, 200)
        self.assertIn("calls", b.decode().splitlines()[0])

    def test_compare(self):
        base = self.srv.upload_ok(open(os.path.join(TRACES, "hta/trace_compare/base/base.json.gz"), "rb").read())
        head = self.srv.upload_ok(open(os.path.join(TRACES, "hta/trace_compare/test/test.json.gz"), "rb").read())
        c = self.srv.json("/api/v1/compare?base=%d&head=%d" % (base, head))
        ops = c["operators"]
        self.assertTrue(ops)
        deltas = [abs(o["delta"]["cuda_time_total_us"]) for o in ops]
        self.assertEqual(deltas, sorted(deltas, reverse=True)[: len(deltas)] if all(d > 0 for d in deltas) else deltas)
        for o in ops:
            b, h = o["base"], o["head"]
            if o["status"] == "changed":
                self.assertAlmostEqual(o["delta"]["cuda_time_total_us"], h["cuda_time_total_us"] - b["cuda_time_total_us"])
            else:
                self.assertIn(o["status"], ("appeared", "disappeared"))
        st, _, b = self.srv.get("/api/v1/compare?base=%d&head=999999" % base)
        self.assertEqual(st, 404)
        st, _, b = self.srv.get("/api/v1/compare?base=%d" % base)
        self.assertEqual(st, 400)

    def test_compare_lists_equal_phases_as_phases_does(self):
        """Rows that changed alike (most: unchanged ones) keep the order the compare read
        them in. Phases were read without ORDER BY: SQLite gave insertion order, PostgreSQL
        its plan's (a nested loop over the names listed them in the strings' order). Both
        list them as /phases does now: total_us DESC, then name."""
        evs, ts = [], 0
        for name, dur in (("sample", 100), ("decode_step", 200), ("prefill", 300)):  # the smallest first
            evs.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})
            evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 1, "dur": dur - 2})
            ts += dur + 10
        data = json.dumps({"traceEvents": evs}).encode()
        base, head = self.srv.upload_ok(data), self.srv.upload_ok(data)
        want = [p["name"] for p in self.srv.json("/api/v1/sessions/%d/phases" % base)["phases"]]
        self.assertEqual(want, ["prefill", "decode_step", "sample"])
        got = self.srv.json("/api/v1/compare?base=%d&head=%d" % (base, head))["phases"]
        self.assertEqual([r["name"] for r in got], want)
        self.assertEqual({r["status"] for r in got}, {"changed"})

    # ---- smells, on synthetic traces with known answers ----

    def smells(self, data):
        sid = self.srv.upload_ok(data)
        rep = self.srv.json("/api/v1/sessions/%d/report" % sid)
        return sid, {s["id"]: s for s in rep["smells"]}, rep

    def test_smell_gemm_owns_the_run(self):
        evs = launch_pair("aten::mm", "ampere_sgemm_128x64", 0, 100, 800, 1)
        evs += launch_pair("aten::add", "elementwise_add", 2000, 50, 100, 2)
        evs += launch_pair("aten::relu", "elementwise_relu", 3000, 50, 100, 3)
        sid, sm, rep = self.smells(trace(evs))
        own = sm["one_operator_owns_the_run"]
        # GEMM owning the GPU time is the model's work, not a suspect (issue 19: a healthy
        # transformer's GEMMs were a warning); the evidence still says who holds it
        self.assertFalse(own["fired"])
        self.assertEqual(own["evidence"]["operator"], "aten::mm")
        self.assertAlmostEqual(own["evidence"]["share"], 0.8)
        self.assertEqual(own["evidence"]["class"], "compute")
        self.assertFalse(sm["cheap_operator_called_often"]["fired"])
        self.assertIn("aten::mm 80.0%", rep["lines"]["top_cuda_time"])
        sus = self.srv.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
        self.assertNotIn("compute_bound_op", [x["category"] for x in sus])
        # ... but it is the target: its next question, compute- or memory-bound, is asked by
        # the last suspect, dominant_op (the report's Next experiment when nothing waits: issue 41)
        self.assertEqual((sus[-1]["category"], sus[-1]["culprit"]), ("dominant_op", "aten::mm"))
        self.assertIn("aten::mm owns the GPU", sus[-1]["next_experiment"])
        self.assertRegex(sus[-1]["next_experiment"], "compute-bound or memory-bound")
        self.assertNotIn("compute)", rep["lines"]["top_cuda_time"])  # never a bound guessed from a name

    def test_cuda_graph_replayed_outside_any_op(self):
        # A decode step replayed as a CUDA graph, as a serving loop calls graph.replay(): one
        # cudaGraphLaunch under no aten op, whose id is on each of the graph's 30 kernels
        # (CUPTI), then an .item() whose 8-byte copy is the only GPU time under an op. The
        # report named aten::_local_scalar_dense (0.2 % of the GPU time) as the top, and each
        # kernel counted as a launch delayed by the graph's run so far (mean ~220 us).
        evs = []
        for step in range(4):
            t, c = step * 1000, 10 * step + 1
            evs.append(ev("cudaGraphLaunch", "cuda_runtime", t, 8, correlation=c))
            k = t + 12
            for i in range(30):
                name, d = [("sm90_xmma_gemm_f16f16_f16f32", 20), ("vectorized_elementwise_kernel", 4)][i % 2]
                evs.append(ev(name, "kernel", k, d, pid=0, tid=7, correlation=c, device=0, stream=7))
                k += d + 1
            evs.append(ev("aten::_local_scalar_dense", "cpu_op", t + 10, k - t + 5))
            evs.append(ev("cudaMemcpyAsync", "cuda_runtime", t + 11, k - t + 3, correlation=c + 1))
            evs.append(ev("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", k, 2, pid=0, tid=7, correlation=c + 1, device=0,
                          stream=7, bytes=8))
        sid, sm, rep = self.smells(trace(evs))
        self.assertTrue(rep["lines"]["top_cuda_time"].startswith("sm90_xmma_gemm_f16f16_f16f32 82.9% of self CUDA"),
                        rep["lines"]["top_cuda_time"])
        self.assertTrue(rep["lines"]["top_cuda_time"].endswith("; 99.4% of the GPU time was launched outside every operator"),
                        rep["lines"]["top_cuda_time"])
        self.assertEqual(sm["one_operator_owns_the_run"]["evidence"]["operator"], "sm90_xmma_gemm_f16f16_f16f32")
        # the sessions list's column names the same kernel, not cudaGraphLaunch (whose row
        # holds all 30 kernels it launched)
        self.assertEqual(self.srv.json("/api/v1/sessions/%d" % sid)["top_cuda_operator"], "sm90_xmma_gemm_f16f16_f16f32")
        launch = self.srv.json("/api/v1/sessions/%d/gpu" % sid)["launch"]
        self.assertEqual(launch["count"], 8)  # 4 graph launches and 4 copies, not 124 GPU rows
        self.assertEqual(launch["delay_p50_us"], 12.0)  # a graph launch to its first kernel, not to its last
        self.assertEqual(launch["kernels"], 120)

    def test_smell_non_gemm_op_owns_the_run(self):
        # the same shape with a softmax kernel instead of a GEMM: a compute-bound suspect
        evs = launch_pair("aten::softmax", "softmax_warp_forward", 0, 100, 800, 1, kts=3)
        evs += launch_pair("aten::add", "elementwise_add", 200, 50, 100, 2, kts=803)
        evs += launch_pair("aten::relu", "elementwise_relu", 300, 50, 100, 3, kts=903)
        sid, sm, rep = self.smells(trace(evs))
        self.assertTrue(sm["one_operator_owns_the_run"]["fired"])
        top = self.srv.json("/api/v1/sessions/%d/suspects" % sid)["suspects"][0]
        self.assertEqual((top["category"], top["culprit"]), ("compute_bound_op", "aten::softmax"))
        self.assertIn("aten::softmax", rep["lines"]["next_experiment"])
        self.assertIn("Nsight Compute", rep["lines"]["next_experiment"])

    def test_smell_copies_dominate(self):
        # Kernels queued back to back, so the GPU is busy and only the copy stands out.
        evs = launch_pair("aten::copy_", "Memcpy DtoD", 0, 50, 600, 1, kts=3)
        evs += launch_pair("aten::to", "cast_kernel", 100, 50, 200, 2, kts=603)
        evs += launch_pair("aten::mm", "sgemm", 200, 50, 200, 3, kts=803)
        _, sm, rep = self.smells(trace(evs))
        own = sm["one_operator_owns_the_run"]
        self.assertTrue(own["fired"])
        self.assertEqual(own["evidence"]["operator"], "aten::copy_")
        self.assertAlmostEqual(own["evidence"]["share"], 0.6)
        self.assertEqual(own["evidence"]["class"], "memory")
        # issue 48: copies_casts is data movement by kind, named by its largest member
        self.assertIn("Data movement holds", rep["lines"]["next_experiment"])
        self.assertIn("aten::copy_", rep["lines"]["next_experiment"])

    def test_smell_tiny_kernels_from_a_loop(self):
        evs = []
        for i in range(5000):  # a Python token loop: 5,000 launches of a 2 us kernel, back to back
            evs += launch_pair("aten::add", "tiny_add", i * 10, 6, 2, i + 1)
        _, sm, rep = self.smells(trace(evs))
        ch = sm["cheap_operator_called_often"]
        self.assertTrue(ch["fired"], ch)
        self.assertEqual(ch["evidence"]["calls"], 5000)
        self.assertIn(ch["evidence"]["operator"], ("aten::add", "tiny_add"))
        gpu = self.srv.json("/api/v1/sessions/%d/gpu" % _)
        self.assertEqual(gpu["launch"]["count"], 5000)
        self.assertEqual(gpu["launch"]["short_kernels"], 5000)
        self.assertAlmostEqual(gpu["launch"]["delay_mean_us"], 2.0)

    def test_smell_gpu_idle_behind_host(self):
        evs = launch_pair("aten::mm", "sgemm", 0, 100, 50, 1)
        evs.append(ev("aten::item", "cpu_op", 200, 9000))
        evs.append(ev("cudaStreamSynchronize", "cuda_runtime", 300, 8000))
        evs += launch_pair("aten::mm", "sgemm", 9300, 100, 50, 2)
        sid, sm, rep = self.smells(trace(evs))
        idle = sm["gpu_idle_host_bound"]
        self.assertTrue(idle["fired"])
        wall = 9300 + 100  # the last op ends after its kernel
        self.assertAlmostEqual(idle["evidence"]["gpu_idle_fraction"], 1 - 100 / wall)
        self.assertEqual(idle["evidence"]["syncs"][0]["call"], "cudaStreamSynchronize")
        # the GPU went idle before the sync began: the host's 9 ms in aten::item is what it waits on
        self.assertIn("aten::item", rep["lines"]["next_experiment"])
        gpu = self.srv.json("/api/v1/sessions/%d/gpu" % sid)
        gap = gpu["devices"][0]["gaps"]["largest"][0]
        self.assertAlmostEqual(gap["dur_us"], 9303 - 53)
        self.assertEqual(gap["host_op"], "aten::item")
        self.assertEqual(gap["host_call"], "cudaStreamSynchronize")

    def test_smell_healthy_run_fires_nothing(self):
        evs = []
        # four balanced ops, kernels packed back to back; no two elementwise kernels in a row
        # (issue 48: add -> relu -> softmax back to back is an unfused chain, a suspect)
        names = ["aten::mm", "aten::add", "aten::bmm", "aten::relu"]
        t = 0
        for i in range(40):
            evs += launch_pair(names[i % 4], names[i % 4] + "_kernel", t, 12, 30, i + 1, kts=i * 30)
            t += 10
        _, sm, rep = self.smells(trace(evs))
        self.assertEqual([k for k, s in sm.items() if s["fired"]], [])
        self.assertRegex(rep["lines"]["next_experiment"], r"^(Healthy: |No suspect holds)")


if __name__ == "__main__":
    unittest.main()


class TopCpuLine(unittest.TestCase):
    """Issue 41, pattern 5: the report's Top CPU line separates host work from host waiting. A
    decode loop that blocks in .item() every step spends most of its self CPU inside
    cudaStreamSynchronize and cudaMemcpyAsync: that is the host waiting on the GPU, not its
    orchestration cost, and was named the top self-CPU cost."""

    @classmethod
    def setUpClass(cls):
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "triage"))
        import gen_cases  # noqa: E402
        cls.srv = Server()
        data = json.dumps(gen_cases.case_compute_bound_op()).encode()
        cls.sid = cls.srv.upload_ok(data)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_waiting_apart_from_work(self):
        line = self.srv.json("/api/v1/sessions/%d/report" % self.sid)["lines"]["top_cpu_cost"]
        ops = {o["name"]: o for o in self.srv.json("/api/v1/sessions/%d/operators?limit=1000" % self.sid)["operators"]}
        wait = sum(o["self_cpu_time_total_us"] for n, o in ops.items()
                   if o["kind"] in ("cuda_runtime", "cuda_driver") and ("Synchronize" in n or "Memcpy" in n or "Memset" in n))
        total = sum(o["self_cpu_time_total_us"] for o in ops.values())
        self.assertGreater(wait / total, 0.5, "the case must spend most of its self CPU waiting")
        # the top host work is no sync or copy call, and the waiting is stated with its share
        m = re.search(r"top host work: (\S+) ", line) or re.match(r"(\S+) [\d.]+% of self CPU", line)
        self.assertTrue(m, line)
        self.assertNotRegex(m.group(1), "Synchronize|Memcpy|Memset")
        m = re.search(r"host waiting on the GPU \(syncs, blocking copies\): \S+, ([\d.]+)% of self CPU", line)
        self.assertTrue(m, line)
        self.assertAlmostEqual(float(m.group(1)), 100 * wait / total, delta=0.06)


class ReportLines48(unittest.TestCase):
    """Issue 48, problem 6: the report's lines say what the trace shows. The Top CUDA line
    called the collectives' own op (record_param_comms: "comms" holds "mm") and a cuDNN
    batch-norm kernel "matmul"; communication's at stake counted collectives that overlap each
    other once each against compute alone, more than removing them could save; in a GPU-bound
    run the Top CPU line called a launch blocked on a full launch queue "top host work"."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def report(self, evs):
        sid = self.srv.upload_ok(trace(evs))
        return sid, self.srv.json("/api/v1/sessions/%d/report" % sid)["lines"]

    def family(self, line):
        m = re.match(r"(.*?) [\d.]+% of self CUDA \(\S+, \d+ calls?, ([\w ]+)\)", line)
        self.assertTrue(m, line)
        return m.group(1), m.group(2)

    def test_collectives_op_is_communication(self):
        evs = []
        for i in range(4):
            t = i * 2000
            evs.append(ev("record_param_comms", "cpu_op", t, 20))
            evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 2, 5, correlation=10 * i + 1))
            evs.append(ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", t + 10, 1200,
                          pid=0, tid=20, correlation=10 * i + 1, device=0, stream=20))
            evs += launch_pair("aten::mm", "sm80_xmma_gemm_bf16bf16_bf16f32", t + 30, 10, 500, 10 * i + 2, kts=t + 1300)
        name, fam = self.family(self.report(evs)[1]["top_cuda_time"])
        self.assertEqual((name, fam), ("record_param_comms", "communication"))

    def test_cudnn_batch_norm_is_no_matmul(self):
        evs = []
        for i in range(4):
            t = i * 1000
            evs += launch_pair("aten::cudnn_batch_norm", "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>",
                               t, 10, 600, 10 * i + 1)
            evs += launch_pair("aten::add", "vectorized_elementwise_kernel", t + 20, 10, 100, 10 * i + 2, kts=t + 700)
        sid, lines = self.report(evs)
        name, fam = self.family(lines["top_cuda_time"])
        self.assertEqual(name, "aten::cudnn_batch_norm")
        self.assertNotEqual(fam, "matmul")
        self.assertEqual(fam, "normalization")
        own = {s["id"]: s for s in self.srv.json("/api/v1/sessions/%d/report" % sid)["smells"]}["one_operator_owns_the_run"]
        self.assertNotIn("matmul", own["summary"])

    def test_overlapping_collectives_at_stake_within_compute_idle(self):
        # compute on stream 7 over [0, 1000) of each 2000 us period; two collectives on two
        # streams both over [500, 2000): exposed together 1000 us a period, the compute
        # stream's idle; counted each against compute alone they made 2000 (capped at 1500)
        evs = []
        for i in range(5):
            t = i * 2000
            evs.append(ev("aten::mm", "cpu_op", t, 8))
            evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 1, 4, correlation=10 * i + 1))
            evs.append(ev("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", t + 6, 994, pid=0, tid=7, correlation=10 * i + 1, device=0,
                          stream=7))
            for j, st in enumerate((20, 21)):
                c = 10 * i + 2 + j
                evs.append(ev("nccl:all_reduce", "cpu_op", t + 10 + 10 * j, 8))
                evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 11 + 10 * j, 4, correlation=c))
                evs.append(ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", t + 500, 1500 if i < 4 else 1400, pid=0, tid=st,
                              correlation=c, device=0, stream=st))
        sid = self.srv.upload_ok(trace(evs))
        sus = self.srv.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
        comm = [x for x in sus if x["category"] == "communication"]
        self.assertTrue(comm, [x["category"] for x in sus])
        compute_idle = (9900 - 6) - 5 * 994  # the GPU window [6, 9900) less the GEMMs
        self.assertLessEqual(comm[0]["at_stake_us"], compute_idle + 1e-6)
        self.assertGreater(comm[0]["at_stake_us"], 0.9 * compute_idle)

    def test_launch_blocked_on_full_queue_is_waiting(self):
        # a GPU-bound loop: each 1 ms kernel is launched while the queue is full, so
        # cudaLaunchKernel returns only as a slot frees (~900 us of self CPU a call)
        evs = []
        for i in range(40):
            t = i * 1000
            evs.append(ev("aten::mm", "cpu_op", t, 910))
            evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 2, 900, correlation=i + 1))
            evs.append(ev("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", 5 + t, 1000, pid=0, tid=7, correlation=i + 1, device=0, stream=7))
        line = self.report(evs)[1]["top_cpu_cost"]
        m = re.search(r"top host work: (\S+) ", line) or re.match(r"(\S+) [\d.]+% of self CPU", line)
        self.assertTrue(m, line)
        self.assertNotRegex(m.group(1), "Launch", line)
        self.assertRegex(line, r"launches blocked on a full launch queue \(the GPU is the bottleneck\): \S+, [\d.]+% of self CPU")


class CommAdvice48(unittest.TestCase):
    """Issue 48 item 4: communication's advice is chosen from what the trace shows. Collectives
    that already run mostly beside compute, with compute enough to hide them and the link busy
    under half the wall, are told so (start the exposed rest earlier), not "overlap them"; the
    same collectives with nothing beside them are told to overlap."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def comm(self, c0, c1, backward=True):
        evs = []
        for i in range(6):
            t = i * 2000
            evs.append(ev("aten::mm", "cpu_op", t, 8))
            if backward:  # a training loop: gradients exist (the exposed advice may name DDP's buckets)
                evs.append(ev("autograd::engine::evaluate_function: MmBackward0", "cpu_op", t + 9, 0.5))
            evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 1, 4, correlation=10 * i + 1))
            evs.append(ev("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", t + 6, 1394, pid=0, tid=7, correlation=10 * i + 1, device=0,
                          stream=7))
            evs.append(ev("nccl:all_reduce", "cpu_op", t + 10, 8))
            evs.append(ev("cudaLaunchKernel", "cuda_runtime", t + 11, 4, correlation=10 * i + 2))
            evs.append(ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", t + c0, c1 - c0, pid=0, tid=20, correlation=10 * i + 2,
                          device=0, stream=20))
        sid = self.srv.upload_ok(trace(evs))
        sus = self.srv.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
        comm = [x for x in sus if x["category"] == "communication"]
        self.assertTrue(comm, [x["category"] for x in sus])
        return comm[0]["next_experiment"]

    def test_already_overlapped(self):
        text = self.comm(900, 1700)  # 800 us a step, 500 of them beside the GEMM
        self.assertIn("already runs 6", text)  # 62% beside compute
        self.assertNotIn("link-bound", text)
        self.assertNotIn("late peer", text)

    def test_exposed(self):
        text = self.comm(1450, 1850)  # nothing runs beside it
        self.assertTrue(text.startswith("Overlap ncclDevKernel_AllReduce"), text)
        self.assertNotIn("already runs", text)

    def test_exposed_without_a_backward(self):
        # no backward anywhere (tensor-parallel inference): no gradients, no DDP buckets to tune
        text = self.comm(1450, 1850, backward=False)
        self.assertIn("no backward", text)
        self.assertNotIn("DDP", text)
        self.assertNotIn("no_sync", text)
