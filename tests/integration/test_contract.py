"""The REST contract a script relies on (issue 4): the sessions list's filters and cursor
under concurrent inserts, ids never reused, and each error status with its JSON body."""
import gzip
import json
import os
import sqlite3
import threading
import time
import unittest

from fpserver import Server, TRACES, sqlite_only

SMALL = os.path.join(TRACES, "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz")


def tiny(name="aten::mm"):
    return json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}).encode()


class Contract(unittest.TestCase):
    def setUp(self):
        self.srv = Server("--max-upload", "64K")

    def tearDown(self):
        self.srv.stop()

    def assertError(self, st, body, status, code):
        self.assertEqual(st, status, body)
        b = json.loads(body) if isinstance(body, bytes) else body
        self.assertEqual(set(b), {"error"})
        self.assertEqual(b["error"]["code"], code)
        self.assertTrue(b["error"]["message"])

    def ids(self, query):
        return [s["id"] for s in self.srv.json("/api/v1/sessions" + query)["sessions"]]

    def test_filters_combine(self):
        a = self.srv.upload_ok(tiny(), "?name=a&label=model:llama&label=gpu:h100")
        b = self.srv.upload_ok(tiny(), "?name=b&label=model:llama&label=gpu:a100")
        c = self.srv.upload_ok(tiny(), "?name=a&label=model:bert&label=gpu:h100")
        self.assertEqual(self.ids(""), [c, b, a])  # newest first
        self.assertEqual(self.ids("?label=model:llama"), [b, a])
        self.assertEqual(self.ids("?label=model:llama&label=gpu:h100"), [a])  # repeated label: AND
        self.assertEqual(self.ids("?label=gpu:h100&name=a"), [c, a])
        self.assertEqual(self.ids("?source=kineto&name=b"), [b])
        self.assertEqual(self.ids("?source=nothing"), [])
        now = int(time.time())
        self.assertEqual(self.ids("?since=%d" % (now - 3600)), [c, b, a])
        self.assertEqual(self.ids("?since=%d" % (now + 3600)), [])
        self.assertEqual(self.ids("?until=%d" % (now - 3600)), [])
        many = "&".join("label=k%d:v" % i for i in range(17))  # over the 16 a list takes
        for q in ("label=nocolon", "label=:v", "limit=0", "limit=x", "since=-1", "next=abc", many):
            st, _, body = self.srv.get("/api/v1/sessions?" + q)
            self.assertError(st, body, 400, "invalid_parameter")

    def test_too_many_labels_are_refused_not_dropped(self):
        q = "?" + "&".join("label=k%d:v" % i for i in range(65))
        st, _, b = self.srv.upload(tiny(), q)
        self.assertError(st, b, 400, "invalid_parameter")
        st, _, b = self.srv.get("/api/v1/trends?metric=calls&operator=x&" + q[1:])
        self.assertError(st, b, 400, "invalid_parameter")
        self.assertEqual(self.ids(""), [])

    def test_cursor_stable_under_concurrent_inserts(self):
        first = [self.srv.upload_ok(tiny(), "?label=batch:1") for _ in range(12)]
        stop = threading.Event()
        added = []

        def writer():
            while not stop.is_set():
                added.append(self.srv.upload_ok(tiny(), "?label=batch:1"))

        t = threading.Thread(target=writer)
        t.start()
        try:
            seen, cursor = [], None
            while True:
                page = self.srv.json("/api/v1/sessions?label=batch:1&limit=3" + ("&next=" + cursor if cursor else ""))
                seen += [s["id"] for s in page["sessions"]]
                cursor = page["next"]
                time.sleep(0.05)  # let the writer land rows between pages
                if not cursor:
                    break
        finally:
            stop.set()
            t.join()
        self.assertTrue(added, "the writer inserted while we paged")
        # Each page continues strictly below the cursor: no id twice, none of the first
        # batch skipped, and inserts made after paging began never slip in below.
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(seen, sorted(seen, reverse=True))
        self.assertTrue(set(first) <= set(seen))

    def test_ids_are_never_reused(self):
        a = self.srv.upload_ok(tiny())
        b = self.srv.upload_ok(tiny())
        self.assertEqual(self.srv.request("DELETE", "/api/v1/sessions/%d" % b)[0], 204)
        c = self.srv.upload_ok(tiny())
        self.assertGreater(c, b, "a deleted session's id (and URL) must not name a new session")
        self.assertGreater(b, a)

    def test_each_error_status(self):
        sid = self.srv.upload_ok(tiny())
        st, _, b = self.srv.upload(b"{not json")
        self.assertError(st, b, 400, "invalid_json")
        st, _, b = self.srv.get("/api/v1/sessions/%d/operators?sort=bogus" % sid)
        self.assertError(st, b, 400, "invalid_parameter")
        st, _, b = self.srv.get("/api/v1/sessions/999999")
        self.assertError(st, b, 404, "not_found")
        st, h, b = self.srv.request("PATCH", "/api/v1/sessions/%d" % sid)
        self.assertError(st, b, 405, "method_not_allowed")
        self.assertEqual(h["Allow"], "GET, DELETE")
        st, _, b = self.srv.upload(os.urandom(80 << 10))
        self.assertError(st, b, 413, "too_large")
        st, _, b = self.srv.upload(tiny(), headers={"Content-Encoding": "br"})
        self.assertError(st, b, 415, "unsupported_media_type")
        st, _, b = self.srv.upload(b'{"hello":"world"}')
        self.assertError(st, b, 422, "not_a_trace")
        st, _, b = self.srv.upload(gzip.compress(b'{"traceEvents":[{"ph":"X","name":"a","ts":"x"}]}'))
        self.assertEqual(st // 100, 4, b)

    def test_cached_replies_follow_every_write(self):
        """Read replies come from the reply cache on a repeat (rcache.h): they must be
        byte-identical to a fresh render, keyed by query and Accept, and never outlive a
        report edit or a delete."""
        with open(SMALL, "rb") as f:
            sid = self.srv.upload_ok(f.read())
        P = "/api/v1/sessions/%d" % sid
        for path in (P + "/operators", P + "/operators?sort=calls", P + "/kernels?format=csv", P + "/phases", P + "/report"):
            first, again = self.srv.get(path), self.srv.get(path)
            self.assertEqual(first[0], 200, path)
            self.assertEqual(first[2], again[2], path)
            self.assertEqual(first[1].get("Content-Type"), again[1].get("Content-Type"), path)
            self.assertEqual(first[1].get("Vary"), again[1].get("Vary"), path)
        js = self.srv.get(P + "/report")
        tx = self.srv.get(P + "/report", {"Accept": "text/plain"})
        self.assertTrue(js[1]["Content-Type"].startswith("application/json"))
        self.assertTrue(tx[1]["Content-Type"].startswith("text/plain"), tx[1])
        self.assertNotEqual(self.srv.get(P + "/operators?sort=calls")[2], self.srv.get(P + "/operators")[2])
        st, _, _ = self.srv.request("PUT", P + "/report", json.dumps({"lines": {"next_experiment": "fuse the adds"}}).encode())
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(self.srv.get(P + "/report")[2])["lines"]["next_experiment"], "fuse the adds")
        self.assertIn(b"Next experiment: fuse the adds", self.srv.get(P + "/report", {"Accept": "text/plain"})[2])
        self.assertEqual(self.srv.request("DELETE", P)[0], 204)
        for path in (P, P + "/operators", P + "/report", P + "/kernels?format=csv"):
            self.assertEqual(self.srv.get(path)[0], 404, path)

    def test_cached_list_shows_each_upload_and_delete_at_once(self):
        """The sessions list is kept in the reply cache too (rcache.h), against the list
        generation, which a committed upload bumps before its 201 goes out: a list read
        after a 201 always has that session, on every cached page and filter, in every
        representation; a delete takes it out. Cached pages equal a server without cache."""
        queries = ("", "?limit=2", "?label=team:x", "?label=team:x&name=a", "?label=team:x&limit=1&next=999999", "?format=csv")
        seen = []
        for _ in range(3):
            for q in queries:  # render each page and ask again: the second one is a cache hit
                self.assertEqual(self.srv.get("/api/v1/sessions" + q)[2], self.srv.get("/api/v1/sessions" + q)[2], q)
            self.srv.get("/api/v1/sessions", {"Accept": "text/plain"})
            sid = self.srv.upload_ok(tiny(), "?name=a&label=team:x")
            seen.insert(0, sid)
            self.assertEqual(self.ids(""), seen)
            self.assertEqual(self.ids("?limit=2"), seen[:2])
            self.assertEqual(self.ids("?label=team:x"), seen)
            self.assertEqual(self.ids("?label=team:x&name=a"), seen)
            self.assertEqual(self.ids("?label=team:x&limit=1&next=999999"), seen[:1])
            self.assertIn(b"\n%d," % sid, self.srv.get("/api/v1/sessions?format=csv")[2])
            self.assertIn(b"\n%d " % sid, self.srv.get("/api/v1/sessions", {"Accept": "text/plain"})[2])
        self.assertEqual(self.srv.request("DELETE", "/api/v1/sessions/%d" % seen[1])[0], 204)
        del seen[1]
        self.assertEqual(self.ids(""), seen)
        self.assertEqual(self.ids("?label=team:x"), seen)
        # one server per SQLite file (test_deploy.py): the cached pages first, then a server
        # without a cache on the same database
        pages = {q: self.srv.get("/api/v1/sessions" + q)[2] for q in queries + ("?limit=1&next=%d" % seen[0],)}
        self.srv.stop()
        self.srv = Server("--cache-bytes", "0", db=self.srv.db)
        for q, cached in pages.items():
            self.assertEqual(cached, self.srv.get("/api/v1/sessions" + q)[2], q)

    @sqlite_only
    def test_500_on_a_corrupt_database_is_a_json_error(self):
        """A fault the server cannot mend is a 500 with the JSON error body, never a
        truncated 200: the operator table's pages (operator_rows) are overwritten on disk."""
        with open(SMALL, "rb") as f:
            sid = self.srv.upload_ok(f.read())
        self.srv.stop()
        db = sqlite3.connect(self.srv.db)
        pages = [r[0] for r in db.execute("SELECT pageno FROM dbstat WHERE name = 'operator_rows'")]
        psize = db.execute("PRAGMA page_size").fetchone()[0]
        db.close()
        self.assertTrue(pages)
        with open(self.srv.db, "r+b") as f:
            for p in pages:
                f.seek((p - 1) * psize)
                f.write(b"\xa5" * psize)
        self.srv = Server(db=self.srv.db)
        st, _, b = self.srv.get("/api/v1/sessions/%d/operators" % sid)
        self.assertError(st, b, 500, "database_error")
        self.assertEqual(self.srv.get("/api/v1/sessions/%d/report" % sid)[0], 200, "the rest of the database still serves")


if __name__ == "__main__":
    unittest.main()
