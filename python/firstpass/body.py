"""body.py: the session document this package sends and spools: the Chrome trace that
torch.profiler exported, gzip'd, with a "firstpass" object (docs/contract.md, "Native session
JSON") spliced in, so the document carries its own name and labels.

Why the splice: a spooled file is sent later by firstpass-upload without a query string, so the
name and labels must be in the body; the server reads them from firstpass.name and
firstpass.labels (api/session.h). The trace is not parsed: a Kineto trace (an object) gets the
key after its '{'; a legacy autograd trace (torch 1.13 without Kineto: a bare array) becomes
{"firstpass":{...},"traceEvents":[...]}. Both read back as the same events; the server's
`source` is then "firstpass"."""
import gzip
import io
import json

FORMAT = "firstpass-session"
VERSION = 1
_WS = b" \t\r\n"
_CHUNK = 1 << 20


def meta_object(name, labels, host=None, pid=None, command=None, trace_format=None, producer=None):
    """The "firstpass" object: format, version, name, labels, and host, pid, command when
    known; trace_format ("kineto" or "legacy") and producer are extra keys the server keeps
    in the stored metadata and otherwise ignores. Returns a dict."""
    m = {"format": FORMAT, "version": VERSION, "name": name, "labels": dict(labels)}
    for k, v in (("host", host), ("pid", pid), ("command", command),
                 ("trace_format", trace_format), ("producer", producer)):
        if v is not None:
            m[k] = v
    return m


def _first_byte(f, buf):
    """Reads from f until buf holds a byte that is not JSON whitespace; returns (buf without the
    leading whitespace, that byte or b"" at the end of the file)."""
    while True:
        buf = buf.lstrip(_WS)
        if buf:
            return buf, buf[:1]
        more = f.read(_CHUNK)
        if not more:
            return b"", b""
        buf = more


def trace_format(path):
    """"kineto" when the file at path is a JSON object, "legacy" when a bare array. Raises
    ValueError for anything else (an empty file included), OSError when it cannot be read."""
    with open(path, "rb") as f:
        _, c = _first_byte(f, b"")
    if c == b"{":
        return "kineto"
    if c == b"[":
        return "legacy"
    raise ValueError("%s is not a Chrome trace (starts with %r)" % (path, c))


def session_gz(path, meta, level=6):
    """Returns the gzip'd session document (bytes) for the Chrome trace at path with meta (a
    dict, see meta_object) as its "firstpass" key. The file is streamed, never held whole.
    Raises ValueError when the file is not a JSON object or array, OSError when unreadable."""
    m = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    out = io.BytesIO()
    with open(path, "rb") as f, gzip.GzipFile(fileobj=out, mode="wb", compresslevel=level, mtime=0) as z:
        buf, c = _first_byte(f, b"")
        if c == b"[":
            z.write(b'{"firstpass":' + m + b',"traceEvents":')
            z.write(buf)
            _copy(f, z)
            z.write(b"}")
        elif c == b"{":
            rest, nxt = _first_byte(f, buf[1:])
            z.write(b'{"firstpass":' + m + (b"" if nxt == b"}" else b","))
            z.write(rest)
            _copy(f, z)
        else:
            raise ValueError("%s is not a Chrome trace (starts with %r)" % (path, c))
    return out.getvalue()


def _copy(src, dst):
    while True:
        b = src.read(_CHUNK)
        if not b:
            return
        dst.write(b)
