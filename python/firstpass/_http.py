"""_http.py: one HTTP request to a firstpass server, within one deadline and a size cap on
the reply. Standard library only.

Owns URL checks and joining, the bearer token, the deadline and the reply caps; knows nothing
of sessions. http.client, not urllib: a separate connect timeout (a dead host must not hold a
training loop for the whole request's time), and no proxy from the environment (the server is
usually on the local network; libcurl in the collector would use one, this does not).

Why a deadline and not a socket timeout: a socket timeout bounds each read, so a peer that
sends one byte every few seconds never trips it (issue 43: a handler held 100 s by a peer
trickling one byte every 3 s). Here every socket operation gets what is left of one deadline
taken when the request starts, the name lookup included (it runs in a helper thread, the one
step a socket timeout cannot bound)."""
import http.client
import io
import socket
import threading
import time
import urllib.parse

from . import __version__

USER_AGENT = "firstpass-python/" + __version__

# The largest reply body read whole: a 2xx over it is an error (ReplyTooLarge), not read on.
MAX_REPLY_BYTES = 64 << 20
# The most of an error reply (a status outside 2xx) that is read: the message is in its first
# bytes, the rest is left unread. A 400 MB error page cost the training process 802 MB.
MAX_ERROR_REPLY_BYTES = 64 << 10

_CHUNK = 64 << 10


class ReplyTooLarge(Exception):
    """A 2xx reply longer than the cap; status and limit (bytes) say which."""

    def __init__(self, status, limit):
        self.status = status
        self.limit = limit
        super().__init__("the reply is larger than %d bytes; not read" % limit)


def check_server(server):
    """Returns server without trailing '/' after checking it is an http(s) URL with a host.
    Raises ValueError naming what is wrong."""
    if not isinstance(server, str) or not server.strip():
        raise ValueError("no server URL")
    server = server.strip().rstrip("/")
    u = urllib.parse.urlsplit(server)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("server %r is not an http:// or https:// URL" % server)
    if u.query or u.fragment:
        raise ValueError("server %r has a query or fragment" % server)
    return server


def query_string(params):
    """params: [(key, value)] (None values skipped) -> "k=v&..." with %20 for spaces."""
    pairs = [(k, str(v)) for k, v in params if v is not None]
    return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


class _Deadline:
    """The end of one request, on the monotonic clock."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self):
        """Seconds left (> 0). Raises socket.timeout once the deadline has passed."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out: no complete reply within %g s (the request's deadline)" % self.seconds)
        return left


def _resolve(host, port, deadline, connect_timeout):
    """getaddrinfo in a daemon thread, waited for at most min(connect_timeout, what is left):
    a slow resolver cannot be interrupted, only left behind (it ends on its own). Returns the
    address list. Raises socket.timeout, or getaddrinfo's socket.gaierror."""
    box = {}

    def run():
        try:
            box["r"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except Exception as e:  # handed to the caller's thread
            box["e"] = e

    t = threading.Thread(target=run, name="firstpass-resolve", daemon=True)
    t.start()
    t.join(min(connect_timeout, deadline.left()))
    if t.is_alive():
        raise socket.timeout("timed out: looking up %s took over %g s" % (host, min(connect_timeout, deadline.seconds)))
    if "e" in box:
        raise box["e"]
    return box["r"]


def _connector(deadline, connect_timeout):
    """A replacement for socket.create_connection (http.client's _create_connection): the name
    lookup and each connect within min(connect_timeout, what is left of the deadline)."""
    def create_connection(address, timeout=None, source_address=None):
        host, port = address
        err = None
        for family, kind, proto, _, sa in _resolve(host, port, deadline, connect_timeout):
            s = None
            try:
                s = socket.socket(family, kind, proto)
                s.settimeout(min(connect_timeout, deadline.left()))
                if source_address:
                    s.bind(source_address)
                s.connect(sa)
                return s  # keeps the connect timeout: an https handshake runs under it
            except OSError as e:
                err = e
                if s is not None:
                    s.close()
        raise err if err is not None else OSError("no address for %s" % host)
    return create_connection


class _DeadlineReader(io.RawIOBase):
    """The reply side of the socket: each recv gets what is left of the deadline."""

    def __init__(self, owner):
        super().__init__()
        self._owner = owner

    def readable(self):
        return True

    def readinto(self, b):
        sock = self._owner._sock
        sock.settimeout(self._owner._deadline.left())
        return sock.recv_into(b)

    def close(self):
        if not self.closed:
            self._owner._readers -= 1
            self._owner._maybe_close()
        super().close()


class _DeadlineSocket:
    """Wraps the connected socket for http.client, which calls sendall, makefile("rb"),
    setsockopt and close on it: sendall and every read are bounded by the deadline. As with
    socket.makefile, close() waits for the readers: http.client closes the connection before
    the reply of a `Connection: close` answer has been read."""

    def __init__(self, sock, deadline):
        self._sock, self._deadline = sock, deadline
        self._readers, self._closing = 0, False

    def sendall(self, data):
        self._sock.settimeout(self._deadline.left())  # Python >= 3.5: the whole sendall
        self._sock.sendall(data)

    def makefile(self, mode="rb", *args, **kw):
        if mode != "rb":
            raise ValueError("only binary reads are wrapped")
        self._readers += 1
        return io.BufferedReader(_DeadlineReader(self), _CHUNK)

    def close(self):
        self._closing = True
        self._maybe_close()

    def _maybe_close(self):
        if self._closing and self._readers == 0:
            self._sock.close()

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _read_body(r, limit, whole):
    """Reads at most limit bytes of r's body. whole: raise ReplyTooLarge when the body is
    longer (a declared Content-Length is checked before any byte is read); else stop at limit
    and return the head. Returns bytes."""
    clen = r.getheader("content-length")
    try:
        declared = int(clen) if clen is not None else None
    except ValueError:
        declared = None
    if whole and declared is not None and declared > limit:
        raise ReplyTooLarge(r.status, limit)
    buf = bytearray()
    while len(buf) <= limit:
        chunk = r.read(min(_CHUNK, limit + 1 - len(buf)))
        if not chunk:
            return bytes(buf)
        buf += chunk
    if whole:
        raise ReplyTooLarge(r.status, limit)
    return bytes(buf[:limit])


def request(server, method, path, params=None, body=None, headers=None, token=None,
            connect_timeout=5.0, timeout=60.0, max_reply=MAX_REPLY_BYTES,
            max_error_reply=MAX_ERROR_REPLY_BYTES):
    """Sends one request to server (checked by check_server) + path (+ "?" params).

    timeout: seconds for the whole request, from the name lookup to the reply's last byte;
    connect_timeout: at most this of it for the lookup and the TCP (and TLS) connect.
    max_reply: the most bytes of a 2xx reply body; max_error_reply: the most bytes of any
    other reply that are read (the rest is dropped with the connection).

    Returns (status, headers as a {lower-case name: value} dict, body bytes) for any HTTP
    answer, 4xx and 5xx included. Raises OSError (refused, unreachable, the deadline passed:
    socket.timeout is one), http.client.HTTPException (the peer does not speak HTTP),
    ReplyTooLarge (a 2xx over max_reply); ValueError for a bad server URL."""
    server = check_server(server)
    deadline = _Deadline(timeout)
    u = urllib.parse.urlsplit(server)
    q = query_string(params or [])
    target = (u.path or "") + path + ("?" + q if q else "")
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=min(connect_timeout, timeout))
    conn._create_connection = _connector(deadline, connect_timeout)
    h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    try:
        conn.connect()
        conn.sock = _DeadlineSocket(conn.sock, deadline)
        conn.request(method, target, body=body, headers=h)
        r = conn.getresponse()
        ok = 200 <= r.status < 300
        try:
            data = _read_body(r, max_reply if ok else max_error_reply, ok)
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            r.close()
    finally:
        conn.close()
