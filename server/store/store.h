/* store.h: the database: schema, migrations, connections, on SQLite or PostgreSQL.
 *
 * One store per server. --db names a SQLite file (the embedded default) or a PostgreSQL
 * database (a postgresql:// URI or a libpq conninfo, db.h); nothing above store/ knows
 * which. Connections come from a small pool (a connection is never shared between
 * threads): take one with store_get, give it back with store_put. On SQLite writers
 * serialise inside SQLite (WAL, busy_timeout); on PostgreSQL several servers (replicas)
 * may share one database, and everything that must hold across them (session ids, the
 * reply cache's write generation, one retention pass at a time) lives in the database.
 * See schema.sql and schema_pg.sql for the tables and their invariants. */
#ifndef FP_STORE_H
#define FP_STORE_H

#include <stddef.h>

#define STORE_SCHEMA_VERSION 10 /* = entries in store.c's migrations[] */
#define STORE_PG_SCHEMA_VERSION 8 /* = entries in store.c's pg_migrations[] */

typedef struct store store;
typedef struct db_conn db_conn; /* store/db.h; opaque above store/ */
struct sqlite3;

/* Opens (creating if needed) the database and brings its schema to the newest version.
 * PostgreSQL: a database that cannot be reached is retried for FIRSTPASS_DB_WAIT_S seconds
 * (default 30), one log line a try. NULL on failure with a message in err. */
store *store_open(const char *path, char *err, size_t errlen);
void store_close(store *s); /* accepts NULL */
/* What --db said (a PostgreSQL URI with its password blanked). */
const char *store_path(const store *s);
/* uri with a password in it blanked ("postgresql://u:***@h/db", "password=***"), into out. */
const char *store_redact(const char *uri, char *out, size_t n);
/* "sqlite" or "postgresql". */
const char *store_backend(const store *s);
int store_is_pg(const store *s);
/* 1 when uri names a PostgreSQL database (a postgresql:// URI or a libpq conninfo), 0 for a
 * file: the caller makes no folder and no file beside it then. */
int store_uri_is_pg(const char *uri);
/* 0 when the database answers a trivial query now, else ERR_DB (for /healthz). Never waits
 * for the pool: on PostgreSQL it pings on a connection of its own (store.c says why). */
int store_ping(store *s);

/* A pooled connection; NULL when out of memory, the database cannot be reached, or (on
 * PostgreSQL) every pooled connection stays busy for FIRSTPASS_PG_POOL_WAIT_MS. Give it
 * back with store_put: a broken one is closed, not pooled. */
db_conn *store_get(store *s);
void store_put(store *s, db_conn *db);
/* rc as the caller should answer it: ERR_DBDOWN (503 database_unreachable: retry later)
 * when rc is ERR_DB because PostgreSQL is out of reach, that is no connection could be had
 * (db NULL) or db was lost under a statement that could not be run again (db.c); else rc.
 * Call it before store_put(db). */
int store_fail(store *s, db_conn *db, int rc);

/* The upload's scratch workspace (ingest/load.c): a SQLite connection with no transaction
 * open on which the loader attaches its scratch file. On SQLite it is a pooled connection
 * of the database itself (the commit is then one INSERT ... SELECT per table), and *hold
 * is that connection; on PostgreSQL a private in-memory SQLite connection (*hold NULL):
 * the commit reads the scratch and writes to PostgreSQL. NULL when none can be opened.
 * store_scratch_put gives back both. After store_commit_session (commit.h) the SQLite
 * connection waits at most STORE_CHECKPOINT_WAIT_MS for a lock, so that the WAL truncation
 * the loader runs then holds no writer off for longer; store_scratch_put restores
 * DB_BUSY_TIMEOUT_MS. */
struct sqlite3 *store_scratch_get(store *s, db_conn **hold);
void store_scratch_put(store *s, struct sqlite3 *scratch, db_conn *hold);

/* One holder at a time across every server on the database, for a job that must not run
 * twice at once (a retention pass): 1 when taken (*held keeps it; give it back with
 * store_exclusive_end), 0 when another holder has it now, ERR_DB. On SQLite (one server a
 * file) always 1. PostgreSQL: pg_try_advisory_lock(key) on a pooled connection. */
int store_exclusive_begin(store *s, long long key, db_conn **held);
void store_exclusive_end(store *s, long long key, db_conn *held);

/* Deletes a session and, through ON DELETE CASCADE, all it owns.
 * 0, ERR_NOTFOUND, ERR_FULL (the disk is full even with the reserve given up), ERR_DB.
 * Then the WAL is truncated and the reserve taken back (store_reserve). */
int store_delete_session(store *s, long long id);
/* STORE_RESERVE_BYTES kept allocated beside the database ("<db>-reserve") so that a delete
 * can run on a full disk; 0, or ERR_FULL when there is no room for it now (retried after
 * each delete and upload). */
#define STORE_RESERVE_BYTES (8u << 20)
int store_reserve(store *s);
/* ERR_FULL when db's last error was SQLITE_FULL (disk full), else ERR_DB. */
int store_errcode(struct sqlite3 *db);
/* Copies the WAL into the database and empties it (a TRUNCATE checkpoint) on an SQLite
 * connection with no transaction open, waiting at most STORE_CHECKPOINT_WAIT_MS for readers
 * on older snapshots (meanwhile it holds the write lock: every writer waits). 0 when the WAL
 * was emptied; ERR_CONFLICT when a reader outlasted the wait (the WAL is then left as it
 * is, less what could be copied); ERR_FULL, ERR_DB. db NULL: 0. */
#define STORE_CHECKPOINT_WAIT_MS 1000
int store_wal_truncate(struct sqlite3 *db);

/* Saves (text non-empty) or clears (text NULL or "") one edited report line. */
int store_set_report_line(store *s, long long id, const char *line, const char *text);

/* A counter bumped after every committed change to a stored session (a deletion, a
 * report edit). Read it BEFORE rendering a reply: a reply rendered at generation g is
 * current while the counter is still g (rcache.h). New uploads do not bump it: they
 * change no existing session, so one upload does not throw away every cached session reply. */
unsigned long store_generation(store *s);

/* The same, for replies about the set of sessions (the sessions list): bumped after every
 * committed upload as well as after everything that bumps store_generation. */
unsigned long store_list_generation(store *s);

/* Called after an upload's session has COMMITTED (never before: a list rendered between
 * the two would be kept as current), before its 201 goes out, so that the uploader's next
 * list shows it. */
void store_note_upload(store *s);

/* Called after a committed change to a stored session other than store.c's own (a
 * re-analysis, commit.h; a re-analysis failure, reanalysis.h), never before: bumps both
 * generations on SQLite. On PostgreSQL the transaction bumped fp_generation itself. */
void store_note_write(store *s);

/* Bytes of the database file plus its WAL (PostgreSQL: pg_database_size). */
long long store_size_bytes(store *s);

/* What the database holds, as one connection sees it (WAL included): its sessions and
 * its pages (PRAGMA page_count, freelist_count, page_size; on PostgreSQL the database's
 * size in blocks, none free: autovacuum reuses space). Pages in use, (pages -
 * free_pages) * page_size, are what retention's --max-db-bytes limits: freed pages stay
 * in the file and are reused by the next upload. 0 or ERR_DB. */
typedef struct store_usage {
    long long sessions;   /* rows in sessions */
    long long pages;      /* PRAGMA page_count */
    long long free_pages; /* PRAGMA freelist_count */
    long long page_size;  /* bytes */
} store_usage;
int store_usage_get(store *s, store_usage *u);

#endif
