/* chunk.c: encodes and decodes event chunks (layouts in chunk.h). No SQL, no HTTP. */
#include "lib/chunk.h"

#include <math.h>
#include <zlib.h>
#include <zstd.h>

#define MAX_CHUNK_RAW (256u << 20)      /* a decompressed chunk larger than this is corrupt */
#define POS_NONE 0
#define POS_RAW 255

/* ---- varints and the column reader ---- */

static int put_u8(buf *b, unsigned v) {
    unsigned char c = (unsigned char)v;
    return buf_put(b, &c, 1);
}

static int put_varint(buf *b, uint64_t v) {
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) t[n] |= 0x80;
        n++;
    } while (v);
    return buf_put(b, t, n);
}

static uint64_t zigzag(int64_t v) { return v < 0 ? ((uint64_t)(-(v + 1)) << 1) | 1 : (uint64_t)v << 1; }
static int64_t unzigzag(uint64_t u) { return u & 1 ? -(int64_t)(u >> 1) - 1 : (int64_t)(u >> 1); }

typedef struct rd {
    const unsigned char *p, *end;
    int bad;
} rd;

static unsigned get_u8(rd *r) {
    if (r->p >= r->end) { r->bad = 1; return 0; }
    return *r->p++;
}

static uint64_t get_varint(rd *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) break;
        unsigned c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static double get_f64(rd *r) {
    double d = 0;
    if (r->end - r->p < 8) { r->bad = 1; return 0; }
    memcpy(&d, r->p, 8);
    r->p += 8;
    return d;
}

/* Advances r past n bytes; sets bad (and stays) when fewer are left. */
static void skip_bytes(rd *r, uint64_t n) {
    if (n > (uint64_t)(r->end - r->p)) r->bad = 1;
    else r->p += n;
}

/* Advances r past n varints (to find where the next column starts). */
static void skip_varints(rd *r, uint64_t n) {
    for (uint64_t i = 0; i < n && !r->bad; i++) get_varint(r);
}

/* ---- top-level members of a compact JSON object ---- */

/* Past the string that opens at j[p] (memchr for the closing quote: a byte at a time
 * was most of a chunk's member search); 0 when it does not close. */
static size_t skip_string(const char *j, size_t p, size_t n) {
    for (p++; p < n;) {
        const char *q = memchr(j + p, '"', n - p);
        if (!q) return 0;
        size_t e = (size_t)(q - j), bs = 0;
        while (e - bs > p && j[e - bs - 1] == '\\') bs++;
        if (!(bs & 1)) return e + 1; /* an even run of backslashes escapes itself, not the quote */
        p = e + 1;
    }
    return 0;
}

static size_t skip_value(const char *j, size_t p, size_t n) {
    if (p >= n) return 0;
    if (j[p] == '"') return skip_string(j, p, n);
    if (j[p] == '{' || j[p] == '[') {
        int depth = 0;
        while (p < n) {
            char c = j[p];
            if (c == '"') {
                p = skip_string(j, p, n);
                if (!p) return 0;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if ((c == '}' || c == ']') && --depth == 0) return p + 1;
            p++;
        }
        return 0;
    }
    while (p < n && j[p] != ',' && j[p] != '}' && j[p] != ']') p++;
    return p;
}

/* One member of a compact object ({"k":v,...} with no whitespace: what the loader stores
 * and Jansson's JSON_COMPACT writes): j[*p] must open it. Sets [*st, *en) to the member
 * and leaves *p on the ',' or '}' after it. 0 when it is not such a member.
 * Why members are found one at a time: "ts" and "dur" come before "args" in Kineto's
 * events, so building and rebuilding a chunk stop there and copy the rest whole; splitting
 * every member first (args included) was 7 % of the server's CPU in an ingest. */
static int next_member(const char *j, size_t n, size_t *p, size_t *st, size_t *en) {
    if (*p >= n || j[*p] != '"') return 0;
    size_t q = skip_string(j, *p, n);
    if (!q || q >= n || j[q] != ':') return 0;
    q = skip_value(j, q + 1, n);
    if (!q || q >= n || (j[q] != ',' && j[q] != '}')) return 0;
    *st = *p;
    *en = q;
    *p = q;
    return 1;
}

/* Steps *p past the ',' after a member: 1, another member opens there; 0 at the closing
 * '}', the object's last byte; -1 otherwise: a '}' before the end, or a ',' that no member
 * follows ({"ts":1.5,"dur":0,} or ", ").
 * Why -1 for a bare ',': chunk_add copies the members after the cut ones as one tail
 * and rebuild puts a ',' back only before a non-empty tail, so a trailing comma would not
 * come back; refusing makes chunk_add cut nothing and store the bytes as they were
 * (tests/fuzz/regress/chunk/trailing_comma_after_cut.bin). The importer never stores such
 * an event (YAJL refuses the JSON), but the chunk format promises every byte back. */
static int after_member(const char *j, size_t n, size_t *p) {
    if (j[*p] == '}') return *p == n - 1 ? 0 : -1;
    (*p)++;
    return *p < n && j[*p] == '"' ? 1 : -1;
}

/* ---- numbers that print back exactly ---- */

static const double p10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17};

/* Prints mantissa m with dec digits after the point into out (>= 24 bytes); its length. */
static size_t num_print(int64_t m, unsigned dec, char *out) {
    char d[24];
    size_t nd = 0;
    uint64_t u = m < 0 ? (uint64_t)(-(m + 1)) + 1 : (uint64_t)m;
    do {
        d[nd++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (nd < dec + 1) d[nd++] = '0';
    size_t o = 0;
    if (m < 0) out[o++] = '-';
    for (size_t i = nd; i-- > 0;) {
        out[o++] = d[i];
        if (i == dec && dec) out[o++] = '.';
    }
    return o;
}

/* Reads text as -?digits[.digits] into (mantissa, decimals). 1 when it prints back to the
 * same bytes (num_print) and its double equals want; 0 otherwise (the member then stays in
 * the JSON). m < 2^53 and 10^dec exact make m / 10^dec the correctly rounded value, as
 * strtod's is. Prints back means: an integer part without a leading zero (or just "0"),
 * digits after a point if there is one, and no "-" on a zero; checked as it is read. */
static int num_parse(const char *t, size_t n, double want, int64_t *m, unsigned *dec) {
    size_t i = 0, digits = 0, ints = 0;
    int neg = 0, point = 0;
    uint64_t u = 0;
    unsigned d = 0;
    if (n && t[0] == '-') neg = 1, i = 1;
    size_t first = i;
    for (; i < n; i++) {
        if (t[i] == '.' && !point) { point = 1; continue; }
        if (t[i] < '0' || t[i] > '9' || ++digits > 16) return 0;
        u = u * 10 + (uint64_t)(t[i] - '0');
        d += (unsigned)point;
        ints += (size_t)!point;
    }
    if (!ints || (ints > 1 && t[first] == '0') || (point && !d) || (neg && !u) || u > (1ull << 53)) return 0;
    double v = (double)u / p10[d];
    if (neg) v = -v;
    if (v != want || signbit(v) != signbit(want)) return 0;
    *m = neg ? -(int64_t)u : (int64_t)u;
    *dec = d;
    return 1;
}

/* ---- building a chunk (version 2) ---- */

typedef struct cut {
    int pos;   /* member index, or -1 */
    int64_t m;
    unsigned dec;
} cut;

/* Whether member j[st, en) is the first key `key` (kl bytes, with its quotes): *c says
 * whether its value is cut. */
static inline void decide(const char *j, size_t st, size_t en, int i, const char *key, size_t kl, double want, int *open,
                          cut *c) {
    if (!*open || en - st <= kl + 1 || j[st + 1] != key[1] || j[st + kl] != ':' || memcmp(j + st, key, kl)) return;
    *open = 0; /* the first such key decides; a later duplicate stays in the JSON */
    const char *v = j + st + kl + 1;
    if (num_parse(v, (size_t)(j + en - v), want, &c->m, &c->dec)) c->pos = i;
}

static int put_pos(chunk_builder *b, int ci, const cut *c, double v) {
    buf *pos = &b->col[ci], *dec = &b->col[ci + 1], *val = &b->col[ci + 2];
    buf *raw = &b->col[ci == CB_TPOS ? CB_TRAW : CB_DRAW];
    if (c->pos >= 0) {
        uint64_t z = ci == CB_TPOS ? zigzag(c->m - b->prev_ts) : zigzag(c->m);
        if (ci == CB_TPOS) b->prev_ts = c->m;
        return put_u8(pos, (unsigned)c->pos + 1) || put_u8(dec, c->dec) || put_varint(val, z) ? ERR_NOMEM : 0;
    }
    if (v == 0 && !signbit(v)) return put_u8(pos, POS_NONE);
    return put_u8(pos, POS_RAW) || buf_put(raw, &v, 8) ? ERR_NOMEM : 0;
}

int chunk_add(chunk_builder *b, const chunk_rec *r, const char *json) {
    const char *j = json;
    size_t n = r->json_len, st[POS_RAW - 1], en[POS_RAW - 1], p = 1;
    cut ts = {-1, 0, 0}, du = {-1, 0, 0};
    int k = 0, more = n > 2 && j[0] == '{' && j[n - 1] == '}', open_ts = !(r->absent & CHUNK_NO_TS),
        open_du = !(r->absent & CHUNK_NO_DUR);
    /* The members up to the first "ts" and "dur" (or the first POS_RAW - 1); what follows
     * stays as one tail. A malformed member there: nothing is cut. */
    while (more && (open_ts || open_du) && k < POS_RAW - 1) {
        if (!next_member(j, n, &p, &st[k], &en[k])) { ts.pos = du.pos = -1; more = 0; break; }
        decide(j, st[k], en[k], k, "\"ts\"", 4, r->ts, &open_ts, &ts);
        decide(j, st[k], en[k], k, "\"dur\"", 5, r->dur, &open_du, &du);
        k++;
        if ((more = after_member(j, n, &p)) < 0) { ts.pos = du.pos = -1; more = 0; }
    }
    if (put_u8(&b->col[CB_CLS], r->cls) || put_u8(&b->col[CB_PH], r->ph) || put_varint(&b->col[CB_NAME], r->name) ||
        put_varint(&b->col[CB_KIND], r->kind) || put_pos(b, CB_TPOS, &ts, r->ts) || put_pos(b, CB_DPOS, &du, r->dur))
        return ERR_NOMEM;
    buf *js = &b->col[CB_JSON];
    size_t before = js->len;
    if (ts.pos < 0 && du.pos < 0) {
        if (buf_put(js, json, r->json_len)) return ERR_NOMEM;
    } else {
        int first = 1, bad = buf_put(js, "{", 1);
        for (int i = 0; i < k && !bad; i++) {
            if (i == ts.pos || i == du.pos) continue;
            bad = (!first && buf_put(js, ",", 1)) || buf_put(js, json + st[i], en[i] - st[i]);
            first = 0;
        }
        if (!bad && more) bad = (!first && buf_put(js, ",", 1)) || buf_put(js, json + p, n - 1 - p);
        if (bad || buf_put(js, "}", 1)) return ERR_NOMEM;
    }
    if (put_varint(&b->col[CB_JLEN], js->len - before)) return ERR_NOMEM;
    b->n++;
    b->drawn += chunk_drawn_cls(r->cls);
    b->gpu += r->cls == EV_GPU;
    return 0;
}

size_t chunk_builder_bytes(const chunk_builder *b) { return b->col[CB_JSON].len; }

size_t chunk_builder_mem(const chunk_builder *b) {
    size_t m = b->raw.cap;
    for (int i = 0; i < CB_NCOLS; i++) m += b->col[i].cap;
    return m;
}

int chunk_finish(chunk_builder *b, void *cctx, buf *z) {
    buf_reset(z);
    buf *raw = &b->raw;
    buf_reset(raw);
    if (put_varint(raw, (uint64_t)b->n)) return ERR_NOMEM;
    for (int i = 0; i < CB_NCOLS; i++)
        if (buf_put(raw, b->col[i].p ? b->col[i].p : "", b->col[i].len)) return ERR_NOMEM;
    size_t cap = ZSTD_compressBound(raw->len);
    if (buf_reserve(z, cap)) return ERR_NOMEM;
    size_t zn = ZSTD_compressCCtx(cctx, z->p, cap, raw->p, raw->len, CHUNK_ZSTD_LEVEL);
    if (ZSTD_isError(zn)) return ERR_IO;
    z->len = zn;
    /* Why free it: a builder per track kept its last chunk laid end to end, 26 MB over the
     * 384 tracks of a 40 MB trace at the commit (massif), outside the chunk budget. */
    buf_free(raw);
    for (int i = 0; i < CB_NCOLS; i++) buf_reset(&b->col[i]);
    b->n = b->drawn = b->gpu = 0;
    b->prev_ts = 0;
    return 0;
}

void chunk_builder_free(chunk_builder *b) {
    for (int i = 0; i < CB_NCOLS; i++) buf_free(&b->col[i]);
    buf_free(&b->raw);
    memset(b, 0, sizeof *b);
}

/* ---- reading ---- */

static int inflate_v1(const void *z, size_t zlen, buf *out) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK) return ERR_NOMEM;
    s.next_in = (unsigned char *)z;
    s.avail_in = (uInt)zlen;
    int rc = 0;
    for (;;) {
        if (buf_reserve(out, out->len < 256 * 1024 ? 256 * 1024 : 65536)) { rc = ERR_NOMEM; break; }
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

/* One decoded event's number: its member text written at member index pos. */
typedef struct ins {
    int pos;
    size_t len;
    char text[32]; /* "\"dur\":" and up to 18 characters */
} ins;

static void make_ins(ins *x, const char *key, int64_t m, unsigned dec) {
    size_t kl = strlen(key);
    memcpy(x->text, key, kl);
    x->len = kl + num_print(m, dec, x->text + kl);
}

/* Appends the event's JSON with the cut members put back where they were: the stored
 * members are read only up to the last position, the rest copied as they are. */
static int rebuild(buf *out, const char *j, size_t n, ins *a, ins *b) {
    if (a->pos < 0 && b->pos < 0) return buf_put(out, j, n);
    if (n < 2 || j[0] != '{' || j[n - 1] != '}') return ERR_IO;
    int left = (a->pos >= 0) + (b->pos >= 0), more = n > 2;
    size_t p = 1, st, en;
    if (buf_put(out, "{", 1)) return ERR_NOMEM;
    for (int i = 0; left; i++) {
        ins *x = i == a->pos ? a : i == b->pos ? b : NULL;
        if (i && buf_put(out, ",", 1)) return ERR_NOMEM;
        if (x) {
            if (buf_put(out, x->text, x->len)) return ERR_NOMEM;
            left--;
            continue;
        }
        if (!more || !next_member(j, n, &p, &st, &en)) return ERR_IO; /* a position past the end */
        if (buf_put(out, j + st, en - st)) return ERR_NOMEM;
        if ((more = after_member(j, n, &p)) < 0) return ERR_IO;
    }
    if (more && (buf_put(out, ",", 1) || buf_put(out, j + p, n - 1 - p))) return ERR_NOMEM;
    return buf_put(out, "}", 1) ? ERR_NOMEM : 0;
}

/* Cursors into the columns of a version-2 chunk. */
typedef struct cols {
    rd cls, ph, name, kind, tpos, tdec, tval, dpos, ddec, dval, traw, draw, jlen, json;
} cols;

/* Walks the column store once to find where each column starts. */
static int locate(rd *all, cols *c, uint64_t n) {
    c->cls = *all;
    skip_bytes(all, n);
    c->ph = *all;
    skip_bytes(all, n);
    c->name = *all;
    skip_varints(all, n);
    c->kind = *all;
    skip_varints(all, n);
    uint64_t cut[2] = {0, 0}, raw[2] = {0, 0};
    rd *pos[2] = {&c->tpos, &c->dpos}, *dec[2] = {&c->tdec, &c->ddec}, *val[2] = {&c->tval, &c->dval};
    for (int k = 0; k < 2 && !all->bad; k++) {
        *pos[k] = *all;
        for (uint64_t i = 0; i < n && !all->bad; i++) {
            unsigned v = get_u8(all);
            cut[k] += v != POS_NONE && v != POS_RAW;
            raw[k] += v == POS_RAW;
        }
        *dec[k] = *all;
        skip_bytes(all, cut[k]);
        *val[k] = *all;
        skip_varints(all, cut[k]);
    }
    c->traw = *all;
    skip_bytes(all, raw[0] * 8);
    c->draw = *all;
    skip_bytes(all, raw[1] * 8);
    c->jlen = *all;
    skip_varints(all, n);
    c->json = *all;
    return all->bad ? ERR_IO : 0;
}

/* Reads one number column entry: fills x (pos -1 when nothing was cut), returns the value. */
static double get_num(rd *pos, rd *dec, rd *val, rd *raw, int64_t *prev, const char *key, ins *x) {
    unsigned p = get_u8(pos);
    x->pos = -1;
    if (p == POS_NONE) return 0;
    if (p == POS_RAW) return get_f64(raw);
    unsigned d = get_u8(dec);
    int64_t m = unzigzag(get_varint(val));
    if (prev) m = *prev = (int64_t)((uint64_t)*prev + (uint64_t)m); /* wraps on corrupt data, no UB */
    if (d >= sizeof p10 / sizeof p10[0] || m > (1ll << 53) || m < -(1ll << 53)) {
        dec->bad = 1;
        return 0;
    }
    x->pos = (int)p - 1;
    make_ins(x, key, m, d);
    return (m < 0 ? -((double)-m / p10[d]) : (double)m / p10[d]);
}

static int decode_v2(const unsigned char *raw, size_t len, buf *out) {
    rd all = {raw, raw + len, 0};
    uint64_t n = get_varint(&all);
    cols c;
    if (all.bad || n > len || locate(&all, &c, n)) return ERR_IO;
    int64_t prev_ts = 0;
    for (uint64_t i = 0; i < n; i++) {
        chunk_rec r;
        ins ti, di;
        r.cls = (uint8_t)get_u8(&c.cls);
        r.ph = (uint8_t)get_u8(&c.ph);
        r.name = (uint32_t)get_varint(&c.name);
        r.kind = (uint32_t)get_varint(&c.kind);
        r.ts = get_num(&c.tpos, &c.tdec, &c.tval, &c.traw, &prev_ts, "\"ts\":", &ti);
        r.dur = get_num(&c.dpos, &c.ddec, &c.dval, &c.draw, NULL, "\"dur\":", &di);
        uint64_t jl = get_varint(&c.jlen);
        if (c.cls.bad || c.ph.bad || c.name.bad || c.kind.bad || c.tpos.bad || c.tdec.bad || c.tval.bad || c.traw.bad ||
            c.dpos.bad || c.ddec.bad || c.dval.bad || c.draw.bad || c.jlen.bad || jl > (size_t)(c.json.end - c.json.p))
            return ERR_IO;
        size_t at = out->len;
        unsigned char h[CHUNK_HDR] = {0};
        if (buf_put(out, h, sizeof h)) return ERR_NOMEM;
        int rc = rebuild(out, (const char *)c.json.p, (size_t)jl, &ti, &di);
        if (rc) return rc;
        c.json.p += jl;
        r.json_len = (uint32_t)(out->len - at - CHUNK_HDR);
        memcpy(h, &r.ts, 8);
        memcpy(h + 8, &r.dur, 8);
        memcpy(h + 16, &r.name, 4);
        memcpy(h + 20, &r.kind, 4);
        h[24] = r.cls;
        h[25] = r.ph;
        memcpy(h + 28, &r.json_len, 4);
        memcpy(out->p + at, h, sizeof h);
    }
    return 0;
}

static int is_zstd(const unsigned char *z, size_t zlen) {
    return zlen >= 4 && z[0] == 0x28 && z[1] == 0xb5 && z[2] == 0x2f && z[3] == 0xfd;
}

int chunk_inflate(const void *z, size_t zlen, buf *out) {
    buf_reset(out);
    if (!is_zstd(z, zlen)) return inflate_v1(z, zlen, out);
    unsigned long long size = ZSTD_getFrameContentSize(z, zlen);
    if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR || size > MAX_CHUNK_RAW) return ERR_IO;
    unsigned char *raw = malloc(size ? size : 1);
    if (!raw) return ERR_NOMEM;
    size_t got = ZSTD_decompress(raw, size, z, zlen);
    int rc = ZSTD_isError(got) || got != size ? ERR_IO : decode_v2(raw, got, out);
    free(raw);
    if (rc) buf_reset(out);
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
