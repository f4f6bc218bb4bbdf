"""Bearer tokens (--tokens-file, --read-auth): who may write, who may read, what is logged.

Every server here is a real firstpass-server; the tokens file has one plaintext and one
sha256: line."""
import hashlib
import json
import os
import subprocess
import tempfile
import unittest

import fpserver
from fpserver import Server, head_only

PLAIN = "ci-0123456789abcdefXYZ"
HASHED = "laptop-secret-9876543210"
TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                                     "ts": 1, "dur": 2}]}).encode()
REALM = 'Bearer realm="firstpass"'


def tokens_file(text=None):
    fd, path = tempfile.mkstemp(prefix="fp-tokens-")
    with os.fdopen(fd, "w") as f:
        f.write(text if text is not None else
                "# firstpass tokens\n\nci %s\nlaptop sha256:%s\n" % (PLAIN, hashlib.sha256(HASHED.encode()).hexdigest()))
    os.chmod(path, 0o600)
    return path


def bearer(tok):
    return {"Authorization": "Bearer " + tok}


def error_code(body):
    return json.loads(body)["error"]["code"]


class Writes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens = tokens_file()
        cls.srv = Server("--tokens-file", cls.tokens)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        os.unlink(cls.tokens)

    def test_upload_without_header_is_401(self):
        st, h, b = self.srv.request("POST", "/api/v1/sessions", body=TRACE)
        self.assertEqual(st, 401, b)
        self.assertEqual(h.get("WWW-Authenticate"), REALM)
        self.assertEqual(error_code(b), "unauthorized")

    def test_malformed_header_is_401(self):
        for value in ("Basic Y2k6eA==", "Bearer", "Bearer ", PLAIN, "Bearer two words", "Token " + PLAIN):
            with self.subTest(value=value):
                st, h, b = self.srv.request("POST", "/api/v1/sessions", body=TRACE, headers={"Authorization": value})
                self.assertEqual(st, 401, b)
                self.assertEqual(h.get("WWW-Authenticate"), REALM)
                self.assertEqual(error_code(b), "unauthorized")

    def test_wrong_token_is_403(self):
        for tok in (PLAIN + "x", PLAIN[:-1], hashlib.sha256(HASHED.encode()).hexdigest(), HASHED.upper()):
            with self.subTest(tok=tok):
                st, _, b = self.srv.request("POST", "/api/v1/sessions", body=TRACE, headers=bearer(tok))
                self.assertEqual(st, 403, b)
                self.assertEqual(error_code(b), "forbidden")

    def test_refused_uploads_store_nothing(self):
        before = self.srv.json("/api/v1/sessions?limit=1000")["sessions"]
        self.srv.request("POST", "/api/v1/sessions?name=nope", body=TRACE)
        self.srv.request("POST", "/api/v1/sessions?name=nope", body=TRACE, headers=bearer("x" * 20))
        after = self.srv.json("/api/v1/sessions?limit=1000")["sessions"]
        self.assertEqual(len(before), len(after))
        self.assertFalse([s for s in after if s.get("name") == "nope"])

    def test_right_tokens_are_201(self):
        for tok in (PLAIN, HASHED):
            with self.subTest(tok=tok):
                st, _, b = self.srv.upload(TRACE, "?name=ok", headers=bearer(tok))
                self.assertEqual(st, 201, b)
                # the scheme is case-insensitive
        st, _, b = self.srv.upload(TRACE, headers={"Authorization": "bearer " + PLAIN})
        self.assertEqual(st, 201, b)

    def test_put_and_delete_need_a_token(self):
        _, _, b = self.srv.upload(TRACE, headers=bearer(PLAIN))
        sid = b["id"]
        put = json.dumps({"lines": {"next_experiment": "try bf16"}}).encode()
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid, body=put)
        self.assertEqual((st, error_code(b)), (401, "unauthorized"))
        st, _, b = self.srv.request("DELETE", "/api/v1/sessions/%d" % sid, headers=bearer("wrong-token-000000"))
        self.assertEqual((st, error_code(b)), (403, "forbidden"))
        st, _, b = self.srv.request("PUT", "/api/v1/sessions/%d/report" % sid, body=put, headers=bearer(PLAIN))
        self.assertEqual(st, 200, b)
        st, _, _ = self.srv.request("DELETE", "/api/v1/sessions/%d" % sid, headers=bearer(HASHED))
        self.assertEqual(st, 204)

    def test_reads_are_open_by_default(self):
        for path in ("/api/v1/sessions", "/healthz", "/"):
            with self.subTest(path=path):
                self.assertEqual(self.srv.get(path)[0], 200)

    def test_refusal_comes_before_the_body(self):
        # A client that waits for "100 Continue" gets the 401 instead, and sends no body.
        got = head_only(self.srv.port, "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n"
                                          "Expect: 100-continue\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 401"), got[:200])
        self.assertNotIn(b"100 Continue", got)


class Reads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens = tokens_file()
        cls.srv = Server("--tokens-file", cls.tokens, "--read-auth")
        _, _, b = cls.srv.upload(TRACE, headers=bearer(PLAIN))
        cls.sid = b["id"]

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        os.unlink(cls.tokens)

    def test_api_reads_need_a_token(self):
        for path in ("/api/v1/sessions", "/api/v1/sessions/%d" % self.sid, "/api/v1/sessions/%d/trace" % self.sid,
                     "/api/v1/sessions/999999", "/api/v1/nosuch"):
            for method in ("GET", "HEAD"):
                with self.subTest(path=path, method=method):
                    st, h, _ = self.srv.request(method, path)
                    self.assertEqual(st, 401)
                    self.assertEqual(h.get("WWW-Authenticate"), REALM)
                    st, _, _ = self.srv.request(method, path, headers=bearer("unknown-token-00000"))
                    self.assertEqual(st, 403)
        st, _, b = self.srv.request("GET", "/api/v1/sessions/%d" % self.sid, headers=bearer(HASHED))
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(b)["id"], self.sid)

    def test_healthz_and_dashboard_stay_open(self):
        for path in ("/healthz", "/", "/index.html", "/app.js"):
            with self.subTest(path=path):
                self.assertEqual(self.srv.get(path)[0], 200)


class Logging(unittest.TestCase):
    def test_token_never_in_log_name_is(self):
        tokens = tokens_file()
        srv = Server("--tokens-file", tokens, quiet=False)
        try:
            srv.upload(TRACE, headers=bearer(PLAIN))
            srv.upload(TRACE, headers=bearer(HASHED))
            srv.upload(TRACE, headers=bearer(PLAIN + "zz"))
            srv.upload(TRACE, headers={"Authorization": "Basic " + PLAIN})
            srv.get("/api/v1/sessions", headers=bearer(PLAIN))
        finally:
            srv.stop()
            os.unlink(tokens)
        log = open(srv.log.name).read()
        for secret in (PLAIN, HASHED, PLAIN[:12], HASHED[:12]):
            self.assertNotIn(secret, log)
        self.assertIn("user=ci", log)
        self.assertIn("user=laptop", log)
        self.assertIn("status=403", log)
        self.assertIn("status=401", log)


class StartUp(unittest.TestCase):
    def run_server(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        d = tempfile.mkdtemp(prefix="fp-it-")
        return subprocess.run([fpserver.SERVER, "--port", str(fpserver.free_port()), "--db", os.path.join(d, "db"),
                               *args], capture_output=True, text=True, timeout=10, env=e)

    def test_bad_tokens_file_stops_the_start_with_its_line(self):
        path = tokens_file("ok %s\n# fine\nbroken-line-without-token\n" % PLAIN)
        try:
            r = self.run_server("--tokens-file", path)
        finally:
            os.unlink(path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("%s:3:" % path, r.stderr)
        self.assertNotIn(PLAIN, r.stderr)

    def test_missing_or_empty_tokens_file(self):
        r = self.run_server("--tokens-file", "/nonexistent/tokens")
        self.assertEqual(r.returncode, 2, r.stderr)
        path = tokens_file("# no tokens yet\n")
        try:
            r = self.run_server("--tokens-file", path)
        finally:
            os.unlink(path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no token", r.stderr)

    def test_read_auth_without_tokens_is_refused(self):
        r = self.run_server("--read-auth")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--tokens-file", r.stderr)

    def test_environment_variables(self):
        path = tokens_file()
        srv = None
        old = dict(os.environ)
        try:
            os.environ["FIRSTPASS_TOKENS_FILE"] = path
            os.environ["FIRSTPASS_READ_AUTH"] = "1"
            srv = Server()
            self.assertEqual(srv.get("/api/v1/sessions")[0], 401)
            self.assertEqual(srv.get("/api/v1/sessions", headers=bearer(PLAIN))[0], 200)
        finally:
            os.environ.clear()
            os.environ.update(old)
            if srv:
                srv.stop()
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
