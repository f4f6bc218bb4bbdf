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

#include "ingest/load.h"
#include "ingest/nsys.h"
#include "ingest/parse.h"
#include "lib/err.h"

struct import_pool {
    store *st;
    import_limits lim;
    unsigned max;           /* --max-uploads */
    pthread_mutex_t lock;   /* guards running, paused and background */
    unsigned running;       /* imports holding a slot (one over max while uploads take every
                               slot and a background re-analysis has not given its up yet) */
    int paused;             /* import_pause: a VACUUM runs */
    unsigned background;    /* background re-analyses holding a slot: 0 or 1 */
    atomic_int preempt;     /* 1: an upload took the background one's slot: it stops */
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
};

import_pool *import_pool_new(store *st, unsigned max_uploads, const import_limits *lim) {
    import_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->st = st;
    p->lim = *lim;
    p->max = max_uploads ? max_uploads : 1;
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void import_pool_free(import_pool *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->lock);
    free(p);
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

int import_begin(import_pool *p, const import_opts *o, importer **out, char *err, size_t errlen) {
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
    int rc = take_slot(p, 0, err, errlen);
    if (rc) return rc;
    importer *im = calloc(1, sizeof *im);
    if (!im) {
        give_slot(p, 0);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    im->pool = p;
    load_opts lo = {o->name, o->labels, o->nlabels, p->lim.max_events, 0, p->lim.max_tracks, p->lim.max_name_bytes_per_event,
                    p->lim.max_distinct, 0, NULL, 0};
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
                    p->lim.max_distinct, o->id, o->claimer, o->seq_base};
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
