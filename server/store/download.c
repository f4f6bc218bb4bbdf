/* download.c: streams a session back as a Chrome trace (download.h). Holds no database
 * connection and no transaction while the client reads: each batch of chunks is fetched on a
 * pooled connection taken for that fetch alone; gzip through zlib. */
#include "store/download.h"
#include "store/db.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <zlib.h>

#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/err.h"

/* A fetch reads chunks until DOWNLOAD_BATCH_BYTES of them (compressed, stored) are in hand,
 * at most DOWNLOAD_BATCH of them; on PostgreSQL at most DOWNLOAD_BATCH_PG, since libpq takes
 * a result whole (as hex text, twice the bytes) before the first row is looked at. A chunk
 * is at most ~CHUNK_BYTES inflated, up to a few hundred KB stored; a session's small chunks
 * (one a thread) come in few fetches. */
#define DOWNLOAD_BATCH 64
#define DOWNLOAD_BATCH_PG 4
#define DOWNLOAD_BATCH_BYTES (1u << 20)

/* Why a fetch a batch, keyed on seq, and no statement kept open between them: a download
 * lasts as long as its client reads. A statement stepped across the whole download held one
 * SQLite read transaction that long, and the WAL truncation after a large upload or a DELETE
 * waited 30 s for it with the write lock held: one client reading at 300 KB/s made uploads
 * take 30 s or fail "database is locked", and the WAL grew by each upload (issue 43). On
 * PostgreSQL the cursor held a pooled connection per download: 16 slow readers held the
 * whole pool and every other request, /healthz included, got 503. Now each fetch is one
 * short statement, (session_id, seq) > the last seq sent, on a connection taken and given
 * back around it (hostile.sh case_slowread, tests/pg/test_pool.py).
 *
 * A session can be deleted between two fetches, or re-analysed (ingest/reanalyse.h: its
 * chunks replaced by new ones, numbered above the old): the chunks' last seq is read with
 * the metadata, in one snapshot, every fetch stays at or below it, and a fetch that finds
 * nothing before it means the chunks went away; the download then fails (the client sees
 * the stream cut short, never a shorter document that parses, nor one of old and new
 * chunks mixed). */
struct download {
    store *st;
    long long id;
    long long last_seq; /* the last chunk fetched; -1 before the first */
    long long end_seq;  /* the session's last chunk when the download began; -1: none */
    buf batch;                 /* the current fetch's compressed chunks, end to end */
    size_t at[DOWNLOAD_BATCH + 1]; /* chunk i is batch.p[at[i] .. at[i + 1]) */
    int nbatch, ibatch;        /* chunks in batch, the next one to inflate */
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

static int fetch_on(download *d, db_conn *db);

download *download_open(store *s, long long id, int gzip, int *err) {
    download *d = calloc(1, sizeof *d);
    if (!d) { *err = ERR_NOMEM; return NULL; }
    d->st = s;
    d->id = id;
    d->first = 1;
    d->last_seq = -1;
    db_conn *db = store_get(s);
    db_stmt *m = NULL;
    *err = ERR_DB;
    if (!db) goto fail;
    /* One snapshot for the metadata, the last chunk's seq and the first batch: a session
     * that one batch holds is read whole before the reply starts, so a DELETE right after
     * cannot cut it. */
    if (db_begin_read(db)) goto fail;
    if (!(m = db_prepare(db, "SELECT meta, COALESCE((SELECT MAX(seq) FROM event_chunks WHERE session_id = ?1), -1) FROM sessions WHERE id = ?1")))
        goto fail;
    db_bind_int64(m, 1, id);
    int st = db_step(m);
    if (st != DB_ROW) {
        if (st == DB_DONE) *err = ERR_NOTFOUND;
        goto fail;
    }
    json_error_t je;
    d->meta = json_loads((const char *)db_column_text(m, 0), 0, &je);
    d->end_seq = db_column_int64(m, 1);
    if (!d->meta) goto fail;
    db_finalize(m);
    m = NULL;
    if (d->end_seq >= 0 && (*err = fetch_on(d, db))) goto fail;
    *err = ERR_DB;
    if (db_exec(db, "COMMIT")) goto fail;
    /* windowBits 15+16: a gzip wrapper, what Content-Encoding: gzip means. */
    if (gzip && deflateInit2(&d->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) { *err = ERR_NOMEM; goto fail; }
    d->gzip = gzip;
    store_put(s, db);
    *err = 0;
    return d;
fail:
    db_finalize(m);
    if (*err == ERR_DB) *err = store_fail(s, db, ERR_DB);
    store_put(s, db);
    download_free(d);
    return NULL;
}

/* The next batch of chunks after last_seq into d->batch, read on db. 0 (nbatch 0: none
 * left), or an ERR_*. */
static int fetch_on(download *d, db_conn *db) {
    d->nbatch = d->ibatch = 0;
    d->batch.len = 0;
    int most = db_sqlite(db) ? DOWNLOAD_BATCH : DOWNLOAD_BATCH_PG;
    db_stmt *q = db_prepare(db, "SELECT seq, data FROM event_chunks WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?");
    int rc = q ? 0 : ERR_DB;
    if (q) {
        db_bind_int64(q, 1, d->id);
        db_bind_int64(q, 2, d->last_seq);
        db_bind_int64(q, 3, d->end_seq);
        db_bind_int64(q, 4, most);
    }
    /* Invariant: batch holds chunks at[0..nbatch) end to end, and at most one of them lies
     * past DOWNLOAD_BATCH_BYTES. */
    while (!rc && d->nbatch < most && d->batch.len < DOWNLOAD_BATCH_BYTES) {
        int st = db_step(q);
        if (st == DB_DONE) break;
        if (st != DB_ROW) { rc = ERR_DB; break; }
        size_t n = 0;
        const void *z = db_column_blob(q, 1, &n);
        d->at[d->nbatch] = d->batch.len;
        if (buf_put(&d->batch, z ? z : "", n)) { rc = ERR_NOMEM; break; }
        d->last_seq = db_column_int64(q, 0);
        d->at[++d->nbatch] = d->batch.len;
    }
    assert(rc || (d->nbatch <= most && d->at[d->nbatch] == d->batch.len));
    db_finalize(q);
    if (rc) d->nbatch = 0;
    return rc;
}

/* fetch_on, on a connection taken for this fetch alone: the statement's read transaction
 * ends, and the connection goes back, before the client is waited for. */
static int fetch(download *d) {
    db_conn *db = store_get(d->st);
    if (!db) return ERR_DB;
    int rc = fetch_on(d, db);
    store_put(d->st, db);
    return rc;
}
/* The next piece of the document, as plain JSON, appended to p. 0, 1 at the end, or -1. */
static int produce(download *d, buf *p) {
    switch (d->stage) {
    case 0:
        d->stage = 1;
        return buf_put(p, "{\"traceEvents\":[\n", 17) ? -1 : 0;
    case 1: {
        if (d->ibatch >= d->nbatch) {
            if (d->last_seq >= d->end_seq) { d->stage = 2; return 0; }
            if (fetch(d)) return -1;
            if (!d->nbatch) return -1; /* chunks up to end_seq were there: the session was deleted */
        }
        int i = d->ibatch++;
        if (chunk_inflate(d->batch.p + d->at[i], d->at[i + 1] - d->at[i], &d->plain)) return -1;
        int rc;
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
    if (d->gzip) deflateEnd(&d->z);
    buf_free(&d->batch);
    json_decref(d->meta);
    buf_free(&d->plain);
    buf_free(&d->out);
    free(d);
}
