/* an.c: the analysis's shared helpers, at the bottom of analysis/: an.h's context, its
 * errors, statements, string lookups and scratch readers that every pass uses.
 *
 * Owns nothing of its own: the passes (host, idle, suspects, steps, gpu, ...) call down into
 * it and analyze.c conducts them; nothing here calls a pass or the conductor, so the folder
 * reads as a tree (issue 41): analyze.c on top, the passes, then this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"
#include "lib/vec.h"

int an_dberr(A *a) {
    snprintf(a->err, a->errlen, "analysis failed: %s", sqlite3_errmsg(a->db));
    return ERR_DB;
}
int an_run(A *a, const char *sql) {
    return sqlite3_exec(a->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : an_dberr(a);
}
sqlite3_stmt *an_prep(A *a, const char *sql) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(a->db, sql, -1, &s, NULL) != SQLITE_OK) {
        an_dberr(a);
        return NULL;
    }
    return s;
}
int an_span_insert(A *a, sqlite3_stmt **ins, const char *sql, long long key, double ts, double te) {
    if (!*ins && !(*ins = an_prep(a, sql))) return ERR_DB;
    sqlite3_bind_int64(*ins, 1, key);
    sqlite3_bind_double(*ins, 2, ts);
    sqlite3_bind_double(*ins, 3, te);
    int rc = sqlite3_step(*ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(*ins);
    return rc;
}
int an_has_gpu_rows(const A *a, int cls, long kind) {
    for (size_t i = 0; i < a->t->ngpu_aggs; i++)
        if (a->t->gpu_aggs[i].cls == cls && (kind < 0 || a->t->gpu_aggs[i].kind == kind)) return 1;
    return 0;
}
int an_gpu_devs(A *a, long long **devs, size_t *n) {
    sqlite3_stmt *q = an_prep(a, "SELECT DISTINCT dev FROM scratch.ev WHERE cls = 2 ORDER BY dev");
    size_t cap = 0;
    int rc = q ? 0 : ERR_DB, st;
    *devs = NULL;
    *n = 0;
    while (!rc && (st = sqlite3_step(q)) == SQLITE_ROW) {
        if (VEC_RESERVE(*devs, cap, *n + 1, 4)) rc = ERR_NOMEM;
        else (*devs)[(*n)++] = sqlite3_column_int64(q, 0);
    }
    if (!rc && st != SQLITE_DONE) rc = an_dberr(a);
    sqlite3_finalize(q);
    return rc;
}

/* PRAGMA busy_timeout of the upload's connection. */
int an_busy_ms(A *a) {
    sqlite3_stmt *s = NULL;
    int ms = sqlite3_prepare_v2(a->db, "PRAGMA busy_timeout", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    return ms;
}

/* A job's connection waits for the scratch file's locks as long as the upload's own does
 * (store/db.h: DB_BUSY_TIMEOUT_MS, set by whoever opened t->db): both sides wait, neither
 * fails at once with "database is locked" while the other's statement runs. Its main
 * (":memory:", empty) gets the small cache too: SQLite sizes a sort's memory by main's
 * cache_size, so each job's ORDER BY held 2 MB at the default (the steps job's and the
 * GPU timeline's: ~8 MB of two many-names uploads' peak, massif), 1 MB now; what is
 * longer spills to a temporary file, as it did past 2 MB. */
int an_job_db(A *a, sqlite3 **out) {
    sqlite3 *db = NULL;
    sqlite3_stmt *at = NULL;
    int ok = a->t->scratch_path && sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK &&
             sqlite3_busy_timeout(db, an_busy_ms(a)) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "ATTACH ? AS scratch", -1, &at, NULL) == SQLITE_OK &&
             sqlite3_bind_text(at, 1, a->t->scratch_path, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(at) == SQLITE_DONE &&
             sqlite3_exec(db, "PRAGMA scratch.cache_size=-" AN_JOB_CACHE_KIB "; PRAGMA main.cache_size=-" AN_JOB_CACHE_KIB,
                          NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_finalize(at);
    if (!ok) {
        snprintf(a->err, a->errlen, "analysis failed: cannot open the scratch file again: %s", db ? sqlite3_errmsg(db) : "no memory");
        sqlite3_close(db);
        db = NULL;
    }
    *out = db;
    return ok ? 0 : ERR_DB;
}
const char *an_str(A *a, long id) {
    const char *s = id >= 0 ? intern_str(a->t->strs, id) : NULL;
    return s ? s : "";
}


int an_track_recs_stmt(A *a, sqlite3_stmt *tb, long tr, int (*fn)(A *, void *, const hrec *), void *ctx) {
    int rc = 0, src = SQLITE_DONE;
    sqlite3_reset(tb);
    sqlite3_bind_int64(tb, 1, tr);
    while (!rc && (src = sqlite3_step(tb)) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(tb, 0);
        size_t n = (size_t)sqlite3_column_bytes(tb, 0) / sizeof(hrec);
        for (size_t i = 0; !rc && i < n; i++) {
            hrec h;
            hrec_at(blob, i, &h);
            rc = fn(a, ctx, &h);
        }
    }
    return !rc && src != SQLITE_DONE ? an_dberr(a) : rc;
}

int an_track_recs(A *a, long tr, int (*fn)(A *, void *, const hrec *), void *ctx) {
    sqlite3_stmt *tb = an_prep(a, AN_TRACK_BLOCKS_SQL);
    int rc = tb ? an_track_recs_stmt(a, tb, tr, fn, ctx) : ERR_DB;
    sqlite3_finalize(tb);
    return rc;
}

