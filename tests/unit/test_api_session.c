/* test_api_session.c -- cmocka cases for api/session.c (labels and the "firstpass" object). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "session.h"

static void test_session_labels_parse_two(void **state)
{
    fp_label *l = NULL;
    size_t n = 99;
    (void)state;
    assert_int_equal(fp_labels_parse("model:llama-8b, gpu : H100", &l, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].key, "model");
    assert_string_equal(l[0].value, "llama-8b");
    assert_string_equal(l[1].key, "gpu");
    assert_string_equal(l[1].value, "H100");
    fp_labels_free(l, n);
}

static void test_session_labels_value_keeps_later_colons(void **state)
{
    fp_label l;
    (void)state;
    assert_int_equal(fp_label_parse_one("url:http://x:8080", &l), 0);
    assert_string_equal(l.key, "url");
    assert_string_equal(l.value, "http://x:8080");
    free(l.key);
    free(l.value);
    assert_int_equal(fp_label_parse_one("empty:", &l), 0);
    assert_string_equal(l.value, "");
    free(l.key);
    free(l.value);
}

static void test_session_labels_empty_spec_is_zero_labels(void **state)
{
    fp_label *l = (fp_label *)1;
    size_t n = 5;
    (void)state;
    assert_int_equal(fp_labels_parse("", &l, &n), 0);
    assert_null(l);
    assert_int_equal(n, 0);
    assert_int_equal(fp_labels_parse(NULL, &l, &n), 0);
    assert_null(l);
}

static void test_session_labels_malformed(void **state)
{
    static const char *bad[] = {"nocolon", ":v", " :v", "a:b,", "a:b,,c:d", "a:b,c", ","};
    fp_label *l;
    fp_label one;
    size_t n, i;
    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        l = (fp_label *)1;
        n = 7;
        assert_int_equal(fp_labels_parse(bad[i], &l, &n), -1);
        assert_null(l);
        assert_int_equal(n, 0);
    }
    assert_int_equal(fp_label_parse_one("k", &one), -1);
    assert_null(one.key);
    assert_int_equal(fp_label_parse_one(NULL, &one), -1);
}

static void test_session_labels_to_json(void **state)
{
    fp_label l[] = {{"a", "1"}, {"b", "x y"}, {"a", "2"}};
    json_t *j;
    char *s;
    (void)state;
    j = fp_labels_to_json(l, 3);
    assert_non_null(j);
    s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"a\":\"2\",\"b\":\"x y\"}");
    free(s);
    json_decref(j);
}

static void fill_meta(fp_session_meta *m)
{
    memset(m, 0, sizeof *m);
    m->name = strdup("infer");
    assert_int_equal(fp_labels_parse("model:llama,batch:8", &m->labels, &m->nlabels), 0);
    m->host = strdup("gpu-07");
    m->pid = 4242;
    m->command = strdup("python infer.py --steps 20");
    m->cupti_version = 130001;
    m->driver_version = 13000;
    m->runtime_version = 13000;
    m->start_ns = 1764700000000000000LL;
    m->end_ns = 1764700001500000000LL;
    m->dropped_records = 3;
    m->events_truncated = 1;
}

static void test_session_meta_to_json_exact(void **state)
{
    fp_session_meta m;
    json_t *j;
    char *s;
    (void)state;
    fill_meta(&m);
    j = fp_session_meta_to_json(&m);
    assert_non_null(j);
    s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s,
        "{\"command\":\"python infer.py --steps 20\",\"cupti_version\":130001,"
        "\"driver_version\":13000,\"dropped_records\":3,\"end_ns\":1764700001500000000,"
        "\"events_truncated\":true,\"format\":\"firstpass-session\",\"host\":\"gpu-07\","
        "\"labels\":{\"batch\":\"8\",\"model\":\"llama\"},\"name\":\"infer\",\"pid\":4242,"
        "\"runtime_version\":13000,\"start_ns\":1764700000000000000,\"version\":1}");
    free(s);
    json_decref(j);
    fp_session_meta_free(&m);
    assert_null(m.name);
    fp_session_meta_free(&m); /* zeroed: a second free is harmless */
    fp_session_meta_free(NULL);
}

static void test_session_meta_null_strings_are_json_null(void **state)
{
    fp_session_meta m;
    json_t *j;
    (void)state;
    memset(&m, 0, sizeof m);
    j = fp_session_meta_to_json(&m);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "name")));
    assert_true(json_is_null(json_object_get(j, "host")));
    assert_true(json_is_false(json_object_get(j, "events_truncated")));
    assert_int_equal(json_object_size(json_object_get(j, "labels")), 0);
    json_decref(j);
}

static void test_session_meta_round_trip(void **state)
{
    fp_session_meta a, b;
    json_t *j;
    char err[128];
    (void)state;
    fill_meta(&a);
    j = fp_session_meta_to_json(&a);
    json_object_set_new(j, "aggregates", json_object()); /* unknown here: ignored */
    json_object_set_new(j, "future_key", json_string("x"));
    assert_int_equal(fp_session_meta_from_json(j, &b, err, sizeof err), 0);
    assert_string_equal(b.name, "infer");
    assert_string_equal(b.host, "gpu-07");
    assert_string_equal(b.command, "python infer.py --steps 20");
    assert_int_equal(b.pid, 4242);
    assert_int_equal(b.cupti_version, 130001);
    assert_int_equal(b.driver_version, 13000);
    assert_int_equal(b.runtime_version, 13000);
    assert_true(b.start_ns == 1764700000000000000LL);
    assert_true(b.end_ns == 1764700001500000000LL);
    assert_int_equal(b.dropped_records, 3);
    assert_int_equal(b.events_truncated, 1);
    assert_int_equal(b.nlabels, 2);
    json_decref(j);
    fp_session_meta_free(&a);
    fp_session_meta_free(&b);
}

static void test_session_meta_from_json_minimal(void **state)
{
    fp_session_meta m;
    json_t *j = json_pack("{s:s, s:n}", "name", "x", "host");
    (void)state;
    assert_int_equal(fp_session_meta_from_json(j, &m, NULL, 0), 0);
    assert_string_equal(m.name, "x");
    assert_null(m.host);
    assert_int_equal(m.pid, 0);
    assert_int_equal(m.nlabels, 0);
    fp_session_meta_free(&m);
    json_decref(j);
}

static void expect_bad(const char *text, const char *msg_part)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    fp_session_meta m;
    char err[160];
    assert_non_null(j);
    assert_int_equal(fp_session_meta_from_json(j, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, msg_part));
    assert_null(m.name);
    assert_null(m.labels);
    assert_int_equal(m.nlabels, 0);
    json_decref(j);
}

static void test_session_meta_from_json_wrong_types(void **state)
{
    (void)state;
    expect_bad("{\"name\":5}", "firstpass.name");
    expect_bad("{\"name\":\"a\",\"pid\":\"12\"}", "firstpass.pid");
    expect_bad("{\"pid\":1.5}", "firstpass.pid");
    expect_bad("{\"name\":\"a\",\"labels\":[]}", "firstpass.labels");
    expect_bad("{\"name\":\"a\",\"labels\":{\"k\":\"v\",\"n\":1}}", "firstpass.labels.n");
    expect_bad("{\"events_truncated\":1}", "events_truncated");
    expect_bad("{\"dropped_records\":-1}", "dropped_records");
    expect_bad("{\"format\":\"kineto\"}", "format");
    expect_bad("{\"format\":3}", "format");
    expect_bad("[1]", "object");
}

/* tests/fuzz/regress/session/labels_to_json_invalid_utf8.txt: a label that is not UTF-8 was
 * accepted by the parser and then lost by fp_labels_to_json (NULL). */
static void test_session_labels_not_utf8_refused(void **state)
{
    fp_label *l = NULL;
    size_t n = 9;
    (void)state;
    assert_int_equal(fp_labels_parse("\xc4:x", &l, &n), -1);
    assert_null(l);
    assert_int_equal(n, 0);
    assert_int_equal(fp_labels_parse("k:\xff\xfe", &l, &n), -1);
    assert_int_equal(fp_labels_parse("gpu:H100,model:caf\xc3\xa9", &l, &n), 0); /* "café" is fine */
    json_t *j = fp_labels_to_json(l, n);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "caf\xc3\xa9");
    json_decref(j);
    fp_labels_free(l, n);
}

static void test_session_meta_empty_label_key_refused(void **state)
{
    fp_session_meta m;
    char err[128] = "";
    (void)state;
    json_t *o = json_pack("{s:s,s:i,s:{s:s}}", "format", FP_SESSION_FORMAT, "version", 1, "labels", "", "x");
    assert_int_equal(fp_session_meta_from_json(o, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "must not be empty"));
    assert_null(m.labels);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_labels_parse_two),
        cmocka_unit_test(test_session_labels_value_keeps_later_colons),
        cmocka_unit_test(test_session_labels_empty_spec_is_zero_labels),
        cmocka_unit_test(test_session_labels_malformed),
        cmocka_unit_test(test_session_labels_to_json),
        cmocka_unit_test(test_session_meta_to_json_exact),
        cmocka_unit_test(test_session_meta_null_strings_are_json_null),
        cmocka_unit_test(test_session_meta_round_trip),
        cmocka_unit_test(test_session_meta_from_json_minimal),
        cmocka_unit_test(test_session_meta_from_json_wrong_types),
        cmocka_unit_test(test_session_labels_not_utf8_refused),
        cmocka_unit_test(test_session_meta_empty_label_key_refused),
    };
    return cmocka_run_group_tests_name("api_session", tests, NULL, NULL);
}
