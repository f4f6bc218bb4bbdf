"""fpserver.py: start a real firstpass-server on a free loopback port, talk to it.

Shared by the integration tests. Standard library only (plus torch in the oracle test)."""
import atexit
import gzip
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACES = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "traces"))
SERVER = os.environ.get("FIRSTPASS_SERVER_BIN", os.path.join(ROOT, "build", "firstpass-server"))


# FIRSTPASS_TEST_PG: the conninfo of a PostgreSQL cluster's admin database (tests/pg/run.sh
# starts a throwaway one). Each Server then gets a fresh database of its own there instead
# of a SQLite file, so the whole suite runs against PostgreSQL; tests that open the SQLite
# file themselves are skipped (sqlite_only).
PG = os.environ.get("FIRSTPASS_TEST_PG", "")
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
sqlite_only = unittest.skipIf(bool(PG), "opens the SQLite database file itself")
pg_only = unittest.skipIf(not PG, "needs two servers on one database: one server per SQLite file")

# The SQLite schema this server writes (server/store/store.c STORE_SCHEMA_VERSION) and the
# script that takes a new database back to the version before it, for migration tests.
SQLITE_NEWEST = 10
SQLITE_UNDO_NEWEST = (
    "DROP INDEX sessions_idempotency; ALTER TABLE sessions DROP COLUMN idempotency_key; DROP TABLE upload_claims;"
    # the breakdown back into the report, where sessions before version 10 hold it
    "UPDATE analysis SET report = json_set(report, '$.breakdown', json(steps)) WHERE steps IS NOT NULL;"
    "ALTER TABLE analysis DROP COLUMN steps; ALTER TABLE analysis DROP COLUMN step_count;"
    "ALTER TABLE analysis DROP COLUMN step_mean_us; ALTER TABLE analysis DROP COLUMN step_sd_us;"
    "DROP INDEX agents_last_seen; ALTER TABLE agents DROP COLUMN instance;")
_pg_count = [0]


def pg_new_db():
    """A new, empty PostgreSQL database on the FIRSTPASS_TEST_PG cluster: its conninfo."""
    _pg_count[0] += 1
    name = "fp_%d_%d" % (os.getpid(), _pg_count[0])
    subprocess.run([os.path.join(PGBIN, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", PG, "-c",
                    'CREATE DATABASE "%s"' % name], check=True, stdout=subprocess.DEVNULL)
    return PG.replace("dbname=postgres", "") + " dbname=" + name


def new_db(dir):
    """Where a new server keeps its sessions: a file in dir, or a new PostgreSQL database."""
    return pg_new_db() if PG else os.path.join(dir, "db.sqlite")


# Servers not stopped yet. Why: a test class whose setUpClass starts a server and then
# fails never runs its tearDownClass, and the server outlived the run (four were left by a
# clone without ../shared/data/traces); whatever is here when Python exits is killed.
_live = set()


@atexit.register
def _reap():
    for p in list(_live):
        if p.poll() is None:
            p.kill()
            p.wait(10)
    _live.clear()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, *extra, db=None, quiet=True, binary=None):
        """extra: more flags; db: an existing database file to serve (a restart);
        quiet=False keeps the access log (in self.log.name); binary: another server
        binary than SERVER (an earlier commit's, oldserver.py)."""
        self.dir = tempfile.mkdtemp(prefix="fp-it-")
        self.db = db or new_db(self.dir)
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen([binary or SERVER, "--port", str(self.port), "--db", self.db, "--static",
                                      os.path.join(ROOT, "static"), *(["--quiet"] if quiet else []), *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        _live.add(self.proc)
        self.base = "http://127.0.0.1:%d" % self.port
        for _ in range(100):
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait(10)
        _live.discard(self.proc)
        raise RuntimeError("server did not start: " + open(self.log.name).read())

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, path, headers=None):
        st, h, b = self.request("GET", path, headers=headers)
        return st, h, b

    def json(self, path):
        st, _, b = self.get(path)
        assert st == 200, (path, st, b[:300])
        return json.loads(b)

    def upload(self, data, query="", headers=None):
        st, h, b = self.request("POST", "/api/v1/sessions" + query, body=data, headers=headers)
        return st, h, json.loads(b) if b else None

    def upload_ok(self, data, query=""):
        st, _, b = self.upload(data, query)
        assert st == 201, (st, b)
        return b["id"]

    def alive(self):
        return self.proc.poll() is None and self.get("/healthz")[0] == 200

    def stop(self):
        """SIGTERM, then fail if the server reported a sanitizer finding (ASan runs)."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        _live.discard(self.proc)
        self.log.close()
        with open(self.log.name) as f:
            log = f.read()
        for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if bad in log:
                raise AssertionError("server log has '%s':\n%s" % (bad, log[-4000:]))


def head_only(port, head, wait=3.0):
    """Sends a request head without its body; returns the bytes answered within `wait` s
    (stops early at a complete JSON reply or an interim 100 Continue)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    try:
        s.sendall(head.encode())
        got = b""
        end = time.time() + wait
        while time.time() < end and not (b"\r\n\r\n" in got and (b"}\n" in got or got.startswith(b"HTTP/1.1 100"))):
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


def read_trace(path):
    raw = open(path, "rb").read()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return raw, json.loads(text)


def events_of(doc):
    return doc if isinstance(doc, list) else doc["traceEvents"]


HOST_OP = {"cpu_op": "cpu_op", "user_annotation": "user_annotation", "Operator": "cpu_op"}
HOST_RT = {"cuda_runtime": "cuda_runtime", "cuda_driver": "cuda_driver", "Runtime": "cuda_runtime"}
GPU = {"kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "gpu_memset": "gpu_memset",
       "Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}


def classify(e):
    """Independent restatement of the importer's classes: ('host'|'rt'|'gpu'|None, kind)."""
    complete = e.get("ph") == "X" and "ts" in e and "dur" in e
    if not complete:
        return None, None
    cat = e.get("cat")
    if not cat:
        return "host", "cpu_op" if "::" in e.get("name", "") else "user_annotation"
    if cat == "Operator" and "#" in e.get("name", ""):
        return "host", "user_annotation"  # 2021 schema: record_function ranges (ProfilerStep#5, ## forward ##)
    if cat in HOST_OP:
        return "host", HOST_OP[cat]
    if cat in HOST_RT:
        return "rt", HOST_RT[cat]
    if cat in GPU:
        return "gpu", GPU[cat]
    return None, None


def _table_name(name):
    """torch's _rewrite_name(with_wildcard=True): every ProfilerStep#N is ProfilerStep*."""
    if name.startswith("ProfilerStep#") and name[13:].isdigit():
        return "ProfilerStep*"
    return name


def key_averages(doc):
    """Reference operator table by torch's rule (trace-semantics.md), written apart
    from the server: {(name, kind): {calls, cpu_total, self_cpu, self_cuda, cuda_total}}.
    A tree per thread (torch's nesting), then torch's EventList._remove_dup_nodes (an op
    whose same-named parent has it as its only child is dropped; its children and its
    self CUDA go to the parent; repeated until stable), then the table."""
    evs = events_of(doc)
    gpu_by_corr = {}
    rows = {}

    def row(name, kind):
        return rows.setdefault((name, kind), dict(calls=0, cpu_total=0.0, self_cpu=0.0, self_cuda=0.0, cuda_total=0.0))

    threads = {}
    for e in evs:
        c, kind = classify(e)
        args = e.get("args") or {}
        if c == "gpu":
            r = row(e["name"], kind)
            r["calls"] += 1
            r["self_cuda"] += e["dur"]
            r["cuda_total"] += e["dur"]
            if "correlation" in args:
                gpu_by_corr[args["correlation"]] = gpu_by_corr.get(args["correlation"], 0) + e["dur"]
        elif c in ("host", "rt"):
            threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append((e, c, kind))
    nodes = []
    for evl in threads.values():
        evl.sort(key=lambda x: (x[0]["ts"], -(x[0]["ts"] + x[0]["dur"])))
        stack = []
        for e, c, kind in evl:
            s, en = e["ts"], e["ts"] + e["dur"]
            while stack and (s >= stack[-1]["end"] or en > stack[-1]["end"]):
                stack.pop()
            f = dict(name=_table_name(e["name"]), kind=kind, dur=e["dur"], end=en, self_cuda=0.0, cuda_total=0.0, cls=c,
                     parent=stack[-1] if stack else None, children=[], gone=False)
            if f["parent"] is not None:
                f["parent"]["children"].append(f)
            if c == "rt":
                d = gpu_by_corr.get((e.get("args") or {}).get("correlation"))
                if d is not None and (e.get("args") or {}).get("correlation") is not None:
                    ops = [x for x in stack if x["cls"] == "host"]
                    for x in ops:
                        x["cuda_total"] += d
                    if ops:
                        ops[-1]["self_cuda"] += d
                    # with no op around it the call keeps nothing: a runtime call is never GPU
                    # time (issue 42, item 7; torch gives kernels to the op, never the call)
            nodes.append(f)
            stack.append(f)
    changed = True
    while changed:
        changed = False
        for n in nodes:
            p = n["parent"]
            if n["gone"] or p is None or p["name"] != n["name"] or len(p["children"]) != 1:
                continue
            p["children"] = n["children"]
            for ch in n["children"]:
                ch["parent"] = p
            p["self_cuda"] += n["self_cuda"]
            n["gone"] = changed = True
    for f in nodes:
        if f["gone"]:
            continue
        r = row(f["name"], f["kind"])
        r["calls"] += 1
        r["cpu_total"] += f["dur"]
        r["self_cpu"] += f["dur"] - sum(ch["dur"] for ch in f["children"])
        r["self_cuda"] += f["self_cuda"]
        r["cuda_total"] += f["cuda_total"]
    return rows


def all_traces():
    out = []
    for d, _, files in os.walk(TRACES):
        for f in sorted(files):
            if f.endswith(".json") or f.endswith(".json.gz"):
                out.append(os.path.join(d, f))
    return sorted(out)
