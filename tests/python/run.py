"""Runs every tests/python/test_*.py (or the pattern in argv[1]) with unittest; ends with the
plain 'N passed, M failed' line and exits 1 on any failure or error."""
import os
import sys
import time
import unittest
import warnings

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
warnings.simplefilter("ignore", ResourceWarning)

t0 = time.time()
suite = unittest.defaultTestLoader.discover(here, pattern=sys.argv[1] if len(sys.argv) > 1 else "test_*.py")
res = unittest.TextTestRunner(verbosity=2).run(suite)
# a test whose subtests fail is one failed test (res.failures holds one entry per subtest)
failed = len({getattr(t, "test_case", t).id() for t, _ in res.failures + res.errors})
passed = res.testsRun - failed - len(res.skipped)
print("test-python: %d passed, %d failed, %d skipped in %.1f s" % (passed, failed, len(res.skipped), time.time() - t0))
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 and res.testsRun > 0 else 1)
