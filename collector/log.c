/* log.c -- one-line stderr logging for the collector and firstpass-upload.
 *
 * Owns nothing but a stack buffer. Must not allocate, exit or abort: it is called from CUPTI
 * callbacks and atexit handlers inside the profiled program. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fp_log(const char *fmt, ...)
{
    char line[1024];
    const char *q = getenv("FIRSTPASS_QUIET");
    va_list ap;
    int n;
    size_t len;
    ssize_t w;

    if (q && strcmp(q, "1") == 0)
        return;
    memcpy(line, "firstpass: ", 11);
    va_start(ap, fmt);
    n = vsnprintf(line + 11, sizeof line - 12, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    len = 11 + ((size_t)n < sizeof line - 12 ? (size_t)n : sizeof line - 13);
    line[len++] = '\n';
    w = write(2, line, len);
    (void)w;
}
