#!/usr/bin/env python3
"""check.py -- exact checks on the sessions one simulation scenario left in its spool.

    check.py SCENARIO SPOOL STDOUT STDERR

Prints PASS/FAIL lines; exits 1 if any check failed. Each scenario's expectations are the
numbers sim_app.c produced (see the functions below); nothing is "at least" unless the
simulation itself cannot fix the number.
"""
import glob
import gzip
import json
import os
import re
import sys
import time

PREFILL = "matmul_prefill(float const*, float const*, float*, int)"
DECODE_MANGLED = "_ZN4vllm13decode_kernelIfLi128EEEvPT_PKS1_i"
DECODE = "void vllm::decode_kernel<float, 128>(float*, float const*, int)"

bad = 0


def check(ok, msg):
    global bad
    print(("PASS: " if ok else "FAIL: ") + msg)
    if not ok:
        bad += 1
    return ok


def sessions(spool):
    out = []
    for p in sorted(glob.glob(os.path.join(spool, "*.json.gz"))):
        with gzip.open(p, "rt") as f:
            d = json.load(f)
        d["_file"] = os.path.basename(p)
        out.append(d)
    return out


def rows(s, group):
    return {r["name"]: r for r in s["firstpass"]["aggregates"][group]}


def calls(s, group):
    return {n: r["calls"] for n, r in rows(s, group).items()}


def counters(s):
    return s["firstpass"]["collector"]


def brief(out):
    """The program's own lines, for messages."""
    return " | ".join(l for l in out.strip().splitlines() if not l.startswith("harness:"))


def warnings(s):
    return s["firstpass"].get("warnings", [])


def kernels_total(s):
    return sum(r["calls"] for r in s["firstpass"]["aggregates"]["kernels"])


def clean(s, label):
    """The counters that must be zero in a session that lost nothing."""
    c = counters(s)
    check(s.get("dropped_records", s["firstpass"].get("dropped_records")) == 0,
          "%s: dropped_records 0 (%s)" % (label, s["firstpass"].get("dropped_records")))
    for k in ("buffer_errors", "unknown_kinds", "untimed_records", "ranges_unmatched_start",
              "ranges_unmatched_end", "out_of_memory"):
        check(c.get(k) == 0, "%s: collector.%s 0 (%s)" % (label, k, c.get(k)))


def one(ss, label):
    check(len(ss) == 1, "%s: exactly one session spooled (%d: %s)" % (label, len(ss), [s["_file"] for s in ss]))
    return ss[0] if ss else None


def scen_basic(ss, out, err):
    s = one(ss, "basic")
    if s is None:
        return
    fp = s["firstpass"]
    clean(s, "basic")
    check(warnings(s) == [], "basic: no warnings (%s)" % warnings(s))
    check("nvtx_env set" in out, "basic: started by firstpass-run, NVTX_INJECTION64_PATH set")
    k = calls(s, "kernels")
    byname = {r.get("mangled", r["name"]): r for r in fp["aggregates"]["kernels"]}
    check(k.get(PREFILL) == 1, "basic: kernel %r x1 (%s)" % (PREFILL, k))
    check(k.get(DECODE) == 50 and byname.get(DECODE_MANGLED, {}).get("calls") == 50,
          "basic: template kernel demangled, %r x50, mangled name kept" % DECODE)
    check(len(k) == 2, "basic: two kernel rows (%s)" % sorted(k))
    a = calls(s, "apis")
    want = {"cudaLaunchKernel": 51, "cudaMemset": 2, "cudaMemcpy": 2, "cudaStreamSynchronize": 50,
            "cudaDeviceSynchronize": 1, "cudaEventQuery": 31}
    check(a == want, "basic: API rows exactly %s (%s)" % (want, a))
    m = rows(s, "memcpy")
    check({n: (r["calls"], r["bytes"]) for n, r in m.items()} ==
          {"Memcpy HtoD (Pageable -> Device)": (1, 4 << 20),
           "Memcpy DtoH (Device -> Pageable)": (1, 16384),
           "Memset (Device)": (2, 2 << 20)},
          "basic: memcpy/memset rows and bytes (%s)" % {n: (r["calls"], r["bytes"]) for n, r in m.items()})
    y = calls(s, "syncs")
    check(y == {"Stream Sync": 50, "Context Sync": 1, "Event Sync": 1},
          "basic: Stream Sync x50, Context Sync x1, Event Sync x1: 30 not-ready polls are not syncs (%s)" % y)
    r = calls(s, "ranges")
    check(r == {"prefill": 1, "decode_step": 50}, "basic: NVTX ranges prefill x1, decode_step x50 (%s)" % r)
    ev = s["traceEvents"]
    dec = [e for e in ev if e["cat"] == "kernel" and e["args"].get("mangled", e["name"]) == DECODE_MANGLED]
    rng = [e for e in ev if e["cat"] == "user_annotation" and e["name"] == "decode_step"]
    inside = sum(1 for k_ in dec if any(r_["ts"] <= k_["ts"] and k_["ts"] + k_["dur"] <= r_["ts"] + r_["dur"] for r_ in rng))
    check(len(dec) == 50 and inside == 50, "basic: %d of %d decode kernels inside a decode_step range" % (inside, len(dec)))
    d = s.get("deviceProperties", [])
    check(len(d) == 1 and d[0]["name"] == "NVIDIA H200 (simulated)" and d[0]["computeMajor"] == 9
          and d[0]["computeMinor"] == 0 and d[0]["numSms"] == 132,
          "basic: deviceProperties H200 / 9.0 / 132 SMs (%s)" % d)
    check(abs(fp["start_ns"] / 1e9 - time.time()) < 60, "basic: start_ns is this machine's clock")
    pid = re.search(r"sim: basic pid (\d+)", out)
    check(pid is not None and fp["pid"] == int(pid.group(1)), "basic: session pid is the app's")


def scen_nvtx_unset(ss, out, err):
    """basic without firstpass-run: kernels as usual, no ranges, and the collector says why
    instead of changing the environment under the program's threads."""
    check("nvtx_env unset" in out, "nvtx-unset: the environment was not changed (%s)" % brief(out))
    s = one(ss, "nvtx-unset")
    if s is None:
        return
    check(kernels_total(s) == 51, "nvtx-unset: 51 kernels (%d)" % kernels_total(s))
    check(calls(s, "ranges") == {}, "nvtx-unset: no ranges (%s)" % calls(s, "ranges"))
    check(warnings(s) == ["nvtx_injection_unset"], "nvtx-unset: warning nvtx_injection_unset (%s)" % warnings(s))
    check(any("NVTX_INJECTION64_PATH is not set" in l and "firstpass-run" in l
              for l in err.splitlines() if l.startswith("firstpass:")),
          "nvtx-unset: a log line says NVTX capture is off and how to turn it on")


def scen_threads(ss, out, err):
    m = re.search(r"sim: threads (\d+) x (\d+) launches", out)
    s = one(ss, "threads")
    if not check(m is not None, "threads: the app finished") or s is None:
        return
    n = int(m.group(1)) * int(m.group(2))
    clean(s, "threads")
    check(kernels_total(s) == n, "threads: %d kernels recorded, want %d" % (kernels_total(s), n))
    check(calls(s, "apis").get("cudaLaunchKernel") == n, "threads: cudaLaunchKernel x%d (%s)" % (n, calls(s, "apis")))


def scen_fork(ss, out, err):
    m = re.search(r"sim: parent (\d+) ran 10, child (\d+)", out)
    if not check(m is not None, "fork: the app finished (%s)" % brief(out)):
        return
    parent, child = int(m.group(1)), int(m.group(2))
    check(re.search(r"late child cuInit 3 launch 3", out) is not None,
          "fork: a child forked after cuInit cannot use CUDA (%s)" % brief(out))
    by = {s["firstpass"]["pid"]: s for s in ss}
    check(sorted(by) == sorted([parent, child]), "fork: one session each from parent %d and child %d (%s)" % (parent, child, sorted(by)))
    if child in by:
        check(calls(by[child], "kernels") == {"child_kernel()": 20}, "fork: child session has child_kernel x20 (%s)" % calls(by[child], "kernels"))
        clean(by[child], "fork child")
    if parent in by:
        check(calls(by[parent], "kernels") == {"parent_kernel()": 10}, "fork: parent session has parent_kernel x10 (%s)" % calls(by[parent], "kernels"))
        clean(by[parent], "fork parent")


def scen_refused(ss, out, err):
    check(len(ss) == 0, "refused: no session (%d)" % len(ss))
    check("sim: small ran 10 (0)" in out, "refused: the program ran untouched")
    lines = [l for l in err.splitlines() if l.startswith("firstpass:")]
    check(len(lines) == 1 and "CONCURRENT_KERNEL" in lines[0] and "disabled" in lines[0],
          "refused: one log line saying the collector is disabled (%s)" % lines)


def scen_threads_locked(ss, out, err):
    """CUPTI keeps per-thread buffers: 32 of 40 threads get one; the other 8 lose all 202
    records each (100 launches x RUNTIME + KERNEL, one sync x RUNTIME + SYNC)."""
    s = one(ss, "threads-locked")
    if s is None:
        return
    fp = s["firstpass"]
    check(kernels_total(s) == 3200, "threads-locked: 3200 kernels (%d)" % kernels_total(s))
    check(fp["dropped_records"] == 8 * 202,
          "threads-locked: dropped_records %s == 1616, counted once" % fp["dropped_records"])
    check(counters(s).get("buffer_requests_refused") == 8 * 202,
          "threads-locked: collector.buffer_requests_refused %s == 1616"
          % counters(s).get("buffer_requests_refused"))
    check("cupti_per_thread_buffers" in warnings(s),
          "threads-locked: warning cupti_per_thread_buffers (%s)" % warnings(s))


def scen_abba(ss, out, err):
    m = re.search(r"sim: many (\d+) launches", out)
    check("DEADLOCK" not in err, "abba: no lock-order deadlock between the collector and CUPTI")
    s = one(ss, "abba")
    if not check(m is not None, "abba: the app finished") or s is None:
        return
    n = int(m.group(1))
    clean(s, "abba")
    check(kernels_total(s) == n, "abba: %d kernels recorded, want %d (a full buffer went "
          "through CUPTI's worker)" % (kernels_total(s), n))


def scen_kineto(ss, out, err, subscribed=False):
    """51 kernels drained before torch.profiler starts; 5 still in the collector's buffer at
    the takeover go to Kineto, with Kineto's own 20; after it stops, its disables leave the
    kinds off, so the last 10 launches are recorded by nobody."""
    m = re.search(r"sim: kineto subscribe (-?\d+).* kernels (\d+) buffers (\d+) unknown_buffers (\d+)", out)
    if not check(m is not None, "kineto: the app finished (%s)" % brief(out)):
        return
    if subscribed:  # FIRSTPASS_SUBSCRIBE=1: the slot is ours, and CUPTI names us to Kineto
        check(m.group(1) == "39" and "old CUPTI for firstpass" in m.group(0),
              "kineto: with FIRSTPASS_SUBSCRIBE=1 Kineto's subscribe fails, naming firstpass (%s)" % m.group(0))
    else:
        check(m.group(1) == "0", "kineto: torch.profiler's cuptiSubscribe succeeds (the collector "
              "leaves the subscriber slot free) (%s)" % m.group(1))
    check(int(m.group(2)) == 25 and int(m.group(4)) == 1,
          "kineto: Kineto received 25 kernels, 5 of them in 1 buffer of the collector's (%s)" % m.group(0))
    s = one(ss, "kineto")
    if s is None:
        return
    k = calls(s, "kernels")
    byname = {r.get("mangled", r["name"]): r["calls"] for r in s["firstpass"]["aggregates"]["kernels"]}
    check(kernels_total(s) == 51 and byname.get(DECODE_MANGLED) == 50 and k.get(PREFILL) == 1,
          "kineto: the 51 kernels drained before the takeover are in the session (%s)" % k)
    w = warnings(s)
    check("cupti_buffers_lost:1" in w, "kineto: warning cupti_buffers_lost:1 (%s)" % w)
    check("cupti_clock_replaced" in w, "kineto: warning cupti_clock_replaced (%s)" % w)
    check(any("torch.profiler" in l for l in err.splitlines() if l.startswith("firstpass:")),
          "kineto: a log line names the takeover")


def harness(out):
    m = re.search(r"harness: exit (-?\d+) ms (\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def labels(s):
    return s["firstpass"].get("labels", {})


def scen_upload(ss, out, err):
    check(len(ss) == 0, "upload: nothing left in the spool after the 201 (%d)" % len(ss))
    check(any(l.startswith("firstpass: uploaded session 1 ") for l in err.splitlines()),
          "upload: the log says it was uploaded")
    scen_basic(sessions(os.environ["STUB_DIR"]), out, err)


def scen_budget(ss, out, err):
    rc, ms = harness(out)
    check(rc == 0 and ms < 5000, "budget: exit 0 within the 2 s budget + 3 s, not 60 s (exit %s, %s ms)" % (rc, ms))
    s = one(ss, "budget")
    if s is not None:
        check(kernels_total(s) == 51, "budget: the spooled session has its 51 kernels")
    check(any("too slow" in l and "spooled" in l for l in err.splitlines()),
          "budget: the log says the upload gave up and where the session is")


def scen_killed(ss, out, err):
    rc, ms = harness(out)
    check(rc == 137, "killed: SIGKILL during the exit upload (exit %s)" % rc)
    s = one(ss, "killed")
    if s is not None:
        check(kernels_total(s) == 51, "killed: the session was spooled before the upload began")


def scen_sigterm(ss, out, err, name="sigterm", want_rc=143):
    rc, ms = harness(out)
    check(rc == want_rc and ms < 5000, "%s: ended by SIGTERM's own disposition (exit %s, want %d) within 5 s (%s ms)" % (name, rc, want_rc, ms))
    s = one(ss, name)
    if s is None:
        return
    check(calls(s, "kernels") == {"before_term()": 10}, "%s: before_term x10 (%s)" % (name, calls(s, "kernels")))
    check("terminated_by_signal:SIGTERM" in warnings(s), "%s: warning terminated_by_signal:SIGTERM (%s)" % (name, warnings(s)))
    check(labels(s).get("firstpass_part") == "0", "%s: labelled part 0 (%s)" % (name, labels(s)))


def scen_sigterm_chain(ss, out, err):
    check("the application's own SIGTERM handler ran" in out, "sigterm-chain: the application's handler ran after ours")
    scen_sigterm(ss, out, err, "sigterm-chain", 7)


def scen_forkexit(ss, out, err):
    m = re.search(r"sim: worker (\d+) part seen 1, _exit", out)
    if not check(m is not None, "forkexit: the worker saw its part spooled, then _exit (%s)" % brief(out)):
        return
    mine = [s for s in ss if s["firstpass"]["pid"] == int(m.group(1))]
    check(len(mine) >= 1 and len(mine) == len(ss), "forkexit: only the worker's parts (%d of %d)" % (len(mine), len(ss)))
    total = {}
    for s in mine:
        for n, c in calls(s, "kernels").items():
            total[n] = total.get(n, 0) + c
        check(labels(s).get("firstpass_part", "").isdigit(), "forkexit: part label %s" % labels(s))
    check(total == {"worker_kernel()": 10}, "forkexit: the parts hold the 10 kernels before the flush, the 5 after it died with _exit (%s)" % total)


SCENARIOS = {
    "upload": scen_upload,
    "budget": scen_budget,
    "killed": scen_killed,
    "sigterm": scen_sigterm,
    "sigterm-chain": scen_sigterm_chain,
    "forkexit": scen_forkexit,
    "nvtx-unset": scen_nvtx_unset,
    "kineto": scen_kineto,
    "kineto-subscribed": lambda ss, out, err: scen_kineto(ss, out, err, True),
    "threads-locked": scen_threads_locked,
    "abba": scen_abba,
    "basic": scen_basic,
    "threads": scen_threads,
    "fork": scen_fork,
    "refused": scen_refused,
}


# Scenarios whose program must end with exit 0 (the others check their own exit).
EXIT_0 = {"basic", "nvtx-unset", "threads", "threads-locked", "abba", "kineto", "kineto-subscribed",
          "fork", "refused",
          "upload", "budget", "forkexit"}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in SCENARIOS:
        print("usage: check.py %s SPOOL STDOUT STDERR" % "|".join(SCENARIOS))
        return 2
    name, spool, out, err = sys.argv[1:]
    out, err = open(out).read(), open(err).read()
    if name in EXIT_0:
        check(harness(out)[0] == 0, "%s: the program exited 0 (%s)" % (name, harness(out)[0]))
    check(not re.search(r"Sanitizer|runtime error:", err), "%s: no sanitizer report" % name)
    SCENARIOS[name](sessions(spool), out, err)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
