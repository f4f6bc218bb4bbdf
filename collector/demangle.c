/* demangle.c -- kernel names for people: the C++ runtime's demangler when the process has one,
 * and a small Itanium demangler for simple names when it does not (see demangle.h).
 *
 * Owns nothing beyond the caller's buffer and the looked-up __cxa_demangle pointer. The small
 * demangler is allocation-free; it must not grow into a full demangler: anything outside the
 * subset returns -1 and the mangled name is kept. Must not load libstdc++ (only look it up).
 * Tested against c++filt output in tests/collector/test_agg.c. */
#include "demangle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SUBS 64
#define POOL     4096

typedef struct dm {
    const char *p;           /* cursor into the mangled name */
    char pool[POOL];         /* substitution strings, back to back */
    size_t pool_used;
    size_t sub_off[MAX_SUBS], sub_len[MAX_SUBS];
    int nsubs;
} dm;

/* An output string under construction. */
typedef struct sb {
    char *s;
    size_t len, cap;
    int bad;                 /* overflow */
} sb;

static void sb_put(sb *b, const char *s, size_t n)
{
    if (b->bad || b->len + n + 1 > b->cap) {
        b->bad = 1;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sb *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static int add_sub(dm *d, const char *s, size_t n)
{
    if (d->nsubs >= MAX_SUBS || d->pool_used + n > POOL)
        return -1;
    memcpy(d->pool + d->pool_used, s, n);
    d->sub_off[d->nsubs] = d->pool_used;
    d->sub_len[d->nsubs] = n;
    d->pool_used += n;
    d->nsubs++;
    return 0;
}

/* <source-name> ::= <positive length number> <identifier> */
static int source_name(dm *d, sb *out)
{
    size_t n = 0, i;
    if (*d->p < '1' || *d->p > '9')
        return -1;
    while (*d->p >= '0' && *d->p <= '9') {
        n = n * 10 + (size_t)(*d->p - '0');
        if (n > 4096)
            return -1;
        d->p++;
    }
    for (i = 0; i < n; i++)
        if (d->p[i] == '\0')
            return -1;
    if (n >= 10 && strncmp(d->p, "_GLOBAL__N", 10) == 0)
        sb_puts(out, "(anonymous namespace)");
    else
        sb_put(out, d->p, n);
    d->p += n;
    return out->bad ? -1 : 0;
}

static int substitution(dm *d, sb *out);

/* N <prefix-part>+ E. Every proper prefix is substitutable; so is the whole name when it names
 * a type (whole_is_sub), but not when it names the function itself (matches c++filt). The
 * first part may be a substitution (NS_3BarE). */
static int nested_name(dm *d, sb *out, int whole_is_sub)
{
    int parts = 0, first_is_sub = 0;
    size_t start = out->len;
    d->p++; /* 'N' */
    if (*d->p == 'K' || *d->p == 'V' || *d->p == 'r')
        return -1; /* cv-qualified member functions: out of scope */
    while (*d->p != 'E') {
        if (parts > 0) {
            /* a prefix that is only a substitution is already in the table */
            if (!(parts == 1 && first_is_sub) && add_sub(d, out->s + start, out->len - start) != 0)
                return -1;
            sb_puts(out, "::");
        }
        if (*d->p == 'S' && parts == 0) {
            if (substitution(d, out) != 0)
                return -1;
            first_is_sub = 1;
        } else if (source_name(d, out) != 0) {
            return -1;
        }
        parts++;
    }
    d->p++; /* 'E' */
    if (parts == 0)
        return -1;
    if (whole_is_sub && add_sub(d, out->s + start, out->len - start) != 0)
        return -1;
    return out->bad ? -1 : 0;
}

static const char *builtin(char c)
{
    switch (c) {
    case 'v': return "void";
    case 'w': return "wchar_t";
    case 'b': return "bool";
    case 'c': return "char";
    case 'a': return "signed char";
    case 'h': return "unsigned char";
    case 's': return "short";
    case 't': return "unsigned short";
    case 'i': return "int";
    case 'j': return "unsigned int";
    case 'l': return "long";
    case 'm': return "unsigned long";
    case 'x': return "long long";
    case 'y': return "unsigned long long";
    case 'n': return "__int128";
    case 'o': return "unsigned __int128";
    case 'f': return "float";
    case 'd': return "double";
    case 'e': return "long double";
    case 'g': return "__float128";
    case 'z': return "...";
    default: return NULL;
    }
}

static int type(dm *d, sb *out);

/* S_ = 0, S<base-36 seq>_ = seq + 1 */
static int substitution(dm *d, sb *out)
{
    size_t idx = 0;
    d->p++; /* 'S' */
    if (*d->p == '_') {
        idx = 0;
    } else {
        size_t seq = 0;
        int digits = 0;
        while ((*d->p >= '0' && *d->p <= '9') || (*d->p >= 'A' && *d->p <= 'Z')) {
            seq = seq * 36 + (size_t)(*d->p <= '9' ? *d->p - '0' : *d->p - 'A' + 10);
            d->p++;
            digits++;
            if (seq > MAX_SUBS)
                return -1;
        }
        if (digits == 0 || *d->p != '_')
            return -1; /* St, Sa, Ss, ...: std abbreviations, out of scope */
        idx = seq + 1;
    }
    d->p++; /* '_' */
    if (idx >= (size_t)d->nsubs)
        return -1;
    sb_put(out, d->pool + d->sub_off[idx], d->sub_len[idx]);
    return out->bad ? -1 : 0;
}

/* Qualified/indirect types print the c++filt way: "float const*", "int&". */
static int type(dm *d, sb *out)
{
    const char *b;
    char c = *d->p;
    size_t start = out->len;
    const char *suffix = NULL;

    if (c == '\0')
        return -1;
    b = builtin(c);
    if (b != NULL) {
        d->p++;
        sb_puts(out, b);
        return out->bad ? -1 : 0;
    }
    switch (c) {
    case 'P': suffix = "*"; break;
    case 'R': suffix = "&"; break;
    case 'O': suffix = "&&"; break;
    case 'K': suffix = " const"; break;
    case 'V': suffix = " volatile"; break;
    case 'S':
        return substitution(d, out);
    case 'N':
        return nested_name(d, out, 1);
    default:
        if (c >= '1' && c <= '9') {
            if (source_name(d, out) != 0)
                return -1;
            if (*d->p == 'I')
                return -1; /* template arguments */
            return add_sub(d, out->s + start, out->len - start);
        }
        return -1;
    }
    d->p++;
    if (*d->p == 'F' || *d->p == 'A' || *d->p == 'M')
        return -1; /* pointers to functions, arrays, members */
    if (type(d, out) != 0)
        return -1;
    sb_puts(out, suffix);
    if (out->bad)
        return -1;
    return add_sub(d, out->s + start, out->len - start);
}

int fp_demangle(const char *mangled, char *out, size_t outlen)
{
    dm d;
    sb b;
    int nparams = 0;

    if (out == NULL || outlen == 0)
        return -1;
    out[0] = '\0';
    if (mangled == NULL || strncmp(mangled, "_Z", 2) != 0)
        return -1;
    d.p = mangled + 2;
    d.pool_used = 0;
    d.nsubs = 0;
    b.s = out;
    b.len = 0;
    b.cap = outlen;
    b.bad = 0;

    if (*d.p == 'N') {
        if (nested_name(&d, &b, 0) != 0)
            goto fail;
    } else if (source_name(&d, &b) != 0) {
        goto fail;
    }
    if (*d.p == 'I' || *d.p == 'C' || *d.p == 'D')
        goto fail;
    sb_puts(&b, "(");
    if (d.p[0] == 'v' && d.p[1] == '\0') {
        d.p++;
    } else {
        while (*d.p) {
            if (nparams++ > 0)
                sb_puts(&b, ", ");
            if (type(&d, &b) != 0)
                goto fail;
        }
        if (nparams == 0)
            goto fail;
    }
    sb_puts(&b, ")");
    if (b.bad)
        goto fail;
    return 0;
fail:
    out[0] = '\0';
    return -1;
}

/* ---- the C++ runtime's demangler ---------------------------------------------------------- */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);
static cxa_demangle_fn cxa;
static pthread_once_t cxa_once = PTHREAD_ONCE_INIT;

/* The global scope has it in a C++ program; PyTorch loads libstdc++ RTLD_LOCAL through its
 * extensions, where RTLD_NOLOAD still finds the copy in the process. */
static void cxa_lookup(void)
{
    void *h;
    *(void **)&cxa = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (cxa != NULL)
        return;
    h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL)
        *(void **)&cxa = dlsym(h, "__cxa_demangle"); /* h stays open: it was loaded anyway */
}

int fp_demangle_full(const char *mangled, char *out, size_t outlen)
{
    char *r;
    int status = -1;
    size_t n;
    if (outlen == 0)
        return -1;
    out[0] = '\0';
    if (mangled == NULL || strncmp(mangled, "_Z", 2) != 0)
        return -1;
    pthread_once(&cxa_once, cxa_lookup);
    if (cxa == NULL)
        return fp_demangle(mangled, out, outlen);
    r = cxa(mangled, NULL, NULL, &status);
    if (r == NULL || status != 0) {
        free(r);
        return -1;
    }
    n = strlen(r);
    if (n >= outlen) {
        free(r);
        return -1;
    }
    memcpy(out, r, n + 1);
    free(r);
    return 0;
}
