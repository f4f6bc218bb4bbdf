/* watch.c -- which trace files in the watched directories are whole, and which were sent.
 *
 * Owns the inotify descriptor, the table of files seen (one entry a path, found again through
 * a small hash index) and the state file. Sends nothing and needs no server: agent.c decides
 * what to do with a file once fp_watch_next hands it out. The rules are in watch.h. */
#include "watch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "log.h"

double fp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- names ------------------------------------------------------------------------------ */

static int ends_with(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* Copies the digits at p into out (at most FP_NAME_FIELD-1); returns how many were read. */
static size_t digits(const char *p, char *out)
{
    size_t n = 0;
    while (isdigit((unsigned char)p[n]) && n < FP_NAME_FIELD - 1) {
        out[n] = p[n];
        n++;
    }
    out[n] = '\0';
    return n;
}

/* In s (n bytes), the value of a "<key><digits>" field that starts s or follows '_' or '-'
 * and ends at '_', '-', '.' or the end: vLLM's dp0_pp0_tp0_..._rank0. 1 when found. */
static int field(const char *s, size_t n, const char *key, char *out)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k < n; i++) {
        if ((i > 0 && s[i - 1] != '_' && s[i - 1] != '-') || strncmp(s + i, key, k) != 0)
            continue;
        char tmp[FP_NAME_FIELD];
        size_t d = digits(s + i + k, tmp);
        size_t e = i + k + d;
        if (d > 0 && (e == n || s[e] == '_' || s[e] == '-' || s[e] == '.')) {
            memcpy(out, tmp, d + 1);
            return 1;
        }
    }
    return 0;
}

/* SGLang's "-TP-<n>" style field: "-<KEY>-<digits>" in s (n bytes). 1 when found; *end gets
 * the offset after the digits. */
static int dash_field(const char *s, size_t n, const char *key, char *out, size_t *end)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k + 2 < n; i++) {
        if (s[i] != '-' || strncmp(s + i + 1, key, k) != 0 || s[i + 1 + k] != '-')
            continue;
        size_t d = digits(s + i + k + 2, out);
        if (d > 0) {
            if (end)
                *end = i + k + 2 + d;
            return 1;
        }
    }
    return 0;
}

static void copy_n(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int fp_name_parse(const char *base, fp_name_info *out)
{
    size_t n = strlen(base), stem;
    memset(out, 0, sizeof *out);
    if (n == 0 || base[0] == '.' || ends_with(base, n, ".tmp"))
        return FP_KIND_NONE;
    if (ends_with(base, n, ".json.gz")) {
        out->kind = FP_KIND_JSON_GZ;
        stem = n - 8;
    } else if (ends_with(base, n, ".json")) {
        out->kind = FP_KIND_JSON;
        stem = n - 5;
    } else if (ends_with(base, n, ".sqlite")) {
        out->kind = FP_KIND_SQLITE;
        stem = n - 7;
    } else {
        return FP_KIND_NONE;
    }
    /* the session name: without .pt.trace / .trace */
    size_t nm = stem;
    if (ends_with(base, nm, ".pt.trace"))
        nm -= 9;
    else if (ends_with(base, nm, ".trace"))
        nm -= 6;
    copy_n(out->name, sizeof out->name, base, nm);
    if (out->kind == FP_KIND_SQLITE)
        return out->kind;

    if (ends_with(base, stem, ".pt.trace")) {
        /* torch.profiler's tensorboard_trace_handler: <worker>.<ts>.pt.trace.json[.gz]; vLLM's
         * workers are such files, their worker name carries the ranks. */
        size_t w = stem - 9, dot = w;
        while (dot > 0 && base[dot - 1] != '.')
            dot--;
        size_t worker = dot > 0 ? dot - 1 : w; /* the worker name's length */
        if (dot > 0) {
            char ts[FP_NAME_FIELD];
            if (digits(base + dot, ts) == w - dot)
                out->stamp = atoll(ts);
        }
        strcpy(out->engine, "torch");
        size_t r;
        char tmp[FP_NAME_FIELD];
        const char *rk = NULL;
        /* vLLM: "<instance>-rank-<R>" (V1 until 0.10) or "..._rank<R>" with dp/pp/tp before */
        for (r = 0; r + 6 < worker; r++)
            if (!strncmp(base + r, "-rank-", 6) && digits(base + r + 6, tmp) == worker - r - 6) {
                rk = base + r + 6;
                break;
            }
        if (rk) {
            strcpy(out->engine, "vllm");
            digits(rk, out->rank);
            copy_n(out->group, sizeof out->group, base, r);
        } else if (field(base, worker, "tp", out->tp_rank) && field(base, worker, "rank", out->rank)) {
            strcpy(out->engine, "vllm");
            field(base, worker, "dp", out->dp_rank);
            field(base, worker, "pp", out->pp_rank);
            /* group: the prefix before "dp<D>_" (profile_prefix), else "vllm" */
            const char *dp = NULL;
            for (size_t i = 0; i + 2 < worker; i++)
                if ((i == 0 || base[i - 1] == '_') && base[i] == 'd' && base[i + 1] == 'p' && isdigit((unsigned char)base[i + 2])) {
                    dp = base + i;
                    break;
                }
            if (dp && dp > base)
                copy_n(out->group, sizeof out->group, base, (size_t)(dp - base) - 1);
            else
                strcpy(out->group, "vllm");
        } else {
            /* a plain torch worker: rank<N>, rank-<N>, rank_<N> anywhere in its name */
            for (r = 0; r + 4 < worker; r++) {
                if (strncmp(base + r, "rank", 4) != 0 || (r > 0 && isalnum((unsigned char)base[r - 1])))
                    continue;
                size_t p = r + 4 + (base[r + 4] == '-' || base[r + 4] == '_');
                size_t d = digits(base + p, tmp);
                if (d > 0 && (p + d == worker || !isalnum((unsigned char)base[p + d]))) {
                    memcpy(out->rank, tmp, d + 1);
                    break;
                }
            }
            copy_n(out->group, sizeof out->group, base, worker);
        }
        return out->kind;
    }
    /* SGLang: <profile_id>-TP-<T>[-DP-<D>][-PP-<P>][-EP-<E>][-<stage>].trace.json.gz */
    size_t tp_end = 0;
    if (ends_with(base, stem, ".trace") && dash_field(base, stem - 6, "TP", out->tp_rank, &tp_end)) {
        size_t s = stem - 6, e = tp_end;
        strcpy(out->engine, "sglang");
        strcpy(out->rank, out->tp_rank);
        dash_field(base, s, "DP", out->dp_rank, NULL);
        dash_field(base, s, "PP", out->pp_rank, NULL);
        /* the profile id: everything before "-TP-" */
        const char *tp = strstr(base, "-TP-");
        copy_n(out->group, sizeof out->group, base, tp ? (size_t)(tp - base) : 0);
        /* the stage: a last "-WORD" that is not a rank field (profile_by_stage) */
        while (e < s) {
            size_t q = e + 1, k = q;
            while (k < s && base[k] != '-')
                k++;
            char tmp[FP_NAME_FIELD];
            int is_rank = (k - q == 2) && (!strncmp(base + q, "DP", 2) || !strncmp(base + q, "PP", 2) || !strncmp(base + q, "EP", 2));
            if (is_rank && k < s && digits(base + k + 1, tmp) > 0) {
                e = k + 1 + strlen(tmp);
                continue;
            }
            if (k == s && k > q) {
                const char *st = base + q, *dot = memchr(st, '.', k - q);
                if (dot) /* "ForwardMode.EXTEND" on some Pythons */
                    st = dot + 1;
                copy_n(out->stage, sizeof out->stage, st, (size_t)(base + k - st));
            }
            e = k;
        }
    }
    return out->kind;
}

/* ---- completeness ----------------------------------------------------------------------- */

#define CHECK_CHUNK (256u << 10)

/* Inflates the whole file: 1 when every gzip member ends with a trailer whose CRC-32 and
 * length match (zlib checks them before Z_STREAM_END), 0 when the file ends inside a member
 * (torch is still compressing), -1 when the data is corrupt. */
static int gzip_complete(int fd, char *err, size_t errlen)
{
    unsigned char *in = malloc(CHECK_CHUNK), *out = malloc(CHECK_CHUNK);
    z_stream zs;
    int rc = -1, ended = 0, zr = Z_OK;
    memset(&zs, 0, sizeof zs);
    if (!in || !out || inflateInit2(&zs, 15 + 16) != Z_OK) {
        snprintf(err, errlen, "out of memory");
        free(in);
        free(out);
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, in, CHECK_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "read: %s", strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        zs.next_in = in;
        zs.avail_in = (uInt)r;
        while (zs.avail_in > 0) {
            if (ended) {
                /* another member may follow (gzip files may be concatenated); anything else
                 * after a whole member is trailing garbage that gzip(1) ignores too */
                if (zs.next_in[0] != 0x1f) {
                    rc = 1;
                    goto done;
                }
                if (inflateReset(&zs) != Z_OK)
                    goto done;
                ended = 0;
            }
            zs.next_out = out;
            zs.avail_out = CHECK_CHUNK;
            zr = inflate(&zs, Z_NO_FLUSH);
            if (zr == Z_STREAM_END) {
                ended = 1;
                continue;
            }
            if (zr == Z_BUF_ERROR)
                break;
            if (zr != Z_OK) {
                snprintf(err, errlen, "gzip data is corrupt: %s", zs.msg ? zs.msg : "inflate failed");
                goto done;
            }
        }
    }
    if (ended) {
        rc = 1;
    } else {
        rc = 0;
        snprintf(err, errlen, "the gzip stream stops before its trailer (still being written)");
    }
done:
    inflateEnd(&zs);
    free(in);
    free(out);
    return rc;
}

/* A plain JSON trace is whole when its last byte that is not white space closes it. */
static int json_complete(int fd, off_t size, char *err, size_t errlen)
{
    char buf[4096];
    off_t pos = size;
    while (pos > 0) {
        size_t take = pos > (off_t)sizeof buf ? sizeof buf : (size_t)pos;
        ssize_t r = pread(fd, buf, take, pos - (off_t)take);
        if (r != (ssize_t)take) {
            snprintf(err, errlen, "read: %s", r < 0 ? strerror(errno) : "short read");
            return -1;
        }
        for (size_t i = take; i > 0; i--) {
            char c = buf[i - 1];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                continue;
            if (c == '}' || c == ']')
                return 1;
            snprintf(err, errlen, "the JSON does not end in '}' or ']' (still being written)");
            return 0;
        }
        pos -= (off_t)take;
    }
    snprintf(err, errlen, "the file is empty");
    return 0;
}

static unsigned be32(const unsigned char *p)
{
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

/* An SQLite database (nsys export --type sqlite) is whole when no journal or WAL is beside it
 * (looked up in dirfd by name, links not followed) and its size is the header's page count
 * times its page size. */
static int sqlite_complete(int dirfd, const char *name, int fd, off_t size, char *err, size_t errlen)
{
    unsigned char h[100];
    char side[NAME_MAX + 16];
    struct stat st;
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        snprintf(err, errlen, "shorter than an SQLite header (still being written)");
        return 0;
    }
    if (memcmp(h, "SQLite format 3", 16) != 0) {
        snprintf(err, errlen, "not an SQLite database");
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        snprintf(side, sizeof side, "%.*s%s", NAME_MAX, name, i ? "-wal" : "-journal");
        if (fstatat(dirfd, side, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            snprintf(err, errlen, "%s exists beside it (still being written)", i ? "its -wal" : "its -journal");
            return 0;
        }
    }
    unsigned psize = (unsigned)h[16] << 8 | h[17];
    if (psize == 1)
        psize = 65536;
    if (psize < 512 || (psize & (psize - 1))) {
        snprintf(err, errlen, "bad SQLite page size %u", psize);
        return -1;
    }
    /* the page count at offset 28 holds when "version-valid-for" (92) = change counter (24) */
    if (be32(h + 92) == be32(h + 24) && be32(h + 28) != 0) {
        if ((unsigned long long)size != (unsigned long long)be32(h + 28) * psize) {
            snprintf(err, errlen, "%lld bytes, the header says %llu (still being written)", (long long)size,
                     (unsigned long long)be32(h + 28) * psize);
            return 0;
        }
    } else if (size % psize) {
        snprintf(err, errlen, "not a whole number of pages (still being written)");
        return 0;
    }
    return 1;
}

int fp_fd_complete(int fd, int dirfd, const char *name, int kind, char *err, size_t errlen)
{
    struct stat st;
    int rc;
    err[0] = '\0';
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        return -1;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "lseek: %s", strerror(errno));
        return -1;
    }
    switch (kind) {
    case FP_KIND_JSON_GZ:
        rc = gzip_complete(fd, err, errlen);
        break;
    case FP_KIND_JSON:
        rc = json_complete(fd, st.st_size, err, errlen);
        break;
    case FP_KIND_SQLITE:
        rc = sqlite_complete(dirfd, name, fd, st.st_size, err, errlen);
        break;
    default:
        snprintf(err, errlen, "not a trace file");
        rc = -1;
    }
    /* the caller reads (uploads) the same descriptor from its start */
    if (lseek(fd, 0, SEEK_SET) != 0 && rc == 1) {
        snprintf(err, errlen, "lseek: %s", strerror(errno));
        rc = -1;
    }
    return rc;
}

int fp_open_in(int dirfd, const char *name, struct stat *st, char *err, size_t errlen)
{
    /* O_NOFOLLOW: a symbolic link planted in the directory is never followed (ELOOP);
     * O_NONBLOCK: a FIFO planted under a trace's name does not block the open. */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            snprintf(err, errlen, "a symbolic link: not followed");
        else
            snprintf(err, errlen, "open: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "not a regular file");
        close(fd);
        return -1;
    }
    if (st->st_nlink > 1) {
        /* a hard link names the same file as some other path: one planted by a writer of the
         * directory could name a file its writer cannot read (where protected_hardlinks is off) */
        snprintf(err, errlen, "has %lu hard links: refused (copy it in instead)", (unsigned long)st->st_nlink);
        close(fd);
        return -1;
    }
    return fd;
}

int fp_file_complete(const char *path, int kind, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    struct stat st;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    err[0] = '\0';
    if (dfd < 0) {
        snprintf(err, errlen, "open: %s", strerror(errno));
        return -1;
    }
    const char *name = slash ? slash + 1 : path;
    int fd = fp_open_in(dfd, name, &st, err, errlen);
    int rc = fd < 0 ? -1 : fp_fd_complete(fd, dfd, name, kind, err, errlen);
    if (fd >= 0)
        close(fd);
    close(dfd);
    return rc;
}

/* ---- a string-keyed index (open addressing) --------------------------------------------- */

/* Maps a key to an int (an index into the caller's array). Keys are borrowed. */
typedef struct sidx {
    const char **keys;
    int *vals;
    size_t cap, n; /* cap a power of two, n <= cap / 2 */
} sidx;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static int sidx_find(const sidx *x, const char *key)
{
    if (x->cap == 0)
        return -1;
    for (size_t i = fnv(key) & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
        if (!x->keys[i])
            return -1;
        if (!strcmp(x->keys[i], key))
            return x->vals[i];
    }
}

static int sidx_put(sidx *x, const char *key, int val);

static int sidx_grow(sidx *x)
{
    sidx y = {NULL, NULL, x->cap ? x->cap * 2 : 64, 0};
    y.keys = calloc(y.cap, sizeof *y.keys);
    y.vals = calloc(y.cap, sizeof *y.vals);
    if (!y.keys || !y.vals) {
        free(y.keys);
        free(y.vals);
        return -1;
    }
    for (size_t i = 0; i < x->cap; i++)
        if (x->keys[i])
            sidx_put(&y, x->keys[i], x->vals[i]);
    free(x->keys);
    free(x->vals);
    *x = y;
    return 0;
}

/* Sets key's value (inserting it). 0, or -1 on out of memory. */
static int sidx_put(sidx *x, const char *key, int val)
{
    if ((x->n + 1) * 2 > x->cap && sidx_grow(x) != 0)
        return -1;
    for (size_t i = fnv(key) & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
        if (!x->keys[i]) {
            x->keys[i] = key;
            x->vals[i] = val;
            x->n++;
            return 0;
        }
        if (!strcmp(x->keys[i], key)) {
            x->keys[i] = key;
            x->vals[i] = val;
            return 0;
        }
    }
}

static void sidx_free(sidx *x)
{
    free(x->keys);
    free(x->vals);
    memset(x, 0, sizeof *x);
}

/* ---- the state file --------------------------------------------------------------------- */

typedef struct st_entry {
    char *path;
    long long size, mtime_ns, session_id;
    int status;
} st_entry;

/* A capture this agent started on an engine (fp_state_capture_put). */
typedef struct st_capture {
    char target[65];
    char url[512];
    long long id;
} st_capture;

struct fp_state {
    char *path;       /* the state file */
    int fd;           /* open for appending */
    st_entry *e;      /* one per path: the newest line (the main thread's) */
    size_t n, cap;
    sidx idx;         /* path -> index in e */
    pthread_mutex_t lock; /* guards caps and every write to fd (two threads write lines) */
    st_capture caps[FP_STATE_CAPTURES_MAX];
    size_t ncaps;
};

static const char *const st_words[] = {"none", "sending", "done", "spooled", "refused"};

static int st_word(const char *w)
{
    for (int i = 1; i < 5; i++)
        if (!strcmp(w, st_words[i]))
            return i;
    return 0;
}

/* Escapes '%', tab, CR and LF of path into out (cap bytes). -1 when it does not fit. */
static int esc(const char *path, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = path; *p; p++) {
        const char *rep = *p == '%' ? "%25" : *p == '\t' ? "%09" : *p == '\n' ? "%0A" : *p == '\r' ? "%0D" : NULL;
        size_t k = rep ? 3 : 1;
        if (o + k >= cap)
            return -1;
        if (rep)
            memcpy(out + o, rep, 3);
        else
            out[o] = *p;
        o += k;
    }
    out[o] = '\0';
    return 0;
}

static void unesc(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            char hex[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* Sets the in-memory entry of path. 0 or -1 (out of memory). */
static int st_set(fp_state *s, const char *path, long long size, long long mtime_ns, int status, long long sid)
{
    int i = sidx_find(&s->idx, path);
    if (i < 0) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            st_entry *e = realloc(s->e, cap * sizeof *e);
            if (!e)
                return -1;
            s->e = e;
            s->cap = cap;
            /* the index borrows the paths, which did not move: only the array did */
        }
        char *p = strdup(path);
        if (!p)
            return -1;
        s->e[s->n] = (st_entry){p, 0, 0, 0, 0};
        if (sidx_put(&s->idx, p, (int)s->n) != 0) {
            free(p);
            return -1;
        }
        i = (int)s->n++;
    }
    s->e[i].size = size;
    s->e[i].mtime_ns = mtime_ns;
    s->e[i].status = status;
    s->e[i].session_id = sid;
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int st_line(const st_entry *e, char *buf, size_t cap)
{
    char ep[PATH_MAX * 3];
    if (esc(e->path, ep, sizeof ep) != 0)
        return -1;
    int w = snprintf(buf, cap, "%s\t%lld\t%lld\t%lld\t%s\n", st_words[e->status], e->size, e->mtime_ns, e->session_id, ep);
    return (w < 0 || (size_t)w >= cap) ? -1 : w;
}

static long long mtime_ns_of(const struct stat *st)
{
    return (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

/* mkdir -p of path's directory, 0700 for what it creates. */
static int mkdir_parent(const char *path)
{
    char tmp[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, path, n + 1);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp)
        return 0;
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* The line of a capture in flight (id > 0) or ended (id 0): "capture\t<id>\t0\t0\t<target>%09<url>". */
static int cap_line(const char *target, const char *url, long long id, char *buf, size_t cap)
{
    char raw[700], ep[2200];
    snprintf(raw, sizeof raw, "%.64s\t%.511s", target, url);
    if (esc(raw, ep, sizeof ep) != 0)
        return -1;
    int w = snprintf(buf, cap, "capture\t%lld\t0\t0\t%s\n", id, ep);
    return (w < 0 || (size_t)w >= cap) ? -1 : w;
}

/* Sets (id > 0) or clears (id 0) target's capture in memory; caller holds s->lock. */
static int cap_set(fp_state *s, const char *target, const char *url, long long id)
{
    size_t i = 0;
    while (i < s->ncaps && strcmp(s->caps[i].target, target) != 0)
        i++;
    if (id == 0) {
        if (i < s->ncaps)
            s->caps[i] = s->caps[--s->ncaps];
        return 0;
    }
    if (i == s->ncaps) {
        if (s->ncaps == FP_STATE_CAPTURES_MAX)
            return -1;
        s->ncaps++;
    }
    snprintf(s->caps[i].target, sizeof s->caps[i].target, "%s", target);
    snprintf(s->caps[i].url, sizeof s->caps[i].url, "%s", url);
    s->caps[i].id = id;
    return 0;
}

/* One line of the state file read back into s. 0, or -1 on out of memory. */
static int read_line(fp_state *s, char *line)
{
    char *fld[5], *p = line;
    size_t len = strlen(line);
    if (len == 0 || line[len - 1] != '\n')
        return 0; /* a line cut by a crash mid-write: its upload is resolved as unsent */
    line[len - 1] = '\0';
    int k = 0;
    for (; k < 5 && p; k++) {
        fld[k] = p;
        p = k < 4 ? strchr(p, '\t') : NULL;
        if (p)
            *p++ = '\0';
    }
    if (k != 5)
        return 0;
    unesc(fld[4]);
    if (!strcmp(fld[0], "capture")) {
        char *tab = strchr(fld[4], '\t');
        if (tab)
            *tab++ = '\0';
        cap_set(s, fld[4], tab ? tab : "", atoll(fld[1])); /* more than the cap: the rest forgotten */
        return 0;
    }
    int stw = st_word(fld[0]);
    return stw ? st_set(s, fld[4], atoll(fld[1]), atoll(fld[2]), stw, atoll(fld[3])) : 0;
}

/* Reads the state file into s. 0 when read (or missing), -1 with why in err: a state file
 * that exists but cannot be read is not taken as empty, or every file it names would be
 * sent again and the file replaced (issue 50). */
static int read_state(fp_state *s, const char *path, char *err, size_t errlen)
{
    char line[PATH_MAX * 3 + 128];
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen,
                 "cannot read the state file %s: %s; not starting (taking it as empty would send every file it names "
                 "again); fix: make it readable and writable by uid %u (chown), or give another --state",
                 path, strerror(errno), (unsigned)geteuid());
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        if (read_line(s, line) != 0) {
            fclose(f);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read the state file %s: read error; not starting", path);
        return -1;
    }
    return 0;
}

/* Compaction: an entry whose file changed says nothing about what is there now (a new
 * version, sent again): dropped. An entry whose file cannot be stat'ed now is kept (its
 * directory may not be mounted yet) until its mtime is FP_STATE_KEEP_GONE_S old. */
static void compact(fp_state *s)
{
    size_t keep = 0, gone = 0, changed = 0, expired = 0;
    long long now_ns = (long long)time(NULL) * 1000000000LL;
    for (size_t i = 0; i < s->n; i++) {
        struct stat st;
        st_entry *e = &s->e[i];
        int drop = 0;
        if (lstat(e->path, &st) != 0) {
            if (now_ns - e->mtime_ns > FP_STATE_KEEP_GONE_S * 1000000000LL)
                drop = 1, expired++;
            else
                gone++;
        } else if (st.st_size != e->size || mtime_ns_of(&st) != e->mtime_ns) {
            drop = 1, changed++;
        }
        if (drop)
            free(e->path);
        else
            s->e[keep++] = *e;
    }
    s->n = keep;
    fp_logkv("info", "state read", "file=%s entries=%zu not_found_now=%zu dropped_changed=%zu dropped_expired=%zu%s", fp_q(s->path),
             s->n, gone, changed, expired,
             gone ? " note=\"entries of files not found now are kept (their directory may not be mounted yet)\"" : "");
}

/* Writes s (entries and captures in flight) to path.tmp and renames it over path. */
static int rewrite(fp_state *s, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 8], line[PATH_MAX * 3 + 128];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    sidx_free(&s->idx);
    for (size_t i = 0; i < s->n + s->ncaps; i++) {
        int w = i < s->n ? st_line(&s->e[i], line, sizeof line)
                         : cap_line(s->caps[i - s->n].target, s->caps[i - s->n].url, s->caps[i - s->n].id, line, sizeof line);
        if ((i < s->n && sidx_put(&s->idx, s->e[i].path, (int)i) != 0) || w < 0 || write_all(fd, line, (size_t)w) != 0) {
            close(fd);
            unlink(tmp);
            snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
            return -1;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, s->path) != 0) {
        unlink(tmp);
        snprintf(err, errlen, "cannot replace %s: %s", s->path, strerror(errno));
        return -1;
    }
    return 0;
}

fp_state *fp_state_open(const char *path, char *err, size_t errlen)
{
    fp_state *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    s->fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    if (mkdir_parent(path) != 0) {
        snprintf(err, errlen, "cannot create the directory of %s: %s; fix: create it writable by uid %u, or give another --state",
                 path, strerror(errno), (unsigned)geteuid());
        goto fail;
    }
    if (read_state(s, path, err, errlen) != 0)
        goto fail;
    compact(s);
    if (rewrite(s, err, errlen) != 0)
        goto fail;
    s->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (s->fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    return s;
fail:
    fp_state_close(s);
    return NULL;
}

void fp_state_close(fp_state *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].path);
    free(s->e);
    sidx_free(&s->idx);
    free(s->path);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int fp_state_get(const fp_state *s, const char *path, long long size, long long mtime_ns, long long *session_id)
{
    int i = sidx_find(&s->idx, path);
    if (i < 0 || s->e[i].size != size || s->e[i].mtime_ns != mtime_ns)
        return FP_ST_NONE;
    if (session_id)
        *session_id = s->e[i].session_id;
    return s->e[i].status;
}

/* Appends line (w bytes) and syncs it. Caller holds s->lock. */
static int append(fp_state *s, const char *line, int w)
{
    return w < 0 || write_all(s->fd, line, (size_t)w) != 0 || fdatasync(s->fd) != 0 ? -1 : 0;
}

int fp_state_put(fp_state *s, const char *path, long long size, long long mtime_ns, int status, long long session_id)
{
    char line[PATH_MAX * 3 + 128];
    if (st_set(s, path, size, mtime_ns, status, session_id) != 0)
        return -1;
    st_entry *e = &s->e[sidx_find(&s->idx, path)];
    int w = st_line(e, line, sizeof line);
    /* Invariant: the line is on disk (fsync) before the caller acts on it: a SENDING line
     * before the upload, a DONE line before the file is removed. */
    pthread_mutex_lock(&s->lock);
    int rc = append(s, line, w);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int fp_state_capture_put(fp_state *s, const char *target, const char *url, long long capture_id)
{
    char line[2400];
    int w = cap_line(target, url, capture_id, line, sizeof line), rc = -1;
    pthread_mutex_lock(&s->lock);
    /* Invariant: on disk before the engine is called (a crash after the call leaves a line
     * that names what to stop) */
    if (w >= 0 && cap_set(s, target, url, capture_id) == 0)
        rc = append(s, line, w);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

size_t fp_state_captures(fp_state *s, fp_state_capture *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (; n < s->ncaps && n < max; n++) {
        snprintf(out[n].target, sizeof out[n].target, "%s", s->caps[n].target);
        snprintf(out[n].url, sizeof out[n].url, "%s", s->caps[n].url);
        out[n].id = s->caps[n].id;
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

int fp_state_sending(const fp_state *s, size_t i, const char **path, long long *size, long long *mtime_ns)
{
    for (size_t k = 0, seen = 0; k < s->n; k++) {
        if (s->e[k].status != FP_ST_SENDING)
            continue;
        if (seen++ == i) {
            *path = s->e[k].path;
            *size = s->e[k].size;
            *mtime_ns = s->e[k].mtime_ns;
            return 1;
        }
    }
    return 0;
}

/* ---- the watcher ------------------------------------------------------------------------ */

/* What is kept per file seen: about 90 bytes, its path and two index slots (issue 50 found
 * ~1 KB a file when the parsed name was kept; it is parsed again when the file is handed out). */
typedef struct wfile {
    char *path;              /* dir "/" name */
    long long size, mtime_ns;
    unsigned long long dev, ino; /* of the descriptor the verdict was found on */
    double stable_since;     /* fp_now() when size and mtime last changed */
    double not_before;       /* fp_watch_defer, fp_watch_backoff */
    double first_fail;       /* fp_watch_backoff's first call for this version, 0 none */
    unsigned name_off;       /* the base name's offset in path */
    int dir;                 /* index in fp_watch.dirs */
    unsigned short tries;    /* fp_watch_backoff calls for this version */
    signed char verdict;     /* fp_fd_complete for this version: 1, 0, -1; 2 unknown */
    unsigned char kind;      /* FP_KIND_* of its name */
    unsigned char seen_write; /* inotify saw it created or written */
    unsigned char closed;    /* ... and closed (or renamed into place) since */
    unsigned char logged;    /* the never-sent warning went out for this version */
    unsigned char alive;     /* there, as far as the last stat knows */
    unsigned char dirty;     /* an inotify event named it: stat it again */
    unsigned char handed;    /* the state has an entry for this version: not a candidate */
    unsigned gen;            /* the full scan that saw it last */
} wfile;

typedef struct wdir {
    char *path;              /* as the pattern expanded */
    int fd;                  /* the directory, opened once: files are opened relative to it */
    int wd;                  /* its inotify watch, -1 none (then it is read every scan) */
    unsigned long long dev, ino;
    int fresh;               /* new or replaced: read it at the next scan */
} wdir;

struct fp_watch {
    double settle_s, rescan_s, next_rescan;
    size_t max_files;
    int over_logged;         /* the --max-files line went out since the last full scan */
    char **patterns;         /* as given to fp_watch_add */
    size_t npatterns;
    wdir *dirs;
    size_t ndirs;
    int ifd;                 /* inotify, -1 when it could not be had */
    int overflow;            /* inotify lost events: read everything again */
    unsigned gen;
    wfile *f;
    size_t n, cap;
    sidx idx;                /* path -> index in f */
    int *ready;              /* this scan's candidates, in path order */
    size_t nready, ready_cap, cursor;
    int changed;             /* something that may change the candidates happened since they were listed */
    double due;              /* fp_now() when a file not settled yet may become a candidate */
};

fp_watch *fp_watch_new(double settle_s)
{
    fp_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->settle_s = settle_s;
    w->rescan_s = FP_WATCH_RESCAN_S;
    w->max_files = FP_WATCH_MAX_FILES;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    return w;
}

void fp_watch_limits(fp_watch *w, double rescan_s, size_t max_files)
{
    w->rescan_s = rescan_s;
    w->max_files = max_files;
}

void fp_watch_free(fp_watch *w)
{
    if (!w)
        return;
    if (w->ifd >= 0)
        close(w->ifd);
    for (size_t i = 0; i < w->npatterns; i++)
        free(w->patterns[i]);
    for (size_t i = 0; i < w->ndirs; i++) {
        free(w->dirs[i].path);
        if (w->dirs[i].fd >= 0)
            close(w->dirs[i].fd);
    }
    for (size_t i = 0; i < w->n; i++)
        free(w->f[i].path);
    free(w->patterns);
    free(w->dirs);
    free(w->f);
    free(w->ready);
    sidx_free(&w->idx);
    free(w);
}

int fp_watch_add(fp_watch *w, const char *pattern)
{
    char **p = realloc(w->patterns, (w->npatterns + 1) * sizeof *p);
    if (!p)
        return -1;
    w->patterns = p;
    size_t n = strlen(pattern);
    while (n > 1 && pattern[n - 1] == '/')
        n--;
    if (!(p[w->npatterns] = strndup(pattern, n)))
        return -1;
    w->npatterns++;
    return 0;
}

#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_ONLYDIR)

/* (Re)opens directory d and its inotify watch; it is read at the next scan. */
static void dir_open(fp_watch *w, wdir *d, const struct stat *st)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d->wd = w->ifd >= 0 && d->fd >= 0 ? inotify_add_watch(w->ifd, d->path, WATCH_MASK) : -1;
    d->dev = st->st_dev;
    d->ino = st->st_ino;
    d->fresh = 1;
}

/* The directory at path (st: its stat) is one the patterns name: added once, reopened when
 * another directory took its path. -1 on out of memory. */
static int dir_use(fp_watch *w, const char *path, const struct stat *st)
{
    for (size_t i = 0; i < w->ndirs; i++) {
        if (strcmp(w->dirs[i].path, path) != 0)
            continue;
        if (w->dirs[i].dev != (unsigned long long)st->st_dev || w->dirs[i].ino != (unsigned long long)st->st_ino)
            dir_open(w, &w->dirs[i], st);
        return 0;
    }
    wdir *d = realloc(w->dirs, (w->ndirs + 1) * sizeof *d);
    if (!d)
        return -1;
    w->dirs = d;
    d = &w->dirs[w->ndirs];
    memset(d, 0, sizeof *d);
    d->fd = -1;
    if (!(d->path = strdup(path)))
        return -1;
    dir_open(w, d, st);
    w->ndirs++;
    return 0;
}

/* The patterns' directories now (a glob is expanded again each time: directories made later
 * are watched too). Costs a stat per directory, and a read of a glob's parent. */
static int expand(fp_watch *w)
{
    for (size_t p = 0; p < w->npatterns; p++) {
        struct stat ds;
        if (!strpbrk(w->patterns[p], "*?[")) {
            if (stat(w->patterns[p], &ds) == 0 && S_ISDIR(ds.st_mode) && dir_use(w, w->patterns[p], &ds) != 0)
                return -1;
            continue;
        }
        glob_t g;
        memset(&g, 0, sizeof g);
        int gr = glob(w->patterns[p], GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g);
        for (size_t k = 0; gr == 0 && k < g.gl_pathc; k++)
            if (stat(g.gl_pathv[k], &ds) == 0 && S_ISDIR(ds.st_mode) && dir_use(w, g.gl_pathv[k], &ds) != 0) {
                globfree(&g);
                return -1;
            }
        globfree(&g);
    }
    return 0;
}

/* The kind of a base name (fp_name_parse's rule 1 without the parse). */
static int name_kind(const char *base)
{
    size_t n = strlen(base);
    if (n == 0 || base[0] == '.' || ends_with(base, n, ".tmp"))
        return FP_KIND_NONE;
    return ends_with(base, n, ".json.gz") ? FP_KIND_JSON_GZ
         : ends_with(base, n, ".json")    ? FP_KIND_JSON
         : ends_with(base, n, ".sqlite")  ? FP_KIND_SQLITE
                                          : FP_KIND_NONE;
}

static int file_find(const fp_watch *w, const char *path) { return sidx_find(&w->idx, path); }

/* The entry of name in directory d, created when missing: -1 on out of memory, -2 when
 * --max-files are watched already (logged once a full scan). */
static int file_get(fp_watch *w, int d, const char *name)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", w->dirs[d].path, name) >= sizeof path)
        return -2;
    int i = file_find(w, path);
    if (i >= 0)
        return i;
    if (w->n >= w->max_files) {
        if (!w->over_logged)
            fp_logkv("warn", "too many files", "limit=%zu dir=%s note=%s", w->max_files, fp_q(w->dirs[d].path),
                     fp_q("more trace-named files than --max-files in the watched directories: the rest are not watched"));
        w->over_logged = 1;
        return -2;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wfile *f = realloc(w->f, cap * sizeof *f);
        if (!f)
            return -1;
        w->f = f;
        w->cap = cap;
    }
    wfile *e = &w->f[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->path = strdup(path)))
        return -1;
    e->name_off = (unsigned)(strlen(path) - strlen(name));
    e->dir = d;
    e->size = -1;
    e->verdict = 2;
    e->kind = (unsigned char)name_kind(name);
    if (sidx_put(&w->idx, e->path, (int)w->n) != 0) {
        free(e->path);
        return -1;
    }
    return (int)w->n++;
}

/* What a stat says about e: a new size or mtime is a new version (settle again, check again). */
static void note_stat(fp_watch *w, wfile *e, const struct stat *st, double now)
{
    if (!e->alive)
        w->changed = 1;
    e->alive = 1;
    if (e->size == st->st_size && e->mtime_ns == mtime_ns_of(st))
        return;
    w->changed = 1;
    e->size = st->st_size;
    e->mtime_ns = mtime_ns_of(st);
    e->stable_since = now;
    e->verdict = 2;
    e->logged = e->handed = 0;
    e->tries = 0;
    e->first_fail = 0;
}

/* Reads directory d whole: its regular files with a trace's name (links are not followed:
 * fstatat AT_SYMLINK_NOFOLLOW). 0, or -1 on out of memory. */
static int scan_dir(fp_watch *w, int d, double now)
{
    wdir *wd = &w->dirs[d];
    int fd = wd->fd >= 0 ? dup(wd->fd) : -1;
    DIR *dh = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    if (!dh) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(dh);
    wd->fresh = 0;
    while ((de = readdir(dh)) != NULL) {
        struct stat st;
        if (name_kind(de->d_name) == FP_KIND_NONE || fstatat(wd->fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        int i = file_get(w, d, de->d_name);
        if (i == -1) {
            closedir(dh);
            return -1;
        }
        if (i >= 0) {
            note_stat(w, &w->f[i], &st, now);
            w->f[i].gen = w->gen;
        }
    }
    closedir(dh);
    return 0;
}

/* Stats e again (an inotify event named it). */
static void restat(fp_watch *w, wfile *e, double now)
{
    struct stat st;
    e->dirty = 0;
    w->changed = 1; /* an event came: seen_write and closed may have moved */
    if (fstatat(w->dirs[e->dir].fd, e->path + e->name_off, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        e->alive = 0;
    else
        note_stat(w, e, &st, now);
}

/* Drops the entries of files that are gone; keeps the index right. -1 on out of memory. */
static int drop_dead(fp_watch *w, size_t dead)
{
    size_t keep = 0;
    if (dead == 0)
        return 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->f[i].alive)
            w->f[keep++] = w->f[i];
        else
            free(w->f[i].path);
    }
    if (keep == w->n)
        return 0;
    w->changed = 1; /* indices moved */
    w->n = keep;
    sidx_free(&w->idx);
    for (size_t i = 0; i < w->n; i++)
        if (sidx_put(&w->idx, w->f[i].path, (int)i) != 0)
            return -1;
    return 0;
}

/* Whether e may be checked now: rules 2 and 3 of watch.h. */
static int settled(const fp_watch *w, const wfile *e, double now)
{
    if (e->kind == FP_KIND_NONE || e->size < 0 || now < e->not_before)
        return 0;
    if (now - e->stable_since < w->settle_s)
        return 0;
    return !(e->seen_write && !e->closed);
}

static const fp_watch *g_sort_w; /* the watcher cmp_ready sorts for (one thread uses a watcher) */

static int cmp_ready(const void *a, const void *b)
{
    return strcmp(g_sort_w->f[*(const int *)a].path, g_sort_w->f[*(const int *)b].path);
}

/* This scan's candidates: alive, not known sent, not known incomplete or never-sent, settled;
 * in path order, so that the ranks of one capture go out rank 0 first. -1 on out of memory. */
static int build_ready(fp_watch *w, double now)
{
    w->cursor = 0;
    if (!w->changed && now < w->due)
        return 0; /* the same candidates as last time (fp_watch_next skips the ones handed out) */
    w->nready = 0;
    w->changed = 0;
    w->due = now + 3600;
    for (size_t i = 0; i < w->n; i++) {
        const wfile *e = &w->f[i];
        if (!e->alive || e->handed || e->verdict == 0 || e->verdict == -1 || e->kind == FP_KIND_NONE)
            continue;
        if (!settled(w, e, now)) {
            /* when it may settle: its settle time or its deferral over (an open writer's close
             * comes as an event, which marks a change) */
            double at = e->stable_since + w->settle_s > e->not_before ? e->stable_since + w->settle_s : e->not_before;
            if (at > now && at < w->due)
                w->due = at;
            continue;
        }
        if (w->nready == w->ready_cap) {
            size_t cap = w->ready_cap ? w->ready_cap * 2 : 64;
            int *r = realloc(w->ready, cap * sizeof *r);
            if (!r)
                return -1;
            w->ready = r;
            w->ready_cap = cap;
        }
        w->ready[w->nready++] = (int)i;
    }
    g_sort_w = w;
    if (w->nready > 1) /* qsort of a NULL array is undefined, even of none */
        qsort(w->ready, w->nready, sizeof *w->ready, cmp_ready);
    return 0;
}

int fp_watch_scan(fp_watch *w)
{
    double now = fp_now();
    if (expand(w) != 0)
        return -1;
    /* A full scan reads every directory: at start, every --rescan seconds (what inotify does
     * not see: a network file system's remote writes), after lost events, without inotify.
     * Between them only the files inotify named are stat'ed again. */
    int full = w->ifd < 0 || w->overflow || now >= w->next_rescan;
    if (full) {
        w->changed = 1;
        w->gen++;
        w->overflow = 0;
        w->over_logged = 0;
        w->next_rescan = now + w->rescan_s;
    }
    for (size_t d = 0; d < w->ndirs; d++)
        if ((full || w->dirs[d].wd < 0 || w->dirs[d].fresh) && scan_dir(w, (int)d, now) != 0)
            return -1;
    size_t dead = 0;
    for (size_t i = 0; i < w->n; i++) {
        wfile *e = &w->f[i];
        if (full && e->gen != w->gen)
            e->alive = 0; /* not in its directory any more */
        else if (e->dirty)
            restat(w, e, now);
        if (full && e->verdict == 0)
            e->verdict = 2; /* "not whole yet" is checked again at each full scan (an SQLite file's -wal went) */
        dead += !e->alive;
    }
    if (drop_dead(w, dead) != 0)
        return -1;
    return build_ready(w, now);
}

/* Opens e (relative to its directory, links not followed), checks it is the version last
 * stat'ed and that it is whole: the descriptor, or -1 (closed; e updated). */
static int open_checked(fp_watch *w, wfile *e, double now)
{
    char err[256];
    struct stat st;
    const char *name = e->path + e->name_off;
    int dfd = w->dirs[e->dir].fd;
    int fd = fp_open_in(dfd, name, &st, err, sizeof err);
    w->changed = 1; /* unless it is handed out, this file leaves the candidates or changes */
    if (fd < 0) {
        if (errno == ENOENT) {
            e->alive = 0;
        } else {
            e->verdict = -1;
            if (!e->logged)
                fp_logkv("warn", "not sent", "file=%s reason=%s", fp_q(e->path), fp_q(err));
            e->logged = 1;
        }
        return -1;
    }
    if (st.st_size != e->size || mtime_ns_of(&st) != e->mtime_ns) {
        note_stat(w, e, &st, now); /* changed since the scan: settle again */
        close(fd);
        return -1;
    }
    /* Invariant: the verdict kept is that of this very file (device, inode), size and mtime:
     * a file swapped in under the name is checked again, on the descriptor then uploaded. */
    if (e->verdict == 2 || e->dev != (unsigned long long)st.st_dev || e->ino != (unsigned long long)st.st_ino) {
        e->verdict = (signed char)fp_fd_complete(fd, dfd, name, e->kind, err, sizeof err);
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        if (e->verdict < 0 && !e->logged) {
            fp_logkv("warn", "not sent", "file=%s reason=%s", fp_q(e->path), fp_q(err));
            e->logged = 1;
        }
    }
    if (e->verdict != 1) {
        close(fd);
        return -1;
    }
    return fd;
}

int fp_watch_next(fp_watch *w, const fp_state *st, fp_watch_file *f)
{
    double now = fp_now();
    for (; w->cursor < w->nready; w->cursor++) {
        wfile *e = &w->f[w->ready[w->cursor]];
        if (!e->alive || e->handed || !settled(w, e, now))
            continue;
        if (fp_state_get(st, e->path, e->size, e->mtime_ns, NULL) != FP_ST_NONE) {
            e->handed = 1;
            w->changed = 1;
            continue;
        }
        int fd = open_checked(w, e, now);
        if (fd < 0)
            continue;
        f->path = e->path;
        f->dir = w->dirs[e->dir].path;
        f->size = e->size;
        f->mtime_ns = e->mtime_ns;
        f->fd = fd;
        fp_name_parse(e->path + e->name_off, &f->info);
        w->cursor++;
        return 1;
    }
    return 0;
}

void fp_watch_defer(fp_watch *w, const char *path, double seconds)
{
    int i = file_find(w, path);
    if (i >= 0) {
        w->f[i].not_before = fp_now() + seconds;
        w->f[i].handed = 0;
        w->changed = 1;
    }
}

double fp_watch_backoff(fp_watch *w, const char *path, double base, double max, double *failing_for)
{
    double now = fp_now(), wait = base;
    int i = file_find(w, path);
    *failing_for = 0;
    if (i < 0)
        return base;
    wfile *e = &w->f[i];
    if (e->first_fail == 0)
        e->first_fail = now;
    for (unsigned k = 0; k < e->tries && wait < max; k++)
        wait *= 2;
    if (wait > max)
        wait = max;
    if (e->tries < 60000)
        e->tries++;
    e->not_before = now + wait;
    e->handed = 0;
    w->changed = 1;
    *failing_for = now - e->first_fail;
    return wait;
}

size_t fp_watch_pending(const fp_watch *w, const fp_state *st, const char *dir, long long since_ns)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wfile *e = &w->f[i];
        if (!e->alive || strcmp(w->dirs[e->dir].path, dir) != 0 || e->mtime_ns < since_ns || e->verdict == -1)
            continue;
        int stw = fp_state_get(st, e->path, e->size, e->mtime_ns, NULL);
        if (stw == FP_ST_NONE || stw == FP_ST_SENDING) /* SENDING: its upload is under way */
            n++;
    }
    return n;
}

size_t fp_watch_count(const fp_watch *w) { return w->n; }

/* One inotify event: the file it names is stat'ed again at the next scan. */
static void on_event(fp_watch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        /* events were lost: what was learnt of open writers is unsure now, and the settle
         * time and content checks alone decide; everything is read again */
        for (size_t i = 0; i < w->n; i++)
            w->f[i].seen_write = 0;
        w->overflow = 1;
        return;
    }
    if (!ev->len || name_kind(ev->name) == FP_KIND_NONE)
        return;
    size_t d = 0;
    while (d < w->ndirs && w->dirs[d].wd != ev->wd)
        d++;
    if (d == w->ndirs)
        return;
    int i = file_get(w, (int)d, ev->name);
    if (i < 0)
        return;
    wfile *e = &w->f[i];
    e->dirty = 1;
    w->changed = 1;
    if (ev->mask & (IN_CREATE | IN_MODIFY)) {
        e->seen_write = 1;
        e->closed = 0;
    }
    if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) {
        e->seen_write = 1;
        e->closed = 1;
    }
}

/* Applies the inotify events waiting on w->ifd. */
static void read_events(fp_watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t r = read(w->ifd, buf, sizeof buf);
        if (r <= 0)
            return;
        for (char *p = buf; p < buf + r;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            on_event(w, ev);
        }
    }
}

void fp_watch_wait(fp_watch *w, int timeout_ms)
{
    if (w->ifd < 0) {
        if (timeout_ms > 0)
            usleep((useconds_t)timeout_ms * 1000);
        return;
    }
    struct pollfd p = {w->ifd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) > 0)
        read_events(w);
    /* Events that came while the caller was busy (an upload) are read too. */
    read_events(w);
}
