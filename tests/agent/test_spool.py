"""The agent's spool (issue 50 item 8, issue 53 item 3): a spooled document the server refuses
is set aside (.refused) and not sent again (it was sent every --retry seconds, forever); one
not taken within --give-up is set aside too (.expired): nothing is retried forever. A spool on a
Kubernetes fsGroup volume (setgid, group rwx, a group of ours: mode 2770) is used; one that is
refused is said in the log with the reason and the fix (it was refused silently)."""
import glob
import gzip
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from agentlib import UPLOAD, Agent, free_port, start_server, torch_trace, wait_for

BAD = gzip.compress(b'{"traceEvents": 5}')  # a document the server refuses (422 not_a_trace)


def rejected(srv):
    st, body = srv.request("GET", "/metrics")
    m = re.search(r'firstpass_uploads_total\{result="rejected"\} (\d+)', body.decode())
    return int(m.group(1)) if m else 0


def good_doc():
    return gzip.compress(b'{"firstpass":{"format":"firstpass-session","version":1,"name":"spooled","labels":{"file_id":"00000000000000aa"}},'
                         b'"traceEvents":' + torch_trace() + b'}')


class Spool(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-spool-")
        self.watch = os.path.join(self.tmp, "w")
        self.spool = os.path.join(self.tmp, "spool")
        os.makedirs(self.watch)
        os.makedirs(self.spool, 0o700)
        os.chmod(self.spool, 0o700)
        self.agent, self.srv = None, None

    def tearDown(self):
        if self.agent and self.agent.proc.poll() is None:
            self.agent.stop()
        if self.srv:
            self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def put(self, name, data, age_s=0):
        p = os.path.join(self.spool, name)
        with open(p, "wb") as f:
            f.write(data)
        if age_s:
            t = time.time() - age_s
            os.utime(p, (t, t))
        return p

    def test_a_refused_spooled_document_is_set_aside_not_resent(self):
        self.srv = start_server()
        p = self.put("watch-0123456789abcdef.json.gz", BAD)
        self.agent = Agent(self.srv.base, "--watch", self.watch, "--retry", "0.3", env={"FIRSTPASS_SPOOL": self.spool})
        wait_for(lambda: os.path.exists(p + ".refused"), 15, what="the refused document set aside")
        time.sleep(2.0)  # six more --retry periods
        self.assertEqual(rejected(self.srv), 1, "the refused document was sent again")
        self.assertIn('msg="spooled document set aside"', self.agent.log())
        self.assertIn("HTTP 422", self.agent.log())

    def test_firstpass_upload_spool_sets_a_refused_document_aside(self):
        self.srv = start_server()
        p = self.put("session-h-1-2-0.json.gz", BAD)
        run = lambda: subprocess.run([UPLOAD, "--server", self.srv.base, "--spool", self.spool], capture_output=True, text=True, timeout=60)
        first = run()
        self.assertEqual(first.returncode, 1, first.stdout + first.stderr)  # not sent: a failure to report
        run()
        self.assertEqual(rejected(self.srv), 1, "sent again at the second run")
        self.assertTrue(os.path.exists(p + ".refused"))
        self.assertIn("refused by the server", first.stderr)

    def test_a_document_not_taken_within_give_up_is_set_aside(self):
        down = "http://127.0.0.1:%d" % free_port()  # nothing listens: every try fails
        old = self.put("watch-00000000000000bb.json.gz", good_doc(), age_s=120)
        new = self.put("watch-00000000000000cc.json.gz", good_doc())
        self.agent = Agent(down, "--watch", self.watch, "--retry", "0.3", "--give-up", "60", env={"FIRSTPASS_SPOOL": self.spool})
        wait_for(lambda: os.path.exists(old + ".expired"), 15, what="the old document set aside")
        self.assertTrue(os.path.exists(new), "a document within --give-up is kept")
        self.assertIn("--give-up", self.agent.log())

    def test_a_group_spool_of_an_fsgroup_volume_is_used(self):
        """mode 2770, group one of ours (Kubernetes fsGroup): the spool is sent."""
        self.srv = start_server()
        os.chown(self.spool, -1, os.getegid())
        os.chmod(self.spool, 0o2770)
        p = self.put("watch-00000000000000aa.json.gz", good_doc())
        self.agent = Agent(self.srv.base, "--watch", self.watch, "--retry", "0.3", env={"FIRSTPASS_SPOOL": self.spool})
        wait_for(lambda: not os.path.exists(p), 15, what="the spooled document sent")
        self.assertEqual(len(self.srv.sessions("file_id:00000000000000aa")), 1)

    def test_a_refused_spool_directory_is_logged_with_the_fix(self):
        self.srv = start_server()
        os.chmod(self.spool, 0o2775)  # others may read it: refused
        p = self.put("watch-00000000000000aa.json.gz", good_doc())
        self.agent = Agent(self.srv.base, "--watch", self.watch, "--retry", "0.3", env={"FIRSTPASS_SPOOL": self.spool})
        wait_for(lambda: 'msg="spool refused"' in self.agent.log(), 10, what="the refusal in the log")
        time.sleep(1.0)
        self.assertTrue(os.path.exists(p), "sent from a directory others may write")
        log = self.agent.log()
        self.assertIn("chmod 2770", log)
        self.assertEqual(log.count('msg="spool refused"'), 1, "logged once, not at every try")


if __name__ == "__main__":
    unittest.main()
