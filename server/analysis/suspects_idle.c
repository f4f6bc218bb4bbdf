/* suspects_idle.c: idle attribution's part of the suspect list (issue 48 items 3 and 5;
 * definitions: tests/triage/oracle.py "Suspects"): the members that hold a suspect's time,
 * the idle summed up the range tree, and the per-step figure counted inside the steps.
 *
 * Definitions
 *  - members: what holds a suspect's time, each with its own: the category's contributions
 *    summed per name (a one-op category: that op alone), the MEMBERS_MAX largest, and
 *    members_us their sum over all names (at stake <= members_us: the time is theirs).
 *  - the range tree: idle.c charges each idle instant to the innermost record_function / NVTX
 *    range (not a step, not a DataLoader) on its thread, a sync's taken instants to the range
 *    around the sync (idle_rsum). A category's culprit is its top member when that holds
 *    RANGE_SHARE of it, else the range that holds RANGE_SHARE of it (a phase such as
 *    Optimizer.step#Lamb.step whose idle is split over many ops, none passing the gate), else
 *    the top member. A range holding FIRE_FRACTION of the wall in idle over the idle
 *    categories, while the category holding most of it did not fire, is a suspect of that
 *    category named by the range; its members are the labels under it.
 *  - inside the steps: idle.c counts, per label, the part under a step's range (a ProfilerStep
 *    on the labelling stack or the launch's). at_stake_per_step_us = at stake x that share /
 *    steps, never above the mean step, null when none of it is inside; most of it outside:
 *    the advice says the work is one-time, outside the steps (a checkpoint after the last step
 *    is not a per-step cost).
 * Cost: a pass over the label sums per fired category and one sort of the range sums; the
 * sums are one row per distinct (label, range), not per instant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/suspects.h"
#include "lib/err.h"
#include "lib/utf8.h"

#define MEMBERS_MAX 20     /* the members listed (members_us sums them all) */
#define RANGE_SHARE 0.5    /* a member or a range holding this share of a category is its culprit */
#define RANGE_FIRE 0.05    /* a range fires at this share of the wall (suspects.c's FIRE_FRACTION) */
#define OUTSIDE_SHARE 0.5  /* more than this of the time outside the steps: one-time work */
#define FILL_SHARE 0.25    /* a gradient reset's fills holding this share of a suspect: set_to_none */

/* The categories made of idle labels (idle.c's sums), which the range tree sums. */
static int idle_cat(int c) {
    return c == C_DATA || c == C_SYNC || c == C_PY || c == C_LAUNCH || c == C_CPU || c == C_COMM || c == C_ALLOC || c == C_COMPILE ||
           c == C_TOKENIZE || c == C_GC || c == C_SYNC_LAUNCH || c == C_HOST_WORK;
}

/* The category of a range sum's label. */
static int rsum_cat(const A *a, const idle_rsum *r) {
    idle_sum s = {r->type, r->name, -1, r->us, 0, 0, 0};
    return category_of(a, &s);
}

typedef struct nsum { long key; double us; } nsum;

static int cmp_key(const void *x, const void *y) {
    const nsum *p = x, *q = y;
    return p->key < q->key ? -1 : p->key > q->key;
}

static int cmp_us_desc(const void *x, const void *y) {
    const nsum *p = x, *q = y;
    if (p->us != q->us) return p->us > q->us ? -1 : 1;
    return p->key < q->key ? -1 : p->key > q->key;
}

/* Sums v[0..n) per key in place (sorted by key, then by us descending); the new count. */
static size_t fold(nsum *v, size_t n) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_key);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && v[k - 1].key == v[i].key) v[k - 1].us += v[i].us;
        else v[k++] = v[i];
    }
    qsort(v, k, sizeof *v, cmp_us_desc);
    return k;
}

/* Category cat's contributions summed per name, largest first (*out: malloc'd, NULL when none). */
static int members_of(const tally *t, int cat, nsum **out, size_t *n) {
    *out = NULL;
    *n = 0;
    nsum *v = malloc((t->n ? t->n : 1) * sizeof *v);
    if (!v) return ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->c[i].cat == cat) v[k++] = (nsum){t->c[i].name, t->c[i].us};
    *n = fold(v, k);
    *out = v;
    return 0;
}

/* Of the range sums of category cat (cat < 0: every idle category), per range (r >= 0: only
 * that range's, per label name). */
static int ranges_of(A *a, int cat, long r, nsum **out, size_t *n) {
    const idle_state *s = a->idle;
    nsum *v = malloc((s->nrsums ? s->nrsums : 1) * sizeof *v);
    *out = v;
    *n = 0;
    if (!v) return ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->nrsums; i++) {
        const idle_rsum *x = &s->rsums[i];
        int c = rsum_cat(a, x);
        if (c >= C_N || !idle_cat(c) || (cat >= 0 && c != cat) || (r >= 0 && x->range != r)) continue;
        v[k++] = (nsum){r >= 0 ? x->name : x->range, x->us};
    }
    *n = fold(v, k);
    return 0;
}

long sus_range_culprit(A *a, const tally *t, int cat, long culprit) {
    if (!idle_cat(cat) || cat == C_CPU || a->idle->cpu_only || !a->idle->nrsums) return culprit;
    nsum *m, *r;
    size_t nm, nr;
    if (members_of(t, cat, &m, &nm)) return culprit;
    double tot = 0;
    for (size_t i = 0; i < nm; i++) tot += m[i].us;
    int spread = nm && m[0].us < RANGE_SHARE * tot;
    free(m);
    if (!spread || ranges_of(a, cat, -1, &r, &nr)) return culprit;
    long best = nr && r[0].us >= RANGE_SHARE * tot ? r[0].key : culprit;
    free(r);
    return best;
}

static json_t *members_doc(A *a, const nsum *v, size_t n, double *sum) {
    json_t *m = json_array();
    *sum = 0;
    for (size_t i = 0; i < n; i++) {
        char cut[EVIDENCE_NAME_MAX + 4];
        *sum += v[i].us;
        if (i < MEMBERS_MAX)
            json_array_append_new(m, json_pack("{s:s,s:f}", "name", v[i].key >= 0 ? utf8_clip(an_str(a, v[i].key), EVIDENCE_NAME_MAX, cut, sizeof cut)
                                                                                 : "(untraced)", "us", v[i].us));
    }
    return m;
}

/* The share of category cat's labelled time (only name's, name >= 0) that lies inside the
 * steps, of the part where idle.c knows; -1 when it knows of none. */
static double inside_share(const A *a, int cat, long name) {
    const idle_state *s = a->idle;
    double in = 0, known = 0;
    for (size_t i = 0; i < s->nsums; i++) {
        const idle_sum *x = &s->sums[i];
        if (x->known_us <= 0 || (name >= 0 && x->name != name) || category_of(a, x) != cat) continue;
        in += x->in_us;
        known += x->known_us;
    }
    return known > 0 ? in / known : -1;
}

/* A fill writes one value over a tensor: the ops a gradient reset runs (aten::zero_ -> fill_). */
static int fill_op(const char *n) {
    size_t l = strlen(n);
    return (l >= 5 && !strcmp(n + l - 5, "fill_")) || (l >= 5 && !strcmp(n + l - 5, "zero_"));
}

/* Puts text before the suspect's next experiment: the fix the trace itself points at first,
 * the category's advice after it. */
static int prepend(json_t *entry, const char *text) {
    const char *next = json_string_value(json_object_get(entry, "next_experiment"));
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s%s", text, next && *next ? " Otherwise: " : "", next ? next : "");
    return json_object_set_new(entry, "next_experiment", json_string(buf)) ? ERR_NOMEM : 0;
}

/* A sync's evidence (idle.c sync_evidence: what blocked, under which ops, the copy) for its
 * members, SYNC_EV_MAX at most; and what the trace shows made it block: a copy from pageable
 * memory (its fix: pinned memory), or a data-dependent shape (an op whose output size only
 * the GPU knows: nonzero, masked_select, unique). */
static int sync_drain(A *a, json_t *entry, const nsum *m, size_t n) {
    const json_t *all = a->idle->sync_ev;
    json_t *calls = json_array(), *ev = json_object_get(entry, "evidence");
    const char *pageable = NULL, *shape = NULL;
    for (size_t i = 0; i < n && all && json_array_size(calls) < SYNC_EV_MAX; i++) {
        const json_t *v = m[i].key >= 0 ? json_object_get(all, an_str(a, m[i].key)) : NULL;
        size_t j;
        json_t *x;
        json_array_foreach(v, j, x) {
            const char *t = json_string_value(x);
            if (json_array_size(calls) >= SYNC_EV_MAX) break;
            json_array_append(calls, x);
            if (!pageable && strstr(t, "Pageable") && strstr(t, "HtoD")) pageable = t;
            if (!shape && (strstr(t, "nonzero") || strstr(t, "masked_select") || strstr(t, "unique"))) shape = t;
        }
    }
    if (!json_is_object(ev) || json_object_set_new(ev, "blocking_calls", calls)) return ERR_NOMEM;
    if (shape && json_object_set_new(ev, "drain", json_string("data_dependent_shape"))) return ERR_NOMEM;
    if (pageable && json_object_set_new(ev, "drain", json_string("pageable_copy"))) return ERR_NOMEM;
    char buf[512];
    if (pageable) {
        snprintf(buf, sizeof buf, "The queue drains in a copy from pageable memory (%.200s): pin the source (DataLoader(pin_memory=True) "
                 "or tensor.pin_memory()) so .to(device, non_blocking=True) is asynchronous.", pageable);
        return prepend(entry, buf);
    }
    if (shape) {
        snprintf(buf, sizeof buf, "The queue drains at a data-dependent shape (%.200s): the host waits to learn the output's size; a "
                 "fixed-size form (a mask multiply, torch.where, a size= bound) keeps the queue full.", shape);
        return prepend(entry, buf);
    }
    return 0;
}

/* Where the trace shows the fills of a gradient reset (fill / zero ops under a zero_grad
 * range) holding FILL_SHARE of a suspect's idle, the idiomatic fix, appended to its advice. */
static int reset_advice(A *a, json_t *entry, int cat, double at) {
    const idle_state *s = a->idle;
    double fills = 0;
    long range = -1;
    for (size_t i = 0; i < s->nrsums; i++) {
        const idle_rsum *x = &s->rsums[i];
        if (x->name < 0 || !fill_op(an_str(a, x->name)) || !strstr(an_str(a, x->range), "zero_grad") || rsum_cat(a, x) != cat) continue;
        fills += x->us;
        range = x->range;
    }
    if (range < 0 || fills < FILL_SHARE * at) return 0;
    char buf[512], cut[EVIDENCE_NAME_MAX + 4];
    snprintf(buf, sizeof buf, "%.1f ms of it are fills under %s (a gradient reset): zero_grad(set_to_none=True) (the default since "
             "PyTorch 2.0) drops the gradients instead of filling them, no kernel at all.", fills / 1e3,
             utf8_clip(an_str(a, range), EVIDENCE_NAME_MAX, cut, sizeof cut));
    return prepend(entry, buf);
}

int sus_annotate(A *a, const tally *t, json_t *entry, int cat, double at, long culprit, int single) {
    if (!entry) return ERR_NOMEM;
    nsum *m = NULL, one = {culprit, at};
    size_t n = 1;
    if (!single && members_of(t, cat, &m, &n)) return ERR_NOMEM;
    double sum;
    json_t *doc = members_doc(a, single ? &one : m, n, &sum);
    int rc = cat == C_SYNC ? sync_drain(a, entry, single ? &one : m, n) : 0;
    free(m);
    if (rc || json_object_set_new(entry, "members", doc) || json_object_set_new(entry, "members_us", json_real(sum))) return ERR_NOMEM;
    int c = cat == C_THREADS ? C_CPU : cat;
    double in = c == C_START || c == C_TAIL || c == C_OUTLIER ? -1 : inside_share(a, c, single ? culprit : -1);
    json_t *ev = json_object_get(entry, "evidence");
    if (in >= 0 && json_is_object(ev) && json_object_set_new(ev, "inside_steps_fraction", json_real(in))) return ERR_NOMEM;
    return idle_cat(cat) && !a->idle->cpu_only ? reset_advice(a, entry, cat, at) : 0;
}

int sus_range_suspects(A *a, const tally *t, json_t *list, double wall, const int *fired) {
    const idle_state *s = a->idle;
    if (s->cpu_only || !s->nrsums || wall <= 0) return 0;
    nsum *r;
    size_t nr;
    int rc = ranges_of(a, -1, -1, &r, &nr);
    for (size_t i = 0; !rc && i < nr && r[i].us >= RANGE_FIRE * wall; i++) {
        /* the category holding most of the range's idle */
        double by[C_N] = {0};
        for (size_t j = 0; j < s->nrsums; j++) {
            const idle_rsum *x = &s->rsums[j];
            int c = x->range == r[i].key ? rsum_cat(a, x) : C_N;
            if (c < C_N && idle_cat(c)) by[c] += x->us;
        }
        int cat = 0;
        for (int c = 1; c < C_N; c++)
            if (by[c] > by[cat]) cat = c;
        if (fired[cat]) continue;
        json_t *e = suspect_entry(a, t, cat, r[i].us, r[i].key, 0, a->nsteps);
        nsum *m;
        size_t nm;
        if (!e || ranges_of(a, -1, r[i].key, &m, &nm)) {
            json_decref(e);
            rc = ERR_NOMEM;
            break;
        }
        double sum;
        json_t *doc = members_doc(a, m, nm, &sum), *ev = json_object_get(e, "evidence");
        free(m);
        json_t *byc = json_object();
        for (int c = 0; c < C_N; c++)
            if (by[c] > 0) json_object_set_new(byc, category_name(c), json_real(by[c]));
        if (json_object_set_new(e, "members", doc) || json_object_set_new(e, "members_us", json_real(sum)) ||
            json_object_set_new(ev, "by_category_us", byc) || json_object_set_new(ev, "range", json_string(an_str(a, r[i].key))))
            rc = ERR_NOMEM;
        double in = inside_share(a, cat, -1);
        if (!rc && in >= 0 && json_object_set_new(ev, "inside_steps_fraction", json_real(in))) rc = ERR_NOMEM;
        if (!rc) rc = reset_advice(a, e, cat, r[i].us);
        if (!rc && json_array_append_new(list, e)) rc = ERR_NOMEM;
    }
    free(r);
    return rc;
}

void sus_per_step(json_t *entry, size_t nsteps, double mean_step) {
    if (!json_is_number(json_object_get(entry, "at_stake_per_step_us")) || !nsteps) return;
    json_t *ev = json_object_get(entry, "evidence");
    const json_t *f = json_object_get(ev, "inside_steps_fraction");
    double in = json_is_number(f) ? json_number_value(f) : 1;
    double at = json_number_value(json_object_get(entry, "at_stake_us")), per = at * in / (double)nsteps;
    if (per > mean_step) per = mean_step;
    json_object_set_new(entry, "at_stake_per_step_us", in > 0 ? json_real(per) : json_null());
    if (in >= 1 - OUTSIDE_SHARE) return;
    /* most of it lies outside the steps: one-time work, not a cost of each step */
    char buf[1024];
    const char *culprit = json_string_value(json_object_get(entry, "culprit"));
    snprintf(buf, sizeof buf, "%s runs mostly outside the steps (%.0f%% of its %.1f ms, once: before the first step or after the last): "
             "it is not a per-step cost. Cut it only if the run's total time matters: do it less often, in the background, or "
             "overlapped with the next work.", culprit ? culprit : "(untraced)", 100 * (1 - in), at / 1e3);
    json_object_set_new(entry, "next_experiment", json_string(buf));
}
