/* chunk.c: encodes and decodes event chunks (layout in chunk.h). No SQL, no HTTP. */
#include "chunk.h"

#include <zlib.h>

int chunk_append(buf *b, const chunk_rec *r, const char *json) {
    unsigned char h[CHUNK_HDR] = {0};
    memcpy(h, &r->ts, 8);
    memcpy(h + 8, &r->dur, 8);
    memcpy(h + 16, &r->name, 4);
    memcpy(h + 20, &r->kind, 4);
    h[24] = r->cls;
    h[25] = r->ph;
    memcpy(h + 28, &r->json_len, 4);
    if (buf_put(b, h, sizeof h)) return ERR_NOMEM;
    return buf_put(b, json, r->json_len);
}

int chunk_inflate(const void *z, size_t zlen, buf *out) {
    buf_reset(out);
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK) return ERR_NOMEM;
    s.next_in = (unsigned char *)z;
    s.avail_in = (uInt)zlen;
    int rc = 0;
    for (;;) {
        if (out->cap - out->len < 65536 + 1) {
            size_t cap = out->cap ? out->cap * 2 : 256 * 1024;
            char *p = realloc(out->p, cap);
            if (!p) { rc = ERR_NOMEM; break; }
            out->p = p;
            out->cap = cap;
        }
        s.next_out = (unsigned char *)out->p + out->len;
        s.avail_out = (uInt)(out->cap - out->len - 1);
        int zr = inflate(&s, Z_NO_FLUSH);
        out->len = out->cap - 1 - s.avail_out;
        if (zr == Z_STREAM_END) break;
        if (zr != Z_OK) { rc = ERR_IO; break; }
    }
    inflateEnd(&s);
    if (out->p) out->p[out->len] = '\0';
    return rc;
}

int chunk_next(const buf *b, size_t *off, chunk_rec *r, const char **json) {
    if (*off >= b->len) return 0;
    if (b->len - *off < CHUNK_HDR) return -1;
    const unsigned char *h = (const unsigned char *)b->p + *off;
    memcpy(&r->ts, h, 8);
    memcpy(&r->dur, h + 8, 8);
    memcpy(&r->name, h + 16, 4);
    memcpy(&r->kind, h + 20, 4);
    r->cls = h[24];
    r->ph = h[25];
    memcpy(&r->json_len, h + 28, 4);
    if (b->len - *off - CHUNK_HDR < r->json_len) return -1;
    *json = (const char *)h + CHUNK_HDR;
    *off += CHUNK_HDR + r->json_len;
    return 1;
}
