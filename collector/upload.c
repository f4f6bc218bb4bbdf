/* upload.c -- gzip encoding, the HTTP POST of a session, and the spool directory.
 *
 * Owns every libcurl and zlib handle of the collector and the spool file layout
 * (<spool>/<name>.json.gz, written as .<name>.tmp then renamed). Must not see CUPTI types or
 * the aggregator; it moves bytes. Never exits: every failure is a return code. */
#include "upload.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* ---- gzip ------------------------------------------------------------------------------- */

int fp_gz_init(fp_gz *g)
{
    memset(g, 0, sizeof *g);
    /* windowBits 15 + 16: gzip wrapper, not zlib */
    if (deflateInit2(&g->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    g->init = 1;
    return 0;
}

static int gz_pump(fp_gz *g, int flush)
{
    char chunk[65536];
    int zr;
    do {
        g->zs.next_out = (Bytef *)chunk;
        g->zs.avail_out = sizeof chunk;
        zr = deflate(&g->zs, flush);
        if (zr == Z_STREAM_ERROR)
            return -1;
        if (fp_membuf_write(&g->out, chunk, sizeof chunk - g->zs.avail_out) != 0)
            return -1;
    } while (g->zs.avail_out == 0);
    return (flush == Z_FINISH && zr != Z_STREAM_END) ? -1 : 0;
}

int fp_gz_write(void *gz, const char *p, size_t n)
{
    fp_gz *g = gz;
    if (g->err || !g->init)
        return -1;
    while (n > 0) {
        uInt take = n > (1u << 30) ? (1u << 30) : (uInt)n;
        g->zs.next_in = (Bytef *)p;
        g->zs.avail_in = take;
        if (gz_pump(g, Z_NO_FLUSH) != 0) {
            g->err = 1;
            return -1;
        }
        p += take;
        n -= take;
    }
    return 0;
}

int fp_gz_finish(fp_gz *g)
{
    if (g->err || !g->init)
        return -1;
    g->zs.next_in = NULL;
    g->zs.avail_in = 0;
    if (gz_pump(g, Z_FINISH) != 0) {
        g->err = 1;
        return -1;
    }
    return 0;
}

void fp_gz_free(fp_gz *g)
{
    if (g->init)
        deflateEnd(&g->zs);
    fp_membuf_free(&g->out);
    g->init = 0;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc = -1; /* written once under curl_once */

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

/* libcurl's progress callback (it runs about once a second even when no byte moves): the
 * caller's tick, and non-zero aborts the transfer (the collector's exit or SIGTERM). */
static int on_progress(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    const fp_upload_opts *o = ud;
    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    if (o->tick)
        o->tick(o->tick_ud);
    return o->abort_flag && *o->abort_flag ? 1 : 0;
}

void fp_curl_common(void *curl, const fp_upload_opts *o, struct curl_slist **headers, char *cerr)
{
    CURL *c = curl;
    char auth[1100];
    if (o->token && o->token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        *headers = curl_slist_append(*headers, auth);
    }
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* we run in other people's processes */
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s > 0 ? o->connect_timeout_s : 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, o->timeout_s > 0 ? o->timeout_s : 60L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    if (o->abort_flag || o->tick) {
        /* o must outlive the transfer: every caller's opts live on its stack across perform */
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)o);
    }
}

int fp_upload_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
    return curl_init_rc;
}

/* The reply, read into a buffer of FP_UPLOAD_REPLY_MAX bytes; more aborts the transfer. */
typedef struct resp_buf {
    char *p;
    size_t len;
    int over; /* the reply was longer than FP_UPLOAD_REPLY_MAX: cut there */
} resp_buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    resp_buf *r = ud;
    size_t n = size * nmemb;
    if (n > FP_UPLOAD_REPLY_MAX - r->len) {
        r->over = 1;
        return 0; /* CURLE_WRITE_ERROR: the rest is never read (a 400 MB error page) */
    }
    memcpy(r->p + r->len, data, n);
    r->len += n;
    r->p[r->len] = '\0';
    return n;
}

/* 1 when reply (len bytes) is firstpass's answer to an upload: a JSON object whose "id" is a
 * positive integer. */
static int has_session_id(const char *reply, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(reply, len, 0, &je);
    json_t *id = json_object_get(j, "id");
    int ok = json_is_integer(id) && json_integer_value(id) > 0;
    json_decref(j);
    return ok;
}

static int url_for(const fp_upload_opts *o, char *buf, size_t len)
{
    size_t n;
    int w;
    if (o->server == NULL || o->server[0] == '\0')
        return -1;
    n = strlen(o->server);
    while (n > 0 && o->server[n - 1] == '/')
        n--;
    w = snprintf(buf, len, "%.*s/api/v1/sessions%s%s", (int)n, o->server,
                 o->query && o->query[0] ? "?" : "", o->query ? o->query : "");
    return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

/* Common setup and perform; body either in memory (mem, n) or from a FILE (fp, n). 0 on a 201
 * with a session id; else -1 with the reason in errbuf. */
static int do_post(const fp_upload_opts *o, const void *mem, FILE *fp, size_t n, int gzipped,
                   long *status, char *resp, size_t resplen, char *errbuf, size_t errlen)
{
    CURL *c;
    struct curl_slist *h = NULL;
    char url[2048], cerr[CURL_ERROR_SIZE], why[CURL_ERROR_SIZE + 64] = "", key[128];
    resp_buf rb = {NULL, 0, 0};
    CURLcode cr;
    int rc = -1;

    *status = 0;
    if (resp && resplen)
        resp[0] = '\0';
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (url_for(o, url, sizeof url) != 0) {
        if (errbuf)
            snprintf(errbuf, errlen, "no server URL");
        return -1;
    }
    if (fp_upload_global_init() != 0) {
        if (errbuf)
            snprintf(errbuf, errlen, "curl_global_init failed");
        return -1;
    }
    rb.p = malloc(FP_UPLOAD_REPLY_MAX + 1);
    c = rb.p ? curl_easy_init() : NULL;
    if (c == NULL) {
        if (errbuf)
            snprintf(errbuf, errlen, "out of memory");
        free(rb.p);
        return -1;
    }
    rb.p[0] = '\0';
    cerr[0] = '\0';
    h = curl_slist_append(h, "Content-Type: application/json");
    if (gzipped)
        h = curl_slist_append(h, "Content-Encoding: gzip");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (o->idempotency_key && o->idempotency_key[0]) {
        /* the server stores one session per key, and answers a key stored (200) or in flight
         * (409) without storing again: a resend after a lost reply lands once */
        snprintf(key, sizeof key, "Idempotency-Key: %.64s", o->idempotency_key);
        h = curl_slist_append(h, key);
    }
    if (o->retry_after_s)
        *o->retry_after_s = 0;
    fp_curl_common(c, o, &h, cerr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &rb);
    /* a declared Content-Length over the cap is refused before any byte of the body */
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)FP_UPLOAD_REPLY_MAX);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "firstpass-collector/1");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    if (fp) {
        curl_easy_setopt(c, CURLOPT_READDATA, fp); /* default read function: fread */
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, mem);
    }
    cr = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status); /* known once a head came */
    if (o->retry_after_s) {
        curl_off_t ra = 0;
        if (curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
            *o->retry_after_s = ra > 86400 ? 86400 : (long)ra; /* a day at most, whatever it says */
    }
    int stored = *status == 201 || (*status == 200 && o->idempotency_key && o->idempotency_key[0]);
    if (rb.over || cr == CURLE_FILESIZE_EXCEEDED)
        snprintf(why, sizeof why, "HTTP %ld with a reply over %d bytes (not read)", *status,
                 FP_UPLOAD_REPLY_MAX);
    else if (cr != CURLE_OK) {
        *status = 0; /* no complete answer: a timeout mid-reply is no answer */
        snprintf(why, sizeof why, "%s", cerr[0] ? cerr : curl_easy_strerror(cr));
    } else if (!stored)
        snprintf(why, sizeof why, "HTTP %ld", *status);
    else if (!has_session_id(rb.p, rb.len))
        snprintf(why, sizeof why, "HTTP %ld without a session id in the reply (not a firstpass "
                                  "server's answer)", *status);
    else
        rc = 0;
    if (rc != 0 && errbuf)
        snprintf(errbuf, errlen, "%s", why);
    if (resp && resplen)
        snprintf(resp, resplen, "%s", rb.p);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(rb.p);
    return rc;
}

int fp_upload_mem(const fp_upload_opts *o, const void *body, size_t n, int gzipped,
                  long *status, char *resp, size_t resplen)
{
    return do_post(o, body, NULL, n, gzipped, status, resp, resplen, NULL, 0);
}

/* Uploads the regular file open as fp (from offset 0). */
static int post_stream(const fp_upload_opts *o, FILE *fp, long *status, char *resp, size_t resplen,
                       char *errbuf, size_t errlen)
{
    unsigned char magic[2] = {0, 0};
    struct stat st;
    int gz;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (errbuf)
            snprintf(errbuf, errlen, "not a regular file");
        return -1;
    }
    gz = fread(magic, 1, 2, fp) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    rewind(fp);
    return do_post(o, NULL, fp, (size_t)st.st_size, gz, status, resp, resplen, errbuf, errlen);
}

int fp_upload_file(const fp_upload_opts *o, const char *path, long *status, char *resp,
                   size_t resplen, char *errbuf, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    int rc;
    *status = 0;
    if (fp == NULL) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    rc = post_stream(o, fp, status, resp, resplen, errbuf, errlen);
    fclose(fp);
    return rc;
}

int fp_upload_fd(const fp_upload_opts *o, int fd, long *status, char *resp, size_t resplen,
                 char *errbuf, size_t errlen)
{
    int d = dup(fd);
    FILE *fp = d >= 0 ? fdopen(d, "rb") : NULL;
    int rc;
    *status = 0;
    if (fp == NULL) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read: %s", strerror(errno));
        if (d >= 0)
            close(d);
        return -1;
    }
    rc = post_stream(o, fp, status, resp, resplen, errbuf, errlen); /* rewinds: the shared offset is 0 after */
    fclose(fp);
    return rc;
}

int fp_upload_refused(long status)
{
    return status >= 400 && status < 500 && status != 401 && status != 403 && status != 408 && status != 409 &&
           status != 429;
}

void fp_spool_key(const char *name, char out[65])
{
    const char *base = strrchr(name, '/');
    size_t n;
    base = base ? base + 1 : name;
    n = strlen(base);
    if (n > 8 && strcmp(base + n - 8, ".json.gz") == 0)
        n -= 8;
    else if (n > 5 && strcmp(base + n - 5, ".json") == 0)
        n -= 5;
    if (n == 22 && strncmp(base, "watch-", 6) == 0 && strspn(base + 6, "0123456789abcdef") >= 16) {
        snprintf(out, 65, "%.16s", base + 6); /* the agent's file_id: its direct upload's key */
        return;
    }
    size_t ok = strspn(base, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
    if (n > 0 && n <= 64 && ok >= n) {
        snprintf(out, 65, "%.*s", (int)n, base);
        return;
    }
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)base[i]) * 1099511628211ull;
    snprintf(out, 65, "h%016llx", h);
}

/* ---- spool ------------------------------------------------------------------------------ */

/* mkdir -p with mode 0700 for the created components. */
static int mkdirs(const char *path)
{
    char tmp[4096];
    size_t i, n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
                return -1;
            tmp[i] = c;
        }
    }
    return 0;
}

/* 1 when path (symlinks followed: a home may be one) is a directory the effective user owns. */
static int owned_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

int fp_spool_dir(char *buf, size_t len, int create)
{
    const char *s = getenv("FIRSTPASS_SPOOL");
    const char *x = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char why[512];
    int w;
    if (create)
        return fp_spool_prepare(NULL, 1, buf, len, why, sizeof why) == 0 ? 0 : -1;
    if (s && s[0])
        w = snprintf(buf, len, "%s", s);
    else if (x && x[0] == '/')
        w = snprintf(buf, len, "%s/firstpass/spool", x);
    else if (home && home[0] == '/' && owned_dir(home))
        w = snprintf(buf, len, "%s%s.local/state/firstpass/spool", home,
                     home[strlen(home) - 1] == '/' ? "" : "/");
    else
        w = snprintf(buf, len, "/tmp/firstpass-spool-%u", (unsigned)getuid());
    return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

/* 1 when gid is the effective group or a supplementary group of this process. */
static int in_group(gid_t gid)
{
    gid_t g[256];
    int n = getgroups(256, g);
    if (gid == getegid())
        return 1;
    for (int i = 0; i < n; i++)
        if (g[i] == gid)
            return 1;
    return 0;
}

/* A directory of a group this process is in, that only that group (and its owner: this user
 * or root) can reach: what a Kubernetes fsGroup volume makes of it (mode 2770). */
static int group_dir_ok(const struct stat *st)
{
    mode_t m = st->st_mode & 07777;
    return (m & S_ISGID) && (m & 070) == 070 && !(m & 007) && in_group(st->st_gid) &&
           (st->st_uid == geteuid() || st->st_uid == 0);
}

int fp_spool_check(const char *dir, char *why, size_t whylen)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        int e = errno;
        snprintf(why, whylen, "%s: %s", dir, strerror(e));
        errno = e;
        return -1;
    }
    unsigned mode = (unsigned)(st.st_mode & 07777);
    if (S_ISLNK(st.st_mode))
        snprintf(why, whylen, "%s is a symbolic link, not a directory of yours: refused", dir);
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, whylen, "%s is not a directory", dir);
    else if (group_dir_ok(&st) || (st.st_uid == geteuid() && !(st.st_mode & 077)))
        return 0;
    else if (st.st_mode & 007)
        snprintf(why, whylen,
                 "%s has mode %04o: any user may read what is spooled there or plant files in it; "
                 "refused (chmod 700 it; for a volume shared with a group, chmod 2770 it)", dir, mode);
    else if (st.st_uid != geteuid() && !(st.st_uid == 0 && (st.st_mode & 070)))
        snprintf(why, whylen,
                 "%s belongs to uid %u, not to you (uid %u): another user may read what is "
                 "spooled there or plant files in it; refused (remove it, or set FIRSTPASS_SPOOL)",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
    else if (!in_group(st.st_gid))
        snprintf(why, whylen,
                 "%s has mode %04o and group %u, which this process (uid %u, gid %u) is not in: its "
                 "members may read what is spooled there or plant files in it; refused (chmod 700 it, or "
                 "run in that group: Kubernetes securityContext.fsGroup)",
                 dir, mode, (unsigned)st.st_gid, (unsigned)geteuid(), (unsigned)getegid());
    else
        snprintf(why, whylen,
                 "%s has mode %04o: a directory shared with a group must be setgid with group rwx and "
                 "nothing for others; refused (chmod 700 it, or chmod 2770 it)", dir, mode);
    errno = EPERM;
    return -1;
}

int fp_spool_prepare(const char *dir, int create, char *buf, size_t len, char *why, size_t whylen)
{
    int w;
    if (dir && dir[0])
        w = snprintf(buf, len, "%s", dir);
    else
        w = fp_spool_dir(buf, len, 0) == 0 ? 0 : -1;
    if (w < 0 || (size_t)w >= len) {
        snprintf(why, whylen, "the spool directory's name is too long");
        errno = ENAMETOOLONG;
        return -1;
    }
    if (create && mkdirs(buf) != 0) {
        int e = errno;
        snprintf(why, whylen, "cannot create %s: %s", buf, strerror(e));
        errno = e;
        return -1;
    }
    if (fp_spool_check(buf, why, whylen) != 0)
        return (!create && errno == ENOENT) ? 1 : -1;
    return 0;
}

int fp_spool_begin(fp_spool_out *s, const char *dir, const char *name)
{
    int w1 = snprintf(s->tmp, sizeof s->tmp, "%s/.%s.tmp", dir, name);
    int w2 = snprintf(s->fin, sizeof s->fin, "%s/%s", dir, name);
    s->gz = NULL;
    if (w1 < 0 || w2 < 0 || (size_t)w1 >= sizeof s->tmp || (size_t)w2 >= sizeof s->fin) {
        errno = ENAMETOOLONG;
        return -1;
    }
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (s->fd < 0)
        return -1;
    int d = dup(s->fd); /* gzclose closes its own: s->fd stays open for the fsync */
    if (d < 0 || !(s->gz = gzdopen(d, "wb6"))) {
        if (d >= 0)
            close(d);
        fp_spool_abort(s);
        errno = ENOMEM;
        return -1;
    }
    gzbuffer(s->gz, 1 << 17);
    return 0;
}

void fp_spool_abort(fp_spool_out *s)
{
    if (s->gz)
        gzclose(s->gz);
    s->gz = NULL;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    unlink(s->tmp);
}

int fp_spool_commit(fp_spool_out *s)
{
    int zr = gzclose(s->gz);
    s->gz = NULL;
    int synced = zr == Z_OK && fsync(s->fd) == 0;
    int closed = close(s->fd) == 0;
    s->fd = -1;
    if (!synced || !closed) {
        fp_spool_abort(s); /* only the unlink is left to do */
        return -1;
    }
    if (rename(s->tmp, s->fin) != 0) {
        fp_spool_abort(s);
        return -1;
    }
    return 0;
}

int fp_spool_write(const char *dir, const char *name, const void *data, size_t n, char *path,
                   size_t pathlen)
{
    char tmp[4096], fin[4096];
    const char *p = data;
    int fd, w1, w2;
    w1 = snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    w2 = snprintf(fin, sizeof fin, "%s/%s", dir, name);
    if (w1 < 0 || w2 < 0 || (size_t)w1 >= sizeof tmp || (size_t)w2 >= sizeof fin)
        return -1;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto err;
        p += w;
        n -= (size_t)w;
    }
    if (fsync(fd) != 0)
        goto err;
    if (close(fd) != 0) {
        fd = -1;
        goto err;
    }
    fd = -1;
    if (rename(tmp, fin) != 0)
        goto err;
    if (path)
        snprintf(path, pathlen, "%s", fin);
    return 0;
err:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return -1;
}

int fp_deliver(const fp_upload_opts *o, const void *gz, size_t n, const char *name)
{
    char resp[512], dir[4096] = "", path[4096] = "", whybuf[CURL_ERROR_SIZE + 300];
    char spool_why[4096 + 300] = "", err[CURL_ERROR_SIZE + 64];
    const char *why = "FIRSTPASS_SERVER not set";
    long status = 0;
    int spooled = 0;

    /* Spool first: an upload can be killed (SIGKILL after a grace period, the exit budget),
     * a file on disk cannot. firstpass-upload --spool sends it later. Only into a directory
     * that is the user's own (fp_spool_prepare). */
    if (fp_spool_prepare(NULL, 1, dir, sizeof dir, spool_why, sizeof spool_why) == 0) {
        spooled = fp_spool_write(dir, name, gz, n, path, sizeof path) == 0;
        if (!spooled)
            snprintf(spool_why, sizeof spool_why, "%s", strerror(errno));
    }
    if (o->server && o->server[0]) {
        /* the key firstpass-upload --spool sends for this file later (fp_spool_key): if this
         * upload's reply is lost, that one finds the session stored and sends nothing again */
        fp_upload_opts ko = *o;
        char key[65];
        fp_spool_key(name, key);
        ko.idempotency_key = key;
        if (do_post(&ko, gz, NULL, n, 1, &status, resp, sizeof resp, err, sizeof err) == 0) {
            json_error_t je;
            json_t *j = json_loads(resp, 0, &je);
            const char *url = j ? json_string_value(json_object_get(j, "url")) : NULL;
            json_int_t id = j ? json_integer_value(json_object_get(j, "id")) : 0;
            if (spooled)
                (void)unlink(path);
            fp_log("uploaded session %lld to %s%s (%zu bytes gzip)", (long long)id, o->server,
                   url ? url : "", n);
            json_decref(j);
            return 0;
        }
        if (o->abort_flag && *o->abort_flag)
            snprintf(whybuf, sizeof whybuf, "upload to %s stopped (the program is ending)",
                     o->server);
        else if (status == 201)
            snprintf(whybuf, sizeof whybuf, "server answered %s", err);
        else if (status)
            snprintf(whybuf, sizeof whybuf, "server answered HTTP %ld", status);
        else
            snprintf(whybuf, sizeof whybuf, "server %s unreachable or too slow (%s)", o->server, err);
        why = whybuf;
    }
    if (!spooled) {
        fp_log("session LOST: %s, and spooling to %s failed: %s", why, dir[0] ? dir : "(none)",
               spool_why);
        return -1;
    }
    fp_log("%s; session spooled to %s (send later: firstpass-upload --server URL --spool %s)",
           why, path, dir);
    return 1;
}
