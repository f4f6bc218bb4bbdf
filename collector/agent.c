/* agent.c -- firstpass-upload --watch / --target: sends the traces that serving engines write,
 * and profiles an engine when the server asks (agent.h).
 *
 * Threads, and what they share (agent.lock guards every field marked "lock"):
 *   main     scans the watched directories (watch.h), sends each whole trace once (the state
 *            file), spools what the server cannot take now and sends the spool later. Only it
 *            touches the watcher and the state.
 *   poll     registers the targets, then long-polls the server for capture requests; starts
 *            one capture thread per request.
 *   capture  calls the engine's /start_profile, waits, calls /stop_profile and waits until the
 *            main thread has sent the files the engine flushed (the target's `cap`), reporting
 *            each step to the server.
 * Never exits on a network error: everything is retried with a bounded back-off. */
#include "agent.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "log.h"
#include "membuf.h"
#include "upload.h"
#include "watch.h"

#define AGENT_VERSION "firstpass-upload/1"
#define LABELS_MAX 64            /* the server's bound on labels a session */
#define REPLY_MAX (1u << 20)     /* bytes kept of any reply (engine or server) */
#define POLL_WAIT_S 25           /* the long poll's wait (the server caps it too) */
#define TARGETS_MAX 32
#define BURSTS_MAX 64            /* vLLM profiles remembered for their job label */
#define BURST_WINDOW_S 600       /* a vLLM worker file joins a profile seen this recently */

/* ---- configuration and shared state ----------------------------------------------------- */

typedef struct kv {
    char k[128];
    char v[512];
} kv;

typedef struct capture capture;

typedef struct target {
    char name[65];
    char engine[16];             /* vllm | sglang | torch (torch speaks vLLM's endpoints) */
    char url[512];               /* the engine's base URL */
    char dir[PATH_MAX];          /* where its traces land, as this agent sees it */
    char engine_dir[PATH_MAX];   /* the same directory as the engine sees it (SGLang output_dir); "" */
    capture *cap;                /* lock: the capture running on it, NULL */
} target;

struct capture {
    struct agent *a;
    target *t;
    long long id;
    long long seconds, steps;    /* one is > 0 */
    int record_shapes, with_stack; /* -1: the engine's default */
    long long since_ns;          /* files with an mtime from this (wall clock) are the capture's */
    /* lock: written by the main thread */
    long long sessions[64];
    size_t nsessions;
    int delivered;               /* files sent or spooled */
    size_t pending;              /* files in dir not sent yet (fp_watch_pending) */
    double last_activity;        /* fp_now() of the last change to pending or delivered */
    unsigned long scans;         /* the main thread's scans since the capture began */
    char refused[512];           /* the server's refusal of one of its files */
    pthread_t th;
};

typedef struct burst {
    char key[PATH_MAX + 256];    /* dir '\n' group */
    char job[192];
    char ranks[512];             /* ",0,1," */
    long long last_mtime_s;
    double used;
} burst;

typedef struct agent {
    fp_upload_opts up;           /* the server: URL, token, timeouts, abort flag */
    char host[256];
    char name[65];               /* the agent's name on the server */
    kv labels[LABELS_MAX];       /* --label, --model, --engine */
    size_t nlabels;
    target targets[TARGETS_MAX];
    size_t ntargets;
    double settle_s, retry_s;
    long long flush_timeout_s, steps_timeout_s;
    int remove;                  /* --remove: delete a file once the server has it */
    char state_path[PATH_MAX];
    char spool[PATH_MAX];
    fp_watch *w;
    fp_state *st;
    burst bursts[BURSTS_MAX];
    pthread_mutex_t lock;
    unsigned long scans;         /* lock */
    double spool_next;           /* when to send the spool next (main thread) */
    double resolve_next;         /* when to resolve SENDING entries next (main thread) */
} agent;

static volatile sig_atomic_t g_stop; /* set by SIGTERM/SIGINT; every loop and transfer checks it */

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Sleeps up to s seconds, waking early on a stop. */
static void nap(double s)
{
    double end = fp_now() + s;
    while (!g_stop && fp_now() < end) {
        double left = end - fp_now();
        usleep((useconds_t)((left > 0.2 ? 0.2 : left > 0 ? left : 0) * 1e6));
    }
}

static long long wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

static size_t on_reply(char *data, size_t size, size_t nmemb, void *ud)
{
    fp_membuf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > REPLY_MAX)
        return 0; /* a reply this big is not one of ours: the transfer fails */
    return fp_membuf_write(b, data, n) == 0 ? n : 0;
}

/* An engine call's progress callback: it ends the transfer once the agent is stopping and
 * the call has had ENGINE_GRACE_S to reach the engine. Why not at once, as a server call:
 * /stop_profile must get there, or the engine's profiler goes on slowing it; the engines
 * finish a stop whose client has gone. */
#define ENGINE_GRACE_S 5.0
static int on_engine_progress(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    const double *start = ud;
    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    return g_stop && fp_now() - *start > ENGINE_GRACE_S;
}

/* One request: method to url with an optional JSON body. The server's token goes along only
 * when o has one (engine calls pass an o without). 0 when a reply came (status in *status,
 * body in reply, NUL-terminated: the caller frees it), -1 on a transport error (reason in
 * err; reply then holds nothing). */
static int http_call(const fp_upload_opts *o, const char *method, const char *url, const char *json, long timeout_s,
                     long *status, fp_membuf *reply, char *err, size_t errlen)
{
    double start = fp_now();
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char cerr[CURL_ERROR_SIZE] = "";
    fp_upload_opts oo = *o;
    CURLcode rc;
    *status = 0;
    memset(reply, 0, sizeof *reply);
    if (!c) {
        snprintf(err, errlen, "curl_easy_init failed");
        return -1;
    }
    oo.timeout_s = timeout_s;
    h = curl_slist_append(h, "Expect:");
    h = curl_slist_append(h, "Accept: application/json");
    if (json)
        h = curl_slist_append(h, "Content-Type: application/json");
    fp_curl_common(c, &oo, &h, cerr);
    if (!o->abort_flag) { /* an engine call (engine_call): stopped after its grace */
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_engine_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &start);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_USERAGENT, AGENT_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, reply);
    if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json ? json : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(json ? strlen(json) : 0));
    }
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    else
        snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        fp_membuf_free(reply); /* a transfer cut short: nothing for the caller to read or free */
        return -1;
    }
    if (!reply->p && fp_membuf_write(reply, "", 0) != 0) {
        fp_membuf_free(reply);
        return -1;
    }
    return 0;
}

/* The server's URL for path (path begins with '/'). */
static void server_url(const agent *a, const char *path, char *url, size_t n)
{
    size_t k = strlen(a->up.server);
    while (k > 0 && a->up.server[k - 1] == '/')
        k--;
    snprintf(url, n, "%.*s%s", (int)k, a->up.server, path);
}

/* A call to the firstpass server with the agent's token: as http_call. */
static int server_call(const agent *a, const char *method, const char *path, const char *json, long timeout_s, long *status,
                       fp_membuf *reply, char *err, size_t errlen)
{
    char url[4096];
    server_url(a, path, url, sizeof url);
    return http_call(&a->up, method, url, json, timeout_s, status, reply, err, errlen);
}

/* The text of a reply for a message: its first line(s), printable, at most n-1 bytes. */
static void reply_text(const fp_membuf *b, char *out, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; b->p && i < b->len && o + 1 < n; i++) {
        unsigned char c = (unsigned char)b->p[i];
        out[o++] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : (c < 0x20 ? '?' : (char)c);
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

/* ---- labels and the query of one file --------------------------------------------------- */

static int has_label(const kv *l, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l[i].k, k))
            return 1;
    return 0;
}

/* Adds k:v unless k is there already (the first one wins: flags go in first) or v is "". */
static void add_label(kv *l, size_t *n, const char *k, const char *v)
{
    if (!v || !v[0] || has_label(l, *n, k) || *n >= LABELS_MAX)
        return;
    snprintf(l[*n].k, sizeof l[*n].k, "%s", k);
    snprintf(l[*n].v, sizeof l[*n].v, "%s", v);
    (*n)++;
}

/* The file's key on the server (label file_id): what was sent, whoever asks later. */
static void file_id(const agent *a, const fp_watch_file *f, char out[17])
{
    uint64_t h = 1469598103934665603ull;
    char tail[64];
    const char *parts[3] = {a->host, f->path, tail};
    snprintf(tail, sizeof tail, "%lld.%lld", f->size, f->mtime_ns);
    for (int p = 0; p < 3; p++)
        for (const char *s = parts[p];; s++) {
            h = (h ^ (unsigned char)*s) * 1099511628211ull;
            if (!*s)
                break;
        }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* The job label of a vLLM worker file outside a capture: the files of one profile have
 * different time stamps (each worker writes its own when it flushes), so a file joins the
 * profile of the same directory and name whose last file is at most BURST_WINDOW_S older,
 * unless that profile has this rank already (then it is a new profile). */
static void vllm_job(agent *a, const fp_watch_file *f, char *job, size_t n)
{
    char key[sizeof a->bursts[0].key], rk[80];
    long long m = f->mtime_ns / 1000000000LL;
    burst *b = NULL, *oldest = &a->bursts[0];
    snprintf(key, sizeof key, "%s\n%s", f->dir, f->info.group);
    snprintf(rk, sizeof rk, ",%s,", f->info.rank);
    for (size_t i = 0; i < BURSTS_MAX; i++) {
        burst *x = &a->bursts[i];
        if (x->used < oldest->used)
            oldest = x;
        if (x->used > 0 && !strcmp(x->key, key) && llabs(m - x->last_mtime_s) <= BURST_WINDOW_S && !strstr(x->ranks, rk))
            b = x;
    }
    if (!b) {
        struct tm tm;
        time_t t = (time_t)m;
        char when[32];
        b = oldest;
        memset(b, 0, sizeof *b);
        snprintf(b->key, sizeof b->key, "%s", key);
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(b->job, sizeof b->job, "vllm-%.80s-%s", f->info.group, when);
        snprintf(b->ranks, sizeof b->ranks, ",");
    }
    size_t used = strlen(b->ranks);
    if (used + strlen(rk) < sizeof b->ranks)
        snprintf(b->ranks + used, sizeof b->ranks - used, "%s,", f->info.rank);
    b->last_mtime_s = m;
    b->used = fp_now();
    snprintf(job, n, "%s", b->job);
}

/* The target whose directory holds f, NULL. */
static target *target_of(agent *a, const char *dir)
{
    for (size_t i = 0; i < a->ntargets; i++)
        if (!strcmp(a->targets[i].dir, dir))
            return &a->targets[i];
    return NULL;
}

/* The labels f goes up with: --label flags first (they win), then the capture's, then the
 * target's engine, then what the name says, then host, file and file_id. */
static size_t file_labels(agent *a, const fp_watch_file *f, long long cap_id, const target *t, kv *l)
{
    size_t n = 0;
    char buf[512], id[17];
    for (size_t i = 0; i < a->nlabels; i++)
        add_label(l, &n, a->labels[i].k, a->labels[i].v);
    if (cap_id) {
        snprintf(buf, sizeof buf, "%lld", cap_id);
        add_label(l, &n, "capture", buf);
        snprintf(buf, sizeof buf, "capture-%lld", cap_id);
        add_label(l, &n, "job", buf);
    }
    if (t) {
        add_label(l, &n, "target", t->name);
        add_label(l, &n, "engine", t->engine);
    }
    add_label(l, &n, "engine", f->info.engine);
    add_label(l, &n, "rank", f->info.rank);
    add_label(l, &n, "tp_rank", f->info.tp_rank);
    add_label(l, &n, "dp_rank", f->info.dp_rank);
    add_label(l, &n, "pp_rank", f->info.pp_rank);
    add_label(l, &n, "stage", f->info.stage);
    if (!has_label(l, n, "job") && f->info.group[0]) {
        if (!strcmp(f->info.engine, "sglang")) {
            snprintf(buf, sizeof buf, "sglang-%s", f->info.group);
            add_label(l, &n, "job", buf);
        } else if (!strcmp(f->info.engine, "vllm")) {
            vllm_job(a, f, buf, sizeof buf);
            add_label(l, &n, "job", buf);
        }
    }
    add_label(l, &n, "host", a->host);
    const char *base = strrchr(f->path, '/');
    add_label(l, &n, "file", base ? base + 1 : f->path);
    file_id(a, f, id);
    add_label(l, &n, "file_id", id);
    return n;
}

/* "name=...&label=k:v&..." with every value escaped. -1 when it does not fit. */
static int make_query(const char *name, const kv *l, size_t n, char *q, size_t cap)
{
    size_t used = 0;
    q[0] = '\0';
    for (size_t i = 0; i <= n; i++) {
        char pair[700];
        if (i == n)
            snprintf(pair, sizeof pair, "%.600s", name);
        else
            snprintf(pair, sizeof pair, "%.127s:%.511s", l[i].k, l[i].v);
        char *e = curl_easy_escape(NULL, pair, 0);
        if (!e)
            return -1;
        int w = snprintf(q + used, cap - used, "%s%s=%s", used ? "&" : "", i == n ? "name" : "label", e);
        curl_free(e);
        if (w < 0 || (size_t)w >= cap - used)
            return -1;
        used += (size_t)w;
    }
    return 0;
}

/* ---- the spool: the session document with its labels inside ---------------------------- */

/* Writes the trace at path (plain or gzip: gzread reads both) into g as a session document:
 * the trace with a "firstpass" object (name, labels) spliced in after its '{' (a bare event
 * array becomes {"firstpass":...,"traceEvents":[...]}), so that it carries its labels when
 * the spool is sent later without a query (docs/contract.md; python/firstpass/body.py does
 * the same). 0, or -1 with why in err. */
static int session_doc(const char *path, const char *meta, fp_gz *g, char *err, size_t errlen)
{
    gzFile in = gzopen(path, "rb");
    char *buf = malloc(1 << 20);
    int first = 0, rc = -1, n;
    if (!in || !buf) {
        snprintf(err, errlen, "cannot read %s", path);
        goto out;
    }
    gzbuffer(in, 1 << 17);
    /* the first byte that is not white space says object or array */
    while ((first = gzgetc(in)) == ' ' || first == '\t' || first == '\r' || first == '\n')
        ;
    if (first == '{') {
        int next;
        while ((next = gzgetc(in)) == ' ' || next == '\t' || next == '\r' || next == '\n')
            ;
        if (fp_gz_write(g, "{\"firstpass\":", 13) || fp_gz_write(g, meta, strlen(meta)))
            goto io;
        if (next == '}') {
            if (fp_gz_write(g, "}", 1))
                goto io;
        } else if (next >= 0) {
            char c = (char)next;
            if (fp_gz_write(g, ",", 1) || fp_gz_write(g, &c, 1))
                goto io;
        }
    } else if (first == '[') {
        if (fp_gz_write(g, "{\"firstpass\":", 13) || fp_gz_write(g, meta, strlen(meta)) ||
            fp_gz_write(g, ",\"traceEvents\":[", 16))
            goto io;
    } else {
        snprintf(err, errlen, "%s is not a JSON trace", path);
        goto out;
    }
    while ((n = gzread(in, buf, 1 << 20)) > 0)
        if (fp_gz_write(g, buf, (size_t)n))
            goto io;
    if (n < 0)
        goto io;
    if (first == '[' && fp_gz_write(g, "}", 1))
        goto io;
    if (fp_gz_finish(g))
        goto io;
    rc = 0;
    goto out;
io:
    snprintf(err, errlen, "cannot build the session document of %s (out of memory or a read error)", path);
out:
    if (in)
        gzclose(in);
    free(buf);
    return rc;
}

/* Spools f: the session document as <spool>/watch-<file_id>.json.gz (the same name each
 * time, so that a second spooling replaces the first). 0, or -1 with why in err. */
static int spool_file(agent *a, const fp_watch_file *f, const kv *l, size_t n, char *err, size_t errlen)
{
    json_t *labels = json_object(), *meta;
    char id[17], name[64];
    fp_gz g;
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        json_object_set_new(labels, l[i].k, json_string(l[i].v));
    meta = json_pack("{s:s,s:i,s:s,s:o,s:s,s:s}", "format", "firstpass-session", "version", 1, "name", f->info.name, "labels",
                     labels, "host", a->host, "producer", AGENT_VERSION " --watch");
    char *m = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    if (!m || fp_gz_init(&g) != 0) {
        free(m);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (session_doc(f->path, m, &g, err, errlen) == 0) {
        file_id(a, f, id);
        snprintf(name, sizeof name, "watch-%s.json.gz", id);
        char why[256] = "";
        /* the one spool rule (upload.h): created if missing, refused unless it is this user's own */
        if (fp_spool_prepare(NULL, 1, a->spool, sizeof a->spool, why, sizeof why) != 0)
            snprintf(err, errlen, "the spool cannot be used: %.200s", why);
        else if (fp_spool_write(a->spool, name, g.out.p, g.out.len, NULL, 0) != 0)
            snprintf(err, errlen, "cannot write to the spool %.150s: %.60s", a->spool, strerror(errno));
        else
            rc = 0;
    }
    fp_gz_free(&g);
    free(m);
    return rc;
}

/* 1 when the server has a session labelled file_id:<id>, 0 when it has none, -1 when it
 * could not be asked. What makes a resent file or spooled document land once. */
static int server_has(agent *a, const char *id, long long *sid)
{
    char path[160], err[256];
    long status;
    fp_membuf b;
    snprintf(path, sizeof path, "/api/v1/sessions?label=file_id%%3A%s&limit=1", id);
    if (server_call(a, "GET", path, NULL, 30, &status, &b, err, sizeof err) != 0 || status != 200) {
        fp_membuf_free(&b);
        return -1;
    }
    json_error_t je;
    json_t *doc = json_loads(b.p, 0, &je);
    fp_membuf_free(&b);
    json_t *s0 = json_array_get(json_object_get(doc, "sessions"), 0);
    int has = s0 != NULL;
    if (has && sid)
        *sid = json_integer_value(json_object_get(s0, "id"));
    json_decref(doc);
    return doc ? has : -1;
}

/* Sends the agent's spooled documents (watch-*.json.gz), oldest name first is not needed:
 * each is independent. Stops at the first that fails for want of a server. */
static void send_spool(agent *a)
{
    DIR *d;
    struct dirent *de;
    char why[256];
    /* 1: there is none yet; -1: not this user's own, so nothing in it is sent (upload.h) */
    if (fp_spool_prepare(NULL, 0, a->spool, sizeof a->spool, why, sizeof why) != 0 || !(d = opendir(a->spool)))
        return;
    while (!g_stop && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        char path[PATH_MAX], resp[512], err[256], id[17];
        long status = 0, sid = 0;
        long long have = 0;
        if (strncmp(de->d_name, "watch-", 6) != 0 || n != 6 + 16 + 8 || strcmp(de->d_name + 22, ".json.gz") != 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", a->spool, de->d_name) >= sizeof path)
            continue;
        snprintf(id, sizeof id, "%.16s", de->d_name + 6);
        int has = server_has(a, id, &have);
        if (has < 0)
            break;
        if (!has) {
            fp_upload_opts o = a->up;
            o.query = NULL;
            if (fp_upload_file(&o, path, &status, resp, sizeof resp, err, sizeof err) != 0) {
                if (status >= 400 && status < 500 && status != 408 && status != 429 && status != 401 && status != 403) {
                    fp_log("%s: the server refused the spooled session (HTTP %ld: %s); left in the spool", path, status, resp);
                    continue;
                }
                break;
            }
            json_error_t je;
            json_t *r = json_loads(resp, 0, &je);
            sid = (long)json_integer_value(json_object_get(r, "id"));
            json_decref(r);
            have = sid;
        }
        if (unlink(path) == 0)
            fp_log("%s: sent from the spool: session %lld", path, have);
    }
    closedir(d);
}

static void update_captures(agent *a, int scanned);

/* ---- one file ------------------------------------------------------------------------- */

/* What the main thread tells capture cap_id of target t about one of its files. The capture
 * is named by id and looked up under the lock: its thread may have ended (and the poll
 * thread freed it) while the file was being sent; then there is nobody to tell. */
static void cap_note(agent *a, target *t, long long cap_id, long long sid, const char *refusal)
{
    pthread_mutex_lock(&a->lock);
    capture *c = t->cap;
    if (!c || c->id != cap_id) {
        pthread_mutex_unlock(&a->lock);
        return;
    }
    if (sid > 0 && c->nsessions < sizeof c->sessions / sizeof c->sessions[0])
        c->sessions[c->nsessions++] = sid;
    if (refusal)
        snprintf(c->refused, sizeof c->refused, "%.500s", refusal);
    else
        c->delivered++;
    c->last_activity = fp_now();
    pthread_mutex_unlock(&a->lock);
}

static void done_with(agent *a, const fp_watch_file *f)
{
    if (a->remove && unlink(f->path) != 0)
        fp_log("%s: sent, but could not remove it: %s", f->path, strerror(errno));
}

/* Sends f once. Returns 0 when f is settled (sent, spooled, refused), 1 when it waits for the
 * server, -1 when the state file cannot be written (the agent stops: it could not promise
 * to send nothing twice). */
static int send_file(agent *a, const fp_watch_file *f)
{
    kv l[LABELS_MAX];
    char q[32768], resp[1024], err[256], id[17];
    long status = 0;
    long long sid = 0;
    target *t = target_of(a, f->dir);
    long long cap = 0; /* the id of the capture f belongs to, 0 none */
    pthread_mutex_lock(&a->lock);
    if (t && t->cap && f->mtime_ns >= t->cap->since_ns)
        cap = t->cap->id;
    pthread_mutex_unlock(&a->lock);
    size_t n = file_labels(a, f, cap, t, l);
    if (make_query(f->info.name, l, n, q, sizeof q) != 0) {
        fp_log("%s: the labels do not fit a query; not sent", f->path);
        return fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_REFUSED, 0);
    }
    /* Invariant: the SENDING line is on disk before a byte goes out (fp_state_put fsyncs):
     * after a crash, the file_id label says whether the upload was stored. */
    if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_SENDING, 0) != 0)
        return -1;
    if (cap)
        update_captures(a, 0); /* the capture waits for this one while it is sent */
    fp_upload_opts o = a->up;
    o.query = q;
    int rc = fp_upload_file(&o, f->path, &status, resp, sizeof resp, err, sizeof err);
    if (rc == 0) {
        json_error_t je;
        json_t *r = json_loads(resp, 0, &je);
        sid = json_integer_value(json_object_get(r, "id"));
        json_decref(r);
    }
    if (rc == 0 && sid > 0) {
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_DONE, sid) != 0)
            return -1;
        if (cap)
            fp_log("%s: session %lld (capture %lld)", f->path, sid, cap);
        else
            fp_log("%s: session %lld", f->path, sid);
        if (cap)
            cap_note(a, t, cap, sid, NULL);
        done_with(a, f);
        return 0;
    }
    if (g_stop)
        return 1; /* stopped in flight: the SENDING entry is resolved at the next start */
    if (status >= 400 && status < 500 && status != 408 && status != 429 && status != 401 && status != 403) {
        char why[768];
        snprintf(why, sizeof why, "the server refused %.300s: HTTP %ld: %.400s", f->path, status, resp);
        fp_log("%s", why);
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_REFUSED, 0) != 0)
            return -1;
        if (cap)
            cap_note(a, t, cap, 0, why);
        return 0;
    }
    /* The server is down, busy or refuses the token: nothing was stored (a 201 without an
     * id aside, which file_id settles later). A JSON trace goes to the spool with its labels
     * inside; an SQLite export cannot carry them and is retried from where it is. */
    char why[300];
    if (status)
        snprintf(why, sizeof why, "HTTP %ld %.250s", status, resp);
    else
        snprintf(why, sizeof why, "%s", err);
    if (f->info.kind != FP_KIND_SQLITE && spool_file(a, f, l, n, err, sizeof err) == 0) {
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_SPOOLED, 0) != 0)
            return -1;
        file_id(a, f, id);
        fp_log("%s: server not taking it (%s); spooled as %s/watch-%s.json.gz", f->path, why, a->spool, id);
        if (cap)
            cap_note(a, t, cap, 0, NULL);
        done_with(a, f);
        a->spool_next = fp_now() + a->retry_s;
        return 0;
    }
    if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_NONE, 0) != 0)
        return -1;
    fp_log("%s: server not taking it (%s); retried in %.0f s", f->path, why, a->retry_s);
    fp_watch_defer(a->w, f->path, a->retry_s);
    return 1;
}

/* After a restart, a SENDING entry's upload may have landed: the server says by file_id.
 * 0 when all are resolved, 1 when the server could not be asked (try again later). */
static int resolve_sending(agent *a)
{
    const char *path;
    long long size, mtime;
    for (size_t i = 0; fp_state_sending(a->st, i, &path, &size, &mtime);) {
        fp_watch_file f;
        char id[17];
        long long sid = 0;
        memset(&f, 0, sizeof f);
        f.path = path;
        f.size = size;
        f.mtime_ns = mtime;
        file_id(a, &f, id);
        int has = server_has(a, id, &sid);
        if (has < 0)
            return 1;
        char *p = strdup(path);
        if (!p || fp_state_put(a->st, p, size, mtime, has ? FP_ST_DONE : FP_ST_NONE, has ? sid : 0) != 0) {
            free(p);
            return 1;
        }
        fp_log("%s: %s", p, has ? "was stored before the restart: not sent again" : "was not stored before the restart: sent again");
        free(p);
        /* the entry left SENDING: index i now names the next one */
    }
    return 0;
}

/* ---- the server's side: registration, long poll, capture status --------------------------- */

static int register_agent(agent *a)
{
    json_t *ts = json_array();
    for (size_t i = 0; i < a->ntargets; i++) {
        const target *t = &a->targets[i];
        json_array_append_new(ts, json_pack("{s:s,s:s,s:s,s:s}", "name", t->name, "engine", t->engine, "url", t->url, "dir", t->dir));
    }
    json_t *body = json_pack("{s:s,s:s,s:o}", "host", a->host, "version", AGENT_VERSION, "targets", ts);
    char *js = body ? json_dumps(body, JSON_COMPACT) : NULL, path[160], err[256], msg[300];
    json_decref(body);
    long status;
    fp_membuf b;
    snprintf(path, sizeof path, "/api/v1/agents/%s", a->name);
    int rc = js ? server_call(a, "PUT", path, js, 30, &status, &b, err, sizeof err) : -1;
    free(js);
    if (rc != 0) {
        fp_log("cannot register with %s: %s; retrying", a->up.server, err);
        return -1;
    }
    reply_text(&b, msg, sizeof msg);
    fp_membuf_free(&b);
    if (status != 200 && status != 201) {
        fp_log("the server refused the registration: HTTP %ld: %s", status, msg);
        return -1;
    }
    fp_log("registered as agent %s with %zu target%s at %s", a->name, a->ntargets, a->ntargets == 1 ? "" : "s", a->up.server);
    return 0;
}

/* Tells the server where capture c is. 0, or -1 (logged) when the server would not hear it;
 * *gone is set when the server says the capture is over already (failed by a timeout). */
static int post_status(agent *a, capture *c, const char *status, const char *error, int *gone)
{
    json_t *body = json_pack("{s:s,s:s}", "agent", a->name, "status", status);
    char path[96], err[256], msg[300];
    long st = 0;
    fp_membuf b;
    if (error)
        json_object_set_new(body, "error", json_string(error));
    if (!strcmp(status, "uploaded")) {
        json_t *ids = json_array();
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; i < c->nsessions; i++)
            json_array_append_new(ids, json_integer(c->sessions[i]));
        pthread_mutex_unlock(&a->lock);
        json_object_set_new(body, "sessions", ids);
    }
    char *js = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    snprintf(path, sizeof path, "/api/v1/captures/%lld/status", c->id);
    for (int attempt = 0; js && attempt < 5; attempt++) {
        if (server_call(a, "POST", path, js, 30, &st, &b, err, sizeof err) == 0) {
            reply_text(&b, msg, sizeof msg);
            fp_membuf_free(&b);
            if (st == 200)
                break;
            if (st == 409 && gone)
                *gone = 1;
            if (st >= 400 && st < 500)
                break;
        }
        nap(1 << attempt);
    }
    free(js);
    if (st != 200) {
        fp_log("capture %lld: the server did not take status %s (%s)", c->id, status, st ? msg : err);
        return -1;
    }
    return 0;
}

/* Calls path on t's engine: POST with json (NULL: an empty body). 0 on a 2xx; else -1 with
 * the engine's own answer in err ("HTTP 500: ..."). */
static int engine_call(const target *t, const char *path, const char *json, long timeout_s, char *err, size_t errlen)
{
    fp_upload_opts o;
    char url[1024], e[256], msg[400];
    long status;
    fp_membuf b;
    size_t k = strlen(t->url);
    memset(&o, 0, sizeof o);
    o.connect_timeout_s = 10; /* no abort_flag: http_call gives it ENGINE_GRACE_S after a stop */
    while (k > 0 && t->url[k - 1] == '/')
        k--;
    snprintf(url, sizeof url, "%.*s%s", (int)k, t->url, path);
    if (http_call(&o, "POST", url, json, timeout_s, &status, &b, e, sizeof e) != 0) {
        snprintf(err, errlen, "%s %s: %s", t->engine, path, e);
        return -1;
    }
    reply_text(&b, msg, sizeof msg);
    fp_membuf_free(&b);
    if (status >= 200 && status < 300)
        return 0;
    snprintf(err, errlen, "%s %s: HTTP %ld%s%s", t->engine, path, status, msg[0] ? ": " : "", msg);
    return -1;
}

/* The start request for t: vLLM (and a torch loop speaking its endpoints) takes no body; SGLang
 * takes output_dir, num_steps, activities, with_stack, record_shapes. */
static char *start_body(const capture *c)
{
    if (strcmp(c->t->engine, "sglang") != 0)
        return NULL;
    json_t *b = json_pack("{s:[s,s]}", "activities", "CPU", "GPU");
    if (c->t->engine_dir[0])
        json_object_set_new(b, "output_dir", json_string(c->t->engine_dir));
    if (c->steps > 0)
        json_object_set_new(b, "num_steps", json_integer(c->steps));
    if (c->record_shapes >= 0)
        json_object_set_new(b, "record_shapes", json_boolean(c->record_shapes));
    if (c->with_stack >= 0)
        json_object_set_new(b, "with_stack", json_boolean(c->with_stack));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* Reads what the main thread wrote about c. */
static void cap_read(agent *a, const capture *c, size_t *pending, int *delivered, double *last, unsigned long *scans, char *refused,
                     size_t rn)
{
    pthread_mutex_lock(&a->lock);
    *pending = c->pending;
    *delivered = c->delivered;
    *last = c->last_activity;
    *scans = c->scans;
    if (refused)
        snprintf(refused, rn, "%s", c->refused);
    pthread_mutex_unlock(&a->lock);
}

/* One capture, start to end (see the file's header). */
static void *capture_main(void *arg)
{
    capture *c = arg;
    agent *a = c->a;
    target *t = c->t;
    char err[768] = "", stop_err[768] = "", refused[512];
    int gone = 0, stopped = 0;
    size_t pending;
    int delivered;
    double last;
    unsigned long scans, scans_at_stop;
    char *body = start_body(c);

    fp_log("capture %lld: %s %s for %lld %s", c->id, t->name, t->url, c->seconds > 0 ? c->seconds : c->steps,
           c->seconds > 0 ? "s" : "steps");
    if (engine_call(t, "/start_profile", body, 60, err, sizeof err) != 0) {
        free(body);
        fp_log("capture %lld: %s", c->id, err);
        post_status(a, c, "failed", err, NULL);
        goto out;
    }
    free(body);
    post_status(a, c, "running", NULL, &gone);
    if (c->seconds > 0) {
        nap((double)c->seconds);
    } else {
        /* SGLang stops by itself after num_steps and writes its files; with no traffic the
         * steps never come, so after steps_timeout the agent stops it. */
        double end = fp_now() + (double)a->steps_timeout_s;
        while (!g_stop && fp_now() < end) {
            cap_read(a, c, &pending, &delivered, &last, &scans, NULL, 0);
            if (pending || delivered)
                break;
            nap(0.5);
        }
        cap_read(a, c, &pending, &delivered, &last, &scans, NULL, 0);
        stopped = pending || delivered;
    }
    post_status(a, c, "flushing", NULL, &gone);
    pthread_mutex_lock(&a->lock);
    scans_at_stop = c->scans;
    pthread_mutex_unlock(&a->lock);
    /* /stop_profile returns once the engine has flushed its files: minutes for a big model
     * (vLLM's docs: about 10 minutes for 100 requests of a 70B model on an H100). */
    if (!stopped && engine_call(t, "/stop_profile", NULL, g_stop ? 10 : a->flush_timeout_s, stop_err, sizeof stop_err) != 0)
        fp_log("capture %lld: %s", c->id, stop_err);
    pthread_mutex_lock(&a->lock);
    scans_at_stop = c->scans > scans_at_stop ? c->scans : scans_at_stop;
    pthread_mutex_unlock(&a->lock);
    /* The files: done when some were sent, none is pending, two scans ran since /stop_profile
     * returned and nothing changed for the settle time. */
    double end = fp_now() + (stop_err[0] && !stopped ? a->settle_s * 3 + 10 : (double)a->flush_timeout_s);
    for (;;) {
        cap_read(a, c, &pending, &delivered, &last, &scans, refused, sizeof refused);
        if (delivered > 0 && pending == 0 && scans >= scans_at_stop + 2 && fp_now() - last >= a->settle_s)
            break;
        if (g_stop || fp_now() > end)
            break;
        nap(0.25);
    }
    if (delivered > 0) {
        post_status(a, c, "uploaded", NULL, NULL);
        fp_log("capture %lld: %d file%s sent", c->id, delivered, delivered == 1 ? "" : "s");
    } else {
        if (refused[0])
            snprintf(err, sizeof err, "%s", refused);
        else if (stop_err[0])
            snprintf(err, sizeof err, "%s", stop_err);
        else if (g_stop)
            snprintf(err, sizeof err, "the agent was stopped during the capture");
        else
            snprintf(err, sizeof err, "no trace file appeared in %.600s within %lld s of /stop_profile", t->dir, a->flush_timeout_s);
        fp_log("capture %lld: failed: %s", c->id, err);
        post_status(a, c, "failed", err, NULL);
    }
out:
    pthread_mutex_lock(&a->lock);
    t->cap = NULL;
    pthread_mutex_unlock(&a->lock);
    (void)gone;
    return c;
}

/* Starts the capture the server handed out (doc: its capture object). */
static void start_capture(agent *a, json_t *doc, capture **live, size_t *nlive)
{
    const char *tname = json_string_value(json_object_get(doc, "target"));
    target *t = NULL;
    for (size_t i = 0; tname && i < a->ntargets; i++)
        if (!strcmp(a->targets[i].name, tname))
            t = &a->targets[i];
    capture *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->a = a;
    c->t = t;
    c->id = json_integer_value(json_object_get(doc, "id"));
    c->seconds = json_integer_value(json_object_get(doc, "seconds"));
    c->steps = json_integer_value(json_object_get(doc, "steps"));
    json_t *opt = json_object_get(doc, "options");
    json_t *rs = json_object_get(opt, "record_shapes"), *ws = json_object_get(opt, "with_stack");
    c->record_shapes = json_is_boolean(rs) ? json_is_true(rs) : -1;
    c->with_stack = json_is_boolean(ws) ? json_is_true(ws) : -1;
    int busy = 0;
    pthread_mutex_lock(&a->lock);
    if (t && !t->cap) {
        t->cap = c;
        c->since_ns = wall_ns() - 1000000000LL; /* a second for mtime granularity and clock skew */
        c->last_activity = fp_now();
    } else {
        busy = 1;
    }
    pthread_mutex_unlock(&a->lock);
    if (!t || busy || (c->seconds <= 0 && c->steps <= 0)) {
        char why[256];
        snprintf(why, sizeof why, !t ? "this agent has no target '%s'" : busy ? "the agent is capturing '%s' already"
                                                                              : "capture of '%s' has neither seconds nor steps",
                 tname ? tname : "?");
        if (t && !busy) {
            pthread_mutex_lock(&a->lock);
            t->cap = NULL;
            pthread_mutex_unlock(&a->lock);
        }
        post_status(a, c, "failed", why, NULL);
        free(c);
        return;
    }
    if (pthread_create(&c->th, NULL, capture_main, c) != 0) {
        pthread_mutex_lock(&a->lock);
        t->cap = NULL;
        pthread_mutex_unlock(&a->lock);
        post_status(a, c, "failed", "the agent could not start a thread", NULL);
        free(c);
        return;
    }
    live[(*nlive)++] = c;
}

/* Joins the capture threads that have ended. */
static void reap(capture **live, size_t *nlive, int all)
{
    for (size_t i = 0; i < *nlive;) {
        capture *c = live[i];
        int done;
        pthread_mutex_lock(&c->a->lock);
        done = c->t->cap != c;
        pthread_mutex_unlock(&c->a->lock);
        if (done || all) {
            pthread_join(c->th, NULL);
            free(c);
            live[i] = live[--*nlive];
        } else {
            i++;
        }
    }
}

static void *poll_main(void *arg)
{
    agent *a = arg;
    capture *live[TARGETS_MAX];
    size_t nlive = 0;
    int registered = 0;
    double backoff = 1;
    char path[160], err[256], msg[300];
    snprintf(path, sizeof path, "/api/v1/agents/%s/poll?wait=%d", a->name, POLL_WAIT_S);
    while (!g_stop) {
        reap(live, &nlive, 0);
        if (!registered) {
            if (register_agent(a) != 0) {
                nap(backoff);
                backoff = backoff < 30 ? backoff * 2 : 30;
                continue;
            }
            registered = 1;
            backoff = 1;
        }
        long status;
        fp_membuf b;
        if (server_call(a, "POST", path, NULL, POLL_WAIT_S + 20, &status, &b, err, sizeof err) != 0) {
            if (!g_stop)
                fp_log("poll %s: %s; retrying in %.0f s", a->up.server, err, backoff);
            nap(backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
            continue;
        }
        if (status == 404) { /* the server forgot this agent (a new database): register again */
            registered = 0;
            fp_membuf_free(&b);
            continue;
        }
        if (status != 200) {
            reply_text(&b, msg, sizeof msg);
            fp_log("poll: HTTP %ld: %s; retrying in %.0f s", status, msg, backoff);
            fp_membuf_free(&b);
            nap(backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
            continue;
        }
        backoff = 1;
        json_error_t je;
        json_t *doc = json_loads(b.p, 0, &je);
        fp_membuf_free(&b);
        json_t *cap = json_object_get(doc, "capture");
        if (json_is_object(cap) && nlive < TARGETS_MAX)
            start_capture(a, cap, live, &nlive);
        else if (json_is_integer(json_object_get(doc, "retry_s")))
            nap((double)json_integer_value(json_object_get(doc, "retry_s")));
        json_decref(doc);
    }
    reap(live, &nlive, 1);
    return NULL;
}

/* ---- the main loop ---------------------------------------------------------------------- */

/* What each running capture still waits for: after each scan (scanned set: counted as one),
 * and before each upload (a file handed out in the scan that found it was never counted). */
static void update_captures(agent *a, int scanned)
{
    pthread_mutex_lock(&a->lock);
    a->scans += scanned;
    for (size_t i = 0; i < a->ntargets; i++) {
        capture *c = a->targets[i].cap;
        if (!c)
            continue;
        size_t p = fp_watch_pending(a->w, a->st, a->targets[i].dir, c->since_ns);
        if (p != c->pending)
            c->last_activity = fp_now();
        c->pending = p;
        c->scans += scanned;
    }
    pthread_mutex_unlock(&a->lock);
}

static int run(agent *a)
{
    int rc = 0;
    a->resolve_next = 0;
    a->spool_next = 0;
    while (!g_stop) {
        if (fp_watch_scan(a->w) != 0) {
            fp_log("out of memory while scanning");
            return 1;
        }
        double now = fp_now();
        if (now >= a->resolve_next)
            a->resolve_next = resolve_sending(a) ? now + a->retry_s : 1e300;
        fp_watch_file f;
        while (!g_stop && fp_watch_next(a->w, a->st, &f)) {
            int r = send_file(a, &f);
            if (r < 0) {
                fp_log("cannot write the state file %s: %s; stopping (nothing may be sent twice)", a->state_path, strerror(errno));
                return 1;
            }
            if (r > 0 && g_stop)
                break;
        }
        update_captures(a, 1);
        if (!g_stop && fp_now() >= a->spool_next) {
            send_spool(a);
            a->spool_next = fp_now() + a->retry_s;
        }
        /* Wake at the latest when a file's settle time may be over. */
        fp_watch_wait(a->w, (int)(a->settle_s * 500 > 1000 ? 1000 : a->settle_s * 500 + 50));
    }
    return rc;
}

/* ---- the command line ------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: firstpass-upload --watch DIR [--watch DIR]... [--target ENGINE=URL[,dir=DIR]...]...\n"
            "                        --server URL [--token T] [options]\n"
            "\n"
            "Sends every trace that appears in the watched directories, once it is whole, exactly once\n"
            "(a state file keyed by path, size and mtime), with labels from the flags and the file's\n"
            "name; and, for each --target, runs the captures the server asks for (POST /api/v1/captures)\n"
            "through the engine's own /start_profile and /stop_profile. docs/serving.md has the details.\n"
            "\n"
            "  --watch DIR        a directory, or a glob of directories, to watch (repeatable)\n"
            "  --target SPEC      ENGINE=URL[,dir=DIR][,name=NAME][,engine_dir=DIR]: an engine this agent\n"
            "                     can profile; ENGINE is vllm, sglang or torch (a loop serving vLLM's\n"
            "                     endpoints). dir: where its traces land as this agent sees it (default:\n"
            "                     the one --watch DIR); engine_dir: the same directory as the engine sees\n"
            "                     it, sent as SGLang's output_dir; name: default HOST-ENGINE-PORT\n"
            "  --server URL       the firstpass server (default $FIRSTPASS_SERVER)\n"
            "  --token T          bearer token (default $FIRSTPASS_TOKEN)\n"
            "  --label k:v        a label for every file (repeatable; wins over what the name says)\n"
            "  --model M          the label model:M\n"
            "  --engine E         the label engine:E (default: from the target or the file's name)\n"
            "  --host H           the label host:H (default: this host's name)\n"
            "  --agent NAME       the agent's name on the server (default: the host's name)\n"
            "  --state FILE       what was sent (default $FIRSTPASS_STATE, else\n"
            "                     $XDG_STATE_HOME/firstpass/watch.state, else ~/.local/state/firstpass/watch.state)\n"
            "  --settle S         size and mtime unchanged this long before a file is checked (default 2)\n"
            "  --remove           delete a file once the server has it (or the spool does); default: keep\n"
            "  --keep             keep the files (the default)\n"
            "  --retry S          seconds between tries while the server is down (default 10)\n"
            "  --flush-timeout S  how long a capture waits for /stop_profile and the files (default 1800)\n"
            "  --steps-timeout S  a capture by steps is stopped after this long without files (default 300)\n"
            "  --timeout S        total timeout of one upload (default 600)\n"
            "\n"
            "The engines' profiler endpoints slow inference while they run: capture for seconds, not minutes.\n");
}

int fp_agent_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--watch") || !strcmp(argv[i], "--target"))
            return 1;
    return 0;
}

static int name_ok(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
    return n > 0 && n <= 64 && s[n] == '\0';
}

/* Replaces what a name may not hold with '_' and cuts it at 64 bytes. */
static void sanitize(char *s)
{
    for (char *p = s; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *p))
            *p = '_';
    if (strlen(s) > 64)
        s[64] = '\0';
}

/* ENGINE=URL[,key=value]... into t. 0, or -1 with a message on stderr. */
static int parse_target(const char *spec, const char *host, target *t)
{
    char buf[2048], *save = NULL;
    memset(t, 0, sizeof *t);
    if (strlen(spec) >= sizeof buf)
        goto bad;
    strcpy(buf, spec);
    char *eq = strchr(buf, '=');
    if (!eq)
        goto bad;
    *eq = '\0';
    if (strcmp(buf, "vllm") && strcmp(buf, "sglang") && strcmp(buf, "torch")) {
        fprintf(stderr, "firstpass-upload: --target: the engine is vllm, sglang or torch, not '%s'\n", buf);
        return -1;
    }
    snprintf(t->engine, sizeof t->engine, "%s", buf);
    char *tok = strtok_r(eq + 1, ",", &save);
    if (!tok || (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)))
        goto bad;
    snprintf(t->url, sizeof t->url, "%s", tok);
    while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
        if (!strncmp(tok, "dir=", 4))
            snprintf(t->dir, sizeof t->dir, "%s", tok + 4);
        else if (!strncmp(tok, "engine_dir=", 11))
            snprintf(t->engine_dir, sizeof t->engine_dir, "%s", tok + 11);
        else if (!strncmp(tok, "name=", 5)) {
            snprintf(t->name, sizeof t->name, "%s", tok + 5);
            if (!name_ok(t->name)) {
                fprintf(stderr, "firstpass-upload: --target: a name is [A-Za-z0-9._-]{1,64}, not '%s'\n", tok + 5);
                return -1;
            }
        } else
            goto bad;
    }
    size_t k = strlen(t->dir);
    while (k > 1 && t->dir[k - 1] == '/')
        t->dir[--k] = '\0';
    if (!t->name[0]) {
        const char *hp = strstr(t->url, "://") + 3, *colon = strchr(hp, ':');
        char h[41], nm[sizeof t->name];
        snprintf(h, sizeof h, "%.40s", host);
        snprintf(nm, sizeof nm, "%s-%.8s-%d", h, t->engine, colon ? atoi(colon + 1) : !strncmp(t->url, "https", 5) ? 443 : 80);
        memcpy(t->name, nm, sizeof nm);
        sanitize(t->name);
    }
    return 0;
bad:
    fprintf(stderr, "firstpass-upload: --target wants ENGINE=URL[,dir=DIR][,name=NAME][,engine_dir=DIR], got '%s'\n", spec);
    return -1;
}

static int num_arg(const char *flag, const char *v, double lo, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo) || x > 1e9) {
        fprintf(stderr, "firstpass-upload: %s wants a number >= %g, got '%s'\n", flag, lo, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int default_state(char *buf, size_t n)
{
    const char *s = getenv("FIRSTPASS_STATE"), *x = getenv("XDG_STATE_HOME"), *h = getenv("HOME");
    int w;
    if (s && s[0])
        w = snprintf(buf, n, "%s", s);
    else if (x && x[0] == '/')
        w = snprintf(buf, n, "%s/firstpass/watch.state", x);
    else if (h && h[0] == '/')
        w = snprintf(buf, n, "%s/.local/state/firstpass/watch.state", h);
    else
        return -1;
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int fp_agent_main(int argc, char **argv)
{
    static agent A; /* big (the bursts and targets): not on the stack */
    agent *a = &A;
    const char *patterns[64];
    size_t npat = 0;
    const char *tspecs[TARGETS_MAX];
    size_t nt = 0;
    double d;
    char err[512];

    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    a->up.server = getenv("FIRSTPASS_SERVER");
    a->up.token = getenv("FIRSTPASS_TOKEN");
    a->up.timeout_s = 600;
    a->up.connect_timeout_s = 10;
    a->up.abort_flag = &g_stop;
    a->settle_s = 2;
    a->retry_s = 10;
    a->flush_timeout_s = 1800;
    a->steps_timeout_s = 300;
    if (gethostname(a->host, sizeof a->host - 1) != 0)
        snprintf(a->host, sizeof a->host, "host");
    snprintf(a->name, sizeof a->name, "%.64s", a->host);
    sanitize(a->name);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--remove") || !strcmp(o, "--keep")) {
            a->remove = !strcmp(o, "--remove");
            continue;
        }
        if (!v || (v[0] == '-' && v[1] == '-')) {
            fprintf(stderr, "firstpass-upload: %s needs a value (or is not an option of --watch)\n", o);
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(o, "--watch")) {
            if (npat == sizeof patterns / sizeof patterns[0]) {
                fprintf(stderr, "firstpass-upload: at most 64 --watch\n");
                return 2;
            }
            patterns[npat++] = v;
        } else if (!strcmp(o, "--target")) {
            if (nt == TARGETS_MAX) {
                fprintf(stderr, "firstpass-upload: at most %d --target\n", TARGETS_MAX);
                return 2;
            }
            tspecs[nt++] = v;
        } else if (!strcmp(o, "--server")) {
            a->up.server = v;
        } else if (!strcmp(o, "--token")) {
            a->up.token = v;
        } else if (!strcmp(o, "--label") || !strcmp(o, "--model") || !strcmp(o, "--engine")) {
            const char *key = !strcmp(o, "--model") ? "model" : !strcmp(o, "--engine") ? "engine" : NULL;
            const char *colon = key ? NULL : strchr(v, ':');
            if (!key && (!colon || colon == v)) {
                fprintf(stderr, "firstpass-upload: --label wants k:v, got '%s'\n", v);
                return 2;
            }
            if (a->nlabels == LABELS_MAX) {
                fprintf(stderr, "firstpass-upload: at most %d labels\n", LABELS_MAX);
                return 2;
            }
            kv *l = &a->labels[a->nlabels++];
            if (key) {
                snprintf(l->k, sizeof l->k, "%s", key);
                snprintf(l->v, sizeof l->v, "%s", v);
            } else {
                snprintf(l->k, sizeof l->k, "%.*s", (int)(colon - v), v);
                snprintf(l->v, sizeof l->v, "%s", colon + 1);
            }
        } else if (!strcmp(o, "--host")) {
            snprintf(a->host, sizeof a->host, "%s", v);
        } else if (!strcmp(o, "--agent")) {
            if (!name_ok(v)) {
                fprintf(stderr, "firstpass-upload: --agent wants [A-Za-z0-9._-]{1,64}, got '%s'\n", v);
                return 2;
            }
            snprintf(a->name, sizeof a->name, "%s", v);
        } else if (!strcmp(o, "--state")) {
            snprintf(a->state_path, sizeof a->state_path, "%s", v);
        } else if (!strcmp(o, "--settle")) {
            if (num_arg(o, v, 0, &a->settle_s))
                return 2;
        } else if (!strcmp(o, "--retry")) {
            if (num_arg(o, v, 0.1, &a->retry_s))
                return 2;
        } else if (!strcmp(o, "--flush-timeout") || !strcmp(o, "--steps-timeout") || !strcmp(o, "--timeout")) {
            if (num_arg(o, v, 1, &d))
                return 2;
            if (!strcmp(o, "--flush-timeout"))
                a->flush_timeout_s = (long long)d;
            else if (!strcmp(o, "--steps-timeout"))
                a->steps_timeout_s = (long long)d;
            else
                a->up.timeout_s = (long)d;
        } else {
            fprintf(stderr, "firstpass-upload: unknown option '%s' with --watch\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (!a->up.server || !a->up.server[0]) {
        fprintf(stderr, "firstpass-upload: --server URL (or FIRSTPASS_SERVER) is required\n");
        return 2;
    }
    for (size_t i = 0; i < nt; i++) {
        target *t = &a->targets[a->ntargets];
        if (parse_target(tspecs[i], a->host, t) != 0)
            return 2;
        if (!t->dir[0]) {
            if (npat != 1 || strpbrk(patterns[0], "*?[")) {
                fprintf(stderr, "firstpass-upload: --target %s needs dir= (where the engine writes its traces, as this agent "
                                "sees it) unless exactly one --watch DIR is given\n", t->name);
                return 2;
            }
            snprintf(t->dir, sizeof t->dir, "%s", patterns[0]);
            size_t k = strlen(t->dir);
            while (k > 1 && t->dir[k - 1] == '/')
                t->dir[--k] = '\0';
        }
        for (size_t j = 0; j < a->ntargets; j++)
            if (!strcmp(a->targets[j].name, t->name) || !strcmp(a->targets[j].dir, t->dir)) {
                fprintf(stderr, "firstpass-upload: two --target share the name or the directory '%s'\n",
                        !strcmp(a->targets[j].name, t->name) ? t->name : t->dir);
                return 2;
            }
        a->ntargets++;
    }
    if (npat == 0 && a->ntargets == 0) {
        fprintf(stderr, "firstpass-upload: --watch DIR or --target is required\n");
        return 2;
    }
    if (!a->state_path[0] && default_state(a->state_path, sizeof a->state_path) != 0) {
        fprintf(stderr, "firstpass-upload: give --state FILE (no FIRSTPASS_STATE, XDG_STATE_HOME or HOME)\n");
        return 2;
    }
    if (fp_upload_global_init() != 0) {
        fprintf(stderr, "firstpass-upload: curl_global_init failed\n");
        return 1;
    }
    if (!(a->st = fp_state_open(a->state_path, err, sizeof err))) {
        fprintf(stderr, "firstpass-upload: %s\n", err);
        return 1;
    }
    if (!(a->w = fp_watch_new(a->settle_s))) {
        fprintf(stderr, "firstpass-upload: out of memory\n");
        fp_state_close(a->st);
        return 1;
    }
    for (size_t i = 0; i < npat; i++)
        fp_watch_add(a->w, patterns[i]);
    for (size_t i = 0; i < a->ntargets; i++)
        fp_watch_add(a->w, a->targets[i].dir); /* a target's directory is watched (once: dirs are unique) */
    fp_spool_dir(a->spool, sizeof a->spool, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll(2) in the main loop returns at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fp_log("watching %zu pattern%s for %s (state %s, settle %.1f s, %s)", npat + a->ntargets, npat + a->ntargets == 1 ? "" : "s",
           a->up.server, a->state_path, a->settle_s, a->remove ? "remove when sent" : "keep files");

    pthread_t poller;
    int polling = a->ntargets > 0 && pthread_create(&poller, NULL, poll_main, a) == 0;
    if (a->ntargets > 0 && !polling)
        fp_log("cannot start the poll thread: captures are off");
    int rc = run(a);
    g_stop = 1;
    if (polling)
        pthread_join(poller, NULL);
    fp_watch_free(a->w);
    fp_state_close(a->st);
    fp_log("stopped");
    return rc;
}
