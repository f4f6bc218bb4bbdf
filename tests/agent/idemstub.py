"""idemstub.py: a stand-in firstpass server that implements the upload side of the
Idempotency-Key contract (issue 50 item 3), for the agent's exactly-once tests, with an
analysis as slow as a big trace's (the race the issue found needs 5-8 s of it):

  POST /api/v1/sessions[?name=&label=k:v...]  the body is read whole, then "analysed" for
      analysis_s seconds and stored even when the client has gone meanwhile (what the real
      server does: it commits an upload whose client left after the body). With
      Idempotency-Key: K, a key stored already is answered 200 with the stored session's reply
      and stores nothing; a key whose upload is in flight is answered 409 `conflict` with
      Retry-After: 1; otherwise 201 {"id","url","events"} once stored.
  GET /api/v1/sessions?label=file_id:X&limit=N  the stored sessions with that label (what the
      agent's fallback check asks: an upload still being analysed is not listed).
  GET /healthz  200.

Everything else is 404. It is a stub of the contract, not of the server: what the real server
does is in tests/integration (the hostile-server branch owns it)."""
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class IdemStub:
    def __init__(self, analysis_s=6.0, analysis_of=None):
        self.analysis_s = analysis_s
        self.analysis_of = analysis_of or {}  # Idempotency-Key -> its own analysis seconds
        self.lock = threading.Lock()
        self.sessions = []       # {"id", "labels", "key", "bytes"}
        self.in_flight = set()   # keys
        self.posts = []          # (key or None, status) of every POST answered
        self.received = 0        # POST bodies read whole
        stub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, code, doc, extra=None):
                body = json.dumps(doc).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (extra or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client left: what was stored stays stored

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                if u.path == "/healthz":
                    return self.reply(200, {"status": "ok"})
                if u.path != "/api/v1/sessions":
                    return self.reply(404, {"error": {"code": "not_found", "message": "no route"}})
                q = urllib.parse.parse_qs(u.query)
                want = q.get("label", [])
                with stub.lock:
                    got = [s for s in stub.sessions if all(w in s["labels"] for w in want)]
                return self.reply(200, {"sessions": [{"id": s["id"], "labels": dict(x.split(":", 1) for x in s["labels"])} for s in got]})

            def do_POST(self):
                u = urllib.parse.urlsplit(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if u.path != "/api/v1/sessions":
                    return self.reply(404, {"error": {"code": "not_found", "message": "no route"}})
                key = self.headers.get("Idempotency-Key")
                labels = urllib.parse.parse_qs(u.query).get("label", [])
                with stub.lock:
                    stub.received += 1
                    stored = next((s for s in stub.sessions if key and s["key"] == key), None)
                    if stored:
                        stub.posts.append((key, 200))
                        return self.reply(200, stub.doc(stored))
                    if key and key in stub.in_flight:
                        stub.posts.append((key, 409))
                        return self.reply(409, {"error": {"code": "conflict", "message": "an upload with this Idempotency-Key is in flight"}},
                                          {"Retry-After": "1"})
                    if key:
                        stub.in_flight.add(key)
                time.sleep(stub.analysis_of.get(key, stub.analysis_s))  # the analysis: the session is stored whether or not the client waited
                with stub.lock:
                    s = {"id": len(stub.sessions) + 1, "labels": labels, "key": key, "bytes": len(body)}
                    stub.sessions.append(s)
                    stub.in_flight.discard(key)
                    stub.posts.append((key, 201))
                return self.reply(201, stub.doc(s))

        ThreadingHTTPServer.daemon_threads = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def doc(s):
        return {"id": s["id"], "url": "/session.html?id=%d" % s["id"], "events": 1}

    def per_label(self, key):
        """{value of label key: sessions stored with it}."""
        out = {}
        with self.lock:
            for s in self.sessions:
                for l in s["labels"]:
                    if l.startswith(key + ":"):
                        out[l[len(key) + 1:]] = out.get(l[len(key) + 1:], 0) + 1
        return out

    def per_key(self):
        """{Idempotency-Key (None: none): sessions stored with it}."""
        out = {}
        with self.lock:
            for s in self.sessions:
                out[s["key"]] = out.get(s["key"], 0) + 1
        return out

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
