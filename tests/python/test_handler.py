"""trace_handler against a live server: the real torch.profiler upload (its operator table
equals key_averages()), the spool when the server is down and firstpass-upload delivering it,
refused uploads, and failures that must never reach the training loop."""
import gzip
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest
from unittest import mock

from fptest import (REPORT_KEYS, UPLOAD, Server, SilentServer, StubProfiler, assert_matches_key_averages,
                    captured, dead_server, profile_run, read_doc)

import firstpass
from firstpass import handler as handler_mod

TOKEN = "py-test-token-0123456789abcdef"
CLEAN_ENV = {k: "" for k in ("FIRSTPASS_SERVER", "FIRSTPASS_TOKEN", "FIRSTPASS_LABELS", "FIRSTPASS_NAME",
                             "FIRSTPASS_SPOOL", "FIRSTPASS_QUIET", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")}


def clean_env(**extra):
    env = dict(CLEAN_ENV)
    env.update(extra)
    return mock.patch.dict(os.environ, env)


class Upload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.client = firstpass.Client(cls.srv.base)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_profile_upload_matches_key_averages(self):
        h = firstpass.trace_handler(server=self.srv.base, name="mlp-handler", labels={"model": "mlp"})
        with clean_env(), captured() as (out, err):
            prof = profile_run(h)
        self.assertEqual(err.getvalue(), "")
        self.assertEqual(h.last["outcome"], "uploaded", h.last)
        sid = h.last["session_id"]
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "firstpass: uploaded session %d (%s bytes gzip): %s/session.html?id=%d"
                         % (sid, lines[0].split("(")[1].split()[0], self.srv.base, sid))
        self.assertEqual(len(lines), 6, lines)
        for line, key in zip(lines[1:], REPORT_KEYS):
            self.assertTrue(line.startswith(key), (line, key))
        self.assertEqual("\n".join(lines[1:]) + "\n", self.client.report(sid, text=True))

        s = self.client.session(sid)
        self.assertEqual(s["name"], "mlp-handler")
        import torch
        self.assertEqual(s["labels"]["model"], "mlp")
        self.assertEqual(s["labels"]["torch"], torch.__version__)
        self.assertIn("host", s["labels"])
        rows = self.client.operators(sid, limit=10000, sort="cpu_time_total")
        self.assertGreater(assert_matches_key_averages(self, prof, rows), 8)
        phases = {p["name"]: p for p in self.client.phases(sid)}
        self.assertEqual(phases["forward"]["count"], 3)
        self.assertEqual(phases["post"]["count"], 3)

    def test_kineto_trace_goes_in_unchanged(self):
        """torch >= 2 exports Kineto objects: the handler's document gives the same tables as
        the file uploaded as is (a real GPU trace from ../shared/data/traces)."""
        from fptest import TRACES
        path = os.path.join(TRACES, "hta", "critical_path", "simple_add",
                            "benchmark_result_493459_1694039959_trace.json.gz")
        if not os.path.exists(path):
            self.skipTest("no %s (../shared/data/traces)" % path)
        with open(path, "rb") as f:
            raw = gzip.decompress(f.read())
        plain = self.srv.upload_ok(raw, "?name=plain")
        h = firstpass.trace_handler(server=self.srv.base, name="kineto-handler", labels=["exp:k2"])
        with clean_env(), captured():
            h(StubProfiler(raw))
        self.assertEqual(h.last["outcome"], "uploaded", h.last)
        mine = h.last["session_id"]
        for what in ("operators?limit=10000", "kernels?limit=10000", "phases", "gpu"):
            a = self.srv.json("/api/v1/sessions/%d/%s" % (plain, what))
            b = self.srv.json("/api/v1/sessions/%d/%s" % (mine, what))
            self.assertEqual(a, b, what)
        s = self.client.session(mine)
        self.assertEqual((s["name"], s["labels"]["exp"], s["source"]), ("kineto-handler", "k2", "firstpass"))
        self.assertEqual(s["event_count"], self.client.session(plain)["event_count"])

    def test_quiet(self):
        h = firstpass.trace_handler(server=self.srv.base, name="quiet")
        with clean_env(FIRSTPASS_QUIET="1"), captured() as (out, err):
            profile_run(h, steps=3, active=1)
        self.assertEqual((out.getvalue(), err.getvalue()), ("", ""))
        self.assertEqual(h.last["outcome"], "uploaded")

    def test_environment_defaults(self):
        """FIRSTPASS_SERVER, FIRSTPASS_NAME and FIRSTPASS_LABELS are read when the trace is ready;
        labels= wins over FIRSTPASS_LABELS on the same key."""
        h = firstpass.trace_handler(labels={"b": "arg"})
        with clean_env(FIRSTPASS_SERVER=self.srv.base, FIRSTPASS_NAME="from-env",
                       FIRSTPASS_LABELS="a:env,b:env,url:http://x:1"), captured():
            profile_run(h, steps=3, active=1)
        s = self.client.session(h.last["session_id"])
        self.assertEqual(s["name"], "from-env")
        self.assertEqual((s["labels"]["a"], s["labels"]["b"], s["labels"]["url"]), ("env", "arg", "http://x:1"))


class Spool(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-spool-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def upload_spool(self, srv, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([UPLOAD, "--server", srv.base, *args], capture_output=True, text=True, timeout=60, env=e)

    def test_server_down_spools_and_firstpass_upload_delivers(self):
        d = os.path.join(self.tmp, "state", "spool")
        down = dead_server()
        h = firstpass.trace_handler(server=down, name="spooled-run", labels={"model": "mlp"}, spool=d)
        with clean_env(), captured() as (out, err):
            prof = profile_run(h)
        self.assertEqual(out.getvalue(), "")
        self.assertEqual(h.last["outcome"], "spooled", h.last)
        line = err.getvalue()
        self.assertEqual(line.count("\n"), 1, line)
        self.assertRegex(line, r"^firstpass: server %s unreachable \(.*\); session spooled to %s/session-.*\.json\.gz "
                         r"\(send later: firstpass-upload --server %s --spool %s\)\n$"
                         % (re.escape(down), re.escape(d), re.escape(down), re.escape(d)))
        # The collector's layout: 0700 directories (each one created), 0600 file, its name, no tmp left.
        for p in (os.path.join(self.tmp, "state"), d):
            self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o700, p)
        files = os.listdir(d)
        self.assertEqual(len(files), 1, files)
        self.assertRegex(files[0], r"^session-[A-Za-z0-9._-]+-%d-\d{19}-0\.json\.gz$" % os.getpid())
        self.assertEqual(stat.S_IMODE(os.stat(h.last["path"]).st_mode), 0o600)
        doc = read_doc(h.last["path"])
        self.assertEqual(doc["firstpass"]["format"], "firstpass-session")
        self.assertEqual(doc["firstpass"]["name"], "spooled-run")
        self.assertEqual(doc["firstpass"]["labels"]["model"], "mlp")
        self.assertEqual(doc["firstpass"]["trace_format"], "legacy")

        srv = Server()
        try:
            r = self.upload_spool(srv, "--spool", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("spool %s: 1 sent, 0 failed" % d, r.stdout)
            self.assertEqual(os.listdir(d), [])
            c = firstpass.Client(srv.base)
            (s,) = c.sessions()
            self.assertEqual(s["name"], "spooled-run")
            self.assertEqual(s["labels"]["model"], "mlp")
            self.assertIn("torch", s["labels"])
            assert_matches_key_averages(self, prof, c.operators(s["id"], limit=10000))
        finally:
            srv.stop()

    def test_default_directories_agree_with_firstpass_upload(self):
        """No server, no spool=: the package spools where firstpass-upload looks by default,
        under XDG_STATE_HOME and under FIRSTPASS_SPOOL."""
        cases = [("xdg", {"XDG_STATE_HOME": os.path.join(self.tmp, "xdg"), "FIRSTPASS_SPOOL": ""},
                  os.path.join(self.tmp, "xdg", "firstpass", "spool")),
                 ("env", {"FIRSTPASS_SPOOL": os.path.join(self.tmp, "mine")}, os.path.join(self.tmp, "mine"))]
        srv = Server()
        try:
            for label, env, where in cases:
                with self.subTest(label):
                    h = firstpass.trace_handler(name="dflt-" + label)
                    with clean_env(**env), captured() as (_, err):
                        h(StubProfiler(b'[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]'))
                    self.assertEqual(h.last["outcome"], "spooled", err.getvalue())
                    self.assertIn("FIRSTPASS_SERVER not set; session spooled to %s/" % where, err.getvalue())
                    r = self.upload_spool(srv, env=env)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("spool %s: 1 sent, 0 failed" % where, r.stdout)
            names = sorted(s["name"] for s in firstpass.Client(srv.base).sessions())
            self.assertEqual(names, ["dflt-env", "dflt-xdg"])
        finally:
            srv.stop()


class Refused(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="fp-py-auth-")
        tokens = os.path.join(cls.dir, "tokens")
        with open(tokens, "w") as f:
            f.write("# test\nci %s\n" % TOKEN)
        cls.srv = Server("--tokens-file", tokens, "--read-auth")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_handler(self, token):
        d = os.path.join(self.dir, "spool-%s" % token)
        h = firstpass.trace_handler(server=self.srv.base, name="auth", spool=d, token=token)
        with clean_env(), captured() as (out, err):
            profile_run(h, steps=3, active=1)
        return h, out.getvalue(), err.getvalue()

    def test_no_token_401_is_spooled_not_raised(self):
        h, out, err = self.run_handler(None)
        self.assertEqual(h.last["outcome"], "spooled")
        self.assertEqual(out, "")
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("firstpass: server answered HTTP 401 unauthorized: POST needs an Authorization: Bearer token; "
                      "session spooled to ", err)
        # the spooled file goes in later with the token
        r = subprocess.run([UPLOAD, "--server", self.srv.base, "--token", TOKEN, "--spool", os.path.dirname(h.last["path"])],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_unknown_token_403(self):
        h, _, err = self.run_handler("not-the-token-0000000")
        self.assertEqual(h.last["outcome"], "spooled")
        self.assertIn("server answered HTTP 403 forbidden: this bearer token is not accepted here", err)

    def test_token_from_environment_reads_too(self):
        """FIRSTPASS_TOKEN goes with the upload and with the report's GET (--read-auth)."""
        h = firstpass.trace_handler(server=self.srv.base, name="auth-env")
        with clean_env(FIRSTPASS_TOKEN=TOKEN), captured() as (out, err):
            profile_run(h, steps=3, active=1)
        self.assertEqual(err.getvalue(), "")
        self.assertEqual(h.last["outcome"], "uploaded")
        self.assertEqual(len(out.getvalue().splitlines()), 6, out.getvalue())


class NeverRaises(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-fail-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def call(self, prof, **kw):
        kw.setdefault("spool", os.path.join(self.tmp, "spool"))
        h = firstpass.trace_handler(**kw)
        with clean_env(), captured() as (out, err):
            self.assertIsNone(h(prof))
        self.assertEqual(out.getvalue(), "")
        self.assertEqual(err.getvalue().count("\n"), 1, err.getvalue())
        self.assertTrue(err.getvalue().startswith("firstpass: "), err.getvalue())
        return h.last, err.getvalue()

    LEGACY = b'[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]'

    def test_export_fails(self):
        last, err = self.call(StubProfiler(error=RuntimeError("the profiler was never started")), server=dead_server())
        self.assertEqual(last["outcome"], "failed")
        self.assertIn("could not export the trace, nothing sent: RuntimeError: the profiler was never started", err)

    def test_export_is_not_a_trace(self):
        last, err = self.call(StubProfiler(b"hello"), server=dead_server())
        self.assertEqual(last["outcome"], "failed")
        self.assertIn("is not a Chrome trace", err)

    def test_bad_server_url_spools(self):
        last, err = self.call(StubProfiler(self.LEGACY), server="ftp://nowhere")
        self.assertEqual(last["outcome"], "spooled")
        self.assertIn("bad server URL: server 'ftp://nowhere' is not an http:// or https:// URL", err)

    def test_server_that_never_answers_times_out(self):
        s = SilentServer()
        try:
            with mock.patch.dict(os.environ, {"FIRSTPASS_TIMEOUT_S": "1"}):
                last, err = self.call(StubProfiler(self.LEGACY), server=s.base)
        finally:
            s.close()
        self.assertEqual(last["outcome"], "spooled")
        self.assertIn("server %s unreachable" % s.base, err)
        self.assertIn("timed out", err)

    def test_spool_impossible_is_lost_in_one_line(self):
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        last, err = self.call(StubProfiler(self.LEGACY), server=dead_server(), spool=os.path.join(blocker, "spool"))
        self.assertEqual(last["outcome"], "lost")
        self.assertRegex(err, r"^firstpass: session LOST: server .* unreachable .*, and spooling to .*/file/spool failed: ")

    def test_unexpected_error_inside(self):
        with mock.patch.object(handler_mod._labels, "auto_labels", side_effect=KeyError("boom")):
            last, err = self.call(StubProfiler(self.LEGACY), server=dead_server())
        self.assertEqual(last["outcome"], "failed")
        self.assertIn("trace not sent (internal error): KeyError", err)

    def test_bad_arguments_raise_before_the_loop(self):
        for bad in ({"": "x"}, {"a:b": "x"}, "k:v", ["novalue"], {str(i): "v" for i in range(65)}):
            with self.subTest(bad=bad):
                with self.assertRaises((ValueError, TypeError)):
                    firstpass.trace_handler(labels=bad)
        with self.assertRaises(ValueError):
            firstpass.trace_handler(name="x" * 513)


if __name__ == "__main__":
    unittest.main()
