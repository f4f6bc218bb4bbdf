/* nsys.c: the Nsight Systems importer: `nsys export --type sqlite` rows -> loader events.
 *
 * Owns the spool file of an SQLite upload and, inside nsys_import, a read-only sqlite3
 * connection to that file. Besides store.c it is the one module that opens a database:
 * the upload's own, never the server's. Must not see MHD types; it hands events to the
 * loader's ingest_sink (the JSON importer's sink) and metadata to its on_meta, nothing else.
 *
 * Tables read ([col]: optional). Any table may be absent except StringIds:
 *   TABLE                        COLUMNS                                  EVENT (Kineto cat)
 *   StringIds                    id (its PRIMARY KEY), value              names of the rows below
 *   CUPTI_ACTIVITY_KIND_KERNEL   start end deviceId streamId              kernel; pid = device,
 *                                correlationId gridX/Y/Z blockX/Y/Z       tid = stream; name =
 *                                registersPerThread staticSharedMemory    demangledName, else
 *                                dynamicSharedMemory demangledName        shortName (StringIds);
 *                                shortName [contextId]                    smem = static + dynamic
 *   CUPTI_ACTIVITY_KIND_RUNTIME  start end globalTid correlationId        cuda_runtime (eventClass
 *                                nameId [eventClass]                      0 or absent), cuda_driver
 *                                                                         (1); other classes skipped
 *   CUPTI_ACTIVITY_KIND_MEMCPY   start end deviceId streamId              gpu_memcpy, "Memcpy HtoD
 *                                correlationId bytes copyKind             (Pageable -> Device)"
 *                                [srcKind] [dstKind]
 *   CUPTI_ACTIVITY_KIND_MEMSET   start end deviceId streamId              gpu_memset, "Memset
 *                                correlationId bytes [memKind]            (Device)"
 *   NVTX_EVENTS                  start end eventType globalTid            user_annotation (ranges:
 *                                [text] [textId]                          the phases), nvtx_mark
 *   TARGET_INFO_GPU              id [name totalMemory smCount             meta deviceProperties,
 *                                computeMajor computeMinor ...]           Kineto's key names
 * Each table is read with a fixed `SELECT * FROM <table>` and its columns are found by
 * name in the prepared statement, so a missing column is a clear 422 and never a failed
 * query, and older or newer exports with extra columns read the same. Names come from one
 * prepared StringIds lookup with a small cache (kernel names repeat).
 *
 * Units: nsys stores integer nanoseconds (from the session start); the session model is
 * microseconds. ts = start / 1000 and dur = (end - start) / 1000, written into the event
 * JSON exactly ("12.345" for 12345 ns) and as doubles into the loader.
 *
 * globalTid packs (vm << 56) | (pid << 24) | tid (nsys docs, "Serialized process and thread
 * identifiers"): pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF. A NULL
 * globalTid is pid 0, tid 0.
 *
 * Enums, as the export's own ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND tables list them:
 *   copyKind  0 Unknown 1 HtoD 2 DtoH 3 HtoA 4 AtoH 5 AtoA 6 AtoD 7 DtoA 8 DtoD 9 HtoH
 *             10 PtoP; 11/12/13 unified-memory HtoD/DtoH/DtoD (named HtoD/DtoH/DtoD)
 *   mem kind  0 Pageable 1 Pinned 2 Device 3 Array 4 Managed 5 Device Static
 *             6 Managed Static 7 Unknown (NOT CUPTI's CUpti_ActivityMemoryKind order)
 *   NVTX eventType 59 push/pop range and 60 start/end range -> user_annotation, ph X;
 *             34 mark -> cat nvtx_mark, ph i (kept for the download, not analysed);
 *             others (domains, categories, thread names) are skipped.
 * Runtime names lose their ABI suffix ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"), as
 * Nsight's reports and Kineto write them. nsys 2022 also wrote "CUDA backtrace" rows
 * (eventClass 67) that repeat a call with its correlation id: they are skipped, else that
 * call's GPU time would count twice.
 *
 * Hostile files: opened read-only with immutable=1 (no locks, no journal or WAL replay),
 * query_only, defensive, no triggers, no views, untrusted schema, no ATTACH; tables must be
 * ordinary ones (not views, not virtual); a string or row over NSYS_MAX_STRING fails
 * (SQLITE_LIMIT_LENGTH); a progress handler stops the import after NSYS_MAX_VM_STEPS; a
 * header that claims more pages than arrived is "truncated"; rows with NULL or reversed
 * times are skipped and counted (meta nsys_invalid_rows); events are capped by the loader's
 * --max-events. Text is made valid UTF-8 (U+FFFD for bad bytes) before it reaches JSON. */
#include "ingest/nsys.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/occupancy.h"
#include "lib/tmpfile.h"

#define NS_LIMIT 1000000000000000000LL /* |time| in ns a row may have (31 years) */
#define NAME_CACHE 256                  /* StringIds lookups cached, direct-mapped by id */
#define NAME_CACHE_MAX (64 << 10)       /* longer strings are not cached */
#define MAX_COLS 24                     /* columns one row function reads */

struct nsys_spool {
    int fd;                    /* the temporary file, open for writing */
    unsigned long long bytes;  /* written so far */
    char path[PATH_MAX];       /* unlinked by nsys_spool_free */
};

/* ---- spool ---- */

static nsys_spool *spool_new(void) {
    nsys_spool *sp = calloc(1, sizeof *sp);
    if (!sp) return NULL;
    sp->fd = tmpfile_make("nsys", sp->path, sizeof sp->path);
    if (sp->fd < 0) {
        free(sp);
        return NULL;
    }
    return sp;
}

int nsys_spool_sink(void *ctx, const void *data, size_t len) {
    nsys_spool **spp = ctx;
    if (!*spp && !(*spp = spool_new())) return ERR_IO;
    nsys_spool *sp = *spp;
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(sp->fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ERR_IO; /* ENOSPC and friends: the upload fails, nothing is kept */
        p += w;
        len -= (size_t)w;
        sp->bytes += (unsigned long long)w;
    }
    return 0;
}

void nsys_spool_free(nsys_spool *sp) {
    if (!sp) return;
    if (sp->fd >= 0) close(sp->fd);
    unlink(sp->path);
    free(sp);
}

/* ---- the import context ---- */

typedef struct cache_ent {
    long long id;
    char *s;                   /* cleaned value (owned), NULL: empty slot */
} cache_ent;

typedef struct nx {
    sqlite3 *db;               /* the upload, read-only */
    const ingest_sink *sink;   /* the loader's */
    sqlite3_stmt *str_q;       /* SELECT value FROM StringIds WHERE id = ?1 */
    cache_ent cache[NAME_CACHE];
    buf name, args, json;      /* the event being built */
    long long steps;           /* progress handler calls (each NSYS_PROGRESS_N VM steps) */
    unsigned long long events; /* fed to the sink */
    long long invalid;         /* rows skipped for bad times */
    char *err;
    size_t errlen;
    loader *ld;
    /* the GPU table's devices, for each kernel launch's blocks per SM and occupancy estimate
     * (occupancy.h), which Kineto's traces carry as args and an export does not */
    struct { long long id; occ_device d; } gpus[NSYS_MAX_GPUS];
    int ngpus;
} nx;

#define NSYS_PROGRESS_N 1000

static int nx_fail(nx *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int nx_fail(nx *x, int code, const char *fmt, ...) {
    if (!x->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* An SQLite error while reading the upload, as the API should see it: a step budget or a
 * too-long string is 413, anything else (CORRUPT, NOTADB, IOERR...) a bad file, 400. */
static int db_fail(nx *x, int src, const char *what) {
    switch (src & 0xff) {
    case SQLITE_INTERRUPT:
        return nx_fail(x, ERR_TOOBIG, "reading %s took more than the import's work limit", what);
    case SQLITE_TOOBIG:
        return nx_fail(x, ERR_TOOBIG, "%s holds a string or row over %d bytes", what, NSYS_MAX_STRING);
    case SQLITE_NOMEM:
        return nx_fail(x, ERR_NOMEM, "out of memory reading %s", what);
    default:
        return nx_fail(x, ERR_INVALID, "the SQLite file is corrupt or unreadable (%s): %s", what,
                       x->db ? sqlite3_errmsg(x->db) : sqlite3_errstr(src));
    }
}

/* Stops any statement once the whole import used NSYS_MAX_VM_STEPS (a hostile schema or
 * a StringIds without its index could otherwise make one query run for hours). */
static int on_progress(void *ctx) {
    nx *x = ctx;
    return ++x->steps > NSYS_MAX_VM_STEPS / NSYS_PROGRESS_N;
}

/* ---- text ---- */

/* Length of the valid UTF-8 sequence at s (1..4), 0 when invalid; NUL counts as invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0], cp, min;
    size_t len;
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    cp = c & (0x3Fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

/* b = s as valid UTF-8: each invalid or NUL byte becomes U+FFFD. 0 or ERR_NOMEM. */
static int clean_utf8(buf *b, const unsigned char *s, size_t n) {
    buf_reset(b);
    if (buf_put(b, "", 0)) return ERR_NOMEM; /* b->p is never NULL afterwards */
    size_t run = 0, i = 0;
    while (i < n) {
        size_t l = utf8_len(s + i, n - i);
        if (l) {
            i += l;
            continue;
        }
        if (buf_put(b, s + run, i - run) || buf_put(b, "\xEF\xBF\xBD", 3)) return ERR_NOMEM;
        run = ++i;
    }
    return buf_put(b, s + run, n - run);
}


/* A JSON string of s (valid UTF-8 already). */
static int put_jstr(buf *b, const char *s) {
    if (buf_put(b, "\"", 1)) return ERR_NOMEM;
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (buf_put(b, run, (size_t)(s - run))) return ERR_NOMEM;
        int rc = c == '"' ? buf_puts(b, "\\\"") : c == '\\' ? buf_puts(b, "\\\\") : c == '\n' ? buf_puts(b, "\\n")
                 : buf_printf(b, "\\u%04x", c);
        if (rc) return rc;
        run = s + 1;
    }
    return buf_put(b, run, (size_t)(s - run)) || buf_put(b, "\"", 1) ? ERR_NOMEM : 0;
}

/* ns as exact decimal microseconds: 12345 -> "12.345". */
static int put_us(buf *b, long long ns) {
    unsigned long long a = ns < 0 ? 0ULL - (unsigned long long)ns : (unsigned long long)ns;
    return buf_printf(b, "%s%llu.%03llu", ns < 0 ? "-" : "", a / 1000, a % 1000);
}

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (CUPTI's ABI-versioned callback names). */
static void strip_abi_suffix(buf *b) {
    char *v = b->p ? strrchr(b->p, '_') : NULL;
    if (!v || v == b->p || v[1] != 'v' || !v[2]) return;
    for (const char *d = v + 2; *d; d++)
        if (*d < '0' || *d > '9') return;
    *v = '\0';
    b->len = (size_t)(v - b->p);
}

/* ---- columns ---- */

static int col_null(sqlite3_stmt *s, int i) { return i < 0 || sqlite3_column_type(s, i) == SQLITE_NULL; }
static long long col_i64(sqlite3_stmt *s, int i) { return i < 0 ? 0 : sqlite3_column_int64(s, i); }
static long long clamp(long long v, long long lo, long long hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Finds cols[i] among the statement's columns (case-insensitive, as SQLite's names are);
 * idx[i] = -1 when absent; a missing one of the first nreq is ERR_NOTTRACE. */
static int map_columns(nx *x, sqlite3_stmt *s, const char *table, const char *const *cols, int nreq, int *idx) {
    int ncol = sqlite3_column_count(s);
    for (int i = 0; cols[i]; i++) {
        idx[i] = -1;
        for (int c = 0; c < ncol; c++) {
            const char *n = sqlite3_column_name(s, c);
            if (n && !strcasecmp(n, cols[i])) {
                idx[i] = c;
                break;
            }
        }
        if (idx[i] < 0 && i < nreq)
            return nx_fail(x, ERR_NOTTRACE, "%s has no column %s: not an Nsight Systems export this server reads", table,
                           cols[i]);
    }
    return 0;
}

/* start and end (ns) of a row; 0 when both are there, in range, and end >= start. Else the
 * row is counted in x->invalid and the caller skips it. */
static int row_times(nx *x, sqlite3_stmt *s, int cs, int ce, long long *st, long long *en) {
    if (col_null(s, cs) || col_null(s, ce)) return x->invalid++, -1;
    *st = sqlite3_column_int64(s, cs);
    *en = sqlite3_column_int64(s, ce);
    if (*st < -NS_LIMIT || *st > NS_LIMIT || *en < *st || *en > NS_LIMIT) return x->invalid++, -1;
    return 0;
}

/* x->name = the StringIds value of the id in column col. *found = 0 when the column is
 * NULL or the id unknown. */
static int lookup_name(nx *x, sqlite3_stmt *row, int col, int *found) {
    *found = 0;
    if (col_null(row, col)) return 0;
    long long id = sqlite3_column_int64(row, col);
    cache_ent *c = &x->cache[(unsigned long long)id % NAME_CACHE];
    if (c->s && c->id == id) {
        *found = 1;
        buf_reset(&x->name);
        return buf_puts(&x->name, c->s);
    }
    sqlite3_stmt *q = x->str_q;
    sqlite3_bind_int64(q, 1, id);
    int src = sqlite3_step(q), rc = 0;
    if (src == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        rc = clean_utf8(&x->name, sqlite3_column_text(q, 0), (size_t)sqlite3_column_bytes(q, 0));
        *found = !rc;
    } else if (src != SQLITE_ROW && src != SQLITE_DONE) {
        rc = db_fail(x, src, "StringIds");
    }
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (*found && x->name.len <= NAME_CACHE_MAX) {
        char *dup = strdup(x->name.p);
        if (dup) {
            free(c->s);
            c->s = dup;
            c->id = id;
        }
    }
    return rc;
}

/* x->name = text column col as clean UTF-8; *found = 0 when NULL. */
static int text_name(nx *x, sqlite3_stmt *row, int col, int *found) {
    *found = !col_null(row, col);
    if (!*found) return 0;
    return clean_utf8(&x->name, sqlite3_column_text(row, col), (size_t)sqlite3_column_bytes(row, col));
}

static int set_name(nx *x, const char *s) {
    buf_reset(&x->name);
    return buf_puts(&x->name, s);
}

/* ---- events ---- */

/* Builds the event's JSON around x->name and x->args (members without braces), fills the
 * rest of e and feeds the loader. instant: ph i, no dur. */
static int emit(nx *x, ingest_event *e, long long st, long long en, long long pid, long long tid, int instant) {
    char ps[24], ts[24];
    snprintf(ps, sizeof ps, "%lld", pid);
    snprintf(ts, sizeof ts, "%lld", tid);
    buf *j = &x->json;
    buf_reset(j);
    int rc = buf_printf(j, "{\"ph\":\"%s\",\"cat\":", e->ph);
    if (!rc) rc = put_jstr(j, e->cat);
    if (!rc) rc = buf_puts(j, ",\"name\":");
    if (!rc) rc = put_jstr(j, buf_str(&x->name));
    if (!rc) rc = buf_printf(j, ",\"pid\":%s,\"tid\":%s,\"ts\":", ps, ts);
    if (!rc) rc = put_us(j, st);
    if (!rc) rc = instant ? buf_puts(j, ",\"s\":\"t\"") : buf_puts(j, ",\"dur\":");
    if (!rc && !instant) rc = put_us(j, en - st);
    if (!rc) rc = buf_puts(j, ",\"args\":{");
    if (!rc) rc = buf_put(j, buf_str(&x->args), x->args.len);
    if (!rc) rc = buf_puts(j, "}}");
    if (rc) return nx_fail(x, rc, "out of memory");
    e->name = buf_str(&x->name);
    e->pid = ps;
    e->tid = ts;
    e->ts = (double)st / 1e3;
    e->has_ts = 1;
    e->dur = instant ? 0 : (double)(en - st) / 1e3;
    e->has_dur = !instant;
    e->json = j->p;
    e->json_len = j->len;
    rc = x->sink->on_event(x->sink->ctx, e);
    if (rc) {
        const char *m = x->sink->message ? x->sink->message(x->sink->ctx) : NULL;
        return nx_fail(x, rc, "%s", m && *m ? m : "could not store the events");
    }
    x->events++;
    return 0;
}

/* pid and tid of a globalTid column (see the header comment). */
static void thread_of(sqlite3_stmt *s, int col, long long *pid, long long *tid) {
    unsigned long long g = (unsigned long long)col_i64(s, col);
    *pid = (long long)((g >> 24) & 0xFFFFFF);
    *tid = (long long)(g & 0xFFFFFF);
}

/* Device, stream and correlation of a GPU activity row, into e and x->args. */
static int gpu_common(nx *x, ingest_event *e, sqlite3_stmt *s, int cdev, int cstream, int ccorr) {
    e->device = col_i64(s, cdev);
    e->stream = col_i64(s, cstream);
    e->has_device = e->has_stream = 1;
    buf_reset(&x->args);
    if (!col_null(s, ccorr)) {
        e->corr = sqlite3_column_int64(s, ccorr);
        e->has_corr = 1;
        if (buf_printf(&x->args, "\"correlation\":%lld,", e->corr)) return ERR_NOMEM;
    }
    return buf_printf(&x->args, "\"device\":%lld,\"stream\":%lld", e->device, e->stream);
}

enum { K_START, K_END, K_DEV, K_STREAM, K_CORR, K_GX, K_GY, K_GZ, K_BX, K_BY, K_BZ, K_REGS, K_SSMEM, K_DSMEM,
       K_DEMANGLED, K_SHORT, K_CTX };
static const char *const kernel_cols[] = {"start", "end", "deviceId", "streamId", "correlationId", "gridX", "gridY",
                                          "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                                          "staticSharedMemory", "dynamicSharedMemory", "demangledName", "shortName",
                                          "contextId", NULL};

/* Kineto's "blocks per SM" and "est. achieved occupancy %" of a launch of grid g and block
 * b on e->device, estimated from the GPU table (occupancy.h), into e: for the kernel table's
 * means and the efficiency figures. Not written into the event's args, so the download
 * stays the export's; a re-analysis estimates them again (nsys_replay). */
static void launch_estimates(const nx *x, ingest_event *e, const long long g[3], const long long b[3]) {
    for (int i = 0; i < x->ngpus; i++) {
        if (x->gpus[i].id != e->device) continue;
        const occ_device *d = &x->gpus[i].d;
        occ_launch l = {{g[0], g[1], g[2]}, {b[0], b[1], b[2]}, (int)e->regs, e->smem};
        occ_result r;
        if (d->num_sms > 0 && g[0] * g[1] * g[2] > 0) {
            e->bps = (double)(g[0] * g[1] * g[2]) / d->num_sms;
            e->has_bps = 1;
        }
        if (!occ_estimate(d, &l, &r)) {
            e->occ = 100 * r.est_occupancy;
            e->has_occ = 1;
        }
        break;
    }
}

static int kernel_row(nx *x, sqlite3_stmt *s, const int *c) {
    long long st, en;
    if (row_times(x, s, c[K_START], c[K_END], &st, &en)) return 0;
    int found, rc = lookup_name(x, s, c[K_DEMANGLED], &found);
    if (!rc && (!found || !x->name.len)) rc = lookup_name(x, s, c[K_SHORT], &found);
    if (!rc && (!found || !x->name.len)) rc = set_name(x, "[unnamed kernel]");
    if (rc) return rc;
    ingest_event e;
    memset(&e, 0, sizeof e);
    e.cat = "kernel";
    e.ph = "X";
    if (gpu_common(x, &e, s, c[K_DEV], c[K_STREAM], c[K_CORR])) return ERR_NOMEM;
    long long g[3], b[3];
    for (int i = 0; i < 3; i++) {
        g[i] = clamp(col_i64(s, c[K_GX + i]), 0, INT32_MAX);
        b[i] = clamp(col_i64(s, c[K_BX + i]), 0, INT32_MAX);
    }
    e.regs = clamp(col_i64(s, c[K_REGS]), 0, INT32_MAX);
    e.smem = clamp(col_i64(s, c[K_SSMEM]), 0, INT32_MAX) + clamp(col_i64(s, c[K_DSMEM]), 0, INT32_MAX);
    e.has_regs = e.has_smem = 1;
    char grid[80], block[80];
    snprintf(grid, sizeof grid, "[%lld, %lld, %lld]", g[0], g[1], g[2]);
    snprintf(block, sizeof block, "[%lld, %lld, %lld]", b[0], b[1], b[2]);
    e.grid = grid;
    e.block = block;
    launch_estimates(x, &e, g, b);
    rc = buf_printf(&x->args, ",\"grid\":[%lld,%lld,%lld],\"block\":[%lld,%lld,%lld],\"registers per thread\":%lld,"
                        "\"shared memory\":%lld",
              g[0], g[1], g[2], b[0], b[1], b[2], e.regs, e.smem);
    if (!rc && !col_null(s, c[K_CTX])) rc = buf_printf(&x->args, ",\"context\":%lld", sqlite3_column_int64(s, c[K_CTX]));
    if (rc) return ERR_NOMEM;
    return emit(x, &e, st, en, e.device, e.stream, 0);
}

enum { R_START, R_END, R_TID, R_CORR, R_NAME, R_CLASS };
static const char *const runtime_cols[] = {"start", "end", "globalTid", "correlationId", "nameId", "eventClass", NULL};

static int runtime_row(nx *x, sqlite3_stmt *s, const int *c) {
    long long cls = col_null(s, c[R_CLASS]) ? 0 : sqlite3_column_int64(s, c[R_CLASS]);
    if (cls != 0 && cls != 1) return 0; /* 67 "CUDA backtrace" repeats a call: see the header */
    long long st, en;
    if (row_times(x, s, c[R_START], c[R_END], &st, &en)) return 0;
    int found, rc = lookup_name(x, s, c[R_NAME], &found);
    if (!rc && found) strip_abi_suffix(&x->name);
    if (!rc && (!found || !x->name.len)) rc = set_name(x, "[unnamed call]");
    if (rc) return rc;
    ingest_event e;
    memset(&e, 0, sizeof e);
    e.cat = cls == 1 ? "cuda_driver" : "cuda_runtime";
    e.ph = "X";
    buf_reset(&x->args);
    if (!col_null(s, c[R_CORR])) {
        e.corr = sqlite3_column_int64(s, c[R_CORR]);
        e.has_corr = 1;
        if (buf_printf(&x->args, "\"correlation\":%lld", e.corr)) return ERR_NOMEM;
    }
    long long pid, tid;
    thread_of(s, c[R_TID], &pid, &tid);
    return emit(x, &e, st, en, pid, tid, 0);
}

/* ENUM_CUDA_MEM_KIND; a NULL column is "Unknown". */
static const char *mem_kind(sqlite3_stmt *s, int col) {
    return cuda_mem_kind(col_null(s, col) ? 7 : sqlite3_column_int64(s, col));
}

enum { M_START, M_END, M_DEV, M_STREAM, M_CORR, M_BYTES, M_KIND, M_SRC, M_DST };
static const char *const memcpy_cols[] = {"start", "end", "deviceId", "streamId", "correlationId", "bytes", "copyKind",
                                          "srcKind", "dstKind", NULL};

static int memcpy_row(nx *x, sqlite3_stmt *s, const int *c) {
    long long st, en;
    if (row_times(x, s, c[M_START], c[M_END], &st, &en)) return 0;
    const char *dir = cuda_copy_kind(col_i64(s, c[M_KIND]));
    const char *src = mem_kind(s, c[M_SRC]), *dst = mem_kind(s, c[M_DST]);
    buf_reset(&x->name);
    if (buf_printf(&x->name, "Memcpy %s (%s -> %s)", dir, src, dst)) return ERR_NOMEM;
    ingest_event e;
    memset(&e, 0, sizeof e);
    e.cat = "gpu_memcpy";
    e.ph = "X";
    e.bytes = clamp(col_i64(s, c[M_BYTES]), 0, INT64_MAX);
    e.has_bytes = 1;
    if (gpu_common(x, &e, s, c[M_DEV], c[M_STREAM], c[M_CORR]) ||
        buf_printf(&x->args, ",\"bytes\":%lld,\"kind\":\"%s\",\"src_kind\":\"%s\",\"dst_kind\":\"%s\"", e.bytes, dir, src, dst))
        return ERR_NOMEM;
    return emit(x, &e, st, en, e.device, e.stream, 0);
}

enum { S_START, S_END, S_DEV, S_STREAM, S_CORR, S_BYTES, S_KIND };
static const char *const memset_cols[] = {"start", "end", "deviceId", "streamId", "correlationId", "bytes", "memKind",
                                          NULL};

static int memset_row(nx *x, sqlite3_stmt *s, const int *c) {
    long long st, en;
    if (row_times(x, s, c[S_START], c[S_END], &st, &en)) return 0;
    buf_reset(&x->name);
    if (buf_printf(&x->name, "Memset (%s)", mem_kind(s, c[S_KIND]))) return ERR_NOMEM;
    ingest_event e;
    memset(&e, 0, sizeof e);
    e.cat = "gpu_memset";
    e.ph = "X";
    e.bytes = clamp(col_i64(s, c[S_BYTES]), 0, INT64_MAX);
    e.has_bytes = 1;
    if (gpu_common(x, &e, s, c[S_DEV], c[S_STREAM], c[S_CORR]) || buf_printf(&x->args, ",\"bytes\":%lld", e.bytes))
        return ERR_NOMEM;
    return emit(x, &e, st, en, e.device, e.stream, 0);
}

enum { N_START, N_END, N_TYPE, N_TID, N_TEXT, N_TEXTID };
static const char *const nvtx_cols[] = {"start", "end", "eventType", "globalTid", "text", "textId", NULL};
enum { NVTX_MARK = 34, NVTX_PUSHPOP = 59, NVTX_STARTEND = 60 };

static int nvtx_row(nx *x, sqlite3_stmt *s, const int *c) {
    long long type = col_i64(s, c[N_TYPE]), st = 0, en = 0;
    if (type != NVTX_MARK && type != NVTX_PUSHPOP && type != NVTX_STARTEND) return 0;
    if (type == NVTX_MARK) {
        if (col_null(s, c[N_START])) return x->invalid++, 0;
        st = en = clamp(sqlite3_column_int64(s, c[N_START]), -NS_LIMIT, NS_LIMIT);
    } else if (row_times(x, s, c[N_START], c[N_END], &st, &en)) {
        return 0; /* an unclosed range has a NULL end */
    }
    int found, rc = text_name(x, s, c[N_TEXT], &found);
    if (!rc && !found) rc = lookup_name(x, s, c[N_TEXTID], &found);
    if (!rc && (!found || !x->name.len)) rc = set_name(x, type == NVTX_MARK ? "[unnamed mark]" : "[unnamed range]");
    if (rc) return rc;
    ingest_event e;
    memset(&e, 0, sizeof e);
    e.cat = type == NVTX_MARK ? "nvtx_mark" : "user_annotation";
    e.ph = type == NVTX_MARK ? "i" : "X";
    buf_reset(&x->args);
    if (buf_printf(&x->args, "\"nvtx\":\"%s\"", type == NVTX_MARK ? "mark" : type == NVTX_PUSHPOP ? "push_pop" : "start_end"))
        return ERR_NOMEM;
    long long pid, tid;
    thread_of(s, c[N_TID], &pid, &tid);
    return emit(x, &e, st, en, pid, tid, type == NVTX_MARK);
}

/* ---- tables ---- */

typedef struct table_spec {
    const char *name;          /* the table */
    const char *sql;           /* SELECT * FROM it: a fixed literal */
    const char *const *cols;   /* the columns its row function reads, in its enum's order */
    int nreq;                  /* the first nreq are required */
    int (*row)(nx *x, sqlite3_stmt *s, const int *col);
} table_spec;

static const table_spec tables[] = {
    {"CUPTI_ACTIVITY_KIND_KERNEL", "SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL", kernel_cols, K_SHORT + 1, kernel_row},
    {"CUPTI_ACTIVITY_KIND_RUNTIME", "SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME", runtime_cols, R_NAME + 1, runtime_row},
    {"CUPTI_ACTIVITY_KIND_MEMCPY", "SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY", memcpy_cols, M_KIND + 1, memcpy_row},
    {"CUPTI_ACTIVITY_KIND_MEMSET", "SELECT * FROM CUPTI_ACTIVITY_KIND_MEMSET", memset_cols, S_BYTES + 1, memset_row},
    {"NVTX_EVENTS", "SELECT * FROM NVTX_EVENTS", nvtx_cols, N_TID + 1, nvtx_row},
};
#define NTABLES (sizeof tables / sizeof tables[0])

/* *present = 1 when `name` is an ordinary table of the file. A view or a virtual table of
 * that name is refused: reading one could run code the file chose. */
static int table_present(nx *x, const char *name, int *present) {
    sqlite3_stmt *s = NULL;
    *present = 0;
    int src = sqlite3_prepare_v2(x->db, "SELECT type, sql FROM sqlite_master WHERE name = ?1 COLLATE NOCASE"
                                        " AND type IN ('table', 'view')", -1, &s, NULL);
    if (src != SQLITE_OK) return db_fail(x, src, "the schema");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = 0;
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(s, 0);
        const char *sql = (const char *)sqlite3_column_text(s, 1);
        if (!type || strcmp(type, "table") || (sql && !strncasecmp(sql, "CREATE VIRTUAL", 14)))
            rc = nx_fail(x, ERR_NOTTRACE, "%s is a view or virtual table, not an Nsight Systems table", name);
        else
            *present = 1;
    } else if (src != SQLITE_DONE) {
        rc = db_fail(x, src, "the schema");
    }
    sqlite3_finalize(s);
    return rc;
}

static int import_table(nx *x, const table_spec *t) {
    int present, rc = table_present(x, t->name, &present);
    if (rc || !present) return rc;
    sqlite3_stmt *s = NULL;
    int src = sqlite3_prepare_v2(x->db, t->sql, -1, &s, NULL);
    if (src != SQLITE_OK) return db_fail(x, src, t->name);
    int col[MAX_COLS];
    rc = map_columns(x, s, t->name, t->cols, t->nreq, col);
    while (!rc && (src = sqlite3_step(s)) == SQLITE_ROW) rc = t->row(x, s, col);
    if (!rc && src != SQLITE_DONE) rc = db_fail(x, src, t->name);
    sqlite3_finalize(s);
    return rc;
}

/* TARGET_INFO_GPU column -> Kineto's deviceProperties key (what occupancy.h reads). */
static const struct { const char *col, *key; } gpu_keys[] = {
    {"totalMemory", "totalGlobalMem"},     {"computeMajor", "computeMajor"},
    {"computeMinor", "computeMinor"},      {"smCount", "numSms"},
    {"threadsPerWarp", "warpSize"},        {"maxThreadsPerBlock", "maxThreadsPerBlock"},
    {"maxRegistersPerBlock", "regsPerBlock"}, {"maxRegistersPerSm", "regsPerMultiprocessor"},
    {"maxShmemPerBlock", "sharedMemPerBlock"}, {"maxShmemPerBlockOptin", "sharedMemPerBlockOptin"},
    {"maxShmemPerSm", "sharedMemPerMultiprocessor"}, {"maxBlocksPerSm", "maxBlocksPerMultiProcessor"},
    {"l2CacheSize", "l2CacheSize"},
};
#define NGPU_KEYS (sizeof gpu_keys / sizeof gpu_keys[0])

/* One deviceProperties object from a TARGET_INFO_GPU row (new reference, NULL: no memory). */
static json_t *gpu_props(nx *x, sqlite3_stmt *s, const int *c) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "id", json_integer(sqlite3_column_int64(s, c[0])));
    int found = 0;
    if (!text_name(x, s, c[1], &found) && found) json_object_set_new(o, "name", json_string(buf_str(&x->name)));
    for (size_t i = 0; i < NGPU_KEYS; i++)
        if (c[2 + i] >= 0 && sqlite3_column_type(s, c[2 + i]) == SQLITE_INTEGER)
            json_object_set_new(o, gpu_keys[i].key, json_integer(sqlite3_column_int64(s, c[2 + i])));
    int bwc = c[3 + NGPU_KEYS]; /* memoryBandwidth, bytes/s: the efficiency figures' (load.h) */
    if (bwc >= 0 && sqlite3_column_type(s, bwc) == SQLITE_INTEGER && x->ld)
        loader_set_bandwidth(x->ld, sqlite3_column_int64(s, c[0]), (double)sqlite3_column_int64(s, bwc));
    int warps = c[2 + NGPU_KEYS], tpw = c[2 + 4]; /* maxWarpsPerSm x threadsPerWarp */
    if (warps >= 0 && tpw >= 0 && sqlite3_column_type(s, warps) == SQLITE_INTEGER &&
        sqlite3_column_type(s, tpw) == SQLITE_INTEGER)
        json_object_set_new(o, "maxThreadsPerMultiprocessor",
                            json_integer(clamp(sqlite3_column_int64(s, warps), 0, 1 << 20) *
                                         clamp(sqlite3_column_int64(s, tpw), 0, 1 << 10)));
    return o;
}

static long long jnum(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* The device of one deviceProperties object o into x->gpus (the first of an id). */
static void note_gpu(nx *x, const json_t *o) {
    long long id = json_integer_value(json_object_get(o, "id"));
    for (int i = 0; i < x->ngpus; i++)
        if (x->gpus[i].id == id) return;
    if (x->ngpus >= NSYS_MAX_GPUS) return;
    x->gpus[x->ngpus].id = id;
    x->gpus[x->ngpus++].d = (occ_device){(int)jnum(o, "computeMajor"), (int)jnum(o, "computeMinor"), (int)jnum(o, "numSms"),
                                         (int)jnum(o, "warpSize"), (int)jnum(o, "maxThreadsPerBlock"),
                                         (int)jnum(o, "maxThreadsPerMultiprocessor"), (int)jnum(o, "regsPerBlock"),
                                         (int)jnum(o, "regsPerMultiprocessor"), jnum(o, "sharedMemPerBlock"),
                                         jnum(o, "sharedMemPerBlockOptin"), jnum(o, "sharedMemPerMultiprocessor"),
                                         (int)jnum(o, "maxBlocksPerMultiProcessor")};
}

/* Appends o to arr in id order, unless arr has that id already (one row per vmId). */
static void gpu_insert(json_t *arr, json_t *o) {
    json_int_t id = json_integer_value(json_object_get(o, "id"));
    size_t i, n = json_array_size(arr);
    for (i = 0; i < n; i++) {
        json_int_t k = json_integer_value(json_object_get(json_array_get(arr, i), "id"));
        if (k == id) {
            json_decref(o);
            return;
        }
        if (k > id) break;
    }
    json_array_insert_new(arr, i, o);
}

/* TARGET_INFO_GPU -> meta "deviceProperties" (the hardware line and occupancy read it). */
static int gpu_info(nx *x) {
    int present, rc = table_present(x, "TARGET_INFO_GPU", &present);
    if (rc || !present) return rc;
    const char *cols[2 + NGPU_KEYS + 3];
    cols[0] = "id";
    cols[1] = "name";
    for (size_t i = 0; i < NGPU_KEYS; i++) cols[2 + i] = gpu_keys[i].col;
    cols[2 + NGPU_KEYS] = "maxWarpsPerSm";
    cols[3 + NGPU_KEYS] = "memoryBandwidth";
    cols[4 + NGPU_KEYS] = NULL;
    sqlite3_stmt *s = NULL;
    int src = sqlite3_prepare_v2(x->db, "SELECT * FROM TARGET_INFO_GPU", -1, &s, NULL);
    if (src != SQLITE_OK) return db_fail(x, src, "TARGET_INFO_GPU");
    int col[MAX_COLS];
    json_t *arr = json_array();
    rc = arr ? map_columns(x, s, "TARGET_INFO_GPU", cols, 1, col) : ERR_NOMEM;
    for (int n = 0; !rc && n < 4 * NSYS_MAX_GPUS && (src = sqlite3_step(s)) == SQLITE_ROW; n++) {
        if (col_null(s, col[0]) || json_array_size(arr) >= NSYS_MAX_GPUS) continue;
        json_t *o = gpu_props(x, s, col);
        if (!o) rc = ERR_NOMEM;
        else {
            note_gpu(x, o);
            gpu_insert(arr, o);
        }
    }
    if (!rc && src != SQLITE_ROW && src != SQLITE_DONE) rc = db_fail(x, src, "TARGET_INFO_GPU");
    sqlite3_finalize(s);
    char *text = !rc && json_array_size(arr) ? json_dumps(arr, JSON_COMPACT) : NULL;
    if (!rc && json_array_size(arr) && !text) rc = ERR_NOMEM;
    if (text) {
        rc = x->sink->on_meta(x->sink->ctx, "deviceProperties", text, strlen(text));
        free(text);
    }
    json_decref(arr);
    return rc == ERR_NOMEM ? nx_fail(x, rc, "out of memory") : rc ? nx_fail(x, rc, "could not store the GPU list") : 0;
}

/* An nsys export has StringIds(id PRIMARY KEY, value) and at least one table read here.
 * The key matters: every name is one lookup by id. */
static int check_nsys(nx *x) {
    int present, rc = table_present(x, "StringIds", &present);
    if (rc) return rc;
    if (!present) return nx_fail(x, ERR_NOTTRACE, "an SQLite file, but not an Nsight Systems export (no StringIds table)");
    sqlite3_stmt *s = NULL;
    int src = sqlite3_prepare_v2(x->db, "SELECT name, pk FROM pragma_table_info('StringIds')", -1, &s, NULL);
    if (src != SQLITE_OK) return db_fail(x, src, "the schema");
    int id_pk = 0, value = 0;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        const char *n = (const char *)sqlite3_column_text(s, 0);
        if (n && !strcasecmp(n, "id") && sqlite3_column_int(s, 1) == 1) id_pk = 1;
        if (n && !strcasecmp(n, "value")) value = 1;
    }
    sqlite3_finalize(s);
    if (src != SQLITE_DONE) return db_fail(x, src, "the schema");
    if (!id_pk || !value)
        return nx_fail(x, ERR_NOTTRACE, "an SQLite file, but not an Nsight Systems export (StringIds is not (id PRIMARY KEY, value))");
    int any = 0;
    for (size_t i = 0; i < NTABLES && !rc && !any; i++) rc = table_present(x, tables[i].name, &any);
    if (rc) return rc;
    if (!any)
        return nx_fail(x, ERR_NOTTRACE, "an Nsight Systems export without any table this server reads "
                                        "(CUPTI_ACTIVITY_KIND_KERNEL/RUNTIME/MEMCPY/MEMSET, NVTX_EVENTS)");
    src = sqlite3_prepare_v2(x->db, "SELECT value FROM StringIds WHERE id = ?1", -1, &x->str_q, NULL);
    return src == SQLITE_OK ? 0 : db_fail(x, src, "StringIds");
}

/* meta nsys_invalid_rows and nsys_version (the session's `trace` object shows both). */
static int add_meta(nx *x) {
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", x->invalid);
    int rc = x->sink->on_meta(x->sink->ctx, "nsys_invalid_rows", num, (size_t)n);
    static const char *const q[] = {"SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'",
                                    "SELECT value FROM EXPORT_META_DATA WHERE name = 'EXPORT_PRODUCT_VERSION'"};
    for (size_t i = 0; i < 2 && !rc; i++) {
        sqlite3_stmt *s = NULL;
        /* Optional, cosmetic: an export without these tables just has no version. */
        if (sqlite3_prepare_v2(x->db, q[i], -1, &s, NULL) != SQLITE_OK) continue;
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_TEXT &&
            !clean_utf8(&x->name, sqlite3_column_text(s, 0), (size_t)sqlite3_column_bytes(s, 0))) {
            buf_reset(&x->json);
            rc = put_jstr(&x->json, x->name.p);
            if (!rc) rc = x->sink->on_meta(x->sink->ctx, "nsys_version", x->json.p, x->json.len);
            sqlite3_finalize(s);
            break;
        }
        sqlite3_finalize(s);
    }
    return rc ? nx_fail(x, rc, "could not store the export's metadata") : 0;
}

/* ---- opening the file ---- */

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A truncated upload, told from the header before SQLite reads zeros past the end. The
 * page count (offset 28) is trusted only when "version-valid-for" (offset 92) equals the
 * change counter (offset 24), as SQLite itself does. */
static int check_header(nx *x, const nsys_spool *sp) {
    unsigned char h[100];
    if (sp->bytes < sizeof h || pread(sp->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        return nx_fail(x, ERR_INVALID, "the SQLite file is truncated: %llu bytes, less than its header", sp->bytes);
    unsigned page = (unsigned)h[16] << 8 | h[17];
    if (page == 1) page = 65536;
    if (page < 512 || (page & (page - 1)))
        return nx_fail(x, ERR_INVALID, "the SQLite file is corrupt: page size %u", page);
    unsigned long long want = (unsigned long long)be32(h + 28) * page;
    if (be32(h + 28) && be32(h + 24) == be32(h + 92) && want > sp->bytes)
        return nx_fail(x, ERR_INVALID, "the SQLite file is truncated: its header says %llu bytes, %llu arrived", want,
                       sp->bytes);
    return 0;
}

/* "file:" URI of path with mode=ro&immutable=1: the spool file is ours and never changes,
 * so SQLite takes no locks and ignores any journal or WAL the file claims. */
static int file_uri(const char *path, char *out, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = (size_t)snprintf(out, n, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (o + 4 >= n) return -1;
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    *p == '/' || *p == '.' || *p == '_' || *p == '-';
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    return (size_t)snprintf(out + o, n - o, "?mode=ro&immutable=1") >= n - o ? -1 : 0;
}

static int open_db(nx *x, const char *path) {
    char uri[3 * PATH_MAX + 32];
    if (file_uri(path, uri, sizeof uri)) return nx_fail(x, ERR_IO, "the temporary file's path is too long");
    int src = sqlite3_open_v2(uri, &x->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (src != SQLITE_OK) return db_fail(x, src, "opening the file");
    sqlite3_limit(x->db, SQLITE_LIMIT_LENGTH, NSYS_MAX_STRING);
    sqlite3_limit(x->db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_db_config(x->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(x->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(x->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
#endif
#ifdef SQLITE_DBCONFIG_ENABLE_VIEW
    sqlite3_db_config(x->db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)NULL);
#endif
    sqlite3_progress_handler(x->db, NSYS_PROGRESS_N, on_progress, x);
    src = sqlite3_exec(x->db, "PRAGMA query_only=1; PRAGMA cache_size=-8192;", NULL, NULL, NULL);
    return src == SQLITE_OK ? 0 : db_fail(x, src, "opening the file");
}

int nsys_import(nsys_spool *sp, loader *ld, unsigned long long *events, char *err, size_t errlen) {
    nx x;
    memset(&x, 0, sizeof x);
    x.sink = loader_sink(ld);
    x.ld = ld;
    x.err = err;
    x.errlen = errlen;
    err[0] = '\0';
    int rc = sp ? 0 : nx_fail(&x, ERR_INTERNAL, "no SQLite file was received");
    if (!rc) rc = check_header(&x, sp);
    if (!rc) rc = open_db(&x, sp->path);
    if (!rc) rc = check_nsys(&x);
    if (!rc) rc = gpu_info(&x);
    for (size_t i = 0; i < NTABLES && !rc; i++) rc = import_table(&x, &tables[i]);
    if (!rc) rc = add_meta(&x);
    if (!rc) loader_set_source(ld, "nsys");
    *events = x.events;
    sqlite3_finalize(x.str_q);
    sqlite3_close(x.db); /* accepts NULL */
    for (size_t i = 0; i < NAME_CACHE; i++) free(x.cache[i].s);
    buf_free(&x.name);
    buf_free(&x.args);
    buf_free(&x.json);
    if (rc && !err[0]) snprintf(err, errlen, "the Nsight Systems export could not be read");
    return rc;
}

/* ---- a re-analysis of an imported export (nsys.h: nsys_replay) ---- */

struct nsys_replay {
    ingest_sink sink;          /* this one: estimates, then inner */
    const ingest_sink *inner;  /* the loader's */
    nx x;                      /* only gpus and ngpus are used */
};

/* meta deviceProperties is the GPU table as gpu_info wrote it: its devices again. */
static int replay_meta(void *ctx, const char *key, const char *json, size_t len) {
    nsys_replay *r = ctx;
    if (!strcmp(key, "deviceProperties")) {
        json_error_t je;
        json_t *a = json_loadb(json, len, 0, &je), *o;
        size_t i;
        json_array_foreach(a, i, o) if (json_is_object(o)) note_gpu(&r->x, o);
        json_decref(a);
    }
    return r->inner->on_meta ? r->inner->on_meta(r->inner->ctx, key, json, len) : 0;
}

/* A kernel as kernel_row made it: its launch estimates again, from its grid and block. */
static int replay_event(void *ctx, const ingest_event *e) {
    nsys_replay *r = ctx;
    long long g[3], b[3];
    if (strcmp(e->cat, "kernel") || e->has_bps || e->has_occ || !e->has_device || !e->grid || !e->block ||
        sscanf(e->grid, "[%lld, %lld, %lld]", &g[0], &g[1], &g[2]) != 3 || sscanf(e->block, "[%lld, %lld, %lld]", &b[0], &b[1], &b[2]) != 3)
        return r->inner->on_event(r->inner->ctx, e);
    ingest_event k = *e;
    launch_estimates(&r->x, &k, g, b);
    return r->inner->on_event(r->inner->ctx, &k);
}

static const char *replay_message(void *ctx) {
    nsys_replay *r = ctx;
    return r->inner->message ? r->inner->message(r->inner->ctx) : NULL;
}

nsys_replay *nsys_replay_new(const ingest_sink *inner) {
    nsys_replay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->inner = inner;
    r->sink.ctx = r;
    r->sink.on_event = replay_event;
    r->sink.on_meta = replay_meta;
    r->sink.message = replay_message;
    return r;
}

const ingest_sink *nsys_replay_sink(nsys_replay *r) { return &r->sink; }

void nsys_replay_free(nsys_replay *r) { free(r); }
