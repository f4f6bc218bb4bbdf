"""firstpass-upload --watch, exactly once: a restart sends nothing twice (the state file, and
the server's file_id label for an upload cut by the stop), and a server that is down and
comes back loses nothing (the spool)."""
import glob
import os
import shutil
import signal
import tempfile
import time
import unittest

from agentlib import Agent, gz, start_server, torch_trace, wait_for


class ExactlyOnce(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fp-once-")
        self.srv = start_server()
        self.agent = None

    def tearDown(self):
        if self.agent:
            self.agent.stop()
        self.srv.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def drop(self, name, data):
        tmp = os.path.join(self.dir, "." + name + ".part")
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, os.path.join(self.dir, name))

    def per_file(self):
        n = {}
        for s in self.srv.sessions():
            n[s["labels"]["file"]] = n.get(s["labels"]["file"], 0) + 1
        return n

    def test_restart_sends_nothing_twice(self):
        args = ("--watch", self.dir, "--settle", "0.2", "--model", "m")
        self.agent = Agent(self.srv.base, *args)
        trace = gz(torch_trace())
        self.drop("a-rank-0.1718000000001.pt.trace.json.gz", trace)
        self.drop("a-rank-1.1718000000002.pt.trace.json.gz", trace)
        wait_for(lambda: len(self.srv.sessions()) == 2, 10, what="two sessions")
        self.assertEqual(self.agent.stop(), 0)

        # a restart: the two are in the state file; a third file is new
        self.agent = Agent(self.srv.base, *args, state=self.agent.state)
        self.drop("a-rank-2.1718000000003.pt.trace.json.gz", trace)
        wait_for(lambda: len(self.srv.sessions()) == 3, 10, what="the third session")
        time.sleep(1.0)
        self.assertEqual(self.per_file(), {"a-rank-0.1718000000001.pt.trace.json.gz": 1, "a-rank-1.1718000000002.pt.trace.json.gz": 1,
                                           "a-rank-2.1718000000003.pt.trace.json.gz": 1})
        self.assertEqual(self.agent.stop(signal.SIGKILL), -signal.SIGKILL)

        # A stop between the upload and its "done" line leaves "sending": after the restart the
        # server's file_id label says whether it landed. rank-0 did land (resolved as sent);
        # rank-1's session is deleted here, as if its upload had been cut (resolved as not sent).
        with open(self.agent.state) as f:
            lines = f.read().splitlines()
        rewritten = [("sending" + l[l.index("\t"):]) if ("rank-0." in l or "rank-1." in l) else l for l in lines]
        with open(self.agent.state, "w") as f:
            f.write("\n".join(rewritten) + "\n")
        gone = [s["id"] for s in self.srv.sessions() if "rank-1." in s["labels"]["file"]][0]
        self.assertEqual(self.srv.request("DELETE", "/api/v1/sessions/%d" % gone)[0], 204)
        self.agent = Agent(self.srv.base, *args, state=self.agent.state)
        wait_for(lambda: len(self.srv.sessions()) == 3, 10, what="rank-1 sent again")
        time.sleep(1.0)
        self.assertEqual(sorted(self.per_file().values()), [1, 1, 1])
        log = self.agent.log()
        self.assertIn("stored before the restart: not sent again", log)
        self.assertIn("not found stored after the restart: sent again", log)

    def test_server_down_then_up_loses_nothing(self):
        port, db = self.srv.port, self.srv.db
        self.agent = Agent(self.srv.base, "--watch", self.dir, "--settle", "0.2", "--retry", "0.5", "--remove",
                           "--label", "run:outage")
        self.srv.stop()
        trace = gz(torch_trace())
        names = ["o-rank-%d.17180000000%02d.pt.trace.json.gz" % (r, r) for r in range(3)]
        for n in names:
            self.drop(n, trace)
        self.drop("plain.1718000000099.pt.trace.json", torch_trace())  # a legacy bare array: spooled wrapped
        spool = os.path.join(self.agent.dir, "spool")
        wait_for(lambda: len(glob.glob(os.path.join(spool, "watch-*.json.gz"))) == 4, 15, what="four spooled documents")
        self.assertEqual(os.listdir(self.dir), [], "--remove: spooled files leave the watched directory")
        time.sleep(1.0)  # a few retries against a server that is down
        self.srv = start_server(port=port, db=db)
        wait_for(lambda: len(self.srv.sessions()) == 4, 20, what="the spool sent after the server came back")
        wait_for(lambda: not glob.glob(os.path.join(spool, "watch-*.json.gz")), 5, what="an empty spool")
        time.sleep(1.5)
        got = self.srv.sessions()
        self.assertEqual(sorted(s["labels"]["file"] for s in got), sorted(names + ["plain.1718000000099.pt.trace.json"]))
        for s in got:  # the labels travelled inside the spooled document
            self.assertEqual(s["labels"]["run"], "outage")
            self.assertRegex(s["labels"]["file_id"], "^[0-9a-f]{16}$")
            self.assertGreater(s["event_count"], 100)
        self.assertEqual(sorted(s["labels"].get("rank") for s in got if s["labels"]["engine"] == "vllm"), ["0", "1", "2"])


if __name__ == "__main__":
    unittest.main()
