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

/* libcurl's progress callback: non-zero aborts the transfer (the collector's exit or SIGTERM). */
static int on_progress(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    const volatile sig_atomic_t *abort_flag = ud;
    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    return *abort_flag ? 1 : 0;
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
    if (o->abort_flag) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)o->abort_flag);
    }
}

int fp_upload_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
    return curl_init_rc;
}

typedef struct resp_buf {
    char *p;
    size_t len, cap;
} resp_buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    resp_buf *r = ud;
    size_t n = size * nmemb, room;
    if (r->p == NULL || r->cap == 0)
        return n;
    room = r->cap - 1 - r->len;
    if (n < room)
        room = n;
    memcpy(r->p + r->len, data, room);
    r->len += room;
    r->p[r->len] = '\0';
    return n; /* keep reading, keep only the head */
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

/* Common setup and perform; body either in memory (mem, n) or from a FILE (fp, n). */
static int do_post(const fp_upload_opts *o, const void *mem, FILE *fp, size_t n, int gzipped,
                   long *status, char *resp, size_t resplen, char *errbuf, size_t errlen)
{
    CURL *c;
    struct curl_slist *h = NULL;
    char url[2048], cerr[CURL_ERROR_SIZE];
    resp_buf rb = {resp, 0, resplen};
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
    c = curl_easy_init();
    if (c == NULL) {
        if (errbuf)
            snprintf(errbuf, errlen, "curl_easy_init failed");
        return -1;
    }
    cerr[0] = '\0';
    h = curl_slist_append(h, "Content-Type: application/json");
    if (gzipped)
        h = curl_slist_append(h, "Content-Encoding: gzip");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    fp_curl_common(c, o, &h, cerr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &rb);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "firstpass-collector/1");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    if (fp) {
        curl_easy_setopt(c, CURLOPT_READDATA, fp); /* default read function: fread */
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, mem);
    }
    cr = curl_easy_perform(c);
    if (cr != CURLE_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(cr));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
        if (*status == 201)
            rc = 0;
        else if (errbuf)
            snprintf(errbuf, errlen, "HTTP %ld", *status);
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc;
}

int fp_upload_mem(const fp_upload_opts *o, const void *body, size_t n, int gzipped,
                  long *status, char *resp, size_t resplen)
{
    return do_post(o, body, NULL, n, gzipped, status, resp, resplen, NULL, 0);
}

int fp_upload_file(const fp_upload_opts *o, const char *path, long *status, char *resp,
                   size_t resplen, char *errbuf, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    unsigned char magic[2] = {0, 0};
    struct stat st;
    int gz, rc;

    *status = 0;
    if (fp == NULL) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (errbuf)
            snprintf(errbuf, errlen, "not a regular file");
        fclose(fp);
        return -1;
    }
    gz = fread(magic, 1, 2, fp) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    rewind(fp);
    rc = do_post(o, NULL, fp, (size_t)st.st_size, gz, status, resp, resplen, errbuf, errlen);
    fclose(fp);
    return rc;
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

int fp_spool_dir(char *buf, size_t len, int create)
{
    const char *s = getenv("FIRSTPASS_SPOOL");
    const char *x = getenv("XDG_STATE_HOME");
    int w;
    if (s && s[0])
        w = snprintf(buf, len, "%s", s);
    else if (x && x[0] == '/')
        w = snprintf(buf, len, "%s/firstpass/spool", x);
    else
        w = snprintf(buf, len, "/tmp/firstpass-spool-%u", (unsigned)getuid());
    if (w < 0 || (size_t)w >= len)
        return -1;
    if (create && mkdirs(buf) != 0)
        return -1;
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
    char resp[512], dir[4096] = "", path[4096] = "", whybuf[160];
    const char *why = "FIRSTPASS_SERVER not set";
    long status = 0;
    int spooled, spool_errno = 0;

    /* Spool first: an upload can be killed (SIGKILL after a grace period, the exit budget),
     * a file on disk cannot. firstpass-upload --spool sends it later. */
    spooled = fp_spool_dir(dir, sizeof dir, 1) == 0 &&
              fp_spool_write(dir, name, gz, n, path, sizeof path) == 0;
    if (!spooled)
        spool_errno = errno;
    if (o->server && o->server[0]) {
        if (fp_upload_mem(o, gz, n, 1, &status, resp, sizeof resp) == 0) {
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
        else if (status)
            snprintf(whybuf, sizeof whybuf, "server answered HTTP %ld", status);
        else
            snprintf(whybuf, sizeof whybuf, "server %s unreachable or too slow", o->server);
        why = whybuf;
    }
    if (!spooled) {
        fp_log("session LOST: %s, and spooling to %s failed: %s", why, dir[0] ? dir : "(none)",
               strerror(spool_errno));
        return -1;
    }
    fp_log("%s; session spooled to %s (send later: firstpass-upload --server URL --spool %s)",
           why, path, dir);
    return 1;
}
