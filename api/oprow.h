/* oprow.h -- one row of the operator table, the shape of torch.profiler's key_averages().
 *
 * The one definition of an operator row on the wire (docs/contract.md "ROW"): the server
 * writes it (GET /operators, compare, regressions) and clients read it back (the
 * collector's firstpass-upload, tests). Field names are PyTorch's column names with the
 * unit as suffix: *_us microseconds, *_bytes bytes. Uses Jansson only. */
#ifndef FP_API_OPROW_H
#define FP_API_OPROW_H

#include <jansson.h>

typedef struct fp_op_row {
    const char *name;          /* "aten::mm"; borrowed */
    const char *kind;          /* cpu_op, user_annotation, cuda_runtime, kernel, ...; borrowed */
    const char *input_shapes;  /* str(input_shapes) like torch, or NULL when not grouped by shape */
    long long calls;
    double cpu_time_total_us, self_cpu_time_total_us;
    double cuda_time_total_us, self_cuda_time_total_us;
    long long cpu_memory_usage_bytes, self_cpu_memory_usage_bytes;
    long long cuda_memory_usage_bytes, self_cuda_memory_usage_bytes;
} fp_op_row;

/* New reference: the row as JSON, with the derived cpu_time_avg_us and cuda_time_avg_us
 * (total / calls, 0 when calls is 0) and input_shapes only when it is set. NULL on OOM. */
json_t *fp_op_row_to_json(const fp_op_row *r);

/* Reads a row (borrowed: strings point into obj, valid while obj lives). Derived averages
 * are not read. 0, or -1 with a one-line message in err when a field is missing or of the
 * wrong type. */
int fp_op_row_from_json(const json_t *obj, fp_op_row *out, char *err, size_t errlen);

#endif
