/* devfile.h: --devices FILE: a team's own device rows for the efficiency figures.
 *
 * devfile.c owns the file's format and its parser; the rows it reads go to lib/devices.h
 * (devices_set_extra), which tries them before its built-in table, first match wins. Read
 * once at start-up (http_serve): a file that does not parse stops the start-up, so a typo
 * never leaves the server judging against the wrong peaks. Sessions keep the figures of
 * the rows they were analysed with (their document names the table: device.table).
 *
 * File format (JSON, at most DEVFILE_BYTES_MAX bytes and DEVICES_EXTRA_MAX rows):
 *   {"devices": [
 *     {"match": "nvidia a100-sxm4-80gb*",      glob (fnmatch) over the deviceProperties
 *                                              name, both lowercased; required
 *      "id": "a100-lab",                       short name the reply shows; required
 *      "label": "Our A100 at 1.2 GHz",         optional (default: the id)
 *      "source": "measured 2026-01, lab 3",    where the figures come from; optional
 *      "sms": 108,                             SM / CU count that must match too; optional
 *      "memory_gib": [70, 85],                 totalGlobalMem range that must match; optional
 *      "peaks_tflops": {"fp32": 19.5,          DENSE peaks in TFLOP/s; fp32 required, the
 *                       "tf32_tensor": 156,    others 0 or absent when the device has none:
 *                       "fp32_matrix": 0,      fp32_matrix (AMD MFMA), fp16_tensor,
 *                       "fp16_tensor": 312,    bf16_tensor, fp8_tensor
 *                       "bf16_tensor": 312, "fp8_tensor": 0},
 *      "bandwidth_gbps": 2039}                 DRAM bandwidth in GB/s (10^9 bytes/s); required
 *   ]}
 * Strings are at most 255 bytes; numbers finite, peaks up to 10^6 TFLOP/s, bandwidth over 0
 * and up to 10^6 GB/s. */
#ifndef FP_DEVFILE_H
#define FP_DEVFILE_H

#include <stddef.h>

#define DEVFILE_BYTES_MAX (1u << 20)

/* Reads path and installs its rows; 0, or -1 with "PATH: why" in err. The rows live until
 * devfile_free (the process's end). */
int devfile_load(const char *path, char *err, size_t errlen);
/* Parses text (len bytes) and installs its rows; 0 or -1 with why in err. */
int devfile_parse(const char *text, size_t len, char *err, size_t errlen);
/* Uninstalls and frees the rows. */
void devfile_free(void);

#endif
