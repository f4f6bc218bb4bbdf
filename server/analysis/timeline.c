/* timeline.c: the timeline's level-of-detail buckets per track (wscratch.tlb, lib/tlblob.h)
 * and the timeline document (tracks, phases, gaps). */

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "analysis/an.h"
#include "analysis/analyze.h"
#include "analysis/report.h"
#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/mono.h"
#include "lib/tlblob.h"
#include "lib/utf8.h"
#include "lib/vec.h"

/* ---- timeline buckets ---- */

/* Per track: union busy time, event count and the longest event's name per bucket, fed
 * in (track, ts) order. Why two feeders: the host tracks' rows come from host_walk's scan,
 * already in that order, which saves sorting the host events a second time (70 ms of
 * 95 at 100 MB); timeline_buckets feeds the rest. */

/* What tl_add and tl_flush need in a: the bucket grid, the accumulator a->tl (no track
 * open), the blob buffers and the statement that writes to wscratch.tlb, or with mem (a
 * job's, which may not write scratch) the buffer the blobs wait in for an_tl_insert_mem;
 * tl_close frees it. */
int an_tl_open(A *a, buf *mem) {
    a->tl_t0 = a->t->start_us;
    a->tl_w = a->wall > 0 ? a->wall / TL_BUCKETS : 1;
    a->tl.track = -1;
    a->tl.b = calloc(TL_BUCKETS, sizeof *a->tl.b);
    a->tl_blob = malloc(TL_BLOB_RAW);
    a->tl_packed = malloc(TL_BLOB_RAW);
    a->tl_cctx = ZSTD_createCCtx();
    if (!a->tl.b || !a->tl_blob || !a->tl_packed || !a->tl_cctx) return ERR_NOMEM;
    a->tl_mem = mem;
    if (mem) return 0;
    a->tl_ins = an_prep(a, "INSERT INTO wscratch.tlb VALUES (?, ?)");
    return a->tl_ins ? 0 : ERR_DB;
}

void an_tl_close(A *a) {
    free(a->tl.b);
    free(a->tl_blob);
    free(a->tl_packed);
    ZSTD_freeCCtx(a->tl_cctx);
    sqlite3_finalize(a->tl_ins);
}

/* Writes t's open track (if any) to wscratch.tlb. */
int an_tl_flush(A *a, tlacc *t) {
    if (t->track < 0) return 0;
    for (int i = 0; i < TL_BUCKETS; i++) {
        memcpy(a->tl_blob + i * 12, &t->b[i].busy, 4);
        memcpy(a->tl_blob + i * 12 + 4, &t->b[i].count, 4);
        memcpy(a->tl_blob + i * 12 + 8, &t->b[i].top, 4);
    }
    /* compressed when that is smaller (tlblob.h): an idle track is ~200 B, not 48 KiB */
    size_t plen = tl_blob_pack(a->tl_blob, a->tl_packed, a->tl_cctx);
    long long track = t->track;
    t->track = -1;
    if (a->tl_mem) { /* gpu_job's side may not write the scratch file: an_tl_insert_mem later */
        uint32_t n = (uint32_t)plen;
        return buf_put(a->tl_mem, &track, sizeof track) || buf_put(a->tl_mem, &n, sizeof n) ||
               buf_put(a->tl_mem, a->tl_packed, plen) ? ERR_NOMEM : 0;
    }
    sqlite3_bind_int64(a->tl_ins, 1, track);
    sqlite3_bind_blob(a->tl_ins, 2, a->tl_packed, (int)plen, SQLITE_STATIC);
    int rc = sqlite3_step(a->tl_ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(a->tl_ins);
    return rc;
}

int an_tl_insert_mem(A *a, const buf *m) {
    size_t off = 0;
    int rc = 0;
    while (!rc && off + 12 <= m->len) {
        long long track;
        uint32_t n;
        memcpy(&track, m->p + off, 8);
        memcpy(&n, m->p + off + 8, 4);
        off += 12;
        if (n > m->len - off) return ERR_INTERNAL;
        sqlite3_bind_int64(a->tl_ins, 1, track);
        sqlite3_bind_blob(a->tl_ins, 2, m->p + off, (int)n, SQLITE_STATIC);
        rc = sqlite3_step(a->tl_ins) == SQLITE_DONE ? 0 : an_dberr(a);
        sqlite3_reset(a->tl_ins);
        off += n;
    }
    return rc;
}

/* One event of track tr into t; a new track first writes the one before. */
int an_tl_add(A *a, tlacc *t, long tr, double ts, double te, uint32_t name, double dur) {
    if (tr != t->track) {
        int rc = an_tl_flush(a, t);
        if (rc) return rc;
        memset(t->b, 0, TL_BUCKETS * sizeof *t->b);
        t->track = tr;
        t->ue = -INFINITY;
    }
    double t0 = a->tl_t0, w = a->tl_w;
    int bi = (int)((ts - t0) / w);
    if (bi < 0) bi = 0;
    if (bi >= TL_BUCKETS) bi = TL_BUCKETS - 1;
    tl_bucket *b = t->b;
    b[bi].count++;
    if (dur > b[bi].topdur || b[bi].count == 1) { b[bi].topdur = (float)dur; b[bi].top = name; }
    /* Busy is the union: only the part after what earlier events covered counts. */
    double from = ts > t->ue ? ts : t->ue;
    if (te > from) {
        for (int i = (int)((from - t0) / w); i < TL_BUCKETS && t0 + i * w < te; i++) {
            if (i < 0) continue;
            double lo = t0 + i * w, hi = lo + w;
            double ov = (te < hi ? te : hi) - (from > lo ? from : lo);
            if (ov > 0) b[i].busy += (float)ov;
        }
        t->ue = te;
    }
    return 0;
}

/* ---- timeline ---- */

/* The timeline of the tracks host_walk did not feed (tl_wanted): those with GPU events,
 * all their classes, in one pass sorted by track and ts. Then the last open track.
 * Only GPU work (kernels, copies, memsets) makes a bucket busy: a gpu_user_annotation is
 * a range drawn around that work, and counting it painted annotated streams ~100% busy
 * (analyze.c's GPU busy is the union of GPU activity too). It still counts as an event. */
int an_timeline_buckets(A *a) {
    int rc = 0;
    json_t *ids = json_array();
    for (size_t i = 0; i < a->t->ntracks; i++)
        if (a->t->tracks[i].gpu) json_array_append_new(ids, json_integer((json_int_t)i));
    char *js = json_dumps(ids, JSON_COMPACT);
    json_decref(ids);
    sqlite3_stmt *s = js ? an_prep(a, "SELECT track, ts, CASE WHEN cls = 2 THEN te ELSE ts END, name, dur FROM scratch.ev WHERE cls IN (0, 1, 2, 4)"
                                   " AND track IN (SELECT value FROM json_each(?)) ORDER BY track, ts") : NULL;
    if (!js) rc = ERR_NOMEM;
    else if (!s) rc = ERR_DB;
    if (!rc) sqlite3_bind_text(s, 1, js, -1, SQLITE_STATIC);
    while (!rc && sqlite3_step(s) == SQLITE_ROW)
        rc = an_tl_add(a, &a->tl, (long)sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1), sqlite3_column_double(s, 2),
                    (uint32_t)sqlite3_column_int64(s, 3), sqlite3_column_double(s, 4));
    sqlite3_finalize(s);
    free(js);
    return rc ? rc : an_tl_flush(a, &a->tl);
}

json_t *an_timeline_doc(A *a, json_t *phases, json_t *gaps) {
    json_t *tracks = json_array();
    for (size_t i = 0; i < a->t->ntracks; i++) {
        track_info *ti = &a->t->tracks[i];
        char label[160];
        /* The id whole, never cut: it is the key /events?track= looks a track up by, and
         * two threads whose ids shared a 95-byte cut were one id (pid and tid are strings
         * of any length in a Kineto trace). The label is for the eye and is cut. */
        json_t *id;
        if (ti->gpu) {
            id = json_sprintf("gpu:%lld:%lld", ti->device, ti->stream);
            snprintf(label, sizeof label, "GPU %lld stream %lld", ti->device, ti->stream);
        } else {
            id = json_sprintf("cpu:%s:%s", ti->pid, ti->tid);
            utf8_snprintf(label, sizeof label, "thread %s (pid %s)", ti->tid, ti->pid);
        }
        json_t *tr = json_pack("{s:I,s:o,s:s,s:s,s:s,s:s,s:I}", "index", (json_int_t)i, "id", id, "kind", ti->gpu ? "gpu" : "cpu",
                               "label", label, "pid", ti->pid, "tid", ti->tid, "events", ti->events);
        if (json_array_append_new(tracks, tr)) { /* out of memory: no document rather than one missing a track */
            json_decref(tracks);
            json_decref(phases);
            json_decref(gaps);
            return NULL;
        }
    }
    return json_pack("{s:f,s:f,s:i,s:o,s:o,s:o}", "start_us", a->t->start_us, "end_us", a->t->end_us, "buckets", TL_BUCKETS,
                     "tracks", tracks, "phases", phases, "gaps", gaps);
}

