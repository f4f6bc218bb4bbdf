/* import.c: the importer's door (import.h): slots, parser, nsys spool, loader, commit.
 *
 * Owns the upload slots and, per upload, the parser (parse.c), the nsys spool (nsys.c)
 * and the loader (load.c). Must not include microhttpd.h: a transport calls the door;
 * the door never sees a connection. */
#include "ingest/import.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ingest/load.h"
#include "ingest/nsys.h"
#include "ingest/parse.h"
#include "lib/err.h"
#include "lib/log.h"
#include "store/idem.h"

struct import_pool {
    store *st;
    import_limits lim;
    unsigned max;           /* --max-uploads */
    pthread_mutex_t lock;   /* guards running, paused, background, claims and the refresher's state */
    unsigned running;       /* imports holding a slot (one over max while uploads take every
                               slot and a background re-analysis has not given its up yet) */
    int paused;             /* import_pause: a VACUUM runs */
    unsigned background;    /* background re-analyses holding a slot: 0 or 1 */
    atomic_int preempt;     /* 1: an upload took the background one's slot: it stops */
    /* Idempotency keys (store/idem.h): this process's id in upload_claims, the claims its
     * importers hold, and the thread that refreshes them every IDEM_REFRESH_S while any is
     * held (started at the first claim, so a pool that never sees a key has none). */
    char owner[33];
    unsigned claims;
    int refresher, stop;
    pthread_t refresh_th;
    pthread_cond_t wake;
};

struct importer {
    import_pool *pool;
    ingest *in;
    loader *ld;
    nsys_spool *spool;       /* an SQLite (nsys) body's temporary file, NULL otherwise */
    int replay;              /* a re-analysis (import_begin_replay) */
    nsys_replay *nr;         /* its sink in front of the loader's, for an nsys session */
    int background;          /* a background one: holds the pool's background slot */
    unsigned long long received;
    int err;                 /* the first error, sticky */
    char msg[512];           /* its message */
    char *key;               /* the claimed Idempotency-Key, NULL: none */
    int committed;           /* the session committed: the claim went with its transaction */
};

/* A random id for this process's claims: 128 bits as hex (never a secret, only distinct). */
static void owner_id(char out[33]) {
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)((unsigned long long)t.tv_nsec >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < sizeof r; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
}

import_pool *import_pool_new(store *st, unsigned max_uploads, const import_limits *lim) {
    import_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->st = st;
    p->lim = *lim;
    p->max = max_uploads ? max_uploads : 1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    owner_id(p->owner);
    return p;
}

/* Refreshes this process's claims every IDEM_REFRESH_S while it holds any, so that another
 * server never takes a live upload's key for a dead one's (IDEM_STALE_S). Why a thread: an
 * upload's analysis runs for minutes without a call into the importer. */
static void *refresh_main(void *arg) {
    import_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += IDEM_REFRESH_S;
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
        if (p->stop || !p->claims) continue;
        pthread_mutex_unlock(&p->lock);
        if (idem_refresh(p->st, p->owner, (long long)time(NULL))) log_line("warn", "cannot refresh the claims of uploads in flight", NULL);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void import_pool_free(import_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    int joined = p->refresher;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (joined) pthread_join(p->refresh_th, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Counts a claim an importer holds (+1) or gave up (-1); the refresher starts at the first. */
static void count_claim(import_pool *p, int d) {
    pthread_mutex_lock(&p->lock);
    p->claims += (unsigned)d;
    if (d > 0 && !p->refresher && !p->stop) p->refresher = pthread_create(&p->refresh_th, NULL, refresh_main, p) == 0;
    pthread_mutex_unlock(&p->lock);
}

int import_pause(import_pool *p) {
    pthread_mutex_lock(&p->lock);
    int ok = !p->running && !p->paused;
    if (ok) p->paused = 1;
    pthread_mutex_unlock(&p->lock);
    return ok ? 0 : ERR_CONFLICT;
}

void import_resume(import_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->paused = 0;
    pthread_mutex_unlock(&p->lock);
}

/* Takes a slot: 0, or ERR_BUSY with the reason in msg. A background re-analysis takes one
 * only when one is free and none other holds one. Anyone else counts only the others: max
 * of them run whatever a background one holds, and when they and it are more than max, it
 * is told to stop (import_replay_opts). Invariant: running <= max + background, and
 * background <= 1. Why not a one-time takeover: the background one may be in its analysis,
 * which it does not interrupt, when a second upload comes. */
static int take_slot(import_pool *p, int background, char *msg, size_t len) {
    pthread_mutex_lock(&p->lock);
    int paused = p->paused;
    int busy = paused || (background ? p->running >= p->max || p->background : p->running - p->background >= p->max);
    if (!busy) {
        p->running++;
        if (background) p->background++;
        if (p->background && p->running > p->max) atomic_store(&p->preempt, 1);
    }
    assert(p->running <= p->max + p->background && p->background <= 1);
    pthread_mutex_unlock(&p->lock);
    if (!busy) return 0;
    if (paused) snprintf(msg, len, "the database is being compacted (VACUUM); retry later");
    else snprintf(msg, len, "%u uploads are in progress (--max-uploads); retry later", p->max);
    return ERR_BUSY;
}

static void give_slot(import_pool *p, int background) {
    pthread_mutex_lock(&p->lock);
    p->running--;
    if (background) {
        p->background--;
        atomic_store(&p->preempt, 0);
    }
    pthread_mutex_unlock(&p->lock);
}

/* Records the first error of the upload and returns it (later ones are dropped). */
static int fail(importer *im, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(importer *im, int err, const char *fmt, ...) {
    if (im->err) return im->err;
    im->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->msg, sizeof im->msg, fmt, ap);
    va_end(ap);
    return err;
}

/* The key's claim (store/idem.h): 0 when this upload holds it now; else IMPORT_STORED or the
 * refusal, with prior and err filled in. */
static int claim_key(import_pool *p, const char *key, import_prior *prior, char *err, size_t errlen) {
    long long now = (long long)time(NULL);
    int rc = idem_claim(p->st, key, p->owner, now, &prior->session_id, &prior->events, &prior->since);
    if (rc == IDEM_STORED) return IMPORT_STORED;
    if (rc == ERR_CONFLICT)
        snprintf(err, errlen, "an upload with this Idempotency-Key is in flight (received or analysed since %lld s ago); retry later",
                 now - prior->since > 0 ? now - prior->since : 0);
    else if (rc)
        snprintf(err, errlen, "cannot look the Idempotency-Key up: the database failed");
    return rc;
}

int import_begin(import_pool *p, const import_opts *o, importer **out, import_prior *prior, char *err, size_t errlen) {
    *out = NULL;
    if (p->lim.max_upload && o->declared_bytes > p->lim.max_upload) {
        snprintf(err, errlen, "the body is %llu bytes; --max-upload is %llu", o->declared_bytes, p->lim.max_upload);
        return ERR_TOOBIG;
    }
    for (size_t i = 0; i < o->nlabels; i++) {
        if (load_label_refused(o->labels[i].key, o->labels[i].value)) {
            snprintf(err, errlen, "%s", LOAD_LABEL_REFUSED_MSG);
            return ERR_PARAM;
        }
    }
    /* The key first: a second upload of a stored key is answered whether or not a slot is free. */
    int rc = o->idempotency_key ? claim_key(p, o->idempotency_key, prior, err, errlen) : 0;
    if (rc) return rc;
    if (o->idempotency_key) count_claim(p, 1);
    rc = take_slot(p, 0, err, errlen);
    importer *im = rc ? NULL : calloc(1, sizeof *im);
    if (!rc && !im) give_slot(p, 0);
    if (!im) {
        if (o->idempotency_key) {
            idem_release(p->st, o->idempotency_key, p->owner);
            count_claim(p, -1);
        }
        if (!rc) snprintf(err, errlen, "out of memory");
        return rc ? rc : ERR_NOMEM;
    }
    im->pool = p;
    if (o->idempotency_key && !(im->key = strdup(o->idempotency_key))) {
        idem_release(p->st, o->idempotency_key, p->owner);
        count_claim(p, -1);
        import_free(im);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    load_opts lo = {o->name, o->labels, o->nlabels, p->lim.max_events, 0, p->lim.max_tracks, p->lim.max_name_bytes_per_event,
                    p->lim.max_distinct, 0, NULL, 0, p->lim.max_steps, im->key};
    im->ld = loader_new(p->st, &lo, err, errlen);
    if (!im->ld) {
        import_free(im);
        return ERR_DB;
    }
    im->in = ingest_new(loader_sink(im->ld), o->gzip, p->lim.max_inflated);
    if (!im->in) {
        import_free(im);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    ingest_set_sqlite_sink(im->in, nsys_spool_sink, &im->spool); /* nsys exports: spooled, nsys.h */
    *out = im;
    return 0;
}

/* A background re-analysis whose slot an upload took stops here (take_slot). */
static int given_up(importer *im) {
    if (!im->background || !atomic_load(&im->pool->preempt)) return 0;
    return fail(im, ERR_BUSY, "an upload needed the slot: the background re-analysis stopped, and runs again later");
}

int import_feed(importer *im, const void *data, size_t n) {
    im->received += n;
    if (im->err) return im->err;
    if (given_up(im)) return im->err;
    if (!im->replay && im->pool->lim.max_upload && im->received > im->pool->lim.max_upload)
        return fail(im, ERR_TOOBIG, "the body is over --max-upload (%llu bytes)", im->pool->lim.max_upload);
    int rc = ingest_feed(im->in, data, n);
    return rc ? fail(im, rc, "%s", ingest_error(im->in)) : 0;
}

int import_finish(importer *im, long long *id, unsigned long long *events) {
    if (im->err) return im->err;
    int rc = ingest_finish(im->in);
    if (rc) return fail(im, rc, "%s", ingest_error(im->in));
    if (given_up(im)) return im->err;
    loader_set_legacy(im->ld, ingest_top_is_array(im->in));
    char err[256];
    *events = ingest_event_count(im->in);
    if (ingest_sniffed_sqlite(im->in)) { /* an nsys export: its rows feed the same loader */
        rc = nsys_import(im->spool, im->ld, events, err, sizeof err);
        if (rc) return fail(im, rc, "%s", err);
    }
    rc = loader_commit(im->ld, im->received, id, err, sizeof err);
    if (rc) return fail(im, rc, "%s", err);
    im->committed = 1; /* the key's claim went with the session's transaction (commit.c) */
    store_note_upload(im->pool->st); /* committed: a cached sessions list is now stale (store.h) */
    store_reserve(im->pool->st);     /* retaken if a full disk had used it (store.h) */
    return 0;
}

int import_set_fallback_name(importer *im, const char *name) {
    return loader_set_fallback_name(im->ld, name);
}

const char *import_error(const importer *im) { return im->msg; }

unsigned long long import_received(const importer *im) { return im->received; }

void import_free(importer *im) {
    if (!im) return;
    ingest_free(im->in);
    loader_free(im->ld); /* rolls back anything not committed: a dropped upload leaves nothing */
    nsys_spool_free(im->spool);
    nsys_replay_free(im->nr); /* after ingest_free: the parser's sink */
    if (im->key) {
        /* not stored: the key is free for the next upload of it (a failed delete goes stale) */
        if (!im->committed && idem_release(im->pool->st, im->key, im->pool->owner))
            log_line("warn", "cannot release the Idempotency-Key of a failed upload", NULL);
        count_claim(im->pool, -1);
        free(im->key);
    }
    give_slot(im->pool, im->background);
    free(im);
}

int import_begin_replay(import_pool *p, const import_replay_opts *o, importer **out, char *err, size_t errlen) {
    *out = NULL;
    int rc = take_slot(p, o->background, err, errlen);
    if (rc) return rc;
    importer *im = calloc(1, sizeof *im);
    if (!im) {
        give_slot(p, o->background);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    im->pool = p;
    im->replay = 1;
    im->background = o->background;
    load_opts lo = {o->name, o->labels, o->nlabels, p->lim.max_events, 0, p->lim.max_tracks, p->lim.max_name_bytes_per_event,
                    p->lim.max_distinct, o->id, o->claimer, o->seq_base, p->lim.max_steps, NULL};
    im->ld = loader_new(p->st, &lo, err, errlen);
    if (!im->ld) {
        import_free(im);
        return ERR_DB;
    }
    if (o->source) loader_set_source(im->ld, o->source);
    const ingest_sink *sink = loader_sink(im->ld);
    if (o->source && !strcmp(o->source, "nsys") && (im->nr = nsys_replay_new(sink))) sink = nsys_replay_sink(im->nr);
    im->in = (!o->source || strcmp(o->source, "nsys") || im->nr) ? ingest_new(sink, 0, p->lim.max_inflated) : NULL;
    if (!im->in) {
        import_free(im);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    *out = im;
    return 0;
}

int import_background_room(import_pool *p) {
    pthread_mutex_lock(&p->lock);
    int room = !p->paused && p->running < p->max && !p->background;
    pthread_mutex_unlock(&p->lock);
    return room;
}

void import_set_bandwidth(importer *im, long long dev, double bytes_per_s) { loader_set_bandwidth(im->ld, dev, bytes_per_s); }
