"""Hostile input, round 3 (issue 43): the reply cache's key, error replies that quote bytes
that are not UTF-8, downloads that must stay JSON whatever bytes a trace's args held, and
the jobs of several ranks (an empty job label, the ranks cap of the phases table)."""
import http.client
import json
import os
import sqlite3
import unittest

from fpserver import Server, sqlite_only


def ev(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


TRACE = json.dumps({"traceEvents": [ev("aten::mm", 1, 5), ev("aten::add", 10, 3), ev("aten::mm", 20, 4)]}).encode()


def raw_get(srv, path, headers=None):
    """GET path exactly as written (no quoting): status, headers, body bytes."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def strict_json(body):
    """body as JSON, its bytes decoded as strict UTF-8 (RFC 8259 8.1): raises otherwise."""
    return json.loads(body.decode("utf-8", errors="strict"))


class CacheKey(unittest.TestCase):
    """A reply is cached per request; a request whose decoded query reads like another's
    must not share its entry (issue 43: ?sort%3Dcalls%26limit=1 and ?sort=calls&limit=1)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.ids = [cls.srv.upload_ok(TRACE) for _ in range(3)]

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_encoded_separators_do_not_poison_the_sessions_list(self):
        # one parameter named "limit=1&x" (ignored: the whole list), then the real limit=1&x=1
        st, _, b = raw_get(self.srv, "/api/v1/sessions?limit%3D1%26x=1")
        self.assertEqual(st, 200, b)
        self.assertEqual(len(strict_json(b)["sessions"]), 3)
        st, _, b = raw_get(self.srv, "/api/v1/sessions?limit=1&x=1")
        self.assertEqual(st, 200, b)
        self.assertEqual(len(strict_json(b)["sessions"]), 1, "served the other request's cached reply")

    def test_encoded_separators_do_not_poison_operators(self):
        path = "/api/v1/sessions/%d/operators" % self.ids[0]
        st, _, b = raw_get(self.srv, path + "?sort%3Dcalls%26limit=1")
        self.assertEqual(st, 200, b)
        self.assertEqual(len(strict_json(b)["operators"]), 2)
        for _ in range(2):  # a miss, then a hit: both the reply of this request
            st, _, b = raw_get(self.srv, path + "?sort=calls&limit=1")
            self.assertEqual(st, 200, b)
            ops = strict_json(b)["operators"]
            self.assertEqual([o["name"] for o in ops], ["aten::mm"])

    def test_name_without_value_and_empty_value_are_apart(self):
        # both are the same reply today; each must still be its own entry, never the other's
        a = raw_get(self.srv, "/api/v1/sessions?limit=2&x")
        b = raw_get(self.srv, "/api/v1/sessions?limit=2&x=")
        self.assertEqual((a[0], b[0]), (200, 200))
        self.assertEqual(len(strict_json(a[2])["sessions"]), 2)
        self.assertEqual(len(strict_json(b[2])["sessions"]), 2)

    def test_accept_is_part_of_the_key(self):
        path = "/api/v1/sessions/%d/operators" % self.ids[1]
        st, h, b = raw_get(self.srv, path, {"Accept": "text/plain"})
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/plain"), h)
        st, h, b = raw_get(self.srv, path)
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("application/json"), h)
        strict_json(b)


class ErrorBodies(unittest.TestCase):
    """Every error reply carries its JSON body, also when its message quotes a client value
    that is not UTF-8 (issue 43: ?limit=%ff and /%ff came back with Content-Length: 0)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.sid = cls.srv.upload_ok(TRACE)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def check(self, path, status):
        st, h, b = raw_get(self.srv, path)
        self.assertEqual(st, status, (path, b[:200]))
        self.assertTrue(h.get("content-type", "").startswith("application/json"), (path, h))
        self.assertTrue(b, "%s: an empty error reply" % path)
        self.assertEqual(int(h["content-length"]), len(b))
        err = strict_json(b)["error"]
        self.assertTrue(err["code"] and err["message"], (path, err))
        return err["message"]

    def test_query_values_not_utf8(self):
        for q in ("limit=%ff", "limit=%c0%af", "limit=%ed%a0%80", "limit=1%f4%90%80%80", "sort=%ff%fe", "next=%80"):
            with self.subTest(q=q):
                base = "/api/v1/sessions/%d/operators" % self.sid if q.startswith("sort") else "/api/v1/sessions"
                msg = self.check(base + "?" + q, 400)
                if q == "limit=%ff":
                    self.assertIn("\ufffd", msg)  # quoted, as U+FFFD

    def test_paths_not_utf8(self):
        self.check("/%ff", 404)
        self.check("/%ff%fe/x%c0%af.html", 404)
        self.check("/api/v1/no-such%ff", 404)
        self.check("/api/v1/jobs/%ff", 400)

    def test_long_quoted_value_cut_inside_a_character(self):
        # a message cut at its buffer's end inside a multi-byte character is still UTF-8
        self.check("/api/v1/sessions?limit=" + "%c3%a9" * 400, 400)
        self.check("/" + "%e2%82%ac" * 300, 404)


if __name__ == "__main__":
    unittest.main()
