"""Hostile input, round 4 (issue 50), the server's side: steps past --max-steps (the breakdown
keeps the earliest, /steps is paged, the gate reads stored numbers), the Idempotency-Key of
uploads (a second upload of a key stored or in flight), captures whose claim died with its
poll (--claim-timeout, a reset connection) and their cancel, the agents' and targets'
registries (expiry, caps, pages), and names (repaired, never cut silently; a live agent's
name or target is not taken)."""
import http.client
import json
import socket
import struct
import threading
import time
import unittest

from fpserver import Server, pg_only


def ev(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def steps_trace(n, threads=2):
    """n ProfilerStep ranges of 10 us, 1 us apart, spread round-robin over `threads` threads
    so that the walk (thread by thread) meets them out of start order; each holds an op."""
    evs = []
    for i in range(n):
        t = 20 * i
        tid = 1 + i % threads
        evs += [ev("ProfilerStep#%d" % i, t, 10 + (i % 3), "user_annotation", tid=tid), ev("aten::add", t + 1, 5, tid=tid)]
    return json.dumps({"traceEvents": evs}).encode()


TINY = json.dumps({"traceEvents": [ev("aten::mm", 1, 5), ev("aten::add", 10, 3)]}).encode()
# A probe for a key in flight: should it come first, it fails (400) and frees the key again,
# never storing a session of the key before the upload under test.
CUT = b'{"traceEvents": ['


def probe_until_409(srv, key):
    """Uploads CUT with key until the answer is 409 (the other upload's head is in), at most 10 s.
    Why a second's wait first: a probe holds the key for its own short life, and an upload whose
    head comes meanwhile is the one refused (409); the head takes milliseconds."""
    time.sleep(1)
    deadline = time.time() + 10
    while True:
        st, h, b = srv.upload(CUT, "", {"Idempotency-Key": key})
        if st != 400 or time.time() > deadline:
            return st, h, b
        time.sleep(0.1)


def call(srv, method, path, body=None, headers=None):
    st, h, b = srv.request(method, path, json.dumps(body).encode() if isinstance(body, (dict, list)) else body,
                           {"Content-Type": "application/json", **(headers or {})})
    return st, h, json.loads(b) if b else None


class Steps(unittest.TestCase):
    """Issue 50, item 1: every ProfilerStep range was a step held by every surface (~2 KB
    each; 1M steps in 2.7 MB of gzip: 2 GB peak, a 200 MB stored breakdown, /regressions 14 s
    a call). Past --max-steps the breakdown keeps the earliest by start, the rest counted."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-steps", "5")
        cls.capped = cls.srv.upload_ok(steps_trace(20), "?name=capped")
        cls.small = cls.srv.upload_ok(steps_trace(4), "?name=small")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_the_earliest_steps_are_kept_the_rest_counted(self):
        b = self.srv.json("/api/v1/sessions/%d/steps" % self.capped)
        self.assertEqual([s["name"] for s in b["steps"]], ["ProfilerStep#%d" % i for i in range(5)])
        self.assertEqual((b["total"], b["steps_over_cap"], b["offset"]), (5, 15, 0))
        # the step phase counts every range (per-step figures divide whole-trace totals by it)
        ph = {p["name"]: p for p in self.srv.json("/api/v1/sessions/%d/phases" % self.capped)["phases"]}
        self.assertEqual(ph["ProfilerStep*"]["count"], 20)

    def test_under_the_cap_nothing_changes(self):
        b = self.srv.json("/api/v1/sessions/%d/steps" % self.small)
        self.assertEqual((b["total"], b["steps_over_cap"], len(b["steps"])), (4, 0, 4))
        ph = {p["name"]: p for p in self.srv.json("/api/v1/sessions/%d/phases" % self.small)["phases"]}
        self.assertEqual(ph["ProfilerStep*"]["count"], 4)

    def test_steps_are_paged(self):
        all_ = self.srv.json("/api/v1/sessions/%d/steps" % self.capped)
        page = self.srv.json("/api/v1/sessions/%d/steps?offset=1&limit=2" % self.capped)
        self.assertEqual(page["steps"], all_["steps"][1:3])
        self.assertEqual((page["total"], page["offset"], page["limit"]), (5, 1, 2))
        self.assertEqual(page["mean"], all_["mean"])  # the mean is of every step, whatever the page
        self.assertEqual(self.srv.json("/api/v1/sessions/%d/steps?offset=9" % self.capped)["steps"], [])
        for bad in ("offset=-1", "limit=0", "limit=10001", "offset=x"):
            st, _, b = self.srv.get("/api/v1/sessions/%d/steps?%s" % (self.capped, bad))
            self.assertEqual(st, 400, bad)
        st, _, b = self.srv.get("/api/v1/sessions/%d/steps?format=csv&limit=2" % self.capped)
        self.assertEqual((st, len(b.decode().strip().splitlines())), (200, 3))

    def test_the_gate_reads_the_stored_step_numbers(self):
        st, _, b = call(self.srv, "PUT", "/api/v1/baselines/cap", {"session_id": self.small})
        self.assertIn(st, (200, 201), b)
        r = self.srv.json("/api/v1/sessions/%d/regressions?baseline=cap" % self.capped)
        steps = self.srv.json("/api/v1/sessions/%d/steps" % self.capped)["steps"]
        durs = [s["dur_us"] for s in steps]
        mean = sum(durs) / len(durs)
        self.assertEqual(r["verdict"]["steps"]["head"]["count"], 5)
        self.assertAlmostEqual(r["verdict"]["steps"]["head"]["mean_us"], mean, places=9)


def slow_upload(port, key, first, wait):
    """Sends an upload's head and `first` body bytes with Idempotency-Key `key`, then waits
    for `wait` (an Event) before the rest: an upload in flight. Returns the status line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(("POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (key, len(TINY))).encode() + TINY[:first])
        wait.wait(30)
        s.sendall(TINY[first:])
        got = b""
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


class IdempotencyKey(unittest.TestCase):
    """Issue 50, item 3: the agent asked "is file_id stored?" while the server was still
    analysing it, read "none" and sent it again (two sessions of one file). With
    Idempotency-Key, a second upload of a key a stored session holds is a 200 with its reply,
    and one whose first upload is still in flight a 409 with Retry-After."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_a_stored_key_answers_its_session(self):
        st, h, first = self.srv.upload(TINY, "?name=k1", {"Idempotency-Key": "file-0001"})
        self.assertEqual(st, 201, first)
        n = len(self.srv.json("/api/v1/sessions?limit=1000")["sessions"])
        st, h, again = self.srv.upload(TINY, "?name=k1", {"Idempotency-Key": '"file-0001"'})  # the sf-string form is the same key
        self.assertEqual((st, again), (200, first))
        self.assertEqual(len(self.srv.json("/api/v1/sessions?limit=1000")["sessions"]), n, "stored twice")

    def test_a_key_in_flight_is_409_with_retry_after(self):
        go = threading.Event()
        out = {}
        th = threading.Thread(target=lambda: out.update(r=slow_upload(self.srv.port, "file-0002", 10, go)))
        th.start()
        try:
            st, h, b = probe_until_409(self.srv, "file-0002")
            self.assertEqual((st, b["error"]["code"]), (409, "conflict"), b)
            self.assertEqual(h.get("Retry-After"), "5")
            self.assertIn("in flight", b["error"]["message"])
        finally:
            go.set()
            th.join(30)
        self.assertIn(b" 201 ", out["r"].split(b"\r\n")[0])
        st, _, b = self.srv.upload(TINY, "", {"Idempotency-Key": "file-0002"})
        self.assertEqual(st, 200, b)

    def test_a_failed_upload_frees_its_key(self):
        st, _, b = self.srv.upload(b'{"traceEvents": [', "", {"Idempotency-Key": "file-0003"})
        self.assertEqual(st, 400, b)
        st, _, b = self.srv.upload(TINY, "", {"Idempotency-Key": "file-0003"})
        self.assertEqual(st, 201, b)

    def test_a_key_is_bounded(self):
        for bad in ("k" * 256, '"open', "a b", '"a"b"', "caf\u00e9".encode().decode("latin-1")):
            st, _, b = self.srv.upload(TINY, "", {"Idempotency-Key": bad})
            self.assertEqual((st, b["error"]["code"]), (400, "invalid_parameter"), bad)
        st, _, b = self.srv.upload(TINY, "", {"Idempotency-Key": "k" * 255})
        self.assertEqual(st, 201, b)

    @pg_only
    def test_another_server_on_the_database_sees_the_key(self):
        """Two servers on one PostgreSQL database (make test-pg; one server per SQLite file): an upload in
        flight on one makes the other answer 409; once stored, 200."""
        other = Server(db=self.srv.db)
        try:
            go = threading.Event()
            out = {}
            th = threading.Thread(target=lambda: out.update(r=slow_upload(self.srv.port, "file-0004", 10, go)))
            th.start()
            try:
                st, _, b = probe_until_409(other, "file-0004")
                self.assertEqual(st, 409, b)
            finally:
                go.set()
                th.join(30)
            sid = json.loads(out["r"].split(b"\r\n\r\n", 1)[1])["id"]
            st, _, b = other.upload(TINY, "", {"Idempotency-Key": "file-0004"})
            self.assertEqual((st, b["id"]), (200, sid))
        finally:
            other.stop()


def register(srv, name, targets, instance=None, expect=200):
    body = {"host": "h", "targets": [{"name": t, "engine": "vllm", "url": "http://10.0.0.9:8000"} for t in targets]}
    if instance:
        body["instance"] = instance
    st, _, b = call(srv, "PUT", "/api/v1/agents/" + name, body)
    if expect is not None:
        assert st == expect, (st, b)
    return st, b


def poll(srv, agent):
    st, _, b = call(srv, "POST", "/api/v1/agents/%s/poll?wait=0" % agent)
    assert st == 200, (st, b)
    return b


class Claims(unittest.TestCase):
    """Issue 50, item 4: a capture handed out to a poll whose connection had died was never
    handed out again, and every new capture of its target was 409 until the agent restarted."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--claim-timeout", "2", "--agent-timeout", "30")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def capture(self, target):
        st, _, c = call(self.srv, "POST", "/api/v1/captures", {"target": target, "seconds": 1})
        self.assertEqual(st, 201, c)
        return c

    def test_an_unconfirmed_claim_goes_back_to_the_queue(self):
        register(self.srv, "claimer", ["claim-t"])
        c = self.capture("claim-t")
        self.assertEqual(poll(self.srv, "claimer")["capture"]["id"], c["id"])
        self.assertIsNone(poll(self.srv, "claimer")["capture"])  # claimed: not twice at once
        time.sleep(3.5)  # --claim-timeout 2 (whole seconds): nobody confirmed it
        self.assertEqual(poll(self.srv, "claimer")["capture"]["id"], c["id"])
        st, _, b = call(self.srv, "POST", "/api/v1/captures/%d/status" % c["id"], {"agent": "claimer", "status": "running"})
        self.assertEqual((st, b["status"]), (200, "running"))
        time.sleep(3.5)  # confirmed: it stays the agent's
        self.assertIsNone(poll(self.srv, "claimer")["capture"])
        call(self.srv, "POST", "/api/v1/captures/%d/status" % c["id"], {"agent": "claimer", "status": "failed", "error": "test"})

    def test_cancel(self):
        register(self.srv, "canceller", ["cancel-t"])
        c = self.capture("cancel-t")
        self.assertEqual(poll(self.srv, "canceller")["capture"]["id"], c["id"])
        # a waiting poll of its agent wakes with the cancel
        got = {}
        th = threading.Thread(target=lambda: got.update(r=call(self.srv, "POST", "/api/v1/agents/canceller/poll?wait=10")))
        th.start()
        time.sleep(0.5)
        t0 = time.time()
        st, _, b = call(self.srv, "POST", "/api/v1/captures/%d/cancel" % c["id"])
        self.assertEqual((st, b["status"]), (200, "cancelled"), b)
        th.join(15)
        self.assertLess(time.time() - t0, 3)
        self.assertIn(c["id"], got["r"][2]["cancelled"])
        # the agent's next status report hears it; nothing moves the capture
        st, _, b = call(self.srv, "POST", "/api/v1/captures/%d/status" % c["id"], {"agent": "canceller", "status": "running"})
        self.assertEqual((st, b["status"]), (200, "cancelled"))
        st, _, b = call(self.srv, "POST", "/api/v1/captures/%d/cancel" % c["id"])
        self.assertEqual((st, b["error"]["code"]), (409, "conflict"))
        self.assertEqual(call(self.srv, "POST", "/api/v1/captures/999999/cancel")[0], 404)
        self.capture("cancel-t")  # the target is free again


class CaptureHistory(unittest.TestCase):
    """Capture rows were never forgotten: each finished capture stayed, and with Kubernetes
    pods coming and going as targets the table only grew. --max-captures keeps the newest
    finished ones; a capture in flight is never forgotten, and the sessions stay."""

    def test_the_oldest_finished_captures_go(self):
        srv = Server("--max-captures", "2", "--agent-timeout", "30")
        try:
            register(srv, "historian", ["hist-t", "hist-u"])
            ids = []
            for i in range(4):
                st, _, c = call(srv, "POST", "/api/v1/captures", {"target": "hist-t", "seconds": 1})
                self.assertEqual(st, 201, c)
                ids.append(c["id"])
                st, _, b = call(srv, "POST", "/api/v1/captures/%d/cancel" % c["id"])
                self.assertEqual(st, 200, b)
            # in flight on another target while the bound is passed: kept
            st, _, live = call(srv, "POST", "/api/v1/captures", {"target": "hist-u", "seconds": 1})
            self.assertEqual(st, 201, live)
            st, _, c = call(srv, "POST", "/api/v1/captures", {"target": "hist-t", "seconds": 1})
            self.assertEqual(st, 201, c)
            st, _, b = call(srv, "GET", "/api/v1/captures?limit=100")
            self.assertEqual(st, 200, b)
            kept = sorted(x["id"] for x in b["captures"])
            self.assertEqual(kept, sorted(ids[2:] + [live["id"], c["id"]]))
            self.assertEqual(call(srv, "GET", "/api/v1/captures/%d" % ids[0])[0], 404)
        finally:
            srv.stop()


class ResetPoll(unittest.TestCase):
    """Issue 50, item 4: the long poll's check for a gone client read only recv() == 0; after
    an RST the first recv() reports ECONNRESET, so a reset poll woke, claimed and answered
    nobody. (Flags main has too, so that the test runs there.)"""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--agent-timeout", "30")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def capture(self, target):
        st, _, c = call(self.srv, "POST", "/api/v1/captures", {"target": target, "seconds": 1})
        self.assertEqual(st, 201, c)
        return c

    def test_a_reset_poll_claims_nothing(self):
        """A poll whose connection was reset (RST) is gone: the capture asked for next stays
        queued for a live poll (recv() reports the reset as an error, not as 0)."""
        register(self.srv, "resetter", ["reset-t"])
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        s.sendall(b"POST /api/v1/agents/resetter/poll?wait=20 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        time.sleep(0.5)  # the poll waits
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # an RST, not a FIN
        c = self.capture("reset-t")  # wakes the waiting poll at once
        time.sleep(1.5)
        got = self.srv.json("/api/v1/captures/%d" % c["id"])
        self.assertIsNone(got["claimed_at"], "the reset poll claimed the capture for nobody")
        self.assertEqual(poll(self.srv, "resetter")["capture"]["id"], c["id"])
        call(self.srv, "POST", "/api/v1/captures/%d/status" % c["id"], {"agent": "resetter", "status": "failed", "error": "test"})

class Registries(unittest.TestCase):
    """Issue 50, item 7: nothing expired an agent, nothing capped them, and GET /targets
    answered every target (32,000: 143 MB, 479 MB peak)."""

    def test_caps(self):
        srv = Server("--max-agents", "2", "--max-targets", "3")
        try:
            register(srv, "a1", ["t1", "t2"])
            register(srv, "a2", ["t3"])
            st, b = register(srv, "a3", [], expect=None)
            self.assertEqual((st, b["error"]["code"]), (507, "insufficient_storage"))
            self.assertIn("--max-agents", b["error"]["message"])
            st, b = register(srv, "a2", ["t3", "t4"], expect=None)
            self.assertEqual(st, 507, b)
            self.assertIn("--max-targets", b["error"]["message"])
            register(srv, "a1", ["t1"])  # an agent may always shrink or keep its own
            register(srv, "a2", ["t3", "t4"])
        finally:
            srv.stop()

    def test_a_silent_agent_expires_with_its_targets(self):
        srv = Server("--agent-timeout", "2", "--agent-expiry", "2")
        try:
            register(srv, "gone", ["gone-t"])
            register(srv, "alive", ["alive-t"])
            for _ in range(4):
                time.sleep(1)
                poll(srv, "alive")
            names = [t["name"] for t in srv.json("/api/v1/targets")["targets"]]
            self.assertEqual(names, ["alive-t"])
            st, _, b = call(srv, "POST", "/api/v1/agents/gone/poll?wait=0")
            self.assertEqual(st, 404, b)  # forgotten: it registers again
        finally:
            srv.stop()

    def test_targets_are_paged(self):
        srv = Server()
        try:
            register(srv, "pager", ["p%02d" % i for i in range(12)])
            t = srv.json("/api/v1/targets?offset=5&limit=4")
            self.assertEqual([x["name"] for x in t["targets"]], ["p05", "p06", "p07", "p08"])
            self.assertEqual((t["total"], t["offset"], t["limit"]), (12, 5, 4))
            self.assertEqual(len(srv.json("/api/v1/targets")["targets"]), 12)
            for bad in ("limit=0", "limit=1001", "offset=-1"):
                self.assertEqual(srv.get("/api/v1/targets?" + bad)[0], 400, bad)
            # the newest capture of each target comes with its sessions, as GET /captures/{id} has it
            st, _, c = call(srv, "POST", "/api/v1/captures", {"target": "p03", "seconds": 1})
            self.assertEqual(st, 201, c)
            st, _, _ = srv.upload(TINY, "?label=capture:%d" % c["id"])
            row = [x for x in srv.json("/api/v1/targets?limit=5")["targets"] if x["name"] == "p03"][0]
            one = srv.json("/api/v1/captures/%d" % c["id"])
            for x in (row["capture"], one):
                x.pop("elapsed_s")  # seconds to now: the two reads may straddle one
            self.assertEqual(row["capture"], one)
            self.assertEqual(len(row["capture"]["sessions"]), 1)
        finally:
            srv.stop()


class Names(unittest.TestCase):
    """Issue 50, item 10: a 65-byte agent name was cut to 64 silently, and a registration
    took the name, or a target, of another live agent."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--agent-timeout", "30")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_a_long_name_is_repaired_the_same_everywhere(self):
        long_a, long_b = "node-" + "x" * 60 + "-a", "node-" + "x" * 60 + "-b"
        st, a = register(self.srv, long_a, ["t-" + "y" * 70])
        st, b = register(self.srv, long_b, [])
        self.assertEqual(len(a["agent"]), 64)
        self.assertTrue(a["agent"].startswith(long_a[:55] + "-"), a["agent"])
        self.assertNotEqual(a["agent"], b["agent"])  # not one name for two agents
        self.assertEqual(len(a["targets"][0]), 64)
        self.assertEqual(poll(self.srv, long_a)["capture"], None)  # the path's long name is the same agent
        st, _, c = call(self.srv, "POST", "/api/v1/captures", {"target": "t-" + "y" * 70, "seconds": 1})
        self.assertEqual((st, c["agent"], c["target"]), (201, a["agent"], a["targets"][0]))
        st, _, s = call(self.srv, "POST", "/api/v1/captures/%d/status" % c["id"], {"agent": long_a, "status": "failed", "error": "test"})
        self.assertEqual((st, s["status"]), (200, "failed"))
        self.assertEqual(register(self.srv, "x" * 1025, [], expect=None)[0], 400)

    def test_another_live_instance_of_a_name_is_refused(self):
        register(self.srv, "twin", ["twin-t"], instance="i-one")
        st, b = register(self.srv, "twin", ["twin-t"], instance="i-two", expect=None)
        self.assertEqual((st, b["error"]["code"]), (409, "conflict"))
        self.assertIn("i-one", b["error"]["message"])
        self.assertIn("s ago", b["error"]["message"])
        register(self.srv, "twin", ["twin-t"], instance="i-one")  # the same instance again: its restart of a registration
        self.assertEqual([t["agent"] for t in self.srv.json("/api/v1/targets")["targets"] if t["name"] == "twin-t"], ["twin"])
        st, b = register(self.srv, "twin", [], instance="bad id", expect=None)
        self.assertEqual(st, 400, b)

    def test_a_live_agents_target_is_refused(self):
        register(self.srv, "holder", ["held-t"])
        st, b = register(self.srv, "taker", ["held-t"], expect=None)
        self.assertEqual((st, b["error"]["code"]), (409, "conflict"))
        self.assertIn("holder", b["error"]["message"])


if __name__ == "__main__":
    unittest.main()
