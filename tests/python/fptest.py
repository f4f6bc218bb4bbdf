"""fptest.py: what the tests of the Python package share: import paths (python/ and
tests/integration/fpserver.py), the binaries under test, a real torch.profiler run, and
capture of what the handler prints."""
import contextlib
import gzip
import importlib.util
import io
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PKG_SRC = os.path.join(ROOT, "python")
if PKG_SRC not in sys.path:
    sys.path.insert(0, PKG_SRC)  # the package as it is in the tree (test_pip.py installs it)


def _load_fpserver():
    """tests/integration/fpserver.py, loaded by path: that folder on sys.path would shadow
    test modules here with its own of the same name."""
    if "fpserver" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "fpserver", os.path.join(ROOT, "tests", "integration", "fpserver.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["fpserver"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["fpserver"]


_fps = _load_fpserver()
TRACES, Server, free_port = _fps.TRACES, _fps.Server, _fps.free_port

UPLOAD = os.environ.get("FIRSTPASS_UPLOAD_BIN", os.path.join(ROOT, "build", "firstpass-upload"))
REPORT_KEYS = ("Workload:", "Hardware:", "Top CUDA time:", "Top CPU / orchestration cost:", "Next experiment:")


def profile_run(handler, steps=6, active=3):
    """A real torch.profiler run on CPU: a small MLP, a schedule of wait 1, warmup 1, `active`
    steps (one cycle), record_function ranges inside each step. handler is on_trace_ready.
    Returns the profiler (key_averages() is the traced cycle's)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    x = torch.randn(16, 64)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                 on_trace_ready=handler) as prof:
        for _ in range(steps):
            with record_function("forward"):
                y = model(x)
            with record_function("post"):
                torch.tanh(y).sum()
            prof.step()
    return prof


@contextlib.contextmanager
def captured():
    """Captures sys.stdout and sys.stderr: yields (out, err), two StringIO."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def read_doc(path):
    """The JSON document in a (gzip'd or plain) file."""
    with open(path, "rb") as f:
        raw = f.read()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def dead_server():
    """http://127.0.0.1:PORT where nothing listens (connection refused)."""
    return "http://127.0.0.1:%d" % free_port()


class SilentServer:
    """A socket that listens but never answers: connects succeed, replies never come."""
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


class StubProfiler:
    """Stands for torch.profiler.profile in the handler: export_chrome_trace writes `data`
    (bytes) or raises `error`."""
    def __init__(self, data=None, error=None):
        self.data, self.error = data, error

    def export_chrome_trace(self, path):
        if self.error:
            raise self.error
        with open(path, "wb") as f:
            f.write(self.data)


def fold_profiler_steps(rows):
    """torch's key_averages() names every "ProfilerStep#N" range "ProfilerStep*" (one row:
    torch/autograd/profiler_util.py _rewrite_name with_wildcard); the trace, and so the
    server, keeps one row per step. Returns rows with the step rows summed into one
    "ProfilerStep*" row, as torch does (rows already holding "ProfilerStep*" are unchanged)."""
    out, step = [], None
    for r in rows:
        if r["name"].startswith("ProfilerStep#"):
            if step is None:
                step = dict(r, name="ProfilerStep*", calls=0, cpu_time_total_us=0.0, self_cpu_time_total_us=0.0)
                out.append(step)
            for k in ("calls", "cpu_time_total_us", "self_cpu_time_total_us"):
                step[k] += r[k]
        else:
            out.append(r)
    return out


def assert_matches_key_averages(tc, prof, rows):
    """The stored operator table equals prof.key_averages(): calls exactly, CPU total and self
    CPU within 0.5 us (torch 1.13's legacy profiler keeps integer us, in the trace and in
    key_averages alike; tests/integration/test_oracle.py), after fold_profiler_steps. Returns
    the number of operators compared."""
    rows = fold_profiler_steps(rows)
    got = {r["name"]: r for r in rows}
    n = 0
    for evt in prof.key_averages():
        with tc.subTest(op=evt.key):
            tc.assertIn(evt.key, got)
            g = got[evt.key]
            tc.assertEqual(g["calls"], evt.count)
            tc.assertLessEqual(abs(g["cpu_time_total_us"] - evt.cpu_time_total), 0.5, (g, evt.cpu_time_total))
            tc.assertLessEqual(abs(g["self_cpu_time_total_us"] - evt.self_cpu_time_total), 0.5,
                               (g, evt.self_cpu_time_total))
            n += 1
    extra = sorted(set(got) - {e.key for e in prof.key_averages()})
    tc.assertEqual([x for x in extra if got[x]["kind"] != "gpu_user_annotation"], [])
    return n


class HostilePeer:
    """An HTTP peer on loopback that reads each request whole, then answers with the next of
    `replies` (the last one repeats). A reply is a dict:
        status (201), body (bytes; b'{"id":1,...}' by default), ctype ("application/json"),
        size: send this many filler bytes as the body instead (streamed, never held),
        length: False to send no Content-Length (the body ends with the connection),
        trickle: seconds between single bytes of the whole reply, head included,
        give_up: stop trickling (and close) after this many seconds.
    Records each request (method, path, headers, body) in `requests` and counts the bytes it
    managed to write in `sent`: a client that stops reading leaves it far below the body."""

    def __init__(self, *replies):
        import threading
        self.replies = list(replies) or [{}]
        self.requests, self.sent, self.errors = [], 0, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.stopping = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import threading
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _read_request(self, c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            chunk = c.recv(65536)
            if not chunk:
                return None
            body += chunk
        return method, path, headers, body

    def _one(self, c):
        import time
        try:
            req = self._read_request(c)
            if req is None:
                return
            with self.lock:
                self.requests.append(req)
                r = self.replies[min(len(self.requests), len(self.replies)) - 1]
            status = r.get("status", 201)
            body = r.get("body", b'{"id":1,"url":"/api/v1/sessions/1","events":1}')
            size = r.get("size", len(body))
            head = "HTTP/1.1 %d X\r\nContent-Type: %s\r\nConnection: close\r\n" % (
                status, r.get("ctype", "application/json"))
            if r.get("length", True):
                head += "Content-Length: %d\r\n" % size
            head = (head + "\r\n").encode()
            if r.get("trickle"):
                end = time.monotonic() + r.get("give_up", 30)
                for b in head + body:
                    if time.monotonic() > end or self.stopping:
                        return
                    c.sendall(bytes([b]))
                    self.sent += 1
                    time.sleep(r["trickle"])
                return
            c.sendall(head)
            if "size" in r:
                block = b"x" * 65536
                left = size
                while left > 0 and not self.stopping:
                    n = c.send(block[:min(left, len(block))])
                    self.sent += n
                    left -= n
            else:
                c.sendall(body)
                self.sent += len(body)
        except OSError as e:
            self.errors.append(e)  # the client hung up: expected when it stops reading
        finally:
            c.close()

    def close(self):
        self.stopping = True
        self.sock.close()
