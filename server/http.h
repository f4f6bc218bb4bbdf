/* http.h: the embedded HTTP server (libmicrohttpd) and the reply helpers handlers use.
 *
 * http.c owns the MHD daemon, per-connection state, body streaming and static files;
 * routes.c owns the route table and the handlers. Handlers get an http_req and return
 * an http_reply; they never touch MHD. */
#ifndef FP_HTTP_H
#define FP_HTTP_H

#include <jansson.h>
#include <stddef.h>

#include "store.h"

typedef struct server_cfg {
    const char *bind;          /* --bind, default 127.0.0.1 */
    int port;                  /* --port, default 8080 */
    const char *db;            /* --db, default var/firstpass.db */
    const char *static_dir;    /* --static, default static */
    unsigned long long max_upload;   /* --max-upload bytes as received, default 1 GiB */
    unsigned long long max_inflated; /* --max-inflated decompressed bytes, default 8 GiB */
    unsigned long long max_events;   /* --max-events per session, default 20,000,000 */
    unsigned max_connections;  /* --max-connections, default 256 */
    unsigned max_uploads;      /* --max-uploads concurrent, default 4 */
    unsigned timeout_s;        /* --timeout idle connection seconds, default 60 */
    int quiet;                 /* --quiet: no access log */
} server_cfg;

typedef struct app {
    const server_cfg *cfg;
    store *st;
    char static_root[4096];    /* realpath of static_dir, "" when absent */
} app;

/* One request as a handler sees it. */
typedef struct http_req {
    const char *method;
    const char *path;
    long long id;              /* {id} of the route, -1 when none */
    void *conn;                /* opaque: for http_query / http_header */
    const char *body;          /* small bodies only (PUT), NUL-terminated; NULL if none */
    size_t body_len;
} http_req;

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
} http_reply;

const char *http_query(const http_req *r, const char *key);  /* first value or NULL */
/* Every value of a repeated query key; returns the count (at most max). */
int http_query_all(const http_req *r, const char *key, const char **vals, int max);
const char *http_header(const http_req *r, const char *name);
/* 1 when the client asked for text/plain (Accept or ?format=text). */
int http_wants_text(const http_req *r);
int http_accepts_gzip(const http_req *r);

/* Reply builders: they fill *out and return 0. */
int http_json(http_reply *out, int status, json_t *body);   /* steals body */
int http_text(http_reply *out, int status, const char *ctype, char *text, size_t len); /* steals text */
int http_error(http_reply *out, int status, const char *code, const char *fmt, ...);
int http_status_from_err(int err);
const char *http_code_from_err(int err);

/* Starts the daemon; returns after SIGINT/SIGTERM with in-flight requests finished. */
int http_serve(app *a);

#endif
