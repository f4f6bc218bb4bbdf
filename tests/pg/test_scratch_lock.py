"""test_scratch_lock.py: uploads on PostgreSQL never fail on the scratch file's lock.

Run by tests/pg/run.sh (make test-pg) with FIRSTPASS_TEST_PG set to a throwaway cluster.
On PostgreSQL the upload's scratch workspace is a private SQLite connection
(store_scratch_get) that its analysis jobs read beside from connections of their own
(analysis/analyze.c). That connection had no busy timeout, so its COMMIT while a job's
statement held a shared lock failed at once: 500 "analysis failed: database is locked",
and the failed COMMIT kept its pending lock while the upload waited for the job, whose
reads then waited 30 s each (an upload timed out). CI of stop 29 lost 66 uploads so, under
load; here the 76f0c42 binary failed within the first 200 uploads of this small stepped
trace on an idle machine, then hung. SCRATCH_LOCK_UPLOADS sets how many (default 200,
about 2 s)."""
import json
import os
import sys
import time
import unittest
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402

UPLOADS = int(os.environ.get("SCRATCH_LOCK_UPLOADS", "200"))


def stepped_trace():
    """One ProfilerStep with 20 aten::mm launches and their kernels: the step breakdown's
    and the GPU facts' jobs both run beside the upload's own connection."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    for i in range(20):
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 + i * 40, "dur": 30})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": 12 + i * 40, "dur": 10, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20 + i * 40, "dur": 25,
                   "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    return json.dumps({"traceEvents": ev}).encode()


class ScratchLock(unittest.TestCase):
    def test_stepped_uploads_are_all_201(self):
        if not fpserver.PG:
            self.skipTest("FIRSTPASS_TEST_PG is not set (tests/pg/run.sh sets it)")
        srv = fpserver.Server(db=fpserver.pg_new_db())
        data = stepped_trace()
        bad = []
        t0 = time.time()
        try:
            for i in range(UPLOADS):
                st, _, b = srv.upload(data, "?name=s%d" % i)
                if st != 201:
                    bad.append((i, st, b))
                    if len(bad) >= 3:
                        break
        finally:
            srv.stop()
        print("%d uploads in %.1f s" % (UPLOADS, time.time() - t0), file=sys.stderr)
        self.assertEqual(bad, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
