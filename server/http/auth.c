/* auth.c: the tokens file, the token table and the bearer check (see auth.h).
 *
 * SHA-256 comes from Nettle (nettle-dev; libnettle8 is already on every machine that runs
 * libmicrohttpd, which links it through GnuTLS). */
#include "http/auth.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/vec.h"

typedef struct auth_entry {
    char name[AUTH_NAME_MAX + 1];
    unsigned char digest[AUTH_DIGEST_LEN];
    int hashed_at_rest;            /* given as sha256:HEX */
    unsigned line;
} auth_entry;

struct auth_tokens {
    auth_entry *e;
    size_t n, cap;
};

#define TOKENS_FILE_MAX (4u << 20)

static void sha256_of(const char *s, size_t n, unsigned char out[AUTH_DIGEST_LEN]) {
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, n, (const uint8_t *)s);
    sha256_digest(&ctx, AUTH_DIGEST_LEN, out);
}

int auth_equal(const unsigned char *a, const unsigned char *b, size_t n) {
    /* OR of the XORs, never an early exit: the loop's time is the same for any bytes. */
    volatile unsigned char d = 0;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static int token_ok(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && (((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') || (s[i] >= '0' && s[i] <= '9') || strchr("-._~+/", s[i])))
        i++;
    if (i == 0) return 0;
    while (i < n && s[i] == '=') i++;
    return i == n;
}

static int name_ok(const char *s, size_t n) {
    if (n == 0 || n > AUTH_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') || (s[i] >= '0' && s[i] <= '9') || strchr("._@-", s[i])))
            return 0;
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 32);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int set_err(char *err, size_t errlen, unsigned line, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && errlen) snprintf(err, errlen, "line %u: %s", line, msg);
    return -1;
}

/* Splits [s, s+n) into blank-separated fields; returns how many (at most max are kept). */
static int fields(const char *s, size_t n, const char **f, size_t *fl, int max) {
    int k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i == n) break;
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t') i++;
        if (k < max) { f[k] = s + start; fl[k] = i - start; }
        k++;
    }
    return k;
}

/* The secret field of a line: sha256:HEX or a plaintext token, into e->digest. */
static int parse_secret(const char *s, size_t n, auth_entry *e, char *err, size_t errlen) {
    if (n >= 7 && !strncasecmp(s, "sha256:", 7)) {
        if (n != 7 + 2 * AUTH_DIGEST_LEN)
            return set_err(err, errlen, e->line, "sha256: needs exactly %d hex digits, not %zu", 2 * AUTH_DIGEST_LEN, n - 7);
        for (int i = 0; i < AUTH_DIGEST_LEN; i++) {
            int hi = hexval(s[7 + 2 * i]), lo = hexval(s[8 + 2 * i]);
            if (hi < 0 || lo < 0) return set_err(err, errlen, e->line, "sha256: has a character that is not hex");
            e->digest[i] = (unsigned char)(hi << 4 | lo);
        }
        e->hashed_at_rest = 1;
        return 0;
    }
    if (!token_ok(s, n)) return set_err(err, errlen, e->line, "the token has a character outside [A-Za-z0-9-._~+/=]");
    if (n < AUTH_TOKEN_MIN || n > AUTH_TOKEN_MAX)
        return set_err(err, errlen, e->line, "the token must be %d to %d characters long, not %zu", AUTH_TOKEN_MIN, AUTH_TOKEN_MAX, n);
    sha256_of(s, n, e->digest);
    return 0;
}

/* Checks e against the entries already read: names and tokens must both be unique, or
 * the access log could not say who made a request. */
static int check_unique(const auth_tokens *t, const auth_entry *e, char *err, size_t errlen) {
    for (size_t i = 0; i < t->n; i++) {
        if (!strcmp(t->e[i].name, e->name))
            return set_err(err, errlen, e->line, "name '%s' is already used on line %u", e->name, t->e[i].line);
        if (auth_equal(t->e[i].digest, e->digest, AUTH_DIGEST_LEN))
            return set_err(err, errlen, e->line, "the same token as line %u ('%s')", t->e[i].line, t->e[i].name);
    }
    return 0;
}

static int parse_line(auth_tokens *t, const char *s, size_t n, unsigned line, char *err, size_t errlen) {
    if (n && s[n - 1] == '\r') n--;
    const char *f[2];
    size_t fl[2];
    int k = fields(s, n, f, fl, 2);
    if (k == 0 || f[0][0] == '#') return 0;
    if (k != 2) return set_err(err, errlen, line, "expected 'NAME TOKEN' or 'NAME sha256:HEX', found %d field%s", k, k == 1 ? "" : "s");
    auth_entry e;
    memset(&e, 0, sizeof e);
    e.line = line;
    if (!name_ok(f[0], fl[0])) return set_err(err, errlen, line, "the name must be 1 to %d characters of [A-Za-z0-9._@-]", AUTH_NAME_MAX);
    memcpy(e.name, f[0], fl[0]);
    if (parse_secret(f[1], fl[1], &e, err, errlen) || check_unique(t, &e, err, errlen)) return -1;
    if (VEC_RESERVE(t->e, t->cap, t->n + 1, 8)) return set_err(err, errlen, line, "out of memory");
    t->e[t->n++] = e;
    return 0;
}

auth_tokens *auth_parse(const char *text, size_t len, char *err, size_t errlen) {
    auth_tokens *t = calloc(1, sizeof *t);
    if (!t) { set_err(err, errlen, 0, "out of memory"); return NULL; }
    unsigned line = 1;
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        int bad = memchr(text + i, '\0', n) ? set_err(err, errlen, line, "a NUL byte")
                                              : parse_line(t, text + i, n, line, err, errlen);
        if (bad) {
            auth_free(t);
            return NULL;
        }
        i += n + (nl != NULL);
        line++;
    }
    if (t->n == 0) {
        if (err && errlen) snprintf(err, errlen, "no token in the file (expected lines 'NAME TOKEN' or 'NAME sha256:HEX')");
        auth_free(t);
        return NULL;
    }
    return t;
}

auth_tokens *auth_load(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(TOKENS_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TOKENS_FILE_MAX + 1, f) : 0;
    int bad = !buf || ferror(f) || n > TOKENS_FILE_MAX;
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read it (or it is over 4 MiB)", path);
        return NULL;
    }
    char why[300];
    auth_tokens *t = auth_parse(buf, n, why, sizeof why);
    /* The buffer held plaintext tokens: wipe it before it goes back to the allocator. */
    memset(buf, 0, n);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
    free(buf);
    if (!t) snprintf(err, errlen, "%s:%s%s", path, strncmp(why, "line ", 5) ? " " : "", strncmp(why, "line ", 5) ? why : why + 5);
    return t;
}

void auth_free(auth_tokens *t) {
    if (!t) return;
    free(t->e);
    free(t);
}

size_t auth_count(const auth_tokens *t) { return t ? t->n : 0; }

size_t auth_plaintext_count(const auth_tokens *t) {
    size_t k = 0;
    for (size_t i = 0; t && i < t->n; i++) k += !t->e[i].hashed_at_rest;
    return k;
}

int auth_check(const auth_tokens *t, const char *h, const char **name) {
    if (!h) return AUTH_MISSING;
    while (*h == ' ' || *h == '\t') h++;
    if (strncasecmp(h, "Bearer", 6) || (h[6] != ' ' && h[6] != '\t')) return AUTH_MALFORMED;
    h += 6;
    while (*h == ' ' || *h == '\t') h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
    if (!token_ok(h, n)) return AUTH_MALFORMED;
    unsigned char d[AUTH_DIGEST_LEN];
    sha256_of(h, n, d);
    /* Every entry is compared, whatever matched, so the time says nothing about the token. */
    size_t hit = (size_t)-1;
    for (size_t i = 0; t && i < t->n; i++)
        if (auth_equal(d, t->e[i].digest, AUTH_DIGEST_LEN)) hit = i;
    if (hit == (size_t)-1) return AUTH_DENIED;
    if (name) *name = t->e[hit].name;
    return AUTH_OK;
}
