/* devices.h: the GPU device table: dense peak throughput per precision and memory bandwidth.
 *
 * A pure module (no SQL, no JSON): a device as a trace describes it (its name, memory, SM
 * or CU count, compute capability: Kineto's deviceProperties, nsys' TARGET_INFO_GPU) is
 * matched against a fixed table of public datasheet figures. Every row cites its source in
 * devices.c.
 *
 * Definitions:
 *  - Peaks are DENSE figures, never the 2:4-sparse headline of a datasheet, in FLOP/s:
 *      fp32   the plain (SIMT / vector) FP32 peak;
 *      tf32   FP32 inputs on the tensor / matrix cores (NVIDIA TF32; AMD rows: the FP32
 *             matrix-core peak, what PyTorch's FP32 GEMMs get there by default); 0 none;
 *      bf16   BF16 and FP16 on the tensor / matrix cores (the same on every row here);
 *      fp8    FP8 on the tensor / matrix cores; 0 when the device has none.
 *    bw is the DRAM (HBM / GDDR) bandwidth in bytes/s.
 *  - Matching, in order: the name, lowercased, must hold a row's family token (rows are
 *    tried in table order, so "a100" is tried before "a10" and "l40s" before "l4"); the
 *    family's variant is then pinned down by the name's form-factor words (sxm, pcie, nvl,
 *    ...), the memory size and the SM/CU count where the table says so. A device that
 *    does not pin down one row (an unknown family, a variant the table lacks, a memory size
 *    or SM count that fits no row) is UNKNOWN: devices_match returns NULL and says why;
 *    there is never a default GPU.
 *  - AMD's ROCm often names a device "AMD Radeon Graphics": such a name matches only where
 *    the compute capability, CU count and memory pin the part down (gfx90a with 104 CUs
 *    and 64 GB: one MI250 GCD, whose figures are MI210's too). */
#ifndef FP_DEVICES_H
#define FP_DEVICES_H

#include <stddef.h>

typedef struct device_row {
    const char *id;      /* short stable name: "a100-sxm4-80gb" */
    const char *label;   /* what a person reads: "NVIDIA A100 SXM4 80GB" */
    double fp32, tf32, bf16, fp8; /* dense peaks, FLOP/s; 0 = the device has none */
    double bw;           /* DRAM bandwidth, bytes/s */
} device_row;

/* What a trace says of a device; 0 / NULL = not recorded. */
typedef struct device_info {
    const char *name;
    double mem_bytes;    /* totalGlobalMem */
    int sms;             /* numSms / smCount / multiProcessorCount */
    int cc_major, cc_minor;
} device_info;

/* The row d pins down, or NULL with the reason in why (a static string). */
const device_row *devices_match(const device_info *d, const char **why);

/* Every row, for tests and docs: n rows. */
const device_row *devices_table(size_t *n);

#endif
