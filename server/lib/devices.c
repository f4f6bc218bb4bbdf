/* devices.c: the device table of devices.h and its matching rules.
 *
 * Owns the table below. Pure: no SQL, no JSON, no allocation. Each row's figures are the
 * DENSE ones of the public source named in its comment (a datasheet's headline with
 * sparsity is halved: the datasheets mark those with an asterisk). */
#include "lib/devices.h"

#include <ctype.h>
#include <string.h>

#define T 1e12 /* TFLOP/s */
#define G 1e9  /* GB/s (decimal, as datasheets) */
#define GIB (1024.0 * 1024.0 * 1024.0)

/* One row with what pins it down: its family token in the name (whole: no letter or digit
 * on either side), a form-factor word the name must hold (any of need[], NULL: none), a
 * word it must not hold, the memory range in GiB (0, 0: any) and the SM/CU count (0: any).
 * A family's rows are consecutive; the families are tried in this order. */
typedef struct rule {
    const char *family;
    const char *need[3];
    const char *forbid;
    double mem_lo, mem_hi;
    int sms, cc_major, cc_minor; /* cc_major 0: any */
    device_row row;
} rule;

static const rule rules[] = {
    /* NVIDIA V100 datasheet (volta-v100-datasheet-update-us-1165301-r5, 2020): SXM2 15.7 TFLOPS
     * FP32, 125 TFLOPS tensor (FP16; no BF16, no TF32), 900 GB/s HBM2; PCIe 14 / 112, 900 GB/s.
     * DGX Station V100 (dgx-station-datasheet, 2018): its four "V100-DGXS" GPUs are SXM2 parts at
     * the SXM2 clocks: 500 TFLOPS FP16 for four. */
    {"v100", {"sxm2", "dgxs", "sxm3"}, NULL, 0, 0, 80, 7, 0,
     {"v100-sxm2", "NVIDIA V100 SXM2", 15.7 * T, 0, 125 * T, 0, 900 * G}},
    {"v100", {"pcie", NULL, NULL}, NULL, 0, 0, 80, 7, 0,
     {"v100-pcie", "NVIDIA V100 PCIe", 14 * T, 0, 112 * T, 0, 900 * G}},
    /* NVIDIA V100S PCIe datasheet (2019): 16.4 TFLOPS FP32, 130 tensor, 1134 GB/s. */
    {"v100s", {NULL, NULL, NULL}, NULL, 0, 0, 80, 7, 0,
     {"v100s-pcie", "NVIDIA V100S PCIe", 16.4 * T, 0, 130 * T, 0, 1134 * G}},
    /* NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4): 19.5 TFLOPS FP32, TF32
     * 156 (312*), BF16/FP16 312 (624*), no FP8; 40GB: 1,555 GB/s; 80GB PCIe 1,935 GB/s, 80GB
     * SXM 2,039 GB/s. "PG509" is the A100 SXM4 board (HGX A100; nvidia-smi names it so on
     * Meta's hosts), so it counts as SXM. */
    {"a100", {"sxm", "pg509", NULL}, NULL, 35, 45, 108, 8, 0,
     {"a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB", 19.5 * T, 156 * T, 312 * T, 0, 1555 * G}},
    {"a100", {"sxm", "pg509", NULL}, NULL, 70, 85, 108, 8, 0,
     {"a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", 19.5 * T, 156 * T, 312 * T, 0, 2039 * G}},
    {"a100", {"pcie", NULL, NULL}, NULL, 35, 45, 108, 8, 0,
     {"a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", 19.5 * T, 156 * T, 312 * T, 0, 1555 * G}},
    {"a100", {"pcie", NULL, NULL}, NULL, 70, 85, 108, 8, 0,
     {"a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", 19.5 * T, 156 * T, 312 * T, 0, 1935 * G}},
    /* NVIDIA A10 datasheet (a10-datasheet, 2021): 31.2 TFLOPS FP32, TF32 62.5 (125*), BF16/FP16
     * 125 (250*), 600 GB/s GDDR6, 24 GB, 72 SMs. */
    {"a10", {NULL, NULL, NULL}, NULL, 20, 26, 72, 8, 6,
     {"a10", "NVIDIA A10", 31.2 * T, 62.5 * T, 125 * T, 0, 600 * G}},
    /* NVIDIA H100 datasheet (h100-datasheet, 2023): SXM 67 TFLOPS FP32, TF32 494.5 (989*), BF16
     * 989.5 (1,979*), FP8 1,979 (3,958*), 3.35 TB/s, 132 SMs; PCIe 51, 378 (756*), 756.5
     * (1,513*), 1,513 (3,026*), 2 TB/s, 114 SMs. NVL (94 GB) is not in the table. */
    {"h100", {NULL, NULL, NULL}, "nvl", 75, 85, 132, 9, 0,
     {"h100-sxm5-80gb", "NVIDIA H100 SXM5 80GB", 67 * T, 494.5 * T, 989.5 * T, 1979 * T, 3350 * G}},
    {"h100", {"pcie", NULL, NULL}, "nvl", 75, 85, 114, 9, 0,
     {"h100-pcie-80gb", "NVIDIA H100 PCIe 80GB", 51 * T, 378 * T, 756.5 * T, 1513 * T, 2000 * G}},
    /* NVIDIA H200 datasheet (h200-datasheet, 2024): SXM as H100 SXM's compute, 141 GB at
     * 4.8 TB/s. H200 NVL (lower clocks) is not in the table. */
    {"h200", {NULL, NULL, NULL}, "nvl", 130, 145, 132, 9, 0,
     {"h200-sxm-141gb", "NVIDIA H200 SXM 141GB", 67 * T, 494.5 * T, 989.5 * T, 1979 * T, 4800 * G}},
    /* NVIDIA L4 datasheet (l4-datasheet, 2023): 30.3 TFLOPS FP32, TF32 60 (120*), BF16/FP16 121
     * (242*), FP8 242.5 (485*), 300 GB/s, 24 GB, 58 SMs. Tried after l40s: "l4" is its prefix. */
    {"l40s", {NULL, NULL, NULL}, NULL, 44, 50, 142, 8, 9,
     {"l40s", "NVIDIA L40S", 91.6 * T, 183 * T, 362.05 * T, 733 * T, 864 * G}},
    /* (L40S: NVIDIA L40S datasheet, 2023: 91.6 TFLOPS FP32, TF32 183 (366*), BF16/FP16 362.05
     * (733*), FP8 733 (1,466*), 864 GB/s, 48 GB, 142 SMs.) */
    {"l4", {NULL, NULL, NULL}, NULL, 20, 26, 58, 8, 9,
     {"l4", "NVIDIA L4", 30.3 * T, 60 * T, 121 * T, 242.5 * T, 300 * G}},
    /* AMD Instinct MI250 datasheet (2021): per OAM (two GCDs) 45.3 TFLOPS FP32 vector, 90.5
     * FP32 matrix, 362.1 FP16/BF16 matrix, 3.2768 TB/s; PyTorch sees one GCD: half of each,
     * 104 CUs, 64 GB. MI210's datasheet has the same per-GCD figures. */
    {"mi250", {NULL, NULL, NULL}, NULL, 60, 68, 104, 0, 0,
     {"mi250-gcd", "AMD Instinct MI250 (one GCD)", 22.65 * T, 45.25 * T, 181.05 * T, 0, 1638.4 * G}},
    {"amd radeon graphics", {NULL, NULL, NULL}, NULL, 60, 68, 104, 9, 0,
     {"mi250-gcd", "AMD Instinct MI250 (one GCD)", 22.65 * T, 45.25 * T, 181.05 * T, 0, 1638.4 * G}},
    /* AMD Instinct MI300X datasheet (2023): 81.7 TFLOPS FP32 vector, 163.4 FP32 matrix, 1,307.4
     * FP16/BF16 (2,614.9*), 2,614.9 FP8 (5,229.8*), 5.3 TB/s, 192 GB, 304 CUs. */
    {"mi300x", {NULL, NULL, NULL}, NULL, 180, 200, 304, 0, 0,
     {"mi300x", "AMD Instinct MI300X", 81.7 * T, 163.4 * T, 1307.4 * T, 2614.9 * T, 5300 * G}},
};
#define NRULES (sizeof rules / sizeof rules[0])

static const device_row *rows_cache(size_t *n);

/* 1 when tok occurs in s (both lowercase) with no letter or digit right before or after. */
static int has_token(const char *s, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = strstr(s, tok); p; p = strstr(p + 1, tok)) {
        int before = p > s && isalnum((unsigned char)p[-1]), after = isalnum((unsigned char)p[n]);
        if (!before && !after) return 1;
    }
    return 0;
}

static int fits(const rule *r, const char *low, const device_info *d) {
    int need = !r->need[0];
    for (int i = 0; i < 3 && r->need[i]; i++) need |= strstr(low, r->need[i]) != NULL;
    if (!need || (r->forbid && strstr(low, r->forbid))) return 0;
    double gib = d->mem_bytes / GIB;
    if (r->mem_hi > 0 && (d->mem_bytes <= 0 || gib < r->mem_lo || gib > r->mem_hi)) return 0;
    if (r->sms && d->sms != r->sms) return 0;
    if (r->cc_major && (d->cc_major != r->cc_major || d->cc_minor != r->cc_minor)) return 0;
    return 1;
}

const device_row *devices_match(const device_info *d, const char **why) {
    char low[256];
    size_t n = d && d->name ? strlen(d->name) : 0;
    *why = "the trace names no device";
    if (!n) return NULL;
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)d->name[i]);
    low[n] = '\0';
    const rule *fam = NULL;
    for (size_t i = 0; i < NRULES && !fam; i++)
        if (has_token(low, rules[i].family)) fam = &rules[i];
    if (!fam) {
        *why = "the device is not in the table (server/lib/devices.c)";
        return NULL;
    }
    const rule *hit = NULL;
    int hits = 0;
    for (size_t i = 0; i < NRULES; i++) {
        if (strcmp(rules[i].family, fam->family) || !fits(&rules[i], low, d)) continue;
        /* two rows may carry the same figures (one MI250 GCD under two names) */
        if (!hit || strcmp(hit->row.id, rules[i].row.id)) hits++;
        if (!hit) hit = &rules[i];
    }
    if (hits != 1) {
        *why = hits ? "the device's variant is ambiguous" :
                      "the device's variant (form factor, memory size or SM count) is not in the table";
        return NULL;
    }
    *why = "";
    return &hit->row;
}

static device_row table_rows[NRULES];
static size_t ntable_rows;

static const device_row *rows_cache(size_t *n) {
    /* Distinct rows in table order; built on first use. Why a copy: the rules repeat a row
     * under two families. Not thread-safe on first use: tests only. */
    if (!ntable_rows)
        for (size_t i = 0; i < NRULES; i++) {
            int dup = 0;
            for (size_t j = 0; j < ntable_rows; j++) dup |= !strcmp(table_rows[j].id, rules[i].row.id);
            if (!dup) table_rows[ntable_rows++] = rules[i].row;
        }
    *n = ntable_rows;
    return table_rows;
}

const device_row *devices_table(size_t *n) { return rows_cache(n); }
