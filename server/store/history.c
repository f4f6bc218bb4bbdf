/* history.c: named baselines, the regression check against them, and trends over sessions.
 *
 * Owns the baselines / baseline_labels tables and their statements; the rules and the
 * item definitions are in history.h. Reads the ingest tables, never writes them. Must not
 * see MHD types. */
#include "store/history.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/meansd.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"
#include "store/reanalysis.h"

/* ---- small helpers ---- */

static db_stmt *prep(db_conn *db, const char *sql) {
    db_stmt *s = NULL;
    if (!(s = db_prepare(db, sql))) return NULL;
    return s;
}

static json_t *iso_time(long long t) {
    char out[TIMEFMT_LEN];
    return json_string(timefmt_utc(t, 0, out));
}

static json_t *col_text(db_stmt *s, int i) {
    const char *t = (const char *)db_column_text(s, i);
    return t ? json_string(t) : json_null();
}

int history_name_valid(const char *name) {
    size_t n = strlen(name);
    if (n < 1 || n > HIST_NAME_MAX) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static int session_exists(db_conn *db, long long id) {
    db_stmt *s = prep(db, "SELECT 1 FROM sessions WHERE id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s);
    db_finalize(s);
    return st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
}

/* After a row loop: a failed step (SQLITE_CORRUPT, IOERR...) must not read as the end of the
 * rows, or a reply would be a truncated 200 (query.c's rule too). */
static int step_rc(int st) { return st == DB_DONE || st == DB_ROW ? 0 : ERR_DB; }

/* {key: value} of a baseline's labels, new reference; NULL when SQLite failed. */
static json_t *baseline_labels(db_conn *db, const char *name) {
    db_stmt *s = prep(db, "SELECT key, value FROM baseline_labels WHERE name = ? ORDER BY key");
    if (!s) return NULL;
    json_t *o = json_object();
    int st;
    db_bind_text(s, 1, name);
    while ((st = db_step(s)) == DB_ROW)
        json_object_set_new(o, (const char *)db_column_text(s, 0), json_string((const char *)db_column_text(s, 1)));
    db_finalize(s);
    if (step_rc(st)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- baselines ---- */

#define BASELINE_COLS "b.name, b.session_id, s.name, b.created_at, b.updated_at"
#define BASELINE_FROM " FROM baselines b JOIN sessions s ON s.id = b.session_id"

/* One baseline (new reference), or NULL when its labels could not be read. */
static json_t *baseline_row(db_conn *db, db_stmt *s) {
    const char *name = (const char *)db_column_text(s, 0);
    json_t *labels = baseline_labels(db, name);
    if (!labels) return NULL;
    return json_pack("{s:s,s:I,s:o,s:o,s:o,s:o}", "name", name, "session_id", (json_int_t)db_column_int64(s, 1),
                     "session_name", col_text(s, 2), "labels", labels, "created_at", iso_time(db_column_int64(s, 3)),
                     "updated_at", iso_time(db_column_int64(s, 4)));
}

int history_baseline_get(db_conn *db, const char *name, json_t **out) {
    db_stmt *s = prep(db, "SELECT " BASELINE_COLS BASELINE_FROM " WHERE b.name = ?");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, name);
    int st = db_step(s), rc = st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (st == DB_ROW) {
        *out = baseline_row(db, s);
        rc = *out ? 0 : ERR_DB;
    }
    db_finalize(s);
    return rc;
}

/* Runs one write statement: ?1 = name; with id, ?2 = id and ?3 = now (where the statement
 * has a third parameter). 0 or ERR_DB. */
static int exec1(db_conn *db, const char *sql, const char *name, long long id) {
    db_stmt *s = prep(db, sql);
    if (!s) return ERR_DB;
    db_bind_text(s, 1, name);
    if (id) db_bind_int64(s, 2, id);
    if (id) db_bind_int64(s, 3, (long long)time(NULL)); /* ignored by a statement with two */
    int rc = db_step(s) == DB_DONE ? 0 : ERR_DB;
    db_finalize(s);
    return rc;
}

/* The labels of a PUT body, or of the session when there are none in the body. */
static int put_labels(db_conn *db, const char *name, long long session_id, const json_t *labels) {
    if (exec1(db, "DELETE FROM baseline_labels WHERE name = ?1", name, 0)) return ERR_DB;
    if (!labels)
        return exec1(db, "INSERT INTO baseline_labels(name, key, value) SELECT ?1, key, value FROM labels WHERE session_id = ?2",
                     name, session_id);
    db_stmt *s = prep(db, "INSERT INTO baseline_labels(name, key, value) VALUES (?, ?, ?)");
    if (!s) return ERR_DB;
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)labels, k, v) {
        db_bind_text(s, 1, name);
        db_bind_text(s, 2, k);
        db_bind_text(s, 3, json_string_value(v));
        if (db_step(s) != DB_DONE) { rc = ERR_DB; break; }
        db_reset(s);
    }
    db_finalize(s);
    return rc;
}

int history_baseline_put(db_conn *db, const char *name, long long session_id, const json_t *labels, int *created, json_t **out) {
    /* One write transaction: the existence checks and the writes see the same database. */
    if (db_begin_write(db) != 0) return ERR_DB;
    int rc = session_exists(db, session_id);
    json_t *old = NULL;
    if (!rc) {
        int got = history_baseline_get(db, name, &old);
        json_decref(old);
        *created = got == ERR_NOTFOUND;
        if (got && got != ERR_NOTFOUND) rc = got;
    }
    if (!rc) {
        rc = exec1(db, "INSERT INTO baselines(name, session_id, seq, created_at, updated_at)"
                       " VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM baselines), ?3, ?3)"
                       " ON CONFLICT(name) DO UPDATE SET session_id = excluded.session_id, seq = excluded.seq,"
                       " updated_at = excluded.updated_at", name, session_id);
    }
    if (!rc) rc = put_labels(db, name, session_id, labels);
    if (!rc && db_exec(db, "COMMIT") != 0) rc = ERR_DB;
    if (rc) {
        db_exec(db, "ROLLBACK");
        return rc;
    }
    return history_baseline_get(db, name, out);
}

int history_baseline_delete(db_conn *db, const char *name) {
    db_stmt *s = prep(db, "DELETE FROM baselines WHERE name = ?");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, name);
    int rc = db_step(s) == DB_DONE ? (db_changes(db) ? 0 : ERR_NOTFOUND) : ERR_DB;
    db_finalize(s);
    return rc;
}

/* " AND EXISTS (...)" once per label pair, bound from parameter `first` on. */
static int label_clauses(char *sql, size_t len, int o, const char *fmt, const hist_labels *f, int first) {
    for (int i = 0; i < f->n && o < (int)len; i++)
        o += snprintf(sql + o, len - (size_t)o, fmt, first + 2 * i, first + 2 * i + 1);
    return o;
}
static void bind_labels(db_stmt *s, const hist_labels *f, int first) {
    for (int i = 0; i < f->n; i++) {
        db_bind_text(s, first + 2 * i, f->keys[i]);
        db_bind_text(s, first + 2 * i + 1, f->values[i]);
    }
}

int history_baseline_list(db_conn *db, const hist_labels *f, json_t **out) {
    char sql[4096];
    int o = snprintf(sql, sizeof sql, "SELECT " BASELINE_COLS BASELINE_FROM " WHERE 1=1");
    o = label_clauses(sql, sizeof sql, o, " AND EXISTS (SELECT 1 FROM baseline_labels l WHERE l.name = b.name AND l.key = ?%d AND l.value = ?%d)", f, 1);
    snprintf(sql + o, sizeof sql - (size_t)o, " ORDER BY b.seq DESC");
    db_stmt *s = prep(db, sql);
    if (!s) return ERR_DB;
    bind_labels(s, f, 1);
    json_t *arr = json_array(), *row;
    int st, rc = 0;
    while (!rc && (st = db_step(s)) == DB_ROW) {
        if ((row = baseline_row(db, s))) json_array_append_new(arr, row);
        else rc = ERR_DB;
    }
    db_finalize(s);
    if (rc || step_rc(st)) {
        json_decref(arr);
        return ERR_DB;
    }
    *out = json_pack("{s:o}", "baselines", arr);
    return 0;
}

/* The newest baseline whose every label the session has; the session itself is skipped
 * (a session checked against itself is trivially clean). name gets it; ERR_NOTFOUND. */
static int baseline_auto(db_conn *db, long long id, char *name, size_t len) {
    db_stmt *s = prep(db, "SELECT b.name FROM baselines b WHERE b.session_id != ?1 AND NOT EXISTS ("
                               " SELECT 1 FROM baseline_labels bl WHERE bl.name = b.name AND NOT EXISTS ("
                               "  SELECT 1 FROM labels l WHERE l.session_id = ?1 AND l.key = bl.key AND l.value = bl.value))"
                               " ORDER BY b.seq DESC LIMIT 1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s), rc = st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (st == DB_ROW) {
        snprintf(name, len, "%s", db_column_text(s, 0));
        rc = 0;
    }
    db_finalize(s);
    return rc;
}

/* ---- regressions ---- */

enum { U_US, U_CALLS, U_SHARE };
static const char *const unit_names[] = {"us", "calls", "fraction"};

typedef struct metric_def {
    const char *name;
    int col, unit;
} metric_def;

typedef struct kind_def {
    const char *kind;
    const char *sql; /* columns: category, name, then the metrics */
    int nmetrics;
    metric_def m[3];
} kind_def;

/* The order here is the order of the items within a direction. */
static const kind_def kinds[] = {
    {"operator",
     "SELECT kind, name, cuda_total, cpu_total, calls FROM operators WHERE session_id = ? AND grouping IN (0, 2)"
     " AND kind NOT IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'user_annotation', 'gpu_user_annotation')",
     3, {{"cuda_time_total", 2, U_US}, {"cpu_time_total", 3, U_US}, {"calls", 4, U_CALLS}}},
    {"kernel", "SELECT kind, name, total_us, calls FROM kernels WHERE session_id = ?", 2,
     {{"cuda_time_total", 2, U_US}, {"calls", 3, U_CALLS}, {NULL, 0, 0}}},
    {"phase", "SELECT kind, name, total_us, gpu_busy_us, count FROM phases WHERE session_id = ?", 3,
     {{"wall_time_total", 2, U_US}, {"gpu_busy_time", 3, U_US}, {"calls", 4, U_CALLS}}},
};
#define NKINDS (int)(sizeof kinds / sizeof kinds[0])

/* {"category\x1fname": [metric values]} of one session, new reference; NULL on failure. */
static json_t *load_rows(db_conn *db, const kind_def *k, long long id) {
    db_stmt *s = prep(db, k->sql);
    if (!s) return NULL;
    json_t *m = json_object();
    int st;
    db_bind_int64(s, 1, id);
    while ((st = db_step(s)) == DB_ROW) {
        /* Kernel names run to kilobytes (C++ templates): the key is sized to fit. */
        const char *c = (const char *)db_column_text(s, 0), *n = (const char *)db_column_text(s, 1);
        size_t len = strlen(c ? c : "") + strlen(n ? n : "") + 2;
        char *key = malloc(len);
        if (!key) { st = ERR_NOMEM; break; }
        snprintf(key, len, "%s\x1f%s", c ? c : "", n ? n : "");
        json_t *v = json_array();
        for (int i = 0; i < k->nmetrics; i++) json_array_append_new(v, json_real(db_column_double(s, k->m[i].col)));
        json_object_set_new(m, key, v);
        free(key);
    }
    db_finalize(s);
    if (step_rc(st)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static double abs_threshold(const hist_thresholds *t, int unit) {
    return unit == U_US ? t->abs_us : unit == U_CALLS ? t->abs_calls : t->abs_share;
}

/* Whether a change passes both thresholds (history.h); base 0 has no relative test. */
static int moved(const hist_thresholds *t, int unit, double b, double h) {
    double d = fabs(h - b);
    if (!(d > abs_threshold(t, unit))) return 0;
    return b == 0 || d / fabs(b) > t->rel;
}

static json_t *value_of(int unit, double v) { return unit == U_CALLS ? json_integer((json_int_t)llround(v)) : json_real(v); }

/* What the compared values are: per step (both sessions have ProfilerStep#N ranges), else
 * per call. Why not totals: a profile window of 45 steps against one of 37 of the same loop
 * moves every total by 20% without anything getting slower. The totals stay in each item. */
typedef struct basis {
    int per_step;         /* 1: values / steps; 0: times / calls (calls themselves not compared) */
    double base_steps, head_steps;
} basis;

static const char *per_name(const basis *bs, const char *metric, int unit, char *out, size_t n) {
    if (unit == U_SHARE) return metric;
    if (!strcmp(metric, "calls")) snprintf(out, n, "calls_per_step");
    else snprintf(out, n, "%s_per_%s", !strncmp(metric, "wall_time", 9) || !strncmp(metric, "gpu_busy", 8) ? metric
                                        : !strncmp(metric, "cuda_time", 9) ? "cuda_time" : "cpu_time", bs->per_step ? "step" : "call");
    return out;
}

static json_t *item(const char *kind, const char *category, const char *name, const char *metric, int unit, const char *status,
                    double b, double h) {
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "kind", kind, "category", category, "name", name, "metric", metric,
                          "unit", unit_names[unit], "status", status);
    json_object_set_new(o, "base", value_of(unit, b));
    json_object_set_new(o, "head", value_of(unit, h));
    json_object_set_new(o, "delta", value_of(unit, h - b));
    json_object_set_new(o, "relative", b != 0 ? json_real((h - b) / b) : json_null());
    json_object_set_new(o, "direction", json_string(h > b ? "regressed" : "improved"));
    return o;
}

/* The value a metric is compared by (basis), from its total and the row's calls. */
static int per_value(const basis *bs, int unit, double total, double calls, double steps, double *v) {
    if (bs->per_step) { *v = total / steps; return 1; }
    if (unit == U_CALLS) return 0; /* without steps, more calls may be a longer window */
    *v = calls > 0 ? total / calls : 0;
    return 1;
}

static void diff_kind(const kind_def *k, json_t *base, json_t *head, const hist_thresholds *t, const basis *bs, json_t *items) {
    json_t *keys = json_object();
    const char *key;
    json_t *v;
    int calls_col = -1; /* the metric that holds calls */
    for (int i = 0; i < k->nmetrics; i++)
        if (k->m[i].unit == U_CALLS) calls_col = i;
    json_object_foreach(base, key, v) json_object_set_new(keys, key, json_true());
    json_object_foreach(head, key, v) json_object_set_new(keys, key, json_true());
    json_object_foreach(keys, key, v) {
        json_t *b = json_object_get(base, key), *h = json_object_get(head, key);
        const char *sep = strchr(key, '\x1f');
        char category[256], metric[64];
        snprintf(category, sizeof category, "%.*s", (int)(sep - key), key);
        const char *status = !b ? "appeared" : !h ? "disappeared" : "changed";
        double bc = b && calls_col >= 0 ? json_real_value(json_array_get(b, (size_t)calls_col)) : 0;
        double hc = h && calls_col >= 0 ? json_real_value(json_array_get(h, (size_t)calls_col)) : 0;
        for (int i = 0; i < k->nmetrics; i++) {
            double bt = b ? json_real_value(json_array_get(b, (size_t)i)) : 0, ht = h ? json_real_value(json_array_get(h, (size_t)i)) : 0;
            double bv, hv;
            if (!per_value(bs, k->m[i].unit, bt, bc, bs->base_steps, &bv) || !per_value(bs, k->m[i].unit, ht, hc, bs->head_steps, &hv)) continue;
            if (!moved(t, k->m[i].unit, bv, hv)) continue;
            json_t *it = item(k->kind, category, sep + 1, per_name(bs, k->m[i].name, k->m[i].unit, metric, sizeof metric), k->m[i].unit,
                              status, bv, hv);
            json_object_set_new(it, "base_total", value_of(k->m[i].unit, bt));
            json_object_set_new(it, "head_total", value_of(k->m[i].unit, ht));
            json_array_append_new(items, it);
        }
    }
    json_decref(keys);
}

/* Steps of a session: the count of its folded ProfilerStep* phase (0 without). */
static double steps_of(db_conn *db, long long id) {
    db_stmt *s = prep(db, "SELECT count FROM phases WHERE session_id = ? AND name = 'ProfilerStep*' AND kind = 'cpu'");
    double n = 0;
    if (!s) return 0;
    db_bind_int64(s, 1, id);
    if (db_step(s) == DB_ROW) n = db_column_double(s, 0);
    db_finalize(s);
    return n;
}

/* gpu_idle_fraction of a session from its precomputed summary into *v (NAN when unknown).
 * 0 or ERR_DB. */
static int idle_of(db_conn *db, long long id, double *v, char *name, size_t len) {
    db_stmt *s = prep(db, "SELECT summary, name FROM sessions WHERE id = ?");
    *v = NAN;
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s);
    if (st == DB_ROW) {
        json_error_t e;
        const char *txt = (const char *)db_column_text(s, 0);
        json_t *sum = txt ? json_loads(txt, 0, &e) : NULL;
        json_t *x = json_object_get(sum, "gpu_idle_fraction");
        if (json_is_number(x)) *v = json_number_value(x);
        json_decref(sum);
        if (name) snprintf(name, len, "%s", db_column_text(s, 1));
    }
    db_finalize(s);
    return st == DB_ROW ? 0 : ERR_DB;
}

static const char *item_str(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static int rank_of(const json_t *o) {
    const char *k = item_str(o, "kind"), *m = item_str(o, "metric");
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(kinds[i].kind, k))
            for (int j = 0; j < kinds[i].nmetrics; j++) {
                /* the item's metric is this one per step or per call: the same family */
                size_t fam = strcspn(kinds[i].m[j].name, "_");
                if (!strncmp(kinds[i].m[j].name, m, fam)) return 1 + i * 4 + j;
            }
    return 0; /* session */
}

/* Regressed before improved; then kind and metric in kinds[] order; then |delta|, name. */
static int by_item(const void *pa, const void *pb) {
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    int ra = strcmp(item_str(a, "direction"), "regressed") != 0, rb = strcmp(item_str(b, "direction"), "regressed") != 0;
    if (ra != rb) return ra - rb;
    if (rank_of(a) != rank_of(b)) return rank_of(a) - rank_of(b);
    double da = fabs(json_number_value(json_object_get(a, "delta"))), db = fabs(json_number_value(json_object_get(b, "delta")));
    if (da != db) return da < db ? 1 : -1;
    return strcmp(item_str(a, "name"), item_str(b, "name"));
}

static json_t *sorted(json_t *items, int *nreg) {
    size_t n = json_array_size(items);
    json_t **v = calloc(n ? n : 1, sizeof *v);
    json_t *out = json_array();
    *nreg = 0;
    if (!v) return out;
    for (size_t i = 0; i < n; i++) v[i] = json_array_get(items, i);
    qsort(v, n, sizeof *v, by_item);
    for (size_t i = 0; i < n; i++) {
        *nreg += !strcmp(item_str(v[i], "direction"), "regressed");
        json_array_append(out, v[i]);
    }
    free(v);
    return out;
}

/* Every item of head against base (unsorted), new reference; NULL when SQLite failed.
 * *bs says what the values are (per step or per call). */
static json_t *all_items(db_conn *db, long long base, long long head, const hist_thresholds *t, basis *bs) {
    char hname[512] = "";
    double bi, hi;
    if (idle_of(db, base, &bi, NULL, 0) || idle_of(db, head, &hi, hname, sizeof hname)) return NULL;
    bs->base_steps = steps_of(db, base);
    bs->head_steps = steps_of(db, head);
    bs->per_step = bs->base_steps > 0 && bs->head_steps > 0;
    json_t *items = json_array();
    if (!isnan(bi) && !isnan(hi) && moved(t, U_SHARE, bi, hi))
        json_array_append_new(items, item("session", "session", hname, "gpu_idle_fraction", U_SHARE, "changed", bi, hi));
    for (int k = 0; k < NKINDS && items; k++) {
        json_t *b = load_rows(db, &kinds[k], base), *h = load_rows(db, &kinds[k], head);
        if (b && h) diff_kind(&kinds[k], b, h, t, bs, items);
        else { json_decref(items); items = NULL; }
        json_decref(b);
        json_decref(h);
    }
    return items;
}

/* ---- the gate (history.h): the step and each named phase against the steps' noise ---- */

typedef struct step_stats {
    int n;           /* steps in the stored breakdown */
    double mean, sd; /* us; sd: the sample standard deviation, 0 with one step */
} step_stats;

/* The statistics of the steps of a breakdown stored in a session's report (before schema
 * version 10) into st: the one formula of the numbers stored since (lib/meansd.h). */
static int step_stats_parsed(const char *report, step_stats *st) {
    json_error_t e;
    json_t *doc = report ? json_loads(report, 0, &e) : NULL, *x;
    json_t *steps = json_object_get(json_object_get(doc, "breakdown"), "steps");
    size_t i, n = json_array_size(steps);
    double *d = n ? malloc(n * sizeof *d) : NULL;
    if (n && !d) {
        json_decref(doc);
        return ERR_NOMEM;
    }
    json_array_foreach(steps, i, x) d[i] = json_number_value(json_object_get(x, "dur_us"));
    mean_sd(d, n, &st->mean, &st->sd);
    st->n = n > INT32_MAX ? INT32_MAX : (int)n;
    free(d);
    json_decref(doc);
    return 0;
}

/* The step statistics of a session's step breakdown (GET /steps): *st, n 0 when it has none
 * (or was stored before the breakdown existed). 0 or ERR_DB. Why the breakdown's steps: they
 * are the steps the page draws and tb-profiler counts (ProfilerStep#N extended to its GPU
 * work), one definition on every surface. Why numbers stored at ingest (analysis.step_*,
 * version 10): parsing the breakdown for them took 14-17 s of CPU a call at 1M steps (issue
 * 50); a session stored before has them only in its report, parsed then. */
static int step_stats_of(db_conn *db, long long id, step_stats *st) {
    memset(st, 0, sizeof *st);
    db_stmt *s = prep(db, "SELECT step_count, step_mean_us, step_sd_us, CASE WHEN step_count IS NULL THEN report END"
                          " FROM analysis WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int r = db_step(s), rc = r == DB_ROW || r == DB_DONE ? 0 : ERR_DB;
    if (r == DB_ROW && !db_column_is_null(s, 0)) {
        long long n = db_column_int64(s, 0);
        st->n = n > INT32_MAX ? INT32_MAX : (int)n;
        st->mean = db_column_double(s, 1);
        st->sd = db_column_double(s, 2);
    } else if (r == DB_ROW) {
        rc = step_stats_parsed((const char *)db_column_text(s, 3), st);
    }
    db_finalize(s);
    return rc;
}

/* The noise floor of two step means (history.h). Invariant: both sides have steps. */
static double noise_of(const hist_thresholds *t, const step_stats *b, const step_stats *h) {
    assert(b->n > 0 && h->n > 0);
    double vb = b->n > 1 ? b->sd * b->sd : h->n > 1 ? h->sd * h->sd : 0;
    double vh = h->n > 1 ? h->sd * h->sd : vb;
    double z = HIST_NOISE_Z * sqrt(vb / b->n + vh / h->n);
    return z > t->abs_us ? z : t->abs_us;
}

static const char *judge(double b, double h, double noise) {
    return h - b > noise ? "regressed" : b - h > noise ? "improved" : "unchanged";
}

static json_t *stats_json(const step_stats *st) {
    return json_pack("{s:i,s:f,s:f}", "count", st->n, "mean_us", st->mean, "stdev_us", st->sd);
}

/* {"kind\x1fname": total_us} of the named phases (ProfilerStep* aside: it is the step). */
static json_t *phase_totals(db_conn *db, long long id) {
    db_stmt *s = prep(db, "SELECT kind, name, total_us FROM phases WHERE session_id = ? AND name != 'ProfilerStep*'");
    if (!s) return NULL;
    json_t *m = json_object();
    int st;
    db_bind_int64(s, 1, id);
    while ((st = db_step(s)) == DB_ROW) {
        const char *c = (const char *)db_column_text(s, 0), *n = (const char *)db_column_text(s, 1);
        buf k = {0};
        if (buf_printf(&k, "%s\x1f%s", c ? c : "", n ? n : "")) {
            buf_free(&k);
            st = ERR_NOMEM;
            break;
        }
        json_object_set_new(m, k.p, json_real(db_column_double(s, 2)));
        buf_free(&k);
    }
    db_finalize(s);
    if (step_rc(st)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* Regressed before improved, then |delta_us|, then name. */
static int by_phase(const void *pa, const void *pb) {
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    int ra = strcmp(item_str(a, "direction"), "regressed") != 0, rb = strcmp(item_str(b, "direction"), "regressed") != 0;
    if (ra != rb) return ra - rb;
    double da = fabs(json_number_value(json_object_get(a, "delta_us"))), db = fabs(json_number_value(json_object_get(b, "delta_us")));
    if (da != db) return da < db ? 1 : -1;
    return strcmp(item_str(a, "name"), item_str(b, "name"));
}

/* The named phases whose time per step moved past noise, regressed first (then by |delta|),
 * into arr; *nreg: how many regressed. 0, ERR_NOMEM or ERR_DB. */
static int phase_verdicts(db_conn *db, long long base, long long head, const basis *bs, double noise, json_t *arr, int *nreg) {
    json_t *b = phase_totals(db, base), *h = b ? phase_totals(db, head) : NULL, *keys = json_object(), *v;
    const char *key;
    *nreg = 0;
    if (!b || !h) {
        json_decref(b);
        json_decref(h);
        json_decref(keys);
        return ERR_DB;
    }
    json_object_foreach(b, key, v) json_object_set_new(keys, key, json_true());
    json_object_foreach(h, key, v) json_object_set_new(keys, key, json_true());
    json_t *moved_ = json_array();
    json_object_foreach(keys, key, v) {
        json_t *bv = json_object_get(b, key), *hv = json_object_get(h, key);
        double bp = bv ? json_real_value(bv) / bs->base_steps : 0, hp = hv ? json_real_value(hv) / bs->head_steps : 0;
        const char *dir = judge(bp, hp, noise), *sep = strchr(key, '\x1f');
        if (!strcmp(dir, "unchanged")) continue;
        *nreg += !strcmp(dir, "regressed");
        json_t *o = json_pack("{s:s%,s:s,s:s,s:f,s:f,s:f,s:o,s:s}", "kind", key, (size_t)(sep - key), "name", sep + 1, "status",
                              !bv ? "appeared" : !hv ? "disappeared" : "changed", "base_per_step_us", bp, "head_per_step_us", hp,
                              "delta_us", hp - bp, "relative", bp != 0 ? json_real((hp - bp) / bp) : json_null(), "direction", dir);
        json_array_append_new(moved_, o);
    }
    /* regressed first, then the larger move: the reader sees the worst first */
    size_t n = json_array_size(moved_);
    json_t **v2 = calloc(n ? n : 1, sizeof *v2);
    for (size_t i = 0; v2 && i < n; i++) v2[i] = json_array_get(moved_, i);
    if (v2 && n) qsort(v2, n, sizeof *v2, by_phase);
    for (size_t i = 0; v2 && i < n; i++) json_array_append(arr, v2[i]);
    int rc = v2 ? 0 : ERR_NOMEM;
    free(v2);
    json_decref(moved_);
    json_decref(keys);
    json_decref(b);
    json_decref(h);
    return rc;
}

/* The largest allocated peak over a session's GPU devices (its stored memory document,
 * GET /memory; the "cpu" device aside) in *peak, -1 when it has none. 0 or ERR_DB. */
static int memory_peak_of(db_conn *db, long long id, double *peak) {
    *peak = -1;
    db_stmt *s = prep(db, "SELECT report FROM analysis WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int r = db_step(s);
    if (r == DB_ROW) {
        json_error_t e;
        const char *txt = (const char *)db_column_text(s, 0);
        json_t *doc = txt ? json_loads(txt, 0, &e) : NULL, *d;
        size_t i;
        json_array_foreach(json_object_get(json_object_get(doc, "memory"), "devices"), i, d) {
            const char *dev = json_string_value(json_object_get(d, "device"));
            double p = json_number_value(json_object_get(d, "peak_bytes"));
            if (dev && strcmp(dev, "cpu") && p > *peak) *peak = p;
        }
        json_decref(doc);
    }
    db_finalize(s);
    return r == DB_ROW || r == DB_DONE ? 0 : ERR_DB;
}

/* The memory gate's verdict (history.h): {"base_peak_bytes","head_peak_bytes","delta_bytes",
 * "relative","direction"}, or null when a side has no GPU memory events; *regressed set when it
 * rose past both thresholds. NULL when SQLite failed. */
static json_t *memory_verdict(db_conn *db, long long base, long long head, const hist_thresholds *t, int *regressed) {
    double b, h;
    *regressed = 0;
    if (memory_peak_of(db, base, &b) || memory_peak_of(db, head, &h)) return NULL;
    if (b < 0 || h < 0) return json_null();
    double d = h - b;
    int past = fabs(d) > t->abs_bytes && (b == 0 || fabs(d) / b > t->rel);
    const char *dir = !past ? "unchanged" : d > 0 ? "regressed" : "improved";
    *regressed = d > 0 && past;
    return json_pack("{s:f,s:f,s:f,s:o,s:s}", "base_peak_bytes", b, "head_peak_bytes", h, "delta_bytes", d, "relative",
                     b > 0 ? json_real(d / b) : json_null(), "direction", dir);
}

/* Adds the memory gate's verdict to v (gate "memory" only): "memory", the why's last clause,
 * and "regressed" when the peak regressed. 0 or ERR_DB. */
static int add_memory_verdict(db_conn *db, long long base, long long head, const hist_thresholds *t, json_t *v) {
    if (!t->memory) return 0;
    int reg = 0;
    json_t *m = memory_verdict(db, base, head, t, &reg);
    if (!m) return ERR_DB;
    char why[1200];
    const char *was = json_string_value(json_object_get(v, "why"));
    if (json_is_null(m))
        utf8_snprintf(why, sizeof why, "%s; memory: not judged (not both sessions have GPU memory events)", was ? was : "");
    else {
        const json_t *r = json_object_get(m, "relative");
        utf8_snprintf(why, sizeof why, "%s; memory peak %.1f MiB against %.1f MiB (%+.1f%%; thresholds %.0f%% and %.1f MiB): %s",
                      was ? was : "", json_number_value(json_object_get(m, "head_peak_bytes")) / 1048576.0,
                      json_number_value(json_object_get(m, "base_peak_bytes")) / 1048576.0, json_is_number(r) ? json_number_value(r) * 100 : 0.0,
                      t->rel * 100, t->abs_bytes / 1048576.0, json_string_value(json_object_get(m, "direction")));
    }
    json_object_set_new(v, "why", json_string(why));
    json_object_set_new(v, "memory", m);
    if (reg) json_object_set_new(v, "regressed", json_true());
    return 0;
}

/* The gate's verdict on head against base (history.h) as {"gate","steps","noise_us",
 * "phases","regressed","why"}; nitems_reg: the items that regressed. NULL when SQLite failed. */
static json_t *verdict_of(db_conn *db, long long base, long long head, const hist_thresholds *t, const basis *bs, int nitems_reg) {
    step_stats sb, sh;
    if (step_stats_of(db, base, &sb) || step_stats_of(db, head, &sh)) return NULL;
    const char *gate = t->strict ? "operators" : t->memory ? "memory" : "steps";
    char why[1024], t1[32], t2[32], t3[32];
    int o = 0;
    if (sb.n == 0 || sh.n == 0 || !bs->per_step) {
        /* No steps to feel: the items are all there is to judge by. */
        utf8_snprintf(why, sizeof why, "not both sessions have steps (%d and %d): judged by the operator, kernel, phase and GPU idle "
                                  "movements past the thresholds, %d regressed", sb.n, sh.n, nitems_reg);
        json_t *v = json_pack("{s:s,s:n,s:n,s:[],s:b,s:s}", "gate", gate, "steps", "noise_us", "phases", "regressed", nitems_reg > 0, "why", why);
        if (v && add_memory_verdict(db, base, head, t, v)) json_decref(v), v = NULL;
        return v;
    }
    double noise = noise_of(t, &sb, &sh);
    const char *dir = judge(sb.mean, sh.mean, noise);
    json_t *phases = json_array();
    int nph = 0;
    if (phase_verdicts(db, base, head, bs, noise, phases, &nph)) {
        json_decref(phases);
        return NULL;
    }
    int reg = !strcmp(dir, "regressed") || nph > 0 || (t->strict && nitems_reg > 0);
    o = utf8_snprintf(why, sizeof why, "step mean %s against %s (%+.1f%%), ", timefmt_us(sh.mean, t1, sizeof t1),
                 timefmt_us(sb.mean, t2, sizeof t2), sb.mean > 0 ? (sh.mean - sb.mean) / sb.mean * 100 : 0.0);
    o += utf8_snprintf(why + o, sizeof why - (size_t)o, "%s the noise floor of %s: %s", strcmp(dir, "unchanged") ? "beyond" : "within",
                  timefmt_us(noise, t3, sizeof t3), dir);
    if (nph && o < (int)sizeof why) {
        const json_t *p = json_array_get(phases, 0);
        o += utf8_snprintf(why + o, sizeof why - (size_t)o, "; %d named phase%s regressed, first %.200s (%s per step more)", nph, nph == 1 ? "" : "s",
                      item_str(p, "name"), timefmt_us(json_number_value(json_object_get(p, "delta_us")), t1, sizeof t1));
    }
    if (o < (int)sizeof why)
        o += utf8_snprintf(why + o, sizeof why - (size_t)o, t->strict ? "; gate operators: %d item%s regressed" : "; %d item%s regressed past the thresholds (the explanation, not the verdict)",
                      nitems_reg, nitems_reg == 1 ? "" : "s");
    json_t *steps = json_pack("{s:o,s:o,s:f,s:o,s:s}", "base", stats_json(&sb), "head", stats_json(&sh), "delta_us", sh.mean - sb.mean,
                              "relative", sb.mean > 0 ? json_real((sh.mean - sb.mean) / sb.mean) : json_null(), "direction", dir);
    json_t *v = json_pack("{s:s,s:o,s:f,s:o,s:b,s:s}", "gate", gate, "steps", steps, "noise_us", noise, "phases", phases, "regressed", reg, "why", why);
    if (v && add_memory_verdict(db, base, head, t, v)) json_decref(v), v = NULL;
    return v;
}

static json_t *basis_json(const basis *bs) {
    return json_pack("{s:s,s:f,s:f}", "basis", bs->per_step ? "per_step" : "per_call", "base_steps", bs->base_steps, "head_steps",
                     bs->head_steps);
}

int history_diff(db_conn *db, long long base, long long head, const hist_thresholds *t, json_t **out) {
    basis bs;
    int nreg = 0;
    json_t *raw = all_items(db, base, head, t, &bs);
    if (!raw) return ERR_DB;
    json_t *items = sorted(raw, &nreg), *regs = json_array(), *it;
    size_t i;
    json_decref(raw);
    json_array_foreach(items, i, it)
        if (!strcmp(item_str(it, "direction"), "regressed")) json_array_append(regs, it);
    json_t *v = verdict_of(db, base, head, t, &bs, nreg);
    if (!v) {
        json_decref(items);
        json_decref(regs);
        return ERR_DB;
    }
    *out = basis_json(&bs);
    json_object_set_new(*out, "thresholds", json_pack("{s:f,s:f,s:f,s:f}", "rel", t->rel, "abs_us", t->abs_us, "abs_calls", t->abs_calls,
                                                      "abs_share", t->abs_share));
    json_object_set_new(*out, "regressions", regs);
    json_object_set_new(*out, "items", items);
    json_object_set_new(*out, "verdict", v);
    return 0;
}

static int regressions_in(db_conn *db, long long id, const char *name, const hist_thresholds *t, json_t **out, char *msg,
                          size_t msglen);

/* One snapshot for every statement: the session (or the baseline's) deleted between two of
 * them made a later one find its rows gone, a 500 (issue 43; test_delete_races.py). */
int history_regressions(db_conn *db, long long id, const char *name, const hist_thresholds *t, json_t **out, char *msg, size_t msglen) {
    if (db_begin_read(db)) return ERR_DB;
    int rc = regressions_in(db, id, name, t, out, msg, msglen);
    db_exec(db, rc ? "ROLLBACK" : "COMMIT");
    return rc;
}

static int regressions_in(db_conn *db, long long id, const char *name, const hist_thresholds *t, json_t **out, char *msg,
                          size_t msglen) {
    int rc = session_exists(db, id);
    if (rc) {
        if (rc == ERR_NOTFOUND) snprintf(msg, msglen, "no session %lld", id);
        return rc;
    }
    char picked[HIST_NAME_MAX + 1];
    if (!name) {
        rc = baseline_auto(db, id, picked, sizeof picked);
        if (rc == ERR_NOTFOUND) {
            snprintf(msg, msglen, "no baseline matches the labels of session %lld; name one with ?baseline=NAME "
                                  "(PUT /api/v1/baselines/{name} creates one)", id);
            return rc;
        }
        if (rc) return rc;
        name = picked;
    }
    json_t *bl = NULL;
    rc = history_baseline_get(db, name, &bl);
    if (rc) {
        if (rc == ERR_NOTFOUND) snprintf(msg, msglen, "no baseline '%s'", name);
        return rc;
    }
    long long base = json_integer_value(json_object_get(bl, "session_id"));
    int nreg = 0;
    basis bs;
    json_t *raw = all_items(db, base, id, t, &bs);
    if (!raw) {
        json_decref(bl);
        return ERR_DB;
    }
    json_t *items = sorted(raw, &nreg);
    json_decref(raw);
    json_t *v = verdict_of(db, base, id, t, &bs, nreg);
    if (!v) {
        json_decref(items);
        json_decref(bl);
        return ERR_DB;
    }
    /* The gate decides (history.h); the items are what moved, the explanation. */
    int regressed = json_is_true(json_object_get(v, "regressed"));
    *out = json_pack("{s:b,s:s,s:O,s:I,s:I,s:b,s:{s:f,s:f,s:f,s:f},s:{s:i,s:i},s:o}", "regressed", regressed, "baseline", name,
                     "baseline_labels", json_object_get(bl, "labels"), "base_session_id", (json_int_t)base, "head_session_id",
                     (json_int_t)id, "auto_picked", name == picked, "thresholds", "rel", t->rel, "abs_us", t->abs_us, "abs_calls",
                     t->abs_calls, "abs_share", t->abs_share, "counts", "regressed", nreg, "improved",
                     (int)json_array_size(items) - nreg, "items", items);
    json_t *bj = basis_json(&bs);
    json_object_update(*out, bj);
    json_decref(bj);
    json_object_set(*out, "gate", json_object_get(v, "gate"));
    json_object_set_new(*out, "verdict", v);
    json_t *av = reanalysis_versions(db, base, id); /* which analysis each side's figures come from (routes.c) */
    json_object_set_new(*out, "analysis_versions", av ? av : json_null());
    json_decref(bl);
    return 0;
}

/* ---- trends ---- */

static const struct { const char *name, *col; } trend_metrics[] = {
    {"cuda_time_total", "cuda_total"}, {"cpu_time_total", "cpu_total"}, {"calls", "calls"},
    {"self_cuda_time_total", "self_cuda"}, {"gpu_idle_fraction", NULL}, {"gpu_utilization", NULL}, {"busy_fraction_of_wall", NULL},
    {NULL, NULL}};

int history_trend_metric(const char *metric, int *needs_op) {
    for (int i = 0; trend_metrics[i].name; i++)
        if (!strcmp(metric, trend_metrics[i].name)) {
            *needs_op = trend_metrics[i].col != NULL;
            return 1;
        }
    return 0;
}
const char *history_trend_metrics(void) {
    return "cuda_time_total, cpu_time_total, calls, self_cuda_time_total, gpu_idle_fraction, gpu_utilization, busy_fraction_of_wall";
}

/* The point's value: the operator column (5), or from the summary (4): the idle fraction,
 * busy_fraction_of_wall (1 - idle), or gpu_utilization, the headline (tb-profiler's, as
 * GET /gpu and /efficiency: null for sessions stored before the summary kept it). */
static json_t *trend_value(db_stmt *s, const char *metric, int needs_op) {
    if (needs_op) {
        if (db_column_is_null(s, 4)) return json_null();
        return !strcmp(metric, "calls") ? json_integer(db_column_int64(s, 4)) : json_real(db_column_double(s, 4));
    }
    json_error_t e;
    const char *txt = (const char *)db_column_text(s, 3);
    int head = !strcmp(metric, "gpu_utilization");
    json_t *sum = txt ? json_loads(txt, 0, &e) : NULL, *x = json_object_get(sum, head ? "gpu_utilization" : "gpu_idle_fraction");
    json_t *v = !json_is_number(x) ? json_null()
                : !strcmp(metric, "busy_fraction_of_wall") ? json_real(1.0 - json_number_value(x)) : json_real(json_number_value(x));
    json_decref(sum);
    return v;
}

static db_stmt *trend_stmt(db_conn *db, const hist_trend_query *q, const char *col) {
    char sql[4096];
    /* col comes from trend_metrics[], never from the request. Without an operator the
     * subquery is a constant NULL. Several kinds of one name: the one with most CUDA time. */
#define TREND_OP " FROM operators o WHERE o.session_id = s.id AND o.grouping IN (0, 2) AND o.name = ?1" \
                 " AND (CAST(?2 AS TEXT) IS NULL OR o.kind = ?2) ORDER BY o.cuda_total DESC, o.cpu_total DESC, o.kind LIMIT 1)"
    int o = snprintf(sql, sizeof sql,
                     "SELECT s.id, s.created_at, s.name, s.summary, %s%s%s, (SELECT p.count FROM phases p WHERE p.session_id = s.id"
                     " AND p.name = 'ProfilerStep*' AND p.kind = 'cpu'), %s FROM sessions s WHERE 1=1",
                     col ? "(SELECT o." : "NULL", col ? col : "", col ? TREND_OP : "", col ? "(SELECT o.calls" TREND_OP : "NULL");
    o = label_clauses(sql, sizeof sql, o, " AND EXISTS (SELECT 1 FROM labels l WHERE l.session_id = s.id AND l.key = ?%d AND l.value = ?%d)",
                      &q->labels, 4);
    snprintf(sql + o, sizeof sql - (size_t)o, " ORDER BY s.id DESC LIMIT ?3");
    db_stmt *s = prep(db, sql);
    if (!s) return NULL;
    if (q->op) db_bind_text(s, 1, q->op);
    if (q->kind) db_bind_text(s, 2, q->kind);
    db_bind_int64(s, 3, q->limit);
    bind_labels(s, &q->labels, 4);
    return s;
}

int history_trends(db_conn *db, const hist_trend_query *q, json_t **out) {
    int needs_op = 0;
    if (!history_trend_metric(q->metric, &needs_op) || (needs_op && !q->op)) return ERR_INVALID;
    const char *col = NULL;
    for (int i = 0; trend_metrics[i].name; i++)
        if (!strcmp(q->metric, trend_metrics[i].name)) col = trend_metrics[i].col;
    db_stmt *s = trend_stmt(db, q, col);
    if (!s) return ERR_DB;
    json_t *newest_first = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        json_t *v = trend_value(s, q->metric, needs_op);
        /* beside the total: per step (the session has ProfilerStep#N ranges) and per call */
        double steps = db_column_double(s, 5), calls = db_column_double(s, 6), x = json_number_value(v);
        int total = needs_op && json_is_number(v);
        json_array_append_new(newest_first, json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "session_id", (json_int_t)db_column_int64(s, 0),
                                                      "created_at", iso_time(db_column_int64(s, 1)), "name", col_text(s, 2),
                                                      "value", v, "steps", steps > 0 ? json_integer((json_int_t)steps) : json_null(),
                                                      "per_step", total && steps > 0 ? json_real(x / steps) : json_null(), "per_call",
                                                      total && calls > 0 && strcmp(q->metric, "calls") ? json_real(x / calls) : json_null()));
    }
    db_finalize(s);
    if (step_rc(st)) {
        json_decref(newest_first);
        return ERR_DB;
    }
    json_t *points = json_array(), *labels = json_object();
    for (size_t i = json_array_size(newest_first); i-- > 0;) json_array_append(points, json_array_get(newest_first, i));
    json_decref(newest_first);
    for (int i = 0; i < q->labels.n; i++) json_object_set_new(labels, q->labels.keys[i], json_string(q->labels.values[i]));
    *out = json_pack("{s:s,s:o,s:o,s:o,s:o}", "metric", q->metric, "operator", needs_op ? json_string(q->op) : json_null(), "kind",
                     needs_op && q->kind ? json_string(q->kind) : json_null(), "labels", labels, "points", points);
    return 0;
}
