/* suspects_tune.c: recomputed_work, autotuning run again step after step (the fifth family,
 * after suspects_unread.c's rows nobody reads).
 *
 * Premise: a library that picks its algorithm by timing (cuDNN with
 * torch.backends.cudnn.benchmark=True, cuBLASLt / Triton autotuning) does it inside the op
 * call that first meets an input shape: the call launches one candidate kernel after another
 * and blocks the host on the GPU to time them, where an ordinary call launches one to three
 * kernels and never syncs. So a tuning call is a GEMM-like op's call (NF_GEMM_OP: the
 * libraries that time candidates) with TUNE_MIN_LAUNCHES launches or more under it (as its
 * innermost op) and a blocking sync among them. Tuning in the first
 * step that tunes is the price of benchmark mode; tuning again in later steps, on (op, Input
 * Dims) the trace has not tuned before, means the shapes keep changing and the search never
 * pays off (multi-scale images, variable-length audio or text without buckets). At stake:
 * the later tuning calls' GPU time but one launch's share, (L - 1) / L of it (the chosen
 * kernel still has to run once; the trace does not say which launch it was). Needs steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/suspects_tune.h"
#include "analysis/suspects_entry.h"
#include "lib/err.h"
#include "lib/intern.h"

#define TUNE_DEPTH 64          /* stack levels whose launches and syncs are counted */
#define TUNE_MIN_LAUNCHES 5    /* an ordinary op call launches fewer */
#define TUNE_NAMES 8           /* op names told apart; the rest fold into the last */
#define TUNE_SEEN_MAX 65536    /* (op, shapes) pairs remembered; past it no call counts as a new search */

typedef struct tkey { long name, shapes; } tkey;
typedef struct tname { long name; long long calls, launches; double gpu_us, at; } tname;

struct tune_state {
    int launches[TUNE_DEPTH];  /* per stack index: launches whose innermost op it is */
    unsigned char sync[TUNE_DEPTH];
    intern *seen;              /* (op, shapes) already tuned, as bytes (a hash: a lookup per tuning call) */
    long first_step;           /* the first step (name id) with a tuning call, -1 none yet */
    long last_step;
    long long steps, calls, first_calls;
    double at;
    tname n[TUNE_NAMES];
    size_t nn;
};

/* The name id of the step around stack index d (a ProfilerStep range or, in the 2021 schema,
 * op), -1 none. */
static long step_of(const A *a, const frame *stack, int d) {
    for (int i = d - 1; i >= 0; i--)
        if (stack[i].cls == EV_HOST_OP && an_flags(a, stack[i].name) & NF_STEP) return stack[i].name;
    return -1;
}

int tune_pop(tune_state **sp, A *a, const frame *f, const frame *stack, int depth) {
    tune_state *s = *sp;
    if (!s) {
        if (!(s = *sp = calloc(1, sizeof *s)) || !(s->seen = intern_new())) return ERR_NOMEM;
        s->first_step = s->last_step = -1;
    }
    if (f->cls == EV_HOST_RT) {
        unsigned fl = an_flags(a, f->name);
        if (!(fl & (NF_LAUNCH | NF_SYNC))) return 0;
        for (int i = depth - 1; i >= 0; i--)
            if (stack[i].cls == EV_HOST_OP && stack[i].kind != a->ua_kind) {
                if (i < TUNE_DEPTH) {
                    if (fl & NF_LAUNCH) s->launches[i]++;
                    if (fl & NF_SYNC) s->sync[i] = 1;
                }
                break;
            }
        return 0;
    }
    if (f->cls != EV_HOST_OP || depth >= TUNE_DEPTH) return 0;
    int l = s->launches[depth], y = s->sync[depth];
    s->launches[depth] = 0, s->sync[depth] = 0;
    /* GEMM-like ops only (NF_GEMM_OP: conv, mm, matmul, linear, attention ...): the libraries that
     * time candidates; nonzero, unique and other data-dependent ops also launch several
     * kernels and sync, on new shapes each step, without searching anything */
    if (l < TUNE_MIN_LAUNCHES || !y || f->cuda_total <= 0 || !(an_flags(a, f->name) & NF_GEMM_OP)) return 0;
    long st = step_of(a, stack, depth);
    if (st < 0) return 0;
    tkey k = {f->name, f->shapes};
    if (intern_lookup(s->seen, (const char *)&k, sizeof k) >= 0) return 0; /* tuned before on these shapes: not a new search */
    if (intern_count(s->seen) >= TUNE_SEEN_MAX) return 0;                     /* bounded: the rest are not counted */
    if (intern_id(s->seen, (const char *)&k, sizeof k) < 0) return ERR_NOMEM;
    if (s->first_step < 0) s->first_step = st;
    if (st == s->first_step) { s->first_calls++; return 0; } /* the first tuned step: benchmark mode's price */
    if (st != s->last_step) s->steps++, s->last_step = st;
    double at = f->cuda_total * (double)(l - 1) / (double)l;
    s->calls++, s->at += at;
    size_t j = 0;
    while (j < s->nn && s->n[j].name != f->name) j++;
    if (j == s->nn) {
        if (s->nn == TUNE_NAMES) j = TUNE_NAMES - 1;
        else s->n[s->nn++] = (tname){f->name, 0, 0, 0, 0};
    }
    s->n[j].calls++, s->n[j].launches += l, s->n[j].gpu_us += f->cuda_total, s->n[j].at += at;
    return 0;
}

void tune_free(tune_state *s) {
    if (!s) return;
    intern_free(s->seen);
    free(s);
}

int tune_suspects(tune_state *s, A *a, json_t *list, double min_us, int *nfired) {
    if (!s || !s->nn || s->steps < 1 || s->calls < 2 || s->at < min_us) return 0;
    size_t top = 0;
    for (size_t i = 1; i < s->nn; i++)
        if (s->n[i].at > s->n[top].at) top = i;
    json_t *members = json_array();
    double members_us = 0;
    for (size_t i = 0; i < s->nn; i++) {
        members_us += s->n[i].gpu_us;
        json_array_append_new(members, json_pack("{s:s,s:f,s:I,s:I}", "name", an_str(a, s->n[i].name), "gpu_us", s->n[i].gpu_us,
                                                 "calls", s->n[i].calls, "launches", s->n[i].launches));
    }
    const tname *t = &s->n[top];
    const char *c = an_str(a, t->name);
    char next[1024];
    snprintf(next, sizeof next,
             "%s autotunes again and again: %lld of its calls in %lld steps after the first launch %.1f kernels each and block the "
             "host to time them, every time on input shapes the loop has not seen before, so the search (cuDNN benchmark mode: "
             "torch.backends.cudnn.benchmark=True) never pays off; %.1f ms of GPU time tries algorithms. Feed fixed or bucketed "
             "input sizes (pad to a few sizes) so each shape is tuned once, or set torch.backends.cudnn.benchmark=False; "
             "then compare the step time",
             c, t->calls, s->steps, t->calls ? (double)t->launches / (double)t->calls : 0, s->at / 1e3);
    double at = s->at;
    json_t *e = an_recomputed_entry(a, c, at, members, members_us,
                                    json_pack("{s:s,s:I,s:I,s:I}", "mechanism", "autotune_repeated", "calls", (json_int_t)s->calls,
                                              "steps", (json_int_t)s->steps, "first_step_calls", (json_int_t)s->first_calls),
                                    next);
    if (!e || json_array_append_new(list, e)) return ERR_NOMEM;
    ++*nfired;
    return 0;
}
