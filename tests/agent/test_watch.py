"""firstpass-upload --watch: a trace dropped into a watched directory lands as a session with
its labels; a half-written file is never sent; a file the server refuses is not sent again."""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from agentlib import Agent, events, gz, start_server, torch_trace, wait_for


def metric(srv, name):
    st, body = srv.request("GET", "/metrics")
    m = re.search(re.escape(name) + r" (\d+)", body.decode())
    return int(m.group(1)) if m else 0


class Watch(unittest.TestCase):
    def setUp(self):
        self.srv = start_server()
        self.dir = tempfile.mkdtemp(prefix="fp-watch-")
        self.agent = None

    def tearDown(self):
        if self.agent:
            self.agent.stop()
        self.srv.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def drop(self, name, data):
        """Puts a whole file into the watched directory at once (written beside, renamed in)."""
        tmp = os.path.join(self.dir, "." + name + ".part")
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, os.path.join(self.dir, name))

    def test_dropped_trace_lands_with_its_labels(self):
        self.agent = Agent(self.srv.base, "--watch", self.dir, "--settle", "0.3", "--model", "llama-8b", "--label", "team:infer",
                           "--host", "gpu-node-7")
        trace = gz(torch_trace())
        t0 = time.time()
        self.drop("0123abcd-rank-1.1718000000123.pt.trace.json.gz", trace)
        s = wait_for(lambda: self.srv.sessions(), 10, what="the vLLM worker file as a session")[0]
        took = time.time() - t0
        self.assertLess(took, 5, "a dropped trace lands within seconds")
        lab = s["labels"]
        self.assertEqual(lab["model"], "llama-8b")
        self.assertEqual(lab["team"], "infer")
        self.assertEqual(lab["host"], "gpu-node-7")
        self.assertEqual(lab["engine"], "vllm")
        self.assertEqual(lab["rank"], "1")
        self.assertTrue(lab["job"].startswith("vllm-0123abcd-"), lab)
        self.assertEqual(lab["file"], "0123abcd-rank-1.1718000000123.pt.trace.json.gz")
        self.assertRegex(lab["file_id"], "^[0-9a-f]{16}$")
        self.assertEqual(s["name"], "0123abcd-rank-1.1718000000123")
        self.assertGreater(s["event_count"], 10)
        print("dropped trace -> session in %.2f s" % took)

        # SGLang's ranks of one profile: one job, tp_rank and rank from the name, side by side
        for r in (0, 1):
            self.drop("1718000042.5-TP-%d.trace.json.gz" % r, trace)
        wait_for(lambda: len(self.srv.sessions("job:sglang-1718000042.5")) == 2, 10, what="both SGLang ranks")
        ranks = sorted((x["labels"]["tp_rank"], x["labels"]["rank"], x["labels"]["engine"]) for x in self.srv.sessions("job:sglang-1718000042.5"))
        self.assertEqual(ranks, [("0", "0", "sglang"), ("1", "1", "sglang")])
        job = self.srv.json("/api/v1/jobs/sglang-1718000042.5")
        self.assertEqual(sorted(r["rank"] for r in job["ranks"]), [0, 1])

        # vLLM's newer naming (dp/pp/tp/rank) and a plain tensorboard_trace_handler file
        self.drop("dp0_pp0_tp1_dcp0_ep0_rank1.1718000000456789.pt.trace.json.gz", trace)
        self.drop("myhost_4242.1718000000789.pt.trace.json", torch_trace())
        wait_for(lambda: len(self.srv.sessions()) == 5, 10, what="five sessions")
        new = self.srv.sessions("tp_rank:1", "engine:vllm")[0]["labels"]
        self.assertEqual((new["rank"], new["dp_rank"], new["pp_rank"]), ("1", "0", "0"))
        plain = self.srv.sessions("engine:torch")[0]
        self.assertNotIn("rank", plain["labels"])
        self.assertNotIn("job", plain["labels"])
        # what is not a trace is left alone
        self.drop("profiler_out_0.txt", b"table")
        self.drop("1718000042.5-TP-0-memory.pickle", b"x")
        time.sleep(1.0)
        self.assertEqual(len(self.srv.sessions()), 5)

    def test_half_written_gzip_is_never_sent(self):
        """A writer that appends a piece and closes the file each time, pausing longer than the
        settle time: only the gzip trailer check stands between it and a half-written upload."""
        self.agent = Agent(self.srv.base, "--watch", self.dir, "--settle", "0.2")
        data = gz(torch_trace() * 1)
        path = os.path.join(self.dir, "slow.1718000000001.pt.trace.json.gz")
        pieces = [data[i:i + len(data) // 5 + 1] for i in range(0, len(data), len(data) // 5 + 1)]
        self.assertGreaterEqual(len(pieces), 5)
        for p in pieces[:-1]:
            with open(path, "ab") as f:
                f.write(p)
            time.sleep(0.7)  # > settle: the size has been stable, the file closed
            self.assertEqual(self.srv.sessions(), [], "a half-written gzip file was sent")
        with open(path, "ab") as f:
            f.write(pieces[-1])
        s = wait_for(lambda: self.srv.sessions(), 10, what="the whole file")
        self.assertEqual(len(s), 1)
        self.assertEqual(s[0]["bytes_in"], len(data))
        self.assertEqual(metric(self.srv, 'firstpass_uploads_total{result="rejected"}'), 0)

    def test_half_written_json_held_open_is_never_sent(self):
        """A plain JSON trace written in pieces by a writer that keeps it open, each piece ending
        where a JSON value closes: inotify says it is not closed, so it is not sent."""
        self.agent = Agent(self.srv.base, "--watch", self.dir, "--settle", "0.2")
        # the agent's inotify watch is in place once a file dropped in has landed (a fixed pause
        # was too short for an ASan build on a loaded machine: a file older than the watch
        # relies on the settle time and the content check alone, watch.h)
        self.drop("ready.1718000000001.pt.trace.json", torch_trace())
        wait_for(lambda: self.srv.sessions(), 30, what="the first file")
        evs = events(torch_trace())
        name = "open.1718000000002.pt.trace.json"
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write('{"traceEvents": [')
            for i in range(4):
                part = evs[i * len(evs) // 4:(i + 1) * len(evs) // 4]
                f.write(("," if i else "") + ",".join(json.dumps(e) for e in part))
                f.flush()
                time.sleep(0.7)
                self.assertEqual(self.srv.sessions("file:" + name), [], "a JSON file still open for writing was sent")
            f.write("]}")
        wait_for(lambda: self.srv.sessions("file:" + name), 10, what="the closed file")
        time.sleep(0.5)
        self.assertEqual(len(self.srv.sessions("file:" + name)), 1)
        self.assertEqual(metric(self.srv, 'firstpass_uploads_total{result="rejected"}'), 0)

    def test_refused_file_is_not_sent_again(self):
        self.agent = Agent(self.srv.base, "--watch", self.dir, "--settle", "0.2", "--retry", "0.3")
        self.drop("bad.json", b'{"traceEvents": 5}')
        wait_for(lambda: "msg=refused" in self.agent.log(), 10, what="the refusal in the log")
        time.sleep(1.5)
        self.assertEqual(metric(self.srv, 'firstpass_uploads_total{result="rejected"}'), 1)
        self.assertEqual(self.srv.sessions(), [])
        with open(self.agent.state) as f:
            self.assertIn("refused", f.read())


if __name__ == "__main__":
    unittest.main()
