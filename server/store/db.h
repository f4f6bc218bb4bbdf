/* db.h: the one database interface under store/: SQLite (a file) or PostgreSQL (libpq).
 *
 * The calls mirror SQLite's (prepare, bind, step, column, reset, finalize) so that the
 * store's SQL reads the same on both backends. Only store/ includes this header; what is
 * above store/ (ingest, http) never learns which backend runs (tests/layers.py).
 *
 * SQL text is written once, with SQLite's placeholders (?, ?NNN). On PostgreSQL,
 * db_prepare translates them to $n once per connection and statement text, prepares the
 * statement server-side (PQprepare) and keeps it for the connection's life: a statement
 * prepared again is a hash lookup, not a round trip. Where the dialects differ,
 * db_prepare2 takes both texts.
 *
 * Bindings follow SQLite's SQLITE_STATIC: a text or blob must live until the next
 * db_step. Unbound parameters are NULL. On PostgreSQL parameters go as text (blobs as
 * binary), results come back as text and are converted by db_column_*: integers and
 * doubles round-trip exactly (PostgreSQL prints float8 in its shortest exact form), a
 * boolean reads as 0 or 1, bytea is decoded from its hex form. A statement's whole result
 * is fetched by its first db_step, so a loop may run other statements on the same
 * connection between steps, as SQLite allows; a result too big to hold at once is read in
 * batches keyed on the last row (download.c), each a statement of its own. */
#ifndef FP_DB_H
#define FP_DB_H

#include <stddef.h>

typedef struct db_conn db_conn;
typedef struct db_stmt db_stmt;

typedef enum db_kind { DB_SQLITE, DB_PG } db_kind;

/* db_step's results besides ERR_DB. */
enum { DB_ROW = 1, DB_DONE = 2 };

/* 1 when uri names a PostgreSQL database (postgresql:// or postgres:// URI, or a libpq
 * conninfo with key=value pairs such as "host=db dbname=firstpass"); 0 for a file path. */
int db_uri_is_pg(const char *uri);

/* How long an SQLite connection waits for another's lock before SQLITE_BUSY ("database is
 * locked"): the store's connections and the upload's scratch connection on either backend
 * (store_scratch_get), whose analysis jobs read the scratch file from connections of their
 * own (analysis/analyze.c: an_job_db copies this connection's timeout). */
#define DB_BUSY_TIMEOUT_MS 30000

/* A new connection: SQLite (WAL, foreign keys on, busy timeout) or PostgreSQL (connect
 * timeout, statement timeout). NULL with a message in err. */
db_conn *db_open(const char *uri, char *err, size_t errlen);
void db_close(db_conn *c); /* accepts NULL */
db_kind db_kind_of(const db_conn *c);
/* The last error on c (valid until the next call on c). */
const char *db_errmsg(db_conn *c);
/* 1 when the connection is usable (PostgreSQL: not broken; SQLite: always). */
int db_alive(db_conn *c);
/* 1 when c is inside a transaction. */
int db_in_tx(db_conn *c);

/* Runs one or more statements without parameters (DDL, BEGIN, COMMIT). 0 or ERR_DB. */
int db_exec(db_conn *c, const char *sql);
/* BEGIN for a write transaction: SQLite's BEGIN IMMEDIATE (takes the write lock now, so
 * the transaction never fails half way on a busy database), PostgreSQL's BEGIN. */
int db_begin_write(db_conn *c);
/* BEGIN for a read of several statements that must see one snapshot (a session deleted
 * meanwhile is either wholly there or wholly gone): SQLite's BEGIN (the first read takes
 * the snapshot), PostgreSQL's BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY. End it with
 * db_exec(c, "COMMIT"); keep it short (on SQLite a WAL checkpoint waits for it). */
int db_begin_read(db_conn *c);
/* 1 while c is inside a transaction (BEGIN without its COMMIT or ROLLBACK yet), else 0. */
int db_in_txn(db_conn *c);
/* 1 when the last statement on c failed on a foreign key (a row naming a session that a
 * concurrent DELETE removed): SQLITE_CONSTRAINT_FOREIGNKEY, or SQLSTATE 23503. */
int db_fk_violation(db_conn *c);
/* Rows changed by the last INSERT, UPDATE or DELETE run on c. */
long long db_changes(db_conn *c);

db_stmt *db_prepare(db_conn *c, const char *sql);
db_stmt *db_prepare2(db_conn *c, const char *sqlite_sql, const char *pg_sql);
void db_bind_int64(db_stmt *s, int i, long long v);
void db_bind_double(db_stmt *s, int i, double v);
void db_bind_text(db_stmt *s, int i, const char *v); /* NULL binds NULL */
void db_bind_blob(db_stmt *s, int i, const void *p, size_t n);
void db_bind_null(db_stmt *s, int i);
/* DB_ROW, DB_DONE or ERR_DB. */
int db_step(db_stmt *s);
/* Ready to run again with the same bindings. */
void db_reset(db_stmt *s);
void db_clear_bindings(db_stmt *s);
void db_finalize(db_stmt *s); /* accepts NULL */

int db_column_is_null(db_stmt *s, int i);
long long db_column_int64(db_stmt *s, int i);
int db_column_int(db_stmt *s, int i);
double db_column_double(db_stmt *s, int i);
const char *db_column_text(db_stmt *s, int i); /* NULL for NULL */
/* The bytes of a blob column and their count (n may be NULL); valid until the next step
 * or finalize. db_column_bytes is the count alone; either may be called first. */
const void *db_column_blob(db_stmt *s, int i, size_t *n);
size_t db_column_bytes(db_stmt *s, int i);

/* The SQLite connection under c (backup, VACUUM, the scratch attachment); NULL on PostgreSQL. */
struct sqlite3 *db_sqlite(db_conn *c);

/* COPY ... FROM STDIN on PostgreSQL (text format): db_copy_begin runs sql, db_copy_put
 * sends bytes, db_copy_end finishes (0 or ERR_DB). SQLite: ERR_DB. */
int db_copy_begin(db_conn *c, const char *sql);
int db_copy_put(db_conn *c, const void *p, size_t n);
int db_copy_end(db_conn *c);

#endif
