/* form.c: a multipart/form-data upload read as its one file part (see form.h).
 *
 * libmicrohttpd's post processor does the parsing: boundaries, part headers, the file's
 * bytes handed over in pieces as they arrive. What is ours is which parts are allowed,
 * and the errors a person running `curl -F` can act on. */
#include "http/form.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/reply.h" /* HTTP_TEXT_MAX */
#include "lib/err.h"
#include "lib/utf8.h"
#include "session.h" /* fp_utf8_valid */

#define FORM_PP_BUFFER (64u << 10) /* MHD's own advice for "good performance"; it also bounds a
                                      part's headers, so key and filename below */
/* The bytes a form may hold before its first boundary (RFC 2046's preamble; curl and browsers
 * send none). Why a bound: MHD's post processor skips a preamble one '-' at a time and moves
 * its whole buffer (FORM_PP_BUFFER) after each, so a preamble of dashes cost ~0.55 s of CPU
 * per MiB (16 MiB: 9 s), where 64 MiB inside a file part took under 2 s (issue 43). The
 * preamble is held here (at most this much plus the delimiter) until the first delimiter
 * shows, and only then goes to MHD: it never scans more than FORM_PREAMBLE_MAX of it. */
#define FORM_PREAMBLE_MAX 1024

struct form {
    struct MHD_PostProcessor *pp; /* NULL after form_finish */
    form_sink sink;
    void *cls;
    int rc;                       /* the first error (sticky), 0 when none */
    char err[384];
    int parts;                    /* file parts begun */
    unsigned long long bytes;     /* bytes of the file part so far */
    char *key;                    /* the file part's name and filename (NULL: none), to */
    char *filename;               /* tell its pieces from a second part's first piece */
    char name[HTTP_TEXT_MAX + 1]; /* form_filename's: the filename, valid UTF-8, cut */
    char *delim;                  /* "--" and the boundary, as MHD reads it (delim_of) */
    size_t dlen;
    char *pre;                    /* the body's first bytes until the first delimiter: */
    size_t npre;                  /* FORM_PREAMBLE_MAX + dlen at most; NULL once it came */
};

int form_is_multipart(const char *ct) {
    static const char mp[] = "multipart/form-data";
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    return !strncasecmp(ct, mp, sizeof mp - 1) && (ct[sizeof mp - 1] == '\0' || ct[sizeof mp - 1] == ';' ||
                                                     ct[sizeof mp - 1] == ' ' || ct[sizeof mp - 1] == '\t');
}

static int fail(form *f, const char *fmt, ...) {
    if (f->rc) return f->rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    return f->rc = ERR_REQUEST;
}

/* A client's part name or filename as an error message may show it: valid UTF-8 (Jansson
 * refuses anything else, and the reply would be lost), at most 64 bytes. */
static const char *shown(const char *s, char *buf, size_t n) {
    if (!fp_utf8_valid(s, strlen(s))) return "(not UTF-8)";
    return utf8_clip(s, 64, buf, n);
}

static int is_file_part(const char *key, const char *filename) {
    return filename || !strcmp(key, "file") || !strcmp(key, "trace");
}

/* A piece of the file part starts a second part when its offset is 0 and the first part
 * already had bytes, or named itself differently: MHD calls the iterator once per piece
 * and says nothing else about where a part begins. */
static int second_part(const form *f, const char *key, const char *filename, uint64_t off) {
    if (off != 0 || !f->parts) return 0;
    return f->bytes > 0 || strcmp(f->key, key) || !filename != !f->filename || (filename && strcmp(f->filename, filename));
}

/* The first piece of the file part: its name and filename kept (0, or ERR_NOMEM). */
static int first_piece(form *f, const char *key, const char *filename) {
    f->parts = 1;
    f->key = strdup(key);
    f->filename = filename ? strdup(filename) : NULL;
    if (!f->key || (filename && !f->filename)) return f->rc = ERR_NOMEM;
    if (filename && fp_utf8_valid(filename, strlen(filename))) {
        size_t n = utf8_cut(filename, strlen(filename), HTTP_TEXT_MAX);
        memcpy(f->name, filename, n);
        f->name[n] = '\0';
    }
    return 0;
}

static enum MHD_Result on_piece(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename, const char *content_type,
                                const char *transfer_encoding, const char *data, uint64_t off, size_t size) {
    (void)kind; (void)content_type;
    form *f = cls;
    char b[72];
    if (!key) key = "";
    if (!is_file_part(key, filename))
        return fail(f, "the form field '%s' is not read: the form's one part is the trace file (-F file=@trace.json.gz); "
                       "give the session's name and labels in the query (?name=...&label=key:value)", shown(key, b, sizeof b)), MHD_NO;
    if (second_part(f, key, filename, off))
        return fail(f, "the form has a second file part ('%s'): upload one trace per request", shown(filename ? filename : key, b, sizeof b)),
               MHD_NO;
    if (transfer_encoding && strcasecmp(transfer_encoding, "binary") && strcasecmp(transfer_encoding, "8bit") &&
        strcasecmp(transfer_encoding, "7bit"))
        return fail(f, "the file part's Content-Transfer-Encoding is '%s': send the file's bytes as they are",
                    shown(transfer_encoding, b, sizeof b)), MHD_NO;
    if (!f->parts && first_piece(f, key, filename)) {
        snprintf(f->err, sizeof f->err, "out of memory");
        return MHD_NO;
    }
    if (size) f->sink(f->cls, data, size);
    f->bytes += size;
    return MHD_YES;
}

/* "--" and the boundary of mc's Content-Type, read as MHD_create_post_processor reads it
 * (libmicrohttpd 0.9.75, postprocessor.c): everything after the first "boundary=" that
 * follows "multipart/form-data", without enclosing double quotes. NULL when there is none. */
static char *delim_of(struct MHD_Connection *mc, size_t *dlen) {
    static const char mp[] = MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA;
    const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *b = ct && strlen(ct) >= sizeof mp - 1 ? strstr(ct + sizeof mp - 1, "boundary=") : NULL;
    if (!b) return NULL;
    b += sizeof "boundary=" - 1;
    size_t n = strlen(b);
    if (n >= 2 && b[0] == '"' && b[n - 1] == '"') b++, n -= 2;
    char *d = n ? malloc(n + 2) : NULL;
    if (!d) return NULL;
    memcpy(d, "--", 2);
    memcpy(d + 2, b, n);
    *dlen = n + 2;
    return d;
}

form *form_new(struct MHD_Connection *mc, form_sink sink, void *cls, int *rc, char *err, size_t errlen) {
    form *f = calloc(1, sizeof *f);
    if (!f) {
        *rc = ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->sink = sink;
    f->cls = cls;
    /* MHD refuses a multipart type without a boundary= here (and on no memory). */
    f->pp = MHD_create_post_processor(mc, FORM_PP_BUFFER, on_piece, f);
    if (f->pp) f->delim = delim_of(mc, &f->dlen);
    if (f->delim) f->pre = malloc(FORM_PREAMBLE_MAX + f->dlen);
    if (!f->pp || !f->delim || !f->pre) {
        form_free(f);
        *rc = ERR_REQUEST;
        snprintf(err, errlen, "Content-Type multipart/form-data needs a boundary= parameter");
        return NULL;
    }
    return f;
}

static int post(form *f, const char *data, size_t n) {
    if (n && MHD_post_process(f->pp, data, n) != MHD_YES) /* our refusal, or MHD's parse error */
        return fail(f, "the multipart/form-data body is malformed (a boundary or a part's headers)");
    return 0;
}

int form_feed(form *f, const char *data, size_t n) {
    if (f->rc || !n) return f->rc;
    if (!f->pre) return post(f, data, n);
    /* The preamble (FORM_PREAMBLE_MAX): held until the first delimiter, which MHD finds
     * wherever it is (it skips to each '-' and compares), as memmem does here. */
    size_t room = FORM_PREAMBLE_MAX + f->dlen - f->npre, take = n < room ? n : room;
    memcpy(f->pre + f->npre, data, take);
    f->npre += take;
    if (!memmem(f->pre, f->npre, f->delim, f->dlen)) {
        if (f->npre < FORM_PREAMBLE_MAX + f->dlen) return 0; /* more to come */
        return fail(f, "the form has over %d bytes before its first boundary (its preamble): a form starts with "
                       "--BOUNDARY (curl -F does)", FORM_PREAMBLE_MAX);
    }
    int rc = post(f, f->pre, f->npre);
    free(f->pre);
    f->pre = NULL;
    return rc ? rc : post(f, data + take, n - take);
}

const char *form_filename(const form *f) {
    return f->name[0] ? f->name : NULL;
}

int form_finish(form *f) {
    if (f->rc) return f->rc;
    if (f->pre && post(f, f->pre, f->npre)) return f->rc; /* a short body that never had a delimiter: MHD says so */
    /* MHD says MHD_NO here when the closing boundary never came (or bytes were left over). */
    enum MHD_Result done = MHD_destroy_post_processor(f->pp);
    f->pp = NULL;
    if (!f->parts)
        return fail(f, "the form has no file part: send the trace as -F file=@trace.json.gz, or as the body itself "
                       "(--data-binary @trace.json.gz)");
    if (done != MHD_YES) return fail(f, "the multipart/form-data body ended before its closing boundary");
    return 0;
}

const char *form_error(const form *f) {
    return f->err;
}

void form_free(form *f) {
    if (!f) return;
    if (f->pp) MHD_destroy_post_processor(f->pp);
    free(f->delim);
    free(f->pre);
    free(f->key);
    free(f->filename);
    free(f);
}
