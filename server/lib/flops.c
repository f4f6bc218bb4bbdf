/* flops.c: the formulas of flops.h, the readers of Kineto's list strings, and the kernel
 * name classes. Pure: no SQL, no JSON, no allocation. */
#include "lib/flops.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 32 /* inputs read of one call; a call with more reads the first ones */
#define MAX_DIMS 8  /* dims of one tensor; more: that input is unknown */
#define MAX_STR 64  /* one Input type / Concrete Inputs element */

/* One input of Input Dims: a list of ints (a tensor's shape; n 0 for [] ), or not. */
typedef struct arg {
    int ok;            /* a flat list of non-negative ints, each one a long long */
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

/* The list of ints at q ("[2, 3]", q past the '[') into x; x->ok 0 when it is not one
 * (a value over LLONG_MAX included: strtoll's ERANGE). */
static void read_ints(const char *q, arg *x) {
    q = skip_ws(q);
    x->ok = 1;
    while (*q && *q != ']') {
        char *end;
        if (!isdigit((unsigned char)*q)) { x->ok = 0; return; }
        errno = 0;
        long long v = strtoll(q, &end, 10);
        if (x->n == MAX_DIMS || errno == ERANGE) { x->ok = 0; return; }
        x->d[x->n++] = v;
        q = skip_ws(end);
        if (*q == ',') q = skip_ws(q + 1);
    }
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
        if (*p == '[') read_ints(p + 1, x);
        const char *e = skip_elem(p);
        if (!e) return -1;
        n++;
        p = skip_ws(e);
        if (*p == ',') p++;
        else break;
    }
    return n;
}

int flops_dims_at(const char *dims, int i, long long *out, int cap) {
    arg a[MAX_ARGS];
    int na = read_dims(dims, a);
    if (i < 0 || i >= na || !a[i].ok || a[i].n > cap) return -1;
    memcpy(out, a[i].d, (size_t)a[i].n * sizeof *out);
    return a[i].n;
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
    if (!strcmp(t, "c10::BFloat16") || !strcmp(t, "BFloat16")) return FL_BF16;
    if (!strcmp(t, "c10::Half") || !strcmp(t, "Half")) return FL_FP16;
    if (!strncmp(t, "c10::Float8_", 12)) return FL_FP8;
    return flops_elem_size(t) ? FL_OTHER : FL_DUNKNOWN;
}

const char *flops_dtype_name(int d) {
    switch (d) {
    case FL_FP32: return "fp32";
    case FL_BF16: return "bf16";
    case FL_FP16: return "fp16";
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

static int dtype_at(const char *types, int i) {
    char t[MAX_STR];
    return str_elem(types, i, t, sizeof t) ? FL_DUNKNOWN : flops_dtype(t);
}

/* "True"/"1" -> 1, "False"/"0" -> 0, else -1. */
static int bool_of(const char *v) {
    if (!strcmp(v, "True") || !strcmp(v, "1") || !strcmp(v, "true")) return 1;
    if (!strcmp(v, "False") || !strcmp(v, "0") || !strcmp(v, "false")) return 0;
    return -1;
}

/* Element i of Concrete Inputs as a bool: 1, 0, -1 unknown. */
static int concrete_bool(const char *concrete, int i) {
    char v[MAX_STR];
    return str_elem(concrete, i, v, sizeof v) ? -1 : bool_of(v);
}

/* Element i of Concrete Inputs as a list of n bools ("[True, False, True]"): 0 or -1. */
static int concrete_bools(const char *concrete, int i, int *out, int n) {
    char v[MAX_STR];
    if (str_elem(concrete, i, v, sizeof v)) return -1;
    const char *p = skip_ws(v);
    if (*p++ != '[') return -1;
    for (int k = 0; k < n; k++) {
        p = skip_ws(p);
        size_t len = strcspn(p, ",]");
        char w[8];
        if (len == 0 || len >= sizeof w) return -1;
        memcpy(w, p, len);
        while (len && w[len - 1] == ' ') len--;
        w[len] = '\0';
        if ((out[k] = bool_of(w)) < 0) return -1;
        p += strcspn(p, ",]");
        if (*p == ',') p++;
        else if (k + 1 < n) return -1;
    }
    return 0;
}

/* Element i of Concrete Inputs as up to n ints ("[1, 1]" or "1": one value repeated);
 * 0 or -1 (a value strtoll cannot hold included). */
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
        errno = 0;
        out[k++] = strtoll(p, &end, 10);
        if (errno == ERANGE) return -1;
        p = skip_ws(end);
        if (*p == ',') { p++; continue; }
        break;
    }
    if (!list && k == 1)
        for (; k < n; k++) out[k] = out[0];
    return k == n ? 0 : -1;
}

static const char *base_name(const char *name) { return !strncmp(name, "aten::", 6) ? name + 6 : name; }

/* ---- the formulas ---- */

static const char *const WHY_SHAPES = "its Input Dims do not fit the operator's formula";
static const char *const WHY_TYPES = "an input's element type is not recorded (Input type)";

static void set(flops_out *o, double flops, double bytes, int kind) {
    o->flops = flops;
    o->bytes = bytes;
    o->kind = kind;
    o->why = bytes < 0 && flops >= 0 ? WHY_TYPES : NULL;
}

/* C[M,N] = A[M,K] B[K,N] (batch nb), inputs ia and ib; bias ic (-1 none: an input of no
 * dims, or of no type, is none: linear's optional bias). */
static void gemm(flops_out *o, const arg *a, int na, const char *types, int ia, int ib, int ic, double nb, double M, double N,
                 double K, int out_size) {
    double f = 2 * nb * M * N * K;
    int ea = esize(types, ia), eb = esize(types, ib), eo = out_size ? out_size : ea;
    double bytes = -1;
    if (ea && eb) {
        bytes = numel(&a[ia]) * ea + numel(&a[ib]) * eb + nb * M * N * eo;
        if (ic >= 0 && ic < na && a[ic].ok && a[ic].n) {
            int ec = esize(types, ic);
            bytes = ec ? bytes + numel(&a[ic]) * ec : -1;
        }
    }
    set(o, f, bytes, FL_MATRIX);
    o->dtype = dtype_at(types, ia);
}

static void model_gemm(const char *n, const arg *a, int na, const char *types, flops_out *o) {
    int two = na >= 2 && a[0].ok && a[1].ok;
    if (!strcmp(n, "mm") && two && a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
        gemm(o, a, na, types, 0, 1, -1, 1, (double)a[0].d[0], (double)a[1].d[1], (double)a[0].d[1], 0);
    } else if (!strcmp(n, "_scaled_mm") && two && a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
        gemm(o, a, na, types, 0, 1, -1, 1, (double)a[0].d[0], (double)a[1].d[1], (double)a[0].d[1], 2);
    } else if ((!strcmp(n, "addmm") || !strcmp(n, "addmm_")) && na >= 3 && a[1].ok && a[2].ok && a[1].n == 2 && a[2].n == 2 &&
               a[1].d[1] == a[2].d[0]) {
        gemm(o, a, na, types, 1, 2, 0, 1, (double)a[1].d[0], (double)a[2].d[1], (double)a[1].d[1], 0);
    } else if (!strcmp(n, "linear") && two && a[0].n >= 1 && a[1].n == 2 && a[0].d[a[0].n - 1] == a[1].d[1]) {
        double M = 1;
        for (int i = 0; i < a[0].n - 1; i++) M *= (double)a[0].d[i];
        gemm(o, a, na, types, 0, 1, na >= 3 ? 2 : -1, 1, M, (double)a[1].d[0], (double)a[1].d[1], 0);
    } else if ((!strcmp(n, "bmm") || !strcmp(n, "baddbmm") || !strcmp(n, "baddbmm_"))) {
        int i = n[0] == 'b' && n[1] == 'm' ? 0 : 1;
        if (na >= i + 2 && a[i].ok && a[i + 1].ok && a[i].n == 3 && a[i + 1].n == 3 && a[i].d[0] == a[i + 1].d[0] &&
            a[i].d[2] == a[i + 1].d[1])
            gemm(o, a, na, types, i, i + 1, i ? 0 : -1, (double)a[i].d[0], (double)a[i].d[1], (double)a[i + 1].d[2],
                 (double)a[i].d[2], 0);
    } else if (!strcmp(n, "matmul") && two) {
        if (a[0].n == 2 && a[1].n == 2 && a[0].d[1] == a[1].d[0]) {
            gemm(o, a, na, types, 0, 1, -1, 1, (double)a[0].d[0], (double)a[1].d[1], (double)a[0].d[1], 0);
        } else if (a[0].n >= 2 && a[1].n == 2 && a[0].d[a[0].n - 1] == a[1].d[0]) {
            double M = 1;
            for (int i = 0; i < a[0].n - 1; i++) M *= (double)a[0].d[i];
            gemm(o, a, na, types, 0, 1, -1, 1, M, (double)a[1].d[1], (double)a[1].d[0], 0);
        } else if (a[0].n == 3 && a[1].n == 3 && a[0].d[0] == a[1].d[0] && a[0].d[2] == a[1].d[1]) {
            gemm(o, a, na, types, 0, 1, -1, (double)a[0].d[0], (double)a[0].d[1], (double)a[1].d[2], (double)a[0].d[2], 0);
        }
    }
}

/* Attention: q, k, v at iq..iq+2; bshd: [B, S, H, d] layout (else [B, H, S, d]); causal:
 * the Concrete Inputs index of is_causal (-1: none); mask: the index of an int mask type
 * whose non-zero value is causal (_efficient_attention_*); bwd: 2.5 x. kcausal: the
 * kernels' flag when the args do not tell. */
static void attention(flops_out *o, const arg *a, int na, const char *types, const char *concrete, int iq, int bshd, int causal,
                      int mask, int bwd, int kcausal) {
    if (na < iq + 3) return;
    const arg *q = &a[iq], *k = &a[iq + 1], *v = &a[iq + 2];
    if (!q->ok || !k->ok || !v->ok || q->n != 4 || k->n != 4 || v->n != 4) return;
    int S = bshd ? 1 : 2, H = bshd ? 2 : 1;
    double B = (double)q->d[0], Hq = (double)q->d[H], Sq = (double)q->d[S], Sk = (double)k->d[S], d = (double)q->d[3],
           dv = (double)v->d[3];
    if (k->d[S] != v->d[S] || k->d[3] != q->d[3]) return;
    double f = 2 * B * Hq * Sq * Sk * (d + dv);
    int c = causal >= 0 ? concrete_bool(concrete, causal) : -1;
    if (mask >= 0) {
        long long m;
        c = concrete_ints(concrete, mask, &m, 1) ? -1 : m != 0;
    }
    if (c < 0) c = kcausal;
    if (c == 1 && Sq == Sk) f /= 2;
    if (bwd) f *= 2.5;
    int e = esize(types, iq);
    double out = B * Hq * Sq * dv, bytes = -1;
    if (e && esize(types, iq + 1) && esize(types, iq + 2))
        bytes = (numel(q) + numel(k) + numel(v) + out) * e * (bwd ? 2 : 1);
    set(o, f, bytes, FL_MATRIX);
    o->dtype = dtype_at(types, iq);
    /* causality halves the count only when Sq = Sk: there, unknown makes it an upper bound */
    o->upper = c < 0 && Sq == Sk;
}

static void model_attention(const char *n, const arg *a, int na, const char *types, const char *concrete, int kc, flops_out *o) {
    if (!strcmp(n, "scaled_dot_product_attention")) attention(o, a, na, types, concrete, 0, 0, 5, -1, 0, kc);
    else if (!strcmp(n, "_scaled_dot_product_flash_attention")) attention(o, a, na, types, concrete, 0, 0, 4, -1, 0, kc);
    else if (!strcmp(n, "_scaled_dot_product_efficient_attention")) attention(o, a, na, types, concrete, 0, 0, 6, -1, 0, kc);
    else if (!strcmp(n, "_scaled_dot_product_cudnn_attention")) attention(o, a, na, types, concrete, 0, 0, 6, -1, 0, kc);
    else if (!strcmp(n, "_flash_attention_forward")) attention(o, a, na, types, concrete, 0, 1, 8, -1, 0, kc);
    else if (!strcmp(n, "_efficient_attention_forward")) attention(o, a, na, types, concrete, 0, 1, -1, 9, 0, kc);
    else if (!strcmp(n, "_scaled_dot_product_flash_attention_backward")) attention(o, a, na, types, concrete, 1, 0, 11, -1, 1, kc);
    else if (!strcmp(n, "_scaled_dot_product_efficient_attention_backward")) attention(o, a, na, types, concrete, 1, 0, 11, -1, 1, kc);
    else if (!strcmp(n, "_scaled_dot_product_cudnn_attention_backward")) attention(o, a, na, types, concrete, 1, 0, -1, -1, 1, kc);
    else if (!strcmp(n, "_flash_attention_backward")) attention(o, a, na, types, concrete, 1, 1, 11, -1, 1, kc);
    else if (!strcmp(n, "_efficient_attention_backward")) attention(o, a, na, types, concrete, 1, 1, -1, 14, 1, kc);
}

/* ---- convolutions ---- */

/* *r = a * b for non-negative a, b; -1 when the product overflows (finding 14: sizes from
 * a hostile trace must not wrap). */
static int mul_ll(long long a, long long b, long long *r) { return a < 0 || b < 0 || __builtin_mul_overflow(a, b, r) ? -1 : 0; }

/* One output size floor((in + 2p - d(k - 1) - 1) / s) + 1 with every step checked; -1 when
 * a step overflows or the size is under 1. */
static long long conv_out_dim(long long in, long long k, long long s, long long p, long long d) {
    long long p2, span, t;
    if (k < 1 || s < 1 || d < 1 || p < 0 || mul_ll(p, 2, &p2) || mul_ll(d, k - 1, &span) || __builtin_add_overflow(in, p2, &t) ||
        __builtin_sub_overflow(t, span, &t) || __builtin_sub_overflow(t, 1, &t) || t < 0)
        return -1;
    return t / s + 1;
}

/* The Concrete Inputs indexes of a forward convolution's args (-1: the op has none). */
typedef struct conv_args { int stride, padding, dilation, transposed, groups, bias; } conv_args;

/* A convolution's shapes: x [N, C, sp...], w [K, C/g, kernel...]; 0 when they fit. */
static int conv_shapes(const arg *x, const arg *w) {
    return x->ok && w->ok && x->n >= 3 && x->n <= FL_OUT_MAX && w->n == x->n ? 0 : -1;
}

static double prod_from(const arg *x, int from) {
    double v = 1;
    for (int i = from; i < x->n; i++) v *= (double)x->d[i];
    return v;
}

/* The output spatial size of a forward convolution into *out (its product), or -1 and
 * o->why / o->need_out. */
static int conv_fwd_out(flops_out *o, const flops_in *in, const arg *a, int na, const conv_args *ca, double *out) {
    const arg *x = &a[0], *w = &a[1];
    int sp = x->n - 2;
    long long st[3], pad[3], dil[3], g, cg;
    (void)na;
    if (ca->transposed >= 0 && concrete_bool(in->concrete, ca->transposed) == 1) {
        o->why = "a transposed convolution is not modelled";
        return -1;
    }
    int have = !concrete_ints(in->concrete, ca->stride, st, sp) && !concrete_ints(in->concrete, ca->padding, pad, sp) &&
               !concrete_ints(in->concrete, ca->dilation, dil, sp) && !concrete_ints(in->concrete, ca->groups, &g, 1) &&
               (ca->transposed < 0 || concrete_bool(in->concrete, ca->transposed) == 0);
    if (have) {
        if (g < 1 || mul_ll(w->d[1], g, &cg) || cg != x->d[1]) {
            o->why = WHY_SHAPES;
            return -1;
        }
        *out = 1;
        for (int i = 0; i < sp; i++) {
            long long d = conv_out_dim(x->d[2 + i], w->d[2 + i], st[i], pad[i], dil[i]);
            if (d < 1) {
                o->why = WHY_SHAPES;
                return -1;
            }
            *out *= (double)d;
        }
        return 0;
    }
    /* torch's own count (the same formula): its output size is what it divides by */
    double per = 2 * (double)x->d[0] * (double)w->d[0] * (double)w->d[1] * prod_from(w, 2);
    if (in->torch_flops > 0 && per > 0) {
        double q = in->torch_flops / per;
        if (q >= 1 && q < 9.2e18 && q == (double)(long long)q) {
            *out = q;
            return 0;
        }
    }
    if (in->out && in->nout == x->n && in->out[0] == x->d[0] && in->out[1] == w->d[0]) {
        *out = 1;
        for (int i = 2; i < x->n; i++) *out *= (double)in->out[i];
        if (*out >= 1) return 0;
    }
    o->need_out = !in->out;
    o->why = "a convolution's stride and padding are not recorded (no Concrete Inputs), and neither its backward nor the next "
             "operator gives its output size";
    return -1;
}

static void conv_forward(flops_out *o, const flops_in *in, const arg *a, int na, const conv_args *ca) {
    if (na < 2 || conv_shapes(&a[0], &a[1])) return;
    o->conv = 1;
    o->kind = FL_MATRIX; /* known to be one even when its figures are not */
    o->dtype = dtype_at(in->types, 0);
    double out;
    if (conv_fwd_out(o, in, a, na, ca, &out)) return;
    const arg *x = &a[0], *w = &a[1];
    double N = (double)x->d[0], K = (double)w->d[0];
    double f = 2 * N * K * out * (double)w->d[1] * prod_from(w, 2);
    int ex = esize(in->types, 0), ew = esize(in->types, 1);
    double bytes = -1;
    if (ex && ew) {
        bytes = numel(x) * ex + numel(w) * ew + N * K * out * ex;
        if (ca->bias >= 0 && ca->bias < na && a[ca->bias].ok && a[ca->bias].n) {
            int eb = esize(in->types, ca->bias);
            bytes = eb ? bytes + numel(&a[ca->bias]) * eb : -1;
        }
    }
    set(o, f, bytes, FL_MATRIX);
    o->need_out = 0;
}

/* A backward convolution: grad_out gy, weight w, input x (NULL: unknown, bytes unknown);
 * gi, gw: the gradients it computes (input, weight); et: the element size. */
static void conv_backward(flops_out *o, const arg *gy, const arg *w, const arg *x, int gi, int gw, int et, int dtype) {
    o->conv = 1;
    o->kind = FL_MATRIX;
    o->dtype = dtype;
    if (conv_shapes(gy, w) || gy->d[1] != w->d[0] || (x && (conv_shapes(x, w) || x->d[0] != gy->d[0]))) {
        o->why = WHY_SHAPES;
        return;
    }
    double base = 2 * numel(gy) * (double)w->d[1] * prod_from(w, 2);
    double f = (gi + gw) * base, bytes = -1;
    if (et && x) {
        /* gy read once; the input gradient reads w and writes x's size, the weight gradient
         * reads x and writes w's size */
        bytes = (numel(gy) + (gi ? numel(w) + numel(x) : 0) + (gw ? numel(x) + numel(w) : 0)) * et;
    }
    set(o, f, bytes, FL_MATRIX);
    if (!x) o->why = "the input's shape is not recorded (its parent convolution_backward gives it)";
}

static void model_conv_backward(const char *n, const flops_in *in, const arg *a, int na, flops_out *o) {
    arg ctx[MAX_ARGS];
    int nc = in->ctx_dims ? read_dims(in->ctx_dims, ctx) : -1;
    const char *t = in->types;
    int cudnn = !strncmp(n, "cudnn_", 6) || !strncmp(n, "miopen_", 7);
    const char *rest = cudnn ? strchr(n, '_') + 1 : n;
    if (cudnn && !strcmp(rest, "convolution_backward_input") && na >= 3) {
        /* [input_size, grad_out, w]: x from the parent's [x, grad_out, w] */
        const arg *x = nc >= 3 && ctx[0].ok ? &ctx[0] : NULL;
        conv_backward(o, &a[1], &a[2], x, 1, 0, esize(t, 1), dtype_at(t, 1));
    } else if (cudnn && !strcmp(rest, "convolution_backward_weight") && na >= 3) {
        /* [weight_size, grad_out, x]: w from the parent */
        if (nc < 3 || !ctx[2].ok) {
            o->conv = 1, o->kind = FL_MATRIX, o->dtype = dtype_at(t, 1);
            o->why = "a weight gradient's weight shape is not recorded (its parent convolution_backward gives it)";
            return;
        }
        conv_backward(o, &a[1], &ctx[2], &a[2], 0, 1, esize(t, 1), dtype_at(t, 1));
    } else if (cudnn && !strcmp(rest, "convolution_backward") && na >= 3) {
        /* [x, grad_out, w, ..., output_mask at 10] */
        int m[2] = {1, 1};
        int known = !concrete_bools(in->concrete, 10, m, 2);
        conv_backward(o, &a[1], &a[2], &a[0], m[0], m[1], esize(t, 1), dtype_at(t, 1));
        o->upper = !known && o->flops > 0;
    } else if (!strcmp(n, "convolution_backward") && na >= 3) {
        /* [grad_out, x, w, bias_sizes, stride, padding, dilation, transposed 7, output_padding, groups, output_mask 10] */
        if (concrete_bool(in->concrete, 7) == 1) {
            o->conv = 1, o->kind = FL_MATRIX;
            o->why = "a transposed convolution is not modelled";
            return;
        }
        int m[3] = {1, 1, 0};
        int known = !concrete_bools(in->concrete, 10, m, 3);
        conv_backward(o, &a[0], &a[2], &a[1], m[0], m[1], esize(t, 0), dtype_at(t, 0));
        o->upper = !known && o->flops > 0;
    }
}

int flops_conv_backward(const char *name, int *gy_index) {
    const char *n = name ? base_name(name) : "";
    if (!strcmp(n, "convolution_backward")) return *gy_index = 0, 1;
    if (!strcmp(n, "cudnn_convolution_backward") || !strcmp(n, "cudnn_convolution_backward_input") ||
        !strcmp(n, "cudnn_convolution_backward_weight") || !strcmp(n, "miopen_convolution_backward") ||
        !strcmp(n, "miopen_convolution_backward_input") || !strcmp(n, "miopen_convolution_backward_weight"))
        return *gy_index = 1, 1;
    return 0;
}

int flops_conv_forward(const char *name) {
    const char *n = name ? base_name(name) : "";
    return !strcmp(n, "convolution") || !strcmp(n, "_convolution") || !strcmp(n, "conv1d") || !strcmp(n, "conv2d") ||
           !strcmp(n, "conv3d") || !strcmp(n, "cudnn_convolution") || !strcmp(n, "miopen_convolution");
}

static void model_conv(const char *n, const flops_in *in, const arg *a, int na, flops_out *o) {
    static const conv_args convolution = {3, 4, 5, 6, 8, 2}, conv_nd = {3, 4, 5, -1, 6, 2}, cudnn = {3, 2, 4, -1, 5, -1},
                           miopen = {4, 3, 5, -1, 6, 2};
    if (!strcmp(n, "convolution") || !strcmp(n, "_convolution")) conv_forward(o, in, a, na, &convolution);
    else if (!strcmp(n, "conv1d") || !strcmp(n, "conv2d") || !strcmp(n, "conv3d")) conv_forward(o, in, a, na, &conv_nd);
    else if (!strcmp(n, "cudnn_convolution")) conv_forward(o, in, a, na, &cudnn);
    else if (!strcmp(n, "miopen_convolution")) conv_forward(o, in, a, na, &miopen);
    else model_conv_backward(n, in, a, na, o);
}

/* ---- elementwise ---- */

/* The broadcast of the tensor inputs among a[0..na) (those with an element size) into
 * shape[*nd]; their bytes in *in_bytes, the first one's index in *first. -1 when an input
 * is not a shape or they do not broadcast. */
static int broadcast(const arg *a, int na, const char *types, long long *shape, int *nd, double *in_bytes, int *first) {
    *nd = 0, *first = -1, *in_bytes = 0;
    for (int i = 0; i < na; i++) {
        int e = esize(types, i);
        if (!e) continue; /* a Scalar, a list, None */
        if (!a[i].ok) return -1;
        if (*first < 0) *first = i;
        *in_bytes += numel(&a[i]) * e;
        /* right-aligned */
        if (a[i].n > *nd) {
            for (int k = *nd - 1; k >= 0; k--) shape[k + a[i].n - *nd] = shape[k];
            for (int k = 0; k < a[i].n - *nd; k++) shape[k] = 1;
            *nd = a[i].n;
        }
        for (int k = 0; k < a[i].n; k++) {
            long long v = a[i].d[a[i].n - 1 - k], *s = &shape[*nd - 1 - k];
            if (*s == 1) *s = v;
            else if (v != 1 && v != *s) return -1;
        }
    }
    return *first < 0 ? -1 : 0;
}

/* Elementwise: per FLOPs an output element; arity: the op's own inputs (an out= variant
 * has one more, its out tensor last). In-place (name ends in '_'): the output is input 0. */
static void eltwise(flops_out *o, const char *n, const arg *a, int na, const char *types, double per, int arity) {
    long long shape[MAX_DIMS];
    int nd, first;
    double in_bytes;
    int last_tensor = na > 0 && esize(types, na - 1) && a[na - 1].ok;
    int out_variant = na == arity + 1 && last_tensor;
    if (broadcast(a, out_variant ? na - 1 : na, types, shape, &nd, &in_bytes, &first)) {
        o->why = WHY_SHAPES;
        return;
    }
    if (out_variant) { /* the out tensor must be the output's shape, else it is an input after all */
        const arg *t = &a[na - 1];
        int same = t->n == nd;
        for (int k = 0; same && k < nd; k++) same = t->d[k] == shape[k];
        if (!same && broadcast(a, na, types, shape, &nd, &in_bytes, &first)) {
            o->why = WHY_SHAPES;
            return;
        }
    }
    size_t len = strlen(n);
    double out = 1;
    for (int k = 0; k < nd; k++) out *= (double)shape[k];
    if (len && n[len - 1] == '_') out = numel(&a[first]);
    int eo = esize(types, first);
    set(o, per * out, in_bytes + out * eo, FL_VECTOR);
    o->dtype = dtype_at(types, first);
}

static void model_eltwise(const char *n, const arg *a, int na, const char *types, flops_out *o) {
    static const struct { const char *name; signed char per, arity; } ops[] = {
        {"add", 1, 3}, {"sub", 1, 3}, {"mul", 1, 2}, {"div", 1, 2}, {"relu", 1, 1}, {"threshold_backward", 1, 3}, {"gelu", 1, 2},
        {"gelu_backward", 1, 3}, {"silu", 1, 1}, {"silu_backward", 1, 2}, {"sigmoid", 1, 1}, {"sigmoid_backward", 1, 2},
        {"tanh", 1, 1}, {"tanh_backward", 1, 2}, {"exp", 1, 1}, {"neg", 1, 1}, {"rsqrt", 1, 1}, {"sqrt", 1, 1}, {"pow", 1, 2},
        {"reciprocal", 1, 1}, {"clamp", 1, 3}, {"clamp_min", 1, 2}, {"clamp_max", 1, 2}, {"hardtanh", 1, 3},
        {"leaky_relu", 1, 2}, {"abs", 1, 1}, {"log", 1, 1}, {"square", 1, 1}, {"maximum", 1, 2}, {"minimum", 1, 2},
        {"where", 1, 3}, {"addcmul", 2, 4}, {"addcdiv", 2, 4}, {"lerp", 2, 3},
    };
    size_t len = strlen(n), bl = len && n[len - 1] == '_' ? len - 1 : len;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strlen(ops[i].name) == bl && !strncmp(n, ops[i].name, bl)) {
            eltwise(o, n, a, na, types, ops[i].per, ops[i].arity);
            return;
        }
    if (!strcmp(n, "fill_") || !strcmp(n, "zero_")) {
        int e = esize(types, 0);
        if (na >= 1 && a[0].ok && e) set(o, 0, numel(&a[0]) * e, FL_COPY);
    } else if (!strcmp(n, "copy_")) {
        int e0 = esize(types, 0), e1 = esize(types, 1);
        if (na >= 2 && a[0].ok && a[1].ok && e0 && e1) set(o, 0, numel(&a[0]) * e0 + numel(&a[1]) * e1, FL_COPY);
    } else if (!strcmp(n, "clone") || !strcmp(n, "contiguous")) {
        int e = esize(types, 0);
        if (na >= 1 && a[0].ok && e) set(o, 0, 2 * numel(&a[0]) * e, FL_COPY);
    }
}

void flops_model_in(const flops_in *in, flops_out *o) {
    arg a[MAX_ARGS];
    char t0[MAX_STR];
    memset(o, 0, sizeof *o);
    o->flops = o->bytes = -1;
    o->kind = FL_NONE;
    o->dtype = FL_DUNKNOWN;
    if (!in->name) return;
    int na = read_dims(in->dims, a);
    if (na < 0) {
        o->why = "no Input Dims recorded (record_shapes=True records them)";
        return;
    }
    const char *n = base_name(in->name);
    model_gemm(n, a, na, in->types, o);
    if (o->kind == FL_NONE) model_attention(n, a, na, in->types, in->concrete, in->causal, o);
    if (o->kind == FL_NONE) model_conv(n, in, a, na, o);
    if (o->kind == FL_NONE) model_eltwise(n, a, na, in->types, o);
    if (o->kind == FL_NONE && !o->why) o->why = "the operator is not modelled (no FLOP formula for it)";
    else if (o->flops < 0 && !o->why) o->why = WHY_SHAPES;
    /* the dtype, when the formula did not say: the first input with an element type */
    for (int i = 0; i < na && o->dtype == FL_DUNKNOWN; i++)
        if (!str_elem(in->types, i, t0, sizeof t0) && flops_elem_size(t0)) o->dtype = flops_dtype(t0);
}

void flops_model(const char *name, const char *dims, const char *types, const char *concrete, flops_out *o) {
    flops_in in = {name, dims, types, concrete, NULL, -1, -1, NULL, 0};
    flops_model_in(&in, o);
}

/* ---- kernel classes ---- */

/* lowercase substrings; tensor first: a tensor-core kernel may also say "gemm" */
static const char *const tensor_pats[] = {
    "h884", "s884", "h1688", "s1688", "h16816", "s16816", "bf16816", "16816", "16832", "i8816", "c1688", "hmma", "imma", "wmma",
    "gmma", "tensorop", "tensor_op", "_tf32", "tf32_", "flash_fwd", "flash_bwd", "fmha", "mfma", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse",
    "xmma_warp_specialized", "sm90_xmma", "nvjet", NULL};
/* FFMA first: these run on CUDA cores whatever else the name says (cuBLAS's fp32 xmma kernels
 * with TF32 off say "ffma"; sm90_xmma ones too) */
static const char *const simt_first[] = {"ffma", "sgemm", "gemv", NULL};
static const char *const simt_pats[] = {
    "dgemm", "gemmsn", "gemmk1", "splitkreduce", "scudnn", "at::native::", "cudnn::bn_", "bn_fw", "bn_bw",
    "dgrad_engine", "wgrad_alg", "nchwtonhwc", "nhwctonchw", "softmax_warp", "cunn_", "elementwise", "reduce_kernel",
    "triton_poi", "triton_red", "triton_per", NULL};

static int has_any(const char *low, const char *const *pats) {
    for (int i = 0; pats[i]; i++)
        if (strstr(low, pats[i])) return 1;
    return 0;
}

int flops_kernel_class(const char *name) {
    char low[1024];
    size_t n = name ? strlen(name) : 0;
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    if (has_any(low, simt_first)) return KC_SIMT;
    if (has_any(low, tensor_pats)) return KC_TENSOR;
    /* cuBLAS's xmma kernels name their types: a tensor type (tf32, bf16, f16, e4m3, e5m2,
     * i8) runs on the tensor cores, f32f32_f32f32_f32 alone does not say */
    if (strstr(low, "xmma") && (strstr(low, "bf16") || strstr(low, "f16") || strstr(low, "e4m3") || strstr(low, "e5m2") ||
                                strstr(low, "i8i8") || strstr(low, "tf32")))
        return KC_TENSOR;
    /* AMD Tensile: "..._MT128x128x32_MI32x32x8x1_..." is a matrix-core (MFMA) tile */
    for (const char *p = strstr(low, "_mi"); p; p = strstr(p + 1, "_mi"))
        if (isdigit((unsigned char)p[3]) && strchr(p + 3, 'x')) return KC_TENSOR;
    if (has_any(low, simt_pats)) return KC_SIMT;
    return KC_UNCLASSIFIED;
}

const char *flops_kernel_class_name(int kc) {
    return kc == KC_TENSOR ? "tensor" : kc == KC_SIMT ? "simt" : "unclassified";
}

/* Template argument i (0-based, top level) of the first '<' after p: 1 "true", 0 "false",
 * -1 anything else. */
static int template_bool(const char *p, int i) {
    p = strchr(p, '<');
    if (!p) return -1;
    int depth = 0, k = 0;
    const char *start = p + 1;
    for (const char *q = p; *q; q++) {
        if (*q == '<' || *q == '(') depth++;
        else if (*q == '>' || *q == ')') depth--;
        if ((*q == ',' && depth == 1) || depth == 0) {
            if (k == i) {
                while (*start == ' ') start++;
                size_t len = (size_t)(q - start);
                while (len && start[len - 1] == ' ') len--;
                if (len == 4 && !strncmp(start, "true", 4)) return 1;
                if (len == 5 && !strncmp(start, "false", 5)) return 0;
                return -1;
            }
            if (depth == 0) return -1;
            k++;
            start = q + 1;
        }
    }
    return -1;
}

int flops_kernel_causal(const char *name) {
    static const struct { const char *pat; int arg; } flags[] = {
        {"flash_fwd_splitkv_kernel<", 1}, {"flash_fwd_kernel<", 2}, {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<", 2},
        {"flash_bwd_dq_dk_dv_loop_kernel<", 2},
    };
    if (!name) return -1;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const char *p = strstr(name, flags[i].pat);
        if (p) return template_bool(p, flags[i].arg);
    }
    return -1;
}
