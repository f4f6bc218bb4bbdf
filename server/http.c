/* http.c: libmicrohttpd plumbing: daemon, connection state, upload streaming, static files.
 *
 * Owns the MHD daemon and the per-connection `struct conn` hung off MHD's con_cls.
 * Routing and handlers are routes.c's; uploads are fed chunk by chunk to ingest+load,
 * so no body is ever held whole (an SQLite body, an nsys export, is spooled to a temporary
 * file and read by nsys.c at the end). Must not include sqlite3.h beyond store.h's types. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "err.h"
#include "ingest.h"
#include "load.h"
#include "logfmt.h"
#include "metrics.h"
#include "nsys.h"
#include "routes.h"

#define SMALL_BODY_MAX (256u << 10) /* PUT bodies */

/* Per-connection state, created on the first callback of a request. */
struct conn {
    int upload;                   /* POST /api/v1/sessions */
    int rejected;                 /* an error reply is decided; drain the body */
    http_reply early;             /* that reply */
    ingest *in;
    loader *ld;
    nsys_spool *spool;            /* an SQLite (nsys) body's temporary file, NULL otherwise */
    fp_label *labels;
    size_t nlabels;
    unsigned long long received;
    int counted;                  /* holds an upload slot */
    char *body;                   /* small bodies */
    size_t body_len;
    struct timespec t0;
    unsigned vary;                /* HTTP_VARY_*: request headers the reply depends on */
    const char *user;             /* the token's NAME (auth.h), NULL when none was needed */
    int replied;                  /* the reply went out on the first callback */
};

static app *g_app;                 /* set once in http_serve */
static pthread_mutex_t g_up_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_uploads;         /* uploads in flight, guarded by g_up_lock */
static unsigned g_requests;        /* requests between first callback and completion, g_up_lock */
static atomic_int g_stopping;      /* SIGTERM seen: replies say Connection: close */
static int g_uploads_paused;       /* retention's VACUUM runs: uploads get 503, g_up_lock */

/* ---- request accessors ---- */

const char *http_query(const http_req *r, const char *key) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

typedef struct qall { const char *key; const char **vals; int n, max; } qall;
static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    qall *q = cls;
    if (strcmp(k, q->key)) return MHD_YES;
    if (q->n < q->max) q->vals[q->n] = v ? v : "";
    q->n++; /* counts past max too, so that callers can refuse, not silently drop */
    return MHD_YES;
}
int http_query_all(const http_req *r, const char *key, const char **vals, int max) {
    qall q = {key, vals, 0, max};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect, &q);
    return q.n;
}
const char *http_header(const http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
int http_wants_text(const http_req *r) {
    const char *f = http_query(r, "format");
    if (f) return !strcmp(f, "text");
    if (r->vary) *r->vary |= HTTP_VARY_ACCEPT;
    const char *acc = http_header(r, "Accept");
    return acc && strstr(acc, "text/plain") && !strstr(acc, "application/json");
}
int http_accepts_gzip(const http_req *r) {
    if (r->vary) *r->vary |= HTTP_VARY_ACCEPT_ENCODING;
    const char *ae = http_header(r, "Accept-Encoding");
    return ae && strstr(ae, "gzip");
}

/* ---- replies ---- */

int http_json(http_reply *out, int status, json_t *body) {
    out->status = status;
    out->json = body;
    return 0;
}
int http_render(http_reply *r) {
    if (!r->json) return 0;
    char *s = json_dumps(r->json, JSON_COMPACT);
    if (!s) return ERR_NOMEM;
    size_t len = strlen(s);
    char *t = realloc(s, len + 2); /* a newline keeps curl output readable */
    if (!t) { free(s); return ERR_NOMEM; }
    t[len++] = '\n';
    t[len] = '\0';
    json_decref(r->json);
    r->json = NULL;
    r->text = t;
    r->text_len = len;
    r->content_type = "application/json";
    return 0;
}

typedef struct qstr { char *out; size_t n, len; } qstr;
static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    qstr *q = cls;
    int w = snprintf(q->out + (q->len < q->n ? q->len : q->n), q->len < q->n ? q->n - q->len : 0, "%s%s=%s", q->len ? "&" : "", k, v ? v : "");
    q->len += w > 0 ? (size_t)w : 0;
    return MHD_YES;
}
size_t http_query_string(const http_req *r, char *out, size_t n) {
    qstr q = {out, n, 0};
    if (n) out[0] = '\0';
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
    return q.len;
}

int http_text(http_reply *out, int status, const char *ctype, char *text, size_t len) {
    out->status = status;
    out->text = text;
    out->text_len = len;
    out->content_type = ctype;
    return 0;
}
int http_error(http_reply *out, int status, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(out->json);
    out->json = NULL;
    return http_json(out, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

int http_status_from_err(int err) {
    switch (err) {
    case ERR_PARSE: case ERR_INVALID: return 400;
    case ERR_NOTTRACE: return 422;
    case ERR_NOTFOUND: return 404;
    case ERR_TOOBIG: return 413;
    case ERR_FORMAT: return 415;
    case ERR_CONFLICT: return 409;
    default: return 500;
    }
}
const char *http_code_from_err(int err) {
    switch (err) {
    case ERR_PARSE: return "invalid_json";
    case ERR_INVALID: return "invalid_trace";
    case ERR_NOTTRACE: return "not_a_trace";
    case ERR_NOTFOUND: return "not_found";
    case ERR_TOOBIG: return "too_large";
    case ERR_FORMAT: return "unsupported_media_type";
    case ERR_CONFLICT: return "conflict";
    case ERR_NOMEM: return "out_of_memory";
    case ERR_DB: return "database_error";
    default: return "internal_error";
    }
}

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

static void add_vary(struct MHD_Response *resp, unsigned vary) {
    if (vary == (HTTP_VARY_ACCEPT | HTTP_VARY_ACCEPT_ENCODING)) MHD_add_response_header(resp, "Vary", "Accept, Accept-Encoding");
    else if (vary & HTTP_VARY_ACCEPT) MHD_add_response_header(resp, "Vary", "Accept");
    else if (vary & HTTP_VARY_ACCEPT_ENCODING) MHD_add_response_header(resp, "Vary", "Accept-Encoding");
}

static enum MHD_Result send_reply(struct MHD_Connection *c, http_reply *r, const char *method, const char *url,
                                  const struct timespec *t0) {
    struct MHD_Response *resp;
    const char *ctype = "application/json";
    if (r->stream_read) {
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
    /* Draining for a stop: a keep-alive client must not start another request here. */
    if (atomic_load(&g_stopping)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
    metrics_request(routes_pattern(method, url), method, r->status, ms / 1e3);
    if (!g_app->cfg->quiet) {
        char qpath[1024]; /* quoted: a decoded URL may hold quotes or spaces */
        logfmt_quote(url, qpath, sizeof qpath);
        /* The token's NAME, never the token, says who it was. */
        if (g_app->tokens)
            fprintf(stderr, "level=info msg=request method=%s path=%s status=%d ms=%.2f user=%s\n", method, qpath, r->status, ms,
                    r->user ? r->user : "-");
        else
            fprintf(stderr, "level=info msg=request method=%s path=%s status=%d ms=%.2f\n", method, qpath, r->status, ms);
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
        {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"}, {NULL, NULL}};
    for (int i = 0; types[i].ext; i++)
        if (!strcasecmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

/* Serves a file under static_root. The URL is already percent-decoded by MHD; any
 * "..", backslash or a realpath outside the root (a symlink out) is a 404, so no
 * request can read outside static/. */
static int serve_static(app *a, const char *url, http_reply *out) {
    if (!a->static_root[0]) return http_error(out, 404, "not_found", "no static directory configured");
    if (strstr(url, "..") || strchr(url, '\\') || url[0] != '/')
        return http_error(out, 404, "not_found", "no such file");
    char path[PATH_MAX], real[PATH_MAX];
    const char *rel = !strcmp(url, "/") ? "/index.html" : url;
    if ((size_t)snprintf(path, sizeof path, "%s%s", a->static_root, rel) >= sizeof path)
        return http_error(out, 404, "not_found", "no such file");
    size_t rootlen = strlen(a->static_root);
    if (!realpath(path, real) || strncmp(real, a->static_root, rootlen) || (real[rootlen] != '/' && real[rootlen] != '\0'))
        return http_error(out, 404, "not_found", "no such file: %s", url);
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
        if (fd >= 0) close(fd);
        return http_error(out, 404, "not_found", "no such file: %s", url);
    }
    char *data = malloc((size_t)st.st_size + 1);
    ssize_t got = data ? read(fd, data, (size_t)st.st_size) : -1;
    close(fd);
    if (got != st.st_size) {
        free(data);
        return http_error(out, 500, "internal_error", "cannot read %s", url);
    }
    return http_text(out, 200, mime_of(real), data, (size_t)got);
}

/* ---- uploads ---- */

static void release_slot(struct conn *c) {
    if (!c->counted) return;
    pthread_mutex_lock(&g_up_lock);
    g_uploads--;
    pthread_mutex_unlock(&g_up_lock);
    c->counted = 0;
}

static void reject(struct conn *c, int err, const char *msg) {
    if (c->rejected) return;
    c->rejected = 1;
    http_error(&c->early, http_status_from_err(err), http_code_from_err(err), "%s", msg);
}

static void reject_param(struct conn *c, const char *msg) {
    if (c->rejected) return;
    c->rejected = 1;
    http_error(&c->early, 400, "invalid_parameter", "%s", msg);
}

/* ?name= and ?label=k:v (at most 64), checked before an upload slot is taken. */
static int upload_params(struct MHD_Connection *mc, struct conn *c, const char **name) {
    http_req rq = {"POST", "/api/v1/sessions", -1, mc, NULL, 0, NULL};
    const char *vals[64];
    int nl = http_query_all(&rq, "label", vals, 64);
    if (nl > 64) { reject_param(c, "at most 64 label parameters"); return -1; }
    c->labels = calloc((size_t)nl + 1, sizeof *c->labels);
    if (!c->labels) { reject(c, ERR_NOMEM, "out of memory"); return -1; }
    for (int i = 0; i < nl; i++) {
        char m[160];
        if (!fp_utf8_valid(vals[i], strlen(vals[i]))) {
            snprintf(m, sizeof m, "label %d (of %d) is not valid UTF-8", i + 1, nl);
            reject_param(c, m);
            return -1;
        }
        if (fp_label_parse_one(vals[i], &c->labels[c->nlabels])) {
            snprintf(m, sizeof m, "label '%.100s' is not key:value with a non-empty key", vals[i]);
            reject_param(c, m);
            return -1;
        }
        c->nlabels++;
    }
    *name = http_query(&rq, "name");
    if (*name && !fp_utf8_valid(*name, strlen(*name))) {
        reject_param(c, "name is not valid UTF-8");
        return -1;
    }
    if (*name && strlen(*name) > 512) {
        reject_param(c, "name is longer than 512 bytes");
        return -1;
    }
    return 0;
}

static void upload_begin(app *a, struct MHD_Connection *mc, struct conn *c) {
    c->upload = 1;
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > a->cfg->max_upload) {
        char m[128];
        snprintf(m, sizeof m, "the body is %s bytes; --max-upload is %llu", cl, a->cfg->max_upload);
        reject(c, ERR_TOOBIG, m);
        return;
    }
    const char *ce = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    int gzip = 0;
    if (ce && !strcasecmp(ce, "gzip")) gzip = 1;
    else if (ce && strcasecmp(ce, "identity")) {
        reject(c, ERR_FORMAT, "Content-Encoding must be gzip or identity");
        return;
    }
    const char *name = NULL;
    if (upload_params(mc, c, &name)) return;
    pthread_mutex_lock(&g_up_lock);
    int paused = g_uploads_paused, busy = paused || g_uploads >= a->cfg->max_uploads;
    if (!busy) g_uploads++;
    pthread_mutex_unlock(&g_up_lock);
    if (busy) {
        c->rejected = 1;
        if (paused) http_error(&c->early, 503, "too_many_uploads", "the database is being compacted (VACUUM); retry later");
        else http_error(&c->early, 503, "too_many_uploads", "%u uploads are in progress (--max-uploads); retry later", a->cfg->max_uploads);
        return;
    }
    c->counted = 1;
    load_opts o = {name, c->labels, c->nlabels, a->cfg->max_events, 0};
    char err[256];
    c->ld = loader_new(a->st, &o, err, sizeof err);
    if (!c->ld) {
        reject(c, ERR_DB, err);
        return;
    }
    c->in = ingest_new(loader_sink(c->ld), gzip, a->cfg->max_inflated);
    if (!c->in) reject(c, ERR_NOMEM, "out of memory");
    else ingest_set_sqlite_sink(c->in, nsys_spool_sink, &c->spool); /* nsys exports: spooled, nsys.h */
}

static void upload_chunk(app *a, struct conn *c, const char *data, size_t n) {
    c->received += n;
    if (c->rejected) return;
    if (c->received > a->cfg->max_upload) {
        char m[128];
        snprintf(m, sizeof m, "the body is over --max-upload (%llu bytes)", a->cfg->max_upload);
        reject(c, ERR_TOOBIG, m);
        return;
    }
    int rc = ingest_feed(c->in, data, n);
    if (rc) reject(c, rc, ingest_error(c->in));
}

static void upload_end(app *a, struct conn *c, http_reply *out) {
    if (c->rejected) {
        *out = c->early;
        memset(&c->early, 0, sizeof c->early);
        return;
    }
    int rc = ingest_finish(c->in);
    if (rc) {
        http_error(out, http_status_from_err(rc), http_code_from_err(rc), "%s", ingest_error(c->in));
        return;
    }
    loader_set_legacy(c->ld, ingest_top_is_array(c->in));
    long long id = 0;
    char err[256];
    unsigned long long events = ingest_event_count(c->in);
    if (ingest_sniffed_sqlite(c->in)) { /* an nsys export: its rows feed the same loader */
        rc = nsys_import(c->spool, c->ld, &events, err, sizeof err);
        if (rc) {
            http_error(out, http_status_from_err(rc), http_code_from_err(rc), "%s", err);
            return;
        }
    }
    rc = loader_commit(c->ld, c->received, &id, err, sizeof err);
    if (rc) {
        http_error(out, http_status_from_err(rc), http_code_from_err(rc), "%s", err);
        return;
    }
    store_note_upload(a->st); /* committed: a cached sessions list is now stale (rcache.h) */
    snprintf(out->location, sizeof out->location, "/api/v1/sessions/%lld", id);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    metrics_ingest(c->received, events, (double)(t1.tv_sec - c->t0.tv_sec) + (double)(t1.tv_nsec - c->t0.tv_nsec) / 1e9);
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
        return http_error(&c->early, 403, "forbidden", "this bearer token is not accepted here"), -1;
    http_error(&c->early, 401, "unauthorized", v == AUTH_MISSING ? "%s needs an Authorization: Bearer token"
                                                                 : "%s: the Authorization header is not 'Bearer TOKEN'", method);
    c->early.www_authenticate = "Bearer realm=\"firstpass\"";
    return -1;
}

static int expects_continue(struct MHD_Connection *mc) {
    const char *e = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return e && !strcasecmp(e, "100-continue");
}

/* ---- MHD callbacks ---- */

/* The first callback of a request: headers only, no body byte read yet. Access and the
 * upload's limits are decided here. A refusal goes out at once when the client waits for
 * "100 Continue" (MHD sends that only if no reply is queued now), so a refused body is
 * never sent; a client that sends its body unasked has it drained, then gets the reply,
 * since closing on unread bytes would reset the connection and lose the reply. */
static enum MHD_Result on_first(app *a, struct MHD_Connection *mc, const char *url, const char *method, struct conn *c) {
    pthread_mutex_lock(&g_up_lock);
    g_requests++;
    pthread_mutex_unlock(&g_up_lock);
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
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &c->t0);
        *con_cls = c;
        return on_first(a, mc, url, method, c);
    }
    if (c->replied) { /* MHD should not call again; if it does, there is nothing to add */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (c->upload) {
            upload_chunk(a, c, upload_data, *upload_size);
        } else if (c->body_len + *upload_size > SMALL_BODY_MAX) {
            if (!c->rejected) reject(c, ERR_TOOBIG, "the request body is over 256 KiB");
        } else if (!c->rejected) {
            char *b = realloc(c->body, c->body_len + *upload_size + 1);
            if (!b) return MHD_NO;
            memcpy(b + c->body_len, upload_data, *upload_size);
            c->body = b;
            c->body_len += *upload_size;
            c->body[c->body_len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    http_reply out;
    memset(&out, 0, sizeof out);
    if (c->upload) {
        upload_end(a, c, &out);
    } else if (c->rejected) {
        out = c->early;
        memset(&c->early, 0, sizeof c->early);
    } else {
        http_req rq = {method, url, -1, mc, c->body, c->body_len, &c->vary};
        int r = routes_dispatch(a, &rq, &out);
        if (r == ROUTE_NONE) {
            if (strncmp(url, "/api/", 5) && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) serve_static(a, url, &out);
            else http_error(&out, 404, "not_found", "no route for %s %s", method, url);
        }
    }
    if (!out.status) http_error(&out, 500, "internal_error", "the handler gave no reply");
    out.vary |= c->vary;
    out.user = c->user;
    return send_reply(mc, &out, method, url, &c->t0);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)mc; (void)toe;
    struct conn *c = *con_cls;
    if (!c) return;
    pthread_mutex_lock(&g_up_lock);
    g_requests--;
    pthread_mutex_unlock(&g_up_lock);
    ingest_free(c->in);
    loader_free(c->ld); /* rolls back anything not committed: a dropped upload leaves nothing */
    nsys_spool_free(c->spool);
    release_slot(c);
    fp_labels_free(c->labels, c->nlabels);
    json_decref(c->early.json);
    free(c->early.text);
    free(c->body);
    free(c);
    *con_cls = NULL;
}

int http_uploads_pause(void) {
    pthread_mutex_lock(&g_up_lock);
    int ok = !g_uploads && !g_uploads_paused;
    if (ok) g_uploads_paused = 1;
    pthread_mutex_unlock(&g_up_lock);
    return ok ? 0 : ERR_CONFLICT;
}

void http_uploads_resume(void) {
    pthread_mutex_lock(&g_up_lock);
    g_uploads_paused = 0;
    pthread_mutex_unlock(&g_up_lock);
}

static unsigned requests_in_flight(void) {
    pthread_mutex_lock(&g_up_lock);
    unsigned n = g_requests;
    pthread_mutex_unlock(&g_up_lock);
    return n;
}

/* After SIGTERM: stop accepting, let the requests in flight finish (at most 60 s), stop.
 * A connection accepted just before the quiesce may not have reached on_request yet, so
 * only three idle polls in a row (0.3 s) mean that nothing is left. Connections still in
 * the kernel's backlog are reset when the listening socket closes: their clients saw no
 * answer and nothing of theirs is stored. */
static void drain_and_stop(struct MHD_Daemon *d) {
    atomic_store(&g_stopping, 1);
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
        fprintf(stderr, "level=error msg=\"--bind is not an IPv4 address\" bind=%s\n", a->cfg->bind);
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
    /* MHD_USE_ITC: MHD_quiesce_daemon needs it with an internal polling thread. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC,
        (uint16_t)a->cfg->port, NULL, NULL, on_request, a,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        MHD_OPTION_CONNECTION_LIMIT, a->cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, a->cfg->timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, a->cfg->max_connections,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "level=error msg=\"cannot listen\" addr=%s:%d error=\"%s\"\n", a->cfg->bind, a->cfg->port, strerror(errno));
        return 1;
    }
    fprintf(stderr, "level=info msg=listening url=http://%s:%d/ db=%s\n", a->cfg->bind, a->cfg->port, a->cfg->db);
    int sig = 0;
    while (sigwait(&stop, &sig)) {
    }
    fprintf(stderr, "level=info msg=\"shutting down: finishing requests in flight\" signal=%d\n", sig);
    drain_and_stop(d);
    return 0;
}
