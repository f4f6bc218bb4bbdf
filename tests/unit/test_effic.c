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
    assert_int_equal(o.dtype, FL_FP16);
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
    assert_int_equal(flops_dtype("c10::BFloat16"), FL_BF16);
    assert_int_equal(flops_dtype("c10::Half"), FL_FP16);
    assert_string_equal(flops_dtype_name(FL_BF16), "bf16");
    assert_int_equal(flops_dtype("c10::Float8_e4m3fn"), FL_FP8);
    assert_int_equal(flops_dtype("long int"), FL_OTHER);
    assert_string_equal(flops_dtype_name(FL_FP32), "fp32");
}

static const char *row_of(const char *name, double gib, int sms, int maj, int min) {
    device_info d = {name, gib * 1024.0 * 1024.0 * 1024.0, sms, maj, min};
    const char *why;
    const device_row *r = devices_match(&d, &why, NULL);
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
    assert_null(row_of("NVIDIA A100X", 79, 108, 8, 0));
    assert_null(row_of("NVIDIA A100 80GB", 79, 108, 8, 0));     /* SXM or PCIe: the bandwidth differs */
    assert_null(row_of("NVIDIA H100 80GB HBM3", 79.2, 114, 9, 0)); /* SM count of no H100 80GB SXM */
    assert_null(row_of("AMD Radeon Graphics", 16, 60, 10, 3));  /* a desktop Radeon */
    assert_null(row_of("Tesla V100", 32, 80, 7, 0));           /* no form factor */
    assert_null(row_of("NVIDIA GeForce RTX 4080", 16, 76, 8, 9));
    assert_null(row_of("NVIDIA H200 NVL", 139.8, 132, 9, 0));
    assert_null(row_of("", 80, 132, 9, 0));
    assert_null(row_of("NVIDIA A100-SXM4-80GB", 0, 108, 8, 0)); /* memory not recorded */
    size_t n;
    const device_row *t = devices_table(&n);
    assert_true(n >= 24);
    for (size_t i = 0; i < n; i++) assert_true(t[i].fp32 > 0 && (t[i].bf16 > 0 || t[i].fp16 > 0) && t[i].bw > 0 && t[i].source && t[i].source[0]);
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
    /* (that last xmma name without its "ffma" suffix: its types do not say) */
    for (int i = 0; tensor[i]; i++) assert_int_equal(flops_kernel_class(tensor[i]), KC_TENSOR);
    for (int i = 0; simt[i]; i++) assert_int_equal(flops_kernel_class(simt[i]), KC_SIMT);
    for (int i = 0; unknown[i]; i++) assert_int_equal(flops_kernel_class(unknown[i]), KC_UNCLASSIFIED);
    assert_string_equal(flops_kernel_class_name(KC_UNCLASSIFIED), "unclassified");
}


/* Issue 49, wrong number 1: cuBLAS runs fp32 GEMMs with TF32 off on FFMA kernels (CUDA
 * cores), whatever the sm80_ / sm90_xmma prefix says; cuBLASLt's Hopper GEMMs (nvjet) run on
 * the tensor cores. */
static void test_effic_ffma_and_nvjet_kernels(void **st) {
    (void)st;
    static const char *const simt[] = {
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__51a_cublas",
        "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "ampere_sgemm_128x64_nn", "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>()",
        "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>()", NULL};
    static const char *const tensor[] = {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "nvjet_hsh_192x192_64x4_2x1_v_bz_coopA_TNN",
                                         "nvjet_sss_128x128_64x3_2x1_v_bz_TNT", NULL};
    for (int i = 0; simt[i]; i++) assert_int_equal(flops_kernel_class(simt[i]), KC_SIMT);
    for (int i = 0; tensor[i]; i++) assert_int_equal(flops_kernel_class(tensor[i]), KC_TENSOR);
}

/* Wrong number 2: an out= variant lists its out tensor among the inputs (ResNet's ReLU:
 * clamp_min [[x], [], [x]] under relu_); it is written once, not read: 2 x numel x 4. */
static void test_effic_out_variant_counted_once(void **st) {
    (void)st;
    double n = 32.0 * 64 * 112 * 112;
    flops_out o = model("aten::clamp_min", "[[32, 64, 112, 112], [], [32, 64, 112, 112]]", "['float', 'Int', 'float']", NULL);
    assert_true(o.flops == n);
    assert_true(o.bytes == 2 * n * 4);
    o = model("aten::mul", "[[8, 1024], [], [8, 1024]]", "['float', 'Scalar', 'float']", NULL);
    assert_true(o.bytes == 2 * 8192.0 * 4);
    /* add.out(self, other, alpha, out): four inputs, the last the output */
    o = model("aten::add", "[[8, 1024], [8, 1024], [], [8, 1024]]", "['float', 'float', 'Scalar', 'float']", NULL);
    assert_true(o.flops == 8192 && o.bytes == 3 * 8192.0 * 4);
    /* the functional forms are unchanged: where(cond, x, y) reads three tensors */
    o = model("aten::where", "[[8, 1024], [8, 1024], [8, 1024]]", "['bool', 'float', 'float']", NULL);
    assert_true(o.bytes == 8192.0 * (1 + 4 + 4) + 8192.0 * 1);
    o = model("aten::mul", "[[8, 1024], [8, 1024]]", "['float', 'float']", NULL);
    assert_true(o.bytes == 3 * 8192.0 * 4);
}

/* Wrong number 4: the flash kernels say whether they are causal; without is_causal and
 * without that flag the FLOPs of Sq = Sk attention are an upper bound. */
static void test_effic_causal_from_kernels(void **st) {
    (void)st;
    assert_int_equal(flops_kernel_causal("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, "
                                         "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
                                         "cutlass::bfloat16_t> >, false, true, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)"),
                     1);
    assert_int_equal(flops_kernel_causal("void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::half_t, "
                                         "Flash_kernel_traits<64, 128, 64, 4, cutlass::half_t> >, false, false, false, false, true, true, "
                                         "false, false>(Flash_fwd_params)"),
                     0);
    assert_int_equal(flops_kernel_causal("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits"
                                         "<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits"
                                         "<128, 64, 128, 8, cutlass::bfloat16_t> >, false, true, false, false, true, true>(pytorch_flash::"
                                         "Flash_bwd_params)"),
                     1);
    assert_int_equal(flops_kernel_causal("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
                                         "cutlass::half_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::half_t> >, true, false, false, "
                                         "true, true, false, false>(Flash_fwd_params)"),
                     1);
    assert_int_equal(flops_kernel_causal("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
                                         "cutlass::bfloat16_t> >(Flash_fwd_params)"),
                     -1);
    assert_int_equal(flops_kernel_causal("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<>::Params)"), -1);
    const char *q = "[[2, 32, 512, 128], [2, 32, 512, 128], [2, 32, 512, 128], [], [], [], []]";
    const char *t = "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', 'Scalar', 'Scalar', 'Scalar', '']";
    double full = 2.0 * 2 * 32 * 512 * 512 * (128 + 128);
    flops_in in = {"aten::_scaled_dot_product_flash_attention", q, t, NULL, NULL, -1, -1, NULL, 0};
    flops_out o;
    flops_model_in(&in, &o);
    assert_true(o.flops == full && o.upper); /* nothing tells: an upper bound */
    in.causal = 1;
    flops_model_in(&in, &o);
    assert_true(o.flops == full / 2 && !o.upper);
    in.causal = 0;
    flops_model_in(&in, &o);
    assert_true(o.flops == full && !o.upper);
    /* is_causal recorded wins over the kernels */
    in.concrete = "['', '', '', '0.0', 'True', 'False', '']";
    flops_model_in(&in, &o);
    assert_true(o.flops == full / 2 && !o.upper);
    /* decode (Sq = 1): causality does not change the count, never an upper bound */
    flops_model_in(&(flops_in){"aten::_scaled_dot_product_efficient_attention",
                               "[[1, 32, 1, 128], [1, 32, 2048, 128], [1, 32, 2048, 128], []]",
                               "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', '']", NULL, NULL, -1, -1, NULL, 0},
                   &o);
    assert_true(o.flops == 2.0 * 32 * 2048 * 256 && !o.upper);
}

/* Wrong numbers of issue 49 item 6: a linear without bias has known bytes; a mixed-dtype
 * addmm (an fp32 bias under bf16 matrices) is bf16. */
static void test_effic_linear_no_bias_and_addmm_dtype(void **st) {
    (void)st;
    flops_out o = model("aten::linear", "[[8, 4096], [11008, 4096], []]", "['c10::BFloat16', 'c10::BFloat16', '']", NULL);
    assert_true(o.flops == 2.0 * 8 * 11008 * 4096);
    assert_true(o.bytes == (8.0 * 4096 + 11008.0 * 4096 + 8.0 * 11008) * 2);
    o = model("aten::addmm", "[[1000], [32, 2048], [2048, 1000], [], []]", "['float', 'c10::BFloat16', 'c10::BFloat16', 'Scalar', 'Scalar']",
              NULL);
    assert_int_equal(o.dtype, FL_BF16);
    assert_true(o.bytes == 1000.0 * 4 + (32.0 * 2048 + 2048.0 * 1000 + 32.0 * 1000) * 2);
}

/* Issue 49 item 2: convolutions from the shapes the ResNet50 samples carry (2021 schema, no
 * Concrete Inputs): the gradients from grad_output and weight, the forward from its
 * backward's grad_output (flops_in.out) or torch's flops arg. */
static void test_effic_convolutions_resnet(void **st) {
    (void)st;
    const char *gl = "['GenericList', 'float', 'float', 'GenericList', 'GenericList', 'GenericList', 'Int', 'Bool', 'Bool', 'Bool']";
    const char *parent = "[[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], [], []]";
    double f = 2.0 * 32 * 2048 * 7 * 7 * 512 * 1 * 1;
    flops_in in = {"aten::cudnn_convolution_backward_input", "[[], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], []]", gl,
                   NULL, parent, -1, -1, NULL, 0};
    flops_out o;
    flops_model_in(&in, &o);
    assert_true(o.flops == f);
    assert_true(o.bytes == (32.0 * 2048 * 49 + 2048.0 * 512 + 32.0 * 512 * 49) * 4);
    assert_int_equal(o.kind, FL_MATRIX);
    assert_true(o.conv);
    in.name = "aten::cudnn_convolution_backward_weight";
    in.dims = "[[], [32, 2048, 7, 7], [32, 512, 7, 7], [], [], [], [], [], [], []]";
    flops_model_in(&in, &o);
    assert_true(o.flops == f);
    assert_true(o.bytes == (32.0 * 2048 * 49 + 32.0 * 512 * 49 + 2048.0 * 512) * 4);
    in.ctx_dims = NULL; /* the weight's shape is its parent's */
    flops_model_in(&in, &o);
    assert_true(o.flops < 0 && o.why);
    /* the first layer: 7x7 stride 2, its output [32, 64, 112, 112] from the backward */
    long long out[4] = {32, 64, 112, 112};
    flops_in fw = {"aten::cudnn_convolution", "[[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]",
                   "['float', 'float', 'GenericList', 'GenericList', 'GenericList', 'Int', 'Bool', 'Bool', 'Bool']", NULL, NULL, -1, -1,
                   NULL, 0};
    flops_model_in(&fw, &o);
    assert_true(o.flops < 0 && o.need_out && o.kind == FL_MATRIX);
    fw.out = out, fw.nout = 4;
    flops_model_in(&fw, &o);
    double f1 = 2.0 * 32 * 64 * 112 * 112 * 3 * 7 * 7;
    assert_true(o.flops == f1 && !o.need_out);
    assert_true(o.bytes == (32.0 * 3 * 224 * 224 + 64.0 * 3 * 49 + 32.0 * 64 * 112 * 112) * 4);
    /* an output that is not this convolution's (another batch or channel count): unknown */
    long long wrong[4] = {16, 64, 112, 112};
    fw.out = wrong;
    flops_model_in(&fw, &o);
    assert_true(o.flops < 0);
    /* torch's own count (with_flops=True, on aten::conv2d around it) gives the output size */
    fw.out = NULL, fw.nout = 0, fw.torch_flops = f1;
    flops_model_in(&fw, &o);
    assert_true(o.flops == f1);
    assert_true(o.bytes == (32.0 * 3 * 224 * 224 + 64.0 * 3 * 49 + 32.0 * 64 * 112 * 112) * 4);
    /* PyTorch 2's convolution_backward with its output mask: the first layer needs no input gradient */
    flops_in cb = {"aten::convolution_backward",
                   "[[32, 64, 112, 112], [32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], [], []]",
                   "['float', 'float', 'float', 'GenericList', 'GenericList', 'GenericList', 'GenericList', 'Bool', 'GenericList', 'Int', "
                   "'GenericList']",
                   "['', '', '', '[64]', '[2, 2]', '[3, 3]', '[1, 1]', 'False', '[0, 0]', '1', '[False, True, False]']", NULL, -1, -1, NULL, 0};
    flops_model_in(&cb, &o);
    assert_true(o.flops == f1 && !o.upper);
    cb.concrete = NULL; /* mask unknown: both gradients, an upper bound */
    flops_model_in(&cb, &o);
    assert_true(o.flops == 2 * f1 && o.upper);
    assert_int_equal(flops_conv_forward("aten::conv2d"), 1);
    int gy = -1;
    assert_int_equal(flops_conv_backward("aten::cudnn_convolution_backward_weight", &gy), 1);
    assert_int_equal(gy, 1);
    assert_int_equal(flops_conv_backward("aten::convolution_backward", &gy), 1);
    assert_int_equal(gy, 0);
}

/* Issue 50 finding 14: sizes that overflow 64 bits are unknown, never wrapped (padding
 * 2^63 - 1 gave 288 FLOPs and undefined behaviour). */
static void test_effic_conv_sizes_that_overflow(void **st) {
    (void)st;
    const char *dims = "[[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []]";
    const char *types = "['float', 'float', '', 'ScalarList', 'ScalarList', 'ScalarList', 'Int']";
    flops_out o = model("aten::conv2d", dims, types, "['', '', '', '[2, 2]', '[9223372036854775807, 9223372036854775807]', '[1, 1]', '1']");
    assert_true(o.flops < 0);
    o = model("aten::conv2d", dims, types, "['', '', '', '[1, 1]', '[0, 0]', '[4611686018427387904, 1]', '1']");
    assert_true(o.flops < 0);
    o = model("aten::conv2d", "[[1, 4, 8, 8], [4, 1, 3, 3], [], [], [], [], []]", types,
              "['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', '4611686018427387908']"); /* w[1] * groups wraps to C */
    assert_true(o.flops < 0);
    o = model("aten::conv2d", "[[99999999999999999999, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]", types,
              "['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', '1']"); /* a dim past long long */
    assert_true(o.flops < 0);
    long long d[5];
    assert_int_equal(flops_dims_at("[[1, 99999999999999999999]]", 0, d, 5), -1);
}

/* Issue 49 item 6 and item 4: Volta has no BF16 (its tensor peak is FP16's); AMD's FP32
 * matrix peak is not TF32; the new rows, each with its source; MIG slices unknown. */
static void test_effic_device_peaks_named_right(void **st) {
    (void)st;
    const char *why;
    device_info v100 = {"Tesla V100-SXM2-32GB", 34089730048.0, 80, 7, 0};
    const device_row *r = devices_match(&v100, &why, NULL);
    assert_non_null(r);
    assert_true(r->bf16 == 0 && r->tf32 == 0 && r->fp16 == 125e12);
    device_info mi = {"AMD Radeon Graphics", 68702699520.0, 104, 9, 0};
    r = devices_match(&mi, &why, NULL);
    assert_non_null(r);
    assert_true(r->tf32 == 0 && r->fp32m == 45.25e12 && r->bf16 == 181.05e12);
    assert_string_equal(row_of("NVIDIA H100 NVL", 93.6, 132, 9, 0), "h100-nvl-94gb");
    assert_string_equal(row_of("NVIDIA GH200 480GB", 94.5, 132, 9, 0), "gh200-96gb");
    assert_string_equal(row_of("NVIDIA GH200 144G HBM3e", 139.8, 132, 9, 0), "gh200-144gb");
    assert_string_equal(row_of("NVIDIA B200", 178.4, 148, 10, 0), "b200");
    assert_string_equal(row_of("NVIDIA L40", 44.4, 142, 8, 9), "l40");
    assert_string_equal(row_of("Tesla T4", 14.6, 40, 7, 5), "t4");
    assert_string_equal(row_of("NVIDIA A10G", 22.1, 80, 8, 6), "a10g");
    assert_string_equal(row_of("NVIDIA GeForce RTX 4090", 23.6, 128, 8, 9), "rtx-4090");
    assert_string_equal(row_of("NVIDIA RTX 6000 Ada Generation", 47.5, 142, 8, 9), "rtx-6000-ada");
    assert_string_equal(row_of("AMD Instinct MI250X", 64, 110, 9, 0), "mi250x-gcd");
    assert_string_equal(row_of("AMD Radeon Graphics", 64, 110, 9, 0), "mi250x-gcd");
    device_info t4 = {"Tesla T4", 15.6e9, 40, 7, 5};
    r = devices_match(&t4, &why, NULL);
    assert_true(r && r->bf16 == 0 && r->fp16 == 65e12 && strstr(r->source, "T4"));
    /* MIG: a 3g.20gb slice of an A100 40GB has 42 SMs and 20 GB; one named MIG */
    device_info mig = {"NVIDIA A100-SXM4-40GB", 19.5 * 1024.0 * 1024 * 1024, 42, 8, 0};
    assert_null(devices_match(&mig, &why, NULL));
    assert_non_null(strstr(why, "MIG"));
    device_info mig2 = {"NVIDIA A100-SXM4-80GB MIG 7g.80gb", 79.2 * 1024.0 * 1024 * 1024, 108, 8, 0};
    assert_null(devices_match(&mig2, &why, NULL));
    assert_non_null(strstr(why, "MIG"));
}

/* --devices FILE's rows (devices_set_extra): tried first, by glob, SM count and memory. */
static void test_effic_device_extra_rows(void **st) {
    (void)st;
    static const device_extra rows[] = {
        {"*a100-sxm4-80gb*", 108, 70, 85, {"a100-lab", "Our A100 (clocks locked)", 17e12, 140e12, 0, 280e12, 280e12, 0, 1800e9, "lab bench 2026"}},
        {"acme accelerator *", 0, 0, 0, {"acme", "ACME", 10e12, 0, 0, 100e12, 100e12, 0, 1000e9, "vendor sheet"}},
    };
    devices_set_extra(rows, 2);
    const char *why;
    int extra = 0;
    device_info a = {"NVIDIA A100-SXM4-80GB", 84990623744.0, 108, 8, 0};
    const device_row *r = devices_match(&a, &why, &extra);
    assert_true(r && !strcmp(r->id, "a100-lab") && extra == 1);
    device_info b = {"ACME Accelerator X1", 0, 0, 0, 0};
    r = devices_match(&b, &why, &extra);
    assert_true(r && !strcmp(r->id, "acme") && extra);
    device_info c = {"NVIDIA A100-SXM4-40GB", 42297524224.0, 108, 8, 0}; /* no added row fits: the table's */
    r = devices_match(&c, &why, &extra);
    assert_true(r && !strcmp(r->id, "a100-sxm4-40gb") && !extra);
    devices_set_extra(NULL, 0);
    r = devices_match(&a, &why, &extra);
    assert_true(r && !strcmp(r->id, "a100-sxm4-80gb") && !extra);
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
        cmocka_unit_test(test_effic_ffma_and_nvjet_kernels),
        cmocka_unit_test(test_effic_out_variant_counted_once),
        cmocka_unit_test(test_effic_causal_from_kernels),
        cmocka_unit_test(test_effic_linear_no_bias_and_addmm_dtype),
        cmocka_unit_test(test_effic_convolutions_resnet),
        cmocka_unit_test(test_effic_conv_sizes_that_overflow),
        cmocka_unit_test(test_effic_device_peaks_named_right),
        cmocka_unit_test(test_effic_device_extra_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
