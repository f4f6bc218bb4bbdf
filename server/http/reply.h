/* reply.h: one request as a handler sees it, the reply it builds, and the error table.
 *
 * reply.c owns the request accessors (query arguments, headers: the only MHD calls a
 * handler makes, through these), the reply builders and the one table that turns an
 * ERR_* (lib/err.h) into a status and an error code. Handlers get an http_req, fill an
 * http_reply and never touch MHD; http.c sends the reply. */
#ifndef FP_REPLY_H
#define FP_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "session.h"

/* One request as a handler sees it. */
typedef struct http_req {
    const char *method;
    const char *path;
    long long id;              /* {id} of the route, -1 when none */
    void *conn;                /* opaque: for http_query / http_header */
    const char *body;          /* small bodies only (PUT), NUL-terminated; NULL if none */
    size_t body_len;
    unsigned *vary;            /* http.c's: the request headers that chose the reply (HTTP_VARY_*) */
} http_req;

#define HTTP_VARY_ACCEPT 1u
#define HTTP_VARY_ACCEPT_ENCODING 2u

/* A reply: status plus either json (owned), text (owned, malloc'd) or a stream. */
typedef struct http_reply {
    int status;
    json_t *json;
    char *text;
    size_t text_len;
    const char *content_type;  /* for text; static string */
    char location[128];        /* Location header when non-empty */
    char allow[64];            /* Allow header (405) when non-empty */
    char disposition[160];     /* Content-Disposition when non-empty */
    int gzip_encoded;          /* the body is gzip: Content-Encoding: gzip */
    /* streaming reply: read(cls, pos, buf, max) like MHD's content reader; free(cls) */
    long (*stream_read)(void *cls, unsigned long long pos, char *buf, size_t max);
    void (*stream_free)(void *cls);
    void *stream_cls;
    const char *www_authenticate; /* WWW-Authenticate header (401) when set; static string */
    unsigned vary;             /* HTTP_VARY_*: set by http.c from what the handler consulted */
    const char *user;          /* http.c's: the token NAME for the access log, or NULL */
    int close;                 /* http.c's: Connection: close (the request's framing is not trusted) */
    int retry_after;           /* Retry-After: seconds (a 409 of a key in flight) when > 0 */
} http_reply;

const char *http_query(const http_req *r, const char *key);  /* first value or NULL */
/* Every value of a repeated query key, the first max of them in vals; returns how many
 * the request has (which may exceed max: the caller then refuses the request). */
int http_query_all(const http_req *r, const char *key, const char **vals, int max);
const char *http_header(const http_req *r, const char *name);
/* 1 when the client has closed its side of the connection or reset it (a long reply nobody
 * will read can stop: query_timeline's gone callback; a long poll: capture.c); cls is the
 * http_req. */
int http_client_gone(void *cls);
/* 1 when the client asked for text/plain (Accept or ?format=text). */
int http_wants_text(const http_req *r);
int http_accepts_gzip(const http_req *r);

/* Reply builders: they fill *out and return 0. */
int http_json(http_reply *out, int status, json_t *body);   /* steals body */
int http_text(http_reply *out, int status, const char *ctype, char *text, size_t len); /* steals text */
/* The error reply for err (an ERR_*: its status and code from the table in reply.c) with
 * the message fmt: {"error":{"code","message"}}. Returns err, so that a handler can end
 * with `return http_error(out, ERR_PARAM, ...)`; ERR_OK (never an error) becomes 500. */
int http_error(http_reply *out, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Turns a JSON reply into the text send_reply would send (compact JSON and a newline,
 * application/json), so that a caller can keep the bytes. 0, or ERR_NOMEM. */
int http_render(http_reply *r);
/* The reply cache's key of the request (rcache.h): its path, its query arguments in request
 * order and its Accept header, each name and value percent-encoded, so that two requests
 * share a key only when all of those are the same (a decoded "k=v&k2=v2" could not tell
 * ?a%3Db%26c=1 from ?a=b&c=1). 0 with the key in key; -1 and "" when it is n bytes or
 * longer (the reply is then not cached). */
int http_cache_key(const http_req *r, char *key, size_t n);
/* The status and code of err's row (500 internal_error for a value with none). */
int http_status_from_err(int err);
/* err's row: 0 with *status and *code, -1 when the table has none (a test checks each ERR_*). */
int http_err_row(int err, int *status, const char **code);
const char *http_code_from_err(int err);


/* ---- parameters every route reads alike ---- */

#define HTTP_LABELS_MAX 64 /* ?label= parameters of one request at most (routes may allow fewer) */
#define HTTP_TEXT_MAX 512  /* bytes of a ?name= or one ?label= */

/* The ?label=key:value parameters, parsed by the one label parser (api/session.h
 * fp_label_parse_one: split on the first ':', both sides trimmed, non-empty key, UTF-8),
 * at most max of them, each at most HTTP_TEXT_MAX bytes. 0 with a new array in *labels
 * (free with fp_labels_free(*labels, *n)), or ERR_PARAM / ERR_NOMEM with the error reply
 * in *out. The upload stores what the list filter then matches: the same parser. */
int http_labels(const http_req *rq, http_reply *out, int max, fp_label **labels, size_t *n);
/* ?name=: NULL when absent; ERR_PARAM (reply in *out) when not UTF-8 or too long. */
int http_name(const http_req *rq, http_reply *out, const char **name);

#endif
