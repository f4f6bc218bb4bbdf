/* questions.c: the seed's four narrow trace questions, answered per session (issue 19, item 5).
 *
 *   kernels_packed            are kernels packed, or waiting between launches?
 *   cpu_ranges_align          do the CPU ranges (record_function) line up with their GPU work?
 *   prefill_dense_decode_small is prefill one dense block and decode many small repeated ones?
 *   copies_on_critical_path   are copies on the critical path?
 *
 * Each answer is "yes", "no" or "n/a" with a one-line summary and the numbers it rests on,
 * all taken from documents the API serves too (suspects, /gpu, /phases), so a test can
 * recompute them. Reads A's phases; writes nothing. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "analysis/an.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"

#define PACKED_BUSY 0.90        /* kernels packed: busy this share of the time from the GPU's first work to its last */
#define ALIGNED_SHARE 0.50      /* a CPU range lines up: this share of the GPU work it launched runs inside it */
#define DENSE_RATIO 3.0         /* prefill dense: its mean kernel this many times decode's */
#define CRITICAL_COPY_SHARE 0.05 /* copies matter: on the critical path for this share of the wall */

static json_t *answer(const char *a, const char *summary, json_t *evidence) {
    return json_pack("{s:s,s:s,s:o}", "answer", a, "summary", summary, "evidence", evidence ? evidence : json_object());
}

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static json_t *kernels_packed(const json_t *sus) {
    const json_t *gpu = json_object_get(sus, "gpu"), *idle = json_object_get(json_object_get(sus, "idle"), "by_class_us");
    if (!json_is_object(gpu)) return answer("n/a", "no GPU activity in the trace", NULL);
    double busy = num(gpu, "busy_fraction"), hw = num(idle, "host_wait"), kw = num(idle, "kernel_wait");
    char s[512];
    /* the culprit is the suspect list's (its top suspect that waits on the host), so the
     * answer and the list name one op (issue 42: they named aten::empty and aten::fill_);
     * the largest idle label only when no such suspect fired */
    static const char *const waits[] = {"data_loading", "host_sync", "python_overhead", "launch_bound", "cpu_bound_op", "allocator_churn",
                                        "compilation", "tokenization", "garbage_collection", "synchronous_launch", "host_work", NULL};
    const json_t *top = NULL, *x;
    size_t i;
    json_array_foreach(json_object_get(sus, "suspects"), i, x) {
        for (int k = 0; waits[k] && !top; k++)
            if (!strcmp(json_string_value(json_object_get(x, "category")), waits[k])) top = x;
        if (top) break;
    }
    if (!top) top = json_array_get(json_object_get(json_object_get(sus, "idle"), "by_culprit"), 0);
    /* "busy after its first work": the share of the time from the GPU's first activity to its
     * last (the lead-in aside), named by what it divides by; "GPU busy" alone is the headline,
     * tb-profiler's utilization (issue 51, item 1: the page showed three figures as busy) */
    if (busy >= PACKED_BUSY)
        utf8_snprintf(s, sizeof s, "yes: busy %.1f%% after its first work (from the GPU's first activity to its last)", busy * 100);
    else
        utf8_snprintf(s, sizeof s, "no: busy %.1f%% after its first work (from the GPU's first activity to its last); its idle time waits on the %s (%.0f%% of it)%s%s", busy * 100,
                 hw >= kw ? "host issuing launches" : "launched kernels starting late", 100 * (hw >= kw ? hw : kw) / (hw + kw > 0 ? hw + kw : 1),
                 top ? ", most of all under " : "", top ? json_string_value(json_object_get(top, "culprit")) : "");
    return answer(busy >= PACKED_BUSY ? "yes" : "no", s,
                  json_pack("{s:f,s:f,s:f}", "busy_fraction", busy, "host_wait_us", hw, "kernel_wait_us", kw));
}

/* CPU phases (record_function ranges, steps aside): how much of the GPU work each launched
 * runs while the range is open (its busy time inside the range against its kernel time). */
static json_t *cpu_ranges_align(A *a) {
    json_t *rows = json_array();
    double inside = 0, launched = 0;
    for (size_t i = 0; i < a->nphases; i++) {
        const phase *p = &a->phases[i];
        if (p->gpu || p->name == a->step_name || p->kernel_us <= 0) continue;
        double in = p->busy < p->kernel_us ? p->busy : p->kernel_us;
        inside += in;
        launched += p->kernel_us;
        json_array_append_new(rows, json_pack("{s:s,s:f,s:f,s:f}", "range", an_str(a, p->name), "gpu_work_us", p->kernel_us,
                                              "gpu_busy_inside_us", p->busy, "share_inside", in / p->kernel_us));
    }
    if (launched <= 0) {
        json_decref(rows);
        return answer("n/a", "no record_function range launched GPU work", NULL);
    }
    double share = inside / launched;
    char s[256];
    utf8_snprintf(s, sizeof s, "%s: %.0f%% of the GPU work launched in record_function ranges runs while its range is open%s",
             share >= ALIGNED_SHARE ? "yes" : "no", share * 100, share >= ALIGNED_SHARE ? "" : " (the GPU trails the host)");
    return answer(share >= ALIGNED_SHARE ? "yes" : "no", s, json_pack("{s:f,s:o}", "share_inside", share, "ranges", rows));
}

/* The CPU phase whose name holds word (case-insensitive) with the most total time. */
static const phase *phase_like(A *a, const char *word) {
    const phase *best = NULL;
    for (size_t i = 0; i < a->nphases; i++) {
        const phase *p = &a->phases[i];
        if (!p->gpu && strcasestr(an_str(a, p->name), word) && (!best || p->total > best->total)) best = p;
    }
    return best;
}

static json_t *prefill_decode(A *a) {
    const phase *pf = phase_like(a, "prefill"), *dc = phase_like(a, "decode");
    if (!pf || !dc) return answer("n/a", "no prefill and decode ranges (record_function) in the trace", NULL);
    double pk = pf->kernels ? pf->kernel_us / (double)pf->kernels : 0, dk = dc->kernels ? dc->kernel_us / (double)dc->kernels : 0;
    int dense = pk > 0 && dk > 0 && pk >= DENSE_RATIO * dk && dc->count >= pf->count;
    char s[512], t1[32], t2[32];
    utf8_snprintf(s, sizeof s, "%s: %s x%lld, mean kernel %s; %s x%lld, mean kernel %s", dense ? "yes" : "no", an_str(a, pf->name),
             pf->count, timefmt_us(pk, t1, sizeof t1), an_str(a, dc->name), dc->count, timefmt_us(dk, t2, sizeof t2));
    return answer(dense ? "yes" : "no", s,
                  json_pack("{s:{s:s,s:I,s:f},s:{s:s,s:I,s:f}}", "prefill", "name", an_str(a, pf->name), "count", (json_int_t)pf->count,
                            "mean_kernel_us", pk, "decode", "name", an_str(a, dc->name), "count", (json_int_t)dc->count, "mean_kernel_us", dk));
}

/* Copies that run while no kernel does, or are made by a blocking call (the /gpu copies
 * facts), against the wall; a "yes" names the copy suspects that fired (every yes is a
 * suspect with its time at stake: issue 41). */
static json_t *copies_critical(const json_t *gpu, double wall, const json_t *sus) {
    const json_t *c;
    size_t i;
    double crit = 0, total = 0;
    json_array_foreach(json_object_get(gpu, "copies"), i, c) {
        crit += num(c, "critical_path_us");
        total += num(c, "total_us");
    }
    if (total <= 0) return answer("n/a", "no copies or memsets in the trace", NULL);
    double share = wall > 0 ? crit / wall : 0;
    static const char *const copy_cats[] = {"pageable_memcpy", "copy_on_critical_path", "copies_casts", "host_sync", NULL};
    json_t *named = json_array(), *x;
    char s[512], t1[32], by[256] = "";
    int o = 0;
    json_array_foreach(json_object_get(sus, "suspects"), i, x) {
        const char *cat = json_string_value(json_object_get(x, "category"));
        for (int k = 0; copy_cats[k]; k++)
            if (!strcmp(cat, copy_cats[k])) {
                json_array_append_new(named, json_string(cat));
                if (o < (int)sizeof by)
                    o += utf8_snprintf(by + o, sizeof by - (size_t)o, "%s%s (%s)", o ? ", " : "; suspects: ", cat,
                                       json_string_value(json_object_get(x, "culprit")));
            }
    }
    utf8_snprintf(s, sizeof s, "%s: %s of copies and memsets on the critical path (%.1f%% of the wall)%s",
                  share >= CRITICAL_COPY_SHARE ? "yes" : "no", timefmt_us(crit, t1, sizeof t1), share * 100, by);
    return answer(share >= CRITICAL_COPY_SHARE ? "yes" : "no", s,
                  json_pack("{s:f,s:f,s:f,s:o}", "critical_path_us", crit, "copy_us", total, "share_of_wall", share, "suspects", named));
}

json_t *an_questions(A *a, const json_t *suspects, const json_t *gpu) {
    return json_pack("{s:o,s:o,s:o,s:o}", "kernels_packed", kernels_packed(suspects), "cpu_ranges_align", cpu_ranges_align(a),
                     "prefill_dense_decode_small", prefill_decode(a), "copies_on_critical_path", copies_critical(gpu, a->wall, suspects));
}
