/* reanalyse.c: a stored session through the importer's door again (reanalyse.h).
 *
 * Owns the claim's lease (a heartbeat thread per re-analysis), the stream that turns the
 * replay's events back into a trace document for the parser, the batch of --reanalyse and
 * the background worker of --reanalyse-on-start. The analysis is the upload's (import.h);
 * the SQL is store/'s (replay.h, reanalysis.h, commit.h). No MHD here. */
#include "ingest/reanalyse.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "analysis/analyze.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/logfmt.h"
#include "lib/mono.h"
#include "store/reanalysis.h"
#include "store/replay.h"

#define FEED_BYTES (256u << 10) /* the document is fed to the parser in pieces of about this */

/* A claimer name unique to one attempt of one process: "host:pid:n". */
static void claimer_name(char *out, size_t n) {
    static atomic_ulong seq;
    char host[64] = "";
    if (gethostname(host, sizeof host)) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    snprintf(out, n, "%s:%ld:%lu", host, (long)getpid(), (unsigned long)atomic_fetch_add(&seq, 1) + 1);
}

/* ---- the lease: renewed while the work runs ---- */

typedef struct heartbeat {
    store *st;
    long long id;
    const char *claimer;
    int lease_s;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop, lost, started;
} heartbeat;

/* Why a thread: the analysis of a big session runs for minutes in calls that report no
 * progress, and a lease long enough for the longest would leave a dead replica's session
 * waiting as long. A lease of lease_s renewed every lease_s / 3 outlives a slow renewal. */
static void *beat(void *arg) {
    heartbeat *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += h->lease_s / 3 > 0 ? h->lease_s / 3 : 1;
        while (!h->stop && pthread_cond_timedwait(&h->wake, &h->lock, &until) != ETIMEDOUT) {
        }
        if (h->stop) break;
        pthread_mutex_unlock(&h->lock);
        int rc = reanalysis_renew(h->st, h->id, h->claimer, h->lease_s);
        pthread_mutex_lock(&h->lock);
        if (rc == ERR_CONFLICT) h->lost = 1; /* the commit's check will refuse it too */
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static int heartbeat_start(heartbeat *h, store *st, long long id, const char *claimer, int lease_s) {
    memset(h, 0, sizeof *h);
    h->st = st;
    h->id = id;
    h->claimer = claimer;
    h->lease_s = lease_s;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, NULL);
    h->started = pthread_create(&h->thread, NULL, beat, h) == 0;
    return h->started ? 0 : ERR_NOMEM;
}

static void heartbeat_stop(heartbeat *h) {
    if (h->started) {
        pthread_mutex_lock(&h->lock);
        h->stop = 1;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->thread, NULL);
    }
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
}

/* ---- the document: the stored events and meta as a trace ---- */

/* The session's source as the static string loader_set_source takes; NULL for one it does
 * not know (decided from the document, as for an upload). Why it is set at all: a legacy
 * upload was a bare array, and the replay is an object like the download. */
static const char *static_source(const char *s) {
    static const char *const known[] = {"kineto", "legacy", "firstpass", "nsys", NULL};
    for (int i = 0; known[i]; i++)
        if (!strcmp(s, known[i])) return known[i];
    return NULL;
}

/* b to the importer, emptied: 0 or its error. */
static int send_buf(importer *im, buf *b) {
    int rc = b->len ? import_feed(im, b->p, b->len) : 0;
    b->len = 0;
    return rc;
}

/* {"key":value,...,"traceEvents":[e1,e2,...]}: the download's members (download.c), with no
 * synthesized event and no displayTimeUnit added. Why the meta first: the upload's meta is
 * kept in its own order whether it came before or after the events, and the nsys sink reads
 * its GPU table from it before the kernels come (nsys.h: nsys_replay). 0, or an error with
 * its message in err. */
static int feed(importer *im, replay *r, atomic_int *stop, long long *events, char *err, size_t errlen) {
    buf b = {0};
    int rc = buf_puts(&b, "{") ? ERR_NOMEM : 0, got = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)replay_meta(r), k, v) {
        if (rc) break;
        json_t *key = json_string(k);
        char *ks = key ? json_dumps(key, JSON_ENCODE_ANY) : NULL, *vs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!ks || !vs || buf_puts(&b, ks) || buf_put(&b, ":", 1) || buf_puts(&b, vs) || buf_put(&b, ",", 1)) rc = ERR_NOMEM;
        json_decref(key);
        free(ks);
        free(vs);
    }
    if (!rc && buf_puts(&b, "\"traceEvents\":[")) rc = ERR_NOMEM;
    const char *js;
    size_t n;
    *events = 0;
    while (!rc && (got = replay_next(r, &js, &n, err, errlen)) == 1) {
        if ((*events && buf_put(&b, ",", 1)) || buf_put(&b, js, n)) rc = ERR_NOMEM;
        (*events)++;
        if (!rc && b.len >= FEED_BYTES) {
            if (stop && atomic_load(stop)) {
                snprintf(err, errlen, "the server is stopping");
                rc = ERR_BUSY;
            } else if ((rc = send_buf(im, &b))) snprintf(err, errlen, "%s", import_error(im));
        }
    }
    if (!rc && got < 0) rc = got; /* err is replay_next's */
    if (!rc && buf_puts(&b, "]}")) rc = ERR_NOMEM;
    if (!rc && (rc = send_buf(im, &b))) snprintf(err, errlen, "%s", import_error(im));
    if (rc == ERR_NOMEM && !err[0]) snprintf(err, errlen, "out of memory");
    buf_free(&b);
    return rc;
}

/* ---- one session ---- */

/* The labels object as what ?label= gives an upload (api/session.h), in its order. */
static int labels_of(const json_t *o, fp_label **out, size_t *n) {
    *out = NULL;
    *n = 0;
    size_t want = json_object_size(o);
    if (!want) return 0;
    fp_label *l = calloc(want, sizeof *l);
    if (!l) return ERR_NOMEM;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        const char *val = json_string_value(v);
        if (!(l[*n].key = strdup(k)) || !(l[*n].value = strdup(val ? val : ""))) {
            free(l[*n].key);
            fp_labels_free(l, *n);
            *n = 0;
            return ERR_NOMEM;
        }
        (*n)++;
    }
    *out = l;
    return 0;
}

/* The importer run of a claimed session: replay, feed, analyse, replace. */
static int run_claimed(import_pool *p, store *st, long long id, int background, const char *claimer, atomic_int *stop,
                       reanalyse_result *res, char *err, size_t errlen) {
    replay *r = NULL;
    importer *im = NULL;
    fp_label *labels = NULL;
    size_t nlabels = 0;
    char *name = NULL; /* copies: the loader reads them at import_finish, after replay_free */
    int rc = replay_open(st, id, &r, err, errlen);
    if (!rc && ((rc = labels_of(replay_labels(r), &labels, &nlabels)) || (replay_name(r) && !(name = strdup(replay_name(r))))))
        rc = ERR_NOMEM, snprintf(err, errlen, "out of memory");
    if (!rc) {
        res->before = replay_version(r);
        res->exact = replay_exact(r);
        import_replay_opts o = {id, claimer, replay_seq_base(r), static_source(replay_source(r)), name, labels, nlabels, background};
        rc = import_begin_replay(p, &o, &im, err, errlen);
    }
    if (!rc) {
        char q[160];
        log_line("info", "re-analysis started", "session=%lld claimer=%s background=%d order=%s", id, logfmt_quote(claimer, q, sizeof q),
                 background, res->exact ? "upload" : "by_track");
        long long dev;
        double bw;
        for (size_t i = 0; i < replay_gpu_bw(r, i, &dev, &bw); i++) import_set_bandwidth(im, dev, bw);
        rc = feed(im, r, stop, &res->events, err, errlen);
    }
    replay_free(r); /* before the analysis: its held chunks are not needed any more */
    long long got = 0;
    unsigned long long ev = 0;
    if (!rc && (rc = import_finish(im, &got, &ev))) snprintf(err, errlen, "%s", import_error(im));
    import_free(im);
    fp_labels_free(labels, nlabels);
    free(name);
    return rc;
}

/* Whether a failure is the session's (recorded on it) or the circumstances' (not). */
static int counts_as_failure(int rc) {
    return rc != ERR_BUSY && rc != ERR_CONFLICT && rc != ERR_NOTFOUND && rc != ERR_DBDOWN;
}

int reanalyse_session(import_pool *p, store *st, long long id, int background, int lease_s, atomic_int *stop, reanalyse_result *res,
                      char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    double t0 = mono_ms();
    char claimer[128], holder[128];
    long long left = 0;
    claimer_name(claimer, sizeof claimer);
    int rc = reanalysis_claim(st, id, claimer, lease_s, holder, sizeof holder, &left);
    if (rc == ERR_NOTFOUND) return snprintf(err, errlen, "no session %lld", id), rc;
    if (rc < 0) return snprintf(err, errlen, "the database failed"), rc;
    if (rc == 0)
        return snprintf(err, errlen, "session %lld is being re-analysed by %s (its claim runs %lld s more)", id, holder, left > 0 ? left : 0),
               ERR_CONFLICT;
    heartbeat hb;
    rc = heartbeat_start(&hb, st, id, claimer, lease_s);
    if (!rc) rc = run_claimed(p, st, id, background, claimer, stop, res, err, errlen);
    else snprintf(err, errlen, "cannot start the claim's heartbeat");
    heartbeat_stop(&hb);
    res->ms = mono_ms() - t0;
    res->version = ANALYSIS_VERSION;
    char qe[600];
    if (!rc) {
        log_line("info", "re-analysed", "session=%lld from=%d to=%d events=%lld order=%s ms=%.0f", id, res->before, res->version, res->events,
                 res->exact ? "upload" : "by_track", res->ms);
        return 0;
    }
    if (counts_as_failure(rc)) {
        reanalysis_fail(st, id, claimer, ANALYSIS_VERSION, err);
        log_line("warn", "re-analysis failed; the old analysis stays", "session=%lld error=%s", id, logfmt_quote(err, qe, sizeof qe));
    } else {
        reanalysis_release(st, id, claimer); /* nothing if the commit's check found it gone */
        if (res->events || rc != ERR_BUSY) /* a background one finding no slot is routine */
            log_line("info", "re-analysis given up; the old analysis stays", "session=%lld reason=%s", id, logfmt_quote(err, qe, sizeof qe));
    }
    return rc;
}

/* ---- --reanalyse ---- */

int reanalyse_batch(import_pool *p, store *st, int older_than, int lease_s) {
    long long pending = 0, before = 0, id = 0, done = 0, failed = 0, skipped = 0;
    if (reanalysis_pending(st, older_than, &pending)) {
        log_line("error", "re-analysis: cannot read the sessions", NULL);
        return 2;
    }
    log_line("info", "re-analysis of the sessions older than a version", "older_than=%d current=%d sessions=%lld", older_than,
             ANALYSIS_VERSION, pending);
    double t0 = mono_ms();
    int rc;
    /* newest first, each id once: before moves down past every session tried */
    while ((rc = reanalysis_next(st, older_than, ANALYSIS_VERSION, 0, before, &id)) == 1) {
        before = id;
        reanalyse_result res;
        char err[512];
        int r = reanalyse_session(p, st, id, 0, lease_s, NULL, &res, err, sizeof err);
        if (!r) done++;
        else if (counts_as_failure(r)) failed++;
        else skipped++;
    }
    log_line(rc < 0 ? "error" : "info", "re-analysis done", "reanalysed=%lld failed=%lld skipped=%lld ms=%.0f", done, failed, skipped,
             mono_ms() - t0);
    return rc < 0 ? 2 : failed ? 1 : 0;
}

/* ---- --reanalyse-on-start ---- */

struct reanalyse_worker {
    import_pool *pool;
    store *st;
    int lease_s;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_int stop;
};

/* Sleeps s seconds, or until the worker is stopped. */
static void doze(reanalyse_worker *w, int s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s;
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&w->stop) && pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&w->lock);
}

/* Why nice 19 on this thread only: the threads a re-analysis starts (the loader's, the
 * analysis jobs) inherit it, and uploads and reads, on threads of their own, keep theirs. */
static void *work(void *arg) {
    reanalyse_worker *w = arg;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19)) log_line("warn", "re-analysis worker: cannot lower its priority", NULL);
    long long pending = 0;
    if (!reanalysis_pending(w->st, ANALYSIS_VERSION, &pending))
        log_line("info", "re-analysis worker started", "current=%d older_sessions=%lld", ANALYSIS_VERSION, pending);
    while (!atomic_load(&w->stop)) {
        if (!import_background_room(w->pool)) { /* uploads first */
            doze(w, 1);
            continue;
        }
        long long id = 0;
        int rc = reanalysis_next(w->st, ANALYSIS_VERSION, ANALYSIS_VERSION, 1, 0, &id);
        if (rc != 1) {
            doze(w, rc == 0 ? REANALYSE_IDLE_S : 5);
            continue;
        }
        reanalyse_result res;
        char err[512];
        rc = reanalyse_session(w->pool, w->st, id, 1, w->lease_s, &w->stop, &res, err, sizeof err);
        if (rc == ERR_BUSY || rc == ERR_DBDOWN) doze(w, 1); /* uploads take the slots, or the database is away */
    }
    return NULL;
}

reanalyse_worker *reanalyse_worker_start(import_pool *p, store *st, int lease_s) {
    reanalyse_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->pool = p;
    w->st = st;
    w->lease_s = lease_s;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, work, w)) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

void reanalyse_worker_stop(reanalyse_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
