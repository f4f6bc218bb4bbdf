/* test_chunk.c -- cmocka cases for server/lib/chunk.c: the version-2 column store cuts ts/dur
 * out of each event and must give back every event byte for byte, with the header values
 * the loader gave; version-1 (zlib) chunks of older databases still read; corrupt chunks
 * are ERR_IO, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "lib/chunk.h"

typedef struct ev {
    const char *json;
    double ts, dur;
} ev;

/* ts/dur as the parser reads them (strtod of the member text). */
static const ev events[] = {
    {"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":5092397188447.200,\"dur\":9.283,\"args\":{\"ts\":1}}",
     5092397188447.200, 9.283},
    {"{\"ts\":1.500,\"dur\":0}", 1.5, 0},                 /* first members, trailing zero kept */
    {"{\"name\":\"a\",\"dur\":0.050,\"ts\":12}", 12, 0.05}, /* dur before ts, both last */
    {"{\"ts\":1}", 1, 0},                                 /* the only member */
    {"{\"ts\":-0,\"dur\":2}", -0.0, 2},                   /* "-0" does not print back: stays */
    {"{\"ts\":1e3,\"dur\":1E-3}", 1000, 0.001},           /* exponents stay in the JSON */
    {"{\"ts\":12345678901234567,\"dur\":1}", 12345678901234567.0, 1}, /* 17 digits: stays */
    {"{\"ts\":\"12\",\"dur\":3.25}", 0, 3.25},             /* a string ts stays, ts 0 */
    {"{\"ts\":1,\"ts\":2}", 2, 0},                        /* duplicate: the parser keeps the last */
    {"{\"name\":\"\\\"ts\\\":5,\",\"ts\":7.25}", 7.25, 0},  /* "ts": inside a string value */
    {"{ \"ts\": 3 }", 3, 0},                              /* not compact: stored whole */
    {"{\"ph\":\"M\",\"name\":\"process_name\",\"args\":{\"name\":\"python3\"}}", 0, 0},
    {"{\"ts\":-2.5,\"dur\":0.000}", -2.5, 0},              /* negative ts, dur "0.000" */
    {"{}", 0, 0},
    {"{\"ts\":99.9,\"x\":[{\"ts\":1},\"]}\"]}", 99.9, 0},   /* nested and bracket in a string */
    {"{\"ts\":1.500,\"dur\":0,}", 1.5, 0},              /* trailing comma after the cuts: nothing cut (fuzz, issue 26) */
    {"{\"ts\":1.5,\"dur\":0, \"x\":1}", 1.5, 0},           /* a blank after a comma: nothing cut */
    {"{\"ts\":4.5}x\"}", 4.5, 0},                        /* closed before its end: nothing cut (fuzz) */
    {"{\"ts\":4.5,\"args\":{\"a\":1},\"dur\":2}", 4.5, 2},   /* dur after args: the tail between */
    {"{\"ts\":4.5,\"dur\":2,\"args\":{\"a\":[1,2]}", 4.5, 2},  /* malformed after the cuts: kept as is */
    {"{\"ts\":4.5,x:1}", 4.5, 0},                        /* malformed before dur: nothing cut */
    {NULL, 8.25, 1}, /* 300 members, ts first and dur last: built by wide_event() */
};
#define NEV (sizeof events / sizeof events[0])

/* {"ts":8.25,"m0":0,...,"m297":297,"dur":1}: more members than a position can name. */
static const char *wide_event(void) {
    static char j[8192];
    if (!j[0]) {
        size_t o = (size_t)snprintf(j, sizeof j, "{\"ts\":8.25");
        for (int i = 0; i < 298; i++) o += (size_t)snprintf(j + o, sizeof j - o, ",\"m%d\":%d", i, i);
        snprintf(j + o, sizeof j - o, ",\"dur\":1}");
    }
    return j;
}
static const char *ev_json(size_t i) { return events[i].json ? events[i].json : wide_event(); }

static void add_all(chunk_builder *b) {
    for (size_t i = 0; i < NEV; i++) {
        chunk_rec r = {events[i].ts, events[i].dur, (uint32_t)i, (uint32_t)(i * 7), (uint8_t)(i % 5), 'X',
                       (uint32_t)strlen(ev_json(i)), 0};
        assert_int_equal(chunk_add(b, &r, ev_json(i)), 0);
    }
}

static void check_all(const buf *plain) {
    size_t off = 0, i = 0;
    chunk_rec r;
    const char *js;
    while (chunk_next(plain, &off, &r, &js) == 1) {
        assert_true(i < NEV);
        assert_int_equal(r.json_len, strlen(ev_json(i)));
        assert_memory_equal(js, ev_json(i), r.json_len);
        assert_true(r.ts == events[i].ts && signbit(r.ts) == signbit(events[i].ts));
        assert_true(r.dur == events[i].dur);
        assert_int_equal(r.name, i);
        assert_int_equal(r.kind, i * 7);
        assert_int_equal(r.cls, i % 5);
        assert_int_equal(r.ph, 'X');
        i++;
    }
    assert_int_equal(i, NEV);
    assert_int_equal(off, plain->len);
}

static void test_v2_round_trip_is_exact(void **state) {
    (void)state;
    chunk_builder b = {0};
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    buf z = {0}, plain = {0};
    for (int round = 0; round < 2; round++) { /* a builder is reused after chunk_finish */
        add_all(&b);
        assert_int_equal(b.n, NEV);
        /* the counts event_chunks.drawn / .gpu store (cls i % 5): all but [memory], and kernels */
        long long drawn = 0, gpu = 0;
        for (size_t i = 0; i < NEV; i++) drawn += i % 5 != EV_MEMORY, gpu += i % 5 == EV_GPU;
        assert_int_equal(b.drawn, drawn);
        assert_int_equal(b.gpu, gpu);
        assert_int_equal(drawn, 18);
        assert_int_equal(chunk_finish(&b, cctx, &z), 0);
        assert_int_equal(b.n, 0);
        assert_int_equal(b.drawn + b.gpu, 0);
        assert_int_equal(chunk_inflate(z.p, z.len, &plain), 0);
        check_all(&plain);
    }
    chunk_builder_free(&b);
    ZSTD_freeCCtx(cctx);
    buf_free(&z);
    buf_free(&plain);
}

/* What the loader's memory budget counts (load.c's track_mem): every buffer's capacity, the
 * columns besides the JSON too, which the budget once left out (issue 24: two 9,000-thread
 * uploads held 119 MB under a 16 MB budget of JSON bytes). */
static void test_builder_mem_counts_every_buffer(void **state) {
    (void)state;
    chunk_builder b = {0};
    assert_int_equal(chunk_builder_mem(&b), 0);
    add_all(&b);
    size_t caps = b.raw.cap;
    for (int i = 0; i < CB_NCOLS; i++) caps += b.col[i].cap;
    assert_int_equal(chunk_builder_mem(&b), caps);
    assert_true(chunk_builder_mem(&b) > b.col[CB_JSON].cap);   /* the other columns count */
    assert_true(chunk_builder_mem(&b) >= chunk_builder_bytes(&b)); /* capacity, not contents */
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    buf z = {0};
    assert_int_equal(chunk_finish(&b, cctx, &z), 0);
    assert_int_equal(chunk_builder_bytes(&b), 0);
    assert_int_equal(b.raw.cap, 0); /* the laid-out copy is freed, the columns kept for the next chunk */
    assert_int_equal(chunk_builder_mem(&b), caps);
    chunk_builder_free(&b);
    assert_int_equal(chunk_builder_mem(&b), 0);
    ZSTD_freeCCtx(cctx);
    buf_free(&z);
}

static void test_canonical_numbers_leave_the_json(void **state) {
    (void)state;
    chunk_builder b = {0};
    chunk_rec r = {5092397188447.200, 9.283, 1, 2, 0, 'X', 0, 0};
    const char *js = events[0].json;
    r.json_len = (uint32_t)strlen(js);
    assert_int_equal(chunk_add(&b, &r, js), 0);
    const char *stored = b.col[CB_JSON].p;
    assert_null(strstr(stored, "5092397188447"));
    assert_null(strstr(stored, "\"dur\""));
    assert_non_null(strstr(stored, "\"args\":{\"ts\":1}")); /* only top-level members are cut */
    assert_int_equal(b.col[CB_TRAW].len + b.col[CB_DRAW].len, 0);
    chunk_builder_free(&b);
}

/* Members are read only up to "ts" and "dur": one past the 254th position, or after a
 * malformed member, stays; both before it, or with args between them, are cut. */
static void test_cuts_stop_at_the_last_position(void **state) {
    (void)state;
    static const struct { size_t ev; int ts_cut, dur_cut; uint8_t absent; } want[] = {
        {NEV - 4, 1, 1, 0}, /* args between ts and dur */
        {NEV - 4, 1, 0, CHUNK_NO_DUR}, /* the parser said there is no dur: not searched */
        {NEV - 4, 0, 1, CHUNK_NO_TS},
        {NEV - 3, 1, 1, 0}, /* malformed after both */
        {NEV - 2, 0, 0, 0}, /* malformed before dur */
        {NEV - 1, 1, 0, 0}, /* dur is member 299: past what a position names */
    };
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        chunk_builder b = {0};
        size_t i = want[w].ev;
        chunk_rec r = {events[i].ts, events[i].dur, 1, 2, 0, 'X', (uint32_t)strlen(ev_json(i)), want[w].absent};
        assert_int_equal(chunk_add(&b, &r, ev_json(i)), 0);
        assert_int_equal(((unsigned char *)b.col[CB_TPOS].p)[0] != 255 && ((unsigned char *)b.col[CB_TPOS].p)[0] != 0, want[w].ts_cut);
        assert_int_equal(((unsigned char *)b.col[CB_DPOS].p)[0] != 255 && ((unsigned char *)b.col[CB_DPOS].p)[0] != 0, want[w].dur_cut);
        /* and it reads back as it was */
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        buf z = {0}, plain = {0};
        assert_int_equal(chunk_finish(&b, cctx, &z), 0);
        assert_int_equal(chunk_inflate(z.p, z.len, &plain), 0);
        size_t off = 0;
        const char *js;
        assert_int_equal(chunk_next(&plain, &off, &r, &js), 1);
        assert_int_equal(r.json_len, strlen(ev_json(i)));
        assert_memory_equal(js, ev_json(i), r.json_len);
        ZSTD_freeCCtx(cctx);
        buf_free(&z);
        buf_free(&plain);
        chunk_builder_free(&b);
    }
}

static void test_v1_chunks_still_read(void **state) {
    (void)state;
    buf rec = {0}, plain = {0};
    for (size_t i = 0; i < NEV; i++) { /* the version-1 record layout, as chunk.h draws it */
        unsigned char h[CHUNK_HDR] = {0};
        uint32_t name = (uint32_t)i, kind = (uint32_t)(i * 7), len = (uint32_t)strlen(ev_json(i));
        memcpy(h, &events[i].ts, 8);
        memcpy(h + 8, &events[i].dur, 8);
        memcpy(h + 16, &name, 4);
        memcpy(h + 20, &kind, 4);
        h[24] = (unsigned char)(i % 5);
        h[25] = 'X';
        memcpy(h + 28, &len, 4);
        assert_int_equal(buf_put(&rec, h, sizeof h), 0);
        assert_int_equal(buf_put(&rec, ev_json(i), len), 0);
    }
    uLongf zlen = compressBound(rec.len);
    unsigned char *z = malloc(zlen);
    assert_int_equal(compress2(z, &zlen, (const unsigned char *)rec.p, rec.len, 6), Z_OK);
    assert_int_equal(chunk_inflate(z, zlen, &plain), 0);
    check_all(&plain);
    free(z);
    buf_free(&rec);
    buf_free(&plain);
}

/* Every truncation and a byte flipped at every position of the decompressed columns:
 * ERR_IO or a readable chunk, never a crash (ASan/UBSan run this too). */
static void test_corrupt_chunks_fail_cleanly(void **state) {
    (void)state;
    chunk_builder b = {0};
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    buf z = {0}, plain = {0};
    add_all(&b);
    size_t rawlen = 0;
    assert_int_equal(chunk_finish(&b, cctx, &z), 0);
    rawlen = b.raw.len;
    for (size_t n = 0; n < z.len; n++) assert_int_not_equal(chunk_inflate(z.p, n, &plain), 0);
    unsigned char *raw = malloc(rawlen), *zz = malloc(ZSTD_compressBound(rawlen));
    for (size_t i = 0; i < rawlen; i++) {
        memcpy(raw, b.raw.p, rawlen);
        raw[i] ^= 0xff;
        size_t zn = ZSTD_compress(zz, ZSTD_compressBound(rawlen), raw, rawlen, 1);
        assert_false(ZSTD_isError(zn));
        int rc = chunk_inflate(zz, zn, &plain);
        assert_true(rc == 0 || rc == ERR_IO);
    }
    assert_int_equal(chunk_inflate("not a chunk", 11, &plain), ERR_IO);
    free(raw);
    free(zz);
    chunk_builder_free(&b);
    ZSTD_freeCCtx(cctx);
    buf_free(&z);
    buf_free(&plain);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_round_trip_is_exact),
        cmocka_unit_test(test_builder_mem_counts_every_buffer),
        cmocka_unit_test(test_canonical_numbers_leave_the_json),
        cmocka_unit_test(test_cuts_stop_at_the_last_position),
        cmocka_unit_test(test_v1_chunks_still_read),
        cmocka_unit_test(test_corrupt_chunks_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
