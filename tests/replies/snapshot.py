#!/usr/bin/env python3
"""snapshot.py: every read reply of the 26 real traces, written to a folder, and two folders compared.

    tests/replies/snapshot.py take SERVER_BIN OUTDIR     # uploads every trace, saves every reply
    tests/replies/snapshot.py diff OLDDIR NEWDIR         # exit 1 and a list when any reply differs
    tests/replies/snapshot.py check OLD_BIN NEW_BIN      # both of the above in one go
    tests/replies/snapshot.py migrate OLD_BIN NEW_BIN    # OLD_BIN's database read by NEW_BIN

Why: a change that must not change behaviour (the layout issue, the ingest speed issue) is
proved by the replies of the real traces being identical, byte for byte, before and after.
Each trace is uploaded to a fresh server (one per binary), in a fixed order, so session ids
match; `migrate` uploads to OLD_BIN only, then starts NEW_BIN on that database (which
migrates it) and compares what NEW_BIN reads back with what OLD_BIN answered. Volatile fields (created_at, the upload's duration) are blanked in JSON replies before
they are saved. The download is saved gunzipped. Standard library only.
Traces: $FP_TRACES or ../shared/data/traces next to the repository."""
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402

TRACES = os.environ.get("FP_TRACES", fpserver.TRACES)
# Keys whose values differ from run to run by design: wall-clock times of the upload.
VOLATILE = {"created_at", "ingest_ms", "ingest_seconds", "uploaded_at"}

PER_SESSION = [
    "", "/operators", "/operators?sort=cuda_time_total&limit=10000", "/operators?sort=self_cpu_time_total&limit=10000",
    "/operators?group_by=input_shape&limit=10000", "/operators?kind=kernel", "/operators?format=text",
    "/operators?format=csv&limit=10000", "/kernels", "/kernels?format=csv", "/kernels?format=text", "/phases",
    "/phases?format=text", "/gpu", "/report", "/report?format=text", "/timeline", "/timeline?buckets=50",
    "/timeline?format=json&buckets=2000",
]


def traces():
    out = []
    for d, _, files in os.walk(TRACES):
        for f in files:
            if f.endswith((".json", ".json.gz", ".sqlite")):
                out.append(os.path.join(d, f))
    return sorted(out)


def scrub(v):
    if isinstance(v, dict):
        return {k: ("<volatile>" if k in VOLATILE else scrub(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v


def save(out, name, status, headers, body):
    ctype = headers.get("Content-Type", "")
    if "json" in ctype and body:
        try:
            body = json.dumps(scrub(json.loads(body)), sort_keys=False, indent=0).encode()
        except ValueError:
            pass
    if "csv" in ctype and body:
        rows = list(csv.reader(io.StringIO(body.decode())))
        cols = [i for i, c in enumerate(rows[0]) if c in VOLATILE] if rows else []
        for r in rows[1:]:
            for i in cols:
                if i < len(r):
                    r[i] = "<volatile>"
        o = io.StringIO()
        csv.writer(o, lineterminator="\n").writerows(rows)
        body = o.getvalue().encode()
    if headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"%d %s\n" % (status, ctype.encode()))
        f.write(body)


def fname(path):
    return path.strip("/").replace("/", "_").replace("?", "__").replace("&", "_").replace("=", "-") or "root"


def read_all(srv, out, sids):
    """Every read reply of the sessions sids ({case number: session id}) and the lists."""
    for i, sid in sorted(sids.items()):
        for p in PER_SESSION:
            st, h, b = srv.get("/api/v1/sessions/%d%s" % (sid, p))
            save(out, "%02d_%s" % (i, fname(p)), st, h, b)
        st, h, b = srv.get("/api/v1/sessions/%d/trace" % sid)
        save(out, "%02d_trace" % i, st, h, b)
    for p in ["/api/v1/sessions?limit=100", "/api/v1/sessions?format=csv&limit=100",
              "/api/v1/sessions?label=case:3", "/api/v1/compare?base=12&head=13",
              "/api/v1/compare?base=12&head=13&format=text", "/api/v1/trends?label=case:12&limit=5"]:
        st, h, b = srv.get(p)
        save(out, "all_" + fname(p), st, h, b)


def read_regressions(srv, out):
    for p in ["/api/v1/sessions/13/regressions?baseline=b", "/api/v1/sessions/13/regressions?baseline=b&format=text"]:
        st, h, b = srv.get(p)
        save(out, "all_" + fname(p), st, h, b)


def take(server_bin, out, db=None):
    """Uploads every trace to a fresh server and saves every reply; db: an empty database
    to use (and keep) instead of a new one. The session ids by case number."""
    os.makedirs(out, exist_ok=True)
    fpserver.SERVER = server_bin
    srv = fpserver.Server(db=db)
    sids = {}
    try:
        files = traces()
        if not files:
            sys.exit("snapshot: no traces under %s" % TRACES)
        for i, f in enumerate(files, 1):
            rel = os.path.relpath(f, TRACES)
            with open(f, "rb") as fh:
                body = fh.read()
            st, h, b = srv.request("POST", "/api/v1/sessions?name=%s&label=case:%d" % (os.path.basename(f)[:60], i), body)
            save(out, "%02d_upload" % i, st, h, b)
            if st != 201:
                print("snapshot: %s: upload %d" % (rel, st))
                continue
            sids[i] = json.loads(b)["id"]
        read_all(srv, out, sids)
        srv.request("PUT", "/api/v1/baselines/b", json.dumps({"session_id": 12}).encode(),
                    {"Content-Type": "application/json"})
        read_regressions(srv, out)
    finally:
        srv.stop()
    return sids


def migrate(old_bin, new_bin, tmp):
    """OLD_BIN's database, with every trace in it, served by NEW_BIN: the same replies.
    On PostgreSQL when FIRSTPASS_TEST_PG names a cluster (tests/pg/cluster.sh)."""
    db = fpserver.pg_new_db() if fpserver.PG else os.path.join(tmp, "db.sqlite")
    sids = take(old_bin, os.path.join(tmp, "old"), db=db)
    new = os.path.join(tmp, "new")
    os.makedirs(new)
    for n in os.listdir(os.path.join(tmp, "old")):
        if n.endswith("_upload"):
            shutil.copy(os.path.join(tmp, "old", n), new)
    fpserver.SERVER = new_bin
    srv = fpserver.Server(db=db)
    try:
        read_all(srv, new, sids)
        read_regressions(srv, new)
    finally:
        srv.stop()
    return diff(os.path.join(tmp, "old"), new)


def diff(a, b):
    na, nb = set(os.listdir(a)), set(os.listdir(b))
    bad = sorted(na ^ nb)
    for n in sorted(na & nb):
        with open(os.path.join(a, n), "rb") as fa, open(os.path.join(b, n), "rb") as fb:
            if fa.read() != fb.read():
                bad.append(n)
    for n in bad:
        print("differs: %s" % n)
    print("%d replies compared, %d differ" % (len(na | nb), len(bad)))
    return 1 if bad else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "take":
        take(os.path.abspath(sys.argv[2]), sys.argv[3])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "diff":
        return diff(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        tmp = tempfile.mkdtemp(prefix="fp-replies-")
        try:
            take(os.path.abspath(sys.argv[2]), os.path.join(tmp, "old"))
            take(os.path.abspath(sys.argv[3]), os.path.join(tmp, "new"))
            return diff(os.path.join(tmp, "old"), os.path.join(tmp, "new"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if len(sys.argv) == 4 and sys.argv[1] == "migrate":
        tmp = tempfile.mkdtemp(prefix="fp-migrate-")
        try:
            return migrate(os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]), tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
