/* test_utf8.c: lib/utf8.c, cuts that never split a UTF-8 character. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/utf8.h"

/* Every cut of "aé€😀" (1 + 2 + 3 + 4 bytes) ends at one of its five boundaries. */
static void test_utf8_cut_boundaries(void **state) {
    (void)state;
    const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10};
    for (size_t max = 0; max < sizeof want / sizeof want[0]; max++) assert_int_equal(utf8_cut(s, strlen(s), max), want[max]);
}

/* utf8_snprintf cut inside a character drops its leading bytes; whole ones stay; the
 * return value is what snprintf returns. */
static void test_utf8_snprintf_drops_partial_tail(void **state) {
    (void)state;
    char b[8];
    /* "ab" + "é" x 3 = 8 bytes: 7 fit, the third é is cut after its first byte */
    assert_int_equal(utf8_snprintf(b, sizeof b, "ab%s", "\xc3\xa9\xc3\xa9\xc3\xa9"), 8);
    assert_string_equal(b, "ab\xc3\xa9\xc3\xa9");
    /* a 4-byte character cut after 1, 2, 3 bytes */
    for (size_t n = 2; n <= 4; n++) {
        char c[8];
        utf8_snprintf(c, n + 1, "x%s", "\xf0\x9f\x98\x80");
        assert_string_equal(c, "x");
    }
    char d[16];
    assert_int_equal(utf8_snprintf(d, sizeof d, "%s", "\xe2\x82\xac"), 3); /* not cut: unchanged */
    assert_string_equal(d, "\xe2\x82\xac");
    assert_int_equal(utf8_snprintf(d, 4, "%s", "abcdef"), 6); /* ASCII cut as snprintf cuts */
    assert_string_equal(d, "abc");
}

/* utf8_clip: s itself up to max bytes; else cut at a character and an ellipsis added. */
static void test_utf8_clip(void **state) {
    (void)state;
    char b[5 + 4];
    const char *s = "abcde";
    assert_ptr_equal(utf8_clip(s, 5, b, sizeof b), s); /* fits: no copy */
    assert_string_equal(utf8_clip("abcdef", 5, b, sizeof b), "abcde\xe2\x80\xa6");
    /* "abcd" + "é": the cut at 5 falls inside the é, which goes whole */
    assert_string_equal(utf8_clip("abcd\xc3\xa9", 5, b, sizeof b), "abcd\xe2\x80\xa6");
}

/* utf8_valid_prefix: RFC 3629, where YAJL checks only a sequence's shape (issue 22, 43). */
static void test_utf8_valid_prefix_rfc3629(void **state) {
    (void)state;
    const char *ok = "plain ascii, then \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf end";
    assert_int_equal(utf8_valid_prefix(ok, strlen(ok)), strlen(ok));
    assert_int_equal(utf8_valid_prefix("a\0b", 3), 3); /* NUL is text here */
    static const char *const bad[] = {"\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xed\xa0\x80",
                                      "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\x80", "\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char s[64];
        int n = snprintf(s, sizeof s, "0123456789%sz", bad[i]); /* past the 8-byte ASCII steps */
        assert_int_equal(utf8_valid_prefix(s, (size_t)n), 10);
    }
}

/* utf8_scrub: each byte that starts no valid sequence is one U+FFFD; the rest is kept. */
static void test_utf8_scrub(void **state) {
    (void)state;
    char out[3 * 64];
    const char *s = "a\xc0\xaf" "b\xed\xa0\x80\xc3\xa9\xe2\x82";
    size_t n = utf8_scrub(s, strlen(s), out);
    const char *want = "a\xef\xbf\xbd\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    assert_int_equal(utf8_valid_prefix(out, n), n);
    assert_int_equal(utf8_scrub("\"\\x", 3, out), 3); /* JSON's structure is ASCII: untouched */
    assert_memory_equal(out, "\"\\x", 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_cut_boundaries),
        cmocka_unit_test(test_utf8_snprintf_drops_partial_tail),
        cmocka_unit_test(test_utf8_clip),
        cmocka_unit_test(test_utf8_valid_prefix_rfc3629),
        cmocka_unit_test(test_utf8_scrub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
