/* suspects_gpu.c: the suspects found by passes over the GPU rows, each rule with its advice
 * (issue 48 item 8; definitions: suspects.c's header, tests/triage/oracle.py): exposed
 * collective kernels (communication), pageable_memcpy, copy_on_critical_path,
 * compute_bound_op / memory_bound_op and dominant_op, the target of a busy GPU.
 *
 * Owns the tally's evidence and contributions of those categories (communication's GPU
 * part). Reads scratch.ev, wscratch.ccorr (suspects_host.c fills it) and the efficiency
 * verdicts; must not write scratch nor touch the suspect list (suspects.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/an.h"
#include "analysis/names.h"
#include "analysis/suspects.h"
#include "lib/err.h"
#include "lib/utf8.h"
#include "lib/vec.h"

#define COMPUTE_SHARE 0.50          /* compute_bound_op: one op's kernels hold more than this of the GPU time */

/* A union of intervals fed in start order; its length. */
typedef struct ivu { double s, e, len; int any; } ivu;
static void ivu_add(ivu *u, double s, double e) {
    if (u->any && s <= u->e) {
        if (e > u->e) u->e = e;
        return;
    }
    if (u->any) u->len += u->e - u->s;
    u->s = s;
    u->e = e;
    u->any = 1;
}
static double ivu_len(const ivu *u) { return u->len + (u->any ? u->e - u->s : 0); }

/* The union of what q returns (ts, te, culprit id, ordered by ts), credited to category cat:
 * the whole union goes to the culprit with the most summed time. */
static int union_credit(tally *t, sqlite3_stmt *q, int cat, double *len) {
    ivu u = {0, 0, 0, 0};
    intern *k = intern_new();
    double *by = NULL;
    size_t nby = 0, capby = 0;
    int rc = k ? 0 : ERR_NOMEM, src;
    while (!rc && (src = sqlite3_step(q)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        long name = (long)sqlite3_column_int64(q, 2);
        ivu_add(&u, ts, te);
        int fresh;
        long i = INTERN_SLOT(k, &name, sizeof name, by, nby, capby, 16, &fresh);
        if (i < 0) rc = ERR_NOMEM;
        else by[i] += te - ts;
    }
    long best = -1;
    double bv = -1;
    for (size_t i = 0; !rc && i < nby; i++)
        if (by[i] > bv) { bv = by[i]; best = *(const long *)intern_str(k, (long)i); }
    *len = ivu_len(&u);
    if (!rc && best >= 0) rc = sus_credit(t, cat, best, -1, *len);
    intern_free(k);
    free(by);
    sqlite3_finalize(q);
    return rc;
}

/* The union of a target set of GPU rows less the union of the others, both streamed in
 * start order from q (ts, te, is_target, culprit id). *len: the target union's length,
 * *exposed: its part no other row covers, *best: the culprit with the most target time. */
typedef struct exposure { double len, exposed; long best; int any; } exposure;

static int exposed_sweep(sqlite3_stmt *q, exposure *x) {
    /* Sweep: target intervals merged (cs, ce); the other work's union so far reaches cover.
     * Pieces of [s, e) not covered by other work are only known once later other work is
     * seen, so target intervals are closed when the next row starts past them. */
    double cs = 0, ce = -INFINITY, cover = -INFINITY, best_us = -1, tend = -INFINITY;
    intern *k = intern_new();
    double *by = NULL;
    size_t nby = 0, capby = 0;
    int rc = k ? 0 : ERR_NOMEM;
    typedef struct piece { double s, e; } piece;
    piece *open = NULL;
    size_t nopen = 0, capopen = 0;
    *x = (exposure){0, 0, -1, 0};
    while (!rc && sqlite3_step(q) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        if (sqlite3_column_int(q, 2)) {
            long name = (long)sqlite3_column_int64(q, 3);
            int fresh;
            long i = INTERN_SLOT(k, &name, sizeof name, by, nby, capby, 16, &fresh);
            if (i < 0) { rc = ERR_NOMEM; break; }
            by[i] += te - ts;
            if (x->any && ts <= ce) {
                if (te > ce) ce = te;
            } else {
                if (x->any) x->len += ce - cs;
                cs = ts;
                ce = te;
                x->any = 1;
            }
            /* the uncovered part of [ts, te) so far: past cover, and past the targets before it (collectives that overlap
             * each other are measured once: their union against the other work) */
            double s0 = ts > cover ? ts : cover;
            if (tend > s0) s0 = tend;
            if (te > tend) tend = te;
            if (te > s0) {
                if (VEC_RESERVE(open, capopen, nopen + 1, 16)) { rc = ERR_NOMEM; break; }
                open[nopen++] = (piece){s0, te};
            }
        } else {
            size_t j = 0; /* other work [ts, te) covers what of the open pieces lies inside it */
            for (size_t i = 0; i < nopen; i++) {
                piece p = open[i];
                if (p.e <= ts) { x->exposed += p.e - p.s; continue; } /* closed before this work: exposed for good */
                if (p.s < ts) { x->exposed += ts - p.s; p.s = ts; }
                if (p.e <= te) continue;                              /* covered */
                if (p.s < te) p.s = te;
                open[j++] = p;
            }
            nopen = j;
            if (te > cover) cover = te;
        }
    }
    for (size_t i = 0; i < nopen; i++) x->exposed += open[i].e - open[i].s;
    if (x->any) x->len += ce - cs;
    free(open);
    sqlite3_finalize(q);
    if (x->exposed > x->len) x->exposed = x->len; /* pieces overlap one another when targets overlap: cap at the union */
    for (size_t i = 0; !rc && i < nby; i++)
        if (by[i] > best_us) { best_us = by[i]; x->best = *(const long *)intern_str(k, (long)i); }
    intern_free(k);
    free(by);
    return rc;
}

/* Collective kernels not hidden behind other GPU work: union(comm) - union(rest). A trace
 * with no collective kernel's name skips the query: it sorted every GPU activity by start
 * for nothing (130,000 of them in a 150 MB many-names trace: the suspects step 235-241 ->
 * 173-177 ms). */
static int comm_exposed(A *a, tally *t, double gpu_busy) {
    if (!an_any_flagged(a, NF_COMM_KERNEL)) return 0; /* no row could be comm */
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, (fp_flags(name) & ?1) != 0, name FROM scratch.ev WHERE cls = 2 ORDER BY ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_COMM_KERNEL);
    exposure x;
    int rc = exposed_sweep(q, &x);
    if (rc || !x.any) return rc;
    t->evidence[C_COMM] = json_pack("{s:f,s:f,s:f}", "comm_kernel_us", x.len, "exposed_us", x.exposed, "overlap_us", x.len - x.exposed);
    if ((rc = an_comm_facts(a, t->evidence[C_COMM], x.len, gpu_busy - x.exposed))) return rc;
    return sus_credit(t, C_COMM, x.best, -1, an_comm_at_stake(t->evidence[C_COMM], x.exposed));
}

static int repeated_uploads(A *a, json_t **out); /* below, with pageable_memcpy */

/* Host<->device copies from pinned memory that no kernel hides (pageable ones are
 * pageable_memcpy's, device-to-device ones copies_casts'): on the GPU's critical path. The
 * culprit is the op that issued the copy (the outermost copy op: ccorr), else the copy.
 * Evidence: how much of it ran on a stream that also runs kernels (the compute stream),
 * which is the premise of "move it to a side stream". */
static int copy_critical(A *a, tally *t) {
    if (!an_any_flagged(a, NF_HOST_COPY)) return 0;
    const char *sql =
        "SELECT g.ts, g.te, g.kind = ?2, COALESCE(c.op, g.name) FROM scratch.ev g LEFT JOIN wscratch.ccorr c ON c.corr = g.corr"
        " WHERE g.cls = 2 AND (g.kind = ?3 OR (g.kind = ?2 AND (fp_flags(g.name) & ?1) = ?4)) ORDER BY g.ts";
    sqlite3_stmt *q = an_prep(a, sql);
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_HOST_COPY | NF_PAGEABLE);
    sqlite3_bind_int64(q, 2, a->memcpy_kind);
    sqlite3_bind_int64(q, 3, a->kernel_kind);
    sqlite3_bind_int(q, 4, NF_HOST_COPY);
    exposure x;
    int rc = exposed_sweep(q, &x);
    if (rc || !x.any || x.exposed <= 0) return rc;
    /* the copies' time on streams that run kernels too */
    double on_compute = 0;
    sqlite3_stmt *st = an_prep(a, "SELECT TOTAL(g.dur) FROM scratch.ev g WHERE g.cls = 2 AND g.kind = ?2 AND (fp_flags(g.name) & ?1) = ?3"
                                  " AND EXISTS (SELECT 1 FROM scratch.ev k WHERE k.cls = 2 AND k.dev = g.dev AND k.stream = g.stream"
                                  " AND k.kind = ?4 LIMIT 1)");
    if (!st) return ERR_DB;
    sqlite3_bind_int(st, 1, NF_HOST_COPY | NF_PAGEABLE);
    sqlite3_bind_int64(st, 2, a->memcpy_kind);
    sqlite3_bind_int(st, 3, NF_HOST_COPY);
    sqlite3_bind_int64(st, 4, a->kernel_kind);
    if (sqlite3_step(st) == SQLITE_ROW) on_compute = sqlite3_column_double(st, 0);
    else rc = an_dberr(a);
    sqlite3_finalize(st);
    if (rc) return rc;
    t->evidence[C_COPY_CRIT] = json_pack("{s:f,s:f,s:f}", "copy_us", x.len, "exposed_us", x.exposed, "on_compute_stream_us", on_compute);
    json_t *rep = NULL;
    if (t->evidence[C_COPY_CRIT] && !(rc = repeated_uploads(a, &rep)) && rep)
        json_object_set_new(t->evidence[C_COPY_CRIT], "repeated_uploads", rep);
    if (rc) return rc;
    return sus_credit(t, C_COPY_CRIT, x.best, -1, x.exposed);
}

/* ---- uploads repeated every step ---- */

#define REUP_MIN_COPIES 16   /* host-to-device copies a step: a batch is a few tensors, a model's state is many */
#define REUP_STEPS 0.66      /* ... with the same sizes in the same order in this share of the steps (2 or more) */

static int cmp_ts(const void *x, const void *y) {
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

/* Host-to-device copies that repeat every step: the same REUP_MIN_COPIES or more sizes in
 * the same order, step after step. Why that tells constant state from data: a data batch is
 * a few tensors whose sizes may repeat, but a step that uploads dozens of tensors of the same
 * sizes in the same order every time uploads the same things (weights by model.to(device),
 * buffers, tables built on the host inside the loop): work that one upload before the loop
 * does. A copy belongs to the step whose host range starts last before it. *out: the
 * evidence {copies_per_step, bytes_per_step, steps, steps_total}, or NULL. 0 or ERR_*. */
static int repeated_uploads(A *a, json_t **out) {
    *out = NULL;
    if (a->nsteps < 2) return 0;
    double *st = malloc(a->nsteps * sizeof *st);
    long long *cur = NULL, *ref = NULL;
    size_t ncur = 0, capcur = 0, nref = 0, capref = 0, si = 0, hits = 0;
    long long refbytes = 0, curbytes = 0;
    int rc = st ? 0 : ERR_NOMEM, more = 1;
    sqlite3_stmt *q = NULL;
    if (!rc) {
        for (size_t i = 0; i < a->nsteps; i++) st[i] = a->steps[i].ts;
        qsort(st, a->nsteps, sizeof *st, cmp_ts);
        q = an_prep(a, "SELECT ts, IFNULL(bytes, 0), name FROM scratch.ev WHERE cls = 2 AND kind = ?1 AND (fp_flags(name) & ?2) != 0 "
                       "ORDER BY ts");
        if (!q) rc = ERR_DB;
        else sqlite3_bind_int64(q, 1, a->memcpy_kind), sqlite3_bind_int(q, 2, NF_HOST_COPY);
    }
    while (!rc && more) {
        more = sqlite3_step(q) == SQLITE_ROW;
        double ts = more ? sqlite3_column_double(q, 0) : 0;
        if (more && ts < st[0]) continue;
        if (!more || (si + 1 < a->nsteps && ts >= st[si + 1])) { /* a step ends: compare with the last one */
            if (ncur >= REUP_MIN_COPIES && nref == ncur && !memcmp(cur, ref, ncur * sizeof *cur)) hits += hits ? 1 : 2;
            long long *x = ref; /* the buffers swap, each with its capacity */
            size_t c = capref;
            ref = cur, nref = ncur, refbytes = curbytes, capref = capcur;
            cur = x, ncur = 0, curbytes = 0, capcur = c;
            while (more && si + 1 < a->nsteps && ts >= st[si + 1]) si++;
        }
        if (!more) break;
        const char *name = an_str(a, (long)sqlite3_column_int64(q, 2));
        if (!name || !strstr(name, "HtoD")) continue;
        if (ncur == capcur || !cur) {
            size_t nc = capcur ? 2 * capcur : 64;
            long long *g = realloc(cur, nc * sizeof *g);
            if (!g) { rc = ERR_NOMEM; break; }
            cur = g, capcur = nc;
        }
        cur[ncur++] = sqlite3_column_int64(q, 1);
        curbytes += sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    if (!rc && hits >= 2 && (double)hits >= REUP_STEPS * (double)a->nsteps &&
        !(*out = json_pack("{s:I,s:I,s:I,s:I}", "copies_per_step", (json_int_t)nref, "bytes_per_step", (json_int_t)refbytes, "steps",
                           (json_int_t)hits, "steps_total", (json_int_t)a->nsteps)))
        rc = ERR_NOMEM;
    free(st);
    free(cur);
    free(ref);
    return rc;
}

/* Pageable host<->device copies; none to find where no name is a pageable copy's. */
static int pageable(A *a, tally *t) {
    if (!an_any_flagged(a, NF_PAGEABLE)) return 0;
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, name FROM scratch.ev WHERE cls = 2 AND kind = ?1 AND (fp_flags(name) & ?2) != 0 ORDER BY ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int64(q, 1, a->memcpy_kind);
    sqlite3_bind_int(q, 2, NF_PAGEABLE);
    double len = 0;
    int rc = union_credit(t, q, C_PAGE, &len);
    if (!rc && len > 0) t->evidence[C_PAGE] = json_pack("{s:f}", "pageable_copy_us", len);
    json_t *rep = NULL;
    if (!rc && len > 0 && t->evidence[C_PAGE] && !(rc = repeated_uploads(a, &rep)) && rep)
        json_object_set_new(t->evidence[C_PAGE], "repeated_uploads", rep);
    return rc;
}

/* Merges op name's efficiency verdict (an_effic_verdict) into its evidence ev. */
static void add_verdict(const A *a, json_t *ev, const char *name) {
    json_t *v = an_effic_verdict(a->effic, name);
    if (v) json_object_update(ev, v);
    json_decref(v);
}

/* The one non-GEMM, non-copy, non-collective op whose kernels hold most GPU time; kernels
 * launched under no op at all count by their own name (a collector or nsys session). */
static int compute_bound(A *a, tally *t) {
    suspect_state *s = a->sus;
    double total = 0, top = 0;
    long name = -1;
    for (size_t i = 0; i < a->t->ngpu_aggs; i++)
        if (a->t->gpu_aggs[i].cls == EV_GPU) total += a->t->gpu_aggs[i].total;
    for (size_t i = 0; i < s->nops; i++)
        if (s->ops[i].kern_self > top) { top = s->ops[i].kern_self; name = s->ops[i].name; }
    if (s->kern_no_op > top) { /* kernels with no op around their launch: the largest kernel row */
        for (size_t i = 0; i < a->t->ngpu_aggs; i++) {
            const gpu_agg *g = &a->t->gpu_aggs[i];
            if (g->cls != EV_GPU || g->kind != a->kernel_kind || an_flags(a, g->name) & (NF_GEMM_KERNEL | NF_COMM_KERNEL)) continue;
            if (g->total > top) { top = g->total; name = g->name; }
        }
    }
    if (name < 0 || total <= 0) return 0;
    char cut[EVIDENCE_NAME_MAX + 4];
    t->evidence[C_COMPUTE] = json_pack("{s:s,s:f,s:f}", "op", utf8_clip(an_str(a, name), EVIDENCE_NAME_MAX, cut, sizeof cut), "gpu_us",
                                       top, "share_of_gpu_time", top / total);
    if (top / total <= COMPUTE_SHARE || sus_is_short(a, name)) return 0;
    add_verdict(a, t->evidence[C_COMPUTE], an_str(a, name));
    /* a gather, scatter, index or cat owning the GPU moves memory, it computes nothing */
    int cat = an_flags(a, name) & NF_MEM_OP ? C_MEMBOUND : C_COMPUTE;
    if (cat == C_MEMBOUND) t->evidence[C_MEMBOUND] = json_incref(t->evidence[C_COMPUTE]);
    return sus_credit(t, cat, name, -1, top);
}

/* ---- the target of a busy GPU ---- */

/* The op whose kernels hold > COMPUTE_SHARE of the GPU time (the cpu_op row with the most
 * self CUDA, as the report's Top CUDA line), when no category names it already: a copy or
 * cast (copies_casts), a collective (communication), or compute_bound_op / memory_bound_op.
 * "One operator owns the run. Good. You have a target": the next question is its bound. */
/* Whether a kernel's name says it computes in fp64: cuBLAS' dgemm / zgemm, cuBLASLt's and
 * CUTLASS' f64 tiles, a template over double. */
static int fp64_kernel(const char *n) {
    return n && (strstr(n, "dgemm") || strstr(n, "zgemm") || strstr(n, "f64") || strstr(n, "double"));
}

static int dominant(A *a, tally *t) {
    double total = 0, fp64 = 0;
    for (size_t i = 0; i < a->t->ngpu_aggs; i++)
        if (a->t->gpu_aggs[i].cls == EV_GPU) {
            total += a->t->gpu_aggs[i].total;
            if (a->t->gpu_aggs[i].kind == a->kernel_kind && fp64_kernel(an_str(a, a->t->gpu_aggs[i].name))) fp64 += a->t->gpu_aggs[i].total;
        }
    const agg *top = NULL, *second = NULL;
    for (size_t i = 0; i < a->naggs; i++) {
        const agg *g = &a->aggs[i];
        if (g->grouping || g->kind == a->ua_kind || strcmp(an_str(a, g->kind), "cpu_op") || g->self_cuda <= 0) continue;
        if (!top || g->self_cuda > top->self_cuda) second = top, top = g;
        else if (!second || g->self_cuda > second->self_cuda) second = g;
    }
    if (!top || total <= 0 || top->self_cuda / total <= COMPUTE_SHARE) return 0;
    unsigned f = an_flags(a, top->name);
    if (f & (NF_COPY_OP | NF_COMM_RANGE) || sus_is_short(a, top->name)) return 0;
    for (size_t i = 0; i < t->n; i++)
        if ((t->c[i].cat == C_COMPUTE || t->c[i].cat == C_MEMBOUND) && t->c[i].name == top->name) return 0;
    char cut[EVIDENCE_NAME_MAX + 4];
    json_t *ev = json_pack("{s:s,s:f,s:f}", "op", utf8_clip(an_str(a, top->name), EVIDENCE_NAME_MAX, cut, sizeof cut), "gpu_us",
                           top->self_cuda, "share_of_gpu_time", top->self_cuda / total);
    if (!ev) return ERR_NOMEM;
    if (second) json_object_set_new(ev, "next_op", json_string(utf8_clip(an_str(a, second->name), EVIDENCE_NAME_MAX, cut, sizeof cut)));
    add_verdict(a, ev, an_str(a, top->name));
    /* the precision where no Input type says it (the 2021 schema, an export): the kernels' names */
    json_object_set_new(ev, "fp64_kernel_share", json_real(fp64 / total));
    t->evidence[C_DOMINANT] = ev;
    return sus_credit(t, C_DOMINANT, top->name, -1, top->self_cuda);
}

/* Runs the GPU-side rules into t (a trace with a GPU only); dominant_op after
 * compute_bound_op, which it leaves that op to. 0 or an ERR_* code. */
int sus_gpu_rules(A *a, tally *t, double gpu_busy) {
    int rc = comm_exposed(a, t, gpu_busy);
    if (!rc) rc = pageable(a, t);
    if (!rc) rc = copy_critical(a, t);
    if (!rc) rc = compute_bound(a, t);
    if (!rc) rc = dominant(a, t);
    return rc;
}

/* ---- advice ---- */

/* The advice for copies that repeat_uploads found the same every step, into out; 0 when ev
 * has no such evidence. */
static int upload_advice(const json_t *ev, const char *culprit, char *out, size_t n) {
    const json_t *r = json_object_get(ev, "repeated_uploads");
    if (!r) return 0;
    utf8_snprintf(out, n, "Upload once, outside the loop: the same %lld host-to-device copies (%.1f MB) repeat in the same order in "
             "%lld of %lld steps (%s): constant tensors (weights by model.to(device), buffers, tables built on the host) sent "
             "again every step. Move them to the GPU once before the loop and keep them there (build tables on the device, "
             "register_buffer); what must change per step, copy from pinned memory with non_blocking=True",
             (long long)json_integer_value(json_object_get(r, "copies_per_step")),
             (double)json_integer_value(json_object_get(r, "bytes_per_step")) / 1e6,
             (long long)json_integer_value(json_object_get(r, "steps")), (long long)json_integer_value(json_object_get(r, "steps_total")),
             culprit);
    return 1;
}

/* " It is <bound>-bound: <figure>, <share> of the <peak>." of an op's evidence, "" without a bound. */
static void bound_phrase(const json_t *ev, char *out, size_t n) {
    char p[256];
    an_effic_phrase(ev, p, sizeof p);
    if (*p) utf8_snprintf(out, n, " It is %s.", p);
    else *out = '\0';
}

/* The next experiment of a GPU-side suspect, naming its culprit; each premise checked before
 * its advice is given (issue 41). */
void sus_gpu_advice(const advice_in *in, char *out, size_t n) {
    const char *culprit = in->culprit;
    int cpu_only = in->cpu_only, rocm = in->rocm;
    char b[320] = "";
    switch (in->cat) {
    case C_COMM:
        if (!cpu_only) {
            an_comm_advice(in->ev, culprit, strcmp(in->source, "nsys") != 0, rocm, out, n);
            return;
        }
        utf8_snprintf(out, n, "Overlap %s with compute (DDP buckets, async collectives, gradient_as_bucket_view) or send less (larger, fewer "
                 "messages); check the interconnect's bandwidth against the message sizes", culprit);
        return;
    case C_PAGE:
        if (upload_advice(in->ev, culprit, out, n)) return;
        utf8_snprintf(out, n, "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True), "
                 "so %s overlaps compute instead of blocking the host", culprit);
        return;
    case C_COPY_CRIT:
        if (upload_advice(in->ev, culprit, out, n)) return;
        if (ev_num(in->ev, "on_compute_stream_us") >= 0.5 * ev_num(in->ev, "copy_us"))
            utf8_snprintf(out, n, "Take the copies of %s off the compute stream: issue them on a side stream (torch.cuda.Stream) from pinned "
                     "memory with non_blocking=True one step ahead (prefetch), and wait on an event before use, so they overlap the kernels "
                     "instead of running between them; compare GPU time per step", culprit);
        else
            utf8_snprintf(out, n, "Start the copies of %s earlier (prefetch the next batch while this step computes) so that kernels run "
                     "while they do, or copy less (keep the tensors on the GPU); compare GPU time per step", culprit);
        return;
    case C_MEMBOUND:
        bound_phrase(in->ev, b, sizeof b);
        utf8_snprintf(out, n, "%s holds most of the GPU time moving memory, not computing (memory traffic pretending to be model work).%s "
                 "Remove or fuse the traffic: index in place (a paged KV cache instead of gathering it every step), reorder once "
                 "outside the loop, fuse the gather into its consumer (torch.compile); compare GPU time per step", culprit, b);
        return;
    case C_DOMINANT: {
        const char *bound = ev_str(in->ev, "bound");
        double frac = ev_num(in->ev, "peak_fraction"), share = ev_num(in->ev, "share_of_gpu_time") * 100;
        int known = json_is_number(json_object_get(in->ev, "peak_fraction"));
        bound_phrase(in->ev, b, sizeof b);
        if (!strcmp(bound, "memory")) /* the words fit the op: /efficiency's memory_advice (no KV cache for a convolution) */
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s %s", culprit, share, b,
                          ev_str(in->ev, "memory_advice")[0] ? ev_str(in->ev, "memory_advice")
                                                             : "Move fewer bytes per result: fuse it with the ops around it, use a lower "
                                                               "precision, or batch more work per call; compare GPU time per step");
        else if (!strcmp(bound, "compute") && known && frac >= 0.6)
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s Little is left in that kernel: look at the next operator (%s) "
                     "or at the algorithm (fewer FLOPs)", culprit, share, b, ev_str(in->ev, "next_op")[0] ? ev_str(in->ev, "next_op") : "none");
        else if (!strcmp(bound, "compute"))
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s It is below the roof: use a lower precision on tensor cores (bf16, "
                     "fp8), tile-aligned shapes (multiples of 64 or 128) and a fused library kernel; check with %s", culprit, share, b,
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        else if (!strcmp(bound, "latency")) /* short kernels under one block per SM (/efficiency): a graph cannot fill the GPU */
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s Its kernels are short and fill under one block per SM: give "
                     "each more work (batch more, larger tiles) or fuse it with its neighbours", culprit, share, b);
        else if (!strcmp(ev_str(in->ev, "dtype"), "fp64") || ev_num(in->ev, "fp64_kernel_share") >= 0.5)
            /* no fp64 peak in the table: the precision is the question */
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time) and computes in float64 (fp64): only the HPC parts (V100, A100, "
                     "H100, MI200/MI300) run fp64 at half their fp32 rate or better, the others at 1/32 to 1/64 of it. If the model "
                     "does not need double precision, run it in float32 (model.float(), float32 inputs; "
                     "torch.backends.cuda.matmul.allow_tf32 = True for the GEMMs) and compare GPU time per step; if part of it does "
                     "(a solver, a PINN's derivatives), keep fp64 there only", culprit, share);
        else
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time): the next question is whether it is compute-bound or memory-bound, "
                     "which this trace cannot tell (%s); record with record_shapes=True on a known device, or measure its kernels' FLOP/s and "
                     "bandwidth with %s", culprit, share, ev_str(in->ev, "bound_unknown_reason")[0] ? ev_str(in->ev, "bound_unknown_reason")
                                                                                                      : "no shapes or no device peak",
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        return;
    }
    default: /* C_COMPUTE */
        bound_phrase(in->ev, b, sizeof b);
        if (!strcmp(ev_str(in->ev, "bound"), "memory"))
            utf8_snprintf(out, n, "%s holds most of the GPU time.%s Fuse it with the ops around it (torch.compile, a fused library kernel: "
                     "SDPA / FlashAttention for attention) so its data crosses memory once; compare GPU time per step", culprit, b);
        else
            utf8_snprintf(out, n, "%s holds most of the GPU time.%s Profile its kernels with %s for achieved FLOP/s and memory "
                     "throughput, try a fused or library kernel (SDPA / FlashAttention for attention), lower precision", culprit, b,
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        return;
    }
}
