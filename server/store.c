/* store.c: owns the database file, the schema, migrations and the connection pool.
 *
 * The schema is schema.sql, embedded at build time (build/gen/schema_sql.h): only
 * store_open runs DDL. A new database gets schema.sql and user_version 1; an older
 * one runs migrations[from..] in one transaction each. Must not include microhttpd.h. */
#include "store.h"
#include "err.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "schema_sql.h"

#define POOL_MAX 32

struct store {
    char *path;
    pthread_mutex_t lock; /* guards pool[] and npool */
    sqlite3 *pool[POOL_MAX];
    int npool;
};

/* Forward migrations: migrations[v] takes a database from user_version v to v+1.
 * Version 0 is "empty": it gets the whole schema.sql. Append, never edit. */
static const char *const migrations[] = {
    schema_sql,
};

static sqlite3 *conn_open(const char *path, char *err, size_t errlen) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        if (err) snprintf(err, errlen, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    /* WAL: readers never block the writer; NORMAL sync is durable across process
     * crashes (what the SIGKILL test checks), losing at most the last commit on power loss. */
    const char *setup =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        "PRAGMA temp_store=FILE;";
    char *msg = NULL;
    if (sqlite3_exec(db, setup, NULL, NULL, &msg) != SQLITE_OK) {
        if (err) snprintf(err, errlen, "cannot set up %s: %s", path, msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 30000);
    return db;
}

static int migrate(sqlite3 *db, char *err, size_t errlen) {
    sqlite3_stmt *st;
    int version = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return ERR_DB;
    if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    int target = (int)(sizeof migrations / sizeof migrations[0]);
    if (version > target) {
        snprintf(err, errlen, "database schema version %d is newer than this server's %d", version, target);
        return ERR_DB;
    }
    for (int v = version; v < target; v++) {
        char *msg = NULL;
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d;", v + 1);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration to schema version %d failed: %s", v + 1, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return ERR_DB;
        }
    }
    return 0;
}

store *store_open(const char *path, char *err, size_t errlen) {
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    sqlite3 *db = conn_open(path, err, errlen);
    if (!db) goto fail;
    if (migrate(db, err, errlen)) {
        sqlite3_close(db);
        goto fail;
    }
    store_put(s, db);
    return s;
fail:
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
    return NULL;
}

void store_close(store *s) {
    if (!s) return;
    for (int i = 0; i < s->npool; i++) sqlite3_close(s->pool[i]);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
}

const char *store_path(const store *s) { return s->path; }

sqlite3 *store_get(store *s) {
    pthread_mutex_lock(&s->lock);
    sqlite3 *db = s->npool ? s->pool[--s->npool] : NULL;
    pthread_mutex_unlock(&s->lock);
    return db ? db : conn_open(s->path, NULL, 0);
}

void store_put(store *s, sqlite3 *db) {
    if (!db) return;
    /* A connection left inside a transaction by an error path must not poison the pool. */
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_lock(&s->lock);
    if (s->npool < POOL_MAX) {
        s->pool[s->npool++] = db;
        db = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (db) sqlite3_close(db);
}

static int exec_one(store *s, const char *sql, long long id, const char *a, const char *b, int *changes) {
    sqlite3 *db = store_get(s);
    if (!db) return ERR_DB;
    sqlite3_stmt *st = NULL;
    int rc = ERR_DB;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) goto out;
    sqlite3_bind_int64(st, 1, id);
    if (a) sqlite3_bind_text(st, 2, a, -1, SQLITE_TRANSIENT);
    if (b) sqlite3_bind_text(st, 3, b, -1, SQLITE_TRANSIENT);
    if (b) sqlite3_bind_int64(st, 4, (long long)time(NULL));
    if (sqlite3_step(st) == SQLITE_DONE) {
        rc = 0;
        if (changes) *changes = sqlite3_changes(db);
    }
out:
    sqlite3_finalize(st);
    store_put(s, db);
    return rc;
}

int store_delete_session(store *s, long long id) {
    int changes = 0;
    int rc = exec_one(s, "DELETE FROM sessions WHERE id = ?1", id, NULL, NULL, &changes);
    return rc ? rc : changes ? 0 : ERR_NOTFOUND;
}

int store_set_report_line(store *s, long long id, const char *line, const char *text) {
    if (text && *text)
        return exec_one(s, "INSERT INTO report_edits(session_id, line, text, edited_at) VALUES (?1, ?2, ?3, ?4) "
                           "ON CONFLICT(session_id, line) DO UPDATE SET text = excluded.text, edited_at = excluded.edited_at",
                        id, line, text, NULL);
    return exec_one(s, "DELETE FROM report_edits WHERE session_id = ?1 AND line = ?2", id, line, NULL, NULL);
}

long long store_size_bytes(const store *s) {
    struct stat st;
    long long total = 0;
    char wal[4096];
    if (stat(s->path, &st) == 0) total += st.st_size;
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    if (stat(wal, &st) == 0) total += st.st_size;
    return total;
}
