/* devices.h: the GPU device table: dense peak throughput per precision and memory bandwidth.
 *
 * A pure module (no SQL, no JSON): a device as a trace describes it (its name, memory, SM
 * or CU count, compute capability: Kineto's deviceProperties, nsys' TARGET_INFO_GPU) is
 * matched against a fixed table of public datasheet figures, and first against the rows a
 * team adds for its own hardware (devices_set_extra: `--devices FILE`, http/devfile.h).
 * Every built-in row cites its public source (device_row.source).
 *
 * Definitions:
 *  - Peaks are DENSE figures, never the 2:4-sparse headline of a datasheet, in FLOP/s:
 *      fp32   the plain (SIMT / vector) FP32 peak;
 *      tf32   FP32 inputs on NVIDIA's tensor cores (TF32); 0 none;
 *      fp32m  FP32 on AMD's matrix cores (MFMA: what PyTorch's FP32 GEMMs get there by
 *             default); 0 none (every NVIDIA row);
 *      fp16, bf16  on the tensor / matrix cores with FP32 accumulation (PyTorch's); 0 none
 *             (Volta and Turing have no BF16);
 *      fp8    FP8 on the tensor / matrix cores; 0 when the device has none.
 *    bw is the DRAM (HBM / GDDR) bandwidth in bytes/s.
 *  - Matching, in order: the extra rows (a glob over the lowercased name, then their SM
 *    count and memory range when they give one), first match wins; then the name,
 *    lowercased, must hold a built-in row's family token (whole: no letter or digit on
 *    either side); the family's variant is then pinned down by the name's form-factor words
 *    (sxm, pcie, nvl, ...), the memory size, the SM/CU count and the compute capability
 *    where the table says so. A device that does not pin down one row is UNKNOWN:
 *    devices_match returns NULL and says why; there is never a default GPU. A MIG slice
 *    (the name says MIG, or fewer SMs than any row of its family) is unknown: its share of
 *    the GPU's peaks is not in the trace.
 *  - AMD's ROCm often names a device "AMD Radeon Graphics": such a name matches only where
 *    the compute capability, CU count and memory pin the part down (gfx90a with 104 CUs
 *    and 64 GB: one MI250 GCD, whose figures are MI210's too; 110 CUs: one MI250X GCD). */
#ifndef FP_DEVICES_H
#define FP_DEVICES_H

#include <stddef.h>

typedef struct device_row {
    const char *id;      /* short stable name: "a100-sxm4-80gb" */
    const char *label;   /* what a person reads: "NVIDIA A100 SXM4 80GB" */
    double fp32, tf32, fp32m, fp16, bf16, fp8; /* dense peaks, FLOP/s; 0 = the device has none */
    double bw;           /* DRAM bandwidth, bytes/s */
    const char *source;  /* the public source of its figures */
} device_row;

/* What a trace says of a device; 0 / NULL = not recorded. */
typedef struct device_info {
    const char *name;
    double mem_bytes;    /* totalGlobalMem */
    int sms;             /* numSms / smCount / multiProcessorCount */
    int cc_major, cc_minor;
} device_info;

/* One added row: a glob over the lowercased device name (fnmatch), the SM count (0: any)
 * and memory range in GiB (0, 0: any) that must fit too, and the figures. */
typedef struct device_extra {
    const char *pattern;
    int sms;
    double mem_lo, mem_hi;
    device_row row;
} device_extra;

#define DEVICES_EXTRA_MAX 256 /* rows a --devices file may add */

/* The row d pins down, or NULL with the reason in why (a static string). *extra (may be
 * NULL) is 1 when the row came from the added rows, 0 from the built-in table. */
const device_row *devices_match(const device_info *d, const char **why, int *extra);

/* Every built-in row, for tests and docs: n rows. */
const device_row *devices_table(size_t *n);

/* Sets the added rows (at most DEVICES_EXTRA_MAX; the caller keeps them and their strings
 * alive). Called once at start-up, before any analysis runs: not thread-safe. n 0 clears. */
void devices_set_extra(const device_extra *rows, size_t n);

#endif
