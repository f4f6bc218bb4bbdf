/* idem.c: Idempotency-Key claims of uploads (idem.h). Owns the upload_claims table; reads the
 * sessions' idempotency_key. Times are unix seconds of the server's clock. */
#include "store/idem.h"

#include "lib/err.h"
#include "store/db.h"

/* The claim's upsert: a new key, or a key whose claim is stale (its server died), becomes
 * owner's; a live claim is left as it is (no row changed). */
#define CLAIM_SQL                                                                                        \
    "INSERT INTO upload_claims(key, owner, claimed_at, seen_at) VALUES (?1, ?2, ?3, ?3)"                 \
    " ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, claimed_at = excluded.claimed_at,"          \
    " seen_at = excluded.seen_at WHERE upload_claims.seen_at < ?4"

/* The claim of key as it stands: *since when it began. 0, ERR_DB. */
static int claim_since(db_conn *db, const char *key, long long *since) {
    db_stmt *s = db_prepare(db, "SELECT claimed_at FROM upload_claims WHERE key = ?1");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, key);
    int st = db_step(s);
    *since = st == DB_ROW ? db_column_int64(s, 0) : 0;
    db_finalize(s);
    return st == DB_ROW || st == DB_DONE ? 0 : ERR_DB;
}

/* The session holding key: IDEM_STORED with its id and events, 0 when none, ERR_DB. */
static int stored(db_conn *db, const char *key, long long *session_id, long long *events) {
    db_stmt *s = db_prepare(db, "SELECT id, event_count FROM sessions WHERE idempotency_key = ?1");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, key);
    int st = db_step(s);
    if (st == DB_ROW) {
        *session_id = db_column_int64(s, 0);
        *events = db_column_int64(s, 1);
    }
    db_finalize(s);
    return st == DB_ROW ? IDEM_STORED : st == DB_DONE ? 0 : ERR_DB;
}

static int delete_claim(db_conn *db, const char *key, const char *owner) {
    db_stmt *s = db_prepare(db, "DELETE FROM upload_claims WHERE key = ?1 AND owner = ?2");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, key);
    db_bind_text(s, 2, owner);
    int st = db_step(s);
    db_finalize(s);
    return st == DB_DONE ? 0 : ERR_DB;
}

static int claim_on(db_conn *db, const char *key, const char *owner, long long now, long long *session_id, long long *events,
                    long long *since) {
    db_stmt *s = db_prepare(db, CLAIM_SQL);
    if (!s) return ERR_DB;
    db_bind_text(s, 1, key);
    db_bind_text(s, 2, owner);
    db_bind_int64(s, 3, now);
    db_bind_int64(s, 4, now - IDEM_STALE_S);
    int st = db_step(s);
    db_finalize(s);
    if (st != DB_DONE) return ERR_DB;
    if (db_changes(db) == 0) { /* a live claim: another upload of the key is in flight */
        int rc = claim_since(db, key, since);
        return rc ? rc : ERR_CONFLICT;
    }
    int rc = stored(db, key, session_id, events);
    /* stored already: the claim just taken is not needed (a failed delete goes stale) */
    if (rc == IDEM_STORED) delete_claim(db, key, owner);
    return rc;
}

int idem_claim(store *st, const char *key, const char *owner, long long now, long long *session_id, long long *events, long long *since) {
    db_conn *db = store_get(st);
    if (!db) return store_fail(st, NULL, ERR_DB);
    int rc = store_fail(st, db, claim_on(db, key, owner, now, session_id, events, since));
    store_put(st, db);
    return rc;
}

int idem_release(store *st, const char *key, const char *owner) {
    db_conn *db = store_get(st);
    if (!db) return ERR_DB;
    int rc = store_fail(st, db, delete_claim(db, key, owner));
    store_put(st, db);
    return rc;
}

int idem_refresh(store *st, const char *owner, long long now) {
    db_conn *db = store_get(st);
    if (!db) return ERR_DB;
    db_stmt *s = db_prepare(db, "UPDATE upload_claims SET seen_at = ?1 WHERE owner = ?2");
    int rc = s ? 0 : ERR_DB;
    if (s) {
        db_bind_int64(s, 1, now);
        db_bind_text(s, 2, owner);
        rc = db_step(s) == DB_DONE ? 0 : ERR_DB;
        db_finalize(s);
    }
    rc = store_fail(st, db, rc);
    store_put(st, db);
    return rc;
}
