/* suspects.c: the suspect list: each category of waste named by its culprit and ranked by
 * the time at stake (issue 19; definitions: tests/triage/oracle.py, which labels the corpus
 * the server is tested against).
 *
 * Owns the category table, the tally (each category's contributions and evidence), the
 * ranked list and the "suspects" document (GET /api/v1/sessions/{id}/suspects). Each family
 * of rules has a file of its own where its premise and its advice sit together (issue 48
 * item 8); this file holds no rule's premise nor advice, and touches no scratch table.
 *
 * Categories by file (at stake: at most what removing the culprit could save, in wall time):
 * suspects_host.c: the idle labels of idle.c, by category_of, and the walk's statistics
 *   data_loading     host-wait idle under a DataLoader range
 *   host_sync        host-wait idle of gaps that start as a blocking sync returns, up to the
 *                    time the host was blocked (idle.c's sync rule)
 *   python_overhead  host-wait idle under a python_function, a user_annotation's own time or nothing
 *   launch_bound     host-wait idle under a short-kernel op, and kernel-wait idle of launches from one
 *   cpu_bound_op     host-wait idle under one other cpu_op (the largest one only)
 *   communication    host-wait idle under a collective range (plus suspects_gpu.c's part)
 *   startup          the lead-in (trace start to first GPU activity) but its DataLoader
 *                    instants (data_loading's), labelled on the first launch's thread
 *   tail             the tail (last GPU activity's end to trace end) but its DataLoader
 *                    instants, labelled on the thread that launched the last activity
 *   allocator_churn  host-wait idle under an allocator call (cudaMalloc, cudaFree, ...) or empty_cache
 *   compilation      host-wait idle under a compile range or frame (dynamo, inductor) or a module load
 *   tokenization     host-wait idle under a tokenizer
 *   garbage_collection host-wait idle under the garbage collector
 *   synchronous_launch host-wait idle of gaps that start as a blocking kernel launch returns,
 *                    where most launches of the trace block (CUDA_LAUNCH_BLOCKING=1)
 *   host_work        host-wait idle under any other runtime or driver call (its own time)
 * suspects_gpu.c: passes over the GPU rows
 *   communication    exposed collective kernels (suspects_comm.c: their facts and advice)
 *   pageable_memcpy  the union of copies to or from pageable host memory
 *   copy_on_critical_path the union of host<->device copies from pinned memory (pageable ones
 *                    are pageable_memcpy's) less the union of kernels: GPU time no kernel hides
 *   compute_bound_op one non-GEMM, non-copy, non-data-movement op holding > COMPUTE_SHARE of the GPU time
 *   memory_bound_op  one data-movement op (gather, scatter, index, cat, embedding: names.h
 *                    NF_MEM_OP) holding > COMPUTE_SHARE of the GPU time
 *   dominant_op      a target, not waste: the op whose kernels hold > COMPUTE_SHARE of the GPU
 *                    time when no category above names it; at stake: its GPU time; listed last
 * suspects_steps.c
 *   step_outlier     the steps longer than OUTLIER_RATIO x the median step, each one's excess
 *                    over the median; culprit: what that step did longer than the median step
 * suspects_cpu.c: CPU-only traces
 *   cpu_threads      cpu_bound_op on a CPU-only trace when its op is a matrix op whose steady,
 *                    parallelisable calls (>= PARALLEL_MIN_FLOPS) reach no more than one
 *                    core's FLOP/s (ONE_CORE_GFLOPS): one thread where the host has many
 * suspects_waste.c (waste inside a busy GPU, by kind): copies_casts, unfused_elementwise,
 *   tiny_kernels, math_below_roof; suspects_recompute.c: recomputed_work. Both rank their
 *   entries into the list an_suspects builds.
 * A suspect fires at FIRE_FRACTION of the wall (step_outlier whenever one step reaches
 * OUTLIER_RATIO x the median: one slow step in fifty is a cause too); healthy = GPU busy >=
 * HEALTHY_BUSY of the wall and nothing fired. A CPU-only trace labels every host instant of
 * every thread; a category's at stake is then its largest thread's (suspects_cpu.c).
 * suspects_idle.c (issue 48) gives each suspect its members, names a spread category by the
 * range holding it, adds the ranges that hold idle on their own, and counts per step only
 * the work inside the steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/an.h"
#include "analysis/names.h"
#include "analysis/suspects.h"
#include "analysis/suspects_recompute.h"
#include "analysis/suspects_waste.h"
#include "lib/err.h"
#include "lib/utf8.h"

#define FIRE_FRACTION 0.05          /* a suspect fires at this share of the wall */
#define HEALTHY_BUSY 0.90           /* healthy: GPU busy this share of the wall, nothing fired */

static const char *const cat_ids[] = {"data_loading", "host_sync", "python_overhead", "launch_bound", "cpu_bound_op",
                                      "communication", "copies_casts", "pageable_memcpy", "compute_bound_op", "startup", "tail",
                                      "allocator_churn", "compilation", "tokenization", "garbage_collection", "synchronous_launch",
                                      "copy_on_critical_path", "memory_bound_op", "step_outlier", "host_work", "dominant_op",
                                      "cpu_threads"};
_Static_assert(sizeof cat_ids / sizeof cat_ids[0] == C_N, "one id per category");
const char *category_name(int c) { return cat_ids[c]; }

/* ---- the tally: contributions per category ---- */

/* Adds us to category cat's contribution from name on track (us <= 0: nothing). 0 or ERR_NOMEM. */
int sus_credit(tally *t, int cat, long name, long track, double us) {
    if (us <= 0) return 0;
    long key[3] = {cat, name, track};
    int fresh;
    long i = INTERN_SLOT(t->keys, key, sizeof key, t->c, t->n, t->cap, 64, &fresh);
    if (i < 0) return ERR_NOMEM;
    if (fresh) t->c[i] = (contrib){cat, name, track, 0};
    t->c[i].us += us;
    return 0;
}

static int cmp_contrib_name(const void *x, const void *y) {
    const contrib *a = *(const contrib *const *)x, *b = *(const contrib *const *)y;
    if (a->name != b->name) return a->name < b->name ? -1 : 1;
    return a < b ? -1 : a > b; /* t's order within a name: the sums add up as they did */
}

/* The name of category cat with the most labelled time, over all threads (ties: the first
 * name met in t). Why sorted runs, not a sum per contribution: a CPU-only trace of 100k
 * names on a few threads has 100k contributions a category, and the nested sums were
 * quadratic (issue 43). On no memory, the largest single contribution. */
long sus_top_name(const tally *t, int cat) {
    const contrib **v = malloc((t->n ? t->n : 1) * sizeof *v);
    size_t n = 0;
    long best = -1;
    double bv = -1;
    for (size_t i = 0; i < t->n; i++) {
        if (t->c[i].cat != cat) continue;
        if (v) v[n++] = &t->c[i];
        else if (t->c[i].us > bv) { bv = t->c[i].us; best = t->c[i].name; }
    }
    if (!v) return best;
    qsort(v, n, sizeof *v, cmp_contrib_name);
    const contrib *first = NULL; /* the earliest contribution of the best name, for ties */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double sum = 0;
        const contrib *f = v[i]; /* the name's earliest contribution: v is in t's order within it */
        for (; j < n && v[j]->name == v[i]->name; j++) sum += v[j]->us;
        if (sum > bv || (sum == bv && first && f < first)) { bv = sum; best = v[i]->name; first = f; }
        i = j;
    }
    free(v);
    return best;
}

/* ---- the list ---- */

/* Name id as evidence quotes it (EVIDENCE_NAME_MAX); "(untraced)" for none. */
static const char *evidence_name(A *a, long name, char *buf, size_t n) {
    return name >= 0 ? utf8_clip(an_str(a, name), EVIDENCE_NAME_MAX, buf, n) : "(untraced)";
}

/* The evidence of one suspect: the category's evidence plus its top contributors. */
static json_t *evidence_of(A *a, const tally *t, int cat, int cpu_only) {
    json_t *ev = t->evidence[cat] ? json_deep_copy(t->evidence[cat]) : json_object();
    json_t *top = json_array();
    /* the five largest contributors: selection, n is small */
    int used[5] = {-1, -1, -1, -1, -1};
    for (int k = 0; k < 5; k++) {
        int best = -1;
        for (size_t i = 0; i < t->n; i++) {
            if (t->c[i].cat != cat) continue;
            int dup = 0;
            for (int j = 0; j < k; j++) dup |= used[j] == (int)i;
            if (!dup && (best < 0 || t->c[i].us > t->c[best].us)) best = (int)i;
        }
        if (best < 0) break;
        used[k] = best;
        char cut[EVIDENCE_NAME_MAX + 4];
        json_t *row = json_pack("{s:s,s:f}", "name", evidence_name(a, t->c[best].name, cut, sizeof cut), "us", t->c[best].us);
        long tr = t->c[best].track; /* step_outlier's contributions have none (-1) */
        if (cpu_only && tr >= 0 && (size_t)tr < a->t->ntracks) json_object_set_new(row, "thread", json_string(a->t->tracks[tr].tid));
        json_array_append_new(top, row);
    }
    json_object_set_new(ev, "top_contributors", top);
    return ev;
}

/* Whether a CPU-only trace gives category cat wall time in sus_cpu_priority's order. */
static int cpu_ranked(int cat) {
    return cat == C_COMM || cat == C_DATA || cat == C_GC || cat == C_TOKENIZE || cat == C_COMPILE || cat == C_CPU || cat == C_PY;
}

/* Each category's at stake and culprit: the sum of its contributions (a CPU-only trace:
 * its largest thread's), the largest contributor; cpu_bound_op and compute_bound_op: one op. */
void sus_at_stake(const tally *t, int cat, const double *cpu_at, double *us, long *culprit) {
    *us = 0;
    *culprit = sus_top_name(t, cat);
    if (cpu_at && cpu_ranked(cat)) { /* CPU-only: sus_cpu_priority's share */
        *us = cpu_at[cat];
        return;
    }
    double best = -1;
    int single = cat == C_CPU || cat == C_COMPUTE || cat == C_MEMBOUND || cat == C_DOMINANT;
    for (size_t i = 0; i < t->n; i++) {
        const contrib *c = &t->c[i];
        if (c->cat != cat) continue;
        if (c->us > best) best = c->us;
        if (!single) *us += c->us;
    }
    if (single) *us = best > 0 ? best : 0;
}

static int rocm_trace(const A *a) {
    json_t *dp = json_object_get(a->t->meta, "deviceProperties");
    const char *n = json_string_value(json_object_get(json_array_get(dp, 0), "name"));
    return n && (strstr(n, "AMD") || strstr(n, "Radeon") || strstr(n, "Instinct"));
}

/* Whether category c fires: FIRE_FRACTION of the wall, or, for step_outlier, any step of
 * OUTLIER_RATIO x the median (its at stake is positive only then). */
int sus_fires(int c, double at, double wall) {
    if (wall <= 0 || at <= 0) return 0;
    return c == C_OUTLIER || at >= FIRE_FRACTION * wall;
}

/* How many graph launches the trace has, for the advice ("640 launches, 32 a step"), "" none. */
static void graph_note(const A *a, char *out, size_t n) {
    long long ng = a->sus->graph_launches;
    *out = '\0';
    if (ng > 0 && a->nsteps)
        snprintf(out, n, "%lld launch%s, %.0f a step", ng, ng == 1 ? "" : "es", (double)ng / (double)a->nsteps);
    else if (ng > 0)
        snprintf(out, n, "%lld launch%s", ng, ng == 1 ? "" : "es");
}

/* The next experiment of a suspect, naming its culprit: each family's advice sits in the
 * file of its rule, next to the premise it checks first (issue 41, issue 48 item 8). */
void sus_next_experiment(const advice_in *in, char *out, size_t n) {
    switch (in->cat) {
    case C_COMM: case C_PAGE: case C_COPY_CRIT: case C_COMPUTE: case C_MEMBOUND: case C_DOMINANT: sus_gpu_advice(in, out, n); return;
    case C_OUTLIER: sus_outlier_advice(in, out, n); return;
    case C_THREADS: sus_threads_advice(in, out, n); return;
    default: sus_host_advice(in, out, n); return; /* the idle categories, startup and tail */
    }
}

/* One suspect of category c: its culprit, at stake (wall: the trace's), evidence and next
 * experiment. nsteps: the steps a per-step share divides by (0: none). */
json_t *suspect_entry(A *a, const tally *t, int c, double at, long culprit, int cpu_only, size_t nsteps) {
    static const char *const smell[] = {"cpu_heavy", "cpu_heavy", "cpu_heavy", "many_small_calls", "cpu_heavy", NULL, "one_op_dominates",
                                        "cpu_heavy", "one_op_dominates", "cpu_heavy", "cpu_heavy", "cpu_heavy", "cpu_heavy", "cpu_heavy",
                                        "cpu_heavy", "cpu_heavy", "cpu_heavy", "one_op_dominates", NULL, "cpu_heavy", "one_op_dominates",
                                        "cpu_heavy"};
    _Static_assert(sizeof smell / sizeof smell[0] == C_N, "one smell (or NULL) per category");
    const char *name = culprit >= 0 ? an_str(a, culprit) : "(untraced)";
    char next[1024], graphs[96];
    graph_note(a, graphs, sizeof graphs);
    advice_in in = {c, name, t->evidence[c], culprit >= 0 ? sus_find_stat(a, culprit) : NULL, cpu_only, rocm_trace(a), sus_launches_block(a),
                    a->t->source ? a->t->source : "kineto", graphs, an_flags(a, culprit), an_any_flagged(a, NF_COMPILED), SYNC_PYTHON, ""};
    char blocker[256] = "";
    if (c == C_LAUNCH || c == C_PY) an_graph_blocker(a, blocker, sizeof blocker);
    in.blocker = blocker;
    if (c == C_SYNC) in.sync_origin = an_sync_origin(a, name, in.flags);
    sus_next_experiment(&in, next, sizeof next);
    if (c == C_PY || c == C_CPU || c == C_HOST_WORK || c == C_COMPILE || c == C_ALLOC || c == C_GC || c == C_TOKENIZE)
        an_once_advice(a, culprit, next, sizeof next);
    /* the lead-in, the tail and the outlier steps happen once: a share per step would read as a cost of each */
    int per_step = nsteps && c != C_START && c != C_TAIL && c != C_OUTLIER;
    return json_pack("{s:s,s:s,s:o,s:f,s:f,s:o,s:o,s:s}", "category", cat_ids[c], "culprit", name, "smell",
                     smell[c] ? json_string(smell[c]) : json_null(), "at_stake_us", at, "at_stake_fraction", at / a->wall,
                     "at_stake_per_step_us", per_step ? json_real(at / (double)nsteps) : json_null(), "evidence",
                     evidence_of(a, t, c, cpu_only), "next_experiment", next);
}

/* The order of a suspect list: by at stake, descending; dominant_op last (a target, not waste). */
static int entry_cmp(const void *x, const void *y) {
    const json_t *p = *(json_t *const *)x, *q = *(json_t *const *)y;
    int dp = !strcmp(json_string_value(json_object_get(p, "category")), cat_ids[C_DOMINANT]);
    int dq = !strcmp(json_string_value(json_object_get(q, "category")), cat_ids[C_DOMINANT]);
    if (dp != dq) return dp - dq;
    double ap = json_number_value(json_object_get(p, "at_stake_us")), aq = json_number_value(json_object_get(q, "at_stake_us"));
    return ap > aq ? -1 : ap < aq;
}

/* Sorts list in place by entry_cmp, keeping the order of equal entries. 0 or ERR_NOMEM. */
int sus_sort_list(json_t *list) {
    size_t n = json_array_size(list);
    json_t **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(list, i));
    /* stable for equal keys: the entries come in category order, as before */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && entry_cmp(&v[j], &v[j - 1]) < 0; j--) {
            json_t *x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    json_array_clear(list);
    for (size_t i = 0; i < n; i++) json_array_append_new(list, v[i]);
    free(v);
    return 0;
}

/* The ranked list of t's categories that fire (cpu_at: a CPU-only trace's shares, NULL for a
 * trace with a GPU), then the ranges that hold idle on their own (suspects_idle.c); *nfired:
 * its length. A new reference, NULL on no memory. */
static json_t *suspect_list(A *a, tally *t, double wall, const double *cpu_at, int *nfired) {
    int cpu_only = cpu_at != NULL;
    json_t *list = json_array();
    int fired[C_N] = {0};
    *nfired = 0;
    for (int c = 0; c < C_N; c++) {
        double at;
        long culprit;
        if (c == C_THREADS) continue; /* only ever cpu_bound_op's, named for its cause below */
        sus_at_stake(t, c, cpu_at, &at, &culprit);
        if (!sus_fires(c, at, wall) || culprit < -1) continue;
        fired[c] = 1;
        culprit = sus_range_culprit(a, t, c, culprit); /* a range holding most of a spread category */
        int cat = c;
        if (c == C_CPU && cpu_only) cat = sus_cpu_threads(a, t, culprit); /* its op on one core: cpu_threads (suspects_cpu.c) */
        json_t *e = suspect_entry(a, t, cat, at, culprit, cpu_only, a->nsteps);
        int single = cat == C_CPU || cat == C_THREADS || cat == C_COMPUTE || cat == C_MEMBOUND || cat == C_DOMINANT;
        if (sus_annotate(a, t, e, cat, at, culprit, single) || json_array_append_new(list, e)) {
            json_decref(list);
            return NULL;
        }
        ++*nfired;
    }
    size_t nlisted = json_array_size(list);
    if (sus_range_suspects(a, t, list, wall, fired)) {
        json_decref(list);
        return NULL;
    }
    *nfired += (int)(json_array_size(list) - nlisted);
    if (sus_sort_list(list)) {
        json_decref(list);
        return NULL;
    }
    return list;
}

/* ---- the document ---- */

/* The idle document: by class, and the largest labels. */
static json_t *idle_doc(A *a, json_t *phases) {
    idle_state *s = a->idle;
    json_t *cls = json_object(), *rows = json_array();
    double total = 0;
    for (int c = 0; c < GAP_NCLASSES; c++) {
        json_object_set_new(cls, gap_class_names[c], json_real(s->by_class[c]));
        total += s->by_class[c];
    }
    static const char *const types[] = {"no_launch", "kernel_wait_op", "kernel_wait_range", "kernel_wait_launch", "dataloader", "sync",
                                        "python_function", "user_annotation", "step", "untraced", "cpu_op", "runtime_call", "sync_launch",
                                        "range_host"};
    _Static_assert(sizeof types / sizeof types[0] == LB_LEAD_DATA, "a name per idle label type");
    int used[25];
    int nused = 0;
    for (; nused < 25; nused++) { /* the 25 largest labels */
        int best = -1;
        for (size_t i = 0; i < s->nsums; i++) {
            if (s->sums[i].type >= LB_LEAD_DATA) continue; /* the lead-in and the tail are not idle */
            int dup = 0;
            for (int j = 0; j < nused; j++) dup |= used[j] == (int)i;
            if (!dup && (best < 0 || s->sums[i].us > s->sums[best].us)) best = (int)i;
        }
        if (best < 0) break;
        used[nused] = best;
        const idle_sum *x = &s->sums[best];
        char cut[EVIDENCE_NAME_MAX + 4];
        json_array_append_new(rows, json_pack("{s:s,s:s,s:f,s:f}", "label", types[x->type], "culprit",
                                              evidence_name(a, x->name, cut, sizeof cut), "idle_us", x->us, "share_of_idle",
                                              total > 0 ? x->us / total : 0));
    }
    return json_pack("{s:o,s:o,s:o}", "by_class_us", cls, "by_culprit", rows, "by_phase", phases);
}

int an_suspects(A *a, double gpu_busy, json_t **out) {
    idle_state *is = a->idle;
    int cpu_only = is->cpu_only;
    tally t;
    memset(&t, 0, sizeof t);
    t.keys = intern_new();
    int rc = t.keys ? 0 : ERR_NOMEM;
    for (size_t i = 0; !rc && i < is->nsums; i++) {
        int c = category_of(a, &is->sums[i]);
        if (c < C_N) rc = sus_credit(&t, c, is->sums[i].name, is->sums[i].track, is->sums[i].us);
    }
    if (!rc && !cpu_only) rc = sus_gpu_rules(a, &t, gpu_busy); /* suspects_gpu.c */
    if (!rc && !cpu_only) rc = sus_host_evidence(a, &t);      /* suspects_host.c */
    double cpu_at[C_N] = {0};
    if (!rc && cpu_only) rc = sus_cpu_priority(a, &t, cpu_at);
    json_t *by_phase = NULL;
    if (!rc && !cpu_only) rc = an_idle_by_phase(a, &by_phase);
    double wall = a->wall;
    json_t *doc = NULL;
    if (!rc) {
        int nfired = 0;
        json_t *list = suspect_list(a, &t, wall, cpu_only ? cpu_at : NULL, &nfired), *kinds = NULL;
        /* waste inside a busy GPU, by kind of work (suspects_waste.c): ranked into the list */
        if (list && !cpu_only) rc = an_waste_suspects(a, list, &nfired, &kinds);
        /* recomputed_work: its rule is suspects_recompute.c's; its entry joins the ranked list */
        if (!rc && list && !cpu_only && (an_recompute_suspect(a, list, FIRE_FRACTION * wall, &nfired) || sus_sort_list(list)))
            json_decref(list), list = NULL;
        double window = is->w1 - is->w0;
        json_t *gpu = cpu_only ? json_null()
                               : json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "busy_fraction", window > 0 ? gpu_busy / window : 1.0,
                                           "busy_us", gpu_busy, "window_us", window, "idle_us", window - gpu_busy, "lead_in_us",
                                           is->w0 - a->t->start_us, "tail_us", a->t->end_us - is->w1, "utilization_of_wall",
                                           wall > 0 ? gpu_busy / wall : 0, "devices", json_incref(is->devices));
        int healthy = !cpu_only && wall > 0 && gpu_busy / wall >= HEALTHY_BUSY && !nfired;
        doc = json_pack("{s:f,s:b,s:o,s:o,s:o,s:o}", "wall_us", wall, "healthy", healthy, "gpu", gpu, "steps", sus_steps_doc(a), "suspects",
                        list, "idle", cpu_only ? json_null() : idle_doc(a, by_phase));
        by_phase = NULL;
        if (!doc) rc = rc ? rc : ERR_NOMEM;
        else json_object_set_new(doc, "gpu_time_by_kind", kinds ? kinds : json_null());
    }
    json_decref(by_phase);
    for (int c = 0; c < C_N; c++) json_decref(t.evidence[c]);
    intern_free(t.keys);
    free(t.c);
    *out = doc;
    return rc;
}

