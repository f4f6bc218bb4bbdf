"""test_replicas.py: three firstpass servers (A, B, C) on one PostgreSQL database.

Run by tests/pg/run.sh (make test-pg) with FIRSTPASS_TEST_PG set to a throwaway cluster.
  * identical: traces uploaded through A read through B and C give, byte for byte, the replies
    a single SQLite server gives for the same uploads (tests/replies/snapshot.py's list of
    reads and its blanking of wall-clock fields);
  * delete: a session deleted through C is gone through A at once, though A had its replies
    cached (the shared write generation, store.c);
  * kill: SIGKILL of A in the middle of an upload's body, and again right after the body,
    leaves no partial session (every table checked with psql) and B keeps serving;
  * load: REPLICA_UPLOADERS (16) threads x REPLICA_UPLOADS (50) uploads spread over A, B
    and C: no 5xx, and every 201's id is stored exactly once with its own label.
REPLICA_TRACES limits the traces of the identical check (default: all of them)."""
import json
import warnings
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "replies"))
import fpserver  # noqa: E402
import snapshot  # noqa: E402

SIMPLE = os.path.join(fpserver.TRACES, "hta", "critical_path", "simple_add", "benchmark_result_493459_1694039959_trace.json.gz")
TABLES = ["sessions", "labels", "strings", "operators", "kernels", "phases", "analysis", "report_edits", "event_chunks",
          "timeline_buckets", "baselines", "baseline_labels"]


def psql(conninfo, sql):
    out = subprocess.run([os.path.join(fpserver.PGBIN, "psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", conninfo, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def counts(conninfo):
    """Rows of every table, and rows whose session is missing (none can be: foreign keys)."""
    return {t: int(psql(conninfo, "SELECT count(*) FROM %s" % t)) for t in TABLES}


def take(upload, readers, out, files):
    """snapshot.take with the uploads through `upload` and each read through the next of `readers`."""
    os.makedirs(out, exist_ok=True)
    n = [0]

    def reader():
        n[0] += 1
        return readers[n[0] % len(readers)]

    for i, f in enumerate(files, 1):
        with open(f, "rb") as fh:
            body = fh.read()
        st, h, b = upload.request("POST", "/api/v1/sessions?name=%s&label=case:%d" % (os.path.basename(f)[:60], i), body)
        snapshot.save(out, "%02d_upload" % i, st, h, b)
        if st != 201:
            continue
        sid = json.loads(b)["id"]
        for p in snapshot.PER_SESSION:
            st, h, b = reader().get("/api/v1/sessions/%d%s" % (sid, p))
            snapshot.save(out, "%02d_%s" % (i, snapshot.fname(p)), st, h, b)
        st, h, b = reader().get("/api/v1/sessions/%d/trace" % sid)
        snapshot.save(out, "%02d_trace" % i, st, h, b)
    for r in readers:
        for p in ["/api/v1/sessions?limit=100", "/api/v1/sessions?format=csv&limit=100", "/api/v1/sessions?label=case:3",
                  "/api/v1/compare?base=2&head=3", "/api/v1/trends?label=case:2&limit=5", "/api/v1/jobs"]:
            st, h, b = r.get(p)
            snapshot.save(out, "all_%d_%s" % (readers.index(r), snapshot.fname(p)), st, h, b)


class Replicas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not fpserver.PG:
            raise unittest.SkipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")
        cls.tmp = tempfile.mkdtemp(prefix="fp-replicas-")
        cls.db = fpserver.pg_new_db()
        cls.flags = ("--max-uploads", "16")
        cls.a = fpserver.Server(*cls.flags, db=cls.db)
        cls.b = fpserver.Server(*cls.flags, db=cls.db)
        cls.c = fpserver.Server(*cls.flags, db=cls.db)

    @classmethod
    def tearDownClass(cls):
        for s in (cls.a, cls.b, cls.c):
            if s.proc.poll() is None:
                s.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_1_reads_through_b_and_c_match_one_sqlite_server(self):
        files = snapshot.traces()
        if os.environ.get("REPLICA_TRACES"):
            files = files[:int(os.environ["REPLICA_TRACES"])]
        self.assertTrue(files, "no traces under %s" % fpserver.TRACES)
        lite = fpserver.Server(db=os.path.join(self.tmp, "single.sqlite"))
        try:
            take(lite, [lite], os.path.join(self.tmp, "sqlite"), files)
        finally:
            lite.stop()
        take(self.a, [self.b, self.c], os.path.join(self.tmp, "pg"), files)
        # The cross-session reads were taken once per reader: B's and C's against the one server's.
        for n in os.listdir(os.path.join(self.tmp, "pg")):
            if n.startswith("all_0_"):
                shutil.copy(os.path.join(self.tmp, "sqlite", n), os.path.join(self.tmp, "sqlite", "all_1_" + n[6:]))
        a, b = os.path.join(self.tmp, "sqlite"), os.path.join(self.tmp, "pg")
        if snapshot.diff(a, b):
            for n in sorted(os.listdir(a))[:0] + [n for n in sorted(os.listdir(a)) if open(os.path.join(a, n), "rb").read()
                                                   != open(os.path.join(b, n), "rb").read()][:3]:
                subprocess.run(["diff", os.path.join(a, n), os.path.join(b, n)])
            self.fail("replies differ between one SQLite server and the PostgreSQL replicas")

    def test_2_delete_through_c_is_gone_through_a_at_once(self):
        sid = self.a.upload_ok(open(SIMPLE, "rb").read(), "?name=to-delete&label=del:1")
        for _ in range(2):  # the second read is served from A's reply cache
            self.assertEqual(self.a.get("/api/v1/sessions/%d" % sid)[0], 200)
            self.assertIn(sid, [s["id"] for s in self.a.json("/api/v1/sessions?label=del:1")["sessions"]])
        st, _, b = self.c.request("DELETE", "/api/v1/sessions/%d" % sid)
        self.assertEqual(st, 204, b)
        self.assertEqual(self.a.get("/api/v1/sessions/%d" % sid)[0], 404)
        self.assertEqual(self.a.get("/api/v1/sessions/%d/operators" % sid)[0], 404)
        self.assertNotIn(sid, [s["id"] for s in self.a.json("/api/v1/sessions?label=del:1")["sessions"]])
        # and an upload through B is in A's (cached) list at once
        sid2 = self.b.upload_ok(open(SIMPLE, "rb").read(), "?name=new&label=del:1")
        self.assertIn(sid2, [s["id"] for s in self.a.json("/api/v1/sessions?label=del:1")["sessions"]])

    def kill_a_during_upload(self, after_body):
        body = open(SIMPLE, "rb").read()
        big = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::op%d" % (i % 50), "pid": 1, "tid": 1,
                                           "ts": i * 10, "dur": 5} for i in range(200000)]}).encode()
        before = counts(self.db)
        s = socket.create_connection(("127.0.0.1", self.a.port))
        s.sendall(b"POST /api/v1/sessions?name=killed HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(big))
        if after_body:
            s.sendall(big)
            time.sleep(0.3)  # parsing, analysing or committing
        else:
            s.sendall(big[:len(big) // 2])
            time.sleep(0.2)
        self.a.proc.send_signal(signal.SIGKILL)
        self.a.proc.wait(10)
        s.close()
        fpserver._live.discard(self.a.proc)
        after = counts(self.db)
        if after_body and after["sessions"] == before["sessions"] + 1:
            # the commit won the race: the session is whole
            sid = max(x["id"] for x in self.b.json("/api/v1/sessions?limit=5")["sessions"])
            for p in ("", "/operators", "/timeline", "/trace", "/report"):
                self.assertEqual(self.b.get("/api/v1/sessions/%d%s" % (sid, p))[0], 200, p)
        else:
            self.assertEqual(after, before)
        # no transaction of A's is left holding locks
        self.assertEqual(psql(self.db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                       " AND state LIKE 'idle in transaction%'"), "0")
        self.assertEqual(self.b.get("/api/v1/sessions")[0], 200)
        self.b.upload_ok(body, "?name=after-kill")
        self.__class__.a = fpserver.Server(*self.flags, db=self.db)  # A comes back on the same database

    def test_3_sigkill_of_a_mid_body_leaves_nothing(self):
        self.kill_a_during_upload(after_body=False)

    def test_4_sigkill_of_a_after_the_body_leaves_nothing_partial(self):
        self.kill_a_during_upload(after_body=True)

    def test_5_uploaders_over_three_replicas(self):
        uploaders = int(os.environ.get("REPLICA_UPLOADERS", "16"))
        per = int(os.environ.get("REPLICA_UPLOADS", "50"))
        body = open(SIMPLE, "rb").read()
        servers = [self.a, self.b, self.c]
        got, bad, lock = [], [], threading.Lock()

        def run(u):
            for j in range(per):
                srv = servers[(u + j) % 3]
                try:
                    st, _, b = srv.upload(body, "?name=load&label=load:%d-%d" % (u, j))
                except OSError as e:
                    st, b = 0, str(e)
                with lock:
                    (got if st == 201 else bad).append((u, j, st, b))

        t0 = time.time()
        threads = [threading.Thread(target=run, args=(u,)) for u in range(uploaders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        secs = time.time() - t0
        print("\nreplicas: %d uploads in %.1f s (%.1f/s), %d not 201" % (uploaders * per, secs, uploaders * per / secs, len(bad)))
        self.assertEqual([x for x in bad if not x[2] or x[2] >= 500], [])
        ids = [x[3]["id"] for x in got]
        self.assertEqual(len(ids), len(set(ids)), "an id was answered twice")
        rows = psql(self.db, "SELECT s.id, l.value FROM sessions s JOIN labels l ON l.session_id = s.id AND l.key = 'load'")
        stored = {}
        for line in rows.splitlines():
            i, v = line.split("|")
            stored.setdefault(int(i), []).append(v)
        for u, j, _, b in got:
            self.assertEqual(stored.get(b["id"]), ["%d-%d" % (u, j)])
        self.assertEqual(len(stored), len(got), "a session is stored that no 201 announced")
        # every replica lists them all
        for srv in servers:
            n, cursor = 0, None
            while True:
                page = srv.json("/api/v1/sessions?name=load&limit=500" + ("&next=%s" % cursor if cursor else ""))
                n += len(page["sessions"])
                cursor = page["next"]
                if not cursor:
                    break
            self.assertEqual(n, len(got))


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
