"""test_retention.py: retention on PostgreSQL, one replica at a time.

Run by tests/pg/run.sh with FIRSTPASS_TEST_PG set. Sessions are aged with psql (created_at
moved back 10 days). While another holder has the retention advisory lock (as a replica in
the middle of its pass would), a server started with --retain-days 5 skips its pass, logs it
and deletes nothing; once the lock is free the next server's pass prunes the old sessions
and keeps the pinned one (label pin:true) and the baseline's."""
import json
import os
import subprocess
import sys
import time
import unittest
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402
from test_replicas import psql, SIMPLE  # noqa: E402

RETENTION_LOCK = 0x66707265746e  # retention.c's RETENTION_LOCK ("fpretn")


class Retention(unittest.TestCase):
    def setUp(self):
        if not fpserver.PG:
            self.skipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")

    def test_one_pass_at_a_time_and_pins_kept(self):
        db = fpserver.pg_new_db()
        s = fpserver.Server(db=db)
        body = open(SIMPLE, "rb").read()
        old = s.upload_ok(body, "?name=old")
        pinned = s.upload_ok(body, "?name=pinned&label=pin:true")
        based = s.upload_ok(body, "?name=based")
        fresh = s.upload_ok(body, "?name=fresh")
        st, _, b = s.request("PUT", "/api/v1/baselines/keep", json.dumps({"session_id": based}).encode(),
                             {"Content-Type": "application/json"})
        self.assertEqual(st, 201, b)
        s.stop()
        psql(db, "UPDATE sessions SET created_at = created_at - 10 * 86400 WHERE id IN (%d, %d, %d)" % (old, pinned, based))

        holder = subprocess.Popen([os.path.join(fpserver.PGBIN, "psql"), "-X", "-q", db], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, text=True)
        try:
            holder.stdin.write("SELECT pg_advisory_lock(%d);\n" % RETENTION_LOCK)
            holder.stdin.flush()
            for _ in range(50):
                if psql(db, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") != "0":
                    break
                time.sleep(0.1)
            s2 = fpserver.Server("--retain-days", "5", db=db, quiet=False)
            time.sleep(1.0)
            s2.stop()
            log = open(s2.log.name).read()
            self.assertIn("another server runs one", log)
            self.assertEqual(psql(db, "SELECT count(*) FROM sessions"), "4")
        finally:
            holder.stdin.close()
            holder.wait(10)

        s3 = fpserver.Server("--retain-days", "5", db=db)
        try:
            for _ in range(50):
                if psql(db, "SELECT count(*) FROM sessions") == "3":
                    break
                time.sleep(0.1)
            ids = sorted(x["id"] for x in s3.json("/api/v1/sessions")["sessions"])
            self.assertEqual(ids, sorted([pinned, based, fresh]))
            self.assertEqual(s3.get("/api/v1/sessions/%d" % old)[0], 404)
        finally:
            s3.stop()


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
