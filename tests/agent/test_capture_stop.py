"""An agent stopped (SIGTERM) in the middle of a capture still stops the engine's profiler: a
profiler left running would go on slowing the replica. The engine here flushes a recorded
trace (engine.py --trace), no torch."""
import json
import os
import shutil
import tempfile
import time
import unittest
import urllib.request

from agentlib import ROOT, Agent, Engine, start_server, wait_for

TRACE = os.path.join(ROOT, "tests", "triage", "torch", "gloo_rank0.json.gz")


class StopDuringCapture(unittest.TestCase):
    def test_a_stopped_agent_stops_the_engines_profiler(self):
        tmp = tempfile.mkdtemp(prefix="fp-cap-stop-")
        eng = Engine("vllm", tmp, "--trace", TRACE, ranks=2, flush_s=0.5)
        srv = start_server("--agent-timeout", "4")
        agent = None
        try:
            eng.ready()
            agent = Agent(srv.base, "--agent", "stopper", "--settle", "0.3", "--target", "vllm=%s,dir=%s,name=t-stop" % (eng.url, tmp))
            wait_for(lambda: srv.json("/api/v1/targets")["targets"], 10, what="the registration")
            st, c = srv.request("POST", "/api/v1/captures", {"target": "t-stop", "seconds": 20})
            self.assertEqual(st, 201, c)
            wait_for(lambda: srv.json("/api/v1/captures/%d" % c["id"])["status"] == "running", 10, what="running")
            t = time.time()
            self.assertEqual(agent.stop(), 0)
            self.assertLess(time.time() - t, 10, "the agent stopped within its grace")
            with urllib.request.urlopen(eng.url + "/calls", timeout=5) as r:
                calls = [x["path"] for x in json.loads(r.read())]
            self.assertEqual(calls, ["/start_profile", "/stop_profile"], "the profiler was left running")
            # the server fails the capture once the agent is not heard from (--agent-timeout 4)
            done = wait_for(lambda: (lambda x: x if x["status"] == "failed" else None)(srv.json("/api/v1/captures/%d" % c["id"])), 15,
                            what="the capture failed")
            self.assertIn("has not been heard from", done["error"])
        finally:
            if agent and agent.proc.poll() is None:
                agent.stop()
            eng.stop()
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
