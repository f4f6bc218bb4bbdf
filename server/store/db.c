/* db.c: db.h on SQLite and on PostgreSQL (libpq). The two backends share nothing but
 * this file's switch on db_kind; everything PostgreSQL-specific is the pg_* half. */
#include "store/db.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/logfmt.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG_MAX_PARAMS 64
#define PG_CACHE 512 /* prepared statements kept per connection; past it, unnamed ones */

typedef struct pg_prepared {
    char *sql;     /* the SQLite-placeholder text, the cache key */
    char *pgsql;   /* the translated text, kept to prepare it again on a new session */
    char name[16]; /* "fp<n>", or "" for an unnamed statement */
    int nparams;   /* the highest $n in the translated text */
    int epoch;     /* the connection's epoch it was prepared in (pg_reconnect) */
    int retry;     /* a read (or BEGIN): safe to run again on a new connection */
    unsigned char used[PG_MAX_PARAMS]; /* 1: $n+1 appears in the text */
} pg_prepared;

struct db_conn {
    db_kind kind;
    sqlite3 *lite;
    PGconn *pg;
    pg_prepared *cache; /* PG_CACHE entries, open addressing on the SQL text's hash */
    int ncached;
    long long changes;  /* PostgreSQL: rows of the last command */
    int epoch;          /* bumped by each reconnection: statements prepared before are gone */
    int broken;         /* the connection was lost inside a transaction: never pooled again */
    char sqlstate[6];   /* PostgreSQL: the SQLSTATE of the last failed statement, "" after a success */
    char setup[160];    /* the session's SETs, run again after a reconnection */
    char err[512];
};

struct db_stmt {
    db_conn *c;
    sqlite3_stmt *lite;
    /* PostgreSQL */
    pg_prepared *p;
    pg_prepared own;                 /* an unnamed statement's description */
    char *vals[PG_MAX_PARAMS];       /* parameter values, owned (NULL: SQL NULL) */
    int lens[PG_MAX_PARAMS], fmts[PG_MAX_PARAMS];
    PGresult *res;                   /* the whole result, after the first step */
    int row, nrows;
    unsigned char *blob;             /* the last blob column decoded: column blob_col of row blob_row */
    size_t blob_len;
    int blob_col, blob_row;
    int ran;
};

int db_uri_is_pg(const char *uri) {
    if (!uri) return 0;
    if (!strncmp(uri, "postgresql://", 13) || !strncmp(uri, "postgres://", 11)) return 1;
    /* A libpq conninfo is key=value pairs; a file path with '=' and a space is not likely. */
    return strchr(uri, '=') && (strstr(uri, "dbname") || strstr(uri, "host") || strstr(uri, "service"));
}

static void set_err(db_conn *c, const char *msg) {
    snprintf(c->err, sizeof c->err, "%s", msg ? msg : "?");
    size_t n = strlen(c->err);
    while (n && (c->err[n - 1] == '\n' || c->err[n - 1] == ' ')) c->err[--n] = '\0';
}

/* A failed PostgreSQL statement is logged with its message: the reply says only
 * "database_error", and the operator needs to know whether the database went away. */
static void log_err(db_conn *c, const char *what) {
    char q[600];
    log_line("error", "database error", "backend=postgresql op=%s error=%s", what, logfmt_quote(c->err, q, sizeof q));
}

/* ---- opening ---- */

static db_conn *lite_open(const char *path, char *err, size_t errlen) {
    db_conn *c = calloc(1, sizeof *c);
    if (!c) return snprintf(err, errlen, "out of memory"), NULL;
    c->kind = DB_SQLITE;
    if (sqlite3_open_v2(path, &c->lite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        if (err) snprintf(err, errlen, "cannot open %s: %s", path, c->lite ? sqlite3_errmsg(c->lite) : "out of memory");
        goto fail;
    }
    /* WAL: readers never block the writer; NORMAL sync is durable across process
     * crashes (what the SIGKILL test checks), losing at most the last commit on power loss. */
    const char *setup =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        /* journal_size_limit: SQLite reuses a WAL from its start without shrinking it, so the
         * -wal stayed the size of the largest upload for ever (issue 22); with it, a WAL that
         * restarts is cut back to 16 MiB (and loader_free truncates it after a big upload). */
        "PRAGMA journal_size_limit=16777216;"
        /* secure_delete=FAST: Debian's SQLite is built with SECURE_DELETE, which zeroes every
         * page a delete frees, so the delete wrote the whole session again into the WAL
         * first: on a full disk the 8 MiB reserve did not cover one 10 MB session, and every
         * DELETE answered 507 for good (issue 43). FAST zeroes deleted content only on pages
         * written anyway; freed pages keep their bytes until reused (SECURITY.md). */
        "PRAGMA secure_delete=FAST;"
        "PRAGMA temp_store=FILE;";
    char *msg = NULL;
    if (sqlite3_exec(c->lite, setup, NULL, NULL, &msg) != SQLITE_OK) {
        if (err) snprintf(err, errlen, "cannot set up %s: %s", path, msg ? msg : "?");
        sqlite3_free(msg);
        goto fail;
    }
    sqlite3_busy_timeout(c->lite, DB_BUSY_TIMEOUT_MS);
    return c;
fail:
    sqlite3_close(c->lite);
    free(c);
    return NULL;
}

/* Timeouts: a replica must not hang on a database that went away. connect_timeout
 * comes from the URI when it says one (libpq's own keyword), else 5 s; statements are
 * limited to FIRSTPASS_PG_STATEMENT_TIMEOUT_MS (default 60 s: a big upload's COPY). */
static db_conn *pg_open(const char *uri, char *err, size_t errlen) {
    db_conn *c = calloc(1, sizeof *c);
    if (!c || !(c->cache = calloc(PG_CACHE, sizeof *c->cache))) {
        free(c);
        return snprintf(err, errlen, "out of memory"), NULL;
    }
    c->kind = DB_PG;
    const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *vals[] = {uri, strstr(uri, "connect_timeout") ? NULL : "5", "firstpass-server", NULL};
    if (!vals[1]) keys[1] = "application_name", vals[1] = "firstpass-server", keys[2] = NULL;
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
        if (err) snprintf(err, errlen, "cannot connect to PostgreSQL: %s", c->pg ? PQerrorMessage(c->pg) : "out of memory");
        if (err) { size_t n = strlen(err); while (n && err[n - 1] == '\n') err[--n] = '\0'; }
        PQfinish(c->pg);
        free(c->cache);
        free(c);
        return NULL;
    }
    const char *t = getenv("FIRSTPASS_PG_STATEMENT_TIMEOUT_MS");
    snprintf(c->setup, sizeof c->setup, "SET statement_timeout = %ld; SET client_min_messages = warning; SET extra_float_digits = 1",
             t && *t ? strtol(t, NULL, 10) : 60000L);
    if (db_exec(c, c->setup)) {
        if (err) snprintf(err, errlen, "cannot set up the PostgreSQL session: %s", c->err);
        db_close(c);
        return NULL;
    }
    return c;
}

db_conn *db_open(const char *uri, char *err, size_t errlen) {
    return db_uri_is_pg(uri) ? pg_open(uri, err, errlen) : lite_open(uri, err, errlen);
}

void db_close(db_conn *c) {
    if (!c) return;
    if (c->kind == DB_SQLITE) sqlite3_close(c->lite);
    else {
        PQfinish(c->pg);
        for (int i = 0; i < PG_CACHE; i++) free(c->cache[i].sql), free(c->cache[i].pgsql);
        free(c->cache);
    }
    free(c);
}

db_kind db_kind_of(const db_conn *c) { return c->kind; }
struct sqlite3 *db_sqlite(db_conn *c) { return c->kind == DB_SQLITE ? c->lite : NULL; }

const char *db_errmsg(db_conn *c) { return c->kind == DB_SQLITE ? sqlite3_errmsg(c->lite) : c->err; }

int db_alive(db_conn *c) { return c->kind == DB_SQLITE || (!c->broken && PQstatus(c->pg) == CONNECTION_OK); }

int db_in_tx(db_conn *c) {
    if (c->kind == DB_SQLITE) return !sqlite3_get_autocommit(c->lite);
    return PQtransactionStatus(c->pg) != PQTRANS_IDLE && PQtransactionStatus(c->pg) != PQTRANS_UNKNOWN;
}

/* ---- a connection that broke ---- */

/* A pooled connection whose server went away (a restart, a failover, a network cut) is
 * only found out when it is next used: the statement fails with the server's FATAL
 * (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now), a class 08
 * connection error, or libpq's "server closed the connection unexpectedly". The first
 * request after a PostgreSQL restart got a 500 from that. Now db.c reconnects (PQreset)
 * and runs the statement once more, where that is safe: the connection was idle (outside a
 * transaction, so nothing of the caller's is lost) and the statement is a read, a SET or a
 * BEGIN (running it twice does no harm). A write, or anything inside a transaction, fails
 * with the connection marked broken (db_alive 0): the transaction is gone, the caller
 * answers 503 database_unreachable (store_fail) and the pool drops the connection. */
static int pg_broken(db_conn *c, const PGresult *r) {
    if (PQstatus(c->pg) == CONNECTION_BAD) return 1;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!st) return !r; /* no result at all: the connection failed under it */
    return !strncmp(st, "08", 2) || !strcmp(st, "57P01") || !strcmp(st, "57P02") || !strcmp(st, "57P03");
}

/* 1 when running sql again on a new connection is harmless: a SELECT (a read; nextval and
 * the advisory locks only take another value or a lock the dead session gave back), VALUES,
 * SHOW, SET, BEGIN. */
static int pg_retryable(const char *sql) {
    static const char *const ok[] = {"SELECT", "VALUES", "SHOW", "SET", "BEGIN", NULL};
    while (*sql == ' ' || *sql == '\n' || *sql == '(') sql++;
    for (int i = 0; ok[i]; i++) {
        size_t n = strlen(ok[i]);
        if (!strncasecmp(sql, ok[i], n) && (sql[n] == ' ' || sql[n] == '\0' || sql[n] == '\n' || sql[n] == ';')) return 1;
    }
    return 0;
}

/* A new session on c's connection parameters: 0, or ERR_DB with c->err set. Statements
 * prepared on the old one are prepared again when next run (pg_send, by epoch). */
static int pg_reconnect(db_conn *c) {
    PQreset(c->pg);
    c->epoch++;
    if (PQstatus(c->pg) != CONNECTION_OK) {
        set_err(c, PQerrorMessage(c->pg));
        log_err(c, "reconnect");
        return c->broken = 1, ERR_DB;
    }
    c->broken = 0;
    PGresult *r = PQexec(c->pg, c->setup);
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) set_err(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    PQclear(r);
    if (ok) log_line("info", "database reconnected", "backend=postgresql");
    return ok ? 0 : ERR_DB;
}

/* After a failed statement r (not cleared), run while the connection was idle when
 * `idle`: 1 when the caller should run it once more on the new connection made here. */
static int pg_should_retry(db_conn *c, const PGresult *r, int idle, int retryable) {
    if (!pg_broken(c, r)) return 0;
    set_err(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    if (!*c->err) set_err(c, PQerrorMessage(c->pg));
    log_line("warn", "database connection lost", "backend=postgresql retry=%s", idle && retryable ? "yes" : "no");
    /* not retried: the transaction (or the write's outcome) is lost whatever the
     * connection does now; db_alive says 0 so that the pool closes it */
    if (!idle || !retryable) return c->broken = 1, 0;
    return pg_reconnect(c) == 0;
}

static int pg_idle(db_conn *c) { return PQtransactionStatus(c->pg) == PQTRANS_IDLE; }

static int pg_ok(const PGresult *r) {
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_COPY_IN;
}

/* ---- statements without parameters ---- */

/* Keeps r's SQLSTATE (db_fk_violation), "" for a success. */
static void pg_note_state(db_conn *c, const PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    snprintf(c->sqlstate, sizeof c->sqlstate, "%s", st ? st : "");
}

/* 0 when r is a success; else ERR_DB with its message kept. Clears r. */
static int pg_check(db_conn *c, PGresult *r) {
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_COPY_IN;
    pg_note_state(c, r);
    if (!ok) set_err(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg)), log_err(c, "exec");
    else c->changes = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return ok ? 0 : ERR_DB;
}

int db_exec(db_conn *c, const char *sql) {
    if (c->kind == DB_SQLITE) return sqlite3_exec(c->lite, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : ERR_DB;
    /* PQexec runs several statements; the last result tells, earlier errors stop it. */
    int idle = pg_idle(c);
    PGresult *r = PQexec(c->pg, sql);
    if (!pg_ok(r) && pg_should_retry(c, r, idle, pg_retryable(sql))) {
        PQclear(r);
        r = PQexec(c->pg, sql);
    }
    return pg_check(c, r);
}

int db_begin_write(db_conn *c) { return db_exec(c, c->kind == DB_SQLITE ? "BEGIN IMMEDIATE" : "BEGIN"); }
int db_begin_read(db_conn *c) { return db_exec(c, c->kind == DB_SQLITE ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); }

int db_in_txn(db_conn *c) {
    if (c->kind == DB_SQLITE) return !sqlite3_get_autocommit(c->lite);
    return PQtransactionStatus(c->pg) != PQTRANS_IDLE;
}

int db_fk_violation(db_conn *c) {
    if (c->kind == DB_SQLITE) return sqlite3_extended_errcode(c->lite) == SQLITE_CONSTRAINT_FOREIGNKEY;
    return !strcmp(c->sqlstate, "23503");
}


long long db_changes(db_conn *c) { return c->kind == DB_SQLITE ? sqlite3_changes(c->lite) : c->changes; }

/* ---- PostgreSQL statements ---- */

/* SQLite placeholders to PostgreSQL's: ?NNN keeps its number, a bare ? takes the next
 * one; quoted text ('...', "...") is copied as is. The highest number goes to *nparams. */
static char *pg_translate(const char *sql, int *nparams, unsigned char *used) {
    size_t n = strlen(sql);
    char *out = malloc(n * 4 + 1), *o = out;
    if (!out) return NULL;
    int next = 0, hi = 0;
    char quote = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
            *o++ = *p;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
            *o++ = *p;
        } else if (*p == '?') {
            int k;
            if (p[1] >= '0' && p[1] <= '9') {
                k = (int)strtol(p + 1, (char **)&p, 10);
                p--;
            } else
                k = next + 1;
            next = k;
            if (k > hi) hi = k;
            if (k >= 1 && k <= PG_MAX_PARAMS) used[k - 1] = 1;
            o += sprintf(o, "$%d", k);
        } else
            *o++ = *p;
    }
    *o = '\0';
    *nparams = hi;
    return out;
}

static unsigned long hash_str(const char *s) {
    unsigned long h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h;
}

/* PQprepare of e on c's session. A parameter the text never names (a statement built
 * without one of its filters) has no type to infer: PostgreSQL refuses it unless told
 * one; text is as good as any. */
static PGresult *pg_prepare(db_conn *c, const pg_prepared *e) {
    Oid types[PG_MAX_PARAMS] = {0};
    for (int i = 0; i < e->nparams; i++) types[i] = e->used[i] ? 0 : 25 /* TEXTOID */;
    return PQprepare(c->pg, e->name, e->pgsql, e->nparams, types);
}

/* The prepared statement for sql on c: from the cache, or prepared now while the cache
 * has room; past it, *own describes a statement sent whole each time. NULL with c->err set. */
static pg_prepared *pg_lookup(db_conn *c, const char *sql, const char *text, pg_prepared *own) {
    /* sql is the cache key, text what runs (the same string today) */
    unsigned long h = hash_str(sql);
    pg_prepared *slot = NULL;
    for (int i = 0; i < PG_CACHE; i++) {
        pg_prepared *e = &c->cache[(h + (unsigned long)i) % PG_CACHE];
        if (!e->sql) { slot = e; break; }
        if (!strcmp(e->sql, sql)) return e;
    }
    if (slot && c->ncached >= PG_CACHE * 3 / 4) slot = NULL;
    int np = 0;
    unsigned char used[PG_MAX_PARAMS] = {0};
    char *pgsql = pg_translate(text, &np, used);
    if (!pgsql) return set_err(c, "out of memory"), NULL;
    if (np > PG_MAX_PARAMS) {
        free(pgsql);
        return set_err(c, "too many parameters"), NULL;
    }
    if (!slot) { /* run with PQexecParams each time (pg_run): own.sql is the translated text */
        memset(own, 0, sizeof *own);
        own->sql = pgsql;
        own->nparams = np;
        own->retry = pg_retryable(text);
        memcpy(own->used, used, sizeof used);
        return own;
    }
    pg_prepared *e = slot;
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "fp%d", c->ncached);
    e->nparams = np;
    e->retry = pg_retryable(text);
    memcpy(e->used, used, sizeof used);
    e->pgsql = pgsql;
    /* preparing has no effect but on this session: on a connection found dead, prepared again */
    int idle = pg_idle(c);
    PGresult *r = pg_prepare(c, e);
    if (!pg_ok(r) && pg_should_retry(c, r, idle, 1)) {
        PQclear(r);
        r = pg_prepare(c, e);
    }
    if (pg_check(c, r) || !(e->sql = strdup(sql))) {
        if (!*c->err) set_err(c, "out of memory");
        free(e->pgsql);
        memset(e, 0, sizeof *e);
        return NULL;
    }
    e->epoch = c->epoch;
    c->ncached++;
    return e;
}

static void pg_clear_result(db_stmt *s) {
    PQclear(s->res);
    s->res = NULL;
    s->ran = 0;
    s->row = s->nrows = 0;
    free(s->blob);
    s->blob = NULL;
}

static void pg_set(db_stmt *s, int i, char *v, int len, int fmt) {
    if (i < 1 || i > PG_MAX_PARAMS) { free(v); return; }
    free(s->vals[i - 1]);
    s->vals[i - 1] = v;
    s->lens[i - 1] = len;
    s->fmts[i - 1] = fmt;
}

/* Runs p (s->p; own: its unnamed alternative) once with s's parameters,
 * preparing it first on a session that does not have it yet (after a reconnection). */
static PGresult *pg_send(db_stmt *s, pg_prepared *p, const pg_prepared *own) {
    db_conn *c = s->c;
    const char *const *v = (const char *const *)s->vals;
    if (p != own && p->epoch != c->epoch) {
        PGresult *r = pg_prepare(c, p);
        if (!pg_ok(r)) return r;
        PQclear(r);
        p->epoch = c->epoch;
    }
    Oid types[PG_MAX_PARAMS] = {0};
    for (int i = 0; i < own->nparams; i++) types[i] = own->used[i] ? 0 : 25 /* TEXTOID: see pg_prepare */;
    return p == own ? PQexecParams(c->pg, own->sql, own->nparams, types, v, s->lens, s->fmts, 0)
                    : PQexecPrepared(c->pg, p->name, p->nparams, v, s->lens, s->fmts, 0);
}

/* Runs p with s's parameters, once more on a new connection when the old one turned out
 * dead and that is safe (pg_should_retry): its result, or NULL with c->err set. */
static PGresult *pg_exec_stmt(db_stmt *s, pg_prepared *p, const pg_prepared *own) {
    db_conn *c = s->c;
    int idle = pg_idle(c);
    PGresult *r = pg_send(s, p, own);
    if (!pg_ok(r) && pg_should_retry(c, r, idle, p->retry)) {
        PQclear(r);
        r = pg_send(s, p, own);
    }
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    pg_note_state(c, r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        set_err(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
        log_err(c, "query");
        PQclear(r);
        return NULL;
    }
    return r;
}

/* Runs the statement once; its whole result is kept for the steps. */
static int pg_run(db_stmt *s) {
    db_conn *c = s->c;
    PGresult *r = pg_exec_stmt(s, s->p, &s->own);
    if (!r) return ERR_DB;
    c->changes = strtoll(PQcmdTuples(r), NULL, 10);
    s->res = r;
    s->nrows = PQntuples(r);
    s->row = -1;
    s->ran = 1;
    return 0;
}

/* ---- statements ---- */

db_stmt *db_prepare(db_conn *c, const char *sql) { return db_prepare2(c, sql, sql); }

db_stmt *db_prepare2(db_conn *c, const char *sqlite_sql, const char *pg_sql) {
    if (c->kind == DB_PG) {
        db_stmt *s = calloc(1, sizeof *s);
        if (!s) return set_err(c, "out of memory"), NULL;
        s->c = c;
        /* the PostgreSQL text is the key: two SQLite texts may share one */
        s->p = pg_lookup(c, pg_sql, pg_sql, &s->own);
        if (!s->p) return free(s), NULL;
        return s;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->lite, sqlite_sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    db_stmt *s = calloc(1, sizeof *s);
    if (!s) { sqlite3_finalize(st); return NULL; }
    s->c = c;
    s->lite = st;
    return s;
}

void db_bind_int64(db_stmt *s, int i, long long v) {
    if (s->lite) { sqlite3_bind_int64(s->lite, i, v); return; }
    char b[24];
    snprintf(b, sizeof b, "%lld", v);
    pg_set(s, i, strdup(b), 0, 0);
}

void db_bind_double(db_stmt *s, int i, double v) {
    if (s->lite) { sqlite3_bind_double(s->lite, i, v); return; }
    char b[40];
    if (v != v) snprintf(b, sizeof b, "NaN");
    else if (v > 1e308 * 10) snprintf(b, sizeof b, "Infinity");
    else if (v < -1e308 * 10) snprintf(b, sizeof b, "-Infinity");
    else snprintf(b, sizeof b, "%.17g", v);
    pg_set(s, i, strdup(b), 0, 0);
}

void db_bind_text(db_stmt *s, int i, const char *v) {
    if (s->lite) {
        if (v) sqlite3_bind_text(s->lite, i, v, -1, SQLITE_STATIC);
        else sqlite3_bind_null(s->lite, i);
        return;
    }
    pg_set(s, i, v ? strdup(v) : NULL, 0, 0);
}

void db_bind_blob(db_stmt *s, int i, const void *p, size_t n) {
    if (s->lite) { sqlite3_bind_blob64(s->lite, i, p, n, SQLITE_STATIC); return; }
    char *v = malloc(n ? n : 1);
    if (v) memcpy(v, p, n);
    pg_set(s, i, v, (int)n, 1);
}

void db_bind_null(db_stmt *s, int i) {
    if (s->lite) sqlite3_bind_null(s->lite, i);
    else pg_set(s, i, NULL, 0, 0);
}

int db_step(db_stmt *s) {
    if (s->lite) {
        int rc = sqlite3_step(s->lite);
        return rc == SQLITE_ROW ? DB_ROW : rc == SQLITE_DONE ? DB_DONE : ERR_DB;
    }
    if (!s->ran && pg_run(s)) return ERR_DB;
    free(s->blob);
    s->blob = NULL;
    if (s->row + 1 < s->nrows) {
        s->row++;
        return DB_ROW;
    }
    s->row = s->nrows;
    return DB_DONE;
}

void db_reset(db_stmt *s) {
    if (s->lite) sqlite3_reset(s->lite);
    else pg_clear_result(s);
}

void db_clear_bindings(db_stmt *s) {
    if (s->lite) { sqlite3_clear_bindings(s->lite); return; }
    for (int i = 0; i < PG_MAX_PARAMS; i++) {
        free(s->vals[i]);
        s->vals[i] = NULL;
        s->fmts[i] = 0;
    }
}

void db_finalize(db_stmt *s) {
    if (!s) return;
    if (s->lite) sqlite3_finalize(s->lite);
    else {
        pg_clear_result(s);
        db_clear_bindings(s);
        if (s->p == &s->own) free(s->own.sql);
    }
    free(s);
}

/* ---- columns ---- */

/* The text of column i of the current row, or NULL (SQL NULL, or no row). */
static const char *pg_val(db_stmt *s, int i) {
    if (!s->res || s->row < 0 || s->row >= s->nrows || i >= PQnfields(s->res) || PQgetisnull(s->res, s->row, i)) return NULL;
    return PQgetvalue(s->res, s->row, i);
}

#define BOOLOID 16

int db_column_is_null(db_stmt *s, int i) {
    if (s->lite) return sqlite3_column_type(s->lite, i) == SQLITE_NULL;
    return pg_val(s, i) == NULL;
}

long long db_column_int64(db_stmt *s, int i) {
    if (s->lite) return sqlite3_column_int64(s->lite, i);
    const char *v = pg_val(s, i);
    if (!v) return 0;
    if (PQftype(s->res, i) == BOOLOID) return *v == 't';
    /* numeric (a SUM of bigints) or float text reads as its integer part, like SQLite */
    if (strpbrk(v, ".eE")) return (long long)strtod(v, NULL);
    return strtoll(v, NULL, 10);
}

int db_column_int(db_stmt *s, int i) { return (int)db_column_int64(s, i); }

double db_column_double(db_stmt *s, int i) {
    if (s->lite) return sqlite3_column_double(s->lite, i);
    const char *v = pg_val(s, i);
    if (!v) return 0;
    if (PQftype(s->res, i) == BOOLOID) return *v == 't';
    return strtod(v, NULL);
}

const char *db_column_text(db_stmt *s, int i) {
    if (s->lite) return (const char *)sqlite3_column_text(s->lite, i);
    return pg_val(s, i);
}

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static const void *pg_blob(db_stmt *s, int i, size_t *n);

const void *db_column_blob(db_stmt *s, int i, size_t *n) {
    size_t dummy;
    if (!n) n = &dummy;
    if (s->lite) {
        const void *p = sqlite3_column_blob(s->lite, i);
        *n = (size_t)sqlite3_column_bytes(s->lite, i);
        return p;
    }
    if (s->blob && s->blob_col == i && s->blob_row == s->row) return *n = s->blob_len, s->blob;
    const void *p = pg_blob(s, i, n);
    if (p) s->blob_col = i, s->blob_row = s->row, s->blob_len = *n;
    return p;
}

size_t db_column_bytes(db_stmt *s, int i) {
    if (s->lite) return (size_t)sqlite3_column_bytes(s->lite, i);
    size_t n = 0;
    db_column_blob(s, i, &n);
    return n;
}

static const void *pg_blob(db_stmt *s, int i, size_t *n) {
    const char *v = pg_val(s, i);
    *n = 0;
    if (!v) return NULL;
    size_t len = (size_t)PQgetlength(s->res, s->row, i);
    free(s->blob);
    /* bytea_output = hex (the default since 9.0): "\x" then two digits a byte */
    if (len < 2 || v[0] != '\\' || v[1] != 'x') {
        s->blob = malloc(len ? len : 1);
        if (s->blob) memcpy(s->blob, v, len), *n = len;
        return s->blob;
    }
    size_t m = (len - 2) / 2;
    s->blob = malloc(m ? m : 1);
    if (!s->blob) return NULL;
    for (size_t k = 0; k < m; k++) {
        int a = hexval(v[2 + 2 * k]), b = hexval(v[3 + 2 * k]);
        if (a < 0 || b < 0) return *n = 0, NULL;
        s->blob[k] = (unsigned char)(a << 4 | b);
    }
    *n = m;
    return s->blob;
}

/* ---- COPY ---- */

int db_copy_begin(db_conn *c, const char *sql) {
    if (c->kind != DB_PG) return ERR_DB;
    PGresult *r = PQexec(c->pg, sql);
    int ok = r && PQresultStatus(r) == PGRES_COPY_IN;
    if (!ok) set_err(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    PQclear(r);
    return ok ? 0 : ERR_DB;
}

int db_copy_put(db_conn *c, const void *p, size_t n) {
    if (PQputCopyData(c->pg, p, (int)n) == 1) return 0;
    set_err(c, PQerrorMessage(c->pg));
    return ERR_DB;
}

int db_copy_end(db_conn *c) {
    if (PQputCopyEnd(c->pg, NULL) != 1) return set_err(c, PQerrorMessage(c->pg)), ERR_DB;
    int rc = 0;
    PGresult *r;
    while ((r = PQgetResult(c->pg))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            set_err(c, PQresultErrorMessage(r));
            rc = ERR_DB;
        }
        PQclear(r);
    }
    return rc;
}
