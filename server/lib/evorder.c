/* evorder.c: the upload order of events across tracks, as compressed runs (evorder.h). */
#include "lib/evorder.h"

#include <zstd.h>

#include "lib/err.h"

#define RUNS_ZSTD_LEVEL 3

static int put_varint(buf *b, uint64_t v) {
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) t[n] |= 0x80;
        n++;
    } while (v);
    return buf_put(b, t, n);
}

void runs_writer_init(runs_writer *w) { w->track = -1; }

/* The pairs held in raw as one more frame of out; raw is emptied. */
static int flush(runs_writer *w, void *cctx) {
    if (!w->raw.len) return 0;
    size_t cap = ZSTD_compressBound(w->raw.len);
    if (buf_reserve(&w->out, cap)) return ERR_NOMEM;
    size_t zn = ZSTD_compressCCtx(cctx, w->out.p + w->out.len, cap, w->raw.p, w->raw.len, RUNS_ZSTD_LEVEL);
    if (ZSTD_isError(zn)) return ERR_IO;
    w->out.len += zn;
    w->raw.len = 0;
    return 0;
}

/* The run being counted into raw; a full raw becomes a frame. */
static int end_run(runs_writer *w, void *cctx) {
    if (w->track < 0 || !w->count) return 0;
    if (put_varint(&w->raw, (uint64_t)w->track) || put_varint(&w->raw, w->count)) return ERR_NOMEM;
    w->count = 0;
    return w->raw.len + 20 > RUNS_BLOCK ? flush(w, cctx) : 0;
}

int runs_note(runs_writer *w, void *cctx, long long track) {
    w->events++;
    if (track == w->track) {
        w->count++;
        return 0;
    }
    int rc = end_run(w, cctx);
    w->track = track;
    w->count = 1;
    return rc;
}

int runs_finish(runs_writer *w, void *cctx) {
    int rc = end_run(w, cctx);
    return rc ? rc : flush(w, cctx);
}

void runs_writer_free(runs_writer *w) {
    buf_free(&w->raw);
    buf_free(&w->out);
}

void runs_reader_init(runs_reader *r, const void *z, size_t n) {
    r->z = z;
    r->zend = n ? r->z + n : r->z; /* z may be NULL when n is 0 */
    r->raw.len = 0;
    r->at = 0;
}

/* The next frame into raw: 1, 0 when none is left, ERR_IO, ERR_NOMEM. */
static int next_frame(runs_reader *r) {
    if (r->z >= r->zend) return 0;
    size_t zn = ZSTD_findFrameCompressedSize(r->z, (size_t)(r->zend - r->z));
    unsigned long long size = ZSTD_isError(zn) ? ZSTD_CONTENTSIZE_ERROR : ZSTD_getFrameContentSize(r->z, zn);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > RUNS_BLOCK) return ERR_IO;
    r->raw.len = 0;
    if (buf_reserve(&r->raw, (size_t)size)) return ERR_NOMEM;
    size_t got = ZSTD_decompress(r->raw.p, (size_t)size, r->z, zn);
    if (ZSTD_isError(got) || got != size) return ERR_IO;
    r->raw.len = got;
    r->at = 0;
    r->z += zn;
    return 1;
}

static int get_varint(runs_reader *r, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && r->at < r->raw.len; shift += 7) {
        unsigned c = (unsigned char)r->raw.p[r->at++];
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
    return ERR_IO;
}

int runs_next(runs_reader *r, long long *track, unsigned long long *count) {
    while (r->at >= r->raw.len) {
        int rc = next_frame(r);
        if (rc <= 0) return rc;
    }
    uint64_t t, c;
    if (get_varint(r, &t) || get_varint(r, &c) || !c || t > INT32_MAX) return ERR_IO;
    *track = (long long)t;
    *count = c;
    return 1;
}

void runs_reader_free(runs_reader *r) { buf_free(&r->raw); }
