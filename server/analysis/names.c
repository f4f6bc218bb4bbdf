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

static int is_step(const char *s) {
    if (!starts_with(s, "ProfilerStep#") || !s[13]) return 0;
    size_t d = strspn(s + 13, "0123456789");
    return d > 0 && s[13 + d] == '\0';
}

unsigned name_flags_of(const char *s) {
    static const char *const comm_kernel[] = {"nccl", "rccl", NULL};
    static const char *const gemm_op[] = {"mm", "matmul", "linear", "conv", "einsum", "attention", "flash", NULL};
    static const char *const gemm_kernel[] = {"gemm", "xmma", "cutlass", "cublas", "s16816", "h16816", "conv", "flash", NULL};
    static const char *const attention[] = {"attention", "flash", NULL};
    static const char *const copy_ops[] = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone",
                                           "aten::type_as", "aten::_copy_from", "aten::_copy_from_and_resize", NULL};
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
    if (strstr(s, "Memcpy") || strstr(s, "memcpy")) {
        if (cuda_copy_pageable(s)) f |= NF_PAGEABLE;
        if (strstr(s, "HtoD") || strstr(s, "DtoH")) f |= NF_HOST_COPY;
        if (strstr(s, "DtoD")) f |= NF_DTOD;
        if (strstr(s, "DtoH")) f |= NF_DTOH;
    }
    return f;
}

unsigned short *name_flags_all(const intern *strs, size_t *n) {
    *n = intern_count(strs);
    unsigned short *f = calloc(*n + 1, sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < *n; i++) f[i] = (unsigned short)name_flags_of(intern_str(strs, (long)i));
    return f;
}

typedef struct flags_ctx {
    const unsigned short *f;
    size_t n;
} flags_ctx;

static void fp_flags_fn(sqlite3_context *c, int argc, sqlite3_value **v) {
    (void)argc;
    const flags_ctx *x = sqlite3_user_data(c);
    sqlite3_int64 id = sqlite3_value_int64(v[0]);
    sqlite3_result_int(c, id >= 0 && (size_t)id < x->n ? x->f[id] : 0);
}

int name_flags_sql(sqlite3 *db, const unsigned short *flags, size_t n) {
    flags_ctx *x = malloc(sizeof *x);
    if (!x) return -1;
    *x = (flags_ctx){flags, n};
    /* free(x) when the function is replaced or the connection closes */
    return sqlite3_create_function_v2(db, "fp_flags", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, x, fp_flags_fn, NULL, NULL, free) == SQLITE_OK
               ? 0
               : -1;
}
