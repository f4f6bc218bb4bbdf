/* suspects_host.c: the host side of the suspect list: the per-op statistics the host walk
 * feeds (an_op_host, an_op_launch), which category an idle label is (category_of) and the
 * advice of each category made of idle labels, so that a category's premise and its advice
 * read together (issue 48 item 8; definitions: suspects.c's header, tests/triage/oracle.py).
 *
 * Owns suspect_state (A.sus: the walk's statistics, the launch counts) and the rows of
 * wscratch.ccorr. Must not touch the tally's list (suspects.c), the GPU rows
 * (suspects_gpu.c) nor scratch but ccorr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/an.h"
#include "analysis/names.h"
#include "analysis/suspects.h"
#include "lib/err.h"
#include "lib/flops.h"
#include "lib/utf8.h"

#define SHORT_MIN_CALLS 10          /* short-kernel op: at least this many calls, ... */
#define SHORT_MAX_MEAN_HOST_US 1000 /* ... at most this host time per call, and less kernel time than host time */

/* ---- the walk's statistics ---- */

static opstat *stat_of(A *a, long name) {
    suspect_state *s = a->sus;
    int fresh;
    long i = INTERN_SLOT(s->op_keys, &name, sizeof name, s->ops, s->nops, s->capops, 64, &fresh);
    if (i < 0) return NULL;
    if (fresh) s->ops[i].name = name;
    return &s->ops[i];
}

/* A popped host frame: a cpu_op's call, or a runtime call's (allocator_churn's and
 * host_work's premises read their calls too). */
int an_op_host(A *a, const frame *f) {
    an_sync_walk(a, f->cls == EV_HOST_RT && an_flags(a, f->name) & NF_SYNC, an_flags(a, f->name) & NF_STEP, 0);
    if ((f->cls != EV_HOST_OP && f->cls != EV_HOST_RT) || f->kind == a->ua_kind) return 0;
    if (f->cls == EV_HOST_RT && an_flags(a, f->name) & (NF_LAUNCH | NF_SYNC)) return 0; /* most calls: no label, no statistics */
    opstat *o = stat_of(a, f->name);
    if (!o) return ERR_NOMEM;
    o->calls++;
    o->host_us += f->dur;
    if (f->dur > o->max_us) o->max_us = f->dur;
    /* CPU-only: a matrix op's FLOPs from its shapes (cpu_threads' premise) */
    if (a->idle->cpu_only && f->cls == EV_HOST_OP && f->shapes >= 0 && an_flags(a, f->name) & NF_GEMM_OP) {
        if (o->flops_shapes != f->shapes + 1) {
            flops_out m;
            flops_model(an_str(a, f->name), an_str(a, f->shapes), NULL, NULL, &m);
            o->flops_shapes = f->shapes + 1;
            o->flops_call = m.flops;
        }
        if (o->flops_call > 0) {
            o->flops += o->flops_call;
            o->flops_us += f->dur;
        }
    }
    return 0;
}

/* A launch r (a runtime call with GPU work) under the open ranges stack[0..depth). */
int an_op_launch(A *a, const hrow *r, const frame *stack, int depth) {
    suspect_state *s = a->sus;
    int inner = -1, outer_copy = -1, plain = 1;
    unsigned rf = an_flags(a, r->name);
    if (rf & NF_GRAPH_LAUNCH) s->graph_launches++;
    if (r->gk > 0) an_sync_walk(a, 0, 0, 1);
    /* kernel launches, and those that returned after their kernels (synchronous_launch's premise) */
    if (rf & NF_LAUNCH && !(rf & NF_SYNC) && !r->gsync && an_launch_tells(r)) {
        s->launches++;
        if (an_launch_blocked(r)) s->blocking++;
    }
    for (int i = 0; i < depth; i++) {
        if (stack[i].cls != EV_HOST_OP) continue;
        unsigned f = an_flags(a, stack[i].name);
        if (f & NF_COPY_OP && outer_copy < 0) outer_copy = i;
        if (f & (NF_GEMM_OP | NF_COPY_OP | NF_COMM_RANGE)) plain = 0;
        if (stack[i].kind != a->ua_kind) inner = i;
    }
    if (r->gk > 0) {
        /* kernel time under each distinct op of the stack (short-kernel ops) */
        for (int i = 0; i < depth; i++) {
            if (stack[i].cls != EV_HOST_OP || stack[i].kind == a->ua_kind) continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = stack[j].name == stack[i].name && stack[j].cls == EV_HOST_OP;
            opstat *o = seen ? NULL : stat_of(a, stack[i].name);
            if (!seen && !o) return ERR_NOMEM;
            if (o) o->kern_under += r->gk;
        }
        if (inner >= 0 && plain) {
            opstat *o = stat_of(a, stack[inner].name);
            if (!o) return ERR_NOMEM;
            o->kern_self += r->gk;
        } else if (inner < 0) {
            s->kern_no_op += r->gk;
        }
    }
    if (outer_copy >= 0 && r->corr >= 0) {
        if (!s->ccorr_ins && !(s->ccorr_ins = an_prep(a, "INSERT OR IGNORE INTO wscratch.ccorr VALUES (?, ?)"))) return ERR_DB;
        sqlite3_bind_int64(s->ccorr_ins, 1, r->corr);
        sqlite3_bind_int64(s->ccorr_ins, 2, stack[outer_copy].name);
        int rc = sqlite3_step(s->ccorr_ins) == SQLITE_DONE ? 0 : an_dberr(a);
        sqlite3_reset(s->ccorr_ins);
        return rc;
    }
    return 0;
}

/* Why a lookup, not a scan: category_of asks once per idle label, and a trace of 100k
 * distinct op names has as many labels as names: a scan was 10^10 compares (issue 43: 100k
 * names in a 0.65 MB upload took 17-25 s of CPU). */
const opstat *sus_find_stat(const A *a, long name) {
    suspect_state *s = a->sus;
    long i = intern_lookup(s->op_keys, (const char *)&name, sizeof name);
    return i >= 0 && (size_t)i < s->nops ? &s->ops[i] : NULL;
}

/* A short-kernel op: its kernels are shorter than the op itself (launch overhead, not CPU work). */
int sus_is_short(const A *a, long name) {
    const opstat *o = sus_find_stat(a, name);
    return o && o->calls >= SHORT_MIN_CALLS && o->kern_under > 0 && o->kern_under < o->host_us &&
           o->host_us / (double)o->calls <= SHORT_MAX_MEAN_HOST_US;
}

/* Whether the trace's kernel launches mostly block until their kernels end. */
int sus_launches_block(const A *a) { return a->sus->launches > 0 && 2 * a->sus->blocking >= a->sus->launches; }

/* The category of an idle label, C_N for none. Named host work comes before what kind of
 * range holds it: a tokenizer in a python_function is tokenization, not Python. */
int category_of(const A *a, const idle_sum *s) {
    unsigned f = an_flags(a, s->name);
    switch (s->type) {
    case LB_DATALOADER: case LB_LEAD_DATA: case LB_TAIL_DATA: return C_DATA;
    case LB_LEAD: return C_START;
    case LB_TAIL: return C_TAIL;
    case LB_SYNC: return C_SYNC;
    case LB_SYNC_LAUNCH: return sus_launches_block(a) ? C_SYNC_LAUNCH : C_SYNC;
    case LB_KWAIT_OP: return sus_is_short(a, s->name) ? C_LAUNCH : C_N;
    case LB_NO_LAUNCH: case LB_KWAIT_RANGE: case LB_KWAIT_RT: return C_N;
    default: break;
    }
    if (f & NF_COMM_RANGE) return C_COMM;
    if (f & NF_GC) return C_GC;
    if (f & NF_TOKENIZE) return C_TOKENIZE;
    if (f & NF_COMPILE) return C_COMPILE;
    if (a->idle->cpu_only && s->type != LB_OP) return C_PY; /* cseg's categories (idle.c cpu_piece) */
    if (f & NF_ALLOC) return C_ALLOC;
    if (s->type == LB_RT) return C_HOST_WORK;
    if (s->type == LB_RANGE_HOST) return a->t->source && !strcmp(a->t->source, "nsys") ? C_HOST_WORK : C_PY;
    if (s->type == LB_OP) return sus_is_short(a, s->name) ? C_LAUNCH : C_CPU;
    return C_PY;
}

/* Frees what the walk's statistics hold (A.sus itself is the caller's). */
void an_suspects_free(A *a) {
    suspect_state *s = a->sus;
    if (!s) return;
    sqlite3_finalize(s->ccorr_ins);
    intern_free(s->op_keys);
    free(s->ops);
}

/* The evidence of synchronous_launch (the launch counts), startup and tail (their lengths),
 * which their advice quotes; a trace with a GPU only. 0 or ERR_NOMEM. */
int sus_host_evidence(A *a, tally *t) {
    const idle_state *is = a->idle;
    if (a->sus->launches > 0 &&
        !(t->evidence[C_SYNC_LAUNCH] = json_pack("{s:I,s:I}", "launches", a->sus->launches, "blocking_launches", a->sus->blocking)))
        return ERR_NOMEM;
    if (is->w0 > a->t->start_us && !(t->evidence[C_START] = json_pack("{s:f}", "lead_in_us", is->w0 - a->t->start_us))) return ERR_NOMEM;
    if (is->w1 < a->t->end_us && !(t->evidence[C_TAIL] = json_pack("{s:f}", "tail_us", a->t->end_us - is->w1))) return ERR_NOMEM;
    return 0;
}

/* ---- advice of the idle categories, startup and tail ---- */

/* How to leave one-time start-up out of the next capture, by who made the trace. */
static const char *steady_window(const char *source) {
    if (!strcmp(source, "nsys")) return "capture a steady-state window (nsys profile --capture-range=cudaProfilerApi around the loop, or --delay)";
    if (!strcmp(source, "firstpass"))
        return "record a longer run (the collector records the whole process) with the loop in an NVTX range, and compare that phase";
    return "profile a steady-state window after warm-up steps (torch.profiler.schedule(wait=1, warmup=1, active=3))";
}

/* How to end the next capture with the work, by who made the trace. */
static const char *end_window(const char *source) {
    if (!strcmp(source, "nsys")) return "end the capture with the loop (cudaProfilerStop() with nsys profile --capture-range=cudaProfilerApi, or --duration)";
    if (!strcmp(source, "firstpass"))
        return "put the loop in an NVTX range and compare that phase (the collector records until the process exits)";
    return "end it with the last step's GPU work (call prof.step() right after each step and stop the profiler there)";
}

/* The next experiment of a category made of idle labels (and of startup and tail), naming
 * its culprit; each premise checked before its advice is given (issue 41). */
void sus_host_advice(const advice_in *in, char *out, size_t n) {
    const char *culprit = in->culprit, *graphs = in->graphs;
    int cpu_only = in->cpu_only, rocm = in->rocm;
    /* "(untraced)" names no place: the time is outside every traced range */
    int untraced = !strcmp(culprit, "(untraced)");
    const char *who = untraced ? "Host time outside any traced range (untraced)" : culprit, *runs = untraced ? " passes" : " runs";
    switch (in->cat) {
    case C_DATA:
        /* a CPU-only trace has no GPU to overlap nor pinned copies to make */
        if (cpu_only)
            utf8_snprintf(out, n, "Load data in worker processes: DataLoader(num_workers=4 or more, persistent_workers=True), so that %s "
                     "overlaps the model's own work; re-profile and compare the time per step", culprit);
        else
            utf8_snprintf(out, n, "Load data in worker processes: DataLoader(num_workers=4 or more, pin_memory=True, persistent_workers=True), "
                     "so that %s overlaps the GPU; re-profile and compare GPU idle per step", culprit);
        return;
    case C_SYNC:
        an_sync_advice(in->sync_origin, culprit, rocm, out, n);
        return;
    case C_SYNC_LAUNCH:
        utf8_snprintf(out, n, "Kernel launches block until their kernels finish (%.0f of %.0f launches, %s among them): unset "
                 "CUDA_LAUNCH_BLOCKING (or %s), take any stream synchronize out of the launch path and launch on a non-blocking stream, so "
                 "the host queues work ahead of the GPU; compare GPU idle per step", ev_num(in->ev, "blocking_launches"), ev_num(in->ev, "launches"),
                 culprit, rocm ? "AMD_SERIALIZE_KERNEL, HIP_LAUNCH_BLOCKING" : "a debugging wrapper that synchronizes");
        return;
    case C_PY:
        /* CPU-only traces leave untraced time unlabelled (idle.c: cpu_piece): GPU traces only */
        if (untraced) culprit = "the host time outside any traced range (untraced; re-profile with with_stack=True to name it)";
        if (cpu_only)
            utf8_snprintf(out, n, "Cut the Python around %s: vectorize the per-item work, move it out of the loop, or torch.compile the step; "
                     "re-profile with with_stack=True to see which lines hold the time", culprit);
        else if (in->blocker && *in->blocker)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: vectorize the per-token work and fuse the small ops with "
                     "torch.compile; a %s cannot hold this loop with %s inside it: remove that sync first (static shapes, the "
                     "value kept on the GPU); compare GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph", in->blocker);
        else if (in->compiled && !*graphs)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: the step already runs compiled (torch.compile), so replay it "
                     "as a %s (torch.compile mode=\"reduce-overhead\"), remove the graph breaks that leave Python between the compiled "
                     "regions (TORCH_LOGS=graph_breaks) and move the per-token Python out of the loop; compare GPU idle per step", culprit,
                     rocm ? "HIP graph" : "CUDA graph");
        else if (*graphs)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: the loop already replays %s graphs (%s), so capture more of "
                     "the step in each (the whole step in one graph: torch.compile mode=\"reduce-overhead\" or a larger capture) and move the "
                     "Python between replays out of the loop, so launches queue ahead of the GPU; compare GPU idle per step", culprit,
                     rocm ? "HIP" : "CUDA", graphs);
        else
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: torch.compile the step or capture it in a %s, vectorize the "
                     "per-token work, so launches queue ahead of the GPU; compare GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph");
        return;
    case C_LAUNCH:
        /* the premise of a graph: launches that cost more than their kernels because each one
         * is host overhead, not because each waits for its kernel */
        if (in->blocking_launches) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, but the launches block until their kernels end: unset "
                     "CUDA_LAUNCH_BLOCKING (or take the synchronize out of the launch path) first, then re-profile; capture the loop in a %s "
                     "only if launches still dominate", culprit, rocm ? "HIP graph" : "CUDA graph");
            return;
        }
        if (in->blocker && *in->blocker) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, but a %s cannot hold this loop with %s inside "
                     "it: remove that sync first (static shapes: a fixed capacity instead of the data-dependent size, the value kept on "
                     "the GPU), and fuse the small ops with torch.compile meanwhile; compare launches and GPU idle per step", culprit,
                     rocm ? "HIP graph" : "CUDA graph", in->blocker);
            return;
        }
        if (*graphs) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, though the loop already replays %s graphs (%s): capture "
                     "more of the loop in each graph (fewer, larger graphs) or fuse the small ops with torch.compile; compare launches and GPU "
                     "idle per step", culprit, rocm ? "HIP" : "CUDA", graphs);
            return;
        }
        utf8_snprintf(out, n, "Launches of %s cost more than their kernels: capture the loop in a %s (torch.compile mode=\"reduce-overhead\") "
                 "or fuse the small ops with torch.compile; compare launches and GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph");
        return;
    case C_CPU:
        /* first-call work only where one call holds most of the op's time */
        if (in->op && in->op->calls > 1 && in->op->max_us >= FIRST_CALL_SHARE * in->op->host_us)
            utf8_snprintf(out, n, "%s holds the host, most of it in one call of %lld (%.0f us of %.0f): first-call work (lazy init, "
                     "cudnn.benchmark autotuning, a compile); warm it up and keep it outside the measured window", culprit, in->op->calls,
                     in->op->max_us, in->op->host_us);
        else if (in->op && in->op->calls > 1)
            utf8_snprintf(out, n, "%s holds the host in steady calls (%lld, %.0f us each): make each call cheaper: check its inputs' "
                     "shapes, dtype and device, %s, move it out of the loop, or profile it with_stack=True", culprit, in->op->calls,
                     in->op->host_us / (double)in->op->calls,
                     cpu_only ? "the threads it may use (torch.get_num_threads(), OMP_NUM_THREADS, the CPUs the process may run on)"
                              : "whether it belongs on the GPU");
        else
            utf8_snprintf(out, n, "%s holds the host: check its inputs (shapes, dtype, device), first-call work (lazy init, cudnn.benchmark "
                     "autotuning) and run it outside the measured window, or profile it with_stack=True", culprit);
        return;
    case C_START:
        utf8_snprintf(out, n, "%s%s before the GPU gets any work: if it is one-time start-up (%s context creation, lazy init, model load, "
                 "cudnn.benchmark autotuning), %s; if it recurs per request (tokenization, preprocessing), overlap it with the previous "
                 "step's GPU work", who, runs, rocm ? "HIP" : "CUDA", steady_window(in->source));
        return;
    case C_TAIL:
        utf8_snprintf(out, n, "%s%s after the GPU's last work: if it is post-processing of the results (decoding, .cpu() copies, metrics, "
                 "logging), overlap it with the next step's GPU work or move it out of the loop; if the capture runs past the work, %s",
                 who, runs, end_window(in->source));
        return;
    case C_ALLOC:
        /* churn recurs: one call holding most of the time is a one-time allocation */
        if (in->op && (in->op->calls < 2 || in->op->max_us >= FIRST_CALL_SHARE * in->op->host_us)) {
            utf8_snprintf(out, n, "%s blocks the host in one call (%.0f us of %.0f in %lld): a one-time allocation (a workspace, the "
                     "first batch, the cache growing to its peak), not churn; warm up before the measured window, or reserve the memory "
                     "up front (one large first batch); compare GPU idle per step", culprit, in->op->max_us, in->op->host_us, in->op->calls);
            return;
        }
        utf8_snprintf(out, n, "Stop the allocator churn in %s: the loop returns memory to the driver and asks for it again; take "
                 "torch.cuda.empty_cache() out of the loop, keep shapes steady (pad to a few bucket sizes) so cached blocks are reused, "
                 "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; compare GPU idle per step", culprit);
        return;
    case C_COMPILE:
        utf8_snprintf(out, n, "Stop compiling in the loop: %s recompiles as the inputs change; mark the varying dimensions dynamic "
                 "(torch._dynamo.mark_dynamic or torch.compile(dynamic=True)), pad inputs to a few bucket sizes, warm every shape up "
                 "before the measured window; TORCH_LOGS=recompiles says which guard failed", culprit);
        return;
    case C_TOKENIZE:
        utf8_snprintf(out, n, "Take %s out of the token loop: keep the new token ids on the GPU and detokenize every N tokens, after "
                 "generation or in another thread or process (as vLLM and SGLang do), with a fast (Rust) tokenizer; compare GPU idle "
                 "per step", culprit);
        return;
    case C_GC:
        utf8_snprintf(out, n, "Keep the garbage collector out of the loop: %s pauses the host; call gc.freeze() after warm-up, "
                 "gc.disable() around the loop with gc.collect() between requests or epochs, or raise gc.set_threshold(); "
                 "compare the slowest steps", culprit);
        return;
    case C_HOST_WORK:
        utf8_snprintf(out, n, "%s is host work in the loop while the GPU waits: move it out of the step, do it less often (once, or "
                 "every N steps), or overlap it with the GPU's work; compare GPU idle per step", culprit);
        return;
    default: /* copies_casts: its entries and their advice are suspects_waste.c's, never this list's */
        *out = '\0';
        return;
    }
}
