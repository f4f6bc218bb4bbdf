// smoke.cu -- tiny CUDA program for tests/gpu/smoke.sh: one "prefill" NVTX range around a
// big matmul kernel, then 50 "decode_step" ranges each launching one small kernel. Plain
// (non-template) kernels so that the collector's small demangler names them.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

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

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "smoke: %s: %s\n", #call, cudaGetErrorString(e_));        \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main()
{
    const int n = 1024, m = 4096;
    float *a, *b, *c, *x;
    static float host[4096];
    CHECK(cudaMalloc(&a, sizeof(float) * n * n));
    CHECK(cudaMalloc(&b, sizeof(float) * n * n));
    CHECK(cudaMalloc(&c, sizeof(float) * n * n));
    CHECK(cudaMalloc(&x, sizeof(float) * m));
    CHECK(cudaMemset(a, 0, sizeof(float) * n * n));
    CHECK(cudaMemset(b, 0, sizeof(float) * n * n));
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));

    nvtxRangePushA("prefill");
    matmul_prefill<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(a, b, c, n);
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();

    for (int i = 0; i < 50; i++) {
        nvtxRangePushA("decode_step");
        decode_step_kernel<<<m / 256, 256>>>(x, m);
        CHECK(cudaStreamSynchronize(0));
        nvtxRangePop();
    }
    CHECK(cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    CHECK(cudaFree(x));
    std::printf("smoke: done (x[0]=%g)\n", host[0]);
    return 0;
}
