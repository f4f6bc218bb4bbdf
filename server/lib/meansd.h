/* meansd.h: the mean and sample standard deviation of the steps, one formula for the analysis
 * (analyze.c: the numbers stored at ingest) and the regression gate's fallback (store/history.c:
 * sessions stored before those numbers), so that both give the same doubles. */
#ifndef FP_MEANSD_H
#define FP_MEANSD_H

#include <math.h>
#include <stddef.h>

/* v[0..n): *mean (0 when n is 0) and *sd, the sample standard deviation (0 with fewer than
 * two). Two passes: the squares of the deviations, not of the values (no cancellation); the
 * sums in v's order. */
static inline void mean_sd(const double *v, size_t n, double *mean, double *sd) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    *mean = n ? sum / (double)n : 0;
    for (size_t i = 0; i < n; i++) {
        double d = v[i] - *mean;
        sq += d * d;
    }
    *sd = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
}

#endif
