/* suspects_comm.c: communication's kinds and the advice each supports (issue 48 item 4).
 *
 * Exposed collectives are one category with four causes the trace tells apart; each gets
 * the experiment that can shorten it, checked in this order:
 *   late peer     collectives of the same name, launch and message size whose durations
 *                 differ by LATE_RATIO or more (same bytes over the same link: the long ones
 *                 wait for a slower rank), the waits holding LATE_SHARE of the collective
 *                 time: no bucketing or overlap shortens a wait for a peer
 *   link-bound    the collectives outlast the compute that could hide them (their union
 *                 over the other GPU work's), or they keep the link busy LINK_BUSY of the
 *                 wall while already OVERLAPPED: they run back to back, so no overlap can
 *                 hide more; bytes over time (GB/s) say how fast the link moves them: fewer
 *                 bytes across it is the experiment
 *   overlapped    most of their time (OVERLAPPED) already runs beside compute: the exposed
 *                 rest is the first or last collective of the step
 *   exposed       nothing runs beside them: overlap them with compute
 *   repeated      checked first: in a step the same gradient reduction pattern (all-reduce /
 *                 reduce-scatter, same kernel, launch and bytes, same order) runs k > 1 times,
 *                 each after a like share of the step's compute (a micro-batch's forward and
 *                 backward: its activity count within REP_SLACK of the others'), and the step
 *                 ends with work that runs in none of the repeats (the optimizer, once): DDP
 *                 gradient accumulation without no_sync(). At stake: (k-1)/k of those
 *                 collectives' time, never above the exposed time (an_comm_at_stake)
 * Message sizes come from c10d's args ("In msg nelems", "Out msg nelems", "dtype": ingest's
 * bytes of a collective kernel); an Nsight export has none, so a group there is the same
 * kernel with the same grid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/names.h"
#include "lib/err.h"
#include "lib/utf8.h"
#include "lib/vec.h"

#define LATE_RATIO 10.0     /* a call this many times its group's median waited for a peer */
#define LATE_MIN_CALLS 3    /* a group needs this many calls for a median */
#define LATE_SHARE 0.5      /* late peer: the waits hold this share of the collective time */
#define LINK_BUSY 0.5       /* link-bound: the collective kernels' union holds this share of the wall */
#define OVERLAPPED 0.5      /* overlapped: this share of the collective time runs beside compute */
#define REP_SLACK 0.1       /* repeats of one step: activity counts within this share of the first's */
#define REP_STEPS 0.5       /* repeated: this share of the steps (at least 2) repeat their reductions */

/* One group's durations, sorted, and what it is. */
typedef struct cgroup { long name, grid; long long bytes; double *d; size_t n; } cgroup;

/* The late calls of a group: those of LATE_RATIO x its median or more; their excess over it. */
static void group_late(const cgroup *g, double *median, size_t *late, double *wait) {
    *median = g->n % 2 ? g->d[g->n / 2] : 0.5 * (g->d[g->n / 2 - 1] + g->d[g->n / 2]);
    *late = 0;
    *wait = 0;
    for (size_t i = 0; i < g->n; i++)
        if (*median > 0 && g->d[i] >= LATE_RATIO * *median) {
            (*late)++;
            *wait += g->d[i] - *median;
        }
}

/* One GPU activity of a step, as comm_repeats reads it. */
typedef struct gact { long name, grid; long long bytes; double dur; int red; } gact;

static int step_ts_cmp(const void *x, const void *y) {
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

/* Whether a collective kernel reduces gradients (all-reduce, reduce-scatter): the ones DDP
 * and FSDP run after each backward. */
static int is_reduction(const char *n) {
    return n && (strcasestr(n, "allreduce") || strcasestr(n, "all_reduce") || strcasestr(n, "reducescatter") ||
                 strcasestr(n, "reduce_scatter"));
}

/* The largest k > 1 for which the step's activities v[0..n) hold k repeats of one reduction
 * pattern (see the header: same keys in the same order, like compute before each, and a tail
 * with a name no repeat runs); 0 when none. seen: a zeroed byte per name id, left zeroed;
 * *red_us: the time of the repeated reductions. */
static size_t step_repeats(const gact *v, size_t n, unsigned char *seen, size_t nnames, double *red_us) {
    size_t nr = 0, *at = NULL;
    for (size_t i = 0; i < n; i++) nr += v[i].red != 0;
    if (nr < 2 || !(at = malloc(nr * sizeof *at))) return 0;
    nr = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].red) at[nr++] = i;
    size_t best = 0;
    for (size_t k = nr; k >= 2 && !best; k--) {
        if (nr % k) continue;
        size_t p = nr / k, ok = 1;
        for (size_t j = p; ok && j < nr; j++) {
            const gact *x = &v[at[j]], *y = &v[at[j - p]];
            ok = x->name == y->name && x->grid == y->grid && x->bytes == y->bytes;
        }
        /* repeat r: the activities after repeat r-1's last reduction up to its own last */
        double first = 0;
        for (size_t r = 0; ok && r < k; r++) {
            size_t lo = r ? at[r * p - 1] + 1 : 0, hi = at[r * p + p - 1] + 1, c = 0;
            for (size_t i = lo; i < hi; i++) c += !v[i].red;
            if (!r) first = (double)c;
            ok = c >= 2 && fabs((double)c - first) <= REP_SLACK * first;
        }
        if (!ok) continue;
        /* the tail: work after the last repeat that none of them ran (the optimizer) */
        size_t end = at[nr - 1] + 1, fresh = 0;
        for (size_t i = 0; i < end; i++)
            if (v[i].name >= 0 && (size_t)v[i].name < nnames) seen[v[i].name] = 1;
        for (size_t i = end; i < n; i++)
            if (v[i].name >= 0 && (size_t)v[i].name < nnames && !seen[v[i].name]) fresh = 1;
        for (size_t i = 0; i < end; i++)
            if (v[i].name >= 0 && (size_t)v[i].name < nnames) seen[v[i].name] = 0;
        if (fresh) {
            best = k;
            *red_us = 0;
            for (size_t j = 0; j < nr; j++) *red_us += v[at[j]].dur;
        }
    }
    free(at);
    return best;
}

/* Gradient reductions repeated within the steps (the header's "repeated"): adds
 * ev.repeated_per_step when REP_STEPS of the steps (at least 2) repeat theirs with one k.
 * Activities belong to the step whose host range starts last before them (the GPU runs
 * behind the host). 0 or an ERR_* code. */
/* Whether any name of the trace is a backward's (autograd nodes, *Backward ops, backward
 * kernels): gradients exist only then. Every name once: ops, ranges, kernels share one table. */
static int any_backward(A *a) {
    for (size_t i = 0; i < a->nnflags; i++) {
        const char *n = an_str(a, (long)i);
        if (n && strcasestr(n, "backward")) return 1;
    }
    return 0;
}

static int comm_repeats(A *a, json_t *ev) {
    /* gradients need a backward: tensor-parallel inference all-reduces the same pattern after
     * every layer, then runs a head none of them ran, and is no accumulation */
    if (a->nsteps < 2 || !any_backward(a)) return 0;
    double *st = malloc(a->nsteps * sizeof *st);
    unsigned char *seen = calloc(a->nnflags + 1, 1);
    gact *v = NULL;
    size_t nv = 0, capv = 0, si = 0, hits = 0, k0 = 0, calls = 0;
    double red = 0;
    int rc = 0, named = 0;
    if (!st || !seen) { rc = ERR_NOMEM; goto out; }
    for (size_t i = 0; i < a->nsteps; i++) st[i] = a->steps[i].ts;
    qsort(st, a->nsteps, sizeof *st, step_ts_cmp);
    sqlite3_stmt *q = an_prep(a, "SELECT ts, name, IFNULL(grid, -1), IFNULL(bytes, 0), dur, (fp_flags(name) & ?1) != 0 FROM "
                                 "scratch.ev WHERE cls = 2 ORDER BY ts");
    if (!q) { rc = ERR_DB; goto out; }
    sqlite3_bind_int(q, 1, NF_COMM_KERNEL);
    int more = 1;
    while (!rc && more) {
        more = sqlite3_step(q) == SQLITE_ROW;
        double ts = more ? sqlite3_column_double(q, 0) : 0;
        if (more && ts < st[0]) continue; /* before the first step */
        /* a step ends where the next one starts, and at the end of the rows */
        if (!more || (si + 1 < a->nsteps && ts >= st[si + 1])) {
            double us = 0;
            size_t k = step_repeats(v, nv, seen, a->nnflags, &us);
            if (k && (!k0 || k == k0)) {
                k0 = k, hits++, red += us;
                for (size_t i = 0; i < nv; i++) calls += v[i].red != 0;
            }
            nv = 0;
            while (more && si + 1 < a->nsteps && ts >= st[si + 1]) si++;
        }
        if (!more) break;
        long name = (long)sqlite3_column_int64(q, 1);
        int comm = sqlite3_column_int(q, 5);
        int r = comm && is_reduction(an_str(a, name));
        named |= r;
        if (comm && !r) continue; /* other collectives (all-gather, send/recv) are neither repeat nor compute */
        if (VEC_RESERVE(v, capv, nv + 1, 256)) { rc = ERR_NOMEM; break; }
        v[nv++] = (gact){name, (long)sqlite3_column_int64(q, 2), sqlite3_column_int64(q, 3), sqlite3_column_double(q, 4), r};
    }
    sqlite3_finalize(q);
    if (!rc && named && hits >= 2 && (double)hits >= REP_STEPS * (double)a->nsteps) {
        double waste = red * (double)(k0 - 1) / (double)k0;
        json_object_set_new(ev, "repeated_per_step",
                            json_pack("{s:I,s:I,s:I,s:f,s:f,s:f}", "repeats", (json_int_t)k0, "steps", (json_int_t)hits, "steps_total",
                                      (json_int_t)a->nsteps, "per_step", (double)calls / (double)hits, "reduction_us", red,
                                      "redundant_us", waste));
    }
out:
    free(st);
    free(seen);
    free(v);
    return rc;
}

double an_comm_at_stake(const json_t *ev, double exposed) {
    const json_t *rp = json_object_get(ev, "repeated_per_step");
    double w = rp ? json_number_value(json_object_get(rp, "redundant_us")) : exposed;
    return w < exposed ? w : exposed;
}

int an_comm_facts(A *a, json_t *ev, double comm_us, double other_us) {
    if (!ev) return 0;
    sqlite3_stmt *q = an_prep(a, "SELECT name, IFNULL(grid, -1), IFNULL(bytes, 0), dur FROM scratch.ev WHERE cls = 2 AND "
                                 "(fp_flags(name) & ?1) != 0 ORDER BY name, 2, 3, dur");
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_COMM_KERNEL);
    cgroup *g = NULL;
    size_t ng = 0, capg = 0, capd = 0;
    double total = 0, sized_bytes = 0, sized_us = 0, sized_calls = 0, calls = 0;
    int rc = 0;
    while (!rc && sqlite3_step(q) == SQLITE_ROW) {
        long name = (long)sqlite3_column_int64(q, 0), grid = (long)sqlite3_column_int64(q, 1);
        long long bytes = sqlite3_column_int64(q, 2);
        double dur = sqlite3_column_double(q, 3);
        if (!ng || g[ng - 1].name != name || g[ng - 1].grid != grid || g[ng - 1].bytes != bytes) {
            if (VEC_RESERVE(g, capg, ng + 1, 8)) { rc = ERR_NOMEM; break; }
            g[ng++] = (cgroup){name, grid, bytes, NULL, 0};
            capd = 0;
        }
        cgroup *c = &g[ng - 1];
        if (VEC_RESERVE(c->d, capd, c->n + 1, 16)) { rc = ERR_NOMEM; break; }
        c->d[c->n++] = dur;
        total += dur;
        calls++;
    }
    sqlite3_finalize(q);
    /* the group with the most waiting; bytes over time over the calls that did not wait */
    double best_wait = 0, best_median = 0;
    size_t best = 0, best_late = 0;
    for (size_t i = 0; !rc && i < ng; i++) {
        double median = 0, wait = 0;
        size_t late = 0;
        if (g[i].n >= LATE_MIN_CALLS) group_late(&g[i], &median, &late, &wait);
        if (wait > best_wait) { best_wait = wait; best = i; best_late = late; best_median = median; }
        if (g[i].bytes > 0)
            for (size_t j = 0; j < g[i].n; j++)
                if (!(late && g[i].d[j] >= LATE_RATIO * median)) {
                    sized_bytes += (double)g[i].bytes;
                    sized_us += g[i].d[j];
                    sized_calls++;
                }
    }
    if (!rc) {
        json_object_set_new(ev, "collectives", json_real(calls));
        json_object_set_new(ev, "backward", json_boolean(any_backward(a)));
        json_object_set_new(ev, "link_busy_fraction", json_real(a->wall > 0 ? comm_us / a->wall : 0));
        json_object_set_new(ev, "other_gpu_us", json_real(other_us > 0 ? other_us : 0));
        if (sized_us > 0) {
            json_object_set_new(ev, "bytes_per_call", json_real(sized_bytes / sized_calls));
            json_object_set_new(ev, "gb_per_s", json_real(sized_bytes / sized_us / 1e3)); /* bytes/us = MB/s; /1e3: GB/s */
        }
        if (best_late && total > 0 && best_wait >= LATE_SHARE * total) {
            const cgroup *c = &g[best];
            char cut[EVIDENCE_NAME_MAX + 4];
            json_t *lp = json_pack("{s:s,s:I,s:I,s:f,s:f,s:f}", "collective", utf8_clip(an_str(a, c->name), EVIDENCE_NAME_MAX, cut, sizeof cut),
                                   "calls", (json_int_t)c->n, "late_calls", (json_int_t)best_late, "median_us", best_median, "max_us",
                                   c->d[c->n - 1], "wait_us", best_wait);
            json_object_set_new(lp, "bytes", c->bytes > 0 ? json_integer(c->bytes) : json_null());
            json_object_set_new(ev, "late_peer", lp);
        }
    }
    for (size_t i = 0; i < ng; i++) free(g[i].d);
    free(g);
    return rc ? rc : comm_repeats(a, ev);
}

/* "436 MB" of a byte count. */
static void mb(double bytes, char *out, size_t n) {
    if (bytes >= 1e9) snprintf(out, n, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(out, n, "%.0f MB", bytes / 1e6);
    else snprintf(out, n, "%.0f kB", bytes / 1e3);
}

/* Whether a collective kernel is a rooted reduce (onto one rank): in a training loop, the
 * pattern of single-process data parallelism (nn.DataParallel reduces the gradients onto one
 * GPU and broadcasts the parameters back every step), which DDP's all-reduce replaces. Not a
 * Broadcast: DDP broadcasts its buffers every step too (broadcast_buffers). */
static int rooted_collective(const char *n) {
    if (!n) return 0;
    const char *r = strstr(n, "Reduce");
    return r && !strstr(n, "AllReduce") && !strstr(n, "ReduceScatter") && !strstr(n, "Reduce_Scatter") && (r[6] == '_' || r[6] == '(');
}

void an_comm_advice(const json_t *ev, const char *culprit, int torch, int rocm, char *out, size_t n) {
    const json_t *lp = json_object_get(ev, "late_peer");
    double comm = json_number_value(json_object_get(ev, "comm_kernel_us")), exposed = json_number_value(json_object_get(ev, "exposed_us"));
    double busy = json_number_value(json_object_get(ev, "link_busy_fraction")), gbps = json_number_value(json_object_get(ev, "gb_per_s"));
    double per_call = json_number_value(json_object_get(ev, "bytes_per_call"));
    char size[32] = "";
    const json_t *rp = json_object_get(ev, "repeated_per_step");
    if (rp) {
        /* the repeats are the cause whatever their overlap: fewer of them, not hiding them */
        long long k = (long long)json_integer_value(json_object_get(rp, "repeats"));
        utf8_snprintf(out, n, "%s runs %lld times per optimizer step: in %lld of %lld steps the same gradient reductions (%.0f a step) "
                      "follow each of %lld micro-batches' backward, while the optimizer runs once, so %lld of every %lld reduce "
                      "gradients that are only summed again (%.0f us of collectives, %.0f us of them redundant). %s",
                      culprit, k, (long long)json_integer_value(json_object_get(rp, "steps")),
                      (long long)json_integer_value(json_object_get(rp, "steps_total")),
                      json_number_value(json_object_get(rp, "per_step")), k, k - 1, k,
                      json_number_value(json_object_get(rp, "reduction_us")), json_number_value(json_object_get(rp, "redundant_us")),
                      torch ? "Accumulate locally and reduce once: run every micro-batch but the last under `with model.no_sync():` "
                              "(DDP; FSDP: no_sync() too, or set_requires_gradient_sync(False)), then compare the collectives per step"
                            : "Accumulate the gradients locally and reduce them once per optimizer step (skip the reduction on all but "
                              "the last micro-batch: DDP's no_sync()), then compare the collectives per step");
        return;
    }
    if (torch && json_is_true(json_object_get(ev, "backward")) && rooted_collective(culprit)) {
        utf8_snprintf(out, n, "%s is a rooted collective in a training loop (a reduce onto one GPU, a broadcast from it): the pattern of "
                      "single-process data parallelism (nn.DataParallel), which gathers the gradients on one GPU and sends the "
                      "parameters back to every replica each step, and replicates the module in Python. Use DistributedDataParallel "
                      "(one process per GPU, torchrun): its all-reduce runs in buckets beside the backward and nothing is re-broadcast; "
                      "compare the step time", culprit);
        return;
    }
    if (lp) {
        double med = json_number_value(json_object_get(lp, "median_us")), max = json_number_value(json_object_get(lp, "max_us"));
        double b = json_number_value(json_object_get(lp, "bytes"));
        if (b > 0) mb(b, size, sizeof size);
        utf8_snprintf(out, n, "%s waits for a late peer: %lld calls of the same collective (%s%s) take %.0f us at the median, but %lld of "
                      "them last up to %.0f us (%.0fx), %.0f us of waiting in all: the same bytes over the same link, so this rank waits "
                      "for a slower rank (a straggler) to reach the collective, and no bucketing or overlap shortens that wait. Find the "
                      "slow rank: compare the ranks' traces at that collective and what the late one does before it (input pipeline, "
                      "host work, a throttled or shared GPU), and even out the work across ranks",
                      culprit, (long long)json_integer_value(json_object_get(lp, "calls")), *size ? size : "same launch",
                      *size ? " each" : "", med, (long long)json_integer_value(json_object_get(lp, "late_calls")), max,
                      med > 0 ? max / med : 0, json_number_value(json_object_get(lp, "wait_us")));
        return;
    }
    double other = json_number_value(json_object_get(ev, "other_gpu_us"));
    int overlapped = comm > 0 && comm - exposed >= OVERLAPPED * comm;
    if (comm > other || (busy >= LINK_BUSY && overlapped)) {
        char rate[96] = "the trace records no message sizes, so measure its bytes over time (GB/s) with nccl-tests";
        if (gbps > 0) {
            mb(per_call, size, sizeof size);
            snprintf(rate, sizeof rate, "%s a call at %.1f GB/s (bytes over time)", size, gbps);
        }
        utf8_snprintf(out, n, "%s is link-bound: the collectives keep the link busy %.0f%% of the wall (%s), %s, so overlap or "
                      "bucketing cannot hide more of them. Check that rate against the link's bandwidth (NVLink within a node, "
                      "InfiniBand or Ethernet across nodes) and move fewer bytes across the slowest link: %s, more compute per byte "
                      "(a larger batch per step), lower-precision communication",
                      culprit, busy * 100, rate, comm > other ? "longer than all the compute that could hide them" : "back to back",
                      torch ? "shard within a node and replicate across nodes (FSDP ShardingStrategy.HYBRID_SHARD)"
                            : "shard within a node and replicate across nodes (hybrid sharding)");
        return;
    }
    if (overlapped) {
        utf8_snprintf(out, n, "%s already runs %.0f%% of its time beside compute; the rest (%.0f us) is exposed where nothing is left to "
                      "overlap it with, usually the first or last collective of the step: start it earlier%s, send less in it, or check "
                      "the link's bandwidth against the message sizes",
                      culprit, 100 * (comm - exposed) / comm, exposed,
                      torch ? " (a smaller last bucket: DDP bucket_cap_mb; FSDP forward/backward_prefetch)" : "");
        return;
    }
    if (torch && json_is_false(json_object_get(ev, "backward")))
        /* no gradients: inference (tensor / pipeline parallel), where DDP's buckets do not exist */
        utf8_snprintf(out, n, "%s is exposed in a loop with no backward (inference): send less in it, a reduced result rather than the "
                      "whole tensor (a local top-k / argmax before gathering logits, bf16 rather than fp32), fewer collectives "
                      "(a fused all-reduce per layer), or overlap it with the next computation (async collectives on their own stream); "
                      "check the interconnect's bandwidth against the message sizes", culprit);
    else if (torch)
        utf8_snprintf(out, n, "Overlap %s with compute (DDP buckets, async collectives, gradient_as_bucket_view) or send less (larger, fewer "
                      "messages); check the interconnect's bandwidth against the message sizes", culprit);
    else
        utf8_snprintf(out, n, "Overlap %s with compute: issue each collective as soon as its input is ready, on its own %s stream, while "
                      "the next computation runs, or send less (larger, fewer messages); check the interconnect's bandwidth against the "
                      "message sizes", culprit, rocm ? "HIP" : "CUDA");
}
