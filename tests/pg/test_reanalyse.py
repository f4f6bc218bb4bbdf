"""test_reanalyse.py: re-analysis on PostgreSQL with several replicas (issue 52).

Run by tests/pg/run.sh with FIRSTPASS_TEST_PG set. Sessions are stored through one server
and marked as analysed by version 0 with psql (what a database from before analysis versions
holds); then replicas started with --reanalyse-on-start and a 3 s lease share the work:
  * a replica killed in the middle of a session's re-analysis leaves that session readable
    with its old analysis; the other replicas take it over once its claim has expired;
  * every session is re-analysed exactly once (one "re-analysed" log line across all
    replicas: the claim in the database keeps two replicas off one session), and its replies
    are then those of its first upload;
  * a POST /reanalyse through one replica while another holds the claim is 409."""
import os
import signal
import sys
import time
import unittest
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402
from test_replicas import psql  # noqa: E402
from test_reanalyse import CONTROL, JSON_READS, NSYS, RESNET, SIMPLE, body, reads, without_versions  # noqa: E402

LEASE = ("--reanalyse-lease", "3")


def log_of(srv):
    with open(srv.log.name) as f:
        return f.read()


def wait(cond, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return False


class Replicas(unittest.TestCase):
    def setUp(self):
        if not fpserver.PG:
            self.skipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")

    def test_one_replica_a_session_and_a_dead_one_is_taken_over(self):
        db = fpserver.pg_new_db()
        s = fpserver.Server(db=db)
        files = [RESNET, CONTROL, RESNET, SIMPLE, NSYS, CONTROL]
        ids = [s.upload_ok(body(f), "?name=r%d" % i) for i, f in enumerate(files)]
        want = {i: reads(s, i, JSON_READS) for i in ids}
        s.stop()
        psql(db, "UPDATE sessions SET analysis_version = 0")
        # A alone first: killed in the middle of its first session
        a = fpserver.Server("--reanalyse-on-start", *LEASE, db=db, quiet=False)
        self.assertTrue(wait(lambda: "re-analysis started" in log_of(a), 120), log_of(a)[-2000:])
        held = int(log_of(a).split("re-analysis started\" session=")[1].split()[0])
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(30)
        fpserver._live.discard(a.proc)
        a.log.close()
        done_by_a = log_of(a).count("msg=re-analysed ")
        b = fpserver.Server(*LEASE, db=db, quiet=False)  # no worker: a reader, and a POST
        replicas = [b]
        try:
            if "msg=re-analysed session=%d " % held not in log_of(a):
                self.assertEqual(b.json("/api/v1/sessions/%d" % held)["analysis_version"], 0)
                got = reads(b, held, JSON_READS)
                for p in JSON_READS:
                    self.assertEqual(without_versions(got[p][1]), without_versions(want[held][p][1]), p)
                st, _, rb = b.request("POST", "/api/v1/sessions/%d/reanalyse" % held, b"")
                if st != 200:  # the dead replica's claim, until its lease runs out
                    self.assertEqual(st, 409, rb)
            # B and C with workers: they share what is left, the held one once its claim expired
            b.stop()
            replicas = [fpserver.Server("--reanalyse-on-start", *LEASE, db=db, quiet=False) for _ in range(2)]
            current = replicas[0].json("/api/v1/sessions/%d" % ids[0])["current_analysis_version"]
            self.assertTrue(wait(lambda: all(replicas[0].json("/api/v1/sessions/%d" % i)["analysis_version"] == current for i in ids), 600),
                            [log_of(r)[-2000:] for r in replicas])
            logs = log_of(a) + log_of(b) + "".join(log_of(r) for r in replicas)
            for i in ids:  # each exactly once, whoever did it
                n = logs.count("msg=re-analysed session=%d " % i)
                # (A's COMMIT may land after the SIGKILL, with its log line never written)
                self.assertIn(n, (0, 1) if i == held else (1,), (i, done_by_a, [ln for ln in logs.splitlines() if "session=%d " % i in ln]))
                got = reads(replicas[1], i, JSON_READS)
                for p in JSON_READS:
                    self.assertEqual(without_versions(got[p][1]), without_versions(want[i][p][1]), (i, p))
            self.assertEqual(psql(db, "SELECT count(*) FROM reanalysis"), "0")
        finally:
            for r in replicas:
                if r.proc.poll() is None:
                    r.stop()


if __name__ == "__main__":
    unittest.main()
