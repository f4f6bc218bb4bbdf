/* load.c: the trace importer's storage half: parsed events -> one stored session.
 *
 * Owns the loader's private SQLite connection, its scratch databases (tmpfile.h files,
 * deleted by loader_free: attach_scratch), the event classification, the per-track
 * event chunks and the final copy into the main database. Must not see MHD types.
 *
 * Why a scratch database and not arrays: a 1 GB trace holds millions of events, and the
 * analysis needs them sorted per thread and joined by correlation id. SQLite sorts and
 * indexes them within its page cache and spills to disk, so server memory stays flat
 * whatever the trace size (issue 8's target). What is only walked in order (the host
 * events) is stored in blocks, what is joined or sought is a row each (trace.h).
 *
 * Atomicity: nothing touches the main database until loader_commit's single
 * BEGIN IMMEDIATE ... COMMIT; a failed or abandoned upload leaves nothing behind. */
#include "ingest/load.h"
#include "ingest/minify.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "analysis/analyze.h"
#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/err.h"
#include "ingest/evq.h"
#include "lib/mono.h"
#include "lib/evorder.h"
#include "ingest/synth.h"
#include "lib/tmpfile.h"
#include "lib/utf8.h"
#include "analysis/trace.h"
#include "lib/log.h"
#include "lib/vec.h"
#include "store/commit.h"
#include "scratch_sql.h" /* generated from analysis/scratch.sql */

struct loader {
    store *st;
    db_conn *hold;      /* store_scratch_get's: the pooled connection under t.db, or NULL */
    trace_ctx t;
    ingest_sink sink;
    load_opts opts;
    sqlite3_stmt *ins_ev, *ins_ann, *ins_chunk, *ins_hblk;
    chunk_builder **chunks; /* per track: events not yet written; NULL until its first event (builder_of) */
    buf *hblk;             /* per track: hrecs not yet written to scratch.hblk */
    buf minbuf;            /* store_event: the event's text without whitespace */
    buf scrubbuf;          /* store_event: the event's text made valid UTF-8, when it was not */
    double *chunk_min, *chunk_max;
    size_t capchunks, caphblk, capchunk_min, capchunk_max; /* capacities (vec.h); ntracks in use */
    long long next_chunk;
    size_t pending;     /* heap bytes the tracks' chunk builders and host blocks hold (track_mem; budget) */
    intern *track_keys; /* "pid\x1ftid" -> track index */
    intern *count_keys; /* counts keys (count_key) -> index into counts */
    intern *op_keys;    /* (kind, name, shapes) of the host events that have shapes (max_distinct) */
    struct { int32_t k[3]; } op_seen[256]; /* the last keys op_keys was asked about, by hash: most repeat */
    long long *counts;
    size_t capcounts;
    chunk_builder synth; /* synthesized events (synth.h) not yet written */
    ZSTD_CCtx *cctx;     /* one compression context for every chunk of the upload */
    buf zbuf;            /* the chunk being written, compressed */
    buf keybuf;
    int legacy;         /* set by loader_commit's caller through the source */
    const char *source; /* loader_set_source (static string), NULL: decided at commit */
    evq *q;             /* events go through it to the loader thread (evq.h) */
    char scratch_path[4096]; /* the scratch database's file (attach_scratch), "" when none */
    char kscratch_path[4096]; /* the kernel rows' scratch file (scratch.sql), "" when none */
    char wscratch_path[4096]; /* the walk's scratch file (scratch.sql), "" when none */
    int attached;            /* of those three, how many are attached (in that order) */
    unsigned long long seen; /* events store_event took (the loader thread's count) */
    int failed_full;         /* loader_commit failed with ERR_FULL */
    int counted;             /* counted in loaders_active (loader_new) */
    int share;               /* the loaders_active the limits below were set for */
    size_t pending_max;      /* LOAD_PENDING_MAX / share */
    runs_writer runs;   /* each event's track, in the upload's order (evorder.h): the replay row */
    fp_session_meta fm; /* the collector's "firstpass" object, when the trace has one (prepare_identity) */
    char *fallback_name; /* loader_set_fallback_name's copy, or NULL */
    char err[256];      /* the request thread's message */
    char w_err[256];    /* the loader thread's (read after evq_finish) */
};

#define LOAD_US_MAX 1e18 /* the largest |ts| and dur taken, in microseconds */
#define LOAD_WAL_TRUNCATE_BYTES (16ll << 20) /* a WAL over this after an upload is truncated */

/* The main database's page size. */
static long long page_size(sqlite3 *db) {
    sqlite3_stmt *s = NULL;
    long long v = 4096;
    if (sqlite3_prepare_v2(db, "PRAGMA main.page_size", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int set_err(loader *l, int code, const char *msg) {
    if (!l->err[0]) snprintf(l->err, sizeof l->err, "%s", msg);
    return code;
}

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : ERR_DB;
}

/* ---- classification ---- */

typedef struct kind_map {
    const char *cat;
    int cls;
    const char *kind;
} kind_map;

/* Categories of the current Kineto schema, then the 2021 one (capitalised). */
static const kind_map kinds[] = {
    {"cpu_op", EV_HOST_OP, "cpu_op"},
    {"user_annotation", EV_HOST_OP, "user_annotation"},
    {"cuda_runtime", EV_HOST_RT, "cuda_runtime"},
    {"cuda_driver", EV_HOST_RT, "cuda_driver"},
    {"kernel", EV_GPU, "kernel"},
    {"gpu_memcpy", EV_GPU, "gpu_memcpy"},
    {"gpu_memset", EV_GPU, "gpu_memset"},
    {"gpu_user_annotation", EV_GPU_ANN, "gpu_user_annotation"},
    {"Operator", EV_HOST_OP, "cpu_op"}, /* or user_annotation: classify */
    {"Runtime", EV_HOST_RT, "cuda_runtime"},
    {"Kernel", EV_GPU, "kernel"},
    {"Memcpy", EV_GPU, "gpu_memcpy"},
    {"Memset", EV_GPU, "gpu_memset"},
    {NULL, 0, NULL},
};

/* Decides the class and the normalised kind of one event. An event without a category
 * is a legacy autograd event: aten ops are "namespace::op", so a name without "::" is a
 * record_function range (how torch 1.13 writes `record_function("prefill")`). */
static int classify(const ingest_event *e, const char **kind) {
    int complete = !strcmp(e->ph, "X") && e->has_ts && e->has_dur;
    if (!strcmp(e->name, "[memory]") && (!strcmp(e->ph, "i") || !strcmp(e->ph, "I"))) {
        *kind = "[memory]";
        return EV_MEMORY;
    }
    if (!e->cat[0]) {
        *kind = strstr(e->name, "::") ? "cpu_op" : "user_annotation";
        return complete ? EV_HOST_OP : EV_OTHER;
    }
    for (const kind_map *k = kinds; k->cat; k++) {
        if (!strcmp(e->cat, k->cat)) {
            *kind = k->kind;
            /* The 2021 schema writes record_function ranges (ProfilerStep#5, ## forward ##,
             * enumerate(DataLoader)#...) as cat Operator too: a '#' tells them from ops. */
            if (k->cls == EV_HOST_OP && !strcmp(k->cat, "Operator") && strchr(e->name, '#')) *kind = "user_annotation";
            return complete ? k->cls : EV_OTHER;
        }
    }
    *kind = e->cat;
    return EV_OTHER;
}

/* ---- tracks and chunks ---- */

/* The track of an event: one per (pid, tid). track_keys hands out dense ids in order of
 * first appearance, so a key's id is its index into t.tracks. -1: out of memory; -2: one
 * track more than --max-tracks. Why a cap: each track costs ~3.5 KB until the commit
 * (its chunk builder, host block, track_info, analysis state), so 1M distinct tids in a
 * 5 MB gzip were 3.5 GB (issue 22). */
static long track_of(loader *l, const ingest_event *e) {
    buf *k = &l->keybuf;
    buf_reset(k);
    if (buf_put(k, e->pid, strlen(e->pid)) || buf_put(k, "\x1f", 1) || buf_put(k, e->tid, strlen(e->tid))) return -1;
    long tr = intern_id(l->track_keys, k->p, k->len);
    if (tr < 0 || (size_t)tr < l->t.ntracks) return tr;
    if (l->opts.max_tracks && l->t.ntracks >= l->opts.max_tracks) return -2; /* the upload fails: the extra key is moot */
    /* Four arrays indexed by the track id, one capacity each (all grow together). */
    size_t need = (size_t)tr + 1;
    if (VEC_RESERVE(l->t.tracks, l->t.captracks, need, 16) || VEC_RESERVE(l->chunks, l->capchunks, need, 16) ||
        VEC_RESERVE(l->chunk_min, l->capchunk_min, need, 16) || VEC_RESERVE(l->chunk_max, l->capchunk_max, need, 16) ||
        VEC_RESERVE(l->hblk, l->caphblk, need, 16))
        return -1;
    l->t.ntracks++;
    track_info *ti = &l->t.tracks[tr];
    ti->pid = strdup(e->pid);
    ti->tid = strdup(e->tid);
    ti->device = ti->stream = -1;
    l->chunk_min[tr] = INFINITY;
    l->chunk_max[tr] = -INFINITY;
    if (!ti->pid || !ti->tid) return -1;
    return tr;
}

/* Compresses b into one scratch.chunks row of track tr and empties b. */
static int write_chunk(loader *l, long tr, chunk_builder *b, double mn, double mx) {
    long long n = b->n, drawn = b->drawn, gpu = b->gpu;
    int rc = chunk_finish(b, l->cctx, &l->zbuf);
    if (rc) return rc;
    sqlite3_stmt *s = l->ins_chunk;
    sqlite3_bind_int64(s, 1, tr);
    sqlite3_bind_int64(s, 2, l->next_chunk++);
    sqlite3_bind_int64(s, 3, n);
    sqlite3_bind_double(s, 4, mn);
    sqlite3_bind_double(s, 5, mx);
    sqlite3_bind_blob(s, 6, l->zbuf.p, (int)l->zbuf.len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 7, drawn);
    sqlite3_bind_int64(s, 8, gpu);
    if (sqlite3_step(s) != SQLITE_DONE) rc = ERR_DB;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc;
}

/* What track tr holds in memory until it is written: its chunk builder's and host block's
 * buffers, by capacity, not contents. Why capacity: the builder's 14 columns besides the
 * JSON and the doubling of each made the heap ~1.7x the JSON bytes the budget once counted
 * (two uploads of 9,000 threads at once: 119 MB of server RSS under a 16 MB budget). The
 * builder's own 392 bytes are not counted: what a track costs whatever it holds is bounded
 * by --max-tracks, not by this budget. Whoever changes a track adds the difference to
 * l->pending (chunk_event, add_hrec, hold_budget). */
static size_t track_mem(const loader *l, long tr) {
    const chunk_builder *b = l->chunks[tr];
    return (b ? chunk_builder_mem(b) : 0) + l->hblk[tr].cap;
}

/* Track tr's chunk builder, made on its first event; NULL: out of memory. Why one pointer a
 * track, not the builder itself: a builder is 392 bytes, and the array grows by doubling
 * (6.4 MB for 9,000 threads: room for 16,384), whether or not the track holds anything. */
static chunk_builder *builder_of(loader *l, long tr) {
    if (!l->chunks[tr]) l->chunks[tr] = calloc(1, sizeof **l->chunks);
    return l->chunks[tr];
}

static void builder_drop(loader *l, size_t tr) {
    if (!l->chunks[tr]) return;
    chunk_builder_free(l->chunks[tr]);
    free(l->chunks[tr]);
    l->chunks[tr] = NULL;
}

static int flush_chunk(loader *l, long tr) {
    chunk_builder *b = l->chunks[tr];
    if (!b || b->n == 0) return 0;
    double mn = isfinite(l->chunk_min[tr]) ? l->chunk_min[tr] : 0;
    double mx = isfinite(l->chunk_max[tr]) ? l->chunk_max[tr] : 0;
    int rc = write_chunk(l, tr, b, mn, mx);
    l->chunk_min[tr] = INFINITY;
    l->chunk_max[tr] = -INFINITY;
    return rc;
}

static int flush_synth(loader *l) { return l->synth.n ? write_chunk(l, SYNTH_TRACK, &l->synth, 0, 0) : 0; }

/* Writes track tr's pending hrecs as one scratch.hblk row. */
static int flush_hblk(loader *l, long tr) {
    buf *b = &l->hblk[tr];
    if (!b->len) return 0;
    sqlite3_stmt *s = l->ins_hblk;
    sqlite3_bind_int64(s, 1, tr);
    sqlite3_bind_int64(s, 2, (long long)(b->len / sizeof(hrec)));
    sqlite3_bind_blob(s, 3, b->p, (int)b->len, SQLITE_STATIC);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : ERR_DB;
    sqlite3_reset(s);
    buf_reset(b);
    return rc;
}

static int add_hrec(loader *l, long tr, const hrec *h) {
    buf *b = &l->hblk[tr];
    size_t before = b->cap;
    if (buf_put(b, h, sizeof *h)) return ERR_NOMEM;
    l->pending += b->cap - before;
    return b->len >= HBLK_RECS * sizeof *h ? flush_hblk(l, tr) : 0; /* (keeps the capacity) */
}

/* What the uploads in flight share (issue 24): LOAD_PENDING_MAX of heap for unwritten
 * chunks and hrecs (track_mem) and LOAD_SCRATCH_CACHE_KIB of scratch page cache are each
 * upload's when it is alone, and split evenly when several stream or analyse at once. Why:
 * each upload held both whole, so two uploads of a 100 MB many-thread trace peaked at
 * 153 MB of server RSS where one took 80 MB (bench/README.md). A loader applies its share on
 * its own thread (set_share): on the loader thread while the body streams, then at
 * loader_commit. Why 24 MiB of capacity: about what 16 MiB of JSON bytes, the old measure,
 * held in fact; at 16 MiB of capacity the tracks wrote chunks half as big, and a
 * 9,000-thread upload took 10 % more instructions (callgrind) for 8 MB less RSS. */
#define LOAD_PENDING_MAX (24u << 20)
/* The page cache budget of an upload's scratch files, wscratch's part of it: the sizes in
 * analysis/scratch.sql (scratch 15,360 KiB, wscratch 1,024). Why wscratch's is small and
 * taken from the budget: no other connection reads that file, so a spill costs it only
 * writes to the OS's cache; a 4 MB cache of its own took two names uploads at once to
 * 100.3 MB of server RSS (90 before wscratch, issue 24's line is 100). */
#define LOAD_SCRATCH_CACHE_KIB 16384
#define LOAD_WSCRATCH_CACHE_KIB 1024
static atomic_int loaders_active;

static int set_share(loader *l) {
    int n = atomic_load(&loaders_active);
    if (n < 1) n = 1;
    if (n == l->share) return 0;
    l->share = n;
    l->pending_max = LOAD_PENDING_MAX / (size_t)n;
    char sql[96]; /* numbers of ours, not input: PRAGMA takes no bound parameter */
    snprintf(sql, sizeof sql, "PRAGMA scratch.cache_size=-%d; PRAGMA wscratch.cache_size=-%d",
             (LOAD_SCRATCH_CACHE_KIB - LOAD_WSCRATCH_CACHE_KIB) / n, LOAD_WSCRATCH_CACHE_KIB / n);
    return exec(l->t.db, sql);
}

/* Keeps what the tracks hold under pending_max: once it is over, the tracks holding the most
 * write their chunks and host blocks early and give their memory back, until a quarter of
 * the budget is free. Why: each track fills its own chunk (up to CHUNK_BYTES) and hrec
 * block, so a trace of hundreds of threads held most of itself here until the commit
 * (233 MB of RSS for a 100 MB trace of 384 threads, issue 24). Why the most, chosen by a
 * histogram of their sizes in one pass: writing one track at a time scanned every track for
 * each write, and with 9,000 threads those scans were most of the loader thread (the parser
 * waited 420 ms for it on 100 MB). A trace of a few tracks never reaches the budget, so its
 * chunks, and the download's event order (chunks by seq), are what they were. */
static int hold_budget(loader *l) {
    if (set_share(l)) return ERR_DB;
    if (l->pending <= l->pending_max) return 0;
    size_t want = l->pending - l->pending_max / 4 * 3, got = 0, sum[65] = {0};
    for (size_t i = 0; i < l->t.ntracks; i++) {
        size_t m = track_mem(l, (long)i);
        sum[m ? 64 - __builtin_clzll(m) : 0] += m; /* by bit length: within 2x of each other */
    }
    int cut = 64; /* the tracks whose bit length is above cut are written */
    while (cut > 0 && got < want) got += sum[cut--];
    for (size_t i = 0; i < l->t.ntracks; i++) {
        size_t m = track_mem(l, (long)i);
        if (!m || 64 - __builtin_clzll(m) <= cut) continue;
        int rc = flush_chunk(l, (long)i);
        if (!rc) rc = flush_hblk(l, (long)i);
        if (rc) return rc;
        builder_drop(l, i);
        buf_free(&l->hblk[i]);
        l->pending -= m;
    }
    return 0;
}

/* synth_emit: synthesized events go to chunks of their own track (synth.h). */
static int on_synth(void *ctx, const chunk_rec *r, const char *json) {
    loader *l = ctx;
    if (chunk_add(&l->synth, r, json)) return ERR_NOMEM;
    if (l->synth.n < CHUNK_EVENTS && chunk_builder_bytes(&l->synth) < CHUNK_BYTES) return 0;
    return flush_synth(l);
}

/* The key an event counts under in the session's `counts`: its normalised kind, or
 * "metadata" / "uncategorized" for the uncategorised events that are not analysed. */
static int count_event(loader *l, const ingest_event *e, int cls, const char *kind) {
    const char *k = cls != EV_OTHER || e->cat[0] ? kind : e->ph[0] == 'M' ? "metadata" : "uncategorized";
    long i = intern_id(l->count_keys, k, strlen(k));
    if (i < 0 || VEC_RESERVE(l->counts, l->capcounts, (size_t)i + 1, 16)) return ERR_NOMEM;
    l->counts[i]++;
    return 0;
}

/* What synth.c needs to know about the upload's own names and flows. */
static void note_shown(loader *l, track_info *ti, const ingest_event *e) {
    char ph = e->ph[0];
    if (ph == 'M') {
        if (!strcmp(e->name, "thread_name")) ti->thread_named = 1;
        else if (!strcmp(e->name, "process_name")) ti->process_named = 1;
    } else if (ph == 's' || ph == 'f' || ph == 't') {
        /* Kineto's launch flows: ac2g (current), async_cpu_to_gpu, async "launch" (2021). */
        if (!strcmp(e->cat, "ac2g") || !strcmp(e->cat, "async_cpu_to_gpu") || (!strcmp(e->cat, "async") && !strcmp(e->name, "launch")))
            l->t.has_launch_flows = 1;
    } else {
        ti->shown = 1;
    }
}

/* ---- sink callbacks ---- */

static void bind_opt(sqlite3_stmt *s, int i, int has, long long v) {
    if (has) sqlite3_bind_int64(s, i, v);
    else sqlite3_bind_null(s, i);
}
/* Binds the string id of str (interned), or NULL; *id (if given) is it, or -1. */
static int bind_str(loader *l, sqlite3_stmt *s, int i, const char *str, long *id) {
    long v = str ? intern_id(l->t.strs, str, strlen(str)) : -1;
    if (id) *id = v;
    if (!str) {
        if (s) sqlite3_bind_null(s, i);
        return 0;
    }
    if (v < 0) return ERR_NOMEM;
    if (s) sqlite3_bind_int64(s, i, v);
    return 0;
}

/* The loader thread's own error: l->err belongs to the request thread. */
static int w_fail(loader *l, int code, const char *msg) {
    if (!l->w_err[0]) snprintf(l->w_err, sizeof l->w_err, "%s", msg);
    return code;
}

/* The gpu_agg of a GPU event (trace.h), summed here so that the analysis need not group
 * the GPU rows after the stream (gpu_rows was 100-150 ms at 300 MB, on the critical path;
 * here it is a hash lookup in a thread that waits for the parser anyway). */
static int add_gpu_agg(loader *l, int cls, long kind, long name, double dur, long grid, long block, const ingest_event *e) {
    trace_ctx *t = &l->t;
    size_t had = t->capgpu_agg_first;
    if ((size_t)name >= had) {
        if (VEC_RESERVE(t->gpu_agg_first, t->capgpu_agg_first, (size_t)name + 1, 256)) return ERR_NOMEM;
        memset(t->gpu_agg_first + had, 0xff, (t->capgpu_agg_first - had) * sizeof *t->gpu_agg_first); /* -1 */
    }
    long i = t->gpu_agg_first[name];
    while (i >= 0 && (t->gpu_aggs[i].cls != cls || t->gpu_aggs[i].kind != kind)) i = t->gpu_aggs[i].next;
    if (i < 0) { /* a new row, at the end: the rows stay in order of first event */
        if (t->ngpu_aggs >= INT32_MAX || VEC_RESERVE(t->gpu_aggs, t->capgpu_aggs, t->ngpu_aggs + 1, 64)) return ERR_NOMEM;
        i = (long)t->ngpu_aggs++;
        gpu_agg *g = &t->gpu_aggs[i];
        memset(g, 0, sizeof *g);
        g->cls = cls;
        g->kind = (int32_t)kind;
        g->name = (int32_t)name;
        g->min = dur;
        g->max = -INFINITY;
        g->next = t->gpu_agg_first[name];
        t->gpu_agg_first[name] = (int32_t)i;
    }
    gpu_agg *g = &t->gpu_aggs[i];
    g->calls++;
    g->total += dur;
    if (e->has_bps && e->bps > 0) { /* tb-profiler drops a non-positive one (a warning there) */
        g->w_bps += dur * e->bps;
        g->w_sme += dur * (e->bps < 1 ? e->bps : 1);
        g->has_bps = 1;
    }
    if (e->has_occ && e->occ >= 0) {
        g->w_occ += dur * e->occ;
        g->has_occ = 1;
    }
    if (dur < g->min) g->min = dur;
    if (dur > g->max) {
        g->max = dur;
        g->grid = (int32_t)grid;
        g->block = (int32_t)block;
        g->regs = e->has_regs ? e->regs : -1;
        g->smem = e->has_smem ? e->smem : -1;
    }
    return 0;
}

/* The op's "Input type" and "Concrete Inputs" as an id of t.xargs (trace.h), -1 when it has
 * neither or they are past the limits, -2 when out of memory. */
static long long xargs_id(loader *l, const ingest_event *e) {
    if (!e->types && !e->concrete) return -1;
    size_t nt = e->types ? strlen(e->types) : 0, nc = e->concrete ? strlen(e->concrete) : 0, n = nt + 1 + nc;
    if (n > XARGS_ONE_MAX) return -1;
    buf *k = &l->keybuf;
    buf_reset(k);
    if (buf_put(k, e->types ? e->types : "", nt) || buf_put(k, "\x1f", 1) || buf_put(k, e->concrete ? e->concrete : "", nc)) return -2;
    long id = intern_lookup(l->t.xargs, k->p, n);
    if (id >= 0) return id;
    if (l->t.xargs_bytes + n > XARGS_BYTES_MAX) return -1;
    id = intern_id(l->t.xargs, k->p, n);
    if (id < 0) return -2;
    l->t.xargs_bytes += n;
    return id;
}

/* Whether a host-class event of track ti comes before the greatest one so far in the host
 * walk's order (trace.h: host_late): such a "late" event is merged in by the walk. */
static int host_order(track_info *ti, double ts, double dur) {
    double te = ts + dur;
    int late = ti->host_seen && host_before(ts, te, ti->host_ts, ti->host_te);
    if (late) {
        ti->host_late++;
    } else {
        ti->host_ts = ts;
        ti->host_te = te;
    }
    ti->host_seen = 1;
    return late;
}

/* Counts the host operator (kind, name, shapes) of an event that has input shapes, for
 * max_distinct (load.h): 0, ERR_NOMEM, or ERR_TOOBIG with the loader thread's message. A
 * host event without shapes makes an operator row per (kind, name), which the strings'
 * bound already bounds. Why op_seen: a trace repeats its few (name, shapes) in a row, and
 * hashing the key into op_keys for every host event is the cost op_seen spares. */
static int count_op(loader *l, long kind, long name, long shapes) {
    int32_t k[3] = {(int32_t)kind, (int32_t)name, (int32_t)shapes};
    size_t h = ((size_t)kind * 31u + (size_t)name * 1000003u + (size_t)shapes * 7919u) % (sizeof l->op_seen / sizeof l->op_seen[0]);
    if (!memcmp(l->op_seen[h].k, k, sizeof k)) return 0;
    if (intern_id(l->op_keys, (const char *)k, sizeof k) < 0) return w_fail(l, ERR_NOMEM, "out of memory");
    memcpy(l->op_seen[h].k, k, sizeof k);
    if (l->opts.max_distinct && intern_count(l->op_keys) > l->opts.max_distinct) {
        char msg[200];
        snprintf(msg, sizeof msg, "the trace has more than %llu distinct operators by name and input shapes (--max-distinct)",
                 l->opts.max_distinct);
        return w_fail(l, ERR_TOOBIG, msg);
    }
    return 0;
}

/* One scratch.ev row (trace.h: what a query seeks or joins). */
static int insert_ev(loader *l, const ingest_event *e, int cls, long kind_id, long name_id, long tr, const track_info *ti, double ts,
                     double dur) {
    sqlite3_stmt *s = l->ins_ev;
    sqlite3_bind_int(s, 1, cls);
    sqlite3_bind_int64(s, 2, kind_id);
    sqlite3_bind_int64(s, 3, name_id);
    sqlite3_bind_int64(s, 4, tr);
    sqlite3_bind_double(s, 5, ts);
    sqlite3_bind_double(s, 6, ts + dur);
    bind_opt(s, 7, e->has_corr, e->corr);
    bind_opt(s, 8, cls == EV_GPU || cls == EV_GPU_ANN, ti->device);
    bind_opt(s, 9, cls == EV_GPU || cls == EV_GPU_ANN, ti->stream);
    bind_opt(s, 10, e->has_bytes, e->bytes);
    bind_opt(s, 11, e->has_devtype, e->devtype);
    bind_opt(s, 15, e->has_regs, e->regs);
    bind_opt(s, 16, e->has_smem, e->smem);
    sqlite3_bind_double(s, 17, dur);
    if (cls == EV_GPU && e->has_bps && e->bps > 0) sqlite3_bind_double(s, 19, e->bps);
    if (cls == EV_GPU && e->has_occ && e->occ >= 0) sqlite3_bind_double(s, 20, e->occ);
    /* the event's place among the analysed ones (1, 2, ...), as when every one had a
     * row: synth.c's flow ids are it, so downloads stay what they were */
    sqlite3_bind_int64(s, 18, l->t.analysed);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : ERR_DB;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (!rc && (cls == EV_GPU_ANN || cls == EV_HOST_OP)) { /* index_event puts no other host op in ev */
        s = l->ins_ann;
        sqlite3_bind_int(s, 1, cls);
        sqlite3_bind_int64(s, 2, kind_id);
        sqlite3_bind_int64(s, 3, name_id);
        bind_opt(s, 4, cls == EV_GPU_ANN, ti->device);
        sqlite3_bind_double(s, 5, ts);
        sqlite3_bind_double(s, 6, ts + dur);
        sqlite3_bind_double(s, 7, dur);
        rc = sqlite3_step(s) == SQLITE_DONE ? 0 : ERR_DB;
        sqlite3_reset(s);
    }
    return rc ? w_fail(l, rc, sqlite3_errmsg(l->t.db)) : 0;
}

/* An event the analysis reads (cls != EV_OTHER): the session's span, the GPU track's
 * device and stream, its scratch.ev row and GPU sums, and its hrec if it is host-class. */
static int index_event(loader *l, const ingest_event *e, int cls, const char *kind, long kind_id, long name_id, long tr) {
    track_info *ti = &l->t.tracks[tr];
    double ts = e->has_ts ? e->ts : 0, dur = e->has_dur ? e->dur : 0;
    int host = cls == EV_HOST_OP || cls == EV_HOST_RT || cls == EV_MEMORY;
    int late = host ? host_order(ti, ts, dur) : 0;
    l->t.analysed++;
    if (ts < l->t.start_us) l->t.start_us = ts;
    if (ts + dur > l->t.end_us) l->t.end_us = ts + dur;
    if (cls == EV_GPU || cls == EV_GPU_ANN) {
        ti->gpu = 1;
        ti->device = e->has_device ? e->device : atoll(e->pid);
        ti->stream = e->has_stream ? e->stream : atoll(e->tid);
    }
    /* scratch.ev holds what a query seeks or joins (trace.h); the other host events
     * are only in scratch.hblk. */
    int in_ev = !host || cls == EV_HOST_RT || (cls == EV_HOST_OP && !strcmp(kind, "user_annotation"));
    sqlite3_stmt *s = in_ev ? l->ins_ev : NULL;
    long shapes = -1, grid = -1, block = -1;
    int rc = bind_str(l, s, 12, e->shapes, &shapes);
    if (!rc && s) rc = bind_str(l, s, 13, e->grid, &grid);
    if (!rc && s) rc = bind_str(l, s, 14, e->block, &block);
    if (!rc && (cls == EV_GPU || cls == EV_GPU_ANN)) rc = add_gpu_agg(l, cls, kind_id, name_id, dur, grid, block, e);
    if (rc) return w_fail(l, rc, "out of memory");
    if (host && shapes >= 0 && (rc = count_op(l, kind_id, name_id, shapes))) return rc;
    if (s && (rc = insert_ev(l, e, cls, kind_id, name_id, tr, ti, ts, dur))) return rc;
    if (!host) return 0;
    /* corr: a memory event has none; it carries its device there (trace.h) */
    long long corr = cls == EV_MEMORY ? (e->has_device ? e->device : 0) : e->has_corr ? e->corr : 0;
    long long bytes = e->has_bytes ? e->bytes : 0;
    if (cls == EV_HOST_OP) bytes = xargs_id(l, e); /* trace.h: an op's bytes name its xargs */
    if (bytes == -2) return w_fail(l, ERR_NOMEM, "out of memory");
    int mem = cls == EV_MEMORY, op = cls == EV_HOST_OP;
    /* trace.h: an op's two last fields are its Sequence number and flops args */
    long long t1 = mem ? (e->has_total_alloc && e->total_alloc >= 0 ? e->total_alloc : -1) : op && e->has_seq && e->seq >= 0 ? e->seq : -1;
    long long t2 = mem ? (e->has_total_reserved && e->total_reserved >= 0 ? e->total_reserved : -1)
                       : op && e->has_flops && e->flops > 0 ? e->flops : -1;
    hrec h = {ts, ts + dur, dur, bytes, corr, l->t.analysed,
              (int32_t)kind_id, (int32_t)name_id, (int32_t)shapes, (uint8_t)cls,
              (uint8_t)(e->has_devtype ? e->devtype : 0), (uint8_t)e->has_corr, (uint8_t)late, t1, t2};
    if ((rc = add_hrec(l, tr, &h))) return w_fail(l, rc, rc == ERR_DB ? sqlite3_errmsg(l->t.db) : "out of memory");
    return 0;
}

/* A python_function range (with_stack=True): not analysed (key_averages leaves it out),
 * but the host walk labels GPU idle time with it, so it gets an hrec of class HREC_PY. */
static int python_range(loader *l, const ingest_event *e, const char *kind, long kind_id, long name_id, long tr) {
    if (strcmp(kind, "python_function") || strcmp(e->ph, "X") || !e->has_ts || !e->has_dur) return 0;
    track_info *ti = &l->t.tracks[tr];
    int late = host_order(ti, e->ts, e->dur);
    hrec h = {e->ts, e->ts + e->dur, e->dur, 0, 0, l->t.analysed, (int32_t)kind_id, (int32_t)name_id, -1, HREC_PY, 0, 0, (uint8_t)late, -1, -1};
    int rc = add_hrec(l, tr, &h);
    return rc ? w_fail(l, rc, rc == ERR_DB ? sqlite3_errmsg(l->t.db) : "out of memory") : 0;
}

/* The event's text into its track's chunk (chunk.h), compact; a full chunk is written. */
static int chunk_event(loader *l, const ingest_event *e, int cls, long kind_id, long name_id, long tr) {
    double ts = e->has_ts ? e->ts : 0, dur = e->has_dur ? e->dur : 0;
    /* The stored text is compact (chunk.h); the parser left that to this thread. */
    const char *json = e->json;
    size_t jlen = e->json_len;
    if (e->json_ws) {
        if (buf_reserve(&l->minbuf, jlen + 1)) return w_fail(l, ERR_NOMEM, "out of memory");
        jlen = ingest_minify(e->json, jlen, l->minbuf.p);
        l->minbuf.p[jlen] = '\0';
        json = l->minbuf.p;
    }
    /* The stored text is valid UTF-8, so that a download is JSON (RFC 8259 8.1). YAJL lets
     * overlong forms, encoded surrogates and code points over U+10FFFF through; the parser
     * refuses them in the fields it reads (names, pids, shapes: 400), but an args value, a
     * key, a thread_name's label or a flow id went to the chunk as sent and came back in
     * /trace, which strict parsers then refused (issue 43). Such bytes become U+FFFD: only
     * inside strings can they be (JSON's structure is ASCII), where U+FFFD is text too.
     * Checked 8 ASCII bytes a step; only an event that has them is copied. */
    size_t ok = utf8_valid_prefix(json, jlen);
    if (ok < jlen) {
        if (buf_reserve(&l->scrubbuf, ok + 3 * (jlen - ok) + 1)) return w_fail(l, ERR_NOMEM, "out of memory");
        memcpy(l->scrubbuf.p, json, ok);
        jlen = ok + utf8_scrub(json + ok, jlen - ok, l->scrubbuf.p + ok);
        l->scrubbuf.p[jlen] = '\0';
        json = l->scrubbuf.p;
    }
    chunk_rec r = {ts, dur, (uint32_t)name_id, (uint32_t)kind_id, (uint8_t)cls, (uint8_t)e->ph[0], (uint32_t)jlen,
                   (uint8_t)((e->has_ts ? 0 : CHUNK_NO_TS) | (e->has_dur ? 0 : CHUNK_NO_DUR))};
    size_t before = track_mem(l, tr);
    chunk_builder *b = builder_of(l, tr);
    if (!b || chunk_add(b, &r, json)) return w_fail(l, ERR_NOMEM, "out of memory");
    if (ts < l->chunk_min[tr]) l->chunk_min[tr] = ts;
    if (ts + dur > l->chunk_max[tr]) l->chunk_max[tr] = ts + dur;
    int rc = 0;
    if (b->n >= CHUNK_EVENTS || chunk_builder_bytes(b) >= CHUNK_BYTES) rc = flush_chunk(l, tr);
    l->pending = l->pending + track_mem(l, tr) - before; /* a flush may have freed its laid-out copy */
    if (!rc) rc = hold_budget(l);
    return rc ? w_fail(l, rc, rc == ERR_DB ? sqlite3_errmsg(l->t.db) : "could not compress an event chunk") : 0;
}

/* On the loader thread (evq's consume): classifies, indexes and chunks one event. */
static int store_event(void *ctx, const ingest_event *e) {
    loader *l = ctx;
    const char *kind;
    int cls = classify(e, &kind);
    long tr = track_of(l, e);
    if (tr == -2) {
        char msg[160];
        snprintf(msg, sizeof msg, "the trace has more than %llu distinct threads, processes or GPU streams (--max-tracks)",
                 l->opts.max_tracks);
        return w_fail(l, ERR_TOOBIG, msg);
    }
    long name_id = intern_id(l->t.strs, e->name, strlen(e->name));
    long kind_id = intern_id(l->t.strs, kind, strlen(kind));
    if (tr < 0 || name_id < 0 || kind_id < 0) return w_fail(l, ERR_NOMEM, "out of memory");
    if (runs_note(&l->runs, l->cctx, tr)) return w_fail(l, ERR_NOMEM, "out of memory");
    track_info *ti = &l->t.tracks[tr];
    ti->events++;
    l->seen++;
    note_shown(l, ti, e);
    if (count_event(l, e, cls, kind)) return w_fail(l, ERR_NOMEM, "out of memory");
    int rc = cls != EV_OTHER ? index_event(l, e, cls, kind, kind_id, name_id, tr) : python_range(l, e, kind, kind_id, name_id, tr);
    if (!rc && l->opts.max_distinct && intern_count(l->t.strs) > l->opts.max_distinct) {
        char msg[200];
        snprintf(msg, sizeof msg, "the trace has more than %llu distinct names, categories and input shapes (--max-distinct)",
                 l->opts.max_distinct);
        return w_fail(l, ERR_TOOBIG, msg);
    }
    if (!rc && l->opts.max_name_bytes_per_event &&
        intern_bytes(l->t.strs) > LOAD_NAME_BYTES_FREE + l->seen * l->opts.max_name_bytes_per_event) {
        char msg[200];
        snprintf(msg, sizeof msg, "the trace's distinct names take over 16 MiB plus %llu bytes per event (--max-name-bytes-per-event)",
                 l->opts.max_name_bytes_per_event);
        return w_fail(l, ERR_TOOBIG, msg);
    }
    return rc ? rc : chunk_event(l, e, cls, kind_id, name_id, tr);
}

/* The sink's on_event, on the request thread: what can be refused at once is refused
 * here, with its message; the rest goes to the loader thread. */
static int on_event(void *ctx, const ingest_event *e) {
    loader *l = ctx;
    if (l->opts.max_events && (unsigned long long)l->t.events >= l->opts.max_events)
        return set_err(l, ERR_TOOBIG, "the trace has more events than --max-events allows");
    l->t.events++;
    /* Bounded, not only finite: two durs of 1e308 summed to infinity, and /operators then
     * listed nothing (issue 22). 1e18 us is 31,000 years; 20M events of it still sum finite. */
    if (e->has_dur && (e->dur < 0 || !(e->dur <= LOAD_US_MAX)))
        return set_err(l, ERR_INVALID, "an event has a negative dur, or one over 1e18 us");
    if (e->has_ts && !(fabs(e->ts) <= LOAD_US_MAX)) return set_err(l, ERR_INVALID, "an event has a ts beyond +-1e18 us");
    int rc = evq_push(l->q, e);
    /* The loader thread's message is readable here: evq_push returned its error, which it
     * set under evq's lock after writing w_err. */
    if (rc && l->w_err[0]) return set_err(l, rc, l->w_err);
    return rc ? set_err(l, rc, rc == ERR_NOMEM ? "out of memory" : "the events could not be stored") : 0;
}

static const char *sink_message(void *ctx) { return ((loader *)ctx)->err; }

static int on_meta(void *ctx, const char *key, const char *json, size_t len) {
    loader *l = ctx;
    json_error_t jerr;
    json_t *v = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
    if (!v) return set_err(l, ERR_INVALID, "a top-level value could not be read back");
    json_object_set_new(l->t.meta, key, v);
    return 0;
}

/* ---- lifecycle ---- */

/* Why named files and not ATTACH '' (which SQLite deletes as soon as it is open): the
 * analysis reads scratch from a second connection too, and writes kscratch from one of its
 * own, to use the second core (analyze.c, gpu_job; gpurows.c). They are tmpfile.h files,
 * gone at loader_free (or at the next start after a crash). */
static int attach_one(loader *l, const char *schema, char *path, size_t len, char *err, size_t errlen) {
    int fd = tmpfile_make(schema, path, len);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a scratch file in %s: %s", tmpfile_dir(), strerror(errno));
        path[0] = '\0';
        return ERR_IO;
    }
    close(fd);
    char sql[32]; /* schema is one of ours, not input */
    snprintf(sql, sizeof sql, "ATTACH ? AS %s", schema);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(l->t.db, sql, -1, &s, NULL) == SQLITE_OK &&
             sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(s) == SQLITE_DONE ? 0 : ERR_DB;
    sqlite3_finalize(s);
    if (rc) snprintf(err, errlen, "cannot attach the scratch database: %s", sqlite3_errmsg(l->t.db));
    else l->attached++;
    return rc;
}

static int attach_scratch(loader *l, char *err, size_t errlen) {
    int rc = attach_one(l, "scratch", l->scratch_path, sizeof l->scratch_path, err, errlen);
    if (!rc) rc = attach_one(l, "kscratch", l->kscratch_path, sizeof l->kscratch_path, err, errlen);
    if (!rc) rc = attach_one(l, "wscratch", l->wscratch_path, sizeof l->wscratch_path, err, errlen);
    l->t.scratch_path = l->scratch_path[0] ? l->scratch_path : NULL;
    l->t.kscratch_path = l->kscratch_path[0] ? l->kscratch_path : NULL;
    return rc;
}

loader *loader_new(store *st, const load_opts *o, char *err, size_t errlen) {
    loader *l = calloc(1, sizeof *l);
    if (!l) goto oom;
    l->st = st;
    l->opts = *o;
    l->next_chunk = o->seq_base;
    runs_writer_init(&l->runs);
    l->t.max_steps = o->max_steps;
    l->t.start_us = INFINITY;
    l->t.end_us = -INFINITY;
    l->t.strs = intern_new();
    l->t.xargs = intern_new();
    l->track_keys = intern_new();
    l->count_keys = intern_new();
    l->op_keys = intern_new();
    memset(l->op_seen, 0xff, sizeof l->op_seen); /* -1s: no key */
    l->t.meta = json_object();
    l->cctx = ZSTD_createCCtx();
    if (!l->cctx || !l->t.strs || !l->t.xargs || !l->track_keys || !l->count_keys || !l->op_keys || !l->t.meta) goto oom;
    l->t.db = store_scratch_get(st, &l->hold);
    if (!l->t.db) {
        snprintf(err, errlen, "cannot open the database");
        loader_free(l);
        return NULL;
    }
    /* Why no automatic checkpoint: the upload's COMMIT would copy its WAL frames (the whole
     * session, 45 ms at 300 MB) into the database before the 201 could go out; loader_free,
     * which runs once the reply is sent (http.c: on_completed), checkpoints instead. */
    sqlite3_wal_autocheckpoint(l->t.db, 0);
    if (attach_scratch(l, err, errlen)) {
        loader_free(l);
        return NULL;
    }
    if (exec(l->t.db, scratch_load_sql) || exec(l->t.db, "BEGIN") ||
        sqlite3_prepare_v2(l->t.db,
                           "INSERT INTO scratch.ev(cls,kind,name,track,ts,te,corr,dev,stream,bytes,devtype,"
                           "shapes,grid,block,regs,smem,dur,seq,bps,occ) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &l->ins_ev, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(l->t.db, "INSERT INTO scratch.ann(cls,kind,name,dev,ts,te,dur) VALUES (?,?,?,?,?,?,?)", -1, &l->ins_ann, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(l->t.db, "INSERT INTO scratch.hblk(track,n,data) VALUES (?,?,?)", -1, &l->ins_hblk, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(l->t.db, "INSERT INTO scratch.chunks(track,seq,n,min_ts,max_end,data,drawn,gpu) VALUES (?,?,?,?,?,?,?,?)",
                           -1, &l->ins_chunk, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot prepare the scratch database: %s", sqlite3_errmsg(l->t.db));
        loader_free(l);
        return NULL;
    }
    atomic_fetch_add(&loaders_active, 1);
    l->counted = 1;
    if (set_share(l)) {
        snprintf(err, errlen, "cannot size the scratch database: %s", sqlite3_errmsg(l->t.db));
        loader_free(l);
        return NULL;
    }
    l->q = evq_new(store_event, l);
    if (!l->q) {
        snprintf(err, errlen, "cannot start the loader thread");
        loader_free(l);
        return NULL;
    }
    l->sink.ctx = l;
    l->sink.on_event = on_event;
    l->sink.on_meta = on_meta;
    l->sink.message = sink_message;
    return l;
oom:
    snprintf(err, errlen, "out of memory");
    loader_free(l);
    return NULL;
}

const ingest_sink *loader_sink(loader *l) { return &l->sink; }

/* How many distinct devices the trace's GPU tracks name (the GPUs the run used). */
static size_t devices_used(const trace_ctx *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->ntracks; i++) {
        if (!t->tracks[i].gpu || !t->tracks[i].events) continue;
        size_t j = 0;
        while (j < i && !(t->tracks[j].gpu && t->tracks[j].events && t->tracks[j].device == t->tracks[i].device)) j++;
        n += j == i;
    }
    return n;
}

/* "NVIDIA A100-PG509-200 x8" from deviceProperties, or the collector's GPU list. The count is
 * the GPUs the run used where it used fewer than the node has: a one-GPU run on an eight-GPU
 * node reads "NVIDIA A100-PG509-200 x1 (of 8 on the node)", not x8 (issue 51, item 7).
 * Kineto lists every device of the node in deviceProperties, whatever the process used. */
static char *hardware_of(json_t *meta, const trace_ctx *t) {
    json_t *dp = json_object_get(meta, "deviceProperties");
    if (!json_is_array(dp) || json_array_size(dp) == 0) dp = json_object_get(meta, "computeProperties");
    if (!json_is_array(dp) || json_array_size(dp) == 0) return strdup("");
    const char *first = json_string_value(json_object_get(json_array_get(dp, 0), "name"));
    if (!first) return strdup("");
    size_t same = 0, n = json_array_size(dp), used = devices_used(t);
    for (size_t i = 0; i < n; i++) {
        const char *nm = json_string_value(json_object_get(json_array_get(dp, i), "name"));
        if (nm && !strcmp(nm, first)) same++;
    }
    char out[512];
    if (same == n && used && used < n) utf8_snprintf(out, sizeof out, "%s x%zu (of %zu on the node)", first, used, n);
    else if (same == n) utf8_snprintf(out, sizeof out, "%s x%zu", first, n);
    else utf8_snprintf(out, sizeof out, "%s x%zu (+%zu other)", first, same, n - same);
    return strdup(out);
}

/* The nsys export's measured bandwidths as the replay row keeps them: "[[dev, bytes/s], ...]"
 * (a new string), NULL when there are none or out of memory (*oom set then). */
static char *gpu_bw_json(const trace_ctx *t, int *oom) {
    *oom = 0;
    if (!t->ngpu_bw) return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < t->ngpu_bw; i++)
        if (json_array_append_new(a, json_pack("[I,f]", (json_int_t)t->gpu_bw[i].dev, t->gpu_bw[i].bw))) json_decref(a), a = NULL;
    char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    *oom = !s;
    return s;
}

/* The analysed upload as a session, in one transaction (store/commit.h): a new one, or for
 * a re-analysis the session it replaces. */
static int write_session(loader *l, const analysis *a, unsigned long long bytes_in, long long *id) {
    const trace_ctx *t = &l->t;
    int oom;
    char *bw = gpu_bw_json(t, &oom);
    json_t *idj = json_pack("{s:s?,s:o}", "name", t->name, "labels", t->labels ? json_incref(t->labels) : json_object());
    char *ident = idj ? json_dumps(idj, JSON_COMPACT) : NULL;
    json_decref(idj);
    if (oom || !ident) {
        free(bw);
        free(ident);
        return set_err(l, ERR_NOMEM, "out of memory");
    }
    store_session_in in = {t->name, t->source, t->hardware, isfinite(t->start_us) ? t->start_us : 0,
                           isfinite(t->end_us) ? t->end_us : 0, t->events, bytes_in, t->meta, a->summary, a->gpu, a->report,
                           a->timeline, {l->fm.labels, l->opts.labels}, {l->fm.nlabels, l->opts.nlabels}, t->strs, a->effic,
                           ANALYSIS_VERSION, l->runs.out.p ? l->runs.out.p : "", l->runs.out.len, l->runs.events, bw, ident,
                           a->steps, a->step_count, a->step_mean_us, a->step_sd_us, l->opts.idempotency_key};
    char err[256];
    int rc;
    if (l->opts.replace_id) {
        rc = store_replace_session(l->st, t->db, l->hold, &in, l->opts.replace_id, l->opts.claimer, err, sizeof err);
        *id = l->opts.replace_id;
    } else {
        rc = store_commit_session(l->st, t->db, l->hold, &in, id, err, sizeof err);
    }
    free(bw);
    free(ident);
    return rc ? set_err(l, rc, err) : 0;
}

/* The summary's `counts`: events by count_event's key; they add up to event_count. */
static int add_counts(loader *l, analysis *a) {
    json_t *c = json_object();
    for (size_t i = 0; c && i < intern_count(l->count_keys); i++)
        if (json_object_set_new(c, intern_str(l->count_keys, (long)i), json_integer(l->counts[i]))) c = (json_decref(c), NULL);
    if (!c || json_object_set_new(a->summary, "counts", c)) return set_err(l, ERR_NOMEM, "out of memory");
    return 0;
}

int load_label_refused(const char *key, const char *value) { return !strcmp(key, "job") && value && !*value; }

/* Name, labels and hardware for the report: the query's name and labels win over the
 * collector's firstpass object; a form's filename comes last. */
static int prepare_identity(loader *l) {
    json_t *fpobj = json_object_get(l->t.meta, "firstpass");
    char ferr[128];
    if (fpobj && fp_session_meta_from_json(fpobj, &l->fm, ferr, sizeof ferr)) return set_err(l, ERR_INVALID, ferr);
    const char *name = l->opts.name && *l->opts.name ? l->opts.name : l->fm.name ? l->fm.name : l->fallback_name;
    l->t.name = name ? strdup(name) : NULL;
    json_t *labels = fp_labels_to_json(l->fm.labels, l->fm.nlabels);
    json_t *q = fp_labels_to_json(l->opts.labels, l->opts.nlabels);
    if (labels && q) json_object_update(labels, q);
    json_decref(q);
    l->t.labels = labels;
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v) /* the query's were checked at import_begin; what the trace adds, here */
        if (load_label_refused(k, json_string_value(v))) return set_err(l, ERR_INVALID, "firstpass.labels: " LOAD_LABEL_REFUSED_MSG);
    l->t.hardware = hardware_of(l->t.meta, &l->t);
    return (name && !l->t.name) || !labels || !l->t.hardware ? set_err(l, ERR_NOMEM, "out of memory") : 0;
}

/* FIRSTPASS_TRACE_ANALYSIS=1: the wall ms since *t0 as one more analysis step, and *t0 := now. */
static void log_step(const char *step, double *t0) {
    double t1 = mono_ms();
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) log_line("debug", "analysis", "step=%s ms=%.1f", step, t1 - *t0);
    *t0 = t1;
}

int loader_commit(loader *l, unsigned long long bytes_in, long long *id, char *err, size_t errlen) {
    int rc = 0;
    analysis a;
    memset(&a, 0, sizeof a);
    double t0 = mono_ms();
    rc = evq_finish(l->q);
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) { /* which half of the stream was the slower one */
        double full, empty;
        evq_waits(l->q, &full, &empty);
        log_line("debug", "analysis", "step=drain ms=%.1f parser_waited_ms=%.1f loader_waited_ms=%.1f",
                mono_ms() - t0, full, empty);
    }
    t0 = mono_ms();
    intern_free(l->op_keys); /* counted for max_distinct while the events came; the analysis has its own */
    l->op_keys = NULL;
    if (rc) {
        set_err(l, rc, l->w_err[0] ? l->w_err : "the events could not be stored");
        goto out;
    }
    if (l->err[0]) {
        rc = ERR_INVALID;
        goto out;
    }
    if (set_share(l)) { /* the loader thread is done: this thread has the connection now */
        rc = set_err(l, ERR_DB, sqlite3_errmsg(l->t.db));
        goto out;
    }
    l->t.source = l->source ? l->source
                  : json_object_get(l->t.meta, "firstpass") ? "firstpass" : l->legacy ? "legacy" : "kineto";
    rc = prepare_identity(l);
    if (rc) goto out;
    /* Each track's last chunk and host block, then their buffers: the stream is over, and
     * what they held (their capacity) would stay through the analysis. */
    for (size_t i = 0; i < l->t.ntracks && !rc; i++) {
        rc = flush_chunk(l, (long)i);
        builder_drop(l, i);
    }
    for (size_t i = 0; i < l->t.ntracks && !rc; i++) {
        if ((rc = flush_hblk(l, (long)i))) set_err(l, rc, sqlite3_errmsg(l->t.db));
        buf_free(&l->hblk[i]);
    }
    /* The GPU rows grew by doubling (100,000 names: room for 131,072); no row comes now */
    if (l->t.ngpu_aggs && l->t.ngpu_aggs < l->t.capgpu_aggs) {
        gpu_agg *fit = realloc(l->t.gpu_aggs, l->t.ngpu_aggs * sizeof *fit);
        if (fit) l->t.gpu_aggs = fit, l->t.capgpu_aggs = l->t.ngpu_aggs;
    }
    if (!rc && exec(l->t.db, "COMMIT")) rc = set_err(l, ERR_DB, sqlite3_errmsg(l->t.db));
    log_step("scratch_commit", &t0);
    if (!rc) rc = analyze_run(&l->t, &a, l->err, sizeof l->err);
    t0 = mono_ms();
    if (!rc && exec(l->t.db, "BEGIN")) rc = set_err(l, ERR_DB, sqlite3_errmsg(l->t.db));
    if (!rc) rc = synth_run(&l->t, on_synth, l);
    if (!rc) rc = flush_synth(l);
    if (!rc && exec(l->t.db, "COMMIT")) rc = set_err(l, ERR_DB, sqlite3_errmsg(l->t.db));
    log_step("synth", &t0);
    if (!rc) rc = add_counts(l, &a);
    if (!rc && runs_finish(&l->runs, l->cctx)) rc = set_err(l, ERR_NOMEM, "out of memory");
    if (!rc) rc = write_session(l, &a, bytes_in, id);
    log_step("write_session", &t0);
out:
    analysis_free(&a);
    l->failed_full = rc == ERR_FULL;
    if (rc) snprintf(err, errlen, "%s", l->err[0] ? l->err : "the session could not be stored");
    return rc;
}

void loader_set_legacy(loader *l, int legacy) { l->legacy = legacy; }
void loader_set_source(loader *l, const char *source) { l->source = source; }

void loader_set_bandwidth(loader *l, long long dev, double bytes_per_s) {
    trace_ctx *t = &l->t;
    if (!(bytes_per_s > 0) || t->ngpu_bw >= (int)(sizeof t->gpu_bw / sizeof t->gpu_bw[0])) return;
    t->gpu_bw[t->ngpu_bw].dev = dev;
    t->gpu_bw[t->ngpu_bw++].bw = bytes_per_s;
}

int loader_set_fallback_name(loader *l, const char *name) {
    free(l->fallback_name);
    l->fallback_name = name ? strdup(name) : NULL;
    return name && !l->fallback_name ? ERR_NOMEM : 0;
}

void loader_free(loader *l) {
    if (!l) return;
    free(l->fallback_name);
    evq_free(l->q); /* first: the loader thread may still be using the statements */
    if (l->counted) atomic_fetch_sub(&loaders_active, 1);
    sqlite3_finalize(l->ins_ev);
    sqlite3_finalize(l->ins_ann);
    sqlite3_finalize(l->ins_chunk);
    sqlite3_finalize(l->ins_hblk);
    if (l->t.db) {
        /* DETACH, so the connection goes back clean to the pool; then the file goes. */
        if (!sqlite3_get_autocommit(l->t.db)) sqlite3_exec(l->t.db, "ROLLBACK", NULL, NULL, NULL);
        if (l->attached > 2) sqlite3_exec(l->t.db, "DETACH wscratch", NULL, NULL, NULL);
        if (l->attached > 1) sqlite3_exec(l->t.db, "DETACH kscratch", NULL, NULL, NULL);
        if (l->attached) sqlite3_exec(l->t.db, "DETACH scratch", NULL, NULL, NULL);
        /* what SQLite would have done at COMMIT (loader_new), then its default again for
         * whoever takes the connection next: a passive checkpoint waits for no reader */
        int frames = 0, done = 0;
        sqlite3_wal_checkpoint_v2(l->t.db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &done);
        /* After a big write the WAL file keeps its size (journal_size_limit cuts it only
         * when the next writer restarts it): TRUNCATE waits (busy timeout) for readers on
         * older snapshots, then empties the file, here, after the reply went out. */
        /* A commit that failed on a full disk left its frames in the WAL file (not counted
         * in frames): emptying it gives that room back, so a delete can run (store.h). */
        if ((long long)frames * page_size(l->t.db) > LOAD_WAL_TRUNCATE_BYTES || l->failed_full)
            sqlite3_wal_checkpoint_v2(l->t.db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_wal_autocheckpoint(l->t.db, 1000);
        store_scratch_put(l->st, l->t.db, l->hold);
    }
    if (l->scratch_path[0]) unlink(l->scratch_path);
    if (l->kscratch_path[0]) unlink(l->kscratch_path);
    if (l->wscratch_path[0]) unlink(l->wscratch_path);
    for (size_t i = 0; i < l->t.ntracks; i++) {
        free(l->t.tracks[i].pid);
        free(l->t.tracks[i].tid);
        builder_drop(l, i);
        buf_free(&l->hblk[i]);
    }
    free(l->t.tracks);
    free(l->chunks);
    free(l->hblk);
    free(l->chunk_min);
    free(l->chunk_max);
    intern_free(l->t.strs);
    intern_free(l->t.xargs);
    free((char *)l->t.name);
    free(l->t.hardware);
    json_decref(l->t.labels);
    intern_free(l->track_keys);
    intern_free(l->count_keys);
    intern_free(l->op_keys);
    free(l->t.gpu_agg_first);
    free(l->t.gpu_aggs);
    free(l->counts);
    chunk_builder_free(&l->synth);
    buf_free(&l->zbuf);
    ZSTD_freeCCtx(l->cctx);
    buf_free(&l->keybuf);
    buf_free(&l->minbuf);
    buf_free(&l->scrubbuf);
    json_decref(l->t.meta);
    fp_session_meta_free(&l->fm);
    runs_writer_free(&l->runs);
    free(l);
}
