/* http.c: libmicrohttpd plumbing: daemon, connection state, body streaming, static files.
 *
 * Owns the MHD daemon and the per-connection `struct conn` hung off MHD's con_cls.
 * Routing and handlers are routes.c's; an upload's body is fed chunk by chunk through the
 * importer's door (ingest/import.h), so no body is ever held whole. Transport only: no
 * SQL, no parsing of traces. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/capture.h"
#include "http/deadline.h"
#include "http/devfile.h"
#include "http/form.h"
#include "http/metrics.h"
#include "http/reply.h"
#include "http/routes.h"
#include "ingest/import.h"
#include "lib/err.h"
#include "store/idem.h"
#include "lib/log.h"
#include "lib/logfmt.h"

#define SMALL_BODY_MAX (256u << 10) /* PUT bodies */
#define UPLOAD_LABELS_MAX 64        /* ?label= of one upload */
#define HTTP_MAX_PARAMS 1000        /* query parameters of one request */
#define HTTP_CSP                                                                                    \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* Per-connection state, created on the first callback of a request. */
struct conn {
    int upload;                   /* POST /api/v1/sessions */
    int rejected;                 /* an error reply is decided; drain the body */
    http_reply early;             /* that reply */
    importer *im;                 /* the upload's import (import.h), NULL when none */
    form *form;                   /* a multipart/form-data upload's reader (form.h), else NULL */
    fp_label *labels;             /* the upload's ?label=, borrowed by im */
    size_t nlabels;
    char *body;                   /* small bodies */
    size_t body_len;
    struct timespec t0;
    unsigned vary;                /* HTTP_VARY_*: request headers the reply depends on */
    const char *user;             /* the token's NAME (auth.h), NULL when none was needed */
    int replied;                  /* the reply went out on the first callback */
    int started;                  /* on_request's first callback ran */
    unsigned long params;         /* on_uri: query parameters when over HTTP_MAX_PARAMS, else 0 */
};

static app *g_app;                 /* set once in http_serve */
static pthread_mutex_t g_req_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_requests;        /* requests between first callback and completion, g_req_lock */
static atomic_int g_stopping;      /* SIGTERM seen: replies say Connection: close */

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max) {
    http_reply *r = cls;
    long n = r->stream_read(r->stream_cls, pos, buf, max);
    if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    return n;
}
static void stream_free_cb(void *cls) {
    http_reply *r = cls;
    if (r->stream_free) r->stream_free(r->stream_cls);
    free(r);
}

static ssize_t head_cb(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)cls; (void)pos; (void)buf; (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void add_vary(struct MHD_Response *resp, unsigned vary) {
    if (vary == (HTTP_VARY_ACCEPT | HTTP_VARY_ACCEPT_ENCODING)) MHD_add_response_header(resp, "Vary", "Accept, Accept-Encoding");
    else if (vary & HTTP_VARY_ACCEPT) MHD_add_response_header(resp, "Vary", "Accept");
    else if (vary & HTTP_VARY_ACCEPT_ENCODING) MHD_add_response_header(resp, "Vary", "Accept-Encoding");
}

static enum MHD_Result send_reply(struct MHD_Connection *c, http_reply *r, const char *method, const char *url,
                                  const struct timespec *t0) {
    struct MHD_Response *resp;
    const char *ctype = "application/json";
    /* HEAD of a streamed reply (/trace): MHD 0.9.75 sent the chunked body's last chunk
     * ("0\r\n\r\n") after the headers (issue 22), which a keep-alive client reads as the
     * start of the next reply. So no stream is opened: a reply of unknown length that is
     * not chunked (its end is the connection's close) has no body MHD could send, and no
     * Content-Length that would misstate GET's. */
    if (r->stream_read && !strcmp(method, "HEAD")) {
        if (r->stream_free) r->stream_free(r->stream_cls);
        r->stream_read = NULL;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, head_cb, NULL, NULL);
        if (resp) MHD_set_response_options(resp, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
        ctype = r->content_type ? r->content_type : ctype;
    } else if (r->stream_read) {
        http_reply *copy = malloc(sizeof *copy);
        if (!copy) return MHD_NO;
        *copy = *r;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_cb, copy, stream_free_cb);
        ctype = r->content_type ? r->content_type : ctype;
        r->stream_read = NULL;
    } else if (r->text) {
        resp = MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_FREE);
        ctype = r->content_type ? r->content_type : "text/plain; charset=utf-8";
        r->text = NULL;
    } else if (r->json && !http_render(r)) {
        resp = MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_FREE);
        ctype = r->content_type;
        r->text = NULL;
    } else {
        resp = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
        if (r->status == 204) ctype = NULL;
    }
    json_decref(r->json);
    r->json = NULL;
    if (!resp) return MHD_NO;
    if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (r->location[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (r->allow[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->disposition[0]) MHD_add_response_header(resp, "Content-Disposition", r->disposition);
    if (r->gzip_encoded) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    add_vary(resp, r->vary);
    if (r->www_authenticate) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, r->www_authenticate);
    if (r->retry_after > 0) {
        char ra[24];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    /* Draining for a stop: a keep-alive client must not start another request here. */
    if (atomic_load(&g_stopping) || r->close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    /* The dashboard loads only its own files (no inline script or style), so a name that
     * slipped through as HTML still could not run, load or send anything elsewhere; and no
     * other site may frame it (clickjacking). On every reply: a JSON one opened as a page
     * gets the same. X-Frame-Options for browsers without frame-ancestors. */
    MHD_add_response_header(resp, "Content-Security-Policy", HTTP_CSP);
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    /* From here the client must take the reply at --min-download-rate (deadline.h). */
    if (ok == MHD_YES) deadline_reply(c);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
    metrics_request(routes_pattern(method, url), method, r->status, ms / 1e3);
    if (!g_app->cfg->quiet) {
        char qpath[1024]; /* quoted: a decoded URL may hold quotes or spaces */
        logfmt_quote(url, qpath, sizeof qpath);
        /* The token's NAME, never the token, says who it was. */
        if (g_app->tokens)
            log_line("info", "request", "method=%s path=%s status=%d ms=%.2f user=%s", method, qpath, r->status, ms, r->user ? r->user : "-");
        else
            log_line("info", "request", "method=%s path=%s status=%d ms=%.2f", method, qpath, r->status, ms);
    }
    return ok;
}

/* ---- static files ---- */

static const char *mime_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot) return "application/octet-stream";
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
        {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"},
        /* the guides shipped with the dashboard (static/docs/, .md files): shown as text, not downloaded */
        {".md", "text/plain; charset=utf-8"}, {NULL, NULL}};
    for (int i = 0; types[i].ext; i++)
        if (!strcasecmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

/* Serves a file under static_root. The URL is already percent-decoded by MHD; any
 * "..", backslash or a realpath outside the root (a symlink out) is a 404, so no
 * request can read outside static/. */
static int serve_static(app *a, const char *url, http_reply *out) {
    if (!a->static_root[0]) return http_error(out, ERR_NOTFOUND, "no static directory configured");
    if (strstr(url, "..") || strchr(url, '\\') || url[0] != '/')
        return http_error(out, ERR_NOTFOUND, "no such file");
    char path[PATH_MAX], real[PATH_MAX];
    const char *rel = !strcmp(url, "/") ? "/index.html" : url;
    if ((size_t)snprintf(path, sizeof path, "%s%s", a->static_root, rel) >= sizeof path)
        return http_error(out, ERR_NOTFOUND, "no such file");
    size_t rootlen = strlen(a->static_root);
    if (!realpath(path, real) || strncmp(real, a->static_root, rootlen) || (real[rootlen] != '/' && real[rootlen] != '\0'))
        return http_error(out, ERR_NOTFOUND, "no such file: %s", url);
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
        if (fd >= 0) close(fd);
        return http_error(out, ERR_NOTFOUND, "no such file: %s", url);
    }
    char *data = malloc((size_t)st.st_size + 1);
    ssize_t got = data ? read(fd, data, (size_t)st.st_size) : -1;
    close(fd);
    if (got != st.st_size) {
        free(data);
        return http_error(out, ERR_IO, "cannot read %s", url);
    }
    return http_text(out, 200, mime_of(real), data, (size_t)got);
}

/* ---- uploads ---- */

/* Decides the upload's early reply (drained body, then sent) unless one is decided. */
static void reject(struct conn *c, int err, const char *msg) {
    if (c->rejected) return;
    c->rejected = 1;
    http_error(&c->early, err, "%s", msg);
}

static void form_to_import(void *cls, const char *data, size_t n) {
    struct conn *c = cls;
    import_feed(c->im, data, n); /* an error sticks: import_finish returns it */
}

/* The Idempotency-Key header (IETF httpapi draft: a Structured Field string, "..." with \"
 * and \\ escapes; a bare token of visible ASCII is taken as it is) into key: 1..IDEM_KEY_MAX
 * bytes of printable ASCII. 0 (key "" when there is none), or -1 with c->early's 400. */
static int idempotency_key(const http_req *rq, struct conn *c, char key[IDEM_KEY_MAX + 1]) {
    const char *h = http_header(rq, "Idempotency-Key");
    size_t n = 0;
    key[0] = '\0';
    if (!h) return 0;
    int quoted = *h == '"', ok = 1;
    const char *p = h + quoted;
    for (; *p && ok && !(quoted && *p == '"'); p++) {
        if (quoted && *p == '\\') p++; /* \" or \\ */
        unsigned char ch = (unsigned char)*p;
        ok = ch >= (quoted ? 0x20 : 0x21) && ch <= 0x7e && (quoted || ch != '"') && n < IDEM_KEY_MAX;
        if (ok) key[n++] = (char)ch;
    }
    key[n] = '\0';
    if (ok && n > 0 && (!quoted || (*p == '"' && !p[1]))) return 0;
    c->rejected = 1;
    http_error(&c->early, ERR_PARAM, "Idempotency-Key must be 1 to %d characters of printable ASCII, bare or as a quoted string (\"KEY\")",
               IDEM_KEY_MAX);
    return -1;
}

/* What import_begin said of the upload's key: 200 with the stored session's reply (the 201's
 * shape), or 409 with Retry-After while another upload of the key is in flight. */
static void key_answer(struct conn *c, int rc, const import_prior *prior, const char *err) {
    c->rejected = 1;
    if (rc == ERR_CONFLICT) {
        http_error(&c->early, ERR_CONFLICT, "%s", err);
        c->early.retry_after = IDEM_RETRY_S;
        return;
    }
    snprintf(c->early.location, sizeof c->early.location, "/api/v1/sessions/%lld", prior->session_id);
    http_json(&c->early, 200, json_pack("{s:I,s:s,s:I}", "id", (json_int_t)prior->session_id, "url", c->early.location, "events",
                                        (json_int_t)prior->events));
}

/* Headers only: the encoding, ?name=, ?label= and Idempotency-Key are checked, then the door
 * takes a slot. */
static void upload_begin(app *a, struct MHD_Connection *mc, struct conn *c) {
    c->upload = 1;
    http_req rq = {"POST", "/api/v1/sessions", -1, mc, NULL, 0, NULL};
    const char *ce = http_header(&rq, MHD_HTTP_HEADER_CONTENT_ENCODING);
    int gzip = ce && !strcasecmp(ce, "gzip");
    if (ce && !gzip && strcasecmp(ce, "identity")) return reject(c, ERR_FORMAT, "Content-Encoding must be gzip or identity");
    const char *name = NULL;
    char key[IDEM_KEY_MAX + 1];
    if (http_labels(&rq, &c->early, UPLOAD_LABELS_MAX, &c->labels, &c->nlabels) || http_name(&rq, &c->early, &name) ||
        idempotency_key(&rq, c, key)) {
        c->rejected = 1;
        return;
    }
    const char *cl = http_header(&rq, MHD_HTTP_HEADER_CONTENT_LENGTH);
    import_opts o = {name, c->labels, c->nlabels, gzip, cl ? strtoull(cl, NULL, 10) : 0, key[0] ? key : NULL};
    import_prior prior = {0, 0, 0};
    char err[512];
    int rc = import_begin(a->imports, &o, &c->im, &prior, err, sizeof err);
    if (rc == IMPORT_STORED || (rc == ERR_CONFLICT && key[0])) return key_answer(c, rc, &prior, err);
    if (rc) {
        reject(c, rc, err);
        return;
    }
    /* curl -F and HTML forms wrap the file in a form; its one file part is the body. */
    if (form_is_multipart(http_header(&rq, MHD_HTTP_HEADER_CONTENT_TYPE)) && !(c->form = form_new(mc, form_to_import, c, &rc, err, sizeof err)))
        reject(c, rc, err);
}

static void upload_end(struct conn *c, http_reply *out) {
    long long id = 0;
    unsigned long long events = 0, received = import_received(c->im);
    int rc = c->form ? form_finish(c->form) : 0;
    if (rc) http_error(out, rc, "%s", form_error(c->form));
    else if (c->form && form_filename(c->form) && (rc = import_set_fallback_name(c->im, form_filename(c->form))))
        http_error(out, rc, "out of memory");
    else if ((rc = import_finish(c->im, &id, &events)))
        http_error(out, rc, "%s", import_error(c->im));
    /* The importer (and its --max-uploads slot) goes before the reply is queued, not in
     * on_completed: that runs after the reply went out, so a client posting its next
     * upload as soon as it read this one's reply got 503 too_many_uploads. */
    import_free(c->im);
    c->im = NULL;
    if (rc) return;
    snprintf(out->location, sizeof out->location, "/api/v1/sessions/%lld", id);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    metrics_ingest(received, events, (double)(t1.tv_sec - c->t0.tv_sec) + (double)(t1.tv_nsec - c->t0.tv_nsec) / 1e9);
    http_json(out, 201, json_pack("{s:I,s:s,s:I}", "id", id, "url", out->location, "events", (json_int_t)events));
}

/* ---- access ---- */

/* Writes under /api/ always need a token once tokens are configured; reads only with
 * --read-auth. /healthz and the dashboard's files stay open (they hold no session data). */
static int needs_token(const app *a, const char *method, const char *url) {
    if (!a->tokens || strncmp(url, "/api/", 5)) return 0;
    int read = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    return !read || a->cfg->read_auth;
}

/* 0 when the request may go on; else c->early holds the 401 (no usable credentials) or
 * 403 (a well-formed token that is not configured). The token itself is never echoed. */
static int authorize(app *a, struct MHD_Connection *mc, const char *method, const char *url, struct conn *c) {
    if (!needs_token(a, method, url)) return 0;
    const char *hdr = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    int v = auth_check(a->tokens, hdr, &c->user);
    if (v == AUTH_OK) return 0;
    c->rejected = 1;
    if (v == AUTH_DENIED)
        return http_error(&c->early, ERR_DENIED, "this bearer token is not accepted here"), -1;
    http_error(&c->early, ERR_AUTH, v == AUTH_MISSING ? "%s needs an Authorization: Bearer token"
                                                                 : "%s: the Authorization header is not 'Bearer TOKEN'", method);
    c->early.www_authenticate = "Bearer realm=\"firstpass\"";
    return -1;
}

static int expects_continue(struct MHD_Connection *mc) {
    const char *e = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return e && !strcasecmp(e, "100-continue");
}

/* ---- request framing ---- */

typedef struct framing {
    int cl;              /* Content-Length headers */
    int cl_conflict;     /* two of them with different values */
    const char *cl_first;
    const char *te;      /* the (last) Transfer-Encoding */
} framing;

static enum MHD_Result framing_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->cl++ && strcmp(f->cl_first, value ? value : "")) f->cl_conflict = 1;
        if (f->cl == 1) f->cl_first = value ? value : "";
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->te = value ? value : "";
    }
    return MHD_YES;
}

/* RFC 9112 6.3: two different Content-Lengths, or a Content-Length with a
 * Transfer-Encoding, leave the body's end ambiguous (request smuggling through a proxy
 * that reads it the other way), and a transfer coding other than chunked is one MHD
 * cannot read (it waited for ever on "gzip, chunked"). 1 with c->early set to the 400. */
static int framing_refused(struct MHD_Connection *mc, struct conn *c) {
    framing f = {0, 0, NULL, NULL};
    MHD_get_connection_values(mc, MHD_HEADER_KIND, framing_cb, &f);
    const char *why = f.cl_conflict ? "the request has two different Content-Length headers"
                      : f.te && f.cl ? "the request has both Content-Length and Transfer-Encoding"
                      : f.te && strcasecmp(f.te, "chunked") ? "Transfer-Encoding must be chunked (use Content-Encoding: gzip for a gzip body)"
                      : NULL;
    if (!why) return 0;
    c->rejected = 1;
    http_error(&c->early, ERR_REQUEST, "%s", why);
    return 1;
}

static int params_refused(struct conn *c) {
    if (!c->params) return 0;
    c->rejected = 1;
    http_error(&c->early, ERR_REQUEST, "the query has %lu parameters; at most %d are read", c->params, HTTP_MAX_PARAMS);
    return 1;
}

/* MHD_OPTION_URI_LOG_CALLBACK: sees the request line's URI before MHD splits its query.
 * MHD keeps every parameter in the connection's 256 KiB pool, and ~3,500 of them ran it
 * out: the connection was closed with no reply (issue 22). Over HTTP_MAX_PARAMS, the
 * query is cut where MHD will read it (the byte after '?': MHD ends the path at the '?'
 * itself, then parses from the next byte) and the request is refused in on_first. What
 * this returns is the request's first *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc) {
    (void)cls; (void)mc;
    char *q = strchr(uri, '?');
    if (!q) return NULL;
    unsigned long n = 1;
    for (const char *p = q + 1; *p; p++) n += *p == '&';
    if (n <= HTTP_MAX_PARAMS) return NULL;
    struct conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    q[1] = '\0';
    c->params = n;
    return c;
}

/* ---- MHD callbacks ---- */

/* The first callback of a request: headers only, no body byte read yet. Access and the
 * upload's limits are decided here. A refusal goes out at once when the client waits for
 * "100 Continue" (MHD sends that only if no reply is queued now), so a refused body is
 * never sent; a client that sends its body unasked has it drained, then gets the reply,
 * since closing on unread bytes would reset the connection and lose the reply. */
static enum MHD_Result on_first(app *a, struct MHD_Connection *mc, const char *url, const char *method, struct conn *c) {
    pthread_mutex_lock(&g_req_lock);
    g_requests++;
    pthread_mutex_unlock(&g_req_lock);
    /* A request whose body's length is ambiguous is answered at once and the connection
     * closed: draining it by MHD's reading could leave a smuggled request behind. */
    if (framing_refused(mc, c) || params_refused(c)) {
        http_reply out = c->early;
        memset(&c->early, 0, sizeof c->early);
        out.close = 1;
        c->replied = 1;
        return send_reply(mc, &out, method, url, &c->t0);
    }
    if (!authorize(a, mc, method, url, c) && !strcmp(method, "POST") && !strcmp(url, "/api/v1/sessions")) upload_begin(a, mc, c);
    if (!c->rejected || !expects_continue(mc)) return MHD_YES;
    http_reply out = c->early;
    memset(&c->early, 0, sizeof c->early);
    out.user = c->user;
    c->replied = 1;
    return send_reply(mc, &out, method, url, &c->t0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    app *a = cls;
    struct conn *c = *con_cls;
    if (!c || !c->started) {
        if (!c) c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        c->started = 1;
        clock_gettime(CLOCK_MONOTONIC, &c->t0);
        *con_cls = c;
        deadline_head_done(mc);
        return on_first(a, mc, url, method, c);
    }
    if (c->replied) { /* MHD should not call again; if it does, there is nothing to add */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (c->upload) {
            deadline_feeding(mc);
            if (c->form) { /* its error sticks too: later feeds return it at once */
                int frc = form_feed(c->form, upload_data, *upload_size);
                if (frc) reject(c, frc, form_error(c->form));
            } else if (c->im) {
                import_feed(c->im, upload_data, *upload_size); /* an error sticks: import_finish returns it */
            }
        } else if (c->body_len + *upload_size > SMALL_BODY_MAX) {
            reject(c, ERR_TOOBIG, "the request body is over 256 KiB");
        } else if (!c->rejected) {
            char *b = realloc(c->body, c->body_len + *upload_size + 1);
            if (!b) return MHD_NO;
            memcpy(b + c->body_len, upload_data, *upload_size);
            c->body = b;
            c->body_len += *upload_size;
            c->body[c->body_len] = '\0';
        }
        deadline_body(mc, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    deadline_body_done(mc);
    http_reply out;
    memset(&out, 0, sizeof out);
    if (c->rejected) {
        out = c->early;
        memset(&c->early, 0, sizeof c->early);
    } else if (c->upload) {
        upload_end(c, &out);
    } else {
        http_req rq = {method, url, -1, mc, c->body, c->body_len, &c->vary};
        int r = routes_dispatch(a, &rq, &out);
        if (r == ROUTE_NONE) {
            if (strncmp(url, "/api/", 5) && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) serve_static(a, url, &out);
            else http_error(&out, ERR_NOTFOUND, "no route for %s %s", method, url);
        }
    }
    if (!out.status) http_error(&out, ERR_INTERNAL, "the handler gave no reply");
    out.vary |= c->vary;
    out.user = c->user;
    return send_reply(mc, &out, method, url, &c->t0);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)toe;
    deadline_next_head(mc);
    struct conn *c = *con_cls;
    if (!c) return;
    if (c->started) { /* on_uri's conn may never have reached on_request */
        pthread_mutex_lock(&g_req_lock);
        g_requests--;
        pthread_mutex_unlock(&g_req_lock);
    }
    form_free(c->form);
    import_free(c->im); /* rolls back anything not committed: a dropped upload leaves nothing */
    fp_labels_free(c->labels, c->nlabels);
    json_decref(c->early.json);
    free(c->early.text);
    free(c->body);
    free(c);
    *con_cls = NULL;
}

static unsigned requests_in_flight(void) {
    pthread_mutex_lock(&g_req_lock);
    unsigned n = g_requests;
    pthread_mutex_unlock(&g_req_lock);
    return n;
}

/* After SIGTERM: stop accepting, let the requests in flight finish (at most 60 s), stop.
 * A connection accepted just before the quiesce may not have reached on_request yet, so
 * only three idle polls in a row (0.3 s) mean that nothing is left. Connections still in
 * the kernel's backlog are reset when the listening socket closes: their clients saw no
 * answer and nothing of theirs is stored. */
static void drain_and_stop(struct MHD_Daemon *d) {
    atomic_store(&g_stopping, 1);
    capture_http_stop(); /* agents' long polls answer now, not after their wait */
    MHD_socket ls = MHD_quiesce_daemon(d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
    for (int i = 0, idle = 0; i < 600 && idle < 3; i++) {
        idle = requests_in_flight() ? 0 : idle + 1;
        usleep(100 * 1000);
    }
    MHD_stop_daemon(d);
}

/* The signals that stop the server, blocked in every thread: http_serve takes them with
 * sigwait(). A thread created while they are unblocked (retention's, MHD's) could take a
 * SIGTERM itself, whose default action ends the process with no drain. */
static void stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void http_block_stop_signals(void) {
    sigset_t stop;
    stop_signals(&stop);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
}

int http_serve(app *a) {
    g_app = a;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->cfg->port);
    if (inet_pton(AF_INET, a->cfg->bind, &sa.sin_addr) != 1) {
        log_line("error", "--bind is not an IPv4 address", "bind=%s", a->cfg->bind);
        return 2;
    }
    /* SIGINT/SIGTERM are blocked before MHD starts its threads, which inherit the mask, and
     * taken with sigwait() on this thread. With a handler instead, the signal could land on
     * any MHD thread and this one would sleep on (tests/reliability/sigterm.sh). main()
     * blocks them first, before any thread; doing it again here keeps http_serve safe alone. */
    sigset_t stop;
    stop_signals(&stop);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* One client (one address) may hold at most per_ip connections, so that others' reads
     * find one free while it trickles (issue 22); behind a proxy every client is the proxy. */
    unsigned per_ip = a->cfg->max_connections_per_ip && a->cfg->max_connections_per_ip < a->cfg->max_connections
                          ? a->cfg->max_connections_per_ip : a->cfg->max_connections;
    /* --devices: read before the first upload; a file that does not parse stops the start-up */
    char derr[512], qerr[1100];
    if (a->cfg->devices_file && *a->cfg->devices_file && devfile_load(a->cfg->devices_file, derr, sizeof derr)) {
        log_line("error", "--devices: the file does not parse", "error=%s", logfmt_quote(derr, qerr, sizeof qerr));
        return 2;
    }
    if (deadline_start(a->cfg->header_timeout_s, a->cfg->min_body_rate, a->cfg->min_download_rate)) {
        log_line("error", "cannot start the connection deadline thread", NULL);
        return 1;
    }
    /* MHD_USE_ITC: MHD_quiesce_daemon needs it with an internal polling thread. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC,
        (uint16_t)a->cfg->port, NULL, NULL, on_request, a,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        MHD_OPTION_NOTIFY_CONNECTION, deadline_notify, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_CONNECTION_LIMIT, a->cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, a->cfg->timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_END);
    if (!d) {
        deadline_stop();
        log_line("error", "cannot listen", "addr=%s:%d error=\"%s\"", a->cfg->bind, a->cfg->port, strerror(errno));
        return 1;
    }
    char qdb[1024]; /* the URI with its password blanked (store_path) */
    log_line("info", "listening", "url=http://%s:%d/ db=%s backend=%s", a->cfg->bind, a->cfg->port,
             logfmt_quote(store_path(a->st), qdb, sizeof qdb), store_backend(a->st));
    int sig = 0;
    while (sigwait(&stop, &sig)) {
    }
    log_line("info", "shutting down: finishing requests in flight", "signal=%d", sig);
    drain_and_stop(d);
    deadline_stop(); /* after MHD: its connections' callbacks use the list */
    return 0;
}
