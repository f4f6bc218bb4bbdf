/* flops.h: FLOPs and minimum bytes moved of one operator call, from what a trace records of
 * it, and the precision class of a kernel from its name.
 *
 * A pure module (no SQL, no JSON, no allocation). Its inputs are the strings Kineto writes
 * in a cpu_op's args, as the parser keeps them (Python's str() of a list):
 *   dims      "Input Dims"       "[[64, 2048], [2048, 1000], []]"
 *   types     "Input type"       "['float', 'float', 'Scalar']"
 *   concrete  "Concrete Inputs"  "['', '', '[1, 1]', 'False']"
 * and, where the call's own args do not tell, what the trace says around it (flops_in).
 *
 * Definitions (what each formula counts; an op not listed, or whose inputs do not give what
 * its formula needs, is UNKNOWN: flops and bytes -1, and `why` says which input is missing):
 *  - mm(A[M,K], B[K,N]), addmm(C, A, B), _scaled_mm(A, B, ...), linear(X[..., K], W[N, K], b)
 *    (M = the product of X's leading dims), matmul of two 2-D, an N-D and a 2-D, or two 3-D
 *    inputs: 2*M*N*K. bmm(A[B,M,K], B[B,K,N]), baddbmm(C, A, B): 2*B*M*N*K. The bias add of
 *    addmm / linear is not counted (it is M*N, under 1/K of the rest); a linear without bias
 *    (its third input [] of no type) moves no bias bytes.
 *  - Attention forward (scaled_dot_product_attention and its _flash / _efficient / _cudnn
 *    forms, q [B, H, Sq, d], k [B, Hk, Sk, d], v [B, Hk, Sk, dv]; _flash_attention_forward and
 *    _efficient_attention_forward have [B, S, H, d]): 2*B*H*Sq*Sk*(d + dv), halved when the
 *    call is causal and Sq = Sk; backward (their _backward forms): 2.5 x that. Causal: the
 *    call's is_causal (Concrete Inputs), else its kernels' template flag (flops_in.causal,
 *    flops_kernel_causal); when neither tells and Sq = Sk, the full count is an UPPER BOUND
 *    (o->upper = 1): no verdict may rest on it.
 *  - Convolution, not transposed, x [N, C, spatial...], w [K, C/groups, kernel...] (1-3
 *    spatial dims): 2 * N * K * prod(output spatial) * (C / groups) * prod(kernel), the
 *    same count for each backward gradient (input, weight). The forward's output size, in
 *    order: from stride, padding, dilation, groups in Concrete Inputs (floor((in + 2p -
 *    d(k - 1) - 1) / s) + 1); from torch's own `flops` arg (with_flops=True: the same count,
 *    so prod(output) = flops / (2 N K (C/g) prod(kernel))); from flops_in.out (the effic
 *    pass finds it in the backward's grad_output, linked by the autograd sequence number,
 *    or in the next op's input). Without any: o->need_out = 1 (unknown until out is given).
 *    Backward (cudnn_ / miopen_convolution_backward_input: [input_size, grad_out, w];
 *    _weight: [weight_size, grad_out, x], its w from the parent cudnn_convolution_backward
 *    [x, grad_out, w] given as flops_in.ctx_dims; convolution_backward: [grad_out, x, w, ...,
 *    transposed 7, ..., output_mask 10]): from grad_out and w, no stride or padding needed;
 *    each gradient the output_mask asks for (unknown mask: both, an upper bound). Every
 *    size product is checked: one that overflows 64 bits is unknown.
 *  - Elementwise arithmetic (add, sub, mul, div, relu, gelu, silu, sigmoid, tanh, exp, ...,
 *    their in-place forms, threshold_backward, ...): one FLOP per output element (addcmul /
 *    addcdiv: two), the output the broadcast of the tensor inputs. An out= variant (one
 *    input more than the op's own arguments, the last a tensor of the output's shape:
 *    Kineto lists `out` among the inputs, as clamp_min [[x], [], [x]] under relu_) writes
 *    that tensor and does not read it: its bytes are counted once, as the output.
 *  - copy_, fill_, zero_, clone, contiguous: 0 FLOPs (bytes only), kind FL_COPY.
 *  - Bytes: the minimum a call must move: each tensor input read once and the output written
 *    once, the element size from Input type (float 4, c10::Half / c10::BFloat16 2, Float8 1,
 *    double 8, ...); an in-place op writes its first input again. GEMMs' and attention's
 *    output takes the dtype of their first matrix input (_scaled_mm: 2 bytes, bf16, as its
 *    usual out_dtype). Unknown when an input's element size is.
 *  - dtype: the precision of the op's math: a GEMM's matrix inputs (not addmm's bias, which
 *    may be fp32 under bf16 matrices), a convolution's and attention's first input, else
 *    the first tensor input: FL_FP32, FL_BF16, FL_FP16, FL_FP8, FL_FP64, FL_OTHER (integers,
 *    bool), FL_DUNKNOWN. */
#ifndef FP_FLOPS_H
#define FP_FLOPS_H

enum { FL_DUNKNOWN, FL_FP32, FL_BF16, FL_FP16, FL_FP8, FL_FP64, FL_OTHER };
/* What the op is, for which roof applies: matrix ops run on tensor / matrix cores when their
 * kernels do, the others on the plain FP32 units. */
enum { FL_NONE, FL_MATRIX, FL_VECTOR, FL_COPY };

#define FL_OUT_MAX 5 /* a convolution's output shape: N, K and up to 3 spatial dims */

/* What a trace says of one call. Everything but name may be NULL / -1. */
typedef struct flops_in {
    const char *name, *dims, *types, *concrete;
    const char *ctx_dims;   /* Input Dims of the op around it (a backward-weight's parent), NULL */
    double torch_flops;     /* args "flops" (with_flops=True) of the op, or of the convolution op
                             * around a forward convolution's innermost op; < 0 none */
    int causal;             /* the kernels' causal flag: 1, 0, -1 unknown */
    const long long *out;   /* a forward convolution's output shape [N, K, spatial...], NULL */
    int nout;
} flops_in;

typedef struct flops_out {
    double flops;   /* per call; -1 unknown */
    double bytes;   /* per call; -1 unknown */
    int dtype;      /* FL_FP32 ... */
    int kind;       /* FL_MATRIX, FL_VECTOR, FL_COPY; FL_NONE: not modelled */
    int upper;      /* flops is an upper bound (causal not recorded; a gradient mask not recorded) */
    int need_out;   /* a forward convolution whose output size only flops_in.out can give */
    int conv;       /* a convolution (forward or backward) */
    const char *why; /* static text: why flops or bytes is unknown; NULL when both are known */
} flops_out;

/* The figures of one call; never fails: unknown is -1. */
void flops_model_in(const flops_in *in, flops_out *o);
/* The same from the call's own args alone. */
void flops_model(const char *name, const char *dims, const char *types, const char *concrete, flops_out *o);

/* 1 when op name is a convolution's backward whose Input Dims hold grad_output (at *gy_index)
 * and weight: the effic pass links it to its forward. */
int flops_conv_backward(const char *name, int *gy_index);
/* 1 when op name is a forward convolution. */
int flops_conv_forward(const char *name);

/* Bytes per element of a Kineto "Input type" name ("float" 4, "c10::BFloat16" 2, ...);
 * 0 when not a tensor element type (Scalar, "", a list) or unknown. */
int flops_elem_size(const char *type);
/* FL_FP32 ... of that name. */
int flops_dtype(const char *type);
const char *flops_dtype_name(int dtype); /* "fp32", "bf16", "fp16", "fp8", "fp64", "other", NULL */

/* The i-th input of Input Dims as a shape: its rank (0..FL_OUT_MAX), -1 when it is not a
 * list of non-negative ints that fits. For the effic pass's links between calls. */
int flops_dims_at(const char *dims, int i, long long *out, int cap);

/* The precision class of a kernel by its name: tensor / matrix-core code (MMA shapes, hmma,
 * xmma with a tensor type, gmma/wgmma, tensorop, s1688 (TF32), cuBLASLt's nvjet, flash
 * attention, AMD MFMA and Tensile "MI" tiles, ...), plain SIMT / vector code (FFMA: sgemm,
 * gemv, cuBLAS's xmma kernels whose name says ffma (fp32 with TF32 off: CUDA cores, also
 * sm90_xmma), cuDNN's scudnn and implicit sgemm engines, ATen's elementwise / reduce
 * kernels, Inductor's pointwise and reduction Triton kernels, ...), or unclassified
 * (everything else: a name that does not say). Three buckets, never two: an unknown name
 * is not SIMT. FFMA is looked for first: a name that says ffma runs on CUDA cores whatever
 * else it says. */
enum { KC_TENSOR, KC_SIMT, KC_UNCLASSIFIED, KC_N };
int flops_kernel_class(const char *name);
const char *flops_kernel_class_name(int kc); /* "tensor", "simt", "unclassified" */

/* A flash-attention kernel's causal template flag (flash_fwd_kernel<Traits, Is_dropout,
 * Is_causal, ...>, flash_bwd_dq_dk_dv_loop[_seqk_parallel]_kernel<Traits, Is_dropout,
 * Is_causal, ...>, flash_fwd_splitkv_kernel<Traits, Is_causal, ...>): 1 causal, 0 not, -1
 * when the name does not say. */
int flops_kernel_causal(const char *name);

#endif
