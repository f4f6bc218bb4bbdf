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
    return rc;
}

/* "436 MB" of a byte count. */
static void mb(double bytes, char *out, size_t n) {
    if (bytes >= 1e9) snprintf(out, n, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(out, n, "%.0f MB", bytes / 1e6);
    else snprintf(out, n, "%.0f kB", bytes / 1e3);
}

void an_comm_advice(const json_t *ev, const char *culprit, int torch, int rocm, char *out, size_t n) {
    const json_t *lp = json_object_get(ev, "late_peer");
    double comm = json_number_value(json_object_get(ev, "comm_kernel_us")), exposed = json_number_value(json_object_get(ev, "exposed_us"));
    double busy = json_number_value(json_object_get(ev, "link_busy_fraction")), gbps = json_number_value(json_object_get(ev, "gb_per_s"));
    double per_call = json_number_value(json_object_get(ev, "bytes_per_call"));
    char size[32] = "";
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
    if (torch)
        utf8_snprintf(out, n, "Overlap %s with compute (DDP buckets, async collectives, gradient_as_bucket_view) or send less (larger, fewer "
                      "messages); check the interconnect's bandwidth against the message sizes", culprit);
    else
        utf8_snprintf(out, n, "Overlap %s with compute: issue each collective as soon as its input is ready, on its own %s stream, while "
                      "the next computation runs, or send less (larger, fewer messages); check the interconnect's bandwidth against the "
                      "message sizes", culprit, rocm ? "HIP" : "CUDA");
}
