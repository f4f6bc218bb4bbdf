/* agent.c -- firstpass-upload --watch / --target: sends the traces that serving engines write,
 * and profiles an engine when the server asks (agent.h).
 *
 * Threads, and what they share (agent.lock guards every field marked "lock"):
 *   main     scans the watched directories (watch.h), sends each whole trace once (the state
 *            file), spools what the server cannot take now and sends the spool later. Only it
 *            touches the watcher and the state's file entries.
 *   poll     first stops what an earlier run left profiling (the state's captures in flight),
 *            then registers the targets and long-polls the server for capture requests;
 *            starts one capture thread per request.
 *   capture  records the capture in flight (state file), confirms it to the server, calls the
 *            engine's /start_profile, waits, calls /stop_profile and waits until the main
 *            thread has sent the files the engine flushed (the target's `cap`), reporting each
 *            step to the server.
 * Never exits on a network error: everything is retried with a bounded back-off, and nothing
 * is retried forever (--give-up). Every log line is logfmt (log.h). */
#include "agent.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/utf8.h"
#include "log.h"
#include "membuf.h"
#include "session.h"
#include "upload.h"
#include "watch.h"

#define AGENT_VERSION "firstpass-upload/1"
#define LABELS_MAX FP_LABELS_MAX   /* the server's bound on labels a session */
#define REPLY_MAX (1u << 20)       /* bytes kept of any reply (engine or server) */
#define POLL_WAIT_S 25             /* the long poll's wait (the server caps it too) */
#define TARGETS_MAX 32
#define BURSTS_MAX 64              /* vLLM profiles remembered for their job label */
#define BURST_WINDOW_S 600         /* a vLLM worker file joins a profile seen this recently */
#define NAME_MAX_BYTES 64          /* agent and target names: [A-Za-z0-9._-]{1,64} */
#define SPOOL_TRIES_MAX 1024       /* spooled documents whose back-off is remembered */

/* ---- configuration and shared state ----------------------------------------------------- */

typedef struct kv {
    char k[128];
    char v[FP_LABEL_MAX_BYTES];
} kv;

typedef struct capture capture;

typedef struct target {
    char name[NAME_MAX_BYTES + 1];
    char engine[16];             /* vllm | sglang | torch (torch speaks vLLM's endpoints) */
    char url[512];               /* the engine's base URL */
    char dir[PATH_MAX];          /* where its traces land, as this agent sees it */
    char engine_dir[PATH_MAX];   /* the same directory as the engine sees it (SGLang output_dir); "" */
    capture *cap;                /* lock: the capture running on it, NULL */
    long long leftover;          /* lock: a capture an earlier run left in flight on it whose
                                    /stop_profile was not answered yet, 0 none */
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
    int cancelled;               /* lock: the server cancelled it (a poll's list, a status reply) */
    pthread_t th;
};

typedef struct burst {
    char key[PATH_MAX + 256];    /* dir '\n' group */
    char job[192];
    char ranks[512];             /* ",0,1," */
    long long last_mtime_s;
    double used;
} burst;

typedef struct spool_try {       /* a spooled document that failed: when to try it again */
    char id[17];
    unsigned tries;
    double next;
} spool_try;

typedef struct agent {
    fp_upload_opts up;           /* the server: URL, token, timeouts, abort flag, tick */
    char host[256];              /* the label host (--host, else machine) */
    char machine[256];           /* gethostname(): what default names and the instance use */
    char name[NAME_MAX_BYTES + 1]; /* the agent's name on the server */
    char instance[17];           /* this agent's identity (host and state file): two agents
                                    with one name are told apart by the server */
    kv labels[LABELS_MAX];       /* --label, --model, --engine */
    size_t nlabels;
    target targets[TARGETS_MAX];
    size_t ntargets;
    double settle_s, retry_s, retry_max_s, give_up_s, rescan_s;
    long long flush_timeout_s, steps_timeout_s, max_capture_s;
    size_t max_files;
    int remove;                  /* --remove: delete a file once the server has it */
    char state_path[PATH_MAX];
    char spool[PATH_MAX];
    char spool_why[512];         /* the last refusal of the spool directory logged, "" none */
    char health[PATH_MAX];       /* --health-file, "" none */
    double health_at;            /* fp_now() it was last written */
    fp_watch *w;
    fp_state *st;
    burst bursts[BURSTS_MAX];
    spool_try tries[SPOOL_TRIES_MAX];
    pthread_mutex_t lock;
    unsigned long scans;         /* lock */
    double spool_next;           /* when to send the spool next (main thread) */
    double spool_wait;           /* the spool's back-off while the server is unreachable */
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

static uint64_t fnv64(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

/* ---- the health file -------------------------------------------------------------------- */

/* Writes the health file (--health-file) at most once a second: a probe reads its mtime (a
 * liveness probe: older than a minute or two means the agent is stuck). Touched by the main
 * loop and, through the uploads' tick, during a long upload. Main thread only. */
static void health_touch(void *ud)
{
    agent *a = ud;
    char line[160];
    double now = fp_now();
    if (!a->health[0] || now - a->health_at < 1.0)
        return;
    a->health_at = now;
    int n = snprintf(line, sizeof line, "level=info msg=alive pid=%ld time=%lld\n", (long)getpid(), (long long)time(NULL));
    int fd = open(a->health, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n) {
        /* the mtime moved anyway: a full disk does not make the agent look dead */
    }
    close(fd);
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
 * finish a stop whose client has gone. A start cut this way leaves its capture in the state
 * file: the next run stops the engine first. */
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
    oo.tick = NULL; /* the health file is the main thread's; these calls run on others too */
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

/* ---- text: UTF-8 repaired, names bounded ------------------------------------------------ */

/* in as UTF-8 into out (cap bytes): each byte that starts no valid sequence becomes U+FFFD,
 * and the text is cut at a character boundary to fit. Why: the server refuses a label or a
 * name that is not UTF-8 (400), which lost valid traces for their file names (issue 50). */
static void fix_text(const char *in, char *out, size_t cap)
{
    size_t n = strlen(in), i = 0, o = 0;
    while (i < n && o + 1 < cap) {
        size_t ok = utf8_valid_prefix(in + i, n - i);
        size_t take = utf8_cut(in + i, ok, cap - 1 - o);
        memcpy(out + o, in + i, take);
        o += take;
        i += take;
        if (take < ok || i >= n)
            break;
        if (o + 3 >= cap)
            break;
        memcpy(out + o, "\xEF\xBF\xBD", 3); /* the byte at in[i] starts no valid sequence */
        o += 3;
        i++;
    }
    out[o] = '\0';
}

static int name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

static int name_ok(const char *s)
{
    size_t n = 0;
    while (s[n] && name_char(s[n]))
        n++;
    return n > 0 && n <= NAME_MAX_BYTES && s[n] == '\0';
}

/* base (any text, made of name characters: others become '_') and then suffix, as a name of
 * at most 64 bytes into out (65). When they do not fit, the middle of base gives way to a
 * hash of all of base: its head and its last 16 bytes stay (a Kubernetes pod's name ends in
 * its ReplicaSet's hash and its own random suffix, what tells replicas apart), so two bases
 * that differ anywhere give two names (issue 50: the host cut at 40 bytes made every replica
 * of a deployment one target). suffix is at most 32 bytes. */
static void bounded_name(const char *base, const char *suffix, char out[NAME_MAX_BYTES + 1])
{
    char b[256];
    size_t n = 0, room = NAME_MAX_BYTES - strlen(suffix);
    for (; base[n] && n + 1 < sizeof b; n++)
        b[n] = name_char(base[n]) ? base[n] : '_';
    b[n] = '\0';
    if (n == 0) {
        snprintf(b, sizeof b, "host");
        n = 4;
    }
    if (n <= room) {
        memcpy(out, b, n); /* n + strlen(suffix) <= 64 */
        memcpy(out + n, suffix, strlen(suffix) + 1);
        return;
    }
    size_t tail = 16, head = room - tail - 10; /* head "-" 8 hex "-" tail */
    char mid[12];
    snprintf(mid, sizeof mid, "-%08x-", (unsigned)(fnv64(FNV0, base, strlen(base)) & 0xffffffffu));
    /* head + 10 + tail + suffix = 64 bytes */
    memcpy(out, b, head);
    memcpy(out + head, mid, 10);
    memcpy(out + head + 10, b + n - tail, tail);
    memcpy(out + head + 10 + tail, suffix, strlen(suffix) + 1);
}

/* ---- labels and the query of one file --------------------------------------------------- */

static int has_label(const kv *l, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l[i].k, k))
            return 1;
    return 0;
}

/* Adds k:v unless k is there already (the first one wins: flags go in first) or v is "".
 * Both are repaired UTF-8 (fix_text) and key:value is cut to the server's 512 bytes. */
static void add_label(kv *l, size_t *n, const char *k, const char *v)
{
    char key[sizeof l[0].k];
    if (!v || !v[0] || *n >= LABELS_MAX)
        return;
    fix_text(k, key, sizeof key);
    if (!key[0] || has_label(l, *n, key))
        return;
    snprintf(l[*n].k, sizeof l[*n].k, "%s", key);
    fix_text(v, l[*n].v, FP_LABEL_MAX_BYTES - 1 - strlen(key)); /* "key:value" within the bound */
    (*n)++;
}

/* The file's key on the server (label file_id, and the upload's Idempotency-Key): what was
 * sent, whoever asks later. */
static void file_id(const agent *a, const fp_watch_file *f, char out[17])
{
    char tail[64];
    uint64_t h = FNV0;
    snprintf(tail, sizeof tail, "%lld.%lld", f->size, f->mtime_ns);
    h = fnv64(h, a->host, strlen(a->host) + 1);
    h = fnv64(h, f->path, strlen(f->path) + 1);
    h = fnv64(h, tail, strlen(tail) + 1);
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
        char when[32], group[81];
        b = oldest;
        memset(b, 0, sizeof *b);
        snprintf(b->key, sizeof b->key, "%s", key);
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
        fix_text(f->info.group, group, sizeof group); /* cut at a character, not at byte 80 */
        snprintf(b->job, sizeof b->job, "vllm-%s-%s", group, when);
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
            char group[400];
            fix_text(f->info.group, group, sizeof group);
            snprintf(buf, sizeof buf, "sglang-%s", group);
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

/* "name=...&label=k:v&..." with every value escaped (name: repaired UTF-8, at most 512
 * bytes). -1 when it does not fit. */
static int make_query(const char *name, const kv *l, size_t n, char *q, size_t cap)
{
    size_t used = 0;
    q[0] = '\0';
    for (size_t i = 0; i <= n; i++) {
        char pair[FP_LABEL_MAX_BYTES + 140];
        if (i == n)
            fix_text(name, pair, 513);
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

/* Writes the trace open as fd (plain or gzip: gzread reads both; read from offset 0) to out
 * as a session document: the trace with a "firstpass" object (name, labels) spliced in after
 * its '{' (a bare event array becomes {"firstpass":...,"traceEvents":[...]}), so that it
 * carries its labels when the spool is sent later without a query (docs/contract.md;
 * python/firstpass/body.py does the same). Streamed: 1 MiB and zlib's state at most, however
 * big the trace (issue 50: it was built in memory). 0, or -1 with why in err. */
static int session_doc(int fd, const char *meta, gzFile out, char *err, size_t errlen)
{
    int d = lseek(fd, 0, SEEK_SET) == 0 ? dup(fd) : -1;
    gzFile in = d >= 0 ? gzdopen(d, "rb") : NULL;
    char *buf = malloc(1 << 20);
    int first = 0, rc = -1, n;
    if (!in || !buf) {
        if (d >= 0 && !in)
            close(d);
        snprintf(err, errlen, "cannot read the trace");
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
        if (gzputs(out, "{\"firstpass\":") < 0 || gzputs(out, meta) < 0)
            goto io;
        if (next == '}') {
            if (gzputc(out, '}') < 0)
                goto io;
        } else if (next >= 0) {
            if (gzputc(out, ',') < 0 || gzputc(out, next) < 0)
                goto io;
        }
    } else if (first == '[') {
        if (gzputs(out, "{\"firstpass\":") < 0 || gzputs(out, meta) < 0 || gzputs(out, ",\"traceEvents\":[") < 0)
            goto io;
    } else {
        snprintf(err, errlen, "not a JSON trace");
        goto out;
    }
    while ((n = gzread(in, buf, 1 << 20)) > 0)
        if (gzwrite(out, buf, (unsigned)n) != n)
            goto io;
    if (n < 0)
        goto io;
    if (first == '[' && gzputc(out, '}') < 0)
        goto io;
    rc = 0;
    goto out;
io:
    snprintf(err, errlen, "cannot build the session document (a read or write error: %s)", strerror(errno));
out:
    if (in)
        gzclose(in);
    free(buf);
    lseek(fd, 0, SEEK_SET);
    return rc;
}

/* Logs a refusal of the spool directory once a reason (not at every try). */
static void spool_refused(agent *a, const char *why)
{
    if (!strcmp(a->spool_why, why))
        return;
    snprintf(a->spool_why, sizeof a->spool_why, "%s", why);
    fp_logkv("warn", "spool refused", "dir=%s reason=%s", fp_q(a->spool), fp_q(why));
}

/* Spools f: the session document as <spool>/watch-<file_id>.json.gz (the same name each
 * time, so that a second spooling replaces the first), written as a stream. 0, or -1 with
 * why in err. */
static int spool_file(agent *a, const fp_watch_file *f, const kv *l, size_t n, char *err, size_t errlen)
{
    json_t *labels = json_object(), *meta;
    char id[17], name[64], sname[513], why[512] = "";
    fp_spool_out so;
    for (size_t i = 0; i < n; i++)
        json_object_set_new(labels, l[i].k, json_string(l[i].v));
    fix_text(f->info.name, sname, sizeof sname);
    meta = json_pack("{s:s,s:i,s:s,s:o,s:s,s:s}", "format", "firstpass-session", "version", 1, "name", sname, "labels", labels,
                     "host", a->host, "producer", AGENT_VERSION " --watch");
    char *m = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    file_id(a, f, id);
    snprintf(name, sizeof name, "watch-%s.json.gz", id);
    int rc = -1;
    /* the one spool rule (upload.h): created if missing, refused unless it is this user's own */
    if (fp_spool_prepare(NULL, 1, a->spool, sizeof a->spool, why, sizeof why) != 0) {
        spool_refused(a, why);
        snprintf(err, errlen, "the spool cannot be used: %.400s", why);
    } else if (fp_spool_begin(&so, a->spool, name) != 0) {
        snprintf(err, errlen, "cannot write to the spool %.150s: %.60s", a->spool, strerror(errno));
    } else if (session_doc(f->fd, m, so.gz, err, errlen) != 0) {
        fp_spool_abort(&so);
    } else if (fp_spool_commit(&so) != 0) {
        snprintf(err, errlen, "cannot write to the spool %.150s: %.60s", a->spool, strerror(errno));
    } else {
        rc = 0;
    }
    free(m);
    return rc;
}

/* 1 when the server has a session labelled file_id:<id>, 0 when it has none, -1 when it
 * could not be asked. The check for servers that ignore Idempotency-Key: with one, a second
 * upload of a key stored or in flight is answered 200 or 409 and stores nothing. */
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

/* The session id of an upload's reply, 0 none. */
static long long reply_id(const char *resp)
{
    json_error_t je;
    json_t *r = json_loads(resp, 0, &je);
    long long sid = json_integer_value(json_object_get(r, "id"));
    json_decref(r);
    return sid > 0 ? sid : 0;
}

/* The back-off record of spooled document id (created; the oldest one reused when full). */
static spool_try *spool_try_of(agent *a, const char *id)
{
    spool_try *old = &a->tries[0];
    for (size_t i = 0; i < SPOOL_TRIES_MAX; i++) {
        spool_try *t = &a->tries[i];
        if (!strcmp(t->id, id))
            return t;
        if (t->next < old->next)
            old = t;
    }
    memset(old, 0, sizeof *old);
    snprintf(old->id, sizeof old->id, "%s", id);
    return old;
}

/* Moves a spooled document aside as path + suffix (".refused", ".expired"): kept for a person
 * to look at, never sent again (the sender takes only *.json.gz). */
static void spool_set_aside(const char *path, const char *suffix, const char *why)
{
    char to[PATH_MAX + 16];
    snprintf(to, sizeof to, "%s%s", path, suffix);
    if (rename(path, to) == 0)
        fp_logkv("warn", "spooled document set aside", "file=%s moved_to=%s reason=%s", fp_q(path), fp_q(to), fp_q(why));
    else
        fp_logkv("error", "cannot set a spooled document aside", "file=%s error=%s", fp_q(path), fp_q(strerror(errno)));
}

/* Sends one spooled document (path, its file_id id). 1 sent or settled, 0 to try again
 * later, -1 when the server cannot be reached (the round stops). */
static int send_spooled(agent *a, const char *path, const char *id)
{
    char resp[512], err[256], why[700];
    long status = 0, ra = 0;
    long long have = 0;
    int has = server_has(a, id, &have);
    if (has < 0)
        return -1;
    if (!has) {
        fp_upload_opts o = a->up;
        o.query = NULL;
        o.idempotency_key = id;
        o.retry_after_s = &ra;
        if (fp_upload_file(&o, path, &status, resp, sizeof resp, err, sizeof err) != 0) {
            spool_try *t = spool_try_of(a, id);
            if (status == 409) { /* an upload of this key is in flight on the server */
                t->next = fp_now() + (ra > 0 ? (double)ra : a->retry_s);
                fp_logkv("info", "in flight on the server", "file=%s retry_s=%.0f", fp_q(path), t->next - fp_now());
                return 0;
            }
            if (fp_upload_refused(status)) {
                snprintf(why, sizeof why, "HTTP %ld: %.600s", status, resp);
                spool_set_aside(path, ".refused", why);
                return 1;
            }
            double wait = a->retry_s;
            for (unsigned k = 0; k < t->tries && wait < a->retry_max_s; k++)
                wait *= 2;
            t->tries++;
            t->next = fp_now() + (wait < a->retry_max_s ? wait : a->retry_max_s);
            if (status == 0 && !g_stop)
                return -1;
            fp_logkv("warn", "spooled document not taken", "file=%s status=%ld reply=%s retry_s=%.0f", fp_q(path), status,
                     fp_q(status ? resp : err), t->next - fp_now());
            return 0;
        }
        have = reply_id(resp);
    }
    if (unlink(path) == 0)
        fp_logkv("info", "sent from the spool", "file=%s session=%lld%s", fp_q(path), have,
                 status == 200 ? " note=\"stored already (Idempotency-Key)\"" : "");
    return 1;
}

/* Sends the agent's spooled documents (watch-<file_id>.json.gz), each independent. A
 * document the server refuses (a 4xx that is not about the token, the rate or a key in
 * flight) is set aside (.refused), one spooled longer than --give-up ago too (.expired); the
 * others back off (doubling from --retry to --retry-max). Stops at the first that finds no
 * server. 1 when a document found no server (the round stopped), else 0. */
static int send_spool(agent *a)
{
    DIR *d;
    struct dirent *de;
    char why[512];
    /* 1: there is none yet; -1: not this user's own, so nothing in it is sent (upload.h) */
    int pr = fp_spool_prepare(NULL, 0, a->spool, sizeof a->spool, why, sizeof why);
    if (pr < 0)
        spool_refused(a, why);
    if (pr != 0 || !(d = opendir(a->spool)))
        return 0;
    a->spool_why[0] = '\0';
    double now = fp_now();
    int unreachable = 0;
    while (!g_stop && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        char path[PATH_MAX], id[17];
        struct stat st;
        if (strncmp(de->d_name, "watch-", 6) != 0 || n != 6 + 16 + 8 || strcmp(de->d_name + 22, ".json.gz") != 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", a->spool, de->d_name) >= sizeof path)
            continue;
        snprintf(id, sizeof id, "%.16s", de->d_name + 6);
        if (spool_try_of(a, id)->next > now)
            continue;
        if (lstat(path, &st) == 0 && difftime(time(NULL), st.st_mtime) > a->give_up_s) {
            snprintf(why, sizeof why, "not taken by the server within --give-up %.0f s of being spooled", a->give_up_s);
            spool_set_aside(path, ".expired", why);
            continue;
        }
        if (send_spooled(a, path, id) < 0) {
            unreachable = 1;
            break;
        }
        health_touch(a);
    }
    closedir(d);
    return unreachable;
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
        fp_logkv("warn", "sent, but could not remove it", "file=%s error=%s", fp_q(f->path), fp_q(strerror(errno)));
}

/* The server could not take f now (down, busy, the token refused) and it could not be
 * spooled: it is retried from where it is, backing off, until --give-up has passed since its
 * first failure (then it is marked refused: nothing is retried forever). 1, or -1 when the
 * state file cannot be written. */
static int retry_later(agent *a, const fp_watch_file *f, const char *why)
{
    double failing = 0;
    double wait = fp_watch_backoff(a->w, f->path, a->retry_s, a->retry_max_s, &failing);
    if (failing > a->give_up_s) {
        fp_logkv("error", "given up", "file=%s reason=%s failing_s=%.0f note=%s", fp_q(f->path), fp_q(why), failing,
                 fp_q("not taken within --give-up; send it by hand: firstpass-upload FILE"));
        return fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_REFUSED, 0) != 0 ? -1 : 1;
    }
    if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_NONE, 0) != 0)
        return -1;
    fp_logkv("warn", "server not taking it", "file=%s reason=%s retry_s=%.0f", fp_q(f->path), fp_q(why), wait);
    return 1;
}

/* The server could not take f now: a JSON trace goes to the spool with its labels inside; an
 * SQLite export cannot carry them and is retried from where it is. 0 settled, 1 waits, -1
 * when the state file cannot be written. */
static int not_taken(agent *a, const fp_watch_file *f, const kv *l, size_t n, target *t, long long cap, const char *why)
{
    char err[512], id[17];
    if (f->info.kind != FP_KIND_SQLITE && spool_file(a, f, l, n, err, sizeof err) == 0) {
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_SPOOLED, 0) != 0)
            return -1;
        file_id(a, f, id);
        fp_logkv("warn", "spooled", "file=%s reason=%s spooled_as=%s/watch-%s.json.gz", fp_q(f->path), fp_q(why), fp_q(a->spool),
                 id);
        if (cap)
            cap_note(a, t, cap, 0, NULL);
        done_with(a, f);
        a->spool_next = fp_now() + a->retry_s;
        return 0;
    }
    return retry_later(a, f, why);
}

/* A file's upload was answered 201 (or 200: the key was stored already). */
static int sent(agent *a, const fp_watch_file *f, target *t, long long cap, long long sid, long status)
{
    if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_DONE, sid) != 0)
        return -1;
    const char *note = status == 200 ? " note=\"stored already (Idempotency-Key)\"" : "";
    if (cap)
        fp_logkv("info", "sent", "file=%s session=%lld capture=%lld%s", fp_q(f->path), sid, cap, note);
    else
        fp_logkv("info", "sent", "file=%s session=%lld%s", fp_q(f->path), sid, note);
    if (cap)
        cap_note(a, t, cap, sid, NULL);
    done_with(a, f);
    return 0;
}

/* Sends f once, from the descriptor fp_watch_next checked. Returns 0 when f is settled (sent,
 * spooled, refused), 1 when it waits for the server, -1 when the state file cannot be
 * written (the agent stops: it could not promise to send nothing twice). */
static int send_file(agent *a, const fp_watch_file *f)
{
    kv l[LABELS_MAX];
    char q[40000], resp[1024], err[256], id[17], why[900];
    long status = 0, ra = 0;
    target *t = target_of(a, f->dir);
    long long cap = 0; /* the id of the capture f belongs to, 0 none */
    pthread_mutex_lock(&a->lock);
    if (t && t->cap && f->mtime_ns >= t->cap->since_ns)
        cap = t->cap->id;
    pthread_mutex_unlock(&a->lock);
    size_t n = file_labels(a, f, cap, t, l);
    if (make_query(f->info.name, l, n, q, sizeof q) != 0) {
        fp_logkv("error", "not sent", "file=%s reason=\"the labels do not fit a query\"", fp_q(f->path));
        return fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_REFUSED, 0);
    }
    /* Invariant: the SENDING line is on disk before a byte goes out (fp_state_put fsyncs):
     * after a crash, the file_id says whether the upload was stored (Idempotency-Key, or the
     * label check for a server without it). */
    if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_SENDING, 0) != 0)
        return -1;
    if (cap)
        update_captures(a, 0); /* the capture waits for this one while it is sent */
    file_id(a, f, id);
    fp_upload_opts o = a->up;
    o.query = q;
    o.idempotency_key = id;
    o.retry_after_s = &ra;
    int rc = fp_upload_fd(&o, f->fd, &status, resp, sizeof resp, err, sizeof err);
    long long sid = rc == 0 ? reply_id(resp) : 0;
    if (rc == 0 && sid > 0)
        return sent(a, f, t, cap, sid, status);
    if (g_stop)
        return 1; /* stopped in flight: the SENDING entry is resolved at the next start */
    if (status == 409) {
        /* an upload of this file_id is in flight on the server (a restart's first try, still
         * analysed): asked again after Retry-After, when it is stored (200) */
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_NONE, 0) != 0)
            return -1;
        fp_watch_defer(a->w, f->path, ra > 0 ? (double)ra : a->retry_s);
        fp_logkv("info", "in flight on the server", "file=%s retry_s=%.0f", fp_q(f->path), ra > 0 ? (double)ra : a->retry_s);
        return 1;
    }
    if (fp_upload_refused(status)) {
        snprintf(why, sizeof why, "the server refused it: HTTP %ld: %.400s", status, resp);
        fp_logkv("error", "refused", "file=%s status=%ld reply=%s", fp_q(f->path), status, fp_q(resp));
        if (fp_state_put(a->st, f->path, f->size, f->mtime_ns, FP_ST_REFUSED, 0) != 0)
            return -1;
        if (cap)
            cap_note(a, t, cap, 0, why);
        return 0;
    }
    /* The server is down, busy or refuses the token: nothing was stored (a 201 without an
     * id aside, which the file_id settles later). */
    if (status)
        snprintf(why, sizeof why, "HTTP %ld %.250s", status, resp);
    else
        snprintf(why, sizeof why, "%s", err);
    return not_taken(a, f, l, n, t, cap, why);
}

/* After a restart, a SENDING entry's upload may have landed: the server says by file_id.
 * A "not stored" may be an upload still being analysed: it is sent again with its
 * Idempotency-Key, which such a server answers 409 or 200, never storing it twice. 0 when
 * all are resolved, 1 when the server could not be asked (try again later). */
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
        if (!has)
            fp_watch_defer(a->w, p, 0); /* a candidate again */
        fp_logkv("info", has ? "stored before the restart: not sent again" : "not found stored after the restart: sent again",
                 "file=%s session=%lld", fp_q(p), sid);
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
    /* instance: who holds the name (a server refuses a second live instance under one name) */
    json_t *body = json_pack("{s:s,s:s,s:s,s:o}", "host", a->host, "version", AGENT_VERSION, "instance", a->instance, "targets", ts);
    char *js = body ? json_dumps(body, JSON_COMPACT) : NULL, path[160], err[256], msg[300];
    json_decref(body);
    long status;
    fp_membuf b;
    snprintf(path, sizeof path, "/api/v1/agents/%s", a->name);
    int rc = js ? server_call(a, "PUT", path, js, 30, &status, &b, err, sizeof err) : -1;
    free(js);
    if (rc != 0) {
        fp_logkv("warn", "cannot register", "server=%s error=%s", fp_q(a->up.server), fp_q(err));
        return -1;
    }
    reply_text(&b, msg, sizeof msg);
    fp_membuf_free(&b);
    if (status == 409) {
        fp_logkv("error", "name held by another agent", "agent=%s instance=%s reply=%s fix=%s", a->name, a->instance, fp_q(msg),
                 fp_q("another live agent holds this agent's name or one of its targets' names: give each agent its own "
                      "--agent NAME (the default, HOST-<hash of --state>, differs for agents with their own --state) and "
                      "each target its own name (--target ...,name=NAME); retrying"));
        return -1;
    }
    if (status != 200 && status != 201) {
        fp_logkv("warn", "registration refused", "status=%ld reply=%s", status, fp_q(msg));
        return -1;
    }
    fp_logkv("info", "registered", "agent=%s instance=%s targets=%zu server=%s", a->name, a->instance, a->ntargets,
             fp_q(a->up.server));
    return 0;
}

/* A status reply (the capture object) that says the capture was cancelled marks c so. */
static void note_cancel(agent *a, capture *c, const char *reply)
{
    json_error_t je;
    json_t *doc = reply ? json_loads(reply, 0, &je) : NULL;
    const char *st = json_string_value(json_object_get(doc, "status"));
    if (st && !strcmp(st, "cancelled")) {
        pthread_mutex_lock(&a->lock);
        c->cancelled = 1;
        pthread_mutex_unlock(&a->lock);
    }
    json_decref(doc);
}

static int is_cancelled(agent *a, const capture *c)
{
    pthread_mutex_lock(&a->lock);
    int x = c->cancelled;
    pthread_mutex_unlock(&a->lock);
    return x;
}

/* Tells the server where capture c is. 0, or -1 (logged) when the server would not hear it;
 * *gone is set when the server says the capture is over already (failed by a timeout; a
 * cancel marks c cancelled instead). */
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
            if (st == 200)
                note_cancel(a, c, b.p);
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
        fp_logkv("warn", "capture status not taken", "capture=%lld status=%s error=%s", c->id, status, fp_q(st ? msg : err));
        return -1;
    }
    return 0;
}

/* POSTs path to the engine at base (engine names it in messages) with json (NULL: an empty
 * body). 0 on a 2xx; else -1 with the engine's own answer in err ("HTTP 500: ..."). *answered
 * is set when an HTTP answer came (any status): the engine took the call. */
static int engine_post(const char *base, const char *engine, const char *path, const char *json, long timeout_s, char *err,
                       size_t errlen, int *answered)
{
    fp_upload_opts o;
    char url[1024], e[256], msg[400];
    long status;
    fp_membuf b;
    size_t k = strlen(base);
    memset(&o, 0, sizeof o);
    *answered = 0;
    o.connect_timeout_s = 10; /* no abort_flag: http_call gives it ENGINE_GRACE_S after a stop */
    while (k > 0 && base[k - 1] == '/')
        k--;
    snprintf(url, sizeof url, "%.*s%s", (int)k, base, path);
    if (http_call(&o, "POST", url, json, timeout_s, &status, &b, e, sizeof e) != 0) {
        snprintf(err, errlen, "%s %s: %s", engine, path, e);
        return -1;
    }
    *answered = 1;
    reply_text(&b, msg, sizeof msg);
    fp_membuf_free(&b);
    if (status >= 200 && status < 300)
        return 0;
    snprintf(err, errlen, "%s %s: HTTP %ld%s%s", engine, path, status, msg[0] ? ": " : "", msg);
    return -1;
}

static int engine_call(const target *t, const char *path, const char *json, long timeout_s, char *err, size_t errlen, int *answered)
{
    return engine_post(t->url, t->engine, path, json, timeout_s, err, errlen, answered);
}

/* The capture c of target t is over as far as the engine goes: its line in the state file is
 * cleared (the engine answered /stop_profile, or never started it). */
static void cap_clear(agent *a, const target *t)
{
    if (fp_state_capture_put(a->st, t->name, t->url, 0) != 0)
        fp_logkv("error", "cannot clear a capture in the state file", "target=%s file=%s error=%s", t->name, fp_q(a->state_path),
                 fp_q(strerror(errno)));
}

/* Stops the engines that captures of this agent (an earlier run, or one of this run whose
 * /stop_profile went unanswered) may have left profiling: each capture in flight in the
 * state file whose thread is not running calls /stop_profile on the URL it started, and is
 * cleared once the engine answers anything. Until then its target refuses new captures.
 * Why: a profiler left running slows the engine for good and makes every later start fail
 * ("Profiling is already in progress", issue 50). Poll thread. */
static void stop_leftovers(agent *a)
{
    fp_state_capture caps[FP_STATE_CAPTURES_MAX];
    size_t n = fp_state_captures(a->st, caps, FP_STATE_CAPTURES_MAX);
    for (size_t i = 0; i < n && !g_stop; i++) {
        target *t = NULL;
        int mine = 0;
        pthread_mutex_lock(&a->lock);
        for (size_t k = 0; k < a->ntargets; k++)
            if (!strcmp(a->targets[k].name, caps[i].target))
                t = &a->targets[k];
        if (t && t->cap && t->cap->id == caps[i].id)
            mine = 1; /* running now: its own thread stops it */
        else if (t)
            t->leftover = caps[i].id;
        pthread_mutex_unlock(&a->lock);
        if (mine)
            continue;
        char err[512];
        int answered = 0;
        fp_logkv("warn", "stopping a capture left in flight", "target=%s capture=%lld url=%s", caps[i].target, caps[i].id,
                 fp_q(caps[i].url));
        int rc = engine_post(caps[i].url, caps[i].target, "/stop_profile", NULL, 30, err, sizeof err, &answered);
        if (!answered) {
            fp_logkv("warn", "engine not reached", "target=%s capture=%lld error=%s note=%s", caps[i].target, caps[i].id, fp_q(err),
                     fp_q("captures of this target are refused until its /stop_profile is answered; retried before each poll"));
            continue;
        }
        if (fp_state_capture_put(a->st, caps[i].target, caps[i].url, 0) != 0)
            continue;
        pthread_mutex_lock(&a->lock);
        if (t && t->leftover == caps[i].id)
            t->leftover = 0;
        pthread_mutex_unlock(&a->lock);
        fp_logkv("info", "stopped a capture left in flight", "target=%s capture=%lld reply=%s", caps[i].target, caps[i].id,
                 fp_q(rc == 0 ? "2xx" : err));
    }
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

/* Records c in flight, confirms it to the server and starts the engine's profiler. 0 started;
 * -1 not (c failed and reported, its line cleared unless the engine may still start). */
static int capture_start(agent *a, capture *c)
{
    target *t = c->t;
    char err[768] = "", err2[768];
    int gone = 0, answered = 0;
    /* Invariant: the state file names this capture before the engine is called, so that a
     * crash or a stop at any point after leaves a line that the next run stops first. */
    if (fp_state_capture_put(a->st, t->name, t->url, c->id) != 0) {
        snprintf(err, sizeof err, "the agent cannot record the capture in its state file %.300s: %s: not started", a->state_path,
                 strerror(errno));
        fp_logkv("error", "capture failed", "capture=%lld error=%s", c->id, fp_q(err));
        post_status(a, c, "failed", err, NULL);
        return -1;
    }
    /* the claim confirmed at once: the server hands an unconfirmed claim out again */
    post_status(a, c, "running", NULL, &gone);
    if (gone || is_cancelled(a, c)) {
        cap_clear(a, t);
        fp_logkv("warn", "capture over on the server before it started", "capture=%lld%s", c->id, gone ? "" : " cancelled=1");
        return -1;
    }
    char *body = start_body(c);
    int rc = engine_call(t, "/start_profile", body, 60, err, sizeof err, &answered);
    free(body);
    if (rc == 0)
        return 0;
    if (answered) {
        cap_clear(a, t); /* the engine refused: it did not start this one */
    } else if (!g_stop) {
        /* no answer (a timeout): the engine may have started; a stop now, or later */
        if (engine_call(t, "/stop_profile", NULL, 30, err2, sizeof err2, &answered) == 0 || answered)
            cap_clear(a, t);
    } else {
        fp_logkv("warn", "start abandoned at the stop", "capture=%lld target=%s note=%s", c->id, t->name,
                 fp_q("the engine may start profiling after this agent ended: the next start of the agent stops it"));
    }
    fp_logkv("error", "capture failed", "capture=%lld error=%s", c->id, fp_q(err));
    post_status(a, c, "failed", err, NULL);
    return -1;
}

/* Waits for the capture's time (seconds), or for SGLang's num_steps to end by themselves (1
 * when they did: no /stop_profile then). */
static int capture_wait(agent *a, capture *c)
{
    size_t pending;
    int delivered;
    double last;
    unsigned long scans;
    if (c->seconds > 0) {
        double end = fp_now() + (double)c->seconds;
        while (!g_stop && fp_now() < end && !is_cancelled(a, c))
            nap(end - fp_now() < 0.25 ? end - fp_now() : 0.25);
        return 0;
    }
    /* SGLang stops by itself after num_steps and writes its files; with no traffic the
     * steps never come, so after steps_timeout the agent stops it. */
    double end = fp_now() + (double)a->steps_timeout_s;
    while (!g_stop && fp_now() < end && !is_cancelled(a, c)) {
        cap_read(a, c, &pending, &delivered, &last, &scans, NULL, 0);
        if (pending || delivered)
            break;
        nap(0.5);
    }
    cap_read(a, c, &pending, &delivered, &last, &scans, NULL, 0);
    return pending || delivered;
}

/* One capture, start to end (see the file's header). */
static void *capture_main(void *arg)
{
    capture *c = arg;
    agent *a = c->a;
    target *t = c->t;
    char err[768] = "", stop_err[768] = "", refused[512];
    int stopped, answered = 0;
    size_t pending;
    int delivered;
    double last;
    unsigned long scans, scans_at_stop;

    fp_logkv("info", "capture", "capture=%lld target=%s url=%s %s=%lld", c->id, t->name, fp_q(t->url),
             c->seconds > 0 ? "seconds" : "steps", c->seconds > 0 ? c->seconds : c->steps);
    if (capture_start(a, c) != 0)
        goto out;
    stopped = capture_wait(a, c);
    if (!is_cancelled(a, c))
        post_status(a, c, "flushing", NULL, NULL);
    pthread_mutex_lock(&a->lock);
    scans_at_stop = c->scans;
    pthread_mutex_unlock(&a->lock);
    /* /stop_profile returns once the engine has flushed its files: minutes for a big model
     * (vLLM's docs: about 10 minutes for 100 requests of a 70B model on an H100). */
    if (!stopped && engine_call(t, "/stop_profile", NULL, g_stop ? 10 : a->flush_timeout_s, stop_err, sizeof stop_err, &answered) != 0)
        fp_logkv("warn", "stop failed", "capture=%lld error=%s", c->id, fp_q(stop_err));
    if (stopped || answered)
        cap_clear(a, t);
    else
        fp_logkv("warn", "engine may still profile", "capture=%lld target=%s note=%s", c->id, t->name,
                 fp_q("its /stop_profile went unanswered: asked again before each poll, and by the next start"));
    if (is_cancelled(a, c)) {
        /* the engine is stopped (what matters); its files go up as the target's, no report */
        fp_logkv("info", "capture cancelled", "capture=%lld target=%s", c->id, t->name);
        goto out;
    }
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
        fp_logkv("info", "capture uploaded", "capture=%lld files=%d", c->id, delivered);
    } else {
        if (refused[0])
            snprintf(err, sizeof err, "%s", refused);
        else if (stop_err[0])
            snprintf(err, sizeof err, "%s", stop_err);
        else if (g_stop)
            snprintf(err, sizeof err, "the agent was stopped during the capture");
        else
            snprintf(err, sizeof err, "no trace file appeared in %.600s within %lld s of /stop_profile", t->dir, a->flush_timeout_s);
        fp_logkv("error", "capture failed", "capture=%lld error=%s", c->id, fp_q(err));
        post_status(a, c, "failed", err, NULL);
    }
out:
    pthread_mutex_lock(&a->lock);
    t->cap = NULL;
    pthread_mutex_unlock(&a->lock);
    return c;
}

/* Why capture c cannot run on t now, "" when it can; claims t for c when it can (lock held). */
static void claim(agent *a, capture *c, const char *tname, char *why, size_t n)
{
    target *t = c->t;
    why[0] = '\0';
    if (!t)
        snprintf(why, n, "this agent has no target '%s'", tname ? tname : "?");
    else if (t->cap && t->cap->id == c->id)
        snprintf(why, n, "duplicate"); /* handed out again (its claim not confirmed in time): it runs already */
    else if (t->cap)
        snprintf(why, n, "the agent is capturing '%s' already", t->name);
    else if (t->leftover)
        snprintf(why, n, "the engine of '%s' may still be profiling for capture %lld (its /stop_profile is not answered yet): "
                         "not started", t->name, t->leftover);
    else if (c->seconds <= 0 && c->steps <= 0)
        snprintf(why, n, "capture of '%s' has neither seconds nor steps", t->name);
    else if (c->seconds > a->max_capture_s)
        snprintf(why, n, "the capture asks for %lld s; this agent's --max-capture-seconds is %lld: refused", c->seconds,
                 a->max_capture_s);
    if (why[0])
        return;
    t->cap = c;
    c->since_ns = wall_ns() - 1000000000LL; /* a second for mtime granularity and clock skew */
    c->last_activity = fp_now();
}

/* Starts the capture the server handed out (doc: its capture object). */
static void start_capture(agent *a, json_t *doc, capture **live, size_t *nlive)
{
    const char *tname = json_string_value(json_object_get(doc, "target"));
    capture *c = calloc(1, sizeof *c);
    char why[400];
    if (!c)
        return;
    for (size_t i = 0; tname && i < a->ntargets; i++)
        if (!strcmp(a->targets[i].name, tname))
            c->t = &a->targets[i];
    c->a = a;
    c->id = json_integer_value(json_object_get(doc, "id"));
    c->seconds = json_integer_value(json_object_get(doc, "seconds"));
    c->steps = json_integer_value(json_object_get(doc, "steps"));
    json_t *opt = json_object_get(doc, "options");
    json_t *rs = json_object_get(opt, "record_shapes"), *ws = json_object_get(opt, "with_stack");
    c->record_shapes = json_is_boolean(rs) ? json_is_true(rs) : -1;
    c->with_stack = json_is_boolean(ws) ? json_is_true(ws) : -1;
    pthread_mutex_lock(&a->lock);
    claim(a, c, tname, why, sizeof why);
    pthread_mutex_unlock(&a->lock);
    if (!strcmp(why, "duplicate")) {
        fp_logkv("info", "capture handed out again: running already", "capture=%lld", c->id);
        free(c);
        return;
    }
    if (why[0]) {
        fp_logkv("warn", "capture refused", "capture=%lld reason=%s", c->id, fp_q(why));
        post_status(a, c, "failed", why, NULL);
        free(c);
        return;
    }
    if (pthread_create(&c->th, NULL, capture_main, c) != 0) {
        pthread_mutex_lock(&a->lock);
        c->t->cap = NULL;
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

/* 1 when a capture of an earlier run (or an unanswered stop) is still in the state file. */
static int leftovers_pending(agent *a)
{
    fp_state_capture caps[FP_STATE_CAPTURES_MAX];
    size_t n = fp_state_captures(a->st, caps, FP_STATE_CAPTURES_MAX), k = 0;
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < n; i++) {
        int running = 0;
        for (size_t j = 0; j < a->ntargets; j++)
            if (a->targets[j].cap && a->targets[j].cap->id == caps[i].id)
                running = 1;
        k += !running;
    }
    pthread_mutex_unlock(&a->lock);
    return k > 0;
}

/* A poll's "cancelled" list (ids of captures cancelled after a poll took them): the ones
 * running here stop early (the engine is stopped, nothing more is reported). */
static void note_cancelled(agent *a, json_t *ids, capture **live, size_t nlive)
{
    size_t i;
    json_t *x;
    json_array_foreach(ids, i, x) {
        long long id = json_integer_value(x);
        pthread_mutex_lock(&a->lock);
        for (size_t k = 0; k < nlive; k++)
            if (live[k]->id == id && live[k]->t->cap == live[k] && !live[k]->cancelled) {
                live[k]->cancelled = 1;
                fp_logkv("info", "cancel asked", "capture=%lld", id);
            }
        pthread_mutex_unlock(&a->lock);
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
        /* before the registration and each poll: nothing this agent started on an engine
         * outlives its knowledge of it */
        if (leftovers_pending(a))
            stop_leftovers(a);
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
                fp_logkv("warn", "poll failed", "server=%s error=%s retry_s=%.0f", fp_q(a->up.server), fp_q(err), backoff);
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
            fp_logkv("warn", "poll refused", "status=%ld reply=%s retry_s=%.0f", status, fp_q(msg), backoff);
            fp_membuf_free(&b);
            if (status == 409)
                registered = 0; /* the name went to another instance meanwhile: register says so */
            nap(backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
            continue;
        }
        backoff = 1;
        json_error_t je;
        json_t *doc = json_loads(b.p, 0, &je);
        fp_membuf_free(&b);
        note_cancelled(a, json_object_get(doc, "cancelled"), live, nlive);
        json_t *cap = json_object_get(doc, "capture");
        if (json_is_object(cap) && nlive < TARGETS_MAX)
            start_capture(a, cap, live, &nlive);
        else if (json_is_integer(json_object_get(doc, "retry_s"))) {
            json_int_t r = json_integer_value(json_object_get(doc, "retry_s"));
            nap(r < 1 ? 1 : r > 60 ? 60 : (double)r); /* whatever the server says: a minute at most */
        }
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

/* The spool, every --retry seconds while it is sent, backing off to --retry-max while the
 * server cannot be reached. */
static void spool_round(agent *a)
{
    if (g_stop || fp_now() < a->spool_next)
        return;
    if (send_spool(a))
        a->spool_wait = a->spool_wait * 2 < a->retry_max_s ? a->spool_wait * 2 : a->retry_max_s;
    else
        a->spool_wait = a->retry_s;
    a->spool_next = fp_now() + a->spool_wait;
}

static int run(agent *a)
{
    a->resolve_next = 0;
    a->spool_next = 0;
    a->spool_wait = a->retry_s;
    while (!g_stop) {
        health_touch(a);
        if (fp_watch_scan(a->w) != 0) {
            fp_logkv("error", "out of memory while scanning", NULL);
            return 1;
        }
        double now = fp_now();
        if (now >= a->resolve_next)
            a->resolve_next = resolve_sending(a) ? now + a->retry_s : 1e300;
        fp_watch_file f;
        while (!g_stop && fp_watch_next(a->w, a->st, &f)) {
            int r = send_file(a, &f);
            close(f.fd);
            health_touch(a);
            if (r < 0) {
                fp_logkv("error", "cannot write the state file", "file=%s error=%s note=%s", fp_q(a->state_path),
                         fp_q(strerror(errno)), fp_q("stopping: nothing may be sent twice"));
                return 1;
            }
            if (r > 0 && g_stop)
                break;
        }
        update_captures(a, 1);
        spool_round(a);
        /* Wake at the latest when a file's settle time may be over. */
        fp_watch_wait(a->w, (int)(a->settle_s * 500 > 1000 ? 1000 : a->settle_s * 500 + 50));
    }
    return 0;
}

/* ---- the command line ------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: firstpass-upload --watch DIR [--watch DIR]... [--target ENGINE=URL[,dir=DIR]...]...\n"
            "                        --server URL [--token T] [options]\n"
            "\n"
            "Sends every trace that appears in the watched directories, once it is whole, exactly once\n"
            "(a state file keyed by path, size and mtime; each upload carries Idempotency-Key: its file_id),\n"
            "with labels from the flags and the file's name; and, for each --target, runs the captures the\n"
            "server asks for (POST /api/v1/captures) through the engine's own /start_profile and\n"
            "/stop_profile. Only regular files that are entries of a watched directory are read: links\n"
            "are not followed. Logs are logfmt lines on stderr. docs/serving.md has the details.\n"
            "\n"
            "  --watch DIR        a directory, or a glob of directories, to watch (repeatable)\n"
            "  --target SPEC      ENGINE=URL[,dir=DIR][,name=NAME][,engine_dir=DIR]: an engine this agent\n"
            "                     can profile; ENGINE is vllm, sglang or torch (a loop serving vLLM's\n"
            "                     endpoints). dir: where its traces land as this agent sees it (default:\n"
            "                     the one --watch DIR); engine_dir: the same directory as the engine sees\n"
            "                     it, sent as SGLang's output_dir; name: default HOST-ENGINE-PORT (a host\n"
            "                     too long for 64 bytes keeps its head and its last 16 bytes, with a hash)\n"
            "  --server URL       the firstpass server (default $FIRSTPASS_SERVER)\n"
            "  --token T          bearer token (default $FIRSTPASS_TOKEN)\n"
            "  --label k:v        a label for every file (repeatable; wins over what the name says)\n"
            "  --model M          the label model:M\n"
            "  --engine E         the label engine:E (default: from the target or the file's name)\n"
            "  --host H           the label host:H (default: this host's name)\n"
            "  --agent NAME       the agent's name on the server (default: HOST-<8 hex of the --state\n"
            "                     path's hash>, so that two agents on one host differ)\n"
            "  --state FILE       what was sent, and captures in flight (default $FIRSTPASS_STATE, else\n"
            "                     $XDG_STATE_HOME/firstpass/watch.state, else ~/.local/state/firstpass/watch.state);\n"
            "                     one that exists but cannot be read stops the agent (exit 1)\n"
            "  --settle S         size and mtime unchanged this long before a file is checked (default 2)\n"
            "  --remove           delete a file once the server has it (or the spool does); default: keep\n"
            "  --keep             keep the files (the default)\n"
            "  --retry S          first wait before a try again while the server is down (default 10)\n"
            "  --retry-max S      the wait doubles up to this (default 600)\n"
            "  --give-up S        a file or spooled document not taken for this long is given up: marked\n"
            "                     refused, or set aside as .expired (default 604800: 7 days)\n"
            "  --rescan S         seconds between full reads of the watched directories; between them\n"
            "                     inotify names what changed (default 30)\n"
            "  --max-files N      trace-named files watched at once; more are ignored, logged (default 100000)\n"
            "  --max-capture-seconds S  longest capture this agent runs, whatever the server asks (default 300)\n"
            "  --flush-timeout S  how long a capture waits for /stop_profile and the files (default 1800)\n"
            "  --steps-timeout S  a capture by steps is stopped after this long without files (default 300)\n"
            "  --timeout S        total timeout of one upload (default 600)\n"
            "  --health-file PATH written at least every second or so while the agent works (main loop,\n"
            "                     uploads): a probe checks its age, e.g. test $(( $(date +%%s) -\n"
            "                     $(stat -c %%Y PATH) )) -lt 120\n"
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
            if (!name_ok(tok + 5)) {
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
        char suffix[40];
        snprintf(suffix, sizeof suffix, "-%.8s-%d", t->engine, colon ? atoi(colon + 1) : !strncmp(t->url, "https", 5) ? 443 : 80);
        bounded_name(host, suffix, t->name);
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

/* The agent's identity: a hash of its host and its state file's absolute path. Stable across
 * restarts (a restart is the same agent, never "another live one"), distinct for two agents
 * of one host (each has its own state file) and for two hosts. The default --agent name is
 * the host and 8 hex of the state path's hash (issue 50: two agents of one host both took the
 * host's name and the second took the first's targets). */
static void identity(agent *a, int name_given)
{
    char abs[PATH_MAX * 2], cwd[PATH_MAX] = "", suffix[16];
    if (a->state_path[0] == '/' || !getcwd(cwd, sizeof cwd))
        snprintf(abs, sizeof abs, "%s", a->state_path);
    else
        snprintf(abs, sizeof abs, "%s/%s", cwd, a->state_path);
    uint64_t hs = fnv64(FNV0, abs, strlen(abs));
    uint64_t hi = fnv64(fnv64(FNV0, a->machine, strlen(a->machine) + 1), abs, strlen(abs));
    snprintf(a->instance, sizeof a->instance, "%016llx", (unsigned long long)hi);
    if (!name_given) {
        snprintf(suffix, sizeof suffix, "-%08x", (unsigned)(hs & 0xffffffffu));
        bounded_name(a->machine, suffix, a->name);
    }
}

/* One option of argv (o, its value v: NULL for a flag without one). 0, or 2 after a message
 * on stderr. */
static int option(agent *a, const char *o, const char *v, const char **patterns, size_t *npat, const char **tspecs, size_t *nt,
                  int *name_given)
{
    double d;
    if (!strcmp(o, "--watch")) {
        if (*npat == 64) {
            fprintf(stderr, "firstpass-upload: at most 64 --watch\n");
            return 2;
        }
        patterns[(*npat)++] = v;
    } else if (!strcmp(o, "--target")) {
        if (*nt == TARGETS_MAX) {
            fprintf(stderr, "firstpass-upload: at most %d --target\n", TARGETS_MAX);
            return 2;
        }
        tspecs[(*nt)++] = v;
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
        *name_given = 1;
    } else if (!strcmp(o, "--state")) {
        snprintf(a->state_path, sizeof a->state_path, "%s", v);
    } else if (!strcmp(o, "--health-file")) {
        snprintf(a->health, sizeof a->health, "%s", v);
    } else if (!strcmp(o, "--settle")) {
        return num_arg(o, v, 0, &a->settle_s) ? 2 : 0;
    } else if (!strcmp(o, "--retry")) {
        return num_arg(o, v, 0.1, &a->retry_s) ? 2 : 0;
    } else if (!strcmp(o, "--retry-max")) {
        return num_arg(o, v, 0.1, &a->retry_max_s) ? 2 : 0;
    } else if (!strcmp(o, "--give-up")) {
        return num_arg(o, v, 1, &a->give_up_s) ? 2 : 0;
    } else if (!strcmp(o, "--rescan")) {
        return num_arg(o, v, 0.1, &a->rescan_s) ? 2 : 0;
    } else if (!strcmp(o, "--max-files")) {
        if (num_arg(o, v, 1, &d))
            return 2;
        a->max_files = (size_t)d;
    } else if (!strcmp(o, "--flush-timeout") || !strcmp(o, "--steps-timeout") || !strcmp(o, "--timeout") ||
               !strcmp(o, "--max-capture-seconds")) {
        if (num_arg(o, v, 1, &d))
            return 2;
        if (!strcmp(o, "--flush-timeout"))
            a->flush_timeout_s = (long long)d;
        else if (!strcmp(o, "--steps-timeout"))
            a->steps_timeout_s = (long long)d;
        else if (!strcmp(o, "--max-capture-seconds"))
            a->max_capture_s = (long long)d;
        else
            a->up.timeout_s = (long)d;
    } else {
        fprintf(stderr, "firstpass-upload: unknown option '%s' with --watch\n", o);
        usage(stderr);
        return 2;
    }
    return 0;
}

static void defaults(agent *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    a->up.server = getenv("FIRSTPASS_SERVER");
    a->up.token = getenv("FIRSTPASS_TOKEN");
    a->up.timeout_s = 600;
    a->up.connect_timeout_s = 10;
    a->up.abort_flag = &g_stop;
    a->up.tick = health_touch;
    a->up.tick_ud = a;
    a->settle_s = 2;
    a->retry_s = 10;
    a->retry_max_s = 600;
    a->give_up_s = 7 * 24 * 3600;
    a->rescan_s = FP_WATCH_RESCAN_S;
    a->max_files = FP_WATCH_MAX_FILES;
    a->flush_timeout_s = 1800;
    a->steps_timeout_s = 300;
    a->max_capture_s = 300;
    if (gethostname(a->machine, sizeof a->machine - 1) != 0 || !a->machine[0])
        snprintf(a->machine, sizeof a->machine, "host");
    snprintf(a->host, sizeof a->host, "%s", a->machine);
}

/* The targets of tspecs into a (dir defaults to the one --watch). 0, or 2 after a message. */
static int add_targets(agent *a, const char **tspecs, size_t nt, const char **patterns, size_t npat)
{
    for (size_t i = 0; i < nt; i++) {
        target *t = &a->targets[a->ntargets];
        if (parse_target(tspecs[i], a->machine, t) != 0)
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
    return 0;
}

/* Says at start what would otherwise fail silently later: a spool directory that is refused. */
static void check_dirs(agent *a)
{
    char why[512];
    if (fp_spool_prepare(NULL, 0, a->spool, sizeof a->spool, why, sizeof why) < 0)
        spool_refused(a, why);
}

int fp_agent_main(int argc, char **argv)
{
    static agent A; /* big (the bursts and targets): not on the stack */
    agent *a = &A;
    const char *patterns[64], *tspecs[TARGETS_MAX];
    size_t npat = 0, nt = 0;
    int name_given = 0, rc;
    char err[1024];

    defaults(a);
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
        if ((rc = option(a, o, v, patterns, &npat, tspecs, &nt, &name_given)) != 0)
            return rc;
    }
    if (!a->up.server || !a->up.server[0]) {
        fprintf(stderr, "firstpass-upload: --server URL (or FIRSTPASS_SERVER) is required\n");
        return 2;
    }
    if ((rc = add_targets(a, tspecs, nt, patterns, npat)) != 0)
        return rc;
    if (npat == 0 && a->ntargets == 0) {
        fprintf(stderr, "firstpass-upload: --watch DIR or --target is required\n");
        return 2;
    }
    if (a->retry_max_s < a->retry_s)
        a->retry_max_s = a->retry_s;
    if (!a->state_path[0] && default_state(a->state_path, sizeof a->state_path) != 0) {
        fprintf(stderr, "firstpass-upload: give --state FILE (no FIRSTPASS_STATE, XDG_STATE_HOME or HOME)\n");
        return 2;
    }
    identity(a, name_given);
    fp_log_logfmt(1);
    if (fp_upload_global_init() != 0) {
        fp_logkv("error", "curl_global_init failed", NULL);
        return 1;
    }
    if (!(a->st = fp_state_open(a->state_path, err, sizeof err))) {
        fp_logkv("error", "cannot start", "reason=%s", fp_q(err));
        return 1;
    }
    if (!(a->w = fp_watch_new(a->settle_s))) {
        fp_logkv("error", "out of memory", NULL);
        fp_state_close(a->st);
        return 1;
    }
    fp_watch_limits(a->w, a->rescan_s, a->max_files);
    for (size_t i = 0; i < npat; i++)
        fp_watch_add(a->w, patterns[i]);
    for (size_t i = 0; i < a->ntargets; i++)
        fp_watch_add(a->w, a->targets[i].dir); /* a target's directory is watched (once: dirs are unique) */
    fp_spool_dir(a->spool, sizeof a->spool, 0);
    check_dirs(a);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll(2) in the main loop returns at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fp_logkv("info", "watching", "patterns=%zu server=%s state=%s spool=%s agent=%s settle_s=%.1f remove=%d", npat + a->ntargets,
             fp_q(a->up.server), fp_q(a->state_path), fp_q(a->spool), a->name, a->settle_s, a->remove);

    pthread_t poller;
    int polling = a->ntargets > 0 && pthread_create(&poller, NULL, poll_main, a) == 0;
    if (a->ntargets > 0 && !polling)
        fp_logkv("error", "cannot start the poll thread: captures are off", NULL);
    rc = run(a);
    g_stop = 1;
    if (polling)
        pthread_join(poller, NULL);
    fp_watch_free(a->w);
    fp_state_close(a->st);
    fp_logkv("info", "stopped", NULL);
    return rc;
}
