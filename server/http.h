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
    const char *tokens_file;   /* --tokens-file: bearer tokens (auth.h); NULL: no auth */
    int read_auth;             /* --read-auth: GET/HEAD of /api/ need a token too */
    unsigned long long cache_bytes; /* --cache-bytes: reply cache (rcache.h), default 64 MiB; 0 off */
    unsigned long long retain_days;  /* --retain-days: prune sessions older than this (retention.h); 0 off */
    unsigned long long max_db_bytes; /* --max-db-bytes: prune oldest while pages in use exceed it; 0 off */
    unsigned retain_interval_s;      /* --retain-interval seconds between retention passes, default 300 */
    unsigned long long vacuum_min_bytes; /* --vacuum-min-bytes: retention VACUUMs when this much is free; 0 never */
    const char *backup_dir;          /* --backup-dir for POST /api/v1/admin/backup; "" when off */
} server_cfg;

typedef struct app {
    const server_cfg *cfg;
    store *st;
    char static_root[4096];    /* realpath of static_dir, "" when absent */
    struct auth_tokens *tokens; /* from cfg->tokens_file; NULL: every request is allowed */
    struct rcache *cache;      /* rendered read replies (rcache.h); NULL: none */
} app;

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
} http_reply;

const char *http_query(const http_req *r, const char *key);  /* first value or NULL */
/* Every value of a repeated query key, the first max of them in vals; returns how many
 * the request has (which may exceed max: the caller then refuses the request). */
int http_query_all(const http_req *r, const char *key, const char **vals, int max);
const char *http_header(const http_req *r, const char *name);
/* 1 when the client asked for text/plain (Accept or ?format=text). */
int http_wants_text(const http_req *r);
int http_accepts_gzip(const http_req *r);

/* Reply builders: they fill *out and return 0. */
int http_json(http_reply *out, int status, json_t *body);   /* steals body */
int http_text(http_reply *out, int status, const char *ctype, char *text, size_t len); /* steals text */
int http_error(http_reply *out, int status, const char *code, const char *fmt, ...);
/* Turns a JSON reply into the text send_reply would send (compact JSON and a newline,
 * application/json), so that a caller can keep the bytes. 0, or ERR_NOMEM. */
int http_render(http_reply *r);
/* The query arguments as "k=v&k2=v2" in request order (decoded); writes at most n bytes
 * (NUL included) and returns the full length, like snprintf. */
size_t http_query_string(const http_req *r, char *out, size_t n);
int http_status_from_err(int err);
const char *http_code_from_err(int err);

/* Blocks SIGINT and SIGTERM in the calling thread and so in every thread it creates later:
 * call it first in main(), before any thread, so that only http_serve's sigwait takes them. */
void http_block_stop_signals(void);

/* Starts the daemon; returns after SIGINT/SIGTERM with in-flight requests finished. */
int http_serve(app *a);

/* Holds new uploads off (503, retry later) for a VACUUM: 0 when no upload is in flight and
 * none will start until http_uploads_resume; ERR_CONFLICT when uploads are in flight. */
int http_uploads_pause(void);
void http_uploads_resume(void);

#endif
