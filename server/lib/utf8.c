/* utf8.c: utf8.h. */
#include "lib/utf8.h"

#include <stdarg.h>
#include <stdint.h>
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
    int r = utf8_vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

int utf8_vsnprintf(char *buf, size_t n, const char *fmt, va_list ap) {
    int r = vsnprintf(buf, n, fmt, ap);
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

/* Bytes of the valid sequence at s[0..n) (1..4), 0 when none starts there. */
static size_t valid_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c < 0xC2 || c > 0xF4 || len > n) return 0; /* C0, C1: overlong 2-byte forms; 80..BF: no lead */
    unsigned c1 = s[1];
    if ((c1 & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && c1 < 0xA0) return 0; /* overlong 3-byte */
    if (c == 0xED && c1 > 0x9F) return 0; /* U+D800..DFFF, surrogates */
    if (c == 0xF0 && c1 < 0x90) return 0; /* overlong 4-byte */
    if (c == 0xF4 && c1 > 0x8F) return 0; /* over U+10FFFF */
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

size_t utf8_valid_prefix(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        size_t l = valid_seq(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

size_t utf8_scrub(const char *s, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        size_t ok = utf8_valid_prefix(s + i, n - i); /* a run that needs nothing, copied whole */
        memcpy(out + o, s + i, ok);
        o += ok;
        i += ok;
        if (i < n) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    return o;
}
