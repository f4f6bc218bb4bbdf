/* oprow.c -- the operator row's JSON codec (oprow.h). */
#include "oprow.h"

#include <stdio.h>
#include <string.h>

json_t *fp_op_row_to_json(const fp_op_row *r) {
    double n = (double)r->calls;
    json_t *o = json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I}", "name", r->name, "kind", r->kind,
                          "calls", (json_int_t)r->calls, "cpu_time_total_us", r->cpu_time_total_us,
                          "self_cpu_time_total_us", r->self_cpu_time_total_us, "cpu_time_avg_us", r->calls ? r->cpu_time_total_us / n : 0.0,
                          "cuda_time_total_us", r->cuda_time_total_us, "self_cuda_time_total_us", r->self_cuda_time_total_us,
                          "cuda_time_avg_us", r->calls ? r->cuda_time_total_us / n : 0.0,
                          "cpu_memory_usage_bytes", (json_int_t)r->cpu_memory_usage_bytes,
                          "self_cpu_memory_usage_bytes", (json_int_t)r->self_cpu_memory_usage_bytes,
                          "cuda_memory_usage_bytes", (json_int_t)r->cuda_memory_usage_bytes,
                          "self_cuda_memory_usage_bytes", (json_int_t)r->self_cuda_memory_usage_bytes);
    if (o && r->input_shapes && json_object_set_new(o, "input_shapes", json_string(r->input_shapes))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int fp_op_row_from_json(const json_t *obj, fp_op_row *out, char *err, size_t errlen) {
    json_int_t calls, m[4];
    const char *shapes = NULL;
    json_error_t je;
    memset(out, 0, sizeof *out);
    /* Times may be written as integers (0) or reals: F accepts both. */
    if (json_unpack_ex((json_t *)obj, &je, 0, "{s:s,s:s,s:I,s:F,s:F,s:F,s:F,s:I,s:I,s:I,s:I,s?s}", "name", &out->name, "kind", &out->kind,
                       "calls", &calls, "cpu_time_total_us", &out->cpu_time_total_us, "self_cpu_time_total_us", &out->self_cpu_time_total_us,
                       "cuda_time_total_us", &out->cuda_time_total_us, "self_cuda_time_total_us", &out->self_cuda_time_total_us,
                       "cpu_memory_usage_bytes", &m[0], "self_cpu_memory_usage_bytes", &m[1], "cuda_memory_usage_bytes", &m[2],
                       "self_cuda_memory_usage_bytes", &m[3], "input_shapes", &shapes)) {
        if (err && errlen) snprintf(err, errlen, "operator row: %s", je.text);
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->calls = calls;
    out->cpu_memory_usage_bytes = m[0];
    out->self_cpu_memory_usage_bytes = m[1];
    out->cuda_memory_usage_bytes = m[2];
    out->self_cuda_memory_usage_bytes = m[3];
    out->input_shapes = shapes;
    return 0;
}
