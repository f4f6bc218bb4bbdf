/* suspects_recompute.c: recomputed_work, busy GPU time that need not run at all.
 *
 * Mechanism (the one built so far): a prefix recomputed every step, i.e. generation without
 * a KV cache. A GEMM-like op (aten::mm, addmm, linear, matmul, bmm) whose weight (N, K) stays
 * fixed while its token dim M = the product of its input's leading dims takes many lengths
 * that grow by one constant stride s, M = s * (prompt + i), step after step: each step runs
 * the whole prefix through the weights again and only its last s rows are new. Read from the
 * efficiency document's operator rows (effic.c: one row per (op, Input Dims, types), its
 * calls and GPU time), grouped by (op, K, weight shape):
 *   - at least RECOMP_MIN_LENGTHS distinct M, sorted they step by one stride s > 0 with no
 *     hole, s divides the smallest and the smallest is at least RECOMP_MIN_PREFIX x s (a
 *     prompt of some tokens, not a batch growing from one sequence);
 *   - one number of calls for RECOMP_STEADY_SHARE of the lengths: each length is one step
 *     of the same layers;
 *   - no op with GPU time names a KV cache (a name containing "cache", as vLLM's
 *     reshape_and_cache): with one, M moving is a batch changing, not a prefix; and the
 *     trace trains nothing (no autograd node: Backward0, autograd::engine): a training
 *     loop's M moves with each batch's padded length.
 * Attention whose queries are all its keys (q and k of one length S, flash / efficient /
 * SDPA ops with shapes) is the same evidence: grouped by (op, B, H, D), M = B * S.
 * At stake: sum over the group's rows of GPU time x (1 - s / M), the recomputed share; the
 * members are the groups that fired, each with its GPU time. A cached decode keeps M at the
 * batch size (one length: never fires); a prefill runs one length.
 *
 * Mechanism 2: a per-step constant rebuilt every layer. Rotary cos/sin tables (arange ->
 * outer -> cat -> cos, sin), a causal mask (full / ones -> triu / tril -> masked_fill),
 * position ids (arange) built again in each layer's forward: the same few small kernels with
 * the same input shapes, k times a step (k layers), where once (a register_buffer, or once a
 * step outside the layers) would do. Premise: a Kineto trace has no dataflow, so what a
 * chain makes is read from how it starts. A chain is a run of consecutive cpu_ops, siblings
 * under one record_function / ProfilerStep range (or under none: ops nested in an op are
 * its internals), that starts at a factory op (a tensor made from no tensor: arange, ones,
 * zeros, full, empty, linspace, eye, scalar_tensor..., whose Input Dims hold no dim) and goes
 * on only with factory, fill_, elementwise, trig, cat, cast and view ops (const_cont) whose
 * every tensor has at most CONST_MAX_SPREAD dims other than 1 (a table [P, D], a mask
 * [S, S] or [1, 1, S, S]; activations are [B, S, H] or [B, H, S, D]); any other op ends it
 * (an empty counts only when fill_ or zero_ comes next: alone it is an output buffer). So
 * its first tensor comes from scalars, and the names after it are the few that a table or
 * a mask is made of: a chain that reads the activations (RMSNorm's pow of the hidden
 * states) starts at no factory, and the op that applies the mask to the scores ends it.
 * Recorded by the host walk (an_const_pop, one hook in host.c's pop_frame): each chain keyed
 * by its (name, Input Dims) sequence, at most CONST_MAX_CHAINS distinct keys of at most
 * CONST_CHAIN_OPS ops (more are dropped: a constant is a few ops, and the table stays
 * bounded: ~35 KB, a linear search only when a chain ends), followed at most CONST_DEPTH
 * levels deep; per key, per ProfilerStep, how many times it ran and the GPU time
 * (cuda_total: all its launches' GPU time) of its runs after the first.
 * A key fires in a step where it ran CONST_MIN_REPEATS times or more with the same shapes
 * (a layer count; 2 or 3 is a model's own few tables: encoder and decoder, q and k), and
 * fires when it did so in CONST_MIN_STEPS steps (a loop, not one warm-up). No steps: no
 * evidence. Without record_shapes the factory test fails: no evidence either.
 * At stake: the GPU time of those runs beyond the first in each step where the key fired.
 * Why GPU time and not the launches' host time: where the GPU is busy it is what the rebuild
 * costs; where the GPU idles on tiny launches, the launch time would count too, but it is
 * not the members' own GPU time, and a suspect never holds more than its members. Members:
 * the ops of the fired chains with their GPU time over every run; culprit: the first op
 * (the factory) of the chain with the most at stake. The prefix mechanism wins when both
 * fire (one recomputed_work suspect: the larger at stake). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/suspects_recompute.h"
#include "analysis/suspects_entry.h"
#include "analysis/suspects_discard.h"
#include "analysis/suspects_tune.h"
#include "analysis/suspects_unread.h"
#include "lib/err.h"
#include "lib/flops.h"

#define RECOMP_MIN_LENGTHS 8   /* distinct token counts a group needs: 8 steps of growth */
#define RECOMP_MIN_PREFIX 2    /* the smallest M is at least this many strides (a prompt) */
#define RECOMP_STEADY_SHARE 0.8 /* one call count for this share of the lengths at least */
#define RECOMP_EVIDENCE_ROWS 5 /* groups the evidence lists */

/* Mechanism 2 (the header comment has why each one): */
#define CONST_MAX_CHAINS 64    /* distinct chains kept; later new ones are dropped (counted) */
#define CONST_CHAIN_OPS 16     /* ops a chain holds at most; a longer one is no small constant */
#define CONST_DEPTH 32         /* nesting levels a chain is followed at (deeper: none) */
#define CONST_MIN_REPEATS 4    /* runs of one chain in one step: a layer count */
#define CONST_MIN_STEPS 2      /* steps it must repeat in */
#define CONST_MAX_SPREAD 2     /* dims other than 1 a continuing op's tensors have at most */

/* One (op, weight) group: the lengths it ran at are rlen rows pointing at it. */
typedef struct rgroup {
    const char *name;      /* the op (the efficiency row's name, borrowed) */
    long long k, w[3];     /* the input's last dim and the weight's shape (wr dims) */
    int wr;
    long long m0, m1, s;   /* the smallest and largest M, the stride (0: not a prefix) */
    long long lengths, calls;
    double us, at;         /* GPU time of its rows; of it, recomputed (0: not fired) */
} rgroup;

typedef struct rlen { size_t g; long long m, calls; double us; } rlen;

static int gemm_like(const char *n) {
    return !strcmp(n, "aten::mm") || !strcmp(n, "aten::addmm") || !strcmp(n, "aten::linear") || !strcmp(n, "aten::matmul") ||
           !strcmp(n, "aten::bmm");
}

/* Why the cache test is by name: the rows carry no dataflow. A KV-cache op (vLLM's
 * reshape_and_cache, a kv_cache update) with GPU time says the model keeps one, so a moving
 * M is a batch that changes size, not a prefix run again. */
static int names_cache(const json_t *ops) {
    size_t i;
    const json_t *r;
    json_array_foreach(ops, i, r) {
        const char *n = json_string_value(json_object_get(r, "name"));
        for (const char *p = n; p && *p; p++)
            if (!strncasecmp(p, "cache", 5) && !strstr(n, "empty_cache")) return 1;
    }
    return 0;
}

/* Whether the trace trains (an autograd node: "...Backward0", autograd::engine): generation
 * has no backward, while a training loop's M moves with each batch's padded length. Asked
 * only once a group fired: it reads every name the trace has. */
static int trains(A *a) {
    for (size_t i = 0; i < a->nnflags; i++) {
        const char *n = an_str(a, (long)i);
        if (n && (strstr(n, "Backward0") || strstr(n, "autograd::engine") || strstr(n, "Backward1"))) return 1;
    }
    return 0;
}

/* A row's token dim M, K and weight shape; 0 when it is not a GEMM of a fixed weight. */
/* Attention over its own queries: 1 when q is [B, S, H, D], 2 when [B, H, S, D], 0 other. */
static int attention_layout(const char *n) {
    if (!strcmp(n, "aten::_flash_attention_forward") || !strcmp(n, "aten::_efficient_attention_forward")) return 1;
    if (!strcmp(n, "aten::_scaled_dot_product_flash_attention") || !strcmp(n, "aten::_scaled_dot_product_efficient_attention") ||
        !strcmp(n, "aten::_scaled_dot_product_cudnn_attention") || !strcmp(n, "aten::scaled_dot_product_attention"))
        return 2;
    return 0;
}

/* An attention call whose queries are all its keys (q and k of one length S: the whole
 * sequence attends to itself, as without a cache; a cached step has one query): M = B * S,
 * k = D and the fixed dims {B, H} in w. 0 otherwise. */
static int attention_dims(int layout, const char *shape, long long *m, long long *k, long long w[3], int *wr) {
    long long q[5], kv[5];
    if (flops_dims_at(shape, 0, q, 5) != 4 || flops_dims_at(shape, 1, kv, 5) != 4) return 0;
    int si = layout == 1 ? 1 : 2, hi = layout == 1 ? 2 : 1;
    if (q[si] != kv[si] || q[0] != kv[0]) return 0;
    *m = q[0] * q[si], *k = q[3], w[0] = q[0], w[1] = q[hi], w[2] = 0, *wr = 2;
    return *m > 0;
}

static int gemm_dims(const char *name, const char *shape, long long *m, long long *k, long long w[3], int *wr) {
    int layout = attention_layout(name);
    if (layout) return attention_dims(layout, shape, m, k, w, wr);
    long long x[5];
    int ai = !strcmp(name, "aten::addmm"); /* addmm: bias, input, weight */
    int xr = flops_dims_at(shape, ai, x, 5);
    *wr = flops_dims_at(shape, ai + 1, w, 3);
    if (xr < 2 || *wr < 2) return 0;
    int bmm = !strcmp(name, "aten::bmm");
    if (bmm != (*wr == 3) || (bmm && (xr != 3 || w[0] != x[0]))) return 0;
    *k = x[xr - 1];
    /* linear's weight is [N, K]; mm / addmm / matmul's [K, N]; bmm's [B, K, N] */
    long long wk = !strcmp(name, "aten::linear") ? w[1] : w[*wr - 2];
    if (wk != *k) return 0;
    *m = 1;
    for (int i = 0; i < xr - 1; i++) *m *= x[i];
    return *m > 0;
}

static size_t group_of(rgroup *g, size_t *ng, const char *name, long long k, const long long w[3], int wr) {
    for (size_t i = 0; i < *ng; i++)
        if (g[i].k == k && g[i].wr == wr && !memcmp(g[i].w, w, (size_t)wr * sizeof *w) && !strcmp(g[i].name, name)) return i;
    rgroup *n = &g[(*ng)++];
    memset(n, 0, sizeof *n);
    n->name = name, n->k = k, n->wr = wr;
    memcpy(n->w, w, (size_t)wr * sizeof *w);
    return *ng - 1;
}

static int len_cmp(const void *x, const void *y) {
    const rlen *p = x, *q = y;
    if (p->g != q->g) return p->g < q->g ? -1 : 1;
    return p->m < q->m ? -1 : p->m > q->m;
}

/* Whether lengths v[0..n) (sorted, one group, equal M merged) are a prefix growing step by
 * step (the header's rule); sets g's figures either way, g->at only when it is. */
/* Whether one call count holds at least RECOMP_STEADY_SHARE of the lengths v[0..n). Why:
 * a generated length is one step of the same layers, so its calls repeat exactly (the
 * window's edges aside); a training set's padded lengths come as often as the data has them. */
static int steady_calls(const rlen *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t same = 0;
        for (size_t j = 0; j < n; j++) same += v[j].calls == v[i].calls;
        if ((double)same >= RECOMP_STEADY_SHARE * (double)n) return 1;
    }
    return 0;
}

static void judge_group(rgroup *g, const rlen *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        g->us += v[i].us;
        g->calls += v[i].calls;
    }
    g->lengths = (long long)n, g->m0 = v[0].m, g->m1 = v[n - 1].m;
    if (n < RECOMP_MIN_LENGTHS || !steady_calls(v, n)) return;
    long long s = v[1].m - v[0].m;
    for (size_t i = 1; i < n; i++)
        if (v[i].m - v[i - 1].m != s) return;
    if (s <= 0 || v[0].m % s || v[0].m < RECOMP_MIN_PREFIX * s) return;
    g->s = s;
    /* only the last s rows of each call are new: the rest is the prefix again */
    for (size_t i = 0; i < n; i++) g->at += v[i].us * (1.0 - (double)s / (double)v[i].m);
}

/* The lengths of every (op, weight) group of the rows of ops into v (merged per M, sorted
 * by group then M) and g; *nv their count. 0 or ERR_NOMEM. */
static int collect(const json_t *ops, rgroup *g, size_t *ng, rlen *v, size_t *nv) {
    size_t i, n = 0;
    const json_t *r;
    json_array_foreach(ops, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *shape = json_string_value(json_object_get(r, "shape"));
        long long m, k, w[3];
        int wr;
        if (!name || !shape || !(gemm_like(name) || attention_layout(name)) || !gemm_dims(name, shape, &m, &k, w, &wr)) continue;
        v[n++] = (rlen){group_of(g, ng, name, k, w, wr), m, json_integer_value(json_object_get(r, "calls")),
                        json_number_value(json_object_get(r, "gpu_us"))};
    }
    qsort(v, n, sizeof *v, len_cmp);
    size_t out = 0; /* one length per M: rows of other dtypes or args at the same M add up */
    for (size_t j = 0; j < n; j++) {
        if (out && v[out - 1].g == v[j].g && v[out - 1].m == v[j].m) {
            v[out - 1].calls += v[j].calls, v[out - 1].us += v[j].us;
            continue;
        }
        v[out++] = v[j];
    }
    *nv = out;
    return 0;
}

/* The key its fixed dims go under: a GEMM's weight, an attention's batch and heads. */
static const char *fixed_key(const rgroup *g) { return attention_layout(g->name) ? "batch_heads" : "weight_shape"; }

static json_t *weight_json(const rgroup *g) {
    json_t *w = json_array();
    for (int i = 0; i < g->wr; i++) json_array_append_new(w, json_integer(g->w[i]));
    return w;
}

static int group_cmp(const void *x, const void *y) {
    const rgroup *p = x, *q = y;
    return p->at > q->at ? -1 : p->at < q->at;
}

/* The culprit among the fired groups g[0..n) (sorted by at stake): the op with the most
 * recomputed time over its groups (one model's q/k/v/o/up/down are one op's groups). Its
 * first group (the largest) is the one the advice quotes. */
static size_t culprit_group(const rgroup *g, size_t n) {
    size_t best = 0;
    double top = -1;
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(g[j].name, g[i].name)) sum += g[j].at;
        if (sum > top + 1e-9) top = sum, best = i;
    }
    return best;
}

/* The suspect of the fired groups g[0..n) (sorted by at stake): evidence, members, advice. */
static json_t *entry(A *a, const rgroup *g, size_t n, double at) {
    json_t *rows = json_array(), *members = json_array(), *top = json_array();
    double members_us = 0;
    for (size_t i = 0; i < n; i++) {
        members_us += g[i].us;
        json_array_append_new(members, json_pack("{s:s,s:o,s:f}", "name", g[i].name, fixed_key(&g[i]), weight_json(&g[i]), "gpu_us", g[i].us));
        if (i < RECOMP_EVIDENCE_ROWS) /* top_contributors: as every suspect's evidence, what each holds at stake */
            json_array_append_new(top, json_pack("{s:s,s:f}", "name", g[i].name, "us", g[i].at));
        if (i < RECOMP_EVIDENCE_ROWS)
            json_array_append_new(rows, json_pack("{s:s,s:o,s:I,s:I,s:I,s:I,s:I,s:f,s:f}", "op", g[i].name, fixed_key(&g[i]), weight_json(&g[i]),
                                                  "m_min", g[i].m0, "m_max", g[i].m1, "m_stride", g[i].s, "lengths", g[i].lengths, "calls",
                                                  g[i].calls, "gpu_us", g[i].us, "recomputed_us", g[i].at));
    }
    const rgroup *c = &g[culprit_group(g, n)];
    char next[1024], w[64];
    snprintf(w, sizeof w, c->wr == 2 ? "[%lld, %lld]" : "[%lld, %lld, %lld]", c->w[0], c->w[1], c->w[2]);
    snprintf(next, sizeof next,
             "Enable the KV cache: %s (%s %s) runs at %lld token counts, M = %lld to %lld growing by %lld a step, so every step "
             "recomputes the whole prefix and only its last %lld rows are new (generation without a KV cache). Generate with "
             "use_cache=True and pass past_key_values from one forward to the next (a model without a KV cache needs one added "
             "to its attention) so each step computes only its new tokens: about %.1f ms of GPU time is the prefix again; "
             "re-profile and check that %s's M stays at the batch size",
             c->name, attention_layout(c->name) ? "batch, heads" : "weight", w, c->lengths, c->m0, c->m1, c->s, c->s, at / 1e3, c->name);
    json_t *ev = json_pack("{s:s,s:o,s:i,s:o}", "mechanism", "prefix_recomputed", "groups", rows, "groups_fired", (int)n,
                           "top_contributors", top);
    return an_recomputed_entry(a, c->name, at, members, members_us, ev, next);
}

/* ---- mechanism 2: a per-step constant rebuilt every layer (the header comment) ---- */

enum { CK_UNKNOWN, CK_FACTORY, CK_EMPTY, CK_CONT, CK_FILL, CK_OTHER };

/* A chain being followed among the children of one range. */
typedef struct cchain {
    int n;                        /* its ops so far; 0: none open */
    int bad;                      /* too long, or an empty not filled: dropped when it ends */
    long name[CONST_CHAIN_OPS], shapes[CONST_CHAIN_OPS];
    double us[CONST_CHAIN_OPS];   /* each op's GPU time (cuda_total) */
    long step, track;             /* the ProfilerStep#N it started in (-1: none), its thread */
} cchain;

/* One distinct chain, (name, shapes) sequence, and its runs. */
typedef struct centry {
    uint64_t h;                   /* hash of the sequence */
    int n;
    long name[CONST_CHAIN_OPS], shapes[CONST_CHAIN_OPS];
    double op_us[CONST_CHAIN_OPS]; /* each op's GPU time over every run */
    long step, track;             /* the step being counted */
    long long cnt;                /* runs in that step */
    double extra;                 /* GPU time of that step's runs after the first */
    long long runs, steps, steps_fired;
    double us, at;                /* GPU time of every run; at stake (runs beyond the first in fired steps) */
} centry;

typedef struct const_state {
    unsigned char *cls;           /* per name id (a->nnflags of them): CK_* */
    cchain slot[CONST_DEPTH];     /* slot[d]: the chain among the frames at stack index d */
    centry e[CONST_MAX_CHAINS];
    size_t ne;
    long long dropped;            /* chains not kept: the table was full */
    discard_state *dis;           /* suspects_discard.c's tallies (work nobody uses), fed by the same hook */
    unread_state *unr;            /* suspects_unread.c's (rows nobody reads), fed by the same hook */
    tune_state *tun;              /* suspects_tune.c's (autotuning repeated), fed by the same hook */
} const_state;

static const char *const const_factory[] = {"aten::arange", "aten::ones", "aten::zeros", "aten::full", "aten::linspace",
                                            "aten::logspace", "aten::eye", "aten::scalar_tensor", "aten::tensor", NULL};
static const char *const const_cont[] = {
    "aten::mul", "aten::mul_", "aten::outer", "aten::einsum", "aten::cat", "aten::stack", "aten::cos", "aten::sin", "aten::exp",
    "aten::pow", "aten::div", "aten::div_", "aten::reciprocal", "aten::neg", "aten::add", "aten::add_", "aten::sub", "aten::sub_",
    "aten::triu", "aten::tril", "aten::masked_fill", "aten::masked_fill_", "aten::to", "aten::_to_copy", "aten::copy_",
    "aten::type_as", "aten::unsqueeze", "aten::expand", "aten::view", "aten::reshape", "aten::repeat", "aten::contiguous",
    "aten::clone", "aten::slice", "aten::select", "aten::where", "aten::lt", "aten::gt", "aten::le", "aten::ge", "aten::eq",
    "aten::ne", "aten::logical_not", "aten::bitwise_not", "aten::transpose", "aten::flatten", "aten::squeeze", "aten::detach",
    "aten::lift_fresh", "aten::full_like", "aten::zeros_like", "aten::ones_like", NULL};

static int in_list(const char *const *l, const char *n) {
    for (; *l; l++)
        if (!strcmp(*l, n)) return 1;
    return 0;
}

/* A name's class, looked up once per name id. */
static int const_class(A *a, const_state *c, long name) {
    if (name < 0 || (size_t)name >= a->nnflags) return CK_OTHER;
    if (c->cls[name]) return c->cls[name];
    const char *n = an_str(a, name);
    int k = !strcmp(n, "aten::empty") || !strcmp(n, "aten::empty_strided") ? CK_EMPTY
            : !strcmp(n, "aten::fill_") || !strcmp(n, "aten::zero_")      ? CK_FILL
            : in_list(const_factory, n)                                     ? CK_FACTORY
            : in_list(const_cont, n)                                        ? CK_CONT
                                                                            : CK_OTHER;
    return c->cls[name] = (unsigned char)k;
}

/* Whether Input Dims hold no dim at all (only scalars and lists of ints: a factory's). */
static int no_tensor_input(A *a, long shapes) {
    if (shapes < 0) return 0; /* not recorded: nothing says */
    for (const char *p = an_str(a, shapes); *p; p++)
        if (*p >= '0' && *p <= '9') return 0;
    return 1;
}

/* Whether every tensor of Input Dims has at most CONST_MAX_SPREAD dims other than 1: a
 * table [P, D], a mask [S, S] or [1, 1, S, S], not the activations [B, S, H] / [B, H, S, D]
 * (the chain has no dataflow: this is where it stops at the first op that reads them). */
static int small_dims(A *a, long shapes) {
    if (shapes < 0) return 0;
    int n = 0;
    for (const char *p = an_str(a, shapes); *p; p++) {
        if (*p == '[') n = 0;
        if (*p < '0' || *p > '9') continue;
        char *e;
        long long v = strtoll(p, &e, 10);
        if (v != 1 && ++n > CONST_MAX_SPREAD) return 0;
        p = e - 1;
    }
    return 1;
}

static uint64_t chain_hash(const cchain *ch) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < ch->n; i++) h = (h ^ (uint64_t)ch->name[i]) * 1099511628211ULL, h = (h ^ (uint64_t)ch->shapes[i]) * 1099511628211ULL;
    return h;
}

/* A key's step ends: it fired there when it ran CONST_MIN_REPEATS times. */
static void entry_commit(centry *e) {
    if (e->cnt >= CONST_MIN_REPEATS) e->at += e->extra, e->steps_fired++;
    e->cnt = 0, e->extra = 0;
}

/* The chain in ch ends: counted under its key; ch is closed. */
static void chain_close(const_state *c, cchain *ch) {
    double us = 0;
    for (int i = 0; i < ch->n; i++) us += ch->us[i];
    if (!ch->n || ch->bad || ch->step < 0 || us <= 0) {
        ch->n = 0;
        return;
    }
    uint64_t h = chain_hash(ch);
    centry *e = NULL;
    for (size_t i = 0; i < c->ne && !e; i++)
        if (c->e[i].h == h && c->e[i].n == ch->n && !memcmp(c->e[i].name, ch->name, (size_t)ch->n * sizeof *ch->name) &&
            !memcmp(c->e[i].shapes, ch->shapes, (size_t)ch->n * sizeof *ch->shapes))
            e = &c->e[i];
    if (!e && c->ne == CONST_MAX_CHAINS) c->dropped++;
    if (!e && c->ne < CONST_MAX_CHAINS) {
        e = &c->e[c->ne++];
        memset(e, 0, sizeof *e);
        e->h = h, e->n = ch->n, e->step = -1;
        memcpy(e->name, ch->name, (size_t)ch->n * sizeof *ch->name);
        memcpy(e->shapes, ch->shapes, (size_t)ch->n * sizeof *ch->shapes);
    }
    if (e) {
        if (e->step != ch->step || e->track != ch->track) {
            entry_commit(e);
            e->step = ch->step, e->track = ch->track, e->steps++;
        }
        if (e->cnt++) e->extra += us;
        e->runs++, e->us += us;
        for (int i = 0; i < ch->n; i++) e->op_us[i] += ch->us[i];
    }
    ch->n = 0;
}

/* The ProfilerStep#N range around stack index d (its name id), -1 none. */
static long step_around(const A *a, const frame *stack, int d) {
    for (int i = d - 1; i >= 0; i--)
        if (stack[i].cls == EV_HOST_OP && stack[i].kind == a->ua_kind && an_flags(a, stack[i].name) & NF_STEP) return stack[i].name;
    return -1;
}

int an_const_pop(A *a, const frame *f, const frame *stack, int depth) {
    const_state *c = a->cst;
    if (!c) {
        if (a->step_name < 0) return 0; /* no steps: no evidence */
        if (!(c = a->cst = calloc(1, sizeof *c)) || !(c->cls = calloc(a->nnflags + 1, 1))) return ERR_NOMEM;
    }
    int drc = discard_pop(&c->dis, a, f, stack, depth);
    if (!drc) drc = unread_pop(&c->unr, a, f);
    if (!drc) drc = tune_pop(&c->tun, a, f, stack, depth);
    if (drc) return drc;
    if (depth + 1 < CONST_DEPTH && c->slot[depth + 1].n) chain_close(c, &c->slot[depth + 1]); /* f's children's chain ends with f */
    if (depth >= CONST_DEPTH) return 0;
    cchain *ch = &c->slot[depth];
    /* only siblings under a range (or under none) chain: ops nested in an op are its internals */
    int under_range = !depth || (stack[depth - 1].cls == EV_HOST_OP && stack[depth - 1].kind == a->ua_kind);
    int k = f->cls == EV_HOST_OP && f->kind != a->ua_kind && under_range ? const_class(a, c, f->name) : CK_OTHER;
    if ((k == CK_FACTORY || k == CK_EMPTY) && !no_tensor_input(a, f->shapes)) k = CK_OTHER;
    if ((k == CK_CONT || k == CK_FILL) && ch->n && !small_dims(a, f->shapes)) k = CK_OTHER;
    if (k == CK_OTHER || (!ch->n && k != CK_FACTORY && k != CK_EMPTY)) {
        if (ch->n) chain_close(c, ch);
        return 0;
    }
    if (ch->n && ch->bad == 2 && k != CK_FILL) ch->bad = 1; /* an empty must be filled next */
    else if (ch->bad == 2) ch->bad = 0;
    if (!ch->n) ch->bad = 0, ch->step = step_around(a, stack, depth), ch->track = f->track;
    if (ch->n == CONST_CHAIN_OPS) {
        ch->bad = 1;
        return 0;
    }
    if (k == CK_EMPTY && !ch->bad) ch->bad = 2;
    ch->name[ch->n] = f->name, ch->shapes[ch->n] = f->shapes, ch->us[ch->n] = f->cuda_total;
    ch->n++;
    return 0;
}

discard_state *an_discard_state(const A *a) { return a->cst ? a->cst->dis : NULL; }

void an_const_free(A *a) {
    if (!a->cst) return;
    discard_free(a->cst->dis);
    unread_free(a->cst->unr);
    tune_free(a->cst->tun);
    free(a->cst->cls);
    free(a->cst);
    a->cst = NULL;
}

static int centry_cmp(const void *x, const void *y) {
    const centry *p = x, *q = y;
    return p->at > q->at ? -1 : p->at < q->at;
}

/* The chain's text: "aten::arange -> aten::outer -> ..." into out. */
static void chain_text(A *a, const centry *e, char *out, size_t n) {
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < e->n && o + 1 < n; i++) {
        int w = snprintf(out + o, n - o, "%s%s", i ? " -> " : "", an_str(a, e->name[i]));
        if (w < 0) break;
        o += (size_t)w;
    }
}

/* The suspect of the fired chains e[0..nf) (sorted by at stake), or NULL on no memory. */
static json_t *const_entry(A *a, centry *e, size_t nf, double at) {
    json_t *members = json_array(), *chains = json_array(), *top = json_array();
    double members_us = 0;
    for (size_t i = 0; i < nf; i++) {
        json_t *ops = json_array();
        for (int j = 0; j < e[i].n; j++) {
            members_us += e[i].op_us[j];
            json_array_append_new(members, json_pack("{s:s,s:s,s:f}", "name", an_str(a, e[i].name[j]), "shape",
                                                     e[i].shapes[j] >= 0 ? an_str(a, e[i].shapes[j]) : "", "gpu_us", e[i].op_us[j]));
            json_array_append_new(ops, json_pack("{s:s,s:s}", "op", an_str(a, e[i].name[j]), "shape",
                                                 e[i].shapes[j] >= 0 ? an_str(a, e[i].shapes[j]) : ""));
        }
        char text[512];
        chain_text(a, &e[i], text, sizeof text);
        if (i < RECOMP_EVIDENCE_ROWS) {
            json_array_append_new(chains, json_pack("{s:o,s:I,s:I,s:f,s:f,s:f}", "ops", ops, "runs", e[i].runs, "steps_fired",
                                                    e[i].steps_fired, "runs_per_step", e[i].steps ? (double)e[i].runs / (double)e[i].steps : 0.0,
                                                    "gpu_us", e[i].us, "rebuilt_us", e[i].at));
            json_array_append_new(top, json_pack("{s:s,s:f}", "name", text, "us", e[i].at));
        } else {
            json_decref(ops);
        }
    }
    const centry *c = &e[0];
    char text[512], next[1536];
    chain_text(a, c, text, sizeof text);
    double per = c->steps ? (double)c->runs / (double)c->steps : 0;
    snprintf(next, sizeof next,
             "Build the constant once: the chain %s starts from a factory op (no tensor input) and runs %.0f times a step with "
             "the same input shapes, as a per-step constant (rotary cos/sin tables, a causal mask, position ids) rebuilt in "
             "every layer's forward. Compute it once, in __init__ as a register_buffer (persistent=False) or once a step "
             "outside the layers, and pass it (or a cache of it) to every layer: about %.1f ms of GPU time is the rebuilds "
             "after the first; re-profile and check that %s runs once a step",
             text, per, at / 1e3, an_str(a, c->name[0]));
    json_t *ev = json_pack("{s:s,s:o,s:i,s:I,s:o}", "mechanism", "constant_rebuilt", "chains", chains, "chains_fired", (int)nf,
                           "chains_dropped", a->cst->dropped, "top_contributors", top);
    return an_recomputed_entry(a, an_str(a, c->name[0]), at, members, members_us, ev, next);
}

/* The constants' at stake into *at; the fired chains sorted first in a->cst->e, *nf of them. */
static void const_judge(A *a, size_t *nf, double *at) {
    const_state *c = a->cst;
    *nf = 0, *at = 0;
    if (!c) return;
    for (int d = CONST_DEPTH; d-- > 0;)
        if (c->slot[d].n) chain_close(c, &c->slot[d]);
    for (size_t i = 0; i < c->ne; i++) {
        entry_commit(&c->e[i]);
        if (c->e[i].steps_fired < CONST_MIN_STEPS) c->e[i].at = 0;
    }
    if (c->ne) qsort(c->e, c->ne, sizeof *c->e, centry_cmp);
    for (; *nf < c->ne && c->e[*nf].at > 0; ++*nf) *at += c->e[*nf].at;
}

/* The prefix mechanism's suspect into *out (NULL: none fired above min_us), its at stake in
 * *out_at. 0 or ERR_NOMEM. */
static int prefix_suspect(A *a, double min_us, json_t **out, double *out_at) {
    const json_t *ops = json_object_get(a->effic, "operators");
    size_t n = json_array_size(ops), ng = 0, nv = 0;
    *out = NULL, *out_at = 0;
    if (!n || names_cache(ops)) return 0;
    rgroup *g = malloc(n * sizeof *g);
    rlen *v = malloc(n * sizeof *v);
    int rc = g && v ? collect(ops, g, &ng, v, &nv) : ERR_NOMEM;
    for (size_t i = 0, j; !rc && i < nv; i = j) {
        for (j = i; j < nv && v[j].g == v[i].g;) j++;
        judge_group(&g[v[i].g], &v[i], j - i);
    }
    double at = 0;
    size_t nf = 0;
    if (!rc) {
        qsort(g, ng, sizeof *g, group_cmp);
        for (; nf < ng && g[nf].at > 0; nf++) at += g[nf].at;
    }
    if (!rc && nf && at >= min_us && at > 0 && !trains(a)) {
        if (!(*out = entry(a, g, nf, at))) rc = ERR_NOMEM;
        else *out_at = at;
    }
    free(g);
    free(v);
    return rc;
}

int an_recompute_suspect(A *a, json_t *list, double min_us, int *nfired) {
    json_t *e = NULL;
    double pat = 0, cat = 0;
    size_t cnf = 0;
    const_judge(a, &cnf, &cat);
    int rc = prefix_suspect(a, min_us, &e, &pat);
    if (!rc && cnf && cat >= min_us && cat > pat) { /* one recomputed_work suspect: the larger mechanism */
        json_decref(e);
        if (!(e = const_entry(a, a->cst->e, cnf, cat))) rc = ERR_NOMEM;
    }
    if (!rc && e) {
        if (json_array_append_new(list, e)) return ERR_NOMEM;
        ++*nfired;
        e = NULL;
    }
    json_decref(e);
    /* work nobody uses (suspects_discard.c): its own suspects, beside the one above */
    if (!rc && a->cst) rc = discard_suspects(a->cst->dis, a, list, min_us, nfired);
    if (!rc && a->cst) rc = unread_suspects(a->cst->unr, a, list, min_us, nfired);
    if (!rc && a->cst) rc = tune_suspects(a->cst->tun, a, list, min_us, nfired);
    return rc;
}
