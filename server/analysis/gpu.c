/* gpu.c: the GPU facts of GET /gpu: per device idle gaps and what the host ran meanwhile,
 * per stream busy time, launch delays, short kernels, copies and whether they sit on the
 * critical path. Runs on a second connection and thread (gpu_job) while the host walk runs. */

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/analyze.h"
#include "analysis/report.h"
#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/intern.h"
#include "lib/log.h"
#include "lib/mono.h"
#include "lib/tlblob.h"
#include "lib/vec.h"

/* ---- GPU facts ---- */

typedef struct gap { double start, dur; } gap;

static void keep_largest(gap *top, int *ntop, int max, double start, double dur) {
    if (*ntop < max) top[(*ntop)++] = (gap){start, dur};
    else if (dur > top[max - 1].dur) top[max - 1] = (gap){start, dur};
    else return;
    for (int i = *ntop - 1; i > 0 && top[i].dur > top[i - 1].dur; i--) {
        gap t = top[i]; top[i] = top[i - 1]; top[i - 1] = t;
    }
}

/* What the host was doing in the middle of each of n gaps: the innermost host op and
 * runtime call spanning it (the shortest; on a tie the earliest, then the first in file
 * order). One scan of the host events for all of them: a query per gap and class cost a
 * scan each (12 ms at 100 MB, ten per device). names[2 * i] is gap i's op, names[2 * i + 1]
 * its call; -1 none. */
static int host_at(A *a, const double *mid, int n, long *names) {
    struct { double dur, ts; long long seq; } best[10];
    for (int i = 0; i < 2 * n; i++) names[i] = -1;
    if (n == 0) return 0;
    double lo = mid[0], hi = mid[0];
    for (int i = 1; i < n; i++) {
        if (mid[i] < lo) lo = mid[i];
        if (mid[i] > hi) hi = mid[i];
    }
    sqlite3_stmt *s = an_prep(a, "SELECT data FROM scratch.hblk");
    if (!s) return ERR_DB;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(s, 0);
        size_t nb = (size_t)sqlite3_column_bytes(s, 0) / sizeof(hrec);
        for (size_t j = 0; j < nb; j++) {
            hrec h;
            hrec_at(blob, j, &h);
            if ((h.cls != EV_HOST_OP && h.cls != EV_HOST_RT) || h.ts > hi || h.te < lo) continue;
            for (int i = 0; i < n; i++) {
                int k = 2 * i + (h.cls == EV_HOST_RT);
                if (h.ts > mid[i] || h.te < mid[i]) continue;
                if (names[k] >= 0 && (h.dur > best[k].dur || (h.dur == best[k].dur && (h.ts > best[k].ts ||
                                                                                        (h.ts == best[k].ts && h.seq > best[k].seq)))))
                    continue;
                names[k] = h.name;
                best[k].dur = h.dur;
                best[k].ts = h.ts;
                best[k].seq = h.seq;
            }
        }
    }
    sqlite3_finalize(s);
    return 0;
}

static json_t *name_or_null(A *a, long id) { return id >= 0 ? json_string(an_str(a, id)) : json_null(); }

/* One stream's busy time, its union merged as the device's rows come by start. */
typedef struct stream_busy {
    long long stream, n;
    double ss, se, busy;
} stream_busy;

static int by_stream(const void *x, const void *y) {
    const stream_busy *p = x, *q = y;
    return p->stream < q->stream ? -1 : p->stream > q->stream;
}

/* The device's streams, by stream id: busy time and events. Why here, in the device's
 * start-order pass: a query by (stream, ts) sorted every GPU row of the device (ev_gpu is by
 * ts), 50 of gpu_facts' 108 ms on the flat shape, for a trace with one stream. */
static json_t *streams_json(stream_busy *sb, size_t n) {
    json_t *arr = json_array();
    if (n) qsort(sb, n, sizeof *sb, by_stream);
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_pack("{s:I,s:f,s:I}", "stream", sb[i].stream, "busy_us", sb[i].busy + (sb[i].se - sb[i].ss),
                                             "events", sb[i].n));
    return arr;
}

static json_t *device_facts(A *a, long long dev, json_t *gaps_out) {
    sqlite3_stmt *s = an_prep(a, "SELECT ts, te, stream FROM scratch.ev WHERE cls = 2 AND dev = ? ORDER BY ts");
    intern *keys = intern_new();
    if (!s || !keys) {
        sqlite3_finalize(s);
        intern_free(keys);
        return NULL;
    }
    sqlite3_bind_int64(s, 1, dev);
    double cs = 0, ce = -INFINITY, busy = 0, gap_total = 0;
    long long ngaps = 0;
    int have = 0, ntop = 0, fresh, nomem = 0;
    gap top[5];
    stream_busy *sb = NULL;
    size_t nsb = 0, capsb = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 0), te = sqlite3_column_double(s, 1);
        long long stream = sqlite3_column_int64(s, 2);
        long i = INTERN_SLOT(keys, &stream, sizeof stream, sb, nsb, capsb, 8, &fresh);
        if (i < 0) { nomem = 1; break; }
        stream_busy *b = &sb[i];
        if (fresh) *b = (stream_busy){stream, 0, ts, te, 0};
        else if (ts <= b->se) { if (te > b->se) b->se = te; }
        else { b->busy += b->se - b->ss; b->ss = ts; b->se = te; }
        b->n++;
        if (have && ts <= ce) { if (te > ce) ce = te; continue; }
        if (have) {
            busy += ce - cs;
            double g = ts - ce;
            if (g >= GAP_MIN_US) {
                ngaps++;
                gap_total += g;
                keep_largest(top, &ntop, 5, ce, g);
            }
        }
        cs = ts; ce = te; have = 1;
    }
    if (have) busy += ce - cs;
    sqlite3_finalize(s);
    intern_free(keys);
    json_t *streams = nomem ? NULL : streams_json(sb, nsb);
    free(sb);
    if (!streams) return NULL;
    json_t *largest = json_array();
    double mid[5];
    long names[10];
    for (int i = 0; i < ntop; i++) mid[i] = top[i].start + top[i].dur / 2;
    if (host_at(a, mid, ntop, names)) ntop = 0;
    for (int i = 0; i < ntop; i++) {
        json_array_append_new(largest, json_pack("{s:f,s:f,s:o,s:o}", "start_us", top[i].start, "dur_us", top[i].dur,
                                                 "host_op", name_or_null(a, names[2 * i]), "host_call", name_or_null(a, names[2 * i + 1])));
        json_array_append_new(gaps_out, json_pack("{s:I,s:f,s:f}", "device", dev, "ts_us", top[i].start, "dur_us", top[i].dur));
    }
    double idle = a->wall - busy;
    if (idle < 0) idle = 0;
    return json_pack("{s:I,s:f,s:f,s:f,s:o,s:{s:I,s:f,s:o}}", "device", dev, "busy_us", busy, "idle_us", idle,
                     "idle_fraction", a->wall > 0 ? idle / a->wall : 0.0, "streams", streams,
                     "gaps", "count", ngaps, "total_us", gap_total, "largest", largest);
}

/* ---- launch delays: first GPU activity's start - start of the runtime call that launched it ---- */

/* At most this many delays are held in memory (2 MB); more are sorted by SQLite in a temp
 * table (delays_sql), whose memory stays bounded. */
#define DELAYS_MEM_MAX 262144
static long delays_mem_max = DELAYS_MEM_MAX;
void analyze_set_delays_max(long n) { delays_mem_max = n >= 0 ? n : DELAYS_MEM_MAX; }

typedef struct delays {
    long long n;     /* every runtime call of a correlation id with GPU rows, paired with the first of them */
    double total;    /* their sum, added in the order below */
    double p50, p99; /* the ceil(q * n)-th smallest; NaN (a delay SQLite holds as NULL) first, read as 0 */
} delays;

/* The k-th smallest delay, 0-based, as `ORDER BY d LIMIT 1 OFFSET k` reads it. */
static double quantile_sql(A *a, long long n, double q) {
    if (n <= 0) return 0;
    long long k = (long long)ceil(q * (double)n) - 1;
    if (k < 0) k = 0;
    sqlite3_stmt *s = an_prep(a, "SELECT d FROM temp.delays ORDER BY d LIMIT 1 OFFSET ?");
    double v = 0;
    if (!s) return 0;
    sqlite3_bind_int64(s, 1, k);
    if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* temp: gpu_facts runs on gpu_job's connection, which only reads the scratch file. Rows in
 * delays_mem's order (by id, then the call's start), so that TOTAL adds the same doubles. */
static void delays_sql(A *a, delays *x) {
    memset(x, 0, sizeof *x);
    if (an_run(a, "CREATE TEMP TABLE delays AS SELECT (SELECT MIN(g.ts) FROM scratch.ev g WHERE g.corr = r.corr AND g.cls = 2) - r.ts AS d"
                  " FROM scratch.ev r WHERE r.cls = 1 AND r.corr IS NOT NULL"
                  " AND EXISTS (SELECT 1 FROM scratch.ev g WHERE g.corr = r.corr AND g.cls = 2) ORDER BY r.corr, r.ts;"
                  "CREATE INDEX temp.delays_d ON delays(d);"))
        return;
    sqlite3_stmt *c = an_prep(a, "SELECT COUNT(*), TOTAL(d) FROM temp.delays");
    if (c && sqlite3_step(c) == SQLITE_ROW) {
        x->n = sqlite3_column_int64(c, 0);
        x->total = sqlite3_column_double(c, 1);
    }
    sqlite3_finalize(c);
    x->p50 = quantile_sql(a, x->n, 0.5);
    x->p99 = quantile_sql(a, x->n, 0.99);
}

static int by_delay(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    if (isnan(a) || isnan(b)) return !isnan(b) ? -1 : !isnan(a); /* NULL sorts first in SQLite */
    return a < b ? -1 : a > b;
}

static double quantile_of(const double *d, long long n, double q) {
    if (n <= 0) return 0;
    long long k = (long long)ceil(q * (double)n) - 1;
    double v = d[k < 0 ? 0 : k];
    return isnan(v) ? 0 : v;
}

/* Why in memory: delays_sql wrote every delay to a temp table and indexed it, 77 of
 * gpu_facts' ~135 ms on the flat shape. Here one scan of ev_corr, which lists each
 * correlation id's runtime calls (cls 1) before its GPU rows (cls 2), those by start: each
 * call pairs with the first. Why only the first: a cudaGraphLaunch's correlation id is on
 * every kernel of the graph (CUPTI; Kineto writes it as each kernel's "correlation"), and
 * the k-th kernel's start minus the launch is the graph's run time so far, not a delay: a
 * decode step replayed as a 120-kernel graph read as a 580 us mean launch delay. The pairs
 * come in delays_sql's order (by id, then the call's start), so their total adds up to the
 * same double. 1: over delays_mem_max, or a correlation id with more than 16 runtime calls:
 * delays_sql's turn. */
static int delays_mem(A *a, delays *x) {
    sqlite3_stmt *s = an_prep(a, "SELECT corr, cls, ts FROM scratch.ev WHERE corr IS NOT NULL AND cls IN (1, 2)"
                                 " ORDER BY corr, cls, ts");
    double rts[16], *d = NULL;
    size_t cap = 0;
    long long corr = 0;
    int nr = 0, seen = 0, paired = 0, rc = s ? 0 : ERR_DB, st = SQLITE_DONE;
    memset(x, 0, sizeof *x);
    while (!rc && (st = sqlite3_step(s)) == SQLITE_ROW) {
        long long c = sqlite3_column_int64(s, 0);
        double ts = sqlite3_column_double(s, 2);
        if (!seen || c != corr) corr = c, nr = 0, paired = 0, seen = 1; /* a new id: its calls come first */
        if (sqlite3_column_int(s, 1) == 1) {
            if (nr == 16) rc = 1;
            else rts[nr++] = ts;
            continue;
        }
        if (paired++) continue; /* a later GPU row of the same launch (a graph's kernels) */
        for (int i = 0; i < nr && !rc; i++) {
            if (x->n >= delays_mem_max) rc = 1;
            else if (VEC_RESERVE(d, cap, (size_t)x->n + 1, 1024)) rc = ERR_NOMEM;
            else {
                double v = ts - rts[i];
                d[x->n++] = v;
                if (!isnan(v)) x->total += v;
            }
        }
    }
    if (!rc && st != SQLITE_DONE) rc = an_dberr(a);
    sqlite3_finalize(s);
    if (!rc && x->n) {
        qsort(d, (size_t)x->n, sizeof *d, by_delay);
        x->p50 = quantile_of(d, x->n, 0.5);
        x->p99 = quantile_of(d, x->n, 0.99);
    }
    free(d);
    return rc;
}

static json_t *copies_facts(A *a) {
    json_t *by = json_object();
    sqlite3_stmt *s = an_prep(a,
        "SELECT g.name, g.kind, g.ts, g.te, g.bytes, (SELECT r.name FROM scratch.ev r WHERE r.corr = g.corr AND r.cls = 1 LIMIT 1)"
        ", g.dur FROM scratch.ev g WHERE g.cls = 2 AND g.kind IN (?1, ?2)");
    if (!s) return by;
    /* Only copies and memsets: the runtime-name subquery for every kernel was 70 ms at 100 MB. */
    sqlite3_bind_int64(s, 1, a->memcpy_kind);
    sqlite3_bind_int64(s, 2, a->memset_kind);
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *kind = an_str(a, (long)sqlite3_column_int64(s, 1));
        if (strcmp(kind, "gpu_memcpy") && strcmp(kind, "gpu_memset")) continue;
        char dir[64];
        cuda_copy_direction(an_str(a, (long)sqlite3_column_int64(s, 0)), kind, dir, sizeof dir);
        double ts = sqlite3_column_double(s, 2), te = sqlite3_column_double(s, 3), dur = sqlite3_column_double(s, 6);
        const char *rt = sqlite3_column_type(s, 5) == SQLITE_NULL ? "" : an_str(a, (long)sqlite3_column_int64(s, 5));
        /* On the critical path: no kernel ran meanwhile, or the host call waited for it. */
        int critical = an_busy_in(a->kbusy_q, ts, te) <= 0 || cuda_is_sync_call(rt);
        json_t *d = json_object_get(by, dir);
        if (!d) {
            d = json_pack("{s:s,s:I,s:I,s:f,s:I,s:f}", "direction", dir, "count", (json_int_t)0, "bytes", (json_int_t)0,
                          "total_us", 0.0, "critical_path_count", (json_int_t)0, "critical_path_us", 0.0);
            json_object_set_new(by, dir, d);
        }
        json_object_set_new(d, "count", json_integer(json_integer_value(json_object_get(d, "count")) + 1));
        json_object_set_new(d, "bytes", json_integer(json_integer_value(json_object_get(d, "bytes")) + sqlite3_column_int64(s, 4)));
        json_object_set_new(d, "total_us", json_real(json_real_value(json_object_get(d, "total_us")) + dur));
        if (critical) {
            json_object_set_new(d, "critical_path_count", json_integer(json_integer_value(json_object_get(d, "critical_path_count")) + 1));
            json_object_set_new(d, "critical_path_us", json_real(json_real_value(json_object_get(d, "critical_path_us")) + dur));
        }
    }
    sqlite3_finalize(s);
    json_t *arr = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(by, k, v) json_array_append(arr, v);
    json_decref(by);
    return arr;
}

static json_t *gpu_facts(A *a, double gpu_busy, json_t *gaps_out) {
    json_t *devices = json_array();
    long long *devs = NULL;
    size_t ndevs = 0;
    if (!an_gpu_devs(a, &devs, &ndevs))
        for (size_t i = 0; i < ndevs; i++) {
            json_t *d = device_facts(a, devs[i], gaps_out);
            if (d) json_array_append_new(devices, d);
        }
    free(devs);
    delays dl;
    if (delays_mem(a, &dl)) delays_sql(a, &dl);
    long long n = dl.n;
    double mean = n ? dl.total / (double)n : 0;
    long long nk = 0, nshort = 0;
    double kt = 0, short_t = 0;
    sqlite3_stmt *k = an_prep(a, "SELECT COUNT(*), TOTAL(dur), TOTAL(dur < ?1), TOTAL(CASE WHEN dur < ?1 THEN dur END)"
                              " FROM scratch.ev WHERE cls = 2 AND kind = ?2");
    if (k) {
        sqlite3_bind_double(k, 1, SHORT_KERNEL_US);
        sqlite3_bind_int64(k, 2, a->kernel_kind);
        if (sqlite3_step(k) == SQLITE_ROW) {
            nk = sqlite3_column_int64(k, 0);
            kt = sqlite3_column_double(k, 1);
            nshort = (long long)sqlite3_column_double(k, 2);
            short_t = sqlite3_column_double(k, 3);
        }
        sqlite3_finalize(k);
    }
    int any_gpu = json_array_size(devices) > 0;
    json_t *idle = any_gpu && a->wall > 0 ? json_real(1.0 - gpu_busy / a->wall) : json_null();
    return json_pack("{s:f,s:f,s:o,s:o,s:{s:I,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:I,s:f},s:o}",
                     "wall_us", a->wall, "gpu_busy_us", gpu_busy, "gpu_idle_fraction", idle, "devices", devices,
                     "launch", "count", n, "delay_mean_us", mean, "delay_p50_us", dl.p50,
                     "delay_p99_us", dl.p99, "short_kernel_threshold_us", SHORT_KERNEL_US,
                     "short_kernels", nshort, "short_kernel_share", nk ? (double)nshort / (double)nk : 0.0,
                     "short_kernel_time_share", kt > 0 ? short_t / kt : 0.0, "kernels", nk, "kernel_us", kt,
                     "copies", copies_facts(a));
}
/* ---- GPU facts on the second core ---- */


static void *gpu_job_run(void *arg) {
    gpu_job *j = arg;
    {
        STEP_BEGIN();
        j->gpu = gpu_facts(&j->b, j->gpu_busy, j->gaps);
        STEP_END("gpu_facts");
    }
    if (j->timeline && j->gpu) {
        STEP_BEGIN();
        j->tl_rc = an_timeline_buckets(&j->b);
        STEP_END("timeline_buckets");
    }
    return NULL;
}

/* The job's timeline state, its blobs kept in memory (an_tl_open): 0, or ERR_NOMEM. Not
 * at all (j->timeline 0) past GPU_JOB_TL_TRACKS GPU tracks. */
static int job_timeline(A *a, gpu_job *j) {
    size_t ngpu = 0;
    for (size_t i = 0; i < a->t->ntracks; i++) ngpu += a->t->tracks[i].gpu != 0;
    if (ngpu > GPU_JOB_TL_TRACKS) return 0;
    j->timeline = 1;
    return an_tl_open(&j->b, &j->tl_mem);
}

/* Opens the job's connection and starts it (or runs it here when no thread can start). */
int an_gpu_job_start(A *a, gpu_job *j, double gpu_busy) {
    memset(j, 0, sizeof *j);
    j->b.t = a->t;
    j->b.wall = a->wall;
    j->b.ua_kind = a->ua_kind;
    j->b.kernel_kind = a->kernel_kind;
    j->b.memcpy_kind = a->memcpy_kind;
    j->b.memset_kind = a->memset_kind;
    j->b.err = j->err;
    j->b.errlen = sizeof j->err;
    j->gpu_busy = gpu_busy;
    j->gaps = json_array();
    if (!j->gaps) return ERR_NOMEM;
    if (job_timeline(a, j)) return ERR_NOMEM;
    if (an_job_db(a, &j->b.db)) return ERR_DB;
    j->b.kbusy_q = an_prep(&j->b, BUSY_SQL("kbusy"));
    if (!j->b.kbusy_q) {
        snprintf(a->err, a->errlen, "%s", j->err);
        return ERR_DB;
    }
    j->started = 1;
    j->threaded = pthread_create(&j->th, NULL, gpu_job_run, j) == 0;
    if (!j->threaded) gpu_job_run(j);
    return 0;
}

/* Waits for the job; hands over its facts and gaps (NULL when it failed). Always call
 * after gpu_job_start, even on an error path: it frees the job. */
int an_gpu_job_finish(A *a, gpu_job *j, json_t **gpu, json_t **gaps) {
    if (j->threaded) pthread_join(j->th, NULL);
    int rc = 0;
    if (j->started && !j->gpu) rc = j->err[0] ? ERR_DB : ERR_NOMEM;
    if (!rc && j->started && j->timeline) rc = j->tl_rc ? j->tl_rc : an_tl_insert_mem(a, &j->tl_mem);
    if (rc && j->err[0] && !a->err[0]) snprintf(a->err, a->errlen, "%s", j->err);
    if (gpu) { *gpu = j->gpu; j->gpu = NULL; }
    if (gaps) { *gaps = j->gaps; j->gaps = NULL; }
    json_decref(j->gpu);
    json_decref(j->gaps);
    an_tl_close(&j->b);
    buf_free(&j->tl_mem);
    sqlite3_finalize(j->b.kbusy_q);
    sqlite3_close(j->b.db);
    memset(j, 0, sizeof *j);
    return rc;
}

