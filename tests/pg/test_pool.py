"""test_pool.py: slow downloads on PostgreSQL do not take the connection pool (issue 43).

Run by tests/pg/run.sh (make test-pg) with FIRSTPASS_TEST_PG set to a throwaway cluster.
A 48 MB download (bench/gen_trace.c, -s 60M) is read by 16 clients at 20 KB/s each
(tests/reliability/hostile_slow.py read), as many as the server's pool holds
(FIRSTPASS_PG_POOL, default 16). Meanwhile /healthz, a session read, a list and an upload
must each answer within POOL_MAX_S (default 2) seconds. Before: each download held a pooled
connection (its cursor's transaction) for its whole life, so every other request waited
FIRSTPASS_PG_POOL_WAIT_MS (10 s) for one and got 503 database_unreachable, /healthz
included: a load balancer dropped the replica for as long as the client trickled.
After: a download takes a connection for each fetch of 4 chunks only, and /healthz pings on
a connection of its own. The 16 downloads are checked to make progress, and a download that
runs to its end is checked whole against the same one read at full speed."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402

SLOW = os.path.join(os.path.dirname(HERE), "reliability", "hostile_slow.py")
MAX_S = float(os.environ.get("POOL_MAX_S", "2"))
READERS = 16


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


class Pool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not fpserver.PG:
            raise unittest.SkipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")
        cls.tmp = tempfile.mkdtemp(prefix="fp-pool-")
        gen = os.path.join(cls.tmp, "gen_trace")
        subprocess.run(["cc", "-O2", "-o", gen, os.path.join(fpserver.ROOT, "bench", "gen_trace.c")], check=True)
        cls.trace = os.path.join(cls.tmp, "big.json")
        subprocess.run([gen, "-s", "60M", "-o", cls.trace], check=True, capture_output=True)
        cls.small = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                                                 "ts": 1, "dur": 2}]}).encode()

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.tmp])

    def test_trickling_downloads_leave_the_pool_to_others(self):
        srv = fpserver.Server()
        readers = None
        try:
            with open(self.trace, "rb") as f:
                sid = srv.upload_ok(f.read(), "?name=big")
            env = dict(os.environ, READ_RATE="20000", READ_PATH="/api/v1/sessions/%d/trace" % sid)
            readers = subprocess.Popen([sys.executable, SLOW, "read", str(srv.port), str(READERS), "25"], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(3)  # every download has started and filled its buffers
            slow = []
            for what, fn in [("/healthz", lambda: srv.get("/healthz")[0]),
                             ("GET /sessions/{id}", lambda: srv.get("/api/v1/sessions/%d" % sid)[0]),
                             ("GET /sessions", lambda: srv.get("/api/v1/sessions?limit=5")[0]),
                             ("GET /operators", lambda: srv.get("/api/v1/sessions/%d/operators?limit=3" % sid)[0]),
                             ("POST /sessions", lambda: srv.upload(self.small, "?name=small")[0]),
                             ("/healthz again", lambda: srv.get("/healthz")[0])]:
                st, secs = timed(fn)
                print("  %s: %d in %.2f s" % (what, st, secs), file=sys.stderr)
                self.assertIn(st, (200, 201), "%s answered %d while %d downloads trickle" % (what, st, READERS))
                if secs > MAX_S:
                    slow.append("%s %.1f s" % (what, secs))
            self.assertEqual(slow, [], "waited for the pool while %d downloads trickle" % READERS)
            out, _ = readers.communicate(timeout=60)
            readers = None
            lines = out.strip().splitlines()
            self.assertEqual(len(lines), READERS, out)
            for line in lines:  # each kept, each reading at its pace (20 KB/s x 25 s, buffers aside)
                self.assertTrue(line.startswith("open HTTP/1.1 200"), line)
                self.assertGreater(int(line.split("bytes=")[1].split()[0]), 200000, line)
            st, _, whole = srv.get("/api/v1/sessions/%d/trace" % sid)
            self.assertEqual(st, 200)
            doc = json.loads(whole)
            self.assertEqual(len([e for e in doc["traceEvents"] if not e.get("args", {}).get("firstpass_synthesized")]),
                             srv.json("/api/v1/sessions/%d" % sid)["event_count"])
        finally:
            if readers:
                readers.kill()
                readers.wait()
            srv.stop()

    def test_healthz_does_not_wait_for_the_pool(self):
        """A pool of one connection, held by a read that waits on a table lock another
        session keeps for 8 s: /healthz answers 200 at once. Before: it waited for the pool
        (8 s here, FIRSTPASS_PG_POOL_WAIT_MS at most, then 503)."""
        old = {k: os.environ.get(k) for k in ("FIRSTPASS_PG_POOL", "FIRSTPASS_PG_POOL_WAIT_MS")}
        os.environ.update(FIRSTPASS_PG_POOL="1", FIRSTPASS_PG_POOL_WAIT_MS="10000")
        try:
            srv = fpserver.Server()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        locker = held = None
        try:
            sid = srv.upload_ok(self.small, "?name=one")
            self.assertEqual(srv.get("/healthz")[0], 200)  # its own connection is open now: what is timed is the wait
            locker = subprocess.Popen([os.path.join(fpserver.PGBIN, "psql"), "-X", "-q", srv.db, "-c",
                                       "BEGIN; LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(8); COMMIT"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # the lock is taken
            held = subprocess.Popen(["curl", "-s", "-o", "/dev/null", "--max-time", "30",
                                     "%s/api/v1/sessions/%d" % (srv.base, sid)])
            time.sleep(1)  # the read has the pool's one connection, waiting on the lock
            st, secs = timed(lambda: srv.get("/healthz")[0])
            print("  /healthz with the pool's one connection held: %d in %.2f s" % (st, secs), file=sys.stderr)
            self.assertEqual(st, 200)
            self.assertLess(secs, MAX_S, "/healthz waited for the pool")
        finally:
            for p in (locker, held):
                if p:
                    p.wait(30)
            srv.stop()


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
