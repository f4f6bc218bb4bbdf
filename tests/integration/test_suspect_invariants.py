"""The suspect list's invariants on every real trace (issue 48 item 6), beside test_surfaces.py.

Every real trace in ../shared/data/traces is uploaded once; on each suspect of /suspects:
- the time at stake belongs to its culprit: the suspect names its members (the operators,
  labels or ranges that hold the time), each with its own time, and at_stake_us <= their sum
  (members_us);
- at_stake_per_step_us is null or at most at_stake_us / the steps and at most the mean step
  (only the work inside the steps counts);
and the surfaces agree: the report's draft Next experiment is the top suspect's, and the text
and CSV replies of /suspects list the same suspects, in the same order, with the same figures.
(tests/triage/run.py asserts the first two on every corpus case.)

The GPU time by kind per phase (issue 48 item 1, gpu_time_by_kind_by_phase on /suspects and
/efficiency): each phase's kinds sum to its gpu_us and each is at most the session's time of
that kind; a phase's gpu_us is at most the session's GPU activity time and at most /phases'
kernel time of that name (which counts a range nested in its own name twice); the rows come
most GPU time first, 50 at most, and the text forms list the first three. On two real traces
with named ranges the figures are recomputed here from the raw trace (launch correlation ->
the user_annotation ranges around the launch on its thread; the kind of work by oracle.py's
work_kind) and agree within 5%."""
import csv
import gzip
import io
import json
import os
import re
import sys
import unittest
from collections import defaultdict
from types import SimpleNamespace

from fpserver import Server, TRACES
from test_surfaces import real_traces, parse_time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "triage"))
import oracle  # noqa: E402  (work_kind: the kind of work of one GPU activity)

SLACK = 1e-6  # relative: a sum of doubles in another order
KINDS = ("math", "data_movement", "elementwise", "communication", "other")
PHASE_ROWS_MAX = 50  # suspects_waste.c WASTE_PHASES_OUT
TEXT_PHASES = 3      # http/text.c KINDS_PHASES_SHOWN
# traces with named ranges whose per-phase kinds are recomputed from the raw trace
RANGED = ["kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
          "hta/trace_diff/control/control.json.gz"]


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
                "efficiency": cls.srv.json(base + "/efficiency"), "effic_text": get("/efficiency", {"Accept": "text/plain"}),
                "phases": cls.srv.json(base + "/phases")["phases"],
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

    # ---- GPU time by kind per phase ----

    def test_kinds_by_phase_within_the_session(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                sus, eff = s["suspects"], s["efficiency"]
                kinds, rows = sus["gpu_time_by_kind"], sus["gpu_time_by_kind_by_phase"]
                dropped = sus["gpu_time_by_kind_by_phase_dropped"]
                # null exactly where gpu_time_by_kind is; /efficiency carries the same figures
                self.assertEqual(rows is None, kinds is None)
                self.assertEqual(dropped is None, kinds is None)
                self.assertEqual(eff.get("gpu_time_by_kind_by_phase"), rows)
                self.assertEqual(eff.get("gpu_time_by_kind_by_phase_dropped"), dropped)
                if kinds is None:
                    continue
                total = sum(kinds[k]["us"] for k in KINDS)
                self.assertTrue(all(isinstance(dropped[k], int) and dropped[k] >= 0 for k in ("rows", "phases")), dropped)
                self.assertGreaterEqual(dropped["gpu_us"], 0)
                self.assertLessEqual(len(rows), PHASE_ROWS_MAX)
                self.assertEqual(len({r["phase"] for r in rows}), len(rows), "a phase listed twice")
                self.assertEqual([r["gpu_us"] for r in rows], sorted((r["gpu_us"] for r in rows), reverse=True))
                # /phases' kernel time of the name: every GPU activity launched inside its ranges
                # (a range nested in its own name counted twice there, once here)
                ph = {p["name"]: p["kernel_mean_us"] * p["kernels"] for p in s["phases"] if p["kind"] == "cpu"}
                for r in rows:
                    g = r["gpu_us"]
                    self.assertGreater(g, 0, r["phase"])
                    self.assertLessEqual(g, total * (1 + SLACK) + 1e-3, (r["phase"], g, total))
                    self.assertAlmostEqual(sum(r[k]["us"] for k in KINDS), g, delta=1e-3 + SLACK * g)
                    for k in KINDS:
                        self.assertGreaterEqual(r[k]["us"], 0)
                        self.assertLessEqual(r[k]["us"], kinds[k]["us"] * (1 + SLACK) + 1e-3, (r["phase"], k))
                        self.assertAlmostEqual(r[k]["fraction"], r[k]["us"] / g, delta=1e-9)
                    self.assertIn(r["phase"], ph, "a phase /phases does not name")
                    self.assertLessEqual(g, ph[r["phase"]] * (1 + SLACK) + 1e-3, (r["phase"], g, ph[r["phase"]]))

    def test_kinds_by_phase_in_the_text_forms(self):
        for rel, s in self.each():
            with self.subTest(trace=rel):
                rows = s["suspects"]["gpu_time_by_kind_by_phase"] or []
                for text in (s["text"], s["effic_text"]):
                    got = re.findall(r"^  in (.*) \((\S+) of GPU time\): (.*)$", text, re.M)
                    self.assertEqual(len(got), min(TEXT_PHASES, len(rows)))
                    for (name, us, rest), r in zip(got, rows):
                        if len(r["phase"].encode()) <= 80:
                            self.assertEqual(name, r["phase"])
                        else:  # cut at 80 bytes, on a character, and an ellipsis
                            self.assertTrue(name.endswith("\u2026") and r["phase"].startswith(name[:-1]), (name, r["phase"][:90]))
                        v, tol = parse_time(us)
                        self.assertLessEqual(abs(v - r["gpu_us"]), tol)
                        for k, pct in re.findall(r"(\w+) ([\d.]+)%", rest):
                            self.assertAlmostEqual(float(pct), 100 * r[k]["fraction"], delta=0.051, msg=(name, k))

    def test_kinds_by_phase_recomputed_from_the_raw_trace(self):
        for rel in RANGED:
            with self.subTest(trace=rel):
                self.assertIn(rel, self.s, "the trace is one of ../shared/data/traces")
                want = raw_phase_kinds(os.path.join(TRACES, rel))
                rows = {r["phase"]: r for r in self.s[rel]["suspects"]["gpu_time_by_kind_by_phase"]}
                self.assertTrue(want, "the trace has named ranges with GPU work")
                self.assertEqual(set(rows), set(want))
                for name, by in want.items():
                    tot = sum(by.values())
                    self.assertAlmostEqual(rows[name]["gpu_us"], tot, delta=0.05 * tot + 1, msg=name)
                    for k in KINDS:
                        self.assertAlmostEqual(rows[name][k]["us"], by[k], delta=0.05 * tot + 1, msg=(name, k))


class KindsByPhaseLimits(unittest.TestCase):
    """A generated trace past the limits: 301 range names (waste.h WASTE_PHASES_MAX = 256 kept,
    the first met), 50 rows listed, and a range nested in one of its own name (counted once)."""

    @classmethod
    def setUpClass(cls):
        from gen_cases import KTrace, K_ADD_F32, K_GEMM_H100
        k = KTrace(48)
        with k.ann("outer"):
            with k.ann("outer"):  # counted once in "outer" (/phases counts its kernel twice)
                k.launch(K_GEMM_H100, 0, gpu_ns=1_000_000)
            k.launch(K_ADD_F32, 0, gpu_ns=500_000)
        for i in range(300):  # range_i: one kernel of 10 + i us; range_255 on are past the cap
            with k.ann("range_%03d" % i):
                k.launch(K_ADD_F32, 0, gpu_ns=(10 + i) * 1000)
        cls.srv = Server()
        sid = cls.srv.upload_ok(json.dumps(k.doc()).encode())
        base = "/api/v1/sessions/%d" % sid
        cls.sus, cls.eff = cls.srv.json(base + "/suspects"), cls.srv.json(base + "/efficiency")
        cls.phases = {p["name"]: p for p in cls.srv.json(base + "/phases")["phases"]}

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_rows_dropped_and_self_nesting(self):
        rows, dropped = self.sus["gpu_time_by_kind_by_phase"], self.sus["gpu_time_by_kind_by_phase_dropped"]
        self.assertEqual((self.eff["gpu_time_by_kind_by_phase"], self.eff["gpu_time_by_kind_by_phase_dropped"]), (rows, dropped))
        self.assertEqual([r["phase"] for r in rows], ["outer"] + ["range_%03d" % i for i in range(254, 205, -1)])
        outer = rows[0]
        self.assertAlmostEqual(outer["gpu_us"], 1500, delta=1e-6)
        self.assertAlmostEqual(outer["math"]["us"], 1000, delta=1e-6)
        self.assertAlmostEqual(outer["elementwise"]["us"], 500, delta=1e-6)
        self.assertAlmostEqual(outer["math"]["fraction"], 2 / 3, delta=1e-9)
        # /phases' kernel time holds the nested range's kernel once per range
        p = self.phases["outer"]
        self.assertAlmostEqual(p["kernel_mean_us"] * p["kernels"], 2500, delta=1e-3)
        for r in rows[1:]:
            us = 10 + int(r["phase"][6:])
            self.assertAlmostEqual(r["gpu_us"], us, delta=1e-6)
            self.assertEqual(r["elementwise"]["us"], r["gpu_us"])
        # 256 names kept ("outer", range_000..range_254): 206 not listed; 45 past the cap
        self.assertEqual((dropped["rows"], dropped["phases"]), (206, 45))
        self.assertAlmostEqual(dropped["gpu_us"], sum(10 + i for i in range(255, 300)), delta=1e-6)


def raw_phase_kinds(path):
    """{phase: {kind: us}} from the raw Kineto trace, without the server or the oracle's
    trace model: each GPU activity's launch by correlation id; the phases, every
    user_annotation range on the launch's thread that holds the launch (ProfilerStep#N as
    ProfilerStep*, each name once); the innermost cpu_op holding it decides the kind where
    the kernel's name does not (oracle.work_kind)."""
    with open(path, "rb") as f:
        doc = json.loads(gzip.decompress(f.read()) if path.endswith(".gz") else f.read())
    evs = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    launch, gpu, ranges, ops = {}, [], defaultdict(list), defaultdict(list)
    # the 2021 schema's categories as the current one's; its Operator is a range when its name
    # has a '#' (ProfilerStep#3, Optimizer.step#SGD.step), else an op
    gpu_cat = {"kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "gpu_memset": "gpu_memset", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
               "Memset": "gpu_memset"}
    for e in evs:
        cat, ts, dur = e.get("cat"), float(e["ts"]), float(e.get("dur", 0))
        corr = (e.get("args") or {}).get("correlation")
        where = (e.get("pid"), e.get("tid"))
        if cat == "Operator":
            cat = "user_annotation" if "#" in e.get("name", "") else "cpu_op"
        if cat in ("cuda_runtime", "cuda_driver", "Runtime") and corr is not None:
            launch[corr] = (where, ts, ts + dur)
        elif cat in gpu_cat:
            gpu.append((gpu_cat[cat], e.get("name", ""), dur, corr))
        elif cat == "user_annotation":
            ranges[where].append((ts, ts + dur, e.get("name", "")))
        elif cat == "cpu_op":
            ops[where].append((ts, ts + dur, e.get("name", "")))

    def holds(x, ts, te):
        # a span holds a call that starts inside it and ends by its end (torch's nesting)
        return x[0] <= ts < x[1] and te <= x[1]

    # the innermost cpu_op holding each launch: one sweep per thread, by start, longer first
    inner = {}
    calls = defaultdict(list)
    for corr, (where, ts, te) in launch.items():
        calls[where].append((ts, te, corr))
    for where, cs in calls.items():
        stack = []
        seq = sorted([(ts, -te, 0, (ts, te, n)) for ts, te, n in ops[where]] + [(ts, -te, 1, (ts, te, c)) for ts, te, c in cs],
                     key=lambda x: x[:3])
        for ts, _, is_call, x in seq:
            while stack and not holds(stack[-1], ts, x[1]):
                stack.pop()
            if is_call:
                inner[x[2]] = stack[-1][2] if stack else None
            else:
                stack.append(x)

    out = defaultdict(lambda: dict.fromkeys(KINDS, 0.0))
    for cat, name, dur, corr in gpu:
        if corr not in launch:
            continue
        where, ts, te = launch[corr]
        names = {"ProfilerStep*" if n.startswith("ProfilerStep#") else n for r0, r1, n in ranges[where] if holds((r0, r1), ts, te)}
        if not names:
            continue
        op = inner.get(corr)
        kind = oracle.work_kind(SimpleNamespace(kind=cat, name=name), SimpleNamespace(name=op) if op is not None else None)
        for n in names:
            out[n][kind] += dur
    return {n: by for n, by in out.items() if sum(by.values()) > 0}


if __name__ == "__main__":
    unittest.main()
