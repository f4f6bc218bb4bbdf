/* test_buf.c -- cmocka cases for server/lib/buf.h's printf (one growing buf_printf replaced
 * three fixed-size copies that cut or refused long output). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/buf.h"

static void test_buf_printf_appends_and_grows(void **state)
{
    (void)state;
    buf b = {0};
    assert_int_equal(buf_printf(&b, "%s=%d", "calls", 42), 0);
    assert_string_equal(buf_str(&b), "calls=42");
    char big[5000];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(buf_printf(&b, ",%s,", big), 0); /* longer than any old fixed buffer */
    assert_int_equal(b.len, 8 + 1 + 4999 + 1);
    assert_int_equal(strlen(b.p), b.len); /* NUL-terminated at len */
    assert_int_equal(b.p[9], 'k');
    assert_int_equal(buf_puts(&b, "end"), 0);
    assert_string_equal(b.p + b.len - 4, ",end");
    buf_free(&b);
}

static void test_buf_printf_fits_in_spare_room(void **state)
{
    (void)state;
    buf b = {0};
    assert_int_equal(buf_reserve(&b, 100), 0);
    size_t cap = b.cap;
    for (int i = 0; i < 10; i++) assert_int_equal(buf_printf(&b, "%d", i), 0);
    assert_string_equal(buf_str(&b), "0123456789");
    assert_int_equal(b.cap, cap); /* no reallocation when it fits */
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_printf_appends_and_grows),
        cmocka_unit_test(test_buf_printf_fits_in_spare_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
