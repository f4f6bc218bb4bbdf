"""engine.py: a stand-in serving engine with vLLM's or SGLang's profiler endpoints, for the
agent's tests (no GPU, no model). What it copies from the real servers (read in their sources:
vllm/entrypoints/serve/profile/api_router.py and vllm/profiler/wrapper.py; SGLang's
srt/entrypoints/http_server.py and managers/scheduler_profiler_mixin.py):

vLLM (--mode vllm), routes there only when the profiler is set up (VLLM_TORCH_PROFILER_DIR;
here: unless --no-profiler, then FastAPI's 404 {"detail":"Not Found"}):
  POST /start_profile   no body; 200 with an empty body; a second start while one runs is
                        ignored (WorkerProfiler.start: "already active. Ignoring request."),
                        or with --refuse-busy-start refused as newer engines do ("Profiling is
                        already in progress": a RuntimeError, FastAPI's 500 "Internal Server
                        Error"); --start-delay S: the start takes S seconds (a big model's
                        workers), the profiler running once it answers
  POST /stop_profile    no body; returns only once every worker has flushed its trace; 200
                        empty; a stop with none running is ignored
  GET on either         405 {"detail":"Method Not Allowed"}
  files                 one a worker, torch's tensorboard_trace_handler naming:
                        <instance_id>-rank-<R>.<ms>.pt.trace.json.gz (--naming old, V1 up to
                        0.10) or dp0_pp0_tp<R>_dcp0_ep0_rank<R>.<ms>.pt.trace.json.gz (--naming new)
SGLang (--mode sglang):
  GET|POST /start_profile  optional JSON body ProfileReqInput: output_dir (str), start_step,
                        num_steps (int), activities (list of str), with_stack, record_shapes,
                        profile_by_stage (bool); a field of the wrong type: FastAPI's 422
                        {"detail":[{"type","loc","msg","input"}]}; 200 "Start profiling.\\n";
                        a start while one runs: the scheduler's "Profiling is already in
                        progress. Call /stop_profile first." raised as RuntimeError, which
                        FastAPI answers 500 "Internal Server Error" (text/plain)
  GET|POST /stop_profile   200 "Stop profiling. This will take some time.\\n" once the ranks
                        have flushed; none running: 500 "Internal Server Error"
  num_steps             the profile stops by itself after that many forward steps (this
                        stand-in steps at --step-hz while --traffic is on) and flushes
  files                 <profile_id>-TP-<rank>.trace.json.gz in output_dir (else
                        SGLANG_TORCH_PROFILER_DIR, here --dir), profile_id = str(time.time())

Profiler calls are served one at a time, in order (vLLM's and SGLang's engine cores run their
utility calls one after another): a stop that comes during a slow start waits for it.

The trace is real: between start and stop a thread runs a small model on the CPU under
torch.profiler (Debian's python3-torch), and stop exports it. Each rank's file is then written
under its final name in pieces over --flush-seconds, as torch's export_chrome_trace does for a
.gz path (gzip.open(path, 'wt') while it compresses), so a watcher sees half-written files.
With --trace FILE no torch is needed: that recorded trace is what every rank flushes (the
image of docker/compose.serving.yaml runs so). GET /health answers 200; GET /calls lists the
profiler calls received, GET /state whether the profiler runs (for the tests)."""
import argparse
import gzip
import json
import os
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=("vllm", "sglang"), required=True)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--bind", default="127.0.0.1")
ap.add_argument("--dir", required=True)
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--flush-seconds", type=float, default=2.0)
ap.add_argument("--naming", choices=("old", "new"), default="old")
ap.add_argument("--no-profiler", action="store_true")
ap.add_argument("--step-hz", type=float, default=20.0)
ap.add_argument("--traffic", type=int, default=1, help="0: no requests, so num_steps never comes")
ap.add_argument("--start-delay", type=float, default=0.0, help="seconds a /start_profile takes before it answers")
ap.add_argument("--refuse-busy-start", action="store_true", help="vllm: a start while profiling is a 500, not ignored")
ap.add_argument("--trace", help="a recorded trace (.json or .json.gz) to flush instead of recording one: no torch "
                                "needed (the compose example's image, docker/standin-engine.Dockerfile)")
args = ap.parse_args()

torch = None
_ready = threading.Event()


def _load_torch():
    global torch
    import torch as t
    torch = t
    _ready.set()


if not args.trace:
    threading.Thread(target=_load_torch, daemon=True).start()


def recorded():
    """The --trace file's JSON (bytes)."""
    with open(args.trace, "rb") as f:
        raw = f.read()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw

lock = threading.Lock()
core = threading.Lock()  # the engine core: one profiler call at a time
state = {"thread": None, "running": False, "profile_id": None, "out": None, "steps_left": None, "calls": []}
INSTANCE = uuid.uuid4().hex[:8]


def workload(stop, done):
    """Decode steps on the CPU under torch.profiler until stop is set, then the trace's JSON in
    state["raw"] and done set. The profiler is started and stopped on this thread: torch's
    profiler state belongs to the thread that enabled it."""
    if args.trace:  # no torch: steps are counted, the recorded trace is flushed
        while not stop.is_set():
            time.sleep(1.0 / args.step_hz)
            with lock:
                if state["steps_left"] is not None and args.traffic:
                    state["steps_left"] -= 1
                    if state["steps_left"] <= 0:
                        state["steps_left"] = None
                        threading.Thread(target=stop_and_flush, daemon=True).start()
        state["raw"] = recorded()
        done.set()
        return
    from torch.profiler import ProfilerActivity, profile, record_function
    m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    x = torch.randn(4, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        while not stop.is_set():
            with record_function("execute_model"):
                m(x).softmax(-1).sum()
            time.sleep(1.0 / args.step_hz)
            with lock:
                if state["steps_left"] is not None and args.traffic:
                    state["steps_left"] -= 1
                    if state["steps_left"] <= 0:
                        state["steps_left"] = None
                        threading.Thread(target=stop_and_flush, daemon=True).start()
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(tmp)
    with open(tmp, "rb") as f:
        state["raw"] = f.read()
    os.unlink(tmp)
    done.set()


def start(out_dir):
    if not args.trace:
        _ready.wait(60)
    stop, done = threading.Event(), threading.Event()
    th = threading.Thread(target=workload, args=(stop, done), daemon=True)
    state.update(stop=stop, done=done, thread=th, running=True, profile_id=str(time.time()), out=out_dir, raw=None)
    th.start()


def names(profile_id):
    ms = int(time.time() * 1000)
    if args.mode == "sglang":
        return ["%s-TP-%d.trace.json.gz" % (profile_id, r) for r in range(args.ranks)]
    if args.naming == "new":
        return ["dp0_pp0_tp%d_dcp0_ep0_rank%d.%d.pt.trace.json.gz" % (r, r, ms + r) for r in range(args.ranks)]
    return ["%s-rank-%d.%d.pt.trace.json.gz" % (INSTANCE, r, ms + r) for r in range(args.ranks)]


def write_slowly(path, data, seconds):
    pieces = 6
    step = max(1, len(data) // pieces + 1)
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            time.sleep(seconds / pieces)


def stop_and_flush():
    """Stops the profiler, exports its trace, writes every rank's file slowly (all ranks at
    once, as each worker flushes its own). Returns when all are written."""
    with lock:
        if not state["running"]:
            return False
        state["running"] = False
        state["steps_left"] = None
        stop, done, pid, out = state["stop"], state["done"], state["profile_id"], state["out"]
    stop.set()
    done.wait(60)
    raw = state["raw"]
    data = gzip.compress(raw)
    os.makedirs(out, exist_ok=True)
    ws = [threading.Thread(target=write_slowly, args=(os.path.join(out, n), data, args.flush_seconds)) for n in names(pid)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    return True


def validation_error(body):
    """FastAPI's 422 for ProfileReqInput: None, or the detail list."""
    types = {"output_dir": str, "start_step": int, "num_steps": int, "activities": list, "with_stack": bool,
             "record_shapes": bool, "profile_by_stage": bool, "merge_profiles": bool, "profile_prefix": str}
    detail = []
    for k, v in body.items():
        t = types.get(k)
        if t is None or v is None:
            continue
        if (t is int and (isinstance(v, bool) or not isinstance(v, int))) or (t is not int and not isinstance(v, t)):
            kind = {int: "int_parsing", bool: "bool_parsing", str: "string_type", list: "list_type"}[t]
            msg = {int: "Input should be a valid integer, unable to parse string as an integer", bool: "Input should be a valid boolean",
                   str: "Input should be a valid string", list: "Input should be a valid list"}[t]
            detail.append({"type": kind, "loc": ["body", k], "msg": msg, "input": v})
    return detail or None


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, code, body=b"", ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()  # FastAPI's compact JSON
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        if body or ctype == "application/json":
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, b"", "text/plain")
        if self.path == "/calls":
            with lock:
                return self.reply(200, state["calls"])
        if self.path == "/state":
            with lock:
                return self.reply(200, {"running": state["running"]})
        if args.mode == "sglang" and self.path in ("/start_profile", "/stop_profile"):
            return self.profile(self.path)
        if args.mode == "vllm" and self.path in ("/start_profile", "/stop_profile") and not args.no_profiler:
            return self.reply(405, {"detail": "Method Not Allowed"})
        return self.reply(404, {"detail": "Not Found"})

    def do_POST(self):
        if self.path in ("/start_profile", "/stop_profile") and not (args.mode == "vllm" and args.no_profiler):
            return self.profile(self.path)
        self.body()
        return self.reply(404, {"detail": "Not Found"})

    def profile(self, path):
        raw = self.body()
        with lock:
            state["calls"].append({"path": path, "method": self.command, "body": raw.decode("utf-8", "replace"), "t": time.time()})
        with core:
            return self.profile_call(path, raw)

    def profile_call(self, path, raw):
        if path == "/start_profile" and args.start_delay:
            time.sleep(args.start_delay)  # the start completes whether or not its client is still there
        if args.mode == "vllm":
            if path == "/start_profile":
                with lock:
                    active = state["running"]
                if active and args.refuse_busy_start:
                    return self.reply(500, "Internal Server Error", "text/plain; charset=utf-8")
                if not active:
                    start(args.dir)
                return self.reply(200, b"", "application/json")
            stop_and_flush()
            return self.reply(200, b"", "application/json")
        # SGLang
        if path == "/start_profile":
            body = {}
            if raw.strip():
                try:
                    body = json.loads(raw)
                except ValueError as e:
                    return self.reply(422, {"detail": [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error",
                                                        "input": {}, "ctx": {"error": str(e)}}]})
                if not isinstance(body, dict):
                    return self.reply(422, {"detail": [{"type": "model_attributes_type", "loc": ["body"],
                                                        "msg": "Input should be a valid dictionary or object to extract fields from",
                                                        "input": body}]})
                bad = validation_error(body)
                if bad:
                    return self.reply(422, {"detail": bad})
            with lock:
                busy = state["running"]
            if busy:  # RuntimeError("Profiling is already in progress. Call /stop_profile first.")
                return self.reply(500, "Internal Server Error", "text/plain; charset=utf-8")
            start(body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR") or args.dir)
            if body.get("num_steps"):
                with lock:
                    state["steps_left"] = int(body["num_steps"])
            return self.reply(200, "Start profiling.\n", "text/plain; charset=utf-8")
        if not stop_and_flush():  # RuntimeError("Profiling is not in progress. Call /start_profile first.")
            return self.reply(500, "Internal Server Error", "text/plain; charset=utf-8")
        return self.reply(200, "Stop profiling. This will take some time.\n", "text/plain; charset=utf-8")


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer((args.bind, args.port), H).serve_forever()
