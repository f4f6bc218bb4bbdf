/* suspects_steps.c: the steps of the suspect list: their figures (the "steps" document,
 * from the walk's ProfilerStep ranges, then from tb-profiler's once the breakdown is known)
 * and step_outlier, the steps longer than OUTLIER_RATIO x the median step, with its advice
 * (issue 48 item 8; definitions: suspects.c's header, tests/triage/oracle.py).
 *
 * Owns step_outlier's contributions and evidence. Reads the walk's steps (A.steps) and the
 * host events of the steps' thread (an_track_recs); must not touch scratch nor the other
 * categories' entries but their per-step share (sus_per_step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/names.h"
#include "analysis/suspects.h"
#include "lib/err.h"
#include "lib/utf8.h"
#include "lib/vec.h"

#define OUTLIER_RATIO 1.5           /* step_outlier: a step this many times the median step */
#define OUTLIER_MIN_STEPS 5         /* ... among at least this many steps */
#define OUTLIER_MAX_EVENTS (1 << 20) /* the host events of a step compared at most (step_culprit) */

/* ---- one-step outliers ---- */

/* A host event inside a compared step, clipped to it. */
typedef struct win_ev { double ts, te; long name; } win_ev;
typedef struct window { double ts, te; win_ev *ev; size_t n, cap; } window;
typedef struct step_pair { window w[2]; } step_pair; /* the outlier, the typical step */

static int keep_in_window(A *a, void *ctx, const hrec *h) {
    step_pair *p = ctx;
    if (h->cls != EV_HOST_OP && h->cls != EV_HOST_RT && h->cls != HREC_PY) return 0;
    for (int k = 0; k < 2; k++) {
        window *w = &p->w[k];
        if (h->te <= w->ts || h->ts >= w->te || w->n >= OUTLIER_MAX_EVENTS) continue;
        if (VEC_RESERVE(w->ev, w->cap, w->n + 1, 256)) return ERR_NOMEM;
        /* a step's own time reads as untraced (-1): every ProfilerStep#N has a name of its own */
        long name = an_flags(a, h->name) & NF_STEP ? -1 : h->name;
        w->ev[w->n++] = (win_ev){h->ts > w->ts ? h->ts : w->ts, h->te < w->te ? h->te : w->te, name};
    }
    return 0;
}

static int win_cmp(const void *x, const void *y) {
    const win_ev *p = x, *q = y;
    if (p->ts != q->ts) return p->ts < q->ts ? -1 : 1;
    return p->te > q->te ? -1 : p->te < q->te; /* the longer first: it holds the other */
}

/* Adds each name's innermost time in w (what the thread was doing, instant by instant, as
 * idle.c labels it) to col of by[] (keyed by name in keys); the step's instants under no
 * event go to -1 (untraced). */
static int window_times(window *w, intern *keys, double (**by)[2], size_t *n, size_t *cap, int col) {
    qsort(w->ev, w->n, sizeof *w->ev, win_cmp);
    win_ev *stack = malloc((w->n + 1) * sizeof *stack);
    if (!stack) return ERR_NOMEM;
    int depth = 0, rc = 0;
    double cur = w->ts;
    /* label [cur, t) with the innermost open event, popping what ended */
#define WIN_LABEL(t)                                                                                  \
    while (!rc && cur < (t)) {                                                                        \
        while (depth && stack[depth - 1].te <= cur) depth--;                                          \
        double nx = depth && stack[depth - 1].te < (t) ? stack[depth - 1].te : (t);                  \
        long nm = depth ? stack[depth - 1].name : -1;                                                 \
        int fresh;                                                                                    \
        long i = INTERN_SLOT(keys, &nm, sizeof nm, *by, *n, *cap, 64, &fresh);                        \
        if (i < 0) rc = ERR_NOMEM;                                                                    \
        else (*by)[i][col] += nx - cur;                                                               \
        cur = nx;                                                                                     \
    }
    for (size_t i = 0; i < w->n && !rc; i++) {
        WIN_LABEL(w->ev[i].ts);
        while (depth && (w->ev[i].ts >= stack[depth - 1].te || w->ev[i].te > stack[depth - 1].te)) depth--;
        stack[depth++] = w->ev[i];
    }
    WIN_LABEL(w->te);
#undef WIN_LABEL
    free(stack);
    return rc;
}

/* What step o did longer than step typ: the name whose time (innermost, on the step's
 * thread) grew the most, -1 for untraced time. *grew: by how much. */
static int step_culprit(A *a, const step *o, const step *typ, long *culprit, double *grew) {
    step_pair p;
    memset(&p, 0, sizeof p);
    p.w[0].ts = o->ts, p.w[0].te = o->te;
    p.w[1].ts = typ->ts, p.w[1].te = typ->te;
    intern *keys = intern_new();
    double (*by)[2] = NULL;
    size_t n = 0, cap = 0;
    int rc = keys ? an_track_recs(a, o->track, keep_in_window, &p) : ERR_NOMEM;
    if (!rc && typ->track != o->track) rc = ERR_INTERNAL; /* both are the steps' thread's */
    for (int k = 0; k < 2 && !rc; k++) rc = window_times(&p.w[k], keys, &by, &n, &cap, k);
    *culprit = -1;
    *grew = -INFINITY;
    for (size_t i = 0; !rc && i < n; i++)
        if (by[i][0] - by[i][1] > *grew) { *grew = by[i][0] - by[i][1]; *culprit = *(const long *)intern_str(keys, (long)i); }
    free(p.w[0].ev);
    free(p.w[1].ev);
    free(by);
    intern_free(keys);
    return rc;
}

static int cmp_step_ts(const void *x, const void *y) {
    double p = ((const step *)x)->ts, q = ((const step *)y)->ts;
    return p < q ? -1 : p > q;
}

/* By duration, ties by start: the median step is one step, whatever qsort's order of equals. */
static int cmp_step_dur(const void *x, const void *y) {
    const step *p = x, *q = y;
    if (p->dur != q->dur) return p->dur < q->dur ? -1 : 1;
    return p->ts < q->ts ? -1 : p->ts > q->ts;
}

/* Steps of OUTLIER_RATIO x the median step or more: each one's excess over the median goes
 * to what it did longer than the typical step (the step nearest the median). The five
 * longest are compared event by event; the excess of any others goes to the longest's
 * culprit. */
static int step_outliers(A *a, tally *t, const step *steps, size_t n) {
    if (n < OUTLIER_MIN_STEPS) return 0;
    step *v = malloc(n * sizeof *v);
    if (!v) return ERR_NOMEM;
    memcpy(v, steps, n * sizeof *v);
    /* With a GPU, steps count inside its window: the time before its first work and after
     * its last is startup's and tail's (a capture that ends 80 ms after the last step's
     * work made that step an "outlier" of its own tail). */
    if (!a->idle->cpu_only)
        for (size_t i = 0; i < n; i++) {
            if (v[i].ts < a->idle->w0) v[i].ts = a->idle->w0;
            if (v[i].te > a->idle->w1) v[i].te = a->idle->w1;
            v[i].dur = v[i].te > v[i].ts ? v[i].te - v[i].ts : 0;
        }
    qsort(v, n, sizeof *v, cmp_step_dur);
    const step *typ = &v[(size_t)ceil(0.5 * (double)n) - 1]; /* the median by nearest rank */
    double med = typ->dur;
    int rc = 0, k = 0;
    long first = -1;
    json_t *rows = json_array();
    for (size_t i = n; i-- > 0 && !rc && med > 0 && v[i].dur >= OUTLIER_RATIO * med; k++) {
        long culprit = first;
        double grew = 0;
        if (k < 5) rc = step_culprit(a, &v[i], typ, &culprit, &grew);
        if (rc) break;
        if (k == 0) first = culprit;
        rc = sus_credit(t, C_OUTLIER, culprit, -1, v[i].dur - med);
        char cut[EVIDENCE_NAME_MAX + 4];
        if (!rc && k < 5)
            json_array_append_new(rows, json_pack("{s:s,s:f,s:f,s:s,s:f}", "step", an_str(a, v[i].name), "dur_us", v[i].dur, "excess_us",
                                                  v[i].dur - med, "culprit", culprit >= 0 ? utf8_clip(an_str(a, culprit), EVIDENCE_NAME_MAX, cut, sizeof cut)
                                                                                          : "(untraced)", "culprit_grew_us", grew));
    }
    if (!rc && k > 0)
        t->evidence[C_OUTLIER] = json_pack("{s:f,s:s,s:I,s:o}", "median_step_in_gpu_window_us", med, "typical_step", an_str(a, typ->name),
                                           "outlier_steps", (json_int_t)k, "steps", rows);
    else
        json_decref(rows);
    free(v);
    return rc;
}

/* ---- the steps document ---- */

/* p in [0, 1] of sorted v (nearest rank: v[ceil(p n) - 1]). */
static double nearest_rank(const double *v, size_t n, double p) {
    size_t k = (size_t)ceil(p * (double)n);
    return v[k > 0 ? k - 1 : 0];
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The step figures of n > 0 durations d (sorted here) whose sum, in their order, is sum. */
static json_t *dur_stats(double *d, size_t n, double sum) {
    qsort(d, n, sizeof *d, cmp_double);
    return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f}", "count", (json_int_t)n, "mean_us", sum / (double)n, "p50_us", nearest_rank(d, n, 0.5),
                     "p90_us", nearest_rank(d, n, 0.9), "min_us", d[0], "max_us", d[n - 1]);
}

/* The figures of the walk's steps (its ProfilerStep ranges): JSON null without steps, NULL
 * on no memory. A new reference. */
json_t *sus_steps_doc(A *a) {
    if (!a->nsteps) return json_null();
    double *d = malloc(a->nsteps * sizeof *d), sum = 0;
    if (!d) return NULL;
    for (size_t i = 0; i < a->nsteps; i++) sum += d[i] = a->steps[i].dur;
    json_t *o = dur_stats(d, a->nsteps, sum);
    free(d);
    return o;
}

/* ---- the steps, once tb-profiler's are known ---- */

/* The step figures of doc from the step breakdown (steps.c: tb-profiler's steps, each
 * ProfilerStep range extended to the end of the GPU work it launched, trailing steps without
 * GPU work dropped): one step definition on every surface (issue 42). Then the outlier steps
 * among them, and every per-step share divided by their count. */
int an_suspects_steps(A *a, json_t *doc, const json_t *breakdown) {
    const json_t *bs = json_object_get(breakdown, "steps");
    size_t n = json_array_size(bs);
    if (!n || n > a->nsteps) return 0; /* no steps, or not the walk's: the host ranges stand */
    step *v = malloc(n * sizeof *v);
    double *d = malloc(n * sizeof *d), sum = 0;
    int rc = v && d ? 0 : ERR_NOMEM;
    if (!rc) { /* the breakdown's steps are the walk's in start order, the first n */
        memcpy(v, a->steps, n * sizeof *v);
        step *all = malloc(a->nsteps * sizeof *all);
        if (!all) rc = ERR_NOMEM;
        else {
            memcpy(all, a->steps, a->nsteps * sizeof *all);
            qsort(all, a->nsteps, sizeof *all, cmp_step_ts);
            memcpy(v, all, n * sizeof *v);
            free(all);
        }
    }
    for (size_t i = 0; !rc && i < n; i++) {
        const json_t *r = json_array_get(bs, i);
        v[i].ts = json_number_value(json_object_get(r, "start_us"));
        v[i].dur = json_number_value(json_object_get(r, "dur_us"));
        v[i].te = v[i].ts + v[i].dur;
        sum += d[i] = v[i].dur;
    }
    if (!rc) {
        json_t *st = dur_stats(d, n, sum);
        if (!st || json_object_set_new(st, "definition", json_string("tb-profiler's: each ProfilerStep range extended to the end of the GPU "
                                                                      "work it launched")) ||
            json_object_set_new(doc, "steps", st))
            rc = ERR_NOMEM;
    }
    tally t;
    memset(&t, 0, sizeof t);
    if (!rc && !(t.keys = intern_new())) rc = ERR_NOMEM;
    if (!rc) rc = step_outliers(a, &t, v, n);
    json_t *list = json_object_get(doc, "suspects");
    double at;
    long culprit;
    if (!rc) sus_at_stake(&t, C_OUTLIER, NULL, &at, &culprit);
    if (!rc && sus_fires(C_OUTLIER, at, a->wall)) {
        json_t *e = suspect_entry(a, &t, C_OUTLIER, at, culprit, a->idle->cpu_only, n);
        rc = sus_annotate(a, &t, e, C_OUTLIER, at, culprit, 0);
        if (!rc) json_array_append_new(list, e);
        else json_decref(e);
        json_object_set_new(doc, "healthy", json_false());
    }
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) /* per step: of the steps counted now, inside them (suspects_idle.c) */
        sus_per_step(x, n, sum / (double)n);
    if (!rc) rc = sus_sort_list(list);
    for (int c = 0; c < C_N; c++) json_decref(t.evidence[c]);
    intern_free(t.keys);
    free(t.c);
    free(v);
    free(d);
    return rc;
}

/* step_outlier's next experiment: how far the worst step ran past the median, then, where
 * the culprit is named work, that work's own advice (sus_next_experiment). */
void sus_outlier_advice(const advice_in *in, char *out, size_t n) {
    const char *culprit = in->culprit;
    int untraced = !strcmp(culprit, "(untraced)");
    const char *who = untraced ? "Host time outside any traced range (untraced)" : culprit;
    double med = ev_num(in->ev, "median_step_in_gpu_window_us"), k = ev_num(in->ev, "outlier_steps");
    const json_t *worst = json_array_get(json_object_get(in->ev, "steps"), 0);
    int o = utf8_snprintf(out, n, "%s made %.0f step%s take up to %.1fx the median step (%s: %.0f us against %.0f inside the GPU "
                          "window): ", who, k, k == 1 ? "" : "s", med > 0 ? ev_num(worst, "dur_us") / med : 0, ev_str(worst, "step"),
                          ev_num(worst, "dur_us"), med);
    /* named work says what to do about it; untraced time first needs a name */
    int sub = in->flags & NF_GC ? C_GC : in->flags & NF_COMPILE ? C_COMPILE : in->flags & NF_TOKENIZE ? C_TOKENIZE
            : in->flags & NF_ALLOC ? C_ALLOC : C_N;
    if (sub < C_N && o < (int)n) {
        advice_in s2 = *in;
        s2.cat = sub;
        s2.ev = NULL;
        sus_next_experiment(&s2, out + o, n - (size_t)o);
    } else if (untraced && o < (int)n)
        utf8_snprintf(out + o, n - (size_t)o, "the time is outside every traced range: re-profile with with_stack=True, or put "
                      "record_function ranges around the loop's parts, to name what runs in %s; a pause of the whole process (the "
                      "garbage collector, swapping, another process on the CPU) also shows this way", ev_str(worst, "step"));
    else if (o < (int)n)
        utf8_snprintf(out + o, n - (size_t)o, "find what %s does in %s that the others do not (a collection, a recompile, a "
                      "reallocation, I/O) and take it out of the loop or do it between steps; then compare the p90 step", culprit,
                      k == 1 ? "that step" : "those steps");
}
