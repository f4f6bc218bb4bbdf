/* reply.c: request accessors, reply builders and the one error table (reply.h).
 *
 * Owns reply_errors: every ERR_* of lib/err.h and the status and code it is sent as. No
 * handler writes a status or a code of its own for an error; http_error looks them up. */
#include "http/reply.h"

#include <errno.h>
#include <microhttpd.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/utf8.h"
#include "session.h"

/* The error table: one row per ERR_* (tests/unit/test_reply.c walks ERR_LAST..-1). */
static const struct {
    int err;
    int status;
    const char *code;
} reply_errors[] = {
    {ERR_NOMEM, 500, "out_of_memory"},
    {ERR_IO, 500, "internal_error"},
    {ERR_PARSE, 400, "invalid_json"},
    {ERR_INVALID, 400, "invalid_trace"},
    {ERR_NOTTRACE, 422, "not_a_trace"},
    {ERR_NOTFOUND, 404, "not_found"},
    {ERR_DB, 500, "database_error"},
    {ERR_TOOBIG, 413, "too_large"},
    {ERR_FORMAT, 415, "unsupported_media_type"},
    {ERR_CONFLICT, 409, "conflict"},
    {ERR_INTERNAL, 500, "internal_error"},
    {ERR_PARAM, 400, "invalid_parameter"},
    {ERR_AUTH, 401, "unauthorized"},
    {ERR_DENIED, 403, "forbidden"},
    {ERR_METHOD, 405, "method_not_allowed"},
    {ERR_BUSY, 503, "too_many_uploads"},
    {ERR_BAD_REPORT, 422, "invalid_report"},
    {ERR_BAD_BASELINE, 422, "invalid_baseline"},
    {ERR_NOSESSION, 422, "unknown_session"},
    {ERR_OFF, 403, "backups_disabled"},
    {ERR_RUNNING, 409, "backup_running"},
    {ERR_BACKUP, 500, "backup_failed"},
    {ERR_REQUEST, 400, "bad_request"},
    {ERR_FULL, 507, "insufficient_storage"},
    {ERR_DBDOWN, 503, "database_unreachable"},
    {ERR_RATE, 429, "rate_limited"},
};

static int row_of(int err) {
    for (size_t i = 0; i < sizeof reply_errors / sizeof reply_errors[0]; i++)
        if (reply_errors[i].err == err) return (int)i;
    return -1;
}

int http_err_row(int err, int *status, const char **code) {
    int i = row_of(err);
    if (i < 0) return -1;
    *status = reply_errors[i].status;
    *code = reply_errors[i].code;
    return 0;
}

int http_status_from_err(int err) {
    int i = row_of(err);
    return i < 0 ? 500 : reply_errors[i].status;
}

const char *http_code_from_err(int err) {
    int i = row_of(err);
    return i < 0 ? "internal_error" : reply_errors[i].code;
}

/* Why the message is scrubbed: it often quotes the client (a path, a parameter's value,
 * ?limit=%ff), and Jansson refuses text that is not UTF-8: json_pack returned NULL and the
 * reply went out labelled JSON with no body at all (issue 43). Bytes that start no valid
 * UTF-8 sequence are shown as U+FFFD, and a message cut at its buffer's end inside a
 * character loses that character's first bytes (utf8_snprintf). Should Jansson still fail
 * (no memory), the body is a fixed one: an error reply is never empty. */
int http_error(http_reply *out, int err, const char *fmt, ...) {
    char msg[512], clean[3 * sizeof msg];
    va_list ap;
    va_start(ap, fmt);
    utf8_vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clean[utf8_scrub(msg, strlen(msg), clean)] = '\0';
    if (!err) err = ERR_INTERNAL; /* an error reply for "no error" is a bug, shown as one */
    json_decref(out->json);
    out->json = NULL;
    free(out->text);
    out->text = NULL;
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", http_code_from_err(err), "message", clean);
    if (body) {
        http_json(out, http_status_from_err(err), body);
        return err;
    }
    static const char fixed[] = "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}\n";
    char *t = malloc(sizeof fixed);
    if (t) memcpy(t, fixed, sizeof fixed);
    http_text(out, t ? 500 : http_status_from_err(err), "application/json", t, t ? sizeof fixed - 1 : 0);
    return err;
}

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

/* The reply cache's key (reply.h). Why every part is percent-encoded: MHD hands over the
 * query decoded, and a key written from decoded values ("k=v&k2=v2") could not tell
 * ?sort%3Dcalls%26limit=1 (one parameter, "sort=calls&limit", = "1") from
 * ?sort=calls&limit=1: the first one's reply was then served for the second (issue 43).
 * Encoded, no part holds a separator ('?', '&', '=', ' '), so two requests share a key
 * only when their path, parameters (names, values, order, a name without '=') and Accept
 * are the same. */
typedef struct ckey { char *out; size_t n, len; } ckey;

static void ckey_put(ckey *k, const char *s, size_t len) {
    if (k->len < k->n) memcpy(k->out + k->len, s, k->len + len < k->n ? len : k->n - k->len);
    k->len += len;
}
static void ckey_enc(ckey *k, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~:,/*", (int)c)) {
            char ch = (char)c;
            ckey_put(k, &ch, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            ckey_put(k, e, 3);
        }
    }
}
static enum MHD_Result ckey_arg(void *cls, enum MHD_ValueKind kind, const char *name, const char *v) {
    (void)kind;
    ckey *k = cls;
    ckey_put(k, "&", 1);
    ckey_enc(k, name);
    if (v) { /* ?a and ?a= are told apart: MHD gives NULL for the first, "" for the second */
        ckey_put(k, "=", 1);
        ckey_enc(k, v);
    }
    return MHD_YES;
}
int http_cache_key(const http_req *r, char *key, size_t n) {
    ckey k = {key, n, 0};
    const char *acc = http_header(r, "Accept");
    ckey_enc(&k, r->path);
    ckey_put(&k, "?", 1);
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, ckey_arg, &k);
    ckey_put(&k, " ", 1);
    if (acc) ckey_enc(&k, acc);
    if (k.len >= n) {
        if (n) key[0] = '\0';
        return -1;
    }
    key[k.len] = '\0';
    return 0;
}

int http_text(http_reply *out, int status, const char *ctype, char *text, size_t len) {
    out->status = status;
    out->text = text;
    out->text_len = len;
    out->content_type = ctype;
    return 0;
}

int http_client_gone(void *cls) {
    const http_req *r = cls;
    if (!r || !r->conn) return 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char c;
    /* 0: an orderly close (EOF); < 0 with an error other than "nothing yet": a reset (an RST
     * reports ECONNRESET on the first recv, then 0; issue 50: a long poll on a reset connection
     * went on and claimed a capture for nobody); bytes or EAGAIN: still there (a pipelined
     * request is data) */
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- parameters every route reads alike ---- */

int http_labels(const http_req *rq, http_reply *out, int max, fp_label **labels, size_t *n) {
    const char *vals[HTTP_LABELS_MAX];
    *labels = NULL;
    *n = 0;
    if (max > HTTP_LABELS_MAX) max = HTTP_LABELS_MAX;
    int nl = http_query_all(rq, "label", vals, max);
    if (nl > max) return http_error(out, ERR_PARAM, "at most %d label parameters, not %d", max, nl);
    fp_label *l = calloc((size_t)nl + 1, sizeof *l);
    if (!l) return http_error(out, ERR_NOMEM, "out of memory");
    for (int i = 0; i < nl; i++) {
        size_t len = strlen(vals[i]);
        int rc = 0;
        if (!fp_utf8_valid(vals[i], len)) rc = http_error(out, ERR_PARAM, "label %d (of %d) is not valid UTF-8", i + 1, nl);
        else if (len > HTTP_TEXT_MAX) rc = http_error(out, ERR_PARAM, "label %d (of %d) is longer than %d bytes", i + 1, nl, HTTP_TEXT_MAX);
        else if (fp_label_parse_one(vals[i], &l[i]))
            rc = http_error(out, ERR_PARAM, "label '%.100s' is not key:value with a non-empty key", vals[i]);
        if (rc) {
            fp_labels_free(l, (size_t)i);
            return rc;
        }
    }
    *labels = l;
    *n = (size_t)nl;
    return 0;
}

int http_name(const http_req *rq, http_reply *out, const char **name) {
    *name = http_query(rq, "name");
    if (!*name) return 0;
    if (!fp_utf8_valid(*name, strlen(*name))) return http_error(out, ERR_PARAM, "name is not valid UTF-8");
    if (strlen(*name) > HTTP_TEXT_MAX) return http_error(out, ERR_PARAM, "name is longer than %d bytes", HTTP_TEXT_MAX);
    return 0;
}
