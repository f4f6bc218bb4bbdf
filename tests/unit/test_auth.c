/* test_auth.c -- cmocka cases for server/http/auth.c: the tokens file parser and the bearer check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/auth.h"

/* sha256("hashed-token-0123456789") as hex: printf %s hashed-token-0123456789 | sha256sum */
#define HASHED_HEX "b22fd458dbe2426bebe59cfafe4c46e013df3efd439e4d91cda767ac3052ddd0"

static auth_tokens *parse(const char *text, char *err, size_t errlen)
{
    return auth_parse(text, strlen(text), err, errlen);
}

/* Parsing must fail with "line N: ..." where N is want_line, and the message must hold frag. */
static void expect_bad(const char *text, int want_line, const char *frag)
{
    char err[256] = "", want[32];
    auth_tokens *t = parse(text, err, sizeof err);
    if (t) fail_msg("parsed, expected an error at line %d: %s", want_line, text);
    snprintf(want, sizeof want, "line %d: ", want_line);
    if (strncmp(err, want, strlen(want)) || !strstr(err, frag))
        fail_msg("error '%s', expected '%s...%s'", err, want, frag);
}

static void test_auth_parse_plain_hashed_comments(void **state)
{
    char err[256];
    const char *name = NULL;
    (void)state;
    auth_tokens *t = parse("# ci tokens\n\n   \nci  abcdefghijklmnop0123\r\n\t# indented comment\n"
                           "laptop sha256:" HASHED_HEX "   \n", err, sizeof err);
    assert_non_null(t);
    assert_int_equal(auth_count(t), 2);
    assert_int_equal(auth_plaintext_count(t), 1);
    assert_int_equal(auth_check(t, "Bearer abcdefghijklmnop0123", &name), AUTH_OK);
    assert_string_equal(name, "ci");
    assert_int_equal(auth_check(t, "Bearer hashed-token-0123456789", &name), AUTH_OK);
    assert_string_equal(name, "laptop");
    auth_free(t);
}

static void test_auth_parse_sha256_matches_its_token(void **state)
{
    char err[256], line[200];
    const char *name = NULL;
    (void)state;
    /* The digest of a token written as sha256:HEX (upper case hex too) accepts that token. */
    snprintf(line, sizeof line, "ops sha256:%s\n", "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08");
    auth_tokens *t = parse(line, err, sizeof err); /* sha256("test") */
    assert_non_null(t);
    assert_int_equal(auth_plaintext_count(t), 0);
    /* "test" is too short for a plaintext line, but a hashed one cannot be checked for length. */
    assert_int_equal(auth_check(t, "Bearer test", &name), AUTH_OK);
    assert_string_equal(name, "ops");
    assert_int_equal(auth_check(t, "Bearer tesu", NULL), AUTH_DENIED);
    auth_free(t);
}

static void test_auth_parse_bad_lines_have_line_numbers(void **state)
{
    (void)state;
    expect_bad("a abcdefghijklmnop0123\nonlyname\n", 2, "found 1 field");
    expect_bad("# c\na abcdefghijklmnop0123 extra\n", 2, "found 3 fields");
    expect_bad("\n\n\nbad/name abcdefghijklmnop0123\n", 4, "name");
    expect_bad("a short\n", 1, "16 to 4096");
    expect_bad("a abcdefgh\"jklmnop0123\n", 1, "character outside");
    expect_bad("a abcdefghijklmnop0123\nb sha256:abc\n", 2, "64 hex digits");
    expect_bad("a sha256:" "zz0c7e9b7f8e0ad1b26a3ee6a62a6d0fd2a3e1d55fb4bd0b9d6c3b2b8a7cb9d1\n", 1, "not hex");
    expect_bad("a abcdefghijklmnop0123\na abcdefghijklmnop9999\n", 2, "already used on line 1");
    expect_bad("a abcdefghijklmnop0123\nb abcdefghijklmnop0123\n", 2, "same token as line 1");
}

static void test_auth_parse_nul_in_middle(void **state)
{
    char err[256] = "";
    static const char text[] = "a abcdefghijklmnop0123\nb abc\0defghijklmnop\n";
    (void)state;
    /* expect_bad's strlen stops at the NUL; here the whole buffer is given. */
    assert_null(auth_parse(text, sizeof text - 1, err, sizeof err));
    assert_string_equal(err, "line 2: a NUL byte");
}

static void test_auth_parse_empty_file_is_an_error(void **state)
{
    char err[256] = "";
    (void)state;
    assert_null(parse("# nothing here\n\n", err, sizeof err));
    assert_non_null(strstr(err, "no token"));
    assert_null(parse("", err, sizeof err));
}

static void test_auth_check_verdicts(void **state)
{
    char err[256];
    const char *name = "unset";
    (void)state;
    auth_tokens *t = parse("a abcdefghijklmnop0123\nb ZYXWVUTSRQPONMLK+/==\n", err, sizeof err);
    assert_non_null(t);
    assert_int_equal(auth_check(t, NULL, &name), AUTH_MISSING);
    assert_int_equal(auth_check(t, "", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Basic YTpi", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Bearer", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Bearer ", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Bearerabcdefghijklmnop0123", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Bearer two words", &name), AUTH_MALFORMED);
    assert_int_equal(auth_check(t, "Bearer abc=def", &name), AUTH_MALFORMED); /* '=' only at the end */
    assert_string_equal(name, "unset");
    assert_int_equal(auth_check(t, "Bearer abcdefghijklmnop0124", &name), AUTH_DENIED);
    assert_int_equal(auth_check(t, "Bearer abcdefghijklmnop012", &name), AUTH_DENIED); /* a prefix */
    assert_int_equal(auth_check(t, "Bearer abcdefghijklmnop01234", &name), AUTH_DENIED);
    assert_string_equal(name, "unset");
    /* The scheme is case-insensitive (RFC 7235); blanks around the token are not part of it. */
    assert_int_equal(auth_check(t, "  bearer \t ZYXWVUTSRQPONMLK+/==  ", &name), AUTH_OK);
    assert_string_equal(name, "b");
    assert_int_equal(auth_check(t, "BEARER abcdefghijklmnop0123", &name), AUTH_OK);
    assert_string_equal(name, "a");
    auth_free(t);
}

static void test_auth_equal(void **state)
{
    static const unsigned char a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5}, c[4] = {0x81, 2, 3, 4};
    (void)state;
    assert_true(auth_equal(a, a, 4));
    assert_false(auth_equal(a, b, 4));
    assert_false(auth_equal(a, c, 4));
    assert_true(auth_equal(a, b, 3));
    assert_true(auth_equal(a, b, 0));
}

static void test_auth_load_prefixes_the_path(void **state)
{
    char path[] = "/tmp/fp-test-auth-XXXXXX", err[512] = "";
    (void)state;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "ok abcdefghijklmnop0123\n\nbroken\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_null(auth_load(path, err, sizeof err));
    char want[600];
    snprintf(want, sizeof want, "%s:3: expected", path);
    if (strncmp(err, want, strlen(want))) fail_msg("error '%s', expected it to start '%s'", err, want);
    unlink(path);
    assert_null(auth_load("/nonexistent/tokens", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/tokens: No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_parse_plain_hashed_comments),
        cmocka_unit_test(test_auth_parse_sha256_matches_its_token),
        cmocka_unit_test(test_auth_parse_bad_lines_have_line_numbers),
        cmocka_unit_test(test_auth_parse_nul_in_middle),
        cmocka_unit_test(test_auth_parse_empty_file_is_an_error),
        cmocka_unit_test(test_auth_check_verdicts),
        cmocka_unit_test(test_auth_equal),
        cmocka_unit_test(test_auth_load_prefixes_the_path),
    };
    return cmocka_run_group_tests_name("auth", tests, NULL, NULL);
}
