/* logfmt.h: quoting of free text (names, paths, error messages) in one-line logfmt logs.
 *
 * Every log line of the server is `level=... msg=... key=value ...` on one line; a value
 * that may hold spaces, quotes or newlines goes through logfmt_quote, so no input can
 * break a line in two or forge a key. */
#ifndef FP_LOGFMT_H
#define FP_LOGFMT_H

#include <stddef.h>

/* Writes s as a double-quoted logfmt value into out (always NUL-terminated, truncated to
 * fit): backslash and quote escaped, newline as \n, other control bytes as a space. */
static inline const char *logfmt_quote(const char *s, char *out, size_t n) {
    size_t o = 0;
    if (n < 3) return n ? (out[0] = '\0', out) : out;
    out[o++] = '"';
    for (; s && *s && o + 3 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') out[o++] = '\\', out[o++] = (char)c;
        else if (c == '\n') out[o++] = '\\', out[o++] = 'n';
        else out[o++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

#endif
