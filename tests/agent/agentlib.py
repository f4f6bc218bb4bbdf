"""agentlib.py: what the agent's tests share: the binaries under test, a server on a port of
our choosing (so that it can go down and come back on the same URL), the agent as a process,
the stand-in engine (engine.py) as a process, and a real torch.profiler trace."""
import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _load_fpserver():
    if "fpserver" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fpserver", os.path.join(ROOT, "tests", "integration", "fpserver.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["fpserver"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["fpserver"]


fps = _load_fpserver()
free_port = fps.free_port
SERVER = fps.SERVER
UPLOAD = os.environ.get("FIRSTPASS_UPLOAD_BIN", os.path.join(ROOT, "build", "firstpass-upload"))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
_live = fps._live  # processes killed at exit (fpserver's reaper)


SANITIZER = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def check_log(path, who):
    """Fails when a sanitizer reported in the log at path (the ASan+UBSan builds)."""
    with open(path, errors="replace") as f:
        log = f.read()
    for bad in SANITIZER:
        if bad in log:
            raise AssertionError("%s log has '%s':\n%s" % (who, bad, log[-4000:]))


def wait_for(fn, timeout=20.0, step=0.1, what="condition"):
    """Calls fn until it returns something true; returns it. AssertionError after timeout."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(step)


def start_server(*extra, port=None, db=None, quiet=True):
    """A real firstpass-server on 127.0.0.1:port (free when None) with db (new when None)."""
    port = port or free_port()
    d = tempfile.mkdtemp(prefix="fp-agent-srv-")
    db = db or fps.new_db(d)  # a PostgreSQL database of its own under FIRSTPASS_TEST_PG (tests/pg/run.sh)
    log = open(os.path.join(d, "server.log"), "w")
    p = subprocess.Popen([SERVER, "--port", str(port), "--db", db, "--static", os.path.join(ROOT, "static"),
                          *(["--quiet"] if quiet else []), *extra], stdout=log, stderr=subprocess.STDOUT)
    _live.add(p)
    s = Server(p, port, db, log)
    wait_for(lambda: s.up(), 10, 0.05, "the server to answer /healthz")
    return s


class Server:
    def __init__(self, proc, port, db, log):
        self.proc, self.port, self.db, self.log = proc, port, db, log
        self.base = "http://127.0.0.1:%d" % port

    def up(self):
        try:
            return self.request("GET", "/healthz")[0] == 200
        except OSError:
            return False

    def request(self, method, path, body=None, headers=None, timeout=60):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw[:1] in (b"{", b"[") else raw
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw[:1] in (b"{", b"[") else raw

    def json(self, path):
        st, b = self.request("GET", path)
        assert st == 200, (path, st, b)
        return b

    def sessions(self, *labels):
        q = "&".join("label=" + urllib.request.quote(l) for l in labels)
        return self.json("/api/v1/sessions?limit=1000" + ("&" + q if q else ""))["sessions"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        _live.discard(self.proc)
        self.log.close()
        check_log(self.log.name, "server")

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)
        _live.discard(self.proc)
        self.log.close()


class Agent:
    """firstpass-upload --watch ... as a process; its stderr in self.logpath."""

    def __init__(self, server_url, *args, state=None, env=None, prefix=(), preexec=None):
        """prefix: a command the agent runs under (unshare ...); preexec: run in the child
        before the exec (a setuid)."""
        self.dir = tempfile.mkdtemp(prefix="fp-agent-")
        self.state = state or os.path.join(self.dir, "watch.state")
        self.logpath = os.path.join(self.dir, "agent.log")
        self.args = [*prefix, UPLOAD, "--server", server_url, "--state", self.state, *args]
        self.preexec = preexec
        e = dict(os.environ)
        e.setdefault("FIRSTPASS_SPOOL", os.path.join(self.dir, "spool"))
        e.update(env or {})
        self.env = e
        self.start()

    def start(self):
        self.logf = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.args, stdout=self.logf, stderr=subprocess.STDOUT, env=self.env, preexec_fn=self.preexec)
        _live.add(self.proc)

    def log(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def status(self, key):
        """VmRSS / VmHWM (kB) of the agent's process now."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_s(self):
        """User + system CPU seconds of the agent so far."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, sig=signal.SIGTERM):
        """Stops it with sig; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(30)
        _live.discard(self.proc)
        self.logf.close()
        check_log(self.logpath, "agent")
        return rc


class Engine:
    """engine.py (the stand-in vLLM or SGLang server) as a process."""

    def __init__(self, mode, dir, *args, ranks=2, flush_s=2.0):
        self.port = free_port()
        self.dir = dir
        self.url = "http://127.0.0.1:%d" % self.port
        self.logpath = os.path.join(tempfile.mkdtemp(prefix="fp-engine-"), "engine.log")
        self.logf = open(self.logpath, "w")
        self.proc = subprocess.Popen([PY, "-B", os.path.join(HERE, "engine.py"), "--mode", mode, "--port", str(self.port),
                                      "--dir", dir, "--ranks", str(ranks), "--flush-seconds", str(flush_s), *args],
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        _live.add(self.proc)

    def ready(self, timeout=30):
        def ok():
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ok, timeout, 0.1, "the stand-in engine")

    def log(self):
        with open(self.logpath) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        _live.discard(self.proc)
        self.logf.close()


_TRACE = {}


def torch_trace():
    """A real torch.profiler trace recorded on the CPU (Debian's torch), as bytes of JSON (a
    bare event array: Debian's torch 1.13 has no Kineto and writes the legacy format);
    recorded once a process."""
    if "t" not in _TRACE:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
        x = torch.randn(8, 64)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(40):
                with record_function("decode_step"):
                    m(x).sum()
        fd, p = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        prof.export_chrome_trace(p)
        with open(p, "rb") as f:
            _TRACE["t"] = f.read()
        os.unlink(p)
    return _TRACE["t"]


def write_slowly(path, data, pieces=5, pause=0.6, keep_open_end=0.0):
    """Writes data to path in pieces with a pause between them, under its final name, as
    torch's export does (gzip.open(path, 'wt') while compressing)."""
    step = max(1, len(data) // pieces)
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            time.sleep(pause)
        time.sleep(keep_open_end)


def gz(data):
    return gzip.compress(data, mtime=0)


def events(doc_bytes):
    d = json.loads(doc_bytes)
    return d if isinstance(d, list) else d["traceEvents"]
