/* minify.c: whitespace outside strings dropped, 64 bytes a step (minify.h).
 *
 * The loader minifies every event's text on its own thread (load.c: chunk_event); the loop a
 * byte at a time was 17 % of that thread on the many-threads shape (248M of 1,472M
 * instructions at 30 MB), about 9 instructions a byte, and that thread is the slower half of
 * the stream there. With SSE2 (every x86-64) a block of 64 bytes is classified at once:
 * quotes that a backslash does not escape, the strings they open and close, and the
 * whitespace outside them; the bytes kept are then copied a run at a time, 16 bytes a store.
 * The escape and string masks are simdjson's (Langdale and Lemire, "Parsing Gigabytes of JSON
 * per Second", 2019): a quote is escaped when an odd-length run of backslashes ends just
 * before it, and a prefix XOR of the unescaped quotes marks the bytes inside strings. */
#include "ingest/minify.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define MINIFY_SIMD 1
#else
#define MINIFY_SIMD 0
#endif

static int simd_on = 1;
void ingest_minify_set_simd(int on) { simd_on = on; }

/* The state between two steps: inside a string; the next byte escaped (a string's). */
typedef struct mstate { int in_str, esc; } mstate;

/* The high bit of each byte of w equal to c: only the lowest flagged byte is exact (a borrow
 * can flag one above it), which is all the string loop uses. */
#define SWAR_ONES 0x0101010101010101ull
static inline uint64_t swar_eq(uint64_t w, unsigned char c) {
    uint64_t v = w ^ (SWAR_ONES * c);
    return (v - SWAR_ONES) & ~v & (SWAR_ONES << 7);
}

/* s[i..n) into o from state st; returns the end of what it wrote. Outside strings a byte up
 * to ' ' is whitespace: each byte is stored and kept by advancing o, no branch. Strings go
 * eight bytes a step up to a quote or a backslash (o never passes i, so the 8-byte stores
 * stay inside out; they would overwrite bytes not yet read if out were json, hence the
 * separate buffers). */
static char *minify_bytes(const unsigned char *s, size_t i, size_t n, char *o, mstate *st) {
    while (i < n) {
        if (st->esc) { /* the escaped byte, whatever it is */
            *o++ = (char)s[i++];
            st->esc = 0;
        }
        while (i < n && !st->in_str) {
            unsigned char c = s[i++];
            *o = (char)c;
            o += c > ' ';
            st->in_str = c == '"';
        }
        while (i < n && st->in_str) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            if (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, s + i, 8);
                uint64_t m = swar_eq(w, '"') | swar_eq(w, '\\');
                memcpy(o, &w, 8);
                size_t k = m ? (size_t)__builtin_ctzll(m) / 8 : 8;
                i += k;
                o += k;
                if (k == 8) continue;
            }
#endif
            unsigned char c = s[i++];
            *o++ = (char)c;
            if (c == '"') st->in_str = 0;
            else if (c == '\\') {
                if (i == n) st->esc = 1;
                else *o++ = (char)s[i++];
            }
        }
    }
    return o;
}

#if MINIFY_SIMD
static inline uint64_t bits16(__m128i m, int at) { return (uint64_t)(unsigned)_mm_movemask_epi8(m) << at; }

/* The bytes of the block equal to c, one bit each. */
static inline uint64_t eq_mask(const __m128i v[4], char c) {
    __m128i k = _mm_set1_epi8(c);
    return bits16(_mm_cmpeq_epi8(v[0], k), 0) | bits16(_mm_cmpeq_epi8(v[1], k), 16) |
           bits16(_mm_cmpeq_epi8(v[2], k), 32) | bits16(_mm_cmpeq_epi8(v[3], k), 48);
}

/* The bytes up to ' ' (unsigned: UTF-8's bytes are not whitespace). */
static inline uint64_t ws_mask(const __m128i v[4]) {
    __m128i sp = _mm_set1_epi8(' ');
    uint64_t m = 0;
    for (int k = 0; k < 4; k++) m |= bits16(_mm_cmpeq_epi8(_mm_min_epu8(v[k], sp), v[k]), 16 * k);
    return m;
}

/* The bytes a backslash escapes; *carry: the block's first byte is one (in and out). A run
 * of backslashes escapes its every other byte from its start, and the byte after it when
 * its length is odd: adding the run's odd-position starts to the runs carries through each
 * run, which tells an odd-length run from an even one without a loop. */
static inline uint64_t escaped_mask(uint64_t bs, uint64_t *carry) {
    const uint64_t even = 0x5555555555555555ull;
    bs &= ~*carry;
    uint64_t follows = bs << 1 | *carry;
    uint64_t odd_starts = bs & ~even & ~follows;
    uint64_t sum;
    *carry = __builtin_add_overflow(odd_starts, bs, &sum);
    return (even ^ sum << 1) & follows;
}

static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* One block of 64 bytes at s into o, of which the bytes in valid count; returns the bytes
 * kept. It reads up to s + 79 and may store up to 15 bytes past what it keeps (a run's last
 * 16-byte store). */
static size_t minify_block(const unsigned char *s, char *o, uint64_t valid, uint64_t *in_str, uint64_t *esc) {
    __m128i v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm_loadu_si128((const __m128i *)(s + 16 * k));
    uint64_t quote = eq_mask(v, '"') & ~escaped_mask(eq_mask(v, '\\'), esc);
    uint64_t str = prefix_xor(quote) ^ *in_str; /* a string's bytes and its opening quote */
    *in_str = (uint64_t)((int64_t)str >> 63);
    uint64_t keep = ~(ws_mask(v) & ~str) & valid;
    if (keep == ~0ull) {
        for (int k = 0; k < 4; k++) _mm_storeu_si128((__m128i *)(o + 16 * k), v[k]);
        return 64;
    }
    char *o0 = o;
    while (keep) {
        int a = __builtin_ctzll(keep);
        int len = __builtin_ctzll(~(keep >> a)); /* keep is not all ones: ~(keep >> a) is not 0 */
        for (int k = 0; k < len; k += 16) _mm_storeu_si128((__m128i *)(o + k), _mm_loadu_si128((const __m128i *)(s + a + k)));
        o += len;
        keep = a + len >= 64 ? 0 : keep & ~0ull << (a + len);
    }
    return (size_t)(o - o0);
}
#endif

size_t ingest_minify(const char *json, size_t n, char *out) {
    const unsigned char *s = (const unsigned char *)json;
    char *o = out;
    size_t i = 0;
#if MINIFY_SIMD
    /* Why 80: a block reads 16 bytes past its end, and its stores end at most 15 bytes past
     * what it kept, which is at most the block's end (o never passes i). The rest, fewer
     * than 80 bytes, goes through the same blocks from a copy padded with blanks, into a
     * buffer of their own: a byte at a time it was a third of the time on 300-byte events. */
    if (simd_on) {
        uint64_t in_str = 0, esc = 0;
        for (; i + 80 <= n; i += 64) o += minify_block(s + i, o, ~0ull, &in_str, &esc);
        unsigned char tail[144];
        char kept[80];
        if (i < n) {
            memset(tail, ' ', sizeof tail);
            memcpy(tail, s + i, n - i);
        }
        for (size_t t = 0; i < n; t += 64, i += 64) {
            uint64_t valid = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
            size_t k = minify_block(tail + t, kept, valid, &in_str, &esc);
            memcpy(o, kept, k);
            o += k;
        }
        return (size_t)(o - out);
    }
#endif
    mstate st = {0, 0};
    return (size_t)(minify_bytes(s, i, n, o, &st) - out);
}
