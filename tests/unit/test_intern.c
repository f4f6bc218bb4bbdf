/* test_intern.c: lib/intern.c, the string -> dense id table (arena copies, 32-bit slots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/intern.h"

/* Ids are dense and stable across the slot array's growth; every copy reads back. */
static void test_intern_ids_dense_and_stable(void **state) {
    (void)state;
    intern *t = intern_new();
    assert_non_null(t);
    char k[64];
    for (int i = 0; i < 100000; i++) {
        snprintf(k, sizeof k, "void kernel<%d>(Params<%d>)", i, i * 7);
        assert_int_equal(intern_id(t, k, strlen(k)), i);
    }
    assert_int_equal(intern_count(t), 100000);
    for (int i = 0; i < 100000; i += 997) {
        snprintf(k, sizeof k, "void kernel<%d>(Params<%d>)", i, i * 7);
        assert_int_equal(intern_id(t, k, strlen(k)), i);
        assert_int_equal(intern_lookup(t, k, strlen(k)), i);
        assert_string_equal(intern_str(t, i), k);
    }
    assert_int_equal(intern_lookup(t, "absent", 6), -1);
    assert_null(intern_str(t, 100000));
    assert_null(intern_str(t, -1));
    intern_free(t);
}

/* Keys longer than an arena block, empty keys and binary keys (NUL bytes inside, read back as
 * longs the way suspects.c reads its keys: aligned) all round-trip; intern_bytes adds up. */
static void test_intern_long_binary_and_aligned(void **state) {
    (void)state;
    intern *t = intern_new();
    size_t big = 200000;
    char *s = malloc(big);
    assert_non_null(s);
    memset(s, 'x', big);
    assert_int_equal(intern_id(t, "", 0), 0);
    assert_int_equal(intern_id(t, s, big), 1);
    long key[3] = {2, 0, 77};
    assert_int_equal(intern_id(t, (const char *)key, sizeof key), 2);
    s[big - 1] = 'y';
    assert_int_equal(intern_id(t, s, big), 3); /* differs in the last byte only */
    assert_int_equal(intern_id(t, "ab", 2), 4); /* after a key of its own block */
    assert_int_equal(intern_id(t, (const char *)key, sizeof key), 2);
    for (long i = 0; i < 5; i++) assert_int_equal((uintptr_t)intern_str(t, i) % _Alignof(max_align_t), 0);
    assert_memory_equal(intern_str(t, 2), key, sizeof key);
    assert_int_equal(((const long *)intern_str(t, 2))[2], 77);
    assert_int_equal(strlen(intern_str(t, 1)), big);
    assert_int_equal(intern_str(t, 3)[big - 1], 'y');
    assert_string_equal(intern_str(t, 0), "");
    assert_int_equal(intern_bytes(t), 0 + big + sizeof key + big + 2);
    free(s);
    intern_free(t);
    intern_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_ids_dense_and_stable),
        cmocka_unit_test(test_intern_long_binary_and_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
