/* occupancy.h: estimated occupancy and SM efficiency of one kernel launch.
 *
 * A pure module (no SQL, no JSON, no HTTP): the CUDA occupancy calculator's rules
 * (cuda_occupancy.h, cudaOccMaxActiveBlocksPerMultiprocessor) restated for the numbers a
 * trace carries: the launch's grid, block, registers per thread and shared memory, and the
 * device's deviceProperties (Kineto's names).
 *
 * Definitions (what every output means):
 *  - warps_per_block = ceil(threads_per_block / warpSize).
 *  - Active blocks per SM = min of four limits:
 *      warps:     floor((maxThreadsPerMultiprocessor / warpSize) / warps_per_block);
 *                 0 when threads_per_block > maxThreadsPerBlock.
 *      registers: regs_per_warp = roundup(regs_per_thread * warpSize, 256);
 *                 warps_per_sub_partition = floor(regsPerMultiprocessor / P / regs_per_warp)
 *                 with P = 4 sub-partitions (2 on sm_60);
 *                 floor(warps_per_sub_partition * P / warps_per_block); 0 when a block needs
 *                 more than regsPerBlock (regs_per_warp * warps_per_block, also with
 *                 warps_per_block rounded up to P) or regs_per_thread is over the per-thread
 *                 maximum (255 before sm_70, 256 after); no limit when regs_per_thread is 0.
 *      shared:    per block = roundup(shared_memory + reserved, G) with reserved = 1024 bytes
 *                 from sm_80 on (0 before) and G = 256 bytes before sm_80, 128 after;
 *                 floor(sharedMemPerMultiprocessor / per block); 0 when per block is over the
 *                 per-block limit (sharedMemPerBlockOptin when the launch needs more than
 *                 sharedMemPerBlock, else sharedMemPerBlock; + reserved from sm_80).
 *      blocks:    the architecture's resident-block maximum (maxBlocksPerMultiProcessor when
 *                 the trace has it, else cuda_occupancy.h's table by compute capability).
 *  - theoretical occupancy = active_blocks * threads_per_block / maxThreadsPerMultiprocessor.
 *  - blocks_per_sm = grid blocks / numSms (a fraction; Kineto's "blocks per SM").
 *  - est. occupancy (Kineto's "est. achieved occupancy %" / 100) =
 *      min(active_blocks, blocks_per_sm) * threads_per_block / maxThreadsPerMultiprocessor:
 *    a small grid cannot fill the SMs even if each SM could hold more blocks.
 *  - est. SM efficiency (HTA's definition) = min(1, blocks_per_sm): the share of SMs that get
 *    at least one block, assuming blocks spread evenly.
 *
 * Limits: defaults are assumed for what a trace does not record (the default shared memory
 * carveout, i.e. the whole sharedMemPerMultiprocessor; partitioned global caching off; no
 * block-barrier or virtual-resource limits; dynamic and static shared memory together). The
 * numbers describe ONE launch configuration; a kernel launched with several gets the one the
 * caller passes. Missing regsPerMultiprocessor falls back to regsPerBlock (equal on every
 * GPU since Kepler); a missing sharedMemPerMultiprocessor makes the estimate unknown.
 * Compute capabilities outside 3.x and 5.x..12.x are unknown, as in cuda_occupancy.h. */
#ifndef FP_OCCUPANCY_H
#define FP_OCCUPANCY_H

/* The device, from one deviceProperties entry; 0 = not recorded. */
typedef struct occ_device {
    int compute_major, compute_minor;
    int num_sms;                     /* numSms */
    int warp_size;                   /* warpSize */
    int max_threads_per_block;       /* maxThreadsPerBlock */
    int max_threads_per_sm;          /* maxThreadsPerMultiprocessor */
    int regs_per_block;              /* regsPerBlock */
    int regs_per_sm;                 /* regsPerMultiprocessor (0: regsPerBlock is used) */
    long long smem_per_block;        /* sharedMemPerBlock, bytes */
    long long smem_per_block_optin;  /* sharedMemPerBlockOptin, bytes (0: sharedMemPerBlock) */
    long long smem_per_sm;           /* sharedMemPerMultiprocessor, bytes */
    int max_blocks_per_sm;           /* maxBlocksPerMultiProcessor (0: the table) */
} occ_device;

/* One launch. */
typedef struct occ_launch {
    long long grid[3], block[3];     /* dimensions; each >= 1 */
    int regs_per_thread;             /* "registers per thread" */
    long long smem_bytes;            /* "shared memory": static + dynamic, bytes */
} occ_launch;

enum { OCC_LIMIT_WARPS = 1, OCC_LIMIT_REGISTERS = 2, OCC_LIMIT_SHARED = 4, OCC_LIMIT_BLOCKS = 8 };

typedef struct occ_result {
    int active_blocks;               /* active blocks per SM (the min of the four limits) */
    int limiter;                     /* OCC_LIMIT_* bits of the limits equal to active_blocks */
    int warps_per_block;
    double blocks_per_sm;            /* grid blocks / numSms */
    double theoretical;              /* theoretical occupancy, 0..1 */
    double est_occupancy;            /* estimated achieved occupancy, 0..1 */
    double est_sm_efficiency;        /* 0..1 */
} occ_result;

/* Fills *r and returns 0, or returns -1 (r untouched) when the device or the launch lacks a
 * number the estimate needs, the compute capability is unknown, or the launch cannot fit
 * on one SM by these rules (a launch that ran cannot: the inputs disagree). Never fails
 * otherwise; no allocation. */
int occ_estimate(const occ_device *d, const occ_launch *l, occ_result *r);

/* Short name of the tightest limit ("warps", "registers", "shared_memory", "blocks") for
 * the lowest bit set in limiter; "" when none. */
const char *occ_limiter_name(int limiter);

#endif
