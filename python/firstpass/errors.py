"""errors.py: the one exception type the firstpass client raises."""


class FirstpassError(Exception):
    """A request to a firstpass server failed.

    Attributes:
        status:  the HTTP status (int), or None when no answer came (unreachable, timeout,
                 a reply that is not HTTP).
        code:    the server's error code, e.g. "not_found", "unauthorized" (its
                 {"error":{"code","message"}} body), or None without one.
        message: the server's message, else what went wrong on the way (str).
        method, path: the request that failed (path without the server part).
    """

    def __init__(self, status, code, message, method="", path=""):
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path
        super().__init__(str(self))

    def __str__(self):
        where = ("%s %s: " % (self.method, self.path)) if self.method else ""
        if self.status is None:
            return where + self.message
        return "%sHTTP %d%s: %s" % (where, self.status, " " + self.code if self.code else "", self.message)

    @classmethod
    def from_reply(cls, status, body, method="", path=""):
        """Builds the error from a non-2xx reply: the server's {"error":{"code","message"}}
        when the body holds one, else the body's first 200 characters."""
        import json
        code, message = None, None
        try:
            err = json.loads(body.decode("utf-8")).get("error")
            if isinstance(err, dict):
                code = err.get("code") if isinstance(err.get("code"), str) else None
                message = err.get("message") if isinstance(err.get("message"), str) else None
        except (ValueError, AttributeError):
            pass
        if message is None:
            message = body[:200].decode("utf-8", "replace").strip() or "(empty reply)"
        return cls(status, code, message, method, path)
