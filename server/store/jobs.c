/* jobs.c: the ranks of a job side by side (jobs.h). Owns the SQL that reads a job's
 * sessions; writes nothing. */
#include "store/jobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "store/colls.h"

#define JOB_PHASES_MAX 10 /* phases compared across ranks */

static db_stmt *prep(db_conn *db, const char *sql) {
    db_stmt *s = NULL;
    return (s = db_prepare(db, sql)) ? s : NULL;
}

/* sql with each "%s" (one or two of them) the rank as a number the way SQLite's CAST(x AS
 * INTEGER) reads it (its leading integer, 0 for none, NULL for NULL, NULLs first): on
 * PostgreSQL fp_int() (schema_pg.sql) with NULLS FIRST, since a plain cast fails on "abc". */
static db_stmt *prep_rank(db_conn *db, const char *sql, const char *col) {
    char buf[1536], expr[96];
    if (db_kind_of(db) == DB_PG) snprintf(expr, sizeof expr, "fp_int(%s) NULLS FIRST", col);
    else snprintf(expr, sizeof expr, "CAST(%s AS INTEGER)", col);
    if (snprintf(buf, sizeof buf, sql, expr, expr) >= (int)sizeof buf) return NULL;
    return prep(db, buf);
}

int jobs_list(db_conn *db, json_t **out) {
    db_stmt *s = prep(db,
        "SELECT l.value, COUNT(*), COUNT(DISTINCT r.value), MAX(l.session_id) FROM labels l"
        " LEFT JOIN labels r ON r.session_id = l.session_id AND r.key = 'rank'"
        " WHERE l.key = 'job' AND l.value != '' GROUP BY l.value ORDER BY MAX(l.session_id) DESC LIMIT ?1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, JOBS_LIST_MAX);
    json_t *jobs = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW)
        json_array_append_new(jobs, json_pack("{s:s,s:I,s:I,s:I}", "job", (const char *)db_column_text(s, 0), "sessions",
                                              db_column_int64(s, 1), "ranks", db_column_int64(s, 2), "newest_session_id",
                                              db_column_int64(s, 3)));
    db_finalize(s);
    if (st != DB_DONE) {
        json_decref(jobs);
        return ERR_DB;
    }
    *out = json_pack("{s:o}", "jobs", jobs);
    return 0;
}

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* A rank's steps when it has no ProfilerStep#N: its most repeated CPU range (>= 2). */
static json_t *range_steps(db_stmt *ph, long long id) {
    db_bind_int64(ph, 1, id);
    json_t *o = json_null();
    if (db_step(ph) == DB_ROW) {
        double n = db_column_double(ph, 1), total = db_column_double(ph, 2);
        o = json_pack("{s:s,s:I,s:f,s:n}", "range", (const char *)db_column_text(ph, 0), "count", (json_int_t)n, "mean_us",
                      n > 0 ? total / n : 0, "p90_us");
    }
    db_reset(ph);
    return o;
}

/* The communication of a rank, from its suspect list: the collective time at stake and
 * (GPU) the collective kernels' time and their overlap with other work. */
static json_t *comm_of(const json_t *sus) {
    const json_t *s;
    size_t i;
    json_array_foreach(json_object_get(sus, "suspects"), i, s)
        if (!strcmp(json_string_value(json_object_get(s, "category")), "communication")) {
            const json_t *ev = json_object_get(s, "evidence");
            return json_pack("{s:f,s:o,s:o}", "at_stake_us", num(s, "at_stake_us"), "kernel_us",
                             json_is_number(json_object_get(ev, "comm_kernel_us")) ? json_real(num(ev, "comm_kernel_us")) : json_null(),
                             "overlap_us", json_is_number(json_object_get(ev, "overlap_us")) ? json_real(num(ev, "overlap_us")) : json_null());
        }
    return json_null();
}

/* A rank's per-step figures from its step breakdown (analysis.steps, schema 10; the report's
 * "breakdown" before): the steps' own spread (sd of their durations, the straggler's noise
 * bound) and the mean step split as the job page draws it: compute (kernels, copies, memsets
 * less the overlapped communication), communication overlapped with compute (the collective
 * kernels' overlap per step), exposed communication (the communication role: collectives
 * with no compute beside them, and the host's collective ranges) and the rest, GPU idle
 * (runtime, data loading, CPU, other). Sets "sd_us" on st and returns the split, or null. */
static json_t *step_split(db_stmt *bd, long long id, json_t *st, const json_t *comm) {
    db_bind_int64(bd, 1, id);
    json_t *out = json_null();
    if (db_step(bd) == DB_ROW) {
        const char *t = (const char *)db_column_text(bd, 1);
        json_error_t e;
        json_t *doc = t ? json_loads(t, 0, &e) : NULL, *b = doc;
        if (b && db_column_int64(bd, 0)) b = json_object_get(doc, "breakdown"); /* stored before version 10 */
        const json_t *steps = json_object_get(b, "steps"), *x;
        size_t n = json_array_size(steps), i;
        double sum = 0, sq = 0, comp = 0, exposed = 0;
        json_array_foreach(steps, i, x) {
            double d = num(x, "dur_us");
            sum += d;
            sq += d * d;
            comp += num(x, "kernel_us") + num(x, "memcpy_us") + num(x, "memset_us");
            exposed += num(x, "communication_us");
        }
        if (n >= 1) {
            double mean = sum / (double)n, cnt = num(st, "count");
            double var = n >= 2 ? (sq - sum * mean) / (double)(n - 1) : 0;
            if (n >= 2 && json_is_object(st)) json_object_set_new(st, "sd_us", json_real(var > 0 ? sqrt(var) : 0));
            comp /= (double)n;
            exposed /= (double)n;
            double ov = json_is_number(json_object_get(comm, "overlap_us")) && cnt > 0 ? num(comm, "overlap_us") / cnt : 0;
            if (ov > comp) ov = comp;
            double idle = mean - comp - exposed;
            out = json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "step_us", mean, "compute_us", comp - ov, "overlapped_comm_us", ov, "exposed_comm_us",
                            exposed, "idle_us", idle > 0 ? idle : 0, "steps", (json_int_t)n);
        }
        json_decref(doc);
    }
    db_reset(bd);
    return out;
}

/* One rank's row from its session row (id, name, rank, world_size, summary, report). */
static json_t *rank_row(db_stmt *s, db_stmt *ph, db_stmt *bd) {
    long long id = db_column_int64(s, 0);
    json_error_t e;
    const char *sum_t = (const char *)db_column_text(s, 4), *rep_t = (const char *)db_column_text(s, 5);
    json_t *summary = sum_t ? json_loads(sum_t, 0, &e) : NULL, *report = rep_t ? json_loads(rep_t, 0, &e) : NULL;
    const json_t *sus = json_object_get(report, "suspects"), *steps = json_object_get(sus, "steps");
    json_t *st = json_is_object(steps) ? json_pack("{s:s,s:O,s:O,s:O}", "range", "ProfilerStep*", "count", json_object_get(steps, "count"),
                                                   "mean_us", json_object_get(steps, "mean_us"), "p90_us", json_object_get(steps, "p90_us"))
                                       : range_steps(ph, id);
    const json_t *top = json_array_get(json_object_get(sus, "suspects"), 0), *idle = json_object_get(summary, "gpu_idle_fraction");
    const char *rank = (const char *)db_column_text(s, 2), *ws = (const char *)db_column_text(s, 3);
    json_t *row = json_pack("{s:o,s:I,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "rank", rank ? json_integer(atoll(rank)) : json_null(), "session_id",
                            (json_int_t)id, "name", (const char *)db_column_text(s, 1), "world_size",
                            ws ? json_integer(atoll(ws)) : json_null(), "steps", st, "gpu_idle_fraction",
                            json_is_number(idle) ? json_real(json_number_value(idle)) : json_null(), "wall_us",
                            json_is_number(json_object_get(sus, "wall_us")) ? json_real(num(sus, "wall_us")) : json_null(), "top_suspect",
                            top ? json_pack("{s:O,s:O,s:O}", "category", json_object_get(top, "category"), "culprit",
                                            json_object_get(top, "culprit"), "at_stake_fraction", json_object_get(top, "at_stake_fraction"))
                                : json_null(),
                            "communication", comm_of(sus));
    json_object_set_new(row, "breakdown", json_is_object(steps) ? step_split(bd, id, json_object_get(row, "steps"), json_object_get(row, "communication"))
                                                              : json_null());
    /* what the straggler's "differs" compares: at stake per step, by category (not in the reply) */
    json_t *per = json_object();
    const json_t *x;
    size_t i;
    double nsteps = num(st, "count");
    json_array_foreach(json_object_get(sus, "suspects"), i, x) { /* per the rank's steps, whichever range they are */
        const char *cat = json_string_value(json_object_get(x, "category"));
        /* startup and tail happen once (their at_stake_per_step_us is null): a longer tail
         * on one rank is no per-step difference */
        if (!cat || !strcmp(cat, "startup") || !strcmp(cat, "tail")) continue;
        json_object_set_new(per, cat, json_real(num(x, "at_stake_us") / (nsteps > 0 ? nsteps : 1)));
    }
    json_object_set_new(row, "_per_step", per);
    json_decref(summary);
    json_decref(report);
    return row;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A rank's own time per step: its mean step less what it waits in collectives. Why not the
 * step itself: collectives make every rank's step as long as the slowest one's (the others
 * wait for it in all_reduce); the rank that makes them wait is the one with the most time
 * of its own. NAN without steps. */
static double own_per_step(const json_t *rank) {
    const json_t *st = json_object_get(rank, "steps"), *c = json_object_get(rank, "communication");
    if (!json_is_number(json_object_get(st, "mean_us"))) return NAN;
    double n = num(st, "count"), comm = json_is_object(c) && n > 0 ? num(c, "at_stake_us") / n : 0, own = num(st, "mean_us") - comm;
    return own > 0 ? own : 0;
}

/* The steps' own spread as a bound on a difference of two means: twice the standard error of
 * (the worst rank's mean step) - (the others' pooled mean), from each rank's step sd and count
 * (about a 95% bound). NAN when a rank with steps has no per-step times (a range's steps). */
static double noise_bound(const json_t *ranks, size_t worst) {
    double vw = NAN, vo = 0, no = 0;
    size_t i;
    const json_t *r;
    json_array_foreach(ranks, i, r) {
        const json_t *st = json_object_get(r, "steps");
        if (!json_is_number(json_object_get(st, "mean_us"))) continue;
        if (!json_is_number(json_object_get(st, "sd_us"))) return NAN;
        double sd = num(st, "sd_us"), n = num(st, "count");
        if (n < 2) return NAN;
        if (i == worst) vw = sd * sd / n;
        else {
            vo += sd * sd;
            no += n;
        }
    }
    if (isnan(vw) || no <= 0) return NAN;
    size_t others = 0;
    json_array_foreach(ranks, i, r) if (i != worst && json_is_number(json_object_get(json_object_get(r, "steps"), "sd_us"))) others++;
    return 2 * sqrt(vw + (others ? vo / (double)others : 0) / no);
}

/* The rank with the most own time per step, against the median of the others'; its check
 * (the figures and the noise bound) in *check. The verdict is null when the difference is
 * within the steps' own spread. */
static json_t *straggler(json_t *ranks, json_t **check) {
    *check = json_null();
    size_t n = json_array_size(ranks), k = 0, worst = 0;
    double *m = calloc(n + 1, sizeof *m), wm = -1;
    if (!m) return json_null();
    for (size_t i = 0; i < n; i++) {
        double v = own_per_step(json_array_get(ranks, i));
        if (isnan(v)) continue;
        if (v > wm) { wm = v; worst = i; }
        m[k++] = v;
    }
    if (k < 2) {
        free(m);
        return json_null();
    }
    /* the median of the others: the sorted values without one instance of the worst (the last) */
    qsort(m, k, sizeof *m, cmp_double);
    size_t o = k - 1;
    double med = o % 2 ? m[o / 2] : (m[o / 2 - 1] + m[o / 2]) / 2;
    free(m);
    const json_t *w = json_array_get(ranks, worst), *wp = json_object_get(w, "_per_step");
    json_t *differs = json_array();
    const char *cat;
    json_t *v;
    json_object_foreach((json_t *)wp, cat, v) {
        if (!strcmp(cat, "communication")) continue; /* the others' waiting: the effect, not the cause */
        double others = 0;
        size_t no = 0;
        for (size_t i = 0; i < n; i++) {
            if (i == worst) continue;
            others += json_number_value(json_object_get(json_object_get(json_array_get(ranks, i), "_per_step"), cat));
            no++;
        }
        others = no ? others / (double)no : 0;
        if (json_number_value(v) > others)
            json_array_append_new(differs, json_pack("{s:s,s:f,s:f,s:f}", "category", cat, "at_stake_per_step_us", json_number_value(v),
                                                     "others_mean_us", others, "delta_us", json_number_value(v) - others));
    }
    double noise = noise_bound(ranks, worst);
    const char *verdict = isnan(noise) ? "no_spread" : wm - med > noise ? "beyond_noise" : "within_noise";
    json_t *res = json_pack("{s:O,s:O,s:O,s:f,s:f,s:f,s:o,s:o,s:s}", "rank", json_object_get(w, "rank"), "session_id", json_object_get(w, "session_id"),
                          "step_mean_us", json_object_get(json_object_get(w, "steps"), "mean_us"), "own_per_step_us", wm,
                          "others_median_us", med, "slower_by", med > 0 ? wm / med - 1 : 0, "differs", differs, "noise_us",
                          isnan(noise) ? json_null() : json_real(noise), "verdict", verdict);
    *check = json_incref(res);
    if (!strcmp(verdict, "within_noise")) {
        json_decref(res);
        return json_null();
    }
    return res;
}

/* Per phase name (CPU ranges), each rank's count and mean: the JOB_PHASES_MAX longest, over
 * the ranks jobs_get lists (the first JOB_RANKS_MAX in its order). Why the same cap: without
 * it a job of 10,000 sessions listed 4,096 ranks and a phases table of 10,000 (issue 43). */
static json_t *phase_table(db_conn *db, const char *job) {
    db_stmt *s = prep_rank(db,
        "WITH jl AS (SELECT l.session_id AS id, r.value AS rank FROM labels l LEFT JOIN labels r ON r.session_id = l.session_id"
        " AND r.key = 'rank' WHERE l.key = 'job' AND l.value = ?1),"
        " js AS (SELECT id, rank FROM jl ORDER BY rank IS NULL, %s, id LIMIT ?3),"
        " top AS (SELECT p.name FROM phases p JOIN js ON js.id = p.session_id WHERE p.kind = 'cpu' GROUP BY p.name"
        " ORDER BY SUM(p.total_us) DESC LIMIT ?2)"
        " SELECT p.name, js.rank, js.id, p.count, p.total_us FROM phases p JOIN js ON js.id = p.session_id JOIN top ON top.name = p.name"
        " WHERE p.kind = 'cpu' ORDER BY p.name, %s, js.id", "rank");
    json_t *out = json_array(), *cur = NULL;
    if (!s) return out;
    db_bind_text(s, 1, job);
    db_bind_int64(s, 2, JOB_PHASES_MAX);
    db_bind_int64(s, 3, JOB_RANKS_MAX);
    while (db_step(s) == DB_ROW) {
        const char *name = (const char *)db_column_text(s, 0), *rank = (const char *)db_column_text(s, 1);
        if (!cur || strcmp(json_string_value(json_object_get(cur, "name")), name)) {
            cur = json_pack("{s:s,s:[]}", "name", name, "ranks");
            json_array_append_new(out, cur);
        }
        double n = db_column_double(s, 3);
        json_array_append_new(json_object_get(cur, "ranks"),
                              json_pack("{s:o,s:I,s:I,s:f}", "rank", rank ? json_integer(atoll(rank)) : json_null(), "session_id",
                                        db_column_int64(s, 2), "count", (json_int_t)n, "mean_us",
                                        n > 0 ? db_column_double(s, 4) / n : 0));
    }
    db_finalize(s);
    return out;
}

int jobs_get(db_conn *db, const char *job, json_t **out) {
    db_stmt *s = prep_rank(db,
        "SELECT s.id, s.name, r.value, w.value, s.summary, a.report FROM labels l JOIN sessions s ON s.id = l.session_id"
        " LEFT JOIN labels r ON r.session_id = s.id AND r.key = 'rank' LEFT JOIN labels w ON w.session_id = s.id AND w.key = 'world_size'"
        " LEFT JOIN analysis a ON a.session_id = s.id WHERE l.key = 'job' AND l.value = ?1"
        " ORDER BY r.value IS NULL, %s, s.id LIMIT ?2", "r.value");
    db_stmt *ph = prep(db, "SELECT name, count, total_us FROM phases WHERE session_id = ?1 AND kind = 'cpu' AND count >= 2"
                                " AND name != 'ProfilerStep*' ORDER BY count DESC, total_us DESC LIMIT 1");
    /* the step breakdown: analysis.steps (schema 10), else the report's "breakdown" */
    db_stmt *bd = prep(db, "SELECT steps IS NULL, COALESCE(steps, report) FROM analysis WHERE session_id = ?1");
    if (!s || !ph || !bd) {
        db_finalize(s);
        db_finalize(ph);
        db_finalize(bd);
        return ERR_DB;
    }
    db_bind_text(s, 1, job);
    db_bind_int64(s, 2, JOB_RANKS_MAX);
    json_t *ranks = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) json_array_append_new(ranks, rank_row(s, ph, bd));
    db_finalize(s);
    db_finalize(ph);
    db_finalize(bd);
    if (st != DB_DONE || !json_array_size(ranks)) {
        json_decref(ranks);
        return st != DB_DONE ? ERR_DB : ERR_NOTFOUND;
    }
    size_t i;
    json_t *r;
    /* the collectives table: the first COLLS_RANKS_MAX ranks' collective kernels */
    long long ids[COLLS_RANKS_MAX];
    size_t nids = 0;
    json_array_foreach(ranks, i, r) if (nids < COLLS_RANKS_MAX) ids[nids++] = (long long)json_integer_value(json_object_get(r, "session_id"));
    json_t *colls = colls_of(db, ids, nids);
    if (!colls) {
        json_decref(ranks);
        return ERR_DB;
    }
    json_t *check, *strag = straggler(ranks, &check);
    json_array_foreach(ranks, i, r) json_object_del(r, "_per_step");
    *out = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o}", "job", job, "ranks", ranks, "straggler", strag, "straggler_check", check, "phases",
                     phase_table(db, job), "collectives", colls);
    return *out ? 0 : ERR_NOMEM;
}
