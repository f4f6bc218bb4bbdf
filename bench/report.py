#!/usr/bin/env python3
"""bench/report.py RESULTS.tsv RESULTS.md: renders bench/run.sh's measurements as one markdown
report (tables, ratios, PASS/FAIL per target). Standard library only."""
import sys

# Targets (issue 8).
SPEEDUP_MIN = 5.0          # ingest >= 5x faster than json.load
RSS_MAX_MB = 100.0         # server peak RSS at every size
P99_MAX_MS = 10.0          # reads
RPS_MIN = 2000.0           # reads
STORAGE_MAX_RATIO = 1.0    # DB+WAL bytes/event <= gzip bytes/event
DL_MIN_RATIO = 1.0         # download time <= ingest time


def load(path):
    r = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            r[k] = v
    return r


def num(r, k, default=None):
    try:
        return float(r[k])
    except (KeyError, ValueError):
        return default


def mb(kb):
    return kb / 1024.0 if kb is not None else None


def f(x, nd=1):
    return "n/a" if x is None else f"{x:,.{nd}f}"


def main():
    r = load(sys.argv[1])
    sizes = r.get("config.sizes", "").split()
    out = []
    w = out.append
    w("# firstpass-server benchmark results\n")
    w(f"- machine: {r.get('machine.nproc')} x {r.get('machine.cpu')}, {r.get('machine.mem_gb')} GiB RAM, "
      f"Linux {r.get('machine.kernel')}")
    w(f"- load average at start {r.get('machine.loadavg_start')}, at end {r.get('machine.loadavg_end')} "
      "(client, server and wrk share these cores)")
    w(f"- server: `{r.get('machine.server')}`; baseline: python {r.get('machine.python')} `json.load` + "
      "per-name dur sum; wrk `" + r.get("config.wrk", "") + "`")
    w(f"- run at {r.get('machine.date')}\n")

    targets = []  # (ok, target, measured)

    w("## Ingest, storage, download\n")
    w("CPU s: user + system seconds of the baseline process and of the server during the upload "
      "(less sensitive than wall time to other load on the machine).\n")
    w("| trace | events | baseline s (CPU s) | baseline peak RSS MB | ingest s (server CPU s) | **speedup** wall (CPU) | ingest MB/s | "
      "server peak RSS MB ingest / download / reads | DB+WAL B/event | gzip B/event | **DB / gzip** | "
      "download s | download MB/s | **download / ingest speed** |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        ev = num(r, f"{s}.events")
        tb = num(r, f"{s}.trace_bytes")
        bs = num(r, f"{s}.baseline_s")
        brss = mb(num(r, f"{s}.baseline_rss_kb"))
        ing = num(r, f"{s}.ingest_s")
        hi, hd, hr = (mb(num(r, f"{s}.{k}_hwm_kb")) for k in ("ingest", "download", "reads"))
        db = (num(r, f"{s}.db_bytes", 0) + num(r, f"{s}.wal_bytes", 0))
        gz = num(r, f"{s}.gzip_bytes")
        dl = num(r, f"{s}.download_s")
        if ev is None or ing is None:
            w(f"| {s} MB | (not measured) |")
            continue
        speed = bs / ing if bs and ing else None
        bcpu = num(r, f"{s}.baseline_cpu_s")
        icpu = num(r, f"{s}.ingest_cpu_s")
        cspeed = bcpu / icpu if bcpu and icpu else None
        dbe = db / ev
        gze = gz / ev if gz else None
        sratio = dbe / gze if gze else None
        dlr = ing / dl if dl else None
        w(f"| {s} MB ({f(tb / 1e6)} MB) | {ev:,.0f} | {f(bs, 2)} ({f(bcpu, 2)}) | {f(brss, 0)} | {f(ing, 2)} ({f(icpu, 2)}) | **{f(speed, 2)}x** ({f(cspeed, 2)}x) | "
          f"{f(tb / 1e6 / ing)} | {f(hi)} / {f(hd)} / {f(hr)} | {f(dbe)} | {f(gze)} | **{f(sratio, 2)}** | {f(dl, 2)} | "
          f"{f(num(r, f'{s}.download_bytes', 0) / 1e6 / dl if dl else None)} | **{f(dlr, 2)}x** |")
        targets.append((speed is not None and speed >= SPEEDUP_MIN, f"ingest >= {SPEEDUP_MIN:g}x faster than baseline, {s} MB",
                        f"{f(speed, 2)}x wall ({f(bs, 2)} s vs {f(ing, 2)} s), {f(cspeed, 2)}x CPU"))
        peak = max(x for x in (hi, hd, hr) if x is not None)
        targets.append((peak < RSS_MAX_MB, f"server peak RSS < {RSS_MAX_MB:g} MB, {s} MB",
                        f"{f(peak)} MB (ingest {f(hi)}, download {f(hd)}, reads {f(hr)}; baseline {f(brss, 0)} MB)"))
        targets.append((sratio is not None and sratio <= STORAGE_MAX_RATIO, f"storage/event <= gzip/event, {s} MB",
                        f"{f(dbe)} vs {f(gze)} B/event ({f(sratio, 2)}x)"))
        targets.append((dlr is not None and dlr >= DL_MIN_RATIO, f"download at least as fast as ingest, {s} MB",
                        f"{f(dl, 2)} s vs {f(ing, 2)} s ({f(dlr, 2)}x)"))
    w("")
    w("speedup = baseline s / ingest s; DB / gzip = (DB + WAL bytes after `PRAGMA wal_checkpoint(TRUNCATE)`) / "
      "(`gzip -6` trace bytes); download / ingest speed = ingest s / download s (same session, plain JSON both ways). "
      "Peak RSS is `VmHWM`, reset through `/proc/PID/clear_refs` between ingest, download and reads.\n")

    w("## Reads (wrk)\n")
    w("| endpoint | session | req/s | p99 ms | errors | result |")
    w("|---|---|---|---|---|---|")
    reads = [(f"{s}.{ep}", f"/api/v1/sessions/{{id}}/{ep}", f"{s} MB trace") for s in sizes for ep in ("operators", "report", "phases")]
    if "sessions.rps" in r:
        reads.append(("sessions", "/api/v1/sessions", f"{r.get('sessions.count')} sessions stored"))
    for key, ep, what in reads:
        rps = num(r, f"{key}.rps")
        p99 = num(r, f"{key}.p99_ms")
        errs = num(r, f"{key}.errors", 0)
        if rps is None:
            continue
        ok = rps >= RPS_MIN and p99 is not None and p99 < P99_MAX_MS and errs == 0
        w(f"| `{ep}` | {what} | {f(rps, 0)} | {f(p99, 2)} | {errs:.0f} | {'PASS' if ok else 'FAIL'} |")
        targets.append((ok, f"reads p99 < {P99_MAX_MS:g} ms and >= {RPS_MIN:g} req/s: {ep} ({what})",
                        f"{f(rps, 0)} req/s, p99 {f(p99, 2)} ms, {errs:.0f} errors"))
    if "sessions.store_s" in r:
        w(f"\nStoring {r.get('sessions.store_ok')} sessions (100-event trace, 4 uploads at a time) took "
          f"{r.get('sessions.store_s')} s; that DB is {f(num(r, 'sessions.db_bytes', 0) / 1e6)} MB.")
    elif "sessions.db_bytes" in r:
        w(f"\nThe {r.get('sessions.count')}-session DB (cached from an earlier run) is "
          f"{f(num(r, 'sessions.db_bytes', 0) / 1e6)} MB.")
    w("")

    w("## Targets\n")
    w("| result | target | measured |")
    w("|---|---|---|")
    for ok, t, m in targets:
        w(f"| {'PASS' if ok else 'FAIL'} | {t} | {m} |")
    npass = sum(1 for t in targets if t[0])
    w(f"\n{npass} passed, {len(targets) - npass} failed\n")

    w("## Server analysis steps (FIRSTPASS_TRACE_ANALYSIS=1, ms)\n")
    for s in sizes:
        a = r.get(f"{s}.analysis", "").split()
        if a:
            w(f"- {s} MB: " + ", ".join(x.replace("=", " ") for x in a))
    w("\n## Storage by table (dbstat, bytes)\n")
    for s in sizes:
        if r.get(f"{s}.dbstat"):
            w(f"- {s} MB: {r.get(f'{s}.dbstat')}")
    text = "\n".join(out) + "\n"
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
