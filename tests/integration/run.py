"""Runs every tests/integration/test_*.py with unittest and ends with the plain
'N passed, M failed' line; exit status 1 on any failure or error."""
import os
import sys
import unittest
import warnings

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
warnings.simplefilter("ignore", ResourceWarning)


class Counting(unittest.TextTestResult):
    """Counts subtests one by one, so a table of traces is a row of results."""
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed_sub = 0
        self.failed_sub = 0

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            self.passed_sub += 1
        else:
            self.failed_sub += 1


suite = unittest.defaultTestLoader.discover(here, pattern=sys.argv[1] if len(sys.argv) > 1 else "test_*.py")
runner = unittest.TextTestRunner(verbosity=2, resultclass=Counting)
res = runner.run(suite)
failed = len(res.failures) + len(res.errors)
passed = res.testsRun - failed - len(res.skipped)
print("integration: %d passed, %d failed, %d skipped (%d subtests passed, %d failed)"
      % (passed, failed, len(res.skipped), res.passed_sub, res.failed_sub))
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 else 1)
