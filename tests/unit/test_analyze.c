/* test_analyze.c: the importer and the key_averages() aggregation on small hand-made
 * traces with known answers (nesting, self time, partial overlap, correlation, memory,
 * zero-duration and unsorted events, several threads and streams, phases, GPU facts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "analysis/analyze.h"
#include "lib/err.h"
#include "ingest/import.h"
#include "ingest/load.h"
#include "store/query.h"
#include "store/db.h"
#include "store/store.h"
#include "lib/tlblob.h"
#include "lib/tmpfile.h"

#include <sqlite3.h>

static store *st;
static char dbpath[64];

static int setup(void **state) {
    (void)state;
    snprintf(dbpath, sizeof dbpath, "/tmp/fp-test-analyze-%d.db", (int)getpid());
    unlink(dbpath);
    char err[256];
    st = store_open(dbpath, err, sizeof err);
    return st ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    store_close(st);
    char p[80];
    unlink(dbpath);
    snprintf(p, sizeof p, "%s-wal", dbpath);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", dbpath);
    unlink(p);
    snprintf(p, sizeof p, "%s-lock", dbpath); /* one server per file (store.c) */
    unlink(p);
    snprintf(p, sizeof p, "%s-reserve", dbpath);
    unlink(p);
    return 0;
}

/* Imports `len` bytes in pieces of `piece` bytes; returns 0 with *id or the ERR_*. */
static int import_bytes(const void *data, size_t len, size_t piece, int gzip, long long *id, char *err) {
    import_limits lim = {.max_upload = 0};
    import_pool *pool = import_pool_new(st, 1, &lim);
    import_opts o = {"t", NULL, 0, gzip, 0, NULL};
    importer *im = NULL;
    unsigned long long events = 0;
    int rc = import_begin(pool, &o, &im, NULL, err, 256);
    for (size_t off = 0; off < len && !rc; off += piece) rc = import_feed(im, (const char *)data + off, len - off < piece ? len - off : piece);
    if (!rc) rc = import_finish(im, id, &events);
    if (rc && im) snprintf(err, 256, "%s", import_error(im));
    import_free(im);
    import_pool_free(pool);
    return rc;
}
static int import(const char *json, long long *id) {
    char err[256];
    int rc = import_bytes(json, strlen(json), 7, 0, id, err);
    if (rc) fprintf(stderr, "import: %s\n", err);
    return rc;
}

static json_t *ops(long long id, int by_shape) {
    db_conn *dbc = store_get(st);
    json_t *out = NULL;
    assert_int_equal(query_operators(dbc, id, "cuda_time_total", 1000, NULL, by_shape, &out), 0);
    store_put(st, dbc);
    return out;
}
static json_t *row(json_t *reply, const char *name) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(reply, "operators"), i, r)
        if (!strcmp(json_string_value(json_object_get(r, "name")), name)) return r;
    fail_msg("no operator row %s", name);
    return NULL;
}
static double f(json_t *r, const char *k) { return json_number_value(json_object_get(r, k)); }

#define X(name, cat, tid, ts, dur, args) \
    "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"" name "\",\"pid\":1,\"tid\":" #tid ",\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{" args "}}"

static void test_ingest_nesting_self_time(void **state) {
    (void)state;
    long long id;
    /* A [0,100] holds B [10,40] and C [50,60]; C holds D [52,53]. */
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 100, "") "," X("B", "cpu_op", 1, 10, 30, "") ","
                    X("C", "cpu_op", 1, 50, 10, "") "," X("D", "cpu_op", 1, 52, 1, "") "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    assert_true(fabs(f(row(r, "A"), "self_cpu_time_total_us") - 60) < 1e-9);
    assert_true(fabs(f(row(r, "A"), "cpu_time_total_us") - 100) < 1e-9);
    assert_true(fabs(f(row(r, "C"), "self_cpu_time_total_us") - 9) < 1e-9);
    assert_true(fabs(f(row(r, "D"), "self_cpu_time_total_us") - 1) < 1e-9);
    assert_int_equal((int)f(json_object_get(r, "totals"), "self_cpu_time_total_us"), 100);
    json_decref(r);
}

/* The GPU rows of a correlation summed per id (host.c gcur): three rows under id 5 (two
 * kernels, a memset), one under 200 (more than 4 x GCUR_STEPS ahead: a seek), none under 7,
 * and a kernel whose id no call launched (9). A's CUDA total is its three rows' 12.75 us,
 * B's its copy's 4 us, C's nothing. */
#define G(cat, ts, dur, corr) \
    "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"g\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"correlation\":" #corr ",\"device\":0,\"stream\":7}}"
static void test_ingest_gpu_rows_summed_per_correlation(void **state) {
    (void)state;
    long long id;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 50, "") "," X("cudaLaunchKernel", "cuda_runtime", 1, 1, 2, "\"correlation\":5")
                    "," X("B", "cpu_op", 1, 60, 40, "") "," X("cudaMemcpyAsync", "cuda_runtime", 1, 61, 2, "\"correlation\":200")
                    "," X("C", "cpu_op", 1, 110, 10, "") "," X("cudaLaunchKernel", "cuda_runtime", 1, 111, 2, "\"correlation\":7")
                    "," G("kernel", 5, 10, 5) "," G("gpu_memset", 15, 0.25, 5) "," G("kernel", 16, 2.5, 5) ","
                    G("gpu_memcpy", 65, 4, 200) "," G("kernel", 130, 3, 9) "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    /* operator, column, us */
    static const struct { const char *op, *col; double us; } want[] = {
        {"A", "cuda_time_total_us", 12.75}, {"A", "self_cuda_time_total_us", 12.75}, {"B", "cuda_time_total_us", 4}, {"C", "cuda_time_total_us", 0}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) assert_true(fabs(f(row(r, want[i].op), want[i].col) - want[i].us) < 1e-9);
    json_decref(r);
}
#undef G

static void test_ingest_partial_overlap_is_not_nested(void **state) {
    (void)state;
    long long id;
    /* B starts inside A but ends after it: torch does not nest it (trace-semantics.md). */
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 50, "") "," X("B", "cpu_op", 1, 40, 40, "") "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    assert_true(fabs(f(row(r, "A"), "self_cpu_time_total_us") - 50) < 1e-9);
    assert_true(fabs(f(row(r, "B"), "self_cpu_time_total_us") - 40) < 1e-9);
    json_decref(r);
}

static void test_ingest_unsorted_threads_zero_duration(void **state) {
    (void)state;
    long long id;
    /* Events out of order, two threads, a zero-duration child. */
    const char *t = "[" X("C", "cpu_op", 2, 5, 5, "") "," X("B", "cpu_op", 1, 20, 0, "") "," X("A", "cpu_op", 1, 0, 100, "") ","
                    X("A", "cpu_op", 2, 0, 10, "") "]";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    json_t *a = row(r, "A");
    assert_int_equal((int)f(a, "calls"), 2);
    assert_true(fabs(f(a, "cpu_time_total_us") - 110) < 1e-9);
    assert_true(fabs(f(a, "self_cpu_time_total_us") - 105) < 1e-9); /* 100 - 0 + 10 - 5 */
    assert_int_equal((int)f(row(r, "B"), "calls"), 1);
    json_decref(r);
}

static void test_ingest_correlation_attributes_cuda_time(void **state) {
    (void)state;
    long long id;
    /* P [0,200] > X [0,100] > cudaLaunchKernel [10,20] corr 7 -> kernel 30 us on stream 7;
     * a second launch under P directly, corr 8 -> kernel 5 us. */
    const char *t = "{\"traceEvents\":[" X("P", "cpu_op", 1, 0, 200, "") "," X("X", "cpu_op", 1, 0, 100, "") ","
                    X("cudaLaunchKernel", "cuda_runtime", 1, 10, 10, "\"correlation\":7") ","
                    X("cudaLaunchKernel", "cuda_runtime", 1, 150, 10, "\"correlation\":8") ","
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":25,\"dur\":30,\"args\":{\"correlation\":7,\"device\":0,\"stream\":7}},"
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"add\",\"pid\":0,\"tid\":8,\"ts\":170,\"dur\":5,\"args\":{\"correlation\":8,\"device\":0,\"stream\":8}}"
                    "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    assert_true(fabs(f(row(r, "X"), "self_cuda_time_total_us") - 30) < 1e-9);
    assert_true(fabs(f(row(r, "P"), "cuda_time_total_us") - 35) < 1e-9);
    assert_true(fabs(f(row(r, "P"), "self_cuda_time_total_us") - 5) < 1e-9);
    assert_true(fabs(f(row(r, "cudaLaunchKernel"), "cuda_time_total_us")) < 1e-9);
    assert_true(fabs(f(row(r, "cudaLaunchKernel"), "self_cpu_time_total_us") - 20) < 1e-9);
    assert_true(fabs(f(row(r, "X"), "self_cpu_time_total_us") - 90) < 1e-9);
    assert_true(fabs(f(row(r, "gemm"), "self_cuda_time_total_us") - 30) < 1e-9);
    /* Self CUDA total counts each GPU activity once. */
    assert_true(fabs(f(json_object_get(r, "totals"), "self_cuda_time_total_us") - 35) < 1e-9);
    json_decref(r);

    db_conn *dbc = store_get(st);
    json_t *g = NULL;
    assert_int_equal(query_gpu(dbc, id, &g), 0);
    store_put(st, dbc);
    /* Busy 35 of a 200 us wall; launch delays 15 and 20. */
    assert_true(fabs(json_number_value(json_object_get(g, "gpu_idle_fraction")) - (1 - 35.0 / 200)) < 1e-9);
    json_t *launch = json_object_get(g, "launch");
    assert_int_equal(json_integer_value(json_object_get(launch, "count")), 2);
    assert_true(fabs(json_number_value(json_object_get(launch, "delay_mean_us")) - 17.5) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(launch, "short_kernels")), 1);
    json_decref(g);
}

/* n launches: launch i's runtime call at 100 i, its kernel delays[i] later; then the runtime
 * calls of one more correlation id, `calls` of them, and its kernel 4 us after the first. */
static char *launch_trace(const double *delays, int n, int calls, int graph) {
    size_t cap = 256 + (size_t)(n * (graph + 1) + calls + 1) * 400, o = 0;
    char *t = malloc(cap);
    o += (size_t)snprintf(t + o, cap - o, "{\"traceEvents\":[" X("P", "cpu_op", 1, 0, 1000000, ""));
    for (int i = 0; i < n; i++) {
        /* graph > 0: the launch is a graph's, and `graph` more kernels carry its id, written
         * before its first one but starting after it */
        for (int k = 1; k <= graph; k++)
            o += (size_t)snprintf(t + o, cap - o,
                                  ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"g\",\"pid\":0,\"tid\":7,\"ts\":%.3f,\"dur\":1,\"args\":{\"correlation\":%d,\"device\":0,\"stream\":7}}",
                                  100 * i + delays[i] + 1.5 * k, i + 1);
        o += (size_t)snprintf(t + o, cap - o,
                              ",{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":2,\"args\":{\"correlation\":%d}}"
                              ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%.3f,\"dur\":1,\"args\":{\"correlation\":%d,\"device\":0,\"stream\":7}}",
                              graph ? "cudaGraphLaunch" : "cudaLaunchKernel", 100 * i, i + 1, 100 * i + delays[i], i + 1);
    }
    for (int c = 0; c < calls; c++)
        o += (size_t)snprintf(t + o, cap - o,
                              ",{\"ph\":\"X\",\"cat\":\"cuda_driver\",\"name\":\"cuLaunchKernel\",\"pid\":1,\"tid\":2,\"ts\":%d,\"dur\":1,\"args\":{\"correlation\":9999}}",
                              200000 + c);
    if (calls)
        o += (size_t)snprintf(t + o, cap - o, ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":200004,\"dur\":1,\"args\":{\"correlation\":9999,\"device\":0,\"stream\":7}}");
    snprintf(t + o, cap - o, "]}");
    return t;
}

/* The reply of query q (query_gpu, query_steps, ...) for trace, imported as a new session. */
static json_t *reply_of(const char *trace, int (*q)(db_conn *, long long, json_t **)) {
    long long id;
    assert_int_equal(import(trace, &id), 0);
    db_conn *dbc = store_get(st);
    json_t *r = NULL;
    assert_int_equal(q(dbc, id, &r), 0);
    store_put(st, dbc);
    return r;
}

/* Every step of the breakdown: query_steps' widest page. */
static int query_steps_all(db_conn *db, long long id, json_t **out) { return query_steps(db, id, 0, 1LL << 40, out); }

static json_t *launch_of(const char *trace) {
    json_t *g = reply_of(trace, query_gpu), *l = json_incref(json_object_get(g, "launch"));
    json_decref(g);
    return l;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Launch delays: counted, averaged and ranked in memory (gpu.c's delays_mem) as SQLite's
 * temp table ranks them (delays_sql), to the same doubles; a correlation id with more runtime
 * calls than delays_mem holds goes to SQLite, and so does a trace over analyze_set_delays_max.
 * A graph launch's later kernels (graph 3: three more kernels on each id) change nothing:
 * a launch's delay is to its first GPU row. */
static void test_launch_delays_in_memory_as_in_sqlite(void **state) {
    (void)state;
    enum { N = 101 };
    double d[N], sorted[N + 17];
    double sum = 0;
    for (int i = 0; i < N; i++) d[i] = 0.125 + (double)((i * 37) % N) / 4, sum += d[i]; /* 101 distinct, unsorted */
    for (int run = 0; run < 4; run++) {
        int calls = run & 1 ? 17 : 0, graph = run & 2 ? 3 : 0;
        char *t = launch_trace(d, N, calls, graph);
        json_t *mem = launch_of(t);
        analyze_set_delays_max(0);
        json_t *sql = launch_of(t);
        analyze_set_delays_max(-1);
        free(t);
        assert_true(json_equal(mem, sql));
        /* the numbers themselves: the 17 calls at 200000 + c add delays 4 - c */
        int n = N;
        double s = sum;
        memcpy(sorted, d, sizeof d);
        for (int c = 0; c < calls; c++) sorted[n++] = 4.0 - c, s += 4.0 - c;
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
        assert_int_equal(json_integer_value(json_object_get(mem, "count")), n);
        assert_true(fabs(json_number_value(json_object_get(mem, "delay_mean_us")) - s / n) < 1e-9);
        assert_true(json_number_value(json_object_get(mem, "delay_p50_us")) == sorted[(int)ceil(0.5 * n) - 1]);
        assert_true(json_number_value(json_object_get(mem, "delay_p99_us")) == sorted[(int)ceil(0.99 * n) - 1]);
        json_decref(mem);
        json_decref(sql);
    }
}

/* The steps' device spans from one pass over ev_corr (steps.c spans_scan): a launch at 100
 * that both Step#1 [0, 100] and Step#2 [100, 200] hold, one straddling their boundary (held
 * by neither), two calls of one id (in Step#1 and in Step#3) sharing its two kernels, calls
 * on a second thread, and work ending after its step's host end. Step#3 launched 3 GPU rows
 * (id 5's and id 1's two through its second call) against Step#2's 2: it is kept. */
#define SRT(tid, ts, dur, corr) X("cudaLaunchKernel", "cuda_runtime", tid, ts, dur, "\"correlation\":" #corr)
#define SKN(ts, dur, corr) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"correlation\":" #corr ",\"device\":0,\"stream\":7}}"
static void test_steps_device_spans_in_one_pass(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" X("ProfilerStep#1", "user_annotation", 1, 0, 100, "") ","
                    X("ProfilerStep#2", "user_annotation", 1, 100, 100, "") "," X("ProfilerStep#3", "user_annotation", 1, 200, 60, "") ","
                    SRT(1, 10, 5, 1) "," SRT(2, 95, 10, 2) "," SRT(1, 100, 0, 3) "," SRT(2, 150, 5, 4) "," SRT(1, 210, 5, 1) ","
                    SRT(2, 220, 5, 5) "," SKN(20, 30, 1) "," SKN(60, 10, 1) "," SKN(110, 20, 2) "," SKN(120, 10, 3) ","
                    SKN(160, 70, 4) "," SKN(240, 10, 5) "]}";
    json_t *scan = reply_of(t, query_steps_all);
    assert_int_equal(json_integer_value(json_object_get(scan, "dropped_steps")), 0);
    json_t *steps = json_object_get(scan, "steps");
    assert_int_equal(json_array_size(steps), 3);
    /* Step#1 holds the launch at 100, whose kernel ends at 130: [0, 130]; Step#2's kernels
     * end at 230: [130, 230]; Step#3 [230, 260] */
    double want[3][2] = {{0, 130}, {130, 100}, {230, 30}};
    for (size_t i = 0; i < 3; i++) {
        assert_true(fabs(f(json_array_get(steps, i), "start_us") - want[i][0]) < 1e-9);
        assert_true(fabs(f(json_array_get(steps, i), "dur_us") - want[i][1]) < 1e-9);
    }
    json_decref(scan);
}
#undef SRT
#undef SKN

#define UA(name, tid, ts, dur) X(name, "user_annotation", tid, ts, dur, "")
#define RT(tid, ts, corr) X("cudaLaunchKernel", "cuda_runtime", tid, ts, 2, "\"correlation\":" #corr)
#define KN(ts, dur, corr) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"correlation\":" #corr ",\"device\":0,\"stream\":7}}"
/* The steps and the CPU phases split into roles in one pass over the roles, each list as if
 * split in a pass of its own: phases that overlap each other and the steps, start before
 * them, and end after; the lists' next boundaries interleave, so a pass that read a role at
 * a time earlier than it had read before would miss a kernel. */
static void test_steps_and_phases_in_one_pass(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" UA("prologue", 1, 0, 12) "," UA("ProfilerStep#1", 1, 10, 100) ","
                    UA("A", 1, 15, 30) "," RT(1, 16, 1) "," UA("A", 1, 60, 55) "," RT(1, 61, 2) ","
                    UA("ProfilerStep#2", 1, 110, 100) "," RT(1, 120, 3) "," RT(1, 130, 6) "," UA("A", 1, 150, 70) ","
                    UA("B", 2, 5, 130) "," RT(2, 40, 4) "," UA("B", 2, 200, 40) "," RT(2, 205, 5) ","
                    KN(20, 30, 1) "," KN(70, 45, 2) "," KN(125, 10, 3) "," KN(45, 10, 4) "," KN(208, 20, 5) "," KN(140, 5, 6) "]}";
    json_t *one = reply_of(t, query_steps_all);
    analyze_set_sweep_apart(1);
    json_t *apart = reply_of(t, query_steps_all);
    analyze_set_sweep_apart(0);
    /* the runtime role (and the others) from the spill file past the walk's limit, as from
     * the walk's lists */
    analyze_set_host_spans_max(2);
    json_t *rt_sql = reply_of(t, query_steps_all);
    analyze_set_host_spans_max(-1);
    json_object_del(rt_sql, "session_id");
    json_object_del(one, "session_id");
    assert_true(json_equal(one, rt_sql));
    assert_true(f(json_object_get(one, "mean"), "runtime_us") > 0);
    json_decref(rt_sql);
    assert_int_equal(json_array_size(json_object_get(one, "steps")), 2);
    assert_int_equal(json_array_size(json_object_get(one, "phases")), 3); /* A, B, prologue */
    json_object_del(one, "session_id");
    json_object_del(apart, "session_id");
    char *a = json_dumps(one, JSON_SORT_KEYS), *b = json_dumps(apart, JSON_SORT_KEYS);
    assert_string_equal(a, b);
    /* B [5, 135) + [200, 240): the kernels inside it are [20, 55) and [70, 115), [125, 135),
     * [208, 228): 35 + 45 + 10 + 20 us (not [140, 145)) */
    json_t *ph;
    size_t i;
    double kb = -1;
    json_array_foreach(json_object_get(one, "phases"), i, ph)
        if (!strcmp(json_string_value(json_object_get(ph, "name")), "B")) kb = f(ph, "kernel_us");
    assert_true(fabs(kb - 110) < 1e-9);
    free(a);
    free(b);
    json_decref(one);
    json_decref(apart);
}
/* Issue 42, item 7: a collective on the host (gloo's all_reduce runs on the CPU) is
 * communication in the step breakdown, as the suspects call it, above runtime, DataLoader and
 * CPU exec; nested ranges inside it count with it. Step [0, 100): aten::add [10, 20) on
 * thread 1, gloo:all_reduce [30, 70) on thread 2 with aten::copy_ [40, 50) inside, and a
 * range "outer" [25, 80) around it: communication 40, cpu_exec 10 + 5 + 10 = 25, other 35.
 * Fails when the collective is cpu_exec (65). */
static void test_steps_host_collectives_are_communication(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" UA("ProfilerStep#1", 1, 0, 100) "," X("aten::add", "cpu_op", 1, 10, 10, "") ","
                    X("outer", "user_annotation", 2, 25, 55, "") "," X("gloo:all_reduce", "user_annotation", 2, 30, 40, "") ","
                    X("aten::copy_", "cpu_op", 2, 40, 10, "") "]}";
    json_t *r = reply_of(t, query_steps_all);
    json_t *st = json_array_get(json_object_get(r, "steps"), 0);
    assert_true(fabs(f(st, "communication_us") - 40) < 1e-9);
    assert_true(fabs(f(st, "cpu_exec_us") - 25) < 1e-9);
    assert_true(fabs(f(st, "other_us") - 35) < 1e-9);
    json_decref(r);
}

/* The ranges past the walk's limit (DataLoader, outermost, runtime calls) go to a spill file
 * as sorted runs that the breakdown merges: the same document as from memory, whichever range the limit falls on (0: a run a
 * range; 2, 3: runs of several and a remainder at the end), and no file is left. The walk
 * gives thread 1's ranges before thread 2's and 3's earlier ones: a run not sorted, or runs
 * read one after another, would merge [10, 60) into [140, 180). */
static void test_steps_host_ranges_spilled(void **state) {
    (void)state;
    const char *dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
    char t[4096];
    snprintf(t, sizeof t,
             "{\"traceEvents\":[" UA("ProfilerStep#1", 1, 0, 100) "," UA("ProfilerStep#2", 1, 100, 100) ","
             X("%s", "user_annotation", 1, 120, 15, "") "," X("A", "cpu_op", 1, 140, 30, "") "," X("a", "cpu_op", 1, 145, 10, "") ","
             RT(1, 146, 1) "," X("B", "cpu_op", 1, 170, 10, "") "," X("C", "cpu_op", 2, 10, 50, "") ","
             X("%s", "user_annotation", 2, 60, 20, "") "," X("D", "cpu_op", 2, 85, 10, "") "," RT(2, 86, 2) ","
             X("E", "cpu_op", 3, 50, 20, "") "," X("gloo:all_reduce", "user_annotation", 4, 20, 30, "") ","
             X("gloo:all_reduce", "user_annotation", 4, 110, 5, "") "," KN(150, 40, 1) "," KN(88, 4, 2) "]}",
             dl, dl);
    json_t *mem = reply_of(t, query_steps_all);
    json_object_del(mem, "session_id");
    assert_true(f(json_object_get(mem, "mean"), "communication_us") > 0);
    assert_true(f(json_object_get(mem, "mean"), "data_loading_us") > 0);
    assert_true(f(json_object_get(mem, "mean"), "cpu_exec_us") > 0);
    assert_true(f(json_object_get(mem, "mean"), "runtime_us") > 0);
    long limits[] = {0, 2, 3};
    for (size_t k = 0; k < sizeof limits / sizeof *limits; k++) {
        analyze_set_host_spans_max(limits[k]);
        json_t *sql = reply_of(t, query_steps_all);
        analyze_set_host_spans_max(-1);
        json_object_del(sql, "session_id");
        assert_true(json_equal(mem, sql));
        json_decref(sql);
    }
    char pat[4200];
    snprintf(pat, sizeof pat, "%s/firstpass-steps-%ld-*", tmpfile_dir(), (long)getpid());
    glob_t g;
    assert_int_equal(glob(pat, 0, NULL, &g), GLOB_NOMATCH);
    globfree(&g);
    json_decref(mem);
}
#undef UA
#undef RT
#undef KN

static void test_ingest_memory_self_and_total(void **state) {
    (void)state;
    long long id;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 100, "") "," X("B", "cpu_op", 1, 10, 20, "") ","
                    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":15,\"args\":{\"Bytes\":100,\"Device Type\":0}},"
                    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":50,\"args\":{\"Bytes\":-40,\"Device Type\":0}},"
                    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":60,\"args\":{\"Bytes\":4096,\"Device Type\":1}},"
                    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":2,\"ts\":60,\"args\":{\"Bytes\":7,\"Device Type\":0}}"
                    "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    json_t *a = row(r, "A"), *b = row(r, "B");
    assert_int_equal((int)f(a, "cpu_memory_usage_bytes"), 60);
    assert_int_equal((int)f(a, "self_cpu_memory_usage_bytes"), -40);
    assert_int_equal((int)f(a, "cuda_memory_usage_bytes"), 4096);
    assert_int_equal((int)f(b, "cpu_memory_usage_bytes"), 100);
    assert_int_equal((int)f(b, "self_cpu_memory_usage_bytes"), 100);
    json_decref(r);
}

/* The memory curve sorted in C (memory.c's rows in memory) as SQLite's sorter sorts
 * wscratch.mem: by Device Type (CUDA first), Device Id, time, and equal keys in the walk's
 * order. Equal times on two threads (an alloc on one, a free on the other) give a peak that
 * depends on that order; the CPU rows of two Device Ids make one curve in (Device Id, time)
 * order. Fails when the C sort drops the tie-break or the Device Id. */
#define MD(tid, ts, bytes, type, dev)                                                                                         \
    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":" #tid ",\"ts\":" #ts ",\"args\":{\"Bytes\":" #bytes \
    ",\"Device Type\":" #type ",\"Device Id\":" #dev "}}"
static void test_memory_rows_in_memory_as_in_sqlite(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 100, "") "," X("B", "cpu_op", 2, 0, 100, "") ","
                    MD(1, 10, 100, 1, 0) "," MD(1, 20, -100, 1, 0) "," MD(1, 30, 64, 1, 1) ","
                    MD(2, 10, -60, 1, 0) "," MD(2, 20, 200, 1, 0) "," MD(2, 30, -64, 1, 1) ","
                    MD(1, 40, 8, 0, 0) "," MD(2, 60, 16, 0, -1) "," MD(2, 50, -8, 0, 0) "," MD(1, 5, 32, 0, -1) "]}";
    json_t *mem = reply_of(t, query_memory);
    analyze_set_mem_rows_max(2); /* spills after two rows: both ways in one upload */
    json_t *spill = reply_of(t, query_memory);
    analyze_set_mem_rows_max(0);
    json_t *sql = reply_of(t, query_memory);
    analyze_set_mem_rows_max(-1);
    json_object_del(mem, "session_id");
    json_object_del(spill, "session_id");
    json_object_del(sql, "session_id");
    char *a = json_dumps(mem, JSON_SORT_KEYS), *b = json_dumps(sql, JSON_SORT_KEYS), *c = json_dumps(spill, JSON_SORT_KEYS);
    assert_string_equal(a, b);
    assert_string_equal(c, b);
    json_t *devs = json_object_get(mem, "devices");
    assert_int_equal(json_array_size(devs), 3);
    json_t *d0 = json_array_get(devs, 0), *cpu = json_array_get(devs, 2);
    assert_string_equal(json_string_value(json_object_get(d0, "device")), "cuda:0");
    /* cuda:0 with equal times in the walk's order (thread 1's row first): +100 -60 at 10,
     * -100 +200 at 20: peak 140; thread 2's first would peak at 240 (-60 +100 +200) */
    assert_int_equal(json_integer_value(json_object_get(d0, "peak_bytes")), 140);
    assert_string_equal(json_string_value(json_object_get(cpu, "device")), "cpu");
    /* CPU: Device Id -1 first (32 at 5, 16 at 60: 48), then Id 0 (8 at 40: 56, -8 at 50);
     * in time order alone the peak would be 48 */
    assert_int_equal(json_integer_value(json_object_get(cpu, "peak_bytes")), 56);
    assert_int_equal(json_integer_value(json_object_get(cpu, "end_bytes")), 48);
    free(a);
    free(b);
    free(c);
    json_decref(mem);
    json_decref(spill);
    json_decref(sql);
}
#undef MD

/* Issue 42, item 2: allocated and reserved are the trace's own Total Allocated / Total
 * Reserved where its [memory] events carry them (what the allocator held, the window's start
 * included), the running sum of Bytes from 0 only where they do not. cuda:0 starts with 1000
 * held before the window: +100 at 10 (1100), -100 at 20 (1000), +300 at 30 (1300), -300 at
 * 40 (1000); reserved 2048 then 4096 from 30 on. cuda:1 has no totals: the running sum, 64.
 * The same in memory, spilled and in SQL. Fails when the totals are not read (peak 300). */
#define MT(ts, bytes, dev, ta, tr)                                                                                            \
    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"args\":{\"Bytes\":" #bytes \
    ",\"Device Type\":1,\"Device Id\":" #dev ",\"Total Allocated\":" #ta ",\"Total Reserved\":" #tr "}}"
#define MB(ts, bytes, dev)                                                                                                    \
    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"args\":{\"Bytes\":" #bytes \
    ",\"Device Type\":1,\"Device Id\":" #dev "}}"
static void test_memory_totals_from_the_trace(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 100, "") "," MT(10, 100, 0, 1100, 2048) "," MT(20, -100, 0, 1000, 2048) ","
                    MT(30, 300, 0, 1300, 4096) "," MT(40, -300, 0, 1000, 4096) "," MB(15, 64, 1) "," MB(25, -64, 1) "]}";
    json_t *mem = reply_of(t, query_memory);
    analyze_set_mem_rows_max(2);
    json_t *spill = reply_of(t, query_memory);
    analyze_set_mem_rows_max(-1);
    json_object_del(mem, "session_id");
    json_object_del(spill, "session_id");
    char *a = json_dumps(mem, JSON_SORT_KEYS), *b = json_dumps(spill, JSON_SORT_KEYS);
    assert_string_equal(a, b);
    json_t *devs = json_object_get(mem, "devices"), *d0 = json_array_get(devs, 0), *d1 = json_array_get(devs, 1);
    assert_int_equal(json_array_size(devs), 2);
    assert_int_equal(json_integer_value(json_object_get(d0, "peak_bytes")), 1300);
    assert_string_equal(json_string_value(json_object_get(d0, "allocated_from")), "total_allocated");
    assert_true(json_real_value(json_object_get(d0, "peak_ts_us")) == 30);
    assert_int_equal(json_integer_value(json_object_get(d0, "end_bytes")), 1000);
    assert_int_equal(json_integer_value(json_object_get(d0, "reserved_peak_bytes")), 4096);
    assert_true(json_real_value(json_object_get(d0, "reserved_peak_ts_us")) == 30);
    assert_int_equal(json_integer_value(json_object_get(d0, "reserved_end_bytes")), 4096);
    assert_int_equal(json_integer_value(json_object_get(d0, "allocations")), 2);
    /* the curve's largest sample is the peak */
    json_int_t top = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(d0, "samples"), i, p) if (json_integer_value(json_array_get(p, 1)) > top) top = json_integer_value(json_array_get(p, 1));
    assert_int_equal(top, 1300);
    assert_string_equal(json_string_value(json_object_get(d1, "allocated_from")), "running_sum");
    assert_int_equal(json_integer_value(json_object_get(d1, "peak_bytes")), 64);
    assert_true(json_is_null(json_object_get(d1, "reserved_peak_bytes")));
    free(a);
    free(b);
    json_decref(mem);
    json_decref(spill);
}
#undef MT
#undef MB

/* One thread's events in three orders must give the same table: sorted; with late rows
 * (a parent after its children, a second thread's op after its child: analyze.c merges
 * them into the rows read in file order); and late rows plus 65 one-event threads, more
 * than host_walk gives walkers (WALK_TRACKS_MAX 64), which takes the sort-everything path. */
#define MEM(tid, ts, bytes) \
    "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":" #tid ",\"ts\":" #ts ",\"args\":{\"Bytes\":" #bytes ",\"Device Type\":0}}"
static void check_late_table(long long id) {
    json_t *r = ops(id, 0);
    assert_true(fabs(f(row(r, "P"), "self_cpu_time_total_us") - 60) < 1e-9);
    assert_true(fabs(f(row(r, "P"), "cpu_time_total_us") - 100) < 1e-9);
    assert_true(fabs(f(row(r, "P"), "cuda_time_total_us") - 5) < 1e-9);
    assert_int_equal((int)f(row(r, "P"), "cpu_memory_usage_bytes"), 64);
    assert_int_equal((int)f(row(r, "P"), "self_cpu_memory_usage_bytes"), 0);
    assert_true(fabs(f(row(r, "A"), "self_cpu_time_total_us") - 30) < 1e-9);
    assert_int_equal((int)f(row(r, "A"), "self_cpu_memory_usage_bytes"), 64);
    assert_true(fabs(f(row(r, "B"), "self_cpu_time_total_us") - 8) < 1e-9);
    assert_true(fabs(f(row(r, "B"), "self_cuda_time_total_us") - 5) < 1e-9);
    assert_true(fabs(f(row(r, "Q"), "self_cpu_time_total_us") - 7) < 1e-9);
    assert_true(fabs(f(row(r, "q"), "self_cpu_time_total_us") - 3) < 1e-9);
    json_decref(r);
}
static void test_ingest_late_rows_walk_like_sorted(void **state) {
    (void)state;
#define KERNEL "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":70,\"dur\":5,\"args\":{\"correlation\":7,\"device\":0,\"stream\":7}}"
#define LAUNCH X("cudaLaunchKernel", "cuda_runtime", 1, 55, 2, "\"correlation\":7")
    const char *sorted = "{\"traceEvents\":[" X("P", "cpu_op", 1, 0, 100, "") "," X("A", "cpu_op", 1, 10, 30, "") ","
                         MEM(1, 20, 64) "," X("B", "cpu_op", 1, 50, 10, "") "," LAUNCH "," X("Q", "cpu_op", 2, 0, 10, "") ","
                         X("q", "cpu_op", 2, 2, 3, "") "," KERNEL "]}";
    const char *late = "{\"traceEvents\":[" X("A", "cpu_op", 1, 10, 30, "") "," MEM(1, 20, 64) "," X("q", "cpu_op", 2, 2, 3, "") ","
                       X("P", "cpu_op", 1, 0, 100, "") "," X("B", "cpu_op", 1, 50, 10, "") "," X("Q", "cpu_op", 2, 0, 10, "") ","
                       LAUNCH "," KERNEL "]}";
    long long id;
    assert_int_equal(import(sorted, &id), 0);
    check_late_table(id);
    assert_int_equal(import(late, &id), 0);
    check_late_table(id);
    char many[16384];
    size_t n = (size_t)snprintf(many, sizeof many, "%.*s", (int)(strlen(late) - 2), late); /* without "]}" */
    for (int t = 100; t < 165; t++)
        n += (size_t)snprintf(many + n, sizeof many - n, ",{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"E\",\"pid\":1,\"tid\":%d,\"ts\":1,\"dur\":1}", t);
    snprintf(many + n, sizeof many - n, "]}");
    assert_int_equal(import(many, &id), 0);
    check_late_table(id);
    json_t *r = ops(id, 0);
    assert_int_equal((int)f(row(r, "E"), "calls"), 65);
    json_decref(r);
    /* more late rows on a thread than host_walk merges: that thread is sorted by SQLite */
    analyze_set_late_max(0);
    assert_int_equal(import(late, &id), 0);
    check_late_table(id);
    assert_int_equal(import(sorted, &id), 0);
    check_late_table(id);
    analyze_set_late_max(-1);
#undef KERNEL
#undef LAUNCH
}

/* Host ops on a GPU's track (one pid/tid for both) are in that track's timeline blob, and
 * every host event on any track can be what the host did during a GPU gap. */
static void test_host_ops_on_a_gpu_track(void **state) {
    (void)state;
#define G(name, cat, ts, dur, args) \
    "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"" name "\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{" args "}}"
    const char *t = "{\"traceEvents\":[" G("k", "kernel", 0, 10, "\"device\":0,\"stream\":7") "," G("H", "cpu_op", 20, 5, "") ","
                    G("U", "user_annotation", 30, 5, "") "," X("outer", "cpu_op", 1, 0, 60, "") ","
                    X("cudaLaunchKernel", "cuda_runtime", 1, 28, 6, "\"correlation\":3") ","
                    G("k", "kernel", 50, 10, "\"device\":0,\"stream\":7,\"correlation\":3") "]}";
#undef G
    long long id;
    assert_int_equal(import(t, &id), 0);
    db_conn *dbc = store_get(st);
    sqlite3 *db = db_sqlite(dbc);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT data FROM timeline_buckets WHERE session_id = ? AND track = 0", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_int64(q, 1, id);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    static unsigned char raw[TL_BLOB_RAW];
    const unsigned char *b = tl_blob_unpack(sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0), raw);
    assert_non_null(b);
    uint32_t count = 0;
    for (int k = 0; k < TL_BUCKETS; k++) {
        uint32_t c;
        memcpy(&c, b + k * 12 + 4, 4);
        count += c;
    }
    assert_int_equal(count, 4); /* two kernels, H and U */
    sqlite3_finalize(q);
    json_t *g = NULL;
    assert_int_equal(query_gpu(dbc, id, &g), 0);
    store_put(st, dbc);
    json_t *gap = json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(g, "devices"), 0), "gaps"), "largest"), 0);
    assert_non_null(gap);
    assert_string_equal(json_string_value(json_object_get(gap, "host_op")), "U"); /* the innermost op at 30 */
    assert_string_equal(json_string_value(json_object_get(gap, "host_call")), "cudaLaunchKernel");
    json_t *r = ops(id, 0);
    assert_true(fabs(f(row(r, "outer"), "cuda_time_total_us") - 10) < 1e-9); /* the call's kernel */
    json_decref(r);
    json_decref(g);
}

/* GPU busy is the union over every device's activity: one device reads ev_gpu, two need
 * the ev_gpu_ts index setup builds only then; both give the same union. */
static void test_gpu_busy_over_devices(void **state) {
    (void)state;
#define K(pid, dev, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":" #pid ",\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur \
    ",\"args\":{\"device\":" #dev ",\"stream\":7}}"
    const char *two = "{\"traceEvents\":[" X("op", "cpu_op", 1, 0, 100, "") "," K(0, 0, 0, 10) "," K(1, 1, 5, 15) "," K(0, 0, 40, 10) "]}";
    const char *one = "{\"traceEvents\":[" X("op", "cpu_op", 1, 0, 100, "") "," K(0, 0, 0, 10) "," K(0, 0, 5, 15) "," K(0, 0, 40, 10) "]}";
#undef K
    for (int i = 0; i < 2; i++) {
        long long id;
        assert_int_equal(import(i ? one : two, &id), 0);
        db_conn *dbc = store_get(st);
        json_t *g = NULL;
        assert_int_equal(query_gpu(dbc, id, &g), 0);
        store_put(st, dbc);
        assert_true(fabs(json_number_value(json_object_get(g, "gpu_busy_us")) - 30) < 1e-9); /* [0, 20] and [40, 50] */
        assert_int_equal((int)json_array_size(json_object_get(g, "devices")), i ? 1 : 2);
        json_decref(g);
    }
}

/* The scratch database is a file in $TMPDIR (load.c: attach_scratch): where none can be
 * made, loader_new says so, and nothing is left behind where one could. */
static void test_loader_scratch_file_in_tmpdir(void **state) {
    (void)state;
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/nonexistent-firstpass-dir", 1);
    load_opts o = {.name = "t"};
    char err[256] = "";
    loader *l = loader_new(st, &o, err, sizeof err);
    assert_null(l);
    assert_non_null(strstr(err, "cannot create a scratch file in /nonexistent-firstpass-dir"));
    char dir[] = "/tmp/fp-scratch-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("TMPDIR", dir, 1);
    long long id;
    assert_int_equal(import("{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 10, "") "]}", &id), 0);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    assert_int_equal(rmdir(dir), 0); /* empty again: the scratch file went with the loader */
}

/* Every track with timed events has its timeline blob, whoever bucketed it: the GPU tracks
 * are done by analyze.c's gpu_job when there are at most 64 of them, here otherwise. */
static void test_timeline_tracks_whoever_buckets_them(void **state) {
    (void)state;
    for (int streams = 3; streams <= 70; streams += 67) {
        char t[32768];
        size_t n = (size_t)snprintf(t, sizeof t, "{\"traceEvents\":[" X("op", "cpu_op", 1, 0, 1000, ""));
        for (int k = 0; k < streams; k++)
            n += (size_t)snprintf(t + n, sizeof t - n,
                                  ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":%d,\"ts\":%d,\"dur\":5,"
                                  "\"args\":{\"device\":0,\"stream\":%d}}", 100 + k, 10 * k, 100 + k);
        snprintf(t + n, sizeof t - n, "]}");
        long long id;
        assert_int_equal(import(t, &id), 0);
        db_conn *dbc = store_get(st);
        json_t *tl = NULL;
        assert_int_equal(query_timeline(dbc, id, 0, 1000, 100, NULL, NULL, &tl), 0);
        store_put(st, dbc);
        assert_int_equal((int)json_array_size(json_object_get(tl, "tracks")), streams + 1);
        json_decref(tl);
    }
}

static void test_ingest_input_shapes_grouping(void **state) {
    (void)state;
    long long id;
    const char *t = "{\"traceEvents\":[" X("mm", "cpu_op", 1, 0, 10, "\"Input Dims\":[[2,3],[3,4]]") ","
                    X("mm", "cpu_op", 1, 20, 10, "\"Input Dims\":[[2,3],[3,4]]") "," X("mm", "cpu_op", 1, 40, 5, "\"Input Dims\":[[8,8],[]]") "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 1);
    size_t i;
    json_t *x;
    int seen = 0;
    json_array_foreach(json_object_get(r, "operators"), i, x) {
        const char *sh = json_string_value(json_object_get(x, "input_shapes"));
        if (!strcmp(sh, "[[2, 3], [3, 4]]")) { assert_int_equal((int)f(x, "calls"), 2); seen |= 1; }
        if (!strcmp(sh, "[[8, 8], []]")) { assert_int_equal((int)f(x, "calls"), 1); seen |= 2; }
    }
    assert_int_equal(seen, 3);
    json_decref(r);
}

static void test_ingest_phases_count_kernels(void **state) {
    (void)state;
    long long id;
    /* Three decode_step ranges, each launching two kernels of 2 us. */
    char t[8192];
    int o = snprintf(t, sizeof t, "{\"traceEvents\":[");
    for (int i = 0; i < 3; i++) {
        int b = i * 100, c = i * 10;
        o += snprintf(t + o, sizeof t - (size_t)o,
                      "%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"decode_step\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":50},"
                      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":2,\"args\":{\"correlation\":%d}},"
                      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":2,\"args\":{\"correlation\":%d}},"
                      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%d,\"dur\":2,\"args\":{\"correlation\":%d}},"
                      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%d,\"dur\":2,\"args\":{\"correlation\":%d}}",
                      i ? "," : "", b, b + 1, c + 1, b + 5, c + 2, b + 10, c + 1, b + 20, c + 2);
    }
    snprintf(t + o, sizeof t - (size_t)o, "]}");
    assert_int_equal(import(t, &id), 0);
    db_conn *dbc = store_get(st);
    json_t *p = NULL;
    assert_int_equal(query_phases(dbc, id, &p), 0);
    store_put(st, dbc);
    json_t *ph = json_array_get(json_object_get(p, "phases"), 0);
    assert_string_equal(json_string_value(json_object_get(ph, "name")), "decode_step");
    assert_int_equal(json_integer_value(json_object_get(ph, "count")), 3);
    assert_int_equal(json_integer_value(json_object_get(ph, "kernels")), 6);
    assert_true(fabs(f(ph, "gpu_busy_us") - 12) < 1e-9);
    assert_true(fabs(f(ph, "cpu_only_us") - 138) < 1e-9);
    json_decref(p);
}

static void test_ingest_gzip_in_pieces_and_truncated(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 100, "") "]}";
    unsigned char z[512];
    z_stream s;
    memset(&s, 0, sizeof s);
    deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    s.next_in = (unsigned char *)t;
    s.avail_in = (uInt)strlen(t);
    s.next_out = z;
    s.avail_out = sizeof z;
    assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
    size_t zl = sizeof z - s.avail_out;
    deflateEnd(&s);
    long long id;
    char err[256];
    assert_int_equal(import_bytes(z, zl, 3, 0, &id, err), 0);     /* sniffed */
    assert_int_equal(import_bytes(z, zl, 5, 1, &id, err), 0);     /* Content-Encoding */
    assert_int_equal(import_bytes(z, zl - 6, 5, 0, &id, err), ERR_PARSE); /* truncated */
}

static void test_ingest_bad_input_codes(void **state) {
    (void)state;
    long long id;
    char err[256];
    static const struct { const char *body; int rc; } cases[] = {
        {"{\"traceEvents\":[", ERR_PARSE},
        {"not json", ERR_PARSE},
        {"{\"foo\":1}", ERR_NOTTRACE},
        {"42", ERR_NOTTRACE},
        {"{\"traceEvents\":[1]}", ERR_INVALID},
        {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":\"x\",\"dur\":1}]}", ERR_INVALID},
        {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":5,\"ts\":1,\"dur\":1}]}", ERR_INVALID},
        {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":-1}]}", ERR_INVALID},
        {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":{},\"dur\":1}]}", ERR_INVALID},
    };
    db_conn *dbc = store_get(st);
    sqlite3 *db = db_sqlite(dbc);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sessions", -1, &s, NULL);
    sqlite3_step(s);
    int before = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = import_bytes(cases[i].body, strlen(cases[i].body), 4, 0, &id, err);
        if (rc != cases[i].rc) fail_msg("case %zu (%s): got %d want %d (%s)", i, cases[i].body, rc, cases[i].rc, err);
    }
    /* Nothing half-stored. */
    sqlite3_step(s);
    assert_int_equal(sqlite3_column_int(s, 0), before);
    sqlite3_finalize(s);
    store_put(st, dbc);
}

static void test_ingest_unknown_categories_kept(void **state) {
    (void)state;
    long long id;
    const char *t = "{\"traceEvents\":[" X("A", "cpu_op", 1, 0, 10, "") ",{\"ph\":\"Q\",\"cat\":\"weird\",\"name\":\"q\",\"pid\":1,\"tid\":1},"
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"main\"}}],\"extra\":{\"k\":[1,2]}}";
    assert_int_equal(import(t, &id), 0);
    db_conn *dbc = store_get(st);
    json_t *sj = NULL;
    assert_int_equal(query_session(dbc, id, &sj), 0);
    store_put(st, dbc);
    assert_int_equal(json_integer_value(json_object_get(sj, "event_count")), 3);
    json_decref(sj);
}


/* torch's EventList._remove_dup_nodes (issue 19): an op whose same-named parent has it as its
 * only child is merged into the parent, repeatedly; a parent with two children keeps both. */
static void test_analyze_same_name_merge(void **state) {
    (void)state;
    long long id;
    /* S [0,100] > S [10,90] > S [20,80] (a chain: one call), then T [200,300] with two T children. */
    const char *t = "{\"traceEvents\":[" X("S", "cpu_op", 1, 0, 100, "") "," X("S", "cpu_op", 1, 10, 80, "") ","
                    X("S", "cpu_op", 1, 20, 60, "") "," X("T", "cpu_op", 1, 200, 100, "") "," X("T", "cpu_op", 1, 210, 10, "") ","
                    X("T", "cpu_op", 1, 230, 10, "") "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    assert_int_equal((int)f(row(r, "S"), "calls"), 1);
    assert_true(fabs(f(row(r, "S"), "cpu_time_total_us") - 100) < 1e-9);
    assert_true(fabs(f(row(r, "S"), "self_cpu_time_total_us") - 100) < 1e-9); /* the chain's self time is the outer's */
    assert_int_equal((int)f(row(r, "T"), "calls"), 3);
    assert_true(fabs(f(row(r, "T"), "self_cpu_time_total_us") - 100) < 1e-9);
    json_decref(r);
}

/* ProfilerStep#N is one ProfilerStep* row (torch's table), and a 2021-schema Operator event
 * with '#' in its name is a record_function range: a phase, not a cpu_op (issue 19). */
static void test_analyze_steps_folded_and_2021_ranges(void **state) {
    (void)state;
    long long id;
    const char *t = "{\"traceEvents\":[" X("ProfilerStep#5", "Operator", 1, 0, 100, "") "," X("aten::mm", "Operator", 1, 10, 20, "") ","
                    X("ProfilerStep#6", "Operator", 1, 100, 50, "") "," X("## forward ##", "Operator", 1, 110, 20, "") "]}";
    assert_int_equal(import(t, &id), 0);
    json_t *r = ops(id, 0);
    assert_int_equal((int)f(row(r, "ProfilerStep*"), "calls"), 2);
    assert_string_equal(json_string_value(json_object_get(row(r, "ProfilerStep*"), "kind")), "user_annotation");
    assert_string_equal(json_string_value(json_object_get(row(r, "## forward ##"), "kind")), "user_annotation");
    assert_string_equal(json_string_value(json_object_get(row(r, "aten::mm"), "kind")), "cpu_op");
    json_decref(r);
    db_conn *dbc = store_get(st);
    json_t *ph = NULL, *sus = NULL;
    assert_int_equal(query_phases(dbc, id, &ph), 0);
    assert_int_equal(query_suspects(dbc, id, &sus), 0);
    store_put(st, dbc);
    int steps = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(ph, "phases"), i, p)
        if (!strcmp(json_string_value(json_object_get(p, "name")), "ProfilerStep*")) steps = (int)json_integer_value(json_object_get(p, "count"));
    assert_int_equal(steps, 2);
    json_t *s = json_object_get(sus, "steps");
    assert_int_equal((int)json_integer_value(json_object_get(s, "count")), 2);
    assert_true(fabs(json_number_value(json_object_get(s, "mean_us")) - 75) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(s, "p90_us")) - 100) < 1e-9); /* nearest rank: sorted[ceil(0.9 * 2) - 1] */
    json_decref(ph);
    json_decref(sus);
}

/* A gap while the launching thread runs Python is python_overhead, culprit the
 * python_function (issue 19: python_function events were never looked at). */
static void test_analyze_idle_labelled_by_python(void **state) {
    (void)state;
    long long id;
    /* launches at 0 and 1000; between them the thread is in sample() for 900 us: the GPU
     * idles from 30 (first kernel's end) to 1002 (second kernel's start) */
    const char *t = "{\"traceEvents\":[" X("aten::mm", "cpu_op", 1, 0, 10, "") "," X("cudaLaunchKernel", "cuda_runtime", 1, 1, 2, "\"correlation\":1") ","
                    X("sample", "python_function", 1, 50, 900, "") "," X("aten::mm", "cpu_op", 1, 1000, 10, "") ","
                    X("cudaLaunchKernel", "cuda_runtime", 1, 1001, 2, "\"correlation\":2") ","
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":5,\"dur\":25,\"args\":{\"correlation\":1,\"device\":0,\"stream\":7}},"
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1002,\"dur\":25,\"args\":{\"correlation\":2,\"device\":0,\"stream\":7}}]}";
    assert_int_equal(import(t, &id), 0);
    db_conn *dbc = store_get(st);
    json_t *sus = NULL;
    assert_int_equal(query_suspects(dbc, id, &sus), 0);
    store_put(st, dbc);
    json_t *top = json_array_get(json_object_get(sus, "suspects"), 0);
    assert_non_null(top);
    assert_string_equal(json_string_value(json_object_get(top, "category")), "python_overhead");
    assert_string_equal(json_string_value(json_object_get(top, "culprit")), "sample");
    /* [30, 50] and [950, 1000] untraced and [50, 950] in sample() are Python's (970 us); the
     * 2 us in the second aten::mm are that op's */
    assert_true(fabs(json_number_value(json_object_get(top, "at_stake_us")) - 970) < 1e-6);
    json_t *c0 = json_array_get(json_object_get(json_object_get(top, "evidence"), "top_contributors"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "name")), "sample");
    assert_true(fabs(json_number_value(json_object_get(c0, "us")) - 900) < 1e-6);
    json_decref(sus);
}

/* The at-stake time of suspect category cat in a /suspects reply, -1 when it did not fire. */
static double at_stake(json_t *sus, const char *cat) {
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(sus, "suspects"), i, x)
        if (!strcmp(json_string_value(json_object_get(x, "category")), cat)) return json_number_value(json_object_get(x, "at_stake_us"));
    return -1;
}

/* Closes the event array begun in t (n bytes of cap), imports it (t is freed) and returns
 * the session's /suspects reply. */
static json_t *suspects_of(char *t, size_t cap, size_t n) {
    n += (size_t)snprintf(t + n, cap - n, "]}");
    assert_true(n < cap);
    long long id;
    assert_int_equal(import(t, &id), 0);
    free(t);
    db_conn *dbc = store_get(st);
    json_t *sus = NULL;
    assert_int_equal(query_suspects(dbc, id, &sus), 0);
    store_put(st, dbc);
    return sus;
}

/* The us of contributor name in suspect category cat's evidence, -1 when absent. */
static double contributor_us(json_t *sus, const char *cat, const char *name) {
    size_t i, j;
    json_t *x, *c;
    json_array_foreach(json_object_get(sus, "suspects"), i, x) {
        if (strcmp(json_string_value(json_object_get(x, "category")), cat)) continue;
        json_array_foreach(json_object_get(json_object_get(x, "evidence"), "top_contributors"), j, c)
            if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return json_number_value(json_object_get(c, "us"));
    }
    return -1;
}

/* Kernel-wait gaps whose launches run out of order (idle.c: one device's gaps are a stream,
 * read by launch order only when each thread's come in it; else rows and igap_kw). One
 * thread launches 20 pairs first, aten::add's kernel on stream 7 then aten::mul's on stream
 * 8, all before t = 200; from t = 1000 the device runs each pair mul first: mul_i at
 * 1000 + 100 i, add_i 50 us later, each 2 us. Every gap (48 us) starts after its kernel's
 * launch: kernel waits, by launch (lts) 1, 16, 11, 26, 21, ... Each is the short op's that
 * launched it (20 calls, 5 us host each, 2 us kernels): add 20 x 48, mul 19 x 48 (mul_0
 * ends the lead-in, not a gap). Read in stream order as if it were launch order, the walk
 * passed each add launch before its gap came up and gave 19 of add's 20 gaps to no one. */
static void test_analyze_kernel_waits_out_of_launch_order(void **state) {
    (void)state;
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    n += (size_t)snprintf(t + n, cap - n, "{\"traceEvents\":[");
    for (int i = 0; i < 20; i++) {
        double b = i * 10.0, k = 1000 + i * 100.0;
        n += (size_t)snprintf(t + n, cap - n,
                              "%s" X("aten::add", "cpu_op", 1, %g, 5, "") "," X("cudaLaunchKernel", "cuda_runtime", 1, %g, 2, "\"correlation\":%d")
                              "," X("aten::mul", "cpu_op", 1, %g, 4, "") "," X("cudaLaunchKernel", "cuda_runtime", 1, %g, 2, "\"correlation\":%d")
                              ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"add_k\",\"pid\":0,\"tid\":7,\"ts\":%g,\"dur\":2,"
                              "\"args\":{\"correlation\":%d,\"device\":0,\"stream\":7}}"
                              ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"mul_k\",\"pid\":0,\"tid\":8,\"ts\":%g,\"dur\":2,"
                              "\"args\":{\"correlation\":%d,\"device\":0,\"stream\":8}}",
                              i ? "," : "", b, b + 1, 2 * i + 1, b + 5, b + 6, 2 * i + 2, k + 50, 2 * i + 1, k, 2 * i + 2);
        assert_true(n < cap);
    }
    json_t *sus = suspects_of(t, cap, n);
    assert_true(fabs(contributor_us(sus, "launch_bound", "aten::add") - 20 * 48) < 1e-6);
    assert_true(fabs(contributor_us(sus, "launch_bound", "aten::mul") - 19 * 48) < 1e-6);
    assert_true(fabs(at_stake(sus, "launch_bound") - 39 * 48) < 1e-6);
    json_decref(sus);
}

/* The GPU activity that ends the lead-in and the one that starts the tail, on two devices,
 * with ties (idle.c edge_note): the first by (start, with a correlation first, the lowest)
 * and the last by (end, with a correlation first, the highest), whatever device it ran on.
 * Threads 2 and 3 each hold a range over both windows and launch one kernel into each;
 * device 0 (scanned first) also runs an activity with no correlation at each edge. Lead-in
 * [0, 100): the kernels of correlations 3 (thread 2, device 1) and 5 (thread 3, device 0)
 * both start at 100: thread 2's warmup_B takes it. Tail [500, 700): 7 (thread 2, device 0)
 * and 9 (thread 3, device 1) both end at 500: thread 3's post_C. Taking the first row
 * scanned would give both edges to no launch; taking the first device's, warmup_C. */
#define KD(ts, dur, dev, corr) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":" #dev ",\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{" corr "\"device\":" #dev ",\"stream\":7}}"
static void test_analyze_edges_tie_break_across_devices(void **state) {
    (void)state;
    size_t cap = 1 << 12, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    n += (size_t)snprintf(t + n, cap - n, "%s",
                          "{\"traceEvents\":[" X("warmup_B", "user_annotation", 2, 0, 100, "") "," X("warmup_C", "user_annotation", 3, 0, 100, "")
                          "," X("post_B", "user_annotation", 2, 400, 300, "") "," X("post_C", "user_annotation", 3, 400, 300, "")
                          "," X("cudaLaunchKernel", "cuda_runtime", 2, 50, 2, "\"correlation\":3")
                          "," X("cudaLaunchKernel", "cuda_runtime", 3, 60, 2, "\"correlation\":5")
                          "," X("cudaLaunchKernel", "cuda_runtime", 2, 410, 2, "\"correlation\":7")
                          "," X("cudaLaunchKernel", "cuda_runtime", 3, 420, 2, "\"correlation\":9")
                          "," KD(100, 50, 0, "") "," KD(100, 60, 0, "\"correlation\":5,") "," KD(100, 40, 1, "\"correlation\":3,")
                          "," KD(450, 50, 0, "\"correlation\":7,") "," KD(480, 20, 1, "\"correlation\":9,") "," KD(490, 10, 0, ""));
    assert_true(n < cap);
    json_t *sus = suspects_of(t, cap, n);
    json_t *x;
    size_t i;
    int seen = 0;
    json_array_foreach(json_object_get(sus, "suspects"), i, x) {
        const char *cat = json_string_value(json_object_get(x, "category"));
        const char *who = json_string_value(json_object_get(x, "culprit"));
        if (!strcmp(cat, "startup")) { assert_string_equal(who, "warmup_B"); seen |= 1; }
        if (!strcmp(cat, "tail")) { assert_string_equal(who, "post_C"); seen |= 2; }
    }
    assert_int_equal(seen, 3);
    json_decref(sus);
}
#undef KD

/* Each gap's launch found by a cursor over the launches in id order (idle.c lcur): ids that
 * go back (5 then 3), jump far ahead (200: a seek), an id with two launches (201: the
 * earliest, at 25, as "corr = ? LIMIT 1" took it from the index) and one with none (7).
 * Gaps: [110, 130] ends at id 3, launched at 15: kernel wait; [140, 170] at 200, launched
 * at 160: host wait; [180, 200] at 201, launched at 25: kernel wait (the later launch, 190,
 * would make it a host wait); [210, 240] at 7: other. */
#define LK(ts, dur, corr) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"correlation\":" #corr ",\"device\":0,\"stream\":7}}"
#define LR(tid, ts, corr) X("cudaLaunchKernel", "cuda_runtime", tid, ts, 2, "\"correlation\":" #corr)
static void test_analyze_gap_launches_by_cursor(void **state) {
    (void)state;
    const char *t = "{\"traceEvents\":[" X("op", "cpu_op", 1, 0, 300, "") "," LR(1, 15, 3) "," LR(1, 20, 5) "," LR(1, 25, 201) ","
                    LR(1, 160, 200) "," X("op2", "cpu_op", 2, 185, 10, "") "," LR(2, 190, 201) "," LK(100, 10, 5) ","
                    LK(130, 10, 3) "," LK(170, 10, 200) "," LK(200, 10, 201) "," LK(240, 10, 7) "]}";
    json_t *g = reply_of(t, query_suspects);
    json_t *by = json_object_get(json_object_get(g, "idle"), "by_class_us");
    assert_non_null(by);
    assert_true(fabs(f(by, "kernel_wait") - 40) < 1e-9);
    assert_true(fabs(f(by, "host_wait") - 30) < 1e-9);
    assert_true(fabs(f(by, "other") - 30) < 1e-9);
    json_decref(g);
}
#undef LK
#undef LR

/* CPU-only wall time in priority order (suspects_cpu.c sus_cpu_priority over cseg.c's pieces): two
 * threads of 100 iterations each, more than one block (CSEG_BLOCK pieces) per (category, thread), so
 * the shares are merges across threads and blocks. Per iteration b: thread 1 loads data
 * [b, b+3] and runs aten::mm [b+3, b+8]; thread 2 runs aten::mm [b+2, b+5], Python
 * [b+5, b+6], aten::add [b+6, b+7] and Python [b+7, b+9]. Data loading takes [b, b+3]; the
 * top op (aten::mm, 800 us over both threads against aten::add's 100) the rest of [b+2, b+8];
 * Python what is left of its pieces, [b+8, b+9]; aten::add, not the top op, takes nothing. */
static void test_analyze_cpu_only_priority_across_threads(void **state) {
    (void)state;
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    n += (size_t)snprintf(t + n, cap - n, "{\"traceEvents\":[");
    for (int i = 0; i < 100; i++) {
        double b = i * 10.0;
        n += (size_t)snprintf(t + n, cap - n,
                              "%s" X("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 1, %g, 3, "")
                              "," X("aten::mm", "cpu_op", 1, %g, 5, "") "," X("aten::mm", "cpu_op", 2, %g, 3, "")
                              "," X("forward", "python_function", 2, %g, 1, "") "," X("aten::add", "cpu_op", 2, %g, 1, "")
                              "," X("forward", "python_function", 2, %g, 2, ""),
                              i ? "," : "", b, b + 3, b + 2, b + 5, b + 6, b + 7);
        assert_true(n < cap);
    }
    json_t *sus = suspects_of(t, cap, n);
    assert_true(fabs(at_stake(sus, "data_loading") - 300) < 1e-6);
    assert_true(fabs(at_stake(sus, "cpu_bound_op") - 500) < 1e-6);
    assert_true(fabs(at_stake(sus, "python_overhead") - 100) < 1e-6);
    json_t *top = json_array_get(json_object_get(sus, "suspects"), 0);
    assert_string_equal(json_string_value(json_object_get(top, "culprit")), "aten::mm");
    /* a CPU-only trace's data-loading experiment names no GPU and no pinned memory */
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(sus, "suspects"), i, x) {
        if (strcmp(json_string_value(json_object_get(x, "category")), "data_loading")) continue;
        const char *next = json_string_value(json_object_get(x, "next_experiment"));
        assert_non_null(strstr(next, "num_workers"));
        assert_null(strstr(next, "GPU"));
        assert_null(strstr(next, "pin_memory"));
    }
    json_decref(sus);
}

/* The commit writes with foreign keys off (store/commit.c) and must hand its pooled
 * connection back with them on: the pool is last in, first out, so the next store_get is
 * that connection, and a session deleted on it would leave its rows behind. */
static void test_commit_leaves_foreign_keys_on(void **state) {
    (void)state;
    long long id;
    assert_int_equal(import("{\"traceEvents\":[" X("aten::mm", "cpu_op", 1, 0, 10, "") "]}", &id), 0);
    db_conn *c = store_get(st);
    assert_non_null(c);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db_sqlite(c), "PRAGMA foreign_keys", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(db_sqlite(c), "PRAGMA foreign_key_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE); /* every row's session exists */
    sqlite3_finalize(q);
    store_put(st, c);
    assert_int_equal(store_delete_session(st, id), 0);
    c = store_get(st);
    assert_int_equal(sqlite3_prepare_v2(db_sqlite(c), "SELECT COUNT(*) FROM operator_rows WHERE session_id = ?", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_int64(q, 1, id);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0); /* the delete cascaded */
    sqlite3_finalize(q);
    store_put(st, c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingest_nesting_self_time),
        cmocka_unit_test(test_ingest_partial_overlap_is_not_nested),
        cmocka_unit_test(test_ingest_unsorted_threads_zero_duration),
        cmocka_unit_test(test_ingest_correlation_attributes_cuda_time),
        cmocka_unit_test(test_ingest_memory_self_and_total),
        cmocka_unit_test(test_ingest_late_rows_walk_like_sorted),
        cmocka_unit_test(test_host_ops_on_a_gpu_track),
        cmocka_unit_test(test_gpu_busy_over_devices),
        cmocka_unit_test(test_loader_scratch_file_in_tmpdir),
        cmocka_unit_test(test_timeline_tracks_whoever_buckets_them),
        cmocka_unit_test(test_ingest_input_shapes_grouping),
        cmocka_unit_test(test_ingest_phases_count_kernels),
        cmocka_unit_test(test_ingest_gzip_in_pieces_and_truncated),
        cmocka_unit_test(test_ingest_bad_input_codes),
        cmocka_unit_test(test_ingest_unknown_categories_kept),
        cmocka_unit_test(test_analyze_same_name_merge),
        cmocka_unit_test(test_analyze_steps_folded_and_2021_ranges),
        cmocka_unit_test(test_analyze_idle_labelled_by_python),
        cmocka_unit_test(test_analyze_cpu_only_priority_across_threads),
        cmocka_unit_test(test_analyze_kernel_waits_out_of_launch_order),
        cmocka_unit_test(test_commit_leaves_foreign_keys_on),
        cmocka_unit_test(test_launch_delays_in_memory_as_in_sqlite),
        cmocka_unit_test(test_steps_and_phases_in_one_pass),
        cmocka_unit_test(test_steps_device_spans_in_one_pass),
        cmocka_unit_test(test_steps_host_ranges_spilled),
        cmocka_unit_test(test_steps_host_collectives_are_communication),
        cmocka_unit_test(test_memory_rows_in_memory_as_in_sqlite),
        cmocka_unit_test(test_memory_totals_from_the_trace),
        cmocka_unit_test(test_ingest_gpu_rows_summed_per_correlation),
        cmocka_unit_test(test_analyze_edges_tie_break_across_devices),
        cmocka_unit_test(test_analyze_gap_launches_by_cursor),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
