/* store.c: owns the database file, the schema, migrations and the connection pool.
 *
 * The schema is schema.sql, embedded at build time (build/gen/schema_sql.h): only
 * store_open runs DDL. A new database gets schema.sql (always the newest schema) and
 * user_version STORE_SCHEMA_VERSION at once; an older one runs migrations[from..] in one
 * transaction each. Must not include microhttpd.h. */
#include "store/store.h"
#include "lib/err.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "schema_sql.h"

#define POOL_MAX 32

struct store {
    char *path;
    pthread_mutex_t lock; /* guards pool[] and npool */
    sqlite3 *pool[POOL_MAX];
    int npool;
    _Atomic unsigned long gen; /* store_generation: bumped after each committed write */
    _Atomic unsigned long lgen; /* store_list_generation: gen's writes and uploads */
};

/* Forward migrations: migrations[v] takes a database from user_version v to v+1.
 * Version 0 is "empty": it gets the whole schema.sql, which already holds every later
 * table, and goes straight to the newest version. Append, never edit; a table added here
 * goes into schema.sql too, with the same DDL (test_history.py compares the two). */
static const char *const migrations[] = {
    schema_sql,
    /* 1 -> 2: named baselines (history.c). */
    "CREATE TABLE baselines (\n"
    "  name       TEXT PRIMARY KEY,\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  seq        INTEGER NOT NULL,\n"
    "  created_at INTEGER NOT NULL,\n"
    "  updated_at INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX baselines_session ON baselines(session_id);\n"
    "CREATE TABLE baseline_labels (\n"
    "  name  TEXT NOT NULL REFERENCES baselines(name) ON DELETE CASCADE ON UPDATE CASCADE,\n"
    "  key   TEXT NOT NULL,\n"
    "  value TEXT NOT NULL,\n"
    "  PRIMARY KEY (name, key)\n"
    ") WITHOUT ROWID;\n",
    /* 2 -> 3: sessions.id AUTOINCREMENT, so a deleted session's id is never reused. SQLite
     * cannot add it in place: the table is rebuilt (https://sqlite.org/lang_altertable.html,
     * "making other kinds of table schema changes") with foreign keys off (see migrate), so
     * the DROP cascades nothing and the children keep pointing at "sessions". Copying the
     * rows sets sqlite_sequence to the largest id; ids deleted above it before the
     * migration cannot be known. */
    "CREATE TABLE sessions_v3 (\n"
    "  id          INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  name        TEXT NOT NULL,\n"
    "  source      TEXT NOT NULL,\n"
    "  created_at  INTEGER NOT NULL,\n"
    "  start_us    REAL NOT NULL,\n"
    "  end_us      REAL NOT NULL,\n"
    "  event_count INTEGER NOT NULL,\n"
    "  hardware    TEXT NOT NULL DEFAULT '',\n"
    "  bytes_in    INTEGER NOT NULL DEFAULT 0,\n"
    "  meta        TEXT NOT NULL DEFAULT '{}',\n"
    "  summary     TEXT NOT NULL DEFAULT '{}'\n"
    ");\n"
    "INSERT INTO sessions_v3 (id, name, source, created_at, start_us, end_us, event_count, hardware, bytes_in, meta, summary)\n"
    "  SELECT id, name, source, created_at, start_us, end_us, event_count, hardware, bytes_in, meta, summary FROM sessions;\n"
    "DROP TABLE sessions;\n"
    "ALTER TABLE sessions_v3 RENAME TO sessions;\n"
    "CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);\n",
};
_Static_assert(sizeof migrations / sizeof migrations[0] == STORE_SCHEMA_VERSION, "one migration per schema version");

static sqlite3 *conn_open(const char *path, char *err, size_t errlen) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        if (err) snprintf(err, errlen, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    /* WAL: readers never block the writer; NORMAL sync is durable across process
     * crashes (what the SIGKILL test checks), losing at most the last commit on power loss. */
    /* journal_size_limit: SQLite reuses a WAL from its start without shrinking it, so the
     * -wal stayed the size of the largest upload for ever (issue 22); with it, a WAL that
     * restarts is cut back to 16 MiB (and loader_free truncates it after a big upload). */
    const char *setup =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        "PRAGMA journal_size_limit=16777216;"
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

/* 1 (and a message in *msg, sqlite3_malloc'd) when PRAGMA foreign_key_check finds a row
 * whose parent is missing; 0 when none. */
static int fk_violations(sqlite3 *db, char **msg) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK) {
        *msg = sqlite3_mprintf("%s", sqlite3_errmsg(db));
        return 1;
    }
    int bad = sqlite3_step(st) == SQLITE_ROW;
    if (bad) *msg = sqlite3_mprintf("foreign key violation in table %s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return bad;
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
    /* A table rebuild (2 -> 3) must not cascade: foreign keys are off while migrating (the
     * pragma is a no-op inside a transaction, hence here) and checked before each COMMIT. */
    if (version < target) sqlite3_exec(db, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL);
    int rc = 0;
    for (int v = version; v < target && !rc; v++) {
        char *msg = NULL;
        char pragma[64];
        /* schema.sql is the whole newest schema: an empty database skips the later steps. */
        int to = v == 0 ? target : v + 1;
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d;", to);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            fk_violations(db, &msg) ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration to schema version %d failed: %s", to, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            rc = ERR_DB;
            break;
        }
        v = to - 1;
    }
    sqlite3_exec(db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    return rc;
}

/* SQLite keeps malloc statistics by default, under one process-wide mutex that every
 * allocation of every connection takes: with a thread per request that mutex was most of
 * the sessions list's futex time (bench/README.md). Nothing here reads those statistics.
 * sqlite3_config works only before SQLite initialises, so the first store_open does it
 * (a later store, as in the unit tests, gets a harmless SQLITE_MISUSE). */
static void sqlite_setup(void) { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

store *store_open(const char *path, char *err, size_t errlen) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sqlite_setup);
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
    store_reserve(s); /* best effort: a full disk at start-up leaves it for later */
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
        s->gen++; /* after the commit (autocommit), never before: see store_generation */
        s->lgen++;
    } else {
        rc = store_errcode(db);
    }
out:
    sqlite3_finalize(st);
    store_put(s, db);
    return rc;
}

unsigned long store_generation(store *s) { return s->gen; }
unsigned long store_list_generation(store *s) { return s->lgen; }
void store_note_upload(store *s) { s->lgen++; }

int store_errcode(sqlite3 *db) { return (sqlite3_errcode(db) & 0xff) == SQLITE_FULL ? ERR_FULL : ERR_DB; }

/* ---- the reserve: room for deletes on a full disk ---- */

/* A delete writes its pages to the WAL before any space comes back, so on a full disk it
 * failed too (500) and space could not be freed through the API (issue 22). The server
 * keeps STORE_RESERVE_BYTES allocated in "<db>-reserve"; a delete that finds the disk full
 * gives it up and tries again, and it is taken back once there is room. */
static void reserve_path(const store *s, char *out, size_t n) { snprintf(out, n, "%s-reserve", s->path); }

int store_reserve(store *s) {
    char p[4200];
    reserve_path(s, p, sizeof p);
    struct stat st;
    if (!stat(p, &st) && st.st_size >= (off_t)STORE_RESERVE_BYTES) return 0;
    /* Taken only with 1 MiB left beside it, so taking it never fills the disk itself. */
    struct statvfs vs;
    if (!statvfs(s->path, &vs) && (unsigned long long)vs.f_bavail * vs.f_frsize < STORE_RESERVE_BYTES + (1ull << 20)) return ERR_FULL;
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ERR_IO;
    int rc = posix_fallocate(fd, 0, (off_t)STORE_RESERVE_BYTES);
    close(fd);
    if (rc) unlink(p); /* no room yet: a partial reserve would only take space */
    return rc ? ERR_FULL : 0;
}

static int release_reserve(store *s) {
    char p[4200];
    reserve_path(s, p, sizeof p);
    return unlink(p) ? -1 : 0;
}

int store_delete_session(store *s, long long id) {
    int changes = 0;
    int rc = exec_one(s, "DELETE FROM sessions WHERE id = ?1", id, NULL, NULL, &changes);
    if (rc == ERR_FULL && !release_reserve(s)) rc = exec_one(s, "DELETE FROM sessions WHERE id = ?1", id, NULL, NULL, &changes);
    if (!rc && changes) {
        /* the delete's WAL frames into the database (pages it freed are reused in place),
         * then the WAL emptied: its space comes back, and the reserve is taken again */
        sqlite3 *db = store_get(s);
        if (db) {
            sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
            store_put(s, db);
        }
        store_reserve(s);
    }
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

/* The first column of the first row of sql, or -1. */
static long long one_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int store_usage_get(store *s, store_usage *u) {
    sqlite3 *db = store_get(s);
    if (!db) return ERR_DB;
    /* One read transaction, so that the four numbers describe one snapshot. */
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 : ERR_DB;
    if (!rc) {
        u->sessions = one_int(db, "SELECT count(*) FROM sessions");
        u->pages = one_int(db, "PRAGMA page_count");
        u->free_pages = one_int(db, "PRAGMA freelist_count");
        u->page_size = one_int(db, "PRAGMA page_size");
        if (u->sessions < 0 || u->pages < 0 || u->free_pages < 0 || u->page_size < 0) rc = ERR_DB;
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    store_put(s, db);
    return rc;
}
