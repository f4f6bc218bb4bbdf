/* names.c: the name rules of names.h. */
#include "analysis/names.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cuda.h"

/* The words are searched in a lower-cased copy of the name's first 255 bytes (low), made
 * once per name: made per word list, the copies were 77M instructions on the request
 * thread at 30 MB of the many-names shape (100,000 long kernel names). */
static int has_any(const char *low, const char *const *words) {
    for (int k = 0; words[k]; k++)
        if (strstr(low, words[k])) return 1;
    return 0;
}

static int starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static int starts_any(const char *s, const char *const *ps) {
    for (int k = 0; ps[k]; k++)
        if (starts_with(s, ps[k])) return 1;
    return 0;
}

/* Compilation (NF_COMPILE): torch.compile's ranges and frames, and the driver's module
 * loads. Why not "inductor" alone: a compiled model's every step launches its kernels
 * through torch/_inductor/runtime/ (triton_heuristics' CachingAutotuner.run), which is the
 * launch path, not compilation. */
static int is_compile(const char *s, const char *low) {
    static const char *const words[] = {"(dynamo_timed)", "torchdynamo", "compile_fx", "convert_frame", NULL};
    static const char *const calls[] = {"cuModuleLoad", "cuLibraryLoad", "hipModuleLoad", "nvrtc", NULL};
    if (has_any(low, words) || starts_any(s, calls)) return 1;
    /* the frames every call of a compiled function runs are its launch path, not a compile:
     * dynamo's eval_frame and external_utils, AOTAutograd's runtime wrappers; inductor's
     * compile-time modules only (its runtime/, output_code and utils run every call) */
    static const char *const inductor[] = {"torch/_inductor/compile_fx", "torch/_inductor/graph.py", "torch/_inductor/scheduler",
                                           "torch/_inductor/lowering", "torch/_inductor/codegen/", "torch/_inductor/codecache",
                                           "torch/_inductor/fx_passes/", "torch/_inductor/ir.py", "torch/_inductor/select_algorithm",
                                           "torch/_inductor/autotune", "torch/_inductor/async_compile", "torch/_inductor/kernel/",
                                           "torch/_inductor/decomposition", "torch/_inductor/pattern_matcher", NULL};
    if (strstr(low, "torch/_dynamo/") && !strstr(low, "eval_frame") && !strstr(low, "external_utils")) return 1;
    if (strstr(low, "aot_autograd") && !strstr(low, "runtime_wrapper")) return 1;
    return has_any(low, inductor);
}

/* A compiled model running (NF_COMPILED): what a compiled function's every call shows. */
static int is_compiled_run(const char *low) {
    static const char *const words[] = {"torch-compiled region", "compiledfunction", "compiledfxgraph", "torch/_inductor/runtime/",
                                        "triton_heuristics", "torch/_dynamo/eval_frame", "runtime_wrapper", NULL};
    return has_any(low, words);
}

static int is_step(const char *s) {
    if (!starts_with(s, "ProfilerStep#") || !s[13]) return 0;
    size_t d = strspn(s + 13, "0123456789");
    return d > 0 && s[13 + d] == '\0';
}

unsigned name_flags_of(const char *s) {
    static const char *const comm_kernel[] = {"nccl", "rccl", NULL};
    static const char *const gemm_op[] = {"mm", "matmul", "linear", "conv", "einsum", "attention", "flash", "attn", "fmha", "varlen_fwd", NULL};
    static const char *const gemm_kernel[] = {"gemm", "xmma", "cutlass", "cublas", "s16816", "h16816", "conv", "flash", NULL};
    static const char *const attention[] = {"attention", "flash", "attn", "fmha", "varlen_fwd", NULL};
    static const char *const copy_ops[] = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone",
                                           "aten::type_as", "aten::_copy_from", "aten::_copy_from_and_resize", NULL};
    static const char *const launches[] = {"cudaLaunch", "cuLaunch", "hipLaunch", "hipModuleLaunch", "hipExtLaunch", NULL};
    static const char *const allocs[] = {"cudaMalloc", "cudaFree", "cudaHostAlloc", "cuMemAlloc", "cuMemFree", "cuMemCreate",
                                         "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree",
                                         "cuMemHostAlloc", "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipExtMalloc", NULL};
    static const char *const tokenize[] = {"tokeniz", "sentencepiece", "tiktoken", NULL};
    static const char *const gc[] = {"gc.collect", "gc_collect", "garbage collect", "garbage_collect", NULL};
    static const char *const mem_op[] = {"gather", "scatter", "index", "embedding", "aten::cat", "aten::stack", "catarraybatchedcopy",
                                         "masked_select", "aten::take", "repeat", "aten::roll", "aten::flip", "constant_pad_nd", NULL};
    unsigned f = 0;
    char low[256];
    size_t n;
    for (n = 0; s[n] && n < sizeof low - 1; n++) low[n] = (char)tolower((unsigned char)s[n]);
    low[n] = '\0';
    if (is_step(s)) f |= NF_STEP;
    if (starts_with(s, "enumerate(DataLoader)#")) f |= NF_DATALOADER;
    if (starts_with(s, "nccl:") || starts_with(s, "gloo:") || starts_with(s, "mpi:") || starts_with(s, "c10d::") ||
        !strcmp(s, "record_param_comms"))
        f |= NF_COMM_RANGE;
    if (has_any(low, comm_kernel)) f |= NF_COMM_KERNEL;
    for (int i = 0; copy_ops[i]; i++)
        if (!strcmp(s, copy_ops[i])) f |= NF_COPY_OP;
    if (has_any(low, gemm_op)) f |= NF_GEMM_OP;
    if (has_any(low, gemm_kernel)) f |= NF_GEMM_KERNEL;
    if (has_any(low, attention)) f |= NF_ATTENTION;
    if (cuda_is_sync_call(s)) f |= NF_SYNC;
    if (starts_with(s, "cudaGraphLaunch") || starts_with(s, "cuGraphLaunch") || starts_with(s, "hipGraphLaunch")) f |= NF_GRAPH_LAUNCH;
    if (starts_any(s, launches) || f & NF_GRAPH_LAUNCH || strstr(s, "Memcpy") || strstr(s, "memcpy") || strstr(s, "Memset") ||
        strstr(s, "memset"))
        f |= NF_LAUNCH;
    if (starts_any(s, allocs) || strstr(low, "empty_cache")) f |= NF_ALLOC;
    if (is_compile(s, low)) f |= NF_COMPILE;
    if (is_compiled_run(low)) f |= NF_COMPILED;
    if (has_any(low, tokenize)) f |= NF_TOKENIZE;
    if (has_any(low, gc) || !strcmp(s, "<built-in function collect>") || starts_with(low, "gc:")) f |= NF_GC;
    if (has_any(low, mem_op)) f |= NF_MEM_OP;
    if (strstr(s, "Memcpy") || strstr(s, "memcpy")) {
        if (cuda_copy_pageable(s)) f |= NF_PAGEABLE;
        if (strstr(s, "HtoD") || strstr(s, "DtoH")) f |= NF_HOST_COPY;
        if (strstr(s, "DtoD")) f |= NF_DTOD;
        if (strstr(s, "DtoH")) f |= NF_DTOH;
    }
    return f;
}

nflags_t *name_flags_all(const intern *strs, size_t *n) {
    *n = intern_count(strs);
    nflags_t *f = calloc(*n + 1, sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < *n; i++) f[i] = (nflags_t)name_flags_of(intern_str(strs, (long)i));
    return f;
}

typedef struct flags_ctx {
    const nflags_t *f;
    size_t n;
} flags_ctx;

static void fp_flags_fn(sqlite3_context *c, int argc, sqlite3_value **v) {
    (void)argc;
    const flags_ctx *x = sqlite3_user_data(c);
    sqlite3_int64 id = sqlite3_value_int64(v[0]);
    sqlite3_result_int64(c, id >= 0 && (size_t)id < x->n ? x->f[id] : 0);
}

int name_flags_sql(sqlite3 *db, const nflags_t *flags, size_t n) {
    flags_ctx *x = malloc(sizeof *x);
    if (!x) return -1;
    *x = (flags_ctx){flags, n};
    /* free(x) when the function is replaced or the connection closes */
    return sqlite3_create_function_v2(db, "fp_flags", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, x, fp_flags_fn, NULL, NULL, free) == SQLITE_OK
               ? 0
               : -1;
}
