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


class DownloadStaysJson(unittest.TestCase):
    """Bytes YAJL lets through (overlong forms, encoded surrogates, code points over
    U+10FFFF) in args, other event keys, thread names and flow ids are stored as U+FFFD, so
    that /trace is JSON a strict parser reads (issue 43: they were sent back raw)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def download(self, sid):
        st, h, b = raw_get(self.srv, "/api/v1/sessions/%d/trace" % sid)
        self.assertEqual(st, 200, b[:300])
        self.assertNotIn("content-encoding", h)
        return strict_json(b)

    def test_bad_bytes_everywhere_but_names(self):
        # what YAJL takes (it checks a sequence's shape only; a stray or cut one is 400 invalid_json)
        bad = {"overlong": b"\xc0\xaf", "overlong3": b"\xe0\x80\xaf", "overlong4": b"\xf0\x80\x80\xaf",
               "surrogate": b"\xed\xa0\x80", "over_max": b"\xf4\x90\x80\x80"}
        parts = [b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5,"args":{"ok":"\xc3\xa9\xf0\x9f\x98\x80"}}']
        for i, (what, x) in enumerate(bad.items()):
            ts = 10 + 10 * i
            parts.append(b'{"ph":"X","cat":"cpu_op","name":"op_%s","pid":1,"tid":1,"ts":%d,"dur":2,'
                         b'"args":{"value":"a%sb","key%s":1,"list":["%s"]},"extra%s":"x"}' % (what.encode(), ts, x, x, x, x))
        parts.append(b'{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"worker\xed\xa0\x80"}}')
        parts.append(b'{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"proc\xc0\xaf"}}')
        parts.append(b'{"ph":"s","cat":"ac2g","name":"ac2g","id":"f\xc0\xaf","pid":1,"tid":1,"ts":1}')
        parts.append(b'{"ph":"f","cat":"ac2g","name":"ac2g","id":"f\xc0\xaf","pid":1,"tid":1,"ts":11,"bp":"e"}')
        body = b'{"traceEvents":[' + b",".join(parts) + b"]}"
        st, _, r = self.srv.upload(body)
        self.assertEqual(st, 201, r)
        doc = self.download(r["id"])
        evs = doc["traceEvents"]
        ok = [e for e in evs if e.get("name") == "aten::mm"]
        self.assertEqual(ok[0]["args"]["ok"], "\u00e9\U0001F600")  # valid text is kept as it was
        for what in bad:
            e = [x for x in evs if x.get("name") == "op_" + what]
            self.assertEqual(len(e), 1, what)
            v = e[0]["args"]["value"]
            self.assertTrue(v.startswith("a\ufffd") and v.endswith("\ufffdb"), (what, v))
            self.assertTrue(any(k.startswith("key\ufffd") for k in e[0]["args"]), (what, e[0]["args"]))
            self.assertTrue(any(k.startswith("extra\ufffd") for k in e[0]), (what, e[0]))
        tn = [x for x in evs if x.get("ph") == "M" and x.get("name") == "thread_name" and x.get("tid") == 1]
        self.assertIn("worker\ufffd", [x["args"]["name"][:7] for x in tn])
        flows = [x for x in evs if x.get("ph") in ("s", "f") and str(x.get("id", "")).startswith("f\ufffd")]
        self.assertEqual(len(flows), 2)

    def test_long_non_ascii_pid_names_its_process(self):
        # The download names a process without a process_name "process <pid>" in a fixed
        # buffer: cut inside a character, the label was not UTF-8 and the upload failed.
        pid = "\u00e9" * 200
        st, _, r = self.srv.upload(json.dumps({"traceEvents": [ev("aten::mm", 1, 5, pid=pid, tid=pid)]}).encode())
        self.assertEqual(st, 201, r)
        doc = self.download(r["id"])
        names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"]
        self.assertEqual(len(names), 1)
        self.assertTrue(names[0].startswith("process \u00e9\u00e9"), names)


class EmptyJob(unittest.TestCase):
    """A job is read at /api/v1/jobs/{job}; an empty job label would list a job nobody can
    fetch, so it is refused at upload (issue 43)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_empty_job_label_is_refused(self):
        for q in ("?label=job:", "?label=job:%20%20", "?label=rank:0&label=job:"):
            with self.subTest(q=q):
                st, _, b = self.srv.upload(TRACE, q)
                self.assertEqual(st, 400, b)
                self.assertEqual(b["error"]["code"], "invalid_parameter")
                self.assertIn("job", b["error"]["message"])
        fp = {"format": "firstpass-session", "version": 1, "labels": {"job": "", "rank": "0"}}
        st, _, b = self.srv.upload(json.dumps({"firstpass": fp, "traceEvents": [ev("aten::mm", 1, 5)]}).encode())
        self.assertEqual(st, 400, b)
        self.assertIn("job", b["error"]["message"])
        self.assertEqual(self.srv.json("/api/v1/sessions")["sessions"], [])
        self.assertEqual(self.srv.json("/api/v1/jobs")["jobs"], [])

    def test_query_job_wins_over_an_empty_one_in_the_trace(self):
        fp = {"format": "firstpass-session", "version": 1, "labels": {"job": ""}}
        sid = self.srv.upload_ok(json.dumps({"firstpass": fp, "traceEvents": [ev("aten::mm", 1, 5)]}).encode(), "?label=job:named")
        j = self.srv.json("/api/v1/jobs/named")
        self.assertEqual([r["session_id"] for r in j["ranks"]], [sid])
        for listed in self.srv.json("/api/v1/jobs")["jobs"]:
            self.assertTrue(listed["job"], "a job listed that /api/v1/jobs/{job} cannot fetch")

    def test_other_empty_labels_are_kept(self):
        sid = self.srv.upload_ok(TRACE, "?label=note:")
        self.assertEqual(self.srv.json("/api/v1/sessions/%d" % sid)["labels"], {"note": ""})


class JobRanksCap(unittest.TestCase):
    """The phases table of a job reads the ranks the ranks table lists: at most 4,096
    (JOB_RANKS_MAX, store/jobs.h). Before: every session of the job (issue 43)."""

    RANKS = 4096 + 5

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        steps = [ev("train_step", 100 * i, 50, cat="user_annotation") for i in range(3)]
        cls.sid = cls.srv.upload_ok(json.dumps({"traceEvents": steps + [ev("aten::mm", 1, 5)]}).encode(),
                                    "?label=job:wide&label=rank:0")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    @sqlite_only
    def test_phases_read_the_listed_ranks_only(self):
        # 4,100 more ranks of the same session, written beside it (uploading them would
        # take minutes): every table jobs.c reads gets the copy's rows.
        db = sqlite3.connect(self.srv.db, timeout=30)
        with db:
            cols = [r[1] for r in db.execute("PRAGMA table_info(sessions)") if r[1] != "id"]
            db.execute("CREATE TEMP TABLE n AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                       " SELECT i FROM n", (self.RANKS - 1,))
            db.execute("INSERT INTO sessions(id, %s) SELECT 100000 + i, %s FROM sessions, n WHERE id = ?"
                       % (", ".join(cols), ", ".join(cols)), (self.sid,))
            for table in ("strings", "phase_rows", "analysis"):
                tcols = [r[1] for r in db.execute("PRAGMA table_info(%s)" % table) if r[1] != "session_id"]
                db.execute("INSERT INTO %s(session_id, %s) SELECT 100000 + i, %s FROM %s, n WHERE session_id = ?"
                           % (table, ", ".join(tcols), ", ".join(tcols), table), (self.sid,))
            db.execute("INSERT INTO labels(session_id, key, value) SELECT 100000 + i, 'job', 'wide' FROM n")
            db.execute("INSERT INTO labels(session_id, key, value) SELECT 100000 + i, 'rank', CAST(i AS TEXT) FROM n")
        db.close()
        j = self.srv.json("/api/v1/jobs/wide")
        self.assertEqual(len(j["ranks"]), 4096)
        listed = {r["session_id"] for r in j["ranks"]}
        self.assertTrue(j["phases"], j["phases"])
        for p in j["phases"]:
            self.assertLessEqual(len(p["ranks"]), 4096, p["name"])
            self.assertLessEqual({r["session_id"] for r in p["ranks"]}, listed, p["name"])


if __name__ == "__main__":
    unittest.main()
