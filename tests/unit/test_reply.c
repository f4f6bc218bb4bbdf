/* test_reply.c -- cmocka cases for server/http/reply.c: the one error table covers every
 * ERR_* of lib/err.h with a distinct 4xx/5xx status and a code, http_error writes the
 * {"error":{"code","message"}} body from it and returns the error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "http/reply.h"
#include "lib/err.h"

static void test_reply_every_err_has_a_row(void **state) {
    (void)state;
    for (int e = ERR_LAST; e < 0; e++) {
        int status = 0;
        const char *code = NULL;
        if (http_err_row(e, &status, &code)) fail_msg("ERR %d has no row in reply_errors", e);
        assert_true(status >= 400 && status < 600);
        assert_non_null(code);
        assert_true(strlen(code) > 0);
    }
    int status;
    const char *code;
    assert_int_equal(http_err_row(ERR_LAST - 1, &status, &code), -1);
}

static void test_reply_error_body_and_return(void **state) {
    (void)state;
    http_reply out;
    memset(&out, 0, sizeof out);
    assert_int_equal(http_error(&out, ERR_PARAM, "limit must be %d", 5), ERR_PARAM);
    assert_int_equal(out.status, 400);
    json_t *e = json_object_get(out.json, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "invalid_parameter");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "limit must be 5");
    /* a second error replaces the first body */
    http_error(&out, ERR_BUSY, "busy");
    assert_int_equal(out.status, 503);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out.json, "error"), "code")), "too_many_uploads");
    /* "no error" as an error is a bug, answered as one */
    assert_int_equal(http_error(&out, ERR_OK, "?"), ERR_INTERNAL);
    assert_int_equal(out.status, 500);
    json_decref(out.json);
}

/* A message quoting bytes that are not UTF-8 (?limit=%ff) still makes a body: they are shown
 * as U+FFFD; one cut at its buffer's end inside a character loses that character (issue 43:
 * json_pack refused both, and the reply went out with no body). */
static void test_reply_error_quotes_bytes_not_utf8(void **state) {
    (void)state;
    http_reply out;
    memset(&out, 0, sizeof out);
    http_error(&out, ERR_PARAM, "limit '%s' is not a number", "\xff\xc0\xaf");
    assert_non_null(out.json);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out.json, "error"), "message")),
                        "limit '\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd' is not a number");
    char big[2000];
    memset(big, 'a', sizeof big);
    for (size_t i = 1; i + 1 < sizeof big; i += 2) memcpy(big + i, "\xc3\xa9", 2); /* "a" then "é"s */
    big[sizeof big - 1] = '\0';
    http_error(&out, ERR_NOTFOUND, "%s", big);
    assert_non_null(out.json);
    const char *m = json_string_value(json_object_get(json_object_get(out.json, "error"), "message"));
    assert_non_null(m);
    assert_true(strlen(m) >= 500 && strlen(m) <= 511);
    json_decref(out.json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_every_err_has_a_row),
        cmocka_unit_test(test_reply_error_body_and_return),
        cmocka_unit_test(test_reply_error_quotes_bytes_not_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
