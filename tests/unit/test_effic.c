/* test_effic.c -- cmocka cases for server/lib/flops.c and server/lib/devices.c (the
 * efficiency pass's formulas, device table and kernel classes).
 *
 * Every expected figure is written out from its formula (flops.h) on the call's shapes, so a
 * wrong formula or a misread shape fails. The device names are every name the real traces in
 * ../shared/data/traces carry (deviceProperties, the nsys GPU tables, tests/triage's H100),
 * with their memory and SM counts, and near misses that must come out unknown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/devices.h"
#include "lib/flops.h"

static flops_out model(const char *name, const char *dims, const char *types, const char *concrete) {
    flops_out o;
    flops_model(name, dims, types, concrete, &o);
    return o;
}

#define F4 "'float', 'float', 'float', 'float', 'float'"

static void test_effic_mm(void **st) {
    (void)st;
    flops_out o = model("aten::mm", "[[64, 2048], [2048, 1000]]", "['float', 'float']", NULL);
    assert_true(o.flops == 2.0 * 64 * 1000 * 2048);
    assert_true(o.bytes == (64.0 * 2048 + 2048.0 * 1000 + 64.0 * 1000) * 4);
    assert_int_equal(o.dtype, FL_FP32);
    assert_int_equal(o.kind, FL_MATRIX);
    /* inner dimensions that disagree: unknown, never a guess */
    o = model("aten::mm", "[[64, 2048], [1024, 1000]]", "['float', 'float']", NULL);
    assert_true(o.flops < 0 && o.bytes < 0);
    /* no Input type: FLOPs known, bytes unknown */
    o = model("aten::mm", "[[64, 2048], [2048, 1000]]", NULL, NULL);
    assert_true(o.flops == 2.0 * 64 * 1000 * 2048 && o.bytes < 0);
    assert_int_equal(o.dtype, FL_DUNKNOWN);
}

/* ResNet50's fc (tb_plugin samples): addmm(bias[1000], x[32, 2048], W^T[2048, 1000]). */
static void test_effic_addmm_resnet_fc(void **st) {
    (void)st;
    flops_out o = model("aten::addmm", "[[1000], [32, 2048], [2048, 1000], [], []]", "['float', 'float', 'float', 'Scalar', 'Scalar']",
                        NULL);
    assert_true(o.flops == 2.0 * 32 * 1000 * 2048);
    assert_true(o.bytes == (1000.0 + 32 * 2048 + 2048.0 * 1000 + 32 * 1000) * 4);
}

/* HTA trace_diff's A100 bmm: [1024, 647, 96] x [1024, 96, 30]. */
static void test_effic_bmm_baddbmm(void **st) {
    (void)st;
    flops_out o = model("aten::bmm", "[[1024, 647, 96], [1024, 96, 30]]", "['float', 'float']", NULL);
    assert_true(o.flops == 2.0 * 1024 * 647 * 30 * 96);
    assert_true(o.bytes == 1024.0 * (647 * 96 + 96 * 30 + 647 * 30) * 4);
    o = model("aten::baddbmm", "[[4, 8, 16], [4, 8, 32], [4, 32, 16], [], []]", "['c10::Half', 'c10::Half', 'c10::Half', 'Scalar', 'Scalar']",
              NULL);
    assert_true(o.flops == 2.0 * 4 * 8 * 16 * 32);
    assert_true(o.bytes == (4.0 * 8 * 16 + 4 * 8 * 32 + 4 * 32 * 16 + 4 * 8 * 16) * 2);
    assert_int_equal(o.dtype, FL_HALF);
    o = model("aten::bmm", "[[4, 8, 16], [5, 16, 8]]", "['float', 'float']", NULL); /* batches differ */
    assert_true(o.flops < 0);
}

static void test_effic_linear_matmul_scaled_mm(void **st) {
    (void)st;
    flops_out o = model("aten::linear", "[[8, 128, 4096], [11008, 4096], [11008]]", "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16']",
                        NULL);
    assert_true(o.flops == 2.0 * 1024 * 11008 * 4096);
    assert_true(o.bytes == (1024.0 * 4096 + 11008.0 * 4096 + 1024.0 * 11008 + 11008) * 2);
    o = model("aten::matmul", "[[2, 64, 32], [32, 16]]", "['float', 'float']", NULL);
    assert_true(o.flops == 2.0 * 128 * 16 * 32);
    /* fp8 inputs, a bf16 output */
    o = model("aten::_scaled_mm", "[[128, 256], [256, 512], [], [], [], []]",
              "['c10::Float8_e4m3fn', 'c10::Float8_e4m3fn', 'float', 'float', '', '']", NULL);
    assert_true(o.flops == 2.0 * 128 * 512 * 256);
    assert_true(o.bytes == 128.0 * 256 + 256.0 * 512 + 128.0 * 512 * 2);
    assert_int_equal(o.dtype, FL_FP8);
}

static void test_effic_attention(void **st) {
    (void)st;
    const char *q = "[[2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512, 128], [], [], [], []]";
    const char *t = "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'Scalar', 'Scalar', 'Scalar', '']";
    double full = 2.0 * 2 * 32 * 512 * 512 * (128 + 128);
    flops_out o = model("aten::_scaled_dot_product_flash_attention", q, t, "['', '', '', '0.0', 'False', 'False', '']");
    assert_true(o.flops == full);
    assert_true(o.bytes == 4.0 * 2 * 32 * 512 * 128 * 2);
    o = model("aten::_scaled_dot_product_flash_attention", q, t, "['', '', '', '0.0', 'True', 'False', '']");
    assert_true(o.flops == full / 2); /* causal, Sq = Sk */
    o = model("aten::_scaled_dot_product_flash_attention", q, t, NULL);
    assert_true(o.flops == full); /* is_causal unknown: not discounted */
    /* decode: one query against 2048 keys, grouped K/V heads */
    o = model("aten::_scaled_dot_product_efficient_attention", "[[1, 32, 1, 128], [1, 32, 2048, 128], [1, 32, 2048, 128], []]",
              "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', '']", NULL);
    assert_true(o.flops == 2.0 * 32 * 1 * 2048 * 256);
    /* backward: 2.5x the forward, the grad_out first */
    o = model("aten::_scaled_dot_product_flash_attention_backward",
              "[[2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512]]",
              "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'float']", NULL);
    assert_true(o.flops == 2.5 * full);
    /* [B, S, H, d] layout */
    o = model("aten::_flash_attention_forward", "[[2, 512, 32, 128], [2, 512, 32, 128], [2, 512, 32, 128]]",
              "['c10::Half', 'c10::Half', 'c10::Half']", NULL);
    assert_true(o.flops == full);
}

static void test_effic_convolution_needs_concrete(void **st) {
    (void)st;
    const char *dims = "[[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []]";
    const char *types = "['float', 'float', '', 'ScalarList', 'ScalarList', 'ScalarList', 'Int']";
    flops_out o = model("aten::conv2d", dims, types, NULL);
    assert_true(o.flops < 0); /* no stride, padding, dilation, groups */
    o = model("aten::conv2d", dims, types, "['', '', '', '[2, 2]', '[3, 3]', '[1, 1]', '1']");
    assert_true(o.flops == 2.0 * 32 * 64 * 112 * 112 * 3 * 7 * 7);
    assert_true(o.bytes == (32.0 * 3 * 224 * 224 + 64.0 * 3 * 49 + 32.0 * 64 * 112 * 112) * 4);
    /* cudnn_convolution(self, weight, padding, stride, dilation, groups, ...) */
    o = model("aten::cudnn_convolution", "[[8, 64, 56, 56], [256, 64, 1, 1], [], [], [], [], [], [], []]", F4,
              "['', '', '[0, 0]', '[1, 1]', '[1, 1]', '1', 'False', 'False', 'True']");
    assert_true(o.flops == 2.0 * 8 * 256 * 56 * 56 * 64);
    /* groups: a depthwise 3x3 */
    o = model("aten::convolution", "[[8, 32, 28, 28], [32, 1, 3, 3], [32], [], [], [], [], [], []]", F4,
              "['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', 'False', '[0, 0]', '32']");
    assert_true(o.flops == 2.0 * 8 * 32 * 28 * 28 * 1 * 9);
    /* transposed: not modelled */
    o = model("aten::convolution", "[[8, 32, 28, 28], [32, 16, 3, 3], [], [], [], [], [], [], []]", F4,
              "['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', 'True', '[0, 0]', '1']");
    assert_true(o.flops < 0);
}

static void test_effic_elementwise_and_copies(void **st) {
    (void)st;
    flops_out o = model("aten::add", "[[32, 256, 56, 56], [256, 1, 1], []]", "['float', 'float', 'Scalar']", NULL);
    double n = 32.0 * 256 * 56 * 56;
    assert_true(o.flops == n);
    assert_true(o.bytes == (n + 256) * 4 + n * 4);
    assert_int_equal(o.kind, FL_VECTOR);
    o = model("aten::add_", "[[32, 256, 56, 56], [32, 256, 56, 56], []]", "['float', 'float', 'Scalar']", NULL);
    assert_true(o.flops == n && o.bytes == 3 * n * 4);
    o = model("aten::addcmul_", "[[1000], [1000], [1000], []]", "['float', 'float', 'float', 'Scalar']", NULL);
    assert_true(o.flops == 2000 && o.bytes == 4000.0 * 4);
    o = model("aten::mul", "[[4, 3], [5, 3]]", "['float', 'float']", NULL); /* does not broadcast */
    assert_true(o.flops < 0);
    o = model("aten::copy_", "[[32, 3, 224, 224], [32, 3, 224, 224], []]", "['float', 'float', 'Scalar']", NULL);
    assert_true(o.flops == 0 && o.bytes == 2 * 32.0 * 3 * 224 * 224 * 4);
    assert_int_equal(o.kind, FL_COPY);
    o = model("aten::fill_", "[[1024], []]", "['c10::Half', 'Scalar']", NULL);
    assert_true(o.flops == 0 && o.bytes == 2048);
    o = model("aten::softmax", "[[8, 1024], [], []]", "['float', 'Scalar', '']", NULL);
    assert_true(o.flops < 0 && o.bytes < 0); /* not modelled */
    assert_int_equal(o.kind, FL_NONE);
    o = model("aten::mm", "not a list", "['float']", NULL);
    assert_true(o.flops < 0);
    o = model("aten::mm", "[[64, -1], [1, 2]]", "['float', 'float']", NULL);
    assert_true(o.flops < 0);
}

static void test_effic_dtypes(void **st) {
    (void)st;
    assert_int_equal(flops_elem_size("float"), 4);
    assert_int_equal(flops_elem_size("c10::BFloat16"), 2);
    assert_int_equal(flops_elem_size("c10::Half"), 2);
    assert_int_equal(flops_elem_size("c10::Float8_e5m2"), 1);
    assert_int_equal(flops_elem_size("double"), 8);
    assert_int_equal(flops_elem_size("long int"), 8);
    assert_int_equal(flops_elem_size("Scalar"), 0);
    assert_int_equal(flops_elem_size(""), 0);
    assert_int_equal(flops_dtype("c10::BFloat16"), FL_HALF);
    assert_int_equal(flops_dtype("c10::Float8_e4m3fn"), FL_FP8);
    assert_int_equal(flops_dtype("long int"), FL_OTHER);
    assert_string_equal(flops_dtype_name(FL_FP32), "fp32");
}

static const char *row_of(const char *name, double gib, int sms, int maj, int min) {
    device_info d = {name, gib * 1024.0 * 1024.0 * 1024.0, sms, maj, min};
    const char *why;
    const device_row *r = devices_match(&d, &why);
    if (!r) assert_true(why && why[0]);
    return r ? r->id : NULL;
}
static double bytes_gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

static void test_effic_devices_of_the_real_traces(void **st) {
    (void)st;
    assert_string_equal(row_of("Tesla V100-SXM2-32GB", bytes_gib(34089730048), 80, 7, 0), "v100-sxm2");
    assert_string_equal(row_of("Tesla V100-SXM2-16GB", bytes_gib(16945512448), 80, 7, 0), "v100-sxm2");
    assert_string_equal(row_of("Tesla V100-DGXS-32GB", bytes_gib(34084028416), 80, 7, 0), "v100-sxm2");
    assert_string_equal(row_of("NVIDIA A100-PG509-200", bytes_gib(42297524224), 108, 8, 0), "a100-sxm4-40gb");
    assert_string_equal(row_of("NVIDIA A100-PG509-200", bytes_gib(42505273344), 108, 8, 0), "a100-sxm4-40gb");
    assert_string_equal(row_of("NVIDIA A100-SXM4-80GB", bytes_gib(84990623744), 108, 8, 0), "a100-sxm4-80gb");
    assert_string_equal(row_of("NVIDIA A100-SXM4-40GB", bytes_gib(42297524224), 108, 8, 0), "a100-sxm4-40gb");
    assert_string_equal(row_of("AMD Radeon Graphics", bytes_gib(68702699520), 104, 9, 0), "mi250-gcd");
    assert_string_equal(row_of("NVIDIA H100 80GB HBM3", bytes_gib(85029158912), 132, 9, 0), "h100-sxm5-80gb");
    /* the other rows, as their drivers name them */
    assert_string_equal(row_of("NVIDIA H100 PCIe", 79.6, 114, 9, 0), "h100-pcie-80gb");
    assert_string_equal(row_of("NVIDIA H200", 139.8, 132, 9, 0), "h200-sxm-141gb");
    assert_string_equal(row_of("NVIDIA A100 80GB PCIe", 79.2, 108, 8, 0), "a100-pcie-80gb");
    assert_string_equal(row_of("NVIDIA A100-PCIE-40GB", 39.4, 108, 8, 0), "a100-pcie-40gb");
    assert_string_equal(row_of("NVIDIA A10", 22.1, 72, 8, 6), "a10");
    assert_string_equal(row_of("NVIDIA L4", 22.0, 58, 8, 9), "l4");
    assert_string_equal(row_of("NVIDIA L40S", 44.4, 142, 8, 9), "l40s");
    assert_string_equal(row_of("AMD Instinct MI250", 64, 104, 9, 0), "mi250-gcd");
    assert_string_equal(row_of("AMD Instinct MI300X", 191.5, 304, 9, 4), "mi300x");
    assert_string_equal(row_of("Tesla V100-PCIE-16GB", 15.8, 80, 7, 0), "v100-pcie");
}

static void test_effic_device_near_misses_are_unknown(void **st) {
    (void)st;
    assert_null(row_of("NVIDIA RTX A1000", 8, 16, 8, 6));       /* "a100" inside a longer token */
    assert_null(row_of("NVIDIA A10G", 22, 80, 8, 6));           /* not the A10 */
    assert_null(row_of("NVIDIA L40", 44.4, 142, 8, 9));         /* L40 is not L40S, nor L4 */
    assert_null(row_of("NVIDIA A100X", 79, 108, 8, 0));
    assert_null(row_of("NVIDIA A100 80GB", 79, 108, 8, 0));     /* SXM or PCIe: the bandwidth differs */
    assert_null(row_of("NVIDIA H100 NVL", 93.1, 132, 9, 0));
    assert_null(row_of("NVIDIA H100 80GB HBM3", 79.2, 114, 9, 0)); /* SM count of no H100 80GB SXM */
    assert_null(row_of("NVIDIA GH200 480GB", 94, 132, 9, 0));
    assert_null(row_of("AMD Radeon Graphics", 16, 60, 10, 3));  /* a desktop Radeon */
    assert_null(row_of("AMD Instinct MI250X", 64, 110, 9, 0));
    assert_null(row_of("Tesla V100", 32, 80, 7, 0));           /* no form factor */
    assert_null(row_of("NVIDIA GeForce RTX 4090", 24, 128, 8, 9));
    assert_null(row_of("", 80, 132, 9, 0));
    assert_null(row_of("NVIDIA A100-SXM4-80GB", 0, 108, 8, 0)); /* memory not recorded */
    size_t n;
    const device_row *t = devices_table(&n);
    assert_true(n >= 14);
    for (size_t i = 0; i < n; i++) assert_true(t[i].fp32 > 0 && t[i].bf16 > 0 && t[i].bw > 0);
}

static void test_effic_kernel_classes(void **st) {
    (void)st;
    static const char *const tensor[] = {
        "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel",
        "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4", "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "volta_h884gemm_64x64_ldg8_nn", "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)",
        "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_GRVW8", "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize96x128x32",
        NULL};
    static const char *const simt[] = {
        "volta_sgemm_128x64_nn", "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int)",
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)",
        "volta_scudnn_128x64_relu_interior_nn_v1", "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>()",
        "triton_poi_fused_add_0", "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float)",
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)", NULL};
    static const char *const unknown[] = {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                          "triton_tem_fused_mm_0", "my_custom_kernel",
                                          "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3", "", NULL};
    for (int i = 0; tensor[i]; i++) assert_int_equal(flops_kernel_class(tensor[i]), KC_TENSOR);
    for (int i = 0; simt[i]; i++) assert_int_equal(flops_kernel_class(simt[i]), KC_SIMT);
    for (int i = 0; unknown[i]; i++) assert_int_equal(flops_kernel_class(unknown[i]), KC_UNCLASSIFIED);
    assert_string_equal(flops_kernel_class_name(KC_UNCLASSIFIED), "unclassified");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_effic_mm),
        cmocka_unit_test(test_effic_addmm_resnet_fc),
        cmocka_unit_test(test_effic_bmm_baddbmm),
        cmocka_unit_test(test_effic_linear_matmul_scaled_mm),
        cmocka_unit_test(test_effic_attention),
        cmocka_unit_test(test_effic_convolution_needs_concrete),
        cmocka_unit_test(test_effic_elementwise_and_copies),
        cmocka_unit_test(test_effic_dtypes),
        cmocka_unit_test(test_effic_devices_of_the_real_traces),
        cmocka_unit_test(test_effic_device_near_misses_are_unknown),
        cmocka_unit_test(test_effic_kernel_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
