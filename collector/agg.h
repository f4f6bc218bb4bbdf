/* agg.h -- the collector's aggregator: interned names, per-name statistics, NVTX range
 * pairing, and the bounded event store for the trace download.
 *
 * Free of CUPTI types so that it builds and is tested where CUDA is absent. record.c turns
 * CUPTI records into calls on this API; session_json.c reads the struct below (read-only) to
 * write the native session JSON. Nothing here is thread-safe: the caller (inject.c) holds
 * one mutex around every call on a given fp_agg. */
#ifndef FP_COLLECTOR_AGG_H
#define FP_COLLECTOR_AGG_H

#include <stddef.h>
#include <stdint.h>

#define FP_NAME_NONE    UINT32_MAX /* interned id meaning "no name" / failure */
#define FP_MAX_DEVICES  64         /* device ids at or above this are not described */
#define FP_EVENT_CHUNK  4096       /* events per chunk; chunks are never moved once allocated */

/* Trace event categories, exactly the "cat" strings of the contract. */
enum fp_cat {
    FP_CAT_KERNEL,   /* "kernel" */
    FP_CAT_MEMCPY,   /* "gpu_memcpy" */
    FP_CAT_MEMSET,   /* "gpu_memset" */
    FP_CAT_RUNTIME,  /* "cuda_runtime" */
    FP_CAT_DRIVER,   /* "cuda_driver" */
    FP_CAT_SYNC,     /* "cuda_sync" */
    FP_CAT_RANGE,    /* "user_annotation" */
    FP_CAT__N
};

/* Aggregate groups: one stats table per group, indexed by interned name id. */
enum fp_group {
    FP_G_KERNEL,     /* by mangled kernel name */
    FP_G_RUNTIME,    /* by runtime API name (version suffix stripped) */
    FP_G_DRIVER,     /* by driver API name */
    FP_G_RANGE,      /* by NVTX range name (all domains together) */
    FP_G_MEMCPY,     /* by copy name, memsets included ("Memset (Device)") */
    FP_G_SYNC,       /* by synchronisation name ("Stream Sync", ...) */
    FP_G__N
};

typedef struct fp_stat {
    uint64_t calls;    /* records seen, timed or not */
    uint64_t timed;    /* records with a usable start/end: the ones in total/min/max */
    uint64_t total_ns; /* sum of durations */
    uint64_t min_ns;   /* valid when timed > 0 */
    uint64_t max_ns;
    uint64_t bytes;    /* memcpy/memset only */
} fp_stat;

typedef struct fp_stat_table {
    fp_stat *v;  /* indexed by name id; calls == 0 means "no row" */
    size_t cap;  /* entries allocated in v */
} fp_stat_table;

/* One trace event: a fixed struct so that storing one never allocates per record. */
typedef struct fp_event {
    int64_t start_ns;      /* absolute, CUPTI clock (Unix epoch ns) */
    int64_t end_ns;
    uint32_t name;         /* interned display name */
    uint32_t correlation;  /* CUPTI correlation id, 0 = none */
    uint32_t pid;          /* device id for GPU events, process id for host events */
    uint32_t tid;          /* stream id for GPU events, thread id for host events */
    uint8_t cat;           /* enum fp_cat */
    union {
        struct {
            int32_t grid[3], block[3];
            int32_t static_smem, dynamic_smem;
            uint32_t context;
            uint32_t mangled;   /* interned mangled name, FP_NAME_NONE if same as name */
            uint16_t registers;
        } k;
        struct {
            uint64_t bytes;
            uint32_t context;
            uint32_t driver_correlation; /* memcpy: the driver API record's id */
            uint32_t src_device, dst_device; /* PtoP only, else UINT32_MAX */
            uint8_t copy_kind, src_kind, dst_kind; /* CUPTI enum values; memset: dst_kind */
            uint8_t async;
            uint32_t value;     /* memset value */
        } m;
        struct {
            uint32_t cbid;
            uint32_t ret;
        } api;
        struct {
            uint32_t domain;    /* interned domain name, FP_NAME_NONE = default domain */
        } range;
        struct {
            uint32_t type;      /* CUpti_ActivitySynchronizationType value */
            uint32_t context;
        } sync;
    } u;
} fp_event;

typedef struct fp_device {
    int present;              /* 1 once anything is known */
    char name[256];
    long long total_mem;      /* bytes */
    int cc_major, cc_minor, num_sms, max_threads_per_block, max_threads_per_sm;
    int regs_per_block, smem_per_block, warp_size;
} fp_device;

/* Open-addressing map uint64 -> uint64 (linear probing, backward-shift delete). */
typedef struct fp_u64map {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used;
    size_t cap;   /* power of two, or 0 */
    size_t n;
} fp_u64map;

/* A range half waiting for its other half (see fp_agg_range_*). */
typedef struct fp_pending {
    uint32_t id;        /* CUPTI marker id */
    uint8_t have_start, have_end;
    int64_t start_ns, end_ns;
    uint32_t name, domain;
    uint32_t pid, tid;
} fp_pending;

typedef struct fp_agg_config {
    int events;          /* 1: keep trace events; 0: aggregates only */
    size_t max_events;   /* cap on stored events; at the cap events_truncated is set */
} fp_agg_config;

typedef struct fp_agg {
    fp_agg_config cfg;
    /* Time window of believable records, ns on the session's clock; 0 = no bound. A timed
     * record outside it is on another clock (a second CUPTI client replaced CUPTI's
     * timestamp callback): counted in clock_outliers and kept out of times and events. */
    int64_t win_lo, win_hi;
    /* interning: names[id] is a NUL-terminated copy owned by the arena */
    char **names;        /* id -> string */
    uint32_t *name_hash; /* id -> hash */
    size_t nnames, names_cap;
    uint32_t *htab;      /* open addressing: 0 empty, else id + 1 */
    size_t htab_cap;     /* power of two */
    char *arena;         /* current arena block (blocks chained through their first 8 bytes) */
    size_t arena_used, arena_cap;
    /* per-id caches used by record.c */
    uint32_t *display;   /* kernel mangled id -> display id (0 = not computed, else id + 1) */
    size_t display_cap;
    uint32_t *api_cache[2]; /* [0] runtime, [1] driver: cbid -> interned id + 1 */
    size_t api_cache_cap[2];
    const char *(*api_name)(int driver, uint32_t cbid); /* injected namer, may be NULL */
    fp_u64map kname;     /* CUPTI's kernel name pointer -> interned id (record.c) */
    fp_u64map small_ids; /* (record kind, enum values) -> interned id: memcpy/memset/sync names */
    uint64_t name_lookups; /* fp_agg_intern_n calls (hash + compare of the whole string): for
                            * tests and benchmarks of the per-record cost */

    fp_stat_table stats[FP_G__N];

    fp_event **chunks;   /* events: chunk i holds FP_EVENT_CHUNK events */
    size_t nchunks, chunks_cap;
    size_t nevents;      /* events stored */
    uint64_t events_seen; /* events offered (stored or not) */
    int events_truncated;

    fp_u64map ext;       /* correlation id -> external id */
    fp_u64map ext_kind;  /* correlation id -> external kind */
    fp_u64map ctx_dev;   /* context id -> device id */
    fp_u64map pending_ix; /* marker id -> index into pending */
    fp_pending *pending;
    size_t npending, pending_cap;

    fp_device devices[FP_MAX_DEVICES];

    /* counters reported in the session, never hidden */
    uint64_t records;            /* records given to fp_process_record */
    uint64_t unknown_kinds;      /* records of kinds we do not handle */
    uint64_t untimed;            /* records with start/end 0 or end < start */
    uint64_t clock_outliers;     /* timed records outside [win_lo, win_hi] */
    uint64_t sync_not_ready;     /* sync records of polls that returned not-ready: not syncs */
    uint64_t ranges;             /* completed NVTX ranges */
    uint64_t ranges_unmatched_end;   /* END seen, START never (counted at fp_agg_finish) */
    uint64_t ranges_unmatched_start; /* START seen, END never */
    uint64_t ranges_duplicate;   /* second START or END for a pending id */
    uint64_t instant_markers;    /* nvtxMark: counted, not stored */
    uint64_t ext_dropped;        /* external ids not kept (cap reached) */
    uint64_t buffer_errors;      /* cuptiActivityGetNextRecord errors other than end-of-buffer */
    uint64_t oom;                /* allocations that failed; the record was counted, not stored */
    unsigned long long dropped_records; /* CUPTI's own drop count, summed */
    unsigned long long requests_refused; /* buffer requests the collector's pool refused; CUPTI
                                          * counts the records it then drops in dropped_records */
} fp_agg;

/* New aggregator; cfg NULL means events on, cap 1,000,000. NULL on OOM. */
fp_agg *fp_agg_new(const fp_agg_config *cfg);
/* Frees everything. Accepts NULL. */
void fp_agg_free(fp_agg *a);

/* Interns s (copied) and returns its id, stable for the aggregator's life; the same string
 * always returns the same id. Allocates only for a new string. FP_NAME_NONE on OOM/NULL. */
uint32_t fp_agg_intern(fp_agg *a, const char *s);
/* Like fp_agg_intern for the first n bytes of s. */
uint32_t fp_agg_intern_n(fp_agg *a, const char *s, size_t n);
/* Borrowed string for an id, "" for FP_NAME_NONE or an unknown id. */
const char *fp_agg_name(const fp_agg *a, uint32_t id);

/* Adds one call to group g, row name. start/end in ns; if either is 0 or end < start the call
 * is counted but untimed (and a->untimed is bumped); if it lies outside the window it is
 * counted but untimed too (a->clock_outliers). Returns 0, or -1 on OOM (counted). */
int fp_agg_stat(fp_agg *a, int g, uint32_t name, uint64_t start_ns, uint64_t end_ns,
                uint64_t bytes);

/* Stores a copy of *e if events are on, the cap is not reached and e is timed and inside the
 * window (fp_agg_stat counts the ones outside). At the cap it
 * sets events_truncated and drops the event. Returns 0 when stored, 1 when not, -1 on OOM. */
int fp_agg_event(fp_agg *a, const fp_event *e);
/* Event i (0 <= i < nevents), borrowed. */
const fp_event *fp_agg_event_at(const fp_agg *a, size_t i);

/* NVTX pairing. The two halves of a range share a marker id and may arrive in either order
 * (per-thread buffers, cross-thread start/end ranges). The first half waits in a pending
 * table; the second completes the range: one FP_G_RANGE stat and one FP_CAT_RANGE event with
 * the START half's name, domain, pid and tid. A timestamp of 0 on either half makes the range
 * untimed (counted, not stored). Returns 0, or -1 on OOM. */
int fp_agg_range_start(fp_agg *a, uint32_t id, int64_t ts_ns, uint32_t name, uint32_t domain,
                       uint32_t pid, uint32_t tid);
int fp_agg_range_end(fp_agg *a, uint32_t id, int64_t ts_ns);
/* Moves still-pending halves from src into dst (re-interning names): used when a periodic
 * flush starts a new session while ranges are open. */
int fp_agg_move_pending(fp_agg *src, fp_agg *dst);
/* Counts what is still pending as unmatched and empties the table. Call once, at the end. */
void fp_agg_finish(fp_agg *a);

/* correlation id -> external correlation (e.g. a framework op id). Kept up to max_events. */
void fp_agg_external(fp_agg *a, uint32_t correlation, uint32_t kind, uint64_t external_id);
/* 0 and *id set if correlation has an external id, else -1. */
int fp_agg_external_get(const fp_agg *a, uint32_t correlation, uint64_t *id, uint32_t *kind);

/* context id -> device id, from CONTEXT records; lookup gives 0 when unknown. */
void fp_agg_context(fp_agg *a, uint32_t context, uint32_t device);
uint32_t fp_agg_context_device(const fp_agg *a, uint32_t context);

/* The device slot for id, or NULL if id >= FP_MAX_DEVICES. */
fp_device *fp_agg_device(fp_agg *a, uint32_t id);

/* Display names for CUPTI enum values, Kineto's spelling, without CUPTI headers (record.c
 * static-asserts the values): memory kinds ("Pageable", "Pinned", "Device", ...), copy kinds
 * ("HtoD", ...), synchronisation types ("Stream Sync", ...). "<unknown>" / "Unknown Sync". */
const char *fp_memory_kind_str(unsigned kind);
const char *fp_memcpy_kind_str(unsigned kind);
const char *fp_sync_type_str(unsigned type);

/* u64 map, exposed for tests and for the aggregator's own tables. */
int fp_u64map_put(fp_u64map *m, uint64_t key, uint64_t val); /* 0, or -1 on OOM */
int fp_u64map_get(const fp_u64map *m, uint64_t key, uint64_t *val); /* 0 found, -1 not */
int fp_u64map_del(fp_u64map *m, uint64_t key); /* 0 deleted, -1 absent */
void fp_u64map_free(fp_u64map *m);

#endif
