"""handler.py: firstpass.trace_handler, torch.profiler's on_trace_ready that uploads each
trace to a firstpass server, or spools it for firstpass-upload when it cannot.

Never raises into the program's loop: each failure is one "firstpass: ..." line on stderr
(none at all with FIRSTPASS_QUIET=1, as the collector). Success prints the session's URL and
its five-line report on stdout."""
import os
import shutil
import socket
import sys
import tempfile
import time

from . import __version__, body, labels as _labels, spool as _spool
from .client import Client
from .errors import FirstpassError

MAX_NAME_BYTES = 512
# The largest reply the handler reads (the upload's {"id","url","events"} and the five-line
# report are a few KiB): a longer one is a failed upload, spooled.
MAX_REPLY_BYTES = 1 << 20


def _quiet():
    return os.environ.get("FIRSTPASS_QUIET") == "1"


def _log(msg):
    """One 'firstpass: ...' line on stderr (newlines in msg become spaces)."""
    if not _quiet():
        sys.stderr.write("firstpass: " + " ".join(str(msg).split()) + "\n")
        sys.stderr.flush()


def _float_env(name, default):
    try:
        v = float(os.environ.get(name, ""))
        return v if v > 0 else default
    except ValueError:
        return default


def _default_name():
    """$FIRSTPASS_NAME, else the script's file name (train.py), else "python"."""
    n = os.environ.get("FIRSTPASS_NAME", "").strip()
    if n:
        return n
    arg0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return arg0 if arg0 and arg0 != "-c" else "python"


def _check_name(name):
    if not isinstance(name, str) or not name.strip():
        raise ValueError("name must be a non-empty string")
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("name %r is not valid UTF-8 text" % name) from None
    if n > MAX_NAME_BYTES or "\0" in name:
        raise ValueError("name must be at most %d bytes of UTF-8 without NUL" % MAX_NAME_BYTES)
    return name


class TraceHandler:
    """The callable trace_handler returns. After each call, `last` is a dict telling what
    happened: {"outcome": "uploaded"|"spooled"|"lost"|"failed", "session_id", "url", "path",
    "reason"} (keys present where they apply)."""

    def __init__(self, server=None, name=None, labels=None, token=None, spool=None):
        self.server = server
        self.name = _check_name(name) if name is not None else None
        self.labels = _labels.normalize(labels)
        self.token = token
        self.spool = spool
        self.parts = 0
        self.last = None

    def __call__(self, prof):
        """on_trace_ready(prof): exports, uploads or spools. Returns None; never raises an
        Exception (KeyboardInterrupt and SystemExit go through)."""
        try:
            self.last = self._deliver(prof)
        except Exception as e:  # the last line of defence: the loop must go on
            self.last = {"outcome": "failed", "reason": "%s: %s" % (type(e).__name__, e)}
            _log("trace not sent (internal error): %s: %s" % (type(e).__name__, e))

    # ---- steps ---------------------------------------------------------------------------

    def _labels_now(self):
        """auto < FIRSTPASS_LABELS < labels=; at most MAX_LABELS (automatic ones dropped first)."""
        out = _labels.auto_labels()
        spec = os.environ.get("FIRSTPASS_LABELS", "")
        try:
            env = _labels.parse_spec(spec)
        except ValueError as e:
            _log("ignoring malformed FIRSTPASS_LABELS=%r (want key:value,key2:value2): %s" % (spec, e))
            env = {}
        mine = dict(env)
        mine.update(self.labels)
        auto = [(k, v) for k, v in out.items() if k not in mine]
        room = max(0, _labels.MAX_LABELS - len(mine))
        merged = dict(auto[:room])
        merged.update(mine)
        return merged

    def _document(self, prof, name, labels, part):
        """Exports prof's trace and returns (gzip'd session document, spool file name)."""
        start_ns = time.time_ns()
        tmp = tempfile.mkdtemp(prefix="firstpass-trace-")
        try:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            meta = body.meta_object(name, labels, host=labels.get("host") or socket.gethostname(),
                                    pid=os.getpid(), command=" ".join(sys.argv) or None,
                                    trace_format=body.trace_format(path),
                                    producer="firstpass-python/" + __version__)
            gz = body.session_gz(path, meta)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return gz, _spool.file_name(meta["host"], os.getpid(), start_ns, part)

    def _deliver(self, prof):
        part = self.parts
        self.parts += 1
        name = self.name or _default_name()
        labels = self._labels_now()
        try:
            gz, fname = self._document(prof, name, labels, part)
        except Exception as e:
            _log("could not export the trace, nothing sent: %s: %s" % (type(e).__name__, e))
            return {"outcome": "failed", "reason": str(e)}

        server = self.server or os.environ.get("FIRSTPASS_SERVER", "")
        token = self.token if self.token is not None else os.environ.get("FIRSTPASS_TOKEN") or None
        if server:
            try:
                # One deadline for the upload and the report's read together: the handler
                # holds the training loop at most FIRSTPASS_TIMEOUT_S on the network.
                timeout = _float_env("FIRSTPASS_TIMEOUT_S", 60.0)
                end = time.monotonic() + timeout
                c = Client(server, token, _float_env("FIRSTPASS_CONNECT_TIMEOUT_S", 5.0), timeout,
                           max_reply_bytes=MAX_REPLY_BYTES)
                # the key of the spool file it would become: a resend from the spool of an
                # upload whose reply was lost is then stored once (Idempotency-Key)
                r = c.upload(gz, name=name, labels=labels, key=_spool.key(fname))
                return self._uploaded(c, r, len(gz), end)
            except FirstpassError as e:
                why = ("server %s unreachable (%s)" % (server, e.message) if e.status is None
                       else "server answered HTTP %d%s: %s" % (e.status, " " + e.code if e.code else "", e.message))
            except ValueError as e:
                why = "bad server URL: %s" % e
        else:
            why = "FIRSTPASS_SERVER not set"
        return self._spool(gz, fname, why, server)

    def _uploaded(self, c, reply, nbytes, end):
        sid = reply["id"]  # a positive int: Client.upload checked it
        url = "%s/session.html?id=%d" % (c.server, sid)
        if not _quiet():
            sys.stdout.write("firstpass: uploaded session %d (%d bytes gzip): %s\n" % (sid, nbytes, url))
            sys.stdout.flush()
        try:
            c.timeout = end - time.monotonic()
            if c.timeout <= 0:
                raise FirstpassError(None, None, "the upload used up the FIRSTPASS_TIMEOUT_S deadline")
            report = c.report(sid, text=True)
            if not _quiet():
                sys.stdout.write(report if report.endswith("\n") else report + "\n")
                sys.stdout.flush()
        except FirstpassError as e:
            _log("session %d uploaded, but its report could not be read: %s" % (sid, e))
        return {"outcome": "uploaded", "session_id": sid, "url": url}

    def _spool(self, gz, fname, why, server):
        d = _spool.spool_dir(self.spool)
        try:
            _spool.prepare(d)  # refused unless it is the user's own directory
            path = _spool.write(d, fname, gz)
        except OSError as e:
            _log("session LOST: %s, and spooling to %s failed: %s" % (why, d, e.strerror or e))
            return {"outcome": "lost", "reason": why}
        _log("%s; session spooled to %s (send later: firstpass-upload --server %s --spool %s)"
             % (why, path, server or "URL", d))
        return {"outcome": "spooled", "path": path, "reason": why}


def trace_handler(server=None, name=None, labels=None, token=None, spool=None):
    """Returns a callable for torch.profiler.profile(on_trace_ready=...). Each time a trace
    is ready it is exported, gzip'd with its name and labels inside (body.py) and POSTed to
    server/api/v1/sessions; the session's URL and five-line report go to stdout. If the server
    is unreachable or refuses the upload, or no server is set, the document is spooled where
    the collector spools (spool.py) for `firstpass-upload --spool DIR` to send later.

    server: base URL, default $FIRSTPASS_SERVER (read at each trace). name: session name,
    default $FIRSTPASS_NAME, else the script's file name. labels: a dict or "k:v" strings; they
    win over $FIRSTPASS_LABELS ("k:v,k2:v2"), which wins over the automatic ones (host, torch,
    cuda/rocm, gpu, rank, world_size, job: labels.auto_labels). token: default
    $FIRSTPASS_TOKEN. spool: spool directory, default the collector's
    ($FIRSTPASS_SPOOL, else $XDG_STATE_HOME/firstpass/spool, else
    $HOME/.local/state/firstpass/spool, else /tmp/firstpass-spool-$UID), used only when it is
    the user's own (spool.check_dir). The network part (upload, then the report) ends within
    $FIRSTPASS_TIMEOUT_S (60 s) in all, whatever the server does; replies over 1 MiB are not
    read.

    Raises ValueError or TypeError now, before any profiling, for a bad name or bad labels;
    the returned handler itself never raises (see TraceHandler)."""
    return TraceHandler(server, name, labels, token, spool)
