/* flops.c: the formulas of flops.h, the readers of Kineto's list strings, and the kernel
 * name classes. Pure: no SQL, no JSON, no allocation. */
#include "lib/flops.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 32 /* inputs read of one call; a call with more reads the first ones */
#define MAX_DIMS 8  /* dims of one tensor; more: that input is unknown */
#define MAX_STR 64  /* one Input type / Concrete Inputs element */

/* One input of Input Dims: a list of ints (a tensor's shape; n 0 for [] ), or not. */
typedef struct arg {
    int ok;            /* a flat list of non-negative ints */
    int n;
    long long d[MAX_DIMS];
} arg;

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    return p;
}

/* Past one element of a list at p (a number, a quoted string, a nested list); NULL on a
 * malformed one. */
static const char *skip_elem(const char *p) {
    p = skip_ws(p);
    if (*p == '[') {
        int depth = 0;
        for (; *p; p++) {
            if (*p == '[') depth++;
            else if (*p == ']' && --depth == 0) return p + 1;
        }
        return NULL;
    }
    if (*p == '\'') {
        const char *q = strchr(p + 1, '\'');
        return q ? q + 1 : NULL;
    }
    while (*p && *p != ',' && *p != ']') p++;
    return p;
}

/* Input Dims into a[]: the number of inputs read, -1 when s is not a list. */
static int read_dims(const char *s, arg *a) {
    if (!s) return -1;
    const char *p = skip_ws(s);
    if (*p++ != '[') return -1;
    int n = 0;
    p = skip_ws(p);
    if (*p == ']') return 0;
    while (*p && n < MAX_ARGS) {
        arg *x = &a[n];
        memset(x, 0, sizeof *x);
        p = skip_ws(p);
        if (*p == '[') {
            const char *q = skip_ws(p + 1);
            x->ok = 1;
            while (*q && *q != ']') {
                char *end;
                if (!isdigit((unsigned char)*q)) { x->ok = 0; break; }
                long long v = strtoll(q, &end, 10);
                if (x->n == MAX_DIMS || v < 0) { x->ok = 0; break; }
                x->d[x->n++] = v;
                q = skip_ws(end);
                if (*q == ',') q = skip_ws(q + 1);
            }
        }
        const char *e = skip_elem(p);
        if (!e) return -1;
        n++;
        p = skip_ws(e);
        if (*p == ',') p++;
        else break;
    }
    return n;
}

/* Element i of a list of quoted strings ("['float', '']") into out, without its quotes;
 * 0, or -1 when there is no such element or it is not a quoted string. */
static int str_elem(const char *s, int i, char *out, size_t cap) {
    if (!s) return -1;
    const char *p = skip_ws(s);
    if (*p++ != '[') return -1;
    for (int k = 0; *p; k++) {
        p = skip_ws(p);
        if (*p == ']') return -1;
        const char *e = skip_elem(p);
        if (!e) return -1;
        if (k == i) {
            if (*p != '\'') return -1;
            size_t n = (size_t)(e - p) - 2;
            if (n >= cap) return -1;
            memcpy(out, p + 1, n);
            out[n] = '\0';
            return 0;
        }
        p = skip_ws(e);
        if (*p != ',') return -1;
        p++;
    }
    return -1;
}

int flops_elem_size(const char *t) {
    static const struct { const char *name; int size; } sizes[] = {
        {"float", 4}, {"double", 8}, {"c10::Half", 2}, {"c10::BFloat16", 2}, {"Half", 2}, {"BFloat16", 2},
        {"c10::Float8_e4m3fn", 1}, {"c10::Float8_e5m2", 1}, {"c10::Float8_e4m3fnuz", 1}, {"c10::Float8_e5m2fnuz", 1},
        {"long int", 8}, {"int", 4}, {"short int", 2}, {"signed char", 1}, {"unsigned char", 1}, {"bool", 1},
        {"c10::complex<float>", 8}, {"c10::complex<double>", 16}, {"c10::complex<c10::Half>", 4},
    };
    for (size_t i = 0; t && i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(t, sizes[i].name)) return sizes[i].size;
    return 0;
}

int flops_dtype(const char *t) {
    if (!t) return FL_DUNKNOWN;
    if (!strcmp(t, "float")) return FL_FP32;
    if (!strcmp(t, "double")) return FL_FP64;
    if (!strcmp(t, "c10::Half") || !strcmp(t, "c10::BFloat16") || !strcmp(t, "Half") || !strcmp(t, "BFloat16")) return FL_HALF;
    if (!strncmp(t, "c10::Float8_", 12)) return FL_FP8;
    return flops_elem_size(t) ? FL_OTHER : FL_DUNKNOWN;
}

const char *flops_dtype_name(int d) {
    switch (d) {
    case FL_FP32: return "fp32";
    case FL_HALF: return "bf16/fp16";
    case FL_FP8: return "fp8";
    case FL_FP64: return "fp64";
    case FL_OTHER: return "other";
    default: return NULL;
    }
}

static double numel(const arg *x) {
    double v = 1;
    for (int i = 0; i < x->n; i++) v *= (double)x->d[i];
    return v;
}

/* Element size of input i from types (0: unknown). */
static int esize(const char *types, int i) {
    char t[MAX_STR];
    return str_elem(types, i, t, sizeof t) ? 0 : flops_elem_size(t);
}

/* "True"/"1" -> 1, "False"/"0" -> 0, else -1: element i of Concrete Inputs. */
static int concrete_bool(const char *concrete, int i) {
    char v[MAX_STR];
    if (str_elem(concrete, i, v, sizeof v)) return -1;
    if (!strcmp(v, "True") || !strcmp(v, "1")) return 1;
    if (!strcmp(v, "False") || !strcmp(v, "0")) return 0;
    return -1;
}

/* Element i of Concrete Inputs as up to n ints ("[1, 1]" or "1": one value repeated);
 * 0 or -1. */
static int concrete_ints(const char *concrete, int i, long long *out, int n) {
    char v[MAX_STR];
    if (str_elem(concrete, i, v, sizeof v) || !v[0]) return -1;
    const char *p = skip_ws(v);
    int list = *p == '[';
    if (list) p++;
    int k = 0;
    while (k < n) {
        p = skip_ws(p);
        char *end;
        if (!isdigit((unsigned char)*p) && *p != '-') return -1;
        out[k++] = strtoll(p, &end, 10);
        p = skip_ws(end);
        if (*p == ',') { p++; continue; }
        break;
    }
    if (!list && k == 1)
        for (; k < n; k++) out[k] = out[0];
    return k == n ? 0 : -1;
}

static const char *base_name(const char *name) { return !strncmp(name, "aten::", 6) ? name + 6 : name; }

static int in_list(const char *n, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(n, list[i])) return 1;
    return 0;
}

/* ---- the formulas ---- */

static void set(flops_out *o, double flops, double bytes, int kind) {
    o->flops = flops;
    o->bytes = bytes;
    o->kind = kind;
}

/* C[M,N] = A[M,K] B[K,N] (batch nb), inputs ia and ib; bias ic (-1 none). */
static void gemm(flops_out *o, const arg *a, int na, const char *types, int ia, int ib, int ic, double nb, double M, double N,
                 double K, int out_size) {
    double f = 2 * nb * M * N * K;
    int ea = esize(types, ia), eb = esize(types, ib), eo = out_size ? out_size : ea;
    double bytes = -1;
    if (ea && eb) {
        bytes = numel(&a[ia]) * ea + numel(&a[ib]) * eb + nb * M * N * eo;
        if (ic >= 0 && ic < na && a[ic].ok) {
            int ec = esize(types, ic);
            bytes = ec ? bytes + numel(&a[ic]) * ec : -1;
        }
    }
    set(o, f, bytes, FL_MATRIX);
}

static void model_gemm(const char *n, const arg *a, int na, const char *types, flops_out *o) {
    int two = na >= 2 && a[0].ok && a[1].ok;
    if (!strcmp(n, "mm") && two && a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
        gemm(o, a, na, types, 0, 1, -1, 1, a[0].d[0], a[1].d[1], a[0].d[1], 0);
    } else if (!strcmp(n, "_scaled_mm") && two && a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
        gemm(o, a, na, types, 0, 1, -1, 1, a[0].d[0], a[1].d[1], a[0].d[1], 2);
    } else if ((!strcmp(n, "addmm") || !strcmp(n, "addmm_")) && na >= 3 && a[1].ok && a[2].ok && a[1].n == 2 && a[2].n == 2 &&
               a[1].d[1] == a[2].d[0]) {
        gemm(o, a, na, types, 1, 2, 0, 1, a[1].d[0], a[2].d[1], a[1].d[1], 0);
    } else if (!strcmp(n, "linear") && two && a[0].n >= 1 && a[1].n == 2 && a[0].d[a[0].n - 1] == a[1].d[1]) {
        double M = 1;
        for (int i = 0; i < a[0].n - 1; i++) M *= (double)a[0].d[i];
        gemm(o, a, na, types, 0, 1, na >= 3 ? 2 : -1, 1, M, a[1].d[0], a[1].d[1], 0);
    } else if ((!strcmp(n, "bmm") || !strcmp(n, "baddbmm") || !strcmp(n, "baddbmm_"))) {
        int i = n[0] == 'b' && n[1] == 'm' ? 0 : 1;
        if (na >= i + 2 && a[i].ok && a[i + 1].ok && a[i].n == 3 && a[i + 1].n == 3 && a[i].d[0] == a[i + 1].d[0] &&
            a[i].d[2] == a[i + 1].d[1])
            gemm(o, a, na, types, i, i + 1, i ? 0 : -1, (double)a[i].d[0], a[i].d[1], a[i + 1].d[2], a[i].d[2], 0);
    } else if (!strcmp(n, "matmul") && two) {
        if (a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
            gemm(o, a, na, types, 0, 1, -1, 1, a[0].d[0], a[1].d[1], a[0].d[1], 0);
        } else if (a[0].n >= 2 && a[1].n == 2 && a[0].d[a[0].n - 1] == a[1].d[0]) {
            double M = 1;
            for (int i = 0; i < a[0].n - 1; i++) M *= (double)a[0].d[i];
            gemm(o, a, na, types, 0, 1, -1, 1, M, a[1].d[1], a[1].d[0], 0);
        } else if (a[0].n == 3 && a[1].n == 3 && a[0].d[0] == a[1].d[0] && a[0].d[2] == a[1].d[1]) {
            gemm(o, a, na, types, 0, 1, -1, (double)a[0].d[0], a[0].d[1], a[1].d[2], a[0].d[2], 0);
        }
    }
}

/* Attention: q, k, v at iq..iq+2; bshd: [B, S, H, d] layout (else [B, H, S, d]); causal:
 * the Concrete Inputs index of is_causal (-1: none); mask: the index of an int mask type
 * whose non-zero value is causal (_efficient_attention_*); bwd: 2.5 x. */
static void attention(flops_out *o, const arg *a, int na, const char *types, const char *concrete, int iq, int bshd, int causal,
                      int mask, int bwd) {
    if (na < iq + 3) return;
    const arg *q = &a[iq], *k = &a[iq + 1], *v = &a[iq + 2];
    if (!q->ok || !k->ok || !v->ok || q->n != 4 || k->n != 4 || v->n != 4) return;
    int S = bshd ? 1 : 2, H = bshd ? 2 : 1;
    double B = (double)q->d[0], Hq = (double)q->d[H], Sq = (double)q->d[S], Sk = (double)k->d[S], d = (double)q->d[3],
           dv = (double)v->d[3];
    if (k->d[S] != v->d[S] || k->d[3] != q->d[3]) return;
    double f = 2 * B * Hq * Sq * Sk * (d + dv);
    int c = causal >= 0 ? concrete_bool(concrete, causal) : 0;
    if (mask >= 0) {
        long long m;
        c = concrete_ints(concrete, mask, &m, 1) ? 0 : m != 0;
    }
    if (c == 1 && Sq == Sk) f /= 2;
    if (bwd) f *= 2.5;
    int e = esize(types, iq);
    double out = B * Hq * Sq * dv, bytes = -1;
    if (e && esize(types, iq + 1) && esize(types, iq + 2))
        bytes = (numel(q) + numel(k) + numel(v) + out) * e * (bwd ? 2 : 1);
    set(o, f, bytes, FL_MATRIX);
}

static void model_attention(const char *n, const arg *a, int na, const char *types, const char *concrete, flops_out *o) {
    if (!strcmp(n, "scaled_dot_product_attention")) attention(o, a, na, types, concrete, 0, 0, 5, -1, 0);
    else if (!strcmp(n, "_scaled_dot_product_flash_attention")) attention(o, a, na, types, concrete, 0, 0, 4, -1, 0);
    else if (!strcmp(n, "_scaled_dot_product_efficient_attention")) attention(o, a, na, types, concrete, 0, 0, 6, -1, 0);
    else if (!strcmp(n, "_scaled_dot_product_cudnn_attention")) attention(o, a, na, types, concrete, 0, 0, 6, -1, 0);
    else if (!strcmp(n, "_flash_attention_forward")) attention(o, a, na, types, concrete, 0, 1, 8, -1, 0);
    else if (!strcmp(n, "_efficient_attention_forward")) attention(o, a, na, types, concrete, 0, 1, -1, 9, 0);
    else if (!strcmp(n, "_scaled_dot_product_flash_attention_backward")) attention(o, a, na, types, concrete, 1, 0, 11, -1, 1);
    else if (!strcmp(n, "_scaled_dot_product_efficient_attention_backward")) attention(o, a, na, types, concrete, 1, 0, 11, -1, 1);
    else if (!strcmp(n, "_scaled_dot_product_cudnn_attention_backward")) attention(o, a, na, types, concrete, 1, 0, -1, -1, 1);
    else if (!strcmp(n, "_flash_attention_backward")) attention(o, a, na, types, concrete, 1, 1, 11, -1, 1);
    else if (!strcmp(n, "_efficient_attention_backward")) attention(o, a, na, types, concrete, 1, 1, -1, 14, 1);
}

/* Convolution: x, w at 0, 1; the Concrete Inputs indexes of stride, padding, dilation,
 * transposed (-1: none) and groups. */
static void conv(flops_out *o, const arg *a, int na, const char *types, const char *concrete, int is, int ip, int id, int it, int ig,
                 int ibias) {
    if (na < 2 || !a[0].ok || !a[1].ok || a[0].n < 3 || a[0].n != a[1].n || a[0].n - 2 > 3) return;
    int sp = a[0].n - 2;
    long long st[3], pad[3], dil[3], g;
    if (concrete_ints(concrete, is, st, sp) || concrete_ints(concrete, ip, pad, sp) || concrete_ints(concrete, id, dil, sp) ||
        concrete_ints(concrete, ig, &g, 1) || g < 1)
        return;
    if (it >= 0 && concrete_bool(concrete, it) != 0) return; /* transposed, or not said */
    double N = (double)a[0].d[0], C = (double)a[0].d[1], K = (double)a[1].d[0], out = 1, ker = 1;
    if (a[1].d[1] * g != a[0].d[1]) return;
    for (int i = 0; i < sp; i++) {
        long long in = a[0].d[2 + i], k = a[1].d[2 + i];
        if (st[i] < 1 || dil[i] < 1 || pad[i] < 0) return;
        long long o_ = (in + 2 * pad[i] - dil[i] * (k - 1) - 1) / st[i] + 1;
        if (o_ < 1) return;
        out *= (double)o_;
        ker *= (double)k;
    }
    double f = 2 * N * K * out * (C / (double)g) * ker;
    int ex = esize(types, 0), ew = esize(types, 1);
    double bytes = -1;
    if (ex && ew) {
        bytes = numel(&a[0]) * ex + numel(&a[1]) * ew + N * K * out * ex;
        if (ibias >= 0 && ibias < na && a[ibias].ok && a[ibias].n) {
            int eb = esize(types, ibias);
            bytes = eb ? bytes + numel(&a[ibias]) * eb : -1;
        }
    }
    set(o, f, bytes, FL_MATRIX);
}

static void model_conv(const char *n, const arg *a, int na, const char *types, const char *concrete, flops_out *o) {
    if (!strcmp(n, "convolution") || !strcmp(n, "_convolution")) conv(o, a, na, types, concrete, 3, 4, 5, 6, 8, 2);
    else if (!strcmp(n, "conv1d") || !strcmp(n, "conv2d") || !strcmp(n, "conv3d")) conv(o, a, na, types, concrete, 3, 4, 5, -1, 6, 2);
    else if (!strcmp(n, "cudnn_convolution")) conv(o, a, na, types, concrete, 3, 2, 4, -1, 5, -1);
    else if (!strcmp(n, "miopen_convolution")) conv(o, a, na, types, concrete, 4, 3, 5, -1, 6, 2);
}

/* Elementwise: the output is the broadcast of the tensor inputs (those with an element
 * size); per element `per` FLOPs. In-place (name ends in '_'): the output is input 0. */
static void eltwise(flops_out *o, const char *n, const arg *a, int na, const char *types, double per, int kind) {
    int nd = 0, first = -1;
    long long shape[MAX_DIMS];
    double in_bytes = 0;
    for (int i = 0; i < na; i++) {
        int e = esize(types, i);
        if (!e) continue; /* a Scalar, a list, None */
        if (!a[i].ok) return;
        if (first < 0) first = i;
        in_bytes += numel(&a[i]) * e;
        /* broadcast, right-aligned */
        if (a[i].n > nd) {
            for (int k = nd - 1; k >= 0; k--) shape[k + a[i].n - nd] = shape[k];
            for (int k = 0; k < a[i].n - nd; k++) shape[k] = 1;
            nd = a[i].n;
        }
        for (int k = 0; k < a[i].n; k++) {
            long long v = a[i].d[a[i].n - 1 - k], *s = &shape[nd - 1 - k];
            if (*s == 1) *s = v;
            else if (v != 1 && v != *s) return;
        }
    }
    if (first < 0) return;
    size_t len = strlen(n);
    int inplace = len && n[len - 1] == '_';
    double out = 1;
    for (int k = 0; k < nd; k++) out *= (double)shape[k];
    if (inplace) out = numel(&a[first]);
    int eo = esize(types, first);
    set(o, per * out, in_bytes + out * eo, kind);
}

static void model_eltwise(const char *n, const arg *a, int na, const char *types, flops_out *o) {
    static const char *const one[] = {
        "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "relu", "relu_", "threshold_backward", "gelu", "gelu_",
        "gelu_backward", "silu", "silu_", "silu_backward", "sigmoid", "sigmoid_", "sigmoid_backward", "tanh", "tanh_",
        "tanh_backward", "exp", "exp_", "neg", "neg_", "rsqrt", "rsqrt_", "sqrt", "sqrt_", "pow", "pow_", "reciprocal",
        "reciprocal_", "clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_", "hardtanh", "hardtanh_",
        "leaky_relu", "leaky_relu_", "abs", "abs_", "log", "log_", "square", "maximum", "minimum", "where", NULL};
    static const char *const two[] = {"addcmul", "addcmul_", "addcdiv", "addcdiv_", "lerp", "lerp_", NULL};
    static const char *const copy[] = {"copy_", "fill_", "zero_", "clone", "contiguous", NULL};
    if (in_list(n, one)) eltwise(o, n, a, na, types, 1, FL_VECTOR);
    else if (in_list(n, two)) eltwise(o, n, a, na, types, 2, FL_VECTOR);
    else if (in_list(n, copy)) {
        if (!strcmp(n, "fill_") || !strcmp(n, "zero_")) {
            int e = esize(types, 0);
            if (na >= 1 && a[0].ok && e) set(o, 0, numel(&a[0]) * e, FL_COPY);
        } else if (!strcmp(n, "copy_")) {
            int e0 = esize(types, 0), e1 = esize(types, 1);
            if (na >= 2 && a[0].ok && a[1].ok && e0 && e1) set(o, 0, numel(&a[0]) * e0 + numel(&a[1]) * e1, FL_COPY);
        } else {
            int e = esize(types, 0);
            if (na >= 1 && a[0].ok && e) set(o, 0, 2 * numel(&a[0]) * e, FL_COPY);
        }
    }
}

void flops_model(const char *name, const char *dims, const char *types, const char *concrete, flops_out *o) {
    arg a[MAX_ARGS];
    char t0[MAX_STR];
    set(o, -1, -1, FL_NONE);
    o->dtype = FL_DUNKNOWN;
    if (!name) return;
    int na = read_dims(dims, a);
    if (na < 0) return;
    const char *n = base_name(name);
    model_gemm(n, a, na, types, o);
    if (o->kind == FL_NONE) model_attention(n, a, na, types, concrete, o);
    if (o->kind == FL_NONE) model_conv(n, a, na, types, concrete, o);
    if (o->kind == FL_NONE) model_eltwise(n, a, na, types, o);
    /* the dtype: the first input with an element type (addmm's bias has its matrices') */
    for (int i = 0; i < na && o->dtype == FL_DUNKNOWN; i++)
        if (!str_elem(types, i, t0, sizeof t0) && flops_elem_size(t0)) o->dtype = flops_dtype(t0);
}

/* ---- kernel classes ---- */

/* lowercase substrings; tensor first: a tensor-core kernel may also say "gemm" */
static const char *const tensor_pats[] = {
    "h884", "s884", "h1688", "s1688", "h16816", "s16816", "bf16816", "16816", "16832", "i8816", "c1688", "hmma", "imma", "wmma",
    "gmma", "tensorop", "tensor_op", "_tf32", "tf32_", "flash_fwd", "flash_bwd", "fmha", "mfma", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse",
    "xmma_warp_specialized", "sm90_xmma", NULL};
static const char *const simt_pats[] = {
    "sgemm", "dgemm", "gemv", "gemmsn", "gemmk1", "splitkreduce", "scudnn", "at::native::", "cudnn::bn_", "bn_fw", "bn_bw",
    "dgrad_engine", "wgrad_alg", "nchwtonhwc", "nhwctonchw", "softmax_warp", "cunn_", "elementwise", "reduce_kernel",
    "triton_poi", "triton_red", "triton_per", NULL};

int flops_kernel_class(const char *name) {
    char low[1024];
    size_t n = name ? strlen(name) : 0;
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    for (int i = 0; tensor_pats[i]; i++)
        if (strstr(low, tensor_pats[i])) return KC_TENSOR;
    /* cuBLAS's xmma kernels name their types: a tensor type (tf32, bf16, f16, e4m3, e5m2,
     * i8) runs on the tensor cores, f32f32_f32f32_f32 alone does not say */
    if (strstr(low, "xmma") && (strstr(low, "bf16") || strstr(low, "f16") || strstr(low, "e4m3") || strstr(low, "e5m2") ||
                                strstr(low, "i8i8") || strstr(low, "tf32")))
        return KC_TENSOR;
    /* AMD Tensile: "..._MT128x128x32_MI32x32x8x1_..." is a matrix-core (MFMA) tile */
    for (const char *p = strstr(low, "_mi"); p; p = strstr(p + 1, "_mi"))
        if (isdigit((unsigned char)p[3]) && strchr(p + 3, 'x')) return KC_TENSOR;
    for (int i = 0; simt_pats[i]; i++)
        if (strstr(low, simt_pats[i])) return KC_SIMT;
    return KC_UNCLASSIFIED;
}

const char *flops_kernel_class_name(int kc) {
    return kc == KC_TENSOR ? "tensor" : kc == KC_SIMT ? "simt" : "unclassified";
}
