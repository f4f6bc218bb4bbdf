/* gen_trace.c: writes a synthetic, deterministic PyTorch-profiler (Kineto) trace for the benchmarks.
 *
 *   cc -O2 -o bench/out/gen_trace bench/gen_trace.c
 *   gen_trace [--shape llm|flat|cpu|threads|names] [--threads N] [-n EVENTS] [-s BYTES[K|M|G]] [--seed N] [-z] [-o FILE]
 *
 *   --shape S   what kind of run the trace is of (default llm; all below, issue 24):
 *               llm      the decoder-only LLM described below
 *               flat     eager inference, one kernel per op: cpu_op -> cudaLaunchKernel -> kernel
 *                        (+ its ac2g flow pair), ops in ProfilerStep#k ranges of 2,000
 *               cpu      the LLM's CPU side alone: nested cpu_ops and [memory], no runtime
 *                        calls, no GPU events, no deviceProperties
 *               threads  flat, the ops spread over 384 tids of one process (a thread pool)
 *   --threads N the threads shape's tids (default 384; the server's --max-tracks is 10,000)
 *               names    flat, each kernel's name one of 100,000 distinct templated names
 *                        (all of them once the trace has 100,000 kernels: -s 150M)
 *   -n N        stop after about N events (default 1000000, ~300 MB); stops at the next layer
 *   -s BYTES    stop once about BYTES of (uncompressed) JSON are written; overrides -n
 *   --seed N    PRNG seed (default 1); the same seed and size give the same bytes
 *   -z          pipe the output through `gzip -c` (FILE should then end in .gz)
 *   -o FILE     output file (default stdout)
 *
 * Shape of the trace, like `torch.profiler` + Kineto 2.x on a decoder-only LLM:
 *   ProfilerStep#k (user_annotation) per generate() call
 *     prefill (user_annotation), then DECODE x decode_step (user_annotation)
 *       LAYERS x transformer layer: aten::layer_norm, aten::linear -> aten::t/aten::addmm,
 *       aten::scaled_dot_product_attention, aten::add, aten::gelu, aten::copy_ ...
 *         cudaLaunchKernel (cuda_runtime, correlation + External id) -> kernel on pid 0 / tid 7
 *         ac2g flow s/f pairs, [memory] instant events, HtoD gpu_memcpy for the input ids
 *   plus gpu_user_annotation ranges on the GPU row, ph "M" process/thread names, deviceProperties.
 * ts/dur are microseconds with 3 decimals; the CPU row is written first in each step, then the GPU row,
 * as Kineto does per profiling window. Everything comes from one xorshift64* PRNG. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CPU_PID 2841
#define CPU_TID 2841
#define GPU_PID 0
#define GPU_TID 7
#define LAYERS 32
#define DECODE 48
#define HIDDEN 4096
#define FFN 11008

static uint64_t rng_state = 1;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}
/* uniform in [lo, hi) */
static double urand(double lo, double hi) { return lo + (hi - lo) * ((double)(rnd() >> 11) / 9007199254740992.0); }
/* rounds to the 3 decimals the file carries, so that parent/child arithmetic is exact in the file */
static double r3(double us) { return (double)(long long)(us * 1000.0 + 0.5) / 1000.0; }

enum kind { K_CPU_OP, K_ANN, K_RT, K_KERNEL, K_MEMCPY, K_MEM, K_FLOW_S, K_FLOW_F, K_GPU_ANN };

typedef struct {
    enum kind kind;
    const char *name;
    double ts, dur;
    long long ext, corr, bytes, addr, total_alloc;
    const char *shape; /* "Input Dims" or NULL */
    int kernel;      /* index into kernels[] */
    int ev_idx;
    int tid;         /* CPU-row events: the tid (0: CPU_TID) */
} event;

typedef struct {
    const char *name;
    int grid[3], block[3], regs, smem;
    double lo, hi; /* duration range, us */
} kernel_t;

static const kernel_t kernels[] = {
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)",
     {8, 1, 1}, {128, 1, 1}, 30, 0, 3.0, 5.0},
    {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     {32, 1, 1}, {384, 1, 1}, 168, 213248, 18.0, 26.0},
    {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, float, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, float> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
     {1, 32, 8}, {128, 1, 1}, 255, 65536, 9.0, 14.0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     {64, 1, 1}, {128, 1, 1}, 24, 0, 1.8, 2.6},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
     {172, 1, 1}, {128, 1, 1}, 28, 0, 2.2, 3.4},
    {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
     {86, 1, 1}, {384, 1, 1}, 168, 229376, 40.0, 55.0},
    {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)",
     {16, 1, 1}, {128, 1, 1}, 22, 0, 1.5, 2.2},
};
enum { KN_LN, KN_GEMM, KN_FLASH, KN_ADD, KN_GELU, KN_GEMM_FFN, KN_COPY };

/* "Input Dims" values; index S_* */
static const char *const shapes[] = {
    "[[8, 4096], [4096], [4096], [], []]",             /* layer_norm */
    "[[8, 4096], [12288, 4096], [12288]]",             /* linear qkv */
    "[[12288, 4096]]",                                 /* t */
    "[[12288], [8, 4096], [4096, 12288], [], []]",     /* addmm qkv */
    "[[8, 32, 1, 128], [8, 32, 1024, 128], [8, 32, 1024, 128], [], [], [], []]", /* sdpa */
    "[[8, 4096], [4096, 4096], [4096]]",               /* linear o */
    "[[4096, 4096]]",                                  /* t o */
    "[[4096], [8, 4096], [4096, 4096], [], []]",       /* addmm o */
    "[[8, 4096], [8, 4096], []]",                      /* add */
    "[[8, 4096], [11008, 4096], [11008]]",             /* linear up */
    "[[11008, 4096]]",
    "[[11008], [8, 4096], [4096, 11008], [], []]",
    "[[8, 11008], []]",                                /* gelu */
    "[[8, 11008], [4096, 11008], [4096]]",             /* linear down */
    "[[4096, 11008]]",
    "[[4096], [8, 11008], [11008, 4096], [], []]",
    "[[8, 1], [8, 1], []]",                            /* copy_ */
    "[[], [], [], [], [], []]",                        /* empty */
    "[[12288, 4096], [], [], []]",                     /* transpose */
    "[[12288, 4096], [], [], []]",                     /* as_strided */
};
/* the prefill variants replace the batch dim 8 by 8x512 tokens: same strings with 4096 rows */
static const char *const shapes_prefill[] = {
    "[[4096, 4096], [4096], [4096], [], []]",
    "[[4096, 4096], [12288, 4096], [12288]]",
    "[[12288, 4096]]",
    "[[12288], [4096, 4096], [4096, 12288], [], []]",
    "[[8, 32, 512, 128], [8, 32, 512, 128], [8, 32, 512, 128], [], [], [], []]",
    "[[4096, 4096], [4096, 4096], [4096]]",
    "[[4096, 4096]]",
    "[[4096], [4096, 4096], [4096, 4096], [], []]",
    "[[4096, 4096], [4096, 4096], []]",
    "[[4096, 4096], [11008, 4096], [11008]]",
    "[[11008, 4096]]",
    "[[11008], [4096, 4096], [4096, 11008], [], []]",
    "[[4096, 11008], []]",
    "[[4096, 11008], [4096, 11008], [4096]]",
    "[[4096, 11008]]",
    "[[4096], [4096, 11008], [11008, 4096], [], []]",
    "[[8, 512], [8, 512], []]",
    "[[], [], [], [], [], []]",
    "[[12288, 4096], [], [], []]",
    "[[12288, 4096], [], [], []]",
};
enum { S_LN, S_LIN_QKV, S_T_QKV, S_ADDMM_QKV, S_SDPA, S_LIN_O, S_T_O, S_ADDMM_O, S_ADD, S_LIN_UP, S_T_UP, S_ADDMM_UP,
       S_GELU, S_LIN_DOWN, S_T_DOWN, S_ADDMM_DOWN, S_COPY, S_EMPTY, S_TRANSPOSE, S_AS_STRIDED };

/* ---- the per-step event buffer ---- */
static event *evs;
static size_t nev, cap;
static long long next_ext = 1, next_corr = 1, next_ev_idx = 0;
static long long total_alloc = 1LL << 33;
static int prefill_mode;

enum shape { SH_LLM, SH_FLAT, SH_CPU, SH_THREADS, SH_NAMES };
static enum shape shape = SH_LLM;
static int cur_tid;                 /* the tid push() gives CPU-row events (0: CPU_TID) */
static const char *kernel_name;     /* launch(): the kernel's name instead of kernels[kn].name */

static event *push(enum kind k, const char *name, double ts, double dur) {
    if (nev == cap) {
        cap = cap ? cap * 2 : 1 << 16;
        evs = realloc(evs, cap * sizeof *evs);
        if (!evs) { perror("gen_trace: realloc"); exit(1); }
    }
    event *e = &evs[nev++];
    memset(e, 0, sizeof *e);
    e->kind = k;
    e->name = name;
    e->ts = r3(ts);
    e->dur = r3(dur);
    e->shape = NULL;
    e->ev_idx = (int)(next_ev_idx++);
    e->tid = cur_tid;
    return e;
}

static const char *const *cur_shapes(void) { return prefill_mode ? shapes_prefill : shapes; }

/* The CPU clock (us) and the GPU stream's clock. */
static double cpu_t, gpu_t;

/* An op that is open: its index, so that its dur can be set when it closes. */
static size_t op_open(enum kind k, const char *name, int shape) {
    cpu_t += urand(0.8, 2.5);
    event *e = push(k, name, cpu_t, 0);
    e->ext = next_ext++;
    e->shape = shape >= 0 ? cur_shapes()[shape] : NULL;
    return (size_t)(e - evs);
}
static void op_close(size_t i) {
    cpu_t += urand(0.5, 1.5);
    evs[i].dur = r3(r3(cpu_t) - evs[i].ts);
}

/* cudaLaunchKernel + the kernel + the ac2g flow pair, inside the op with External id `ext`. */
static void launch(long long ext, int kn) {
    cpu_t += urand(0.4, 1.0);
    if (shape == SH_CPU) { /* the op computes on the CPU instead */
        cpu_t += urand(3.0, 30.0);
        return;
    }
    double launch_ts = r3(cpu_t);
    double rt_dur = urand(3.5, 6.5);
    event *rt = push(K_RT, "cudaLaunchKernel", launch_ts, rt_dur);
    long long corr = next_corr++;
    rt->ext = ext;
    rt->corr = corr;
    event *s = push(K_FLOW_S, "ac2g", launch_ts, 0);
    s->corr = corr;
    double start = gpu_t > launch_ts + 4.0 ? gpu_t + urand(0.8, 1.6) : launch_ts + urand(4.0, 7.0);
    double scale = prefill_mode ? 24.0 : 1.0;
    if (kn == KN_FLASH && prefill_mode) scale = 60.0;
    double kd = urand(kernels[kn].lo, kernels[kn].hi) * scale;
    event *k = push(K_KERNEL, kernel_name ? kernel_name : kernels[kn].name, start, kd);
    k->ext = ext;
    k->corr = corr;
    k->kernel = kn;
    event *f = push(K_FLOW_F, "ac2g", start, 0);
    f->corr = corr;
    gpu_t = r3(start) + r3(kd);
    cpu_t += rt_dur;
}

static void mem_event(long long bytes) {
    cpu_t += urand(0.1, 0.4);
    event *m = push(K_MEM, "[memory]", cpu_t, 0);
    m->bytes = bytes;
    total_alloc += bytes;
    m->total_alloc = total_alloc;
    m->addr = 139847000000000LL + (long long)(rnd() % 4000000000ULL) * 512;
}

/* aten::linear -> aten::t -> aten::transpose -> aten::as_strided ; aten::addmm -> kernel */
static void linear(int s_lin, int s_t, int s_addmm, int kn, long long out_bytes) {
    size_t lin = op_open(K_CPU_OP, "aten::linear", s_lin);
    size_t t = op_open(K_CPU_OP, "aten::t", s_t);
    size_t tr = op_open(K_CPU_OP, "aten::transpose", S_TRANSPOSE);
    size_t as = op_open(K_CPU_OP, "aten::as_strided", S_AS_STRIDED);
    op_close(as);
    op_close(tr);
    op_close(t);
    size_t mm = op_open(K_CPU_OP, "aten::addmm", s_addmm);
    mem_event(out_bytes);
    launch(evs[mm].ext, kn);
    op_close(mm);
    op_close(lin);
}

static void simple_op(const char *name, const char *inner, int shape, int kn, long long out_bytes) {
    size_t o = op_open(K_CPU_OP, name, shape);
    size_t in = inner ? op_open(K_CPU_OP, inner, shape) : o;
    if (out_bytes) mem_event(out_bytes);
    launch(evs[in].ext, kn);
    if (inner) op_close(in);
    op_close(o);
}

static void layer(void) {
    long long tok = prefill_mode ? 4096 : 8;
    simple_op("aten::layer_norm", "aten::native_layer_norm", S_LN, KN_LN, tok * HIDDEN * 4);
    linear(S_LIN_QKV, S_T_QKV, S_ADDMM_QKV, KN_GEMM, tok * 3 * HIDDEN * 4);
    simple_op("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention", S_SDPA, KN_FLASH, tok * HIDDEN * 4);
    linear(S_LIN_O, S_T_O, S_ADDMM_O, KN_GEMM, tok * HIDDEN * 4);
    simple_op("aten::add", NULL, S_ADD, KN_ADD, tok * HIDDEN * 4);
    mem_event(-tok * 3 * HIDDEN * 4); /* qkv freed */
    simple_op("aten::layer_norm", "aten::native_layer_norm", S_LN, KN_LN, tok * HIDDEN * 4);
    linear(S_LIN_UP, S_T_UP, S_ADDMM_UP, KN_GEMM_FFN, tok * FFN * 4);
    simple_op("aten::gelu", NULL, S_GELU, KN_GELU, tok * FFN * 4);
    linear(S_LIN_DOWN, S_T_DOWN, S_ADDMM_DOWN, KN_GEMM_FFN, tok * HIDDEN * 4);
    simple_op("aten::add", NULL, S_ADD, KN_ADD, tok * HIDDEN * 4);
    mem_event(-tok * FFN * 4 * 2);
    mem_event(-tok * HIDDEN * 4 * 4);
}

/* input ids to the device: aten::to -> aten::_to_copy -> aten::copy_ -> cudaMemcpyAsync -> HtoD */
static void copy_inputs(void) {
    long long bytes = prefill_mode ? 8 * 512 * 8 : 8 * 8;
    size_t to = op_open(K_CPU_OP, "aten::to", S_COPY);
    size_t tc = op_open(K_CPU_OP, "aten::_to_copy", S_COPY);
    size_t em = op_open(K_CPU_OP, "aten::empty_strided", S_EMPTY);
    mem_event(bytes);
    op_close(em);
    size_t cp = op_open(K_CPU_OP, "aten::copy_", S_COPY);
    cpu_t += urand(0.5, 1.0);
    if (shape == SH_CPU) {
        cpu_t += urand(1.0, 3.0);
        op_close(cp);
        op_close(tc);
        op_close(to);
        return;
    }
    double ts = r3(cpu_t), dur = urand(8.0, 14.0);
    event *rt = push(K_RT, "cudaMemcpyAsync", ts, dur);
    long long corr = next_corr++;
    rt->ext = evs[cp].ext;
    rt->corr = corr;
    event *s = push(K_FLOW_S, "ac2g", ts, 0);
    s->corr = corr;
    double start = (gpu_t > ts + 3.0 ? gpu_t : ts + 3.0) + urand(0.5, 1.0);
    double md = 1.2 + (double)bytes / 6000.0;
    event *m = push(K_MEMCPY, "Memcpy HtoD (Pageable -> Device)", start, md);
    m->ext = evs[cp].ext;
    m->corr = corr;
    m->bytes = bytes;
    event *f = push(K_FLOW_F, "ac2g", start, 0);
    f->corr = corr;
    gpu_t = r3(start) + r3(md);
    cpu_t += dur;
    op_close(cp);
    op_close(tc);
    op_close(to);
}

/* A user_annotation on the CPU row and its gpu_user_annotation twin over the kernels it launched. */
typedef struct { size_t cpu; size_t first_gpu_ev; } ann;
static ann ann_open(const char *name) {
    ann a;
    a.cpu = op_open(K_ANN, name, -1);
    a.first_gpu_ev = nev;
    return a;
}
static void ann_close(ann a) {
    op_close(a.cpu);
    double lo = -1, hi = -1;
    for (size_t i = a.first_gpu_ev; i < nev; i++) {
        if (evs[i].kind != K_KERNEL && evs[i].kind != K_MEMCPY) continue;
        if (lo < 0 || evs[i].ts < lo) lo = evs[i].ts;
        if (evs[i].ts + evs[i].dur > hi) hi = evs[i].ts + evs[i].dur;
    }
    if (lo >= 0) {
        event *g = push(K_GPU_ANN, evs[a.cpu].name, lo, hi - lo);
        g->ext = evs[a.cpu].ext;
    }
}

/* ---- output ---- */
static FILE *out;
static unsigned long long bytes_out, events_out;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void emit(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(out, fmt, ap);
    va_end(ap);
    if (n < 0) { perror("gen_trace: write"); exit(1); }
    bytes_out += (unsigned long long)n;
}

static int first_event = 1;
static void sep(void) {
    emit(first_event ? "\n  {\n" : ",\n  {\n");
    first_event = 0;
    events_out++;
}

static void write_event(const event *e) {
    sep();
    switch (e->kind) {
    case K_CPU_OP:
    case K_ANN:
        emit("    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n"
             "    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %lld,\"Record function id\": 0, \"Ev Idx\": %d",
             e->kind == K_ANN ? "user_annotation" : "cpu_op", e->name, CPU_PID, e->tid ? e->tid : CPU_TID, e->ts, e->dur, e->ext, e->ev_idx);
        if (e->shape)
            emit(", \"Input Dims\": %s, \"Input type\": [\"float\", \"float\", \"float\"], \"Sequence number\": %lld, \"Fwd thread id\": 0",
                 e->shape, e->ext * 3 % 100000);
        emit("\n    }\n  }");
        break;
    case K_RT:
        emit("    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n"
             "    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %lld, \"cbid\": %d, \"correlation\": %lld\n    }\n  }",
             e->name, CPU_PID, e->tid ? e->tid : CPU_TID, e->ts, e->dur, e->ext, strcmp(e->name, "cudaLaunchKernel") ? 41 : 211, e->corr);
        break;
    case K_KERNEL: {
        const kernel_t *k = &kernels[e->kernel];
        emit("    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n"
             "    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %lld,\n      \"queued\": 0, \"device\": 0, \"context\": 1,\n"
             "      \"stream\": 7, \"correlation\": %lld,\n      \"registers per thread\": %d,\n      \"shared memory\": %d,\n"
             "      \"blocks per SM\": %.6f,\n      \"warps per SM\": %.6f,\n      \"grid\": [%d, %d, %d],\n      \"block\": [%d, %d, %d],\n"
             "      \"est. achieved occupancy %%\": %d\n    }\n  }",
             e->name, GPU_PID, GPU_TID, e->ts, e->dur, e->ext, e->corr, k->regs, k->smem,
             (double)(k->grid[0] * k->grid[1] * k->grid[2]) / 132.0,
             (double)(k->grid[0] * k->grid[1] * k->grid[2]) * (k->block[0] / 32) / 132.0, k->grid[0], k->grid[1], k->grid[2],
             k->block[0], k->block[1], k->block[2], k->regs > 128 ? 12 : 40);
        break;
    }
    case K_MEMCPY:
        emit("    \"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n"
             "    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %lld,\n      \"device\": 0, \"context\": 1,\n"
             "      \"stream\": 7, \"correlation\": %lld,\n      \"bytes\": %lld, \"memory bandwidth (GB/s)\": %.6f\n    }\n  }",
             e->name, GPU_PID, GPU_TID, e->ts, e->dur, e->ext, e->corr, e->bytes, (double)e->bytes / (e->dur * 1000.0));
        break;
    case K_MEM:
        emit("    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n"
             "    \"pid\": %d, \"tid\": %d,\n    \"ts\": %.3f,\n    \"args\": {\n      \"Total Reserved\": %lld, \"Total Allocated\": %lld, "
             "\"Bytes\": %lld, \"Addr\": %lld, \"Device Id\": 0, \"Device Type\": 1\n    }\n  }",
             CPU_PID, e->tid ? e->tid : CPU_TID, e->ts, (total_alloc / (2 << 20) + 1) * (2 << 20), e->total_alloc, e->bytes, e->addr);
        break;
    case K_FLOW_S:
        emit("    \"ph\": \"s\", \"id\": %lld, \"pid\": %d, \"tid\": %d, \"ts\": %.3f,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }",
             e->corr, CPU_PID, e->tid ? e->tid : CPU_TID, e->ts);
        break;
    case K_FLOW_F:
        emit("    \"ph\": \"f\", \"id\": %lld, \"pid\": %d, \"tid\": %d, \"ts\": %.3f,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
             e->corr, GPU_PID, GPU_TID, e->ts);
        break;
    case K_GPU_ANN:
        emit("    \"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n"
             "    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      \"External id\": %lld\n    }\n  }",
             e->name, GPU_PID, GPU_TID, e->ts, e->dur, e->ext);
        break;
    }
}


static int on_gpu_row(enum kind k) { return k == K_KERNEL || k == K_MEMCPY || k == K_FLOW_F || k == K_GPU_ANN; }

static size_t *gpu_idx;
static int by_ts(const void *a, const void *b) {
    const event *x = &evs[*(const size_t *)a], *y = &evs[*(const size_t *)b];
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    /* a range before what it covers, the longer range first, then creation order */
    if ((x->kind == K_GPU_ANN) != (y->kind == K_GPU_ANN)) return x->kind == K_GPU_ANN ? -1 : 1;
    if (x->kind == K_GPU_ANN && x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Writes the buffered step: the CPU row in start order (= creation order), then the GPU row by ts. */
static void flush_step(void) {
    size_t ng = 0;
    gpu_idx = realloc(gpu_idx, (nev + 1) * sizeof *gpu_idx);
    if (!gpu_idx) { perror("gen_trace: realloc"); exit(1); }
    for (size_t i = 0; i < nev; i++) {
        if (on_gpu_row(evs[i].kind)) gpu_idx[ng++] = i;
        else write_event(&evs[i]);
    }
    qsort(gpu_idx, ng, sizeof *gpu_idx, by_ts);
    for (size_t i = 0; i < ng; i++) write_event(&evs[gpu_idx[i]]);
    nev = 0;
}

static int nthreads = 384; /* --threads */
#define THREAD0 3000
#define NNAMES 100000

/* ---- the flat shapes: one kernel per op ---- */
typedef struct { const char *op; int shape, kn; } flat_op;
static const flat_op flat_ops[] = {
    {"aten::addmm", S_ADDMM_QKV, KN_GEMM},   {"aten::mm", S_ADDMM_UP, KN_GEMM_FFN}, {"aten::add", S_ADD, KN_ADD},
    {"aten::mul", S_ADD, KN_ADD},            {"aten::gelu", S_GELU, KN_GELU},      {"aten::native_layer_norm", S_LN, KN_LN},
    {"aten::copy_", S_COPY, KN_COPY},        {"aten::_scaled_dot_product_flash_attention", S_SDPA, KN_FLASH},
    {"aten::add_", S_ADD, KN_ADD},           {"aten::silu", S_GELU, KN_GELU},
};
static char **names; /* SH_NAMES: the distinct kernel names */

static const char *templated_name(unsigned i) {
    if (!names) {
        names = calloc(NNAMES, sizeof *names);
        if (!names) { perror("gen_trace: calloc"); exit(1); }
    }
    if (!names[i]) {
        char b[256];
        snprintf(b, sizeof b,
                 "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_%ux%u_%ux%u_nn_align%u>(Params<%u, %u>)",
                 64u << (i % 3), 64u << (i / 3 % 3), 32u << (i / 9 % 2), 3u + i / 18 % 4, 1u << (i / 72 % 4), i / 288, i);
        names[i] = strdup(b);
        if (!names[i]) { perror("gen_trace: strdup"); exit(1); }
    }
    return names[i];
}

/* One op of a flat shape: the cpu_op, its launch, its kernel. */
static void flat_one(unsigned long long op) {
    const flat_op *f = &flat_ops[rnd() % (sizeof flat_ops / sizeof flat_ops[0])];
    cur_tid = shape == SH_THREADS ? THREAD0 + (int)(op % (unsigned long long)nthreads) : 0;
    /* every name once in the first NNAMES kernels (7919 is prime to NNAMES), then again */
    kernel_name = shape == SH_NAMES ? templated_name((unsigned)(op * 7919 % NNAMES)) : NULL;
    size_t o = op_open(K_CPU_OP, f->op, f->shape);
    launch(evs[o].ext, f->kn);
    op_close(o);
    cur_tid = 0;
    kernel_name = NULL;
}

static void write_meta(void) {
    static const char *const fmt =
        "    \"name\": \"%s\", \"ph\": \"M\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d,\n    \"args\": {\n      \"%s\": %s\n    }\n  }";
    double t = 5092396094000.000;
    sep(); emit(fmt, "process_name", t, CPU_PID, 0, "name", "\"python3\"");
    sep(); emit(fmt, "process_labels", t, CPU_PID, 0, "labels", "\"CPU\"");
    sep(); emit(fmt, "process_sort_index", t, CPU_PID, 0, "sort_index", "2841");
    sep(); emit(fmt, "thread_name", t, CPU_PID, CPU_TID, "name", "\"thread 2841 (python3)\"");
    sep(); emit(fmt, "thread_sort_index", t, CPU_PID, CPU_TID, "sort_index", "2841");
    if (shape == SH_THREADS)
        for (int i = 0; i < nthreads; i++) {
            char v[64];
            snprintf(v, sizeof v, "\"pool worker %d\"", i);
            sep(); emit(fmt, "thread_name", t, CPU_PID, THREAD0 + i, "name", v);
        }
    if (shape == SH_CPU) return;
    sep(); emit(fmt, "process_name", t, GPU_PID, 0, "name", "\"python3\"");
    sep(); emit(fmt, "process_labels", t, GPU_PID, 0, "labels", "\"GPU 0\"");
    sep(); emit(fmt, "process_sort_index", t, GPU_PID, 0, "sort_index", "5000000");
    sep(); emit(fmt, "thread_name", t, GPU_PID, GPU_TID, "name", "\"stream 7 \"");
    sep(); emit(fmt, "thread_sort_index", t, GPU_PID, GPU_TID, "sort_index", "7");
}

static unsigned long long parse_size(const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) { fprintf(stderr, "gen_trace: bad size '%s'\n", s); exit(2); }
    switch (*end) {
    case 'k': case 'K': v *= 1000ULL; end++; break;
    case 'm': case 'M': v *= 1000000ULL; end++; break;
    case 'g': case 'G': v *= 1000000000ULL; end++; break;
    default: break;
    }
    if (*end) { fprintf(stderr, "gen_trace: bad size '%s'\n", s); exit(2); }
    return v;
}

static pid_t gz_pid = -1;
static FILE *open_output(const char *path, int gz) {
    if (!gz) {
        if (!path) return stdout;
        FILE *f = fopen(path, "w");
        if (!f) { perror(path); exit(1); }
        return f;
    }
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDOUT_FILENO;
    if (fd < 0) { perror(path); exit(1); }
    int p[2];
    if (pipe(p)) { perror("pipe"); exit(1); }
    gz_pid = fork();
    if (gz_pid < 0) { perror("fork"); exit(1); }
    if (gz_pid == 0) {
        dup2(p[0], STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        close(p[0]);
        close(p[1]);
        execlp("gzip", "gzip", "-c", (char *)NULL);
        perror("gen_trace: exec gzip");
        _exit(127);
    }
    close(p[0]);
    if (fd != STDOUT_FILENO) close(fd);
    FILE *f = fdopen(p[1], "w");
    if (!f) { perror("fdopen"); exit(1); }
    return f;
}

#define FLAT_STEP_OPS 2000

/* Whether the trace is as large as asked, counting the buffered step's events. */
static int over(unsigned long long max_events, unsigned long long max_bytes) {
    /* bytes per buffered event: the running average once there is one, else what a layer averages */
    double per = events_out > 10000 ? (double)bytes_out / (double)events_out : 312.0;
    return max_bytes ? (double)bytes_out + (double)nev * per >= (double)max_bytes : events_out + nev + 8 >= max_events;
}

int main(int argc, char **argv) {
    unsigned long long max_events = 1000000, max_bytes = 0, seed = 1;
    const char *path = NULL;
    int gz = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-n") && i + 1 < argc) max_events = parse_size(argv[++i]);
        else if (!strcmp(a, "-s") && i + 1 < argc) max_bytes = parse_size(argv[++i]);
        else if (!strcmp(a, "--seed") && i + 1 < argc) seed = parse_size(argv[++i]);
        else if (!strcmp(a, "-o") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(a, "-z")) gz = 1;
        else if (!strcmp(a, "--threads") && i + 1 < argc) {
            nthreads = atoi(argv[++i]);
            if (nthreads < 1) { fprintf(stderr, "gen_trace: --threads wants a count of at least 1\n"); return 2; }
        }
        else if (!strcmp(a, "--shape") && i + 1 < argc) {
            static const char *const shape_names[] = {"llm", "flat", "cpu", "threads", "names"};
            const char *v = argv[++i];
            int found = 0;
            for (int k = 0; k < 5; k++)
                if (!strcmp(v, shape_names[k])) shape = (enum shape)k, found = 1;
            if (!found) { fprintf(stderr, "gen_trace: unknown shape '%s' (llm, flat, cpu, threads, names)\n", v); return 2; }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fprintf(stdout, "usage: gen_trace [--shape llm|flat|cpu|threads|names] [--threads N] [-n EVENTS] [-s BYTES[K|M|G]] [--seed N] [-z] [-o FILE]\n");
            return 0;
        } else { fprintf(stderr, "gen_trace: unknown argument '%s' (--help)\n", a); return 2; }
    }
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    out = open_output(path, gz);
    static char obuf[1 << 20];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);

    emit("{\n  \"schemaVersion\": 1,\n");
    if (shape != SH_CPU)
        emit("  \"deviceProperties\": [\n    {\n"
         "      \"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85022736384,\n"
         "      \"computeMajor\": 9, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n"
         "      \"regsPerBlock\": 65536, \"warpSize\": 32,\n      \"sharedMemPerBlock\": 49152, \"numSms\": 132,\n"
         "      \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472\n    }\n  ],\n");
    emit("  \"cupti_version\": 24,\n  \"cuda_runtime_version\": 12040,\n  \"cuda_driver_version\": 12040,\n"
         "  \"record_shapes\": 1,\n  \"with_stack\": 0,\n  \"profile_memory\": 1,\n"
         "  \"trace_id\": \"5C4E1A2B3D4F4E6A9B8C7D6E5F4A3B2C\",\n  \"displayTimeUnit\": \"ms\",\n"
         "  \"baseTimeNanoseconds\": 1727690000000000000,\n  \"traceEvents\": [");
    write_meta();

    cpu_t = 5092396094500.0;
    gpu_t = cpu_t;
    int done = 0;
    static char step_names[1 << 14][24];
    unsigned long long nop = 0;
    for (int step = 0; !done; step++) {
        char *step_name = step_names[step % (1 << 14)];
        snprintf(step_name, sizeof step_names[0], "ProfilerStep#%d", step);
        ann st = ann_open(step_name);
        for (int k = 0; k < FLAT_STEP_OPS && shape != SH_LLM && shape != SH_CPU && !done; k++) {
            flat_one(nop++);
            done = over(max_events, max_bytes);
        }
        for (int ph = 0; ph <= DECODE && (shape == SH_LLM || shape == SH_CPU) && !done; ph++) {
            prefill_mode = ph == 0;
            ann pa = ann_open(prefill_mode ? "prefill" : "decode_step");
            copy_inputs();
            for (int l = 0; l < LAYERS; l++) {
                layer();
                if ((done = over(max_events, max_bytes))) break;
            }
            ann_close(pa);
        }
        ann_close(st);
        flush_step();
        cpu_t += urand(200.0, 400.0);
        if (gpu_t > cpu_t) cpu_t = gpu_t + 50.0;
        gpu_t = cpu_t;
    }
    sep();
    emit("    \"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\",\n    \"ts\": %.3f\n  }", r3(cpu_t));
    emit("\n],\n  \"traceName\": \"bench/gen_trace\"\n}\n");
    if (fflush(out) || (out != stdout && fclose(out))) { perror("gen_trace: write"); return 1; }
    if (gz_pid > 0) {
        int st;
        if (waitpid(gz_pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "gen_trace: gzip failed\n"); return 1; }
    }
    fprintf(stderr, "gen_trace: %llu events, %llu bytes of JSON%s\n", events_out, bytes_out, gz ? " (gzipped)" : "");
    return 0;
}
