/* fuzz_chunk.c: libFuzzer target for the event chunk codec (server/lib/chunk.c).
 *
 * Owns nothing but its checks; links server/lib/chunk.c, zstd and zlib (tests/fuzz/run.sh).
 * One input drives two paths:
 *   1. round trip: the first 16 bytes are an event's ts and dur (doubles), the rest its
 *      JSON text (any bytes). chunk_add twice (so the ts delta runs), chunk_finish,
 *      chunk_inflate: both records must come back with the same bytes and the same ts/dur
 *      bits, whatever was or was not cut;
 *   2. decoding: the whole input, zstd-compressed, is read as a version-2 chunk, and as
 *      itself (zlib, version 1): any result but a crash is fine, and what decodes must
 *      walk cleanly with chunk_next. */
#include "lib/chunk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define CHECK(cond, what)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_chunk: invariant broken: %s (%s:%d)\n", what, __FILE__, \
                    __LINE__);                                                           \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static void walk(const buf *plain) {
    size_t off = 0;
    chunk_rec r;
    const char *js;
    int rc;
    while ((rc = chunk_next(plain, &off, &r, &js)) == 1) CHECK(js + r.json_len <= plain->p + plain->len, "record in bounds");
}

static void round_trip(const uint8_t *data, size_t size, ZSTD_CCtx *cctx) {
    if (size < 16) return;
    chunk_rec in = {0, 0, 3, 4, 1, 'X', (uint32_t)(size - 16), 0};
    memcpy(&in.ts, data, 8);
    memcpy(&in.dur, data + 8, 8);
    const char *json = (const char *)data + 16;
    chunk_builder b;
    memset(&b, 0, sizeof b);
    buf z = {0}, plain = {0};
    CHECK(chunk_add(&b, &in, json) == 0 && chunk_add(&b, &in, json) == 0, "chunk_add");
    CHECK(chunk_finish(&b, cctx, &z) == 0, "chunk_finish");
    CHECK(chunk_inflate(z.p, z.len, &plain) == 0, "chunk_inflate of what chunk_finish wrote");
    size_t off = 0;
    for (int i = 0; i < 2; i++) {
        chunk_rec r;
        const char *js;
        CHECK(chunk_next(&plain, &off, &r, &js) == 1, "two records");
        CHECK(r.json_len == in.json_len && !memcmp(js, json, in.json_len), "the same JSON bytes");
        CHECK(!memcmp(&r.ts, &in.ts, 8) && !memcmp(&r.dur, &in.dur, 8), "the same ts/dur bits");
        CHECK(r.name == 3 && r.kind == 4 && r.cls == 1 && r.ph == 'X', "the same header");
    }
    CHECK(off == plain.len, "nothing after the records");
    chunk_builder_free(&b);
    buf_free(&z);
    buf_free(&plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ZSTD_CCtx *cctx;
    if (!cctx) cctx = ZSTD_createCCtx();
    round_trip(data, size, cctx);
    buf plain = {0};
    size_t cap = ZSTD_compressBound(size);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, data, size, 1);
    if (!ZSTD_isError(zn) && chunk_inflate(z, zn, &plain) == 0) walk(&plain);
    if (chunk_inflate(data, size, &plain) == 0) walk(&plain);
    free(z);
    buf_free(&plain);
    return 0;
}
