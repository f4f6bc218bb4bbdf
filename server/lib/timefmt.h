/* timefmt.h: UTC times as text, the one formatter (API replies, backup file names). */
#ifndef FP_TIMEFMT_H
#define FP_TIMEFMT_H

#include <stddef.h>

#define TIMEFMT_LEN 32

/* Unix seconds t as ISO 8601 UTC into out (TIMEFMT_LEN bytes): "2026-12-04T15:22:18Z", or
 * with basic = 1 the compact form for file names, "20261204T152218Z". Returns out. */
const char *timefmt_utc(long long t, int basic, char out[TIMEFMT_LEN]);

/* A duration in microseconds as torch prints it: "12.345ms", "456.000us", "1.234s". Returns out. */
const char *timefmt_us(double us, char *out, size_t n);

#endif
