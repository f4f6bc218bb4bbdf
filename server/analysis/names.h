/* names.h: what a trace's names say, decided once per name (analysis-internal).
 *
 * The suspect list reads meaning from names: a DataLoader range, a collective, a copy or
 * cast op, a GEMM, a blocking sync call, a pageable copy, an allocator or compiler call, a
 * tokenizer, the garbage collector, a data-movement op. names.c owns those rules (the
 * lists are tests/triage/oracle.py's, which the labelled corpus was checked with) and
 * computes every string's flags in one pass over the upload's string table, so the walk
 * and the SQL (fp_flags(name)) test a bit, not a string. */
#ifndef FP_NAMES_H
#define FP_NAMES_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/intern.h"

enum {
    NF_STEP = 1 << 0,        /* ProfilerStep#<digits> */
    NF_DATALOADER = 1 << 1,  /* enumerate(DataLoader)#... */
    NF_COMM_RANGE = 1 << 2,  /* nccl:..., gloo:..., mpi:..., c10d::..., record_param_comms */
    NF_COMM_KERNEL = 1 << 3, /* a kernel name with nccl or rccl (any case) */
    NF_COPY_OP = 1 << 4,     /* aten::to, _to_copy, copy_, contiguous, clone, type_as, _copy_from(_and_resize) */
    NF_GEMM_OP = 1 << 5,     /* an op name with mm, matmul, linear, conv, einsum, attention, flash, attn, fmha or varlen_fwd */
    NF_GEMM_KERNEL = 1 << 6, /* a kernel name with gemm, xmma, cutlass, cublas, s16816, h16816, conv or flash */
    NF_SYNC = 1 << 7,        /* a runtime/driver call that blocks the host until the GPU is done */
    NF_PAGEABLE = 1 << 8,    /* a copy to or from pageable host memory ("Pageable" in its name) */
    NF_HOST_COPY = 1 << 9,   /* a copy between host and device (HtoD or DtoH in its name) */
    NF_DTOD = 1 << 10,       /* a device-to-device copy (DtoD in its name) */
    NF_ATTENTION = 1 << 11,  /* attention, flash, attn, fmha or varlen_fwd in the name */
    NF_DTOH = 1 << 12,       /* a device-to-host copy (DtoH in its name) */
    NF_GRAPH_LAUNCH = 1 << 13, /* a call that launches a graph: cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch (any suffix) */
    NF_LAUNCH = 1 << 14,     /* a call that launches GPU work or copies: cudaLaunch*, cuLaunch*, hipLaunch*, hipModuleLaunch*,
                              * hipExtLaunch*, graph launches, and any name with Memcpy / Memset (its time is its op's) */
    NF_ALLOC = 1 << 15,      /* the device or pinned allocator: cudaMalloc*, cudaFree*, cudaHostAlloc, cuMemAlloc*, cuMemFree*,
                              * cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemAddressReserve/Free, cuMemHostAlloc,
                              * hipMalloc*, hipFree*, hipHostMalloc, hipHostFree; or "empty_cache" in the name */
    NF_COMPILE = 1 << 16,    /* compilation: "(dynamo_timed)", "torchdynamo", "compile_fx", "convert_frame"; "torch/_dynamo/"
                              * but eval_frame and external_utils; "aot_autograd" but runtime_wrapper; inductor's compile-time
                              * modules (torch/_inductor/ compile_fx, graph.py, scheduler, lowering, codegen/, codecache,
                              * fx_passes/, ir.py, select_algorithm, autotune, async_compile, kernel/, decomposition,
                              * pattern_matcher: not its runtime/, output_code, utils); module loads and JIT calls:
                              * cuModuleLoad*, cuLibraryLoad*, hipModuleLoad*, nvrtc* */
    NF_TOKENIZE = 1 << 17,   /* a tokenizer: "tokeniz" (tokenizer, tokenization, detokenize), "sentencepiece", "tiktoken" */
    NF_GC = 1 << 18,         /* the garbage collector: "gc.collect", "gc_collect", "garbage collect", "garbage_collect",
                              * "<built-in function collect>", or a name starting "gc:" */
    NF_COMPILED = 1 << 20,   /* a compiled model running: "Torch-Compiled Region", "CompiledFunction", "CompiledFxGraph",
                              * "torch/_inductor/runtime/", "triton_heuristics", "torch/_dynamo/eval_frame", "runtime_wrapper" */
    NF_MEM_OP = 1 << 19,     /* data movement posing as model work: "gather", "scatter", "index", "embedding", "aten::cat",
                              * "aten::stack", "catarraybatchedcopy", "masked_select", "aten::take", "repeat", "aten::roll",
                              * "aten::flip", "constant_pad_nd" */
};
typedef uint32_t nflags_t;

/* Flags of one name (pure: the rules above). */
unsigned name_flags_of(const char *name);

/* Flags of every string of strs, indexed by string id (calloc'd, n entries): NULL when out
 * of memory. */
nflags_t *name_flags_all(const intern *strs, size_t *n);

/* Registers fp_flags(id) on db: the flags of string id (0 past the table). */
int name_flags_sql(sqlite3 *db, const nflags_t *flags, size_t n);

#endif
