/* test_pool.c -- cmocka cases for collector/pool.c: bounded lending, refusals, foreign buffers,
 * and which buffers are still out (how inject.c sees a second CUPTI client's takeover). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "pool.h"

static void test_pool_lends_up_to_max_and_counts_refusals(void **state)
{
    fp_pool p;
    void *a, *b, *c;
    (void)state;
    assert_int_equal(fp_pool_init(&p, 1000, 8, 2), 0);
    a = fp_pool_get(&p);
    b = fp_pool_get(&p);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_int_equal((uintptr_t)a % 8, 0);
    assert_null(fp_pool_get(&p));
    assert_null(fp_pool_get(&p));
    assert_int_equal(fp_pool_take_refused(&p), 2);
    assert_int_equal(fp_pool_take_refused(&p), 0); /* reset on read */
    assert_int_equal(fp_pool_put(&p, a), 0);
    c = fp_pool_get(&p); /* reused, not a third allocation */
    assert_ptr_equal(c, a);
    assert_int_equal(p.n, 2);
    assert_int_equal(fp_pool_put(&p, b), 0);
    assert_int_equal(fp_pool_put(&p, c), 0);
    fp_pool_destroy(&p);
}

static void test_pool_foreign_and_double_put_are_refused(void **state)
{
    fp_pool p;
    void *a, *other = malloc(64);
    (void)state;
    assert_int_equal(fp_pool_init(&p, 64, 8, 4), 0);
    a = fp_pool_get(&p);
    assert_int_equal(fp_pool_put(&p, other), -1); /* someone else's: left alone */
    assert_int_equal(fp_pool_put(&p, NULL), -1);
    assert_int_equal(fp_pool_put(&p, a), 0);
    assert_int_equal(fp_pool_put(&p, a), -1);     /* not lent any more */
    free(other);
    fp_pool_destroy(&p);
}

/* The exit check: buffers lent before a forced flush and still out after it went to another
 * client; a buffer lent during or after the flush (a thread still running) does not count. */
static void test_pool_out_before_counts_only_older_grants(void **state)
{
    fp_pool p;
    void *a, *b, *late;
    uint64_t mark;
    (void)state;
    assert_int_equal(fp_pool_init(&p, 64, 8, 8), 0);
    a = fp_pool_get(&p);
    b = fp_pool_get(&p);
    assert_int_equal(fp_pool_put(&p, a), 0);
    mark = fp_pool_seq(&p);
    assert_int_equal(mark, 2);
    late = fp_pool_get(&p);
    assert_int_equal(fp_pool_out_before(&p, mark), 1); /* b */
    assert_int_equal(fp_pool_put(&p, b), 0);
    assert_int_equal(fp_pool_out_before(&p, mark), 0);
    assert_int_equal(fp_pool_out_before(&p, fp_pool_seq(&p)), 1); /* late */
    assert_int_equal(fp_pool_put(&p, late), 0);
    fp_pool_destroy(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_lends_up_to_max_and_counts_refusals),
        cmocka_unit_test(test_pool_foreign_and_double_put_are_refused),
        cmocka_unit_test(test_pool_out_before_counts_only_older_grants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
