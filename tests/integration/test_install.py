"""make install (issue 9): `make install DESTDIR=tmp PREFIX=/usr` with the BUILD dir of the
server under test puts the server, the dashboard files and the collector's files (those that
were built) in place, and the installed server starts with the installed static dir."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from fpserver import ROOT, SERVER, free_port


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build = os.path.relpath(os.path.dirname(os.path.abspath(SERVER)), ROOT)
        cls.dest = tempfile.mkdtemp(prefix="fp-install-")
        # -o all: install what this BUILD holds, never rebuild it here (an ASan BUILD would be
        # rebuilt without its sanitizer flags, which only its own make line knows).
        p = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "-o", "all", "BUILD=" + cls.build, "install",
                            "DESTDIR=" + cls.dest, "PREFIX=/usr"], capture_output=True, text=True)
        cls.make = p

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dest, "usr", *p)

    def test_files(self):
        self.assertEqual(self.make.returncode, 0, self.make.stdout[-3000:] + self.make.stderr[-3000:])
        self.assertTrue(os.access(self.path("bin", "firstpass-server"), os.X_OK))
        built_upload = os.path.exists(os.path.join(ROOT, self.build, "firstpass-upload"))
        self.assertEqual(os.access(self.path("bin", "firstpass-upload"), os.X_OK), built_upload)
        self.assertTrue(os.path.isfile(self.path("share", "firstpass", "static", "index.html")))
        for f in os.listdir(os.path.join(ROOT, "static")):
            self.assertTrue(os.path.exists(self.path("share", "firstpass", "static", f)), f)
        built_lib = os.path.exists(os.path.join(ROOT, self.build, "libfirstpass-cupti.so"))
        self.assertEqual(os.path.isfile(self.path("lib", "libfirstpass-cupti.so")), built_lib)
        if not built_lib:
            self.assertIn("was not built (no CUPTI): not installed", self.make.stdout)
        # nothing escapes DESTDIR/PREFIX
        self.assertEqual(sorted(os.listdir(self.dest)), ["usr"])
        if built_upload:
            up = subprocess.run([self.path("bin", "firstpass-upload"), "--help"], capture_output=True, text=True)
            self.assertEqual(up.returncode, 0, up.stderr)

    def test_installed_server_starts_with_installed_static(self):
        self.assertEqual(self.make.returncode, 0, self.make.stderr[-3000:])
        tmp = tempfile.mkdtemp(prefix="fp-install-run-")
        port = free_port()
        log = open(os.path.join(tmp, "log"), "w")
        proc = subprocess.Popen([self.path("bin", "firstpass-server"), "--port", str(port), "--db", os.path.join(tmp, "db.sqlite"),
                                 "--static", self.path("share", "firstpass", "static")], stdout=log, stderr=subprocess.STDOUT)
        try:
            base = "http://127.0.0.1:%d" % port
            body = None
            for _ in range(100):
                try:
                    body = urllib.request.urlopen(base + "/", timeout=5).read()
                    break
                except OSError:
                    if proc.poll() is not None:
                        break
                    time.sleep(0.05)
            self.assertIsNotNone(body, open(log.name).read())
            self.assertIn(b"<html", body.lower())
            with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
                self.assertEqual(r.status, 200)
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
