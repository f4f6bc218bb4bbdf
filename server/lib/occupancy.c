/* occupancy.c: the CUDA occupancy calculator's block limits, for estimates at read time.
 *
 * Owns the per-architecture tables below (from cuda_occupancy.h, CUDA 13). Pure: no SQL,
 * no JSON, no allocation. Definitions and limits are in occupancy.h. */
#include "lib/occupancy.h"

#include <limits.h>

static long long div_up(long long x, long long y) { return (x + y - 1) / y; }
static long long round_up(long long x, long long y) { return div_up(x, y) * y; }
static int known_arch(int major) { return major == 3 || (major >= 5 && major <= 12); }

/* cudaOccMaxBlocksPerMultiprocessor. */
static int max_blocks_table(int major, int minor) {
    switch (major) {
    case 3: return 16;
    case 5: case 6: return 32;
    case 7: return minor == 5 ? 16 : 32;
    case 8: return minor == 0 ? 32 : minor == 9 ? 24 : 16;
    case 9: return 32;
    case 10: return minor == 1 ? 24 : 32;
    case 11: return minor == 0 ? 24 : 32;
    default: return 24; /* 12.x */
    }
}

/* cudaOccSubPartitionsPerMultiprocessor: GP100 (6.0) has two, everything else four. */
static int sub_partitions(int major, int minor) { return major == 6 && minor == 0 ? 2 : 4; }

/* Shared memory allocation unit, and what the driver keeps per block from Ampere on. */
static long long smem_granularity(int major) { return major >= 8 ? 128 : 256; }
static long long smem_reserved(int major) { return major >= 8 ? 1024 : 0; }

static long long limit_warps(const occ_device *d, long long threads, long long warps_per_block) {
    if (threads > d->max_threads_per_block) return 0;
    return (d->max_threads_per_sm / d->warp_size) / warps_per_block;
}

/* cudaOccMaxBlocksPerSMRegsLimit with partitioned global caching off. */
static long long limit_regs(const occ_device *d, int regs, long long warps_per_block) {
    if (regs <= 0) return INT_MAX;
    int p = sub_partitions(d->compute_major, d->compute_minor);
    int max_per_thread = d->compute_major >= 7 ? 256 : 255;
    long long per_warp = round_up((long long)regs * d->warp_size, 256);
    /* The hardware check assumes the block's warps are spread over all sub-partitions. */
    if (regs > max_per_thread || d->regs_per_block < per_warp * warps_per_block ||
        d->regs_per_block < per_warp * round_up(warps_per_block, p))
        return 0;
    long long regs_sm = d->regs_per_sm > 0 ? d->regs_per_sm : d->regs_per_block;
    long long warps_per_part = regs_sm / p / per_warp;
    return warps_per_part * p / warps_per_block;
}

/* cudaOccMaxBlocksPerSMSmemLimit with the default carveout (all of sharedMemPerMultiprocessor). */
static long long limit_smem(const occ_device *d, long long smem) {
    int major = d->compute_major;
    long long per_block = round_up(smem + smem_reserved(major), smem_granularity(major));
    /* A launch over sharedMemPerBlock must have opted in to the larger limit to have run. */
    long long cap = smem > d->smem_per_block && d->smem_per_block_optin > 0 ? d->smem_per_block_optin : d->smem_per_block;
    if (major >= 8) cap += smem_reserved(major);
    if (per_block > cap) return 0;
    return per_block > 0 ? d->smem_per_sm / per_block : INT_MAX;
}

/* Bounds past any CUDA device, so that no product below can overflow (issue 50 finding 14:
 * a hostile trace's grid of 2^40 per dimension multiplied 64-bit integers past their range):
 * a block dimension over 2^20 (CUDA's most is 1024), a grid dimension over 2^32 (2^31 - 1),
 * more than 2^16 registers a thread, 2^40 bytes of shared memory, a warp over 1024 threads. */
#define OCC_BLOCK_DIM_MAX (1LL << 20)
#define OCC_GRID_DIM_MAX (1LL << 32)

static int inputs_known(const occ_device *d, const occ_launch *l) {
    if (!known_arch(d->compute_major) || d->num_sms <= 0 || d->warp_size <= 0 || d->warp_size > 1024 || d->max_threads_per_block <= 0 ||
        d->max_threads_per_sm <= 0 || d->regs_per_block <= 0 || d->smem_per_block <= 0 || d->smem_per_sm <= 0 ||
        d->smem_per_block > (1LL << 40) || d->smem_per_block_optin > (1LL << 40) || d->smem_per_sm > (1LL << 40))
        return 0;
    for (int i = 0; i < 3; i++)
        if (l->grid[i] < 1 || l->block[i] < 1 || l->grid[i] > OCC_GRID_DIM_MAX || l->block[i] > OCC_BLOCK_DIM_MAX) return 0;
    return l->regs_per_thread >= 0 && l->regs_per_thread <= 65536 && l->smem_bytes >= 0 && l->smem_bytes <= (1LL << 40);
}

int occ_estimate(const occ_device *d, const occ_launch *l, occ_result *r) {
    if (!inputs_known(d, l)) return -1;
    long long threads = l->block[0] * l->block[1] * l->block[2];
    double blocks = (double)l->grid[0] * (double)l->grid[1] * (double)l->grid[2]; /* up to 2^96: a double */
    long long wpb = div_up(threads, d->warp_size);
    long long lim[4] = {limit_warps(d, threads, wpb), limit_regs(d, l->regs_per_thread, wpb), limit_smem(d, l->smem_bytes),
                        d->max_blocks_per_sm > 0 ? d->max_blocks_per_sm : max_blocks_table(d->compute_major, d->compute_minor)};
    long long active = lim[0];
    for (int i = 1; i < 4; i++)
        if (lim[i] < active) active = lim[i];
    if (active <= 0) return -1;
    r->active_blocks = (int)active;
    r->limiter = 0;
    for (int i = 0; i < 4; i++)
        if (lim[i] == active) r->limiter |= 1 << i;
    r->warps_per_block = (int)wpb;
    r->blocks_per_sm = blocks / d->num_sms;
    r->theoretical = (double)active * (double)threads / d->max_threads_per_sm;
    double resident = r->blocks_per_sm < (double)active ? r->blocks_per_sm : (double)active;
    r->est_occupancy = resident * (double)threads / d->max_threads_per_sm;
    r->est_sm_efficiency = r->blocks_per_sm < 1 ? r->blocks_per_sm : 1.0;
    return 0;
}

const char *occ_limiter_name(int limiter) {
    if (limiter & OCC_LIMIT_WARPS) return "warps";
    if (limiter & OCC_LIMIT_REGISTERS) return "registers";
    if (limiter & OCC_LIMIT_SHARED) return "shared_memory";
    if (limiter & OCC_LIMIT_BLOCKS) return "blocks";
    return "";
}
