/* report.c: the five-line report and the three smells, drafted at ingest from the suspect
 * list (suspects.c) and the operator table (wscratch.ops and kscratch.ops: scratch.sql).
 *
 * Reads those and the suspects and GPU documents; writes nothing. Every number a line
 * quotes comes from those inputs, so a test can recompute it from the API. A failed query
 * fails the draft (ERR_DB), never a silent empty line. */
#include "analysis/report.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"

const char *const report_line_keys[REPORT_LINES] = {"workload", "hardware", "top_cuda_time", "top_cpu_cost", "next_experiment"};
const char *const report_line_titles[REPORT_LINES] = {"Workload", "Hardware", "Top CUDA time", "Top CPU / orchestration cost",
                                                      "Next experiment"};

typedef struct op {
    char name[256];
    char kind[32];
    long long calls;
    double self_cpu, self_cuda, cuda_total, cpu_total;
} op;

/* The draft's state: its connection and the first failure of a query. */
typedef struct draft {
    const report_input *in;
    int rc;
    int rocm, cpu_only;
    double self_cuda_total, self_cpu_total;
    double outside;  /* share of self CUDA launched outside every op, where it put kernels first; else 0 */
} draft;

static int has_word(const char *lower, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (strstr(lower, words[i])) return 1;
    return 0;
}

/* The family the Top CUDA line calls an op or kernel of class "compute" by: normalization
 * (a cuDNN batch norm is compute by its library's name, and no matmul), attention,
 * convolution, matmul, else just compute. */
static const char *compute_family(const char *name) {
    char lower[256];
    size_t i;
    for (i = 0; name[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    static const char *const norm[] = {"batch_norm", "batchnorm", "bn_fw", "bn_bw", "bn_fwd", "bn_bwd", "layer_norm", "layernorm",
                                       "group_norm", "groupnorm", "instance_norm", "rms_norm", "rmsnorm", NULL};
    static const char *const attn[] = {"attention", "sdpa", "flash", "fmha", "attn", NULL};
    static const char *const conv[] = {"conv", "winograd", "implicit_gemm", "dgrad", "wgrad", "fprop", NULL};
    if (has_word(lower, norm)) return "normalization";
    if (has_word(lower, attn)) return "attention";
    static const char *const mm[] = {"mm", "matmul", "gemm", "gemv", "linear", "einsum", "cublas", "cutlass", "xmma", NULL};
    if (has_word(lower, conv)) return "convolution";
    return has_word(lower, mm) ? "matmul" : "compute";
}

const char *report_op_class(const char *name) {
    char lower[256];
    size_t i;
    for (i = 0; name[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    static const char *const comm[] = {"nccl", "rccl", "gloo:", "c10d::", "all_reduce", "allreduce", "all_gather", "allgather",
                                       "reduce_scatter", "reducescatter", "sendrecv", "record_param_comms", "mpi:", NULL};
    static const char *const memory[] = {"copy", "memcpy", "memset", "aten::to", "_to_copy", "cast", "contiguous", "gather",
                                         "scatter", "index", "aten::cat", "clone", "fill_", "reshape", "permute", "transpose", NULL};
    static const char *const compute[] = {"mm", "matmul", "gemm", "gemv", "linear", "conv", "attention", "sdpa", "flash",
                                          "cutlass", "cublas", "xmma", "cudnn", "bmm", "einsum", NULL};
    if (has_word(lower, comm)) return "communication";
    if (has_word(lower, memory)) return "memory";
    if (has_word(lower, compute)) return "compute";
    return "other";
}

/* The operator table by name, in two tables (scratch.sql): the walk's rows (grouping 0) and
 * the GPU rows (grouping 2), whose kinds are kernel, gpu_memcpy, gpu_memset and
 * gpu_user_annotation, never a host kind. A where names kinds of one of them. */
#define WALK_OPS "wscratch.ops"
#define GPU_OPS "kscratch.ops"

/* An operator row (name, kind, calls, self_cpu, self_cuda, cuda_total, cpu_total) into *o; a
 * name longer than a line's room is cut with an ellipsis, never mid-word silently. */
static void op_of_row(sqlite3_stmt *s, op *o) {
    const char *nm = utf8_clip((const char *)sqlite3_column_text(s, 0), sizeof o->name - 4, o->name, sizeof o->name);
    if (nm != o->name) snprintf(o->name, sizeof o->name, "%s", nm);
    utf8_snprintf(o->kind, sizeof o->kind, "%s", (const char *)sqlite3_column_text(s, 1));
    o->calls = sqlite3_column_int64(s, 2);
    o->self_cpu = sqlite3_column_double(s, 3);
    o->self_cuda = sqlite3_column_double(s, 4);
    o->cuda_total = sqlite3_column_double(s, 5);
    o->cpu_total = sqlite3_column_double(s, 6);
}

/* The rows of table (WALK_OPS, GPU_OPS) that match where, largest first by order, equal
 * ones in walk order, into ops[]. Why not both tables every time: a where on host kinds
 * read every GPU row for nothing (100,000 kernel names: 20 ms a draft, issue 24). */
static int load_ops(draft *d, const char *table, const char *where, const char *order, op *ops, int max) {
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT name, kind, calls, self_cpu, self_cuda, cuda_total, cpu_total FROM %s"
             " WHERE grouping IN (0, 2) AND %s ORDER BY %s DESC, walk LIMIT %d", table, where, order, max);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(d->in->db, sql, -1, &s, NULL) != SQLITE_OK) {
        d->rc = ERR_DB;
        return 0;
    }
    int n = 0, st;
    while (n < max && (st = sqlite3_step(s)) == SQLITE_ROW) op_of_row(s, &ops[n++]);
    if (n < max && st != SQLITE_DONE) d->rc = ERR_DB;
    sqlite3_finalize(s);
    return n;
}

/* The walk's row (grouping 0) of the op named name into *o: 1, or 0 when there is none. */
static int op_named(draft *d, const char *name, op *o) {
    sqlite3_stmt *s = NULL;
    int found = 0;
    if (!name || sqlite3_prepare_v2(d->in->db, "SELECT name, kind, calls, self_cpu, self_cuda, cuda_total, cpu_total FROM " WALK_OPS
                                    " WHERE grouping = 0 AND name = ?1 ORDER BY self_cpu DESC, walk LIMIT 1", -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return 0;
    }
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW) {
        found = 1;
        op_of_row(s, o);
    }
    sqlite3_finalize(s);
    return found;
}

/* ---- the suspect list, read ---- */

static const json_t *suspect_of(const report_input *in, const char *category) {
    const json_t *s;
    size_t i;
    json_array_foreach(json_object_get(in->suspects, "suspects"), i, s)
        if (!strcmp(json_string_value(json_object_get(s, "category")), category)) return s;
    return NULL;
}

static int fired_any(const report_input *in, const char *const *cats) {
    for (int i = 0; cats[i]; i++)
        if (suspect_of(in, cats[i])) return 1;
    return 0;
}

/* ---- smells ---- */

static json_t *smell(const char *id, const char *title, int fired, const char *summary, json_t *evidence) {
    return json_pack("{s:s,s:s,s:b,s:s,s:o}", "id", id, "title", title, "fired", fired, "summary", summary, "evidence", evidence);
}

#define GPU_KINDS "kind IN ('kernel', 'gpu_memcpy', 'gpu_memset')"
/* A runtime or driver call whose own time is the host waiting on the GPU: a synchronize, or
 * a copy or memset call (a blocking one waits for its copy; an asynchronous one is short). */
#define WAITING_CALL "(name LIKE '%Synchronize%' OR name LIKE '%Memcpy%' OR name LIKE '%Memset%' OR name LIKE '%memcpy%')"
#define HOST_OPS "kind IN ('cpu_op', 'cuda_runtime', 'cuda_driver')"
/* A kernel or graph launch call that waited: in a GPU-bound run (GPU_BOUND of the wall
 * busy) a launch whose calls last LAUNCH_WAIT_US or more on average was blocked on a full
 * launch queue: the host waiting for the GPU to free a slot, not host work (issue 48, 6). */
#define LAUNCH_CALL "(name LIKE 'cudaLaunch%' OR name LIKE 'cuLaunch%' OR name LIKE 'hipLaunch%' OR name LIKE 'hipModuleLaunch%'" \
                    " OR name LIKE 'hipExtLaunch%' OR name LIKE '%GraphLaunch%')"
#define LAUNCH_WAITED LAUNCH_CALL " AND calls > 0 AND self_cpu >= 20.0 * calls"
#define GPU_BOUND 0.9

static const char *plural(long long n) { return n == 1 ? "" : "s"; }

/* The sum of column col over table's rows (grouping 0 and 2) that match where. */
static double sum_ops(draft *d, const char *table, const char *where, const char *col) {
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT TOTAL(%s) FROM %s WHERE grouping IN (0, 2) AND %s", col, table, where);
    sqlite3_stmt *s = NULL;
    double v = 0;
    if (sqlite3_prepare_v2(d->in->db, sql, -1, &s, NULL) != SQLITE_OK) d->rc = ERR_DB;
    else if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_double(s, 0);
    else d->rc = ERR_DB;
    sqlite3_finalize(s);
    return v;
}

/* Smell 1: one operator owns the run. CPU ops first (what the model calls); the kernels
 * instead where more GPU time was launched outside every op than by the top op and the top
 * kernel holds more than it (the collector's sessions, which have GPU rows only; a CUDA
 * graph replayed outside any aten op: its cudaGraphLaunch sits under no cpu_op, and an
 * .item() with 0.2 % of the GPU time was named the top). Then the first name is the
 * summary's top_cuda_operator too (analyze.c). A CPU-only trace: self CPU. suspects.c's
 * compute_bound has the same rule (kern_no_op). */
static json_t *smell_owns(draft *d, op *top, int *ntop) {
    /* not dominant_op: a GEMM owning the GPU is the model's work, a target and no alarm (its
     * question is the Next experiment's) */
    static const char *const cats[] = {"compute_bound_op", "memory_bound_op", "copies_casts", NULL},
                             *const cpu_cats[] = {"cpu_bound_op", NULL};
    *ntop = load_ops(d, WALK_OPS, "kind = 'cpu_op' AND self_cuda > 0", "self_cuda", top, 8);
    const char *basis = d->rocm ? "self GPU" : "self CUDA";
    double denom = d->self_cuda_total;
    double outside = *ntop > 0 ? denom - sum_ops(d, WALK_OPS, "kind = 'cpu_op'", "self_cuda") : 0;
    if (*ntop > 0 && outside > top[0].self_cuda) {
        op k[8];
        int nk = load_ops(d, GPU_OPS, GPU_KINDS, "self_cuda", k, 8);
        if (nk > 0 && k[0].self_cuda > top[0].self_cuda) { /* else the top op still holds more than any one kernel */
            memcpy(top, k, (size_t)nk * sizeof *k);
            *ntop = nk;
            d->outside = outside / denom;
        }
    }
    if (*ntop == 0) *ntop = load_ops(d, GPU_OPS, GPU_KINDS, "self_cuda", top, 8);
    if (*ntop == 0 && d->cpu_only) {
        *ntop = load_ops(d, WALK_OPS, "kind = 'cpu_op'", "self_cpu", top, 8);
        basis = "self CPU";
        denom = d->self_cpu_total;
    }
    if (*ntop == 0 || denom <= 0) return smell("one_operator_owns_the_run", "One operator owns the run", 0, "no operator time to compare", json_object());
    char buf[512], t1[32];
    double v = d->cpu_only ? top[0].self_cpu : top[0].self_cuda, share = v / denom;
    const char *cls = report_op_class(top[0].name);
    /* what it is; whether it is compute- or memory-bound only from the efficiency figures */
    char what[256];
    json_t *vd = d->cpu_only ? NULL : an_effic_verdict(d->in->effic, top[0].name);
    an_effic_phrase(vd, what, sizeof what);
    json_decref(vd);
    int norm = !strcmp(cls, "compute") && !strcmp(compute_family(top[0].name), "normalization"); /* a batch norm: no matmul */
    if (!*what)
        utf8_snprintf(what, sizeof what, "%s", norm ? "normalization" : !strcmp(cls, "compute") ? "matmul, convolution or attention" : !strcmp(cls, "memory")
                                                   ? "memory traffic, not model math" : !strcmp(cls, "communication") ? "communication"
                                                   : "neither matmul nor copy");
    utf8_snprintf(buf, sizeof buf, "%s holds %.1f%% of %s time (%s, %lld call%s; %s)", top[0].name, share * 100, basis,
             timefmt_us(v, t1, sizeof t1), top[0].calls, plural(top[0].calls), what);
    return smell("one_operator_owns_the_run", "One operator owns the run", fired_any(d->in, d->cpu_only ? cpu_cats : cats), buf,
                 json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:I,s:s}", "operator", top[0].name, "kind", top[0].kind, "basis", basis, "share",
                           share, "time_us", v, "total_us", denom, "calls", top[0].calls, "class", cls));
}

/* Smell 2: a cheap operator called thousands of times (the busiest such op, or kernel). */
static json_t *smell_cheap(draft *d) {
    static const char *const cats[] = {"launch_bound", "synchronous_launch", NULL};
    op c[1], k[1];
    char where[256], buf[512], t1[32], t2[32];
    snprintf(where, sizeof where, "kind = 'cpu_op' AND calls >= %d AND self_cpu / calls < %f", SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
    int nc = load_ops(d, WALK_OPS, where, "self_cpu", c, 1);
    double share = nc && d->self_cpu_total > 0 ? c[0].self_cpu / d->self_cpu_total : 0;
    const char *basis = "self CPU";
    snprintf(where, sizeof where, "kind = 'kernel' AND calls >= %d AND self_cuda / calls < %f", SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
    int nk = load_ops(d, GPU_OPS, where, "self_cuda", k, 1);
    double kshare = nk && d->self_cuda_total > 0 ? k[0].self_cuda / d->self_cuda_total : 0;
    int on_gpu = nk && kshare > share;
    if (on_gpu) { c[0] = k[0]; share = kshare; basis = d->rocm ? "GPU" : "CUDA"; nc = 1; }
    int fired = fired_any(d->in, cats);
    const json_t *lb = suspect_of(d->in, "launch_bound");
    op l;
    if (lb && op_named(d, json_string_value(json_object_get(lb, "culprit")), &l) && l.calls > 0) {
        /* the suspect list's launch-bound op is the evidence: one culprit on every surface */
        utf8_snprintf(buf, sizeof buf, "%s: %lld calls at %s each, kernels shorter than their launches, %s of the wall at stake", l.name,
                      l.calls, timefmt_us(l.self_cpu / (double)l.calls, t1, sizeof t1),
                      timefmt_us(json_number_value(json_object_get(lb, "at_stake_us")), t2, sizeof t2));
        return smell("cheap_operator_called_often", "A cheap operator called thousands of times", fired, buf,
                     json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:s,s:O,s:s}", "operator", l.name, "kind", l.kind, "calls", l.calls, "mean_us",
                               l.self_cpu / (double)l.calls, "total_us", l.self_cpu,
                               "share", d->self_cpu_total > 0 ? l.self_cpu / d->self_cpu_total : 0.0, "basis", "self CPU", "at_stake_us",
                               json_object_get(lb, "at_stake_us"), "category", "launch_bound"));
    }
    if (!nc) {
        utf8_snprintf(buf, sizeof buf, "no operator has %d+ calls under %.0fus each", SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
        return smell("cheap_operator_called_often", "A cheap operator called thousands of times", fired, buf, json_object());
    }
    double t = on_gpu ? c[0].self_cuda : c[0].self_cpu;
    utf8_snprintf(buf, sizeof buf, "%s: %lld calls at %s each, %s in all (%.1f%% of %s time)", c[0].name, c[0].calls,
             timefmt_us(t / (double)c[0].calls, t1, sizeof t1), timefmt_us(t, t2, sizeof t2), share * 100, basis);
    return smell("cheap_operator_called_often", "A cheap operator called thousands of times", fired, buf,
                 json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:s,s:i,s:f}", "operator", c[0].name, "kind", c[0].kind, "calls", c[0].calls, "mean_us",
                           t / (double)c[0].calls, "total_us", t, "share", share, "basis", basis, "min_calls", SMELL_CHEAP_CALLS,
                           "max_mean_us", SMELL_CHEAP_MEAN_US));
}

/* Smell 3: CPU time large while CUDA time is sparse (the GPU waits on the host). The title
 * says GPU on a ROCm trace: its kernels are HIP's, and "CUDA" there misleads. */
static json_t *smell_idle(draft *d) {
    static const char *const cats[] = {"data_loading", "host_sync", "python_overhead", "cpu_bound_op", "startup", "tail", "allocator_churn",
                                       "compilation", "tokenization", "garbage_collection", "host_work", "copy_on_critical_path",
                                       "pageable_memcpy", NULL};
    op host[3], syncs[3];
    char buf[512];
    int nh = load_ops(d, WALK_OPS, "kind = 'cpu_op'", "self_cpu", host, 3);
    int ns = load_ops(d, WALK_OPS, "kind IN ('cuda_runtime', 'cuda_driver') AND (name LIKE '%Synchronize%' OR name LIKE 'cudaMemcpy'"
                         " OR name LIKE 'cudaMemcpy\\_%' ESCAPE '\\' OR name LIKE 'cudaMemcpy2D%' OR name LIKE 'cuMemcpy%')"
                         " AND name NOT LIKE '%Async%'", "self_cpu", syncs, 3);
    json_t *idle_j = json_object_get(d->in->gpu, "gpu_idle_fraction");
    double idle = json_number_value(idle_j);
    json_t *hosts = json_array(), *syncj = json_array();
    for (int i = 0; i < nh; i++)
        json_array_append_new(hosts, json_pack("{s:s,s:f,s:I}", "operator", host[i].name, "self_cpu_us", host[i].self_cpu, "calls", host[i].calls));
    for (int i = 0; i < ns; i++)
        json_array_append_new(syncj, json_pack("{s:s,s:f,s:I}", "call", syncs[i].name, "self_cpu_us", syncs[i].self_cpu, "calls", syncs[i].calls));
    if (!d->cpu_only) {
        int o = utf8_snprintf(buf, sizeof buf, "GPU idle %.1f%% of the wall time", idle * 100);
        if (nh) o += utf8_snprintf(buf + o, sizeof buf - (size_t)o, "; host: %s", host[0].name);
        if (ns && o < (int)sizeof buf) utf8_snprintf(buf + o, sizeof buf - (size_t)o, "; syncs: %s (%lld call%s)", syncs[0].name, syncs[0].calls,
                                                        plural(syncs[0].calls));
    } else {
        utf8_snprintf(buf, sizeof buf, "no GPU activity in the trace");
    }
    return smell("gpu_idle_host_bound", d->rocm ? "CPU time large while GPU time is sparse" : "CPU time large while CUDA time is sparse", !d->cpu_only && fired_any(d->in, cats), buf,
                 json_pack("{s:o,s:o,s:o}", "gpu_idle_fraction", d->cpu_only ? json_null() : json_real(idle), "host_ops", hosts, "syncs", syncj));
}

/* ---- the five lines ---- */

static void line_workload(const draft *d, char *out, size_t n) {
    const report_input *in = d->in;
    int o = utf8_snprintf(out, n, "%s", in->name && *in->name ? in->name : "unnamed session");
    const char *k;
    json_t *v;
    int first = 1;
    json_object_foreach((json_t *)in->labels, k, v) {
        if (o >= (int)n) break;
        o += utf8_snprintf(out + o, n - (size_t)o, "%s%s=%s", first ? " (" : ", ", k, json_string_value(v));
        first = 0;
    }
    if (!first && o < (int)n) o += utf8_snprintf(out + o, n - (size_t)o, ")");
    char t1[32], t2[32];
    if (o < (int)n) o += utf8_snprintf(out + o, n - (size_t)o, "; %lld events over %s", in->events, timefmt_us(in->wall_us, t1, sizeof t1));
    const json_t *steps = json_object_get(in->suspects, "steps");
    long long ns = (long long)json_integer_value(json_object_get(steps, "count"));
    if (json_is_object(steps) && o < (int)n)
        utf8_snprintf(out + o, n - (size_t)o, "; %lld step%s, mean %s (p90 %s)", ns, ns == 1 ? "" : "s",
                 timefmt_us(json_number_value(json_object_get(steps, "mean_us")), t1, sizeof t1),
                 timefmt_us(json_number_value(json_object_get(steps, "p90_us")), t2, sizeof t2));
}

static void line_hardware(const draft *d, char *out, size_t n) {
    const report_input *in = d->in;
    const json_t *rv = json_object_get(in->meta, "cuda_runtime_version");
    if (in->hardware && *in->hardware && rv && !d->rocm)
        utf8_snprintf(out, n, "%s, CUDA runtime %lld", in->hardware, (long long)json_integer_value(rv));
    else if (in->hardware && *in->hardware)
        utf8_snprintf(out, n, "%s%s", in->hardware, d->rocm ? ", ROCm" : "");
    else if (d->cpu_only)
        utf8_snprintf(out, n, "CPU only: the trace has no GPU activity and no device properties");
    else
        utf8_snprintf(out, n, "unknown: the trace carries no device properties");
}

/* top: smell_owns's operators, on GPU time here (only a CPU-only trace, answered first, has
 * them on self CPU). */
static void line_top_gpu(const draft *d, const op *top, int ntop, char *out, size_t n) {
    if (d->cpu_only && d->in->hardware && *d->in->hardware) { /* devices, no activity: not a CPU-only run */
        utf8_snprintf(out, n, "no GPU activity in the trace (its device properties name %s)", d->in->hardware);
        return;
    }
    if (d->cpu_only) {
        utf8_snprintf(out, n, "no GPU time: a CPU-only trace");
        return;
    }
    if (ntop <= 0 || d->self_cuda_total <= 0) {
        utf8_snprintf(out, n, "no GPU time in the trace");
        return;
    }
    char t1[32], bound[256];
    const char *word = d->rocm ? "self GPU" : "self CUDA", *cls = report_op_class(top[0].name);
    /* what it is by name (a family, never a bound: a batch-1 GEMV is a matmul and
     * memory-bound), then its bound from the efficiency figures, or why it is unknown */
    json_t *v = an_effic_verdict(d->in->effic, top[0].name);
    an_effic_phrase(v, bound, sizeof bound);
    if (!*bound)
        utf8_snprintf(bound, sizeof bound, "bound unknown: %s", v ? json_string_value(json_object_get(v, "bound_unknown_reason")) : "no memory");
    json_decref(v);
    int o = utf8_snprintf(out, n, "%s %.1f%% of %s (%s, %lld call%s, %s); %s", top[0].name, top[0].self_cuda / d->self_cuda_total * 100, word,
                     timefmt_us(top[0].self_cuda, t1, sizeof t1), top[0].calls, plural(top[0].calls),
                     !strcmp(cls, "compute") ? compute_family(top[0].name) : cls, bound);
    if (ntop > 1 && o < (int)n) o += utf8_snprintf(out + o, n - (size_t)o, "; then %s %.1f%%", top[1].name, top[1].self_cuda / d->self_cuda_total * 100);
    if (d->outside > 0 && o < (int)n) utf8_snprintf(out + o, n - (size_t)o, "; %.1f%% of the GPU time was launched outside every operator", d->outside * 100);
}

/* The host's largest cost: the largest host-side suspect (a DataLoader range, a sync, Python,
 * one op), whose time is the GPU's idle time (or, CPU-only, the wall's); then the op with the
 * most self CPU time. */
static void line_top_cpu(draft *d, char *out, size_t n) {
    static const char *const host_cats[] = {"data_loading", "host_sync", "python_overhead", "cpu_bound_op", "launch_bound", "communication",
                                            "startup", "tail", "allocator_churn", "compilation", "tokenization", "garbage_collection",
                                            "synchronous_launch", "host_work", "step_outlier", NULL};
    const json_t *best = NULL, *s;
    size_t i;
    json_array_foreach(json_object_get(d->in->suspects, "suspects"), i, s) {
        for (int k = 0; host_cats[k] && !best; k++)
            if (!strcmp(json_string_value(json_object_get(s, "category")), host_cats[k])) best = s;
        if (best) break;
    }
    char t1[32];
    int o = 0;
    if (best)
        o = utf8_snprintf(out, n, "%s (%s): %s, %.1f%% of the wall%s", json_string_value(json_object_get(best, "culprit")),
                     json_string_value(json_object_get(best, "category")),
                     timefmt_us(json_number_value(json_object_get(best, "at_stake_us")), t1, sizeof t1),
                     json_number_value(json_object_get(best, "at_stake_fraction")) * 100, d->cpu_only ? "" : " with the GPU waiting");
    /* Host work apart from host waiting: a sync call or a copy call's own time is the host
     * blocked on the GPU (a DtoH copy it waits in), not work it does (issue 41). */
    op h[1];
    const json_t *gpu = json_object_get(d->in->suspects, "gpu");
    int gpu_bound = !d->cpu_only && json_number_value(json_object_get(gpu, "utilization_of_wall")) >= GPU_BOUND;
    int nh = load_ops(d, WALK_OPS, gpu_bound ? "kind IN ('cpu_op', 'user_annotation', 'cuda_runtime', 'cuda_driver') AND name != "
                                               "'ProfilerStep*' AND NOT (kind IN ('cuda_runtime', 'cuda_driver') AND (" WAITING_CALL
                                               " OR (" LAUNCH_WAITED ")))"
                                             : "kind IN ('cpu_op', 'user_annotation', 'cuda_runtime', 'cuda_driver') AND name != 'ProfilerStep*'"
                                               " AND NOT (kind IN ('cuda_runtime', 'cuda_driver') AND " WAITING_CALL ")", "self_cpu", h, 1);
    double wait = d->cpu_only ? 0 : sum_ops(d, WALK_OPS, "kind IN ('cuda_runtime', 'cuda_driver') AND " WAITING_CALL, "self_cpu");
    double lwait = gpu_bound ? sum_ops(d, WALK_OPS, "kind IN ('cuda_runtime', 'cuda_driver') AND " LAUNCH_WAITED, "self_cpu") : 0;
    if (nh && d->self_cpu_total > 0 && o < (int)n)
        o += utf8_snprintf(out + o, n - (size_t)o, "%s%s %.1f%% of self CPU (%s, %lld call%s)", o ? "; top host work: " : "", h[0].name,
                      h[0].self_cpu / d->self_cpu_total * 100, timefmt_us(h[0].self_cpu, t1, sizeof t1), h[0].calls,
                      plural(h[0].calls));
    else if (!o)
        o = utf8_snprintf(out, n, "no host operators in the trace");
    if (wait > 0 && d->self_cpu_total > 0 && o < (int)n)
        o += utf8_snprintf(out + o, n - (size_t)o, "; host waiting on the GPU (syncs, blocking copies): %s, %.1f%% of self CPU",
                           timefmt_us(wait, t1, sizeof t1), wait / d->self_cpu_total * 100);
    if (lwait > 0 && d->self_cpu_total > 0 && o < (int)n)
        o += utf8_snprintf(out + o, n - (size_t)o, "; launches blocked on a full launch queue (the GPU is the bottleneck): %s, %.1f%% of "
                           "self CPU", timefmt_us(lwait, t1, sizeof t1), lwait / d->self_cpu_total * 100);
    /* "GPU busy" is the headline alone (tb-profiler's utilization, /efficiency); the share of
     * the wall is named as such (issue 51, item 1) */
    const json_t *util = json_object_get(json_object_get(d->in->effic, "session"), "gpu_utilization");
    if (json_is_object(gpu) && json_is_number(util) && o < (int)n)
        utf8_snprintf(out + o, n - (size_t)o, "; GPU busy %.1f%%, busy %.1f%% of the wall", json_number_value(util) * 100,
                      json_number_value(json_object_get(gpu, "utilization_of_wall")) * 100);
    else if (json_is_object(gpu) && o < (int)n)
        utf8_snprintf(out + o, n - (size_t)o, "; busy %.1f%% of the wall", json_number_value(json_object_get(gpu, "utilization_of_wall")) * 100);
}

/* The top suspect's next experiment, naming its culprit; or what a healthy run is told. */
static void line_next(const draft *d, char *out, size_t n) {
    const json_t *top = json_array_get(json_object_get(d->in->suspects, "suspects"), 0);
    if (top) {
        utf8_snprintf(out, n, "%s", json_string_value(json_object_get(top, "next_experiment")));
    } else if (json_is_true(json_object_get(d->in->suspects, "healthy"))) {
        const json_t *gpu = json_object_get(d->in->suspects, "gpu");
        utf8_snprintf(out, n, "Healthy: the GPU is busy %.1f%% of the wall and no suspect holds 5%% of it; keep this session as a baseline "
                 "(PUT /api/v1/baselines/NAME) and compare the next change against it per step",
                 json_number_value(json_object_get(gpu, "utilization_of_wall")) * 100);
    } else {
        utf8_snprintf(out, n, "No suspect holds 5%% of the wall: profile a longer steady-state window, or compare against a baseline session "
                 "per step");
    }
}

static int is_rocm(const report_input *in) {
    const char *hw = in->hardware ? in->hardware : "";
    return strstr(hw, "AMD") || strstr(hw, "Radeon") || strstr(hw, "Instinct");
}

int report_draft(const report_input *in, json_t **out) {
    draft d = {in, 0, is_rocm(in), json_is_null(json_object_get(in->suspects, "gpu")), in->self_cuda_total, in->self_cpu_total, 0};
    *out = NULL;
    op top[8];
    int ntop = 0;
    json_t *smells = json_array();
    json_array_append_new(smells, smell_owns(&d, top, &ntop));
    json_array_append_new(smells, smell_cheap(&d));
    json_array_append_new(smells, smell_idle(&d));
    char line[REPORT_LINES][1024];
    line_workload(&d, line[0], sizeof line[0]);
    line_hardware(&d, line[1], sizeof line[1]);
    line_top_gpu(&d, top, ntop, line[2], sizeof line[2]);
    line_top_cpu(&d, line[3], sizeof line[3]);
    line_next(&d, line[4], sizeof line[4]);
    if (d.rc) {
        json_decref(smells);
        return d.rc;
    }
    json_t *draft_lines = json_object();
    for (int i = 0; i < REPORT_LINES; i++) json_object_set_new(draft_lines, report_line_keys[i], json_string(line[i]));
    *out = json_pack("{s:o,s:o}", "draft", draft_lines, "smells", smells);
    return *out ? 0 : ERR_NOMEM;
}
