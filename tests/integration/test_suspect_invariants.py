"""The suspect list's invariants on every real trace (issue 48 item 6), beside test_surfaces.py.

Every real trace in ../shared/data/traces is uploaded once; on each suspect of /suspects:
- the time at stake belongs to its culprit: the suspect names its members (the operators,
  labels or ranges that hold the time), each with its own time, and at_stake_us <= their sum
  (members_us);
- at_stake_per_step_us is null or at most at_stake_us / the steps and at most the mean step
  (only the work inside the steps counts);
and the surfaces agree: the report's draft Next experiment is the top suspect's, and the text
and CSV replies of /suspects list the same suspects, in the same order, with the same figures.
(tests/triage/run.py asserts the first two on every corpus case.)"""
import csv
import io
import os
import re
import unittest

from fpserver import Server, TRACES
from test_surfaces import real_traces, parse_time

SLACK = 1e-6  # relative: a sum of doubles in another order


@unittest.skipUnless(os.path.isdir(TRACES), "needs ../shared/data/traces")
class SuspectInvariants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.s = {}
        for p in real_traces():
            with open(p, "rb") as f:
                sid = cls.srv.upload_ok(f.read(), "?name=" + os.path.basename(p)[:60])
            base = "/api/v1/sessions/%d" % sid
            get = lambda tail, hdr=None: cls.srv.get(base + tail, headers=hdr)[2].decode()
            cls.s[os.path.relpath(p, TRACES)] = {
                "suspects": cls.srv.json(base + "/suspects"), "report": cls.srv.json(base + "/report"),
                "text": get("/suspects", {"Accept": "text/plain"}), "csv": get("/suspects?format=csv"),
            }

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def each(self):
        return sorted(self.s.items())

    def test_at_stake_belongs_to_its_members(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                for x in s["suspects"].get("suspects") or []:
                    m = x.get("members")
                    self.assertTrue(isinstance(m, list) and m, (x["category"], "names no members"))
                    # each member's own time: idle time in us (the idle suspects), GPU time in
                    # gpu_us (waste by kind, recomputed_work), as api/openapi.yaml says
                    own = [y.get("us", y.get("gpu_us", -1)) for y in m]
                    for y, u in zip(m, own):
                        self.assertTrue(y.get("name") and u >= 0, (x["category"], y))
                    self.assertGreaterEqual(x["members_us"], sum(own) * (1 - SLACK))
                    self.assertLessEqual(x["at_stake_us"], x["members_us"] * (1 + SLACK) + 1e-3,
                                         (x["category"], x["culprit"], x["at_stake_us"], x["members_us"]))

    def test_per_step_within_the_steps(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                steps = s["suspects"].get("steps")
                for x in s["suspects"].get("suspects") or []:
                    ps = x.get("at_stake_per_step_us")
                    if ps is None:
                        continue
                    self.assertTrue(steps, (x["category"], "a per-step figure without steps"))
                    self.assertLessEqual(ps, x["at_stake_us"] / steps["count"] * (1 + SLACK), x["category"])
                    self.assertLessEqual(ps, steps["mean_us"] * (1 + SLACK), (x["category"], ps, steps["mean_us"]))

    def test_report_next_is_the_top_suspect(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                top = s["suspects"].get("suspects") or []
                draft = s["report"].get("draft") if isinstance(s["report"].get("draft"), dict) else {}
                if top:
                    self.assertEqual(draft.get("next_experiment"), top[0]["next_experiment"])

    def test_text_and_csv_agree_with_json(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                sus = s["suspects"].get("suspects") or []
                rows = list(csv.DictReader(io.StringIO(s["csv"])))
                self.assertEqual([(r["category"], r["culprit"]) for r in rows], [(x["category"], x["culprit"]) for x in sus])
                for r, x in zip(rows, sus):
                    self.assertAlmostEqual(float(r["at_stake_us"]), x["at_stake_us"], delta=1e-3 + 1e-9 * x["at_stake_us"])
                    if x["at_stake_per_step_us"] is None:
                        self.assertEqual(r["at_stake_per_step_us"], "")
                    else:
                        self.assertAlmostEqual(float(r["at_stake_per_step_us"]), x["at_stake_per_step_us"],
                                               delta=1e-3 + 1e-9 * x["at_stake_per_step_us"])
                    self.assertEqual(r["next_experiment"], x["next_experiment"])
                for i, x in enumerate(sus):
                    m = re.search(r"^#%d %s: (.*)\n   at stake (\S+) \(([\d.]+)%% of the wall(?:, (\S+) per step)?\)" %
                                  (i + 1, re.escape(x["category"])), s["text"], re.M)
                    self.assertTrue(m, (x["category"], "missing from the text reply"))
                    self.assertEqual(m.group(1), x["culprit"])
                    v, tol = parse_time(m.group(2))
                    self.assertLessEqual(abs(v - x["at_stake_us"]), tol)
                    self.assertEqual(m.group(4) is None, x["at_stake_per_step_us"] is None)
                    if m.group(4):
                        v, tol = parse_time(m.group(4))
                        self.assertLessEqual(abs(v - x["at_stake_per_step_us"]), tol)


if __name__ == "__main__":
    unittest.main()
