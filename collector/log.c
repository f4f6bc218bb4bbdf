/* log.c -- one-line stderr logging for the collector and firstpass-upload (log.h).
 *
 * Owns nothing but stack buffers and fp_q's per-thread ring. fp_log must not allocate, exit
 * or abort: it is called from CUPTI callbacks and atexit handlers inside the profiled
 * program. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_logfmt; /* set once, before threads start (fp_log_logfmt) */

void fp_log_logfmt(int on) { g_logfmt = on != 0; }

static int quiet(void)
{
    const char *q = getenv("FIRSTPASS_QUIET");
    return q && strcmp(q, "1") == 0;
}

const char *fp_q_into(const char *s, char *out, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    out[o++] = '"';
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[5];
        size_t k = 0;
        if (c == '"' || c == '\\')
            esc[k++] = '\\', esc[k++] = (char)c;
        else if (c == '\n' || c == '\r' || c == '\t')
            esc[k++] = '\\', esc[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        else if (c < 0x20 || c == 0x7f)
            esc[k++] = '\\', esc[k++] = 'x', esc[k++] = hex[c >> 4], esc[k++] = hex[c & 15];
        else
            esc[k++] = (char)c;
        if (o + k + 5 > n) { /* room for "...", the quote and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, esc, k);
        o += k;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

const char *fp_q(const char *s)
{
    static _Thread_local char ring[8][1024];
    static _Thread_local unsigned next;
    char *b = ring[next++ % 8];
    return fp_q_into(s, b, sizeof ring[0]);
}

/* A word logfmt carries without quotes: no space, quote, '=', backslash or control byte. */
static int bare(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '"' || *s == '=' || *s == '\\' || *s == 0x7f)
            return 0;
    return 1;
}

static void emit(char *line, size_t len, size_t cap)
{
    ssize_t w;
    if (len > cap - 1)
        len = cap - 1;
    line[len++] = '\n';
    w = write(2, line, len);
    (void)w;
}

/* Fields cut at the end of f (cap bytes) may end inside a quoted value: the value is closed
 * (a dangling backslash dropped) so that the line stays logfmt. */
static void close_cut(char *f, size_t cap)
{
    size_t n = strlen(f);
    int in = 0, dangling = 0;
    if (n > 0 && n + 1 >= cap) /* room for the closing quote */
        f[--n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (in && f[i] == '\\') {
            dangling = i + 1 == n;
            i++;
        } else if (f[i] == '"') {
            in = !in;
        }
    }
    if (!in)
        return;
    if (dangling)
        n--;
    f[n++] = '"';
    f[n] = '\0';
}

/* The line of level, msg and fields (already formatted, "" none). */
static void logkv_text(const char *level, const char *msg, const char *fields)
{
    char line[1100 + 3072 + 64], q[1024];
    int n = snprintf(line, sizeof line - 1, "level=%s msg=%s%s%s", level, bare(msg) ? msg : fp_q_into(msg, q, sizeof q),
                     fields[0] ? " " : "", fields);
    if (n < 0)
        return;
    emit(line, (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2, sizeof line);
}

void fp_logkv(const char *level, const char *msg, const char *fields, ...)
{
    char f[3072] = "";
    int n = 0;
    va_list ap;
    if (quiet())
        return;
    if (fields) {
        va_start(ap, fields);
        n = vsnprintf(f, sizeof f, fields, ap);
        va_end(ap);
    }
    if (n >= (int)sizeof f)
        close_cut(f, sizeof f);
    logkv_text(level, msg, f);
}

void fp_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;
    size_t len;

    if (quiet())
        return;
    va_start(ap, fmt);
    if (g_logfmt) {
        n = vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        if (n >= 0)
            logkv_text("info", line, "");
        return;
    }
    memcpy(line, "firstpass: ", 11);
    n = vsnprintf(line + 11, sizeof line - 12, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    len = 11 + ((size_t)n < sizeof line - 12 ? (size_t)n : sizeof line - 13);
    emit(line, len, sizeof line);
}
