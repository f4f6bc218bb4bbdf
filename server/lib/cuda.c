/* cuda.c: the CUDA names of cuda.h. */
#include "lib/cuda.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *cuda_copy_kind(long long k) {
    static const char *const kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
                                        "DtoA",    "DtoD", "HtoH", "PtoP", "HtoD", "DtoH", "DtoD"};
    return k >= 0 && k < (long long)(sizeof kinds / sizeof kinds[0]) ? kinds[k] : "Unknown";
}

const char *cuda_mem_kind(long long k) {
    static const char *const kinds[] = {"Pageable", "Pinned", "Device", "Array", "Managed", "Device Static",
                                        "Managed Static", "Unknown"};
    return k >= 0 && k < (long long)(sizeof kinds / sizeof kinds[0]) ? kinds[k] : "Unknown";
}

void cuda_copy_direction(const char *name, const char *kind, char *out, size_t n) {
    if (!strcmp(kind, "gpu_memset")) { snprintf(out, n, "Memset"); return; }
    const char *p = strstr(name, "Memcpy ");
    if (!p) { snprintf(out, n, "%s", name); return; }
    p += 7;
    size_t len = strcspn(p, " (");
    snprintf(out, n, "%.*s", (int)len, p);
}

int cuda_copy_pageable(const char *name) {
    const char *p = strchr(name, '(');
    return p && strstr(p, "Pageable") != NULL;
}

int cuda_is_sync_call(const char *name) {
    static const char *const sync[] = {"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpyToSymbol",
                                       "cudaMemcpyFromSymbol", "cudaMemset", "cudaStreamSynchronize", "cudaDeviceSynchronize",
                                       "cudaEventSynchronize", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpy", "cuStreamSynchronize",
                                       "cuCtxSynchronize", "cuEventSynchronize", "hipMemcpy", "hipStreamSynchronize",
                                       "hipDeviceSynchronize", "hipEventSynchronize", NULL};
    /* every entry starts "cu" or "hip": most names (kernels, aten ops) leave here, not after
     * 20 compares (a many-names trace flags 100,000 names before its analysis) */
    if (!(name[0] == 'c' && name[1] == 'u') && !(name[0] == 'h' && name[1] == 'i')) return 0;
    for (int i = 0; sync[i]; i++) {
        size_t l = strlen(sync[i]);
        if (!strncmp(name, sync[i], l) && (name[l] == '\0' || name[l] == '_')) return 1;
    }
    return 0;
}

int cuda_uses_tensor_cores(const char *name) {
    /* tb-profiler's allow-list (torch_tb_profiler/profiler/tensor_core.py, after PyProf's
     * tc.py): MMA shapes and the library families that only exist as tensor-core code. */
    static const char *const tc[] = {"h884", "s884", "h1688", "s1688", "16816", "i8816", "16832", "hmma", "imma", "xmma", "wmma",
                                     "gmma", "tensorop", "tensor_op", "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel",
                                     "conv1x1", "conv2d_c1_k1", "direct_group", "flash_fwd", "flash_bwd", NULL};
    char low[512];
    size_t n = strlen(name);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    for (int i = 0; tc[i]; i++)
        if (strstr(low, tc[i])) return 1;
    return 0;
}
