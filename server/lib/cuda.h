/* cuda.h: the CUDA vocabulary a trace speaks, written once: copy directions and memory
 * kinds (CUPTI's and nsys's enums, and the names Kineto prints), and the runtime/driver
 * calls that block the host until the GPU is done (syncs).
 *
 * Pure functions over names; no project dependencies. The nsys importer names copies with
 * it ("Memcpy HtoD (Pageable -> Device)", Kineto's spelling) and the analysis reads those
 * names back with it, so the two cannot drift apart. */
#ifndef FP_CUDA_H
#define FP_CUDA_H

#include <stddef.h>

/* CUpti_ActivityMemcpyKind / nsys ENUM_CUDA_MEMCPY_OPER: 0 Unknown 1 HtoD 2 DtoH 3 HtoA
 * 4 AtoH 5 AtoA 6 AtoD 7 DtoA 8 DtoD 9 HtoH 10 PtoP; 11/12/13 the unified-memory HtoD,
 * DtoH, DtoD (named as those). Out of range: "Unknown". */
const char *cuda_copy_kind(long long k);
/* CUpti_ActivityMemoryKind / nsys ENUM_CUDA_MEM_KIND: 0 Pageable 1 Pinned 2 Device
 * 3 Array 4 Managed 5 Device Static 6 Managed Static 7 Unknown. Out of range: "Unknown". */
const char *cuda_mem_kind(long long k);
/* "Memcpy HtoD (Pageable -> Device)" -> "HtoD" in out; a memset (kind "gpu_memset") ->
 * "Memset"; a name without "Memcpy " is copied whole. */
void cuda_copy_direction(const char *name, const char *kind, char *out, size_t n);
/* 1 when the copy's host side is pageable memory: "(Pageable -> ...)" or "(... -> Pageable)"
 * in its name (what CUDA must stage through a pinned bounce buffer, synchronously). */
int cuda_copy_pageable(const char *name);
/* 1 when name is a runtime or driver call that blocks the host until the GPU catches up:
 * cudaMemcpy, cudaMemcpy2D/3D/Peer/ToSymbol/FromSymbol (not ...Async), cudaMemset,
 * cuda{Stream,Device,Event}Synchronize, cuMemcpy, cuMemcpyHtoD/DtoH, cu{Stream,Ctx,Event}Synchronize,
 * hipMemcpy, hip{Stream,Device,Event}Synchronize, with any _v2/_ptds suffix after a '_'. */
int cuda_is_sync_call(const char *name);
/* 1 when a kernel's name says it runs on tensor cores: an MMA shape (h884, h1688, 16816,
 * i8816, ...), hmma/imma/xmma/wmma/gmma, tensorop, flash attention, or a cuDNN tensor-core
 * convolution (tb-profiler's allow-list). A name rule: a kernel named otherwise reads 0. */
int cuda_uses_tensor_cores(const char *name);

#endif
