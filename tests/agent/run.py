"""Runs every tests/agent/test_*.py (or those matching argv[1]), each file in a process of its
own and all at once: the tests mostly wait (settle times, a slow flush), so side by side they
take about as long as the slowest file. Ends with the plain 'N passed, M failed' line and
exits 1 on any failure or error."""
import fnmatch
import json
import os
import subprocess
import sys
import time
import unittest
import warnings

here = os.path.dirname(os.path.abspath(__file__))

if len(sys.argv) > 2 and sys.argv[1] == "--one":
    # one file, in this process: its result as the last line of stdout
    sys.path.insert(0, here)
    warnings.simplefilter("ignore", ResourceWarning)
    suite = unittest.defaultTestLoader.discover(here, pattern=sys.argv[2])
    res = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    print(json.dumps({"run": res.testsRun, "failed": len(res.failures) + len(res.errors), "skipped": len(res.skipped)}))
    sys.exit(0)

t0 = time.time()
pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
files = sorted(f for f in os.listdir(here) if fnmatch.fnmatch(f, pattern) and f.startswith("test_") and f.endswith(".py"))
procs = [(f, subprocess.Popen([sys.executable, "-B", __file__, "--one", f], stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
         for f in files]
passed = failed = skipped = 0
for f, p in procs:
    out = p.communicate()[0].decode("utf-8", "replace")
    lines = out.rstrip().split("\n")
    try:
        r = json.loads(lines[-1])
    except ValueError:
        r = {"run": 1, "failed": 1, "skipped": 0}
    sys.stdout.write("== %s\n%s\n" % (f, "\n".join(lines[:-1]) if r["failed"] == 0 else out))
    failed += r["failed"]
    skipped += r["skipped"]
    passed += r["run"] - r["failed"] - r["skipped"]
print("test-agent: %d passed, %d failed, %d skipped in %.1f s" % (passed, failed, skipped, time.time() - t0))
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 and passed > 0 else 1)
