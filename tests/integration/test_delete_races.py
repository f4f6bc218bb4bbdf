"""Requests racing a DELETE of their session answer 404, never 500 (issue 43, low 14).

Each round uploads a session, then fires at once its DELETE and the requests that read or
write it in several statements: PUT report, compare (as base and as head), regressions
against a baseline, and the per-session reads. Before: PUT report answered 500 in 13-42 of
150 rounds (its INSERT met the foreign key of a session deleted since its check), compare and
regressions 500 too (a later statement found a row of the session gone). After: the edit is
refused as the 404 it is, and the multi-statement reads run on one snapshot."""
import json
import os
import threading
import unittest

from fpserver import TRACES, Server

TRACE = os.path.join(TRACES, "hta", "trace_filter", "sampled_rank-0.json.gz")
ROUNDS = int(os.environ.get("RACE_ROUNDS", "150"))


class DeleteRaces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(TRACE):
            raise unittest.SkipTest("no %s" % TRACE)
        cls.srv = Server()
        with open(TRACE, "rb") as f:
            cls.data = f.read()
        cls.base = cls.srv.upload_ok(cls.data, "?name=base&label=model:race")
        st, _, b = cls.srv.request("PUT", "/api/v1/baselines/race", json.dumps({"session_id": cls.base}).encode())
        assert st in (200, 201), (st, b)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_requests_racing_a_delete_are_404_not_500(self):
        bad, seen = [], {}
        for rnd in range(ROUNDS):
            sid = self.srv.upload_ok(self.data, "?name=racer&label=model:race")
            reqs = [("DELETE", "/api/v1/sessions/%d" % sid, None),
                    ("PUT", "/api/v1/sessions/%d/report" % sid, b'{"lines":{"workload":"edited","next_experiment":"x"}}'),
                    ("GET", "/api/v1/compare?base=%d&head=%d" % (self.base, sid), None),
                    ("GET", "/api/v1/compare?base=%d&head=%d" % (sid, self.base), None),
                    ("GET", "/api/v1/sessions/%d/regressions?baseline=race" % sid, None),
                    ("GET", "/api/v1/sessions/%d/regressions" % sid, None),
                    ("GET", "/api/v1/sessions/%d/report" % sid, None),
                    ("GET", "/api/v1/sessions/%d/suspects" % sid, None),
                    ("GET", "/api/v1/sessions/%d/steps" % sid, None),
                    ("GET", "/api/v1/sessions/%d/timeline" % sid, None),
                    ("GET", "/api/v1/sessions/%d/trace" % sid, None)]
            go = threading.Barrier(len(reqs))
            out = [None] * len(reqs)

            def run(i, method, path, body):
                go.wait()
                try:
                    st, _, b = self.srv.request(method, path, body)
                    out[i] = (st, b[:200])
                except Exception as e:  # a reset download: the session went mid-stream
                    out[i] = (0, repr(e).encode())

            ts = [threading.Thread(target=run, args=(i,) + r) for i, r in enumerate(reqs)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            for (method, path, _), (st, b) in zip(reqs, out):
                key = "%s %s" % (method, path.split("?")[0].replace("/%d" % sid, "/{id}").replace("/%d" % self.base, "/{base}"))
                seen.setdefault(key, {}).setdefault(st, 0)
                seen[key][st] += 1
                if st >= 500 or (st == 0 and not path.endswith("/trace")):
                    bad.append("round %d: %s %s -> %d %s" % (rnd, method, path, st, b.decode("utf-8", "replace")))
            self.assertEqual(out[0][0], 204, "the DELETE itself")
        print("\n".join("  %s: %s" % (k, v) for k, v in sorted(seen.items())))
        self.assertEqual(bad, [], "%d requests racing a DELETE failed:\n%s" % (len(bad), "\n".join(bad[:20])))


if __name__ == "__main__":
    unittest.main()
