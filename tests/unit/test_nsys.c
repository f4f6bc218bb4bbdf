/* test_nsys.c -- cmocka cases for the SQLite hook of server/ingest/parse.c that feeds nsys.c:
 * an SQLite body, plain or gzip, in chunks of any size, reaches the SQLite sink byte for
 * byte; JSON (plain or gzip, even under 16 bytes) still goes to the parser; without a sink
 * an SQLite body is ERR_FORMAT. The import itself is covered by tests/integration/test_nsys.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "ingest/parse.h"

static int count_event(void *ctx, const ingest_event *e) {
    (void)e;
    (*(int *)ctx)++;
    return 0;
}

static int collect(void *ctx, const void *p, size_t n) {
    return buf_put((buf *)ctx, p, n);
}

/* A fake SQLite file: the magic, then bytes of every value (NULs included). */
static size_t fake_sqlite(unsigned char *out, size_t n) {
    memcpy(out, "SQLite format 3\0", 16);
    for (size_t i = 16; i < n; i++) out[i] = (unsigned char)(i * 7);
    return n;
}

/* gzip (not zlib) framing of in. Returns the compressed length. */
static size_t gzip_of(const unsigned char *in, size_t n, unsigned char *out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    return len;
}

/* Feeds body in chunks of `step` bytes; returns ingest_finish's code. */
static int feed_all(ingest *in, const unsigned char *body, size_t n, size_t step) {
    for (size_t off = 0; off < n; off += step) {
        size_t k = n - off < step ? n - off : step;
        int rc = ingest_feed(in, body + off, k);
        if (rc) return rc;
    }
    return ingest_finish(in);
}

static void check_sqlite_body(const unsigned char *file, size_t n, const unsigned char *body, size_t blen, int forced_gzip) {
    static const size_t steps[] = {1, 3, 15, 16, 17, 4096};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        int events = 0;
        buf got = {0};
        ingest_sink sink = {&events, count_event, NULL, NULL};
        ingest *in = ingest_new(&sink, forced_gzip, 0);
        assert_non_null(in);
        ingest_set_sqlite_sink(in, collect, &got);
        assert_int_equal(feed_all(in, body, blen, steps[s]), 0);
        assert_int_equal(ingest_sniffed_sqlite(in), 1);
        assert_int_equal(events, 0);
        assert_int_equal(got.len, n);
        assert_memory_equal(got.p, file, n);
        ingest_free(in);
        buf_free(&got);
    }
}

static void test_nsys_ingest_plain_sqlite_reaches_the_sink(void **state) {
    unsigned char file[5000];
    (void)state;
    size_t n = fake_sqlite(file, sizeof file);
    check_sqlite_body(file, n, file, n, 0);
}

static void test_nsys_ingest_gzip_sqlite_reaches_the_sink(void **state) {
    unsigned char file[5000], z[8000];
    (void)state;
    size_t n = fake_sqlite(file, sizeof file);
    size_t zn = gzip_of(file, n, z, sizeof z);
    check_sqlite_body(file, n, z, zn, 0); /* sniffed gzip */
    check_sqlite_body(file, n, z, zn, 1); /* Content-Encoding: gzip */
}

static void test_nsys_ingest_sqlite_without_sink_is_format_error(void **state) {
    unsigned char file[64], z[256];
    (void)state;
    size_t n = fake_sqlite(file, sizeof file);
    size_t zn = gzip_of(file, n, z, sizeof z);
    int events = 0;
    ingest_sink sink = {&events, count_event, NULL, NULL};
    ingest *in = ingest_new(&sink, 0, 0);
    assert_int_equal(feed_all(in, file, n, 5), ERR_FORMAT);
    assert_int_equal(ingest_sniffed_sqlite(in), 1);
    ingest_free(in);
    in = ingest_new(&sink, 0, 0);
    assert_int_equal(feed_all(in, z, zn, 5), ERR_FORMAT);
    assert_int_equal(ingest_sniffed_sqlite(in), 1);
    ingest_free(in);
}

static void test_nsys_ingest_gzip_json_still_parses(void **state) {
    static const char *docs[] = {"[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2},{\"ph\":\"X\",\"name\":\"b\",\"ts\":3,\"dur\":1}]",
                                 "[]"}; /* the second is under the 16 sniffed bytes */
    static const int want[] = {2, 0};
    unsigned char z[512];
    (void)state;
    for (int d = 0; d < 2; d++) {
        size_t zn = gzip_of((const unsigned char *)docs[d], strlen(docs[d]), z, sizeof z);
        for (size_t step = 1; step <= zn; step += 7) {
            int events = 0;
            buf got = {0};
            ingest_sink sink = {&events, count_event, NULL, NULL};
            ingest *in = ingest_new(&sink, 0, 0);
            ingest_set_sqlite_sink(in, collect, &got);
            assert_int_equal(feed_all(in, z, zn, step), 0);
            assert_int_equal(ingest_sniffed_sqlite(in), 0);
            assert_int_equal(events, want[d]);
            assert_int_equal(got.len, 0);
            ingest_free(in);
            buf_free(&got);
        }
    }
}

static void test_nsys_ingest_sqlite_inflated_cap(void **state) {
    unsigned char file[5000], z[8000];
    (void)state;
    size_t n = fake_sqlite(file, sizeof file);
    size_t zn = gzip_of(file, n, z, sizeof z);
    buf got = {0};
    int events = 0;
    ingest_sink sink = {&events, count_event, NULL, NULL};
    ingest *in = ingest_new(&sink, 0, 1000); /* --max-inflated 1000 */
    ingest_set_sqlite_sink(in, collect, &got);
    assert_int_equal(feed_all(in, z, zn, 4096), ERR_TOOBIG);
    assert_true(got.len <= 1000);
    ingest_free(in);
    buf_free(&got);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nsys_ingest_plain_sqlite_reaches_the_sink),
        cmocka_unit_test(test_nsys_ingest_gzip_sqlite_reaches_the_sink),
        cmocka_unit_test(test_nsys_ingest_sqlite_without_sink_is_format_error),
        cmocka_unit_test(test_nsys_ingest_gzip_json_still_parses),
        cmocka_unit_test(test_nsys_ingest_sqlite_inflated_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
