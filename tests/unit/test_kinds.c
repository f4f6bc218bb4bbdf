/* test_kinds.c -- cmocka cases for server/analysis/kinds.c (issue 48: the kind of work of a
 * GPU activity, tests/triage/oracle.py's work_kind) and, beside it, the unit the math ran on
 * (lib/flops.c's kernel classes: CUDA cores vs tensor cores, which math_below_roof reads
 * through the efficiency pass).
 *
 * The kernel names are those real traces and cuBLAS / cuDNN / CUTLASS builds carry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/kinds.h"
#include "lib/flops.h"

/* GEMMs on CUDA cores (FFMA, sgemm, GEMV) and on tensor cores (nvjet, xmma, hmma) are math
 * by their names, whatever op launched them; their unit is the kernel class. */
static void test_kinds_math_units(void **st) {
    (void)st;
    static const char *const simt[] = {
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__51a_cublas",
        "ampere_sgemm_128x64_nn", "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(...)", NULL};
    static const char *const tensor[] = {"nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
                                         "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn",
                                         NULL};
    for (int i = 0; simt[i]; i++) {
        assert_int_equal(wk_kernel_kind(simt[i]), WK_MATH);
        assert_int_equal(wk_activity(WA_KERNEL, simt[i], "aten::add"), WK_MATH);
        assert_int_equal(flops_kernel_class(simt[i]), KC_SIMT);
    }
    for (int i = 0; tensor[i]; i++) {
        assert_int_equal(wk_kernel_kind(tensor[i]), WK_MATH);
        assert_int_equal(flops_kernel_class(tensor[i]), KC_TENSOR);
    }
    assert_int_equal(flops_kernel_class("volta_h884cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1 hmma"), KC_TENSOR);
    assert_int_equal(wk_kernel_kind("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(Flash_fwd_params)"), WK_MATH);
}

/* Layout conversions are data movement even under a convolution; collectives are
 * communication; memcpy and memset are data movement whatever their name. */
static void test_kinds_layout_comm_copies(void **st) {
    (void)st;
    assert_int_equal(wk_activity(WA_KERNEL, "void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>(...)",
                                 "aten::cudnn_convolution"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_activity(WA_KERNEL, "void nhwcToNchwKernel<float, __half, float, true, false>(...)", "aten::cudnn_convolution"),
                     WK_DATA_MOVEMENT);
    assert_true(wk_layout_kernel("cudnn::ops::nchwToNhwcKernel"));
    assert_false(wk_layout_kernel("ampere_sgemm_128x64_nn"));
    assert_int_equal(wk_activity(WA_KERNEL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                 "nccl:all_reduce"), WK_COMMUNICATION);
    assert_int_equal(wk_activity(WA_MEMCPY, "Memcpy DtoD (Device -> Device)", NULL), WK_DATA_MOVEMENT);
    assert_int_equal(wk_activity(WA_MEMSET, "Memset (Device)", NULL), WK_DATA_MOVEMENT);
}

/* A kernel whose name does not say takes its op's kind; with no op, the elementwise kernel
 * families are elementwise, anything else other. */
static void test_kinds_by_op(void **st) {
    (void)st;
    const char *ew = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(...)";
    assert_int_equal(wk_kernel_kind(ew), -1);
    assert_int_equal(wk_activity(WA_KERNEL, ew, "aten::add"), WK_ELEMENTWISE);
    assert_int_equal(wk_activity(WA_KERNEL, ew, "aten::copy_"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_activity(WA_KERNEL, ew, "aten::contiguous"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_activity(WA_KERNEL, ew, NULL), WK_ELEMENTWISE);
    assert_int_equal(wk_activity(WA_KERNEL, "void at::native::reduce_kernel<512, 1>(...)", NULL), WK_ELEMENTWISE);
    assert_int_equal(wk_activity(WA_KERNEL, "my_custom_kernel", NULL), WK_OTHER);
    assert_int_equal(wk_activity(WA_KERNEL, "my_custom_kernel", "aten::nonzero"), WK_OTHER);
    assert_int_equal(wk_op_kind("aten::roll"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_op_kind("aten::cat"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_op_kind("aten::index_select"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_op_kind("aten::embedding"), WK_DATA_MOVEMENT);
    assert_int_equal(wk_op_kind("vllm::rotary_embedding"), WK_ELEMENTWISE);
    assert_int_equal(wk_op_kind("aten::addmm"), WK_MATH);
    assert_int_equal(wk_op_kind("aten::_scaled_dot_product_flash_attention"), WK_MATH);
    assert_int_equal(wk_op_kind("aten::fill_"), WK_ELEMENTWISE);
    assert_int_equal(wk_op_kind("aten::zero_"), WK_ELEMENTWISE);
    assert_int_equal(wk_op_kind("aten::eq"), WK_ELEMENTWISE);
    assert_int_equal(wk_op_kind("aten::native_layer_norm"), WK_ELEMENTWISE);
    assert_int_equal(wk_op_kind("aten::unique"), -1);
    assert_int_equal(wk_op_kind("aten::topk"), -1);
    assert_true(wk_addressing_op("aten::gather"));
    assert_false(wk_addressing_op("vllm::rotary_embedding"));
    assert_string_equal(wk_name(WK_DATA_MOVEMENT), "data_movement");
    assert_string_equal(wk_name(WK_OTHER), "other");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_math_units),
        cmocka_unit_test(test_kinds_layout_comm_copies),
        cmocka_unit_test(test_kinds_by_op),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
