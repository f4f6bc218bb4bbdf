/* commit.c: store_commit_session (commit.h). Owns the SQL that writes a new session. */
#include "store/commit.h"
#include "store/db.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "store/store.h"
#include "store/strtab.h"

static int exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : ERR_DB; }

/* Steps s once (an INSERT or UPDATE) and resets it: 0 or ERR_DB. */
static int step_once(sqlite3_stmt *s) {
    int ok = sqlite3_step(s) == SQLITE_DONE;
    sqlite3_reset(s);
    return ok ? 0 : ERR_DB;
}

/* The sessions row; its name "session <id>" when none was given. */
static int insert_session(sqlite3 *db, const store_session_in *in, const char *meta, const char *summary, long long *id) {
    sqlite3_stmt *s = NULL;
    int rc = ERR_DB;
    if (sqlite3_prepare_v2(db, "INSERT INTO sessions(name,source,created_at,start_us,end_us,event_count,hardware,bytes_in,meta,summary,"
                               "analysis_version,idempotency_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK) goto out;
    sqlite3_bind_text(s, 1, in->name ? in->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, in->source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (long long)time(NULL));
    sqlite3_bind_double(s, 4, in->start_us);
    sqlite3_bind_double(s, 5, in->end_us);
    sqlite3_bind_int64(s, 6, in->events);
    sqlite3_bind_text(s, 7, in->hardware, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 8, (long long)in->bytes_in);
    sqlite3_bind_text(s, 9, meta, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 10, summary, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 11, in->analysis_version);
    if (in->idempotency_key) sqlite3_bind_text(s, 12, in->idempotency_key, -1, SQLITE_STATIC);
    if (step_once(s)) goto out;
    sqlite3_finalize(s);
    s = NULL;
    *id = sqlite3_last_insert_rowid(db);
    if (!in->name || !*in->name) { /* a session always has a name a person can read */
        char dflt[64];
        snprintf(dflt, sizeof dflt, "session %lld", *id);
        if (sqlite3_prepare_v2(db, "UPDATE sessions SET name=? WHERE id=?", -1, &s, NULL) != SQLITE_OK) goto out;
        sqlite3_bind_text(s, 1, dflt, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, *id);
        if (step_once(s)) goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(s);
    return rc;
}

static int insert_labels(sqlite3 *db, const store_session_in *in, long long id) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO labels(session_id,key,value) VALUES (?,?,?) "
                               "ON CONFLICT(session_id,key) DO UPDATE SET value=excluded.value", -1, &s, NULL) != SQLITE_OK)
        return ERR_DB;
    int rc = 0;
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0; i < in->nlabels[pass] && !rc; i++) {
            sqlite3_bind_int64(s, 1, id);
            sqlite3_bind_text(s, 2, in->labels[pass][i].key, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 3, in->labels[pass][i].value, -1, SQLITE_STATIC);
            rc = step_once(s);
        }
    sqlite3_finalize(s);
    return rc;
}

/* The string table in one statement (strtab.h). */
static int insert_strings(sqlite3 *db, const store_session_in *in, long long id) {
    sqlite3_stmt *s = NULL;
    if (strtab_register(db) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO strings(session_id,id,s) SELECT ?1, id, s FROM fp_strings(?2) ORDER BY id", -1, &s, NULL) != SQLITE_OK)
        return ERR_DB;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_pointer(s, 2, (void *)in->strings, STRTAB_POINTER, NULL);
    int rc = step_once(s);
    sqlite3_finalize(s);
    return rc;
}

/* The columns of operator_rows after session_id, as wscratch.op_rows and kscratch.gpu_ops
 * hold them (analysis/scratch.sql). */
#define OP_COLS                                                                                     \
    "grouping, name_id, kind, shapes_id, calls, cpu_total, self_cpu, cuda_total, self_cuda, cpu_mem, " \
    "self_cpu_mem, cuda_mem, self_cuda_mem"

/* The analysis left its tables in scratch; one INSERT ... SELECT each. */
static int copy_scratch(sqlite3 *db, long long id) {
    static const char *const copies[] = {
        /* in rowid order, the walk's rows then the GPU rows (scratch.sql): equal rows of a
         * sort list in the upload's order (query.c) */
        "INSERT INTO operator_rows SELECT ?1, " OP_COLS " FROM wscratch.op_rows ORDER BY rowid",
        "INSERT INTO operator_rows SELECT ?1, " OP_COLS " FROM kscratch.gpu_ops ORDER BY rowid",
        "INSERT INTO kernel_rows SELECT ?1, name_id, kind, calls, total_us, min_us, max_us, grid_id, block_id, regs, smem, mean_bps,"
        " mean_occ, mean_sme FROM kscratch.kern",
        "INSERT INTO phase_rows SELECT ?1, name_id, kind, count, total_us, gpu_busy_us, kernels, kernel_us, first_ts FROM wscratch.ph",
        ("INSERT INTO event_chunks(session_id, track, seq, n, min_ts, max_end, data, drawn, gpu)"
         " SELECT ?1, track, seq, n, min_ts, max_end, data, drawn, gpu FROM scratch.chunks"),
        "INSERT INTO timeline_buckets SELECT ?1, track, data FROM wscratch.tlb",
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, copies[i], -1, &s, NULL) != SQLITE_OK) return ERR_DB;
        sqlite3_bind_int64(s, 1, id);
        int rc = step_once(s);
        sqlite3_finalize(s);
        if (rc) return rc;
    }
    return 0;
}

#define ANALYSIS_INSERT "INSERT INTO analysis(session_id,gpu,report,timeline,effic,steps,step_count,step_mean_us,step_sd_us)" \
                        " VALUES (?,?,?,?,?,?,?,?,?)"

static int insert_analysis(sqlite3 *db, const store_session_in *in, long long id) {
    sqlite3_stmt *s = NULL;
    char *g = json_dumps(in->gpu, JSON_COMPACT), *r = json_dumps(in->report, JSON_COMPACT), *t = json_dumps(in->timeline, JSON_COMPACT);
    char *e = in->effic ? json_dumps(in->effic, JSON_COMPACT) : NULL, *st = in->steps ? json_dumps(in->steps, JSON_COMPACT) : NULL;
    int rc = g && r && t && (e || !in->effic) && (st || !in->steps) ? 0 : ERR_NOMEM;
    if (!rc && sqlite3_prepare_v2(db, ANALYSIS_INSERT, -1, &s, NULL) != SQLITE_OK) rc = ERR_DB;
    if (!rc) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_text(s, 2, g, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, r, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, t, -1, SQLITE_STATIC);
        if (e) sqlite3_bind_text(s, 5, e, -1, SQLITE_STATIC);
        if (st) sqlite3_bind_text(s, 6, st, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 7, in->step_count);
        sqlite3_bind_double(s, 8, in->step_mean_us);
        sqlite3_bind_double(s, 9, in->step_sd_us);
        rc = step_once(s);
    }
    sqlite3_finalize(s);
    free(g);
    free(r);
    free(t);
    free(e);
    free(st);
    return rc;
}

/* The upload's claim of its Idempotency-Key (idem.h) ends with the session that now holds
 * the key, in its transaction. */
static int drop_claim(sqlite3 *db, const store_session_in *in) {
    if (!in->idempotency_key) return 0;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "DELETE FROM upload_claims WHERE key = ?", -1, &s, NULL) != SQLITE_OK) return ERR_DB;
    sqlite3_bind_text(s, 1, in->idempotency_key, -1, SQLITE_STATIC);
    int rc = step_once(s);
    sqlite3_finalize(s);
    return rc;
}

/* The replay row (schema.sql): the events' upload order, an nsys export's bandwidths. */
static int insert_replay(sqlite3 *db, const store_session_in *in, long long id) {
    if (!in->runs) return 0;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO replay(session_id,tracks,events,gpu_bw,identity) VALUES (?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
        return ERR_DB;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_blob(s, 2, in->runs, (int)in->runs_len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (long long)in->runs_events);
    if (in->gpu_bw) sqlite3_bind_text(s, 4, in->gpu_bw, -1, SQLITE_STATIC);
    if (in->identity) sqlite3_bind_text(s, 5, in->identity, -1, SQLITE_STATIC);
    int rc = step_once(s);
    sqlite3_finalize(s);
    return rc;
}

/* One integer a statement gives (a PRAGMA), or -1. */
static long long pragma_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Inside the write transaction, before its COMMIT: 0 when the disk has room for what the
 * checkpoint will add to the database file, else ERR_FULL (or the error of writing the WAL).
 *
 * Why: a commit lands in the WAL, and reaches the database file at the next checkpoint. An
 * upload whose WAL frames fitted but whose pages grew the file past the free space was
 * committed (201), and then no checkpoint could finish: the WAL could not be emptied or
 * restarted, so every later write, a DELETE too, needed new space and answered 507, restart
 * or not (issue 43). So the transaction's pages go to the WAL first (sqlite3_db_cacheflush:
 * what the COMMIT would write, less its last frame), and the file's growth, this transaction's
 * and any earlier one's not yet checkpointed, must fit in the space left, with 1 MiB beside.
 * The reserve (store.h) is not counted: it stays for deletes. */
static int room_to_checkpoint(sqlite3 *db, char *err, size_t errlen) {
    if (sqlite3_db_cacheflush(db) != SQLITE_OK) return store_errcode(db);
    long long pages = pragma_int(db, "PRAGMA main.page_count"), page = pragma_int(db, "PRAGMA main.page_size");
    const char *path = sqlite3_db_filename(db, "main");
    struct stat st;
    struct statvfs vs;
    if (pages < 0 || page <= 0 || !path || !*path || stat(path, &st) || statvfs(path, &vs)) return 0; /* cannot tell: SQLite will */
    long long grow = pages * page - (long long)st.st_size;
    unsigned long long avail = (unsigned long long)vs.f_bavail * vs.f_frsize;
    if (grow <= 0 || (unsigned long long)grow + (1ull << 20) <= avail) return 0;
    snprintf(err, errlen, "the disk is full: the session needs %.1f MB more of database file, %.1f MB are free; delete sessions to free space",
             (double)grow / 1e6, (double)avail / 1e6);
    return ERR_FULL;
}

/* Why foreign keys are off for this transaction: every row it writes names the session row
 * it inserted first (insert_session's id, bound as ?1 everywhere), and with them on, each row
 * looked its parent up: one seek per row, 100,000 kernel rows and as many operator rows and
 * strings on a many-names trace (about a third of their INSERTs' time, issue 24). The pragma
 * is per connection and does nothing inside a transaction: off before BEGIN, on again after
 * COMMIT or ROLLBACK, whatever happened, so this pooled connection's deletes still cascade. */
static int commit_sqlite(sqlite3 *db, const store_session_in *in, long long *id, char *err, size_t errlen) {
    char *meta = json_dumps(in->meta, JSON_COMPACT), *summary = json_dumps(in->summary, JSON_COMPACT);
    int rc = meta && summary ? 0 : ERR_NOMEM;
    if (!rc) rc = exec(db, "PRAGMA foreign_keys=OFF");
    if (!rc) rc = exec(db, "BEGIN IMMEDIATE");
    if (!rc) rc = insert_session(db, in, meta, summary, id);
    if (!rc) rc = insert_labels(db, in, *id);
    if (!rc) rc = insert_strings(db, in, *id);
    if (!rc) rc = copy_scratch(db, *id);
    if (!rc) rc = insert_analysis(db, in, *id);
    if (!rc) rc = insert_replay(db, in, *id);
    if (!rc) rc = drop_claim(db, in);
    err[0] = '\0';
    if (!rc) rc = room_to_checkpoint(db, err, errlen);
    if (!rc) rc = exec(db, "COMMIT");
    if (rc) {
        if (!err[0]) snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : sqlite3_errmsg(db));
        if (rc == ERR_DB) rc = store_errcode(db); /* a full disk is 507: deletes still free space */
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    sqlite3_exec(db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL); /* no I/O: cannot fail outside a transaction */
    /* What runs on this connection from here until store_scratch_put is the loader's WAL
     * truncation (ingest/load.c: loader_free), which holds the write lock while it waits
     * for readers: bounded like store_wal_truncate's (store.c says why). */
    sqlite3_busy_timeout(db, STORE_CHECKPOINT_WAIT_MS);
    free(meta);
    free(summary);
    return rc;
}

/* ---- PostgreSQL ---- */

/* One value of a COPY text row: \N for NULL, text with \, tab, newline and CR escaped,
 * a blob as \\x and hex (bytea's input form, its backslash escaped for COPY). */
static int copy_value(buf *b, sqlite3_stmt *q, int i) {
    switch (sqlite3_column_type(q, i)) {
    case SQLITE_NULL: return buf_puts(b, "\\N");
    case SQLITE_INTEGER: return buf_printf(b, "%lld", (long long)sqlite3_column_int64(q, i));
    case SQLITE_FLOAT: return buf_printf(b, "%.17g", sqlite3_column_double(q, i));
    case SQLITE_BLOB: {
        const unsigned char *p = sqlite3_column_blob(q, i);
        int n = sqlite3_column_bytes(q, i);
        static const char hex[] = "0123456789abcdef";
        if (buf_puts(b, "\\\\x")) return ERR_NOMEM;
        for (int k = 0; k < n; k++) {
            char two[2] = {hex[p[k] >> 4], hex[p[k] & 15]};
            if (buf_put(b, two, 2)) return ERR_NOMEM;
        }
        return 0;
    }
    default: {
        const char *t = (const char *)sqlite3_column_text(q, i);
        for (; t && *t; t++) {
            const char *esc = *t == '\\' ? "\\\\" : *t == '\t' ? "\\t" : *t == '\n' ? "\\n" : *t == '\r' ? "\\r" : NULL;
            if (esc ? buf_puts(b, esc) : buf_put(b, t, 1)) return ERR_NOMEM;
        }
        return 0;
    }
    }
}

/* COPY table FROM STDIN with the rows of a scratch query q, each prefixed with the session id:
 * one stream, no round trip a row (an upload's chunks and operators are thousands of rows).
 * Finalizes q. */
static int copy_stmt(db_conn *c, sqlite3_stmt *q, const char *copy_sql, long long id) {
    int rc = db_copy_begin(c, copy_sql), st = SQLITE_DONE;
    buf b = {0};
    int ncol = sqlite3_column_count(q);
    while (!rc && (st = sqlite3_step(q)) == SQLITE_ROW) {
        rc = buf_printf(&b, "%lld", id);
        for (int i = 0; i < ncol && !rc; i++) rc = buf_put(&b, "\t", 1) || copy_value(&b, q, i) ? ERR_NOMEM : 0;
        if (!rc) rc = buf_put(&b, "\n", 1) ? ERR_NOMEM : 0;
        if (!rc && b.len >= 1 << 20) {
            rc = db_copy_put(c, b.p, b.len);
            b.len = 0;
        }
    }
    if (!rc && st != SQLITE_DONE) rc = ERR_DB;
    if (!rc && b.len) rc = db_copy_put(c, b.p, b.len);
    /* ends the COPY whatever happened: the connection must leave COPY mode; the
     * transaction is rolled back by the caller on any error */
    int end = db_copy_end(c);
    if (!rc) rc = end;
    buf_free(&b);
    sqlite3_finalize(q);
    return rc;
}

/* copy_stmt of the scratch query select_sql. */
static int copy_rows(db_conn *c, sqlite3 *scratch, const char *copy_sql, const char *select_sql, long long id) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(scratch, select_sql, -1, &q, NULL) != SQLITE_OK) return ERR_DB;
    return copy_stmt(c, q, copy_sql, id);
}

static int pg_step_once(db_stmt *s) {
    int rc = db_step(s) == ERR_DB ? ERR_DB : 0;
    db_reset(s);
    return rc;
}

static int pg_insert_session(db_conn *c, const store_session_in *in, const char *meta, const char *summary, long long *id) {
    db_stmt *s = db_prepare(c, "INSERT INTO sessions(name,source,created_at,start_us,end_us,event_count,hardware,bytes_in,meta,summary,"
                               "analysis_version,idempotency_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, in->name ? in->name : "");
    db_bind_text(s, 2, in->source);
    db_bind_int64(s, 3, (long long)time(NULL));
    db_bind_double(s, 4, in->start_us);
    db_bind_double(s, 5, in->end_us);
    db_bind_int64(s, 6, in->events);
    db_bind_text(s, 7, in->hardware);
    db_bind_int64(s, 8, (long long)in->bytes_in);
    db_bind_text(s, 9, meta);
    db_bind_text(s, 10, summary);
    db_bind_int64(s, 11, in->analysis_version);
    if (in->idempotency_key) db_bind_text(s, 12, in->idempotency_key);
    else db_bind_null(s, 12);
    int rc = db_step(s) == DB_ROW ? 0 : ERR_DB;
    if (!rc) *id = db_column_int64(s, 0);
    db_finalize(s);
    if (!rc && (!in->name || !*in->name)) { /* a session always has a name a person can read */
        char dflt[64];
        snprintf(dflt, sizeof dflt, "session %lld", *id);
        s = db_prepare(c, "UPDATE sessions SET name=? WHERE id=?");
        if (!s) return ERR_DB;
        db_bind_text(s, 1, dflt);
        db_bind_int64(s, 2, *id);
        rc = pg_step_once(s);
        db_finalize(s);
    }
    return rc;
}

static int pg_insert_labels(db_conn *c, const store_session_in *in, long long id) {
    db_stmt *s = db_prepare(c, "INSERT INTO labels(session_id,key,value) VALUES (?,?,?) "
                               "ON CONFLICT(session_id,key) DO UPDATE SET value=excluded.value");
    if (!s) return ERR_DB;
    int rc = 0;
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0; i < in->nlabels[pass] && !rc; i++) {
            db_bind_int64(s, 1, id);
            db_bind_text(s, 2, in->labels[pass][i].key);
            db_bind_text(s, 3, in->labels[pass][i].value);
            rc = pg_step_once(s);
        }
    db_finalize(s);
    return rc;
}

/* The string table through COPY, read as a table (strtab.h). */
static int pg_insert_strings(db_conn *c, sqlite3 *scratch, const store_session_in *in, long long id) {
    sqlite3_stmt *q = NULL;
    if (strtab_register(scratch) != SQLITE_OK ||
        sqlite3_prepare_v2(scratch, "SELECT id, s FROM fp_strings(?) ORDER BY id", -1, &q, NULL) != SQLITE_OK)
        return ERR_DB;
    sqlite3_bind_pointer(q, 1, (void *)in->strings, STRTAB_POINTER, NULL);
    return copy_stmt(c, q, "COPY strings(session_id,id,s) FROM STDIN", id);
}

static int pg_copy_scratch(db_conn *c, sqlite3 *scratch, long long id) {
    static const char *const copies[][2] = {
        {"COPY operator_rows(session_id, " OP_COLS ", rn) FROM STDIN", "SELECT " OP_COLS ", rowid FROM wscratch.op_rows"},
        /* the GPU rows' rn after the walk's, as SQLite's rowids have them */
        {"COPY operator_rows(session_id, " OP_COLS ", rn) FROM STDIN",
         "SELECT " OP_COLS ", (SELECT IFNULL(MAX(rowid), 0) FROM wscratch.op_rows) + rowid FROM kscratch.gpu_ops"},
        {"COPY kernel_rows(session_id,name_id,kind,calls,total_us,min_us,max_us,grid_id,block_id,regs,smem,mean_bps,mean_occ,mean_sme)"
         " FROM STDIN",
         "SELECT name_id, kind, calls, total_us, min_us, max_us, grid_id, block_id, regs, smem, mean_bps, mean_occ, mean_sme"
         " FROM kscratch.kern"},
        {"COPY phase_rows(session_id,name_id,kind,count,total_us,gpu_busy_us,kernels,kernel_us,first_ts) FROM STDIN",
         "SELECT name_id, kind, count, total_us, gpu_busy_us, kernels, kernel_us, first_ts FROM wscratch.ph"},
        {"COPY event_chunks(session_id,track,seq,n,min_ts,max_end,data,drawn,gpu) FROM STDIN",
         "SELECT track, seq, n, min_ts, max_end, data, drawn, gpu FROM scratch.chunks"},
        {"COPY timeline_buckets(session_id,track,data) FROM STDIN", "SELECT track, data FROM wscratch.tlb"},
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        int rc = copy_rows(c, scratch, copies[i][0], copies[i][1], id);
        if (rc) return rc;
    }
    return 0;
}

static int pg_insert_analysis(db_conn *c, const store_session_in *in, long long id) {
    char *g = json_dumps(in->gpu, JSON_COMPACT), *r = json_dumps(in->report, JSON_COMPACT), *t = json_dumps(in->timeline, JSON_COMPACT);
    char *e = in->effic ? json_dumps(in->effic, JSON_COMPACT) : NULL, *st = in->steps ? json_dumps(in->steps, JSON_COMPACT) : NULL;
    int rc = g && r && t && (e || !in->effic) && (st || !in->steps) ? 0 : ERR_NOMEM;
    db_stmt *s = rc ? NULL : db_prepare(c, ANALYSIS_INSERT);
    if (!rc && !s) rc = ERR_DB;
    if (!rc) {
        db_bind_int64(s, 1, id);
        db_bind_text(s, 2, g);
        db_bind_text(s, 3, r);
        db_bind_text(s, 4, t);
        if (e) db_bind_text(s, 5, e);
        else db_bind_null(s, 5);
        if (st) db_bind_text(s, 6, st);
        else db_bind_null(s, 6);
        db_bind_int64(s, 7, in->step_count);
        db_bind_double(s, 8, in->step_mean_us);
        db_bind_double(s, 9, in->step_sd_us);
        rc = pg_step_once(s);
    }
    if (!rc && in->idempotency_key) { /* drop_claim's, on PostgreSQL */
        db_finalize(s);
        s = db_prepare(c, "DELETE FROM upload_claims WHERE key = ?");
        if (!s) rc = ERR_DB;
        else {
            db_bind_text(s, 1, in->idempotency_key);
            rc = pg_step_once(s);
        }
    }
    db_finalize(s);
    free(g);
    free(r);
    free(t);
    free(e);
    free(st);
    return rc;
}

static int pg_insert_replay(db_conn *c, const store_session_in *in, long long id) {
    if (!in->runs) return 0;
    db_stmt *s = db_prepare(c, "INSERT INTO replay(session_id,tracks,events,gpu_bw,identity) VALUES (?,?,?,?,?)");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    db_bind_blob(s, 2, in->runs, in->runs_len);
    db_bind_int64(s, 3, (long long)in->runs_events);
    db_bind_text(s, 4, in->gpu_bw);
    db_bind_text(s, 5, in->identity);
    int rc = pg_step_once(s);
    db_finalize(s);
    return rc;
}

/* The same transaction as commit_sqlite's, on PostgreSQL; its last statement bumps the
 * shared list generation (store.c: pg_gen), so no replica keeps a list without it. */
static int commit_pg(store *st, sqlite3 *scratch, const store_session_in *in, long long *id, char *err, size_t errlen) {
    char *meta = json_dumps(in->meta, JSON_COMPACT), *summary = json_dumps(in->summary, JSON_COMPACT);
    db_conn *c = store_get(st);
    int rc = !meta || !summary ? ERR_NOMEM : !c ? ERR_DB : 0;
    if (!rc) rc = db_exec(c, "BEGIN");
    if (!rc) rc = pg_insert_session(c, in, meta, summary, id);
    if (!rc) rc = pg_insert_labels(c, in, *id);
    if (!rc) rc = pg_insert_strings(c, scratch, in, *id);
    if (!rc) rc = pg_copy_scratch(c, scratch, *id);
    if (!rc) rc = pg_insert_analysis(c, in, *id);
    if (!rc) rc = pg_insert_replay(c, in, *id);
    if (!rc) rc = db_exec(c, "UPDATE fp_generation SET lgen = lgen + 1");
    if (!rc) rc = db_exec(c, "COMMIT");
    if (rc) snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : c ? db_errmsg(c) : "no database connection");
    /* a connection lost before COMMIT: nothing was stored, the client may send it again (503) */
    rc = store_fail(st, c, rc);
    store_put(st, c); /* rolls back an open transaction */
    free(meta);
    free(summary);
    return rc;
}

int store_commit_session(store *st, sqlite3 *scratch, db_conn *hold, const store_session_in *in, long long *id, char *err,
                         size_t errlen) {
    return hold ? commit_sqlite(db_sqlite(hold), in, id, err, errlen) : commit_pg(st, scratch, in, id, err, errlen);
}

/* ---- re-analysis: the same copy into an existing session (store_replace_session) ---- */

/* Every row the loader and the analysis wrote for a session: what a re-analysis replaces. */
static const char *const replaced[] = {
    "DELETE FROM operator_rows WHERE session_id = ?1", "DELETE FROM kernel_rows WHERE session_id = ?1",
    "DELETE FROM phase_rows WHERE session_id = ?1",    "DELETE FROM event_chunks WHERE session_id = ?1",
    "DELETE FROM timeline_buckets WHERE session_id = ?1", "DELETE FROM analysis WHERE session_id = ?1",
    "DELETE FROM strings WHERE session_id = ?1",       "DELETE FROM replay WHERE session_id = ?1",
    "DELETE FROM reanalysis WHERE session_id = ?1", /* the claim, and any failure: it succeeded */
};
#define NREPLACED (sizeof replaced / sizeof replaced[0])
#define REPLACE_FIGURES \
    "UPDATE sessions SET start_us = ?2, end_us = ?3, event_count = ?4, hardware = ?5, summary = ?6, analysis_version = ?7 WHERE id = ?1"

/* Whether the transaction may replace session id: 0, ERR_NOTFOUND (deleted), ERR_CONFLICT
 * (claimer's claim is gone: it expired and another worker took it, or it finished). have
 * is 0 when the session row is missing; held is its claim's holder, NULL when none. */
static int claim_verdict(int have, const char *held, const char *claimer, long long id, char *err, size_t errlen) {
    if (!have) return snprintf(err, errlen, "session %lld was deleted during its re-analysis", id), ERR_NOTFOUND;
    if (!held || strcmp(held, claimer))
        return snprintf(err, errlen, "the claim on session %lld expired and another worker took it over", id), ERR_CONFLICT;
    return 0;
}

static int lite_claim_held(sqlite3 *db, long long id, const char *claimer, char *err, size_t errlen) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM sessions WHERE id = ?1), (SELECT claimed_by FROM reanalysis WHERE session_id = ?1)",
                           -1, &s, NULL) != SQLITE_OK)
        return ERR_DB;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s) == SQLITE_ROW ? claim_verdict(sqlite3_column_int(s, 0), (const char *)sqlite3_column_text(s, 1), claimer, id,
                                                            err, errlen)
                                           : ERR_DB;
    sqlite3_finalize(s);
    return rc;
}

static int lite_run_id(sqlite3 *db, const char *sql, long long id) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return ERR_DB;
    sqlite3_bind_int64(s, 1, id);
    int rc = step_once(s);
    sqlite3_finalize(s);
    return rc;
}

static int lite_figures(sqlite3 *db, const store_session_in *in, const char *summary, long long id) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, REPLACE_FIGURES, -1, &s, NULL) != SQLITE_OK) return ERR_DB;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_double(s, 2, in->start_us);
    sqlite3_bind_double(s, 3, in->end_us);
    sqlite3_bind_int64(s, 4, in->events);
    sqlite3_bind_text(s, 5, in->hardware, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, summary, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 7, in->analysis_version);
    int rc = step_once(s);
    sqlite3_finalize(s);
    return rc;
}

/* commit_sqlite's transaction (foreign keys off, for the same reason; the claim check
 * stands in for them: under BEGIN IMMEDIATE no DELETE of the session can land until the
 * COMMIT), into session id. */
static int replace_sqlite(store *st, sqlite3 *db, const store_session_in *in, long long id, const char *claimer, char *err, size_t errlen) {
    char *summary = json_dumps(in->summary, JSON_COMPACT);
    int rc = summary ? 0 : ERR_NOMEM;
    err[0] = '\0';
    if (!rc) rc = exec(db, "PRAGMA foreign_keys=OFF");
    if (!rc) rc = exec(db, "BEGIN IMMEDIATE");
    if (!rc) rc = lite_claim_held(db, id, claimer, err, errlen);
    for (size_t i = 0; i < NREPLACED && !rc; i++) rc = lite_run_id(db, replaced[i], id);
    if (!rc) rc = insert_strings(db, in, id);
    if (!rc) rc = copy_scratch(db, id);
    if (!rc) rc = insert_analysis(db, in, id);
    if (!rc) rc = insert_replay(db, in, id);
    if (!rc) rc = lite_figures(db, in, summary, id);
    if (!rc) rc = room_to_checkpoint(db, err, errlen);
    if (!rc) rc = exec(db, "COMMIT");
    if (rc) {
        if (!err[0]) snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : sqlite3_errmsg(db));
        if (rc == ERR_DB) rc = store_errcode(db);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    sqlite3_exec(db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    sqlite3_busy_timeout(db, STORE_CHECKPOINT_WAIT_MS); /* as commit_sqlite: the loader's WAL truncation follows */
    free(summary);
    if (!rc) store_note_write(st); /* after the COMMIT: cached replies of the session are stale */
    return rc;
}

static int pg_run_id(db_conn *c, const char *sql, long long id) {
    db_stmt *s = db_prepare(c, sql);
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int rc = pg_step_once(s);
    db_finalize(s);
    return rc;
}

/* The session row locked (FOR UPDATE: a DELETE of it waits for this transaction, and then
 * cascades to the rows it wrote) and its claim checked. */
static int pg_claim_held(db_conn *c, long long id, const char *claimer, char *err, size_t errlen) {
    db_stmt *s = db_prepare(c, "SELECT (SELECT claimed_by FROM reanalysis WHERE session_id = ?1) FROM sessions WHERE id = ?1 FOR UPDATE");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s);
    int rc = st == DB_ROW ? claim_verdict(1, db_column_text(s, 0), claimer, id, err, errlen)
             : st == DB_DONE ? claim_verdict(0, NULL, claimer, id, err, errlen) : ERR_DB;
    db_finalize(s);
    return rc;
}

static int pg_figures(db_conn *c, const store_session_in *in, const char *summary, long long id) {
    db_stmt *s = db_prepare(c, REPLACE_FIGURES);
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    db_bind_double(s, 2, in->start_us);
    db_bind_double(s, 3, in->end_us);
    db_bind_int64(s, 4, in->events);
    db_bind_text(s, 5, in->hardware);
    db_bind_text(s, 6, summary);
    db_bind_int64(s, 7, in->analysis_version);
    int rc = pg_step_once(s);
    db_finalize(s);
    return rc;
}

/* commit_pg's transaction into session id; its last statement bumps both generations (a
 * stored session changed: every replica's cached replies of it are stale). */
static int replace_pg(store *st, sqlite3 *scratch, const store_session_in *in, long long id, const char *claimer, char *err, size_t errlen) {
    char *summary = json_dumps(in->summary, JSON_COMPACT);
    db_conn *c = store_get(st);
    int rc = !summary ? ERR_NOMEM : !c ? ERR_DB : 0;
    err[0] = '\0';
    if (!rc) rc = db_exec(c, "BEGIN");
    if (!rc) rc = pg_claim_held(c, id, claimer, err, errlen);
    for (size_t i = 0; i < NREPLACED && !rc; i++) rc = pg_run_id(c, replaced[i], id);
    if (!rc) rc = pg_insert_strings(c, scratch, in, id);
    if (!rc) rc = pg_copy_scratch(c, scratch, id);
    if (!rc) rc = pg_insert_analysis(c, in, id);
    if (!rc) rc = pg_insert_replay(c, in, id);
    if (!rc) rc = pg_figures(c, in, summary, id);
    if (!rc) rc = db_exec(c, "UPDATE fp_generation SET gen = gen + 1, lgen = lgen + 1");
    if (!rc) rc = db_exec(c, "COMMIT");
    if (rc && !err[0]) snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : c ? db_errmsg(c) : "no database connection");
    rc = store_fail(st, c, rc);
    store_put(st, c); /* rolls back an open transaction */
    free(summary);
    return rc;
}

int store_replace_session(store *st, sqlite3 *scratch, db_conn *hold, const store_session_in *in, long long id, const char *claimer,
                          char *err, size_t errlen) {
    return hold ? replace_sqlite(st, db_sqlite(hold), in, id, claimer, err, errlen) : replace_pg(st, scratch, in, id, claimer, err, errlen);
}
