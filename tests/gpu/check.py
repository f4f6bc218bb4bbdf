#!/usr/bin/env python3
"""check.py OUT [--server URL|auto] -- checks what `smoke.sh --prebuilt` left on a GPU machine.

OUT is the folder it wrote, or one holding its gpu-smoke.tar.gz. Prints PASS/FAIL/SKIP/INFO
lines per part and the measured overheads; exit 1 on any FAIL. With --server URL the sessions
are also sent (build/firstpass-upload) and the smoke session is read back through /operators
and /phases; --server auto starts build/firstpass-server on a free port for that. Run it from
the repository root ($BUILD, default build, names the build folder).
"""
import glob
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

KERNELS = {  # smoke.cu's workload, as c++filt names them
    "matmul_prefill(float const*, float const*, float*, int)": 1,
    "void scale_kernel<float>(float*, float, int)": 1,
    "decode_step_kernel(float*, int)": 50,
    "spin_kernel(long long)": 1,
}
bad = 0


def say(kind, msg):
    global bad
    print("%s: %s" % (kind, msg))
    if kind == "FAIL":
        bad += 1


def check(ok, msg):
    say("PASS" if ok else "FAIL", msg)
    return ok


class Part:
    def __init__(self, root, name):
        d = os.path.join(root, name)
        self.name = name
        self.present = os.path.isdir(d)
        self.out = open(os.path.join(d, "out")).read() if self.present else ""
        self.err = open(os.path.join(d, "err")).read() if self.present else ""
        rc = open(os.path.join(d, "rc")).read().split() if self.present else []
        self.rc = int(rc[0]) if rc else None
        self.t0 = int(rc[1]) if len(rc) > 1 else None
        self.files = sorted(glob.glob(os.path.join(d, "spool", "*.json.gz")))
        self.sessions = []
        for p in self.files:
            with gzip.open(p, "rt") as f:
                self.sessions.append(json.load(f))

    def log(self):
        return [l for l in self.err.splitlines() if l.startswith("firstpass:")]


def rows(s, group):
    return {r["name"]: r for r in s["firstpass"]["aggregates"][group]}


def calls(s, group):
    return {n: r["calls"] for n, r in rows(s, group).items()}


def summed(ss, group):
    t = {}
    for s in ss:
        for n, c in calls(s, group).items():
            t[n] = t.get(n, 0) + c
    return t


def clean(p, s):
    fp, c = s["firstpass"], s["firstpass"]["collector"]
    check(fp["dropped_records"] == 0, "%s: dropped_records 0 (%s)" % (p.name, fp["dropped_records"]))
    nz = {k: c.get(k) for k in ("buffer_errors", "unknown_kinds", "untimed_records", "clock_outliers",
                                "ranges_unmatched_start", "ranges_unmatched_end", "out_of_memory",
                                "buffer_requests_refused", "sync_not_ready") if c.get(k)}
    check(not nz, "%s: collector counters that must be 0 are 0 (%s)" % (p.name, nz or "all"))


def ran(p, want_rc=0):
    if not check(p.present, "%s: part ran" % p.name):
        return False
    for l in p.log():
        say("INFO", "%s: %s" % (p.name, l))
    check(p.rc == want_rc, "%s: exit %s (want %d)" % (p.name, p.rc, want_rc))
    lost = [l for l in p.log() if "LOST" in l or "unavailable" in l]
    check(not lost, "%s: no firstpass line says LOST or unavailable (%s)" % (p.name, lost))
    return True


def smoke(p):
    if not ran(p):
        return
    if not check(len(p.sessions) == 1, "smoke: one session (%d)" % len(p.sessions)):
        return
    s = p.sessions[0]
    fp = s["firstpass"]
    clean(p, s)
    check(fp.get("warnings") == [], "smoke: no warnings (%s)" % fp.get("warnings"))
    check(calls(s, "kernels") == KERNELS, "smoke: kernels exactly, demangled (%s)" % calls(s, "kernels"))
    m = re.search(r"smoke: kernels (\d+) event_polls (\d+)", p.out)
    check(m is not None and int(m.group(1)) == sum(KERNELS.values()), "smoke: the program launched %s" % (m.group(0) if m else p.out.strip()))
    a = calls(s, "apis")
    check(a.get("cudaLaunchKernel") == 53, "smoke: cudaLaunchKernel x53 (%s)" % a.get("cudaLaunchKernel"))
    mc = {n: (r["calls"], r["bytes"]) for n, r in rows(s, "memcpy").items()}
    check(mc.get("Memset (Device)", (0,))[0] == 2 and mc.get("Memcpy HtoD (Pageable -> Device)", (0, 0))[1] == 16384
          and mc.get("Memcpy DtoH (Device -> Pageable)", (0, 0))[1] == 16384, "smoke: memset x2, memcpy HtoD and DtoH 16 KiB (%s)" % mc)
    y = calls(s, "syncs")
    check(y.get("Stream Sync") == 50 and y.get("Context Sync", 0) >= 1, "smoke: Stream Sync 50, Context Sync >= 1 (%s)" % y)
    say("INFO", "smoke: Event Sync rows %s for %s cudaEventQuery polls; sync_not_ready %s"
        % (y.get("Event Sync", 0), m.group(2) if m else "?", fp["collector"].get("sync_not_ready")))
    r = calls(s, "ranges")
    check(r == {"prefill": 1, "decode_step": 50}, "smoke: NVTX ranges prefill x1, decode_step x50 (%s)" % r)
    ev = s["traceEvents"]
    dec = [e for e in ev if e["cat"] == "kernel" and e["name"] == "decode_step_kernel(float*, int)"]
    rng = [e for e in ev if e["cat"] == "user_annotation" and e["name"] == "decode_step"]
    inside = sum(1 for k in dec if any(q["ts"] <= k["ts"] and k["ts"] + k["dur"] <= q["ts"] + q["dur"] + 1.0 for q in rng))
    check(len(dec) == 50 and inside == 50, "smoke: %d of %d decode kernels inside a decode_step range (1 us slack)" % (inside, len(dec)))
    d = s.get("deviceProperties", [])
    check(len(d) >= 1 and "H200" in d[0]["name"] and (d[0]["computeMajor"], d[0]["computeMinor"]) == (9, 0)
          and d[0]["numSms"] == 132, "smoke: device H200 / sm_90 / 132 SMs (%s)" % [(x["name"], x["computeMajor"], x["computeMinor"], x["numSms"]) for x in d])
    if p.t0:
        check(abs(fp["start_ns"] - p.t0) < 5e9, "smoke: session clock within 5 s of the machine's (%.3f s)" % ((fp["start_ns"] - p.t0) / 1e9))
    say("INFO", "smoke: cupti %s driver %s runtime %s" % (fp.get("cupti_version"), fp.get("driver_version"), fp.get("runtime_version")))


def split(p, pid_differs=False):
    if not ran(p):
        return
    ss = p.sessions
    check(len(ss) >= 2 if not pid_differs else len(ss) >= 1, "%s: %d part(s) spooled" % (p.name, len(ss)))
    labels = [s["firstpass"].get("labels", {}).get("firstpass_part") for s in ss]
    check(all(labels), "%s: every part labelled firstpass_part (%s)" % (p.name, labels))
    check(summed(ss, "kernels") == KERNELS, "%s: the parts' kernels sum to the whole (%s)" % (p.name, summed(ss, "kernels")))
    check(summed(ss, "ranges") == {"prefill": 1, "decode_step": 50}, "%s: the parts' ranges sum to 51 (%s)" % (p.name, summed(ss, "ranges")))
    check(sum(s["firstpass"]["dropped_records"] for s in ss) == 0, "%s: no drops" % p.name)
    if pid_differs:
        m = re.search(r"smoke: worker (\d+) sleeps", p.out)
        check(m is not None and all(s["firstpass"]["pid"] == int(m.group(1)) for s in ss),
              "%s: all parts come from the forked worker, which ended in _exit" % p.name)


def driver(p):
    if not ran(p) or not check(len(p.sessions) == 1, "driver: one session"):
        return
    s = p.sessions[0]
    drv = {r["name"]: r["calls"] for r in s["firstpass"]["aggregates"]["apis"] if r.get("kind") == "cuda_driver"}
    say("INFO", "driver: driver API rows %s" % drv)
    check(sum(c for n, c in drv.items() if n.startswith("cuLaunch")) >= 53, "driver: >= 53 cuLaunch* driver calls")
    check(calls(s, "kernels") == KERNELS, "driver: kernels exactly as without driver tracing")


def bench(off, on):
    rx = r"ns_per_launch ([\d.]+) graph_nodes (\d+) replays (\d+) ns_per_node ([\d.]+)"
    if not (ran(off) and ran(on)):
        return
    a, b = re.search(rx, off.out), re.search(rx, on.out)
    if not check(a is not None and b is not None, "bench: both runs printed their rates"):
        return
    l0, l1, n0, n1 = float(a.group(1)), float(b.group(1)), float(a.group(4)), float(b.group(4))
    say("INFO", "bench: launch %.1f ns without, %.1f ns with the collector: +%.1f ns per launch" % (l0, l1, l1 - l0))
    say("INFO", "bench: graph node %.1f ns without, %.1f ns with the collector: +%.1f ns per node" % (n0, n1, n1 - n0))
    k = re.search(r"smoke: kernels (\d+)", on.out)
    if check(len(on.sessions) == 1 and k is not None, "bench-on: one session"):
        s = on.sessions[0]
        got = sum(r["calls"] for r in s["firstpass"]["aggregates"]["kernels"])
        check(got == int(k.group(1)), "bench-on: every one of %s kernels recorded (%d)" % (k.group(1), got))
        clean(on, s)


def torch(p):
    if not p.present:
        return say("FAIL", "torch: part did not run")
    if "torch: unavailable" in p.out or "CUDA unavailable" in p.out or p.rc == 3:
        return say("SKIP", "torch: no PyTorch with CUDA on the GPU machine (%s)" % p.out.strip()[:200])
    for l in p.err.splitlines():
        if re.search(r"CUPTI|kineto|Kineto|cupti", l) and not l.startswith("firstpass:"):
            say("INFO", "torch: %s" % l.strip()[:300])
    ran(p)
    m = re.search(r"torch: version (\S+) kineto_kernels (\d+)", p.out)
    check(m is not None and int(m.group(2)) >= 10, "torch: torch.profiler still traces with the collector in the process (%s)" % (m.group(0) if m else p.out.strip()[:200]))
    if not check(len(p.sessions) >= 1, "torch: the collector's session exists (%d)" % len(p.sessions)):
        return
    w = sorted({x for s in p.sessions for x in s["firstpass"].get("warnings", [])})
    steps = summed(p.sessions, "ranges").get("step", 0)
    kern = sum(sum(calls(s, "kernels").values()) for s in p.sessions)
    say("INFO", "torch: collector session: %d step ranges, %d kernels, warnings %s" % (steps, kern, w))
    check(steps >= 10, "torch: the 10 steps before torch.profiler are in the session (%d)" % steps)
    taken = any(x.startswith("cupti_buffers_lost") or x == "cupti_clock_replaced" for x in w)
    check(steps == 30 or taken, "torch: nothing lost silently: all 30 steps, or a takeover warning")


def ingest(root, url):
    up = os.path.join(os.environ.get("BUILD", "build"), "firstpass-upload")
    if not os.path.exists(up):
        return say("FAIL", "ingest: %s not built" % up)
    tmp = tempfile.mkdtemp(prefix="fp-gpu-spool-")
    for f in glob.glob(os.path.join(root, "*", "spool", "*.json.gz")):
        shutil.copy(f, tmp)
    r = subprocess.run([up, "--server", url, "--spool", tmp], capture_output=True, text=True)
    check(r.returncode == 0, "ingest: firstpass-upload sent every session (%s)" % r.stdout.strip().splitlines()[-1:])
    shutil.rmtree(tmp, ignore_errors=True)
    lst = json.load(urllib.request.urlopen(url + "/api/v1/sessions?name=gpu-smoke"))
    ids = [s["id"] for s in lst.get("sessions", [])]
    if not check(len(ids) == 1, "ingest: one gpu-smoke session on the server (%s)" % ids):
        return
    ops = json.load(urllib.request.urlopen("%s/api/v1/sessions/%d/operators?limit=1000" % (url, ids[0])))["operators"]
    kern = {o["name"]: o["calls"] for o in ops if o.get("kind") == "kernel"}
    check(kern == KERNELS, "ingest: /operators kernel rows (%s)" % kern)
    ph = {x["name"]: x["count"] for x in json.load(urllib.request.urlopen("%s/api/v1/sessions/%d/phases" % (url, ids[0])))["phases"]}
    check(ph.get("prefill") == 1 and ph.get("decode_step") == 50, "ingest: /phases prefill x1, decode_step x50 (%s)" % ph)


def start_server():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    db = tempfile.mkdtemp(prefix="fp-gpu-db-")
    proc = subprocess.Popen([os.path.join(os.environ.get("BUILD", "build"), "firstpass-server"), "--bind", "127.0.0.1", "--port", str(port),
                             "--db", os.path.join(db, "db.sqlite"), "--static", "static"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/healthz")
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("FAIL: build/firstpass-server did not start")


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    root, server = args[0], None
    if len(args) == 3 and args[1] == "--server":
        server = args[2]
    tgz = os.path.join(root, "gpu-smoke.tar.gz")
    if os.path.exists(tgz) and not os.path.isdir(os.path.join(root, "smoke")):
        tmp = tempfile.mkdtemp(prefix="fp-gpu-out-")
        with tarfile.open(tgz) as t:
            t.extractall(tmp)
        root = tmp
    summary = os.path.join(root, "summary.txt")
    if os.path.exists(summary):
        print("".join("  | " + l for l in open(summary).readlines()[:6]), end="")
    smoke(Part(root, "smoke"))
    split(Part(root, "flush"))
    split(Part(root, "forkexit"), pid_differs=True)
    driver(Part(root, "driver"))
    bench(Part(root, "bench-off"), Part(root, "bench-on"))
    torch(Part(root, "torch"))
    if server:
        proc = None
        if server == "auto":
            proc, server = start_server()
        try:
            ingest(root, server)
        finally:
            if proc:
                proc.kill()
    print("gpu-smoke: %s" % ("all checks passed" if bad == 0 else "%d check(s) FAILED" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
