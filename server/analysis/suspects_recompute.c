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
 * batch size (one length: never fires); a prefill runs one length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/suspects_recompute.h"
#include "lib/err.h"
#include "lib/flops.h"

#define RECOMP_MIN_LENGTHS 8   /* distinct token counts a group needs: 8 steps of growth */
#define RECOMP_MIN_PREFIX 2    /* the smallest M is at least this many strides (a prompt) */
#define RECOMP_STEADY_SHARE 0.8 /* one call count for this share of the lengths at least */
#define RECOMP_EVIDENCE_ROWS 5 /* groups the evidence lists */

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
    double per_step = a->nsteps ? at / (double)a->nsteps : 0;
    return json_pack("{s:s,s:s,s:n,s:f,s:f,s:o,s:o,s:f,s:o,s:s}", "category", "recomputed_work", "culprit", c->name, "smell", "at_stake_us",
                     at, "at_stake_fraction", a->wall > 0 ? at / a->wall : 0, "at_stake_per_step_us",
                     a->nsteps ? json_real(per_step) : json_null(), "members", members, "members_us", members_us, "evidence", ev,
                     "next_experiment", next);
}

int an_recompute_suspect(A *a, json_t *list, double min_us, int *nfired) {
    const json_t *ops = json_object_get(a->effic, "operators");
    size_t n = json_array_size(ops), ng = 0, nv = 0;
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
        json_t *e = entry(a, g, nf, at);
        if (!e || json_array_append_new(list, e)) rc = ERR_NOMEM;
        else ++*nfired;
    }
    free(g);
    free(v);
    return rc;
}
