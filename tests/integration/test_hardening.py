"""http.c hardening: upload parameters, Vary, Expect: 100-continue, SIGTERM mid-upload."""
import json
import signal
import socket
import time
import unittest
import urllib.parse

from fpserver import Server, head_only

TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                                     "ts": 1, "dur": 2}]}).encode()


class Params(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def bad(self, query):
        st, _, b = self.srv.upload(TRACE, query)
        self.assertEqual(st, 400, (query, b))
        self.assertEqual(b["error"]["code"], "invalid_parameter", (query, b))
        return b["error"]["message"]

    def test_label_and_name_errors_are_invalid_parameter(self):
        for q in ("?label=nocolon", "?label=:x", "?label=%20:x", "?name=" + "n" * 513,
                  "?label=ok:1&label=nocolon"):
            with self.subTest(q=q):
                self.bad(q)

    def test_invalid_utf8_is_refused(self):
        # lone continuation byte, truncated sequence, overlong '/', UTF-16 surrogate, > U+10FFFF
        for raw in ("%FF%FE", "%80", "abc%C3", "%C0%AF", "%ED%A0%80", "%F4%90%80%80"):
            for q in ("?name=" + raw, "?label=k:" + raw, "?label=" + raw + ":v"):
                with self.subTest(q=q):
                    msg = self.bad(q)
                    self.assertIn("UTF-8", msg)

    def test_valid_utf8_is_stored_and_served(self):
        name, value = "décodé ✓ 𝔽", "Ĥ100"
        q = "?name=%s&label=%s" % (urllib.parse.quote(name), urllib.parse.quote("gpu:" + value))
        st, _, b = self.srv.upload(TRACE, q)
        self.assertEqual(st, 201, b)
        s = self.srv.json("/api/v1/sessions/%d" % b["id"])
        self.assertEqual(s["name"], name)
        self.assertEqual(s["labels"], {"gpu": value})


class Vary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.sid = cls.srv.upload_ok(TRACE)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_trace_download_varies_on_accept_encoding(self):
        for hdr in ({}, {"Accept-Encoding": "gzip"}):
            with self.subTest(hdr=hdr):
                st, h, _ = self.srv.get("/api/v1/sessions/%d/trace" % self.sid, headers=hdr)
                self.assertEqual(st, 200)
                self.assertIn("Accept-Encoding", h.get("Vary", ""))

    def test_text_negotiation_varies_on_accept(self):
        for path in ("/api/v1/sessions/%d/report" % self.sid, "/api/v1/sessions/%d/operators" % self.sid):
            for hdr in ({}, {"Accept": "text/plain"}):
                with self.subTest(path=path, hdr=hdr):
                    st, h, _ = self.srv.get(path, headers=hdr)
                    self.assertEqual(st, 200)
                    self.assertIn("Accept", h.get("Vary", "").split(", "))

    def test_no_vary_where_nothing_is_negotiated(self):
        st, h, _ = self.srv.get("/api/v1/sessions/%d" % self.sid)
        self.assertEqual(st, 200)
        self.assertNotIn("Vary", h)


class ExpectContinue(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-upload", "1000")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_too_large_is_413_before_the_body(self):
        got = head_only(self.srv.port, "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
                                       "Expect: 100-continue\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 413"), got[:200])
        self.assertNotIn(b"100 Continue", got)
        self.assertIn(b'"too_large"', got)

    def test_bad_parameter_is_400_before_the_body(self):
        got = head_only(self.srv.port, "POST /api/v1/sessions?label=nocolon HTTP/1.1\r\nHost: x\r\n"
                                       "Content-Length: 500\r\nExpect: 100-continue\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got[:200])
        self.assertIn(b'"invalid_parameter"', got)

    def test_acceptable_upload_still_gets_100_continue(self):
        got = head_only(self.srv.port, "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
                                       "Expect: 100-continue\r\n\r\n", wait=1.0)
        self.assertTrue(got.startswith(b"HTTP/1.1 100"), got[:200])


class Sigterm(unittest.TestCase):
    def test_upload_in_flight_finishes_then_exit_0(self):
        srv = Server()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"POST /api/v1/sessions?name=inflight HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % len(TRACE) + TRACE[:10])
            time.sleep(0.3)  # the server holds a half-received upload
            srv.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            self.assertIsNone(srv.proc.poll(), "exited with an upload in flight")
            s.sendall(TRACE[10:])
            got = b""
            while b"}\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            self.assertTrue(got.startswith(b"HTTP/1.1 201"), got[:300])
            self.assertIn(b"Connection: close", got)
        finally:
            s.close()
        self.assertEqual(srv.proc.wait(10), 0)
        srv.stop()

    def test_second_sigterm_while_draining_with_retention_on(self):
        """The retention thread started before SIGTERM was blocked, so a second SIGTERM
        during the drain (no thread in sigwait) hit its default action: exit 143."""
        srv = Server("--retain-days", "30")
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(TRACE) + TRACE[:10])
            time.sleep(0.3)
            srv.proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            srv.proc.send_signal(signal.SIGTERM)  # a second Ctrl-C / kill while it drains
            time.sleep(0.2)
            self.assertIsNone(srv.proc.poll(), "died during the drain (rc %s)" % srv.proc.poll())
            s.sendall(TRACE[10:])
            got = s.recv(65536)
            self.assertTrue(got.startswith(b"HTTP/1.1 201"), got[:300])
        finally:
            s.close()
        self.assertEqual(srv.proc.wait(10), 0)
        srv.stop()

if __name__ == "__main__":
    unittest.main()


class UploadSlot(unittest.TestCase):
    def test_next_upload_after_a_reply_finds_the_slot_free(self):
        """The upload slot was given back only when MHD called the completion callback,
        after the 201 had gone out: a client that posted its next upload (on a new
        connection) as soon as it read the reply could get 503 too_many_uploads with
        --max-uploads 1 (seen once in test-openapi)."""
        srv = Server("--max-uploads", "1")
        try:
            got = [srv.upload(TRACE, "?name=slot%d" % i)[0] for i in range(150)]
        finally:
            srv.stop()
        self.assertEqual([s for s in got if s != 201], [], "statuses other than 201")


class NonAsciiNamesCut(unittest.TestCase):
    def test_a_name_cut_inside_a_character_keeps_its_suspects(self):
        """The analysis formats names into fixed buffers (next experiment 1 KiB, report
        lines, operator names 256 B); snprintf cut a long non-ASCII name inside a character,
        Jansson refused the invalid UTF-8, and the suspects, report lines and smell evidence
        that quoted it vanished: the list came back empty for two of these three offsets.
        lib/utf8.c drops the cut character."""
        srv = Server()
        try:
            for pad in range(3):
                name = "aten::" + "a" * pad + "é" * 2000
                evs = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
                       {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
                        "args": {"correlation": 1}},
                       {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 900,
                        "args": {"device": 0, "stream": 7, "correlation": 1}}]
                with self.subTest(pad=pad):
                    sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode())
                    sus = srv.json("/api/v1/sessions/%d/suspects" % sid)
                    top = sus["suspects"][0] if sus["suspects"] else {}
                    self.assertEqual(top.get("category"), "compute_bound_op", sus["suspects"])
                    self.assertEqual(top["culprit"], name)  # whole where it is not formatted
                    self.assertTrue(top["next_experiment"].startswith(name[:500]))
                    rep = srv.json("/api/v1/sessions/%d/report" % sid)
                    self.assertEqual(sorted(rep["lines"]), sorted(["workload", "hardware", "top_cuda_time", "top_cpu_cost",
                                                                   "next_experiment"]))
                    owns = [sm for sm in rep["smells"] if sm["id"] == "one_operator_owns_the_run"][0]
                    self.assertTrue(owns["fired"] and owns["evidence"], owns)
        finally:
            srv.stop()


    def test_timeline_keeps_events_and_tracks_with_long_non_ascii_names(self):
        """The timeline cuts event names at 511 bytes and track labels at 159: cut inside a
        character, the event (or the whole track) was left out of the reply."""
        name, tid = "é" * 600, "线程" * 40
        evs = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": 0, "dur": 100},
               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": tid, "ts": 200, "dur": 100}]
        srv = Server()
        try:
            sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode())
            tl = srv.json("/api/v1/sessions/%d/timeline" % sid)
            tracks = [t for t in tl["tracks"] if t["kind"] == "cpu"]
            self.assertEqual(len(tracks), 1, tl["tracks"])
            self.assertTrue(tracks[0]["label"].startswith("thread " + tid[:20]), tracks[0]["label"])
            got = [e["name"] for e in tracks[0].get("events", [])]
            self.assertEqual(got, ["é" * 255, "aten::mm"])
        finally:
            srv.stop()


class LongNamesQuotedOnce(unittest.TestCase):
    def test_evidence_cuts_a_long_name_the_culprit_keeps_it(self):
        """A suspect quoted its culprit's name whole as the culprit, as compute_bound_op's
        op and as its top contributor: one 300 KB name made a /suspects of ~900 KB, a 1 MiB
        name in two suspects 5.2 MB. Evidence now cuts names at 1 KiB (EVIDENCE_NAME_MAX)
        on a character boundary, with an ellipsis; the culprit stays whole."""
        name = "aten::" + "é" * 150000  # 300 KB
        evs = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
                "args": {"correlation": 1}},
               {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 900,
                "args": {"device": 0, "stream": 7, "correlation": 1}}]
        srv = Server()
        try:
            sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode())
            st, _, body = srv.get("/api/v1/sessions/%d/suspects" % sid)
            self.assertEqual(st, 200)
            sus = json.loads(body)
            top = sus["suspects"][0]
            self.assertEqual(top["category"], "compute_bound_op")
            self.assertEqual(top["culprit"], name)
            quoted = [c["name"] for c in top["evidence"]["top_contributors"]] + [top["evidence"]["op"]]
            for q in quoted:
                self.assertLessEqual(len(q.encode()), 1024 + 3, q[:40])
                self.assertTrue(q.endswith("\u2026") and name.startswith(q[:-1]), q[:40])
            naming = sum(x["culprit"] == name for x in sus["suspects"])
            self.assertLess(len(body), (naming + 0.2) * len(name.encode()), "whole once per suspect naming it")
        finally:
            srv.stop()

    def test_track_ids_are_whole(self):
        """Timeline track ids were "cpu:PID:TID" cut at 95 bytes: two threads whose tids
        share their first 100 bytes had one id, and /events?track= could not tell them
        apart. The id is whole now; the label is still cut."""
        tids = ["worker-" + "t" * 200 + "-1", "worker-" + "t" * 200 + "-2"]
        evs = [{"ph": "X", "cat": "cpu_op", "name": "op%d" % i, "pid": 1, "tid": tid, "ts": 100 * i, "dur": 50}
               for i, tid in enumerate(tids)]
        srv = Server()
        try:
            sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode())
            tl = srv.json("/api/v1/sessions/%d/timeline" % sid)
            ids = sorted(t["id"] for t in tl["tracks"] if t["kind"] == "cpu")
            self.assertEqual(ids, sorted("cpu:1:" + t for t in tids))
            for i, tid in enumerate(tids):
                q = urllib.parse.urlencode({"track": "cpu:1:" + tid, "ts_us": 100 * i})  # the event's start
                ev = srv.json("/api/v1/sessions/%d/events?%s" % (sid, q))
                self.assertEqual((ev["event"]["name"], ev["event"]["track"]), ("op%d" % i, "cpu:1:" + tid))
        finally:
            srv.stop()


class LongNamesCompare(unittest.TestCase):
    def test_compare_keeps_long_names_apart_and_whole(self):
        """/compare keyed its rows by kind and name cut at 1 KiB: two kernels whose names
        share their first 1,100 bytes (C++ templates do) were one row, and a name of 'é'
        cut inside a character made the row vanish. Keys are sized to fit now."""
        prefix = "void cutlass::Kernel<" + "x" * 1100
        names = [prefix + "A>", prefix + "B>", "k" + "é" * 700]

        def trace(us):
            evs = []
            for i, (nm, d) in enumerate(zip(names, us)):
                evs.append({"ph": "X", "cat": "kernel", "name": nm, "pid": 0, "tid": 7, "ts": i * 1000, "dur": d,
                            "args": {"device": 0, "stream": 7}})
            return json.dumps({"traceEvents": evs}).encode()
        srv = Server()
        try:
            b = srv.upload_ok(trace([100, 200, 300]))
            h = srv.upload_ok(trace([150, 200, 330]))
            rows = srv.json("/api/v1/compare?base=%d&head=%d" % (b, h))["operators"]
            got = sorted(r["name"] for r in rows if r["kind"] == "kernel")
            self.assertEqual(got, sorted(names))
        finally:
            srv.stop()


class LongPhaseNames(unittest.TestCase):
    def test_timeline_bands_cut_long_names_phases_keep_them(self):
        """Each timeline band repeated its record_function's name whole, once per instance:
        50 instances of one 1 MiB name stored (and sent) a 52 MB timeline document. A band's
        name is cut at 256 bytes (a UTF-8 character kept whole, then an ellipsis); /phases
        keeps the whole name."""
        name = "é" * 40000 + "x"  # 80,001 bytes, a 2-byte character at the cut
        evs = []
        for i in range(50):
            evs.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": i * 100, "dur": 50})
            evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 100 + 1, "dur": 40})
        srv = Server("--max-name-bytes-per-event", "1048576")
        try:
            sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode())
            st, _, body = srv.get("/api/v1/sessions/%d/timeline" % sid)
            self.assertEqual(st, 200)
            self.assertLess(len(body), 100000, "the timeline sends the long name per band")
            bands = json.loads(body)["phases"]
            self.assertEqual(len(bands), 50)
            for b in bands:
                self.assertEqual(b["name"], "é" * 128 + "\u2026")
            phases = srv.json("/api/v1/sessions/%d/phases" % sid)
            rows = phases["phases"] if isinstance(phases, dict) else phases
            self.assertIn(name, [r["name"] for r in rows])
        finally:
            srv.stop()
