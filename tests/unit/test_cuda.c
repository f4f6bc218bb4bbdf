/* test_cuda.c -- cmocka cases for server/lib/cuda.c's name rules (syncs, tensor cores). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/cuda.h"

/* Names Kineto and nsys print for tensor-core kernels: MMA shapes, library families, any case. */
static void test_cuda_tensor_core_names(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "volta_h884gemm_64x64_ldg8_nn", "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
        "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_32x3_nn",
        "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
        "void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_f16_128x128_32x3_nn_align8>(Params)",
        "sm90_gemm_bf16_bf16_32_warpspecialized_GMMA", "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Params)",
        "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_WMMA", NULL};
    static const char *const no[] = {
        "volta_sgemm_64x64_nn", "ampere_sgemm_32x32_sliced1x4_tn",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float)", "Memcpy HtoD (Pageable -> Device)", "", NULL};
    for (int i = 0; yes[i]; i++) assert_int_equal(cuda_uses_tensor_cores(yes[i]), 1);
    for (int i = 0; no[i]; i++) assert_int_equal(cuda_uses_tensor_cores(no[i]), 0);
}

/* A name longer than the rule's buffer is read up to it, not past it. */
static void test_cuda_tensor_core_long_name(void **state)
{
    (void)state;
    char big[4096];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(cuda_uses_tensor_cores(big), 0);
    memcpy(big, "HMMA", 4);
    assert_int_equal(cuda_uses_tensor_cores(big), 1);
}

/* The calls that block the host: each name, with a "_" suffix (_v2, _ptds) too; not the
 * async forms, not a prefix of a longer name, not names that only start alike. */
static void test_cuda_sync_calls(void **state)
{
    (void)state;
    static const char *const yes[] = {"cudaMemcpy", "cudaMemcpy2D", "cudaStreamSynchronize", "cudaDeviceSynchronize",
                                      "cuMemcpyHtoD_v2", "cuCtxSynchronize", "cudaMemcpy_ptds", "hipMemcpy",
                                      "hipDeviceSynchronize", "cuEventSynchronize", NULL};
    static const char *const no[] = {"cudaMemcpyAsync", "cudaLaunchKernel", "cudaStreamSynchronizeX", "cuLaunchKernel",
                                     "hipMemcpyAsync", "aten::mm", "Memcpy HtoD (Pageable -> Device)", "c", "h", "", NULL};
    for (int i = 0; yes[i]; i++) assert_int_equal(cuda_is_sync_call(yes[i]), 1);
    for (int i = 0; no[i]; i++) assert_int_equal(cuda_is_sync_call(no[i]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_tensor_core_names),
        cmocka_unit_test(test_cuda_tensor_core_long_name),
        cmocka_unit_test(test_cuda_sync_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
