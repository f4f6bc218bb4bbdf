/* commit.c: store_commit_session (commit.h). Owns the SQL that writes a new session. */
#include "store/commit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/err.h"
#include "store/store.h"

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
    if (sqlite3_prepare_v2(db, "INSERT INTO sessions(name,source,created_at,start_us,end_us,event_count,hardware,bytes_in,meta,summary)"
                               " VALUES (?,?,?,?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK) goto out;
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

static int insert_strings(sqlite3 *db, const store_session_in *in, long long id) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO strings(session_id,id,s) VALUES (?,?,?)", -1, &s, NULL) != SQLITE_OK) return ERR_DB;
    int rc = 0;
    for (size_t i = 0; i < intern_count(in->strings) && !rc; i++) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, (long long)i);
        sqlite3_bind_text(s, 3, intern_str(in->strings, (long)i), -1, SQLITE_STATIC);
        rc = step_once(s);
    }
    sqlite3_finalize(s);
    return rc;
}

/* The analysis left its tables in scratch; one INSERT ... SELECT each. */
static int copy_scratch(sqlite3 *db, long long id) {
    static const char *const copies[] = {
        ("INSERT INTO operators SELECT ?1, grouping, name, kind, input_shapes, calls, cpu_total, self_cpu,"
         " cuda_total, self_cuda, cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem FROM scratch.ops"),
        "INSERT INTO kernels SELECT ?1, name, kind, calls, total_us, min_us, max_us, grid, block, regs, smem FROM scratch.kern",
        "INSERT INTO phases SELECT ?1, name, kind, count, total_us, gpu_busy_us, kernels, kernel_us, first_ts FROM scratch.ph",
        "INSERT INTO event_chunks SELECT ?1, track, seq, n, min_ts, max_end, data FROM scratch.chunks",
        "INSERT INTO timeline_buckets SELECT ?1, track, data FROM scratch.tlb",
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

static int insert_analysis(sqlite3 *db, const store_session_in *in, long long id) {
    sqlite3_stmt *s = NULL;
    char *g = json_dumps(in->gpu, JSON_COMPACT), *r = json_dumps(in->report, JSON_COMPACT), *t = json_dumps(in->timeline, JSON_COMPACT);
    int rc = g && r && t ? 0 : ERR_NOMEM;
    if (!rc && sqlite3_prepare_v2(db, "INSERT INTO analysis(session_id,gpu,report,timeline) VALUES (?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
        rc = ERR_DB;
    if (!rc) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_text(s, 2, g, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, r, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, t, -1, SQLITE_STATIC);
        rc = step_once(s);
    }
    sqlite3_finalize(s);
    free(g);
    free(r);
    free(t);
    return rc;
}

int store_commit_session(sqlite3 *db, const store_session_in *in, long long *id, char *err, size_t errlen) {
    char *meta = json_dumps(in->meta, JSON_COMPACT), *summary = json_dumps(in->summary, JSON_COMPACT);
    int rc = meta && summary ? 0 : ERR_NOMEM;
    if (!rc) rc = exec(db, "BEGIN IMMEDIATE");
    if (!rc) rc = insert_session(db, in, meta, summary, id);
    if (!rc) rc = insert_labels(db, in, *id);
    if (!rc) rc = insert_strings(db, in, *id);
    if (!rc) rc = copy_scratch(db, *id);
    if (!rc) rc = insert_analysis(db, in, *id);
    if (!rc) rc = exec(db, "COMMIT");
    if (rc) {
        snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : sqlite3_errmsg(db));
        if (rc == ERR_DB) rc = store_errcode(db); /* a full disk is 507: deletes still free space */
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    free(meta);
    free(summary);
    return rc;
}
