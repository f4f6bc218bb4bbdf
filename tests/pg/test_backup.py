"""test_backup.py: backup and restore on PostgreSQL (docs/scale.md, "Backup and restore").

Run by tests/pg/run.sh with FIRSTPASS_TEST_PG set. A server's database with uploads, a
deletion, a report edit and a baseline is dumped with pg_dump -Fc while the server runs,
restored with pg_restore into a new database, and compared table by table (every row of
every table, fp_meta and fp_generation included) and through the API (a server on the
restored database answers as the original did). The sequence comes along: an upload to the
restored database gets an id above every id used before, the deleted one included. The
admin backup endpoint answers 403 backups_disabled on PostgreSQL and names pg_dump."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402
from test_replicas import psql, SIMPLE  # noqa: E402

BASE = os.path.join(fpserver.TRACES, "hta", "trace_compare", "base", "base.json.gz")


def tables(conninfo):
    return psql(conninfo, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1").split()


def digest(conninfo):
    """{table: (rows, md5 of its rows as text, sorted)} for every table."""
    out = {}
    for t in tables(conninfo):
        out[t] = psql(conninfo, "SELECT count(*) || ' ' || coalesce(md5(string_agg(x::text, E'\\n' ORDER BY x::text)), '-') FROM %s x" % t)
    return out


class BackupRestore(unittest.TestCase):
    def setUp(self):
        if not fpserver.PG:
            self.skipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")
        self.tmp = tempfile.mkdtemp(prefix="fp-pgbackup-")

    def test_pg_dump_restore_round_trip(self):
        db = fpserver.pg_new_db()
        s = fpserver.Server(db=db)
        try:
            a = s.upload_ok(open(SIMPLE, "rb").read(), "?name=simple&label=model:alexnet")
            b = s.upload_ok(open(BASE, "rb").read(), "?name=base&label=pin:true")
            c = s.upload_ok(open(SIMPLE, "rb").read(), "?name=gone")
            self.assertEqual(s.request("DELETE", "/api/v1/sessions/%d" % c)[0], 204)
            st, _, body = s.request("PUT", "/api/v1/sessions/%d/report" % a, json.dumps({"lines": {"workload": "edited"}}).encode(),
                                    {"Content-Type": "application/json"})
            self.assertEqual(st, 200, body)
            st, _, body = s.request("PUT", "/api/v1/baselines/main", json.dumps({"session_id": b}).encode(),
                                    {"Content-Type": "application/json"})
            self.assertEqual(st, 201, body)
            paths = ["/api/v1/sessions", "/api/v1/baselines"] + ["/api/v1/sessions/%d%s" % (i, p) for i in (a, b)
                                                                  for p in ("", "/operators", "/report", "/timeline", "/trace")]
            before = {p: s.get(p)[2] for p in paths}

            # the admin endpoint does not pretend: on PostgreSQL it points at pg_dump
            st, _, body = s.request("POST", "/api/v1/admin/backup")
            self.assertEqual(st, 403, body)
            err = json.loads(body)["error"]
            self.assertEqual(err["code"], "backups_disabled")
            self.assertIn("pg_dump", err["message"])

            dump = os.path.join(self.tmp, "firstpass.dump")
            subprocess.run([os.path.join(fpserver.PGBIN, "pg_dump"), "-Fc", "-f", dump, db], check=True)  # server running
        finally:
            s.stop()
        restored = fpserver.pg_new_db()
        subprocess.run([os.path.join(fpserver.PGBIN, "pg_restore"), "--no-owner", "-d", restored, dump], check=True)
        self.assertEqual(digest(restored), digest(db))
        self.assertEqual(psql(restored, "SELECT last_value FROM sessions_id_seq"), psql(db, "SELECT last_value FROM sessions_id_seq"))

        r = fpserver.Server(db=restored)
        try:
            for p, want in before.items():
                self.assertEqual(r.get(p)[2], want, p)
            d = r.upload_ok(open(SIMPLE, "rb").read(), "?name=after-restore")
            self.assertGreater(d, c)  # the deleted session's id is not reused
        finally:
            r.stop()


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
