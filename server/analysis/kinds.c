/* kinds.c: the kind of work of a GPU activity from its name and its op's (kinds.h). The word
 * lists are tests/triage/oracle.py's (KINDS, *_WORDS, DM_OP_NAMES): keep them equal. */
#include "analysis/kinds.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

static const char *const kind_names[WK_N] = {"math", "data_movement", "elementwise", "communication", "other"};

static const char *const layout_words[] = {"nchwtonhwc", "nhwctonchw", "transpose", "tensortransform", "convert", NULL};
static const char *const math_kernel_words[] = {"gemm", "gemv", "xmma", "cutlass", "cublas", "nvjet", "s16816", "h16816", "s1688", "h1688",
                                                "s884", "h884", "implicit_convolve", "precomputed_convolve", "implicit_gemm", "winograd",
                                                "dgrad", "wgrad", "fprop", "flash", "fmha", "attention", NULL};
static const char *const eltwise_kernel_words[] = {"elementwise_kernel", "vectorized_elementwise", "unrolled_elementwise", "reduce_kernel",
                                                   "layer_norm", "layernorm", "batch_norm", "bn_fw", "bn_bw", "group_norm",
                                                   "rowwisemoments", "rms_norm", "softmax", "triton_poi_", "triton_red_", "triton_per_",
                                                   "multi_tensor_apply", "pooling", "pool_", "normalize", NULL};
static const char *const dm_op_names[] = {"to", "_to_copy", "copy_", "contiguous", "clone", "type_as", "cat", "stack", "hstack", "vstack",
                                          "concat", "pad", "constant_pad_nd", "reflection_pad2d", "permute", "transpose", "roll", "flip",
                                          "repeat", "repeat_interleave", "narrow_copy", "expand_copy", "_copy_from",
                                          "_copy_from_and_resize", "pin_memory", NULL};
static const char *const dm_op_words[] = {"copy", "_pad", NULL};
static const char *const addressing_words[] = {"gather", "scatter", "index", "embedding", "take", "masked_select", "put_", "lookup", NULL};
static const char *const gemm_op_words[] = {"mm", "matmul", "linear", "conv", "einsum", "attention", "flash", "attn", "fmha", "varlen_fwd",
                                            NULL};
static const char *const eltwise_op_words[] = {
    "add", "sub", "mul", "div", "neg", "exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "abs", "sign", "relu", "gelu", "silu",
    "sigmoid", "tanh", "hardswish", "elu", "softplus", "mish", "clamp", "where", "fill", "zero", "norm", "softmax", "sum", "mean", "var",
    "std", "max", "min", "argm", "prod", "dropout", "masked_fill", "lerp", "maximum", "minimum", "foreach", "adam", "sgd", "lamb", "cumsum",
    "logsumexp", "threshold", "erf", "round", "floor", "ceil", "bias", "act_and_mul", "rms", "remainder", "fmod", "logical", "bitwise",
    "isnan", "isinf", "nan_to_num", "square", "mse", "cross_entropy", "nll_loss", "slice", "select", "pool", NULL};
static const char *const eltwise_op_exact[] = {"eq", "ne", "lt", "gt", "le", "ge", "sin", "cos", "abs", "exp", "log", NULL};
static const char *const not_eltwise[] = {"nonzero", "unique", "sort", "topk", "multinomial", NULL};
static const char *const copy_ops[] = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone", "aten::type_as",
                                       "aten::_copy_from", "aten::_copy_from_and_resize", NULL};
static const char *const comm_prefix[] = {"nccl:", "gloo:", "mpi:", "c10d::", NULL};

const char *wk_name(int k) { return k >= 0 && k < WK_N ? kind_names[k] : "other"; }

/* Why a bounded copy: names are matched lower case, and a name past this length is a long
 * template whose words of interest come early (kernel names) or an op name (short). */
#define LOWER_MAX 512
static void lower(const char *s, char *out) {
    size_t i = 0;
    for (; s[i] && i < LOWER_MAX - 1; i++) out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = '\0';
}

static int any_in(const char *s, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (strstr(s, words[i])) return 1;
    return 0;
}

static int any_eq(const char *s, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (!strcmp(s, words[i])) return 1;
    return 0;
}

int wk_layout_kernel(const char *kernel) {
    char l[LOWER_MAX];
    lower(kernel, l);
    return any_in(l, layout_words);
}

int wk_elementwise_kernel(const char *kernel) {
    char l[LOWER_MAX];
    lower(kernel, l);
    return any_in(l, eltwise_kernel_words);
}

/* An op's name without its namespace, lower case: "aten::_to_copy" -> "_to_copy". */
static void base_name(const char *op, char *out) {
    const char *p = op, *q;
    while ((q = strstr(p, "::"))) p = q + 2;
    lower(p, out);
}

int wk_addressing_op(const char *op) {
    char b[LOWER_MAX];
    base_name(op, b);
    return !strstr(b, "rotary") && any_in(b, addressing_words);
}

static int comm_range(const char *op) {
    for (int i = 0; comm_prefix[i]; i++)
        if (!strncmp(op, comm_prefix[i], strlen(comm_prefix[i]))) return 1;
    return strstr(op, "record_param_comms") != NULL;
}

int wk_op_kind(const char *op) {
    char b[LOWER_MAX], l[LOWER_MAX];
    base_name(op, b);
    lower(op, l);
    /* rotary embeddings are arithmetic on the activations, not a table lookup */
    if (strstr(b, "rotary")) return WK_ELEMENTWISE;
    if (any_eq(op, copy_ops) || any_eq(b, dm_op_names) || any_in(b, dm_op_words) || wk_addressing_op(op)) return WK_DATA_MOVEMENT;
    if (any_in(l, gemm_op_words) && !comm_range(op)) return WK_MATH;
    /* compaction and selection: their time is neither a fusable pass nor math */
    if (any_in(b, not_eltwise)) return -1;
    size_t n = strlen(b), s = 0;
    while (s < n && b[s] == '_') s++;
    while (n > s && b[n - 1] == '_') n--;
    char core[LOWER_MAX];
    memcpy(core, b + s, n - s);
    core[n - s] = '\0';
    if (any_eq(core, eltwise_op_exact) || any_in(b, eltwise_op_words)) return WK_ELEMENTWISE;
    return -1;
}

int wk_kernel_kind(const char *kernel) {
    char l[LOWER_MAX];
    lower(kernel, l);
    if (strstr(l, "nccl") || strstr(l, "rccl") || strstr(l, "gloo")) return WK_COMMUNICATION;
    /* a layout conversion is data movement even where a convolution launched it */
    if (any_in(l, layout_words)) return WK_DATA_MOVEMENT;
    if (any_in(l, math_kernel_words)) return WK_MATH;
    return -1;
}

int wk_activity(int what, const char *name, const char *inner_op) {
    if (what != WA_KERNEL) return WK_DATA_MOVEMENT;
    int k = wk_kernel_kind(name);
    if (k >= 0) return k;
    if (inner_op && (k = wk_op_kind(inner_op)) >= 0) return k;
    return wk_elementwise_kernel(name) ? WK_ELEMENTWISE : WK_OTHER;
}
