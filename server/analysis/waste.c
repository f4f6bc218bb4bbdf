/* waste.c: waste inside a busy GPU by kind, per session and per phase (waste.h; the rules:
 * tests/triage/oracle.py's work_kind and phase_kinds, gpu_set_suspects' copies_casts,
 * unfused_elementwise and tiny_kernels). */
#include "analysis/waste.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/names.h"
#include "lib/err.h"
#include "lib/vec.h"

#define TINY_US 10.0           /* a tiny kernel: shorter than this, or fewer blocks than the device has SMs */
#define TINY_MIN_KERNELS 1000  /* ... many: this many in the trace */
#define TINY_MIN_PER_STEP 100  /* ... or this many a step */
#define TINY_BUSY 0.6          /* ... while the GPU is busy this much of their windows (also a chain's window) */
#define TINY_FIXED_US 3.0      /* the fixed cost of a kernel one pass would not spend */

/* What the walk saw around one launch. */
typedef struct lrec {
    long long corr;
    long inner, range, dm_op; /* string ids, -1 none */
    double range_ts, step_ts; /* the range's and the step's start: which instance (NAN none) */
    int pnode;                /* its phases: the node of their path (pnode), -1 none */
    unsigned char graph;      /* a graph launch: its kernels' launches are gone already */
    unsigned char pcut;       /* a phase around it is not tracked (a name or a path past its cap) */
} lrec;

/* One node of the tree of phase paths: the path of its parent, then phase. */
typedef struct pnode { int parent, phase; } pnode;

struct waste_state {
    lrec *l;
    size_t n, cap;
    int sorted;
    long cpu_kind;            /* string id of "cpu_op", -1 until met */
    signed char *okind;       /* per string id: an op's kind + 1 (WK_N + 1: none), 0 not known yet */
    signed char *kkind;       /* per string id: a kernel name's kind + 1 (WK_N + 1: the name does not say) */
    unsigned char *keltw;     /* per string id: 1 + (an elementwise kernel family) */
    /* phases (waste.h's head) */
    intern *pkeys;            /* phase name (string id) -> phase index */
    long *pname;              /* per phase index: its name */
    size_t nph, capph;
    intern *dkeys;            /* names met past WASTE_PHASES_MAX (counted once each) */
    intern *nkeys;            /* (parent node, phase) -> node */
    pnode *node;
    size_t nnode, capnode;
    unsigned stamp[WASTE_PHASES_MAX], gen; /* stamp[p] == gen: the path being built holds p */
    long *cur, *last;         /* this launch's and the last one's range names, outermost first */
    size_t ncur, nlast, capcur, caplast;
    int have_last, last_node, last_cut; /* the last one's path: launches in a row share it */
};

static waste_state *state_of(A *a) {
    if (!a->waste && (a->waste = calloc(1, sizeof *a->waste))) {
        a->waste->cpu_kind = -1;
        size_t n = a->nnflags ? a->nnflags : 1;
        a->waste->okind = calloc(n, 1);
        a->waste->kkind = calloc(n, 1);
        a->waste->keltw = calloc(n, 1);
        a->waste->pkeys = intern_new();
        a->waste->dkeys = intern_new();
        a->waste->nkeys = intern_new();
        if (!a->waste->okind || !a->waste->kkind || !a->waste->keltw || !a->waste->pkeys || !a->waste->dkeys || !a->waste->nkeys) {
            an_waste_free(a);
            return NULL;
        }
    }
    return a->waste;
}

/* Why caches by string id: the walk asks for the kind of every op around every launch, and
 * the pass for every kernel's: a name's rules are read once. */
static int op_kind(A *a, waste_state *w, long name) {
    if (name < 0) return -1;
    if ((size_t)name >= a->nnflags) return wk_op_kind(an_str(a, name));
    if (!w->okind[name]) {
        int k = wk_op_kind(an_str(a, name));
        w->okind[name] = (signed char)(k < 0 ? WK_N + 1 : k + 1);
    }
    return w->okind[name] == WK_N + 1 ? -1 : w->okind[name] - 1;
}

static int kernel_kind(A *a, waste_state *w, long name) {
    if (name < 0) return -1;
    if ((size_t)name >= a->nnflags) return wk_kernel_kind(an_str(a, name));
    if (!w->kkind[name]) {
        int k = wk_kernel_kind(an_str(a, name));
        w->kkind[name] = (signed char)(k < 0 ? WK_N + 1 : k + 1);
    }
    return w->kkind[name] == WK_N + 1 ? -1 : w->kkind[name] - 1;
}

static int eltw_kernel(A *a, waste_state *w, long name) {
    if (name < 0) return 0;
    if ((size_t)name >= a->nnflags) return wk_elementwise_kernel(an_str(a, name));
    if (!w->keltw[name]) w->keltw[name] = (unsigned char)(1 + wk_elementwise_kernel(an_str(a, name)));
    return w->keltw[name] == 2;
}

static int is_cpu_op(A *a, waste_state *w, const frame *f) {
    if (f->cls != EV_HOST_OP || f->kind == a->ua_kind) return 0;
    if (w->cpu_kind < 0 && !strcmp(an_str(a, f->kind), "cpu_op")) w->cpu_kind = f->kind;
    return f->kind == w->cpu_kind;
}

/* ---- phases around a launch ---- */

/* The index of phase name (a folded string id), -1 when it is past WASTE_PHASES_MAX (the
 * name counted once in dkeys), -2 when out of memory. */
static int phase_index(waste_state *w, long name) {
    long i = intern_lookup(w->pkeys, (const char *)&name, sizeof name);
    if (i >= 0) return (int)i;
    if (w->nph >= WASTE_PHASES_MAX) return intern_id(w->dkeys, (const char *)&name, sizeof name) < 0 ? -2 : -1;
    int fresh;
    i = INTERN_SLOT(w->pkeys, &name, sizeof name, w->pname, w->nph, w->capph, 16, &fresh);
    if (i < 0) return -2;
    w->pname[i] = name;
    return (int)i;
}

/* The node of parent's path followed by phase, -1 past WASTE_PHASE_NODES_MAX, -2 out of
 * memory. */
static int node_child(waste_state *w, int parent, int phase) {
    int key[2] = {parent, phase}, fresh;
    long i = intern_lookup(w->nkeys, (const char *)key, sizeof key);
    if (i >= 0) return (int)i;
    if (w->nnode >= WASTE_PHASE_NODES_MAX) return -1;
    i = INTERN_SLOT(w->nkeys, key, sizeof key, w->node, w->nnode, w->capnode, 64, &fresh);
    if (i < 0) return -2;
    w->node[i] = (pnode){parent, phase};
    return (int)i;
}

/* x's phases from the range names in w->cur (outermost first): the node of their path, each
 * name once. Why the last launch's path is kept: launches come in runs under one stack of
 * ranges, and the path depends on the names alone, so a run costs a comparison, no lookup. */
static int launch_phases(waste_state *w, lrec *x) {
    if (w->have_last && w->ncur == w->nlast && (!w->ncur || !memcmp(w->cur, w->last, w->ncur * sizeof *w->cur))) {
        x->pnode = w->last_node;
        x->pcut = (unsigned char)w->last_cut;
        return 0;
    }
    if (++w->gen == 0) { /* wrapped: no stamp may look current */
        memset(w->stamp, 0, sizeof w->stamp);
        w->gen = 1;
    }
    int node = -1, cut = 0;
    for (size_t i = 0; i < w->ncur; i++) {
        int p = phase_index(w, w->cur[i]);
        if (p == -2) return ERR_NOMEM;
        if (p < 0) {
            cut = 1;
            continue;
        }
        if (w->stamp[p] == w->gen) continue; /* a range inside one of its own name */
        w->stamp[p] = w->gen;
        int c = node_child(w, node, p);
        if (c == -2) return ERR_NOMEM;
        if (c < 0) { /* the tree is full: this path's rest is untracked */
            cut = 1;
            break;
        }
        node = c;
    }
    x->pnode = node;
    x->pcut = (unsigned char)cut;
    long *t = w->last;
    w->last = w->cur, w->cur = t;
    size_t tc = w->caplast;
    w->caplast = w->capcur, w->capcur = tc;
    w->nlast = w->ncur;
    w->have_last = 1, w->last_node = node, w->last_cut = cut;
    return 0;
}

int an_waste_launch(A *a, const hrow *r, const frame *stack, int depth) {
    if (r->corr < 0) return 0;
    waste_state *w = state_of(a);
    if (!w || VEC_RESERVE(w->l, w->cap, w->n + 1, 1024)) return ERR_NOMEM;
    lrec x = {r->corr, -1, -1, -1, NAN, NAN, -1, (an_flags(a, r->name) & NF_GRAPH_LAUNCH) != 0, 0};
    w->ncur = 0;
    for (int i = 0; i < depth; i++) {
        const frame *f = &stack[i];
        if (f->cls != EV_HOST_OP) continue;
        if (f->kind == a->ua_kind) {
            if (an_flags(a, f->name) & NF_STEP) x.step_ts = f->ts;
            else x.range = f->name, x.range_ts = f->ts;
            /* every range is a phase, under /phases' name (the step folded) */
            if (VEC_RESERVE(w->cur, w->capcur, w->ncur + 1, 16)) return ERR_NOMEM;
            w->cur[w->ncur++] = an_fold(a, f->name);
        } else if (is_cpu_op(a, w, f)) {
            x.inner = f->name;
            if (x.dm_op < 0 && op_kind(a, w, f->name) == WK_DATA_MOVEMENT) x.dm_op = f->name;
        }
    }
    int rc = launch_phases(w, &x);
    if (rc) return rc;
    if (w->n && w->l[w->n - 1].corr > x.corr) w->sorted = 0;
    else if (!w->n) w->sorted = 1;
    w->l[w->n++] = x;
    return 0;
}

static int lrec_cmp(const void *p, const void *q) {
    long long x = ((const lrec *)p)->corr, y = ((const lrec *)q)->corr;
    return x < y ? -1 : x > y;
}

static const lrec *launch_of(const waste_state *w, long long corr) {
    if (!w || corr < 0) return NULL;
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->l[mid].corr < corr) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->n && w->l[lo].corr == corr ? &w->l[lo] : NULL;
}

int an_wm_add(wmembers *m, const char *name, size_t len, double us) {
    if (!m->keys && !(m->keys = intern_new())) return ERR_NOMEM;
    int fresh;
    long i = INTERN_SLOT(m->keys, name, len, m->us, m->n, m->cap, 16, &fresh);
    if (i < 0) return ERR_NOMEM;
    m->us[i] += us;
    return 0;
}

/* A kernel's name for grouping: before its template or argument list, its last word
 * ("void at::native::vectorized_elementwise_kernel<4, ...>(...)" ->
 * "at::native::vectorized_elementwise_kernel"). */
static size_t short_name(const char *name, const char **start) {
    size_t end = strcspn(name, "(<");
    while (end > 0 && name[end - 1] == ' ') end--;
    size_t s = end;
    while (s > 0 && name[s - 1] != ' ') s--;
    if (s == end) { /* nothing before ( or <: the name as it is, cut */
        *start = name;
        end = strlen(name);
        return end > 60 ? 60 : end;
    }
    *start = name + s;
    return end - s;
}

static int add_named(A *a, wmembers *m, long op, long kname, double us) {
    if (op >= 0) {
        const char *s = an_str(a, op);
        return an_wm_add(m, s, strlen(s), us);
    }
    const char *st;
    size_t n = short_name(an_str(a, kname), &st);
    return an_wm_add(m, st, n, us);
}


/* Time by string id (an op's, a kernel's, a range's; -1: none), turned into named members
 * at the end. Why not wmembers directly: that hashes the name's text per kernel; this is an
 * array add (the pass's cost was mostly hashing: 90-270 ms a 50 MB upload). */
typedef struct by_id {
    double *us;             /* [2 * id + is_kernel], id + 1 for -1 */
    size_t cap;
} by_id;

static int by_id_add(by_id *b, long id, int is_kernel, double us) {
    size_t i = 2 * (size_t)(id + 1) + (is_kernel != 0);
    if (i >= b->cap) {
        size_t n = b->cap ? b->cap : 1024;
        while (n <= i) n *= 2;
        double *v = realloc(b->us, n * sizeof *v);
        if (!v) return ERR_NOMEM;
        memset(v + b->cap, 0, (n - b->cap) * sizeof *v);
        b->us = v, b->cap = n;
    }
    b->us[i] += us;
    return 0;
}

/* b's entries as members: an op's or range's name, a kernel's short name ("" for none). */
static int by_id_members(A *a, const by_id *b, wmembers *m) {
    int rc = 0;
    for (size_t i = 0; !rc && i < b->cap; i++) {
        if (b->us[i] <= 0) continue;
        long id = (long)(i / 2) - 1;
        if (id < 0) rc = an_wm_add(m, "", 0, b->us[i]);
        else if (i % 2) rc = add_named(a, m, -1, id, b->us[i]);
        else rc = add_named(a, m, id, -1, b->us[i]);
    }
    return rc;
}

/* ---- unfused elementwise chains ---- */

typedef struct ckern { double ts, te, dur; long op, kname, range; } ckern;
typedef struct chain { long long dev, stream; double step; ckern *k; size_t n, cap; } chain;

/* A chain of >= 2 elementwise kernels on one stream, inside a busy GPU: the time above one
 * fused pass (its longest kernel: one read and one write of the largest tensor) is waste;
 * where the GPU idles inside the window, the idle is idle's (launch_bound), not this. */
static int chain_flush(A *a, by_id *ufm, by_id *ufr, chain *c, waste_out *o, long long *nchains, long long *nkern) {
    int rc = 0;
    if (c->n >= 2) {
        double sum = 0, mx = 0, t0 = c->k[0].ts, t1 = c->k[c->n - 1].te;
        for (size_t i = 0; i < c->n; i++) {
            sum += c->k[i].dur;
            if (c->k[i].dur > mx) mx = c->k[i].dur;
        }
        /* the chain's own kernels (one stream: they do not overlap) are busy time already:
         * the busy union is read only when they alone do not fill TINY_BUSY of the window */
        if (t1 <= t0 || sum >= TINY_BUSY * (t1 - t0) || an_busy_in(a->busy_q, t0, t1) / (t1 - t0) >= TINY_BUSY) {
            o->unfused.at += sum - mx;
            ++*nchains;
            *nkern += (long long)c->n;
            for (size_t i = 0; !rc && i < c->n; i++) {
                rc = by_id_add(ufm, c->k[i].op >= 0 ? c->k[i].op : c->k[i].kname, c->k[i].op < 0, c->k[i].dur);
                if (!rc) rc = by_id_add(ufr, c->k[i].range, 0, c->k[i].dur);
            }
        }
    }
    c->n = 0;
    return rc;
}

/* ---- tiny kernels by group ---- */

typedef struct tgroup {
    long name;
    int how;
    long long n;
    double us, at;
    double last_inst;           /* the instance of its last kernel and its window (w), op row (op): */
    long last_w, last_op, last_oi; /* kernels come in runs of one instance and one op */
} tgroup;
typedef struct twin { long group; double inst, ts, te; } twin;

static int twin_cmp(const void *p, const void *q) {
    const twin *x = p, *y = q;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

typedef struct tiny_acc {
    intern *gkeys, *wkeys, *okeys;
    long *gmap;                 /* [3 * (id + 1) + how]: the group's index + 1, 0 none (a lookup without hashing) */
    size_t capmap;
    tgroup *g;
    size_t ng, capg;
    twin *w;
    size_t nw, capw;
    struct { long group, name; int is_op; double us; } *op;
    size_t nop, capop;
} tiny_acc;

static int tiny_add(tiny_acc *t, const lrec *l, long kname, double ts, double te, double dur) {
    long key[2];
    double inst = 0;
    if (l && l->range >= 0) key[0] = 0, key[1] = l->range, inst = l->range_ts;
    else if (l && l->inner >= 0) key[0] = 1, key[1] = l->inner, inst = l && !isnan(l->step_ts) ? l->step_ts : 0;
    else key[0] = 2, key[1] = kname;
    int fresh;
    size_t mi = 3 * (size_t)(key[1] + 1) + (size_t)key[0];
    if (mi >= t->capmap) {
        size_t n = t->capmap ? t->capmap : 3072;
        while (n <= mi) n *= 2;
        long *v = realloc(t->gmap, n * sizeof *v);
        if (!v) return ERR_NOMEM;
        memset(v + t->capmap, 0, (n - t->capmap) * sizeof *v);
        t->gmap = v, t->capmap = n;
    }
    long gi = t->gmap[mi] - 1;
    if (gi < 0) {
        gi = INTERN_SLOT(t->gkeys, key, sizeof key, t->g, t->ng, t->capg, 64, &fresh);
        if (gi < 0) return ERR_NOMEM;
        t->g[gi] = (tgroup){key[1], (int)key[0], 0, 0, 0, NAN, -1, -1, -1};
        t->gmap[mi] = gi + 1;
    }
    tgroup *g = &t->g[gi];
    g->n++;
    g->us += dur;
    g->at += dur < TINY_FIXED_US ? dur : TINY_FIXED_US;
    long wi = g->last_w;
    if (wi < 0 || g->last_inst != inst) {
        double wkey[2] = {(double)gi, inst};
        wi = INTERN_SLOT(t->wkeys, wkey, sizeof wkey, t->w, t->nw, t->capw, 64, &fresh);
        if (wi < 0) return ERR_NOMEM;
        if (fresh) t->w[wi] = (twin){gi, inst, ts, te};
        g = &t->g[gi];
        g->last_w = wi, g->last_inst = inst;
    }
    if (ts < t->w[wi].ts) t->w[wi].ts = ts;
    if (te > t->w[wi].te) t->w[wi].te = te;
    long okey[3] = {gi, l && l->inner >= 0 ? l->inner : kname, l && l->inner >= 0};
    long oi = g->last_oi;
    if (oi < 0 || g->last_op != okey[1]) {
        oi = INTERN_SLOT(t->okeys, okey, sizeof okey, t->op, t->nop, t->capop, 64, &fresh);
        if (oi < 0) return ERR_NOMEM;
        if (fresh) t->op[oi].group = gi, t->op[oi].name = okey[1], t->op[oi].is_op = (int)okey[2];
        g->last_oi = oi, g->last_op = okey[1];
    }
    t->op[oi].us += dur;
    return 0;
}

/* The busy share of a group's windows (sorted by start within the group: w[0..n)). */
static double windows_busy(A *a, const twin *w, size_t n) {
    double len = 0, busy = 0, s = 0, e = -INFINITY;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && w[i].ts <= e) {
            if (w[i].te > e) e = w[i].te;
            continue;
        }
        if (e > s) len += e - s, busy += an_busy_in(a->busy_q, s, e);
        if (i < n) s = w[i].ts, e = w[i].te;
    }
    return len > 0 ? busy / len : 0;
}

static int tiny_finish(A *a, tiny_acc *t, waste_out *o) {
    if (t->nw) qsort(t->w, t->nw, sizeof *t->w, twin_cmp); /* t->w is NULL when empty */
    json_t *groups = json_object();
    int rc = groups ? 0 : ERR_NOMEM;
    for (size_t i = 0, j; !rc && i < t->nw; i = j) {
        for (j = i; j < t->nw && t->w[j].group == t->w[i].group; j++) {}
        const tgroup *g = &t->g[t->w[i].group];
        double per = a->nsteps ? (double)g->n / (double)a->nsteps : 0;
        if (a->nsteps ? per < TINY_MIN_PER_STEP : g->n < TINY_MIN_KERNELS) continue;
        double frac = windows_busy(a, &t->w[i], j - i);
        if (frac < TINY_BUSY) continue;
        const char *nm;
        size_t len;
        if (g->how < 2) nm = an_str(a, g->name), len = strlen(nm);
        else len = short_name(an_str(a, g->name), &nm);
        rc = an_wm_add(&o->tiny.members, nm, len, g->us);
        o->tiny.at += g->at;
        /* its ops, by time: the advice reads what the phase runs (fills under zero_grad) */
        json_t *ops = json_object();
        for (size_t k = 0; !rc && ops && k < t->nop; k++) {
            if (t->op[k].group != t->w[i].group) continue;
            const char *on;
            size_t ol;
            if (t->op[k].is_op) on = an_str(a, t->op[k].name), ol = strlen(on);
            else ol = short_name(an_str(a, t->op[k].name), &on);
            char buf[128];
            snprintf(buf, sizeof buf, "%.*s", (int)(ol < 127 ? ol : 127), on);
            json_t *prev = json_object_get(ops, buf);
            json_object_set_new(ops, buf, json_real(t->op[k].us + (prev ? json_number_value(prev) : 0)));
        }
        char gname[256];
        snprintf(gname, sizeof gname, "%.*s", (int)(len < 255 ? len : 255), nm);
        if (!ops || json_object_set_new(groups, gname, json_pack("{s:I,s:f,s:f,s:f,s:o}", "kernels", (json_int_t)g->n, "gpu_us", g->us,
                                                                 "busy_fraction", frac, "fixed_cost_us", g->at, "ops", ops)))
            rc = ERR_NOMEM;
    }
    if (!rc && o->tiny.members.n) o->tiny.ev = json_pack("{s:o}", "groups", groups);
    else json_decref(groups);
    return rc;
}

/* ---- the pass ---- */

typedef struct pass {
    chain *ch;
    size_t nch, capch;
    tiny_acc tiny;
    double cs, ce, copy_len;   /* the data movement's union, one device at a time */
    long long dev;
    int any;
    long long nchains, nkern;
    wmembers layout;
    by_id ufm, ufr;            /* unfused: time in chains by op (else kernel), by range */
} pass;

static chain *chain_of(pass *p, long long dev, long long stream) {
    for (size_t i = 0; i < p->nch; i++)
        if (p->ch[i].dev == dev && p->ch[i].stream == stream) return &p->ch[i];
    if (VEC_RESERVE(p->ch, p->capch, p->nch + 1, 8)) return NULL;
    p->ch[p->nch] = (chain){dev, stream, NAN, NULL, 0, 0};
    return &p->ch[p->nch++];
}

static void copy_union(pass *p, long long dev, double ts, double te) {
    if (p->any && dev == p->dev && ts <= p->ce) {
        if (te > p->ce) p->ce = te;
        return;
    }
    if (p->any) p->copy_len += p->ce - p->cs;
    p->cs = ts, p->ce = te, p->dev = dev, p->any = 1;
}

static int same_step(double x, double y) { return (isnan(x) && isnan(y)) || x == y; }

/* One GPU activity: its kind, then what each estimate takes of it. */
static int take(A *a, pass *p, waste_out *o, sqlite3_stmt *q) {
    waste_state *w = a->waste;
    double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1), dur = sqlite3_column_double(q, 2);
    long long dev = sqlite3_column_int64(q, 3), stream = sqlite3_column_int64(q, 4);
    long kind = (long)sqlite3_column_int64(q, 5), name = (long)sqlite3_column_int64(q, 6);
    long long corr = sqlite3_column_type(q, 7) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 7);
    int has_bps = sqlite3_column_type(q, 8) != SQLITE_NULL;
    double bps = sqlite3_column_double(q, 8);
    const lrec *l = launch_of(w, corr);
    long inner = l ? l->inner : -1;
    int wk, is_kernel = kind == a->kernel_kind;
    if (!is_kernel) wk = WK_DATA_MOVEMENT;
    else if ((wk = kernel_kind(a, w, name)) < 0 && (wk = op_kind(a, w, inner)) < 0) wk = eltw_kernel(a, w, name) ? WK_ELEMENTWISE : WK_OTHER;
    o->by_kind[wk] += dur;
    o->gpu_us += dur;
    /* per phase: every phase on the launch's path (each name once there) */
    for (int n = l ? l->pnode : -1; n >= 0; n = w->node[n].parent) {
        int ph = w->node[n].phase;
        o->ph_kind[ph][wk] += dur;
        o->ph_us[ph] += dur;
    }
    if (l && l->pcut) o->ph_untracked_us += dur;
    int rc = 0;
    /* copies: data movement, but host transfers (their own categories) and what an
     * addressing op launched (memory_bound_op's); named by the outermost data-movement op,
     * else the op it hides under (a layout conversion inside a convolution), else itself */
    int host_xfer = kind == a->memcpy_kind && an_flags(a, name) & NF_HOST_COPY;
    if (wk == WK_DATA_MOVEMENT && !host_xfer && !(inner >= 0 && wk_addressing_op(an_str(a, inner)))) {
        long who = l && l->dm_op >= 0 ? l->dm_op : inner;
        if (who < 0 && !is_kernel) {
            const char *s = an_str(a, name);
            rc = an_wm_add(&o->copies.members, s, strlen(s), dur);
        } else rc = add_named(a, &o->copies.members, who, name, dur);
        copy_union(p, dev, ts, te);
        if (!rc && is_kernel && wk_layout_kernel(an_str(a, name))) rc = add_named(a, &p->layout, -1, name, dur);
    }
    /* chains: elementwise kernels back to back on one stream, within one step */
    chain *c = chain_of(p, dev, stream);
    if (!c) return ERR_NOMEM;
    double step = l ? l->step_ts : NAN;
    if (!rc && is_kernel && wk == WK_ELEMENTWISE) {
        if (c->n && !same_step(step, c->step)) rc = chain_flush(a, &p->ufm, &p->ufr, c, o, &p->nchains, &p->nkern);
        if (!rc && VEC_RESERVE(c->k, c->cap, c->n + 1, 16)) rc = ERR_NOMEM;
        if (!rc) c->k[c->n++] = (ckern){ts, te, dur, inner, name, l ? l->range : -1};
        c->step = step;
    } else if (!rc) rc = chain_flush(a, &p->ufm, &p->ufr, c, o, &p->nchains, &p->nkern);
    /* tiny kernels: not collectives, not replayed by a graph (its launches are gone already) */
    if (!rc && is_kernel && wk != WK_COMMUNICATION && !(l && l->graph) && (dur < TINY_US || (has_bps && bps < 1)))
        rc = tiny_add(&p->tiny, l, name, ts, te, dur);
    return rc;
}

static json_t *top_json(const wmembers *m, size_t k) {
    json_t *o = json_object();
    /* the k largest by a selection (k is small) */
    double last = INFINITY;
    for (size_t n = 0; o && n < k; n++) {
        long best = -1;
        for (size_t i = 0; i < m->n; i++)
            if (m->us[i] < last && (best < 0 || m->us[i] > m->us[best])) best = (long)i;
        if (best < 0) break;
        last = m->us[best];
        json_object_set_new(o, intern_str(m->keys, best), json_real(m->us[best]));
    }
    return o;
}

int an_waste_pass(A *a, waste_out *o) {
    memset(o, 0, sizeof *o);
    waste_state *w = state_of(a);
    if (!w) return ERR_NOMEM;
    if (!w->sorted && w->n) qsort(w->l, w->n, sizeof *w->l, lrec_cmp); /* w->l is NULL when empty */
    w->sorted = 1;
    /* the phases the walk met: their sums (one row each, at most WASTE_PHASES_MAX) */
    o->nph = w->nph;
    o->ph_untracked = (long long)intern_count(w->dkeys);
    if (w->nph) {
        o->ph_name = malloc(w->nph * sizeof *o->ph_name);
        o->ph_us = calloc(w->nph, sizeof *o->ph_us);
        o->ph_kind = calloc(w->nph, sizeof *o->ph_kind);
        if (!o->ph_name || !o->ph_us || !o->ph_kind) return ERR_NOMEM; /* the caller frees o */
        memcpy(o->ph_name, w->pname, w->nph * sizeof *o->ph_name);
    }
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, dur, dev, stream, kind, name, corr, bps FROM scratch.ev WHERE cls = 2 ORDER BY dev, ts");
    if (!q) return ERR_DB;
    pass p;
    memset(&p, 0, sizeof p);
    int rc = (p.tiny.gkeys = intern_new()) && (p.tiny.wkeys = intern_new()) && (p.tiny.okeys = intern_new()) ? 0 : ERR_NOMEM, src = SQLITE_DONE;
    while (!rc && (src = sqlite3_step(q)) == SQLITE_ROW) rc = take(a, &p, o, q);
    if (!rc && src != SQLITE_DONE) rc = an_dberr(a);
    sqlite3_finalize(q);
    for (size_t i = 0; !rc && i < p.nch; i++) rc = chain_flush(a, &p.ufm, &p.ufr, &p.ch[i], o, &p.nchains, &p.nkern);
    if (!rc) rc = by_id_members(a, &p.ufm, &o->unfused.members);
    if (!rc) rc = by_id_members(a, &p.ufr, &o->unfused.ranges);
    if (p.any) p.copy_len += p.ce - p.cs;
    o->copies.at = p.copy_len;
    if (!rc) rc = tiny_finish(a, &p.tiny, o);
    if (!rc && o->copies.members.n)
        o->copies.ev = json_pack("{s:f,s:o}", "copy_gpu_us", p.copy_len, "layout_kernels_us", top_json(&p.layout, 5));
    if (!rc && o->unfused.members.n)
        o->unfused.ev = json_pack("{s:I,s:I,s:f}", "chains", (json_int_t)p.nchains, "kernels", (json_int_t)p.nkern, "waste_us", o->unfused.at);
    for (size_t i = 0; i < p.nch; i++) free(p.ch[i].k);
    free(p.ch);
    intern_free(p.tiny.gkeys), intern_free(p.tiny.wkeys), intern_free(p.tiny.okeys);
    free(p.tiny.g), free(p.tiny.w), free(p.tiny.op), free(p.tiny.gmap);
    intern_free(p.layout.keys);
    free(p.layout.us);
    free(p.ufm.us), free(p.ufr.us);
    return rc;
}

static void wm_free(wmembers *m) {
    intern_free(m->keys);
    free(m->us);
}

void an_waste_out_free(waste_out *o) {
    wfinding *f[] = {&o->copies, &o->unfused, &o->tiny};
    for (int i = 0; i < 3; i++) {
        wm_free(&f[i]->members);
        wm_free(&f[i]->ranges);
        json_decref(f[i]->ev);
    }
    free(o->ph_name), free(o->ph_us), free(o->ph_kind);
    memset(o, 0, sizeof *o);
}

void an_waste_free(A *a) {
    waste_state *w = a->waste;
    if (!w) return;
    free(w->l);
    free(w->okind), free(w->kkind), free(w->keltw);
    intern_free(w->pkeys), intern_free(w->dkeys), intern_free(w->nkeys);
    free(w->pname), free(w->node), free(w->cur), free(w->last);
    free(w);
    a->waste = NULL;
}
