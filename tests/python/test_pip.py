"""`pip install ./python` offline (--no-index: no package index is asked for anything): into a
--target directory and into a fresh venv, then `pip install -e` there; the installed package is
the source tree's; the in-tree build backend's wheels."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from fptest import PKG_SRC

sys.path.insert(0, os.path.join(PKG_SRC, "_build"))
import backend  # noqa: E402

OFFLINE = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
OFFLINE.pop("PYTHONPATH", None)
CHECK = ("import firstpass, json, sys; "
         "print(json.dumps([firstpass.__version__, firstpass.__file__, callable(firstpass.trace_handler(name='x'))]))")


def version():
    return backend._project()["version"]


class Install(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-install-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_ok(self, *cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=OFFLINE, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, "%s\n%s\n%s" % (" ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
        return r.stdout

    def check(self, python, where, extra_path=None):
        import json
        env = dict(OFFLINE)
        if extra_path:
            env["PYTHONPATH"] = extra_path
        r = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, timeout=60, env=env, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        ver, path, ok = json.loads(r.stdout)
        self.assertEqual(ver, version())
        self.assertTrue(path.startswith(where), (path, where))
        self.assertTrue(ok)

    def test_pip_target(self):
        t = os.path.join(self.tmp, "target")
        self.run_ok(sys.executable, "-m", "pip", "install", "--no-index", "--target", t, PKG_SRC)
        self.assertEqual(sorted(os.listdir(t)), ["firstpass", "firstpass-%s.dist-info" % version()])
        shipped = sorted(f for f in os.listdir(os.path.join(t, "firstpass")) if f.endswith(".py"))
        source = sorted(f for f in os.listdir(os.path.join(PKG_SRC, "firstpass")) if f.endswith(".py"))
        self.assertEqual(shipped, source)
        self.check(sys.executable, t, t)

    def test_pip_in_a_venv(self):
        v = os.path.join(self.tmp, "venv")
        self.run_ok(sys.executable, "-m", "venv", v)
        self.run_ok(os.path.join(v, "bin", "pip"), "install", "--no-index", PKG_SRC)
        self.check(os.path.join(v, "bin", "python"), v)
        out = self.run_ok(os.path.join(v, "bin", "pip"), "show", "firstpass")
        self.assertIn("Version: %s" % version(), out)
        self.assertIn("Requires: \n", out + "\n")
        # pip install -e: the venv imports the source tree
        self.run_ok(os.path.join(v, "bin", "pip"), "install", "--no-index", "-e", PKG_SRC)
        self.check(os.path.join(v, "bin", "python"), PKG_SRC)

    def test_backend_wheels(self):
        name = backend.build_wheel(self.tmp)
        self.assertEqual(name, "firstpass-%s-py3-none-any.whl" % version())
        with zipfile.ZipFile(os.path.join(self.tmp, name)) as z:
            names = z.namelist()
            meta = z.read("firstpass-%s.dist-info/METADATA" % version()).decode()
            record = z.read("firstpass-%s.dist-info/RECORD" % version()).decode()
        self.assertIn("firstpass/__init__.py", names)
        self.assertIn("Requires-Python: >=3.8", meta)
        self.assertEqual(len(record.strip().splitlines()), len(names))
        ed = backend.build_editable(self.tmp)
        with zipfile.ZipFile(os.path.join(self.tmp, ed)) as z:
            self.assertEqual(z.read("firstpass.pth").decode().strip(), PKG_SRC)

    def test_python_3_8_grammar(self):
        """requires-python >= 3.8: every file of the package and the backend parses as 3.8."""
        import ast
        files = [os.path.join(PKG_SRC, "_build", "backend.py")] + [
            os.path.join(PKG_SRC, "firstpass", f) for f in os.listdir(os.path.join(PKG_SRC, "firstpass")) if f.endswith(".py")]
        for path in files:
            with self.subTest(path=os.path.relpath(path, PKG_SRC)), open(path, encoding="utf-8") as f:
                ast.parse(f.read(), path, feature_version=(3, 8))

    def test_pyproject_read_like_tomllib(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib is Python >= 3.11")
        with open(os.path.join(PKG_SRC, "pyproject.toml"), "rb") as f:
            real = tomllib.load(f)
        p = backend._project()
        for k in ("name", "version", "description", "requires-python"):
            self.assertEqual(p[k], real["project"][k], k)
        self.assertEqual(real["build-system"]["requires"], [])
        import firstpass
        self.assertEqual(firstpass.__version__, p["version"])


if __name__ == "__main__":
    unittest.main()
