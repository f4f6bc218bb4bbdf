/* mono.h: the monotonic clock and the thread's CPU clock in milliseconds, for the timings the FIRSTPASS_TRACE_ANALYSIS
 * log and the loader queue's wait counters report. */
#ifndef FP_MONO_H
#define FP_MONO_H

#include <time.h>

static inline double mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The calling thread's CPU time in milliseconds: a step's own cost while other threads
 * (the analysis jobs, another upload) compete for the cores its wall time includes. */
static inline double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#endif
