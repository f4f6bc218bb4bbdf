/* timefmt.c: timefmt_utc (timefmt.h). */
#include "lib/timefmt.h"

#include <stdio.h>
#include <time.h>

const char *timefmt_utc(long long t, int basic, char out[TIMEFMT_LEN]) {
    time_t ct = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&ct, &tm)) tm = (struct tm){0};
    strftime(out, TIMEFMT_LEN, basic ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
    return out;
}

const char *timefmt_us(double us, char *out, size_t n) {
    if (us >= 1e6) snprintf(out, n, "%.3fs", us / 1e6);
    else if (us >= 1e3) snprintf(out, n, "%.3fms", us / 1e3);
    else snprintf(out, n, "%.3fus", us);
    return out;
}
