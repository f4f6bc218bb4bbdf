/* http.c: libmicrohttpd plumbing: daemon, connection state, upload streaming, static files.
 *
 * Owns the MHD daemon and the per-connection `struct conn` hung off MHD's con_cls.
 * Routing and handlers are routes.c's; uploads are fed chunk by chunk to ingest+load,
 * so no body is ever held whole. Must not include sqlite3.h beyond store.h's types. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "ingest.h"
#include "load.h"
#include "routes.h"

#define SMALL_BODY_MAX (256u << 10) /* PUT bodies */

/* Per-connection state, created on the first callback of a request. */
struct conn {
    int upload;                   /* POST /api/v1/sessions */
    int rejected;                 /* an error reply is decided; drain the body */
    http_reply early;             /* that reply */
    ingest *in;
    loader *ld;
    fp_label *labels;
    size_t nlabels;
    unsigned long long received;
    int counted;                  /* holds an upload slot */
    char *body;                   /* small bodies */
    size_t body_len;
    struct timespec t0;
};

static app *g_app;                 /* for the signal handler: set once in http_serve */
static volatile sig_atomic_t g_stop;
static pthread_mutex_t g_up_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_uploads;         /* uploads in flight, guarded by g_up_lock */

/* ---- request accessors ---- */

const char *http_query(const http_req *r, const char *key) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

typedef struct qall { const char *key; const char **vals; int n, max; } qall;
static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    qall *q = cls;
    if (!strcmp(k, q->key) && q->n < q->max) q->vals[q->n++] = v ? v : "";
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
    const char *acc = http_header(r, "Accept");
    return acc && strstr(acc, "text/plain") && !strstr(acc, "application/json");
}
int http_accepts_gzip(const http_req *r) {
    const char *ae = http_header(r, "Accept-Encoding");
    return ae && strstr(ae, "gzip");
}

/* ---- replies ---- */

int http_json(http_reply *out, int status, json_t *body) {
    out->status = status;
    out->json = body;
    return 0;
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
    } else {
        char *s = r->json ? json_dumps(r->json, JSON_COMPACT) : NULL;
        size_t len = s ? strlen(s) : 0;
        if (s) { s[len] = '\0'; }
        if (s) {
            char *t = realloc(s, len + 2); /* a newline keeps curl output readable */
            if (t) { s = t; s[len++] = '\n'; s[len] = '\0'; }
        }
        resp = MHD_create_response_from_buffer(len, s ? s : (char *)"", s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
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
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    if (!g_app->cfg->quiet) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
        fprintf(stderr, "level=info msg=request method=%s path=\"%s\" status=%d ms=%.2f\n", method, url, r->status, ms);
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
    pthread_mutex_lock(&g_up_lock);
    int busy = g_uploads >= a->cfg->max_uploads;
    if (!busy) g_uploads++;
    pthread_mutex_unlock(&g_up_lock);
    if (busy) {
        c->rejected = 1;
        http_error(&c->early, 503, "too_many_uploads", "%u uploads are in progress (--max-uploads); retry later", a->cfg->max_uploads);
        return;
    }
    c->counted = 1;
    http_req rq = {"POST", "/api/v1/sessions", -1, mc, NULL, 0};
    const char *vals[64];
    int nl = http_query_all(&rq, "label", vals, 64);
    c->labels = calloc((size_t)nl + 1, sizeof *c->labels);
    for (int i = 0; c->labels && i < nl; i++) {
        if (fp_label_parse_one(vals[i], &c->labels[c->nlabels])) {
            char m[160];
            snprintf(m, sizeof m, "label '%.100s' is not key:value", vals[i]);
            reject(c, ERR_INVALID, m);
            return;
        }
        c->nlabels++;
    }
    const char *name = http_query(&rq, "name");
    if (name && strlen(name) > 512) {
        reject(c, ERR_INVALID, "name is longer than 512 bytes");
        return;
    }
    load_opts o = {name, c->labels, c->nlabels, a->cfg->max_events, 0};
    char err[256];
    c->ld = loader_new(a->st, &o, err, sizeof err);
    if (!c->ld) {
        reject(c, ERR_DB, err);
        return;
    }
    c->in = ingest_new(loader_sink(c->ld), gzip, a->cfg->max_inflated);
    if (!c->in) reject(c, ERR_NOMEM, "out of memory");
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
    if (rc == ERR_FORMAT && ingest_sniffed_sqlite(c->in))
        reject(c, ERR_FORMAT, "this is an SQLite file (an nsys export?): Nsight Systems import is not supported yet");
    else if (rc)
        reject(c, rc, ingest_error(c->in));
}

static void upload_end(app *a, struct conn *c, http_reply *out) {
    if (c->rejected) {
        *out = c->early;
        memset(&c->early, 0, sizeof c->early);
        return;
    }
    (void)a;
    int rc = ingest_finish(c->in);
    if (rc) {
        http_error(out, http_status_from_err(rc), http_code_from_err(rc), "%s", ingest_error(c->in));
        return;
    }
    loader_set_legacy(c->ld, ingest_top_is_array(c->in));
    long long id = 0;
    char err[256];
    rc = loader_commit(c->ld, c->received, &id, err, sizeof err);
    if (rc) {
        http_error(out, http_status_from_err(rc), http_code_from_err(rc), "%s", err);
        return;
    }
    snprintf(out->location, sizeof out->location, "/api/v1/sessions/%lld", id);
    http_json(out, 201, json_pack("{s:I,s:s,s:I}", "id", id, "url", out->location, "events", (json_int_t)ingest_event_count(c->in)));
}

/* ---- MHD callbacks ---- */

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
        if (!strcmp(method, "POST") && !strcmp(url, "/api/v1/sessions")) upload_begin(a, mc, c);
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
        http_req rq = {method, url, -1, mc, c->body, c->body_len};
        int r = routes_dispatch(a, &rq, &out);
        if (r == ROUTE_NONE) {
            if (strncmp(url, "/api/", 5) && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) serve_static(a, url, &out);
            else http_error(&out, 404, "not_found", "no route for %s %s", method, url);
        }
    }
    if (!out.status) http_error(&out, 500, "internal_error", "the handler gave no reply");
    return send_reply(mc, &out, method, url, &c->t0);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)mc; (void)toe;
    struct conn *c = *con_cls;
    if (!c) return;
    ingest_free(c->in);
    loader_free(c->ld); /* rolls back anything not committed: a dropped upload leaves nothing */
    release_slot(c);
    fp_labels_free(c->labels, c->nlabels);
    json_decref(c->early.json);
    free(c->early.text);
    free(c->body);
    free(c);
    *con_cls = NULL;
}

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

int http_serve(app *a) {
    g_app = a;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->cfg->port);
    if (inet_pton(AF_INET, a->cfg->bind, &sa.sin_addr) != 1) {
        fprintf(stderr, "firstpass-server: --bind %s is not an IPv4 address\n", a->cfg->bind);
        return 2;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG,
        (uint16_t)a->cfg->port, NULL, NULL, on_request, a,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        MHD_OPTION_CONNECTION_LIMIT, a->cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, a->cfg->timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, a->cfg->max_connections,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "firstpass-server: cannot listen on %s:%d: %s\n", a->cfg->bind, a->cfg->port, strerror(errno));
        return 1;
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "level=info msg=listening url=http://%s:%d/ db=%s\n", a->cfg->bind, a->cfg->port, a->cfg->db);
    while (!g_stop) pause();
    fprintf(stderr, "level=info msg=\"shutting down: finishing requests in flight\"\n");
    /* Stop accepting, then let thread-per-connection workers finish what they hold. */
    MHD_quiesce_daemon(d);
    for (int i = 0; i < 600; i++) {
        pthread_mutex_lock(&g_up_lock);
        unsigned n = g_uploads;
        pthread_mutex_unlock(&g_up_lock);
        if (!n) break;
        usleep(100 * 1000);
    }
    MHD_stop_daemon(d);
    return 0;
}
