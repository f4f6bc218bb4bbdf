/* retention.c: the pruning thread and one pruning pass (retention.h says what is pruned).
 *
 * Owns the thread, its wake-up condition and the SQL that picks the next session to prune.
 * Deletes only through store_delete_session; never touches MHD. Uploads are only ever
 * held off for a VACUUM, through the callbacks in retention_cfg (http.c's).
 *
 * Why the limit counts pages in use and not the file size: SQLite keeps freed pages in
 * the file (auto_vacuum is off in these databases) and the next uploads reuse them, so a
 * file that reached its high-water mark stops growing once the pages in use are bounded.
 * Counting the file would prune everything down to nothing and not shrink it.
 *
 * Why VACUUM, rarely, and not PRAGMA incremental_vacuum: incremental_vacuum does nothing
 * unless auto_vacuum=INCREMENTAL, which an existing database gets only by one full VACUUM
 * and a schema-level change. VACUUM rewrites the whole file through the WAL (up to twice
 * the used size on disk, for a while) and holds the write lock while it runs, so it runs
 * only when it gives back much (>= vacuum_min_bytes and >= 1/4 of the file) and only with
 * no upload in flight: uploads are refused (503, retry) while it runs, rather than
 * waiting on the lock past the busy timeout and failing after their body was sent. */
#include "store/retention.h"
#include "store/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/err.h"
#include "lib/logfmt.h"
#include "lib/log.h"

struct retention {
    store *st;
    retention_cfg cfg;
    pthread_t thread;
    pthread_mutex_t lock; /* guards the wait on wake */
    pthread_cond_t wake;  /* signalled by retention_stop */
    atomic_int stop;      /* 1: leave after the current deletion */
};

/* The oldest session created before `before` that may be pruned. */
static const char next_sql[] =
    "SELECT s.id, s.created_at, s.name FROM sessions s"
    " WHERE s.created_at < ?1"
    "   AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.session_id = s.id AND l.key = 'pin' AND l.value = 'true')"
    "   AND NOT EXISTS (SELECT 1 FROM baselines b WHERE b.session_id = s.id)"
    " ORDER BY s.created_at, s.id LIMIT 1";

typedef struct victim {
    long long id, created_at;
    char name[256];
} victim;

/* 0 (v filled), ERR_NOTFOUND (nothing prunable) or ERR_DB. */
static int next_victim(store *st, long long before, victim *v) {
    db_conn *db = store_get(st);
    if (!db) return ERR_DB;
    db_stmt *q = NULL;
    int rc = ERR_DB;
    if ((q = db_prepare(db, next_sql))) {
        db_bind_int64(q, 1, before);
        int s = db_step(q);
        if (s == DB_ROW) {
            v->id = db_column_int64(q, 0);
            v->created_at = db_column_int64(q, 1);
            const char *n = db_column_text(q, 2);
            snprintf(v->name, sizeof v->name, "%s", n ? (const char *)n : "");
            rc = 0;
        } else if (s == DB_DONE) {
            rc = ERR_NOTFOUND;
        }
    }
    db_finalize(q);
    store_put(st, db);
    return rc;
}

static long long used_bytes(const store_usage *u) { return (u->pages - u->free_pages) * u->page_size; }

/* Deletes v and writes its one log line. 0, or ERR_DB (ERR_NOTFOUND: a client deleted it
 * first, which is as good). */
static int prune(store *st, const retention_cfg *c, const victim *v, const char *reason, long long now) {
    int rc = store_delete_session(st, v->id);
    if (rc == ERR_NOTFOUND) return 0;
    char q[600];
    logfmt_quote(v->name, q, sizeof q);
    if (rc) {
        log_line("error", "retention: delete failed", "session=%lld name=%s", v->id, q);
        return rc;
    }
    store_usage u;
    long long used = store_usage_get(st, &u) ? -1 : used_bytes(&u);
    log_line("info", "pruned", "session=%lld name=%s reason=%s created_at=%lld age_days=%.1f used_bytes=%lld", v->id, q,
            reason, v->created_at, (double)(now - v->created_at) / 86400.0, used);
    if (c->pruned) c->pruned(reason);
    return 0;
}

static int prune_by_age(store *st, const retention_cfg *c, const atomic_int *stop, long long now, long long *n) {
    if (!c->retain_days) return 0;
    long long before = c->retain_days > (unsigned long long)(now / 86400) ? 0 : now - (long long)c->retain_days * 86400;
    victim v;
    int rc = 0;
    while (!(stop && atomic_load(stop)) && !(rc = next_victim(st, before, &v))) {
        if ((rc = prune(st, c, &v, "age", now))) return rc;
        (*n)++;
    }
    return stop && atomic_load(stop) ? 0 : rc == ERR_NOTFOUND ? 0 : rc;
}

static int prune_by_size(store *st, const retention_cfg *c, const atomic_int *stop, long long now, long long *n) {
    if (!c->max_db_bytes) return 0;
    store_usage u;
    victim v;
    int rc = 0;
    while (!(stop && atomic_load(stop))) {
        if (store_usage_get(st, &u)) return ERR_DB;
        if (used_bytes(&u) <= (long long)c->max_db_bytes) return 0;
        rc = next_victim(st, INT64_MAX, &v);
        if (rc == ERR_NOTFOUND) {
            log_line("warn", "retention: over --max-db-bytes, but every session left is pinned or a baseline", "used_bytes=%lld max_db_bytes=%llu sessions=%lld", used_bytes(&u), c->max_db_bytes, u.sessions);
            return 0;
        }
        if (rc || (rc = prune(st, c, &v, "size", now))) return rc;
        (*n)++;
    }
    return 0;
}

static int pass(store *st, const retention_cfg *cfg, const atomic_int *stop, retention_pass *out);

/* VACUUM when it gives back much and no upload runs (see the top of the file). */
static int maybe_vacuum(store *st, const retention_cfg *c, int *done) {
    store_usage u;
    if (!c->vacuum_min_bytes || store_usage_get(st, &u)) return 0;
    long long free_bytes = u.free_pages * u.page_size;
    if (free_bytes < (long long)c->vacuum_min_bytes || u.free_pages * 4 < u.pages) return 0;
    if (c->pause_uploads && c->pause_uploads(c->ctx)) {
        log_line("info", "retention: VACUUM postponed, uploads in flight", "free_bytes=%lld", free_bytes);
        return 0;
    }
    long long before = store_size_bytes(st);
    db_conn *db = store_get(st);
    int rc = !db || db_exec(db, "VACUUM") != 0 ? ERR_DB : 0;
    char q[600];
    if (rc) log_line("error", "retention: VACUUM failed", "error=%s", logfmt_quote(db ? db_errmsg(db) : "no connection", q, sizeof q));
    /* TRUNCATE: the WAL that VACUUM filled is copied back and emptied, giving the disk back. */
    if (!rc) store_wal_truncate(db_sqlite(db));
    store_put(st, db);
    if (c->resume_uploads) c->resume_uploads(c->ctx);
    if (!rc) log_line("info", "vacuum", "bytes_before=%lld bytes_after=%lld", before, store_size_bytes(st));
    *done = !rc;
    return rc;
}

/* The advisory lock key of retention passes ("fpretn" in ASCII): replicas sharing one
 * PostgreSQL database run one pass at a time; the others skip theirs. */
#define RETENTION_LOCK 0x66707265746eLL

int retention_pass_run(store *st, const retention_cfg *cfg, const atomic_int *stop, retention_pass *out) {
    memset(out, 0, sizeof *out);
    db_conn *held = NULL;
    int got = store_exclusive_begin(st, RETENTION_LOCK, &held);
    if (got <= 0) {
        if (!got) log_line("info", "retention: pass skipped, another server runs one", "backend=%s", store_backend(st));
        return got;
    }
    int rc = pass(st, cfg, stop, out);
    store_exclusive_end(st, RETENTION_LOCK, held);
    return rc;
}

static int pass(store *st, const retention_cfg *cfg, const atomic_int *stop, retention_pass *out) {
    long long now = (long long)time(NULL);
    int rc = prune_by_age(st, cfg, stop, now, &out->pruned_age);
    if (!rc) rc = prune_by_size(st, cfg, stop, now, &out->pruned_size);
    if (!rc && !(stop && atomic_load(stop))) rc = maybe_vacuum(st, cfg, &out->vacuumed);
    return rc;
}

static void *run(void *arg) {
    retention *r = arg;
    while (!atomic_load(&r->stop)) {
        retention_pass p;
        if (retention_pass_run(r->st, &r->cfg, &r->stop, &p))
            log_line("error", "retention pass failed; retrying next interval", "interval_s=%u", r->cfg.interval_s);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += r->cfg.interval_s;
        pthread_mutex_lock(&r->lock);
        while (!atomic_load(&r->stop) && pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

retention *retention_start(store *st, const retention_cfg *cfg) {
    if (!cfg->retain_days && !cfg->max_db_bytes) return NULL;
    retention *r = calloc(1, sizeof *r);
    if (!r) goto fail;
    r->st = st;
    r->cfg = *cfg;
    if (!r->cfg.interval_s) r->cfg.interval_s = 1;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    if (pthread_create(&r->thread, NULL, run, r)) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        goto fail;
    }
    log_line("info", "retention on", "retain_days=%llu max_db_bytes=%llu interval_s=%u vacuum_min_bytes=%llu",
            cfg->retain_days, cfg->max_db_bytes, r->cfg.interval_s, cfg->vacuum_min_bytes);
    return r;
fail:
    log_line("error", "retention: cannot start its thread; nothing will be pruned", NULL);
    return NULL;
}

void retention_stop(retention *r) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    atomic_store(&r->stop, 1);
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
