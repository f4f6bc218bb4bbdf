#!/usr/bin/python3
"""run.py SERVER_BIN [CASE_ID_SUBSTRING...]: the triage ground truth against a real server.

Generates the labelled corpus (gen_cases.py) into a temp dir, starts SERVER_BIN on a free
loopback port (as tests/integration/fpserver.py does), uploads every case of cases.json (the
generated ones, the real traces in ../shared/data/traces, the torch recordings in torch/),
reads GET /api/v1/sessions/{id}/suspects (+ /phases, /operators, /compare) and asserts the
answers of cases.json. One PASS/FAIL line per case with the reasons, a summary, exit 1 on any
failure.

    run.py --check-corpus   no server: oracle.py on every case must give cases.json's
                            answers (the corpus, the oracle and the labels agree)
    run.py --write-numbers [ID...]  rewrites the `numbers` blocks of cases.json from oracle.py
                            (of the cases whose id contains one of the IDs, if given)

The reply contract asserted (issue 19; the lead implements exactly this):
  {"session_id", "wall_us", "healthy",
   "gpu": {"busy_fraction", "idle_us", "lead_in_us", "tail_us"} | null (CPU-only),
   "steps": {"count", "mean_us", "p50_us", "p90_us"} | null,
   "suspects": [{"category", "culprit", "smell", "at_stake_us", "at_stake_fraction",
                 "at_stake_per_step_us", "evidence", "next_experiment"}]  (by at_stake_us, desc)}
and GET /api/v1/compare?base=A&head=B has a top-level "per_step" object with a list
"regressions". Standard library only."""
import http.client
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRACES = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "traces"))
CASES = os.path.join(HERE, "cases.json")
sys.path.insert(0, HERE)

import gen_cases  # noqa: E402
import oracle  # noqa: E402

RAN = 0
SKIPPED = []       # pending cases (a category not implemented yet): reported, not failed
GAPS = []          # cases marked "gap" that still fail: a blind spot of issue 48 the server does not cover yet
CORPUS = False     # --check-corpus: the oracle's answers (a gap is no excuse there)
CATEGORIES = {"data_loading", "host_sync", "python_overhead", "launch_bound", "copies_casts", "pageable_memcpy",
              "compute_bound_op", "communication", "cpu_bound_op", "startup", "tail",
              # issue 41
              "allocator_churn", "compilation", "tokenization", "garbage_collection", "synchronous_launch",
              "copy_on_critical_path", "memory_bound_op", "step_outlier", "host_work", "dominant_op", "cpu_threads",
              # issue 48 (spec48.md): waste inside a busy GPU, by kind of work
              "unfused_elementwise", "tiny_kernels", "math_below_roof",
              # busy GPU time that need not run at all
              "recomputed_work"}
KINDS = ("math", "data_movement", "elementwise", "communication", "other")
# waste by kind <= the GPU time of that kind (issue 48 item 6)
WASTE_KIND = {"copies_casts": "data_movement", "memory_bound_op": "data_movement", "unfused_elementwise": "elementwise",
              "math_below_roof": "math", "recomputed_work": "math"}
MEMBER_US = ("own_us", "us", "self_us", "gpu_us", "idle_us", "time_us", "own_time_us")
ONCE = ("startup", "tail", "step_outlier")  # at_stake_per_step_us is null
LAST = "dominant_op"                        # a target, not waste: listed after every other suspect
SMELLS = {"cpu_heavy", "one_op_dominates", "many_small_calls", None}


def load_cases():
    with open(CASES) as f:
        return json.load(f)


def case_path(c, gendir):
    if "file" in c:
        return os.path.join(gendir, c["file"])
    if "real" in c:
        return os.path.join(TRACES, c["real"])
    return os.path.join(HERE, "torch", c["torch"])


PENDING_KEYS = ("healthy", "top", "top_any", "culprit", "next", "not_top", "not_fired", "fires", "no_suspects",
                "allow_no_suspect")


def without_pending(c):
    """The case with its expectation of a category not implemented yet left out (the rest of
    its checks still hold: wall, steps, operators, key_averages, the reply's shape)."""
    if not c.get("pending"):
        return c
    d = dict(c)
    d["expect"] = {k: v for k, v in c.get("expect", {}).items() if k not in PENDING_KEYS}
    return d


def verdict(c, e, pend):
    """One line's word and text: FAIL on e; SKIP for a pending case (and whether the pending
    expectation holds already); PASS."""
    if c.get("gap") and not CORPUS:
        # A gap is a blind spot the server is known not to cover yet: reported on a GAP line
        # and counted apart, not failed. Once it passes the tag must go, so that the case
        # guards the fix from then on.
        if not e:
            return "FAIL", "passes now: drop its 'gap' tag in cases.json (%s)" % c["gap"]
        GAPS.append(c["id"])
        return "GAP", "[%s] %s" % (c["gap"], "; ".join(e))
    if e:
        return "FAIL", "; ".join(e)
    if c.get("pending"):
        SKIPPED.append(c["id"])
        return "SKIP", "pending: %s (the expectation: %s)" % (
            c["pending"], "holds already, drop 'pending'" if not pend else "; ".join(pend)[:200])
    return "PASS", None


def has(text, word):
    return word.lower() in (text or "").lower()


# ---------------------------------------------------------------- the checks

def check_reply(c, doc, reply, sid=None, from_oracle=False):
    """Errors (strings) of one /suspects reply (or the oracle's answer shaped like one)."""
    e = []
    exp = c.get("expect", {})
    num = c.get("numbers") or {}
    tol = doc["tolerance"]
    if not isinstance(reply, dict):
        return ["reply is not a JSON object"]
    for k in ("wall_us", "healthy", "gpu", "steps", "suspects"):
        if k not in reply:
            e.append("no '%s' in the reply" % k)
    if e:
        return e
    if sid is not None and reply.get("session_id") != sid:
        e.append("session_id %r, not %d" % (reply.get("session_id"), sid))
    wall = reply["wall_us"]
    if not isinstance(wall, (int, float)) or wall <= 0:
        return e + ["wall_us %r" % (wall,)]
    if "wall_us" in num and abs(wall - num["wall_us"]) > tol["wall_rel"] * num["wall_us"]:
        e.append("wall_us %.1f, oracle %.1f" % (wall, num["wall_us"]))
    if "healthy" in exp and reply["healthy"] is not exp["healthy"]:
        e.append("healthy %r, expected %r" % (reply["healthy"], exp["healthy"]))
    # gpu
    if "gpu" in num:
        g, og = reply["gpu"], num["gpu"]
        if og is None:
            if g is not None:
                e.append("gpu must be null (CPU-only trace), got %s" % json.dumps(g)[:120])
        elif not isinstance(g, dict):
            e.append("gpu is %r, oracle busy_fraction %.3f" % (g, og["busy_fraction"]))
        else:
            if not isinstance(g.get("busy_fraction"), (int, float)) or abs(g["busy_fraction"] - og["busy_fraction"]) > tol["busy_fraction_abs"]:
                e.append("gpu.busy_fraction %r, oracle %.3f" % (g.get("busy_fraction"), og["busy_fraction"]))
            for k in ("idle_us", "lead_in_us", "tail_us"):
                v = g.get(k)
                if not isinstance(v, (int, float)) or abs(v - og[k]) > tol["gpu_us_of_wall"] * num["wall_us"] + 1.0:
                    e.append("gpu.%s %r, oracle %.1f" % (k, v, og[k]))
    # steps
    if "steps" in num:
        s, os_ = reply["steps"], num["steps"]
        if os_ is None:
            if s is not None:
                e.append("steps must be null (no ProfilerStep#N), got %s" % json.dumps(s)[:100])
        elif not isinstance(s, dict):
            e.append("steps is %r, oracle count %d" % (s, os_["count"]))
        else:
            if s.get("count") != os_["count"]:
                e.append("steps.count %r, oracle %d" % (s.get("count"), os_["count"]))
            for k in ("mean_us", "p50_us", "p90_us"):
                v = s.get(k)
                if not isinstance(v, (int, float)) or abs(v - os_[k]) > tol["step_rel"] * os_[k] + 0.5:
                    e.append("steps.%s %r, oracle %.1f (nearest rank)" % (k, v, os_[k]))
    # suspects: shape, order, arithmetic
    sus = reply["suspects"]
    if not isinstance(sus, list):
        return e + ["suspects is not a list"]
    nsteps = reply["steps"]["count"] if isinstance(reply.get("steps"), dict) and reply["steps"].get("count") else None
    prev = None
    for i, x in enumerate(sus):
        tag = "suspects[%d]" % i
        if not isinstance(x, dict):
            e.append(tag + " is not an object")
            continue
        if x.get("category") not in CATEGORIES:
            e.append("%s.category %r is not a known id" % (tag, x.get("category")))
        if not isinstance(x.get("culprit"), str) or not x["culprit"]:
            e.append(tag + ".culprit missing")
        if not from_oracle and x.get("smell", "absent") not in SMELLS:
            e.append("%s.smell %r" % (tag, x.get("smell", "absent")))
        a = x.get("at_stake_us")
        if not isinstance(a, (int, float)) or a < 0 or a > wall * 1.001:
            e.append("%s.at_stake_us %r (wall %.0f)" % (tag, a, wall))
            continue
        f = x.get("at_stake_fraction")
        if not isinstance(f, (int, float)) or abs(f - a / wall) > 0.005:
            e.append("%s.at_stake_fraction %r != at_stake_us / wall_us %.3f" % (tag, f, a / wall))
        ps = x.get("at_stake_per_step_us", "absent")
        if x.get("category") in ONCE:  # once per trace, not per step
            if ps is not None:
                e.append("%s.at_stake_per_step_us %r for a one-time category (null expected)" % (tag, ps))
        elif nsteps:
            # issue 48 item 5: per step only for the work inside the steps (null when none of it
            # is), never above at stake / steps nor above the mean step
            mean = reply["steps"].get("mean_us")
            if ps is not None and (not isinstance(ps, (int, float)) or ps < 0 or ps > 1.01 * a / nsteps + 0.5):
                e.append("%s.at_stake_per_step_us %r > at_stake_us / %d steps (%.1f)" % (tag, ps, nsteps, a / nsteps))
            elif isinstance(ps, (int, float)) and isinstance(mean, (int, float)) and ps > 1.01 * mean + 0.5:
                e.append("%s.at_stake_per_step_us %.1f above the mean step %.1f" % (tag, ps, mean))
        elif ps is not None:
            e.append("%s.at_stake_per_step_us %r without steps (null expected)" % (tag, ps))
        e += check_members(tag, x, a)
        if not from_oracle:
            e += check_waste_kind(tag, x, a, reply)
        if not from_oracle:
            if not isinstance(x.get("evidence"), dict):
                e.append(tag + ".evidence is not an object")
            if not isinstance(x.get("next_experiment"), str) or not x["next_experiment"].strip():
                e.append(tag + ".next_experiment missing")
        if x.get("category") == LAST:
            if any(isinstance(y, dict) and y.get("category") != LAST for y in sus[i + 1:]):
                e.append("%s must be listed last (after every other suspect)" % LAST)
        else:
            if prev is not None and a > prev + 1e-6:
                e.append("suspects not ranked by at_stake_us (%s above %s)" % (a, prev))
            prev = a
    cats = [x.get("category") for x in sus if isinstance(x, dict)]
    if exp.get("no_suspects") and sus:
        e.append("nothing may fire, got %s" % ", ".join("%s(%s %.1f%%)" % (x.get("category"), str(x.get("culprit"))[:40],
                                                                         100 * (x.get("at_stake_fraction") or 0)) for x in sus))
    for nf in exp.get("not_fired", []):
        if nf in cats:
            e.append("%s must not fire" % nf)
    for cat, words in exp.get("fires", []):
        x = next((x for x in sus if isinstance(x, dict) and x.get("category") == cat), None)
        if x is None:
            e.append("%s must fire (it did not)" % cat)
        elif words and not any(has(x.get("culprit"), w) for w in words):
            e.append("%s fires naming %r, none of %s" % (cat, str(x.get("culprit"))[:80], words))
    top = sus[0] if sus and isinstance(sus[0], dict) else None
    for nt in exp.get("not_top", []):
        if top and top.get("category") == nt:
            e.append("%s must not be the top suspect" % nt)
    want = [exp["top"]] if "top" in exp else exp.get("top_any")
    if want:
        if top is None:
            if not exp.get("allow_no_suspect"):
                e.append("no suspect; expected %s" % " or ".join(want))
        elif top.get("category") not in want:
            e.append("top suspect %s (%s), expected %s" % (top.get("category"), str(top.get("culprit"))[:60], " or ".join(want)))
        elif "top" in exp and num.get("top"):
            o = num["top"]["at_stake_fraction"]
            lo, hi = o * tol["at_stake_min_of_oracle"], min(1.0, o * tol["at_stake_max_of_oracle"] + tol["at_stake_max_slack"])
            f = top.get("at_stake_fraction")
            if isinstance(f, (int, float)) and not lo <= f <= hi:
                e.append("top at_stake_fraction %.3f outside [%.3f, %.3f] (oracle %.3f)" % (f, lo, hi, o))
    if top is not None and want and top.get("category") in want:
        if exp.get("top_per_step_null") and top.get("at_stake_per_step_us") is not None:
            e.append("top at_stake_per_step_us %r: its time lies outside the steps (null expected)" % top.get("at_stake_per_step_us"))
        ps, a = top.get("at_stake_per_step_us"), top.get("at_stake_us")
        if exp.get("top_mostly_outside_steps") and isinstance(ps, (int, float)) and nsteps and isinstance(a, (int, float)) \
                and ps * nsteps > 0.5 * a:
            e.append("top at_stake_per_step_us %.1f x %d steps is over half its at stake %.1f: most of it lies outside the steps "
                     "(per step counts only the work inside them)" % (ps, nsteps, a))
        if exp.get("top_members"):
            names = [str(m.get("name", "")) for m in members_of(top)[0] or [] if isinstance(m, dict)]
            for w in exp["top_members"]:
                if not any(has(n, w) for n in names):
                    e.append("top suspect's members %s lack %r (each member with its own time: issue 48 item 5)" % (
                        [n[:30] for n in names[:6]], w))
        if exp.get("top_members_min"):
            mem = [m for m in members_of(top)[0] or [] if isinstance(m, dict)]
            if len(mem) < exp["top_members_min"]:
                e.append("top suspect names %d members, expected a group of at least %d, each with its own time" % (
                    len(mem), exp["top_members_min"]))
        matched = None
        if exp.get("culprit"):
            matched = next((w for w in exp["culprit"] if has(top.get("culprit"), w)), None)
            if matched is None:
                e.append("culprit %r names none of %s" % (str(top.get("culprit"))[:90], exp["culprit"]))
        if not from_oracle:
            text = top.get("next_experiment") or ""
            if matched and not has(text, matched):
                e.append("next_experiment does not name the culprit %r: %r" % (matched, text[:120]))
            for w in doc["next_words"].get(exp.get("next", ""), []):
                alts = w if isinstance(w, list) else [w]
                if not any(has(text, a) for a in alts):
                    e.append("next_experiment lacks %s: %r" % (" / ".join(repr(a) for a in alts), text[:120]))
            for w in exp.get("next_not", []):
                if has(text, w):
                    e.append("next_experiment says %r, which this trace does not support: %r" % (w, text[:120]))
    if not from_oracle:
        for x in sus:
            for w in exp.get("forbid_words", []):
                if isinstance(x, dict) and has(x.get("next_experiment"), w):
                    e.append("next_experiment of %s says %r (does not fit this trace)" % (x.get("category"), w))
    return e


def member_us(m):
    """A member's own time: the first numeric field of MEMBER_US."""
    if not isinstance(m, dict):
        return None
    return next((m[k] for k in MEMBER_US if isinstance(m.get(k), (int, float))), None)


def members_of(x):
    """A suspect's members and the time of those not listed: `members` on the suspect or in
    its evidence (with evidence.others_us, the members past the listed ones)."""
    ev = x.get("evidence") if isinstance(x.get("evidence"), dict) else {}
    mem = x.get("members") if "members" in x else ev.get("members")
    others = ev.get("others_us") if isinstance(ev.get("others_us"), (int, float)) else 0.0
    return mem, others


def check_members(tag, x, a):
    """issue 48 items 5-6: a suspect that names a group (members) holds at most the group's
    own time at stake; every member has a name and its own time."""
    mem, others = members_of(x)
    if mem is None:
        return []
    if not isinstance(mem, list) or not mem:
        return ["%s.members %r is not a non-empty list" % (tag, mem)]
    us = [member_us(m) for m in mem]
    if any(u is None or u < 0 for u in us) or any(not isinstance(m.get("name"), str) for m in mem):
        return ["%s.members: each needs a name and its own time (%s): %s" % (tag, "/".join(MEMBER_US[:4]), json.dumps(mem)[:160])]
    tot = x.get("members_us") if isinstance(x.get("members_us"), (int, float)) else sum(us) + others
    if a > 1.01 * max(tot, sum(us) + others) + 1.0:
        return ["%s (%s): at_stake_us %.1f above its members' own time %.1f" % (tag, x.get("category"), a,
                                                                              max(tot, sum(us) + others))]
    return []


def check_waste_kind(tag, x, a, reply):
    """issue 48 item 6: waste by kind <= the GPU time of that kind (where the reply has
    gpu_time_by_kind)."""
    kinds = reply.get("gpu_time_by_kind")
    kind = WASTE_KIND.get(x.get("category"))
    if not isinstance(kinds, dict) or kind is None or not isinstance(kinds.get(kind), dict):
        return []
    us = kinds[kind].get("us")
    if isinstance(us, (int, float)) and a > 1.01 * us + 1.0:
        return ["%s (%s): at_stake_us %.1f above the GPU time of kind %s (%.1f)" % (tag, x.get("category"), a, kind, us)]
    return []


def check_kinds(c, doc, reply, where):
    """gpu_time_by_kind (issue 48, where the reply has it): every kind, each within
    kind_of_gpu_time of the oracle's share of the GPU activity time, and the kinds sum to it."""
    want = (c.get("numbers") or {}).get("gpu_time_by_kind")
    got = reply.get("gpu_time_by_kind") if isinstance(reply, dict) else None
    if got is None or want is None:
        return []
    if not isinstance(got, dict):
        return ["%s gpu_time_by_kind is %r" % (where, got)]
    tot = sum(want.values())
    tol = doc["tolerance"]["kind_of_gpu_time"] * tot + 1.0
    e = []
    s = 0.0
    for k in KINDS:
        v = got.get(k)
        us = v.get("us") if isinstance(v, dict) else None
        if not isinstance(us, (int, float)):
            e.append("%s gpu_time_by_kind.%s missing (%r)" % (where, k, v))
            continue
        s += us
        if abs(us - want[k]) > tol:
            e.append("%s gpu_time_by_kind.%s %.1f us, oracle %.1f (of %.1f)" % (where, k, us, want[k], tot))
    if abs(s - tot) > 0.01 * tot + 1.0:
        e.append("%s gpu_time_by_kind sums to %.1f, the GPU activity time is %.1f" % (where, s, tot))
    return e[:4]


def check_phases(c, rows):
    e = []
    exp = c.get("expect", {})
    cpu = [r for r in rows if r.get("kind", "cpu") == "cpu"]
    if "phases_steps" in exp:
        st = [r for r in cpu if str(r.get("name", "")).startswith("ProfilerStep")]
        n = exp["phases_steps"]
        if len(st) != 1 or st[0].get("count") != n:
            e.append("phases: want one ProfilerStep row with count %d, got %s" % (
                n, ", ".join("%s x%s" % (r.get("name"), r.get("count")) for r in st[:4]) + (" ... (%d rows)" % len(st) if len(st) > 4 else "")
                if st else "none"))
    for name, want in exp.get("phase_rows", {}).items():
        r = next((r for r in cpu if r.get("name") == name), None)
        if r is None:
            e.append("phases: no row %r" % name)
        elif r.get("count") != want["count"]:
            e.append("phases: %s count %r, expected %d" % (name, r.get("count"), want["count"]))
    if "dense_vs_small" in exp:
        a, b = (next((r for r in cpu if r.get("name") == n), None) for n in exp["dense_vs_small"])
        if a and b and "kernel_mean_us" in a:
            if not a["kernel_mean_us"] >= 5 * b["kernel_mean_us"]:
                e.append("phases: %s kernel_mean_us %.1f not >= 5x %s's %.1f" % (a["name"], a["kernel_mean_us"], b["name"], b["kernel_mean_us"]))
            ua, ub = a.get("gpu_utilization"), b.get("gpu_utilization")
            if isinstance(ua, (int, float)) and isinstance(ub, (int, float)) and not ua > ub:
                e.append("phases: %s gpu_utilization %.2f not above %s's %.2f" % (a["name"], ua, b["name"], ub))
    return e


def check_operators(c, rows):
    e = []
    for name, calls in c.get("expect", {}).get("operators", {}).items():
        got = [r for r in rows if r.get("name") == name and r.get("kind") in ("cpu_op", None)]
        n = sum(r.get("calls", 0) for r in got)
        if n != calls:
            e.append("operators: %s calls %s, key_averages' merge gives %d" % (name, n if got else "(none)", calls))
    return e


def check_key_averages(c, rows):
    """rows: {name: {calls, cpu_total, self_cpu}} against torch's own key_averages()."""
    e = []
    if "key_averages" not in c:
        return e
    with open(os.path.join(HERE, "torch", c["key_averages"])) as f:
        ka = json.load(f)["rows"]
    asyn = set(c.get("async", []))
    for r in ka:
        g = rows.get(r["key"])
        if g is None and r["key"] == "ProfilerStep*":
            # torch's key_averages folds ProfilerStep#N into one key; a reader may keep them apart
            st = [v for n, v in rows.items() if n.startswith("ProfilerStep#") or n == "ProfilerStep*"]
            if st:
                g = {k: sum(v[k] for v in st) for k in ("calls", "cpu_total", "self_cpu")}
        if g is None:
            e.append("key_averages: no row %r" % r["key"])
            continue
        bad = g["calls"] != r["count"] or abs(g["cpu_total"] - r["cpu_time_total_us"]) > 0.5
        if r["key"] not in asyn and abs(g["self_cpu"] - r["self_cpu_time_total_us"]) > 0.5:
            bad = True
        if bad:
            e.append("key_averages: %s calls/cpu/self %s/%s/%s, torch %s/%s/%s" % (
                r["key"], g["calls"], g["cpu_total"], g["self_cpu"], r["count"], r["cpu_time_total_us"], r["self_cpu_time_total_us"]))
    return e[:6]


# ---------------------------------------------------------------- oracle-side

def oracle_reply(res):
    g = res.get("gpu")
    s = res.get("steps")
    return {"session_id": None, "wall_us": res["wall_us"], "healthy": res["healthy"],
            "gpu": None if g is None else {k: g[k] for k in ("busy_fraction", "idle_us", "lead_in_us", "tail_us")},
            "steps": None if s is None else {k: s[k] for k in ("count", "mean_us", "p50_us", "p90_us")},
            "suspects": res["suspects"]}


def oracle_numbers(res):
    r = oracle_reply(res)
    top = res["suspects"][0] if res["suspects"] else None
    return {"wall_us": r["wall_us"], "healthy": r["healthy"], "gpu": r["gpu"], "steps": r["steps"],
            "top": None if top is None else {"category": top["category"], "culprit": top["culprit"][:120],
                                             "at_stake_fraction": top["at_stake_fraction"]},
            "suspects": [[x["category"], x["culprit"][:80], x["at_stake_fraction"]] for x in res["suspects"]],
            "steps_breakdown_mean": (res.get("steps_tb") or {}).get("breakdown_mean_us") if res.get("steps") else None,
            "phase_idle": phase_idle(res),
            "gpu_time_by_kind": {k: v["us"] for k, v in res["gpu_time_by_kind"].items()} if res.get("gpu_time_by_kind") else None}


def phase_idle(res):
    """The five record_function names with the most GPU idle inside them, idle per class."""
    rows = [(n, v["gpu_idle_by_class_us"]) for n, v in res.get("phases", {}).items() if v.get("gpu_idle_by_class_us")]
    rows = [(n, by) for n, by in rows if sum(by.values()) >= 1.0]
    rows.sort(key=lambda r: -sum(r[1].values()))
    return {n: by for n, by in rows[:5]} or None


def check_phase_idle(c, sus):
    """idle.by_phase of /suspects against the oracle's gap time per class inside each phase."""
    want = (c.get("numbers") or {}).get("phase_idle")
    if not want:
        return []
    got = {("ProfilerStep" if r["phase"].startswith("ProfilerStep") else r["phase"]): r["by_class_us"]
           for r in ((sus.get("idle") or {}).get("by_phase") or [])}
    e = []
    for name, by in want.items():
        g = got.get("ProfilerStep" if name.startswith("ProfilerStep") else name)
        if g is None:
            e.append("idle.by_phase: no row %r" % name[:60])
            continue
        for cls, us in by.items():
            if abs(g.get(cls, 0.0) - us) > max(1.0, 0.01 * us):
                e.append("idle.by_phase %s %s %.1f us, oracle %.1f" % (name[:40], cls, g.get(cls, 0.0), us))
    return e


def check_report(c, rep, sus=None):
    """The report agrees with the suspects' numbers: a trace whose GPU was busy names a top GPU
    operator (a ROCm trace once lost it to the word "GPU"), and a ROCm trace's smells never say
    CUDA (its kernels are HIP's); its Next experiment (draft.next_experiment) is /suspects' top
    suspect's when there is one (the two surfaces agree, issue 41)."""
    e = []
    top = (sus or {}).get("suspects") or []
    if top and isinstance(top[0], dict) and top[0].get("next_experiment"):
        draft = rep.get("draft") if isinstance(rep.get("draft"), dict) else {}
        if draft.get("next_experiment") != top[0]["next_experiment"]:
            e.append("report's next_experiment %r is not /suspects' top suspect's %r" % (
                str(draft.get("next_experiment"))[:90], top[0]["next_experiment"][:90]))
    lines = rep.get("lines") or {}
    gpu = (c.get("numbers") or {}).get("gpu")
    top = lines.get("top_cuda_time", "")
    if gpu and gpu.get("busy_fraction", 0) > 0 and top.startswith("no GPU time"):
        e.append("report top_cuda_time %r while the GPU is busy %.1f%%" % (top, gpu["busy_fraction"] * 100))
    if "ROCm" in (lines.get("hardware") or ""):
        for sm in rep.get("smells", []):
            if "CUDA" in sm.get("title", "") + sm.get("summary", ""):
                e.append("ROCm trace's smell says CUDA: %r" % sm.get("title"))
    return e


def check_steps(c, reply):
    """/steps against the oracle's tb-profiler breakdown (mean per step, per role)."""
    want = (c.get("numbers") or {}).get("steps_breakdown_mean")
    if not want:
        return []
    got = reply.get("mean") or {}
    e = []
    tol = 0.01 * max(1.0, sum(want.values())) + 1.0
    for role, us in want.items():
        g = got.get(role + "_us")
        if g is None or abs(g - us) > tol:
            e.append("/steps mean %s %r, oracle %.3f" % (role, g, us))
    return e[:4]


def per_call_regressions(a, b, rel=0.1, abs_us=1.0):
    """Reference for /compare per_step: kernels whose mean duration per call moved by more
    than rel and abs_us; plus the step mean."""
    def means(res_doc):
        t = oracle.Trace(res_doc)
        m = {}
        for g in t.gpu:
            x = m.setdefault(g.name, [0, 0.0])
            x[0] += 1
            x[1] += g.dur
        return {k: v[1] / v[0] for k, v in m.items()}
    ma, mb = means(a), means(b)
    out = []
    for k in sorted(set(ma) & set(mb)):
        if mb[k] - ma[k] > max(rel * ma[k], abs_us):
            out.append(k)
    return out


def run_oracle_all(doc, gendir, only):
    results = {}
    for c in doc["cases"]:
        if only and not any(o in c["id"] for o in only):
            continue
        p = case_path(c, gendir)
        t0 = time.time()
        res = oracle.analyze(oracle.load(p), want_ops=True)
        results[c["id"]] = (res, time.time() - t0)
    return results


def check_corpus(doc, gendir, only):
    fails = 0
    global RAN
    RAN = 0
    results = run_oracle_all(doc, gendir, only)
    for c in doc["cases"]:
        if c["id"] not in results:
            continue
        res, dt = results[c["id"]]
        cc = without_pending(c)
        e = check_reply(cc, doc, oracle_reply(res), from_oracle=True)
        pend = [x for x in check_reply(c, doc, oracle_reply(res), from_oracle=True) if x not in e] if cc is not c else []
        ph = [{"name": ("ProfilerStep#*" if n == oracle.STEP_LABEL else n), "kind": "cpu", "count": v["count"]}
              for n, v in res["phases"].items()]
        if res["steps"] is None:
            ph = [r for r in ph if r["name"] != "ProfilerStep#*"]
        e += check_phases(c, ph)
        ops = res["merge"]["ops"]
        e += check_operators(c, [{"name": n, "kind": "cpu_op", "calls": v["calls"]} for n, v in ops.items()])
        e += check_key_averages(c, {n: {"calls": v["calls"], "cpu_total": v["cpu_total_us"], "self_cpu": v["self_cpu_us"]}
                                    for n, v in ops.items()})
        num = c.get("numbers")
        if num is None:
            e.append("no numbers (run.py --write-numbers)")
        else:
            fresh = oracle_numbers(res)
            if fresh["top"] != num.get("top") or fresh["healthy"] != num.get("healthy") or fresh["steps"] != num.get("steps"):
                e.append("cases.json numbers are stale (run.py --write-numbers)")
        RAN += 1
        word, text = verdict(c, e, pend)
        fails += word == "FAIL"
        print("%s %-32s %5.1fs %s" % (word, c["id"], dt, text or
                                     (res["suspects"][0]["category"] + ": " + res["suspects"][0]["culprit"][:60] if res["suspects"]
                                      else ("healthy" if res["healthy"] else "nothing fired"))))
    if not only:
        docs = {}
        for cmp in doc["compare"]:
            for k in (cmp["base"], cmp["head"]):
                if k not in docs:
                    c = next(x for x in doc["cases"] if x["id"] == k)
                    docs[k] = oracle.load(case_path(c, gendir))
            regs = per_call_regressions(docs[cmp["base"]], docs[cmp["head"]])
            e = []
            if "regressions" in cmp and len(regs) != cmp["regressions"]:
                e.append("per-call regressions %s, expected %d" % (regs, cmp["regressions"]))
            for n in cmp.get("regression_names", []):
                if not any(n.lower() in r.lower() for r in regs):
                    e.append("%s not among the per-call regressions %s" % (n, regs))
            fails += bool(e)
            RAN += 1
            print("%s %-32s %s" % ("FAIL" if e else "PASS", cmp["id"], "; ".join(e) if e else "per call: %s" % ([r[:50] for r in regs] or "none")))
    return fails


def write_numbers(doc, gendir, only=None):
    """Rewrites the numbers of every case (of the cases whose id contains one of `only`)."""
    results = run_oracle_all(doc, gendir, only)
    for c in doc["cases"]:
        if c["id"] in results:
            c["numbers"] = oracle_numbers(results[c["id"]][0])
    with open(CASES, "w") as f:
        f.write(dump_cases(doc))
    print("wrote", CASES)


def dump_cases(doc):
    """cases.json with one line per case key (readable diffs)."""
    out = ["{"]
    keys = [k for k in doc if k not in ("cases", "compare")]
    for k in keys:
        out.append(' %s: %s,' % (json.dumps(k), json.dumps(doc[k], indent=1).replace("\n", "\n ")))
    for k in ("cases", "compare"):
        out.append(' %s: [' % json.dumps(k))
        items = []
        for c in doc[k]:
            lines = []
            for i, (kk, v) in enumerate(c.items()):
                lines.append("%s%s: %s" % ("  {" if i == 0 else "   ", json.dumps(kk), json.dumps(v)))
            items.append(",\n".join(lines) + "}")
        out.append(",\n".join(items))
        out.append(" ]%s" % ("," if k == "cases" else ""))
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- server-side

def run_server(doc, gendir, binpath, only):
    os.environ["FIRSTPASS_SERVER_BIN"] = os.path.abspath(binpath)
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    import fpserver  # noqa: E402  (reads FIRSTPASS_SERVER_BIN at import)
    srv = fpserver.Server()
    fails = 0
    global RAN
    RAN = 0
    sids = {}
    try:
        for c in doc["cases"]:
            if only and not any(o in c["id"] for o in only) and not any(
                    c["id"] in (x["base"], x["head"]) for x in doc["compare"] if any(o in x["id"] for o in only)):
                continue
            p = case_path(c, gendir)
            with open(p, "rb") as f:
                data = f.read()
            try:
                st, _, body = srv.upload(data, "?name=" + c["id"].replace("/", "-"))
            except (OSError, http.client.HTTPException) as x:
                # the server closed the connection: a crash is this case's failure, and
                # every case after it cannot run
                rc = srv.proc.poll()
                print("FAIL %-32s upload: %s; the server %s" % (c["id"], x, "is still running" if rc is None else
                      "exited (%s)" % ("signal %d" % -rc if rc < 0 else "status %d" % rc)))
                fails += 1
                RAN += 1
                if rc is not None:
                    return fails
                sids[c["id"]] = None
                continue
            if st != 201:
                sids[c["id"]] = None
                print("FAIL %-32s upload -> %s %s" % (c["id"], st, json.dumps(body)[:200]))
                fails += 1
                RAN += 1
                continue
            sids[c["id"]] = body["id"]
        for c in doc["cases"]:
            sid = sids.get(c["id"])
            if sid is None or (only and not any(o in c["id"] for o in only)):
                continue
            e = []
            pend = []
            sus = None
            st, _, body = srv.get("/api/v1/sessions/%d/suspects" % sid)
            if st != 200:
                e.append("GET /suspects -> %d" % st)
            else:
                try:
                    sus = json.loads(body)
                    cc = without_pending(c)
                    e += check_reply(cc, doc, sus, sid=sid)
                    if cc is not c:
                        pend = [x for x in check_reply(c, doc, sus, sid=sid) if x not in e]
                    e += check_phase_idle(c, sus)
                    e += check_kinds(c, doc, sus, "/suspects")
                except ValueError:
                    e.append("/suspects is not JSON")
            st, _, body = srv.get("/api/v1/sessions/%d/efficiency" % sid)
            if st == 200:
                try:
                    e += check_kinds(c, doc, json.loads(body), "/efficiency")
                except ValueError:
                    e.append("/efficiency is not JSON")
            st, _, body = srv.get("/api/v1/sessions/%d/phases" % sid)
            if st == 200:
                e += check_phases(c, json.loads(body).get("phases", []))
            else:
                e.append("GET /phases -> %d" % st)
            st, _, body = srv.get("/api/v1/sessions/%d/report" % sid)
            e += check_report(c, json.loads(body), sus) if st == 200 else ["GET /report -> %d" % st]
            st, _, body = srv.get("/api/v1/sessions/%d/steps" % sid)
            e += check_steps(c, json.loads(body)) if st == 200 else ["GET /steps -> %d" % st]
            need_ops = c.get("expect", {}).get("operators") or "key_averages" in c
            if need_ops:
                st, _, body = srv.get("/api/v1/sessions/%d/operators?limit=10000&sort=cpu_time_total" % sid)
                if st == 200:
                    rows = json.loads(body).get("operators", [])
                    e += check_operators(c, rows)
                    e += check_key_averages(c, {r["name"]: {"calls": r["calls"], "cpu_total": r["cpu_time_total_us"],
                                                            "self_cpu": r["self_cpu_time_total_us"]}
                                                for r in rows if r.get("kind") not in ("gpu_user_annotation",)})
                else:
                    e.append("GET /operators -> %d" % st)
            RAN += 1
            word, text = verdict(c, e, pend)
            fails += word == "FAIL"
            print("%s %-32s %s" % (word, c["id"], text or "ok"))
        for cmp in doc["compare"]:
            if only and not any(o in cmp["id"] for o in only):
                continue
            a, b = sids.get(cmp["base"]), sids.get(cmp["head"])
            e = []
            if a is None or b is None:
                e.append("a session was not uploaded")
            else:
                st, _, body = srv.get("/api/v1/compare?base=%d&head=%d" % (a, b))
                if st != 200:
                    e.append("GET /compare -> %d" % st)
                else:
                    j = json.loads(body)
                    ps = j.get("per_step")
                    if not isinstance(ps, dict) or not isinstance(ps.get("regressions"), list):
                        e.append("no per_step object with a regressions list (got keys %s)" % sorted(j)[:8])
                    else:
                        regs = ps["regressions"]
                        if "regressions" in cmp and len(regs) != cmp["regressions"]:
                            e.append("per_step.regressions has %d items, expected %d: %s" % (len(regs), cmp["regressions"],
                                                                                             json.dumps(regs)[:200]))
                        for n in cmp.get("regression_names", []):
                            if not any(n.lower() in json.dumps(r).lower() for r in regs):
                                e.append("%s not named in per_step.regressions %s" % (n, json.dumps(regs)[:200]))
            fails += bool(e)
            RAN += 1
            print("%s %-32s %s" % ("FAIL" if e else "PASS", cmp["id"], "; ".join(e) if e else "ok"))
    finally:
        srv.stop()
    return fails


def generate(gendir, names):
    """Writes the generated cases into gendir, on FP_TRIAGE_JOBS processes (default: 2, or
    the CPU count if smaller; the traces are deterministic, so the order does not matter)."""
    jobs = int(os.environ.get("FP_TRIAGE_JOBS") or min(2, os.cpu_count() or 1))
    if jobs <= 1:
        for n in names:
            gen_cases.write(gendir, n)
        return
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        pool.starmap(gen_cases.write, [(gendir, n) for n in names], chunksize=1)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    doc = load_cases()
    if not args and "--write-numbers" not in flags and "--check-corpus" not in flags:
        sys.stderr.write(__doc__)
        return 2
    gendir = tempfile.mkdtemp(prefix="fp-triage-")
    try:
        t_gen = time.time()
        names = sorted({c["file"].split(".")[0] for c in doc["cases"] if "file" in c})
        generate(gendir, names)
        t0 = time.time()
        t_gen = t0 - t_gen
        if "--write-numbers" in flags:
            write_numbers(doc, gendir, args or None)
            return 0
        if "--check-corpus" in flags:
            global CORPUS
            CORPUS = True
            fails = check_corpus(doc, gendir, args)
            what = "corpus/oracle checks"
        else:
            fails = run_server(doc, gendir, args[0], args[1:])
            what = "cases"
    finally:
        shutil.rmtree(gendir, ignore_errors=True)
    total = RAN
    skip = " (%d skipped, pending: %s)" % (len(SKIPPED), ", ".join(SKIPPED)) if SKIPPED else ""
    if GAPS:
        skip += "; %d known gaps of issue 48 not covered yet (GAP lines, not failures): %s" % (len(GAPS), ", ".join(GAPS))
    took = "%.0f s, and %.0f s generating the cases" % (time.time() - t0, t_gen)
    print("triage: %d of %d %s failed%s (%s)" % (fails, total, what, skip, took) if fails else
          "triage: all %s passed%s (%s)" % (what, skip, took))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
