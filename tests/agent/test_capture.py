"""Captures through the API: an agent with --target registers the engines it reaches, long-polls
the server, and profiles a stand-in vLLM or SGLang engine (engine.py) when asked; the ranks land
as one job. Each refusal of POST /api/v1/captures and of the agents' routes has its case."""
import json
import os
import shutil
import tempfile
import threading
import time
import unittest
import urllib.request

from agentlib import Agent, Engine, start_server, wait_for

LIMITS = ("--max-capture-seconds", "5", "--max-capture-steps", "200", "--captures-per-hour", "2", "--agent-timeout", "4")


def engine_calls(e):
    with urllib.request.urlopen(e.url + "/calls", timeout=5) as r:
        return json.loads(r.read())


class Captures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fp-cap-")
        cls.dirs = {k: os.path.join(cls.tmp, k) for k in ("v", "s", "n")}
        for d in cls.dirs.values():
            os.makedirs(d)
        cls.vllm = Engine("vllm", cls.dirs["v"], ranks=2, flush_s=2.0)
        cls.sgl = Engine("sglang", cls.dirs["s"], ranks=2, flush_s=1.5)
        cls.noprof = Engine("vllm", cls.dirs["n"], "--no-profiler")
        cls.srv = start_server(*LIMITS)
        for e in (cls.vllm, cls.sgl, cls.noprof):
            e.ready()
        cls.agent = Agent(cls.srv.base, "--agent", "node-1", "--settle", "0.3", "--model", "tiny-mlp",
                          "--target", "vllm=%s,dir=%s,name=vllm-a" % (cls.vllm.url, cls.dirs["v"]),
                          "--target", "sglang=%s,dir=%s,name=sglang-b,engine_dir=%s" % (cls.sgl.url, cls.dirs["s"], cls.dirs["s"]),
                          "--target", "vllm=%s,dir=%s,name=noprof" % (cls.noprof.url, cls.dirs["n"]))
        wait_for(lambda: len(cls.srv.json("/api/v1/targets")["targets"]) == 3, 10, what="the agent's three targets")

    @classmethod
    def tearDownClass(cls):
        cls.agent.stop()
        for e in (cls.vllm, cls.sgl, cls.noprof):
            e.stop()
        cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def capture(self, body, status=201):
        st, b = self.srv.request("POST", "/api/v1/captures", body)
        self.assertEqual(st, status, b)
        return b

    def follow(self, cid, timeout=60):
        """Polls the capture until it ends; returns (its last state, the statuses seen)."""
        seen = []
        end = time.time() + timeout
        while time.time() < end:
            c = self.srv.json("/api/v1/captures/%d" % cid)
            if not seen or seen[-1] != c["status"]:
                seen.append(c["status"])
            if c["status"] in ("uploaded", "failed"):
                return c, seen
            time.sleep(0.1)
        self.fail("capture %d did not end: %s; agent log:\n%s" % (cid, seen, self.agent.log()[-3000:]))

    def test_targets_list_the_agent_and_its_engines(self):
        t = {x["name"]: x for x in self.srv.json("/api/v1/targets")["targets"] if x["agent"] == "node-1"}
        self.assertEqual(set(t), {"vllm-a", "sglang-b", "noprof"})
        self.assertEqual((t["vllm-a"]["engine"], t["vllm-a"]["url"], t["vllm-a"]["agent"]), ("vllm", self.vllm.url, "node-1"))
        self.assertEqual(t["sglang-b"]["dir"], self.dirs["s"])
        self.assertTrue(all(x["online"] for x in t.values()))
        st, text = self.srv.request("GET", "/api/v1/targets?format=text")
        self.assertEqual(st, 200)
        self.assertIn("vllm-a", text.decode())

    def test_vllm_capture_by_seconds_lands_as_one_job(self):
        t0 = time.time()
        c = self.capture({"target": "vllm-a", "seconds": 1})
        self.assertEqual((c["status"], c["engine"], c["seconds"], c["steps"], c["job"]), ("queued", "vllm", 1, None, "capture-%d" % c["id"]))
        done, seen = self.follow(c["id"])
        took = time.time() - t0
        self.assertEqual(done["status"], "uploaded", done)
        self.assertIn("flushing", seen)
        self.assertEqual(len(done["sessions"]), 2)
        job = self.srv.json("/api/v1/jobs/capture-%d" % c["id"])
        self.assertEqual(sorted(r["rank"] for r in job["ranks"]), [0, 1])
        for s in self.srv.sessions("capture:%d" % c["id"]):
            lab = s["labels"]
            self.assertEqual((lab["engine"], lab["target"], lab["model"], lab["job"]), ("vllm", "vllm-a", "tiny-mlp", "capture-%d" % c["id"]))
            self.assertGreater(s["event_count"], 20)  # a real torch.profiler trace of the capture's second
        calls = [(x["method"], x["path"], x["body"]) for x in engine_calls(self.vllm)]
        self.assertEqual(calls[-2:], [("POST", "/start_profile", ""), ("POST", "/stop_profile", "")])
        print("vLLM capture of 1 s, 2 ranks, 2 s flush: uploaded %.1f s after the request" % took)

    def test_sglang_capture_by_steps_lands_as_one_job(self):
        c = self.capture({"target": "sglang-b", "steps": 20, "options": {"record_shapes": True}})
        done, seen = self.follow(c["id"])
        self.assertEqual(done["status"], "uploaded", done)
        self.assertEqual(len(done["sessions"]), 2)
        start = [x for x in engine_calls(self.sgl) if x["path"] == "/start_profile"][-1]
        body = json.loads(start["body"])
        self.assertEqual(body["num_steps"], 20)
        self.assertEqual(body["record_shapes"], True)
        self.assertEqual(body["output_dir"], self.dirs["s"])
        self.assertEqual(body["activities"], ["CPU", "GPU"])
        ranks = sorted((s["labels"]["tp_rank"], s["labels"]["engine"]) for s in self.srv.sessions("capture:%d" % c["id"]))
        self.assertEqual(ranks, [("0", "sglang"), ("1", "sglang")])
        self.assertEqual(len(self.srv.json("/api/v1/jobs/capture-%d" % c["id"])["ranks"]), 2)

    def test_engine_error_fails_the_capture_with_its_words(self):
        c = self.capture({"target": "noprof", "seconds": 1})
        done, _ = self.follow(c["id"])
        self.assertEqual(done["status"], "failed")
        self.assertIn("HTTP 404", done["error"])
        self.assertIn('{"detail":"Not Found"}', done["error"])

    def test_refusals(self):
        def refused(body, status, code, words):
            b = self.capture(body, status)
            self.assertEqual(b["error"]["code"], code, b)
            self.assertIn(words, b["error"]["message"])
        refused({"target": "nope", "seconds": 1}, 404, "not_found", "no registered target")
        refused({"target": "vllm-a", "seconds": 6}, 400, "invalid_parameter", "--max-capture-seconds")
        refused({"target": "sglang-b", "steps": 201}, 400, "invalid_parameter", "--max-capture-steps")
        refused({"target": "vllm-a", "steps": 5}, 400, "invalid_parameter", "no step count")
        refused({"target": "vllm-a", "seconds": 1, "options": {"record_shapes": True}}, 400, "invalid_parameter", "environment")
        refused({"target": "vllm-a", "seconds": 1, "steps": 2}, 400, "invalid_parameter", "one of")
        refused({"target": "vllm-a"}, 400, "invalid_parameter", "one of")
        refused({"target": "vllm-a", "seconds": 0}, 400, "invalid_parameter", "positive")
        refused({"target": "vllm-a", "seconds": 1, "secs": 1}, 400, "invalid_parameter", "unknown member")
        refused({"target": "vllm-a", "seconds": 1, "options": {"x": 1}}, 400, "invalid_parameter", "record_shapes")
        refused({"target": "../x", "seconds": 1}, 400, "invalid_parameter", "target")
        st, b = self.srv.request("POST", "/api/v1/captures", b"not json")
        self.assertEqual((st, b["error"]["code"]), (400, "invalid_json"))

        # A target whose agent takes nothing (registered by hand, never polls): one capture in
        # flight at a time, then --captures-per-hour (2).
        st, b = self.srv.request("PUT", "/api/v1/agents/hand", {"host": "h", "targets": [{"name": "idle-t", "engine": "vllm", "url": "http://10.0.0.9:8000"}]})
        self.assertEqual(st, 200, b)
        first = self.capture({"target": "idle-t", "seconds": 1})
        refused({"target": "idle-t", "seconds": 1}, 409, "conflict", "capture %d in flight" % first["id"])
        st, b = self.srv.request("POST", "/api/v1/captures/%d/status" % first["id"], {"agent": "hand", "status": "failed", "error": "stopped by hand"})
        self.assertEqual((st, b["status"], b["error"]), (200, "failed", "stopped by hand"))
        second = self.capture({"target": "idle-t", "seconds": 1})
        self.assertEqual(self.srv.request("POST", "/api/v1/captures/%d/status" % second["id"], {"agent": "hand", "status": "uploaded"})[0], 200)
        refused({"target": "idle-t", "seconds": 1}, 429, "rate_limited", "--captures-per-hour")

        # the agents' side refuses what would move a capture wrongly
        def status(cid, body, st, code):
            s, b = self.srv.request("POST", "/api/v1/captures/%d/status" % cid, body)
            self.assertEqual((s, b["error"]["code"] if s >= 400 else None), (st, code), b)
        status(second["id"], {"agent": "hand", "status": "running"}, 409, "conflict")       # over already
        status(second["id"], {"agent": "node-1", "status": "failed"}, 409, "conflict")      # not its agent's
        status(second["id"], {"agent": "hand", "status": "done"}, 400, "invalid_parameter")
        status(second["id"], {"status": "failed"}, 400, "invalid_parameter")
        status(999999, {"agent": "hand", "status": "failed"}, 404, "not_found")
        s, b = self.srv.request("POST", "/api/v1/agents/nobody/poll?wait=0")
        self.assertEqual((s, b["error"]["code"]), (404, "not_found"))
        s, b = self.srv.request("POST", "/api/v1/agents/hand/poll?wait=99")
        self.assertEqual((s, b["error"]["code"]), (400, "invalid_parameter"))
        for bad in ({"targets": [{"name": "x", "engine": "tgi", "url": "http://a"}]}, {"targets": [{"name": "x", "engine": "vllm", "url": "ftp://a"}]},
                    {"targets": "x"}, {"targets": [{"name": "a b", "engine": "vllm", "url": "http://a"}]},
                    {"targets": [{"name": "x", "engine": "vllm", "url": "http://a"}] * 2}):
            s, b = self.srv.request("PUT", "/api/v1/agents/hand2", bad)
            self.assertEqual((s, b["error"]["code"]), (400, "invalid_parameter"), bad)
        self.assertEqual(self.srv.request("PUT", "/api/v1/agents/bad%20name", {"targets": []})[0], 400)

    def test_an_agent_that_disappears_fails_its_captures(self):
        st, _ = self.srv.request("PUT", "/api/v1/agents/ghost", {"targets": [{"name": "ghost-t", "engine": "sglang", "url": "http://10.0.0.8:30000"}]})
        self.assertEqual(st, 200)
        c = self.capture({"target": "ghost-t", "seconds": 1})
        done, _ = self.follow(c["id"], timeout=15)  # --agent-timeout 4
        self.assertEqual(done["status"], "failed")
        self.assertIn("agent ghost has not been heard from", done["error"])
        t = {x["name"]: x for x in self.srv.json("/api/v1/targets")["targets"]}
        self.assertFalse(t["ghost-t"]["online"])
        self.assertTrue(t["vllm-a"]["online"], "a polling agent stays online")

    def test_an_agent_that_restarts_fails_what_it_held(self):
        body = {"targets": [{"name": "reboot-t", "engine": "vllm", "url": "http://10.0.0.7:8000"}]}
        self.assertEqual(self.srv.request("PUT", "/api/v1/agents/reboot", body)[0], 200)
        c = self.capture({"target": "reboot-t", "seconds": 1})
        st, got = self.srv.request("POST", "/api/v1/agents/reboot/poll?wait=0")
        self.assertEqual((st, got["capture"]["id"]), (200, c["id"]))  # handed out once ...
        st, again = self.srv.request("POST", "/api/v1/agents/reboot/poll?wait=0")
        self.assertIsNone(again["capture"])                            # ... not twice
        self.assertEqual(self.srv.request("PUT", "/api/v1/agents/reboot", body)[0], 200)
        c = self.srv.json("/api/v1/captures/%d" % c["id"])
        self.assertEqual(c["status"], "failed")
        self.assertIn("restarted", c["error"])

    def test_a_poll_waits_and_wakes_when_a_capture_is_asked(self):
        body = {"targets": [{"name": "wake-t", "engine": "vllm", "url": "http://10.0.0.6:8000"}]}
        self.assertEqual(self.srv.request("PUT", "/api/v1/agents/waker", body)[0], 200)
        got = {}

        def poll():
            t = time.time()
            got["r"] = self.srv.request("POST", "/api/v1/agents/waker/poll?wait=25")
            got["t"] = time.time() - t
        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.5)
        c = self.capture({"target": "wake-t", "seconds": 1})
        th.join(10)
        self.assertEqual(got["r"][1]["capture"]["id"], c["id"])
        self.assertLess(got["t"], 1.5, "the poll woke when the capture was asked for")
        # with nothing to hand out, a poll waits at most half of --agent-timeout (4 s), then answers null
        t = time.time()
        st, r = self.srv.request("POST", "/api/v1/agents/waker/poll")
        self.assertEqual((st, r["capture"]), (200, None))
        self.assertTrue(1.5 < time.time() - t < 3.5, time.time() - t)


class PollCap(unittest.TestCase):
    def test_polls_over_max_polls_answer_at_once(self):
        srv = start_server("--max-polls", "1")
        try:
            body = {"targets": [{"name": "t1", "engine": "vllm", "url": "http://10.0.0.5:8000"}]}
            self.assertEqual(srv.request("PUT", "/api/v1/agents/a1", body)[0], 200)
            th = threading.Thread(target=lambda: srv.request("POST", "/api/v1/agents/a1/poll?wait=3"))
            th.start()
            time.sleep(0.5)
            t = time.time()
            st, r = srv.request("POST", "/api/v1/agents/a1/poll?wait=3")
            self.assertEqual((st, r["capture"], r["retry_s"]), (200, None, 5))
            self.assertLess(time.time() - t, 1.0)
            th.join(10)
        finally:
            srv.stop()

    def test_a_stopping_server_answers_waiting_polls_at_once(self):
        srv = start_server()
        body = {"targets": [{"name": "t1", "engine": "vllm", "url": "http://10.0.0.5:8000"}]}
        self.assertEqual(srv.request("PUT", "/api/v1/agents/a1", body)[0], 200)
        got = {}
        th = threading.Thread(target=lambda: got.update(r=srv.request("POST", "/api/v1/agents/a1/poll?wait=25")))
        th.start()
        time.sleep(0.5)
        t = time.time()
        srv.stop()  # SIGTERM: the drain does not wait out the poll's 25 s
        took = time.time() - t
        th.join(5)
        self.assertEqual((got["r"][0], got["r"][1]["capture"]), (200, None))  # (a server with cancels adds "cancelled": [])
        self.assertLess(took, 8, "the server waited for the poll")



class NameHeld(unittest.TestCase):
    """Issue 50, item 10: the server refuses (409) a registration whose name another live
    instance holds. The agent's side of it: it says so with the fix, keeps running, retries
    with backoff, and registers once the other instance has gone silent (--agent-timeout)."""

    def test_a_refused_registration_is_said_and_retried(self):
        tmp = tempfile.mkdtemp(prefix="fp-held-")
        srv = start_server("--agent-timeout", "3")
        agent = None
        try:
            body = {"instance": "someone-else", "targets": [{"name": "other-t", "engine": "vllm", "url": "http://10.0.0.5:8000"}]}
            self.assertEqual(srv.request("PUT", "/api/v1/agents/held-node", body)[0], 200)
            agent = Agent(srv.base, "--agent", "held-node", "--target", "vllm=http://127.0.0.1:9,dir=%s,name=held-t" % tmp)
            wait_for(lambda: "name held by another agent" in agent.log(), 15, what="the agent's 409 line")
            log = agent.log()
            self.assertIn("give each agent its own --agent NAME", log)
            self.assertIsNone(agent.proc.poll(), "the agent keeps running")
            names = [t["name"] for t in srv.json("/api/v1/targets")["targets"]]
            self.assertNotIn("held-t", names)  # nothing taken while the other instance is live
            # the other instance goes silent: past --agent-timeout the name is free again
            wait_for(lambda: "held-t" in [t["name"] for t in srv.json("/api/v1/targets")["targets"]], 30,
                     what="the agent's registration once the name is free")
            self.assertIn("msg=registered", agent.log())
        finally:
            if agent:
                agent.stop()
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    unittest.main()
