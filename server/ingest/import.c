/* import.c: the importer's door (import.h): slots, parser, nsys spool, loader, commit.
 *
 * Owns the upload slots and, per upload, the parser (parse.c), the nsys spool (nsys.c)
 * and the loader (load.c). Must not include microhttpd.h: a transport calls the door;
 * the door never sees a connection. */
#include "ingest/import.h"

#include <pthread.h>
#include <stdarg.h>
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
    pthread_mutex_t lock;   /* guards running and paused */
    unsigned running;       /* imports holding a slot */
    int paused;             /* import_pause: a VACUUM runs */
};

struct importer {
    import_pool *pool;
    ingest *in;
    loader *ld;
    nsys_spool *spool;       /* an SQLite (nsys) body's temporary file, NULL otherwise */
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

/* Takes a slot: 0, or ERR_BUSY with the reason in msg. */
static int take_slot(import_pool *p, char *msg, size_t len) {
    pthread_mutex_lock(&p->lock);
    int paused = p->paused, busy = paused || p->running >= p->max;
    if (!busy) p->running++;
    pthread_mutex_unlock(&p->lock);
    if (!busy) return 0;
    if (paused) snprintf(msg, len, "the database is being compacted (VACUUM); retry later");
    else snprintf(msg, len, "%u uploads are in progress (--max-uploads); retry later", p->max);
    return ERR_BUSY;
}

static void give_slot(import_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->running--;
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
    int rc = take_slot(p, err, errlen);
    if (rc) return rc;
    importer *im = calloc(1, sizeof *im);
    if (!im) {
        give_slot(p);
        snprintf(err, errlen, "out of memory");
        return ERR_NOMEM;
    }
    im->pool = p;
    load_opts lo = {o->name, o->labels, o->nlabels, p->lim.max_events, 0, p->lim.max_tracks, p->lim.max_name_bytes_per_event,
                    p->lim.max_distinct};
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

int import_feed(importer *im, const void *data, size_t n) {
    im->received += n;
    if (im->err) return im->err;
    if (im->pool->lim.max_upload && im->received > im->pool->lim.max_upload)
        return fail(im, ERR_TOOBIG, "the body is over --max-upload (%llu bytes)", im->pool->lim.max_upload);
    int rc = ingest_feed(im->in, data, n);
    return rc ? fail(im, rc, "%s", ingest_error(im->in)) : 0;
}

int import_finish(importer *im, long long *id, unsigned long long *events) {
    if (im->err) return im->err;
    int rc = ingest_finish(im->in);
    if (rc) return fail(im, rc, "%s", ingest_error(im->in));
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
    give_slot(im->pool);
    free(im);
}
