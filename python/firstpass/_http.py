"""_http.py: one HTTP request to a firstpass server, with bounded waits. Standard library only.

Owns URL checks and joining, the bearer token and the timeouts; knows nothing of sessions.
http.client, not urllib: a separate connect timeout (a dead host must not hold a training loop
for the whole transfer timeout), and no proxy from the environment (the server is usually on
the local network; libcurl in the collector would use one, this does not)."""
import http.client
import urllib.parse

from . import __version__

USER_AGENT = "firstpass-python/" + __version__


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


def request(server, method, path, params=None, body=None, headers=None, token=None,
            connect_timeout=5.0, timeout=60.0):
    """Sends one request to server (checked by check_server) + path (+ "?" params).

    connect_timeout bounds the TCP (and TLS) connect, timeout every later read or write.
    Returns (status, headers as a {lower-case name: value} dict, body bytes) for any HTTP
    answer, 4xx and 5xx included. Raises OSError (refused, unreachable, timed out: socket.timeout
    is one) or http.client.HTTPException (the peer does not speak HTTP); ValueError for a bad
    server URL."""
    server = check_server(server)
    u = urllib.parse.urlsplit(server)
    q = query_string(params or [])
    target = (u.path or "") + path + ("?" + q if q else "")
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=connect_timeout)
    h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    try:
        conn.connect()
        conn.sock.settimeout(timeout)
        conn.request(method, target, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()
