"""Hostile peers and hostile neighbours against the package and firstpass-upload (issue 43,
findings 8-11): a peer that trickles its reply, replies of hundreds of MB, a 201 that is not
firstpass's answer, a spool directory that is not the user's own. Each case runs the Python
side and the C side (build/firstpass-upload) against the same peer (fptest.HostilePeer)."""
import gzip
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import unittest
from unittest import mock

from fptest import UPLOAD, HostilePeer, StubProfiler, captured, dead_server

import firstpass
from firstpass import FirstpassError, spool

LEGACY = b'[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]'
CLEAN_ENV = {k: "" for k in ("FIRSTPASS_SERVER", "FIRSTPASS_TOKEN", "FIRSTPASS_LABELS", "FIRSTPASS_NAME",
                             "FIRSTPASS_SPOOL", "FIRSTPASS_QUIET", "FIRSTPASS_TIMEOUT_S", "FIRSTPASS_CONNECT_TIMEOUT_S")}
MiB = 1 << 20
OTHER_UID = 65534  # nobody: "another local user"


def handler_call(server, spool_dir, **env):
    """Runs a trace_handler once on a small legacy trace. Returns (handler.last, stdout,
    stderr, seconds the call held the caller)."""
    h = firstpass.trace_handler(server=server, name="hostile", spool=spool_dir)
    e = dict(CLEAN_ENV)
    e.update(env)
    with mock.patch.dict(os.environ, e), captured() as (out, err):
        t0 = time.monotonic()
        h(StubProfiler(LEGACY))
        dt = time.monotonic() - t0
    return h.last, out.getvalue(), err.getvalue(), dt


def upload_cli(*args, env=None, timeout=120):
    """Runs build/firstpass-upload ARGS with FIRSTPASS_* cleared (env added). Returns
    (CompletedProcess, seconds)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FIRSTPASS_")}
    e.update(env or {})
    t0 = time.monotonic()
    r = subprocess.run([UPLOAD, *args], capture_output=True, text=True, timeout=timeout, env=e)
    return r, time.monotonic() - t0


def session_file(directory, name="session-h-1-1-0.json.gz"):
    """A spooled session document (what the handler writes) in directory. Returns its path."""
    p = os.path.join(directory, name)
    with open(p, "wb") as f:
        f.write(gzip.compress(b'{"firstpass":{"format":"firstpass-session","version":1,"name":"planted",'
                              b'"labels":{}},"traceEvents":' + LEGACY + b"}"))
    return p


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-hostile-")
        os.chmod(self.tmp, 0o700)
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            p.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def peer(self, *replies):
        p = HostilePeer(*replies)
        self.peers.append(p)
        return p

    def trace_file(self):
        p = os.path.join(self.tmp, "trace.json")
        with open(p, "wb") as f:
            f.write(LEGACY)
        return p


class Deadline(Tmp):
    """Finding 8: FIRSTPASS_TIMEOUT_S bounded each read, so a peer sending one byte every few
    seconds held the training loop as long as it liked (40 s, 100 s)."""

    TRICKLE = {"trickle": 0.2, "give_up": 15}  # a byte every 0.2 s: no read waits 2 s

    def test_trickling_reply_holds_the_handler_at_most_the_deadline(self):
        p = self.peer(self.TRICKLE)
        last, out, err, dt = handler_call(p.base, os.path.join(self.tmp, "spool"), FIRSTPASS_TIMEOUT_S="2")
        self.assertLess(dt, 3.5, (dt, err))
        self.assertGreater(p.sent, 3)  # it did trickle: a per-read timeout would never have fired
        self.assertEqual(last["outcome"], "spooled", err)
        self.assertIn("timed out", err)
        self.assertEqual(out, "")

    def test_report_shares_the_uploads_deadline(self):
        """The upload is answered at once, the report trickles: the two together end by the
        deadline, and the session counts as uploaded."""
        p = self.peer({}, dict(self.TRICKLE, ctype="text/plain", body=b"Workload: x\n" * 5))
        last, out, err, dt = handler_call(p.base, os.path.join(self.tmp, "spool"), FIRSTPASS_TIMEOUT_S="2")
        self.assertLess(dt, 3.5, (dt, err))
        self.assertEqual(last["outcome"], "uploaded", err)
        self.assertIn("session 1 uploaded, but its report could not be read", err)
        self.assertIn("timed out", err)

    def test_client_request_deadline(self):
        p = self.peer(self.TRICKLE)
        c = firstpass.Client(p.base, timeout=1)
        t0 = time.monotonic()
        with self.assertRaises(FirstpassError) as cm:
            c.sessions()
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertIsNone(cm.exception.status)
        self.assertIn("timed out", cm.exception.message)

    def test_slow_name_lookup_is_inside_the_deadline(self):
        """getaddrinfo cannot be given a timeout; it runs aside and is left behind."""
        real = socket.getaddrinfo

        def slow(*a, **kw):
            time.sleep(4)
            return real(*a, **kw)

        p = self.peer({})
        c = firstpass.Client(p.base, timeout=1)
        with mock.patch("socket.getaddrinfo", slow):
            t0 = time.monotonic()
            with self.assertRaises(FirstpassError) as cm:
                c.sessions()
            dt = time.monotonic() - t0
        self.assertLess(dt, 2.5)
        self.assertIn("timed out", cm.exception.message)

    def test_a_good_server_is_unaffected(self):
        p = self.peer({"status": 200, "body": b'{"sessions":[{"id":3}],"next":null}'})
        self.assertEqual(firstpass.Client(p.base, timeout=2).sessions(), [{"id": 3}])

    def test_firstpass_upload_ends_at_its_timeout(self):
        p = self.peer(self.TRICKLE)
        r, dt = upload_cli("--server", p.base, "--timeout", "2", self.trace_file())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(dt, 4.5, r.stderr)
        self.assertIn("failed", r.stderr)


class ReplyCap(Tmp):
    """Finding 10: a 400 MB error reply cost the training process 802 MB. The peer counts what
    it could write: a client that stops reading leaves it at the cap plus socket buffers."""

    def test_huge_error_reply_is_not_read(self):
        for length in (True, False):
            with self.subTest(content_length=length):
                p = self.peer({"status": 400, "size": 256 * MiB, "length": length, "ctype": "text/html"})
                t0 = time.monotonic()
                with self.assertRaises(FirstpassError) as cm:
                    firstpass.Client(p.base).sessions()
                self.assertLess(time.monotonic() - t0, 5)
                self.assertEqual(cm.exception.status, 400)
                self.assertTrue(cm.exception.message.startswith("xxxx"), cm.exception.message[:50])
                self.assertLess(p.sent, 32 * MiB)

    def test_huge_data_reply_is_refused(self):
        """A 2xx over max_reply_bytes (64 MiB) is an error, with or without a declared length."""
        for length in (True, False):
            with self.subTest(content_length=length):
                p = self.peer({"status": 200, "size": 160 * MiB, "length": length, "ctype": "text/plain"})
                with self.assertRaises(FirstpassError) as cm:
                    firstpass.Client(p.base).get("/api/v1/sessions/1/trace")
                self.assertEqual(cm.exception.status, 200)
                self.assertIn("larger than %d bytes" % (64 * MiB), cm.exception.message)
                self.assertLess(p.sent, 100 * MiB)
        p = self.peer({"status": 200, "size": 3 * MiB, "length": False, "ctype": "text/plain"})
        self.assertEqual(len(firstpass.Client(p.base).get("/x")), 3 * MiB)
        with self.assertRaises(FirstpassError):
            firstpass.Client(p.base, max_reply_bytes=MiB).get("/x")

    def test_handler_reads_little(self):
        """The handler reads at most 1 MiB of any reply; an upload answered with more is spooled."""
        for status in (500, 201):
            with self.subTest(status=status):
                p = self.peer({"status": status, "size": 128 * MiB, "length": False})
                last, _, err, dt = handler_call(p.base, os.path.join(self.tmp, "spool"))
                self.assertEqual(last["outcome"], "spooled", err)
                self.assertLess(p.sent, 32 * MiB)
                self.assertLess(dt, 5)

    def test_firstpass_upload_reads_little(self):
        for status, length in ((400, False), (400, True), (201, False), (201, True)):
            with self.subTest(status=status, content_length=length):
                p = self.peer({"status": status, "size": 128 * MiB, "length": length})
                r, dt = upload_cli("--server", p.base, self.trace_file())
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("HTTP %d with a reply over 65536 bytes" % status, r.stderr)
                self.assertLess(p.sent, 32 * MiB)
        # --check-against's GETs: 16 MiB at most
        p = self.peer({}, {"status": 200, "size": 96 * MiB, "length": False})
        r, dt = upload_cli("--server", p.base, "--check-against", "base", self.trace_file())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("the reply is larger than %d bytes" % (16 * MiB), r.stderr)
        self.assertLess(p.sent, 64 * MiB)


class NoSessionId(Tmp):
    """Finding 11: a 201 that is not firstpass's answer (a proxy's HTML page, `{}`) was taken
    as delivered: the handler then failed on it and the trace was neither confirmed nor
    spooled; firstpass-upload deleted the spooled file."""

    BODIES = [(b"{}", "application/json"),
              (b"<html><body>Welcome to the proxy</body></html>", "text/html"),
              (b'{"id":"7"}', "application/json"),
              (b'{"id":0,"url":"/api/v1/sessions/0"}', "application/json"),
              (b"[1,2]", "application/json"),
              (b"", "application/json")]

    def test_handler_spools(self):
        for body, ctype in self.BODIES:
            with self.subTest(body=body):
                d = os.path.join(self.tmp, "spool-%d" % len(body))
                p = self.peer({"status": 201, "body": body, "ctype": ctype})
                last, out, err, _ = handler_call(p.base, d)
                self.assertEqual(last["outcome"], "spooled", err)
                self.assertEqual(out, "")
                self.assertRegex(err, "server answered HTTP 201: (no session id in the reply|the reply is not JSON)")
                self.assertEqual(len(os.listdir(d)), 1)

    def test_client_upload_raises(self):
        p = self.peer({"status": 201, "body": b"{}"})
        with self.assertRaises(FirstpassError) as cm:
            firstpass.Client(p.base).upload(LEGACY)
        self.assertEqual(cm.exception.status, 201)

    def test_firstpass_upload_keeps_the_file(self):
        for body, ctype in self.BODIES:
            with self.subTest(body=body):
                d = os.path.join(self.tmp, "spool-%d" % len(body))
                os.mkdir(d, 0o700)
                f = session_file(d)
                p = self.peer({"status": 201, "body": body, "ctype": ctype})
                r, _ = upload_cli("--server", p.base, "--spool", d)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("HTTP 201 without a session id", r.stderr)
                self.assertTrue(os.path.exists(f), "the spooled file was deleted on a 201 without an id")
                r, _ = upload_cli("--server", p.base, f)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)


class SpoolDirectory(Tmp):
    """Finding 9: /tmp/firstpass-spool-$UID could be made first by another local user, who then
    read the traces spooled there, and whose planted files firstpass-upload sent with the
    user's token. The spool is used only when it is the user's own."""

    def foreign(self, path):
        """Makes path a directory that belongs to another user (really, as root; else by
        making this process look like another uid to the package). Returns a context."""
        os.mkdir(path, 0o700)
        if os.geteuid() == 0:
            os.chown(path, OTHER_UID, OTHER_UID)
            return mock.patch.dict(os.environ, {})
        return mock.patch.object(spool.os, "geteuid", return_value=os.geteuid() + 1)

    def test_handler_refuses_another_users_directory(self):
        for how in ("spool=", "FIRSTPASS_SPOOL"):
            with self.subTest(how):
                d = os.path.join(self.tmp, "firstpass-spool-victim-" + how[:5])
                with self.foreign(d):
                    if how == "spool=":
                        last, _, err, _ = handler_call(dead_server(), d)
                    else:
                        last, _, err, _ = handler_call(dead_server(), None, FIRSTPASS_SPOOL=d)
                self.assertEqual(last["outcome"], "lost", err)
                self.assertRegex(err, r"session LOST: .* spooling to %s failed: %s belongs to uid \d+, not to you"
                                 % (d, d))
                self.assertEqual(os.listdir(d), [])

    def test_handler_refuses_open_modes_and_symlinks(self):
        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o700)
        link = os.path.join(self.tmp, "link")
        os.symlink(real, link)
        last, _, err, _ = handler_call(dead_server(), link)
        self.assertEqual(last["outcome"], "lost")
        self.assertIn("%s is a symbolic link" % link, err)
        self.assertEqual(os.listdir(real), [])
        for mode in (0o755, 0o770, 0o701, 0o1777, 0o2775, 0o2750):
            with self.subTest(mode=oct(mode)):
                os.chmod(real, mode)
                last, _, err, _ = handler_call(dead_server(), real)
                self.assertEqual(last["outcome"], "lost")
                self.assertIn("%s has mode %04o: " % (real, mode), err)
                self.assertIn("refused (chmod 700 it", err)
                self.assertEqual(os.listdir(real), [])
        os.chmod(real, 0o700)
        last, _, err, _ = handler_call(dead_server(), real)
        self.assertEqual(last["outcome"], "spooled", err)

    def test_a_group_directory_of_an_fsgroup_volume_is_used(self):
        """Issue 53: a Kubernetes fsGroup volume makes the spool directory setgid, group rwx
        (2770), its group the pod's; it is used, and firstpass-upload sends from it."""
        d = os.path.join(self.tmp, "fsgroup")
        os.mkdir(d)
        os.chown(d, -1, os.getegid())
        os.chmod(d, 0o2770)
        last, _, err, _ = handler_call(dead_server(), d)
        self.assertEqual(last["outcome"], "spooled", err)
        self.assertEqual(len(os.listdir(d)), 1)
        r, _ = upload_cli("--server", dead_server(), "--spool", d)
        self.assertNotIn("refused", r.stderr)  # sent (and failed: no server), not refused
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

    def test_default_is_under_home(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home, 0o700)
        self.assertEqual(spool.spool_dir(None, {"HOME": home}), home + "/.local/state/firstpass/spool")
        self.assertEqual(spool.spool_dir(None, {"HOME": home + "/"}), home + "/.local/state/firstpass/spool")
        tmp_rule = "/tmp/firstpass-spool-%d" % os.getuid()
        self.assertEqual(spool.spool_dir(None, {"HOME": "relative/home"}), tmp_rule)
        self.assertEqual(spool.spool_dir(None, {"HOME": os.path.join(self.tmp, "none")}), tmp_rule)
        with self.foreign(os.path.join(self.tmp, "theirs")):
            self.assertEqual(spool.spool_dir(None, {"HOME": os.path.join(self.tmp, "theirs")}), tmp_rule)

    def test_firstpass_upload_refuses_and_sends_nothing(self):
        cases = [("open", 0o777), ("group", 0o750)]
        if os.geteuid() == 0:
            cases.append(("foreign", None))
        for label, mode in cases:
            for how in ("--spool", "FIRSTPASS_SPOOL"):
                with self.subTest(label=label, how=how):
                    d = os.path.join(self.tmp, "%s-%s" % (label, how.strip("-")))
                    if mode is None:
                        self.foreign(d)
                    else:
                        os.mkdir(d)
                        os.chmod(d, mode)
                    planted = session_file(d)
                    p = self.peer({})
                    args = ["--server", p.base, "--token", "victims-token"]
                    if how == "--spool":
                        r, _ = upload_cli(*args, "--spool", d)
                    else:
                        r, _ = upload_cli(*args, env={"FIRSTPASS_SPOOL": d})
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn("firstpass-upload: spool %s " % d, r.stderr)
                    self.assertRegex(r.stderr, "belongs to uid|has mode")
                    self.assertEqual(p.requests, [], "a planted file went out with the user's token")
                    self.assertTrue(os.path.exists(planted))
        link = os.path.join(self.tmp, "link")
        os.symlink(os.path.join(self.tmp, "open-spool"), link)
        r, _ = upload_cli("--server", dead_server(), "--spool", link)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is a symbolic link", r.stderr)
        r, _ = upload_cli("--server", dead_server(), "--spool", os.path.join(self.tmp, "missing"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nothing to send (no such directory)", r.stdout)

    def test_both_sides_default_under_home(self):
        """No spool=, no FIRSTPASS_SPOOL, no XDG_STATE_HOME: the handler spools under $HOME and
        firstpass-upload sends from there."""
        home = os.path.join(self.tmp, "home")
        os.mkdir(home, 0o700)
        where = home + "/.local/state/firstpass/spool"
        last, _, err, _ = handler_call(None, None, HOME=home, XDG_STATE_HOME="")
        self.assertEqual(last["outcome"], "spooled", err)
        self.assertEqual(os.path.dirname(last["path"]), where)
        self.assertEqual(stat.S_IMODE(os.stat(where).st_mode), 0o700)
        p = self.peer({})
        r, _ = upload_cli("--server", p.base, env={"HOME": home, "XDG_STATE_HOME": ""})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("spool %s: 1 sent, 0 failed" % where, r.stdout)
        self.assertEqual(len(p.requests), 1)
        self.assertEqual(os.listdir(where), [])


if __name__ == "__main__":
    unittest.main()


class PagesThatRepeat(Tmp):
    """Issue 50: behind a proxy that drops the query string, every page is the first, with
    the same `next`: iter_sessions followed it for ever. It stops at the first cursor seen
    twice, with an error, having yielded the page once."""

    def test_iter_sessions_stops_when_a_page_repeats(self):
        page = {"status": 200, "body": b'{"sessions":[{"id":7}],"next":"c1"}'}
        end = {"status": 200, "body": b'{"sessions":[],"next":null}'}
        p = self.peer(*([page] * 30 + [end]))  # a client that never stops would yield 30 copies
        got = []
        with self.assertRaises(FirstpassError) as cm:
            for s in firstpass.Client(p.base, timeout=10).iter_sessions():
                got.append(s["id"])
        self.assertEqual(got, [7])
        self.assertIn("twice", cm.exception.message)
        self.assertEqual(len(p.requests), 2)


class IdempotencyKey(Tmp):
    """Issue 50 item 3: the handler's upload carries the Idempotency-Key of the spool file it
    would become, and firstpass-upload --spool sends the same key for that file, so that a
    session whose 201 was lost and which was spooled anyway is stored once."""

    def test_the_handler_and_the_spool_sender_send_one_key(self):
        p = self.peer({"status": 503, "body": b'{"error":{"code":"too_many_uploads","message":"busy"}}'}, {})
        d = os.path.join(self.tmp, "spool")
        last, _, err, _ = handler_call(p.base, d)
        self.assertEqual(last["outcome"], "spooled", err)
        name = os.path.basename(last["path"])
        first = p.requests[0][2].get("idempotency-key")
        self.assertEqual(first, spool.key(name))
        r, _ = upload_cli("--server", p.base, "--spool", d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(p.requests[1][2].get("idempotency-key"), first)

    def test_keys_agree_with_the_collector(self):
        """spool.key and fp_spool_key give one key a name, long names (a hash) included."""
        p = self.peer({})
        d = os.path.join(self.tmp, "spool")
        os.mkdir(d, 0o700)
        names = ["watch-0123456789abcdef.json.gz", "session-gpu-3-4242-1764860400123456789-0.json.gz",
                 "session-" + "a-very-long-host-name" * 4 + "-1-2-0.json.gz", "odd name+1.json"]
        for n in names:
            with open(os.path.join(d, n), "wb") as f:
                f.write(gzip.compress(LEGACY))
        r, _ = upload_cli("--server", p.base, "--spool", d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(q[2].get("idempotency-key") for q in p.requests), sorted(spool.key(n) for n in names))
        self.assertIn("0123456789abcdef", [spool.key(n) for n in names])
