/* test_occupancy.c -- cmocka cases for server/lib/occupancy.c.
 *
 * Every expected number was computed by cudaOccMaxActiveBlocksPerMultiprocessor from the
 * CUDA 13 cuda_occupancy.h for the same device and launch (partitioned global caching off,
 * default carveout, reservedSharedMemPerBlock 1024 from sm_80), then Kineto's estimate
 * min(active, grid/numSms) * threads / maxThreadsPerMultiprocessor. The first case is a real
 * A100 kernel whose trace says "est. achieved occupancy %": 63. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/occupancy.h"

static occ_device dev(int major, int minor, int sms, int threads_per_sm, long long smem_sm, long long optin) {
    occ_device d = {major, minor, sms, 32, 1024, threads_per_sm, 65536, 65536, 49152, optin, smem_sm, 0};
    return d;
}
#define A100 dev(8, 0, 108, 2048, 167936, 166912)
#define H100 dev(9, 0, 132, 2048, 233472, 232448)

static occ_launch launch(long long grid, long long threads, int regs, long long smem) {
    occ_launch l = {{grid, 1, 1}, {threads, 1, 1}, regs, smem};
    return l;
}

static void expect(occ_device d, occ_launch l, int active, int limiter, double theo, double est, double eff) {
    occ_result r;
    assert_int_equal(occ_estimate(&d, &l, &r), 0);
    assert_int_equal(r.active_blocks, active);
    assert_int_equal(r.limiter, limiter);
    assert_true(r.theoretical == theo);
    assert_true(r.est_occupancy == est);
    assert_true(r.est_sm_efficiency == eff);
}

/* 47 regs -> 1536 per warp; 16384 per sub-partition holds 10 warps: 40 warps, 5 blocks of 8. */
static void test_occupancy_a100_register_limited_matches_kineto(void **state) {
    (void)state;
    expect(A100, launch(864, 256, 47, 0), 5, OCC_LIMIT_REGISTERS, 0.625, 0.625, 1.0);
}

/* 54 blocks on 108 SMs: half the SMs idle, each busy one at 128 of 2048 threads. */
static void test_occupancy_small_grid_caps_estimate(void **state) {
    (void)state;
    expect(A100, launch(54, 128, 32, 0), 16, OCC_LIMIT_WARPS | OCC_LIMIT_REGISTERS, 1.0, 0.03125, 0.5);
}

/* 48 KB + 1 KB reserved per block: 4 fit in 228 KB; 64 regs also allow exactly 4. */
static void test_occupancy_h100_shared_and_registers(void **state) {
    (void)state;
    expect(H100, launch(1000, 256, 64, 49152), 4, OCC_LIMIT_REGISTERS | OCC_LIMIT_SHARED, 0.5, 0.5, 1.0);
}

/* Turing: 256-byte granularity, no reserve, 1024 threads and 64 KB per SM, 40 SMs. */
static void test_occupancy_turing_shared_granularity(void **state) {
    (void)state;
    occ_device t4 = dev(7, 5, 40, 1024, 65536, 65536);
    expect(t4, launch(10, 96, 20, 10000), 6, OCC_LIMIT_SHARED, 0.5625, 0.0234375, 0.25);
}

/* 4200 + 1024 bytes rounds to 5248 at sm_80's 128-byte unit: exactly 32 per 164 KB, equal to
 * the block maximum (a 256-byte unit would give 5376 and 31). */
static void test_occupancy_ampere_shared_granularity(void **state) {
    (void)state;
    expect(A100, launch(108 * 32, 32, 16, 4200), 32, OCC_LIMIT_SHARED | OCC_LIMIT_BLOCKS, 0.5, 0.5, 1.0);
}

/* 100,000 bytes is over sharedMemPerBlock: the opt-in limit applies. */
static void test_occupancy_optin_shared(void **state) {
    (void)state;
    expect(H100, launch(264, 128, 32, 100000), 2, OCC_LIMIT_SHARED, 0.125, 0.125, 1.0);
}

/* regs 0 (not recorded as a limit) leaves warps: 2 blocks of 1024 threads. */
static void test_occupancy_zero_registers_no_register_limit(void **state) {
    (void)state;
    expect(H100, launch(132, 1024, 0, 0), 2, OCC_LIMIT_WARPS, 1.0, 0.5, 1.0);
}

/* 255 regs: 8192 per warp, 2 warps per sub-partition, one block of 8 warps (V100). */
static void test_occupancy_255_registers(void **state) {
    (void)state;
    expect(dev(7, 0, 80, 2048, 98304, 98304), launch(80, 256, 255, 0), 1, OCC_LIMIT_REGISTERS, 0.125, 0.125, 1.0);
}

/* The block maximum from the trace wins over the table. */
static void test_occupancy_max_blocks_from_trace(void **state) {
    (void)state;
    occ_device d = H100;
    d.max_blocks_per_sm = 8;
    expect(d, launch(264 * 8, 32, 16, 0), 8, OCC_LIMIT_BLOCKS, 0.125, 0.125, 1.0);
    d.max_blocks_per_sm = 0; /* table: 32 for sm_90 */
    expect(d, launch(132 * 64, 32, 16, 0), 32, OCC_LIMIT_BLOCKS, 0.5, 0.5, 1.0);
}

static void test_occupancy_unknown_inputs(void **state) {
    occ_result r = {0};
    occ_device d = A100;
    occ_launch l = launch(864, 256, 47, 0);
    (void)state;
    d.compute_major = 4; /* not in cuda_occupancy.h */
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    d = A100;
    d.num_sms = 0;
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    d = A100;
    d.smem_per_sm = 0;
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    d = A100;
    l.block[0] = 2048; /* over maxThreadsPerBlock: cannot have run */
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    l = launch(864, 256, 47, 200000); /* over the opt-in limit */
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    l = launch(0, 256, 47, 0);
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    assert_int_equal(r.active_blocks, 0); /* untouched */
}

static void test_occupancy_limiter_names(void **state) {
    (void)state;
    assert_string_equal(occ_limiter_name(OCC_LIMIT_REGISTERS | OCC_LIMIT_SHARED), "registers");
    assert_string_equal(occ_limiter_name(OCC_LIMIT_SHARED), "shared_memory");
    assert_string_equal(occ_limiter_name(OCC_LIMIT_BLOCKS), "blocks");
    assert_string_equal(occ_limiter_name(0), "");
}

/* Issue 50 finding 14: dimensions past any device are unknown, never a product that wraps. */
static void test_occupancy_dims_that_overflow(void **state) {
    (void)state;
    occ_device d = A100;
    occ_result r;
    occ_launch l = {{1LL << 40, 1LL << 40, 1LL << 40}, {128, 1, 1}, 32, 0};
    assert_int_equal(occ_estimate(&d, &l, &r), -1);
    occ_launch b = {{1, 1, 1}, {1LL << 40, 1LL << 40, 1LL << 40}, 32, 0};
    assert_int_equal(occ_estimate(&d, &b, &r), -1);
    occ_launch s = {{1, 1, 1}, {128, 1, 1}, 32, 9223372036854775000LL};
    assert_int_equal(occ_estimate(&d, &s, &r), -1);
    occ_launch big = {{2147483647, 65535, 65535}, {128, 1, 1}, 32, 0}; /* CUDA's largest grid still has a figure */
    assert_int_equal(occ_estimate(&d, &big, &r), 0);
    assert_true(r.blocks_per_sm == 2147483647.0 * 65535 * 65535 / 108);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_occupancy_a100_register_limited_matches_kineto),
        cmocka_unit_test(test_occupancy_small_grid_caps_estimate),
        cmocka_unit_test(test_occupancy_h100_shared_and_registers),
        cmocka_unit_test(test_occupancy_turing_shared_granularity),
        cmocka_unit_test(test_occupancy_ampere_shared_granularity),
        cmocka_unit_test(test_occupancy_optin_shared),
        cmocka_unit_test(test_occupancy_zero_registers_no_register_limit),
        cmocka_unit_test(test_occupancy_255_registers),
        cmocka_unit_test(test_occupancy_max_blocks_from_trace),
        cmocka_unit_test(test_occupancy_unknown_inputs),
        cmocka_unit_test(test_occupancy_limiter_names),
        cmocka_unit_test(test_occupancy_dims_that_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
