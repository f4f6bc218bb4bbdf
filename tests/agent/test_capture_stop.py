"""Nothing an agent starts on an engine outlives the agent's knowledge of it (issue 50): an agent
stopped (SIGTERM) in the middle of a capture still stops the engine's profiler; one killed
(SIGKILL) mid-capture, or stopped while a slow /start_profile is still on its way (longer than
its 5 s grace), leaves the capture in its state file, and its next start stops the engine
before it registers. A profiler left running would go on slowing the replica, and vLLM refuses
every later start. The engine here flushes a recorded trace (engine.py --trace), no torch."""
import json
import os
import shutil
import signal
import tempfile
import time
import unittest
import urllib.request

from agentlib import ROOT, Agent, Engine, start_server, wait_for

TRACE = os.path.join(ROOT, "tests", "triage", "torch", "gloo_rank0.json.gz")


def engine_get(eng, path):
    with urllib.request.urlopen(eng.url + path, timeout=5) as r:
        return json.loads(r.read())


class StopDuringCapture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-cap-stop-")
        self.srv = start_server("--agent-timeout", "4")
        self.agents, self.eng = [], None

    def tearDown(self):
        for a in self.agents:
            if a.proc.poll() is None:
                a.stop()
        if self.eng:
            self.eng.stop()
        self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def engine(self, *args):
        self.eng = Engine("vllm", self.tmp, "--trace", TRACE, *args, ranks=2, flush_s=0.5)
        self.eng.ready()
        return self.eng

    def agent(self, *args, state=None):
        a = Agent(self.srv.base, "--agent", "stopper", "--settle", "0.3", "--target", "vllm=%s,dir=%s,name=t-stop" % (self.eng.url, self.tmp),
                  *args, state=state)
        self.agents.append(a)
        return a

    def capture(self, seconds):
        wait_for(lambda: any(t["online"] for t in self.srv.json("/api/v1/targets")["targets"]), 15, what="the registration")
        st, c = self.srv.request("POST", "/api/v1/captures", {"target": "t-stop", "seconds": seconds})
        self.assertEqual(st, 201, c)
        return c["id"]

    def status(self, cid):
        return self.srv.json("/api/v1/captures/%d" % cid)

    def test_a_stopped_agent_stops_the_engines_profiler(self):
        self.engine()
        agent = self.agent()
        cid = self.capture(20)
        wait_for(lambda: engine_get(self.eng, "/state")["running"], 10, what="the engine profiling")
        t = time.time()
        self.assertEqual(agent.stop(), 0)
        self.assertLess(time.time() - t, 10, "the agent stopped within its grace")
        calls = [x["path"] for x in engine_get(self.eng, "/calls")]
        self.assertEqual(calls, ["/start_profile", "/stop_profile"], "the profiler was left running")
        # the server fails the capture once the agent is not heard from (--agent-timeout 4)
        done = wait_for(lambda: (lambda x: x if x["status"] == "failed" else None)(self.status(cid)), 15, what="the capture failed")
        self.assertIn("has not been heard from", done["error"])

    def test_a_killed_agents_capture_is_stopped_by_its_next_start(self):
        self.engine("--refuse-busy-start")
        agent = self.agent()
        self.capture(30)
        wait_for(lambda: engine_get(self.eng, "/state")["running"], 10, what="the engine profiling")
        self.assertEqual(agent.stop(signal.SIGKILL), -signal.SIGKILL)
        self.assertTrue(engine_get(self.eng, "/state")["running"])
        again = self.agent(state=agent.state)
        wait_for(lambda: not engine_get(self.eng, "/state")["running"], 15, what="the restarted agent stopping the engine")
        wait_for(lambda: 'msg="stopped a capture left in flight" target=t-stop' in again.log(), 10, what="the log line")
        # the engine takes a new capture (vLLM refuses a start while one runs)
        cid = self.capture(1)
        done = wait_for(lambda: (lambda x: x if x["status"] in ("uploaded", "failed") else None)(self.status(cid)), 30,
                        what="the second capture")
        self.assertEqual(done["status"], "uploaded", done)

    def test_a_stop_during_a_slow_start_leaves_no_engine_profiling(self):
        """SIGTERM while /start_profile takes 8 s (over the agent's 5 s grace): the agent gives
        the call up and exits, the engine completes the start afterwards, and the agent's next
        start stops it."""
        self.engine("--start-delay", "8", "--refuse-busy-start")
        agent = self.agent()
        self.capture(5)
        wait_for(lambda: engine_get(self.eng, "/calls"), 10, what="the start call")
        time.sleep(1.0)
        t = time.time()
        self.assertEqual(agent.stop(), 0)
        self.assertLess(time.time() - t, 12, "the agent ended within its grace")
        wait_for(lambda: engine_get(self.eng, "/state")["running"], 15, what="the start completing after the agent left")
        again = self.agent(state=agent.state)
        wait_for(lambda: not engine_get(self.eng, "/state")["running"], 20, what="the next start stopping the engine")
        self.assertIn("start abandoned at the stop", agent.log())
        cid = self.capture(1)
        done = wait_for(lambda: (lambda x: x if x["status"] in ("uploaded", "failed") else None)(self.status(cid)), 40,
                        what="a capture after")
        self.assertEqual(done["status"], "uploaded", (done, again.log()[-2000:]))

    def test_the_agent_bounds_the_seconds_the_server_asks_for(self):
        """A hostile server (or a man in the middle on plain HTTP) cannot make the agent profile
        for 10^9 s: --max-capture-seconds refuses it before the engine is called."""
        self.engine()
        self.agent("--max-capture-seconds", "2")
        cid = self.capture(5)  # the server allows 60
        done = wait_for(lambda: (lambda x: x if x["status"] in ("uploaded", "failed") else None)(self.status(cid)), 15,
                        what="the refusal")
        self.assertEqual(done["status"], "failed")
        self.assertIn("--max-capture-seconds is 2", done["error"])
        self.assertEqual(engine_get(self.eng, "/calls"), [], "the engine was called")


if __name__ == "__main__":
    unittest.main()
