/* reanalysis.c: re-analysis claims, failures and the queue of older sessions (reanalysis.h).
 * Owns the SQL of the reanalysis table; the copy of a re-analysed session is commit.c's. */
#include "store/reanalysis.h"

#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"

/* The database's clock in unix seconds, as an SQL expression of each dialect. */
#define NOW_LITE "CAST(strftime('%s','now') AS INTEGER)"
#define NOW_PG "CAST(extract(epoch FROM clock_timestamp()) AS BIGINT)"

/* Runs one prepared statement (both dialects' texts) with id, text a, int v as ?1, ?2, ?3
 * (a NULL binds NULL) in a write transaction of its own; on PostgreSQL fp_generation is
 * bumped in it when bump is set, on SQLite store_note_write after the COMMIT. 0 or an
 * ERR_*; *changes gets the rows the statement changed. */
static int write_one(store *st, const char *lite, const char *pg, long long id, const char *a, long long v, const char *b, int bump,
                     long long *changes) {
    db_conn *db = store_get(st);
    if (!db) return store_fail(st, NULL, ERR_DB);
    int rc = db_begin_write(db) ? ERR_DB : 0;
    db_stmt *s = rc ? NULL : db_prepare2(db, lite, pg);
    if (!rc && !s) rc = ERR_DB;
    if (!rc) {
        db_bind_int64(s, 1, id);
        db_bind_text(s, 2, a);
        db_bind_int64(s, 3, v);
        db_bind_text(s, 4, b);
        rc = db_step(s) == DB_DONE ? 0 : db_fk_violation(db) ? ERR_NOTFOUND : ERR_DB;
        if (changes) *changes = db_changes(db);
    }
    db_finalize(s);
    if (!rc && bump && store_is_pg(st)) rc = db_exec(db, "UPDATE fp_generation SET gen = gen + 1, lgen = lgen + 1");
    if (!rc) rc = db_exec(db, "COMMIT");
    rc = store_fail(st, db, rc);
    store_put(st, db); /* rolls back what failed */
    if (!rc && bump) store_note_write(st);
    return rc;
}

/* Why an upsert with a condition: taking the claim and checking that nobody holds it is
 * one statement, so two workers (replicas) asking at once cannot both get it. */
#define CLAIM(NOW)                                                                                                \
    "INSERT INTO reanalysis(session_id, claimed_by, claimed_until) VALUES (?1, ?2, " NOW " + ?3)"              \
    " ON CONFLICT(session_id) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_until = excluded.claimed_until" \
    " WHERE reanalysis.claimed_by IS NULL OR reanalysis.claimed_until < " NOW

int reanalysis_claim(store *s, long long id, const char *claimer, int lease_s, char *holder, size_t hlen, long long *left) {
    long long changed = 0;
    int rc = write_one(s, CLAIM(NOW_LITE), CLAIM(NOW_PG), id, claimer, lease_s, NULL, 0, &changed);
    if (rc) return rc;
    if (changed == 1) return 1;
    holder[0] = '\0';
    *left = 0;
    db_conn *db = store_get(s);
    db_stmt *q = db ? db_prepare2(db, "SELECT claimed_by, claimed_until - " NOW_LITE " FROM reanalysis WHERE session_id = ?",
                                  "SELECT claimed_by, claimed_until - " NOW_PG " FROM reanalysis WHERE session_id = ?")
                    : NULL;
    if (q) {
        db_bind_int64(q, 1, id);
        if (db_step(q) == DB_ROW) {
            snprintf(holder, hlen, "%s", db_column_text(q, 0) ? db_column_text(q, 0) : "");
            *left = db_column_int64(q, 1);
        }
    }
    db_finalize(q);
    store_put(s, db);
    return 0;
}

#define RENEW(NOW) "UPDATE reanalysis SET claimed_until = " NOW " + ?3 WHERE session_id = ?1 AND claimed_by = ?2"

int reanalysis_renew(store *s, long long id, const char *claimer, int lease_s) {
    long long changed = 0;
    int rc = write_one(s, RENEW(NOW_LITE), RENEW(NOW_PG), id, claimer, lease_s, NULL, 0, &changed);
    return rc ? rc : changed == 1 ? 0 : ERR_CONFLICT;
}

void reanalysis_release(store *s, long long id, const char *claimer) {
    static const char sql[] = "UPDATE reanalysis SET claimed_by = NULL, claimed_until = NULL WHERE session_id = ?1 AND claimed_by = ?2";
    write_one(s, sql, sql, id, claimer, 0, NULL, 0, NULL);
}

#define FAIL(NOW)                                                                                                   \
    "UPDATE reanalysis SET claimed_by = NULL, claimed_until = NULL, failed_at = " NOW ", failed_version = ?3, error = ?4" \
    " WHERE session_id = ?1 AND claimed_by = ?2"

int reanalysis_fail(store *s, long long id, const char *claimer, int version, const char *error) {
    char msg[REANALYSIS_ERROR_MAX + 1];
    size_t n = strlen(error ? error : "");
    n = utf8_cut(error ? error : "", n, REANALYSIS_ERROR_MAX);
    snprintf(msg, sizeof msg, "%.*s", (int)n, error ? error : "");
    return write_one(s, FAIL(NOW_LITE), FAIL(NOW_PG), id, claimer, version, msg, 1, NULL);
}

#define NEXT(NOW)                                                                                    \
    "SELECT s.id FROM sessions s LEFT JOIN reanalysis r ON r.session_id = s.id"                    \
    " WHERE s.analysis_version < ?1 AND (?2 = 0 OR s.id < ?2)"                                      \
    "   AND (r.claimed_by IS NULL OR r.claimed_until < " NOW ")"                                    \
    "   AND (?3 = 0 OR r.failed_version IS NULL OR r.failed_version < ?4)"                          \
    " ORDER BY s.id DESC LIMIT 1"

int reanalysis_next(store *s, int older_than, int version, int skip_failed, long long before, long long *id) {
    db_conn *db = store_get(s);
    db_stmt *q = db ? db_prepare2(db, NEXT(NOW_LITE), NEXT(NOW_PG)) : NULL;
    int rc = q ? 0 : ERR_DB;
    if (q) {
        db_bind_int64(q, 1, older_than);
        db_bind_int64(q, 2, before);
        db_bind_int64(q, 3, skip_failed);
        db_bind_int64(q, 4, version);
        int st = db_step(q);
        rc = st == DB_ROW ? 1 : st == DB_DONE ? 0 : ERR_DB;
        if (rc == 1) *id = db_column_int64(q, 0);
    }
    db_finalize(q);
    rc = rc < 0 ? store_fail(s, db, rc) : rc;
    store_put(s, db);
    return rc;
}

int reanalysis_pending(store *s, int older_than, long long *n) {
    db_conn *db = store_get(s);
    db_stmt *q = db ? db_prepare(db, "SELECT count(*) FROM sessions WHERE analysis_version < ?") : NULL;
    int rc = q ? 0 : ERR_DB;
    if (q) {
        db_bind_int64(q, 1, older_than);
        rc = db_step(q) == DB_ROW ? 0 : ERR_DB;
        if (!rc) *n = db_column_int64(q, 0);
    }
    db_finalize(q);
    rc = store_fail(s, db, rc);
    store_put(s, db);
    return rc;
}

json_t *reanalysis_versions(db_conn *db, long long base, long long head) {
    json_t *o = json_pack("{s:n,s:n}", "base", "head");
    db_stmt *q = o ? db_prepare(db, "SELECT id, analysis_version FROM sessions WHERE id IN (?1, ?2)") : NULL;
    if (!q) {
        json_decref(o);
        return NULL;
    }
    db_bind_int64(q, 1, base);
    db_bind_int64(q, 2, head);
    int st;
    while ((st = db_step(q)) == DB_ROW) {
        long long id = db_column_int64(q, 0);
        json_t *v = json_integer(db_column_int64(q, 1));
        if (id == base) json_object_set(o, "base", v);
        if (id == head) json_object_set(o, "head", v);
        json_decref(v);
    }
    db_finalize(q);
    if (st != DB_DONE) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *reanalysis_failure(db_conn *db, long long id) {
    db_stmt *q = db_prepare(db, "SELECT error, failed_at, failed_version FROM reanalysis WHERE session_id = ? AND failed_at IS NOT NULL");
    if (!q) return NULL;
    db_bind_int64(q, 1, id);
    int st = db_step(q);
    json_t *o = st == DB_DONE ? json_null() : NULL;
    if (st == DB_ROW) {
        char at[TIMEFMT_LEN];
        timefmt_utc(db_column_int64(q, 1), 0, at);
        const char *e = db_column_text(q, 0);
        o = json_pack("{s:s,s:s,s:I}", "error", e ? e : "", "failed_at", at, "version", (json_int_t)db_column_int64(q, 2));
    }
    db_finalize(q);
    return o;
}
