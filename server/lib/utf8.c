/* utf8.c: utf8.h. */
#include "lib/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bytes of the character a leading byte starts, 1 for ASCII and for a stray byte. */
static size_t seq_len(unsigned char c) { return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

size_t utf8_cut(const char *s, size_t len, size_t max) {
    if (len <= max) return len;
    size_t cut = max;
    /* back to the start of the character that straddles the cut (continuation bytes are 10xxxxxx) */
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    return cut;
}

int utf8_snprintf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (r < 0 || n == 0 || (size_t)r < n) return r;
    size_t len = strlen(buf), k = 0;
    while (k < len && k < 4 && ((unsigned char)buf[len - 1 - k] & 0xC0) == 0x80) k++;
    if (k < len && k < 4 && seq_len((unsigned char)buf[len - 1 - k]) > k + 1) buf[len - 1 - k] = '\0'; /* incomplete: drop it */
    return r;
}

const char *utf8_clip(const char *s, size_t max, char *buf, size_t n) {
    size_t len = strlen(s);
    if (len <= max) return s;
    snprintf(buf, n, "%.*s\xe2\x80\xa6", (int)utf8_cut(s, len, max), s);
    return buf;
}
