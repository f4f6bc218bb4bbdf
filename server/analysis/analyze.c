/* analyze.c: the first profiler pass over one upload's events (scratch.ev and scratch.hblk: trace.h).
 *
 * Owns the definitions below and the scratch tables ops, kern, ph, busy, kbusy, tlb.
 * Must not see MHD types; it reads and writes the loader's connection only.
 *
 * Definitions (what every number means):
 *  - Nesting (torch key_averages()): per thread, events sorted by (start, -end); a stack;
 *    an event pops the top while `start >= top.end || end > top.end` (partial overlaps do
 *    not nest); the remaining top is its parent. Ops, record_function ranges and CUDA
 *    runtime/driver calls all take part (trace-semantics.md: runtime calls are children).
 *  - Self CPU = duration - durations of direct children on the same thread.
 *  - GPU activity (kernel/memcpy/memset) joins its runtime call by `correlation`. Its time
 *    is self CUDA of the innermost op (cpu_op or user_annotation) around that call and
 *    CUDA total of every op above; a call with no op around it gives it to no host row
 *    (a runtime call is never GPU time, as in torch). Each GPU activity counts once as
 *    self in its GPU row, so the GPU rows' self CUDA sums to the GPU time; the host rows'
 *    to the part launched inside some op.
 *  - GPU rows of the operator table (kernel, gpu_memcpy, gpu_memset): calls and time,
 *    self = total; gpu_user_annotation rows carry CUDA total only (they are ranges).
 *  - Memory: [memory] events (args Bytes, "Device Type" 0 CPU / 1 CUDA) inside an op's
 *    span on its thread count for that op and every op above; self for the innermost.
 *  - GPU busy = union of GPU activity intervals; per device, per stream, and overall.
 *    Idle fraction = 1 - busy / wall, wall = session span (first start .. last end).
 *    A gap is an idle stretch of a device of at least GAP_MIN_US between activities.
 *  - Phase = user_annotation (CPU) or gpu_user_annotation (GPU) name. gpu_busy_us is the
 *    union of all GPU activity inside the instance's span; kernels are the GPU activities
 *    launched by runtime calls nested inside it (CPU phases) or running on its device
 *    inside it (GPU phases); cpu_only = total - gpu_busy.
 *  - Launch delay = kernel start - start of the runtime call that launched it. */
#include "analysis/analyze.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/report.h"
#include "analysis/suspects_recompute.h"
#include "analysis/suspects_waste.h"
#include "analysis/waste.h"
#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/meansd.h"
#include "lib/mono.h"
#include "lib/tlblob.h"
#include "lib/vec.h"
#include "scratch_sql.h" /* generated from analysis/scratch.sql */

/* fp_str(id) in the scratch SQL: string id's text, NULL for NULL. Why a function and not
 * a table of the texts: the report (wscratch.ops) quotes a handful of names, and copying
 * every name the operator table holds into scratch was 100,000 rows and 15 MB at 100,000
 * kernel names (issue 24). SQLITE_STATIC: the table does not grow while a query runs. */
static void fp_str_fn(sqlite3_context *c, int argc, sqlite3_value **v) {
    (void)argc;
    const intern *strs = sqlite3_user_data(c);
    if (sqlite3_value_type(v[0]) == SQLITE_NULL) return; /* NULL */
    sqlite3_int64 id = sqlite3_value_int64(v[0]);
    const char *s = id >= 0 && (size_t)id < intern_count(strs) ? intern_str(strs, (long)id) : NULL;
    sqlite3_result_text(c, s ? s : "", -1, SQLITE_STATIC);
}

/* ---- summary ---- */

/* The operator table's totals (grouping 0), summed in its walk order (the walk's rows,
 * then the GPU rows: an_gpu_agg_row) for the summary and the report's shares alike: self
 * CPU, self CUDA of the GPU activities (op rows repeat their kernels' time as self CUDA),
 * calls. */
static void op_totals(A *a, double *self_cpu, double *self_cuda, long long *calls) {
    *self_cpu = *self_cuda = 0;
    *calls = 0;
    for (size_t i = 0; i < a->naggs + a->t->ngpu_aggs; i++) {
        agg gpu_row;
        const agg *g = i < a->naggs ? &a->aggs[i] : &gpu_row;
        if (i >= a->naggs) an_gpu_agg_row(&a->t->gpu_aggs[i - a->naggs], 0, &gpu_row);
        if (g->grouping) continue;
        *self_cpu += g->self_cpu;
        const char *kn = an_str(a, g->kind);
        if (!strcmp(kn, "kernel") || !strcmp(kn, "gpu_memcpy") || !strcmp(kn, "gpu_memset")) *self_cuda += g->self_cuda;
        *calls += g->calls;
    }
}

/* What the sessions list shows beside the totals (issue 51, item 7), copied from the report
 * and the step breakdown so that a list row needs no second read: the mean step (GET /steps' mean.dur_us,
 * tb-profiler's steps; null without steps) and the top suspect's category, culprit and share
 * of the wall (null when nothing fired). */
static void list_figures(json_t *doc, const json_t *report, const json_t *breakdown) {
    const json_t *mean = json_object_get(breakdown, "mean");
    const json_t *dur = json_object_get(mean, "dur_us");
    json_object_set_new(doc, "step_mean_us", json_is_number(dur) ? json_real(json_number_value(dur)) : json_null());
    const json_t *top = json_array_get(json_object_get(json_object_get(report, "suspects"), "suspects"), 0);
    json_object_set_new(doc, "top_suspect", top ? json_pack("{s:O,s:O,s:O}", "category", json_object_get(top, "category"), "culprit",
                                                            json_object_get(top, "culprit"), "at_stake_fraction",
                                                            json_object_get(top, "at_stake_fraction"))
                                                : json_null());
}

/* The breakdown into out->steps, with the gate's numbers of its steps (analysis.step_*). */
static int step_numbers(json_t *breakdown, analysis *out) {
    const json_t *steps = json_object_get(breakdown, "steps"), *x;
    size_t n = json_array_size(steps), i;
    double *d = n ? malloc(n * sizeof *d) : NULL;
    if (n && !d) return ERR_NOMEM;
    json_array_foreach(steps, i, x) d[i] = json_number_value(json_object_get(x, "dur_us"));
    mean_sd(d, n, &out->step_mean_us, &out->step_sd_us);
    free(d);
    out->step_count = (long long)n;
    out->steps = json_incref(breakdown);
    return 0;
}

static json_t *summary_doc(A *a, json_t *gpu, json_t *report, const json_t *breakdown, const json_t *effic) {
    double self_cpu, self_cuda, cpu_total_top = 0;
    long long calls;
    op_totals(a, &self_cpu, &self_cuda, &calls);
    agg topv; /* a copy: a GPU row lives only for its iteration */
    const agg *top = NULL;
    /* the walk's rows, then the GPU rows (an_gpu_agg_row), in the operator table's order */
    for (size_t i = 0; i < a->naggs + a->t->ngpu_aggs; i++) {
        agg gpu_row;
        const agg *g = i < a->naggs ? &a->aggs[i] : &gpu_row;
        if (i >= a->naggs) an_gpu_agg_row(&a->t->gpu_aggs[i - a->naggs], 0, &gpu_row);
        if (g->grouping) continue;
        /* Why not the runtime calls: with no op around the launches (an nsys export, a
         * collector session), cudaLaunchKernel's row holds every kernel it launched and was
         * named the top CUDA operator; the report names the kernel (report.c: smell_owns). */
        const char *kn = an_str(a, g->kind);
        if (g->kind != a->ua_kind && strcmp(kn, "gpu_user_annotation") && strcmp(kn, "cuda_runtime") && strcmp(kn, "cuda_driver") &&
            g->cuda_total > 0 && (!top || g->self_cuda > top->self_cuda))
            topv = *g, top = &topv;
        if (g->kind == a->ua_kind && g->cpu_total > cpu_total_top) cpu_total_top = g->cpu_total;
    }
    json_t *smells = json_array();
    json_t *sm;
    size_t i;
    json_array_foreach(json_object_get(report, "smells"), i, sm)
        if (json_is_true(json_object_get(sm, "fired"))) json_array_append(smells, json_object_get(sm, "id"));
    json_t *idle = json_object_get(gpu, "gpu_idle_fraction");
    /* the headline GPU utilization (tb-profiler's, effic.c), kept for the trends (history.c) */
    json_t *util = json_object_get(json_object_get(effic, "session"), "gpu_utilization");
    json_t *doc = json_pack("{s:f,s:f,s:I,s:O,s:O,s:o,s:o}", "self_cpu_time_total_us", self_cpu, "self_cuda_time_total_us", self_cuda,
                            "calls", calls, "gpu_idle_fraction", idle ? idle : json_null(), "gpu_utilization",
                            json_is_number(util) ? util : json_null(),
                            "top_cuda_operator", top ? json_string(an_str(a, top->name)) : json_null(), "smells", smells);
    if (doc) list_figures(doc, report, breakdown);
    return doc;
}

/* ---- entry ---- */

/* How many devices the GPU tracks name; *dev is one of them. */
static int gpu_devices(const trace_ctx *t, long long *dev) {
    int n = 0;
    for (size_t i = 0; i < t->ntracks && n < 2; i++) {
        const track_info *ti = &t->tracks[i];
        if (!ti->gpu || (n && ti->device == *dev)) continue;
        if (!n) *dev = ti->device;
        n++;
    }
    return n;
}

/* Every name's flags (names.h), once: the walk tests bits, SQL calls fp_flags(name).
 * ProfilerStep* is interned only when a step exists: the string table holds what it uses. */
static int name_flags(A *a) {
    a->step_name = -1;
    a->nflags = name_flags_all(a->t->strs, &a->nnflags);
    if (!a->nflags || name_flags_sql(a->db, a->nflags, a->nnflags)) return ERR_NOMEM;
    if (sqlite3_create_function_v2(a->db, "fp_str", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, a->t->strs, fp_str_fn, NULL, NULL, NULL))
        return ERR_NOMEM;
    for (size_t i = 0; i < a->nnflags; i++)
        if (a->nflags[i] & NF_STEP) {
            if ((a->step_name = intern_id(a->t->strs, "ProfilerStep*", 13)) < 0) return ERR_NOMEM;
            break;
        }
    return 0;
}

int analyze_run(trace_ctx *t, analysis *out, char *err, size_t errlen) {
    A a;
    memset(&a, 0, sizeof a);
    memset(out, 0, sizeof *out);
    a.t = t;
    a.db = t->db;
    a.err = err;
    a.errlen = errlen;
    a.keys = intern_new();
    a.pkeys = intern_new();
    for (int i = 0; i < AGG_CACHE; i++) a.aggc[i].i = -1;
    const char *ua = "user_annotation";
    int has_ranges = intern_lookup(t->strs, ua, strlen(ua)) >= 0;
    a.ua_kind = intern_id(t->strs, ua, strlen(ua));
    idle_state idle;
    suspect_state sus;
    steps_state stp;
    memset(&stp, 0, sizeof stp);
    a.steps_st = &stp;
    memset(&idle, 0, sizeof idle);
    memset(&sus, 0, sizeof sus);
    a.idle = &idle;
    a.sus = &sus;
    idle.keys = intern_new();
    idle.rkeys = intern_new();
    sus.op_keys = intern_new();
    STEP_BEGIN();
    int rc = !idle.keys || !idle.rkeys || !sus.op_keys ? ERR_NOMEM : name_flags(&a);
    STEP_END("name_flags");
    if (!isfinite(t->start_us)) { t->start_us = 0; t->end_us = 0; }
    a.wall = t->end_us - t->start_us;
    double gpu_busy = 0;
    if (!rc && (!a.keys || !a.pkeys)) rc = ERR_NOMEM;
    /* the last strings the analysis interns: the jobs read the table from here on */
    a.kernel_kind = intern_id(t->strs, "kernel", 6);
    a.memcpy_kind = intern_id(t->strs, "gpu_memcpy", 10);
    a.memset_kind = intern_id(t->strs, "gpu_memset", 10);
    if (!rc && (a.kernel_kind < 0 || a.memcpy_kind < 0 || a.memset_kind < 0)) rc = ERR_NOMEM;
    rows_job rjob;
    memset(&rjob, 0, sizeof rjob);
    if (!rc) rc = an_rows_job_start(&a, &rjob);
    if (!rc) rc = an_run(&a, "BEGIN");
    if (!rc) rc = an_gpu_track_host_ops(&a);
    if (!rc) { STEP_BEGIN(); rc = an_run(&a, scratch_analysis_sql); STEP_END("setup"); } /* indexes and result tables */
    a.ndev = gpu_devices(t, &a.dev0);
    if (!rc && a.ndev > 1) rc = an_run(&a, scratch_devices_sql);
    /* kbusy: kernels only (not copies): "GPU otherwise idle" for a copy means no kernel ran */
    if (!rc) { STEP_BEGIN(); rc = an_busy_merges(&a, a.kernel_kind, &gpu_busy); STEP_END("busy_merges"); }
    if (!rc) {
        a.busy_q = an_prep(&a, BUSY_SQL("busy"));
        a.kbusy_q = an_prep(&a, BUSY_SQL("kbusy"));
        if (!a.busy_q || !a.kbusy_q) rc = ERR_DB;
    }
    stp.on = a.step_name >= 0 || has_ranges; /* steps, or record_function ranges to split */
    /* What the jobs read is committed first: their connections see only that. gpu_facts
     * needs the busy merges, not the idle gaps: it starts before them (it ran 300-640 ms at
     * 100-150 MB, the gaps and the walk after them 530-1350 ms). */
    if (!rc) rc = an_run(&a, "COMMIT; BEGIN");
    gpu_job job;
    memset(&job, 0, sizeof job);
    steps_job sjob;
    memset(&sjob, 0, sizeof sjob);
    if (!rc) rc = an_gpu_job_start(&a, &job, gpu_busy);
    if (!rc) { STEP_BEGIN(); rc = an_idle_gaps(&a); STEP_END("idle_gaps"); }
    if (!rc) rc = an_tl_open(&a, NULL);
    json_t *effic = NULL; /* effic.c: built from the walk, before the suspects read it (a.effic) */
    if (!rc) rc = an_effic_begin(&a);
    if (!rc) { STEP_BEGIN(); rc = an_host_walk(&a); STEP_END("host_walk"); }
    if (!rc) { STEP_BEGIN(); rc = an_effic_doc(&a, &effic); a.effic = effic; STEP_END("effic"); }
    json_t *suspects = NULL, *breakdown = NULL, *memory = NULL;
    /* The walk's writes are committed before the breakdown's connection opens: a write
     * transaction that spilled its cache holds the scratch file's exclusive lock, which
     * kept that connection from even attaching (two 150 MB uploads at once: 500 after the
     * busy timeout). The COMMIT waits for gpu_facts' statement in flight, if any. */
    if (!rc && stp.on) { STEP_BEGIN(); rc = an_run(&a, "COMMIT; BEGIN"); STEP_END("walk_commit"); }
    if (!rc && stp.on) rc = an_steps_job_start(&a, &sjob);
    if (!rc) { STEP_BEGIN(); rc = an_suspects(&a, gpu_busy, &suspects); STEP_END("suspects"); }
    if (!rc) rc = an_waste_phase_doc(&a, suspects); /* GPU time by kind per phase (suspects_waste.h) */
    if (!rc) { STEP_BEGIN(); rc = an_memory_doc(&a, &memory); STEP_END("memory"); }
    {
        STEP_BEGIN();
        int rrc = an_rows_job_finish(&a, &rjob);
        STEP_END("gpu_rows_wait");
        if (!rc) rc = rrc;
    }
    if (!rc) { STEP_BEGIN(); rc = an_gpu_phases(&a); STEP_END("gpu_phases"); }
    if (!rc) { STEP_BEGIN(); rc = an_write_ops(&a); STEP_END("write_ops"); }
    json_t *tl_phases = json_array(), *gaps = NULL;
    if (!rc) { STEP_BEGIN(); rc = an_write_phases(&a, tl_phases); STEP_END("write_phases"); }
    /* the GPU tracks' buckets: the job's, unless the trace has too many (an.h) */
    if (!rc && !job.timeline) { STEP_BEGIN(); rc = an_timeline_buckets(&a); STEP_END("timeline_buckets"); }
    /* This side's transaction ends before it waits for the jobs. Why: once its writes spill
     * (a cache under a few uploads' share, load.c), it holds the scratch file's exclusive
     * lock, and a job's next read waits for that lock: waiting for the job while holding it
     * stalled two 150 MB many-name uploads for 305 s (the jobs' busy timeouts, one statement
     * after another). The jobs only read, so they go on from here. A COMMIT that failed
     * (busy, disk full) still holds its locks: it is rolled back too (a failed COMMIT here
     * once held the pending lock while the jobs waited 30 s per statement for it). */
    if (!rc) rc = an_run(&a, "COMMIT; BEGIN");
    if (rc) sqlite3_exec(a.db, "ROLLBACK; BEGIN", NULL, NULL, NULL);
    {
        STEP_BEGIN();
        int jrc = an_gpu_job_finish(&a, &job, &out->gpu, &gaps);
        STEP_END("gpu_job_wait");
        if (!rc) rc = jrc;
    }
    {
        STEP_BEGIN();
        int src = an_steps_job_finish(&a, &sjob, &breakdown);
        STEP_END("steps_job_wait");
        if (!rc) rc = src;
    }
    if (!rc) { STEP_BEGIN(); rc = an_effic_window(&a, breakdown, effic); STEP_END("effic_window"); }
    if (!rc) {
        STEP_BEGIN();
        out->timeline = an_timeline_doc(&a, tl_phases, gaps);
        tl_phases = gaps = NULL;
        /* the steps are tb-profiler's from here on, in the suspects and all they feed */
        rc = breakdown ? an_suspects_steps(&a, suspects, breakdown) : 0;
        if (!rc && breakdown) rc = an_step_phase(&a, breakdown);
        json_object_set_new(suspects, "questions", an_questions(&a, suspects, out->gpu));
        report_input in = {a.db, out->gpu, suspects, t->meta, t->name, t->labels, t->hardware, t->events, a.wall, 0, 0, effic};
        long long calls;
        op_totals(&a, &in.self_cpu_total, &in.self_cuda_total, &calls);
        if (!rc) rc = report_draft(&in, &out->report);
        if (rc == ERR_DB) an_dberr(&a);
        if (!rc) json_object_set(out->report, "suspects", suspects);
        /* The breakdown is a document of its own (GET /steps, paged): /report and /suspects no
         * longer parse it, and the gate reads its numbers (issue 50). */
        if (!rc && breakdown) rc = step_numbers(breakdown, out);
        if (!rc) json_object_set(out->report, "memory", memory);
        if (!rc) out->summary = summary_doc(&a, out->gpu, out->report, breakdown, effic);
        if (!rc) out->effic = json_incref(effic);
        if (!rc && (!out->gpu || !out->timeline || !out->report || !out->summary)) rc = ERR_NOMEM;
        STEP_END("documents");
    }
    json_decref(tl_phases);
    json_decref(gaps);
    if (!rc) { STEP_BEGIN(); rc = an_run(&a, "COMMIT"); STEP_END("run"); }
    if (rc) sqlite3_exec(a.db, "ROLLBACK", NULL, NULL, NULL);
    if (rc == ERR_NOMEM && !err[0]) snprintf(err, errlen, "out of memory during analysis");
    an_tl_close(&a);
    sqlite3_finalize(a.busy_q);
    sqlite3_finalize(a.kbusy_q);
    intern_free(a.keys);
    intern_free(a.pkeys);
    free(a.aggs);
    free(a.phases);
    free(a.nflags);
    free(a.steps);
    json_decref(suspects);
    json_decref(idle.devices);
    cseg_free(&idle);
    sqlite3_finalize(idle.pinst_ins);
    intern_free(idle.keys);
    free(idle.sums);
    intern_free(idle.rkeys);
    json_decref(idle.sync_ev);
    free(idle.rsums);
    free(idle.pend);
    an_suspects_free(&a);
    an_const_free(&a);
    an_waste_free(&a);
    an_steps_free(&a);
    json_decref(breakdown);
    json_decref(memory);
    json_decref(effic);
    an_effic_free(&a);
    sqlite3_finalize(a.mem_ins);
    free(a.mrows);
    return rc;
}

void analysis_free(analysis *a) {
    json_decref(a->gpu);
    json_decref(a->report);
    json_decref(a->timeline);
    json_decref(a->summary);
    json_decref(a->effic);
    json_decref(a->steps);
    memset(a, 0, sizeof *a);
}

