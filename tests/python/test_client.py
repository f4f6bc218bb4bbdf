"""firstpass.Client against a live server with real traces: every call returns what the REST
API returns, label filters and pagination, errors as FirstpassError, and the routes that
do not exist yet (suspects, jobs) skipped with the reason while the server answers 404."""
import gzip
import os
import unittest

from fptest import TRACES, Server, dead_server

import firstpass
from firstpass import FirstpassError

HTA = os.path.join(TRACES, "hta")
BASE = os.path.join(HTA, "trace_compare", "base", "base.json.gz")
TEST = os.path.join(HTA, "trace_compare", "test", "test.json.gz")
ADD = os.path.join(HTA, "critical_path", "simple_add", "benchmark_result_493459_1694039959_trace.json.gz")

try:
    import pandas
except ImportError:
    pandas = None


def no_route(e):
    """True when the server has no such route (not: no such session)."""
    return e.status == 404 and e.message.startswith("no route for ")


class ClientCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for p in (BASE, TEST, ADD):
            if not os.path.exists(p):
                raise unittest.SkipTest("no %s (../shared/data/traces)" % p)
        cls.srv = Server()
        cls.c = firstpass.Client(cls.srv.base + "/")
        cls.base = cls.c.upload(BASE, name="base", labels={"exp": "compare", "side": "base"})["id"]
        with open(TEST, "rb") as f:
            cls.test = cls.c.upload(f.read(), name="test", labels=["exp:compare", "side:test"])["id"]
        with open(ADD, "rb") as f:
            plain = gzip.decompress(f.read())
        cls.add = cls.c.upload(plain, name="simple add", labels={"model": "alexnet"})["id"]

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_upload_reply(self):
        r = self.c.upload(BASE, name="again")
        self.assertEqual(r["url"], "/api/v1/sessions/%d" % r["id"])
        self.assertEqual(r["events"], self.srv.json("/api/v1/sessions/%d" % self.base)["event_count"])
        self.c.delete(r["id"])
        with self.assertRaises(FirstpassError) as cm:
            self.c.session(r["id"])
        e = cm.exception
        self.assertEqual((e.status, e.code, e.message), (404, "not_found", "no session %d" % r["id"]))
        self.assertEqual(str(e), "GET /api/v1/sessions/%d: HTTP 404 not_found: no session %d" % (r["id"], r["id"]))

    def test_sessions_filters_and_pages(self):
        self.assertEqual([s["id"] for s in self.c.sessions(labels={"exp": "compare"})], [self.test, self.base])
        self.assertEqual([s["id"] for s in self.c.sessions(labels=["exp:compare", "side:base"])], [self.base])
        self.assertEqual([s["name"] for s in self.c.sessions(name="simple add")], ["simple add"])
        # one session a page: the client follows `next` to the end, or stops at limit
        every = [s["id"] for s in self.c.sessions()]
        self.assertEqual([s["id"] for s in self.c.sessions(page_size=1)], every)
        self.assertEqual([s["id"] for s in self.c.sessions(limit=2, page_size=1)], every[:2])
        self.assertEqual(self.c.sessions(limit=0), [])
        self.assertEqual(self.c.session(self.add)["labels"], {"model": "alexnet"})

    def test_tables_equal_the_api(self):
        q = "/api/v1/sessions/%d/" % self.add
        self.assertEqual(self.c.operators(self.add, sort="self_cpu_time_total", limit=5, kind="cpu_op"),
                         self.srv.json(q + "operators?sort=self_cpu_time_total&limit=5&kind=cpu_op")["operators"])
        self.assertEqual(len(self.c.operators(self.add, limit=3)), 3)
        self.assertEqual(self.c.kernels(self.add, sort="calls"), self.srv.json(q + "kernels?sort=calls")["kernels"])
        self.assertEqual(self.c.phases(self.add), self.srv.json(q + "phases")["phases"])
        self.assertEqual(self.c.report(self.add), self.srv.json(q + "report"))
        text = self.c.report(self.add, text=True)
        self.assertEqual(len(text.splitlines()), 5)
        self.assertTrue(text.startswith("Workload: simple add (model=alexnet)"), text)

    def test_compare_and_regressions(self):
        cmp = self.c.compare(self.base, self.test)
        self.assertEqual(cmp, self.srv.json("/api/v1/compare?base=%d&head=%d" % (self.base, self.test)))
        self.assertEqual((cmp["base"]["name"], cmp["head"]["name"]), ("base", "test"))
        self.c.request("PUT", "/api/v1/baselines/py-base", body=b'{"session_id":%d}' % self.base,
                       headers={"Content-Type": "application/json"}, expect=(200, 201))
        r = self.c.regressions(self.test, baseline="py-base", rel=0.5, abs_us=1)
        self.assertEqual((r["baseline"], r["base_session_id"], r["head_session_id"]), ("py-base", self.base, self.test))
        self.assertEqual(r["thresholds"]["rel"], 0.5)
        self.assertEqual(r, self.srv.json("/api/v1/sessions/%d/regressions?baseline=py-base&rel=0.5&abs_us=1" % self.test))
        with self.assertRaises(FirstpassError) as cm:
            self.c.regressions(self.test, baseline="nope")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

    def test_errors(self):
        with self.assertRaises(FirstpassError) as cm:
            self.c.operators(self.add, sort="bogus")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_parameter"))
        self.assertIn("sort must be one of", cm.exception.message)
        with self.assertRaises(FirstpassError) as cm:
            self.c.upload(b'{"foo":1}')
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "not_a_trace"))
        with self.assertRaises(FirstpassError) as cm:
            firstpass.Client(dead_server()).sessions()
        self.assertIsNone(cm.exception.status)
        self.assertIn("Connection refused", cm.exception.message)
        self.assertRaises(ValueError, firstpass.Client, "localhost:8080")
        self.assertRaises(ValueError, self.c.sessions, labels={"": "x"})

    def test_suspects(self):
        try:
            r = self.c.suspects(self.add)
        except FirstpassError as e:
            if no_route(e):
                self.skipTest("server has no suspects route yet (%s)" % e)
            raise
        self.assertIsInstance(r, dict)
        with self.assertRaises(FirstpassError) as cm:
            self.c.suspects(10 ** 9)
        self.assertEqual(cm.exception.status, 404)

    def test_jobs(self):
        try:
            jobs = self.c.jobs()
        except FirstpassError as e:
            if no_route(e):
                self.skipTest("server has no jobs route yet (%s)" % e)
            raise
        self.assertIsInstance(jobs, list)
        with self.assertRaises(FirstpassError) as cm:
            self.c.job("no such job/../x")
        self.assertEqual(cm.exception.status, 404)
        self.assertFalse(no_route(cm.exception), "a job name with '/' must stay one path segment")

    @unittest.skipIf(pandas is None, "pandas is not installed (apt-get install python3-pandas to test as_frame)")
    def test_frames(self):
        ops = self.c.operators(self.add, limit=10)
        df = self.c.operators(self.add, limit=10, as_frame=True)
        self.assertEqual(list(df["name"]), [r["name"] for r in ops])
        self.assertEqual(list(df["calls"]), [r["calls"] for r in ops])
        s = self.c.sessions(labels={"exp": "compare"}, as_frame=True)
        self.assertEqual(sorted(s["labels.side"]), ["base", "test"])
        self.assertEqual(len(self.c.kernels(self.add, as_frame=True)), len(self.c.kernels(self.add)))
        self.assertEqual(len(self.c.compare(self.base, self.test, as_frame=True)),
                         len(self.c.compare(self.base, self.test)["operators"]))
        self.assertEqual(len(self.c.sessions(name="nothing", as_frame=True)), 0)

    @unittest.skipIf(pandas is not None, "pandas is installed: test_frames runs instead")
    def test_frames_without_pandas(self):
        with self.assertRaises(ImportError) as cm:
            self.c.phases(self.add, as_frame=True)
        self.assertIn("as_frame=True needs pandas", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
