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
 *    CUDA total of every op above; a call with no op around it keeps the time itself.
 *    Each GPU activity counts once as self, so self CUDA sums to the GPU time.
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

#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/mono.h"
#include "analysis/report.h"
#include "lib/tlblob.h"
#include "lib/log.h"
#include "lib/vec.h"
#include "scratch_sql.h" /* generated from analysis/scratch.sql */

typedef struct frame {
    int cls;
    long name, kind, shapes;
    double ts, te, dur, child; /* dur as in the trace: te - ts loses digits at epoch-us magnitudes */
    double cuda_total, self_cuda;
    long long cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
    long long kernels;
    double kernel_us;
} frame;

typedef struct agg {
    int grouping;
    long name, kind, shapes;
    long long calls;
    double cpu_total, self_cpu, cuda_total, self_cuda;
    long long cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
} agg;

typedef struct phase {
    long name;
    int gpu;
    long long count, kernels;
    double total, busy, kernel_us, first_ts;
} phase;

typedef struct tl_bucket { float busy; uint32_t count, top; float topdur; } tl_bucket;

/* A timeline track being bucketed (tl_add). */
typedef struct tlacc {
    tl_bucket *b;                  /* TL_BUCKETS */
    double ue;                     /* end of the busy union so far */
    long track;                    /* -1: none open */
} tlacc;

typedef struct A {
    trace_ctx *t;
    sqlite3 *db;
    char *err;
    size_t errlen;
    intern *keys;           /* agg keys -> index */
    agg *aggs;
    size_t naggs, capaggs;
    intern *pkeys;          /* phase keys -> index */
    phase *phases;
    size_t nphases, capphases;
    sqlite3_stmt *busy_q, *kbusy_q;
    long ua_kind;           /* string id of "user_annotation", -1 if absent */
    long kernel_kind, memcpy_kind, memset_kind; /* of "kernel", "gpu_memcpy", "gpu_memset" (gpu_job) */
    double wall;
    sqlite3_stmt *tl_ins;          /* INSERT INTO scratch.tlb */
    unsigned char *tl_blob, *tl_packed; /* TL_BLOB_RAW each: a track's records, raw and packed */
    double tl_t0, tl_w;            /* session start, bucket width */
    tlacc tl;                      /* the accumulator of timeline_buckets and host_walk */
} A;

static int dberr(A *a) {
    snprintf(a->err, a->errlen, "analysis failed: %s", sqlite3_errmsg(a->db));
    return ERR_DB;
}
static int run(A *a, const char *sql) {
    return sqlite3_exec(a->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : dberr(a);
}
static sqlite3_stmt *prep(A *a, const char *sql) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(a->db, sql, -1, &s, NULL) != SQLITE_OK) {
        dberr(a);
        return NULL;
    }
    return s;
}
static const char *str(A *a, long id) {
    const char *s = id >= 0 ? intern_str(a->t->strs, id) : NULL;
    return s ? s : "";
}

/* ---- operator aggregation ---- */

static agg *agg_for(A *a, int grouping, long kind, long name, long shapes) {
    /* The key's bytes, not text: printing it was most of pop_frame (1,500 instructions a call). */
    long key[4] = {grouping, kind, name, grouping ? shapes : -2};
    long i = intern_id(a->keys, (const char *)key, sizeof key);
    if (i < 0 || VEC_RESERVE(a->aggs, a->capaggs, (size_t)i + 1, 256)) return NULL;
    if ((size_t)i == a->naggs) {
        agg *g = &a->aggs[a->naggs++];
        g->grouping = grouping;
        g->kind = kind;
        g->name = name;
        g->shapes = grouping ? shapes : -1;
    }
    return &a->aggs[i];
}

static phase *phase_for(A *a, long name, int gpu) {
    char key[48];
    int n = snprintf(key, sizeof key, "%d|%ld", gpu, name);
    long i = intern_id(a->pkeys, key, (size_t)n);
    if (i < 0 || VEC_RESERVE(a->phases, a->capphases, (size_t)i + 1, 32)) return NULL;
    if ((size_t)i == a->nphases) {
        phase *p = &a->phases[a->nphases++];
        p->name = name;
        p->gpu = gpu;
        p->first_ts = INFINITY;
    }
    return &a->phases[i];
}

/* The merged GPU intervals of scratch.busy / kbusy: rows (s0, data), data BUSY_BLOCK
 * triples (s, e, cum = busy before s) at most, s0 the first s; s strictly increases
 * across the table. Why blocks: a row per interval was an INSERT per GPU activity (two
 * tables: 230k rows, 200 ms at 300 MB), and a lookup only needs the row holding t. */
#define BUSY_BLOCK 256

/* The row of table t (busy or kbusy) that holds time ?: busy_before's statement. */
#define BUSY_SQL(t) "SELECT data FROM scratch." t " WHERE s0 <= ? ORDER BY s0 DESC LIMIT 1"

/* GPU busy time in [-inf, t] from q (a BUSY_SQL statement). */
static double busy_before(sqlite3_stmt *q, double t) {
    double v = 0, iv[BUSY_BLOCK * 3];
    sqlite3_bind_double(q, 1, t);
    if (sqlite3_step(q) == SQLITE_ROW) {
        size_t bytes = (size_t)sqlite3_column_bytes(q, 0), n = bytes / sizeof(double[3]);
        if (n > BUSY_BLOCK) n = BUSY_BLOCK;
        if (n) memcpy(iv, sqlite3_column_blob(q, 0), n * sizeof(double[3])); /* NULL for an empty blob */
        size_t lo = 0, hi = n; /* the last interval with s <= t: iv[0] has it (s0 <= t) */
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (iv[3 * mid] <= t) lo = mid;
            else hi = mid;
        }
        if (n) {
            double s = iv[3 * lo], e = iv[3 * lo + 1], cum = iv[3 * lo + 2];
            v = cum + (t < e ? t - s : e - s);
        }
    }
    sqlite3_reset(q);
    return v;
}
static double busy_in(sqlite3_stmt *q, double ts, double te) {
    double b = busy_before(q, te) - busy_before(q, ts);
    return b > 0 ? b : 0;
}

static int pop_frame(A *a, frame *stack, int *depth) {
    frame *f = &stack[--*depth];
    double dur = f->dur;
    for (int g = 0; g < 2; g++) {
        agg *r = agg_for(a, g, f->kind, f->name, f->shapes);
        if (!r) return ERR_NOMEM;
        r->calls++;
        r->cpu_total += dur;
        r->self_cpu += dur - f->child;
        r->cuda_total += f->cuda_total;
        r->self_cuda += f->self_cuda;
        r->cpu_mem += f->cpu_mem;
        r->self_cpu_mem += f->self_cpu_mem;
        r->cuda_mem += f->cuda_mem;
        r->self_cuda_mem += f->self_cuda_mem;
    }
    if (*depth > 0) stack[*depth - 1].child += dur;
    if (f->cls == EV_HOST_OP && f->kind == a->ua_kind) {
        phase *p = phase_for(a, f->name, 0);
        if (!p) return ERR_NOMEM;
        p->count++;
        p->total += dur;
        p->busy += busy_in(a->busy_q, f->ts, f->te);
        p->kernels += f->kernels;
        p->kernel_us += f->kernel_us;
        if (f->ts < p->first_ts) p->first_ts = f->ts;
    }
    return 0;
}

/* ---- timeline buckets ---- */

/* Per track: union busy time, event count and the longest event's name per bucket, fed
 * in (track, ts) order. Why two feeders: the host tracks' rows come from host_walk's scan,
 * already in that order, which saves sorting the host events a second time (70 ms of
 * 95 at 100 MB); timeline_buckets feeds the rest. */

/* What tl_add and tl_flush need in a: the bucket grid, the accumulator a->tl (no track
 * open), the blob buffers and the statement that writes to scratch.tlb; tl_close frees it. */
static int tl_open(A *a) {
    a->tl_t0 = a->t->start_us;
    a->tl_w = a->wall > 0 ? a->wall / TL_BUCKETS : 1;
    a->tl.track = -1;
    a->tl.b = calloc(TL_BUCKETS, sizeof *a->tl.b);
    a->tl_blob = malloc(TL_BLOB_RAW);
    a->tl_packed = malloc(TL_BLOB_RAW);
    if (!a->tl.b || !a->tl_blob || !a->tl_packed) return ERR_NOMEM;
    a->tl_ins = prep(a, "INSERT INTO scratch.tlb VALUES (?, ?)");
    return a->tl_ins ? 0 : ERR_DB;
}

static void tl_close(A *a) {
    free(a->tl.b);
    free(a->tl_blob);
    free(a->tl_packed);
    sqlite3_finalize(a->tl_ins);
}

/* Writes t's open track (if any) to scratch.tlb. */
static int tl_flush(A *a, tlacc *t) {
    if (t->track < 0) return 0;
    for (int i = 0; i < TL_BUCKETS; i++) {
        memcpy(a->tl_blob + i * 12, &t->b[i].busy, 4);
        memcpy(a->tl_blob + i * 12 + 4, &t->b[i].count, 4);
        memcpy(a->tl_blob + i * 12 + 8, &t->b[i].top, 4);
    }
    /* deflated when that is smaller (tlblob.h): an idle track is ~200 B, not 48 KiB */
    size_t plen = tl_blob_pack(a->tl_blob, a->tl_packed);
    long long track = t->track;
    t->track = -1;
    sqlite3_bind_int64(a->tl_ins, 1, track);
    sqlite3_bind_blob(a->tl_ins, 2, a->tl_packed, (int)plen, SQLITE_STATIC);
    int rc = sqlite3_step(a->tl_ins) == SQLITE_DONE ? 0 : dberr(a);
    sqlite3_reset(a->tl_ins);
    return rc;
}

/* One event of track tr into t; a new track first writes the one before. */
static int tl_add(A *a, tlacc *t, long tr, double ts, double te, uint32_t name, double dur) {
    if (tr != t->track) {
        int rc = tl_flush(a, t);
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

#define MAX_DEPTH 1024

/* One host event as the walk takes it: its hrec (trace.h) and, for a runtime call, the
 * GPU time and count of its correlation (gcur). */
typedef struct hrow {
    int cls, devtype, has_g;
    long kind, name, track, shapes;
    double ts, te, dur, gd; /* gd, gn: the GPU time and count of a runtime call's correlation */
    long long bytes, gn, seq;
} hrow;

/* The GPU time and count of correlation ids: GCUR_SQL's groups, which SQLite reads from
 * the ev_corr index in corr order as they are stepped (no table, no sort). Why a cursor
 * that steps: the walk asks in each thread's file order, in which launches come by
 * increasing id, so one forward pass answers a thread; a point query per call (or a join
 * that sorts) was most of host_walk, and a gcorr table built first 100 ms of setup at
 * 300 MB. Invariant: no GPU activity has an id in [from, corr) (to the end when !row),
 * so an id there is answered without moving. */
#define GCUR_SQL "SELECT corr, TOTAL(dur), COUNT(*) FROM scratch.ev WHERE cls = 2 AND corr >= ? GROUP BY corr ORDER BY corr"
typedef struct gcur {
    sqlite3_stmt *s; /* GCUR_SQL */
    int row;         /* s is on a row: corr, d, n are it */
    long long from, corr, n;
    double d;
} gcur;

#define GCUR_STEPS 16 /* further ahead than this many rows: seek instead of stepping */

static int gcur_step(A *a, gcur *c) {
    int rc = sqlite3_step(c->s);
    c->row = rc == SQLITE_ROW;
    if (c->row) {
        c->corr = sqlite3_column_int64(c->s, 0);
        c->d = sqlite3_column_double(c->s, 1);
        c->n = sqlite3_column_int64(c->s, 2);
    }
    return c->row || rc == SQLITE_DONE ? 0 : dberr(a);
}

static int gcur_seek(A *a, gcur *c, long long corr) {
    sqlite3_reset(c->s);
    sqlite3_bind_int64(c->s, 1, corr);
    c->from = corr;
    return gcur_step(a, c);
}

/* Sets r's GPU time from correlation corr. */
static int gcur_get(A *a, gcur *c, long long corr, hrow *r) {
    int rc = 0;
    if (corr < c->from) rc = gcur_seek(a, c, corr);
    for (int i = 0; !rc && c->row && c->corr < corr; i++) {
        if (i == GCUR_STEPS) { rc = gcur_seek(a, c, corr); break; }
        c->from = c->corr + 1;
        rc = gcur_step(a, c);
    }
    r->has_g = !rc && c->row && c->corr == corr;
    r->gd = r->has_g ? c->d : 0;
    r->gn = r->has_g ? c->n : 0;
    return rc;
}

/* Record i of a scratch.hblk blob (memcpy: SQLite does not align blobs). */
static void hrec_at(const void *blob, size_t i, hrec *h) { memcpy(h, (const char *)blob + i * sizeof *h, sizeof *h); }

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
} walker;

/* The next row of the thread, in host_walk's order: the event nests in what is open. */
static int walk_row(A *a, walker *w, const hrow *r) {
    int rc = 0;
    double ts = r->ts, te = r->te;
    frame *stack = w->stack;
    /* Invariant: stack[] holds a chain of properly nested open events, outermost first. */
    while (w->depth > 0 && !rc && (ts >= stack[w->depth - 1].te || te > stack[w->depth - 1].te)) rc = pop_frame(a, stack, &w->depth);
    if (!rc && r->cls != EV_MEMORY && (size_t)r->track < a->t->ntracks && !a->t->tracks[r->track].gpu) /* GPU tracks: timeline_buckets */
        rc = tl_add(a, w->tl, r->track, ts, te, (uint32_t)r->name, r->dur);
    if (rc) return rc;
    if (r->cls == EV_MEMORY) {
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
    f->ts = ts;
    f->te = te;
    f->dur = r->dur;
    if (r->cls == EV_HOST_RT && r->has_g) {
        int self_done = 0;
        for (int i = w->depth - 2; i >= 0; i--) {
            if (stack[i].cls != EV_HOST_OP) continue;
            stack[i].cuda_total += r->gd;
            if (!self_done) { stack[i].self_cuda += r->gd; self_done = 1; }
            if (stack[i].kind == a->ua_kind) { stack[i].kernels += r->gn; stack[i].kernel_us += r->gd; }
        }
        if (!self_done) { f->self_cuda += r->gd; f->cuda_total += r->gd; }
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
    while (w->depth > 0 && !rc) rc = pop_frame(a, w->stack, &w->depth);
    w->nlate = w->nextlate = 0;
    return rc ? rc : tl_flush(a, w->tl);
}

/* A thread with more late rows than this is walked sorted by SQLite instead (walk_sorted):
 * what host_walk holds in memory stays bounded. */
#define WALK_LATE_MAX 65536
static long walk_late_max = WALK_LATE_MAX;
void analyze_set_late_max(long n) { walk_late_max = n >= 0 ? n : WALK_LATE_MAX; }

#define TRACK_BLOCKS_SQL "SELECT data FROM scratch.hblk WHERE track = ? ORDER BY rowid"

/* Calls fn(a, ctx, &h) for each hrec of track tr in file order; tb is TRACK_BLOCKS_SQL.
 * The first non-zero return stops it and is returned. */
static int track_recs(A *a, sqlite3_stmt *tb, long tr, int (*fn)(A *, void *, const hrec *), void *ctx) {
    int rc = 0, src = SQLITE_DONE;
    sqlite3_reset(tb);
    sqlite3_bind_int64(tb, 1, tr);
    while (!rc && (src = sqlite3_step(tb)) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(tb, 0);
        size_t n = (size_t)sqlite3_column_bytes(tb, 0) / sizeof(hrec);
        for (size_t i = 0; !rc && i < n; i++) {
            hrec h;
            hrec_at(blob, i, &h);
            rc = fn(a, ctx, &h);
        }
    }
    return !rc && src != SQLITE_DONE ? dberr(a) : rc;
}

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

/* The late rows of track tr (tb: TRACK_BLOCKS_SQL), sorted, into w. */
static int load_late(A *a, walker *w, gcur *c, sqlite3_stmt *tb, long tr) {
    walk_ctx x = {w, c, tr, NULL};
    int rc = track_recs(a, tb, tr, keep_late, &x);
    if (!rc && w->nlate) qsort(w->late, w->nlate, sizeof *w->late, hrow_cmp);
    return rc;
}

static int insert_sorted(A *a, void *ctx, const hrec *h) {
    sqlite3_stmt *ins = ((walk_ctx *)ctx)->ins;
    sqlite3_bind_double(ins, 1, h->ts);
    sqlite3_bind_double(ins, 2, h->te);
    sqlite3_bind_int64(ins, 3, h->seq);
    sqlite3_bind_blob(ins, 4, h, sizeof *h, SQLITE_TRANSIENT);
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : dberr(a);
    sqlite3_reset(ins);
    return rc;
}

/* Track tr walked in the order SQLite sorts its rows into (a temp table: it spills to
 * disk, so memory stays bounded however many rows came late). */
static int walk_sorted(A *a, walker *w, gcur *c, sqlite3_stmt *tb, long tr) {
    int rc = run(a, "CREATE TEMP TABLE IF NOT EXISTS hsort(ts REAL, te REAL, seq INT, rec BLOB); DELETE FROM temp.hsort;");
    sqlite3_stmt *ins = rc ? NULL : prep(a, "INSERT INTO temp.hsort VALUES (?, ?, ?, ?)");
    sqlite3_stmt *sel = rc ? NULL : prep(a, "SELECT rec FROM temp.hsort ORDER BY ts, te DESC, seq");
    if (!rc && (!ins || !sel)) rc = ERR_DB;
    walk_ctx x = {w, c, tr, ins};
    if (!rc) rc = track_recs(a, tb, tr, insert_sorted, &x);
    int src = SQLITE_DONE;
    while (!rc && (src = sqlite3_step(sel)) == SQLITE_ROW) {
        hrec h;
        hrow r;
        if (sqlite3_column_bytes(sel, 0) != (int)sizeof h) { rc = ERR_INTERNAL; break; }
        hrec_at(sqlite3_column_blob(sel, 0), 0, &h);
        rc = hrow_of(a, c, tr, &h, &r);
        if (!rc) rc = walk_row(a, w, &r);
    }
    if (!rc && src != SQLITE_DONE) rc = dberr(a);
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    return rc ? rc : run(a, "DELETE FROM temp.hsort");
}

/* The key_averages() walk over host events, thread by thread. Each thread's rows must come
 * by ts, the longer first on a tie. Why not simply sort them: a trace mostly writes each
 * thread's events in that order already (the current Kineto schema's real traces here
 * have 0 to 7 late rows per thread in up to 129,000; the 2021 schema writes children
 * first: thousands), and the rows are in scratch.hblk in file order. So the rows that came
 * in order are read as stored and the few late ones (load.c marks them) are merged in
 * from a small sorted list; a thread with too many late rows is sorted by SQLite. */
static int host_walk(A *a) {
    walker w;
    memset(&w, 0, sizeof w);
    w.cap = 64;
    w.stack = malloc((size_t)w.cap * sizeof *w.stack);
    w.tl = &a->tl;
    gcur c;
    memset(&c, 0, sizeof c);
    sqlite3_stmt *blk = prep(a, "SELECT track, data FROM scratch.hblk ORDER BY track, rowid");
    sqlite3_stmt *tb = blk ? prep(a, TRACK_BLOCKS_SQL) : NULL;
    c.s = tb ? prep(a, GCUR_SQL) : NULL;
    int rc = !w.stack ? ERR_NOMEM : !c.s ? ERR_DB : 0, src = SQLITE_DONE, skip = 0;
    if (!rc) rc = gcur_seek(a, &c, INT64_MIN);
    long track = -1;
    while (!rc && (src = sqlite3_step(blk)) == SQLITE_ROW) {
        long tr = (long)sqlite3_column_int64(blk, 0);
        if (tr < 0 || (size_t)tr >= a->t->ntracks) { rc = ERR_INTERNAL; break; }
        if (tr != track) {
            if (track >= 0 && !skip && (rc = walk_end(a, &w))) break;
            track = tr;
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
    if (!rc && src != SQLITE_DONE) rc = dberr(a);
    if (!rc && track >= 0 && !skip) rc = walk_end(a, &w);
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) {
        long long late = 0;
        for (size_t i = 0; i < a->t->ntracks; i++) late += a->t->tracks[i].host_late;
        log_line("debug", "analysis", "step=host_order ms=0 late=%lld", late);
    }
    free(w.stack);
    free(w.late);
    sqlite3_finalize(blk);
    sqlite3_finalize(tb);
    sqlite3_finalize(c.s);
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
    int rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : dberr(a);
    sqlite3_reset(ins);
    return rc;
}

static int gpu_track_host_ops(A *a) {
    sqlite3_stmt *tb = NULL, *ins = NULL;
    int rc = 0;
    for (size_t tr = 0; !rc && tr < a->t->ntracks; tr++) {
        if (!a->t->tracks[tr].gpu || !a->t->tracks[tr].host_seen) continue;
        if (!tb) {
            tb = prep(a, TRACK_BLOCKS_SQL);
            ins = tb ? prep(a, "INSERT INTO scratch.ev(cls, kind, name, track, ts, te, dur, shapes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)") : NULL;
            if (!ins) { rc = ERR_DB; break; }
        }
        walk_ctx x = {NULL, NULL, (long)tr, ins};
        rc = track_recs(a, tb, (long)tr, copy_host_op, &x);
    }
    sqlite3_finalize(tb);
    sqlite3_finalize(ins);
    return rc;
}

/* (cls, kind, name) order: the order GROUP BY gave these rows when SQL summed them. */
static int gpu_agg_cmp(const void *x, const void *y) {
    const gpu_agg *p = x, *q = y;
    if (p->cls != q->cls) return p->cls < q->cls ? -1 : 1;
    if (p->kind != q->kind) return p->kind < q->kind ? -1 : 1;
    return p->name < q->name ? -1 : p->name > q->name;
}

/* GPU rows of the operator table and the kernel table, from the loader's sums (trace.h). */
static int gpu_rows(A *a) {
    sqlite3_stmt *ins = prep(a, "INSERT INTO scratch.kern VALUES (?,?,?,?,?,?,?,?,?,?)");
    if (!ins) return ERR_DB;
    if (a->t->ngpu_aggs) qsort(a->t->gpu_aggs, a->t->ngpu_aggs, sizeof *a->t->gpu_aggs, gpu_agg_cmp); /* NULL when none */
    int rc = 0;
    for (size_t i = 0; i < a->t->ngpu_aggs && !rc; i++) {
        const gpu_agg *k = &a->t->gpu_aggs[i];
        for (int g = 0; g < 2; g++) {
            agg *r = agg_for(a, g, k->kind, k->name, -1);
            if (!r) { rc = ERR_NOMEM; break; }
            r->calls += k->calls;
            r->cuda_total += k->total;
            if (k->cls == EV_GPU) r->self_cuda += k->total;
        }
        if (rc || k->cls != EV_GPU) continue;
        sqlite3_bind_text(ins, 1, str(a, k->name), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, str(a, k->kind), -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 3, k->calls);
        sqlite3_bind_double(ins, 4, k->total);
        sqlite3_bind_double(ins, 5, k->min);
        sqlite3_bind_double(ins, 6, k->max);
        if (k->grid >= 0) sqlite3_bind_text(ins, 7, str(a, k->grid), -1, SQLITE_STATIC);
        if (k->block >= 0) sqlite3_bind_text(ins, 8, str(a, k->block), -1, SQLITE_STATIC);
        if (k->regs >= 0) sqlite3_bind_int64(ins, 9, k->regs);
        if (k->smem >= 0) sqlite3_bind_int64(ins, 10, k->smem);
        if (sqlite3_step(ins) != SQLITE_DONE) rc = dberr(a);
        sqlite3_reset(ins);
        sqlite3_clear_bindings(ins);
    }
    sqlite3_finalize(ins);
    return rc;
}

static int write_ops(A *a) {
    sqlite3_stmt *ins = prep(a, "INSERT INTO scratch.ops VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!ins) return ERR_DB;
    int rc = 0;
    for (size_t i = 0; i < a->naggs && !rc; i++) {
        agg *g = &a->aggs[i];
        sqlite3_bind_int(ins, 1, g->grouping);
        sqlite3_bind_text(ins, 2, str(a, g->name), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, str(a, g->kind), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 4, g->shapes >= 0 ? str(a, g->shapes) : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 5, g->calls);
        sqlite3_bind_double(ins, 6, g->cpu_total);
        sqlite3_bind_double(ins, 7, g->self_cpu);
        sqlite3_bind_double(ins, 8, g->cuda_total);
        sqlite3_bind_double(ins, 9, g->self_cuda);
        sqlite3_bind_int64(ins, 10, g->cpu_mem);
        sqlite3_bind_int64(ins, 11, g->self_cpu_mem);
        sqlite3_bind_int64(ins, 12, g->cuda_mem);
        sqlite3_bind_int64(ins, 13, g->self_cuda_mem);
        if (sqlite3_step(ins) != SQLITE_DONE) rc = dberr(a);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    return rc;
}

/* The GPU activity in ts order. One device's (dev = ?1) reads the ev_gpu index; several
 * devices need ev_gpu_ts, which setup builds only then (a sort of every GPU row: 75 ms at
 * 300 MB). */
#define GPU_BY_TS_ONE "SELECT ts, te, kind FROM scratch.ev WHERE cls = 2 AND dev = ?1 ORDER BY ts"
#define GPU_BY_TS_ALL "SELECT ts, te, kind FROM scratch.ev WHERE cls = 2 ORDER BY ts"

/* A union of intervals fed in start order, written as BUSY_BLOCK blocks (busy_before):
 * s strictly increases, so the tables are keyed by s0 and fill by appending. */
typedef struct merger {
    sqlite3_stmt *ins;
    double cs, ce, cum;
    int have, n;
    double blk[BUSY_BLOCK * 3];
} merger;

static int merger_flush(A *a, merger *m) {
    if (!m->n) return 0;
    sqlite3_bind_double(m->ins, 1, m->blk[0]);
    sqlite3_bind_blob(m->ins, 2, m->blk, (int)((size_t)m->n * sizeof(double[3])), SQLITE_STATIC);
    int rc = sqlite3_step(m->ins) == SQLITE_DONE ? 0 : dberr(a);
    sqlite3_reset(m->ins);
    m->n = 0;
    return rc;
}

/* The interval held in m (cs, ce) into the block. */
static int merger_put(A *a, merger *m) {
    double *p = &m->blk[3 * m->n++];
    p[0] = m->cs;
    p[1] = m->ce;
    p[2] = m->cum;
    m->cum += m->ce - m->cs;
    return m->n == BUSY_BLOCK ? merger_flush(a, m) : 0;
}

static int merger_add(A *a, merger *m, double ts, double te) {
    if (m->have && ts <= m->ce) {
        if (te > m->ce) m->ce = te;
        return 0;
    }
    int rc = m->have ? merger_put(a, m) : 0;
    m->cs = ts;
    m->ce = te;
    m->have = 1;
    return rc;
}

/* One pass over the GPU activity by ts: the union of all of it into scratch.busy (*total:
 * its busy time) and of the kernels (kind kernel_kind) into scratch.kbusy. Why one pass:
 * two, one per table, read every GPU row twice (the second 40-60 ms at 300 MB). */
static int busy_merges(A *a, int ndev, long long dev, long kernel_kind, double *total) {
    sqlite3_stmt *s = prep(a, ndev > 1 ? GPU_BY_TS_ALL : GPU_BY_TS_ONE);
    merger *all = calloc(2, sizeof *all), *k = all + 1; /* 12 KiB each */
    if (!all) { sqlite3_finalize(s); return ERR_NOMEM; }
    all->ins = prep(a, "INSERT INTO scratch.busy VALUES (?, ?)");
    k->ins = prep(a, "INSERT INTO scratch.kbusy VALUES (?, ?)");
    int rc = s && all->ins && k->ins ? 0 : ERR_DB, src = SQLITE_DONE;
    if (!rc && ndev <= 1) sqlite3_bind_int64(s, 1, dev);
    while (!rc && (src = sqlite3_step(s)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 0), te = sqlite3_column_double(s, 1);
        rc = merger_add(a, all, ts, te);
        if (!rc && sqlite3_column_int64(s, 2) == kernel_kind) rc = merger_add(a, k, ts, te);
    }
    if (!rc && src != SQLITE_DONE) rc = dberr(a);
    for (merger *m = all; !rc && m <= k; m++)
        if (m->have && !(rc = merger_put(a, m))) rc = merger_flush(a, m);
    *total = all->cum;
    sqlite3_finalize(s);
    sqlite3_finalize(all->ins);
    sqlite3_finalize(k->ins);
    free(all);
    return rc;
}

/* GPU-side phases: gpu_user_annotation instances. */
static int gpu_phases(A *a) {
    sqlite3_stmt *s = prep(a, "SELECT name, dev, ts, te, dur FROM scratch.ev WHERE cls = 4");
    sqlite3_stmt *k = prep(a, "SELECT COUNT(*), TOTAL(dur) FROM scratch.ev WHERE cls = 2 AND dev = ? AND ts >= ? AND ts < ?");
    if (!s || !k) { sqlite3_finalize(s); sqlite3_finalize(k); return ERR_DB; }
    int rc = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 2), te = sqlite3_column_double(s, 3);
        phase *p = phase_for(a, (long)sqlite3_column_int64(s, 0), 1);
        if (!p) { rc = ERR_NOMEM; break; }
        p->count++;
        p->total += sqlite3_column_double(s, 4);
        p->busy += busy_in(a->busy_q, ts, te);
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

static int write_phases(A *a, json_t *tl_phases) {
    sqlite3_stmt *ins = prep(a, "INSERT INTO scratch.ph VALUES (?,?,?,?,?,?,?,?)");
    if (!ins) return ERR_DB;
    int rc = 0;
    for (size_t i = 0; i < a->nphases && !rc; i++) {
        phase *p = &a->phases[i];
        sqlite3_bind_text(ins, 1, str(a, p->name), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, p->gpu ? "gpu" : "cpu", -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 3, p->count);
        sqlite3_bind_double(ins, 4, p->total);
        sqlite3_bind_double(ins, 5, p->busy);
        sqlite3_bind_int64(ins, 6, p->kernels);
        sqlite3_bind_double(ins, 7, p->kernel_us);
        sqlite3_bind_double(ins, 8, isfinite(p->first_ts) ? p->first_ts : 0);
        if (sqlite3_step(ins) != SQLITE_DONE) rc = dberr(a);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    /* Timeline bands: the instances of CPU phases, at most 5,000 (the longest first). */
    sqlite3_stmt *s = prep(a, "SELECT name, ts, dur FROM scratch.ev WHERE cls IN (0, 4) AND kind = ?"
                              " ORDER BY dur DESC, ts LIMIT 5000");
    if (!s) return ERR_DB;
    sqlite3_bind_int64(s, 1, a->ua_kind);
    while (!rc && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(tl_phases, json_pack("{s:s,s:f,s:f}", "name", str(a, (long)sqlite3_column_int64(s, 0)),
                                                   "ts_us", sqlite3_column_double(s, 1), "dur_us", sqlite3_column_double(s, 2)));
    sqlite3_finalize(s);
    return rc;
}

/* ---- GPU facts ---- */

typedef struct gap { double start, dur; } gap;

static void keep_largest(gap *top, int *ntop, int max, double start, double dur) {
    if (*ntop < max) top[(*ntop)++] = (gap){start, dur};
    else if (dur > top[max - 1].dur) top[max - 1] = (gap){start, dur};
    else return;
    for (int i = *ntop - 1; i > 0 && top[i].dur > top[i - 1].dur; i--) {
        gap t = top[i]; top[i] = top[i - 1]; top[i - 1] = t;
    }
}

/* What the host was doing in the middle of each of n gaps: the innermost host op and
 * runtime call spanning it (the shortest; on a tie the earliest, then the first in file
 * order). One scan of the host events for all of them: a query per gap and class cost a
 * scan each (12 ms at 100 MB, ten per device). names[2 * i] is gap i's op, names[2 * i + 1]
 * its call; -1 none. */
static int host_at(A *a, const double *mid, int n, long *names) {
    struct { double dur, ts; long long seq; } best[10];
    for (int i = 0; i < 2 * n; i++) names[i] = -1;
    if (n == 0) return 0;
    double lo = mid[0], hi = mid[0];
    for (int i = 1; i < n; i++) {
        if (mid[i] < lo) lo = mid[i];
        if (mid[i] > hi) hi = mid[i];
    }
    sqlite3_stmt *s = prep(a, "SELECT data FROM scratch.hblk");
    if (!s) return ERR_DB;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(s, 0);
        size_t nb = (size_t)sqlite3_column_bytes(s, 0) / sizeof(hrec);
        for (size_t j = 0; j < nb; j++) {
            hrec h;
            hrec_at(blob, j, &h);
            if ((h.cls != EV_HOST_OP && h.cls != EV_HOST_RT) || h.ts > hi || h.te < lo) continue;
            for (int i = 0; i < n; i++) {
                int k = 2 * i + (h.cls == EV_HOST_RT);
                if (h.ts > mid[i] || h.te < mid[i]) continue;
                if (names[k] >= 0 && (h.dur > best[k].dur || (h.dur == best[k].dur && (h.ts > best[k].ts ||
                                                                                        (h.ts == best[k].ts && h.seq > best[k].seq)))))
                    continue;
                names[k] = h.name;
                best[k].dur = h.dur;
                best[k].ts = h.ts;
                best[k].seq = h.seq;
            }
        }
    }
    sqlite3_finalize(s);
    return 0;
}

static json_t *name_or_null(A *a, long id) { return id >= 0 ? json_string(str(a, id)) : json_null(); }

static json_t *device_facts(A *a, long long dev, json_t *gaps_out) {
    sqlite3_stmt *s = prep(a, "SELECT ts, te FROM scratch.ev WHERE cls = 2 AND dev = ? ORDER BY ts");
    if (!s) return NULL;
    sqlite3_bind_int64(s, 1, dev);
    double cs = 0, ce = -INFINITY, busy = 0, gap_total = 0;
    long long ngaps = 0;
    int have = 0, ntop = 0;
    gap top[5];
    while (sqlite3_step(s) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 0), te = sqlite3_column_double(s, 1);
        if (have && ts <= ce) { if (te > ce) ce = te; continue; }
        if (have) {
            busy += ce - cs;
            double g = ts - ce;
            if (g >= GAP_MIN_US) {
                ngaps++;
                gap_total += g;
                keep_largest(top, &ntop, 5, ce, g);
            }
        }
        cs = ts; ce = te; have = 1;
    }
    if (have) busy += ce - cs;
    sqlite3_finalize(s);
    json_t *largest = json_array();
    double mid[5];
    long names[10];
    for (int i = 0; i < ntop; i++) mid[i] = top[i].start + top[i].dur / 2;
    if (host_at(a, mid, ntop, names)) ntop = 0;
    for (int i = 0; i < ntop; i++) {
        json_array_append_new(largest, json_pack("{s:f,s:f,s:o,s:o}", "start_us", top[i].start, "dur_us", top[i].dur,
                                                 "host_op", name_or_null(a, names[2 * i]), "host_call", name_or_null(a, names[2 * i + 1])));
        json_array_append_new(gaps_out, json_pack("{s:I,s:f,s:f}", "device", dev, "ts_us", top[i].start, "dur_us", top[i].dur));
    }
    json_t *streams = json_array();
    sqlite3_stmt *st = prep(a, "SELECT stream, ts, te FROM scratch.ev WHERE cls = 2 AND dev = ? ORDER BY stream, ts");
    if (st) {
        sqlite3_bind_int64(st, 1, dev);
        long long cur = 0, n = 0;
        double sbusy = 0, ss = 0, se = -INFINITY;
        int any = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            long long stream = sqlite3_column_int64(st, 0);
            double ts = sqlite3_column_double(st, 1), te = sqlite3_column_double(st, 2);
            if (any && stream != cur) {
                sbusy += se - ss;
                json_array_append_new(streams, json_pack("{s:I,s:f,s:I}", "stream", cur, "busy_us", sbusy, "events", n));
                sbusy = 0; n = 0; any = 0;
            }
            if (any && ts <= se) { if (te > se) se = te; n++; continue; }
            if (any) sbusy += se - ss;
            ss = ts; se = te; cur = stream; any = 1; n++;
        }
        if (any) {
            sbusy += se - ss;
            json_array_append_new(streams, json_pack("{s:I,s:f,s:I}", "stream", cur, "busy_us", sbusy, "events", n));
        }
        sqlite3_finalize(st);
    }
    double idle = a->wall - busy;
    if (idle < 0) idle = 0;
    return json_pack("{s:I,s:f,s:f,s:f,s:o,s:{s:I,s:f,s:o}}", "device", dev, "busy_us", busy, "idle_us", idle,
                     "idle_fraction", a->wall > 0 ? idle / a->wall : 0.0, "streams", streams,
                     "gaps", "count", ngaps, "total_us", gap_total, "largest", largest);
}

static double quantile(A *a, long long n, double q) {
    if (n <= 0) return 0;
    long long k = (long long)ceil(q * (double)n) - 1;
    if (k < 0) k = 0;
    sqlite3_stmt *s = prep(a, "SELECT d FROM temp.delays ORDER BY d LIMIT 1 OFFSET ?");
    double v = 0;
    if (!s) return 0;
    sqlite3_bind_int64(s, 1, k);
    if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    return v;
}

static json_t *copies_facts(A *a) {
    json_t *by = json_object();
    sqlite3_stmt *s = prep(a,
        "SELECT g.name, g.kind, g.ts, g.te, g.bytes, (SELECT r.name FROM scratch.ev r WHERE r.corr = g.corr AND r.cls = 1 LIMIT 1)"
        ", g.dur FROM scratch.ev g WHERE g.cls = 2 AND g.kind IN (?1, ?2)");
    if (!s) return by;
    /* Only copies and memsets: the runtime-name subquery for every kernel was 70 ms at 100 MB. */
    sqlite3_bind_int64(s, 1, a->memcpy_kind);
    sqlite3_bind_int64(s, 2, a->memset_kind);
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *kind = str(a, (long)sqlite3_column_int64(s, 1));
        if (strcmp(kind, "gpu_memcpy") && strcmp(kind, "gpu_memset")) continue;
        char dir[64];
        cuda_copy_direction(str(a, (long)sqlite3_column_int64(s, 0)), kind, dir, sizeof dir);
        double ts = sqlite3_column_double(s, 2), te = sqlite3_column_double(s, 3), dur = sqlite3_column_double(s, 6);
        const char *rt = sqlite3_column_type(s, 5) == SQLITE_NULL ? "" : str(a, (long)sqlite3_column_int64(s, 5));
        /* On the critical path: no kernel ran meanwhile, or the host call waited for it. */
        int critical = busy_in(a->kbusy_q, ts, te) <= 0 || cuda_is_sync_call(rt);
        json_t *d = json_object_get(by, dir);
        if (!d) {
            d = json_pack("{s:s,s:I,s:I,s:f,s:I,s:f}", "direction", dir, "count", (json_int_t)0, "bytes", (json_int_t)0,
                          "total_us", 0.0, "critical_path_count", (json_int_t)0, "critical_path_us", 0.0);
            json_object_set_new(by, dir, d);
        }
        json_object_set_new(d, "count", json_integer(json_integer_value(json_object_get(d, "count")) + 1));
        json_object_set_new(d, "bytes", json_integer(json_integer_value(json_object_get(d, "bytes")) + sqlite3_column_int64(s, 4)));
        json_object_set_new(d, "total_us", json_real(json_real_value(json_object_get(d, "total_us")) + dur));
        if (critical) {
            json_object_set_new(d, "critical_path_count", json_integer(json_integer_value(json_object_get(d, "critical_path_count")) + 1));
            json_object_set_new(d, "critical_path_us", json_real(json_real_value(json_object_get(d, "critical_path_us")) + dur));
        }
    }
    sqlite3_finalize(s);
    json_t *arr = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(by, k, v) json_array_append(arr, v);
    json_decref(by);
    return arr;
}

static json_t *gpu_facts(A *a, double gpu_busy, json_t *gaps_out) {
    json_t *devices = json_array();
    sqlite3_stmt *s = prep(a, "SELECT DISTINCT dev FROM scratch.ev WHERE cls = 2 ORDER BY dev");
    if (s) {
        while (sqlite3_step(s) == SQLITE_ROW) {
            json_t *d = device_facts(a, sqlite3_column_int64(s, 0), gaps_out);
            if (d) json_array_append_new(devices, d);
        }
        sqlite3_finalize(s);
    }
    long long n = 0;
    double mean = 0;
    /* temp: gpu_facts runs on gpu_job's connection, which only reads the scratch file */
    if (!run(a, "CREATE TEMP TABLE delays AS SELECT g.ts - r.ts AS d FROM scratch.ev r"
                " JOIN scratch.ev g ON g.cls = 2 AND g.corr = r.corr WHERE r.cls = 1 AND r.corr IS NOT NULL;"
                "CREATE INDEX temp.delays_d ON delays(d);")) {
        sqlite3_stmt *c = prep(a, "SELECT COUNT(*), TOTAL(d) FROM temp.delays");
        if (c && sqlite3_step(c) == SQLITE_ROW) {
            n = sqlite3_column_int64(c, 0);
            mean = n ? sqlite3_column_double(c, 1) / (double)n : 0;
        }
        sqlite3_finalize(c);
    }
    long long nk = 0, nshort = 0;
    double kt = 0, short_t = 0;
    sqlite3_stmt *k = prep(a, "SELECT COUNT(*), TOTAL(dur), TOTAL(dur < ?1), TOTAL(CASE WHEN dur < ?1 THEN dur END)"
                              " FROM scratch.ev WHERE cls = 2 AND kind = ?2");
    if (k) {
        sqlite3_bind_double(k, 1, SHORT_KERNEL_US);
        sqlite3_bind_int64(k, 2, a->kernel_kind);
        if (sqlite3_step(k) == SQLITE_ROW) {
            nk = sqlite3_column_int64(k, 0);
            kt = sqlite3_column_double(k, 1);
            nshort = (long long)sqlite3_column_double(k, 2);
            short_t = sqlite3_column_double(k, 3);
        }
        sqlite3_finalize(k);
    }
    int any_gpu = json_array_size(devices) > 0;
    json_t *idle = any_gpu && a->wall > 0 ? json_real(1.0 - gpu_busy / a->wall) : json_null();
    return json_pack("{s:f,s:f,s:o,s:o,s:{s:I,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:I,s:f},s:o}",
                     "wall_us", a->wall, "gpu_busy_us", gpu_busy, "gpu_idle_fraction", idle, "devices", devices,
                     "launch", "count", n, "delay_mean_us", mean, "delay_p50_us", quantile(a, n, 0.5),
                     "delay_p99_us", quantile(a, n, 0.99), "short_kernel_threshold_us", SHORT_KERNEL_US,
                     "short_kernels", nshort, "short_kernel_share", nk ? (double)nshort / (double)nk : 0.0,
                     "short_kernel_time_share", kt > 0 ? short_t / kt : 0.0, "kernels", nk, "kernel_us", kt,
                     "copies", copies_facts(a));
}

/* FIRSTPASS_TRACE_ANALYSIS=1 logs each step's wall time: how bench/ finds hot steps. */
#define STEP_BEGIN() double t0_ = mono_ms()
#define STEP_END(name) \
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) log_line("debug", "analysis", "step=%s ms=%.1f", name, mono_ms() - t0_)

/* ---- GPU facts on the second core ---- */

/* Why: after the stream, the analysis ran on one core while the other idled, and
 * gpu_facts (100 ms at 100 MB, 1.3 s at 1 GB) reads only what setup and merge_into have
 * written. So it runs on a thread of its own with a connection of its own that attaches
 * the same scratch file, while host_walk and the rest go on here. Its context is a copy
 * of the analysis's with its own connection, statements and error; the string table is
 * only read (the ids it needs were interned before it started). The scratch writes of this
 * side wait for its reads, if ever they must spill, through the busy timeout. */
typedef struct gpu_job {
    A b;
    char err[256];
    double gpu_busy;
    json_t *gpu, *gaps;
    pthread_t th;
    int started, threaded;
} gpu_job;

static void *gpu_job_run(void *arg) {
    gpu_job *j = arg;
    STEP_BEGIN();
    j->gpu = gpu_facts(&j->b, j->gpu_busy, j->gaps);
    STEP_END("gpu_facts");
    return NULL;
}

/* Opens the job's connection and starts it (or runs it here when no thread can start). */
static int gpu_job_start(A *a, gpu_job *j, double gpu_busy) {
    memset(j, 0, sizeof *j);
    j->b.t = a->t;
    j->b.wall = a->wall;
    j->b.ua_kind = a->ua_kind;
    j->b.kernel_kind = a->kernel_kind;
    j->b.memcpy_kind = a->memcpy_kind;
    j->b.memset_kind = a->memset_kind;
    j->b.err = j->err;
    j->b.errlen = sizeof j->err;
    j->gpu_busy = gpu_busy;
    j->gaps = json_array();
    if (!j->gaps) return ERR_NOMEM;
    sqlite3 *db = NULL;
    sqlite3_stmt *at = NULL;
    int ok = a->t->scratch_path && sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK &&
             sqlite3_busy_timeout(db, 30000) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "ATTACH ? AS scratch", -1, &at, NULL) == SQLITE_OK &&
             sqlite3_bind_text(at, 1, a->t->scratch_path, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(at) == SQLITE_DONE;
    sqlite3_finalize(at);
    j->b.db = db;
    if (!ok) {
        snprintf(a->err, a->errlen, "analysis failed: cannot open the scratch file again: %s", db ? sqlite3_errmsg(db) : "no memory");
        sqlite3_close(db);
        j->b.db = NULL;
        return ERR_DB;
    }
    j->b.kbusy_q = prep(&j->b, BUSY_SQL("kbusy"));
    if (!j->b.kbusy_q) {
        snprintf(a->err, a->errlen, "%s", j->err);
        return ERR_DB;
    }
    j->started = 1;
    j->threaded = pthread_create(&j->th, NULL, gpu_job_run, j) == 0;
    if (!j->threaded) gpu_job_run(j);
    return 0;
}

/* Waits for the job; hands over its facts and gaps (NULL when it failed). Always call
 * after gpu_job_start, even on an error path: it frees the job. */
static int gpu_job_finish(A *a, gpu_job *j, json_t **gpu, json_t **gaps) {
    if (j->threaded) pthread_join(j->th, NULL);
    int rc = 0;
    if (j->started && !j->gpu) rc = j->err[0] ? ERR_DB : ERR_NOMEM;
    if (rc && j->err[0] && !a->err[0]) snprintf(a->err, a->errlen, "%s", j->err);
    if (gpu) { *gpu = j->gpu; j->gpu = NULL; }
    if (gaps) { *gaps = j->gaps; j->gaps = NULL; }
    json_decref(j->gpu);
    json_decref(j->gaps);
    sqlite3_finalize(j->b.kbusy_q);
    sqlite3_close(j->b.db);
    memset(j, 0, sizeof *j);
    return rc;
}

/* ---- timeline ---- */

/* The timeline of the tracks host_walk did not feed (tl_wanted): those with GPU events,
 * all their classes, in one pass sorted by track and ts. Then the last open track. */
static int timeline_buckets(A *a) {
    int rc = 0;
    json_t *ids = json_array();
    for (size_t i = 0; i < a->t->ntracks; i++)
        if (a->t->tracks[i].gpu) json_array_append_new(ids, json_integer((json_int_t)i));
    char *js = json_dumps(ids, JSON_COMPACT);
    json_decref(ids);
    sqlite3_stmt *s = js ? prep(a, "SELECT track, ts, te, name, dur FROM scratch.ev WHERE cls IN (0, 1, 2, 4)"
                                   " AND track IN (SELECT value FROM json_each(?)) ORDER BY track, ts") : NULL;
    if (!js) rc = ERR_NOMEM;
    else if (!s) rc = ERR_DB;
    if (!rc) sqlite3_bind_text(s, 1, js, -1, SQLITE_STATIC);
    while (!rc && sqlite3_step(s) == SQLITE_ROW)
        rc = tl_add(a, &a->tl, (long)sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1), sqlite3_column_double(s, 2),
                    (uint32_t)sqlite3_column_int64(s, 3), sqlite3_column_double(s, 4));
    sqlite3_finalize(s);
    free(js);
    return rc ? rc : tl_flush(a, &a->tl);
}

static json_t *timeline_doc(A *a, json_t *phases, json_t *gaps) {
    json_t *tracks = json_array();
    for (size_t i = 0; i < a->t->ntracks; i++) {
        track_info *ti = &a->t->tracks[i];
        char id[96], label[160];
        if (ti->gpu) {
            snprintf(id, sizeof id, "gpu:%lld:%lld", ti->device, ti->stream);
            snprintf(label, sizeof label, "GPU %lld stream %lld", ti->device, ti->stream);
        } else {
            snprintf(id, sizeof id, "cpu:%s:%s", ti->pid, ti->tid);
            snprintf(label, sizeof label, "thread %s (pid %s)", ti->tid, ti->pid);
        }
        json_array_append_new(tracks, json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:I}", "index", (json_int_t)i, "id", id,
                                                "kind", ti->gpu ? "gpu" : "cpu", "label", label, "pid", ti->pid, "tid", ti->tid,
                                                "events", ti->events));
    }
    return json_pack("{s:f,s:f,s:i,s:o,s:o,s:o}", "start_us", a->t->start_us, "end_us", a->t->end_us, "buckets", TL_BUCKETS,
                     "tracks", tracks, "phases", phases, "gaps", gaps);
}

/* ---- summary ---- */

static json_t *summary_doc(A *a, json_t *gpu, json_t *report) {
    double self_cpu = 0, self_cuda = 0, cpu_total_top = 0;
    long long calls = 0;
    const agg *top = NULL;
    for (size_t i = 0; i < a->naggs; i++) {
        const agg *g = &a->aggs[i];
        if (g->grouping) continue;
        self_cpu += g->self_cpu;
        /* GPU rows hold each activity once; op rows repeat it as their self CUDA. */
        const char *kn = str(a, g->kind);
        if (!strcmp(kn, "kernel") || !strcmp(kn, "gpu_memcpy") || !strcmp(kn, "gpu_memset")) self_cuda += g->self_cuda;
        calls += g->calls;
        if (g->kind != a->ua_kind && strcmp(str(a, g->kind), "gpu_user_annotation") && g->cuda_total > 0 &&
            (!top || g->self_cuda > top->self_cuda))
            top = g;
        if (g->kind == a->ua_kind && g->cpu_total > cpu_total_top) cpu_total_top = g->cpu_total;
    }
    json_t *smells = json_array();
    json_t *sm;
    size_t i;
    json_array_foreach(json_object_get(report, "smells"), i, sm)
        if (json_is_true(json_object_get(sm, "fired"))) json_array_append(smells, json_object_get(sm, "id"));
    json_t *idle = json_object_get(gpu, "gpu_idle_fraction");
    return json_pack("{s:f,s:f,s:I,s:O,s:o,s:o}", "self_cpu_time_total_us", self_cpu, "self_cuda_time_total_us", self_cuda,
                     "calls", calls, "gpu_idle_fraction", idle ? idle : json_null(),
                     "top_cuda_operator", top ? json_string(str(a, top->name)) : json_null(), "smells", smells);
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
    const char *ua = "user_annotation";
    a.ua_kind = intern_id(t->strs, ua, strlen(ua));
    if (!isfinite(t->start_us)) { t->start_us = 0; t->end_us = 0; }
    a.wall = t->end_us - t->start_us;
    double gpu_busy = 0;
    int rc = !a.keys || !a.pkeys ? ERR_NOMEM : 0;
    if (!rc) rc = run(&a, "BEGIN");
    if (!rc) rc = gpu_track_host_ops(&a);
    if (!rc) { STEP_BEGIN(); rc = run(&a, scratch_analysis_sql); STEP_END("setup"); } /* indexes and result tables */
    long long dev = 0;
    int ndev = gpu_devices(t, &dev);
    if (!rc && ndev > 1) rc = run(&a, scratch_devices_sql);
    a.kernel_kind = intern_id(t->strs, "kernel", 6);
    a.memcpy_kind = intern_id(t->strs, "gpu_memcpy", 10);
    a.memset_kind = intern_id(t->strs, "gpu_memset", 10);
    if (!rc && (a.kernel_kind < 0 || a.memcpy_kind < 0 || a.memset_kind < 0)) rc = ERR_NOMEM;
    /* kbusy: kernels only (not copies): "GPU otherwise idle" for a copy means no kernel ran */
    if (!rc) { STEP_BEGIN(); rc = busy_merges(&a, ndev, dev, a.kernel_kind, &gpu_busy); STEP_END("busy_merges"); }
    if (!rc) {
        a.busy_q = prep(&a, BUSY_SQL("busy"));
        a.kbusy_q = prep(&a, BUSY_SQL("kbusy"));
        if (!a.busy_q || !a.kbusy_q) rc = ERR_DB;
    }
    /* What gpu_job reads is committed first: the job's connection sees only that. */
    if (!rc) rc = run(&a, "COMMIT; BEGIN");
    gpu_job job;
    memset(&job, 0, sizeof job);
    if (!rc) rc = gpu_job_start(&a, &job, gpu_busy);
    if (!rc) rc = tl_open(&a);
    if (!rc) { STEP_BEGIN(); rc = host_walk(&a); STEP_END("host_walk"); }
    if (!rc) { STEP_BEGIN(); rc = gpu_rows(&a); STEP_END("gpu_rows"); }
    if (!rc) { STEP_BEGIN(); rc = gpu_phases(&a); STEP_END("gpu_phases"); }
    if (!rc) { STEP_BEGIN(); rc = write_ops(&a); STEP_END("write_ops"); }
    json_t *tl_phases = json_array(), *gaps = NULL;
    if (!rc) { STEP_BEGIN(); rc = write_phases(&a, tl_phases); STEP_END("write_phases"); }
    /* here, not in gpu_job: since host_walk takes 100 ms, not 400, at 300 MB, the job's
     * gpu_facts is the longer side even without it */
    if (!rc) { STEP_BEGIN(); rc = timeline_buckets(&a); STEP_END("timeline_buckets"); }
    {
        STEP_BEGIN();
        int jrc = gpu_job_finish(&a, &job, &out->gpu, &gaps);
        STEP_END("gpu_job_wait");
        if (!rc) rc = jrc;
    }
    if (!rc) {
        out->timeline = timeline_doc(&a, tl_phases, gaps);
        tl_phases = gaps = NULL;
        report_input in = {a.db, out->gpu, t->meta, t->name, t->labels, t->hardware, t->events, a.wall};
        out->report = report_draft(&in);
        out->summary = summary_doc(&a, out->gpu, out->report);
        if (!out->gpu || !out->timeline || !out->report || !out->summary) rc = ERR_NOMEM;
    }
    json_decref(tl_phases);
    json_decref(gaps);
    if (!rc) { STEP_BEGIN(); rc = run(&a, "COMMIT"); STEP_END("run"); }
    if (rc) sqlite3_exec(a.db, "ROLLBACK", NULL, NULL, NULL);
    if (rc == ERR_NOMEM && !err[0]) snprintf(err, errlen, "out of memory during analysis");
    tl_close(&a);
    sqlite3_finalize(a.busy_q);
    sqlite3_finalize(a.kbusy_q);
    intern_free(a.keys);
    intern_free(a.pkeys);
    free(a.aggs);
    free(a.phases);
    return rc;
}

void analysis_free(analysis *a) {
    json_decref(a->gpu);
    json_decref(a->report);
    json_decref(a->timeline);
    json_decref(a->summary);
    memset(a, 0, sizeof *a);
}
