/* ingest.c: streaming Chrome-trace / Kineto parser on top of YAJL.
 *
 * Owns the YAJL handle, the zlib inflate state, the per-event field buffers and the
 * copy of each event's text. Must not see MHD or SQLite types: it gets
 * bytes and hands events to an ingest_sink.
 *
 * Why YAJL: a 365 MB Kineto file parsed in 2.3 s with 2.5 MB RSS through its callback
 * API, against 21 s and 3.2 GB for Jansson's DOM (shared/design/trace-semantics.md).
 *
 * The parse is a small state machine keyed on depth:
 *   depth 0  the document: an array (legacy events) or an object (Kineto)
 *   depth 1  Kineto top-level keys; "traceEvents" opens the event array
 *   ev_depth the event object; ev_depth+1 inside its "args"
 * The event handed on is its own bytes from the body, cut out between its '{' and '}'
 * (yajl_get_bytes_consumed gives the offsets); the loader drops the whitespace outside
 * strings (ingest_minify), so numbers and string escapes keep their text and the download
 * returns it as written. Replaying every token into a yajl_gen did the same job and cost
 * 38 % of the parse (0.26 of 0.69 s for bench/'s 100 MB trace).
 *
 * An SQLite body (an nsys export, plain or gzip) is not parsed here: once the magic bytes
 * are seen, the (decompressed) bytes go to the sink of ingest_set_sqlite_sink (http.c
 * gives nsys.c's spool). */
#include "ingest/parse.h"
#include "ingest/minify.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/utf8.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

/* Which event field the next scalar belongs to. */
enum field {
    F_NONE, F_NAME, F_CAT, F_PH, F_PID, F_TID, F_TS, F_DUR, F_ARGS,
    A_CORR, A_EXT, A_DEVICE, A_STREAM, A_BYTES, A_DEVTYPE, A_REGS, A_SMEM,
    A_TOTAL_ALLOC, A_TOTAL_RESERVED, A_SEQ, A_FLOPS,
    A_SHAPES, A_GRID, A_BLOCK, A_TYPES, A_CONCRETE, A_BPS, A_OCC,
    A_MSG_NELEMS, A_MSG_DTYPE
};

enum top { TOP_UNKNOWN, TOP_ARRAY, TOP_OBJECT };

struct ingest {
    ingest_sink sink;
    yajl_handle y;
    int gzip;        /* -1 unknown yet, 0 plain, 1 inflating */
    int sqlite;      /* saw the SQLite magic: bytes go to sqlite_fn, not YAJL */
    ingest_bytes_fn sqlite_fn; /* ingest_set_sqlite_sink; NULL: SQLite is ERR_FORMAT */
    void *sqlite_ctx;
    unsigned char isniff[16];  /* gzip bodies: the first decompressed bytes */
    size_t nisniff;
    int inner_done;  /* gzip bodies: isniff decided JSON or SQLite */
    z_stream z;
    int z_live;
    unsigned long long max_inflated, inflated, bytes_in, events;
    unsigned char sniff[16];
    size_t nsniff;

    enum top top;
    int depth;         /* containers open right now */
    int ev_array_depth;/* depth of the traceEvents array, 0 when not inside it */
    int in_event;      /* inside an event object */
    int in_args;       /* inside the event's args object (depth ev_depth+1) */
    enum field field;  /* pending event-level or args-level key */
    int saw_trace_events;

    /* capture of a top-level non-event value */
    int meta_depth;    /* depth at which the meta value started, 0 = none */
    int await_value;   /* a top-level key was read, its value not yet begun */
    unsigned top_keys; /* top-level keys so far */
    unsigned long meta_nodes;       /* tokens of the top-level values so far */
    unsigned long long meta_total;  /* bytes of the top-level values handed on so far */
    /* token guard (parse_plain): YAJL buffers a token cut by a chunk end whole, rescanning
     * it per chunk, before any callback sees it */
    unsigned long ntok, ntok_seen;  /* callbacks so far; at the end of the last chunk */
    unsigned long long pending;     /* at most this many bytes were fed since the last callback */
    unsigned long long fed_before;  /* bytes given to YAJL before the chunk it reads now */
    buf meta_key;
    yajl_gen meta_gen;

    /* the event under construction */
    buf raw;                  /* its bytes so far (raw_take), whitespace and all */
    const unsigned char *cur; /* the bytes yajl_parse is reading now (parse_plain) */
    size_t raw_from;          /* where in cur the event's bytes not yet in raw start */
    ingest_event ev;
    buf name, cat, ph, pid, tid;
    buf shapes, grid, block, types, concrete;
    enum field shape_field; /* which of shapes/grid/block/types/concrete is being captured */
    int types_junk, concrete_junk; /* an object inside that capture: it is dropped */
    long long msg_nelems;  /* a collective's larger of args "In msg nelems" / "Out msg nelems" */
    int msg_esize;         /* the bytes of one element of its args "dtype", 0 unknown */
    int shape_depth;        /* depth where that array started, 0 = none */
    int shape_need_sep;     /* next element needs ", " */

    char err[256];
    int errcode;       /* the ERR_* that went with err, 0 while none */
};

/* Records the first error only: later ones are consequences of it. */
static int fail(ingest *in, int code, const char *fmt, const char *arg) {
    if (!in->errcode) {
        snprintf(in->err, sizeof in->err, fmt, arg ? arg : "");
        in->errcode = code;
    }
    return in->errcode;
}

/* The sink's message for the error it returned, or dflt. */
static const char *sink_message(ingest *in, const char *dflt) {
    const char *m = in->sink.message ? in->sink.message(in->sink.ctx) : NULL;
    return m && *m ? m : dflt;
}

/* ---- shape capture: nested arrays rendered like Python's str(list) ---- */

static buf *shape_buf(ingest *in) {
    switch (in->shape_field) {
    case A_SHAPES: return &in->shapes;
    case A_GRID: return &in->grid;
    case A_TYPES: return &in->types;
    case A_CONCRETE: return &in->concrete;
    default: return &in->block;
    }
}
static int shape_token(ingest *in, const char *s, size_t n) {
    buf *b = shape_buf(in);
    if (in->shape_need_sep && buf_put(b, ", ", 2)) return ERR_NOMEM;
    in->shape_need_sep = 1;
    return buf_put(b, s, n);
}

/* ---- YAJL callbacks ---- */

#define IN ((ingest *)ctx)

/* Appends n bytes of the event's text to raw as they are: the loader drops the whitespace
 * (ingest_minify) on its own thread. Why not here: this thread runs YAJL and is the slower
 * half of the stream; the minify loop was 15 % of it. The cap is on the text without
 * whitespace, so raw is compacted here only when it grows past the cap: then it is as
 * small as its text, and an event with more text than the cap is refused. */
static int raw_take(ingest *in, const unsigned char *s, size_t n) {
    buf *r = &in->raw;
    if (buf_put(r, s, n)) return fail(in, ERR_NOMEM, "out of memory%s", NULL);
    if (r->len > INGEST_MAX_EVENT_BYTES) { /* compacting compact text changes nothing, so from the start */
        char *c = malloc(r->len + 1);
        if (!c) return fail(in, ERR_NOMEM, "out of memory%s", NULL);
        size_t n2 = ingest_minify(r->p, r->len, c);
        memcpy(r->p, c, n2);
        free(c);
        r->len = n2;
        r->p[r->len] = '\0';
        if (r->len > INGEST_MAX_EVENT_BYTES) return fail(in, ERR_TOOBIG, "one event is over 4 MiB%s", NULL);
    }
    return 0;
}

/* Every token of a top-level value passes here: the values together are capped in bytes
 * and in tokens (a 16 MiB value of tiny keys is ~1.5M Jansson objects once loaded). */
static int meta_gen_check(ingest *in, yajl_gen_status st) {
    if (st != yajl_gen_status_ok) return fail(in, ERR_INVALID, "bad top-level value%s", NULL);
    const unsigned char *b;
    size_t len;
    yajl_gen_get_buf(in->meta_gen, &b, &len);
    if (in->meta_total + len > INGEST_MAX_META_BYTES)
        return fail(in, ERR_TOOBIG, "the top-level values other than traceEvents are over 16 MiB together (at key '%.64s')",
                    buf_str(&in->meta_key));
    if (++in->meta_nodes > INGEST_MAX_META_NODES)
        return fail(in, ERR_TOOBIG, "the top-level values other than traceEvents hold over 100000 keys and values (at key '%.64s')",
                    buf_str(&in->meta_key));
    return 0;
}

/* After a container value at depth 1 of the object closes, hand it to the sink. */
static int meta_maybe_done(ingest *in) {
    if (in->meta_depth == 0 || in->depth >= in->meta_depth) return 0;
    const unsigned char *b;
    size_t len;
    yajl_gen_get_buf(in->meta_gen, &b, &len);
    int rc = in->sink.on_meta ? in->sink.on_meta(in->sink.ctx, buf_str(&in->meta_key), (const char *)b, len) : 0;
    in->meta_total += len;
    yajl_gen_clear(in->meta_gen);
    yajl_gen_reset(in->meta_gen, NULL);
    in->meta_depth = 0;
    return rc;
}

/* A scalar that is a whole top-level value ("schemaVersion": 1). */
static int is_top_scalar(const ingest *in) {
    return in->top == TOP_OBJECT && in->depth == 1 && in->meta_depth == 0;
}
static int top_scalar_done(ingest *in, yajl_gen_status st) {
    in->await_value = 0;
    if (meta_gen_check(in, st)) return 0;
    in->meta_depth = 2; /* so meta_maybe_done fires at depth 1 */
    return !meta_maybe_done(in);
}

/* Scalars where no scalar may stand: the document itself, or an element of the events. */
static int scalar_misplaced(ingest *in) {
    if (in->top == TOP_UNKNOWN) return fail(in, ERR_NOTTRACE, "the document is a bare scalar, not a trace%s", NULL);
    if ((in->top == TOP_ARRAY && in->depth == 1) || (in->ev_array_depth && in->depth == in->ev_array_depth && !in->in_event))
        return fail(in, ERR_INVALID, "an element of traceEvents is not an object%s", NULL);
    return 0;
}

/* The number text s (a YAJL number token: valid JSON, at most 63 bytes used) as a double.
 * Why not strtod alone: ts and dur of every event pass here, and strtod was 8 % of the
 * parse. Plain decimals whose digits read as an integer of at most 2^53 (16 digits:
 * Kineto's epoch-microsecond ts with 3 decimals) take Clinger's fast path: the mantissa
 * and 10^decimals are exact doubles, so one IEEE division is correctly rounded, the same
 * double strtod returns. Anything else (exponents, longer mantissas) goes to strtod. */
static double num_double(const char *s, size_t n) {
    static const double p10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    size_t i = s[0] == '-';
    unsigned long long m = 0;
    int digits = 0, dec = -1;
    for (; i < n; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            m = m * 10 + (unsigned)(c - '0');
            digits++;
            if (dec >= 0) dec++;
        } else if (c == '.' && dec < 0) {
            dec = 0;
        } else {
            break;
        }
    }
    if (i == n && digits && digits <= 19 && m <= (1ull << 53)) { /* 19 digits cannot overflow m */
        double d = (double)m / p10[dec > 0 ? dec : 0];
        return s[0] == '-' ? -d : d;
    }
    char tmp[64];
    if (n >= sizeof tmp) n = sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    return strtod(tmp, NULL);
}

/* The number text s for an integer field: exact for integers, a float converted only
 * when it fits (1e300 in long long is UB; tests/fuzz/regress/ingest/set_num_float_cast_overflow.json). */
static long long num_int(const char *s, size_t n) {
    size_t i = s[0] == '-';
    if (n - i >= 1 && n - i <= 18) { /* 18 digits always fit: the usual case, no strtoll */
        long long v = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (s[i] - '0');
        if (i == n) return s[0] == '-' ? -v : v;
    }
    char tmp[64];
    if (n >= sizeof tmp) n = sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (memchr(tmp, '.', n) || memchr(tmp, 'e', n) || memchr(tmp, 'E', n)) {
        double d = strtod(tmp, NULL);
        return isfinite(d) && d > -9.2e18 && d < 9.2e18 ? (long long)d : 0;
    }
    return strtoll(tmp, NULL, 10);
}

/* The bytes of one element of a collective's args "dtype" (c10d's ScalarType names), 0 unknown. */
static int dtype_size(const char *s, size_t n) {
    static const struct { const char *name; int size; } t[] = {
        {"Float", 4}, {"BFloat16", 2}, {"Half", 2}, {"Double", 8}, {"Int", 4}, {"Long", 8}, {"Short", 2},
        {"Char", 1}, {"Byte", 1}, {"Bool", 1}, {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strlen(t[i].name) == n && !memcmp(t[i].name, s, n)) return t[i].size;
    return 0;
}

static int set_num(ingest *in, const char *s, size_t n) {
    ingest_event *e = &in->ev;
    switch (in->field) {
    /* Most numbers of an event are args nobody reads here ("Fwd thread id", ...): they
     * stay only in the event's JSON, unconverted. */
    case F_NONE: case F_ARGS: return 0;
    case F_TS: e->ts = num_double(s, n); e->has_ts = 1; return 0;
    case F_DUR: e->dur = num_double(s, n); e->has_dur = 1; return 0;
    case F_PID: buf_reset(&in->pid); return buf_put(&in->pid, s, n < 64 ? n : 63);
    case F_TID: buf_reset(&in->tid); return buf_put(&in->tid, s, n < 64 ? n : 63);
    case F_NAME: case F_CAT: case F_PH:
        return fail(in, ERR_INVALID, "event field '%s' must be a string", in->field == F_NAME ? "name" : in->field == F_CAT ? "cat" : "ph");
    /* a kernel's launch figures as Kineto wrote them (the efficiency pass and the kernel
     * table's duration-weighted means read them; a non-finite one is absent) */
    case A_BPS: e->bps = num_double(s, n); e->has_bps = isfinite(e->bps); return 0;
    case A_OCC: e->occ = num_double(s, n); e->has_occ = isfinite(e->occ); return 0;
    default: break;
    }
    long long ll = num_int(s, n);
    switch (in->field) {
    case A_CORR: e->corr = ll; e->has_corr = 1; break;
    case A_EXT: e->ext = ll; e->has_ext = 1; break;
    case A_DEVICE: e->device = ll; e->has_device = 1; break;
    case A_STREAM: e->stream = ll; e->has_stream = 1; break;
    case A_BYTES: e->bytes = ll; e->has_bytes = 1; break;
    case A_DEVTYPE: e->devtype = ll; e->has_devtype = 1; break;
    case A_REGS: e->regs = ll; e->has_regs = 1; break;
    case A_SMEM: e->smem = ll; e->has_smem = 1; break;
    case A_TOTAL_ALLOC: e->total_alloc = ll; e->has_total_alloc = 1; break;
    case A_TOTAL_RESERVED: e->total_reserved = ll; e->has_total_reserved = 1; break;
    case A_SEQ: e->seq = ll; e->has_seq = 1; break;
    case A_FLOPS: e->flops = ll; e->has_flops = 1; break;
    case A_MSG_NELEMS: if (ll > in->msg_nelems) in->msg_nelems = ll; break;
    default: break;
    }
    return 0;
}

/* 1 when s (n bytes) is UTF-8 as RFC 3629 has it (lib/utf8.h). YAJL checks only the shape of
 * a multi-byte sequence, so overlong forms, encoded surrogates and code points over U+10FFFF
 * got through it to Jansson, which refuses them: an operator named so vanished from
 * /operators, a kernel failed the upload with a 500 (issue 22). */
static int utf8_valid(const unsigned char *s, size_t n) { return utf8_valid_prefix((const char *)s, n) == n; }

/* ERR_INVALID for a string of the event being parsed that is not UTF-8, with where it is. */
static int bad_utf8(ingest *in, const char *what) {
    char msg[160];
    snprintf(msg, sizeof msg, "event %llu (byte %llu of the trace): its %s is not valid UTF-8", in->events + 1,
             in->fed_before + (unsigned long long)yajl_get_bytes_consumed(in->y), what);
    return fail(in, ERR_INVALID, "%s", msg);
}

static int set_str(ingest *in, const char *s, size_t n) {
    buf *b = NULL;
    switch (in->field) {
    case F_NAME: b = &in->name; break;
    case F_CAT: b = &in->cat; break;
    case F_PH: b = &in->ph; break;
    case F_PID: b = &in->pid; break;
    case F_TID: b = &in->tid; break;
    default: break;
    }
    if (b) {
        if (!utf8_valid((const unsigned char *)s, n))
            return bad_utf8(in, in->field == F_NAME ? "name" : in->field == F_CAT ? "cat" : in->field == F_PH ? "ph" : "pid or tid");
        buf_reset(b);
        return buf_put(b, s, n);
    }
    switch (in->field) {
    case F_TS: case F_DUR:
        return fail(in, ERR_INVALID, "event field '%s' must be a number", in->field == F_TS ? "ts" : "dur");
    case A_CORR: case A_EXT: case A_DEVICE: case A_STREAM: {
        /* Some producers write ids as strings; accept those that are integers. */
        char tmp[32];
        char *end;
        if (n == 0 || n >= sizeof tmp) return 0;
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        (void)strtoll(tmp, &end, 10);
        return *end ? 0 : set_num(in, s, n);
    }
    case A_MSG_DTYPE: in->msg_esize = dtype_size(s, n); return 0;
    default: return 0;
    }
}

/* true/false where a typed field stands: "ts": true was taken as no ts, and the event
 * silently left out of the analysis, while "ts": "1" was refused (issue 22). */
static int bool_misplaced(ingest *in) {
    switch (in->field) {
    case F_TS: return fail(in, ERR_INVALID, "event field 'ts' must be a number%s", NULL);
    case F_DUR: return fail(in, ERR_INVALID, "event field 'dur' must be a number%s", NULL);
    case F_NAME: return fail(in, ERR_INVALID, "event field 'name' must be a string%s", NULL);
    case F_CAT: return fail(in, ERR_INVALID, "event field 'cat' must be a string%s", NULL);
    case F_PH: return fail(in, ERR_INVALID, "event field 'ph' must be a string%s", NULL);
    default: return 0;
    }
}

/* Scalars inside an event: shape capture, or an event/args field. */
static int event_scalar(ingest *in, int is_num, int is_str, const char *s, size_t n) {
    int rc = scalar_misplaced(in);
    if (rc || !in->in_event) return rc;
    if (in->shape_depth) {
        buf *b = shape_buf(in);
        if (!is_str) return shape_token(in, s, n);
        if (!utf8_valid((const unsigned char *)s, n)) return bad_utf8(in, "args.Input Dims");
        /* Python's repr of a string is quoted; Input Dims normally holds only lists. */
        if (in->shape_need_sep && buf_put(b, ", ", 2)) return ERR_NOMEM;
        in->shape_need_sep = 1;
        return buf_put(b, "'", 1) || buf_put(b, s, n) || buf_put(b, "'", 1) ? ERR_NOMEM : 0;
    }
    if (is_num) rc = set_num(in, s, n);
    else if (is_str) rc = set_str(in, s, n);
    else if (n != 4 || memcmp(s, "None", 4)) rc = bool_misplaced(in); /* null stays "absent" */
    in->field = F_NONE;
    return rc;
}

static int cb_null(void *ctx) {
    IN->ntok++;
    if (is_top_scalar(IN)) return top_scalar_done(IN, yajl_gen_null(IN->meta_gen));
    if (IN->meta_depth) return !meta_gen_check(IN, yajl_gen_null(IN->meta_gen));
    return !event_scalar(IN, 0, 0, "None", 4);
}
static int cb_bool(void *ctx, int v) {
    IN->ntok++;
    if (is_top_scalar(IN)) return top_scalar_done(IN, yajl_gen_bool(IN->meta_gen, v));
    if (IN->meta_depth) return !meta_gen_check(IN, yajl_gen_bool(IN->meta_gen, v));
    return !event_scalar(IN, 0, 0, v ? "True" : "False", v ? 4 : 5);
}
static int cb_number(void *ctx, const char *s, size_t n) {
    IN->ntok++;
    if (is_top_scalar(IN)) return top_scalar_done(IN, yajl_gen_number(IN->meta_gen, s, n));
    if (IN->meta_depth) return !meta_gen_check(IN, yajl_gen_number(IN->meta_gen, s, n));
    return !event_scalar(IN, 1, 0, s, n);
}
static int cb_string(void *ctx, const unsigned char *s, size_t n) {
    IN->ntok++;
    if (is_top_scalar(IN)) return top_scalar_done(IN, yajl_gen_string(IN->meta_gen, s, n));
    if (IN->meta_depth) return !meta_gen_check(IN, yajl_gen_string(IN->meta_gen, s, n));
    return !event_scalar(IN, 0, 1, (const char *)s, n);
}

static void event_reset(ingest *in) {
    memset(&in->ev, 0, sizeof in->ev);
    buf_reset(&in->name); buf_reset(&in->cat); buf_reset(&in->ph);
    buf_reset(&in->pid); buf_reset(&in->tid);
    buf_reset(&in->shapes); buf_reset(&in->grid); buf_reset(&in->block);
    buf_reset(&in->types); buf_reset(&in->concrete);
    in->types_junk = in->concrete_junk = 0;
    in->msg_nelems = 0;
    in->msg_esize = 0;
    buf_reset(&in->raw);
}

/* name/cat/ph/ts/dur/pid/tid hold scalars; a container there is a malformed event. */
static int container_misplaced(ingest *in) {
    if (!in->in_event || in->depth != in->in_event + 1) return 0;
    switch (in->field) {
    case F_NAME: case F_CAT: case F_PH: case F_TS: case F_DUR: case F_PID: case F_TID:
        return fail(in, ERR_INVALID, "event field has the wrong type (an object or array)%s", NULL);
    default: return 0;
    }
}

static int cb_start_map(void *ctx) {
    ingest *in = IN;
    in->ntok++;
    if (++in->depth > INGEST_MAX_DEPTH) return fail(in, ERR_INVALID, "JSON nested too deeply%s", NULL), 0;
    if (in->depth == 2) in->await_value = 0;
    if (container_misplaced(in)) return 0;
    if (in->top == TOP_UNKNOWN) { in->top = TOP_OBJECT; return 1; }
    if (in->meta_depth) return !meta_gen_check(in, yajl_gen_map_open(in->meta_gen));
    if (in->top == TOP_OBJECT && in->depth == 2) { /* a top-level value that is an object */
        in->meta_depth = 2;
        return !meta_gen_check(in, yajl_gen_map_open(in->meta_gen));
    }
    int at_elem = (in->top == TOP_ARRAY && in->depth == 2) ||
                  (in->ev_array_depth && in->depth == in->ev_array_depth + 1);
    if (at_elem && !in->in_event) {
        event_reset(in);
        in->in_event = in->depth;
        in->field = F_NONE;
        /* YAJL has just read the '{': the event's text starts one byte back. */
        in->raw_from = yajl_get_bytes_consumed(in->y) - 1;
    } else if (in->in_event && in->depth == in->in_event + 1 && in->field == F_ARGS) {
        in->in_args = 1;
    } else if (in->shape_depth && (in->shape_field == A_TYPES || in->shape_field == A_CONCRETE)) {
        /* Why not refused like the others: these two are read only for the efficiency
         * figures, and a trace that was accepted before they were read must still be; the
         * capture is dropped instead (the op's dtype reads unknown). */
        in->types_junk |= in->shape_field == A_TYPES;
        in->concrete_junk |= in->shape_field == A_CONCRETE;
    } else if (in->shape_depth) {
        return fail(in, ERR_INVALID, "args.Input Dims holds an object%s", NULL), 0;
    }
    if (in->in_event) in->field = F_NONE;
    return 1;
}

static enum field event_key(const unsigned char *k, size_t n) {
#define K(s, f) if (n == sizeof(s) - 1 && !memcmp(k, s, n)) return f
    K("name", F_NAME); K("cat", F_CAT); K("ph", F_PH); K("pid", F_PID); K("tid", F_TID);
    K("ts", F_TS); K("dur", F_DUR); K("args", F_ARGS);
    return F_NONE;
}
static enum field args_key(const unsigned char *k, size_t n) {
    K("correlation", A_CORR); K("External id", A_EXT); K("external id", A_EXT);
    K("device", A_DEVICE); K("Device Id", A_DEVICE); K("stream", A_STREAM); K("Bytes", A_BYTES); K("bytes", A_BYTES);
    K("Device Type", A_DEVTYPE); K("registers per thread", A_REGS); K("shared memory", A_SMEM);
    K("Input Dims", A_SHAPES); K("grid", A_GRID); K("block", A_BLOCK);
    K("Input type", A_TYPES); K("Concrete Inputs", A_CONCRETE);
    K("blocks per SM", A_BPS); K("est. achieved occupancy %", A_OCC);
    K("Total Allocated", A_TOTAL_ALLOC); K("Total Reserved", A_TOTAL_RESERVED);
    K("Sequence number", A_SEQ); K("flops", A_FLOPS);
    K("In msg nelems", A_MSG_NELEMS); K("Out msg nelems", A_MSG_NELEMS); K("dtype", A_MSG_DTYPE);
    return F_NONE;
#undef K
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t n) {
    ingest *in = IN;
    in->ntok++;
    if (in->meta_depth) return !meta_gen_check(in, yajl_gen_string(in->meta_gen, k, n));
    if (in->top == TOP_OBJECT && in->depth == 1) {
        if (n > INGEST_MAX_KEY_BYTES) return fail(in, ERR_TOOBIG, "a top-level key is over 1 KiB%s", NULL), 0;
        if (++in->top_keys > INGEST_MAX_TOP_KEYS) return fail(in, ERR_TOOBIG, "the document has over 1024 top-level keys%s", NULL), 0;
        buf_reset(&in->meta_key);
        if (buf_put(&in->meta_key, (const char *)k, n)) return 0;
        in->await_value = 1;
        return 1;
    }
    if (in->in_event && in->depth == in->in_event) in->field = event_key(k, n);
    else if (in->in_args && in->depth == in->in_event + 1) in->field = args_key(k, n);
    return 1;
}

static int cb_end_map(void *ctx) {
    ingest *in = IN;
    in->ntok++;
    if (in->meta_depth) {
        if (meta_gen_check(in, yajl_gen_map_close(in->meta_gen))) return 0;
        in->depth--;
        return !meta_maybe_done(in);
    }
    if (in->in_event && in->depth == in->in_event + 1 && in->in_args) in->in_args = 0;
    if (in->in_event && in->depth == in->in_event) {
        size_t end = yajl_get_bytes_consumed(in->y); /* just past the '}' */
        if (raw_take(in, in->cur + in->raw_from, end - in->raw_from)) return 0;
        ingest_event *e = &in->ev;
        e->name = buf_str(&in->name); e->cat = buf_str(&in->cat); e->ph = buf_str(&in->ph);
        e->pid = buf_str(&in->pid); e->tid = buf_str(&in->tid);
        e->shapes = in->shapes.len ? in->shapes.p : NULL;
        e->grid = in->grid.len ? in->grid.p : NULL;
        e->block = in->block.len ? in->block.p : NULL;
        e->types = in->types.len && !in->types_junk ? in->types.p : NULL;
        e->concrete = in->concrete.len && !in->concrete_junk ? in->concrete.p : NULL;
        /* a collective's message (c10d's args on record_param_comms and its NCCL kernel):
         * its bytes, where the event has none of its own (the comm advice's GB/s) */
        if (!e->has_bytes && in->msg_nelems > 0 && in->msg_esize > 0 && in->msg_nelems < (1LL << 50)) {
            e->bytes = in->msg_nelems * in->msg_esize;
            e->has_bytes = 1;
        }
        e->json = in->raw.p;
        e->json_len = in->raw.len;
        e->json_ws = 1;
        in->in_event = 0;
        in->events++;
        int rc = in->sink.on_event ? in->sink.on_event(in->sink.ctx, e) : 0;
        if (rc) return fail(in, rc, "%s", sink_message(in, "could not store the events")), 0;
    }
    in->depth--;
    if (in->top == TOP_OBJECT && in->depth == 0 && !in->saw_trace_events)
        return fail(in, ERR_NOTTRACE, "the object has no traceEvents array%s", NULL), 0;
    return 1;
}

static int cb_start_array(void *ctx) {
    ingest *in = IN;
    in->ntok++;
    if (++in->depth > INGEST_MAX_DEPTH) return fail(in, ERR_INVALID, "JSON nested too deeply%s", NULL), 0;
    if (in->depth == 2) in->await_value = 0;
    if (container_misplaced(in)) return 0;
    if (in->top == TOP_UNKNOWN) { in->top = TOP_ARRAY; in->saw_trace_events = 1; return 1; }
    if (in->meta_depth) return !meta_gen_check(in, yajl_gen_array_open(in->meta_gen));
    if (in->top == TOP_OBJECT && in->depth == 2) {
        if (!strcmp(buf_str(&in->meta_key), "traceEvents")) {
            in->ev_array_depth = 2;
            in->saw_trace_events = 1;
            return 1;
        }
        in->meta_depth = 2;
        return !meta_gen_check(in, yajl_gen_array_open(in->meta_gen));
    }
    if ((in->top == TOP_ARRAY && in->depth == 2) || (in->ev_array_depth && in->depth == in->ev_array_depth + 1 && !in->in_event))
        return fail(in, ERR_INVALID, "an element of traceEvents is not an object%s", NULL), 0;
    if (in->shape_depth) {
        buf *b = shape_buf(in);
        if (in->shape_need_sep && buf_put(b, ", ", 2)) return 0;
        in->shape_need_sep = 0;
        return !buf_put(b, "[", 1);
    }
    if (in->in_args && (in->field == A_SHAPES || in->field == A_GRID || in->field == A_BLOCK || in->field == A_TYPES ||
                        in->field == A_CONCRETE)) {
        in->shape_field = in->field;
        in->shape_depth = in->depth;
        in->shape_need_sep = 0;
        buf_reset(shape_buf(in));
        in->field = F_NONE;
        return !buf_put(shape_buf(in), "[", 1);
    }
    if (in->in_event) in->field = F_NONE;
    return 1;
}

static int cb_end_array(void *ctx) {
    ingest *in = IN;
    in->ntok++;
    if (in->meta_depth) {
        if (meta_gen_check(in, yajl_gen_array_close(in->meta_gen))) return 0;
        in->depth--;
        return !meta_maybe_done(in);
    }
    if (in->shape_depth) {
        if (buf_put(shape_buf(in), "]", 1)) return 0;
        in->shape_need_sep = 1;
        if (in->depth == in->shape_depth) in->shape_depth = 0;
    }
    if (in->ev_array_depth && in->depth == in->ev_array_depth) in->ev_array_depth = 0;
    in->depth--;
    return 1;
}

static const yajl_callbacks callbacks = {
    cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};
#undef IN
#undef GEN

/* ---- public API ---- */

ingest *ingest_new(const ingest_sink *sink, int gzip, unsigned long long max_inflated) {
    ingest *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->sink = *sink;
    in->gzip = gzip ? 1 : -1;
    in->max_inflated = max_inflated;
    in->y = yajl_alloc(&callbacks, NULL, in);
    in->meta_gen = yajl_gen_alloc(NULL);
    if (!in->y || !in->meta_gen) {
        ingest_free(in);
        return NULL;
    }
    return in;
}

/* Called after each chunk YAJL took. A token cut by the chunk's end is copied into YAJL's
 * lexer buffer and rescanned from its start with every later chunk, and no callback sees
 * it until it ends: a 100 MiB key cost 573 MB and 37 s of CPU before the cap on values
 * could look at it (issue 22). So the bytes fed since the last callback are bounded here,
 * as they arrive: a chunk with a callback leaves at most its own length pending, one
 * without adds its length. Where a top-level key is due the bound is the key cap plus
 * one chunk (MHD's are at most 256 KiB); anywhere else, the values' cap plus one chunk
 * (no event can hold more: INGEST_MAX_EVENT_BYTES). Only whitespace, ',' and ':' lie
 * between tokens, so a legal document never comes near either bound. */
#define TOKEN_SLACK (256u << 10)
static int token_guard(ingest *in, size_t n) {
    in->pending = in->ntok != in->ntok_seen ? n : in->pending + n;
    in->ntok_seen = in->ntok;
    int key_due = in->top == TOP_OBJECT && in->depth == 1 && !in->await_value;
    if (key_due && in->pending > INGEST_MAX_KEY_BYTES + TOKEN_SLACK)
        return fail(in, ERR_TOOBIG, "a top-level key is over 1 KiB%s", NULL);
    if (in->pending > INGEST_MAX_META_BYTES + TOKEN_SLACK)
        return fail(in, ERR_TOOBIG, "a JSON string (or a run of whitespace) is over 16 MiB%s", NULL);
    return 0;
}

static int parse_plain(ingest *in, const unsigned char *p, size_t n) {
    if (in->max_inflated && (in->inflated += n) > in->max_inflated)
        return fail(in, ERR_TOOBIG, "the decompressed trace is larger than the limit%s", NULL);
    in->cur = p;
    in->raw_from = 0; /* an event still open continues at the first byte */
    yajl_status ys = yajl_parse(in->y, p, n);
    in->fed_before += n;
    if (ys == yajl_status_ok) {
        int rc = token_guard(in, n);
        if (rc) return rc;
        return in->in_event ? raw_take(in, p + in->raw_from, n - in->raw_from) : 0;
    }
    if (in->errcode) return in->errcode; /* one of our callbacks stopped it */
    unsigned char *msg = yajl_get_error(in->y, 0, p, n);
    fail(in, ERR_PARSE, "invalid JSON: %s", (const char *)msg);
    yajl_free_error(in->y, msg);
    return ERR_PARSE;
}

static int is_sqlite_magic(const unsigned char *b, size_t n) {
    return n >= 16 && !memcmp(b, "SQLite format 3\0", 16);
}

/* An SQLite body: ERR_FORMAT unless someone takes its bytes (ingest_set_sqlite_sink). */
static int start_sqlite(ingest *in) {
    in->sqlite = 1;
    if (!in->sqlite_fn) return fail(in, ERR_FORMAT, "an SQLite file (nsys export) is not a JSON trace%s", NULL);
    return 0;
}

static int to_sqlite(ingest *in, const unsigned char *p, size_t n) {
    if (in->max_inflated && (in->inflated += n) > in->max_inflated)
        return fail(in, ERR_TOOBIG, "the decompressed upload is larger than the limit%s", NULL);
    int rc = in->sqlite_fn(in->sqlite_ctx, p, n);
    return rc ? fail(in, rc, "cannot keep the SQLite upload in a temporary file%s", NULL) : 0;
}

/* Decides JSON or SQLite from the first decompressed bytes of a gzip body. */
static int inner_decide(ingest *in) {
    in->inner_done = 1;
    if (is_sqlite_magic(in->isniff, in->nisniff)) {
        int rc = start_sqlite(in);
        return rc ? rc : to_sqlite(in, in->isniff, in->nisniff);
    }
    return in->nisniff ? parse_plain(in, in->isniff, in->nisniff) : 0;
}

/* Plain (or decompressed) bytes: to YAJL, or to the SQLite sink. A gzip body can hold an
 * SQLite file too (gzip -c export.sqlite), so its first 16 decompressed bytes are sniffed
 * as a plain body's are. */
static int route_plain(ingest *in, const unsigned char *p, size_t n) {
    if (in->gzip == 1 && !in->inner_done) {
        size_t take = sizeof in->isniff - in->nisniff;
        if (take > n) take = n;
        memcpy(in->isniff + in->nisniff, p, take);
        in->nisniff += take;
        p += take;
        n -= take;
        if (in->nisniff < sizeof in->isniff) return 0;
        int rc = inner_decide(in);
        if (rc) return rc;
    }
    if (n == 0) return 0;
    return in->sqlite ? to_sqlite(in, p, n) : parse_plain(in, p, n);
}

static int feed_inflate(ingest *in, const unsigned char *p, size_t n) {
    unsigned char out[64 * 1024];
    in->z.next_in = (unsigned char *)p;
    in->z.avail_in = (uInt)n;
    while (in->z.avail_in > 0) {
        in->z.next_out = out;
        in->z.avail_out = sizeof out;
        int zr = inflate(&in->z, Z_NO_FLUSH);
        size_t got = sizeof out - in->z.avail_out;
        if (got) {
            int rc = route_plain(in, out, got);
            if (rc) return rc;
        }
        if (zr == Z_STREAM_END) {
            /* Concatenated gzip members are legal (gzip -c a b); trailing bytes after the
             * last member are not, and ignoring them would hide a corrupt upload. */
            if (in->z.avail_in == 0) return 0;
            if (inflateReset(&in->z) != Z_OK) return fail(in, ERR_PARSE, "gzip stream corrupt%s", NULL);
            continue;
        }
        if (zr != Z_OK && !(zr == Z_BUF_ERROR && got)) return fail(in, ERR_PARSE, "gzip stream corrupt: %s", in->z.msg);
    }
    return 0;
}

/* Decides plain/gzip/SQLite from the first bytes, then routes everything. */
int ingest_feed(ingest *in, const void *data, size_t n) {
    const unsigned char *p = data;
    in->bytes_in += n;
    if (in->errcode) return in->errcode;
    if (in->gzip == -1) {
        size_t take = sizeof in->sniff - in->nsniff;
        if (take > n) take = n;
        memcpy(in->sniff + in->nsniff, p, take);
        in->nsniff += take;
        p += take;
        n -= take;
        int could_be_sqlite = !memcmp(in->sniff, "SQLite format 3", in->nsniff < 15 ? in->nsniff : 15);
        if (in->nsniff < sizeof in->sniff && (in->nsniff < 2 || could_be_sqlite)) return 0; /* need more to decide */
        in->gzip = in->nsniff >= 2 && in->sniff[0] == 0x1f && in->sniff[1] == 0x8b;
        int rc;
        if (is_sqlite_magic(in->sniff, in->nsniff)) {
            rc = start_sqlite(in);
            if (!rc) rc = to_sqlite(in, in->sniff, in->nsniff);
        } else if (in->gzip) {
            if (inflateInit2(&in->z, 15 + 16) != Z_OK) return ERR_NOMEM;
            in->z_live = 1;
            rc = feed_inflate(in, in->sniff, in->nsniff);
        } else {
            rc = parse_plain(in, in->sniff, in->nsniff);
        }
        if (rc) return rc;
    } else if (in->gzip == 1 && !in->z_live) {
        if (inflateInit2(&in->z, 15 + 16) != Z_OK) return ERR_NOMEM;
        in->z_live = 1;
    }
    if (n == 0) return 0;
    return in->gzip ? feed_inflate(in, p, n) : route_plain(in, p, n);
}

int ingest_finish(ingest *in) {
    if (in->errcode) return in->errcode;
    if (in->gzip == -1) { /* fewer than 16 bytes in all: decide now */
        in->gzip = in->nsniff >= 2 && in->sniff[0] == 0x1f && in->sniff[1] == 0x8b;
        if (in->gzip) {
            if (inflateInit2(&in->z, 15 + 16) != Z_OK) return ERR_NOMEM;
            in->z_live = 1;
            int rc = feed_inflate(in, in->sniff, in->nsniff);
            if (rc) return rc;
        } else if (in->nsniff) {
            int rc = parse_plain(in, in->sniff, in->nsniff);
            if (rc) return rc;
        }
    }
    if (in->bytes_in == 0) return fail(in, ERR_NOTTRACE, "the body is empty%s", NULL);
    if (in->z_live) {
        /* inflate() reports the end of the last member; anything short of it is truncation. */
        in->z.next_in = NULL;
        in->z.avail_in = 0;
        unsigned char out[1];
        in->z.next_out = out;
        in->z.avail_out = 0;
        if (inflate(&in->z, Z_FINISH) != Z_STREAM_END) return fail(in, ERR_PARSE, "gzip stream truncated%s", NULL);
    }
    if (in->gzip == 1 && !in->inner_done) { /* fewer than 16 decompressed bytes */
        int rc = inner_decide(in);
        if (rc) return rc;
    }
    if (in->sqlite) return 0; /* the SQLite sink's owner reads and checks the file */
    if (yajl_complete_parse(in->y) != yajl_status_ok) {
        if (in->errcode) return in->errcode;
        unsigned char *msg = yajl_get_error(in->y, 0, NULL, 0);
        fail(in, ERR_PARSE, "invalid JSON: %s", (const char *)msg);
        yajl_free_error(in->y, msg);
        return ERR_PARSE;
    }
    if (in->top == TOP_UNKNOWN || !in->saw_trace_events)
        return fail(in, ERR_NOTTRACE, "not a trace: expected an array of events or an object with traceEvents%s", NULL);
    return 0;
}

const char *ingest_error(const ingest *in) { return in->err[0] ? in->err : "no error"; }
int ingest_sniffed_sqlite(const ingest *in) { return in->sqlite; }
void ingest_set_sqlite_sink(ingest *in, ingest_bytes_fn fn, void *ctx) {
    in->sqlite_fn = fn;
    in->sqlite_ctx = ctx;
}
int ingest_top_is_array(const ingest *in) { return in->top == TOP_ARRAY; }
unsigned long long ingest_event_count(const ingest *in) { return in->events; }
unsigned long long ingest_bytes_in(const ingest *in) { return in->bytes_in; }

void ingest_free(ingest *in) {
    if (!in) return;
    if (in->y) yajl_free(in->y);
    if (in->meta_gen) yajl_gen_free(in->meta_gen);
    if (in->z_live) inflateEnd(&in->z);
    buf *bs[] = {&in->name, &in->cat, &in->ph, &in->pid, &in->tid, &in->shapes, &in->grid, &in->block, &in->types, &in->concrete,
                 &in->meta_key, &in->raw};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) free(bs[i]->p);
    free(in);
}
