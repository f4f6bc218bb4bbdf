/* download.c: streams a session back as a Chrome trace (download.h). Owns one pooled
 * connection and one statement for the life of the download; gzip through zlib. */
#include "store/download.h"
#include "store/db.h"

#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <zlib.h>

#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/err.h"

#define DOWNLOAD_BATCH 4 /* event chunks a fetch on PostgreSQL; each is at most ~CHUNK_BYTES inflated */

struct download {
    store *st;
    db_conn *db;
    db_stmt *chunks;
    json_t *meta;
    int stage;        /* 0 header, 1 events, 2 trailer, 3 done */
    int first;        /* no event written yet */
    buf plain;        /* inflated chunk */
    buf out;          /* bytes ready for the client */
    size_t out_off;
    int gzip;
    int zdone;        /* gzip: the deflate stream is finished */
    z_stream z;
};

download *download_open(store *s, long long id, int gzip, int *err) {
    download *d = calloc(1, sizeof *d);
    if (!d) { *err = ERR_NOMEM; return NULL; }
    d->st = s;
    d->first = 1;
    d->gzip = gzip;
    d->db = store_get(s);
    *err = ERR_DB;
    if (!d->db) goto fail;
    db_stmt *m;
    if (!(m = db_prepare(d->db, "SELECT meta FROM sessions WHERE id = ?"))) goto fail;
    db_bind_int64(m, 1, id);
    if (db_step(m) != DB_ROW) {
        db_finalize(m);
        *err = ERR_NOTFOUND;
        goto fail;
    }
    json_error_t je;
    d->meta = json_loads((const char *)db_column_text(m, 0), 0, &je);
    db_finalize(m);
    if (!d->meta) goto fail;
    /* A stream, DOWNLOAD_BATCH chunks at a time: a plain statement's first step fetched every
     * chunk of the session into one PostgreSQL result, as hex text (2x), so a download held
     * the whole session in memory (about 60 MB for a 1M-event one). */
    if (!(d->chunks = db_prepare_stream(d->db, "SELECT data FROM event_chunks WHERE session_id = ? ORDER BY seq", DOWNLOAD_BATCH)))
        goto fail;
    db_bind_int64(d->chunks, 1, id);
    /* windowBits 15+16: a gzip wrapper, what Content-Encoding: gzip means. */
    if (gzip && deflateInit2(&d->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) { *err = ERR_NOMEM; d->gzip = 0; goto fail; }
    *err = 0;
    return d;
fail:
    if (*err == ERR_DB) *err = store_fail(s, d->db, ERR_DB);
    download_free(d);
    return NULL;
}

/* The next piece of the document, as plain JSON, appended to p. 0, 1 at the end, or -1. */
static int produce(download *d, buf *p) {
    switch (d->stage) {
    case 0:
        d->stage = 1;
        return buf_put(p, "{\"traceEvents\":[\n", 17) ? -1 : 0;
    case 1: {
        int rc = db_step(d->chunks);
        if (rc == DB_DONE) { d->stage = 2; return 0; }
        if (rc != DB_ROW) return -1;
        if (chunk_inflate(db_column_blob(d->chunks, 0, NULL), (size_t)db_column_bytes(d->chunks, 0), &d->plain)) return -1;
        size_t off = 0;
        chunk_rec r;
        const char *js;
        while ((rc = chunk_next(&d->plain, &off, &r, &js)) == 1) {
            if (!d->first && buf_put(p, ",\n", 2)) return -1;
            if (buf_put(p, js, r.json_len)) return -1;
            d->first = 0;
        }
        return rc < 0 ? -1 : 0;
    }
    case 2: {
        if (buf_put(p, "\n]", 2)) return -1;
        const char *k;
        json_t *v;
        json_object_foreach(d->meta, k, v) {
            json_t *key = json_string(k);
            char *ks = json_dumps(key, JSON_ENCODE_ANY), *vs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            json_decref(key);
            int bad = !ks || !vs || buf_put(p, ",", 1) || buf_put(p, ks, strlen(ks)) || buf_put(p, ":", 1) || buf_put(p, vs, strlen(vs));
            free(ks);
            free(vs);
            if (bad) return -1;
        }
        /* Perfetto and chrome://tracing read ts/dur as microseconds either way; the key
         * only picks the display unit. */
        if (!json_object_get(d->meta, "displayTimeUnit") && buf_put(p, ",\"displayTimeUnit\":\"ms\"", 23)) return -1;
        d->stage = 3;
        return buf_put(p, "}\n", 2) ? -1 : 0;
    }
    default:
        return 1;
    }
}

/* Fills d->out with the next bytes for the client: 0, 1 when nothing is left, -1 on error. */
static int refill(download *d) {
    buf_reset(&d->out);
    d->out_off = 0;
    buf plain = {0};
    int rc = 0;
    while (d->out.len == 0 && rc == 0) {
        if (d->zdone) { rc = 1; break; }
        buf *dst = d->gzip ? &plain : &d->out;
        buf_reset(&plain);
        int pr = produce(d, dst);
        if (pr < 0) { rc = -1; break; }
        if (!d->gzip) { rc = pr; continue; } /* a stage may add nothing (an empty chunk): go on */
        int flush = pr == 1 ? Z_FINISH : Z_NO_FLUSH;
        d->z.next_in = (unsigned char *)plain.p;
        d->z.avail_in = (uInt)plain.len;
        unsigned char tmp[64 * 1024];
        int zr;
        do {
            d->z.next_out = tmp;
            d->z.avail_out = sizeof tmp;
            zr = deflate(&d->z, flush);
            if (buf_put(&d->out, tmp, sizeof tmp - d->z.avail_out)) { rc = -1; break; }
        } while (d->z.avail_in > 0 || d->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
        if (flush == Z_FINISH) d->zdone = 1;
    }
    buf_free(&plain);
    return d->out.len ? (rc < 0 ? -1 : 0) : rc;
}

long download_read(void *cls, unsigned long long pos, char *out, size_t max) {
    (void)pos;
    download *d = cls;
    if (d->out_off >= d->out.len) {
        int rc = refill(d);
        if (rc) return rc < 0 ? -1 : 0;
    }
    size_t n = d->out.len - d->out_off;
    if (n > max) n = max;
    memcpy(out, d->out.p + d->out_off, n);
    d->out_off += n;
    return (long)n;
}

void download_free(void *cls) {
    download *d = cls;
    if (!d) return;
    db_finalize(d->chunks);
    if (d->db) store_put(d->st, d->db);
    if (d->gzip) deflateEnd(&d->z);
    json_decref(d->meta);
    buf_free(&d->plain);
    buf_free(&d->out);
    free(d);
}
