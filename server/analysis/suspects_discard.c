/* suspects_discard.c: recomputed_work, GPU work whose result nobody uses (the third family,
 * after suspects_recompute.c's prefix and rebuilt constants).
 *
 * Premise: a Kineto trace has no dataflow, but the autograd machinery names itself: each
 * backward node runs under "autograd::engine::evaluate_function: <Node>", an optimizer
 * under "Optimizer.step#..." (or names its fused kernels: adam, sgd, lamb ...), and the
 * training-only random ops (dropout: native_dropout, bernoulli_, fused_dropout ...) keep
 * their aten names. From those, three kinds of busy GPU time that need not run:
 *   1. gradients computed and thrown away: autograd nodes with GPU time in a loop whose
 *      trace has no optimizer (no optimizer range nor kernel, no zero_grad) and no
 *      gradient collective (all-reduce / reduce-scatter): an evaluation loop that kept the
 *      training step's loss.backward(). At stake: the outermost nodes' GPU time.
 *   2. training-mode randomness in a loop with no backward at all: dropout-family ops with
 *      GPU time where no autograd node runs (a model never put in eval(): its dropout masks
 *      are drawn and applied, and the answers are noisier for it). At stake: their GPU time.
 *   3. the forward run again inside the backward: an autograd node that runs a backward of
 *      its own (autograd nodes nested in it) recomputes its forward first: reentrant
 *      activation checkpointing. At stake: the node's GPU time less its nested nodes'.
 * Each needs steps (a loop, an_const_pop allocates nothing without) and fires on its own.
 * Not covered: non-reentrant checkpointing (its recompute sits under the first node that
 * unpacks a saved tensor, with nothing nested), a gradient-accumulation window whose
 * optimizer step falls outside the trace (the advice says to check for it). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/suspects_discard.h"
#include "analysis/suspects_entry.h"
#include "lib/err.h"

#define DISC_DEPTH 64          /* stack levels whose nested autograd time is kept */
#define DISC_NAMES 12          /* names tallied per mechanism; the rest in one "other" */

enum { DK_NONE = 1, DK_NODE, DK_RANDOM };

typedef struct dname { long name; long long calls; double us; } dname;

typedef struct dtally {
    dname n[DISC_NAMES];
    size_t nn;
    double other_us;        /* GPU time of names past DISC_NAMES */
    long long other_calls;
    double us;              /* the whole */
} dtally;

struct discard_state {
    unsigned char *cls;     /* per name id: DK_*, 0 not asked yet */
    double nest[DISC_DEPTH]; /* GPU time of the autograd nodes nested in the node at that index */
    dtally node, random, recompute;
};

static const char *const random_ops[] = {"aten::dropout", "aten::native_dropout", "aten::_fused_dropout", "aten::fused_dropout",
                                         "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
                                         "aten::bernoulli", "aten::bernoulli_", "aten::rrelu_with_noise", NULL};

static int name_class(discard_state *s, A *a, long name) {
    if (name < 0 || (size_t)name >= a->nnflags) return DK_NONE;
    if (s->cls[name]) return s->cls[name];
    const char *n = an_str(a, name);
    int k = DK_NONE;
    if (n && !strncmp(n, "autograd::engine::evaluate_function", 35)) k = DK_NODE;
    for (const char *const *r = random_ops; n && k == DK_NONE && *r; r++)
        if (!strcmp(n, *r)) k = DK_RANDOM;
    return s->cls[name] = (unsigned char)k;
}

static void tally(dtally *t, long name, double us) {
    t->us += us;
    for (size_t i = 0; i < t->nn; i++)
        if (t->n[i].name == name) {
            t->n[i].calls++, t->n[i].us += us;
            return;
        }
    if (t->nn < DISC_NAMES) {
        t->n[t->nn++] = (dname){name, 1, us};
        return;
    }
    t->other_us += us, t->other_calls++;
}

/* The index of f's nearest ancestor of class k, -1 none. */
static int ancestor(discard_state *s, A *a, const frame *stack, int depth, int k) {
    for (int i = depth; i-- > 0;)
        if (stack[i].cls == EV_HOST_OP && name_class(s, a, stack[i].name) == k) return i;
    return -1;
}

int discard_pop(discard_state **sp, A *a, const frame *f, const frame *stack, int depth) {
    discard_state *s = *sp;
    if (!s) {
        if (!(s = *sp = calloc(1, sizeof *s)) || !(s->cls = calloc(a->nnflags + 1, 1))) return ERR_NOMEM;
    }
    if (f->cls != EV_HOST_OP) return 0;
    int k = name_class(s, a, f->name);
    if (k == DK_NONE) return 0;
    if (k == DK_RANDOM) {
        /* the outermost of a nest (aten::dropout -> aten::native_dropout) counts once */
        if (f->cuda_total > 0 && ancestor(s, a, stack, depth, DK_RANDOM) < 0) tally(&s->random, f->name, f->cuda_total);
        return 0;
    }
    double nested = depth < DISC_DEPTH ? s->nest[depth] : 0;
    if (depth < DISC_DEPTH) s->nest[depth] = 0;
    int up = ancestor(s, a, stack, depth, DK_NODE);
    /* a node that ran a backward inside it ran its forward again first (mechanism 3) */
    if (nested > 0 && f->cuda_total > nested) tally(&s->recompute, f->name, f->cuda_total - nested);
    if (up >= 0) {
        if (up < DISC_DEPTH) s->nest[up] += f->cuda_total;
    } else if (f->cuda_total > 0) {
        tally(&s->node, f->name, f->cuda_total);
    }
    return 0;
}

int discard_training_mode(const discard_state *s, const A *a) { return s && a->nsteps >= 2 && s->random.nn && !s->node.nn; }

int discard_random_op(const char *name) {
    for (const char *const *r = random_ops; name && *r; r++)
        if (!strcmp(name, *r)) return 1;
    return 0;
}

void discard_free(discard_state *s) {
    if (!s) return;
    free(s->cls);
    free(s);
}

/* Whether any name of the trace says the gradients are consumed: an optimizer (its range,
 * its kernels), zero_grad, or a gradient collective. Why every name: kernels, ranges and
 * ops are all interned in one table. */
static int consumes_grads(A *a) {
    static const char *const words[] = {"optimizer", "adam", "adamw", "sgd", "lamb", "lion", "adagrad", "rmsprop", "adafactor",
                                        "zero_grad", "allreduce", "all_reduce", "reduce_scatter", "reducescatter", NULL};
    for (size_t i = 0; i < a->nnflags; i++) {
        const char *n = an_str(a, (long)i);
        for (const char *const *w = words; n && *w; w++)
            /* a word, not the start of a longer lower-case one ("lambda" in every kernel's name) */
            for (const char *p = n; (p = strcasestr(p, *w)); p++)
                if (!islower((unsigned char)p[strlen(*w)])) return 1;
    }
    return 0;
}

static int dname_cmp(const void *x, const void *y) {
    const dname *p = x, *q = y;
    return p->us > q->us ? -1 : p->us < q->us;
}

/* One suspect of tally t (names sorted), mechanism mech, advice next; NULL on no memory. */
static json_t *entry(A *a, dtally *t, const char *mech, const char *next) {
    json_t *members = json_array();
    double members_us = 0;
    for (size_t i = 0; i < t->nn; i++) {
        members_us += t->n[i].us;
        json_array_append_new(members, json_pack("{s:s,s:f,s:I}", "name", an_str(a, t->n[i].name), "gpu_us", t->n[i].us, "calls",
                                                 t->n[i].calls));
    }
    if (t->other_calls) {
        members_us += t->other_us;
        json_array_append_new(members, json_pack("{s:s,s:f,s:I}", "name", "(other names)", "gpu_us", t->other_us, "calls",
                                                 t->other_calls));
    }
    return an_recomputed_entry(a, an_str(a, t->n[0].name), t->us, members, members_us,
                               json_pack("{s:s,s:I}", "mechanism", mech, "names", (json_int_t)(t->nn + (t->other_calls > 0))), next);
}

static int add(json_t *list, json_t *e, int *nfired) {
    if (!e || json_array_append_new(list, e)) return ERR_NOMEM;
    ++*nfired;
    return 0;
}

int discard_suspects(discard_state *s, A *a, json_t *list, double min_us, int *nfired) {
    if (!s || a->nsteps < 2) return 0;
    char next[1536];
    int rc = 0;
    double gpu = s->node.us;
    if (s->node.nn && s->node.us >= min_us && !consumes_grads(a)) {
        qsort(s->node.n, s->node.nn, sizeof *s->node.n, dname_cmp);
        const char *c = an_str(a, s->node.n[0].name);
        snprintf(next, sizeof next,
                 "Gradients computed and thrown away: the loop runs a backward pass (%s first, %.1f ms of GPU time in autograd "
                 "nodes over %zu steps) but the trace has no optimizer step, no zero_grad and no gradient all-reduce: nothing "
                 "reads the gradients, they only pile up in .grad. If this is evaluation or validation, run it under "
                 "torch.no_grad() / torch.inference_mode() and drop loss.backward(); if it is gradient accumulation whose "
                 "optimizer step falls outside the profiled window, profile a window that includes one",
                 c, gpu / 1e3, a->nsteps);
        rc = add(list, entry(a, &s->node, "gradients_unused", next), nfired);
    }
    if (!rc && s->random.nn && s->random.us >= min_us && !s->node.nn) {
        qsort(s->random.n, s->random.nn, sizeof *s->random.n, dname_cmp);
        const char *c = an_str(a, s->random.n[0].name);
        snprintf(next, sizeof next,
                 "Training-mode ops in a loop that never trains: %s and the other random masks (dropout) run %.1f ms on the GPU, "
                 "yet no backward runs anywhere in the trace: the model was left in training mode. Call model.eval() (and run "
                 "under torch.inference_mode()) before serving or evaluating: dropout then costs nothing and the outputs stop "
                 "being randomly perturbed; check that %s has no GPU time after the change",
                 c, s->random.us / 1e3, c);
        rc = add(list, entry(a, &s->random, "training_mode_in_inference", next), nfired);
    }
    if (!rc && s->recompute.nn && s->recompute.us >= min_us) {
        qsort(s->recompute.n, s->recompute.nn, sizeof *s->recompute.n, dname_cmp);
        const char *c = an_str(a, s->recompute.n[0].name);
        snprintf(next, sizeof next,
                 "The forward runs twice: %s runs a backward of its own inside it, so it first recomputes its forward "
                 "(activation checkpointing, %.1f ms of GPU time beyond its nested backward). If the activations fit in memory "
                 "(check torch.cuda.max_memory_allocated() against the device), turn checkpointing off for these blocks or "
                 "checkpoint fewer of them (selective: only attention, or every other block); re-profile and compare the step",
                 c, s->recompute.us / 1e3);
        rc = add(list, entry(a, &s->recompute, "forward_recomputed_in_backward", next), nfired);
    }
    return rc;
}
