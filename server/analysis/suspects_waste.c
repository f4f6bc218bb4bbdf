/* suspects_waste.c: waste inside a busy GPU as suspects (suspects_waste.h). Definitions:
 * tests/triage/oracle.py's docstring (copies_casts, unfused_elementwise, tiny_kernels,
 * math_below_roof, "Suspects": members and culprit). */
#include "analysis/suspects_waste.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/suspects_discard.h"
#include "analysis/suspects_recompute.h"
#include "analysis/waste.h"
#include "lib/err.h"
#include "lib/utf8.h"

#define FIRE_FRACTION 0.05     /* a suspect fires at this share of the wall (suspects.c's) */
#define UNFUSED_MIN_GAIN 0.20  /* unfused_elementwise: its time above one fused pass is this share of the GPU time */
#define MATH_OK_FRACTION 0.5   /* math at this fraction of its best roof is not waste */
#define SHORT_KERNEL_US 10.0   /* "latency-bound" needs kernels this short ... */
#define MEMBERS_OUT 12         /* members listed; the rest as evidence.others_us */
#define NEXT_MAX 1024
#define WASTE_PHASES_OUT 50    /* gpu_time_by_kind_by_phase's rows, the most GPU time first */

/* ---- members and culprit ---- */

/* The members of m as [{name, gpu_us}], the MEMBERS_OUT largest; *others: the rest's time,
 * *sum: all of it, *top: the largest's index (-1 none). */
static json_t *members_json(const wmembers *m, double *others, double *sum, long *top) {
    json_t *out = json_array();
    unsigned char *used = calloc(m->n ? m->n : 1, 1);
    *others = *sum = 0;
    *top = -1;
    for (size_t i = 0; i < m->n; i++) *sum += m->us[i];
    double listed = 0;
    for (int k = 0; out && used && k < MEMBERS_OUT; k++) {
        long best = -1;
        for (size_t i = 0; i < m->n; i++)
            if (!used[i] && (best < 0 || m->us[i] > m->us[best])) best = (long)i;
        if (best < 0 || m->us[best] <= 0) break; /* a member left out (leave_out_discarded) */
        used[best] = 1;
        if (k == 0) *top = best;
        listed += m->us[best];
        json_array_append_new(out, json_pack("{s:s,s:f}", "name", intern_str(m->keys, best), "gpu_us", m->us[best]));
    }
    free(used);
    *others = *sum - listed > 0 ? *sum - listed : 0;
    return out;
}

/* The culprit of a group (oracle "Suspects"): its top member when that holds at least half
 * of the group; else the range (record_function / NVTX, not a step) holding at least half of
 * it; else the top member. */
static const char *culprit_of(const wfinding *f, long top, double sum) {
    if (top < 0) return "(unknown)";
    if (f->members.us[top] >= 0.5 * sum) return intern_str(f->members.keys, top);
    for (size_t i = 0; i < f->ranges.n; i++) {
        const char *r = intern_str(f->ranges.keys, (long)i);
        if (*r && f->ranges.us[i] >= 0.5 * sum) return r;
    }
    return intern_str(f->members.keys, top);
}

/* ---- the list ---- */

/* Inserts entry e into list by at stake, before dominant_op (a target, listed last). */
static void insert_ranked(json_t *list, json_t *e) {
    double at = json_number_value(json_object_get(e, "at_stake_us"));
    size_t i, n = json_array_size(list);
    for (i = 0; i < n; i++) {
        const json_t *x = json_array_get(list, i);
        if (!strcmp(json_string_value(json_object_get(x, "category")), "dominant_op")) break;
        if (json_number_value(json_object_get(x, "at_stake_us")) < at) break;
    }
    json_array_insert_new(list, i, e);
}

static int add_entry(A *a, json_t *list, const char *cat, const char *smell, const char *culprit, double at, json_t *members, double others,
                     json_t *ev, const char *next, int *nfired) {
    if (!ev) ev = json_object();
    json_object_set_new(ev, "others_us", json_real(others));
    /* the five largest members, as every suspect's evidence lists its contributors */
    json_t *top = json_array();
    for (size_t i = 0; top && i < 5 && i < json_array_size(members); i++) {
        const json_t *x = json_array_get(members, i);
        char cut[EVIDENCE_NAME_MAX + 4];
        json_array_append_new(top, json_pack("{s:s,s:O}", "name", utf8_clip(json_string_value(json_object_get(x, "name")), EVIDENCE_NAME_MAX, cut,
                                                                      sizeof cut), "us", json_object_get(x, "gpu_us")));
    }
    json_object_set_new(ev, "top_contributors", top);
    /* members_us: the whole group's own time, as every suspect with members gives it */
    double sum = others;
    for (size_t i = 0; i < json_array_size(members); i++) sum += json_number_value(json_object_get(json_array_get(members, i), "gpu_us"));
    json_t *e = json_pack("{s:s,s:s,s:o,s:f,s:f,s:o,s:o,s:f,s:o,s:s}", "category", cat, "culprit", culprit, "smell",
                          smell ? json_string(smell) : json_null(), "at_stake_us", at, "at_stake_fraction", at / a->wall,
                          "at_stake_per_step_us", a->nsteps ? json_real(at / (double)a->nsteps) : json_null(), "members", members,
                          "members_us", sum, "evidence", ev, "next_experiment", next);
    if (!e) return ERR_NOMEM;
    insert_ranked(list, e);
    ++*nfired;
    return 0;
}

static void drop_category(json_t *list, const char *cat, int *nfired) {
    for (size_t i = json_array_size(list); i-- > 0;)
        if (!strcmp(json_string_value(json_object_get(json_array_get(list, i), "category")), cat)) {
            json_array_remove(list, i);
            --*nfired;
        }
}

/* ---- the rules and their advice ---- */

static int fires(const A *a, double at) { return a->wall > 0 && at >= FIRE_FRACTION * a->wall; }

/* Data movement: copies, casts, cat / stack, permute + contiguous, padding, and the layout
 * conversions a library runs inside its calls (found by kernel name). */
static int copies_rule(A *a, json_t *list, waste_out *o, int *nfired) {
    drop_category(list, "copies_casts", nfired); /* by kind now, not by one op name */
    if (!o->copies.members.n || !fires(a, o->copies.at)) return 0;
    double others, sum;
    long top;
    json_t *m = members_json(&o->copies.members, &others, &sum, &top);
    const char *who = culprit_of(&o->copies, top, sum);
    json_t *ev = json_incref(o->copies.ev);
    json_object_set_new(ev, "share_of_gpu_time", json_real(o->gpu_us > 0 ? o->copies.at / o->gpu_us : 0));
    double layout = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(ev, "layout_kernels_us"), k, v) layout += json_number_value(v);
    char next[NEXT_MAX];
    if (layout >= 0.5 * o->copies.at)
        /* the library converts the layout around each call: the model's layout is the fix */
        utf8_snprintf(next, sizeof next, "Most of the data movement is layout conversion inside %s (%.1f ms of NCHW<->NHWC kernels): "
                      "run the model and its input in channels_last (model.to(memory_format=torch.channels_last)) so the library needs "
                      "no conversion; compare GPU time per step", who, layout / 1e3);
    else
        utf8_snprintf(next, sizeof next, "Data movement holds %.0f%% of the GPU time, spread over %s and the ops listed: each copy, "
                      "cast, cat or permute+contiguous moves memory without computing. Keep tensors in the layout and dtype their "
                      "consumers read, drop .contiguous() after permute/transpose where the consumer takes strides, preallocate "
                      "instead of cat, or let torch.compile fuse the movement into its neighbours; compare GPU time per step",
                      o->gpu_us > 0 ? 100 * o->copies.at / o->gpu_us : 0, who);
    return add_entry(a, list, "copies_casts", "one_op_dominates", who, o->copies.at, m, others, ev, next, nfired);
}

/* Whether a name reads as an optimizer step or a gradient reset. */
static int has_word(const char *s, const char *w) { return s && strstr(s, w) != NULL; }
static int optimizer_name(const char *s) {
    return has_word(s, "Optimizer.step") || has_word(s, "optimizer") || has_word(s, "adam") || has_word(s, "Adam") || has_word(s, "sgd") ||
           has_word(s, "SGD") || has_word(s, "_foreach_") || has_word(s, "Lamb");
}
static int zero_grad_fills(const char *group, const json_t *ops) {
    if (!has_word(group, "zero_grad")) return 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ops, k, v) if (has_word(k, "fill_") || has_word(k, "zero_")) return 1;
    return 0;
}

/* The fix for per-parameter kernels, from what the group runs: fills under zero_grad are
 * removed by set_to_none=True; an optimizer's per-parameter updates by its foreach / fused
 * implementation; anything else by fusing or a CUDA graph. */
static void per_param_advice(const char *who, const json_t *ops, const char *what, char *out, size_t n) {
    if (zero_grad_fills(who, ops))
        utf8_snprintf(out, n, "%s fills every gradient with zeros, one kernel a parameter (%s): call zero_grad(set_to_none=True) "
                      "(the default since torch 2.0) so the gradients are freed, not filled; compare GPU time per step", who, what);
    else if (optimizer_name(who))
        utf8_snprintf(out, n, "%s runs one small kernel per parameter and op (%s): use the multi-tensor optimizer, foreach=True, or "
                      "fused=True (torch.optim.AdamW(..., fused=True)), which update every parameter in a few kernels; compare GPU "
                      "time per step", who, what);
    else
        utf8_snprintf(out, n, "%s runs %s: fuse them (torch.compile, or the torch._foreach_* ops for per-tensor loops) or capture the "
                      "phase in a CUDA graph to drop the per-kernel fixed cost; compare GPU time per step", who, what);
}

/* The sequence length S of an attention computed eagerly, 0 none: a softmax row of the
 * efficiency document (its 300 rows with the most GPU time) whose input is [.., S, S] with S
 * >= EAGER_MIN_S. Why that shape: scores of queries against keys of the same length, the
 * matrix a fused attention (FlashAttention, memory-efficient) never writes to memory, while
 * an eager one writes and reads it for the scale, the mask, the softmax and the dropout. */
#define EAGER_MIN_S 128
static long long eager_attention_s(const A *a) {
    const json_t *rows = json_object_get(a->effic, "operators"), *r;
    size_t i;
    json_array_foreach(rows, i, r) {
        const char *name = json_string_value(json_object_get(r, "name")), *shape = json_string_value(json_object_get(r, "shape"));
        if (!name || !shape || !strstr(name, "softmax") || strstr(name, "log_softmax") || strncmp(shape, "[[", 2)) continue;
        long long d[8];
        int n = 0;
        for (const char *p = shape + 2; n < 8 && *p && *p != ']';) {
            char *end;
            d[n++] = strtoll(p, &end, 10);
            if (end == p) break;
            p = end;
            while (*p == ',' || *p == ' ') p++;
        }
        if (n >= 3 && d[n - 1] == d[n - 2] && d[n - 1] >= EAGER_MIN_S) return d[n - 1];
    }
    return 0;
}

/* Whether op name fills memory with a constant (a reset, not a computation). */
static int fill_op(const char *n) {
    return n && (!strcmp(n, "aten::fill_") || !strcmp(n, "aten::zero_") || !strcmp(n, "aten::zeros") || !strcmp(n, "aten::zeros_like") ||
                 !strcmp(n, "aten::full") || !strcmp(n, "aten::ones") || !strcmp(n, "aten::masked_fill_"));
}

/* Whether a chain member with time is a softmax (not a log_softmax: a loss's). */
static int softmax_member(const wmembers *m) {
    for (size_t i = 0; i < m->n; i++) {
        const char *n = intern_str(m->keys, (long)i);
        if (m->us[i] > 0 && n && strstr(n, "softmax") && !strstr(n, "log_softmax")) return 1;
    }
    return 0;
}

/* Work thrown away is not advised to run faster: with the model left in training mode in a
 * loop that never trains (suspects_discard.c), the dropout kernels of the chains are
 * recomputed_work's, to drop, not to fuse. Their members are left out (time 0) and the at
 * stake keeps the kept members' share of the chain time (oracle.py's unfused_elementwise). */
static void leave_out_discarded(A *a, wfinding *f) {
    if (!discard_training_mode(an_discard_state(a), a)) return;
    double sum = 0, cut = 0;
    for (size_t i = 0; i < f->members.n; i++) {
        sum += f->members.us[i];
        if (discard_random_op(intern_str(f->members.keys, (long)i))) cut += f->members.us[i], f->members.us[i] = 0;
    }
    if (sum > 0) f->at *= (sum - cut) / sum;
}

static int unfused_rule(A *a, json_t *list, waste_out *o, int *nfired) {
    leave_out_discarded(a, &o->unfused);
    if (!o->unfused.members.n || !fires(a, o->unfused.at) || o->unfused.at < UNFUSED_MIN_GAIN * o->gpu_us) return 0;
    double others, sum;
    long top;
    json_t *m = members_json(&o->unfused.members, &others, &sum, &top);
    const char *who = culprit_of(&o->unfused, top, sum);
    json_t *ev = json_incref(o->unfused.ev);
    json_object_set_new(ev, "chain_us", json_real(sum));
    char next[NEXT_MAX], what[160];
    long long s_len = 0;
    if (optimizer_name(who) || has_word(who, "zero_grad")) {
        snprintf(what, sizeof what, "chains of elementwise kernels back to back, %.1f ms above one fused pass", o->unfused.at / 1e3);
        json_t *ops = json_object();
        for (size_t i = 0; i < json_array_size(m); i++)
            json_object_set(ops, json_string_value(json_object_get(json_array_get(m, i), "name")), json_null());
        per_param_advice(who, ops, what, next, sizeof next);
        json_decref(ops);
    } else if (top >= 0 && fill_op(intern_str(o->unfused.members.keys, top)) && o->unfused.members.us[top] >= 0.5 * sum)
        /* a fill is a reset: nothing to fuse it with; the question is whether it needs to run each step */
        utf8_snprintf(next, sizeof next, "%s resets a buffer every step (%.1f ms of fills, %.0f%% of the GPU time in these chains): nothing "
                      "computes there to fuse. Ask whether it needs to run each step: zero or fill it once when it is allocated (per "
                      "request, not per token), or track the valid length / a mask instead of clearing it (a KV cache needs no zeroing "
                      "past its length); allocate with torch.empty where every element is written before it is read; compare GPU time "
                      "per step", who, o->unfused.members.us[top] / 1e3, sum > 0 ? 100 * o->unfused.members.us[top] / sum : 0);
    else if (softmax_member(&o->unfused.members) && (s_len = eager_attention_s(a)) > 0)
        utf8_snprintf(next, sizeof next, "The attention is computed eagerly: the chains around %s hold a softmax over [.., %lld, %lld] scores "
                      "that go to memory and back between the matmuls, the scale, the mask and the softmax (%.0f%% of the GPU time above "
                      "one pass): use "
                      "F.scaled_dot_product_attention (FlashAttention / memory-efficient kernels never write the scores; Hugging Face: "
                      "attn_implementation=\"sdpa\" or \"flash_attention_2\"), or torch.compile the block; compare GPU time per step",
                      who, s_len, s_len, o->gpu_us > 0 ? 100 * o->unfused.at / o->gpu_us : 0);
    else
        utf8_snprintf(next, sizeof next, "Fuse the elementwise chains around %s (%.0f%% of the GPU time above one pass over their "
                      "inputs and outputs): torch.compile the model (or the block: norm, activation, residual), or use fused kernels "
                      "(a fused RMSNorm / LayerNorm, F.gelu(approximate='tanh') in one op); compare GPU time per step",
                      who, o->gpu_us > 0 ? 100 * o->unfused.at / o->gpu_us : 0);
    return add_entry(a, list, "unfused_elementwise", NULL, who, o->unfused.at, m, others, ev, next, nfired);
}

static int tiny_rule(A *a, json_t *list, waste_out *o, int *nfired) {
    if (!o->tiny.members.n || !fires(a, o->tiny.at)) return 0;
    double others, sum;
    long top;
    json_t *m = members_json(&o->tiny.members, &others, &sum, &top);
    const char *who = intern_str(o->tiny.members.keys, top);
    json_t *ev = json_incref(o->tiny.ev);
    const json_t *g = json_object_get(json_object_get(ev, "groups"), who);
    char next[NEXT_MAX], what[160];
    snprintf(what, sizeof what, "%lld tiny kernels, %.1f ms of fixed cost", (long long)json_integer_value(json_object_get(g, "kernels")),
             json_number_value(json_object_get(g, "fixed_cost_us")) / 1e3);
    per_param_advice(who, json_object_get(g, "ops"), what, next, sizeof next);
    return add_entry(a, list, "tiny_kernels", "many_small_calls", who, o->tiny.at, m, others, ev, next, nfired);
}

/* ---- math below the roof it could use ---- */

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static const char *str(const json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* What the top row's evidence supports: a better unit (an fp32 GEMM on CUDA cores -> TF32 /
 * bf16), launches too short and too small for the GPU (latency: a CUDA graph), a grid too
 * small for the SMs on longer kernels (batch more), or long kernels on a big grid far below
 * the roof (the shapes: alignment, tiles; ncu) -- never a CUDA graph there. */
static void math_advice(const char *who, const json_t *r, double frac, char *out, size_t n) {
    const char *unit = str(r, "unit"), *best = str(r, "best_unit"), *dt = str(r, "dtype");
    double kus = num(r, "kernel_us_mean"), bps = num(r, "blocks_per_sm");
    if (!strcmp(dt, "fp32") && strcmp(unit, "tensor") && strstr(best, "tf32"))
        utf8_snprintf(out, n, "%s runs fp32 math on CUDA cores at %.0f%% of the roof the tensor cores give it: enable TF32 "
                      "(torch.backends.cuda.matmul.allow_tf32 = True, or torch.set_float32_matmul_precision('high')) or autocast "
                      "to bf16; compare time per step and the loss curve", who, 100 * frac);
    else if (kus < SHORT_KERNEL_US && bps < 1)
        utf8_snprintf(out, n, "%s is latency-bound: its kernels last %.1f us on %.2f blocks per SM (%.0f%% of its best roof): batch "
                      "more work per launch, or capture the loop in a CUDA graph to drop the launch gaps; compare time per step", who, kus,
                      bps, 100 * frac);
    else if (bps < 1)
        utf8_snprintf(out, n, "%s gives each launch too little work: %.2f blocks per SM (a few blocks on the whole GPU) for %.0f us "
                      "kernels, at %.0f%% of its best roof: batch more rows per call (more requests or tokens per step); compare "
                      "throughput per step", who, bps, kus, 100 * frac);
    else
        utf8_snprintf(out, n, "%s runs at %.0f%% of its best roof with long kernels on a full grid: a shape problem, not latency. Pad "
                      "its dimensions to a multiple of 8 (64 for a vocabulary) so the library picks aligned tensor-core tiles, and "
                      "check the kernel in Nsight Compute (ncu); compare time per step", who, 100 * frac);
}

/* Math rows (gemm, attention) whose time is over twice the roof of the best unit they could
 * use: the time above that roof is at stake (effic.c's rows: above_roof_us). */
static int math_rule(A *a, json_t *list, waste_out *o, int *nfired) {
    const json_t *rows = json_object_get(a->effic, "operators");
    wmembers m = {0};
    double at = 0, top_above = -1;
    const json_t *top_row = NULL;
    int rc = 0;
    size_t i;
    json_t *r;
    json_t *evrows = json_array();
    json_array_foreach(rows, i, r) {
        const char *fam = str(r, "family"), *st = str(r, "status");
        if (strcmp(fam, "gemm") && strcmp(fam, "attention")) continue;
        if (strcmp(st, "judged") && strcmp(st, "in_doubt")) continue;
        double us = num(r, "gpu_us"), best = num(r, "best_roof_us"), above = num(r, "above_roof_us"), frac = num(r, "best_peak_fraction");
        if (!(us > 0) || isnan(best) || isnan(above) || !(frac < MATH_OK_FRACTION)) continue;
        const char *name = str(r, "name");
        if ((rc = an_wm_add(&m, name, strlen(name), us))) break;
        at += above;
        if (above > top_above) top_above = above, top_row = r;
        if (json_array_size(evrows) < 5)
            json_array_append_new(evrows, json_pack("{s:s,s:O,s:O,s:f,s:f,s:f,s:O,s:O,s:O,s:O}", "op", name, "shape",
                                                    json_object_get(r, "shape"), "dtype", json_object_get(r, "dtype"), "gpu_us", us,
                                                    "best_roof_us", best, "best_peak_fraction", frac, "unit", json_object_get(r, "unit"),
                                                    "best_unit", json_object_get(r, "best_unit"), "kernel_us_mean",
                                                    json_object_get(r, "kernel_us_mean"), "blocks_per_sm", json_object_get(r, "blocks_per_sm")));
    }
    /* math's waste never exceeds the math's GPU time */
    if (at > o->by_kind[WK_MATH] && o->by_kind[WK_MATH] > 0) at = o->by_kind[WK_MATH];
    if (!rc && top_row && fires(a, at)) {
        double others, sum;
        long top;
        json_t *mj = members_json(&m, &others, &sum, &top);
        const char *who = str(top_row, "name");
        char next[NEXT_MAX];
        math_advice(who, top_row, num(top_row, "best_peak_fraction"), next, sizeof next);
        rc = add_entry(a, list, "math_below_roof", "one_op_dominates", who, at, mj, others, json_pack("{s:o}", "rows", evrows), next,
                       nfired);
        evrows = NULL;
    }
    json_decref(evrows);
    intern_free(m.keys);
    free(m.us);
    return rc;
}

/* {kind: {us, fraction}} of by[] over their sum tot, every kind (new reference). */
static json_t *kinds_of(const double *by, double tot) {
    json_t *k = json_object();
    for (int i = 0; k && i < WK_N; i++)
        if (json_object_set_new(k, wk_name(i), json_pack("{s:f,s:f}", "us", by[i], "fraction", tot > 0 ? by[i] / tot : 0))) {
            json_decref(k);
            return NULL;
        }
    return k;
}

static json_t *kinds_json(const waste_out *o) { return kinds_of(o->by_kind, o->gpu_us); }

/* ---- per phase ---- */

typedef struct phrank { double us; size_t i; } phrank;

static int phrank_cmp(const void *p, const void *q) {
    const phrank *x = p, *y = q;
    if (x->us != y->us) return x->us > y->us ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* the order met */
}

/* gpu_time_by_kind_by_phase: the phases with GPU activity launched inside them, most first,
 * at most WASTE_PHASES_OUT: {phase (clipped as idle.by_phase's), gpu_us, every kind's {us,
 * fraction of the phase's gpu_us}}; *dropped: {rows: phases with GPU time not listed, phases:
 * names past WASTE_PHASES_MAX, gpu_us: the time launched inside those} (new references). */
static int phases_json(A *a, const waste_out *o, json_t **rows, json_t **dropped) {
    phrank *r = malloc((o->nph ? o->nph : 1) * sizeof *r);
    *rows = json_array();
    *dropped = NULL;
    if (!r || !*rows) {
        free(r);
        json_decref(*rows);
        *rows = NULL;
        return ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < o->nph; i++)
        if (o->ph_us[i] > 0) r[n++] = (phrank){o->ph_us[i], i};
    if (n) qsort(r, n, sizeof *r, phrank_cmp);
    int rc = 0;
    char cut[EVIDENCE_NAME_MAX + 4];
    for (size_t k = 0; !rc && k < n && k < WASTE_PHASES_OUT; k++) {
        size_t i = r[k].i;
        json_t *row = kinds_of(o->ph_kind[i], o->ph_us[i]);
        if (!row || json_object_set_new(row, "phase", json_string(utf8_clip(an_str(a, o->ph_name[i]), EVIDENCE_NAME_MAX, cut, sizeof cut))) ||
            json_object_set_new(row, "gpu_us", json_real(o->ph_us[i])) || json_array_append_new(*rows, row))
            rc = ERR_NOMEM;
    }
    free(r);
    if (!rc && !(*dropped = json_pack("{s:I,s:I,s:f}", "rows", (json_int_t)(n > WASTE_PHASES_OUT ? n - WASTE_PHASES_OUT : 0), "phases",
                                      (json_int_t)o->ph_untracked, "gpu_us", o->ph_untracked_us)))
        rc = ERR_NOMEM;
    if (rc) {
        json_decref(*rows);
        *rows = NULL;
    }
    return rc;
}

int an_waste_suspects(A *a, json_t *list, int *nfired, json_t **by_kind) {
    waste_out o;
    *by_kind = NULL;
    int rc = an_waste_pass(a, &o);
    if (!rc) rc = copies_rule(a, list, &o, nfired);
    if (!rc) rc = unfused_rule(a, list, &o, nfired);
    if (!rc) rc = tiny_rule(a, list, &o, nfired);
    if (!rc) rc = math_rule(a, list, &o, nfired);
    if (!rc && o.gpu_us > 0) {
        json_t *rows = NULL, *dropped = NULL;
        *by_kind = kinds_json(&o);
        rc = *by_kind ? phases_json(a, &o, &rows, &dropped) : ERR_NOMEM;
        /* the efficiency document carries the same figures (GET /efficiency); the per-phase
         * ones go to the suspects document from there (an_waste_phase_doc) */
        if (!rc && a->effic) {
            json_object_set_new(a->effic, "gpu_time_by_kind", json_deep_copy(*by_kind));
            json_object_set_new(a->effic, "gpu_time_by_kind_by_phase", json_incref(rows));
            json_object_set_new(a->effic, "gpu_time_by_kind_by_phase_dropped", json_incref(dropped));
        }
        json_decref(rows);
        json_decref(dropped);
        if (rc) {
            json_decref(*by_kind);
            *by_kind = NULL;
        }
    }
    an_waste_out_free(&o);
    return rc;
}

int an_waste_phase_doc(A *a, json_t *doc) {
    static const char *const keys[] = {"gpu_time_by_kind_by_phase", "gpu_time_by_kind_by_phase_dropped"};
    if (!json_is_object(doc)) return 0;
    /* null where the suspects document's gpu_time_by_kind is: no GPU activity (the efficiency
     * document has none of the three keys then) */
    int any = json_is_object(json_object_get(doc, "gpu_time_by_kind"));
    for (int i = 0; i < 2; i++) {
        const json_t *v = any && a->effic ? json_object_get(a->effic, keys[i]) : NULL;
        if (json_object_set_new(doc, keys[i], v ? json_deep_copy(v) : json_null())) return ERR_NOMEM;
    }
    return 0;
}
