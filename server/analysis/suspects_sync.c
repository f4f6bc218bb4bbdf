/* suspects_sync.c: where a host sync comes from, and what keeps a loop out of a CUDA graph
 * (issue 48 item 4). Each rule's premise, then the advice it supports.
 *
 * A sync's origin:
 *   the result    the step takes its input from the host (its first GPU work is an HtoD
 *                 copy) and ends with a copy back (its last is a DtoH copy) in most steps,
 *                 with no backward pass in the trace: a request and its response, which the
 *                 program must wait for; the experiment is overlapping requests
 *   a runtime call in a program with no operators and no Python frames (a C++ program,
 *                 an Nsight export of one): the advice is about its loop (streams, events),
 *                 not .item()
 *   instrumentation  a synchronize call of its own (the culprit is the runtime call, in a
 *                 program with operators) at least once a step between the step's launches:
 *                 torch.cuda.synchronize() for timing or debugging; the experiment is removing
 *                 it (CUDA events time without blocking). Checked before the result: a
 *                 response's sync ends the step, it has no launches after it
 *   Python        otherwise: an operator the Python loop calls (.item(), .cpu(), printing)
 * A CUDA graph cannot hold a host sync nor an op whose output shape depends on the data: a
 * step with a sync call between its kernel launches (one a step or more; the input copy that
 * starts a step and the .item() that ends it lie outside the captured part) or a loop with
 * nonzero / masked_select / unique inside is not graph material until they go. */
#include <stdio.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/names.h"
#include "lib/utf8.h"

#define RESULT_STEPS 64 /* the steps the result rule reads at most */

/* Whether the trace's names include one that contains any of words (a scan of the string
 * table: once, for a suspect's advice). */
static int any_name(A *a, const char *const *words, size_t nw) {
    for (size_t i = 0; i < a->nnflags; i++) {
        const char *s = an_str(a, (long)i);
        for (size_t w = 0; s && w < nw; w++)
            if (strstr(s, words[w])) return 1;
    }
    return 0;
}

/* The name flags of the first (desc 0) or last (desc 1) GPU activity starting in [ts, te), 0 none. */
static unsigned edge_flags(A *a, sqlite3_stmt *q, double ts, double te) {
    sqlite3_reset(q);
    sqlite3_bind_double(q, 1, ts);
    sqlite3_bind_double(q, 2, te);
    unsigned f = sqlite3_step(q) == SQLITE_ROW ? an_flags(a, (long)sqlite3_column_int64(q, 0)) : 0;
    sqlite3_reset(q);
    return f;
}

/* Most steps take input from the host and end with a copy back to it. */
static int steps_return_result(A *a) {
    if (a->nsteps < 2) return 0;
    static const char *const training[] = {"backward", "Backward", "Optimizer."};
    if (any_name(a, training, sizeof training / sizeof training[0])) return 0; /* a loss.item() ends a training step: not a response */
    sqlite3_stmt *first = an_prep(a, "SELECT name FROM scratch.ev WHERE cls = 2 AND ts >= ?1 AND ts < ?2 ORDER BY ts LIMIT 1");
    sqlite3_stmt *last = an_prep(a, "SELECT name FROM scratch.ev WHERE cls = 2 AND ts >= ?1 AND ts < ?2 ORDER BY ts DESC LIMIT 1");
    size_t n = a->nsteps < RESULT_STEPS ? a->nsteps : RESULT_STEPS, hits = 0;
    for (size_t i = 0; first && last && i < n; i++) {
        const step *s = &a->steps[i];
        unsigned f0 = edge_flags(a, first, s->ts, s->te), f1 = edge_flags(a, last, s->ts, s->te);
        if (f0 & NF_HOST_COPY && !(f0 & NF_DTOH) && f1 & NF_DTOH) hits++;
    }
    if (first) sqlite3_finalize(first);
    if (last) sqlite3_finalize(last);
    return n && 2 * hits > n;
}

int an_sync_origin(A *a, const char *culprit, unsigned flags) {
    (void)culprit;
    static const char *const torch[] = {"aten::", ".py(", "torch", "<built-in"};
    int is_torch = any_name(a, torch, sizeof torch / sizeof torch[0]);
    if (flags & NF_SYNC && is_torch && a->nsteps && (double)a->sus->inner_syncs >= (double)a->nsteps) return SYNC_EXPLICIT;
    if (steps_return_result(a)) return SYNC_RESULT;
    /* the culprit is the runtime call itself (no operator around it) in a program with no
     * operators and no Python frames */
    if (flags & NF_SYNC && !is_torch) return SYNC_RUNTIME;
    return SYNC_PYTHON;
}

void an_sync_advice(int origin, const char *culprit, int rocm, char *out, size_t n) {
    const char *gpu = rocm ? "HIP" : "CUDA";
    switch (origin) {
    case SYNC_RESULT:
        utf8_snprintf(out, n, "%s returns the step's result: each step takes its input from the host and ends copying its output back, "
                      "and the program must wait for that response, so removing the sync is no experiment. Overlap requests instead: "
                      "prepare and copy the next request's input and queue its model work while this one's result is read and sent "
                      "(a second thread or %s stream per request, or batch requests together), and copy the result to pinned memory "
                      "with non_blocking=True and an event; compare GPU idle per step", culprit, gpu);
        return;
    case SYNC_RUNTIME:
        utf8_snprintf(out, n, "%s blocks the host until the GPU drains, every iteration, and the host then works while the GPU idles: "
                      "the sync is a runtime call in the program's own loop. Keep the GPU fed across it: double-buffer the batches on "
                      "two %s streams (copy in and run the next batch while the host finishes this one), wait on an event for just the "
                      "result instead of synchronizing the stream, and move the host work after the sync to another thread; compare "
                      "GPU idle per batch", culprit, gpu);
        return;
    case SYNC_EXPLICIT:
        utf8_snprintf(out, n, "%s is called on its own between the step's kernel launches (torch.cuda.synchronize() or a stream "
                      "synchronize, once a step or more): instrumentation for timing or debugging stalls the queue each time. Remove it "
                      "from the loop; to time parts of the step, record torch.cuda.Event(enable_timing=True) pairs and read them after "
                      "the step (or use the profiler alone); compare GPU idle per step", culprit);
        return;
    default:
        utf8_snprintf(out, n, "Remove the per-step host sync in %s: keep the value on the GPU (no .item(), .cpu() or printing in the loop), "
                      "read it every N steps or with a non_blocking copy to pinned memory, so the host queues the next step while the GPU works",
                      culprit);
        return;
    }
}

void an_graph_blocker(A *a, char *out, size_t n) {
    *out = '\0';
    /* an op whose output's shape depends on the data: the one with the most calls */
    static const char *const dd[] = {"aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique", "aten::unique_consecutive",
                                     "aten::unique_dim", "aten::repeat_interleave", "aten::_unique2"};
    const opstat *best = NULL;
    for (size_t i = 0; i < a->sus->nops; i++) {
        const opstat *o = &a->sus->ops[i];
        const char *s = an_str(a, o->name);
        for (size_t w = 0; s && w < sizeof dd / sizeof dd[0]; w++)
            if (!strcmp(s, dd[w]) && (!best || o->calls > best->calls)) best = o;
    }
    double steps = a->nsteps ? (double)a->nsteps : 0, syncs = (double)a->sus->inner_syncs;
    char per[48] = "";
    if (best) {
        if (steps > 0) snprintf(per, sizeof per, ", %.0f a step", (double)best->calls / steps);
        utf8_snprintf(out, n, "%s (a data-dependent shape: the host copies its size back and waits%s)", an_str(a, best->name), per);
        return;
    }
    /* syncs inside the steps: launches before and after them (the input copy that starts a
     * step and the .item() that ends it lie outside what a graph of the step captures) */
    if (steps > 0 && syncs >= steps)
        snprintf(out, n, "%.0f host sync%s a step between its launches (stream or device synchronizes, blocking copies)", syncs / steps,
                 syncs >= 1.5 * steps ? "s" : "");
}

void an_sync_walk(A *a, int sync, int step, int launch) {
    suspect_state *s = a->sus;
    if (s->sync_track != a->walk_track) {
        s->sync_track = a->walk_track;
        s->launched = 0;
        s->pend_syncs = 0;
    }
    if (step) {
        s->launched = 0;
        s->pend_syncs = 0;
    } else if (sync && s->launched) {
        s->pend_syncs++;
    } else if (launch) {
        s->launched = 1;
        s->inner_syncs += s->pend_syncs;
        s->pend_syncs = 0;
    }
}

int an_once_advice(A *a, long culprit, char *out, size_t n) {
    if (culprit < 0 || a->nsteps < 2) return 0;
    const phase *p = NULL;
    for (size_t i = 0; i < a->nphases && !p; i++)
        if (a->phases[i].name == culprit) p = &a->phases[i];
    if (!p || p->count != 1) return 0;
    double s0 = a->steps[0].ts, s1 = a->steps[0].te, ts = p->first_ts, te = p->first_ts + p->total;
    for (size_t i = 1; i < a->nsteps; i++) {
        if (a->steps[i].ts < s0) s0 = a->steps[i].ts;
        if (a->steps[i].te > s1) s1 = a->steps[i].te;
    }
    const char *where = ts >= s1 ? "after the last step" : te <= s0 ? "before the first step" : NULL;
    if (!where) return 0;
    utf8_snprintf(out, n, "%s runs once, %s, outside the steps: one-time work, not a cost of each step (the capture holds it, the "
                  "loop does not). If it must happen (a checkpoint save, a model load, an evaluation), make that one call cheaper "
                  "(save less often or asynchronously, from another thread or process) or leave it out of the profiled window; "
                  "judge the loop by the steps alone", an_str(a, culprit), where);
    return 1;
}
