/* devices.c: the device table of devices.h and its matching rules.
 *
 * Owns the table below and the added rows' pointer (devices_set_extra). Pure: no SQL, no
 * JSON, no allocation. Each row's figures are the DENSE ones of the public source named in
 * it (a datasheet's headline with sparsity is halved: the datasheets mark those with an
 * asterisk). */
#include "lib/devices.h"

#include <ctype.h>
#include <fnmatch.h>
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

/* Sources, cited once each. */
#define SRC_V100 "NVIDIA V100 datasheet (volta-v100-datasheet-update-us-1165301-r5, 2020); DGX Station datasheet (2018)"
#define SRC_V100S "NVIDIA V100S PCIe datasheet (2019)"
#define SRC_T4 "NVIDIA T4 Tensor Core GPU datasheet (2019): 8.1 TFLOPS FP32, 65 FP16 mixed precision, 320 GB/s"
#define SRC_A100 "NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4)"
#define SRC_A10 "NVIDIA A10 datasheet (2021)"
#define SRC_A10G "Baseten, \"NVIDIA A10 vs A10G for ML model inference\" (2023; AWS publishes no A10G datasheet)"
#define SRC_H100 "NVIDIA H100 datasheet (h100-datasheet-2430615, 2024): SXM, PCIe and NVL columns"
#define SRC_GH200 "NVIDIA GH200 Grace Hopper Superchip datasheet (2024)"
#define SRC_H200 "NVIDIA H200 datasheet (2024)"
#define SRC_B200 "NVIDIA GB200 NVL72 / HGX B200 datasheet (2024), the HGX B200 column"
#define SRC_L40 "NVIDIA L40 datasheet (2022)"
#define SRC_L40S "NVIDIA L40S datasheet (2023)"
#define SRC_L4 "NVIDIA L4 datasheet (2023)"
#define SRC_ADA "NVIDIA Ada GPU architecture whitepaper v2.01 (2023), appendix A (FP32-accumulate tensor figures)"
#define SRC_MI250 "AMD Instinct MI250 datasheet (2021); MI210 datasheet (the same per-GCD figures)"
#define SRC_MI250X "AMD Instinct MI250X datasheet (2021)"
#define SRC_MI300X "AMD Instinct MI300X datasheet (2023)"

static const rule rules[] = {
    /* V100 SXM2 15.7 TFLOPS FP32, 125 TFLOPS tensor (FP16; no BF16, no TF32), 900 GB/s HBM2;
     * PCIe 14 / 112, 900 GB/s. The DGX Station's four "V100-DGXS" GPUs are SXM2 parts at
     * the SXM2 clocks: 500 TFLOPS FP16 for four. */
    {"v100", {"sxm2", "dgxs", "sxm3"}, NULL, 0, 0, 80, 7, 0,
     {"v100-sxm2", "NVIDIA V100 SXM2", 15.7 * T, 0, 0, 125 * T, 0, 0, 900 * G, SRC_V100}},
    {"v100", {"pcie", NULL, NULL}, NULL, 0, 0, 80, 7, 0,
     {"v100-pcie", "NVIDIA V100 PCIe", 14 * T, 0, 0, 112 * T, 0, 0, 900 * G, SRC_V100}},
    /* V100S PCIe: 16.4 TFLOPS FP32, 130 tensor, 1134 GB/s. */
    {"v100s", {NULL, NULL, NULL}, NULL, 0, 0, 80, 7, 0,
     {"v100s-pcie", "NVIDIA V100S PCIe", 16.4 * T, 0, 0, 130 * T, 0, 0, 1134 * G, SRC_V100S}},
    /* T4 (Turing, 40 SMs, 16 GB): FP16 tensor only, no BF16, no TF32. */
    {"t4", {NULL, NULL, NULL}, NULL, 14, 16.5, 40, 7, 5,
     {"t4", "NVIDIA T4", 8.1 * T, 0, 0, 65 * T, 0, 0, 320 * G, SRC_T4}},
    /* A100: 19.5 TFLOPS FP32, TF32 156 (312*), BF16/FP16 312 (624*), no FP8; 40GB: 1,555 GB/s;
     * 80GB PCIe 1,935 GB/s, 80GB SXM 2,039 GB/s. "PG509" is the A100 SXM4 board (HGX A100;
     * nvidia-smi names it so on Meta's hosts), so it counts as SXM. */
    {"a100", {"sxm", "pg509", NULL}, NULL, 35, 45, 108, 8, 0,
     {"a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB", 19.5 * T, 156 * T, 0, 312 * T, 312 * T, 0, 1555 * G, SRC_A100}},
    {"a100", {"sxm", "pg509", NULL}, NULL, 70, 85, 108, 8, 0,
     {"a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", 19.5 * T, 156 * T, 0, 312 * T, 312 * T, 0, 2039 * G, SRC_A100}},
    {"a100", {"pcie", NULL, NULL}, NULL, 35, 45, 108, 8, 0,
     {"a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", 19.5 * T, 156 * T, 0, 312 * T, 312 * T, 0, 1555 * G, SRC_A100}},
    {"a100", {"pcie", NULL, NULL}, NULL, 70, 85, 108, 8, 0,
     {"a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", 19.5 * T, 156 * T, 0, 312 * T, 312 * T, 0, 1935 * G, SRC_A100}},
    /* A10: 31.2 TFLOPS FP32, TF32 62.5 (125*), BF16/FP16 125 (250*), 600 GB/s, 24 GB, 72 SMs. */
    {"a10", {NULL, NULL, NULL}, NULL, 20, 26, 72, 8, 6,
     {"a10", "NVIDIA A10", 31.2 * T, 62.5 * T, 0, 125 * T, 125 * T, 0, 600 * G, SRC_A10}},
    /* A10G (AWS G5): 80 SMs, 35 TFLOPS FP32, TF32 35, BF16/FP16 70 (half the A10's tensor
     * rate), 600 GB/s, 24 GB. */
    {"a10g", {NULL, NULL, NULL}, NULL, 20, 26, 80, 8, 6,
     {"a10g", "NVIDIA A10G", 35 * T, 35 * T, 0, 70 * T, 70 * T, 0, 600 * G, SRC_A10G}},
    /* H100 SXM 67 TFLOPS FP32, TF32 494.5 (989*), BF16 989.5 (1,979*), FP8 1,979 (3,958*),
     * 3.35 TB/s, 132 SMs; PCIe 51, 378 (756*), 756.5 (1,513*), 1,513 (3,026*), 2 TB/s, 114
     * SMs; NVL (94 GB) 60, 417.5 (835*), 835.5 (1,671*), 1,670.5 (3,341*), 3.9 TB/s. */
    {"h100", {NULL, NULL, NULL}, "nvl", 75, 85, 132, 9, 0,
     {"h100-sxm5-80gb", "NVIDIA H100 SXM5 80GB", 67 * T, 494.5 * T, 0, 989.5 * T, 989.5 * T, 1979 * T, 3350 * G, SRC_H100}},
    {"h100", {"pcie", NULL, NULL}, "nvl", 75, 85, 114, 9, 0,
     {"h100-pcie-80gb", "NVIDIA H100 PCIe 80GB", 51 * T, 378 * T, 0, 756.5 * T, 756.5 * T, 1513 * T, 2000 * G, SRC_H100}},
    {"h100", {"nvl", NULL, NULL}, NULL, 88, 100, 132, 9, 0,
     {"h100-nvl-94gb", "NVIDIA H100 NVL 94GB", 60 * T, 417.5 * T, 0, 835.5 * T, 835.5 * T, 1670.5 * T, 3900 * G, SRC_H100}},
    /* GH200's Hopper GPU: H100 SXM's compute (67, 494.5, 989.5, 1,979 dense); 96 GB HBM3 at
     * 4 TB/s or 144 GB HBM3e at 4.9 TB/s, 132 SMs. */
    {"gh200", {NULL, NULL, NULL}, NULL, 88, 100, 132, 9, 0,
     {"gh200-96gb", "NVIDIA GH200 96GB HBM3", 67 * T, 494.5 * T, 0, 989.5 * T, 989.5 * T, 1979 * T, 4000 * G, SRC_GH200}},
    {"gh200", {NULL, NULL, NULL}, NULL, 130, 150, 132, 9, 0,
     {"gh200-144gb", "NVIDIA GH200 144GB HBM3e", 67 * T, 494.5 * T, 0, 989.5 * T, 989.5 * T, 1979 * T, 4900 * G, SRC_GH200}},
    /* H200 SXM: H100 SXM's compute, 141 GB at 4.8 TB/s. H200 NVL (lower clocks) is not in
     * the table. */
    {"h200", {NULL, NULL, NULL}, "nvl", 130, 145, 132, 9, 0,
     {"h200-sxm-141gb", "NVIDIA H200 SXM 141GB", 67 * T, 494.5 * T, 0, 989.5 * T, 989.5 * T, 1979 * T, 4800 * G, SRC_H200}},
    /* HGX B200, per GPU: 75 TFLOPS FP32, TF32 1,100 (2,200*), FP16/BF16 2,250 (4,500*), FP8
     * 4,500 (9,000*), 180 GB HBM3e at 7.7 TB/s, 148 SMs. */
    {"b200", {NULL, NULL, NULL}, NULL, 160, 200, 148, 10, 0,
     {"b200", "NVIDIA B200 (HGX)", 75 * T, 1100 * T, 0, 2250 * T, 2250 * T, 4500 * T, 7700 * G, SRC_B200}},
    /* L40S: 91.6 TFLOPS FP32, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733 (1,466*),
     * 864 GB/s, 48 GB, 142 SMs. L40: 90.5, 90.5 (181*), 181.05 (362.1*), 362 (724*), 864 GB/s.
     * L4: 30.3, 60 (120*), 121 (242*), 242.5 (485*), 300 GB/s, 24 GB, 58 SMs. Tokens are
     * whole words, so "l4", "l40" and "l40s" never match each other. */
    {"l40s", {NULL, NULL, NULL}, NULL, 44, 50, 142, 8, 9,
     {"l40s", "NVIDIA L40S", 91.6 * T, 183 * T, 0, 362.05 * T, 362.05 * T, 733 * T, 864 * G, SRC_L40S}},
    {"l40", {NULL, NULL, NULL}, NULL, 44, 50, 142, 8, 9,
     {"l40", "NVIDIA L40", 90.5 * T, 90.5 * T, 0, 181.05 * T, 181.05 * T, 362 * T, 864 * G, SRC_L40}},
    {"l4", {NULL, NULL, NULL}, NULL, 20, 26, 58, 8, 9,
     {"l4", "NVIDIA L4", 30.3 * T, 60 * T, 0, 121 * T, 121 * T, 242.5 * T, 300 * G, SRC_L4}},
    /* GeForce RTX 4090 (128 SMs, 24 GB GDDR6X, 1,008 GB/s): 82.6 TFLOPS FP32, TF32 82.6, FP16 /
     * BF16 with FP32 accumulation 165.2, FP8 with FP32 accumulation 330.3 (GeForce halves
     * those against FP16 accumulation). RTX 6000 Ada (142 SMs, 48 GB, 960 GB/s): 91.1, 182.1,
     * 364.2, 728.5. */
    {"rtx 4090", {NULL, NULL, NULL}, NULL, 22, 25, 128, 8, 9,
     {"rtx-4090", "NVIDIA GeForce RTX 4090", 82.6 * T, 82.6 * T, 0, 165.2 * T, 165.2 * T, 330.3 * T, 1008 * G, SRC_ADA}},
    {"rtx 6000 ada", {NULL, NULL, NULL}, NULL, 44, 50, 142, 8, 9,
     {"rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", 91.1 * T, 182.1 * T, 0, 364.2 * T, 364.2 * T, 728.5 * T, 960 * G, SRC_ADA}},
    /* MI250: per OAM (two GCDs) 45.3 TFLOPS FP32 vector, 90.5 FP32 matrix, 362.1 FP16/BF16
     * matrix, 3.2768 TB/s; PyTorch sees one GCD: half of each, 104 CUs, 64 GB. MI250X: 47.9,
     * 95.7, 383, 3.2768 TB/s per OAM; one GCD 110 CUs. No TF32, no FP8 on CDNA2. */
    {"mi250", {NULL, NULL, NULL}, NULL, 60, 68, 104, 0, 0,
     {"mi250-gcd", "AMD Instinct MI250 (one GCD)", 22.65 * T, 0, 45.25 * T, 181.05 * T, 181.05 * T, 0, 1638.4 * G, SRC_MI250}},
    {"mi250x", {NULL, NULL, NULL}, NULL, 60, 68, 110, 0, 0,
     {"mi250x-gcd", "AMD Instinct MI250X (one GCD)", 23.95 * T, 0, 47.85 * T, 191.5 * T, 191.5 * T, 0, 1638.4 * G, SRC_MI250X}},
    {"amd radeon graphics", {NULL, NULL, NULL}, NULL, 60, 68, 104, 9, 0,
     {"mi250-gcd", "AMD Instinct MI250 (one GCD)", 22.65 * T, 0, 45.25 * T, 181.05 * T, 181.05 * T, 0, 1638.4 * G, SRC_MI250}},
    {"amd radeon graphics", {NULL, NULL, NULL}, NULL, 60, 68, 110, 9, 0,
     {"mi250x-gcd", "AMD Instinct MI250X (one GCD)", 23.95 * T, 0, 47.85 * T, 191.5 * T, 191.5 * T, 0, 1638.4 * G, SRC_MI250X}},
    /* MI300X: 81.7 TFLOPS FP32 vector (as the table had it), 163.4 FP32 matrix, 1,307.4
     * FP16/BF16 (2,614.9*), 2,614.9 FP8 (5,229.8*), 5.3 TB/s, 192 GB, 304 CUs. Its TF32
     * is left out: PyTorch's FP32 GEMMs do not use it by default on ROCm. */
    {"mi300x", {NULL, NULL, NULL}, NULL, 180, 200, 304, 0, 0,
     {"mi300x", "AMD Instinct MI300X", 81.7 * T, 0, 163.4 * T, 1307.4 * T, 1307.4 * T, 2614.9 * T, 5300 * G, SRC_MI300X}},
};
#define NRULES (sizeof rules / sizeof rules[0])

static const device_extra *extra_rows;
static size_t nextra_rows;

void devices_set_extra(const device_extra *rows, size_t n) {
    extra_rows = n ? rows : NULL;
    nextra_rows = n > DEVICES_EXTRA_MAX ? DEVICES_EXTRA_MAX : n;
}

/* 1 when tok occurs in s (both lowercase) with no letter or digit right before or after. */
static int has_token(const char *s, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = strstr(s, tok); p; p = strstr(p + 1, tok)) {
        int before = p > s && isalnum((unsigned char)p[-1]), after = isalnum((unsigned char)p[n]);
        if (!before && !after) return 1;
    }
    return 0;
}

static int mem_fits(double lo, double hi, const device_info *d) {
    double gib = d->mem_bytes / GIB;
    return !(hi > 0) || (d->mem_bytes > 0 && gib >= lo && gib <= hi);
}

static int fits(const rule *r, const char *low, const device_info *d) {
    int need = !r->need[0];
    for (int i = 0; i < 3 && r->need[i]; i++) need |= strstr(low, r->need[i]) != NULL;
    if (!need || (r->forbid && strstr(low, r->forbid))) return 0;
    if (!mem_fits(r->mem_lo, r->mem_hi, d)) return 0;
    if (r->sms && d->sms != r->sms) return 0;
    if (r->cc_major && (d->cc_major != r->cc_major || d->cc_minor != r->cc_minor)) return 0;
    return 1;
}

/* The first added row d fits, NULL when none. */
static const device_row *match_extra(const char *low, const device_info *d) {
    for (size_t i = 0; i < nextra_rows; i++) {
        const device_extra *x = &extra_rows[i];
        char pat[256];
        size_t n = strlen(x->pattern);
        if (n >= sizeof pat) continue;
        for (size_t k = 0; k <= n; k++) pat[k] = (char)tolower((unsigned char)x->pattern[k]);
        if (fnmatch(pat, low, 0) || (x->sms && d->sms != x->sms) || !mem_fits(x->mem_lo, x->mem_hi, d)) continue;
        return &x->row;
    }
    return NULL;
}

/* Why no row of family fam fits: a MIG slice, or a variant the table lacks. */
static const char *why_no_variant(const rule *fam, const char *low, const device_info *d) {
    if (has_token(low, "mig")) return "a MIG slice (the name says MIG): its share of the GPU's peaks is not in the trace";
    int fewer = d->sms > 0;
    for (size_t i = 0; i < NRULES; i++)
        if (!strcmp(rules[i].family, fam->family) && rules[i].sms && d->sms >= rules[i].sms) fewer = 0;
    if (fewer)
        return "fewer SMs than any row of its family: a MIG slice or a cut-down part, whose share of the GPU's peaks is not in the trace";
    return "the device's variant (form factor, memory size or SM count) is not in the table";
}

const device_row *devices_match(const device_info *d, const char **why, int *extra) {
    char low[256];
    size_t n = d && d->name ? strlen(d->name) : 0;
    if (extra) *extra = 0;
    *why = "the trace names no device";
    if (!n) return NULL;
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)d->name[i]);
    low[n] = '\0';
    const device_row *x = match_extra(low, d);
    if (x) {
        if (extra) *extra = 1;
        *why = "";
        return x;
    }
    const rule *fam = NULL;
    for (size_t i = 0; i < NRULES && !fam; i++)
        if (has_token(low, rules[i].family)) fam = &rules[i];
    if (!fam) {
        *why = "the device is not in the table (server/lib/devices.c; --devices FILE adds rows)";
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
        *why = hits ? "the device's variant is ambiguous" : why_no_variant(fam, low, d);
        return NULL;
    }
    if (has_token(low, "mig")) {
        *why = why_no_variant(fam, low, d);
        return NULL;
    }
    *why = "";
    return &hit->row;
}

static device_row table_rows[NRULES];
static size_t ntable_rows;

const device_row *devices_table(size_t *n) {
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
