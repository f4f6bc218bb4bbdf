"""test_download_memory.py: GET /sessions/{id}/trace on PostgreSQL streams with bounded memory.

Run by tests/pg/run.sh (make test-pg) with FIRSTPASS_TEST_PG set to a throwaway cluster.
A generated trace (bench/gen_trace.c, DLMEM_EVENTS events, default 600,000: about 7 MB of
compressed event chunks) is uploaded, the server restarted on the same database (so that
the upload's own peak is not in the measure), one small read made (thread stacks, caches),
and the whole trace downloaded. The server's peak RSS (VmHWM, /proc) may grow by at most
DLMEM_BOUND_MB (default 6) during the download. Before the cursor (db_prepare_stream) the
first step fetched every chunk into one PGresult as hex text: +15.7 MB at 600,000 events
(+9.4 MB at 300,000), growing with the session; with it, +2.4 MB whatever the size."""
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.request
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402
from test_replicas import psql  # noqa: E402

EVENTS = int(os.environ.get("DLMEM_EVENTS", "600000"))
BOUND_MB = float(os.environ.get("DLMEM_BOUND_MB", "6"))


def vm(pid, key):
    """A /proc/PID/status figure in kB (VmHWM: the peak resident set)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


class DownloadMemory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not fpserver.PG:
            raise unittest.SkipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")
        cls.tmp = tempfile.mkdtemp(prefix="fp-dlmem-")
        gen = os.path.join(cls.tmp, "gen_trace")
        subprocess.run(["cc", "-O2", "-o", gen, os.path.join(fpserver.ROOT, "bench", "gen_trace.c")], check=True)
        cls.trace = os.path.join(cls.tmp, "big.json.gz")
        subprocess.run([gen, "-n", str(EVENTS), "-z", "-o", cls.trace], check=True, capture_output=True)
        cls.db = fpserver.pg_new_db()

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.tmp])

    def test_download_peak_rss_is_bounded(self):
        srv = fpserver.Server(db=self.db)
        try:
            with open(self.trace, "rb") as f:
                sid = srv.upload_ok(f.read(), "?name=big")
        finally:
            srv.stop()
        stored = int(psql(self.db, "SELECT sum(length(data)) FROM event_chunks WHERE session_id = %d" % sid))
        events = int(psql(self.db, "SELECT event_count FROM sessions WHERE id = %d" % sid))
        srv = fpserver.Server(db=self.db)
        try:
            self.assertEqual(srv.get("/api/v1/sessions/%d" % sid)[0], 200)
            before = vm(srv.proc.pid, "VmHWM")
            n = 0
            with urllib.request.urlopen(srv.base + "/api/v1/sessions/%d/trace" % sid, timeout=300) as r:
                self.assertEqual(r.status, 200)
                while True:
                    b = r.read(1 << 20)
                    if not b:
                        break
                    n += len(b)
            grew = (vm(srv.proc.pid, "VmHWM") - before) / 1024.0
        finally:
            srv.stop()
        print("download: %d events, %.1f MB stored in event_chunks, %.1f MB sent, peak RSS +%.1f MB"
              % (events, stored / 1e6, n / 1e6, grew), file=sys.stderr)
        self.assertGreater(n, stored, "the download is shorter than the stored chunks")
        # the whole result, as hex text, would be twice this: the trace must be big enough to tell
        self.assertGreater(stored, BOUND_MB * 1e6, "the trace is too small to tell (DLMEM_EVENTS)")
        self.assertLess(grew, BOUND_MB, "peak RSS grew by %.1f MB during a download of %.1f MB of chunks" % (grew, stored / 1e6))


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
