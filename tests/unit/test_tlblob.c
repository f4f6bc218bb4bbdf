/* test_tlblob.c -- cmocka cases for server/lib/tlblob.c (stored timeline bucket blobs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "lib/tlblob.h"

static ZSTD_CCtx *cctx;

/* A short session's track: a few counted buckets, a fully busy stretch, the rest idle. */
static void short_track(unsigned char *raw) {
    memset(raw, 0, TL_BLOB_RAW);
    for (int i = 100; i < 3000; i++) {
        float busy = 12.5f;
        uint32_t count = i % 97 == 0 ? 3 : 0, top = count ? 42 : 0;
        memcpy(raw + i * 12, &busy, 4);
        memcpy(raw + i * 12 + 4, &count, 4);
        memcpy(raw + i * 12 + 8, &top, 4);
    }
}

static void test_tlblob_short_track_packs_small_and_back(void **state)
{
    (void)state;
    unsigned char *raw = malloc(TL_BLOB_RAW), *out = malloc(TL_BLOB_RAW), *scratch = malloc(TL_BLOB_RAW);
    short_track(raw);
    size_t n = tl_blob_pack(raw, out, cctx);
    assert_true(n < 1024); /* 48 KiB raw */
    assert_memory_equal(out, "TLz\x02", 4);
    const unsigned char *back = tl_blob_unpack(out, n, scratch);
    assert_ptr_equal(back, scratch);
    assert_memory_equal(back, raw, TL_BLOB_RAW);
    free(raw); free(out); free(scratch);
}

/* Records compressing cannot shrink are kept raw, and a raw blob (every database written before
 * the packed form) reads as itself. */
static void test_tlblob_incompressible_and_old_blobs_stay_raw(void **state)
{
    (void)state;
    unsigned char *raw = malloc(TL_BLOB_RAW), *out = malloc(TL_BLOB_RAW), *scratch = malloc(TL_BLOB_RAW);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < TL_BLOB_RAW; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; raw[i] = (unsigned char)x; }
    assert_int_equal(tl_blob_pack(raw, out, cctx), TL_BLOB_RAW);
    assert_memory_equal(out, raw, TL_BLOB_RAW);
    assert_ptr_equal(tl_blob_unpack(raw, TL_BLOB_RAW, scratch), raw);
    free(raw); free(out); free(scratch);
}

/* Databases written before the zstd form hold zlib'd blobs ("TLz" 0x01): still read. */
static void test_tlblob_zlib_blobs_of_older_databases_read(void **state)
{
    (void)state;
    unsigned char *raw = malloc(TL_BLOB_RAW), *out = malloc(TL_BLOB_RAW), *scratch = malloc(TL_BLOB_RAW);
    short_track(raw);
    uLongf n = (uLongf)(TL_BLOB_RAW - 4);
    assert_int_equal(compress2(out + 4, &n, raw, (uLong)TL_BLOB_RAW, Z_BEST_SPEED), Z_OK);
    memcpy(out, "TLz\x01", 4);
    assert_ptr_equal(tl_blob_unpack(out, 4 + n, scratch), scratch);
    assert_memory_equal(scratch, raw, TL_BLOB_RAW);
    assert_null(tl_blob_unpack(out, 4 + n - 3, scratch)); /* truncated */
    out[3] = 2;                                            /* a zlib stream under the zstd tag */
    assert_null(tl_blob_unpack(out, 4 + n, scratch));
    free(raw); free(out); free(scratch);
}

static void test_tlblob_rejects_what_is_neither_form(void **state)
{
    (void)state;
    unsigned char *raw = malloc(TL_BLOB_RAW), *out = malloc(TL_BLOB_RAW), *scratch = malloc(TL_BLOB_RAW);
    short_track(raw);
    size_t n = tl_blob_pack(raw, out, cctx);
    assert_null(tl_blob_unpack(NULL, 0, scratch));
    assert_null(tl_blob_unpack(out, 4, scratch));          /* the tag alone */
    assert_null(tl_blob_unpack(out, n - 3, scratch));      /* truncated stream */
    assert_null(tl_blob_unpack(raw, TL_BLOB_RAW - 12, scratch)); /* an old blob cut short */
    assert_null(tl_blob_unpack(raw, TL_BLOB_RAW + 12, scratch));
    out[1] = 'X';
    assert_null(tl_blob_unpack(out, n, scratch));          /* another tag */
    free(raw); free(out); free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tlblob_short_track_packs_small_and_back),
        cmocka_unit_test(test_tlblob_incompressible_and_old_blobs_stay_raw),
        cmocka_unit_test(test_tlblob_zlib_blobs_of_older_databases_read),
        cmocka_unit_test(test_tlblob_rejects_what_is_neither_form),
    };
    cctx = ZSTD_createCCtx();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ZSTD_freeCCtx(cctx);
    return failed;
}
