"""test_deploy.py: what a deployment (a container, a Kubernetes pod) relies on at start-up and
in its probes (issue 53): one server per SQLite file, the scratch directory checked at start,
/livez and /readyz, the version with its git revision, the schema migration on one log line,
a newer schema refused with the fix, and FIRSTPASS_<NAME>_FILE for secrets."""
import json
import os
import re
import sqlite3
import subprocess
import tempfile
import time
import unittest

from fpserver import ROOT, SERVER, SQLITE_NEWEST, SQLITE_UNDO_NEWEST, Server, free_port, sqlite_only


def tiny(name="aten::mm"):
    return json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}).encode()


def run_until_exit(args, env=None, cwd=None, wait=20):
    """Runs the server expecting it to exit by itself within `wait` s: (exit code, stdout,
    stderr). A server still running then is killed and the test fails on its code (None)."""
    p = subprocess.Popen([SERVER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    try:
        out, err = p.communicate(timeout=wait)
        return p.returncode, out.decode(), err.decode()
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out.decode(), err.decode()


class OneServerPerFile(unittest.TestCase):
    @sqlite_only
    def test_a_second_server_on_the_same_file_refuses_to_start(self):
        """Two servers on one SQLite file both started, and the second served stale replies
        from its reply cache (a session deleted through the first still 200 through it: the
        write generation is in each process). The second now exits 1, naming the lock, its
        holder and the fix; the first keeps serving; once the first is gone (SIGKILL: the
        kernel drops the lock) a new server starts on the file and serves it."""
        a = Server(quiet=False)
        try:
            sid = a.upload_ok(tiny())
            code, out, err = run_until_exit(["--port", str(free_port()), "--db", a.db, "--static", os.path.join(ROOT, "static")], wait=15)
            self.assertEqual(code, 1, "the second server did not exit: " + err[-2000:])
            self.assertIn("another firstpass-server serves this SQLite file", err)
            self.assertIn(a.db + "-lock", err)
            self.assertIn("pid=%d" % a.proc.pid, err)
            self.assertIn("One server per SQLite file", err)
            self.assertEqual(out, "")
            self.assertEqual(a.request("DELETE", "/api/v1/sessions/%d" % sid)[0], 204)
            self.assertEqual(a.get("/api/v1/sessions/%d" % sid)[0], 404)
            a.proc.kill()
            a.proc.wait(10)
            b = Server(db=a.db)
            try:
                self.assertEqual(b.get("/api/v1/sessions/%d" % sid)[0], 404)
                self.assertEqual(b.json("/api/v1/sessions")["sessions"], [])
            finally:
                b.stop()
        finally:
            a.stop()


class Probes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_livez_names_the_build_and_readyz_the_database(self):
        live = self.srv.json("/livez")
        self.assertEqual(live["status"], "ok")
        self.assertEqual(live["version"], "0.1.0")
        self.assertRegex(live["revision"], r"^([0-9a-f]{12}(-dirty)?|unknown)$")
        ready = self.srv.json("/readyz")
        self.assertEqual(ready, self.srv.json("/healthz"))
        self.assertTrue(ready["database"]["reachable"])
        for path in ("/livez", "/readyz"):
            st, h, _ = self.srv.request("POST", path)
            self.assertEqual((st, h.get("Allow")), (405, "GET"), path)

    def test_version_names_the_git_revision(self):
        """Every build said `firstpass-server 0.1.0`: which commit an image runs could not be
        told. A build from a git checkout names its commit; /livez says the same."""
        out = subprocess.run([SERVER, "--version"], capture_output=True, text=True, check=True).stdout
        m = re.fullmatch(r"firstpass-server 0\.1\.0 \(revision (\S+)\)\n", out)
        self.assertTrue(m, out)
        self.assertEqual(m.group(1), self.srv.json("/livez")["revision"])
        # a commit of this repository (the binary may be a few commits behind the checkout)
        if subprocess.run(["git", "-C", ROOT, "rev-parse", "--git-dir"], capture_output=True).returncode == 0:
            rev = m.group(1).replace("-dirty", "")
            self.assertEqual(subprocess.run(["git", "-C", ROOT, "cat-file", "-e", rev + "^{commit}"], capture_output=True).returncode,
                             0, "revision %s is no commit of %s" % (rev, ROOT))


class StartUp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fp-deploy-")

    def test_an_unwritable_scratch_directory_stops_the_start(self):
        """With a read-only root file system and nothing mounted on /tmp, the server started,
        /healthz said 200, and every upload was a 500 (`cannot create a scratch file`). It now
        exits 1 at once, saying where and what to mount."""
        env = dict(os.environ, TMPDIR=os.path.join(self.dir, "no", "such", "dir"))
        code, out, err = run_until_exit(["--port", str(free_port()), "--db", os.path.join(self.dir, "db.sqlite")], env=env, wait=15)
        self.assertEqual(code, 1, err[-2000:])
        self.assertIn("the scratch directory is not writable", err)
        self.assertIn("TMPDIR", err)
        self.assertIn("emptyDir", err)
        self.assertIn('dir="%s"' % env["TMPDIR"], err)
        self.assertEqual(out, "")

    def test_db_from_a_file_and_both_refused(self):
        """FIRSTPASS_<NAME>_FILE: a secret (a PostgreSQL URI with its password) mounted as a
        file, never on the command line; its first line is the value. Both set: exit 2."""
        db = os.path.join(self.dir, "from-file.sqlite")
        secret = os.path.join(self.dir, "db-secret")
        with open(secret, "w") as f:
            f.write(db + "\n")
        port = free_port()
        env = dict(os.environ, FIRSTPASS_DB_FILE=secret, FIRSTPASS_PORT=str(port))
        env.pop("FIRSTPASS_DB", None)
        p = subprocess.Popen([SERVER, "--quiet"], env=env, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            ok = False
            for _ in range(100):
                if os.path.exists(db) and subprocess.run(["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:%d/readyz" % port]).returncode == 0:
                    ok = True
                    break
                time.sleep(0.1)
            self.assertTrue(ok, "the server did not open the file FIRSTPASS_DB_FILE names")
            self.assertFalse(os.path.exists(os.path.join(self.dir, "var")), "it opened the default var/firstpass.db instead")
        finally:
            p.terminate()
            p.wait(30)
        env["FIRSTPASS_DB"] = db
        code, _, err = run_until_exit(["--port", str(free_port())], env=env, cwd=self.dir)
        self.assertEqual(code, 2, err)
        self.assertIn("FIRSTPASS_DB and FIRSTPASS_DB_FILE are both set", err)
        env.pop("FIRSTPASS_DB")
        env["FIRSTPASS_DB_FILE"] = os.path.join(self.dir, "missing")
        code, _, err = run_until_exit(["--port", str(free_port())], env=env, cwd=self.dir)
        self.assertEqual(code, 2, err)
        self.assertIn("FIRSTPASS_DB_FILE: cannot read", err)


    def test_a_kubernetes_service_link_in_firstpass_port_is_named(self):
        """A Service named firstpass makes Kubernetes give every pod of its namespace
        FIRSTPASS_PORT=tcp://IP:8080 (service links), which the server reads as its port:
        exit 2, and the message says where it came from and the two fixes."""
        env = dict(os.environ, FIRSTPASS_PORT="tcp://10.96.0.12:8080")
        code, out, err = run_until_exit(["--db", os.path.join(self.dir, "db.sqlite")], env=env)
        self.assertEqual(code, 2, err)
        self.assertIn("--port: 'tcp://10.96.0.12:8080' is not a number", err)
        self.assertIn("enableServiceLinks: false", err)


class Migrations(unittest.TestCase):
    NEWEST = SQLITE_NEWEST

    def make_db(self):
        """A database written by this server, then stopped: its path."""
        s = Server()
        s.upload_ok(tiny())
        s.stop()
        return s.db

    @sqlite_only
    def test_an_upgrade_logs_its_migration(self):
        """The schema migration at start was silent: an operator could not tell from the log
        that an upgrade had changed the database (and that a rollback needs the backup taken
        before). The version before the newest -> the newest is logged before it runs and each
        step when it commits; a start on a current database says so too."""
        db = self.make_db()
        con = sqlite3.connect(db)
        con.executescript(SQLITE_UNDO_NEWEST + "PRAGMA user_version=%d;" % (self.NEWEST - 1))
        con.close()
        s = Server(db=db, quiet=False)
        try:
            self.assertEqual(s.get("/api/v1/targets")[0], 200)
        finally:
            s.stop()
        log = open(s.log.name).read()
        self.assertRegex(log, r'level=info msg="migrating the database schema[^"]*" backend=sqlite from=%d to=%d steps=1\n' % (self.NEWEST - 1, self.NEWEST))
        self.assertRegex(log, r'level=info msg="schema migration step committed" backend=sqlite from=%d to=%d\n' % (self.NEWEST - 1, self.NEWEST))
        s2 = Server(db=db, quiet=False)
        s2.stop()
        self.assertRegex(open(s2.log.name).read(), r'msg="database schema is current" backend=sqlite version=%d\n' % self.NEWEST)

    @sqlite_only
    def test_a_newer_schema_is_refused_with_the_fix(self):
        """A downgrade (an older image on a volume a newer one migrated) is refused: exit 1,
        both versions, and what to do (run the newer server, or restore the backup)."""
        db = self.make_db()
        con = sqlite3.connect(db)
        con.execute("PRAGMA user_version=99")
        con.close()
        code, out, err = run_until_exit(["--port", str(free_port()), "--db", db])
        self.assertEqual(code, 1, err)
        self.assertIn("database schema version 99 is newer than this server's %d" % self.NEWEST, err)
        self.assertIn("restore the backup taken before the upgrade", err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    unittest.main()
