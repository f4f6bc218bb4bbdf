#!/usr/bin/env python3
"""reanalyse.py: what a re-analysis costs (docs/operations.md), against an upload of the same trace.

    bench/reanalyse.py SERVER_BIN [EVENTS] [--pg CONNINFO_OF_AN_ADMIN_DB]

Generates bench/gen_trace.c's LLM trace of EVENTS events (default 1,000,000, ~315 MB of JSON;
kept in bench/out/), uploads it to a fresh server (SQLite, or a new database on the given
PostgreSQL cluster), then re-analyses it twice: as it is (the upload's order kept, schema 9)
and with its replay row deleted (a session stored before schema 9: a track at a time). Prints
the wall times, the stored bytes of its event chunks, the seconds per GB of stored events and
of trace JSON, and the machine's load average before and after."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import fpserver  # noqa: E402


def scalar(srv, q):
    if fpserver.PG:
        return subprocess.run([os.path.join(fpserver.PGBIN, "psql"), "-X", "-A", "-t", "-q", srv.db, "-c", q], check=True,
                              capture_output=True, text=True).stdout.strip()
    import sqlite3
    c = sqlite3.connect(srv.db)
    try:
        return str(c.execute(q).fetchone()[0])
    finally:
        c.close()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--pg")]
    if "--pg" in sys.argv:
        fpserver.PG = sys.argv[sys.argv.index("--pg") + 1]
        args = [a for a in args if a != fpserver.PG]
    fpserver.SERVER = os.path.abspath(args[0])
    n = int(args[1]) if len(args) > 1 else 1000000
    out = os.path.join(HERE, "out")
    os.makedirs(out, exist_ok=True)
    gen = os.path.join(out, "gen_trace")
    if not os.access(gen, os.X_OK):
        subprocess.run(["cc", "-O2", "-o", gen, os.path.join(HERE, "gen_trace.c")], check=True)
    trace = os.path.join(out, "trace-%d.json" % n)
    if not os.path.exists(trace):
        subprocess.run([gen, "-n", str(n), "-o", trace], check=True)
    body = open(trace, "rb").read()
    load0 = os.getloadavg()
    srv = fpserver.Server("--max-upload", "2G", "--max-events", "30000000")
    try:
        t0 = time.time()
        sid = srv.upload_ok(body, "?name=bench")
        up = time.time() - t0
        chunks = int(scalar(srv, "SELECT SUM(LENGTH(data)) FROM event_chunks WHERE session_id = %d" % sid))
        res = []
        for label, prep in [("upload order", None), ("a track at a time", "DELETE FROM replay WHERE session_id = %d" % sid)]:
            if prep:
                if fpserver.PG:
                    subprocess.run([os.path.join(fpserver.PGBIN, "psql"), "-X", "-q", srv.db, "-c", prep], check=True)
                else:
                    import sqlite3
                    c = sqlite3.connect(srv.db)
                    c.execute(prep)
                    c.commit()
                    c.close()
            t0 = time.time()
            st, _, b = srv.request("POST", "/api/v1/sessions/%d/reanalyse" % sid, b"")
            assert st == 200, b[:300]
            res.append((label, time.time() - t0))
    finally:
        srv.stop()
    load1 = os.getloadavg()
    backend = "postgresql" if fpserver.PG else "sqlite"
    print("backend %s, %d events, trace %.0f MB of JSON, event chunks stored %.1f MB" % (backend, n, len(body) / 1e6, chunks / 1e6))
    print("upload: %.1f s" % up)
    for label, s in res:
        print("re-analysis (%s): %.1f s = %.0f s per GB of stored events, %.0f s per GB of trace JSON" % (label, s, s / (chunks / 1e9),
                                                                                                  s / (len(body) / 1e9)))
    print("load average before %.1f %.1f %.1f, after %.1f %.1f %.1f, %d cores" % (load0 + load1 + (os.cpu_count(),)))


if __name__ == "__main__":
    main()
