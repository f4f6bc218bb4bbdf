/* test_evorder.c -- cmocka cases for server/lib/evorder.c: the upload order of events across
 * tracks comes back run by run, whatever the number of frames; a malformed record is
 * ERR_IO, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/err.h"
#include "lib/evorder.h"

/* Writes tracks[0..n) event by event, reads the runs back and expands them. */
static void round_trip(const long long *tracks, size_t n) {
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    runs_writer w;
    memset(&w, 0, sizeof w);
    runs_writer_init(&w);
    for (size_t i = 0; i < n; i++) assert_int_equal(runs_note(&w, cctx, tracks[i]), 0);
    assert_int_equal(runs_finish(&w, cctx), 0);
    assert_int_equal(w.events, n);
    runs_reader r;
    memset(&r, 0, sizeof r);
    runs_reader_init(&r, w.out.p, w.out.len);
    size_t at = 0;
    long long t;
    unsigned long long c;
    int rc;
    while ((rc = runs_next(&r, &t, &c)) == 1) {
        assert_true(c >= 1);
        for (unsigned long long k = 0; k < c; k++) {
            assert_true(at < n);
            assert_int_equal(t, tracks[at++]);
        }
    }
    assert_int_equal(rc, 0);
    assert_int_equal(at, n);
    runs_reader_free(&r);
    runs_writer_free(&w);
    ZSTD_freeCCtx(cctx);
}

static void empty_and_one(void **state) {
    (void)state;
    round_trip(NULL, 0);
    long long one[] = {7};
    round_trip(one, 1);
    long long runs[] = {0, 0, 0, 1, 1, 0, 2, 2, 2, 2, 0, 300000};
    round_trip(runs, sizeof runs / sizeof runs[0]);
}

/* Alternating tracks, enough runs for several frames (RUNS_BLOCK each). */
static void many_frames(void **state) {
    (void)state;
    size_t n = 600000;
    long long *t = malloc(n * sizeof *t);
    assert_non_null(t);
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = (long long)((s >> 16) % 9000); /* 9,000 threads: most events change track */
    }
    round_trip(t, n);
    free(t);
}

static void malformed(void **state) {
    (void)state;
    runs_reader r;
    memset(&r, 0, sizeof r);
    long long t;
    unsigned long long c;
    const char junk[] = "not a zstd frame";
    runs_reader_init(&r, junk, sizeof junk);
    assert_int_equal(runs_next(&r, &t, &c), ERR_IO);
    runs_reader_free(&r);
    /* a frame whose pairs end half way */
    unsigned char raw[] = {5, 0x80}, z[64];
    size_t zn = ZSTD_compress(z, sizeof z, raw, sizeof raw, 1);
    assert_false(ZSTD_isError(zn));
    memset(&r, 0, sizeof r);
    runs_reader_init(&r, z, zn);
    assert_int_equal(runs_next(&r, &t, &c), ERR_IO);
    runs_reader_free(&r);
    /* a run of 0 events */
    unsigned char zero[] = {5, 0};
    zn = ZSTD_compress(z, sizeof z, zero, sizeof zero, 1);
    memset(&r, 0, sizeof r);
    runs_reader_init(&r, z, zn);
    assert_int_equal(runs_next(&r, &t, &c), ERR_IO);
    runs_reader_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_and_one),
        cmocka_unit_test(many_frames),
        cmocka_unit_test(malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
