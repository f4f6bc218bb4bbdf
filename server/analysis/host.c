/* host.c: the host walk: each thread's events nested as key_averages() nests them, the
 * operator table's walk rows (wscratch.op_rows; its GPU rows: gpurows.c) and the phases
 * (wscratch.ph). Definitions: analyze.c. Reads scratch.ev and scratch.hblk. */

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/analyze.h"
#include "analysis/report.h"
#include "analysis/suspects_recompute.h"
#include "analysis/waste.h"
#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/mono.h"
#include "lib/tlblob.h"
#include "lib/utf8.h"
#include "lib/vec.h"

/* ---- operator aggregation ---- */

static agg *agg_for(A *a, int grouping, long kind, long name, long shapes) {
    /* The key's bytes, not text: printing it was most of pop_frame (1,500 instructions a call). */
    long key[4] = {grouping, kind, name, grouping ? shapes : -2};
    /* Why a cache before the table: every call pops through here twice, and the table hashes
     * and compares 32 bytes (~300 instructions, 23M of the walk's 121M on the flat shape at
     * 30 MB), while a trace's calls name few (kind, name, shapes) in a row. */
    unsigned long h = ((unsigned long)kind * 31 + (unsigned long)name * 1000003u + (unsigned long)key[3] * 7 + (unsigned long)grouping) & (AGG_CACHE - 1);
    if (a->aggc[h].i >= 0 && !memcmp(a->aggc[h].key, key, sizeof key)) return &a->aggs[a->aggc[h].i];
    int fresh;
    long i = INTERN_SLOT(a->keys, key, sizeof key, a->aggs, a->naggs, a->capaggs, 256, &fresh);
    if (i < 0) return NULL;
    if (fresh) {
        agg *g = &a->aggs[i];
        g->grouping = grouping;
        g->kind = kind;
        g->name = name;
        g->shapes = grouping ? shapes : -1;
    }
    memcpy(a->aggc[h].key, key, sizeof key);
    a->aggc[h].i = i;
    return &a->aggs[i];
}

static phase *phase_for(A *a, long name, int gpu) {
    char key[48];
    int n = snprintf(key, sizeof key, "%d|%ld", gpu, name);
    int fresh;
    long i = INTERN_SLOT(a->pkeys, key, (size_t)n, a->phases, a->nphases, a->capphases, 32, &fresh);
    if (i < 0) return NULL;
    if (fresh) {
        phase *p = &a->phases[i];
        p->name = name;
        p->gpu = gpu;
        p->first_ts = INFINITY;
    }
    return &a->phases[i];
}


/* Adds one call to its two operator rows (grouping 0: by name; 1: by name and shapes). */
static int add_call(A *a, const opcall *c) {
    for (int g = 0; g < 2; g++) {
        agg *r = agg_for(a, g, c->kind, c->name, c->shapes);
        if (!r) return ERR_NOMEM;
        r->calls++;
        r->cpu_total += c->dur;
        r->self_cpu += c->dur - c->child;
        r->cuda_total += c->cuda_total;
        r->self_cuda += c->self_cuda;
        r->cpu_mem += c->cpu_mem;
        r->self_cpu_mem += c->self_cpu_mem;
        r->cuda_mem += c->cuda_mem;
        r->self_cuda_mem += c->self_cuda_mem;
    }
    return 0;
}

static opcall call_of(A *a, const frame *f) {
    return (opcall){an_fold(a, f->name), f->kind, f->shapes, f->dur, f->child, f->cuda_total, f->self_cuda,
                    f->cpu_mem, f->self_cpu_mem, f->cuda_mem, f->self_cuda_mem};
}

/* Restores the max-heap by start of h[0..n) below i (the latest start on top). */
static void step_heap_down(step *h, size_t n, size_t i) {
    for (;;) {
        size_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < n && h[l].ts > h[m].ts) m = l;
        if (r < n && h[r].ts > h[m].ts) m = r;
        if (m == i) return;
        step t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* The ProfilerStep#N ranges, for the step statistics (suspects.c) and the breakdown
 * (steps.c): at most t->max_steps (--max-steps), the earliest by start. Why a cap: every
 * later surface holds each step (the breakdown ~2 KB a step as JSON), and one name for all
 * makes 1M steps a 2.7 MB upload that --max-distinct never counts (issue 50: 2 GB peak, a
 * 200 MB stored breakdown). Past the cap the kept ones become a max-heap by start (the walk
 * goes thread by thread, so a later range may start earlier): a range starting before the
 * latest kept one takes its place; whichever is left out is counted in steps_over, its host
 * time in steps_over_us. Every reader sorts the steps by start, so the heap's order is moot;
 * under the cap the order stays the walk's. */
static int note_step(A *a, const frame *f) {
    if (f->cls != EV_HOST_OP || f->kind != a->ua_kind || an_fold(a, f->name) != a->step_name) return 0;
    step s = {f->ts, f->te, f->dur, f->name, a->walk_track};
    size_t cap = (size_t)a->t->max_steps;
    if (!cap || a->nsteps < cap) {
        if (VEC_RESERVE(a->steps, a->capsteps, a->nsteps + 1, 64)) return ERR_NOMEM;
        a->steps[a->nsteps++] = s;
        return 0;
    }
    assert(a->nsteps == cap);
    if (!a->steps_over) /* the first one past the cap: the kept ones become the heap */
        for (size_t i = cap / 2; i-- > 0;) step_heap_down(a->steps, cap, i);
    a->steps_over++;
    if (s.ts < a->steps[0].ts) {
        a->steps_over_us += a->steps[0].dur;
        a->steps[0] = s;
        step_heap_down(a->steps, cap, 0);
    } else {
        a->steps_over_us += s.dur;
    }
    return 0;
}

/* Pops the innermost open event and counts it, as key_averages() would.
 *
 * torch merges an op into its parent when the parent has the same name and that op is its
 * only child (EventList._remove_dup_nodes, repeated until stable: a chain collapses into
 * its outermost op). Whether a child is the only one is known when its parent pops, so a
 * same-named first child waits in parent->pending: a second child counts it after all; the
 * parent popping with that one child absorbs it (the child's children become the parent's,
 * its self CUDA and self memory the parent's; the parent's totals held them already).
 * Names compare folded (ProfilerStep#N is ProfilerStep*, as in torch's table). */
static int pop_frame(A *a, frame *stack, int *depth) {
    frame *f = &stack[--*depth];
    frame *parent = *depth > 0 ? &stack[*depth - 1] : NULL;
    int rc = 0;
    opcall c = call_of(a, f);
    if (f->pend && f->nchild == 1) { /* f absorbs its only child, which has its name */
        c.child = f->pending.child;
        c.self_cuda += f->pending.self_cuda;
        c.self_cpu_mem += f->pending.self_cpu_mem;
        c.self_cuda_mem += f->pending.self_cuda_mem;
    } else if (f->pend) {
        rc = add_call(a, &f->pending);
    }
    if (!rc && parent) {
        parent->child += f->dur;
        parent->nchild++;
        if (parent->pend) { /* a second child: the first one is not merged */
            rc = add_call(a, &parent->pending);
            parent->pend = 0;
        }
        if (!rc && parent->nchild == 1 && an_fold(a, parent->name) == c.name) {
            parent->pending = c;
            parent->pend = 1;
        } else if (!rc) {
            rc = add_call(a, &c);
        }
    } else if (!rc) {
        rc = add_call(a, &c);
    }
    if (!rc) rc = note_step(a, f);
    if (!rc && f->e_n && a->eff) rc = an_effic_pop(a, f, stack, *depth);
    if (!rc) rc = an_op_host(a, f);
    /* recomputed_work's rebuilt constants (suspects_recompute.c): which ops ran one after
     * another under one range, with their shapes and GPU time, is known only here */
    if (!rc) rc = an_const_pop(a, f, stack, *depth);
    if (!rc && f->cls == EV_HOST_OP && f->kind == a->ua_kind) {
        phase *p = phase_for(a, c.name, 0);
        if (!p) return ERR_NOMEM;
        p->count++;
        p->total += f->dur;
        p->busy += an_busy_in(a->busy_q, f->ts, f->te);
        p->kernels += f->kernels;
        p->kernel_us += f->kernel_us;
        if (f->ts < p->first_ts) p->first_ts = f->ts;
        rc = an_idle_phase_range(a, (long)(p - a->phases), f->ts, f->te);
    }
    return rc;
}

#define MAX_DEPTH 1024

/* One host event as the walk takes it: its hrec (trace.h) and, for a runtime call, the
 * GPU time and count of its correlation (gcur). */

/* The GPU time and count of correlation ids: GCUR_SQL's rows, which SQLite reads from
 * the ev_corr index in corr order as the cursor steps (no table, no sort; idcur.c has why
 * a cursor), summed per id here. Why the sums in C, not GROUP BY: SQLite's aggregate steps
 * (TOTAL, COUNT, CASE, MAX of fp_flags) cost ~5,000 instructions a group, 106M of the
 * walk's 211M on the many-names shape at 30 MB. The rows come in the index's order within
 * an id, the order TOTAL added them in, and TOTAL's sum is a plain double (SQLite 3.40
 * func.c sumStep; 3.43 moved to Kahan-Babushka-Neumaier), so d and k are the same doubles. */
#define GCUR_SQL "SELECT corr, dur, kind, name, ts FROM scratch.ev WHERE cls = 2 AND corr >= ?1 ORDER BY corr"
typedef struct gcur {
    idcur c;         /* first: gcur_fold casts */
    const A *a;
    long long n;
    double d, k;     /* GPU time; of it, kernels' */
    int sync;        /* the correlation's work holds a pageable device-to-host copy */
    double u, u0, ue; /* the union of its GPU time (its rows come by ts: ev_corr's order), first start, end */
    double kc[3];    /* its kernel time by precision class (effic.c) */
    long long kn;    /* its kernels (effic.c) */
    int causal;      /* its flash kernels' causal flag, -1 none says (effic.c) */
} gcur;

/* One GPU row into its id's sums: kernels' time in k, sync when its name is a pageable
 * device-to-host copy (names.h flags). */
static void gcur_fold(idcur *ic, int first) {
    gcur *c = (gcur *)ic;
    const nflags_t want = NF_PAGEABLE | NF_DTOH;
    if (first) {
        c->d = c->k = 0;
        c->n = 0;
        c->sync = 0;
    }
    double dur = sqlite3_column_double(ic->s, 1), ts = sqlite3_column_double(ic->s, 4), te = ts + dur;
    long long name = sqlite3_column_int64(ic->s, 3);
    if (first) {
        c->u = 0;
        c->u0 = ts;
        c->ue = -INFINITY;
        c->kc[0] = c->kc[1] = c->kc[2] = 0;
        c->kn = 0;
        c->causal = -1;
    }
    if (ts >= c->ue) c->u += dur;
    else if (te > c->ue) c->u += te - c->ue;
    if (te > c->ue) c->ue = te;
    c->d += dur;
    c->n++;
    if (sqlite3_column_int64(ic->s, 2) == c->a->kernel_kind) {
        c->k += dur;
        unsigned k = name >= 0 && (size_t)name < c->a->nkclass ? c->a->kclass[name] : 0;
        c->kc[k ? k - 1 : 2] += dur; /* a name the table lacks: unclassified */
        c->kn++;
        int cz = name >= 0 && (size_t)name < c->a->nkclass && c->a->kcausal ? c->a->kcausal[name] : -1;
        if (cz > c->causal) c->causal = cz; /* a causal kernel wins */
    }
    if (name >= 0 && (size_t)name < c->a->nnflags && (c->a->nflags[name] & want) == want) c->sync = 1;
}

/* Sets r's GPU time from correlation corr. */
static int gcur_get(A *a, gcur *c, long long corr, hrow *r) {
    int rc = idcur_get(a, &c->c, corr);
    r->has_g = !rc && c->c.row && c->c.id == corr;
    r->gd = r->has_g ? c->d : 0;
    r->gn = r->has_g ? c->n : 0;
    r->gk = r->has_g ? c->k : 0;
    r->gsync = r->has_g && c->sync;
    r->gu = r->has_g ? c->u : 0;
    r->gts = r->has_g ? c->u0 : 0;
    r->gte = r->has_g ? c->ue : 0;
    for (int i = 0; i < 3; i++) r->gkc[i] = r->has_g ? c->kc[i] : 0;
    r->gkn = r->has_g ? c->kn : 0;
    r->gcausal = r->has_g ? c->causal : -1;
    return rc;
}


static int hrow_of(A *a, gcur *c, long track, const hrec *h, hrow *r) {
    r->cls = h->cls;
    r->devtype = h->devtype;
    r->kind = h->kind;
    r->name = h->name;
    r->track = track;
    r->shapes = h->shapes;
    r->ts = h->ts;
    r->te = h->te;
    r->dur = h->dur;
    r->bytes = h->bytes;
    r->seq = h->seq;
    r->has_g = 0;
    r->gd = 0;
    r->gk = 0;
    r->gsync = 0;
    r->gu = r->gts = r->gte = 0;
    r->gkc[0] = r->gkc[1] = r->gkc[2] = 0;
    r->gkn = 0;
    r->gcausal = -1;
    r->corr = h->has_corr || h->cls == EV_MEMORY ? h->corr : -1; /* a memory event's device (trace.h) */
    r->total_alloc = h->total_alloc;
    r->total_reserved = h->total_reserved;
    r->gn = 0;
    return h->cls == EV_HOST_RT && h->has_corr ? gcur_get(a, c, h->corr, r) : 0;
}

/* host_walk's order: ts ascending, the longer first on a tie, then file order. */
static int hrow_before(const hrow *x, const hrow *y) { return host_before(x->ts, x->te, y->ts, y->te); }
static int hrow_cmp(const void *x, const void *y) {
    const hrow *p = x, *q = y;
    if (hrow_before(p, q)) return -1;
    if (hrow_before(q, p)) return 1;
    return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* The thread being walked: its open events and its late rows (sorted). */
typedef struct walker {
    frame *stack;
    int depth;
    size_t cap;
    tlacc *tl;
    hrow *late;
    size_t nlate, nextlate, caplate;
    idle_walk iw;        /* GPU idle labels of the thread (idle.c) */
} walker;

/* Whether a host range other than a step is open at t (stack: the open events). */
static int in_range(const A *a, const frame *stack, int depth, double t) {
    for (int i = 0; i < depth; i++)
        if (stack[i].cls == EV_HOST_OP && stack[i].te > t && !(an_flags(a, stack[i].name) & NF_STEP)) return 1;
    return 0;
}

/* What the step breakdown needs of a host range (steps.c): every DataLoader range, every
 * collective range (communication, as the suspects class it: a gloo all_reduce runs on the
 * CPU), and the ranges no other range (steps aside) holds. */
static int step_span(A *a, const hrow *r, const frame *stack, int depth) {
    unsigned f = an_flags(a, r->name);
    if (f & NF_DATALOADER) return an_step_span(a, SPAN_DATA, r->ts, r->te);
    if (f & NF_COMM_RANGE) return an_step_span(a, SPAN_COMM, r->ts, r->te);
    if (f & NF_STEP || in_range(a, stack, depth, r->ts)) return 0;
    return an_step_span(a, SPAN_CPU, r->ts, r->te);
}

/* The next row of the thread, in host_walk's order: the event nests in what is open. */
static int walk_row(A *a, walker *w, const hrow *r) {
    double ts = r->ts, te = r->te;
    frame *stack = w->stack;
    int rc = an_idle_advance(a, &w->iw, ts); /* the thread's idle labels up to this row */
    if (!rc && r->cls == HREC_PY) { /* labels and the step breakdown only: not in key_averages */
        if (a->steps_st->on && !in_range(a, stack, w->depth, ts)) rc = an_step_span(a, SPAN_CPU, ts, te);
        return rc ? rc : an_idle_row(a, &w->iw, r, stack, w->depth);
    }
    /* Invariant: stack[] holds a chain of properly nested open events, outermost first. */
    while (w->depth > 0 && !rc && (ts >= stack[w->depth - 1].te || te > stack[w->depth - 1].te)) rc = pop_frame(a, stack, &w->depth);
    if (!rc) rc = an_idle_row(a, &w->iw, r, stack, w->depth);
    if (!rc && r->cls == EV_HOST_OP && a->steps_st->on) rc = step_span(a, r, stack, w->depth);
    /* the runtime role of the step breakdown (steps.c): every call, as ev's cls 1 rows are */
    if (!rc && r->cls == EV_HOST_RT && a->steps_st->on) rc = an_step_span(a, SPAN_RUNTIME, ts, te);
    if (!rc && r->cls == EV_HOST_RT && r->has_g) rc = an_op_launch(a, r, stack, w->depth);
    if (!rc && r->cls == EV_HOST_RT && r->has_g) rc = an_waste_launch(a, r, stack, w->depth);
    if (!rc && r->cls != EV_MEMORY && (size_t)r->track < a->t->ntracks && !a->t->tracks[r->track].gpu) /* GPU tracks: timeline_buckets */
        rc = an_tl_add(a, w->tl, r->track, ts, te, (uint32_t)r->name, r->dur);
    if (rc) return rc;
    if (r->cls == EV_MEMORY) {
        if ((rc = an_mem_row(a, r))) return rc;
        int cuda = r->devtype == 1, self_done = 0;
        for (int i = w->depth - 1; i >= 0; i--) {
            if (stack[i].cls != EV_HOST_OP) continue;
            if (cuda) stack[i].cuda_mem += r->bytes; else stack[i].cpu_mem += r->bytes;
            if (!self_done) {
                if (cuda) stack[i].self_cuda_mem += r->bytes; else stack[i].self_cpu_mem += r->bytes;
                self_done = 1;
            }
        }
        return 0;
    }
    if (w->depth == MAX_DEPTH && (rc = pop_frame(a, stack, &w->depth))) return rc; /* pathological nesting: keep going */
    if (VEC_RESERVE(w->stack, w->cap, (size_t)w->depth + 1, 64)) return ERR_NOMEM;
    stack = w->stack;
    frame *f = &stack[w->depth++];
    memset(f, 0, sizeof *f);
    f->cls = r->cls;
    f->kind = r->kind;
    f->name = r->name;
    f->shapes = r->shapes;
    f->xargs = r->cls == EV_HOST_OP ? (long)r->bytes : -1; /* trace.h: an op's bytes name its xargs */
    /* trace.h: an op's total_alloc / total_reserved are its Sequence number / flops args */
    f->seq = r->cls == EV_HOST_OP ? r->total_alloc : -1;
    f->flops_arg = r->cls == EV_HOST_OP && r->total_reserved > 0 ? (double)r->total_reserved : -1;
    f->track = r->track;
    f->ts = ts;
    f->te = te;
    f->dur = r->dur;
    if (r->cls == EV_HOST_RT && r->has_g) {
        int self_done = 0;
        for (int i = w->depth - 2; i >= 0; i--) {
            if (stack[i].cls != EV_HOST_OP) continue;
            stack[i].cuda_total += r->gd;
            if (!self_done) {
                stack[i].self_cuda += r->gd;
                self_done = 1;
                if (a->eff) an_effic_launch(&stack[i], r); /* the op's own GPU work (effic.c) */
            }
            if (stack[i].kind == a->ua_kind) { stack[i].kernels += r->gn; stack[i].kernel_us += r->gd; }
        }
        /* A call with no op around it keeps nothing: a runtime call is not GPU time (issue
         * 42, item 7; torch attributes kernels to the op around the call, never to the
         * call). Its kernels stay in their own rows, and the report's "launched outside
         * every operator" share is what no op holds. */
    }
    return 0;
}

/* Row r of w's thread, after the late rows that come before it. */
static int walk_merged(A *a, walker *w, const hrow *r) {
    int rc = 0;
    while (!rc && w->nextlate < w->nlate && (!r || !hrow_before(r, &w->late[w->nextlate])))
        rc = walk_row(a, w, &w->late[w->nextlate++]);
    return rc || !r ? rc : walk_row(a, w, r);
}

/* Walks w's remaining late rows, pops every open event and writes its timeline track. */
static int walk_end(A *a, walker *w) {
    int rc = walk_merged(a, w, NULL);
    if (!rc) rc = an_idle_thread_end(a, &w->iw);
    while (w->depth > 0 && !rc) rc = pop_frame(a, w->stack, &w->depth);
    w->nlate = w->nextlate = 0;
    return rc ? rc : an_tl_flush(a, w->tl);
}

/* A thread with more late rows than this is walked sorted by SQLite instead (walk_sorted):
 * what host_walk holds in memory stays bounded. */
#define WALK_LATE_MAX 65536
static long walk_late_max = WALK_LATE_MAX;
void analyze_set_late_max(long n) { walk_late_max = n >= 0 ? n : WALK_LATE_MAX; }

/* load_late's and walk_sorted's per-record state. */
typedef struct walk_ctx {
    walker *w;
    gcur *c;
    long tr;
    sqlite3_stmt *ins;
} walk_ctx;

static int keep_late(A *a, void *ctx, const hrec *h) {
    walk_ctx *x = ctx;
    walker *w = x->w;
    if (!h->late) return 0;
    if (VEC_RESERVE(w->late, w->caplate, w->nlate + 1, 16)) return ERR_NOMEM;
    return hrow_of(a, x->c, x->tr, h, &w->late[w->nlate++]);
}

/* The late rows of track tr (tb: AN_TRACK_BLOCKS_SQL), sorted, into w. */
static int load_late(A *a, walker *w, gcur *c, sqlite3_stmt *tb, long tr) {
    walk_ctx x = {w, c, tr, NULL};
    int rc = an_track_recs_stmt(a, tb, tr, keep_late, &x);
    if (!rc && w->nlate) qsort(w->late, w->nlate, sizeof *w->late, hrow_cmp);
    return rc;
}

static int insert_sorted(A *a, void *ctx, const hrec *h) {
    sqlite3_stmt *ins = ((walk_ctx *)ctx)->ins;
    sqlite3_bind_double(ins, 1, h->ts);
    sqlite3_bind_double(ins, 2, h->te);
    sqlite3_bind_int64(ins, 3, h->seq);
    sqlite3_bind_blob(ins, 4, h, sizeof *h, SQLITE_TRANSIENT);
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(ins);
    return rc;
}

/* Track tr walked in the order SQLite sorts its rows into (a temp table: it spills to
 * disk, so memory stays bounded however many rows came late). */
static int walk_sorted(A *a, walker *w, gcur *c, sqlite3_stmt *tb, long tr) {
    int rc = an_run(a, "CREATE TEMP TABLE IF NOT EXISTS hsort(ts REAL, te REAL, seq INT, rec BLOB); DELETE FROM temp.hsort;");
    sqlite3_stmt *ins = rc ? NULL : an_prep(a, "INSERT INTO temp.hsort VALUES (?, ?, ?, ?)");
    sqlite3_stmt *sel = rc ? NULL : an_prep(a, "SELECT rec FROM temp.hsort ORDER BY ts, te DESC, seq");
    if (!rc && (!ins || !sel)) rc = ERR_DB;
    walk_ctx x = {w, c, tr, ins};
    if (!rc) rc = an_track_recs_stmt(a, tb, tr, insert_sorted, &x);
    int src = SQLITE_DONE;
    while (!rc && (src = sqlite3_step(sel)) == SQLITE_ROW) {
        hrec h;
        hrow r;
        if (sqlite3_column_bytes(sel, 0) != (int)sizeof h) { rc = ERR_INTERNAL; break; }
        hrec_at(sqlite3_column_blob(sel, 0), 0, &h);
        rc = hrow_of(a, c, tr, &h, &r);
        if (!rc) rc = walk_row(a, w, &r);
    }
    if (!rc && src != SQLITE_DONE) rc = an_dberr(a);
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    return rc ? rc : an_run(a, "DELETE FROM temp.hsort");
}

/* The key_averages() walk over host events, thread by thread. Each thread's rows must come
 * by ts, the longer first on a tie. Why not simply sort them: a trace mostly writes each
 * thread's events in that order already (the current Kineto schema's real traces here
 * have 0 to 7 late rows per thread in up to 129,000; the 2021 schema writes children
 * first: thousands), and the rows are in scratch.hblk in file order. So the rows that came
 * in order are read as stored and the few late ones (load.c marks them) are merged in
 * from a small sorted list; a thread with too many late rows is sorted by SQLite. */
int an_host_walk(A *a) {
    walker w;
    memset(&w, 0, sizeof w);
    w.cap = 64;
    w.stack = malloc((size_t)w.cap * sizeof *w.stack);
    w.tl = &a->tl;
    gcur c;
    memset(&c, 0, sizeof c);
    sqlite3_stmt *blk = an_prep(a, "SELECT track, data FROM scratch.hblk ORDER BY track, rowid");
    sqlite3_stmt *tb = blk ? an_prep(a, AN_TRACK_BLOCKS_SQL) : NULL;
    c.a = a;
    c.c.fold = gcur_fold;
    c.c.s = tb ? an_prep(a, GCUR_SQL) : NULL;
    int rc = !w.stack ? ERR_NOMEM : !c.c.s ? ERR_DB : 0, src = SQLITE_DONE, skip = 0;
    if (!rc) rc = idcur_seek(a, &c.c, INT64_MIN);
    long track = -1;
    while (!rc && (src = sqlite3_step(blk)) == SQLITE_ROW) {
        long tr = (long)sqlite3_column_int64(blk, 0);
        if (tr < 0 || (size_t)tr >= a->t->ntracks) { rc = ERR_INTERNAL; break; }
        if (tr != track) {
            if (track >= 0 && !skip && (rc = walk_end(a, &w))) break;
            track = tr;
            a->walk_track = tr;
            if ((rc = an_idle_thread(a, &w.iw, tr))) break;
            long long late = a->t->tracks[tr].host_late;
            skip = late > walk_late_max;
            if (skip) rc = walk_sorted(a, &w, &c, tb, tr);
            else if (late) rc = load_late(a, &w, &c, tb, tr);
            if (!rc && skip) rc = walk_end(a, &w);
            if (rc) break;
        }
        if (skip) continue;
        const void *blob = sqlite3_column_blob(blk, 1);
        size_t n = (size_t)sqlite3_column_bytes(blk, 1) / sizeof(hrec);
        for (size_t i = 0; !rc && i < n; i++) {
            hrec h;
            hrow r;
            hrec_at(blob, i, &h);
            if (h.late) continue; /* load_late has it */
            rc = hrow_of(a, &c, tr, &h, &r);
            if (!rc) rc = walk_merged(a, &w, &r);
        }
    }
    if (!rc && src != SQLITE_DONE) rc = an_dberr(a);
    if (!rc && track >= 0 && !skip) rc = walk_end(a, &w);
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) {
        long long late = 0;
        for (size_t i = 0; i < a->t->ntracks; i++) late += a->t->tracks[i].host_late;
        log_line("debug", "analysis", "step=host_order ms=0 late=%lld", late);
    }
    free(w.stack);
    free(w.late);
    an_idle_walk_free(&w.iw);
    sqlite3_finalize(blk);
    sqlite3_finalize(tb);
    sqlite3_finalize(c.c.s);
    return rc;
}

/* Host ops on GPU tracks (a trace may put both on one pid/tid) are drawn by
 * timeline_buckets, which reads scratch.ev; the loader kept them only in scratch.hblk, so
 * they are copied there (user_annotation ranges and runtime calls are in ev already). */
static int copy_host_op(A *a, void *ctx, const hrec *h) {
    const walk_ctx *x = ctx;
    if (h->cls != EV_HOST_OP || h->kind == a->ua_kind) return 0;
    sqlite3_stmt *ins = x->ins;
    sqlite3_bind_int(ins, 1, h->cls);
    sqlite3_bind_int64(ins, 2, h->kind);
    sqlite3_bind_int64(ins, 3, h->name);
    sqlite3_bind_int64(ins, 4, x->tr);
    sqlite3_bind_double(ins, 5, h->ts);
    sqlite3_bind_double(ins, 6, h->te);
    sqlite3_bind_double(ins, 7, h->dur);
    if (h->shapes >= 0) sqlite3_bind_int64(ins, 8, h->shapes);
    else sqlite3_bind_null(ins, 8);
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(ins);
    return rc;
}

int an_gpu_track_host_ops(A *a) {
    sqlite3_stmt *tb = NULL, *ins = NULL;
    int rc = 0;
    for (size_t tr = 0; !rc && tr < a->t->ntracks; tr++) {
        if (!a->t->tracks[tr].gpu || !a->t->tracks[tr].host_seen) continue;
        if (!tb) {
            tb = an_prep(a, AN_TRACK_BLOCKS_SQL);
            ins = tb ? an_prep(a, "INSERT INTO scratch.ev(cls, kind, name, track, ts, te, dur, shapes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)") : NULL;
            if (!ins) { rc = ERR_DB; break; }
        }
        walk_ctx x = {NULL, NULL, (long)tr, ins};
        rc = an_track_recs_stmt(a, tb, (long)tr, copy_host_op, &x);
    }
    sqlite3_finalize(tb);
    sqlite3_finalize(ins);
    return rc;
}

/* The operator-table row of GPU sums k in grouping g (0 by name, 1 by name and shapes, 2
 * both: scratch.sql; gpurows.c writes each GPU row once, in grouping 2).
 * Why not an agg in a->aggs: a GPU kind is never a host op's kind, so these rows never
 * merge with the walk's, and 100,000 templated kernel names made 200,000 aggs and their
 * keys (40 MB, a third of the server's peak; issue 24). They follow the walk's rows, in
 * gpu_aggs order (sorted by an_rows_job_finish), grouping 0 then 1, as the aggs did. */
void an_gpu_agg_row(const gpu_agg *k, int g, agg *r) {
    memset(r, 0, sizeof *r);
    r->grouping = g;
    r->kind = k->kind;
    r->name = k->name;
    r->shapes = -1;
    r->calls = k->calls;
    r->cuda_total = k->total;
    if (k->cls == EV_GPU) r->self_cuda = k->total;
}

/* A walk row's place in the main database's index order (an_write_ops). */
typedef struct {
    int grouping;
    double cuda_total;
    size_t walk; /* its index in a->aggs */
} agg_order;

static int agg_order_cmp(const void *x, const void *y) {
    const agg_order *p = x, *q = y;
    if (p->grouping != q->grouping) return p->grouping < q->grouping ? -1 : 1;
    if (p->cuda_total != q->cuda_total) return p->cuda_total > q->cuda_total ? -1 : 1;
    return p->walk < q->walk ? -1 : p->walk > q->walk;
}

/* Binds operator row g to ins (AN_OP_PARAMS), kind its kind's text. */
void an_op_bind(sqlite3_stmt *ins, const char *kind, const agg *g, long long walk) {
    sqlite3_bind_int(ins, 1, g->grouping);
    sqlite3_bind_int64(ins, 2, g->name);
    sqlite3_bind_text(ins, 3, kind, -1, SQLITE_STATIC);
    if (g->shapes >= 0) sqlite3_bind_int64(ins, 4, g->shapes);
    else sqlite3_bind_null(ins, 4);
    sqlite3_bind_int64(ins, 5, g->calls);
    sqlite3_bind_double(ins, 6, g->cpu_total);
    sqlite3_bind_double(ins, 7, g->self_cpu);
    sqlite3_bind_double(ins, 8, g->cuda_total);
    sqlite3_bind_double(ins, 9, g->self_cuda);
    sqlite3_bind_int64(ins, 10, g->cpu_mem);
    sqlite3_bind_int64(ins, 11, g->self_cpu_mem);
    sqlite3_bind_int64(ins, 12, g->cuda_mem);
    sqlite3_bind_int64(ins, 13, g->self_cuda_mem);
    sqlite3_bind_int64(ins, 14, walk);
}

/* One operator row into wscratch.op_rows; walk is its place in the walk (scratch.sql). */
static int write_op(A *a, sqlite3_stmt *ins, const agg *g, size_t walk) {
    an_op_bind(ins, an_str(a, g->kind), g, (long long)walk);
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(ins);
    return rc;
}

/* The operator table's walk rows into wscratch.op_rows: grouping 0, then grouping 1, each in
 * the main database's index order (operators_session: grouping, cuda_total DESC), equal rows
 * in walk order. Why that order: the commit copies them in rowid order, and an index filled
 * in random order costs a B-tree descent and a page split a row (gpurows.c). The GPU rows
 * are gpurows.c's (kscratch.gpu_ops, grouping 2). */
int an_write_ops(A *a) {
    sqlite3_stmt *ins = an_prep(a, "INSERT INTO wscratch.op_rows VALUES (" AN_OP_PARAMS ")");
    agg_order *host = malloc((a->naggs ? a->naggs : 1) * sizeof *host);
    if (!ins || !host) {
        sqlite3_finalize(ins);
        free(host);
        return ins ? ERR_NOMEM : ERR_DB;
    }
    for (size_t i = 0; i < a->naggs; i++) host[i] = (agg_order){a->aggs[i].grouping, a->aggs[i].cuda_total, i};
    qsort(host, a->naggs, sizeof *host, agg_order_cmp);
    int rc = 0;
    for (size_t h = 0; h < a->naggs && !rc; h++) rc = write_op(a, ins, &a->aggs[host[h].walk], host[h].walk);
    sqlite3_finalize(ins);
    free(host);
    return rc;
}

/* GPU-side phases: gpu_user_annotation instances, from scratch.ann (a scan of every row of
 * ev found them before: 14-34 ms at 100-150 MB). Asking first skips even preparing its
 * statements in a trace that has none. */
int an_gpu_phases(A *a) {
    if (!an_has_gpu_rows(a, EV_GPU_ANN, -1)) return 0;
    sqlite3_stmt *s = an_prep(a, "SELECT name, dev, ts, te, dur FROM scratch.ann WHERE cls = 4");
    sqlite3_stmt *k = an_prep(a, "SELECT COUNT(*), TOTAL(dur) FROM scratch.ev WHERE cls = 2 AND dev = ? AND ts >= ? AND ts < ?");
    if (!s || !k) { sqlite3_finalize(s); sqlite3_finalize(k); return ERR_DB; }
    int rc = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 2), te = sqlite3_column_double(s, 3);
        phase *p = phase_for(a, an_fold(a, (long)sqlite3_column_int64(s, 0)), 1);
        if (!p) { rc = ERR_NOMEM; break; }
        p->count++;
        p->total += sqlite3_column_double(s, 4);
        p->busy += an_busy_in(a->busy_q, ts, te);
        if (ts < p->first_ts) p->first_ts = ts;
        sqlite3_bind_int64(k, 1, sqlite3_column_int64(s, 1));
        sqlite3_bind_double(k, 2, ts);
        sqlite3_bind_double(k, 3, te);
        if (sqlite3_step(k) == SQLITE_ROW) {
            p->kernels += sqlite3_column_int64(k, 0);
            p->kernel_us += sqlite3_column_double(k, 1);
        }
        sqlite3_reset(k);
    }
    sqlite3_finalize(s);
    sqlite3_finalize(k);
    return rc;
}

/* A timeline band's name: at most BAND_NAME_MAX bytes, cut at a UTF-8 character boundary
 * and ended with an ellipsis. Why: the bands repeat their phase's name once per instance (up
 * to 5,000 of them), and 50 instances of one 1 MiB record_function name made a 52 MB
 * timeline document; the whole name stays in /phases. */
#define BAND_NAME_MAX 256
static const char *band_name(const char *s, char *buf, size_t n) { return utf8_clip(s, BAND_NAME_MAX, buf, n); }

/* The step phase (ProfilerStep*) as tb-profiler's steps, once the breakdown knows them: its
 * count, total and GPU busy time are those of the steps GET /steps serves (issue 42: one step
 * definition on every surface), not of the host ranges. Its kernels stay those launched
 * inside the ranges. */
int an_step_phase(A *a, const json_t *breakdown) {
    const json_t *bs = json_object_get(breakdown, "steps"), *r;
    size_t n = json_array_size(bs), i;
    /* Past --max-steps the breakdown holds the earliest steps only: the row stays the walk's,
     * every range counted, so that per-step figures (regressions' basis) divide whole-trace
     * totals by every step. */
    if (!n || a->step_name < 0 || a->steps_over) return 0;
    double total = 0, busy = 0;
    json_array_foreach(bs, i, r) {
        double ts = json_number_value(json_object_get(r, "start_us")), dur = json_number_value(json_object_get(r, "dur_us"));
        total += dur;
        busy += an_busy_in(a->busy_q, ts, ts + dur);
    }
    sqlite3_stmt *u = an_prep(a, "UPDATE wscratch.ph SET count = ?1, total_us = ?2, gpu_busy_us = ?3 WHERE name_id = ?4 AND kind = 'cpu'");
    if (!u) return ERR_DB;
    sqlite3_bind_int64(u, 1, (sqlite3_int64)n);
    sqlite3_bind_double(u, 2, total);
    sqlite3_bind_double(u, 3, busy);
    sqlite3_bind_int64(u, 4, a->step_name);
    int rc = sqlite3_step(u) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_finalize(u);
    return rc;
}

int an_write_phases(A *a, json_t *tl_phases) {
    sqlite3_stmt *ins = an_prep(a, "INSERT INTO wscratch.ph VALUES (?,?,?,?,?,?,?,?)");
    if (!ins) return ERR_DB;
    int rc = 0;
    for (size_t i = 0; i < a->nphases && !rc; i++) {
        phase *p = &a->phases[i];
        sqlite3_bind_int64(ins, 1, p->name); /* an id: scratch.sql */
        sqlite3_bind_text(ins, 2, p->gpu ? "gpu" : "cpu", -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 3, p->count);
        sqlite3_bind_double(ins, 4, p->total);
        sqlite3_bind_double(ins, 5, p->busy);
        sqlite3_bind_int64(ins, 6, p->kernels);
        sqlite3_bind_double(ins, 7, p->kernel_us);
        sqlite3_bind_double(ins, 8, isfinite(p->first_ts) ? p->first_ts : 0);
        if (sqlite3_step(ins) != SQLITE_DONE) rc = an_dberr(a);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    /* Timeline bands: the instances of CPU phases, at most 5,000 (the longest first). */
    sqlite3_stmt *s = an_prep(a, "SELECT name, ts, dur FROM scratch.ann WHERE cls IN (0, 4) AND kind = ?"
                              " ORDER BY dur DESC, ts LIMIT 5000");
    if (!s) return ERR_DB;
    sqlite3_bind_int64(s, 1, a->ua_kind);
    char cut[BAND_NAME_MAX + 4];
    while (!rc && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(tl_phases, json_pack("{s:s,s:f,s:f}", "name", band_name(an_str(a, (long)sqlite3_column_int64(s, 0)), cut, sizeof cut),
                                                   "ts_us", sqlite3_column_double(s, 1), "dur_us", sqlite3_column_double(s, 2)));
    sqlite3_finalize(s);
    return rc;
}

