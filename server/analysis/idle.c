/* idle.c: GPU idle time attributed: every idle interval of every device gets a class and a
 * culprit, the heart of the suspect list (issue 19; definitions: tests/triage/oracle.py).
 *
 * Owns wscratch.igap, gstream and kwruns (the gaps: with one device runs of blocks, runs.c,
 * and rows only for what the walk seeks; with several, a row each), wscratch.pinst (host phase
 * instances), wscratch.ccorr (launches under a copy/cast op) and the label sums (A.idle).
 * Three parts:
 *  - an_idle_gaps, before the host walk: per device, the gaps of the busy union inside its
 *    window [first activity, last end]; the activity N that ends a gap and N's launch R (by
 *    correlation) class it: R not found "other"; R started before the gap "kernel wait" (the
 *    launch was issued, the kernel starts late); else "host wait" (the host had not issued
 *    it yet), to be labelled on R's thread.
 *  - the walk hooks (an_idle_*), called by host.c's walk for the threads that own gaps: each
 *    instant of a host-wait gap is labelled by the innermost host range of the thread at that
 *    instant (cpu_op, user_annotation, python_function, or a runtime/driver call that is
 *    neither a launch, a copy nor a sync: cudaMalloc, cuModuleLoadData; launches and copies
 *    are their op's time), a DataLoader range anywhere on the stack taking it. The sync rule
 *    (issue 41): a gap that starts as a blocking call returns (a sync; or a kernel launch
 *    that returned after its kernels, where the thread's launches mostly do) is the call's
 *    only for what the host could have queued ahead while it was blocked: at most the time
 *    it was blocked before the GPU went idle (g0 - call start), taken from the gap's first
 *    instants; what the host does past that is its own label. Instants of named host work
 *    (a DataLoader range, a runtime call, a compile, tokenizer, garbage-collection or
 *    allocator range) are their own label from the first: the sync explains none of them.
 *    A kernel-wait gap is labelled with the innermost cpu_op around its launch.
 *    Issue 48 (what emptied the queue): a call that waited inside an operator (a pageable
 *    copy, a driver call: any runtime call but a kernel launch that started while the device
 *    was busy, waited >= WAIT_TELL_US and returned as it went idle) is a sync too, named by its
 *    outermost cpu_op; the drain's refill: the lead a sync did not take in its own gap (less
 *    the named host work there) goes on into the thread's host-wait gaps that follow, until
 *    used up or another sync claims (the cheap ops launched into the emptied queue are not
 *    blamed); a record_function / NVTX range's own time with no launch with GPU work under it
 *    is named host work (LB_RANGE_HOST). Every label also counts its part inside a step (a
 *    step's range open; per step counts only that) and, per record_function / NVTX range, the
 *    idle under it (idle_rsum: the range tree, suspects_idle.c).
 *  - the lead-in (trace start to the first GPU activity) is labelled like a host-wait gap on
 *    the thread that launched that activity (no sync rule): its labels (LB_LEAD*) feed the
 *    startup suspect and are not idle (they are outside the GPU window). The tail (the last
 *    GPU activity's end to the trace's end) likewise on the thread that launched the last
 *    activity to end: its labels (LB_TAIL*) feed the tail suspect.
 *  - an_idle_by_phase, after the walk: the gap time of each class inside each host phase.
 * A CPU-only trace (no GPU activity) has no gaps: every instant of every thread is labelled
 * instead (one thread at a time; suspects.c takes each category's largest thread).
 *
 * Memory: the gaps live in wscratch (two cursors per thread), the walk holds the thread's open
 * ranges and its open gaps; the sums are one row per distinct (label, name); while the gaps
 * are found, the last kernel-wait launch of each thread (24 bytes a thread). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/names.h"
#include "lib/err.h"
#include "lib/utf8.h"
#include "lib/vec.h"

#define WAIT_TELL_US 10.0 /* a call inside an operator waited at least this for the device (the oracle's TELL_US) ... */
#define RETURN_US 10.0    /* ... and returned within this of the device going idle */

_Static_assert(GAP_LEAD_IN == 3 && GAP_TAIL == 4, "the queries below name the lead-in's class as 3, the tail's as 4");

/* One row of the sums: a label and its idle (or, CPU-only, labelled) time; instep 1 when
 * the time lies inside a step, 0 outside, -1 unknown; range: the record_function / NVTX
 * range it lies under (-1 none; issue 48's range tree, idle_rsum). */
/* Why outside a step is known only on a thread that opens steps: PyTorch runs the backward
 * pass (and with it DDP's collectives) on autograd's own thread, where no ProfilerStep range
 * is ever open; its instants lie inside the steps in time, and calling them outside made the
 * collectives of a DDP trace "once, before the first step or after the last". So time outside
 * a step on the thread being walked waits (INSTEP_PENDING) until the thread's end says
 * whether it opened a step: then it is outside, else unknown. */
#define INSTEP_PENDING (-2)

static int step_known(const idle_walk *w, int instep) { return instep || w->had_step ? instep : INSTEP_PENDING; }

/* At a thread's end: its time outside a step is known to be outside when it opened one. */
static void settle_outside(idle_state *s, int had_step) {
    for (size_t k = 0; k < s->npend; k++) {
        idle_sum *x = &s->sums[s->pend[k]];
        if (had_step) x->known_us += x->pend_us;
        x->pend_us = 0;
    }
    s->npend = 0;
}

static int add_label_in(A *a, int type, long name, long track, double us, int instep, long range) {
    if (us <= 0) return 0;
    idle_state *s = a->idle;
    long key[3] = {type, name, s->cpu_only ? track : -1};
    int fresh;
    long i = INTERN_SLOT(s->keys, key, sizeof key, s->sums, s->nsums, s->capsums, 64, &fresh);
    if (i < 0) return ERR_NOMEM;
    if (fresh) s->sums[i] = (idle_sum){type, name, key[2], 0, 0, 0, 0};
    s->sums[i].us += us;
    if (instep >= 0) s->sums[i].known_us += us;
    if (instep > 0) s->sums[i].in_us += us;
    if (instep == INSTEP_PENDING) {
        if (s->sums[i].pend_us == 0) {
            if (VEC_RESERVE(s->pend, s->cappend, s->npend + 1, 64)) return ERR_NOMEM;
            s->pend[s->npend++] = (size_t)i;
        }
        s->sums[i].pend_us += us;
    }
    if (range < 0) return 0;
    long rk[3] = {type, name, range};
    i = INTERN_SLOT(s->rkeys, rk, sizeof rk, s->rsums, s->nrsums, s->caprsums, 64, &fresh);
    if (i < 0) return ERR_NOMEM;
    if (fresh) s->rsums[i] = (idle_rsum){type, name, range, 0};
    s->rsums[i].us += us;
    return 0;
}

static int add_label(A *a, int type, long name, long track, double us) { return add_label_in(a, type, name, track, us, -1, -1); }

/* ---- gaps ---- */

#define GAP_INS "INSERT INTO wscratch.igap(dev, track, cls, g0, g1, lts, corr, b0) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
/* The launches (runtime calls) by correlation id: LCUR_SQL's rows, read from ev_corr in id
 * order by a cursor (idcur.c has why: a query per gap was ~75M of an_idle_gaps' 113M
 * instructions on the flat shape at 30 MB); an id's first row is the one a query "corr = ?
 * AND cls = 1 LIMIT 1" returns (the index's order: the earliest). */
#define LCUR_SQL "SELECT corr, ts, track FROM scratch.ev WHERE corr >= ?1 AND cls = 1 ORDER BY corr"
typedef struct lcur {
    idcur c;         /* first: lcur_fold casts */
    long long track;
    double ts;
} lcur;

static void lcur_fold(idcur *ic, int first) {
    lcur *c = (lcur *)ic;
    if (!first) return;
    c->ts = sqlite3_column_double(ic->s, 1);
    c->track = sqlite3_column_int64(ic->s, 2);
}

/* The launch of correlation corr (has_corr 0: none): *found 1 with its start and thread. */
static int find_launch(A *a, lcur *c, int has_corr, long long corr, double *lts, long long *track, int *found) {
    *found = 0;
    *lts = 0;
    *track = -1;
    if (!has_corr) return 0;
    int rc = idcur_get(a, &c->c, corr);
    if (!rc && c->c.row && c->c.id == corr) {
        *found = 1;
        *lts = c->ts;
        *track = c->track;
    }
    return rc;
}

static int insert_gap(A *a, sqlite3_stmt *ins, long long dev, long long track, int cls, double g0, double g1, double lts, long long corr,
                      double b0) {
    sqlite3_bind_double(ins, 8, b0);
    sqlite3_bind_int64(ins, 1, dev);
    sqlite3_bind_int64(ins, 2, track);
    sqlite3_bind_int(ins, 3, cls);
    sqlite3_bind_double(ins, 4, g0);
    sqlite3_bind_double(ins, 5, g1);
    sqlite3_bind_double(ins, 6, lts);
    sqlite3_bind_int64(ins, 7, corr);
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(ins);
    return rc;
}

/* Where the device gaps go: a row each (several devices), or runs (one device, runs.c):
 * every gap to the device's stream (the phase sweep's), each kernel-wait gap to its launching
 * thread's run (the walk's), and a row for each host-wait gap (the walk's igap_hw cursor). A
 * thread's run is read in the order written, so the walk needs it in launch order (lts,
 * corr): true when the thread's kernels run in the order it launched them; kw_order checks
 * it, and when one thread's do not, the runs become rows and igap_kw sorts them. */
typedef struct kw_last { double lts; long long corr; int seen; } kw_last;
typedef struct gap_sink {
    sqlite3_stmt *ins;
    lcur launch;
    run_writer gw, kw;       /* the device's stream; the threads' kernel-wait runs (idle_state.stream) */
    kw_last *last;           /* per thread (a->t->ntracks) */
    int ordered;             /* every thread's kernel-wait gaps so far in launch order */
} gap_sink;

/* Notes a kernel-wait gap's launch on its thread; k->ordered 0 once a run is out of launch order. */
static void kw_order(gap_sink *k, long long track, double lts, long long corr) {
    kw_last *l = &k->last[track];
    if (l->seen && !(lts > l->lts || (lts == l->lts && corr >= l->corr))) k->ordered = 0;
    *l = (kw_last){lts, corr, 1};
}

/* One gap [g0, g1] of device dev ended by the activity of correlation corr (has_corr 0: none). */
static int one_gap(A *a, gap_sink *k, long long dev, double b0, double g0, double g1, int has_corr, long long corr) {
    double lts;
    long long track;
    int found, rc0 = find_launch(a, &k->launch, has_corr, corr, &lts, &track, &found);
    if (rc0) return rc0;
    int cls = !found ? GAP_OTHER : lts < g0 ? GAP_KERNEL_WAIT : GAP_HOST_WAIT;
    a->idle->by_class[cls] += g1 - g0;
    if (cls == GAP_OTHER && add_label(a, LB_NO_LAUNCH, -1, -1, g1 - g0)) return ERR_NOMEM;
    if (!a->idle->stream) return insert_gap(a, k->ins, dev, track, cls, g0, g1, lts, corr, b0);
    gap_rec g = {g0, g1, cls};
    int rc = run_add(&k->gw, 0, &g);
    if (!rc && cls == GAP_HOST_WAIT) rc = insert_gap(a, k->ins, dev, track, cls, g0, g1, lts, corr, b0);
    if (rc || cls != GAP_KERNEL_WAIT) return rc;
    /* a launch's thread is one of the trace's tracks; one that is not is a row, and makes
     * the walk read rows (kw_rows_from_runs adds the runs) */
    if (track < 0 || (size_t)track >= a->t->ntracks) {
        k->ordered = 0;
        return insert_gap(a, k->ins, dev, track, cls, g0, g1, lts, corr, b0);
    }
    kw_order(k, track, lts, corr);
    kw_rec r = {lts, corr, g0, g1};
    return run_add(&k->kw, (size_t)track, &r);
}

/* The GPU activity a lead-in or tail ends at: t its start (lead-in) or end (tail), corr
 * its correlation (has_corr 0: none). */
typedef struct edge { double t; long long corr; int has_corr, seen; } edge;

/* Keeps in e the first activity by (ts, corr IS NULL, corr) (lead 1) or the last by
 * (te DESC, corr IS NOT NULL DESC, corr DESC): the order of the lead-in's and the tail's
 * queries before, which scanned every GPU row again (67M instructions, two thirds of
 * an_idle_gaps' own, on the flat shape at 30 MB). device_gaps sees every row anyway:
 * every GPU row has a device (load.c binds it), so the devices' scans cover them all. */
static void edge_note(edge *e, int lead, double t, int has_corr, sqlite3_stmt *q) {
    if (e->seen && (lead ? t > e->t : t < e->t)) return;
    long long corr = has_corr ? sqlite3_column_int64(q, 2) : 0;
    if (e->seen && t == e->t) {
        if (!has_corr) return;                            /* no correlation never beats one */
        if (e->has_corr && (lead ? corr >= e->corr : corr <= e->corr)) return;
    }
    *e = (edge){t, corr, has_corr, 1};
}

/* The lead-in (cls GAP_LEAD_IN): the trace's start to its first GPU activity (ties: the
 * lowest correlation, as for a gap's end). Why label it: a GPU with no work yet is the host
 * holding the clock (CUDA context creation, lazy init, model load, the first batch) and no
 * gap sees it. The tail (GAP_TAIL): the end of the last GPU activity to the trace's end
 * (ties: one with a correlation, the highest: the latest launched), the host holding the
 * clock after the GPU finished (post-processing, .cpu() copies, logging, or a capture that
 * runs past the work). Each is labelled on the thread of that activity's launch; with no
 * launch found, all of it is "(untraced)". e: edge_note's. */
static int edge_gap(A *a, sqlite3_stmt *ins, lcur *launch, int cls, const edge *e) {
    int lead = cls == GAP_LEAD_IN, found;
    if (!e->seen) return 0;
    double g0 = lead ? a->t->start_us : e->t, g1 = lead ? e->t : a->t->end_us, lts;
    long long track;
    if (g1 <= g0) return 0;
    int rc = find_launch(a, launch, e->has_corr, e->corr, &lts, &track, &found);
    if (rc) return rc;
    return found ? insert_gap(a, ins, -1, track, cls, g0, g1, lts, e->corr, g0) : add_label(a, lead ? LB_LEAD : LB_TAIL, -1, -1, g1 - g0);
}

/* The gaps of one device, and its summary. Rows come by start (ties: lowest correlation,
 * the activity a gap ends in); the union's end so far marks a gap when the next starts after. */
static int device_gaps(A *a, sqlite3_stmt *q, gap_sink *k, long long dev, json_t *devices, edge *lead, edge *tail) {
    sqlite3_bind_int64(q, 1, dev);
    double w0 = NAN, ue = -INFINITY, busy = 0, idle = 0, by0[GAP_NCLASSES], b0 = NAN; /* b0: the busy run's start */
    memcpy(by0, a->idle->by_class, sizeof by0);
    int rc = 0, src;
    while (!rc && (src = sqlite3_step(q)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        int has_corr = sqlite3_column_type(q, 2) != SQLITE_NULL;
        edge_note(lead, 1, ts, has_corr, q);
        edge_note(tail, 0, te, has_corr, q);
        if (isnan(w0)) {
            w0 = b0 = ts;
        } else if (ts > ue) {
            idle += ts - ue;
            rc = one_gap(a, k, dev, b0, ue, ts, has_corr, sqlite3_column_int64(q, 2));
            b0 = ts;
        }
        if (ts > ue) busy += te - ts;
        else if (te > ue) busy += te - ue;
        if (te > ue) ue = te;
    }
    sqlite3_reset(q);
    if (rc || isnan(w0)) return rc;
    idle_state *s = a->idle;
    if (!s->ndevices_seen++ || w0 < s->w0) s->w0 = w0;
    if (s->ndevices_seen == 1 || ue > s->w1) s->w1 = ue;
    char key[32];
    snprintf(key, sizeof key, "%lld", dev);
    json_t *cls = json_object();
    for (int c = 0; c < GAP_NCLASSES; c++)
        json_object_set_new(cls, gap_class_names[c], json_real(a->idle->by_class[c] - by0[c]));
    json_object_set_new(devices, key,
                        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "busy_us", busy, "window_us", ue - w0, "idle_us", idle,
                                  "busy_fraction", ue > w0 ? busy / (ue - w0) : 1.0, "lead_in_us", w0 - a->t->start_us,
                                  "tail_us", a->t->end_us - ue, "idle_by_class_us", cls));
    return 0;
}

const char *const gap_class_names[GAP_NCLASSES] = {"other", "host_wait", "kernel_wait"};

/* The threads' kernel-wait runs as igap rows: the walk reads them by igap_kw when one
 * thread's do not come in launch order (its kernels ran out of that order: several streams). */
static int kw_rows_from_runs(A *a, sqlite3_stmt *ins, long long dev) {
    run_reader r;
    int rc = run_open(a, &r, RUN_KWAIT, sizeof(kw_rec));
    for (size_t t = 0; !rc && t < a->t->ntracks; t++) {
        const kw_rec *g;
        run_seek(&r, (long long)t);
        while (!rc && (g = run_next(&r))) rc = insert_gap(a, ins, dev, (long long)t, GAP_KERNEL_WAIT, g->g0, g->g1, g->lts, g->corr, g->g0);
        if (!rc) rc = r.rc;
    }
    run_close(&r);
    return rc;
}

int an_idle_gaps(A *a) {
    idle_state *s = a->idle;
    s->devices = json_object();
    long long *devs = NULL;
    size_t ndevs = 0;
    gap_sink k;
    memset(&k, 0, sizeof k);
    k.ordered = 1;
    edge lead = {0, 0, 0, 0}, tail = {0, 0, 0, 0};
    int rc = !s->devices ? ERR_NOMEM : an_gpu_devs(a, &devs, &ndevs);
    sqlite3_stmt *q = !rc ? an_prep(a, "SELECT ts, te, corr FROM scratch.ev WHERE cls = 2 AND dev = ?1 ORDER BY ts, corr") : NULL;
    k.ins = q ? an_prep(a, GAP_INS) : NULL;
    k.launch.c.fold = lcur_fold;
    k.launch.c.s = k.ins ? an_prep(a, LCUR_SQL) : NULL;
    if (!rc && !k.launch.c.s) rc = ERR_DB;
    if (!rc) rc = idcur_seek(a, &k.launch.c, INT64_MIN);
    s->stream = ndevs == 1;
    if (!rc && s->stream) {
        if (!(k.last = calloc(a->t->ntracks ? a->t->ntracks : 1, sizeof *k.last))) rc = ERR_NOMEM;
        if (!rc) rc = run_writer_open(a, &k.gw, RUN_GSTREAM, sizeof(gap_rec), 1);
        if (!rc) rc = run_writer_open(a, &k.kw, RUN_KWAIT, sizeof(kw_rec), a->t->ntracks);
    }
    for (size_t i = 0; !rc && i < ndevs; i++) {
        s->ndevices++;
        rc = device_gaps(a, q, &k, devs[i], s->devices, &lead, &tail);
    }
    if (!rc && s->stream) rc = run_flush(&k.gw);
    if (!rc && s->stream) rc = run_flush(&k.kw);
    if (!rc) rc = edge_gap(a, k.ins, &k.launch, GAP_LEAD_IN, &lead);
    if (!rc) rc = edge_gap(a, k.ins, &k.launch, GAP_TAIL, &tail);
    s->kw_rows = !s->stream || !k.ordered;
    if (!rc && s->stream && s->kw_rows) rc = kw_rows_from_runs(a, k.ins, devs[0]);
    sqlite3_finalize(q);
    sqlite3_finalize(k.ins);
    sqlite3_finalize(k.launch.c.s);
    run_writer_free(&k.gw);
    run_writer_free(&k.kw);
    free(k.last);
    free(devs);
    s->cpu_only = !s->ndevices;
    /* The walk's two cursors per thread (an_idle_thread). igap_hw holds the few rows of the
     * host-wait, lead-in and tail gaps (cls 1, 3, 4: every class but 0 and 2), with what the
     * cursor reads. Why "<> 0 AND <> 2", not "IN (1, 3, 4)": SQLite evaluated the IN list
     * per row while building the index (20 ms over 63,000 gaps against 3 ms), and it uses a
     * partial index only for a query that names the index's own terms. Before, igap_hw was
     * (track, cls, g0) over every gap, 18 ms to build, and the query never used it: it read
     * igap_kw's (track, cls) and sorted. igap_kw only when the walk reads kernel-wait rows. */
    if (!rc) rc = an_run(a, "CREATE INDEX wscratch.igap_hw ON igap(track, g0, g1, cls) WHERE cls <> 0 AND cls <> 2;");
    if (!rc && s->kw_rows) rc = an_run(a, "CREATE INDEX wscratch.igap_kw ON igap(track, cls, lts, corr);");
    return rc;
}

/* ---- the walk: labels ---- */

/* The thread's next kernel-wait gap by launch (lts, corr): from igap_kw's rows, or its run
 * (an_idle_gaps checked that it is in that order). */
static int kw_step(idle_walk *w) {
    if (w->kw) {
        w->kw_row = sqlite3_step(w->kw) == SQLITE_ROW;
        if (w->kw_row) {
            w->kw_lts = sqlite3_column_double(w->kw, 0);
            w->kw_corr = sqlite3_column_int64(w->kw, 1);
            w->kw_us = sqlite3_column_double(w->kw, 2);
        }
        return 0;
    }
    const kw_rec *g = run_next(w->kr);
    w->kw_row = g != NULL;
    if (g) {
        w->kw_lts = g->lts;
        w->kw_corr = g->corr;
        w->kw_us = g->g1 - g->g0;
    }
    return w->kr->rc;
}

/* Whether the walk labels this thread: it launched gaps, or the trace has no GPU at all. */
int an_idle_thread(A *a, idle_walk *w, long track) {
    w->track = track;
    w->nframes = 0;
    w->nopen = 0;
    w->cur = -INFINITY;
    w->sync_ok = 0;
    w->sync_launch = 0;
    w->nlaunch = w->nblock = 0;
    w->sync_range = -1;
    w->gpu_launch_ts = -INFINITY;
    w->wait_ok = 0;
    w->carry_on = 0;
    w->had_step = 0;
    w->on = 0;
    w->hw_row = w->kw_row = 0;
    if (a->idle->cpu_only) {
        w->on = 1;
        return 0;
    }
    if (!w->hw) {
        w->hw = an_prep(a, "SELECT g0, g1, cls, b0, dev, lts FROM wscratch.igap WHERE track = ?1 AND cls <> 0 AND cls <> 2 ORDER BY g0");
        if (!w->hw) return ERR_DB;
        if (a->idle->kw_rows) {
            w->kw = an_prep(a, "SELECT lts, corr, g1 - g0 FROM wscratch.igap WHERE track = ?1 AND cls = 2 ORDER BY lts, corr");
            if (!w->kw) return ERR_DB;
        } else {
            int rc = (w->kr = malloc(sizeof *w->kr)) ? run_open(a, w->kr, RUN_KWAIT, sizeof(kw_rec)) : ERR_NOMEM;
            if (rc) return rc;
        }
    }
    sqlite3_reset(w->hw);
    sqlite3_bind_int64(w->hw, 1, track);
    w->hw_row = sqlite3_step(w->hw) == SQLITE_ROW;
    if (w->kw) {
        sqlite3_reset(w->kw);
        sqlite3_bind_int64(w->kw, 1, track);
    } else {
        run_seek(w->kr, track);
    }
    int rc = kw_step(w);
    w->on = w->hw_row || w->kw_row;
    return rc;
}

/* The label of instant t: the innermost open range (frames[] holds ranges that may have
 * ended: they end where te <= t), a DataLoader range anywhere below it taking precedence,
 * then the innermost range of named host work (compile, tokenizer, garbage collector).
 * *instep: a step's range is open; *range: the innermost record_function / NVTX range. */
static void label_at(const A *a, const idle_walk *w, double t, int *type, long *name, double *until, int *instep, long *range,
                     const label_frame **lf) {
    int k = w->nframes;
    while (k > 0 && w->frames[k - 1].te <= t) k--;
    *until = k > 0 ? w->frames[k - 1].te : INFINITY;
    *instep = 0;
    *range = -1;
    *lf = NULL;
    for (int i = 0; i < k; i++) {
        if (w->frames[i].type == LB_STEP) *instep = 1;
        if (w->frames[i].type == LB_UA) *range = w->frames[i].name;
    }
    *instep = step_known(w, *instep);
    for (int i = 0; i < k; i++)
        if (w->frames[i].type == LB_DATALOADER) {
            *type = LB_DATALOADER;
            *name = w->frames[i].name;
            return;
        }
    /* Named host work anywhere on the stack takes the instant, its innermost range: the aten
     * ops a compile runs (FakeTensor propagation) are the compile's time, not cpu_bound_op's. */
    int j = k;
    while (j > 0 && !(an_flags(a, w->frames[j - 1].name) & (NF_COMPILE | NF_TOKENIZE | NF_GC))) j--;
    if (!j) j = k;
    *type = j > 0 ? w->frames[j - 1].type : LB_UNTRACED;
    *name = j > 0 ? w->frames[j - 1].name : -1;
    *lf = j > 0 ? &w->frames[j - 1] : NULL;
}

/* CPU-only: a labelled piece of a thread, summed and kept as a segment of its category
 * (wscratch.cseg, cseg.c), for suspects_cpu.c to give wall time out in priority order across threads. */
static int cpu_piece(A *a, idle_walk *w, double x, double y, int type, long name, int instep) {
    unsigned f = an_flags(a, name);
    int cat = type == LB_DATALOADER ? CSEG_DATA : f & NF_COMM_RANGE ? CSEG_COMM : f & NF_GC ? CSEG_GC : f & NF_TOKENIZE ? CSEG_TOKENIZE
            : f & NF_COMPILE ? CSEG_COMPILE : type == LB_OP ? CSEG_CPU : CSEG_PY;
    int rc = cseg_add(a, w->track, cat, name, x, y);
    return rc ? rc : add_label_in(a, type, name, w->track, y - x, instep, -1);
}

/* Named host work: an instant under it is its own, never a sync's (the sync rule). */
static int named_work(const A *a, int type, long name) {
    return type == LB_DATALOADER || type == LB_RT || type == LB_RANGE_HOST || (an_flags(a, name) & (NF_COMPILE | NF_TOKENIZE | NF_GC | NF_ALLOC));
}

/* Counts [x, y) of every open gap under label (type, name), inside a step or not (instep),
 * under the record_function / NVTX range range (-1 none). A drain's refill gap draws on the
 * walk's carry, its own gap on its sync_left (the sync rule, the refill: the file header). */
static int count_piece(A *a, idle_walk *w, double x, double y, int type0, long name, int instep, long range, const label_frame *lf) {
    int rc = 0;
    if (a->idle->cpu_only) return type0 == LB_UNTRACED ? 0 : cpu_piece(a, w, x, y, type0, name, instep);
    for (int i = 0; i < w->nopen && !rc; i++) {
        open_gap *g = &w->open[i];
        double lo = x > g->g0 ? x : g->g0, hi = y < g->g1 ? y : g->g1;
        if (hi <= lo) continue;
        /* A range's own time with no GPU work under it is named host work (issue 48): no launch
         * with GPU work on the thread since it began, and the launch that ends the gap comes
         * after it ends (any launch inside it would have ended the gap sooner). */
        int type = type0 == LB_UA && !g->edge && lf && w->gpu_launch_ts < lf->ts && g->lts >= lf->te ? LB_RANGE_HOST : type0;
        double *left = g->refill ? &w->carry_left : &g->sync_left;
        if (g->edge == GAP_LEAD_IN) rc = add_label(a, type == LB_DATALOADER ? LB_LEAD_DATA : LB_LEAD, name, -1, hi - lo);
        else if (g->edge == GAP_TAIL) rc = add_label(a, type == LB_DATALOADER ? LB_TAIL_DATA : LB_TAIL, name, -1, hi - lo);
        else if (g->sync_name < 0) rc = add_label_in(a, type, name, -1, hi - lo, instep, range);
        else if (named_work(a, type, name)) {
            /* named host work keeps its label; in a refill it uses up that much of the lead */
            if (g->refill) *left = *left > hi - lo ? *left - (hi - lo) : 0;
            else g->named += hi - lo;
            rc = add_label_in(a, type, name, -1, hi - lo, instep, range);
        } else { /* the sync's first, up to what it left; the rest is the host's own */
            double s = hi - lo < *left ? hi - lo : *left;
            *left -= s;
            rc = add_label_in(a, g->sync_launch ? LB_SYNC_LAUNCH : LB_SYNC, g->sync_name, -1, s, instep, g->sync_range);
            if (!rc) rc = add_label_in(a, type, name, -1, hi - lo - s, instep, range);
        }
    }
    return rc;
}

/* Whether device dev was busy at t (*busy): an activity among the BUSY_LOOKBACK that start
 * last at or before t ends after it. Asked only for a call that returned as a gap began and
 * started before that gap's busy run (a few per trace): the index ev_gpu answers it. */
#define BUSY_LOOKBACK 64
static int busy_at(A *a, idle_walk *w, long long dev, double t, int *busy) {
    if (!w->busyq) {
        w->busyq = an_prep(a, "SELECT MAX(te) FROM (SELECT te FROM scratch.ev WHERE cls = 2 AND dev = ?1 AND ts <= ?2 ORDER BY ts DESC LIMIT "
                              "64)");
        if (!w->busyq) return ERR_DB;
    }
    _Static_assert(BUSY_LOOKBACK == 64, "the query's LIMIT");
    sqlite3_bind_int64(w->busyq, 1, dev);
    sqlite3_bind_double(w->busyq, 2, t);
    int rc = sqlite3_step(w->busyq);
    *busy = rc == SQLITE_ROW && sqlite3_column_type(w->busyq, 0) != SQLITE_NULL && sqlite3_column_double(w->busyq, 0) > t;
    sqlite3_reset(w->busyq);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : an_dberr(a);
}

/* The cpu_ops of stack, outermost first, into ops (at most SYNC_CHAIN). */
static int op_chain(const A *a, const frame *stack, int depth, long *ops) {
    int n = 0;
    for (int i = 0; i < depth && n < SYNC_CHAIN; i++)
        if (stack[i].cls == EV_HOST_OP && stack[i].kind != a->ua_kind) ops[n++] = stack[i].name;
    return n;
}

/* A sync's evidence (issue 48: a drain is named with what made it block): "call under op >
 * op (the copy's name)" once per distinct text, SYNC_EV_MAX per culprit. The copy is the
 * call's first GPU activity (its correlation: one index lookup, once per sync gap). */
static int sync_evidence(A *a, idle_walk *w, long culprit, long call, long long corr, const long *ops, int nops) {
    idle_state *s = a->idle;
    if (!s->sync_ev && !(s->sync_ev = json_object())) return ERR_NOMEM;
    const char *key = an_str(a, culprit);
    json_t *v = json_object_get(s->sync_ev, key);
    if (v && json_array_size(v) >= SYNC_EV_MAX) return 0;
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "%s under ", an_str(a, call));
    for (int i = 0; i < nops && n < sizeof text; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", i ? " > " : "", an_str(a, ops[i]));
    if (!nops && n < sizeof text) n += (size_t)snprintf(text + n, sizeof text - n, "(no op)");
    if (corr >= 0) {
        if (!w->corrq && !(w->corrq = an_prep(a, "SELECT name FROM scratch.ev WHERE corr = ?1 AND cls = 2 LIMIT 1"))) return ERR_DB;
        sqlite3_bind_int64(w->corrq, 1, corr);
        if (sqlite3_step(w->corrq) == SQLITE_ROW && n < sizeof text)
            snprintf(text + n, sizeof text - n, " (%s)", an_str(a, (long)sqlite3_column_int64(w->corrq, 0)));
        sqlite3_reset(w->corrq);
    }
    if (!v && (!(v = json_array()) || json_object_set_new(s->sync_ev, key, v))) return ERR_NOMEM;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (!strcmp(json_string_value(x), text)) return 0;
    return json_array_append_new(v, json_string(text)) ? ERR_NOMEM : 0;
}

/* A host-wait gap (or the lead-in, or the tail) opens at its start: is it a sync's (sync
 * call S on the thread with S.ts < g0 <= S.te + SYNC_SLACK_US, the latest before g0)? Failing
 * that, a call that waited inside an operator (issue 48): the latest other call but a kernel
 * launch, started while the device was busy (at or after b0, the start of the busy run the gap
 * ends), waited >= WAIT_TELL_US for it and returned as it went idle (within SYNC_SLACK_US
 * before g0 to RETURN_US after). Failing both, a drain's refill while its lead lasts. */
static int open_next_gap(A *a, idle_walk *w) {
    if (VEC_RESERVE(w->open, w->capopen, (size_t)w->nopen + 1, 4)) return ERR_NOMEM;
    double g0 = sqlite3_column_double(w->hw, 0), g1 = sqlite3_column_double(w->hw, 1);
    double b0 = sqlite3_column_type(w->hw, 3) == SQLITE_NULL ? g0 : sqlite3_column_double(w->hw, 3);
    int cls = sqlite3_column_int(w->hw, 2), edge = cls == GAP_LEAD_IN || cls == GAP_TAIL ? cls : 0;
    int sync = !edge && w->sync_ok && w->sync_ts < g0 && g0 <= w->sync_te + SYNC_SLACK_US;
    int wait = !edge && !sync && w->wait_ok && g0 - w->wait_ts >= WAIT_TELL_US && w->wait_te >= g0 - SYNC_SLACK_US &&
               w->wait_te <= g0 + RETURN_US;
    if (wait && w->wait_ts < b0) { /* before the busy run the gap ends: was the device busy as the call started? */
        int rc = busy_at(a, w, sqlite3_column_int64(w->hw, 4), w->wait_ts, &wait);
        if (rc) return rc;
    }
    double lts = sqlite3_column_double(w->hw, 5);
    open_gap g = {g0, g1, lts, 0, 0, -1, -1, edge, 0, 0};
    if (sync) g = (open_gap){g0, g1, lts, g0 - w->sync_ts, 0, w->sync_name, w->sync_range, edge, w->sync_launch, 0};
    else if (wait) g = (open_gap){g0, g1, lts, g0 - w->wait_ts, 0, w->wait_name, w->wait_range, edge, 0, 0};
    else if (!edge && w->carry_on && w->carry_left > 0)
        g = (open_gap){g0, g1, lts, 0, 0, w->carry_name, w->carry_range, edge, w->carry_launch, 1};
    if (sync || wait) w->carry_on = 0; /* a claim of its own ends the last drain's refill */
    if (sync && !w->sync_launch) {
        int rc = sync_evidence(a, w, w->sync_name, w->sync_call, w->sync_corr, w->sync_ops, w->sync_nops);
        if (rc) return rc;
    } else if (wait) {
        int rc = sync_evidence(a, w, w->wait_name, w->wait_call, w->wait_corr, w->wait_ops, w->wait_nops);
        if (rc) return rc;
    }
    w->open[w->nopen++] = g;
    w->hw_row = sqlite3_step(w->hw) == SQLITE_ROW;
    return 0;
}

/* A gap closes: a sync's own gap hands the lead it did not take, less the named host work in
 * it, to the refill of the gaps that follow on this thread (issue 48). */
static void close_gap(idle_walk *w, const open_gap *g) {
    if (g->edge || g->refill || g->sync_name < 0) return;
    w->carry_on = 1;
    w->carry_left = g->sync_left > g->named ? g->sync_left - g->named : 0;
    w->carry_name = g->sync_name;
    w->carry_range = g->sync_range;
    w->carry_launch = g->sync_launch;
}

int an_idle_advance(A *a, idle_walk *w, double t) {
    if (!w->on) return 0;
    if (a->idle->cpu_only && !isfinite(w->cur)) w->cur = t;
    int rc = 0;
    while (!rc && w->cur < t) {
        while (!rc && w->hw_row && sqlite3_column_double(w->hw, 0) <= w->cur) rc = open_next_gap(a, w);
        if (rc) break;
        if (!w->nopen && !a->idle->cpu_only && (!w->hw_row || sqlite3_column_double(w->hw, 0) >= t)) break; /* nothing to label before t */
        double next = t, until;
        if (w->hw_row && sqlite3_column_double(w->hw, 0) < next) next = sqlite3_column_double(w->hw, 0);
        for (int i = 0; i < w->nopen; i++)
            if (w->open[i].g1 < next) next = w->open[i].g1;
        int type, instep;
        long name, range;
        const label_frame *lf;
        label_at(a, w, w->cur, &type, &name, &until, &instep, &range, &lf);
        if (until < next) next = until;
        if (!isfinite(next)) break; /* nothing open, nothing ahead: the thread is labelled */
        if (w->nopen || a->idle->cpu_only) rc = count_piece(a, w, w->cur, next, type, name, instep, range, lf);
        w->cur = next;
        int k = 0; /* the gaps that ended */
        for (int i = 0; i < w->nopen; i++)
            if (w->open[i].g1 > w->cur) w->open[k++] = w->open[i];
            else close_gap(w, &w->open[i]);
        w->nopen = k;
        if (!w->nopen && !w->hw_row && !a->idle->cpu_only) break; /* no gap left on this thread */
    }
    if (w->cur < t) w->cur = t;
    return rc;
}

/* The label type of a host range, or of a runtime call that labels (LB_RT). */
static int range_type(const A *a, const hrow *r) {
    unsigned f = an_flags(a, r->name);
    if (r->cls == EV_HOST_RT) return LB_RT;
    if (r->cls == HREC_PY) return LB_PY;
    if (f & NF_DATALOADER) return LB_DATALOADER;
    if (f & NF_STEP) return LB_STEP;
    return r->kind == a->ua_kind ? LB_UA : LB_OP;
}

/* Of a launch's stack: whether a step's range is open (*instep) and the innermost record_
 * function / NVTX range, not a step nor a DataLoader (*range, -1 none). */
static void stack_range(const A *a, const frame *stack, int depth, int *instep, long *range) {
    *instep = 0;
    *range = -1;
    for (int i = 0; i < depth; i++) {
        if (stack[i].cls != EV_HOST_OP || stack[i].kind != a->ua_kind) continue;
        unsigned f = an_flags(a, stack[i].name);
        if (f & NF_STEP) *instep = 1;
        else if (!(f & NF_DATALOADER)) *range = stack[i].name;
    }
}

/* A launch R whose gap waited for the kernel (kernel wait): its culprit is the innermost
 * cpu_op around R, else the innermost range, else R itself. */
static int kernel_waits(A *a, idle_walk *w, const hrow *r, const frame *stack, int depth) {
    int rc = 0;
    while (!rc && w->kw_row && w->kw_lts <= r->ts) {
        double lts = w->kw_lts, us = w->kw_us;
        long long corr = w->kw_corr;
        if (lts == r->ts && corr == r->corr) {
            long name = r->name, range;
            int type = LB_KWAIT_RT, instep;
            for (int i = depth - 1; i >= 0; i--)
                if (stack[i].cls == EV_HOST_OP) {
                    if (type == LB_KWAIT_RT) { name = an_fold(a, stack[i].name); type = LB_KWAIT_RANGE; }
                    if (stack[i].kind != a->ua_kind) { name = stack[i].name; type = LB_KWAIT_OP; break; }
                }
            stack_range(a, stack, depth, &instep, &range);
            rc = add_label_in(a, type, name, -1, us, step_known(w, instep), range);
        } else if (lts == r->ts) {
            break; /* another launch at the same instant: its row may come next */
        } else {
            rc = add_label(a, LB_KWAIT_RT, -1, -1, us); /* its launch was not walked (a late row) */
        }
        if (!rc) rc = kw_step(w);
    }
    return rc;
}

/* A kernel (or graph) launch: a launch call that is not a copy nor a memset. */
static int kernel_launch(A *a, long name) {
    if (!(an_flags(a, name) & NF_LAUNCH)) return 0;
    const char *n = an_str(a, name);
    return !strstr(n, "emcpy") && !strstr(n, "emset") && !strstr(n, "EMCPY") && !strstr(n, "EMSET");
}

/* Whether r, a runtime call, blocks the host: a sync call or a pageable device-to-host copy
 * (1), or a kernel launch that returned after its kernels ended (2) where the thread's
 * launches so far mostly did, of those that tell (an_launch_tells: CUDA_LAUNCH_BLOCKING=1, a
 * blocking stream; a launch that blocks once, on a lazy module load, is no sync). */
static int blocking_call(const A *a, idle_walk *w, const hrow *r) {
    unsigned f = an_flags(a, r->name);
    if (f & NF_SYNC || r->gsync) return 1;
    if (!(f & NF_LAUNCH) || !an_launch_tells(r)) return 0;
    w->nlaunch++;
    if (!an_launch_blocked(r)) return 0;
    w->nblock++;
    return 2 * w->nblock >= w->nlaunch ? 2 : 0;
}

int an_idle_row(A *a, idle_walk *w, const hrow *r, const frame *stack, int depth) {
    if (!w->on) return 0;
    if (r->cls == EV_HOST_RT) {
        if (r->has_g) w->gpu_launch_ts = r->ts;
        int b = blocking_call(a, w, r);
        if (b) { /* the latest blocking call, and the op that made it: a sync's outermost cpu_op, a launch's innermost */
            w->sync_ok = 1;
            w->sync_ts = r->ts;
            w->sync_te = r->te;
            w->sync_name = r->name;
            w->sync_launch = b == 2;
            for (int i = 0; i < depth; i++) {
                int k = b == 2 ? depth - 1 - i : i;
                if (stack[k].cls == EV_HOST_OP && stack[k].kind != a->ua_kind) { w->sync_name = stack[k].name; break; }
            }
            int instep;
            stack_range(a, stack, depth, &instep, &w->sync_range);
            if (b != 2) { /* a sync's evidence, written if a gap opens as it returns */
                w->sync_call = r->name;
                w->sync_corr = r->corr;
                w->sync_nops = op_chain(a, stack, depth, w->sync_ops);
            }
        } else if (r->dur >= WAIT_TELL_US - SYNC_SLACK_US && !kernel_launch(a, r->name)) {
            /* a call that may wait inside an operator (a pageable copy, a driver call): named
             * like a sync by the outermost cpu_op around it (open_next_gap decides) */
            w->wait_ok = 1;
            w->wait_ts = r->ts;
            w->wait_te = r->te;
            w->wait_name = r->name;
            for (int i = 0; i < depth; i++)
                if (stack[i].cls == EV_HOST_OP && stack[i].kind != a->ua_kind) { w->wait_name = stack[i].name; break; }
            int instep;
            stack_range(a, stack, depth, &instep, &w->wait_range);
            w->wait_call = r->name;
            w->wait_corr = r->corr;
            w->wait_nops = op_chain(a, stack, depth, w->wait_ops);
        }
        int rc = w->kw_row ? kernel_waits(a, w, r, stack, depth) : 0;
        /* a call that is neither a launch, a copy nor a sync labels its own time */
        if (rc || r->has_g || an_flags(a, r->name) & (NF_LAUNCH | NF_SYNC)) return rc;
    } else if (r->cls != EV_HOST_OP && r->cls != HREC_PY) {
        return 0;
    }
    /* the labelling stack: host ranges, python_function ranges and the calls above, nested by torch's rule */
    while (w->nframes > 0 && (r->ts >= w->frames[w->nframes - 1].te || r->te > w->frames[w->nframes - 1].te)) w->nframes--;
    if (VEC_RESERVE(w->frames, w->capframes, (size_t)w->nframes + 1, 64)) return ERR_NOMEM;
    int type = range_type(a, r);
    w->frames[w->nframes++] = (label_frame){r->ts, r->te, type == LB_STEP ? a->step_name : r->name, type};
    if (type == LB_STEP) w->had_step = 1;
    return 0;
}

int an_idle_thread_end(A *a, idle_walk *w) {
    if (!w->on) return 0;
    int rc = an_idle_advance(a, w, INFINITY);
    if (!rc && a->idle->cpu_only) rc = cseg_thread_end(a);
    while (!rc && w->kw_row) { /* launches not met in the walk */
        rc = add_label(a, LB_KWAIT_RT, -1, -1, w->kw_us);
        if (!rc) rc = kw_step(w);
    }
    settle_outside(a->idle, w->had_step);
    w->on = 0;
    return rc;
}

void an_idle_walk_free(idle_walk *w) {
    sqlite3_finalize(w->hw);
    sqlite3_finalize(w->kw);
    sqlite3_finalize(w->busyq);
    sqlite3_finalize(w->corrq);
    if (w->kr) run_close(w->kr);
    free(w->kr);
    free(w->frames);
    free(w->open);
    memset(w, 0, sizeof *w);
}

/* ---- idle per phase ---- */

/* One instance of host phase pid (host.c, as the walk closes it). */
int an_idle_phase_range(A *a, long pid, double ts, double te) {
    idle_state *s = a->idle;
    if (s->cpu_only || te <= ts) return 0;
    return an_span_insert(a, &s->pinst_ins, "INSERT INTO wscratch.pinst(pid, ts, te) VALUES (?, ?, ?)", pid, ts, te);
}

/* Class c's gap time before t is C(t) = sum over g0 < t of (t - g0) - sum over g1 < t of
 * (t - g1) = (n0 - n1) t - (S0 - S1). A sweep over the instances' ends in time order, with
 * one cursor over the gaps by g0 and one by g1, adds C(end) - C(start) of each stretch where
 * a phase has an instance open: the union of its instances, so a range nested in a
 * same-named one (or open on two threads at once) counts its idle once. Linear after the
 * sorts. Times are taken from the GPU window's start so that n * t stays exact. */
typedef struct gap_sweep {
    sqlite3_stmt *q;     /* the gaps' (cls, time) rows, or NULL: */
    run_reader *r;       /* the device's stream of gaps, their starts (end 0) or ends (end 1) */
    int end;
    int have;
    int cls;
    double t, base;
    double n[GAP_NCLASSES], sum[GAP_NCLASSES];
} gap_sweep;

/* The sweep's next gap into (cls, t): have 0 at the end. */
static void sweep_step(gap_sweep *g) {
    if (g->r) {
        const gap_rec *x = run_next(g->r);
        g->have = x != NULL;
        if (x) {
            g->cls = (int)x->cls;
            g->t = (g->end ? x->g1 : x->g0) - g->base;
        }
    } else {
        g->have = sqlite3_step(g->q) == SQLITE_ROW;
        if (g->have) {
            g->cls = sqlite3_column_int(g->q, 0);
            g->t = sqlite3_column_double(g->q, 1) - g->base;
        }
    }
    if (g->have && (g->cls < 0 || g->cls >= GAP_NCLASSES)) g->cls = GAP_OTHER;
}

static void sweep_to(gap_sweep *g, double t) {
    while (g->have && g->t < t) {
        g->n[g->cls]++;
        g->sum[g->cls] += g->t;
        sweep_step(g);
    }
}

/* With one device its gaps are the stream (an_idle_gaps), else rows: sql. */
static int sweep_open(A *a, gap_sweep *g, const char *sql, int end, double base) {
    memset(g, 0, sizeof *g);
    g->base = base;
    g->end = end;
    int rc = 0;
    if (a->idle->stream) {
        rc = (g->r = malloc(sizeof *g->r)) ? run_open(a, g->r, RUN_GSTREAM, sizeof(gap_rec)) : ERR_NOMEM;
        if (!rc) run_seek(g->r, 0);
    }
    else if (!(g->q = an_prep(a, sql))) rc = ERR_DB;
    if (!rc) sweep_step(g);
    return rc ? rc : g->r ? g->r->rc : 0;
}

static int sweep_close(gap_sweep *g) {
    int rc = g->r ? g->r->rc : 0;
    sqlite3_finalize(g->q);
    if (g->r) run_close(g->r);
    free(g->r);
    return rc;
}

static int phase_idle_sweep(A *a, double (*idle)[GAP_NCLASSES]) {
    double base = a->idle->w0;
    gap_sweep g0 = {0}, g1 = {0};
    long long *open = calloc(a->nphases, sizeof *open); /* instances open per phase */
    sqlite3_stmt *pts = an_prep(a, "SELECT t, pid, s FROM (SELECT ts AS t, pid, -1 AS s FROM wscratch.pinst"
                                   " UNION ALL SELECT te, pid, 1 FROM wscratch.pinst) ORDER BY t, s");
    /* Several devices' gaps interleave: sorted. One device's are disjoint and in time order,
     * the device stream's order (runs.c), by start and by end alike: no sort (two sorts of 106,000
     * gaps were 60 ms of a many-names trace, issue 24). */
    int rc = !open ? ERR_NOMEM : !pts ? ERR_DB : sweep_open(a, &g0, "SELECT cls, g0 FROM wscratch.igap WHERE cls < 3 ORDER BY g0", 0, base);
    if (!rc) rc = sweep_open(a, &g1, "SELECT cls, g1 FROM wscratch.igap WHERE cls < 3 ORDER BY g1", 1, base);
    while (!rc && sqlite3_step(pts) == SQLITE_ROW) {
        double t = sqlite3_column_double(pts, 0) - base;
        long pid = (long)sqlite3_column_int64(pts, 1);
        int sign = sqlite3_column_int(pts, 2);
        sweep_to(&g0, t);
        sweep_to(&g1, t);
        if (pid < 0 || (size_t)pid >= a->nphases) continue;
        if (sign < 0 ? open[pid]++ > 0 : --open[pid] > 0) continue; /* not an edge of the union */
        for (int c = 0; c < GAP_NCLASSES; c++)
            idle[pid][c] += sign * ((g0.n[c] - g1.n[c]) * t - (g0.sum[c] - g1.sum[c]));
    }
    free(open);
    sqlite3_finalize(pts);
    int c0 = sweep_close(&g0), c1 = sweep_close(&g1);
    return rc ? rc : c0 ? c0 : c1;
}

/* The phases with GPU idle inside them, most idle first (at most PHASE_IDLE_ROWS): name,
 * instances, time inside, idle per class (device time: summed over devices). */
#define PHASE_IDLE_ROWS 20
int an_idle_by_phase(A *a, json_t **out) {
    *out = json_array();
    if (!*out) return ERR_NOMEM;
    if (a->idle->cpu_only || !a->nphases) return 0;
    double (*idle)[GAP_NCLASSES] = calloc(a->nphases, sizeof *idle);
    int rc = idle ? phase_idle_sweep(a, idle) : ERR_NOMEM;
    for (int k = 0; !rc && k < PHASE_IDLE_ROWS; k++) {
        long best = -1;
        double bt = 0;
        for (size_t i = 0; i < a->nphases; i++) {
            double tot = 0;
            for (int c = 0; c < GAP_NCLASSES; c++) tot += idle[i][c];
            if (!a->phases[i].gpu && tot > bt + 1e-9) { best = (long)i; bt = tot; }
        }
        if (best < 0) break;
        json_t *cls = json_object();
        for (int c = 0; c < GAP_NCLASSES; c++) json_object_set_new(cls, gap_class_names[c], json_real(idle[best][c] > 0 ? idle[best][c] : 0));
        const phase *p = &a->phases[best];
        char cut[EVIDENCE_NAME_MAX + 4];
        const char *name = utf8_clip(an_str(a, p->name), EVIDENCE_NAME_MAX, cut, sizeof cut);
        json_array_append_new(*out, json_pack("{s:s,s:I,s:f,s:f,s:o}", "phase", name, "count", p->count, "total_us", p->total, "idle_us",
                                              bt, "by_class_us", cls));
        for (int c = 0; c < GAP_NCLASSES; c++) idle[best][c] = 0;
    }
    free(idle);
    return rc;
}
