/* test_ingest.c -- cmocka cases for server/ingest/parse.c: the event text it hands on.
 *
 * ingest.c cuts each event's bytes out of the body (it no longer re-serialises them with
 * yajl_gen), so these check the cut where it can go wrong: an event split across reads at
 * every byte, whitespace inside and outside strings, escapes kept as written, and the
 * 4 MiB cap however the body is fed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "ingest/minify.h"
#include "ingest/parse.h"

typedef struct seen {
    int n;
    char json[4][512];
    size_t len[4];
    double ts[4];
} seen;

static int on_event(void *ctx, const ingest_event *e) {
    seen *s = ctx;
    if (s->n < 4) {
        /* the text as the loader stores it: whitespace outside strings dropped */
        char *out = malloc(e->json_len + 1);
        assert_non_null(out);
        size_t n = e->json_ws ? ingest_minify(e->json, e->json_len, out) : e->json_len;
        if (!e->json_ws) memcpy(out, e->json, n);
        out[n] = '\0';
        snprintf(s->json[s->n], sizeof s->json[0], "%s", out);
        s->len[s->n] = n;
        free(out);
        s->ts[s->n] = e->ts;
    }
    s->n++;
    return 0;
}

/* Feeds body in pieces of `piece` bytes; the ingest_feed/ingest_finish result. */
static int feed(const char *body, size_t len, size_t piece, seen *s) {
    memset(s, 0, sizeof *s);
    ingest_sink sink = {s, on_event, NULL, NULL};
    ingest *in = ingest_new(&sink, 0, 0);
    assert_non_null(in);
    int rc = 0;
    for (size_t off = 0; off < len && !rc; off += piece) rc = ingest_feed(in, body + off, len - off < piece ? len - off : piece);
    if (!rc) rc = ingest_finish(in);
    ingest_free(in);
    return rc;
}

static const char pretty[] =
    "{\n  \"traceEvents\": [\n"
    "    {\n      \"ph\": \"X\", \"cat\": \"cpu_op\",\n      \"name\": \"aten::add \\\"quoted\\\" \\\\ a\\/b \\u00e9\",\n"
    "      \"pid\": 1, \"tid\": 2, \"ts\": 10.500, \"dur\": 2e1,\n"
    "      \"args\": { \"Input Dims\": [ [2, 3], [] ], \"Sequence number\" : 7 }\n    },\n"
    "\t{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":11,\"args\":{\"Bytes\":-4}}\n"
    "  ]\n}\n";

static const char want0[] =
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add \\\"quoted\\\" \\\\ a\\/b \\u00e9\","
    "\"pid\":1,\"tid\":2,\"ts\":10.500,\"dur\":2e1,\"args\":{\"Input Dims\":[[2,3],[]],\"Sequence number\":7}}";
static const char want1[] = "{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":11,\"args\":{\"Bytes\":-4}}";

static void test_ingest_event_text_is_the_body_minus_whitespace(void **state)
{
    (void)state;
    seen s;
    assert_int_equal(feed(pretty, sizeof pretty - 1, sizeof pretty, &s), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.json[0], want0);
    assert_int_equal(s.len[0], strlen(want0));
    assert_string_equal(s.json[1], want1);
    assert_true(s.ts[0] == 10.5);
}

/* Every split point, and one byte at a time: the same text (the lexer holds a token that
 * straddles two reads; the cut must not lose or repeat its bytes). */
static void test_ingest_event_text_survives_every_split(void **state)
{
    (void)state;
    size_t len = sizeof pretty - 1;
    for (size_t piece = 1; piece <= len; piece++) {
        seen s;
        assert_int_equal(feed(pretty, len, piece, &s), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.json[0], want0);
        assert_string_equal(s.json[1], want1);
    }
}

/* A legacy bare array of events is cut the same way. */
static void test_ingest_bare_array_events(void **state)
{
    (void)state;
    const char body[] = "[ {\"name\": \"a b\", \"ph\": \"X\", \"ts\": 1, \"dur\": 2} , {\"name\":\"c\"} ]";
    seen s;
    assert_int_equal(feed(body, sizeof body - 1, 3, &s), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.json[0], "{\"name\":\"a b\",\"ph\":\"X\",\"ts\":1,\"dur\":2}");
    assert_string_equal(s.json[1], "{\"name\":\"c\"}");
}

/* One event of "args":{"pad":"xxx..."} with the given string length and indentation. */
static char *big_event(size_t pad, size_t spaces, size_t *len) {
    char *b = malloc(pad + spaces + 128);
    assert_non_null(b);
    size_t n = (size_t)sprintf(b, "{\"traceEvents\":[{\"name\":\"x\",");
    memset(b + n, ' ', spaces);
    n += spaces;
    n += (size_t)sprintf(b + n, "\"args\":{\"pad\":\"");
    memset(b + n, 'x', pad);
    n += pad;
    n += (size_t)sprintf(b + n, "\"}}]}");
    *len = n;
    return b;
}

/* Over 4 MiB of event text is 413 whether the body comes in one read or many; 5 MiB of
 * indentation around a small event is not event text and passes. */
static void test_ingest_event_cap_counts_text_not_whitespace(void **state)
{
    (void)state;
    size_t len;
    seen s;
    char *b = big_event(INGEST_MAX_EVENT_BYTES, 0, &len);
    assert_int_equal(feed(b, len, len, &s), ERR_TOOBIG);
    assert_int_equal(feed(b, len, 65536, &s), ERR_TOOBIG);
    free(b);
    b = big_event(100, 5u << 20, &len);
    assert_int_equal(feed(b, len, len, &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.len[0], strlen("{\"name\":\"x\",\"args\":{\"pad\":\"\"}}") + 100);
    free(b);
}

/* ts and dur come out as the double strtod reads from their text, bit for bit, for the
 * decimals that take the fast path and for those that do not (exponents, 16+ digits). */
static void test_ingest_numbers_read_like_strtod(void **state)
{
    (void)state;
    static const char *texts[] = {"0", "-0", "1", "10.5", "0.1", "0.3", "1234567890.123", "1701000000123.456",
                                  "999999999999999", "9999999999999999", "12345678901234567890", "0.000001",
                                  "1e3", "2.5E-3", "-7.25", "123456.000000000", "0.1234567890123456789", "3.14159",
                                  "9007199254740992", "9007199254740993", "900719925474.0993", "5092396094501.652",
                                  "-9007199254.740992", "0.0000000000000001"};
    unsigned seed = 12345;
    for (int k = 0; k < 2000; k++) {
        char t[64];
        if (k < (int)(sizeof texts / sizeof texts[0])) {
            snprintf(t, sizeof t, "%s", texts[k]);
        } else { /* random digits with a point somewhere: Kineto's epoch-us ts with 3 decimals and more */
            seed = seed * 1103515245u + 12345u;
            int digits = 1 + (int)(seed >> 8) % 19, point = (int)(seed >> 16) % (digits + 1);
            size_t n = 0;
            if (seed & 1) t[n++] = '-';
            for (int d = 0; d < digits; d++) {
                if (d == point && d > 0) t[n++] = '.';
                seed = seed * 1103515245u + 12345u;
                t[n++] = (char)('0' + (d == 0 ? 1 + (seed >> 8) % 9 : (seed >> 8) % 10));
            }
            t[n] = 0;
        }
        char body[256];
        int len = snprintf(body, sizeof body, "[{\"ph\":\"X\",\"ts\":%s,\"dur\":1}]", t);
        seen s;
        assert_int_equal(feed(body, (size_t)len, (size_t)len, &s), 0);
        double want = strtod(t, NULL);
        if (memcmp(&s.ts[0], &want, sizeof want)) fail_msg("ts %s: got %.17g, strtod %.17g", t, s.ts[0], want);
    }
}

/* ingest_minify against a byte-at-a-time reference, on random texts of quotes, backslashes,
 * blanks and letters up to 300 bytes: quotes and escapes land at every offset of the SSE2
 * blocks (64 bytes), across their edges, in the byte loop's tail and its 8-byte steps, and
 * runs of backslashes of every length carry from one block into the next. A backslash
 * outside a string, which JSON forbids (minify.h), is made a letter. */
static size_t minify_ref(const char *s, size_t n, char *o) {
    size_t k = 0;
    int str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (str) {
            o[k++] = (char)c;
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') str = 0;
        } else if (c > ' ') {
            o[k++] = (char)c;
            str = c == '"';
        }
    }
    return k;
}
static void random_json_text(char *in, size_t n, unsigned *seed) {
    static const char alphabet[] = "\"\\\\\\ \n\tab{}:,\x80";
    int str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        char c = alphabet[(*seed >> 8) % (sizeof alphabet - 1)];
        if (c == '\\' && !str) c = 'a';
        in[i] = c;
        if (esc) esc = 0;
        else if (str && c == '\\') esc = 1;
        else if (c == '"') str = !str;
    }
}
static void test_minify_matches_reference(void **state)
{
    (void)state;
    unsigned seed = 7;
    char in[300], want[300], got[300], bytes[300];
    for (int k = 0; k < 40000; k++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % (k < 20000 ? 64 : sizeof in);
        random_json_text(in, n, &seed);
        size_t wn = minify_ref(in, n, want), gn = ingest_minify(in, n, got);
        assert_int_equal(gn, wn);
        assert_memory_equal(got, want, wn);
        ingest_minify_set_simd(0);
        assert_int_equal(ingest_minify(in, n, bytes), wn);
        ingest_minify_set_simd(1);
        assert_memory_equal(bytes, want, wn);
        assert_int_equal(ingest_minify(got, wn, in), wn); /* compact text stays as it is */
        assert_memory_equal(in, want, wn);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingest_event_text_is_the_body_minus_whitespace),
        cmocka_unit_test(test_ingest_event_text_survives_every_split),
        cmocka_unit_test(test_ingest_bare_array_events),
        cmocka_unit_test(test_ingest_event_cap_counts_text_not_whitespace),
        cmocka_unit_test(test_ingest_numbers_read_like_strtod),
        cmocka_unit_test(test_minify_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
