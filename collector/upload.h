/* upload.h -- gzip, HTTP upload with libcurl, and the spool directory. */
#ifndef FP_COLLECTOR_UPLOAD_H
#define FP_COLLECTOR_UPLOAD_H

#include <signal.h>
#include <stddef.h>
#include <zlib.h>

#include "membuf.h"

/* The most bytes of an upload's reply that are read (the server's {"id","url","events"} is
 * under 200): a longer reply is cut there and the upload counts as failed. */
#define FP_UPLOAD_REPLY_MAX (64 * 1024)

typedef struct fp_upload_opts {
    const char *server;      /* base URL, e.g. "http://host:8080"; NULL = no server */
    const char *token;       /* bearer token or NULL */
    long connect_timeout_s;  /* CURLOPT_CONNECTTIMEOUT; <= 0 means 5 */
    long timeout_s;          /* CURLOPT_TIMEOUT: the whole request, from the name lookup to the
                              * reply's last byte, however slowly it trickles; <= 0 means 60 */
    const char *query;       /* already-encoded query string without '?', or NULL */
    const volatile sig_atomic_t *abort_flag; /* non-zero aborts a transfer in flight; NULL */
    const char *idempotency_key; /* sent as Idempotency-Key (fp_spool_key's form), or NULL */
    long *retry_after_s;     /* out, NULL: not wanted: the reply's Retry-After in seconds, 0 none */
    void (*tick)(void *);    /* NULL, or called with tick_ud about once a second while a
                              * transfer runs (the agent's health file: a long upload is progress) */
    void *tick_ud;
} fp_upload_opts;

/* Streaming gzip sink usable as an fp_write_fn: deflate into a growable buffer. */
typedef struct fp_gz {
    z_stream zs;
    fp_membuf out;
    int err;
    int init;
} fp_gz;
int fp_gz_init(fp_gz *g);                           /* 0 or -1 */
int fp_gz_write(void *gz, const char *p, size_t n); /* fp_write_fn */
int fp_gz_finish(fp_gz *g);  /* ends the stream; result in g->out.p / g->out.len. 0 or -1 */
void fp_gz_free(fp_gz *g);

/* POSTs body (n bytes; gzip-encoded if gzipped, which adds Content-Encoding: gzip) to
 * <server>/api/v1/sessions[?query], with Authorization: Bearer when a token is set,
 * Idempotency-Key when o has one, and bounded timeouts. *status gets the HTTP status (0 if no
 * response). The reply body, cut to resplen-1 bytes and NUL-terminated, goes to resp when it
 * is not NULL. Returns 0 when the server answered 201 with a JSON object holding a positive
 * integer "id" (firstpass's reply; a 201 without one, a proxy's page or `{}`, confirms
 * nothing), or, with an idempotency key, 200 with one (the server had that key stored: its
 * session's reply); -1 otherwise, also when the reply passes FP_UPLOAD_REPLY_MAX (never exits,
 * logs nothing: the caller decides). A 409 with a key means an upload of that key is in
 * flight on the server: try again after *o->retry_after_s. */
int fp_upload_mem(const fp_upload_opts *o, const void *body, size_t n, int gzipped,
                  long *status, char *resp, size_t resplen);

/* As fp_upload_mem for a file, streamed from disk; gzip is detected from the magic bytes.
 * Returns 0 on a 201 with a session id, -1 otherwise; errbuf (if any) gets a reason. */
int fp_upload_file(const fp_upload_opts *o, const char *path, long *status, char *resp,
                   size_t resplen, char *errbuf, size_t errlen);

/* As fp_upload_file for an open descriptor (read from offset 0; fd stays open): what the
 * agent checked is what it sends, never a second open by path. */
int fp_upload_fd(const fp_upload_opts *o, int fd, long *status, char *resp, size_t resplen,
                 char *errbuf, size_t errlen);

/* 1 when status is a refusal of the document itself (a 4xx other than 401, 403, 408, 409,
 * 429: sending it again would be refused again), 0 when it may be worth another try. */
int fp_upload_refused(long status);

/* The Idempotency-Key of a spooled file's name: the file_id of the agent's watch-<id>.json.gz,
 * else the name without .json.gz / .json when it is [A-Za-z0-9._-]{1,64}, else "h" and 16 hex
 * digits of its hash. What the first upload of that document sent too, so that the server
 * stores it once whichever upload got there (out: 65 bytes). */
void fp_spool_key(const char *name, char out[65]);

/* Spool directory: $FIRSTPASS_SPOOL, else $XDG_STATE_HOME/firstpass/spool (XDG_STATE_HOME
 * absolute), else $HOME/.local/state/firstpass/spool (HOME an absolute path to a directory
 * the effective user owns), else /tmp/firstpass-spool-$UID. Writes it to buf. With create,
 * also fp_spool_prepare's creation and check. 0, or -1 if it cannot be named, created or is
 * refused. */
int fp_spool_dir(char *buf, size_t len, int create);

/* 0 when dir is the user's own spool directory: lstat'ed (a symlink is refused, never
 * followed), a directory, no other permission bits, and either owned by the effective user
 * with no group bits (0700), or a group's (a Kubernetes fsGroup volume, issue 53): setgid,
 * group rwx, its group one of the process's groups, owned by the effective user or root.
 * Else -1 with the reason and the fix in why, errno EPERM (or lstat's errno, ENOENT when
 * missing). Why: /tmp/firstpass-spool-$UID can be made first by another local user, who then
 * reads what is spooled and plants files that firstpass-upload sends with the victim's token
 * (issue 43); a group directory trusts every member of its group. */
int fp_spool_check(const char *dir, char *why, size_t whylen);

/* The one spool rule for the collector and firstpass-upload: dir, or fp_spool_dir's name
 * when dir is NULL or empty, into buf; created (mkdir -p, 0700) when create is set; then
 * fp_spool_check. 0 ready, 1 does not exist (only without create), -1 refused or failed
 * (why says which). */
int fp_spool_prepare(const char *dir, int create, char *buf, size_t len, char *why, size_t whylen);

/* A spool file being written as a gzip stream (the agent's session documents: streamed, not
 * built in memory, issue 50): dir/.name.tmp, then fsync and rename. */
typedef struct fp_spool_out {
    int fd;
    gzFile gz;
    char tmp[4096], fin[4096];
} fp_spool_out;
int fp_spool_begin(fp_spool_out *s, const char *dir, const char *name); /* 0 or -1 (errno) */
int fp_spool_commit(fp_spool_out *s); /* ends the stream, fsync, rename: 0, or -1 (tmp removed) */
void fp_spool_abort(fp_spool_out *s); /* tmp removed */

/* Writes data atomically into dir as name: dir/.name.tmp, fsync, rename. The final path goes
 * to path (if not NULL). 0 or -1 (tmp file removed). */
int fp_spool_write(const char *dir, const char *name, const void *data, size_t n, char *path,
                   size_t pathlen);

/* Delivers one gzipped session: writes it to the spool directory as name first (so that a
 * kill during the upload loses nothing), then, when o->server is set, uploads it within o's
 * timeouts and removes the spooled file on HTTP 201. Logs one line. Returns 0 uploaded
 * (nothing left in the spool), 1 spooled (upload failed, aborted or not configured), -1 lost
 * (spooling and the upload both failed: logged). */
int fp_deliver(const fp_upload_opts *o, const void *gz, size_t n, const char *name);

/* curl_global_init once, thread-safe. 0 or -1. */
int fp_upload_global_init(void);

/* What every request to the server shares, set on a curl easy handle (a CURL *): the
 * Authorization: Bearer header when o->token is set (appended to *headers, which the
 * caller then sets and frees), no signals, o's timeouts (5 s connect, 60 s total when 0)
 * and cerr (CURL_ERROR_SIZE bytes) as the error buffer. */
struct curl_slist;
void fp_curl_common(void *curl, const fp_upload_opts *o, struct curl_slist **headers, char *cerr);

#endif
