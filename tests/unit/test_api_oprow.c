/* test_api_oprow.c -- cmocka cases for api/oprow.c (the operator row's JSON codec). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "oprow.h"

static const fp_op_row mm = {"aten::mm", "cpu_op", NULL, 4, 100.0, 60.0, 40.0, 40.0, 1024, 512, 0, 0};

static void test_oprow_to_json_names_and_averages(void **state)
{
    (void)state;
    json_t *o = fp_op_row_to_json(&mm);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "aten::mm");
    assert_int_equal(json_integer_value(json_object_get(o, "calls")), 4);
    assert_true(json_real_value(json_object_get(o, "cpu_time_avg_us")) == 25.0);
    assert_true(json_real_value(json_object_get(o, "cuda_time_avg_us")) == 10.0);
    assert_int_equal(json_integer_value(json_object_get(o, "self_cpu_memory_usage_bytes")), 512);
    assert_null(json_object_get(o, "input_shapes"));
    assert_int_equal(json_object_size(o), 13);
    json_decref(o);
}

static void test_oprow_zero_calls_average_is_zero(void **state)
{
    (void)state;
    fp_op_row r = mm;
    r.calls = 0;
    r.input_shapes = "[[2, 3], []]";
    json_t *o = fp_op_row_to_json(&r);
    assert_true(json_real_value(json_object_get(o, "cpu_time_avg_us")) == 0.0);
    assert_string_equal(json_string_value(json_object_get(o, "input_shapes")), "[[2, 3], []]");
    json_decref(o);
}

static void test_oprow_round_trip(void **state)
{
    (void)state;
    json_t *o = fp_op_row_to_json(&mm);
    fp_op_row back;
    char err[128];
    assert_int_equal(fp_op_row_from_json(o, &back, err, sizeof err), 0);
    assert_string_equal(back.name, mm.name);
    assert_string_equal(back.kind, mm.kind);
    assert_int_equal(back.calls, mm.calls);
    assert_true(back.self_cpu_time_total_us == mm.self_cpu_time_total_us);
    assert_true(back.cuda_time_total_us == mm.cuda_time_total_us);
    assert_int_equal(back.cpu_memory_usage_bytes, 1024);
    assert_null(back.input_shapes);
    json_decref(o);
}

static void test_oprow_from_json_rejects_wrong_types(void **state)
{
    (void)state;
    fp_op_row r;
    char err[128] = "";
    json_t *o = fp_op_row_to_json(&mm);
    json_object_set_new(o, "calls", json_string("4"));
    assert_int_equal(fp_op_row_from_json(o, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "operator row"));
    assert_null(r.name);
    json_object_del(o, "calls");
    assert_int_equal(fp_op_row_from_json(o, &r, err, sizeof err), -1);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oprow_to_json_names_and_averages),
        cmocka_unit_test(test_oprow_zero_calls_average_is_zero),
        cmocka_unit_test(test_oprow_round_trip),
        cmocka_unit_test(test_oprow_from_json_rejects_wrong_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
