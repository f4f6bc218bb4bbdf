"""Issue 51, item 3 (links into the trace), the server's side: a finding's link names its
culprit whole, so /events?q=NAME&match=exact finds that name and never a longer one containing
it, from a window's start; match and q are bounded (400 with a JSON error body)."""
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


if __name__ == "__main__":
    unittest.main()
