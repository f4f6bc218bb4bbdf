"""Captures with access tokens on (--tokens-file): asking for a capture, registering and polling
all need the write token, and the agent works through it (no inbound port, only its requests)."""
import os
import shutil
import tempfile
import time
import unittest

from agentlib import ROOT, Agent, Engine, start_server, wait_for

TOKEN = "serving-test-token-0123456789"
# A recorded trace the stand-in flushes: no torch to import (on a loaded machine torch's import
# alone outlasted the capture's wait); test_capture.py records real ones.
TRACE = os.path.join(ROOT, "tests", "triage", "torch", "gloo_rank0.json.gz")


class Tokens(unittest.TestCase):
    def test_captures_need_the_write_token_and_the_agent_uses_it(self):
        tmp = tempfile.mkdtemp(prefix="fp-cap-auth-")
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "w") as f:
            f.write("ops %s\n" % TOKEN)
        os.chmod(tokens, 0o600)
        d = os.path.join(tmp, "v")
        os.makedirs(d)
        eng = Engine("vllm", d, "--naming", "new", "--trace", TRACE, ranks=2, flush_s=1.0)
        srv = start_server("--tokens-file", tokens)
        anon = Agent(srv.base, "--agent", "no-token", "--target", "vllm=http://127.0.0.1:1,dir=%s,name=never" % tmp)
        agent = None
        try:
            eng.ready()
            agent = Agent(srv.base, "--agent", "gpu-3", "--token", TOKEN, "--settle", "0.3",
                          "--target", "vllm=%s,dir=%s,name=replica-3" % (eng.url, d))
            auth = {"Authorization": "Bearer " + TOKEN}
            wait_for(lambda: srv.request("GET", "/api/v1/targets")[1]["targets"], 10, what="the registration")
            names = [t["name"] for t in srv.json("/api/v1/targets")["targets"]]
            self.assertEqual(names, ["replica-3"], "the agent without a token could not register")
            self.assertIn("msg=\"registration refused\" status=401", anon.log())
            body = {"target": "replica-3", "seconds": 1}
            st, b = srv.request("POST", "/api/v1/captures", body)
            self.assertEqual((st, b["error"]["code"]), (401, "unauthorized"))
            st, b = srv.request("POST", "/api/v1/captures", body, {"Authorization": "Bearer wrong-token-000000"})
            self.assertEqual((st, b["error"]["code"]), (403, "forbidden"))
            for path in ("/api/v1/agents/x/poll", "/api/v1/captures/1/status"):
                self.assertEqual(srv.request("POST", path, {})[0], 401, path)
            self.assertEqual(srv.request("PUT", "/api/v1/agents/x", {"targets": []})[0], 401)
            st, c = srv.request("POST", "/api/v1/captures", body, auth)
            self.assertEqual(st, 201, c)
            def ended():
                x = srv.json("/api/v1/captures/%d" % c["id"])
                return x if x["status"] in ("uploaded", "failed") else None
            try:
                done = wait_for(ended, 60, 0.2, "the capture to end")
            except AssertionError as e:
                raise AssertionError("%s; agent log:\n%s\nengine log:\n%s" % (e, agent.log()[-3000:], eng.log()[-2000:]))
            self.assertEqual(done["status"], "uploaded", (done, agent.log()))
            ranks = sorted((s["labels"]["rank"], s["labels"]["tp_rank"]) for s in srv.sessions("capture:%d" % c["id"]))
            self.assertEqual(ranks, [("0", "0"), ("1", "1")])  # vLLM's newer file names: dp/pp/tp/rank
        finally:
            if agent:
                agent.stop()
            anon.stop()
            eng.stop()
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
