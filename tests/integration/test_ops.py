"""Operations (issue 9): GET /metrics, retention (--retain-days, --max-db-bytes, pin:true,
baselines, the periodic pass, VACUUM), online backup and restore, the new flags' --help lines.

Sessions are aged by rewriting sessions.created_at with Python's sqlite3 (the server has no
clock knob): with the server stopped, then a restart runs the start-up pass; or live (WAL
lets another process write) for the periodic pass."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

from fpserver import Server, TRACES, SERVER, PG, sqlite_only

SIMPLE = os.path.join(TRACES, "hta", "critical_path", "simple_add", "benchmark_result_493459_1694039959_trace.json.gz")
BASE = os.path.join(TRACES, "hta", "trace_compare", "base", "base.json.gz")
DAY = 86400

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, ((k, v), ...)): value} of every sample; checks that each sample's family has
    a TYPE line before it (Prometheus text format 0.0.4)."""
    out, typed = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            typed[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name, labels, value = m.group(1), tuple(sorted(LABEL.findall(m.group(3) or ""))), float(m.group(4))
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in typed else name
        assert family in typed, "sample before its # TYPE: %r" % line
        out[(name, labels)] = value
    return out


def val(m, name, **labels):
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def db_used_bytes(path):
    con = sqlite3.connect(path)
    try:
        pc, fl, ps = (con.execute("PRAGMA %s" % p).fetchone()[0] for p in ("page_count", "freelist_count", "page_size"))
    finally:
        con.close()
    return (pc - fl) * ps


def age(path, ids, days):
    con = sqlite3.connect(path, timeout=30)
    try:
        con.executemany("UPDATE sessions SET created_at = created_at - ? WHERE id = ?", [(days * DAY, i) for i in ids])
        con.commit()
    finally:
        con.close()


def ids_in(path):
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT id FROM sessions"))
    finally:
        con.close()


def file_bytes(path):
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def wait_until(cond, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server()
        cls.raw = open(SIMPLE, "rb").read()
        cls.sid = cls.s.upload_ok(cls.raw, "?name=metrics")

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def scrape(self):
        st, h, body = self.s.get("/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(h["Content-Type"].startswith("text/plain; version=0.0.4"), h["Content-Type"])
        return parse_metrics(body.decode())

    def test_format_and_families(self):
        st, _, body = self.s.get("/metrics")
        text = body.decode()
        for name, kind in [("firstpass_uploads_total", "counter"), ("firstpass_ingest_bytes_total", "counter"),
                           ("firstpass_ingest_events_total", "counter"), ("firstpass_ingest_duration_seconds", "histogram"),
                           ("firstpass_http_requests_total", "counter"),
                           ("firstpass_http_request_duration_seconds", "histogram"),
                           ("firstpass_db_size_bytes", "gauge"), ("firstpass_sessions_stored", "gauge")]:
            self.assertIn("# HELP %s " % name, text)
            self.assertIn("# TYPE %s %s\n" % (name, kind), text)
        m = parse_metrics(text)
        self.assertGreater(val(m, "firstpass_db_size_bytes"), 0)
        self.assertEqual(val(m, "firstpass_sessions_stored"), len(self.s.json("/api/v1/sessions?limit=1000")["sessions"]))
        # HEAD works like GET (the dashboard's routes do too)
        st, _, _ = self.s.request("HEAD", "/metrics")
        self.assertEqual(st, 200)

    def test_upload_counters_move_exactly(self):
        m0 = self.scrape()
        st, _, reply = self.s.upload(self.raw, "?name=counted")
        self.assertEqual(st, 201)
        st2, _, _ = self.s.upload(b'{"traceEvents": [', "?name=broken")
        self.assertEqual(st2, 400)
        m1 = self.scrape()
        d = lambda name, **l: val(m1, name, **l) - val(m0, name, **l)
        self.assertEqual(d("firstpass_uploads_total", result="accepted"), 1)
        self.assertEqual(d("firstpass_uploads_total", result="rejected"), 1)
        self.assertEqual(d("firstpass_ingest_bytes_total"), len(self.raw))
        self.assertEqual(d("firstpass_ingest_events_total"), reply["events"])
        self.assertEqual(reply["events"], 1348)
        self.assertEqual(d("firstpass_ingest_duration_seconds_count"), 1)
        self.assertGreater(d("firstpass_ingest_duration_seconds_sum"), 0)
        self.assertEqual(d("firstpass_http_requests_total", route="/api/v1/sessions", method="POST", status="201"), 1)
        self.assertEqual(d("firstpass_http_requests_total", route="/api/v1/sessions", method="POST", status="400"), 1)
        self.assertEqual(d("firstpass_sessions_stored"), 1)

    def test_histogram_count_equals_requests(self):
        m0 = self.scrape()
        ops = "/api/v1/sessions/%d/operators" % self.sid
        for q in ("", "?limit=1", "?sort=calls"):
            self.assertEqual(self.s.get(ops + q)[0], 200)
        self.assertEqual(self.s.get("/api/v1/sessions/987654/operators")[0], 404)
        self.assertEqual(self.s.get("/api/v1/no/such/route")[0], 404)
        self.assertEqual(self.s.get("/index.html")[0], 200)
        m1 = self.scrape()
        d = lambda name, **l: val(m1, name, **l) - val(m0, name, **l)
        route = "/api/v1/sessions/{id}/operators"
        self.assertEqual(d("firstpass_http_requests_total", route=route, method="GET", status="200"), 3)
        self.assertEqual(d("firstpass_http_requests_total", route=route, method="GET", status="404"), 1)
        self.assertEqual(d("firstpass_http_request_duration_seconds_count", route=route), 4)
        self.assertEqual(d("firstpass_http_request_duration_seconds_bucket", route=route, le="+Inf"), 4)
        self.assertEqual(d("firstpass_http_requests_total", route="other", method="GET", status="404"), 1)
        self.assertEqual(d("firstpass_http_requests_total", route="static", method="GET", status="200"), 1)
        # the first scrape is counted once it is answered; the second is not yet
        self.assertEqual(d("firstpass_http_requests_total", route="/metrics", method="GET", status="200"), 1)
        # invariant over every route: histogram count == the sum of its request counters
        for (name, labels), v in m1.items():
            if name != "firstpass_http_request_duration_seconds_count":
                continue
            r = dict(labels)["route"]
            total = sum(x for (n, l), x in m1.items() if n == "firstpass_http_requests_total" and dict(l)["route"] == r)
            self.assertEqual(v, total, r)
            buckets = [x for (n, l), x in sorted(m1.items(), key=lambda kv: float(dict(kv[0][1]).get("le", "0").replace("+Inf", "inf")))
                       if n == "firstpass_http_request_duration_seconds_bucket" and dict(l)["route"] == r]
            self.assertEqual(buckets, sorted(buckets), r)  # cumulative
            self.assertEqual(buckets[-1], v, r)
        # the raw ids never become labels
        text = self.s.get("/metrics")[2].decode()
        self.assertNotIn("987654", text)
        self.assertNotIn("/api/v1/sessions/%d/" % self.sid, text)


@sqlite_only
class Retention(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.raw = open(SIMPLE, "rb").read()

    def tearDown(self):
        for s in self.servers:
            if s.proc.poll() is None:
                s.stop()

    def start(self, *flags, db=None):
        s = Server(*flags, db=db)
        self.servers.append(s)
        return s

    def log(self, s):
        with open(s.log.name) as f:
            return f.read()

    def test_retain_days_at_startup_keeps_pinned_and_baselines(self):
        s = self.start()
        pinned = s.upload_ok(self.raw, "?name=pinned&label=pin:true")
        old = s.upload_ok(self.raw, "?name=old%20one")
        based = s.upload_ok(self.raw, "?name=baseline")
        notpin = s.upload_ok(self.raw, "?name=pin-false&label=pin:false")
        fresh = s.upload_ok(self.raw, "?name=fresh")
        st, _, b = s.request("PUT", "/api/v1/baselines/keep", json.dumps({"session_id": based}).encode(),
                             {"Content-Type": "application/json"})
        self.assertIn(st, (200, 201), b)
        s.stop()
        age(s.db, [pinned, old, based, notpin], 10)
        age(s.db, [fresh], 4)  # inside the window
        s2 = self.start("--retain-days", "5", db=s.db)
        self.assertTrue(wait_until(lambda: s2.get("/api/v1/sessions/%d" % notpin)[0] == 404), self.log(s2))
        self.assertTrue(wait_until(lambda: s2.get("/api/v1/sessions/%d" % old)[0] == 404), self.log(s2))
        self.assertEqual(sorted(x["id"] for x in s2.json("/api/v1/sessions?limit=100")["sessions"]), [pinned, based, fresh])
        m = parse_metrics(s2.get("/metrics")[2].decode())
        self.assertEqual(val(m, "firstpass_retention_pruned_total", reason="age"), 2)
        s2.stop()
        log = self.log(s2)
        lines = [l for l in log.splitlines() if "msg=pruned" in l]
        self.assertEqual(len(lines), 2, log)
        self.assertRegex(lines[0], r'^level=info msg=pruned session=%d name="old one" reason=age created_at=\d+ age_days=10\.\d '
                                   r'used_bytes=\d+$' % old)
        self.assertIn("session=%d " % notpin, lines[1])

    def test_retain_days_periodic_pass(self):
        s = self.start("--retain-days", "2", "--retain-interval", "1")
        a = s.upload_ok(self.raw, "?name=a")
        b = s.upload_ok(self.raw, "?name=b")
        time.sleep(1.2)
        self.assertEqual(s.get("/api/v1/sessions/%d" % a)[0], 200)  # nothing is old yet
        age(s.db, [a], 3)  # live: WAL lets this process write while the server runs
        self.assertTrue(wait_until(lambda: s.get("/api/v1/sessions/%d" % a)[0] == 404, 10), self.log(s))
        self.assertEqual(s.get("/api/v1/sessions/%d" % b)[0], 200)

    def test_max_db_bytes_prunes_oldest_first_until_under(self):
        s = self.start()
        pinned = s.upload_ok(self.raw, "?name=p&label=pin:true")
        rest = [s.upload_ok(self.raw, "?name=s%d" % i) for i in range(4)]
        s.stop()
        used = db_used_bytes(s.db)
        limit = used - 1  # one session over: exactly the oldest unpinned must go
        s2 = self.start("--max-db-bytes", str(limit), db=s.db)
        self.assertTrue(wait_until(lambda: s2.get("/api/v1/sessions/%d" % rest[0])[0] == 404), self.log(s2))
        s2.stop()
        self.assertEqual(ids_in(s.db), [pinned] + rest[1:])
        self.assertLessEqual(db_used_bytes(s.db), limit)
        self.assertIn("reason=size", self.log(s2))

    def test_max_db_bytes_never_prunes_pinned(self):
        s = self.start()
        pinned = s.upload_ok(self.raw, "?name=p&label=pin:true")
        for i in range(3):
            s.upload_ok(self.raw, "?name=s%d" % i)
        s.stop()
        s2 = self.start("--max-db-bytes", "1", db=s.db)
        self.assertTrue(wait_until(lambda: "every session left is pinned" in self.log(s2)), self.log(s2))
        self.assertEqual([x["id"] for x in s2.json("/api/v1/sessions")["sessions"]], [pinned])
        s2.stop()

    def vacuum_run(self, vacuum_min):
        s = self.start()
        for i in range(6):
            s.upload_ok(self.raw, "?name=v%d" % i)
        s.stop()
        con = sqlite3.connect(s.db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        before = file_bytes(s.db)
        s2 = self.start("--max-db-bytes", "1", "--vacuum-min-bytes", vacuum_min, db=s.db)
        self.assertTrue(wait_until(lambda: not s2.json("/api/v1/sessions")["sessions"]), self.log(s2))
        if vacuum_min != "0":
            self.assertTrue(wait_until(lambda: "msg=vacuum " in self.log(s2)), self.log(s2))
        else:
            time.sleep(0.5)
        s2.stop()
        con = sqlite3.connect(s.db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        return before, file_bytes(s.db), self.log(s2)

    def test_vacuum_gives_space_back(self):
        before, after, log = self.vacuum_run("1")
        self.assertLess(after, before / 2, log)
        self.assertRegex(log, r"level=info msg=vacuum bytes_before=\d+ bytes_after=\d+")

    def test_no_vacuum_when_off(self):
        before, after, log = self.vacuum_run("0")
        self.assertNotIn("msg=vacuum", log)
        self.assertGreaterEqual(after, before * 0.9)  # freed pages stay in the file, for reuse


@sqlite_only
class Backup(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.tmp = tempfile.mkdtemp(prefix="fp-backup-")

    def tearDown(self):
        for s in self.servers:
            if s.proc.poll() is None:
                s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *flags, db=None):
        s = Server(*flags, db=db)
        self.servers.append(s)
        return s

    def tables(self, s):
        out = {}
        for x in s.json("/api/v1/sessions?limit=100")["sessions"]:
            i = x["id"]
            out[i] = {"session": s.json("/api/v1/sessions/%d" % i),
                      "operators": s.json("/api/v1/sessions/%d/operators?limit=10000" % i),
                      "by_shape": s.json("/api/v1/sessions/%d/operators?limit=10000&group_by=input_shape" % i),
                      "kernels": s.json("/api/v1/sessions/%d/kernels?limit=10000" % i),
                      "report": s.get("/api/v1/sessions/%d/report?format=text" % i)[2]}
        return out

    def test_backup_and_restore(self):
        s = self.start()
        a = s.upload_ok(open(SIMPLE, "rb").read(), "?name=simple&label=model:alexnet")
        s.upload_ok(open(BASE, "rb").read(), "?name=base&label=pin:true")
        st, _, b = s.request("DELETE", "/api/v1/sessions/%d" % a)
        self.assertEqual(st, 204, b)
        s.upload_ok(open(SIMPLE, "rb").read(), "?name=again")
        st, _, body = s.request("POST", "/api/v1/admin/backup")
        self.assertEqual(st, 201, body)
        r = json.loads(body)
        self.assertEqual(set(r), {"path", "bytes", "sessions"})
        self.assertEqual(os.path.dirname(r["path"]), os.path.realpath(os.path.join(os.path.dirname(s.db), "backups")))
        self.assertRegex(os.path.basename(r["path"]), r"^firstpass-\d{8}T\d{6}Z\.db$")
        self.assertEqual(r["bytes"], os.path.getsize(r["path"]))
        self.assertEqual(r["sessions"], 2)
        self.assertFalse(os.path.exists(r["path"] + ".part"))
        self.assertFalse(os.path.exists(r["path"] + "-wal"))  # one self-contained file
        con = sqlite3.connect(r["path"])
        self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        con.close()
        # a second backup in the same second gets its own name
        st2, _, body2 = s.request("POST", "/api/v1/admin/backup")
        self.assertEqual(st2, 201, body2)
        self.assertNotEqual(json.loads(body2)["path"], r["path"])
        want = self.tables(s)
        # the restore procedure (README): stop, copy the backup over the database, start
        s.stop()
        restored = os.path.join(self.tmp, "restored.db")
        shutil.copyfile(r["path"], restored)
        s2 = self.start(db=restored)
        got = self.tables(s2)
        self.assertEqual(sorted(got), sorted(want))
        self.assertEqual(got, want)
        # a deleted id stays unused after the restore (AUTOINCREMENT travels with the copy)
        self.assertGreater(s2.upload_ok(open(SIMPLE, "rb").read()), max(want))

    def test_backup_dir_flag_wins_over_env_and_is_created(self):
        flag_dir = os.path.join(self.tmp, "x", "y")
        os.environ["FIRSTPASS_BACKUP_DIR"] = os.path.join(self.tmp, "from-env")
        try:
            s = self.start("--backup-dir", flag_dir)
            s_env = self.start()
        finally:
            del os.environ["FIRSTPASS_BACKUP_DIR"]
        st, _, body = s.request("POST", "/api/v1/admin/backup")
        self.assertEqual(st, 201, body)
        self.assertEqual(os.path.dirname(json.loads(body)["path"]), os.path.realpath(flag_dir))
        self.assertEqual(json.loads(body)["sessions"], 0)
        st, _, body = s_env.request("POST", "/api/v1/admin/backup")
        self.assertEqual(st, 201, body)
        self.assertEqual(os.path.dirname(json.loads(body)["path"]), os.path.realpath(os.path.join(self.tmp, "from-env")))

    def test_backups_disabled(self):
        s = self.start("--backup-dir", "none")
        st, _, body = s.request("POST", "/api/v1/admin/backup")
        self.assertEqual(st, 403, body)
        self.assertEqual(json.loads(body)["error"]["code"], "backups_disabled")
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(s.db), "backups")))
        st, h, _ = s.request("GET", "/api/v1/admin/backup")
        self.assertEqual(st, 405)
        self.assertEqual(h["Allow"], "POST")

    def test_concurrent_backups_one_at_a_time(self):
        """Several at once: each is a 201 with its own file or a 409 backup_running, never
        anything else (which of them overlap depends on timing)."""
        s = self.start()
        raw = open(SIMPLE, "rb").read()
        for i in range(8):
            s.upload_ok(raw, "?name=c%d" % i)
        results = []

        def one():
            st, _, body = s.request("POST", "/api/v1/admin/backup")
            results.append((st, json.loads(body)))
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ok = [b["path"] for st, b in results if st == 201]
        self.assertTrue(ok, results)
        self.assertEqual(len(set(ok)), len(ok))
        for st, b in results:
            self.assertIn(st, (201, 409), b)
            if st == 409:
                self.assertEqual(b["error"]["code"], "backup_running")


class Flags(unittest.TestCase):
    def test_help_lists_flags_and_env(self):
        out = subprocess.run([SERVER, "--help"], capture_output=True, text=True, check=True).stdout
        for flag, env in [("--retain-days", "FIRSTPASS_RETAIN_DAYS"), ("--max-db-bytes", "FIRSTPASS_MAX_DB_BYTES"),
                          ("--retain-interval", "FIRSTPASS_RETAIN_INTERVAL"), ("--vacuum-min-bytes", "FIRSTPASS_VACUUM_MIN_BYTES"),
                          ("--backup-dir", "FIRSTPASS_BACKUP_DIR")]:
            self.assertRegex(out, r"\n  %s " % flag)
            self.assertIn("[%s]" % env, out)

    def test_sizes_accept_suffixes_and_env(self):
        env = dict(os.environ, FIRSTPASS_MAX_DB_BYTES="1x")
        p = subprocess.run([SERVER, "--port", "1", "--db", "/nonexistent/x.db"], env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("max-db-bytes", p.stderr)
        s = Server("--max-db-bytes", "5G", "--retain-days", "30")
        try:
            self.assertTrue(s.alive())
        finally:
            s.stop()
        with open(s.log.name) as f:
            self.assertIn("max_db_bytes=5368709120", f.read())


if __name__ == "__main__":
    unittest.main()
