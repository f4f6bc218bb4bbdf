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

#include "lib/err.h"

#define FORM_PP_BUFFER (64u << 10) /* MHD's own advice for "good performance" */

struct form {
    struct MHD_PostProcessor *pp; /* NULL after form_finish */
    form_sink sink;
    void *cls;
    int rc;                       /* the first error (sticky), 0 when none */
    char err[384];
    int parts;                    /* file parts begun */
    unsigned long long bytes;     /* bytes of the file part so far */
    char key[128];                /* the file part's name and filename, to tell its */
    char filename[256];           /* pieces from a second part's first piece */
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

static int is_file_part(const char *key, const char *filename) {
    return filename || !strcmp(key, "file") || !strcmp(key, "trace");
}

/* A piece of the file part starts a second part when its offset is 0 and the first part
 * already had bytes, or named itself differently: MHD calls the iterator once per piece
 * and says nothing else about where a part begins. */
static int second_part(const form *f, const char *key, const char *filename, uint64_t off) {
    if (off != 0 || !f->parts) return 0;
    return f->bytes > 0 || strcmp(f->key, key) || strcmp(f->filename, filename ? filename : "");
}

static enum MHD_Result on_piece(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename, const char *content_type,
                                const char *transfer_encoding, const char *data, uint64_t off, size_t size) {
    (void)kind; (void)content_type;
    form *f = cls;
    if (!key) key = "";
    if (!is_file_part(key, filename))
        return fail(f, "the form field '%.64s' is not read: the form's one part is the trace file (-F file=@trace.json.gz); "
                       "give the session's name and labels in the query (?name=...&label=key:value)", key), MHD_NO;
    if (second_part(f, key, filename, off))
        return fail(f, "the form has a second file part ('%.64s'): upload one trace per request", filename ? filename : key), MHD_NO;
    if (transfer_encoding && strcasecmp(transfer_encoding, "binary") && strcasecmp(transfer_encoding, "8bit") &&
        strcasecmp(transfer_encoding, "7bit"))
        return fail(f, "the file part's Content-Transfer-Encoding is '%.32s': send the file's bytes as they are", transfer_encoding),
               MHD_NO;
    if (!f->parts) {
        f->parts = 1;
        snprintf(f->key, sizeof f->key, "%s", key);
        snprintf(f->filename, sizeof f->filename, "%s", filename ? filename : "");
    }
    if (size) f->sink(f->cls, data, size);
    f->bytes += size;
    return MHD_YES;
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
    if (!f->pp) {
        free(f);
        *rc = ERR_REQUEST;
        snprintf(err, errlen, "Content-Type multipart/form-data needs a boundary= parameter");
        return NULL;
    }
    return f;
}

int form_feed(form *f, const char *data, size_t n) {
    if (f->rc || !n) return f->rc;
    if (MHD_post_process(f->pp, data, n) != MHD_YES) /* our refusal, or MHD's parse error */
        return fail(f, "the multipart/form-data body is malformed (a boundary or a part's headers)");
    return 0;
}

int form_finish(form *f) {
    if (f->rc) return f->rc;
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
    free(f);
}
