/* flops.h: FLOPs and minimum bytes moved of one operator call, from what a trace records of
 * it, and the precision class of a kernel from its name.
 *
 * A pure module (no SQL, no JSON, no allocation). Its inputs are the strings Kineto writes
 * in a cpu_op's args, as the parser keeps them (Python's str() of a list):
 *   dims      "Input Dims"       "[[64, 2048], [2048, 1000], []]"
 *   types     "Input type"       "['float', 'float', 'Scalar']"
 *   concrete  "Concrete Inputs"  "['', '', '[1, 1]', 'False']"
 *
 * Definitions (what each formula counts; an op not listed, or whose inputs do not give what
 * its formula needs, is UNKNOWN: flops and bytes -1):
 *  - mm(A[M,K], B[K,N]), addmm(C, A, B), _scaled_mm(A, B, ...), linear(X[..., K], W[N, K], b)
 *    (M = the product of X's leading dims), matmul of two 2-D, an N-D and a 2-D, or two 3-D
 *    inputs: 2*M*N*K. bmm(A[B,M,K], B[B,K,N]), baddbmm(C, A, B): 2*B*M*N*K. The bias add of
 *    addmm / linear is not counted (it is M*N, under 1/K of the rest).
 *  - Attention forward (scaled_dot_product_attention and its _flash / _efficient / _cudnn
 *    forms, q [B, H, Sq, d], k [B, Hk, Sk, d], v [B, Hk, Sk, dv]; _flash_attention_forward and
 *    _efficient_attention_forward have [B, S, H, d]): 2*B*H*Sq*Sk*(d + dv), halved when the
 *    call's is_causal is True (Concrete Inputs) and Sq = Sk; backward (their _backward
 *    forms): 2.5 x that.
 *  - Convolution (convolution, _convolution, conv1d/2d/3d, cudnn_convolution,
 *    miopen_convolution; not transposed) only when Concrete Inputs gives stride, padding,
 *    dilation and groups: 2 * N * K * prod(output spatial) * (C / groups) * prod(kernel), the
 *    output size floor((in + 2p - d(k - 1) - 1) / s) + 1 per spatial dim.
 *  - Elementwise arithmetic (add, sub, mul, div, relu, gelu, silu, sigmoid, tanh, exp, ...,
 *    their in-place forms, threshold_backward, ...): one FLOP per output element (addcmul /
 *    addcdiv: two), the output the broadcast of the tensor inputs.
 *  - copy_, fill_, zero_, clone, contiguous: 0 FLOPs (bytes only).
 *  - Bytes: the minimum a call must move: each tensor input read once and the output written
 *    once, the element size from Input type (float 4, c10::Half / c10::BFloat16 2, Float8 1,
 *    double 8, ...); an in-place op writes its first input again. GEMMs' and attention's
 *    output takes the dtype of their first matrix input (_scaled_mm: 2 bytes, bf16, as its
 *    usual out_dtype). Unknown when an input's element size is.
 *  - dtype: the precision of the op's first tensor input: FL_FP32, FL_HALF (bf16 and fp16),
 *    FL_FP8, FL_FP64, FL_OTHER (integers, bool), FL_DUNKNOWN. */
#ifndef FP_FLOPS_H
#define FP_FLOPS_H

enum { FL_DUNKNOWN, FL_FP32, FL_HALF, FL_FP8, FL_FP64, FL_OTHER };
/* What the op is, for which roof applies: matrix ops run on tensor / matrix cores when their
 * kernels do, the others on the plain FP32 units. */
enum { FL_NONE, FL_MATRIX, FL_VECTOR, FL_COPY };

typedef struct flops_out {
    double flops;   /* per call; -1 unknown */
    double bytes;   /* per call; -1 unknown */
    int dtype;      /* FL_FP32 ... */
    int kind;       /* FL_MATRIX, FL_VECTOR, FL_COPY; FL_NONE: not modelled */
} flops_out;

/* The figures of one call of op name; any input may be NULL. Never fails: unknown is -1. */
void flops_model(const char *name, const char *dims, const char *types, const char *concrete, flops_out *o);

/* Bytes per element of a Kineto "Input type" name ("float" 4, "c10::BFloat16" 2, ...);
 * 0 when not a tensor element type (Scalar, "", a list) or unknown. */
int flops_elem_size(const char *type);
/* FL_FP32 ... of that name. */
int flops_dtype(const char *type);
const char *flops_dtype_name(int dtype); /* "fp32", "bf16/fp16", "fp8", "fp64", "other", NULL */

/* The precision class of a kernel by its name: tensor / matrix-core code (MMA shapes, hmma,
 * xmma with a tensor type, gmma/wgmma, tensorop, s1688 (TF32), flash attention, AMD MFMA and
 * Tensile "MI" tiles, ...), plain SIMT / vector code (sgemm, gemv, cuDNN's scudnn and
 * implicit sgemm engines, ATen's elementwise / reduce kernels, Inductor's pointwise and
 * reduction Triton kernels, ...), or unclassified (everything else: a name that does not
 * say). Three buckets, never two: an unknown name is not SIMT. */
enum { KC_TENSOR, KC_SIMT, KC_UNCLASSIFIED, KC_N };
int flops_kernel_class(const char *name);
const char *flops_kernel_class_name(int kc); /* "tensor", "simt", "unclassified" */

#endif
