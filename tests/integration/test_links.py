"""Issue 51, item 3 (links into the trace), the server's side: a finding's link names its
culprit whole, so /events?q=NAME&match=exact finds that name and never a longer one containing
it, from a window's start; match and q are bounded (400 with a JSON error body). An area
selection's summary (/area): per track and by name, each event clipped to the window, and its
parameters bounded."""
import json
import unittest

from fpserver import Server


def ev(name, cat, ts, dur, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def trace():
    """aten::mm_backward at 100 and 300, aten::mm at 200 and 400, Aten::MM (other case) at 500."""
    evs = [ev("aten::mm_backward", "cpu_op", 100, 10), ev("aten::mm", "cpu_op", 200, 10),
           ev("aten::mm_backward", "cpu_op", 300, 10), ev("aten::mm", "cpu_op", 400, 10),
           ev("Aten::MM", "cpu_op", 500, 10)]
    return json.dumps({"traceEvents": evs}).encode()


class ExactName(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.sid = cls.srv.upload_ok(trace(), "?name=links")
        cls.base = "/api/v1/sessions/%d/events" % cls.sid
        cls.t0 = cls.srv.json("/api/v1/sessions/%d/timeline?buckets=1" % cls.sid)["start_us"]

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def find(self, query):
        return self.srv.json(self.base + query)["event"]

    def test_contains_is_the_default(self):
        self.assertEqual(self.find("?q=aten::mm")["name"], "aten::mm_backward")

    def test_exact_finds_the_name_itself(self):
        e = self.find("?q=aten::mm&match=exact")
        self.assertEqual((e["name"], e["ts_us"] - self.t0), ("aten::mm", 100))

    def test_exact_from_a_window_start_and_stepping(self):
        e = self.find("?q=aten::mm&match=exact&ts_us=%r" % (self.t0 + 250))
        self.assertEqual((e["name"], e["ts_us"] - self.t0), ("aten::mm", 300))
        nxt = self.find("?q=aten::mm&match=exact&ref=" + e["ref"])
        self.assertIsNone(nxt, "Aten::MM differs in case: not an exact match")
        prev = self.find("?q=aten::mm&match=exact&dir=prev&ref=" + e["ref"])
        self.assertEqual(prev["ts_us"] - self.t0, 100)

    def test_exact_no_match_is_null(self):
        self.assertIsNone(self.find("?q=aten::m&match=exact"))

    def test_bad_parameters_are_400_with_a_body(self):
        for q in ("?q=aten::mm&match=fuzzy", "?q=" + "x" * 8193 + "&match=exact"):
            st, _, b = self.srv.get(self.base + q)
            self.assertEqual(st, 400, q[:40])
            self.assertEqual(json.loads(b)["error"]["code"], "invalid_parameter")


class Area(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        evs = json.loads(trace())["traceEvents"] + [ev("gemm", "kernel", 210, 100, tid=2)]
        evs[-1].update(pid=0, tid=7, args={"device": 0, "stream": 7})
        cls.sid = cls.srv.upload_ok(json.dumps({"traceEvents": evs}).encode(), "?name=area")
        cls.base = "/api/v1/sessions/%d/area" % cls.sid
        # the trace's zero: its first event is at 100
        cls.t0 = cls.srv.json("/api/v1/sessions/%d/timeline?buckets=1" % cls.sid)["start_us"] - 100

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def area(self, a, b, extra=""):
        return self.srv.json("%s?start_us=%r&end_us=%r%s" % (self.base, self.t0 + a, self.t0 + b, extra))

    def test_clipped_by_name_per_track(self):
        # window [105, 305): mm_backward@100 (5 inside), mm@200 (10), mm_backward@300 (5); gemm@210 (95)
        j = self.area(105, 305)
        cpu = [t for t in j["tracks"] if t["kind"] == "cpu"][0]
        got = {n["name"]: (n["count"], n["total_us"], n["mean_us"]) for n in cpu["names"]}
        self.assertEqual(got, {"aten::mm_backward": (2, 10.0, 10.0), "aten::mm": (1, 10.0, 10.0)})
        self.assertEqual(cpu["count"], 3)
        self.assertEqual(j["count"], 4)
        self.assertEqual(j["names"][0], {"name": "gemm", "count": 1, "total_us": 95.0, "mean_us": 100.0})
        tl = self.srv.json("/api/v1/sessions/%d/timeline?start_us=%r&end_us=%r&buckets=1" % (self.sid, self.t0 + 105, self.t0 + 305))
        self.assertEqual({t["id"]: t["count"] for t in j["tracks"]}, {t["id"]: t["count"] for t in tl["tracks"]})

    def test_names_cap_and_other(self):
        j = self.area(0, 1000, "&names=1")
        cpu = [t for t in j["tracks"] if t["kind"] == "cpu"][0]
        self.assertEqual(len(cpu["names"]), 1)
        self.assertEqual(cpu["other"]["names"], 2)
        self.assertEqual(cpu["names"][0]["count"] + cpu["other"]["count"], cpu["count"])

    def test_tracks_filter_and_empty_window(self):
        gpu = [t["id"] for t in self.area(0, 1000)["tracks"] if t["kind"] == "gpu"]
        j = self.area(0, 1000, "&tracks=" + gpu[0])
        self.assertEqual([t["id"] for t in j["tracks"]], gpu)
        self.assertEqual(self.area(600, 700)["tracks"], [])

    def test_bad_parameters_are_400_with_a_body(self):
        for q in ("", "?start_us=1", "?start_us=2&end_us=1", "?start_us=1&end_us=2&names=51", "?start_us=1&end_us=1e16",
                  "?start_us=1&end_us=2&tracks=", "?start_us=1&end_us=2&tracks=" + ",".join("t%d" % i for i in range(257)),
                  "?start_us=x&end_us=2"):
            st, _, b = self.srv.get(self.base + q)
            self.assertEqual(st, 400, q[:60])
            self.assertEqual(json.loads(b)["error"]["code"], "invalid_parameter")
        st, _, b = self.srv.get("/api/v1/sessions/999999/area?start_us=1&end_us=2")
        self.assertEqual(st, 404)


class NamedSlices(unittest.TestCase):
    """A track drawn as buckets (over 2,000 events in the window) names its wide events: those
    at least 8 buckets long, with their depth among themselves."""

    def test_wide_events_come_with_the_buckets(self):
        evs = [ev("outer", "user_annotation", 0, 100000), ev("inner", "user_annotation", 10000, 50000)]
        evs += [ev("tiny", "cpu_op", 100 + i * 30, 10) for i in range(3000)]
        with _Srv() as srv:
            sid = srv.upload_ok(json.dumps({"traceEvents": evs}).encode(), "?name=slices")
            tl = srv.json("/api/v1/sessions/%d/timeline?buckets=100" % sid)
            t = [x for x in tl["tracks"] if x["kind"] == "cpu"][0]
            self.assertEqual(t["mode"], "buckets")
            got = [(x["name"], x["depth"]) for x in t["slices"]]
            self.assertEqual(got, [("outer", 0), ("inner", 1)], "8 buckets = 8 ms: only outer and inner")
            # 10 buckets over the 100 ms: 80 ms at least, so outer alone
            a = tl["start_us"]
            z = srv.json("/api/v1/sessions/%d/timeline?start_us=%r&end_us=%r&buckets=10" % (sid, a, a + 100000))
            zt = [x for x in z["tracks"] if x["kind"] == "cpu"][0]
            self.assertEqual(zt["mode"], "buckets")
            self.assertEqual([x["name"] for x in zt["slices"]], ["outer"])


class _Srv:
    def __enter__(self):
        self.srv = Server()
        return self.srv

    def __exit__(self, *a):
        self.srv.stop()


if __name__ == "__main__":
    unittest.main()
