/* log.c: log_line (log.h). Owns nothing but stderr's line discipline. */
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/logfmt.h"

/* A word logfmt can carry without quotes: no space, quote, '=', backslash or control byte. */
static int bare(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '"' || *s == '=' || *s == '\\' || *s == 0x7f) return 0;
    return 1;
}

void log_line(const char *level, const char *msg, const char *fields, ...) {
    char line[4096], q[1024];
    int n = snprintf(line, sizeof line, "level=%s msg=%s", level, bare(msg) ? msg : logfmt_quote(msg, q, sizeof q));
    if (n < 0) return;
    if ((size_t)n >= sizeof line - 2) n = (int)sizeof line - 2;
    if (fields && *fields) {
        va_list ap;
        va_start(ap, fields);
        line[n++] = ' ';
        vsnprintf(line + n, sizeof line - (size_t)n - 1, fields, ap); /* truncated to fit, room kept for '\n' */
        va_end(ap);
        n = (int)strlen(line);
    }
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, (size_t)n);
}
