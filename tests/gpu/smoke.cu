// smoke.cu -- the CUDA program of tests/gpu/smoke.sh.
//
//   smoke                    the workload: 2 memsets, a memcpy, one "prefill" NVTX range around a
//                            matmul, one template kernel, 50 "decode_step" ranges of one small
//                            kernel each, an event polled until ready, a memcpy back
//   smoke --sleep S          the workload, then S seconds idle (periodic-flush parts)
//   smoke --fork-exit        a child forked before any CUDA runs the workload, sleeps 2.5 s and
//                            ends with _exit (a vLLM-style worker); the parent never uses CUDA
//   smoke --bench N G R      N empty-kernel launches, then a graph of G empty-kernel nodes
//                            replayed R times: ns per launch and per graph node
//
// Every mode prints "smoke: kernels K" with the number of kernels it launched, so the checks
// can compare it with the session. Kernel names are fixed: the checks expect them exactly.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

__global__ void matmul_prefill(const float *a, const float *b, float *c, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float acc = 0.f;
        for (int k = 0; k < n; k++)
            acc += a[row * n + k] * b[k * n + col];
        c[row * n + col] = acc;
    }
}

__global__ void decode_step_kernel(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 0.5f + 1.0f;
}

// A template, as nearly all PyTorch and CUTLASS kernels are: its name needs __cxa_demangle.
template <typename T> __global__ void scale_kernel(T *x, T s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}

// Spins about ms milliseconds on the GPU, so that an event after it is not ready for a while.
__global__ void spin_kernel(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
}

__global__ void empty_kernel() {}

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "smoke: %s: %s\n", #call, cudaGetErrorString(e_));        \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static int workload()
{
    const int n = 1024, m = 4096;
    float *a, *b, *c, *x;
    static float host[4096];
    cudaEvent_t ev;
    int polls = 0, kernels = 0;
    CHECK(cudaMalloc(&a, sizeof(float) * n * n));
    CHECK(cudaMalloc(&b, sizeof(float) * n * n));
    CHECK(cudaMalloc(&c, sizeof(float) * n * n));
    CHECK(cudaMalloc(&x, sizeof(float) * m));
    CHECK(cudaMemset(a, 0, sizeof(float) * n * n));
    CHECK(cudaMemset(b, 0, sizeof(float) * n * n));
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));

    nvtxRangePushA("prefill");
    matmul_prefill<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(a, b, c, n);
    kernels++;
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
    scale_kernel<float><<<m / 256, 256>>>(x, 1.0f, m);
    kernels++;

    for (int i = 0; i < 50; i++) {
        nvtxRangePushA("decode_step");
        decode_step_kernel<<<m / 256, 256>>>(x, m);
        kernels++;
        CHECK(cudaStreamSynchronize(0));
        nvtxRangePop();
    }

    // A watchdog-style poll: cudaEventQuery until the event after a ~20 ms kernel is ready.
    CHECK(cudaEventCreate(&ev));
    spin_kernel<<<1, 1>>>(40000000LL);
    kernels++;
    CHECK(cudaEventRecord(ev, 0));
    for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        polls++;
        if (q == cudaSuccess)
            break;
        if (q != cudaErrorNotReady) {
            std::fprintf(stderr, "smoke: cudaEventQuery: %s\n", cudaGetErrorString(q));
            return 1;
        }
        usleep(200);
    }
    CHECK(cudaEventDestroy(ev));

    CHECK(cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    CHECK(cudaFree(x));
    std::printf("smoke: kernels %d event_polls %d (x[0]=%g)\n", kernels, polls, host[0]);
    std::fflush(stdout);
    return 0;
}

static double since_ns(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// Launch rate and graph replay, for the collector's overhead per launch and per graph node.
static int bench(long n, int nodes, int replays)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    long kernels = 0;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 1000; i++) // warm-up
        empty_kernel<<<1, 1, 0, s>>>();
    kernels += 1000;
    CHECK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    double launch_ns = since_ns(t0) / (double)n;
    kernels += n;

    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; i++) // warm-up
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    kernels += 3L * nodes;
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < replays; r++)
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    double node_ns = since_ns(t0) / ((double)replays * nodes);
    kernels += (long)replays * nodes;
    std::printf("smoke: bench launches %ld ns_per_launch %.1f graph_nodes %d replays %d "
                "ns_per_node %.1f\n",
                n, launch_ns, nodes, replays, node_ns);
    std::printf("smoke: kernels %ld\n", kernels);
    std::fflush(stdout);
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--sleep") == 0) {
        int rc = workload();
        if (rc == 0)
            std::this_thread::sleep_for(std::chrono::milliseconds((long)(std::atof(argv[2]) * 1000)));
        return rc;
    }
    if (argc == 2 && std::strcmp(argv[1], "--fork-exit") == 0) {
        pid_t c = fork();
        int st = 0;
        if (c == 0) {
            int rc = workload();
            if (rc == 0) {
                std::printf("smoke: worker %d sleeps, then _exit\n", (int)getpid());
                std::fflush(stdout);
                std::this_thread::sleep_for(std::chrono::milliseconds(2500));
            }
            _exit(rc);
        }
        waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (argc == 5 && std::strcmp(argv[1], "--bench") == 0)
        return bench(std::atol(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
    if (argc != 1) {
        std::fprintf(stderr, "usage: smoke [--sleep S | --fork-exit | --bench N G R]\n");
        return 2;
    }
    return workload();
}
