/* query.c: reads of stored sessions -> JSON replies. Prepared statements only; the
 * only SQL assembled at run time is made of constant fragments chosen by whitelists
 * (sort columns, one EXISTS per label filter), never of request text. */
#include "store/query.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oprow.h"
#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/occupancy.h"
#include "lib/tlblob.h"
#include "lib/vec.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"
#include "store/compare.h"
#include "store/history.h"
#include "store/reanalysis.h"

static const struct { const char *field, *col; } sorts[] = {
    {"cuda_time_total", "cuda_total"}, {"self_cuda_time_total", "self_cuda"},
    {"cpu_time_total", "cpu_total"},   {"self_cpu_time_total", "self_cpu"},
    {"calls", "calls"},                {"cpu_memory_usage", "cpu_mem"},
    {"cuda_memory_usage", "cuda_mem"}, {"self_cpu_memory_usage", "self_cpu_mem"},
    {"self_cuda_memory_usage", "self_cuda_mem"}, {NULL, NULL}};

const char *query_sort_column(const char *field) {
    for (int i = 0; sorts[i].field; i++)
        if (!strcmp(field, sorts[i].field)) return sorts[i].col;
    return NULL;
}
const char *query_sort_fields(void) {
    return "cuda_time_total, self_cuda_time_total, cpu_time_total, self_cpu_time_total, calls, cpu_memory_usage, "
           "cuda_memory_usage, self_cpu_memory_usage, self_cuda_memory_usage";
}

static json_t *col_json(db_stmt *s, int i) {
    const char *t = (const char *)db_column_text(s, i);
    json_error_t e;
    json_t *v = t ? json_loads(t, JSON_DECODE_ANY, &e) : NULL;
    return v ? v : json_object();
}
static json_t *col_str(db_stmt *s, int i) {
    const char *t = (const char *)db_column_text(s, i);
    return t ? json_string(t) : json_null();
}

static int exists(db_conn *db, long long id) {
    db_stmt *s;
    if (!(s = db_prepare(db, "SELECT 1 FROM sessions WHERE id = ?"))) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s);
    db_finalize(s);
    return st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
}

/* After a row loop: 0 when the statement ran to its end (or stopped on a row on purpose),
 * ERR_DB when SQLite failed (SQLITE_CORRUPT, IOERR...). A read must not pass a failed
 * step off as the end of the rows: that would be a truncated 200. */
static int step_rc(int st) { return st == DB_DONE || st == DB_ROW ? 0 : ERR_DB; }

static json_t *labels_of(db_conn *db, long long id) {
    json_t *o = json_object();
    db_stmt *s;
    if (!(s = db_prepare(db, "SELECT key, value FROM labels WHERE session_id = ? ORDER BY key"))) return o;
    db_bind_int64(s, 1, id);
    while (db_step(s) == DB_ROW)
        json_object_set_new(o, (const char *)db_column_text(s, 0), json_string((const char *)db_column_text(s, 1)));
    db_finalize(s);
    return o;
}

#define SUMMARY_COLS "id, name, source, created_at, start_us, end_us, event_count, hardware, summary, bytes_in"

/* The summary keys a session row copies (wire name, key in sessions.summary), in wire order. */
static const char *const summary_keys[][2] = {{"top_cuda_operator", "top_cuda_operator"}, {"cuda_time_total_us", "self_cuda_time_total_us"},
                                              {"cpu_time_total_us", "self_cpu_time_total_us"}, {"gpu_idle_fraction", "gpu_idle_fraction"},
                                              {"gpu_utilization", "gpu_utilization"}, {"step_mean_us", "step_mean_us"},
                                              {"top_suspect", "top_suspect"}};
#define SUMMARY_NKEYS (sizeof summary_keys / sizeof summary_keys[0])

/* The columns of a session row before its summary keys; labels is the caller's (stolen). */
static json_t *summary_head(db_stmt *s, json_t *labels) {
    char created[TIMEFMT_LEN];
    timefmt_utc(db_column_int64(s, 3), 0, created);
    double st = db_column_double(s, 4), en = db_column_double(s, 5);
    return json_pack("{s:I,s:o,s:o,s:o,s:s,s:f,s:f,s:f,s:I,s:o,s:I}", "id", db_column_int64(s, 0), "name", col_str(s, 1), "labels",
                     labels, "source", col_str(s, 2), "created_at", created, "start_us", st, "end_us", en, "duration_us", en - st,
                     "event_count", db_column_int64(s, 6), "hardware", col_str(s, 7), "bytes_in", db_column_int64(s, 9));
}

/* Appends the summary keys and smells; vals[i] is summary_keys[i]'s value and vals[SUMMARY_NKEYS]
 * the smells (borrowed; NULL = absent, as in an older row: null and []). */
static void summary_tail(json_t *o, json_t *const *vals) {
    for (size_t i = 0; i < SUMMARY_NKEYS; i++) json_object_set_new(o, summary_keys[i][0], vals[i] ? json_incref(vals[i]) : json_null());
    json_t *sm = vals[SUMMARY_NKEYS];
    json_object_set_new(o, "smells", sm ? json_incref(sm) : json_array());
}

/* One session's summary object; *sum_out, when not NULL, gets the parsed summary column
 * too (the caller's reference), so that a caller needing more of it parses it once. */
static json_t *summary_row(db_conn *db, db_stmt *s, json_t **sum_out) {
    json_t *sum = col_json(s, 8), *o = summary_head(s, labels_of(db, db_column_int64(s, 0)));
    json_t *vals[SUMMARY_NKEYS + 1];
    for (size_t i = 0; i < SUMMARY_NKEYS; i++) vals[i] = json_object_get(sum, summary_keys[i][1]);
    vals[SUMMARY_NKEYS] = json_object_get(sum, "smells");
    summary_tail(o, vals);
    if (sum_out) *sum_out = sum;
    else json_decref(sum);
    return o;
}

int query_session(db_conn *db, long long id, json_t **out) {
    db_stmt *s;
    if (!(s = db_prepare(db, "SELECT " SUMMARY_COLS ", meta, analysis_version FROM sessions WHERE id = ?"))) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s), rc = st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (st == DB_ROW) {
        json_t *sum = NULL, *o = summary_row(db, s, &sum);
        json_t *meta = col_json(s, 10);
        json_t *dp = json_object_get(meta, "deviceProperties");
        json_object_set_new(o, "devices", dp ? json_incref(dp) : json_array());
        json_t *counts = json_object_get(sum, "counts");
        json_object_set_new(o, "counts", json_is_object(counts) ? json_incref(counts) : json_object());
        json_decref(sum);
        json_t *fp = json_object_get(meta, "firstpass");
        if (fp) json_object_set(o, "collector", fp);
        json_t *trace_meta = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v)
            if (json_is_string(v) || json_is_number(v)) json_object_set(trace_meta, k, v);
        json_object_set_new(o, "trace", trace_meta);
        json_decref(meta);
        /* the version of the analysis its figures come from, and why its last re-analysis
         * failed, if it did (reanalysis.h; routes.c adds the current version) */
        json_t *failure = reanalysis_failure(db, id);
        json_object_set_new(o, "analysis_version", json_integer(db_column_int64(s, 11)));
        json_object_set_new(o, "reanalysis_failure", failure ? failure : json_null());
        *out = o;
        rc = 0;
    }
    db_finalize(s);
    return rc;
}

/* The list's copy of SUMMARY_COLS: the summary column is cut down in SQL to the values
 * a list row shows, as one JSON array in summary_keys order plus smells. json_extract with
 * several paths renders each value from its original text (numbers keep their digits), so
 * parsing the short array gives what parsing the whole summary gave, without its "counts"
 * object (most of its bytes and of json_loads' time). A summary that is not JSON reads as {}. */
#define LIST_COLS "id, name, source, created_at, start_us, end_us, event_count, hardware, " \
    "CASE WHEN json_valid(summary) THEN json_extract(summary, '$.top_cuda_operator', '$.self_cuda_time_total_us', " \
    "'$.self_cpu_time_total_us', '$.gpu_idle_fraction', '$.gpu_utilization', '$.step_mean_us', '$.top_suspect', '$.smells') END, bytes_in"
/* The same on PostgreSQL: the json type (not jsonb) keeps each value's text too. A summary
 * that is not JSON fails the statement there (the server only ever writes JSON). */
#define LIST_COLS_PG "id, name, source, created_at, start_us, end_us, event_count, hardware, " \
    "json_build_array(summary::json->'top_cuda_operator', summary::json->'self_cuda_time_total_us', " \
    "summary::json->'self_cpu_time_total_us', summary::json->'gpu_idle_fraction', summary::json->'gpu_utilization', " \
    "summary::json->'step_mean_us', summary::json->'top_suspect', summary::json->'smells')::text, bytes_in"

/* A list row: labels stay empty here and page_labels fills them for the whole page. */
static json_t *list_row(db_stmt *s) {
    json_t *o = summary_head(s, json_object()), *picked = col_json(s, 8);
    json_t *vals[SUMMARY_NKEYS + 1];
    for (size_t i = 0; i <= SUMMARY_NKEYS; i++) {
        json_t *v = json_array_get(picked, i);
        /* json_extract says null for an absent key too; both read as an older row's absent
         * key did (null, and [] for smells, which analyze.c always writes as an array). */
        vals[i] = json_is_null(v) ? NULL : v;
    }
    summary_tail(o, vals);
    json_decref(picked);
    return o;
}

/* "[id,id,...]" of the page's rows, for json_each; NULL when out of memory. */
static char *id_list(const long long *ids, size_t n) {
    buf b = {0};
    int rc = buf_puts(&b, "[");
    for (size_t i = 0; i < n && !rc; i++) rc = buf_printf(&b, i ? ",%lld" : "%lld", ids[i]);
    if (!rc) rc = buf_puts(&b, "]");
    if (rc) { buf_free(&b); return NULL; }
    return b.p;
}

/* Fills the labels of every row of a page with one statement: one prepare per page, not one
 * per row (labels_of per row was 48 % of the list's CPU). rows[i] is session ids[i]; ids are
 * newest first and the statement returns them ascending, so a walk from the end pairs them. */
static int page_labels(db_conn *db, json_t *rows, const long long *ids, size_t n) {
    if (!n) return 0;
    char *list = id_list(ids, n);
    db_stmt *s = NULL;
    if (!list) return ERR_NOMEM;
    if (!(s = db_prepare2(db, "SELECT session_id, key, value FROM labels WHERE session_id IN (SELECT value FROM json_each(?1))"
                              " ORDER BY session_id, key",
                          "SELECT session_id, key, value FROM labels WHERE session_id IN"
                          " (SELECT value::bigint FROM json_array_elements_text(?1::json)) ORDER BY session_id, key"))) {
        free(list);
        return ERR_DB;
    }
    db_bind_text(s, 1, list);
    size_t i = n - 1;
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        long long sid = db_column_int64(s, 0);
        while (i > 0 && ids[i] < sid) i--;
        if (ids[i] != sid) continue;
        json_object_set_new(json_object_get(json_array_get(rows, i), "labels"), (const char *)db_column_text(s, 1),
                            json_string((const char *)db_column_text(s, 2)));
    }
    db_finalize(s);
    free(list);
    return step_rc(st);
}

/* The page's statement: constant fragments only, one per filter present.
 *
 * With a label filter the page is driven by the first label through labels_kv (key, value,
 * session_id), newest first, so it reads about one page of index entries whatever the
 * label's share of the sessions. An EXISTS per row instead scanned every session newest
 * first: ~10 ms at 10,000 sessions for a rare or absent label (EXPLAIN QUERY PLAN: SCAN s).
 * CROSS JOIN keeps SQLite from putting sessions outside; the cursor bounds the index range. */
static db_stmt *list_stmt(db_conn *db, const list_filter *f) {
    char sql[4096]; /* 16 labels and every filter: about 1,900 bytes */
    int o, by_label = f->nlabels > 0, pg = db_kind_of(db) == DB_PG;
    /* PostgreSQL has no CROSS JOIN ... ON, and plans the join by its statistics anyway. */
    if (by_label)
        o = snprintf(sql, sizeof sql, "SELECT %s FROM labels l0 %s sessions s ON s.id = l0.session_id"
                                      " WHERE l0.key = ? AND l0.value = ?", pg ? LIST_COLS_PG : LIST_COLS, pg ? "JOIN" : "CROSS JOIN");
    else
        o = snprintf(sql, sizeof sql, "SELECT %s FROM sessions s WHERE 1=1", pg ? LIST_COLS_PG : LIST_COLS);
    for (int i = by_label; i < f->nlabels; i++)
        o += snprintf(sql + o, sizeof sql - (size_t)o, " AND EXISTS (SELECT 1 FROM labels l WHERE l.session_id = s.id AND l.key = ? AND l.value = ?)");
    if (f->name) o += snprintf(sql + o, sizeof sql - (size_t)o, " AND name = ?");
    if (f->q) o += snprintf(sql + o, sizeof sql - (size_t)o, " AND instr(lower(name), lower(?)) > 0");
    if (f->source) o += snprintf(sql + o, sizeof sql - (size_t)o, " AND source = ?");
    if (f->since) o += snprintf(sql + o, sizeof sql - (size_t)o, " AND created_at >= ?");
    if (f->until) o += snprintf(sql + o, sizeof sql - (size_t)o, " AND created_at < ?");
    if (f->before_id) o += snprintf(sql + o, sizeof sql - (size_t)o, by_label ? " AND l0.session_id < ?" : " AND id < ?");
    snprintf(sql + o, sizeof sql - (size_t)o, by_label ? " ORDER BY l0.session_id DESC LIMIT ?" : " ORDER BY id DESC LIMIT ?");
    db_stmt *s;
    if (!(s = db_prepare(db, sql))) return NULL;
    int p = 1;
    for (int i = 0; i < f->nlabels; i++) {
        db_bind_text(s, p++, f->label_keys[i]);
        db_bind_text(s, p++, f->label_values[i]);
    }
    if (f->name) db_bind_text(s, p++, f->name);
    if (f->q) db_bind_text(s, p++, f->q);
    if (f->source) db_bind_text(s, p++, f->source);
    if (f->since) db_bind_int64(s, p++, f->since);
    if (f->until) db_bind_int64(s, p++, f->until);
    if (f->before_id) db_bind_int64(s, p++, f->before_id);
    db_bind_int64(s, p++, f->limit + 1); /* one more tells whether a next page exists */
    return s;
}

int query_list(db_conn *db, const list_filter *f, json_t **out) {
    db_stmt *s = list_stmt(db, f);
    long long *ids = s ? malloc((size_t)(f->limit > 0 ? f->limit : 1) * sizeof *ids) : NULL;
    if (!ids) { db_finalize(s); return s ? ERR_NOMEM : ERR_DB; }
    json_t *arr = json_array();
    size_t n = 0; /* rows in arr, ids[] in step with them */
    long long last = 0;
    int taken = 0, more = 0, st;
    while ((st = db_step(s)) == DB_ROW) {
        if (taken == f->limit) { more = 1; break; }
        taken++;
        last = db_column_int64(s, 0);
        /* A row jansson refuses (text that is not UTF-8) is left out, as it always was; the
         * cursor still moves past it, and ids[] must not get an id without its row. */
        if (!json_array_append_new(arr, list_row(s))) ids[n++] = last;
    }
    db_finalize(s);
    int rc = step_rc(st);
    if (!rc) rc = page_labels(db, arr, ids, n);
    char cur[32];
    snprintf(cur, sizeof cur, "%lld", last);
    free(ids);
    if (rc) { json_decref(arr); return rc; }
    *out = json_pack("{s:o,s:o}", "sessions", arr, "next", more ? json_string(cur) : json_null());
    return 0;
}

/* PostgreSQL's last tie-breaks of an operator sort: the order SQLite lists equal rows in,
 * which is its scan of operators_session (cuda_total DESC, then rowid: rn, schema_pg.sql),
 * kept by its sorter for rows equal in every ORDER BY term. */
#define PG_OP_TIES ", cuda_total DESC, rn"
/* SQLite's: cuda_total DESC, then its scan, which reads grouping 0 or 1 before 2 (the GPU
 * rows since schema version 6), as the walk had the host rows before the GPU rows. */
#define SQLITE_OP_TIES ", cuda_total DESC"

/* One operator row, in the wire shape api/oprow.h defines. */
static json_t *op_row(db_stmt *s, int by_shape) {
    fp_op_row r = {(const char *)db_column_text(s, 0), (const char *)db_column_text(s, 1),
                   by_shape ? (const char *)db_column_text(s, 11) : NULL, db_column_int64(s, 2),
                   db_column_double(s, 3), db_column_double(s, 4), db_column_double(s, 5), db_column_double(s, 6),
                   db_column_int64(s, 7), db_column_int64(s, 8), db_column_int64(s, 9), db_column_int64(s, 10)};
    if (!r.name) r.name = "";
    if (!r.kind) r.kind = "";
    if (by_shape && !r.input_shapes) r.input_shapes = "";
    return fp_op_row_to_json(&r);
}

static int operators_in(db_conn *db, long long id, const char *sort, int limit, const char *kind, int by_shape, json_t **out) {
    int rc = exists(db, id);
    if (rc) return rc;
    const char *col = query_sort_column(sort);
    if (!col) return ERR_INVALID;
    char sql[512];
    /* col comes from the whitelist above, never from the request. */
    snprintf(sql, sizeof sql,
             "SELECT name, kind, calls, cpu_total, self_cpu, cuda_total, self_cuda, cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem,"
             " input_shapes FROM operators WHERE session_id = ?1 AND grouping IN (?2, 2) AND (CAST(?3 AS TEXT) IS NULL OR kind = ?3)"
             " ORDER BY %s DESC, name%s LIMIT ?4", col, db_kind_of(db) == DB_PG ? PG_OP_TIES : SQLITE_OP_TIES);
    db_stmt *s;
    if (!(s = db_prepare(db, sql))) return ERR_DB;
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, by_shape ? 1 : 0);
    if (kind) db_bind_text(s, 3, kind);
    db_bind_int64(s, 4, limit);
    json_t *rows = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) json_array_append_new(rows, op_row(s, by_shape));
    db_finalize(s);
    if (step_rc(st)) { json_decref(rows); return ERR_DB; }
    double tcpu = 0, tcuda = 0;
    long long calls = 0;
    /* The totals need no name: from operator_rows, not the view, whose join to strings
     * was most of the time at 100k kernel names (schema.sql). */
    if ((s = db_prepare2(db, "SELECT TOTAL(self_cpu), TOTAL(CASE WHEN kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') THEN self_cuda END),"
                             " TOTAL(calls) FROM operator_rows WHERE session_id = ? AND grouping IN (0, 2)",
                         /* summed in SQLite's order (its operators_session scan), so that they round alike */
                         "SELECT COALESCE(SUM(self_cpu ORDER BY cuda_total DESC, rn), 0), COALESCE(SUM(CASE WHEN kind IN"
                         " ('kernel', 'gpu_memcpy', 'gpu_memset') THEN self_cuda END ORDER BY cuda_total DESC, rn), 0),"
                         " COALESCE(SUM(calls), 0) FROM operator_rows WHERE session_id = ? AND grouping IN (0, 2)"))) {
        db_bind_int64(s, 1, id);
        st = db_step(s);
        if (st == DB_ROW) {
            tcpu = db_column_double(s, 0);
            tcuda = db_column_double(s, 1);
            calls = (long long)db_column_double(s, 2);
        }
        db_finalize(s);
        if (step_rc(st)) { json_decref(rows); return ERR_DB; }
    }
    *out = json_pack("{s:o,s:{s:f,s:f,s:I},s:s,s:b}", "operators", rows, "totals", "self_cpu_time_total_us", tcpu,
                     "self_cuda_time_total_us", tcuda, "calls", calls, "sort", sort, "group_by_input_shape", by_shape);
    return 0;
}

/* ---- kernel occupancy estimates (definitions and limits: occupancy.h) ---- */

static long long prop_num(const json_t *dp, const char *k) {
    double v = json_number_value(json_object_get(dp, k));
    return v > 0 && v < 1e15 ? (long long)v : 0;
}
/* A count that is an int (SMs, threads, registers): 0 past int's range (issue 50 finding 14). */
static int prop_int(const json_t *dp, const char *k) {
    long long v = prop_num(dp, k);
    return v <= INT_MAX ? (int)v : 0;
}

/* The session's first deviceProperties entry: kernel rows aggregate over devices and do
 * not say which one ran them, and the GPUs of one trace are alike. 0 when it has none. */
static int session_device(db_conn *db, long long id, occ_device *d) {
    db_stmt *s;
    int ok = 0;
    memset(d, 0, sizeof *d);
    if (!(s = db_prepare(db, "SELECT meta FROM sessions WHERE id = ?"))) return 0;
    db_bind_int64(s, 1, id);
    if (db_step(s) == DB_ROW) {
        json_t *meta = col_json(s, 0), *dp = json_array_get(json_object_get(meta, "deviceProperties"), 0);
        if (json_is_object(dp)) {
            *d = (occ_device){prop_int(dp, "computeMajor"), prop_int(dp, "computeMinor"), prop_int(dp, "numSms"),
                              prop_int(dp, "warpSize"), prop_int(dp, "maxThreadsPerBlock"),
                              prop_int(dp, "maxThreadsPerMultiprocessor"), prop_int(dp, "regsPerBlock"),
                              prop_int(dp, "regsPerMultiprocessor"), prop_num(dp, "sharedMemPerBlock"),
                              prop_num(dp, "sharedMemPerBlockOptin"), prop_num(dp, "sharedMemPerMultiprocessor"),
                              prop_int(dp, "maxBlocksPerMultiProcessor")};
            ok = 1; /* occ_estimate says which of these are missing */
        }
        json_decref(meta);
    }
    db_finalize(s);
    return ok;
}

/* [x, y, z] (1 to 3 positive integers; missing ones are 1) into v; 0 or -1. */
static int dims_of(const json_t *a, long long v[3]) {
    size_t n = json_array_size(a);
    if (n < 1 || n > 3) return -1;
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(a, i);
        v[i] = i < n ? (json_is_integer(x) ? json_integer_value(x) : 0) : 1;
        if (v[i] < 1) return -1;
    }
    return 0;
}

/* est_occupancy, est_sm_efficiency, theoretical_occupancy, occupancy_limiter of a kernel
 * row from its stored launch (grid, block, registers, shared memory); null when unknown. */
static void add_estimates(json_t *r, const occ_device *d, int have_device) {
    occ_launch l;
    occ_result e;
    json_t *regs = json_object_get(r, "registers_per_thread"), *smem = json_object_get(r, "shared_memory_bytes");
    int ok = have_device && json_is_integer(regs) && json_is_integer(smem) && !dims_of(json_object_get(r, "grid"), l.grid) &&
             !dims_of(json_object_get(r, "block"), l.block);
    if (ok) {
        l.regs_per_thread = (int)json_integer_value(regs);
        l.smem_bytes = json_integer_value(smem);
        ok = occ_estimate(d, &l, &e) == 0;
    }
    json_object_set_new(r, "est_occupancy", ok ? json_real(e.est_occupancy) : json_null());
    json_object_set_new(r, "est_sm_efficiency", ok ? json_real(e.est_sm_efficiency) : json_null());
    json_object_set_new(r, "theoretical_occupancy", ok ? json_real(e.theoretical) : json_null());
    json_object_set_new(r, "occupancy_limiter", ok ? json_string(occ_limiter_name(e.limiter)) : json_null());
    /* blocks per SM needs only the grid and numSms, not the whole launch: copies and memsets
     * (no grid) and traces without device properties read null */
    long long g[3];
    int bps = have_device && d->num_sms > 0 && !dims_of(json_object_get(r, "grid"), g);
    json_object_set_new(r, "blocks_per_sm", bps ? json_real((double)g[0] * (double)g[1] * (double)g[2] / d->num_sms) : json_null());
    /* Kernels stored since schema version 7 carry tb-profiler's duration-weighted means over
     * every launch (store/schema.sql): those win over the one stored launch's figures. */
    json_t *mb = json_object_get(r, "mean_bps"), *mo = json_object_get(r, "mean_occ"), *ms = json_object_get(r, "mean_sme");
    if (json_is_number(mb)) json_object_set(r, "blocks_per_sm", mb);
    if (json_is_number(ms)) json_object_set(r, "est_sm_efficiency", ms);
    if (json_is_number(mo)) json_object_set_new(r, "est_occupancy", json_real(json_number_value(mo) / 100.0));
    json_object_del(r, "mean_bps");
    json_object_del(r, "mean_occ");
    json_object_del(r, "mean_sme");
    const char *kind = json_string_value(json_object_get(r, "kind"));
    json_object_set_new(r, "tensor_core", json_boolean(kind && !strcmp(kind, "kernel") &&
                                                       cuda_uses_tensor_cores(json_string_value(json_object_get(r, "name")))));
}

static int kernels_in(db_conn *db, long long id, const char *sort, int limit, json_t **out) {
    int rc = exists(db, id);
    if (rc) return rc;
    const char *col = !strcmp(sort, "calls") ? "calls" : !strcmp(sort, "mean_us") ? "total_us / calls" : !strcmp(sort, "total_us") ? "total_us" : NULL;
    if (!col) return ERR_INVALID;
    char sql[512];
    /* A share of nothing is NULL: SQLite's x / 0.0; PostgreSQL would fail the statement.
     * The sum from kernel_rows: the view would look up three texts a row for nothing. */
    snprintf(sql, sizeof sql, "SELECT name, kind, calls, total_us, min_us, max_us, grid, block, regs, smem,"
                              " total_us / NULLIF((SELECT %s FROM kernel_rows WHERE session_id = ?1), 0), mean_bps, mean_occ, mean_sme"
                              " FROM kernels WHERE session_id = ?1 ORDER BY %s DESC, name LIMIT ?2",
             /* the sum in SQLite's order (its kernels_session scan), so that it rounds alike */
             db_kind_of(db) == DB_PG ? "COALESCE(SUM(total_us ORDER BY total_us DESC), 0)" : "TOTAL(total_us)", col);
    db_stmt *s;
    if (!(s = db_prepare(db, sql))) return ERR_DB;
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, limit);
    occ_device dev;
    int have_dev = session_device(db, id, &dev);
    json_t *rows = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        long long calls = db_column_int64(s, 2);
        double total = db_column_double(s, 3);
        json_t *r = json_pack("{s:o,s:o,s:I,s:f,s:f,s:f,s:f,s:f}", "name", col_str(s, 0), "kind", col_str(s, 1), "calls", calls,
                              "total_us", total, "mean_us", calls ? total / (double)calls : 0.0, "min_us", db_column_double(s, 4),
                              "max_us", db_column_double(s, 5), "share", db_column_double(s, 10));
        /* grid/block are stored as "[1, 1, 1]": valid JSON arrays. */
        json_object_set_new(r, "grid", db_column_is_null(s, 6) ? json_null() : col_json(s, 6));
        json_object_set_new(r, "block", db_column_is_null(s, 7) ? json_null() : col_json(s, 7));
        json_object_set_new(r, "registers_per_thread", db_column_is_null(s, 8) ? json_null() : json_integer(db_column_int64(s, 8)));
        json_object_set_new(r, "shared_memory_bytes", db_column_is_null(s, 9) ? json_null() : json_integer(db_column_int64(s, 9)));
        for (int c = 11; c <= 13; c++) /* read by add_estimates, which takes them out */
            if (!db_column_is_null(s, c))
                json_object_set_new(r, c == 11 ? "mean_bps" : c == 12 ? "mean_occ" : "mean_sme", json_real(db_column_double(s, c)));
        add_estimates(r, &dev, have_dev);
        json_array_append_new(rows, r);
    }
    db_finalize(s);
    if (step_rc(st)) { json_decref(rows); return ERR_DB; }
    *out = json_pack("{s:o}", "kernels", rows);
    return 0;
}

int query_phases(db_conn *db, long long id, json_t **out) {
    int rc = exists(db, id);
    if (rc) return rc;
    db_stmt *s;
    if (!(s = db_prepare(db, "SELECT name, kind, count, total_us, gpu_busy_us, kernels, kernel_us, first_ts FROM phases"
                               " WHERE session_id = ? ORDER BY total_us DESC, name"))) return ERR_DB;
    db_bind_int64(s, 1, id);
    json_t *rows = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        long long count = db_column_int64(s, 2), k = db_column_int64(s, 5);
        double total = db_column_double(s, 3), busy = db_column_double(s, 4), kus = db_column_double(s, 6);
        json_t *ph = json_pack("{s:o,s:o,s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "name", col_str(s, 0), "kind", col_str(s, 1),
                               "count", count, "total_us", total, "mean_us", count ? total / (double)count : 0.0,
                               "gpu_busy_us", busy, "kernels", k, "kernel_mean_us", k ? kus / (double)k : 0.0,
                               "cpu_only_us", total - busy > 0 ? total - busy : 0.0, "first_ts_us", db_column_double(s, 7));
        /* gpu_utilization = time with at least one GPU activity running / wall time of the
         * phase's instances: analyze.c's gpu_busy_us over total_us, null for an empty span. */
        json_object_set_new(ph, "gpu_utilization", total > 0 ? json_real(busy / total) : json_null());
        json_array_append_new(rows, ph);
    }
    db_finalize(s);
    if (step_rc(st)) { json_decref(rows); return ERR_DB; }
    *out = json_pack("{s:o}", "phases", rows);
    return 0;
}

static int analysis_doc(db_conn *db, long long id, int col, json_t **out) {
    static const char *const sql[] = {"SELECT gpu FROM analysis WHERE session_id = ?", "SELECT report FROM analysis WHERE session_id = ?",
                                      "SELECT timeline FROM analysis WHERE session_id = ?",
                                      "SELECT effic FROM analysis WHERE session_id = ?"};
    db_stmt *s;
    if (!(s = db_prepare(db, sql[col]))) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s), rc = st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (st == DB_ROW) {
        *out = col_json(s, 0);
        rc = 0;
    }
    db_finalize(s);
    return rc;
}

/* Adds the two utilization figures, each named by what it divides (issue 42: one name, one
 * value): gpu_utilization, the headline, is tb-profiler's (kernel busy time over the steps'
 * window: the efficiency document's, null where it has none); busy_fraction_of_wall =
 * gpu_busy_us / wall_us (any GPU activity over the session span; 1 - gpu_idle_fraction),
 * null where the idle fraction is (no GPU work). */
static int gpu_in(db_conn *db, long long id, json_t **out) {
    int rc = analysis_doc(db, id, 0, out);
    if (rc) return rc;
    json_t *idle = json_object_get(*out, "gpu_idle_fraction"), *eff = NULL;
    double wall = json_number_value(json_object_get(*out, "wall_us")), busy = json_number_value(json_object_get(*out, "gpu_busy_us"));
    json_object_set_new(*out, "busy_fraction_of_wall", json_is_number(idle) && wall > 0 ? json_real(busy / wall) : json_null());
    rc = analysis_doc(db, id, 3, &eff);
    if (rc == ERR_NOTFOUND) rc = 0; /* a session deleted meanwhile: the headline is unknown */
    json_t *head = json_object_get(json_object_get(eff, "session"), "gpu_utilization");
    json_object_set_new(*out, "gpu_utilization", json_is_number(head) ? json_real(json_number_value(head)) : json_null());
    json_decref(eff);
    if (rc) { json_decref(*out); *out = NULL; }
    return rc;
}

int query_efficiency(db_conn *db, long long id, json_t **out) {
    int rc = analysis_doc(db, id, 3, out);
    if (rc || json_object_get(*out, "session")) return rc;
    json_decref(*out); /* NULL column: stored before the figures existed */
    *out = json_pack("{s:n,s:s,s:{s:n,s:n,s:n,s:n,s:n,s:n,s:n},s:[],s:[],s:[]}", "device", "device_reason",
                     "the session was stored before the efficiency figures existed (schema version 7): upload it again", "session",
                     "gpu_utilization", "sm_efficiency", "achieved_occupancy", "tensor_core_fraction", "mfu", "mbu", "coverage",
                     "phases", "operators", "devices");
    return *out ? 0 : ERR_NOMEM;
}

int query_report(db_conn *db, long long id, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 1, &doc);
    if (rc) return rc;
    json_t *draft = json_object_get(doc, "draft");
    json_t *lines = json_deep_copy(draft), *edited = json_array();
    db_stmt *s;
    if ((s = db_prepare(db, "SELECT line, text FROM report_edits WHERE session_id = ?"))) {
        db_bind_int64(s, 1, id);
        while (db_step(s) == DB_ROW) {
            const char *line = (const char *)db_column_text(s, 0);
            json_object_set_new(lines, line, json_string((const char *)db_column_text(s, 1)));
            json_array_append_new(edited, json_string(line));
        }
        db_finalize(s);
    }
    *out = json_pack("{s:o,s:O,s:o,s:O}", "lines", lines, "draft", draft, "edited", edited, "smells", json_object_get(doc, "smells"));
    json_decref(doc);
    return 0;
}

int query_suspects(db_conn *db, long long id, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 1, &doc);
    if (rc) return rc;
    json_t *sus = json_object_get(doc, "suspects");
    if (json_is_object(sus)) {
        *out = json_deep_copy(sus);
        json_object_set_new(*out, "session_id", json_integer(id));
        json_object_set_new(*out, "computed", json_true());
    } else { /* stored before the suspect list existed: nothing to show but that */
        *out = json_pack("{s:I,s:b,s:n,s:b,s:n,s:n,s:[]}", "session_id", (json_int_t)id, "computed", 0, "wall_us", "healthy", 0, "gpu",
                         "steps", "suspects");
    }
    json_decref(doc);
    return *out ? 0 : ERR_NOMEM;
}

/* The breakdown document of a session (new reference; an empty one when it has none). Why
 * COALESCE: one statement reads whichever column holds it, and the report (which may be
 * large) only for a session stored before version 10. */
static int steps_doc(db_conn *db, long long id, json_t **out) {
    db_stmt *s = db_prepare(db, "SELECT steps IS NULL, COALESCE(steps, report) FROM analysis WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s), rc = st == DB_DONE ? ERR_NOTFOUND : st == DB_ROW ? 0 : ERR_DB;
    json_t *doc = rc ? NULL : col_json(s, 1), *b = doc;
    if (!rc && db_column_int64(s, 0)) b = json_object_get(doc, "breakdown"); /* stored before version 10 */
    db_finalize(s);
    if (rc) return rc;
    *out = json_is_object(b) ? json_incref(b)
                             : json_pack("{s:[ssssssss],s:[],s:n,s:[],s:i}", "roles", "kernel", "memcpy", "memset", "communication", "runtime",
                                         "data_loading", "cpu_exec", "other", "steps", "mean", "phases", "dropped_steps", 0);
    json_decref(doc);
    return *out ? 0 : ERR_NOMEM;
}

int query_steps(db_conn *db, long long id, long long offset, long long limit, json_t **out) {
    json_t *b;
    int rc = steps_doc(db, id, &b);
    if (rc) return rc;
    json_t *all = json_object_get(b, "steps"), *page = json_array();
    size_t n = json_array_size(all);
    for (size_t i = (size_t)offset; page && i < n && i - (size_t)offset < (size_t)limit; i++) json_array_append(page, json_array_get(all, i));
    *out = json_copy(b); /* shallow: b may be the report's member; the page replaces its steps */
    json_decref(b);
    if (!*out || !page) {
        json_decref(*out);
        json_decref(page);
        return ERR_NOMEM;
    }
    json_object_set_new(*out, "steps", page);
    if (!json_object_get(*out, "steps_over_cap")) json_object_set_new(*out, "steps_over_cap", json_integer(0));
    json_object_set_new(*out, "total", json_integer((json_int_t)n));
    json_object_set_new(*out, "offset", json_integer(offset));
    json_object_set_new(*out, "limit", json_integer(limit));
    json_object_set_new(*out, "session_id", json_integer(id));
    return 0;
}

static int memory_in(db_conn *db, long long id, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 1, &doc);
    if (rc) return rc;
    json_t *m = json_object_get(doc, "memory");
    *out = json_is_object(m) ? json_deep_copy(m) : json_pack("{s:[]}", "devices");
    json_decref(doc);
    if (!*out) return ERR_NOMEM;
    /* the operators that allocate: key_averages' memory columns, self first */
    json_t *ops = json_array();
    db_stmt *s = NULL;
#define MEM_OPS "SELECT name, kind, calls, self_cuda_mem, cuda_mem, self_cpu_mem, cpu_mem FROM operators" \
                " WHERE session_id = ? AND grouping IN (0, 2) AND (self_cuda_mem > 0 OR self_cpu_mem > 0)" \
                " ORDER BY self_cuda_mem + self_cpu_mem DESC, name"
    if (!(s = db_prepare2(db, MEM_OPS " LIMIT 20", MEM_OPS PG_OP_TIES " LIMIT 20")))
        rc = ERR_DB;
    if (!rc) {
        db_bind_int64(s, 1, id);
        int st;
        while ((st = db_step(s)) == DB_ROW)
            json_array_append_new(ops, json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I}", "name", col_str(s, 0), "kind", col_str(s, 1), "calls",
                                                 db_column_int64(s, 2), "self_cuda_memory_usage_bytes", db_column_int64(s, 3),
                                                 "cuda_memory_usage_bytes", db_column_int64(s, 4), "self_cpu_memory_usage_bytes",
                                                 db_column_int64(s, 5), "cpu_memory_usage_bytes", db_column_int64(s, 6)));
        if (st != DB_DONE) rc = ERR_DB;
    }
    db_finalize(s);
    json_object_set_new(*out, "top_operators", ops);
    json_object_set_new(*out, "session_id", json_integer(id));
    if (rc) json_decref(*out);
    return rc;
}

/* ---- compare ---- */

static json_t *load_side(db_conn *db, long long id, int phases) {
    json_t *m = json_object();
    db_stmt *s;
    /* The rows' order breaks diff's ties (a sort of the keys in this order), so both
     * backends must list them alike. Operators: cuda_total DESC, then SQLite's scan (it
     * reads grouping 0 before 2, the GPU rows: host rows first among equal ones, as their
     * rowids had them before version 6) and PostgreSQL's rn (the same order, schema_pg.sql);
     * PostgreSQL's order without ORDER BY is its plan's, which changed after the migration to
     * version 2. Phases are ordered as /phases lists them, on both: without it SQLite gave
     * rowid order and PostgreSQL its plan's (a nested loop over strings gave the names' heap
     * order; test_api.test_compare_lists_equal_phases_as_phases_does). */
    const char *sql = phases ? "SELECT name, kind, count, total_us FROM phases WHERE session_id = ? ORDER BY total_us DESC, name, kind"
                             : "SELECT name, kind, calls, cuda_total, cpu_total, self_cuda, self_cpu FROM operators"
                               " WHERE session_id = ? AND grouping IN (0, 2)";
    char lite[256], pg[256];
    snprintf(lite, sizeof lite, "%s%s", sql, phases ? "" : " ORDER BY cuda_total DESC");
    snprintf(pg, sizeof pg, "%s%s", sql, phases ? "" : " ORDER BY cuda_total DESC, rn");
    if (!(s = db_prepare2(db, lite, pg))) return m;
    db_bind_int64(s, 1, id);
    while (db_step(s) == DB_ROW) {
        /* sized to fit: kernel names run to kilobytes, and two cut to one prefix were one row */
        const char *k = (const char *)db_column_text(s, 1), *nm = (const char *)db_column_text(s, 0);
        size_t len = strlen(k ? k : "") + strlen(nm ? nm : "") + 2;
        char *key = malloc(len);
        if (!key) break;
        snprintf(key, len, "%s\x1f%s", k ? k : "", nm ? nm : "");
        json_t *v = phases ? json_pack("{s:I,s:f}", "count", db_column_int64(s, 2), "total_us", db_column_double(s, 3))
                           : json_pack("{s:I,s:f,s:f,s:f,s:f}", "calls", db_column_int64(s, 2), "cuda_time_total_us", db_column_double(s, 3),
                                       "cpu_time_total_us", db_column_double(s, 4), "self_cuda_time_total_us", db_column_double(s, 5),
                                       "self_cpu_time_total_us", db_column_double(s, 6));
        json_object_set_new(m, key, v);
        free(key);
    }
    db_finalize(s);
    return m;
}

static double num(const json_t *o, const char *k) { return o ? json_number_value(json_object_get(o, k)) : 0; }

static json_t *rel(double b, double h) { return b != 0 ? json_real((h - b) / b) : json_null(); }

/* A compare row and its sort key: |delta| descending, equal ones in key order (the base's
 * rows as load_side lists them, then the head's new ones). Why the index: qsort is not
 * stable by contract, and unchanged rows (delta 0) are most of a compare. */
typedef struct {
    double key;
    size_t at;
    json_t *row;
} diff_row;

static int by_abs_delta(const void *pa, const void *pb) {
    const diff_row *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? 1 : -1;
    return a->at < b->at ? -1 : a->at > b->at;
}

/* kind\x1ffamily of a row key (kind\x1fname) into out; 0 when the name has no family. */
static int family_key(const char *key, char *out, size_t n) {
    const char *sep = strchr(key, '\x1f');
    char fam[1024];
    if (!sep || !compare_family(sep + 1, fam, sizeof fam)) return 0;
    int w = snprintf(out, n, "%.*s\x1f%s", (int)(sep - key), key, fam);
    return w > 0 && (size_t)w < n;
}

/* {family key: [keys of m that are not in other]}: the one-sided rows of each family. */
static json_t *one_sided(const json_t *m, const json_t *other) {
    json_t *fams = json_object();
    const char *k;
    json_t *v;
    char fk[1100];
    json_object_foreach((json_t *)m, k, v) {
        if (json_object_get(other, k) || !family_key(k, fk, sizeof fk)) continue;
        json_t *list = json_object_get(fams, fk);
        if (!list) json_object_set_new(fams, fk, list = json_array());
        json_array_append_new(list, json_string(k));
    }
    return fams;
}

/* Phases one family apart (compare.h), one only in base and one only in head, are one phase
 * renamed: a DataLoader with workers is _MultiProcessingDataLoaderIter where the
 * single-process one was _SingleProcessDataLoaderIter, and read "appeared" and "disappeared"
 * (issue 51, item 2). The base's value moves under the head's key; the reply's row keeps the
 * base's name as base_name. Only a family with exactly one such phase on each side is paired:
 * two could pair either way. Returns {head key: base name}. */
static json_t *pair_renames(json_t *base, const json_t *head) {
    json_t *renamed = json_object(), *bf = one_sided(base, head), *hf = one_sided(head, base), *bl;
    const char *fk;
    json_object_foreach(bf, fk, bl) {
        json_t *hl = json_object_get(hf, fk);
        if (json_array_size(bl) != 1 || json_array_size(hl) != 1) continue;
        const char *bk = json_string_value(json_array_get(bl, 0)), *hk = json_string_value(json_array_get(hl, 0));
        json_object_set(base, hk, json_object_get(base, bk));
        json_object_set_new(renamed, hk, json_string(strchr(bk, '\x1f') + 1));
        json_object_del(base, bk);
    }
    json_decref(bf);
    json_decref(hf);
    return renamed;
}

static json_t *diff(json_t *base, json_t *head, int phases) {
    json_t *renamed = phases ? pair_renames(base, head) : json_object();
    json_t *keys = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(base, k, v) json_object_set_new(keys, k, json_true());
    json_object_foreach(head, k, v) json_object_set_new(keys, k, json_true());
    size_t n = json_object_size(keys), i = 0;
    diff_row *rows = calloc(n ? n : 1, sizeof *rows);
    json_t *arr = json_array();
    if (!rows || !arr) {
        free(rows);
        json_decref(keys);
        json_decref(arr);
        json_decref(renamed);
        return NULL;
    }
    json_object_foreach(keys, k, v) {
        json_t *b = json_object_get(base, k), *h = json_object_get(head, k);
        const char *sep = strchr(k, '\x1f');
        const char *status = !b ? "appeared" : !h ? "disappeared" : "changed";
        json_t *row = json_pack("{s:s%,s:s,s:s,s:O,s:O}", "kind", k, (size_t)(sep - k), "name", sep + 1, "status", status,
                                "base", b ? b : json_null(), "head", h ? h : json_null());
        json_t *was = json_object_get(renamed, k);
        if (row && was) json_object_set(row, "base_name", was);
        if (phases) {
            double d = num(h, "total_us") - num(b, "total_us");
            json_object_set_new(row, "delta", json_pack("{s:I,s:f,s:f}", "count", (json_int_t)(num(h, "count") - num(b, "count")), "total_us", d, "sort", d));
            json_object_set_new(row, "relative", json_pack("{s:o}", "total", rel(num(b, "total_us"), num(h, "total_us"))));
        } else {
            double dc = num(h, "cuda_time_total_us") - num(b, "cuda_time_total_us");
            double dp = num(h, "cpu_time_total_us") - num(b, "cpu_time_total_us");
            json_object_set_new(row, "delta", json_pack("{s:I,s:f,s:f,s:f}", "calls", (json_int_t)(num(h, "calls") - num(b, "calls")),
                                                        "cuda_time_total_us", dc, "cpu_time_total_us", dp,
                                                        "sort", fabs(dc) > 0 ? fabs(dc) * 1e6 + fabs(dp) : fabs(dp)));
            json_object_set_new(row, "relative", json_pack("{s:o,s:o}", "cuda_time_total", rel(num(b, "cuda_time_total_us"), num(h, "cuda_time_total_us")),
                                                           "cpu_time_total", rel(num(b, "cpu_time_total_us"), num(h, "cpu_time_total_us"))));
        }
        rows[i] = (diff_row){fabs(json_number_value(json_object_get(json_object_get(row, "delta"), "sort"))), i, row};
        i++;
    }
    qsort(rows, n, sizeof *rows, by_abs_delta);
    for (i = 0; i < n; i++) {
        json_object_del(json_object_get(rows[i].row, "delta"), "sort");
        json_array_append_new(arr, rows[i].row);
    }
    free(rows);
    json_decref(keys);
    json_decref(renamed);
    return arr;
}

static int compare_in(db_conn *db, long long base, long long head, json_t **out);

/* What the compare leads with (compare.h): {"steps","memory","hardware"} from each side's
 * GET /steps and GET /memory replies and summaries; NULL with *rc set when a read failed. */
static json_t *compare_lead(db_conn *db, long long base, long long head, const json_t *bs, const json_t *hs, int *rc) {
    json_t *bst = NULL, *hst = NULL, *bm = NULL, *hm = NULL, *lead = NULL;
    *rc = steps_doc(db, base, &bst); /* the whole breakdown, not a page of it */
    if (!*rc) *rc = steps_doc(db, head, &hst);
    if (!*rc) *rc = query_memory(db, base, &bm);
    if (!*rc) *rc = query_memory(db, head, &hm);
    if (!*rc) {
        lead = json_pack("{s:o,s:o,s:o}", "steps", compare_steps(bst, hst), "memory", compare_memory(bm, hm), "hardware",
                         compare_hardware(json_string_value(json_object_get(bs, "hardware")), json_string_value(json_object_get(hs, "hardware"))));
        if (!lead) *rc = ERR_NOMEM;
    }
    json_decref(bst); json_decref(hst); json_decref(bm); json_decref(hm);
    return lead;
}

/* One snapshot for the dozen statements: a session deleted between two of them made a
 * later one find its rows gone, a 500 (issue 43; test_delete_races.py). */
int query_compare(db_conn *db, long long base, long long head, json_t **out) {
    if (db_begin_read(db)) return ERR_DB;
    int rc = compare_in(db, base, head, out);
    db_exec(db, rc ? "ROLLBACK" : "COMMIT");
    return rc;
}

static int compare_in(db_conn *db, long long base, long long head, json_t **out) {
    json_t *bs, *hs;
    int rc = query_session(db, base, &bs);
    if (rc) return rc;
    rc = query_session(db, head, &hs);
    if (rc) { json_decref(bs); return rc; }
    json_t *bo = load_side(db, base, 0), *ho = load_side(db, head, 0), *bp = load_side(db, base, 1), *hp = load_side(db, head, 1);
    /* per step (or per call): what moved beyond the noise floor, the totals beside */
    hist_thresholds t = {.rel = COMPARE_REL, .abs_us = COMPARE_ABS_US, .abs_calls = COMPARE_ABS_CALLS, .abs_share = HIST_ABS_SHARE_DEFAULT,
                         .abs_bytes = HIST_ABS_BYTES_DEFAULT};
    json_t *ps = NULL;
    rc = history_diff(db, base, head, &t, &ps);
    json_t *lead = rc ? NULL : compare_lead(db, base, head, bs, hs, &rc);
    if (rc && ps) json_decref(ps), ps = NULL; /* the lead failed: per_step is not sent */
    *out = json_pack("{s:o,s:o,s:o,s:o,s:o}", "base", bs, "head", hs, "operators", diff(bo, ho, 0), "phases", diff(bp, hp, 1), "per_step",
                     rc ? json_null() : ps);
    if (*out && lead) json_object_update(*out, lead);
    json_decref(lead);
    /* which analysis each side's figures come from (routes.c says when they differ) */
    json_t *av = *out ? reanalysis_versions(db, base, head) : NULL;
    if (*out) json_object_set_new(*out, "analysis_versions", av ? av : json_null());
    json_decref(bo); json_decref(ho); json_decref(bp); json_decref(hp);
    if (!*out && !rc) rc = ERR_NOMEM; /* a diff out of memory */
    if (rc && *out) json_decref(*out), *out = NULL;
    return rc;
}

/* ---- timeline ---- */

static const char *string_of(db_stmt *q, long long id, char *out, size_t n) {
    db_bind_int64(q, 2, id);
    out[0] = '\0';
    if (db_step(q) == DB_ROW) utf8_snprintf(out, n, "%s", db_column_text(q, 0)); /* cut whole characters: json_pack refuses half of one */
    db_reset(q);
    return out;
}

#define TL_MAX_EVENTS 2000
/* A track drawn as buckets also names its wide events ("slices"): those at least this many
 * buckets long, where a name has room (issue 51, item 3: named slices at mid zoom, as
 * Perfetto and tb-profiler's trace view draw them). */
#define TL_SLICE_BUCKETS 8
#define TL_MAX_TRACKS 200 /* tracks drawn on their own; the rest are merged into one */

typedef struct tl_ev {
    double ts, dur;
    uint32_t name, kind;
} tl_ev;

/* Longer first on equal starts, so that a parent precedes the child it encloses. */
static int by_start(const void *pa, const void *pb) {
    const tl_ev *a = pa, *b = pb;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->dur > b->dur ? -1 : a->dur < b->dur;
}

/* The drawn events of one track in [a, b), each with its nesting depth: the number of
 * earlier-starting events on the track still open when it starts (a stack of ends, the
 * same rule as analyze.c's nesting but without its partial-overlap exception, which
 * only matters for attributing time, not for drawing rows). min_dur > 0: only the events
 * at least that long (a parent is never shorter than its child, so their depths stay
 * right among themselves), and only from chunks that span that long (no other chunk can
 * hold one). At most TL_MAX_EVENTS * 2 either way. */
static json_t *track_events(db_conn *db, long long id, int track, double a, double b, double min_dur, db_stmt *names) {
    db_stmt *s;
    json_t *arr = json_array();
    /* No ORDER BY seq: with it SQLite walked the session's primary key, every chunk of
     * every track, for each track (quadratic: 50k tracks took 209 s, issue 22); on
     * event_chunks_track it reads only this track's chunks, and the events are sorted below. */
    if (!(s = db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ?1 AND track = ?2 AND min_ts < ?3 AND max_end > ?4"
                             " AND max_end - min_ts >= ?5"))) return arr;
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, track);
    db_bind_double(s, 3, b);
    db_bind_double(s, 4, a);
    db_bind_double(s, 5, min_dur);
    buf in = {0};
    tl_ev *ev = NULL;
    size_t n = 0, cap = 0;
    while (db_step(s) == DB_ROW && n < TL_MAX_EVENTS * 2) {
        if (chunk_inflate(db_column_blob(s, 0, NULL), (size_t)db_column_bytes(s, 0), &in)) break;
        size_t off = 0;
        chunk_rec r;
        const char *js;
        while (chunk_next(&in, &off, &r, &js) == 1 && n < TL_MAX_EVENTS * 2) {
            if (!chunk_drawn_cls(r.cls) || r.ts >= b || r.ts + r.dur <= a || r.dur < min_dur) continue;
            if (VEC_RESERVE(ev, cap, n + 1, 256)) break;
            ev[n++] = (tl_ev){r.ts, r.dur, r.name, r.kind};
        }
    }
    buf_free(&in);
    db_finalize(s);
    if (n) qsort(ev, n, sizeof *ev, by_start);
    double ends[64];
    int depth = 0;
    char name[512], kind[64];
    for (size_t i = 0; i < n; i++) {
        while (depth > 0 && ev[i].ts >= ends[depth - 1]) depth--;
        json_array_append_new(arr, json_pack("{s:f,s:f,s:s,s:s,s:i}", "ts_us", ev[i].ts, "dur_us", ev[i].dur, "name",
                                             string_of(names, ev[i].name, name, sizeof name), "cat",
                                             string_of(names, ev[i].kind, kind, sizeof kind), "depth", depth));
        if (depth < 64) ends[depth++] = ev[i].ts + ev[i].dur;
    }
    free(ev);
    return arr;
}

/* The exact number of events track_events would draw in [a, b) on a track, all depths,
 * and how many of them are GPU work (kernels, copies, memsets: EV_GPU, not the
 * gpu_user_annotation ranges). Why a scan and not the buckets: a bucket counts the
 * events starting in it, so a window's edges and the events that began before it would
 * be guessed; the chunks of the window are read once. */
/* The merged track's buckets, built from the events themselves (no pyramid blob is
 * unpacked: inflating 48 KiB of zlib per track was most of the cost): busy time per bucket through
 * a difference array (O(1) an event however long), events by the bucket they start in,
 * and the longest of those as its "top". */
typedef struct tl_acc {
    double a, w;
    int nb;
    double *busy, *cover, *topdur;
    uint32_t *count, *top;
} tl_acc;

static void acc_add(tl_acc *c, double ts, double dur, uint32_t name) {
    double fs = (ts - c->a) / c->w, fe = (ts + dur - c->a) / c->w;
    if (fs < 0) fs = 0;
    if (fe > c->nb) fe = c->nb;
    if (fe < fs || fs >= c->nb) return;
    int i0 = (int)fs, i1 = (int)fe; /* i1 == nb: to the window's end */
    if (i0 == i1) {
        c->busy[i0] += (fe - fs) * c->w;
    } else {
        c->busy[i0] += (i0 + 1 - fs) * c->w;
        if (i1 < c->nb) c->busy[i1] += (fe - i1) * c->w;
        c->cover[i0 + 1] += 1; /* buckets i0+1 .. i1-1 are covered whole */
        c->cover[i1] -= 1;
    }
    if (ts >= c->a) {
        c->count[i0]++;
        if (dur > c->topdur[i0]) { c->topdur[i0] = dur; c->top[i0] = name; }
    }
}

/* The counts of a track in [a, b): with inside (the sums of the chunks wholly inside the
 * window, version 5's event_chunks.drawn and .gpu), s need select only the other chunks,
 * which are decoded (a window's edges; chunks stored before version 5). Why: decoding
 * every chunk was 1.1 s of a whole-session /timeline of 1M events. Every event of a
 * chunk with min_ts > a and max_end < b is in the window (ts >= min_ts > a, ts + dur <=
 * max_end < b). Without inside (acc given: the merged track needs each event), s selects
 * every chunk of the window. */
static long long track_count(db_stmt *s, db_stmt *inside, long long id, int track, double a, double b, long long *gpu, tl_acc *acc) {
    long long n = 0;
    *gpu = 0;
    if (!s) return 0;
    if (inside) {
        db_bind_int64(inside, 1, id);
        db_bind_int64(inside, 2, track);
        db_bind_double(inside, 3, b);
        db_bind_double(inside, 4, a);
        if (db_step(inside) == DB_ROW) {
            n = db_column_int64(inside, 0);
            *gpu = db_column_int64(inside, 1);
        }
        db_reset(inside);
    }
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, track);
    db_bind_double(s, 3, b);
    db_bind_double(s, 4, a);
    buf in = {0};
    while (db_step(s) == DB_ROW) {
        if (chunk_inflate(db_column_blob(s, 0, NULL), (size_t)db_column_bytes(s, 0), &in)) break;
        size_t off = 0;
        chunk_rec r;
        const char *js;
        while (chunk_next(&in, &off, &r, &js) == 1) {
            if (!chunk_drawn_cls(r.cls) || r.ts >= b || r.ts + r.dur <= a) continue;
            n++;
            if (r.cls == EV_GPU) (*gpu)++;
            if (acc) acc_add(acc, r.ts, r.dur, r.name);
        }
    }
    buf_free(&in);
    db_reset(s);
    return n;
}

/* A track's bucket records (TL_BLOB_RAW bytes, raw or inflated into scratch: tlblob.h), or
 * NULL when it has none; valid until tb is reset. */
static const unsigned char *track_buckets(db_stmt *tb, long long id, int track, unsigned char *scratch) {
    db_bind_int64(tb, 1, id);
    db_bind_int64(tb, 2, track);
    if (db_step(tb) != DB_ROW) return NULL;
    return tl_blob_unpack(db_column_blob(tb, 0, NULL), (size_t)db_column_bytes(tb, 0), scratch);
}

/* The bucket grid of the stored pyramid: its span [s0, s1] in TL_BUCKETS buckets of w0. */
typedef struct tl_grid { double s0, s1, w0; } tl_grid;

/* One pyramid record (tlblob.h): busy us, event count, top name id. */
static void tl_record(const unsigned char *blob, int k, float *busy, uint32_t *count, uint32_t *top) {
    memcpy(busy, blob + k * 12, 4);
    memcpy(count, blob + k * 12 + 4, 4);
    memcpy(top, blob + k * 12 + 8, 4);
}

/* Events of a track in [a, b], estimated from the pyramid's counts (whole buckets). */
static double tl_estimate(const unsigned char *blob, const tl_grid *g, double a, double b) {
    double est = 0;
    int i0 = (int)floor((a - g->s0) / g->w0), i1 = (int)ceil((b - g->s0) / g->w0);
    for (int k = i0 < 0 ? 0 : i0; k < TL_BUCKETS && k <= i1; k++) {
        float bz;
        uint32_t c, tp;
        tl_record(blob, k, &bz, &c, &tp);
        est += c;
    }
    return est;
}

/* nb buckets over [a, b] resampled from the pyramid: busy share, count, the top name. */
static json_t *tl_resample(const unsigned char *blob, const tl_grid *g, double a, double b, int nb, db_stmt *names) {
    json_t *bk = json_array();
    char name[512];
    double w = (b - a) / nb;
    for (int j = 0; j < nb; j++) {
        double lo = a + j * w, hi = lo + w, busy = 0, topdur = -1;
        uint32_t count = 0, top = 0;
        /* Clamped as doubles first: a far window must not overflow the int (UB). */
        double k0 = floor((lo - g->s0) / g->w0), k1 = floor((hi - g->s0) / g->w0);
        int kfirst = k0 > 0 ? (k0 < TL_BUCKETS ? (int)k0 : TL_BUCKETS) : 0;
        int klast = k1 < TL_BUCKETS ? (k1 > -1 ? (int)k1 : -1) : TL_BUCKETS - 1;
        for (int k = kfirst; k <= klast; k++) {
            double blo = g->s0 + k * g->w0, bhi = blo + g->w0;
            double ov = (hi < bhi ? hi : bhi) - (lo > blo ? lo : blo);
            if (ov <= 0) continue;
            float bz;
            uint32_t c, tp;
            tl_record(blob, k, &bz, &c, &tp);
            busy += bz * (ov / g->w0);
            count += c;
            if (c && bz > topdur) { topdur = bz; top = tp; }
        }
        json_array_append_new(bk, json_pack("{s:f,s:f,s:f,s:I,s:s}", "ts_us", lo, "dur_us", w, "busy", busy / w > 1 ? 1.0 : busy / w,
                                            "count", (json_int_t)count, "top", count ? string_of(names, top, name, sizeof name) : ""));
    }
    return bk;
}

/* The items of arr ({ts_us, dur_us}: phases, gaps) that overlap [a, b], as a new array. */
static json_t *in_window(const json_t *arr, double a, double b) {
    json_t *out = json_array(), *e;
    size_t i;
    json_array_foreach(arr, i, e)
        if (num(e, "ts_us") < b && num(e, "ts_us") + num(e, "dur_us") > a) json_array_append(out, e);
    return out;
}

/* One track of the reply: its events when few are in the window, else resampled buckets,
 * and its exact event count (added to *ngpu, *ncpu); NULL for a track with no timed events. */
static json_t *timeline_track(db_conn *db, long long id, const json_t *t, const tl_grid *g, double a, double b, int nb,
                              db_stmt *tb, db_stmt *names, db_stmt *edge, db_stmt *inside, unsigned char *scratch,
                              long long *ngpu, long long *ncpu) {
    int idx = (int)json_integer_value(json_object_get(t, "index"));
    const unsigned char *blob = track_buckets(tb, id, idx, scratch);
    json_t *o = NULL;
    if (blob) {
        o = json_pack("{s:O,s:O,s:O}", "id", json_object_get(t, "id"), "kind", json_object_get(t, "kind"), "label", json_object_get(t, "label"));
        int few = tl_estimate(blob, g, a, b) <= TL_MAX_EVENTS;
        json_object_set_new(o, "mode", json_string(few ? "events" : "buckets"));
        json_object_set_new(o, few ? "events" : "buckets", few ? track_events(db, id, idx, a, b, 0, names) : tl_resample(blob, g, a, b, nb, names));
        if (!few) json_object_set_new(o, "slices", track_events(db, id, idx, a, b, (b - a) / nb * TL_SLICE_BUCKETS, names));
        long long gpu, n = track_count(edge, inside, id, idx, a, b, &gpu, NULL);
        json_object_set_new(o, "count", json_integer(n));
        if (!strcmp(json_string_value(json_object_get(t, "kind")), "gpu")) *ngpu += gpu;
        else *ncpu += n;
    }
    db_reset(tb);
    return o;
}

/* The tracks beyond TL_MAX_TRACKS, merged into one: their events in acc, their counts. */
typedef struct tl_other {
    tl_acc acc;
    long long tracks, count;
    int gpu_only;
} tl_other;

static int other_init(tl_other *o, double a, double b, int nb) {
    tl_acc *c = &o->acc;
    c->a = a;
    c->nb = nb;
    c->w = (b - a) / nb;
    c->busy = calloc((size_t)nb + 1, sizeof *c->busy);
    c->cover = calloc((size_t)nb + 1, sizeof *c->cover);
    c->topdur = calloc((size_t)nb + 1, sizeof *c->topdur);
    c->count = calloc((size_t)nb + 1, sizeof *c->count);
    c->top = calloc((size_t)nb + 1, sizeof *c->top);
    for (int k = 0; c->topdur && k <= nb; k++) c->topdur[k] = -1;
    o->gpu_only = 1;
    return c->busy && c->cover && c->topdur && c->count && c->top ? 0 : ERR_NOMEM;
}

static void other_free(tl_other *o) {
    free(o->acc.busy); free(o->acc.cover); free(o->acc.topdur); free(o->acc.count); free(o->acc.top);
}

static json_t *other_track(tl_other *o, db_stmt *names) {
    tl_acc *c = &o->acc;
    json_t *bk = json_array();
    char name[512], label[64];
    double cover = 0;
    for (int k = 0; k < c->nb; k++) {
        cover += c->cover[k];
        double busy = c->busy[k] + cover * c->w;
        double share = c->w > 0 ? busy / c->w : 0;
        json_array_append_new(bk, json_pack("{s:f,s:f,s:f,s:I,s:s}", "ts_us", c->a + k * c->w, "dur_us", c->w, "busy", share > 1 ? 1.0 : share,
                                            "count", (json_int_t)c->count[k], "top", c->count[k] ? string_of(names, c->top[k], name, sizeof name) : ""));
    }
    snprintf(label, sizeof label, "%lld other tracks, merged", o->tracks);
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:I,s:I}", "id", o->gpu_only ? "gpu:*:other" : "cpu:*:other", "kind", o->gpu_only ? "gpu" : "cpu",
                     "label", label, "mode", "buckets", "buckets", bk, "count", (json_int_t)o->count, "other", (json_int_t)o->tracks);
}

static int by_est_desc(const void *pa, const void *pb) {
    double x = *(const double *)pa, y = *(const double *)pb;
    return (x < y) - (x > y);
}

/* The events a track must hold to be drawn on its own: the TL_MAX_TRACKS-th most (every
 * track when there are no more than that). */
static double draw_threshold(const double *est, size_t n) {
    if (n <= TL_MAX_TRACKS) return -0.5;
    double *c = malloc(n * sizeof *c);
    if (!c) return -0.5;
    memcpy(c, est, n * sizeof *c);
    qsort(c, n, sizeof *c, by_est_desc);
    double t = c[TL_MAX_TRACKS - 1];
    free(c);
    return t < 0 ? -0.5 : t;
}

static int timeline_in(db_conn *db, long long id, double a, double b, int nb, int (*gone)(void *), void *gone_ctx, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 2, &doc);
    if (rc) return rc;
    tl_grid g = {num(doc, "start_us"), num(doc, "end_us"), 1};
    if (!isfinite(a) || a < g.s0) a = g.s0;
    if (!isfinite(b) || b > g.s1 || b <= a) b = g.s1 > a ? g.s1 : a + 1;
    if (g.s1 - g.s0 > 0) g.w0 = (g.s1 - g.s0) / TL_BUCKETS;
    db_stmt *names = NULL, *tb = NULL, *cnt = NULL, *edge = NULL, *inside = NULL;
    names = db_prepare(db, "SELECT s FROM strings WHERE session_id = ?1 AND id = ?2");
    tb = db_prepare(db, "SELECT data FROM timeline_buckets WHERE session_id = ? AND track = ?");
    cnt = db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ? AND track = ? AND min_ts < ? AND max_end > ?");
    /* track_count's two halves; event_chunks_track covers the first (no chunk is read) */
    inside = db_prepare(db, "SELECT CAST(COALESCE(SUM(drawn), 0) AS BIGINT), CAST(COALESCE(SUM(gpu), 0) AS BIGINT) FROM event_chunks"
                            " WHERE session_id = ?1 AND track = ?2 AND min_ts > ?4 AND max_end < ?3 AND drawn IS NOT NULL");
    edge = db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ?1 AND track = ?2 AND min_ts < ?3 AND max_end > ?4"
                          " AND NOT (min_ts > ?4 AND max_end < ?3 AND drawn IS NOT NULL)");
    unsigned char *scratch = malloc(TL_BLOB_RAW); /* a packed blob's records (tlblob.h) */
    const json_t *all = json_object_get(doc, "tracks");
    size_t ntr = json_array_size(all);
    double *est = calloc(ntr + 1, sizeof *est);
    rc = !names || !tb || !cnt || !inside || !edge ? ERR_DB : !scratch || !est ? ERR_NOMEM : 0;
    json_t *tracks = json_array(), *t;
    size_t i;
    long long ngpu = 0, ncpu = 0;
    tl_other other = {0};
    if (!rc) db_bind_int64(names, 1, id);
    /* Each track costs a few indexed lookups: linear in tracks. At most TL_MAX_TRACKS,
     * those with the most events, are drawn; the rest become one merged track. Between tracks the client is checked: a reply nobody reads
     * stops being computed (ERR_CONFLICT, never cached). */
    if (!rc) json_array_foreach(all, i, t) est[i] = (double)json_integer_value(json_object_get(t, "events"));
    double thr = rc ? 0 : draw_threshold(est, ntr);
    size_t drawn = 0;
    if (!rc) json_array_foreach(all, i, t) {
        if (!(i % 64) && gone && gone(gone_ctx)) { rc = ERR_CONFLICT; break; }
        if (est[i] >= thr && drawn < TL_MAX_TRACKS) {
            json_t *o = timeline_track(db, id, t, &g, a, b, nb, tb, names, edge, inside, scratch, &ngpu, &ncpu);
            if (o) json_array_append_new(tracks, o), drawn++;
            continue;
        }
        if (!other.acc.busy && (rc = other_init(&other, a, b, nb))) break;
        int idx = (int)json_integer_value(json_object_get(t, "index"));
        const char *kind = json_string_value(json_object_get(t, "kind"));
        int isgpu = kind && !strcmp(kind, "gpu");
        long long gpu, n = track_count(cnt, NULL, id, idx, a, b, &gpu, &other.acc);
        if (isgpu) ngpu += gpu;
        else ncpu += n;
        if (!n) continue; /* no timed event in the window: not drawn, like timeline_track's */
        other.tracks++;
        other.count += n;
        other.gpu_only &= isgpu;
    }
    if (!rc && other.tracks) json_array_append_new(tracks, other_track(&other, names));
    db_finalize(names);
    db_finalize(tb);
    db_finalize(cnt);
    db_finalize(inside);
    db_finalize(edge);
    free(scratch);
    free(est);
    other_free(&other);
    if (!rc)
        *out = json_pack("{s:f,s:f,s:I,s:I,s:o,s:o,s:o}", "start_us", a, "end_us", b, "gpu_events", (json_int_t)ngpu, "cpu_events",
                         (json_int_t)ncpu, "tracks", tracks, "phases", in_window(json_object_get(doc, "phases"), a, b), "gaps",
                         in_window(json_object_get(doc, "gaps"), a, b));
    else
        json_decref(tracks);
    json_decref(doc);
    return rc;
}

/* ---- one event, its launch flow, search by name (GET /events) ---- */

/* Where an event is stored: its track, chunk seq and index in the chunk. Search walks
 * events in (ts, track, seq, i) order, so events that start together still have one. */
typedef struct ev_key {
    double ts;
    int track;
    long long seq;
    int i;
} ev_key;

static int key_cmp(const ev_key *x, const ev_key *y) {
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->track != y->track) return x->track < y->track ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* The chunks a statement selects (columns track, seq, min_ts, max_end, data), walked one
 * event at a time; min_ts and max_end are the current chunk's. */
typedef struct ev_walk {
    db_stmt *s;
    buf in;
    size_t off;
    int track, i, open;
    long long seq;
    double min_ts, max_end;
} ev_walk;

static int walk_next(ev_walk *w, chunk_rec *r, const char **js, ev_key *k) {
    for (;;) {
        if (w->open && chunk_next(&w->in, &w->off, r, js) == 1) {
            *k = (ev_key){r->ts, w->track, w->seq, w->i++};
            return 1;
        }
        if (db_step(w->s) != DB_ROW) return 0;
        w->track = db_column_int(w->s, 0);
        w->seq = db_column_int64(w->s, 1);
        w->min_ts = db_column_double(w->s, 2);
        w->max_end = db_column_double(w->s, 3);
        if (chunk_inflate(db_column_blob(w->s, 4, NULL), (size_t)db_column_bytes(w->s, 4), &w->in)) return 0;
        w->off = 0;
        w->i = 0;
        w->open = 1;
    }
}

static void walk_close(ev_walk *w) {
    db_finalize(w->s);
    buf_free(&w->in);
}

/* An event the timeline draws: what track_events keeps. */
static int drawn(const chunk_rec *r) { return chunk_drawn_cls(r->cls); }

/* args.correlation of an event's JSON, 0 when it has none. A text scan, not a parse: the
 * flow lookups test every runtime call or kernel of the chunks they read. */
static long long corr_of(const char *js, size_t len) {
    const char *p = memmem(js, len, "\"correlation\"", 13);
    if (!p) return 0;
    const char *end = js + len;
    p += 13;
    while (p < end && (*p == ' ' || *p == ':')) p++;
    return p < end ? strtoll(p, NULL, 10) : 0;
}

/* A found event: its key, record and JSON (a copy: the walk's buffer moves on). */
typedef struct ev_hit {
    int found;
    ev_key k;
    chunk_rec r;
    char *js;
} ev_hit;

static void hit_set(ev_hit *h, const ev_key *k, const chunk_rec *r, const char *js) {
    free(h->js);
    h->js = strndup(js, r->json_len);
    h->found = h->js != NULL;
    h->k = *k;
    h->r = *r;
}

/* The reply object of a hit (new reference): ref, track, times, name, cat, args. */
static json_t *hit_json(const ev_hit *h, const json_t *tracks, db_stmt *names) {
    char ref[64], name[512], cat[64];
    snprintf(ref, sizeof ref, "%d:%lld:%d", h->k.track, h->k.seq, h->k.i);
    const json_t *t = json_array_get(tracks, (size_t)h->k.track);
    json_t *ev = json_loadb(h->js, h->r.json_len, 0, NULL), *args = json_object_get(ev, "args");
    long long corr = corr_of(h->js, h->r.json_len);
    /* "o", a reference of our own: with "O" an event without args leaked the empty object
     * made for it (ASan, test_hardening.LongNamesQuotedOnce.test_track_ids_are_whole) */
    json_t *o = json_pack("{s:s,s:O,s:O,s:f,s:f,s:s,s:s,s:o,s:o}", "ref", ref, "track", json_object_get(t, "id"), "track_label",
                          json_object_get(t, "label"), "ts_us", h->r.ts, "dur_us", h->r.dur, "name",
                          string_of(names, h->r.name, name, sizeof name), "cat", string_of(names, h->r.kind, cat, sizeof cat), "args",
                          json_is_object(args) ? json_incref(args) : json_object(), "correlation", corr ? json_integer(corr) : json_null());
    json_decref(ev);
    return o;
}

static db_stmt *prep(db_conn *db, const char *sql, long long id) {
    db_stmt *s = NULL;
    if (!(s = db_prepare(db, sql))) return NULL;
    db_bind_int64(s, 1, id);
    return s;
}

#define EV_COLS "SELECT track, seq, min_ts, max_end, data FROM event_chunks WHERE session_id = ?1"
#define FLOW_MAX 64

/* The event on track at ts (and of the duration nearest dur, when dur is a number:
 * an op and its first child start together). */
static int find_at(db_conn *db, long long id, int track, double ts, double dur, ev_hit *h) {
    ev_walk w = {.s = prep(db, EV_COLS " AND track = ?2 AND min_ts <= ?3 AND max_end >= ?3", id)};
    if (!w.s) return ERR_DB;
    db_bind_int64(w.s, 2, track);
    db_bind_double(w.s, 3, ts);
    chunk_rec r;
    const char *js;
    ev_key k;
    double tol = 1e-3 + fabs(ts) * 1e-15; /* the reply printed ts with 17 digits */
    while (walk_next(&w, &r, &js, &k))
        if (drawn(&r) && fabs(r.ts - ts) <= tol && (!h->found || (isfinite(dur) && fabs(r.dur - dur) < fabs(h->r.dur - dur))))
            hit_set(h, &k, &r, js);
    walk_close(&w);
    return 0;
}

/* The event a ref ("TRACK:SEQ:I") names. */
static int find_ref(db_conn *db, long long id, const char *ref, ev_hit *h) {
    int track, i, n = 0;
    long long seq;
    if (sscanf(ref, "%d:%lld:%d%n", &track, &seq, &i, &n) != 3 || ref[n]) return ERR_PARAM;
    ev_walk w = {.s = prep(db, EV_COLS " AND seq = ?2", id)};
    if (!w.s) return ERR_DB;
    db_bind_int64(w.s, 2, seq);
    chunk_rec r;
    const char *js;
    ev_key k;
    while (walk_next(&w, &r, &js, &k))
        if (k.i == i && k.track == track && drawn(&r)) { hit_set(h, &k, &r, js); break; }
    walk_close(&w);
    return 0;
}

/* 1 when id is in the sorted ids. */
static int has_id(const long long *ids, size_t n, long long id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (ids[m] == id) return 1;
        if (ids[m] < id) lo = m + 1;
        else hi = m;
    }
    return 0;
}

/* The string ids whose text contains q (any case), or equals it (exact), sorted. */
static int name_ids(db_conn *db, long long id, const char *q, int exact, long long **ids, size_t *n) {
    /* contains: SQLite's instr is PostgreSQL's strpos (no LIKE: '_' and '%' are common in
     * kernel names and would match any character) */
    db_stmt *s = exact ? db_prepare(db, "SELECT id FROM strings WHERE session_id = ?1 AND s = ?2 ORDER BY id")
                       : db_prepare2(db, "SELECT id FROM strings WHERE session_id = ?1 AND instr(lower(s), lower(?2)) > 0 ORDER BY id",
                                     "SELECT id FROM strings WHERE session_id = ?1 AND strpos(lower(s), lower(?2)) > 0 ORDER BY id");
    if (s) db_bind_int64(s, 1, id);
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    if (!s) return ERR_DB;
    db_bind_text(s, 2, q);
    int rc = 0;
    while (!rc && db_step(s) == DB_ROW) {
        if (VEC_RESERVE(*ids, cap, *n + 1, 64)) rc = ERR_NOMEM;
        else (*ids)[(*n)++] = db_column_int64(s, 0);
    }
    db_finalize(s);
    return rc;
}

/* The next (dir > 0) or previous event after/before cur whose name contains q (is q: exact), in (ts,
 * track, seq, i) order. Why chunks in this order with an early stop: every event of a
 * chunk starts in [min_ts, max_end], so once a chunk starts after the best next match (or
 * ends before the best previous one) no later chunk can hold a better one. */
static int find_name(db_conn *db, long long id, const char *q, int exact, const ev_key *cur, int dir, ev_hit *h) {
    long long *ids;
    size_t nids;
    int rc = name_ids(db, id, q, exact, &ids, &nids);
    if (rc || !nids) { free(ids); return rc; }
    ev_walk w = {.s = prep(db, dir > 0 ? EV_COLS " AND max_end >= ?2 ORDER BY min_ts" : EV_COLS " AND min_ts <= ?2 ORDER BY max_end DESC", id)};
    if (!w.s) { free(ids); return ERR_DB; }
    db_bind_double(w.s, 2, cur->ts);
    chunk_rec r;
    const char *js;
    ev_key k;
    while (walk_next(&w, &r, &js, &k)) {
        if (h->found && (dir > 0 ? w.min_ts > h->k.ts : w.max_end < h->k.ts)) break;
        if (!drawn(&r) || !has_id(ids, nids, r.name) || key_cmp(&k, cur) * dir <= 0) continue;
        if (!h->found || key_cmp(&k, &h->k) * dir < 0) hit_set(h, &k, &r, js);
    }
    walk_close(&w);
    free(ids);
    return 0;
}

/* The other end of an event's launch flow: the runtime call that launched a GPU activity
 * (same correlation, starting no later), or the GPU activities a runtime call launched
 * (starting no earlier; several for a graph launch, FLOW_MAX at most), appended to out. */
static int flow_of(db_conn *db, long long id, const ev_hit *h, const json_t *tracks, db_stmt *names, json_t *out) {
    long long corr = corr_of(h->js, h->r.json_len);
    int to_gpu = h->r.cls == EV_HOST_RT;
    if (!corr || (!to_gpu && h->r.cls != EV_GPU)) return 0;
    ev_walk w = {.s = prep(db, to_gpu ? EV_COLS " AND max_end >= ?2 ORDER BY min_ts" : EV_COLS " AND min_ts <= ?2 ORDER BY min_ts DESC", id)};
    if (!w.s) return ERR_DB;
    db_bind_double(w.s, 2, h->r.ts);
    chunk_rec r;
    const char *js;
    ev_key k;
    int after = 0; /* chunks opened since the first match */
    ev_hit f = {0};
    while (walk_next(&w, &r, &js, &k) && json_array_size(out) < FLOW_MAX) {
        /* the activities of one launch sit in the chunk of the first or the next few */
        if (k.i == 0 && json_array_size(out) && ++after > 2) break;
        if (r.cls != (to_gpu ? EV_GPU : EV_HOST_RT) || corr_of(js, r.json_len) != corr) continue;
        hit_set(&f, &k, &r, js);
        json_array_append_new(out, hit_json(&f, tracks, names));
        if (!to_gpu) break;
    }
    free(f.js);
    walk_close(&w);
    return 0;
}

static int event_in(db_conn *db, long long id, const event_query *q, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 2, &doc);
    if (rc) return rc;
    const json_t *tracks = json_object_get(doc, "tracks");
    ev_hit h = {0};
    if (q->q) {
        ev_key cur = {q->ts_us, -1, -1, -1}; /* from a time: an event starting then is next, not previous */
        if (q->ref && !(rc = find_ref(db, id, q->ref, &h))) {
            if (!h.found) rc = ERR_NOTFOUND;
            cur = h.k;
            h.found = 0;
        }
        if (!rc) rc = find_name(db, id, q->q, q->exact, &cur, q->dir, &h);
    } else if (q->ref) {
        rc = find_ref(db, id, q->ref, &h);
        if (!rc && !h.found) rc = ERR_NOTFOUND;
    } else {
        rc = ERR_NOTFOUND;
        json_t *t;
        size_t i;
        json_array_foreach(tracks, i, t)
            if (!strcmp(json_string_value(json_object_get(t, "id")), q->track)) rc = find_at(db, id, (int)i, q->ts_us, q->dur_us, &h);
        if (!rc && !h.found) rc = ERR_NOTFOUND;
    }
    db_stmt *names = rc ? NULL : prep(db, "SELECT s FROM strings WHERE session_id = ?1 AND id = ?2", id);
    if (!rc && !names) rc = ERR_DB;
    json_t *launched_by = json_array(), *launches = json_array();
    if (!rc && h.found) rc = flow_of(db, id, &h, tracks, names, h.r.cls == EV_HOST_RT ? launches : launched_by);
    if (!rc)
        *out = json_pack("{s:o,s:o,s:o}", "event", h.found ? hit_json(&h, tracks, names) : json_null(), "launched_by",
                         json_array_size(launched_by) ? json_incref(json_array_get(launched_by, 0)) : json_null(), "launches",
                         json_incref(launches));
    json_decref(launched_by);
    json_decref(launches);
    db_finalize(names);
    free(h.js);
    json_decref(doc);
    return rc;
}

/* ---- GPU busy in a window (GET /busy) ---- */

typedef struct iv { double a, b; } iv;

static int by_a(const void *pa, const void *pb) {
    const iv *x = pa, *y = pb;
    return (x->a > y->a) - (x->a < y->a);
}

/* Sorts v and merges it in place into disjoint intervals; returns how many. */
static size_t iv_union(iv *v, size_t n) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, by_a);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].a <= v[m].b) { if (v[i].b > v[m].b) v[m].b = v[i].b; }
        else v[++m] = v[i];
    }
    return m + 1;
}

static double iv_total(const iv *v, size_t n) {
    double t = 0;
    for (size_t i = 0; i < n; i++) t += v[i].b - v[i].a;
    return t;
}

/* The GPU work (kernels, copies, memsets) of one track clipped to [a, b), appended to *v. */
static int track_work(db_conn *db, long long id, int track, double a, double b, iv **v, size_t *n, size_t *cap) {
    ev_walk w = {.s = prep(db, EV_COLS " AND track = ?2 AND min_ts < ?3 AND max_end > ?4", id)};
    if (!w.s) return ERR_DB;
    db_bind_int64(w.s, 2, track);
    db_bind_double(w.s, 3, b);
    db_bind_double(w.s, 4, a);
    chunk_rec r;
    const char *js;
    ev_key k;
    int rc = 0;
    while (!rc && walk_next(&w, &r, &js, &k)) {
        double lo = r.ts > a ? r.ts : a, hi = r.ts + r.dur < b ? r.ts + r.dur : b;
        if (r.cls != EV_GPU || hi <= lo) continue;
        if (VEC_RESERVE(*v, *cap, *n + 1, 1024)) rc = ERR_NOMEM;
        else (*v)[(*n)++] = (iv){lo, hi};
    }
    walk_close(&w);
    return rc;
}

/* nb shares of [a, b): the part of each slice the disjoint intervals v cover. */
static json_t *busy_slices(const iv *v, size_t n, double a, double b, int nb) {
    double w = (b - a) / nb, *cov = calloc((size_t)nb, sizeof *cov);
    json_t *arr = json_array();
    if (!cov) return arr;
    for (size_t i = 0; i < n; i++)
        for (int j = (int)((v[i].a - a) / w); j < nb && a + j * w < v[i].b; j++) {
            double lo = a + j * w, hi = lo + w;
            double ov = (v[i].b < hi ? v[i].b : hi) - (v[i].a > lo ? v[i].a : lo);
            if (j >= 0 && ov > 0) cov[j] += ov;
        }
    for (int j = 0; j < nb; j++) json_array_append_new(arr, json_real(cov[j] / w > 1 ? 1.0 : cov[j] / w));
    free(cov);
    return arr;
}

/* One device: the union of its streams' work, each stream's own, and the slices. */
static int busy_device(db_conn *db, long long id, const json_t *tracks, long long dev, double a, double b, int nb, json_t **out) {
    iv *all = NULL, *v = NULL;
    size_t nall = 0, call = 0, cap = 0;
    json_t *streams = json_array(), *t;
    size_t i;
    int rc = 0;
    json_array_foreach(tracks, i, t) {
        long long d, st;
        if (rc || sscanf(json_string_value(json_object_get(t, "id")), "gpu:%lld:%lld", &d, &st) != 2 || d != dev) continue;
        size_t n = 0;
        rc = track_work(db, id, (int)i, a, b, &v, &n, &cap);
        n = rc ? 0 : iv_union(v, n);
        for (size_t j = 0; !rc && j < n; j++) {
            if (VEC_RESERVE(all, call, nall + 1, 1024)) rc = ERR_NOMEM;
            else all[nall++] = v[j];
        }
        double bz = iv_total(v, n);
        json_array_append_new(streams, json_pack("{s:I,s:f,s:f}", "stream", (json_int_t)st, "busy_us", bz, "busy_fraction", bz / (b - a)));
    }
    nall = iv_union(all, nall);
    double bz = iv_total(all, nall);
    *out = json_pack("{s:I,s:f,s:f,s:o}", "device", (json_int_t)dev, "busy_us", bz, "busy_fraction", bz / (b - a), "streams", streams);
    if (nb > 0) json_object_set_new(*out, "buckets", busy_slices(all, nall, a, b, nb));
    free(all);
    free(v);
    return rc;
}

static int busy_in(db_conn *db, long long id, double a, double b, int nb, json_t **out) {
    json_t *doc;
    int rc = analysis_doc(db, id, 2, &doc);
    if (rc) return rc;
    double s0 = num(doc, "start_us"), s1 = num(doc, "end_us");
    if (!isfinite(a) || a < s0) a = s0;
    if (!isfinite(b) || b > s1 || b <= a) b = s1 > a ? s1 : a + 1;
    const json_t *tracks = json_object_get(doc, "tracks"), *t;
    json_t *devices = json_array(), *seen = json_object();
    size_t i;
    json_array_foreach(tracks, i, t) {
        long long d, st;
        char key[32];
        if (rc || sscanf(json_string_value(json_object_get(t, "id")), "gpu:%lld:%lld", &d, &st) != 2) continue;
        snprintf(key, sizeof key, "%lld", d);
        if (json_object_get(seen, key)) continue;
        json_object_set_new(seen, key, json_true());
        json_t *o = NULL;
        rc = busy_device(db, id, tracks, d, a, b, nb, &o);
        json_array_append_new(devices, o);
    }
    json_decref(seen);
    if (!rc) *out = json_pack("{s:f,s:f,s:f,s:o}", "start_us", a, "end_us", b, "wall_us", b - a, "devices", devices);
    else json_decref(devices);
    json_decref(doc);
    return rc;
}

/* ---- reads of several statements, each in one snapshot ---- */

/* Why: a re-analysis (store_replace_session, issue 52) replaces a session's rows while it
 * is read; a reply read by several statements (rows and their totals, two documents, a
 * timeline's document, buckets and chunks) must not mix the old analysis with the new. */
/* A read already inside a transaction (one query built of others: compare's lead reads the
 * steps and the memory of both sides) is in that snapshot: a second BEGIN would fail. */
#define SNAPSHOT(db, call)                           \
    do {                                             \
        if (db_in_txn(db)) return (call);            \
        if (db_begin_read(db)) return ERR_DB;        \
        int rc_s = (call);                           \
        db_exec((db), rc_s ? "ROLLBACK" : "COMMIT"); \
        return rc_s;                                 \
    } while (0)

int query_operators(db_conn *db, long long id, const char *sort, int limit, const char *kind, int by_shape, json_t **out) {
    SNAPSHOT(db, operators_in(db, id, sort, limit, kind, by_shape, out));
}
int query_kernels(db_conn *db, long long id, const char *sort, int limit, json_t **out) { SNAPSHOT(db, kernels_in(db, id, sort, limit, out)); }
int query_gpu(db_conn *db, long long id, json_t **out) { SNAPSHOT(db, gpu_in(db, id, out)); }
int query_memory(db_conn *db, long long id, json_t **out) { SNAPSHOT(db, memory_in(db, id, out)); }
int query_timeline(db_conn *db, long long id, double a, double b, int nb, int (*gone)(void *), void *gone_ctx, json_t **out) {
    SNAPSHOT(db, timeline_in(db, id, a, b, nb, gone, gone_ctx, out));
}
int query_event(db_conn *db, long long id, const event_query *q, json_t **out) { SNAPSHOT(db, event_in(db, id, q, out)); }
int query_busy(db_conn *db, long long id, double a, double b, int nb, json_t **out) { SNAPSHOT(db, busy_in(db, id, a, b, nb, out)); }
