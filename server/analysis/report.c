/* report.c: the suspect list: three smells with their evidence, and the five-line report.
 *
 * Reads the finished operator table (scratch.ops) and the GPU facts; writes nothing.
 * Thresholds are in report.h. Every number a line quotes comes from those two inputs,
 * so a test can recompute it from the trace. */
#include "analysis/report.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const report_line_keys[REPORT_LINES] = {"workload", "hardware", "top_cuda_time", "top_cpu_cost", "next_experiment"};
const char *const report_line_titles[REPORT_LINES] = {"Workload", "Hardware", "Top CUDA time", "Top CPU / orchestration cost",
                                                      "Next experiment"};

typedef struct op {
    char name[256];
    char kind[32];
    long long calls;
    double self_cpu, self_cuda, cuda_total, cpu_total;
} op;

static int has_word(const char *lower, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (strstr(lower, words[i])) return 1;
    return 0;
}

const char *report_op_class(const char *name) {
    char lower[256];
    size_t i;
    for (i = 0; name[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    static const char *const memory[] = {"copy", "memcpy", "memset", "aten::to", "_to_copy", "cast", "contiguous", "gather",
                                         "scatter", "index", "aten::cat", "clone", "fill_", "reshape", "permute", "transpose",
                                         "nccl", NULL};
    static const char *const compute[] = {"mm", "matmul", "gemm", "gemv", "linear", "conv", "attention", "sdpa", "flash",
                                          "cutlass", "cublas", "xmma", "cudnn", "bmm", "einsum", NULL};
    if (has_word(lower, memory)) return "memory";
    if (has_word(lower, compute)) return "compute";
    return "other";
}

/* Loads the operator rows (grouping 0) of one kind class into ops[], largest first by col. */
static int load_ops(sqlite3 *db, const char *where, const char *order, op *ops, int max) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT name, kind, calls, self_cpu, self_cuda, cuda_total, cpu_total FROM scratch.ops"
             " WHERE grouping = 0 AND %s ORDER BY %s DESC LIMIT %d", where, order, max);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return 0;
    int n = 0;
    while (n < max && sqlite3_step(s) == SQLITE_ROW) {
        op *o = &ops[n++];
        snprintf(o->name, sizeof o->name, "%s", (const char *)sqlite3_column_text(s, 0));
        snprintf(o->kind, sizeof o->kind, "%s", (const char *)sqlite3_column_text(s, 1));
        o->calls = sqlite3_column_int64(s, 2);
        o->self_cpu = sqlite3_column_double(s, 3);
        o->self_cuda = sqlite3_column_double(s, 4);
        o->cuda_total = sqlite3_column_double(s, 5);
        o->cpu_total = sqlite3_column_double(s, 6);
    }
    sqlite3_finalize(s);
    return n;
}

static double sum_col(sqlite3 *db, const char *expr) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT TOTAL(%s) FROM scratch.ops WHERE grouping = 0", expr);
    sqlite3_stmt *s = NULL;
    double v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Times like torch prints them: 12.345ms, 456.000us, 1.234s. */
static void fmt_us(double us, char *out, size_t n) {
    if (us >= 1e6) snprintf(out, n, "%.3fs", us / 1e6);
    else if (us >= 1e3) snprintf(out, n, "%.3fms", us / 1e3);
    else snprintf(out, n, "%.3fus", us);
}

static json_t *smell(const char *id, const char *title, int fired, const char *summary, json_t *evidence) {
    return json_pack("{s:s,s:s,s:b,s:s,s:o}", "id", id, "title", title, "fired", fired, "summary", summary, "evidence", evidence);
}

#define HOST_OPS "kind IN ('cpu_op', 'cuda_runtime', 'cuda_driver')"

json_t *report_draft(const report_input *in) {
    sqlite3 *db = in->db;
    double self_cuda_total = sum_col(db, "CASE WHEN kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') THEN self_cuda END"), self_cpu_total = sum_col(db, "self_cpu");
    json_t *idle_j = json_object_get(in->gpu, "gpu_idle_fraction");
    int has_gpu = json_is_number(idle_j);
    double idle = has_gpu ? json_number_value(idle_j) : 0;
    json_t *smells = json_array();
    char line[5][1024], buf[512], t1[32], t2[32];

    /* Smell 1: one operator owns the run. CPU ops first (what the model calls); a trace
     * with only GPU rows (the collector's) falls back to kernels. */
    op top[8];
    int ntop = load_ops(db, "kind = 'cpu_op' AND self_cuda > 0", "self_cuda", top, 8);
    const char *basis = "self CUDA";
    double denom = self_cuda_total;
    if (ntop == 0) ntop = load_ops(db, "kind IN ('kernel', 'gpu_memcpy', 'gpu_memset')", "self_cuda", top, 8);
    if (ntop == 0 && !has_gpu) {
        ntop = load_ops(db, "kind = 'cpu_op'", "self_cpu", top, 8);
        basis = "self CPU";
        denom = self_cpu_total;
    }
    int owns = 0;
    if (ntop > 0 && denom > 0) {
        double v = !strcmp(basis, "self CPU") ? top[0].self_cpu : top[0].self_cuda;
        double share = v / denom;
        const char *cls = report_op_class(top[0].name);
        owns = share >= SMELL_OWNS_SHARE;
        fmt_us(v, t1, sizeof t1);
        snprintf(buf, sizeof buf, "%s holds %.1f%% of %s time (%s, %lld calls; %s)", top[0].name, share * 100, basis, t1,
                 top[0].calls, !strcmp(cls, "compute") ? "compute-bound work" : !strcmp(cls, "memory") ? "memory traffic, not model math" : "neither matmul nor copy");
        json_array_append_new(smells, smell("one_operator_owns_the_run", "One operator owns the run", owns, buf,
                                            json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:I,s:s,s:f}", "operator", top[0].name, "kind", top[0].kind, "basis", basis,
                                                      "share", share, "time_us", v, "total_us", denom, "calls", top[0].calls,
                                                      "class", cls, "threshold", SMELL_OWNS_SHARE)));
    } else {
        json_array_append_new(smells, smell("one_operator_owns_the_run", "One operator owns the run", 0,
                                            "no operator time to compare", json_object()));
    }

    /* Smell 2: a cheap operator called thousands of times. */
    op cheap[1];
    int cheap_fired = 0;
    char where[256];
    snprintf(where, sizeof where, HOST_OPS " AND kind = 'cpu_op' AND calls >= %d AND self_cpu / calls < %f",
             SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
    int nc = load_ops(db, where, "self_cpu", cheap, 1);
    double cshare = nc && self_cpu_total > 0 ? cheap[0].self_cpu / self_cpu_total : 0;
    const char *cbasis = "self CPU";
    op ck[1];
    snprintf(where, sizeof where, "kind = 'kernel' AND calls >= %d AND self_cuda / calls < %f", SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
    int nk = load_ops(db, where, "self_cuda", ck, 1);
    double kshare = nk && self_cuda_total > 0 ? ck[0].self_cuda / self_cuda_total : 0;
    if (nk && kshare > cshare) { cheap[0] = ck[0]; cshare = kshare; cbasis = "CUDA"; nc = 1; }
    if (nc) {
        double t = !strcmp(cbasis, "CUDA") ? cheap[0].self_cuda : cheap[0].self_cpu;
        cheap_fired = cshare >= SMELL_CHEAP_SHARE;
        fmt_us(t / (double)cheap[0].calls, t1, sizeof t1);
        fmt_us(t, t2, sizeof t2);
        snprintf(buf, sizeof buf, "%s: %lld calls at %s each, %s in all (%.1f%% of %s time)", cheap[0].name, cheap[0].calls, t1, t2,
                 cshare * 100, cbasis);
        json_array_append_new(smells, smell("cheap_operator_called_often", "A cheap operator called thousands of times", cheap_fired, buf,
                                            json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:s,s:i,s:f,s:f}", "operator", cheap[0].name, "kind",
                                                      cheap[0].kind, "calls", cheap[0].calls, "mean_us", t / (double)cheap[0].calls,
                                                      "total_us", t, "share", cshare, "basis", cbasis, "min_calls", SMELL_CHEAP_CALLS,
                                                      "max_mean_us", SMELL_CHEAP_MEAN_US, "min_share", SMELL_CHEAP_SHARE)));
    } else {
        snprintf(buf, sizeof buf, "no operator has %d+ calls under %.0fus each", SMELL_CHEAP_CALLS, SMELL_CHEAP_MEAN_US);
        json_array_append_new(smells, smell("cheap_operator_called_often", "A cheap operator called thousands of times", 0, buf, json_object()));
    }

    /* Smell 3: CPU time large while CUDA time is sparse. */
    op host[3], syncs[3];
    int nh = load_ops(db, "kind = 'cpu_op'", "self_cpu", host, 3);
    int ns = load_ops(db, "kind IN ('cuda_runtime', 'cuda_driver') AND (name LIKE '%Synchronize%' OR name LIKE 'cudaMemcpy'"
                          " OR name LIKE 'cudaMemcpy\\_%' ESCAPE '\\' OR name LIKE 'cudaMemcpy2D%' OR name LIKE 'cuMemcpy%')"
                          " AND name NOT LIKE '%Async%'", "self_cpu", syncs, 3);
    int idle_fired = has_gpu && idle >= SMELL_IDLE_SHARE;
    json_t *hosts = json_array(), *syncj = json_array();
    for (int i = 0; i < nh; i++)
        json_array_append_new(hosts, json_pack("{s:s,s:f,s:I}", "operator", host[i].name, "self_cpu_us", host[i].self_cpu, "calls", host[i].calls));
    for (int i = 0; i < ns; i++)
        json_array_append_new(syncj, json_pack("{s:s,s:f,s:I}", "call", syncs[i].name, "self_cpu_us", syncs[i].self_cpu, "calls", syncs[i].calls));
    if (has_gpu) {
        int o = snprintf(buf, sizeof buf, "GPU idle %.1f%% of the wall time", idle * 100);
        if (nh) o += snprintf(buf + o, sizeof buf - (size_t)o, "; host: %s", host[0].name);
        if (ns && o < (int)sizeof buf) snprintf(buf + o, sizeof buf - (size_t)o, "; syncs: %s (%lld calls)", syncs[0].name, syncs[0].calls);
    } else {
        snprintf(buf, sizeof buf, "no GPU activity in the trace");
    }
    json_array_append_new(smells, smell("gpu_idle_host_bound", "CPU time large while CUDA time is sparse", idle_fired, buf,
                                        json_pack("{s:o,s:o,s:o,s:f}", "gpu_idle_fraction", has_gpu ? json_real(idle) : json_null(),
                                                  "host_ops", hosts, "syncs", syncj, "threshold", SMELL_IDLE_SHARE)));

    /* The five lines. */
    {
        int o = snprintf(line[0], sizeof line[0], "%s", in->name && *in->name ? in->name : "unnamed session");
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach((json_t *)in->labels, k, v) {
            o += snprintf(line[0] + o, sizeof line[0] - (size_t)o, "%s%s=%s", first ? " (" : ", ", k, json_string_value(v));
            first = 0;
            if (o >= (int)sizeof line[0]) break;
        }
        if (!first && o < (int)sizeof line[0]) o += snprintf(line[0] + o, sizeof line[0] - (size_t)o, ")");
        fmt_us(in->wall_us, t1, sizeof t1);
        if (o < (int)sizeof line[0]) snprintf(line[0] + o, sizeof line[0] - (size_t)o, "; %lld events over %s", in->events, t1);
    }
    {
        const json_t *rv = json_object_get(in->meta, "cuda_runtime_version");
        if (in->hardware && *in->hardware && rv)
            snprintf(line[1], sizeof line[1], "%s, CUDA runtime %lld", in->hardware, (long long)json_integer_value(rv));
        else if (in->hardware && *in->hardware)
            snprintf(line[1], sizeof line[1], "%s", in->hardware);
        else
            snprintf(line[1], sizeof line[1], "unknown: the trace carries no device properties");
    }
    if (ntop > 0 && denom > 0 && strcmp(basis, "self CPU")) {
        fmt_us(top[0].self_cuda, t1, sizeof t1);
        int o = snprintf(line[2], sizeof line[2], "%s %.1f%% of self CUDA (%s, %lld calls, %s)", top[0].name,
                         top[0].self_cuda / denom * 100, t1, top[0].calls, report_op_class(top[0].name));
        if (ntop > 1 && o < (int)sizeof line[2])
            snprintf(line[2] + o, sizeof line[2] - (size_t)o, "; then %s %.1f%%", top[1].name, top[1].self_cuda / denom * 100);
    } else {
        snprintf(line[2], sizeof line[2], "no GPU time in the trace");
    }
    {
        op h[2];
        int n = load_ops(db, HOST_OPS, "self_cpu", h, 2);
        if (n && self_cpu_total > 0) {
            fmt_us(h[0].self_cpu, t1, sizeof t1);
            int o = snprintf(line[3], sizeof line[3], "%s %.1f%% of self CPU (%s, %lld calls)", h[0].name,
                             h[0].self_cpu / self_cpu_total * 100, t1, h[0].calls);
            if (n > 1 && o < (int)sizeof line[3])
                o += snprintf(line[3] + o, sizeof line[3] - (size_t)o, "; then %s %.1f%%", h[1].name, h[1].self_cpu / self_cpu_total * 100);
            if (has_gpu && o < (int)sizeof line[3]) snprintf(line[3] + o, sizeof line[3] - (size_t)o, "; GPU idle %.1f%%", idle * 100);
        } else {
            snprintf(line[3], sizeof line[3], "no host operators in the trace");
        }
    }
    /* Next experiment: the strongest fired smell decides, idle GPU first (nothing else
     * matters while the GPU waits), then launch overhead, then the dominant operator. */
    if (idle_fired)
        snprintf(line[4], sizeof line[4], "Find what the host waits on%s%s: remove per-step syncs (.item(), .cpu(), cudaMemcpy) "
                 "from the loop, use pinned memory with non_blocking copies, overlap data loading; re-profile and compare GPU idle",
                 ns ? ", starting with " : "", ns ? syncs[0].name : "");
    else if (cheap_fired)
        snprintf(line[4], sizeof line[4], "Cut launches of %s (%lld calls): fuse with torch.compile or capture the step in a CUDA graph, "
                 "batch the loop; compare calls and CUDA total before/after", cheap[0].name, cheap[0].calls);
    else if (owns && !strcmp(report_op_class(top[0].name), "memory"))
        snprintf(line[4], sizeof line[4], "Remove the traffic of %s: avoid dtype/device conversions and .contiguous() copies, "
                 "keep tensors on the GPU in the final dtype; re-profile its share", top[0].name);
    else if (owns)
        snprintf(line[4], sizeof line[4], "Check how close %s runs to peak: its shapes, dtype (bf16/TF32, tensor cores) and kernel "
                 "choice; compare achieved FLOP/s with the GPU's", top[0].name);
    else
        snprintf(line[4], sizeof line[4], "No smell fired: profile a longer steady-state window, or compare against a baseline session");

    json_t *draft = json_object();
    for (int i = 0; i < REPORT_LINES; i++) json_object_set_new(draft, report_line_keys[i], json_string(line[i]));
    return json_pack("{s:o,s:o}", "draft", draft, "smells", smells);
}
