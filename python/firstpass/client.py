"""client.py: firstpass.Client, the REST API (docs/api.md) as Python calls.

Replies are the server's JSON as plain dicts and lists; the table calls take as_frame=True for
a pandas DataFrame when pandas is importable (it is never required). Every failure raises
FirstpassError (errors.py). Owns no state but the server URL, the token and the timeouts."""
import json
import os
import urllib.parse

from . import _http, labels as _labels
from .errors import FirstpassError


def _frame(rows):
    """rows (a list of dicts) as a pandas DataFrame, nested objects flattened into dotted
    columns (labels.model, base.calls). Raises ImportError when pandas is missing."""
    try:
        import pandas
    except ImportError:
        raise ImportError("as_frame=True needs pandas (apt-get install python3-pandas, or pip install pandas)") from None
    return pandas.json_normalize(rows) if rows else pandas.DataFrame()


def _label_params(labels):
    return _labels.to_query(_labels.normalize(labels))


class Client:
    """A firstpass server's REST API.

    server: base URL (default $FIRSTPASS_SERVER); token: bearer token (default
    $FIRSTPASS_TOKEN), sent with every request; timeout: seconds for each whole request (name
    lookup, connect, sending, the reply's last byte), connect_timeout: at most this of it for
    the lookup and connect; max_reply_bytes: the largest reply body read (a longer one is a
    FirstpassError; error replies are read up to 64 KiB). Raises ValueError when there is no
    usable URL."""

    def __init__(self, server=None, token=None, connect_timeout=5.0, timeout=60.0,
                 max_reply_bytes=_http.MAX_REPLY_BYTES):
        self.server = _http.check_server(server or os.environ.get("FIRSTPASS_SERVER", ""))
        self.token = token if token is not None else os.environ.get("FIRSTPASS_TOKEN") or None
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes

    def __repr__(self):
        return "firstpass.Client(%r)" % self.server

    # ---- the transport -------------------------------------------------------------------

    def request(self, method, path, params=None, body=None, headers=None, expect=(200,)):
        """One request; path starts with /api/v1/. Returns the reply: parsed JSON when the
        server says application/json, else text (str). Raises FirstpassError when the status
        is not in expect, or when no answer came (status None)."""
        try:
            status, h, data = _http.request(self.server, method, path, params, body, headers, self.token,
                                            self.connect_timeout, self.timeout, self.max_reply_bytes)
        except _http.ReplyTooLarge as e:
            raise FirstpassError(e.status, None, str(e), method, path) from None
        except (OSError, ValueError) as e:  # http.client.HTTPException is neither: below
            raise FirstpassError(None, None, "%s: %s" % (self.server, str(e) or type(e).__name__), method, path) from None
        except Exception as e:
            raise FirstpassError(None, None, "%s: %s: %s" % (self.server, type(e).__name__, e), method, path) from None
        if status not in expect:
            raise FirstpassError.from_reply(status, data, method, path)
        if h.get("content-type", "").startswith("application/json"):
            try:
                return json.loads(data.decode("utf-8"))
            except ValueError as e:
                raise FirstpassError(status, None, "the reply is not JSON: %s" % e, method, path) from None
        return data.decode("utf-8", "replace")

    def get(self, path, params=None, text=False):
        """GET path (params: a dict or [(key, value)]); text=True asks for the text form
        (?format=text). Returns parsed JSON (dict) or str. Raises FirstpassError."""
        p = list(params.items()) if isinstance(params, dict) else list(params or [])
        if text:
            p.append(("format", "text"))
        return self.request("GET", path, p)

    # ---- sessions ------------------------------------------------------------------------

    def upload(self, trace, name=None, labels=None, key=None):
        """Uploads a trace: bytes, or a path to a Kineto / Chrome / native session JSON file or
        an nsys SQLite export, plain or gzip (gzip is sniffed and sent as
        Content-Encoding: gzip). key: sent as Idempotency-Key ([A-Za-z0-9._-], at most 64), so
        that a resend of the same document after a lost reply is stored once: a server that had
        the key stored answers 200 with the stored session's reply (returned as a 201's), one
        whose upload of the key is in flight 409 (raised). Returns the reply, {"id", "url",
        "events"}. Raises
        FirstpassError (a refused upload: 400, 401, 413, 422, ...; a 201 whose reply has no
        session id, which is no confirmation: a proxy's page, `{}`), ValueError for bad labels,
        OSError when the file cannot be read."""
        if not isinstance(trace, (bytes, bytearray, memoryview)):
            with open(trace, "rb") as f:
                trace = f.read()
        trace = bytes(trace)
        headers = {"Content-Type": "application/json"}
        if trace[:2] == b"\x1f\x8b":
            headers["Content-Encoding"] = "gzip"
        if key:
            headers["Idempotency-Key"] = key
        params = ([("name", name)] if name else []) + _label_params(labels)
        r = self.request("POST", "/api/v1/sessions", params, trace, headers, expect=(201, 200) if key else (201,))
        # Only firstpass's own reply confirms the upload: a 201 from something in between (an
        # HTML page, `{}`) would otherwise count as delivered and the handler drop the trace.
        sid = r.get("id") if isinstance(r, dict) else None
        if not isinstance(sid, int) or isinstance(sid, bool) or sid <= 0:
            head = r if isinstance(r, str) else json.dumps(r)
            raise FirstpassError(201, None, "no session id in the reply (not a firstpass server's answer): %s"
                                 % (" ".join(head[:200].split()) or "(empty reply)"), "POST", "/api/v1/sessions")
        return r

    def iter_sessions(self, labels=None, name=None, source=None, since=None, until=None, page_size=100):
        """Yields session summaries (dicts), newest first, every page: it follows the server's
        `next` cursor. labels: every one must match (a dict or "k:v" strings); since/until:
        Unix seconds. It stops, raising FirstpassError, when a page repeats (a cursor seen
        before: a proxy that drops the query string answers the first page for ever, issue 50)
        instead of following it for ever. Raises FirstpassError, ValueError for bad labels."""
        params = _label_params(labels) + [("name", name), ("source", source), ("since", since),
                                          ("until", until), ("limit", page_size)]
        cursor, seen = None, set()
        while True:
            page = self.request("GET", "/api/v1/sessions", params + [("next", cursor)])
            cursor = page.get("next")
            if cursor and cursor in seen:  # before yielding: the repeated page's sessions were yielded once
                raise FirstpassError(200, None, "the server answered cursor %r twice: is a proxy dropping the query "
                                     "string? stopped instead of reading the same page again" % str(cursor)[:80],
                                     "GET", "/api/v1/sessions")
            for s in page.get("sessions", []):
                yield s
            if not cursor:
                return
            seen.add(cursor)

    def sessions(self, labels=None, name=None, source=None, since=None, until=None, limit=None,
                 page_size=100, as_frame=False):
        """Returns at most limit (None: all) session summaries, newest first, as a list of
        dicts (or a DataFrame), filtered as iter_sessions. Raises FirstpassError."""
        out = []
        if limit is None or limit > 0:
            ps = page_size if limit is None else min(page_size, limit)
            for s in self.iter_sessions(labels, name, source, since, until, ps):
                out.append(s)
                if limit is not None and len(out) >= limit:
                    break
        return _frame(out) if as_frame else out

    def session(self, session_id):
        """Returns one session's summary with devices, counts and trace (dict). Raises
        FirstpassError (404 for an unknown id)."""
        return self.request("GET", "/api/v1/sessions/%d" % int(session_id))

    def delete(self, session_id):
        """Deletes a session (204). Returns None. Raises FirstpassError."""
        self.request("DELETE", "/api/v1/sessions/%d" % int(session_id), expect=(204,))

    def operators(self, session_id, sort=None, limit=None, kind=None, group_by=None, as_frame=False):
        """Returns the operator table's rows (list of dicts with key_averages() names: calls,
        cpu_time_total_us, self_cpu_time_total_us, ...; or a DataFrame). sort: a column
        (default cuda_time_total); limit 1..10000 (server default 100); kind: e.g. "cpu_op";
        group_by="input_shape". Raises FirstpassError."""
        r = self.request("GET", "/api/v1/sessions/%d/operators" % int(session_id),
                         [("sort", sort), ("limit", limit), ("kind", kind), ("group_by", group_by)])
        return _frame(r["operators"]) if as_frame else r["operators"]

    def kernels(self, session_id, sort=None, limit=None, as_frame=False):
        """Returns the kernel table's rows (list of dicts, or a DataFrame); sort: total_us,
        calls or mean_us. Raises FirstpassError."""
        r = self.request("GET", "/api/v1/sessions/%d/kernels" % int(session_id), [("sort", sort), ("limit", limit)])
        return _frame(r["kernels"]) if as_frame else r["kernels"]

    def phases(self, session_id, as_frame=False):
        """Returns the phases (user annotations) as a list of dicts, or a DataFrame. Raises
        FirstpassError."""
        r = self.request("GET", "/api/v1/sessions/%d/phases" % int(session_id))
        return _frame(r["phases"]) if as_frame else r["phases"]

    def report(self, session_id, text=False):
        """Returns the report: a dict (lines, draft, edited, smells), or with text=True its
        five lines as one str. Raises FirstpassError."""
        return self.get("/api/v1/sessions/%d/report" % int(session_id), text=text)

    def suspects(self, session_id):
        """Returns GET /api/v1/sessions/{id}/suspects as a dict. Raises FirstpassError (404
        "no route" from servers without that route)."""
        return self.request("GET", "/api/v1/sessions/%d/suspects" % int(session_id))

    # ---- across sessions -----------------------------------------------------------------

    def compare(self, base, head, as_frame=False):
        """Returns the comparison of two sessions (dict: base, head, operators, phases); with
        as_frame the operator rows as a DataFrame. Raises FirstpassError."""
        r = self.request("GET", "/api/v1/compare", [("base", int(base)), ("head", int(head))])
        return _frame(r["operators"]) if as_frame else r

    def regressions(self, session_id, baseline=None, rel=None, abs_us=None, abs_calls=None,
                    abs_share=None, as_frame=False):
        """Returns the regression check of a session against a baseline (dict: regressed,
        items, ...; without baseline the newest one whose labels match); with as_frame the
        items as a DataFrame. Raises FirstpassError (404: no such or no matching baseline)."""
        r = self.request("GET", "/api/v1/sessions/%d/regressions" % int(session_id),
                         [("baseline", baseline), ("rel", rel), ("abs_us", abs_us),
                          ("abs_calls", abs_calls), ("abs_share", abs_share)])
        return _frame(r["items"]) if as_frame else r

    def jobs(self, as_frame=False):
        """Returns GET /api/v1/jobs' "jobs" list (sessions sharing a `job` label), or a
        DataFrame. Raises FirstpassError (404 "no route" from servers without jobs)."""
        r = self.request("GET", "/api/v1/jobs")
        return _frame(r["jobs"]) if as_frame else r["jobs"]

    def job(self, job):
        """Returns GET /api/v1/jobs/{job} (one row per rank, the straggler, ...) as a dict.
        Raises FirstpassError."""
        return self.request("GET", "/api/v1/jobs/" + urllib.parse.quote(str(job), safe=""))
