/* area.c: an area selection's summary (area.h). */
#include "store/area.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/err.h"

/* One name's sums. */
typedef struct nsum {
    uint32_t name;
    long long count;
    double total, dur; /* total: clipped to the window; dur: the events' own durations */
} nsum;

/* Sums by name id: open addressing (linear probing), grown at half full. */
typedef struct nmap {
    nsum *v;
    size_t cap, n;
} nmap;

static uint32_t nhash(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    return x;
}

static nsum *nmap_slot(nsum *v, size_t cap, uint32_t name) {
    size_t i = nhash(name) & (cap - 1);
    while (v[i].count && v[i].name != name) i = (i + 1) & (cap - 1);
    return &v[i];
}

static int nmap_add(nmap *m, uint32_t name, double clipped, double dur) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        nsum *v = calloc(cap, sizeof *v);
        if (!v) return ERR_NOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].count) *nmap_slot(v, cap, m->v[i].name) = m->v[i];
        free(m->v);
        m->v = v;
        m->cap = cap;
    }
    nsum *s = nmap_slot(m->v, m->cap, name);
    if (!s->count) {
        s->name = name;
        m->n++;
    }
    s->count++;
    s->total += clipped;
    s->dur += dur;
    return 0;
}

static int by_total_desc(const void *pa, const void *pb) {
    const nsum *a = pa, *b = pb;
    if (a->total != b->total) return a->total < b->total ? 1 : -1;
    return (a->name > b->name) - (a->name < b->name);
}

/* The sums as {"names":[...the top ones...],"other":{...}} members set on o; m is emptied. */
static int nmap_json(nmap *m, int top, db_stmt *names, json_t *o) {
    size_t k = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->v[i].count) m->v[k++] = m->v[i];
    if (k) qsort(m->v, k, sizeof *m->v, by_total_desc);
    json_t *arr = json_array();
    long long ocount = 0;
    double ototal = 0;
    for (size_t i = 0; i < k; i++) {
        nsum *s = &m->v[i];
        if (i >= (size_t)top) {
            ocount += s->count;
            ototal += s->total;
            continue;
        }
        db_bind_int64(names, 2, s->name);
        const char *t = db_step(names) == DB_ROW ? (const char *)db_column_text(names, 0) : NULL;
        json_array_append_new(arr, json_pack("{s:s,s:I,s:f,s:f}", "name", t ? t : "", "count", (json_int_t)s->count, "total_us",
                                             s->total, "mean_us", s->dur / (double)s->count));
        db_reset(names);
    }
    json_object_set_new(o, "names", arr);
    json_object_set_new(o, "other", json_pack("{s:I,s:I,s:f}", "names", (json_int_t)(k > (size_t)top ? k - (size_t)top : 0), "count",
                                             (json_int_t)ocount, "total_us", ototal));
    free(m->v);
    *m = (nmap){0};
    return 0;
}

static int wanted(const char *tid, const char *const *tracks, size_t n) {
    if (!tracks) return 1;
    for (size_t i = 0; i < n; i++)
        if (tid && !strcmp(tracks[i], tid)) return 1;
    return 0;
}

/* One track's events in [a, b) into mine and all; its count. */
static int read_track(db_stmt *s, long long id, int track, double a, double b, nmap *mine, nmap *all, long long *count) {
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, track);
    db_bind_double(s, 3, b);
    db_bind_double(s, 4, a);
    buf in = {0};
    int rc = 0, st;
    *count = 0;
    while (!rc && (st = db_step(s)) == DB_ROW) {
        if (chunk_inflate(db_column_blob(s, 0, NULL), db_column_bytes(s, 0), &in)) { rc = ERR_DB; break; }
        size_t off = 0;
        chunk_rec r;
        const char *js;
        while (!rc && chunk_next(&in, &off, &r, &js) == 1) {
            if (!chunk_drawn_cls(r.cls) || r.ts >= b || r.ts + r.dur <= a) continue;
            double s0 = r.ts > a ? r.ts : a, s1 = r.ts + r.dur < b ? r.ts + r.dur : b;
            (*count)++;
            if (!(rc = nmap_add(mine, r.name, s1 - s0, r.dur))) rc = nmap_add(all, r.name, s1 - s0, r.dur);
        }
    }
    if (!rc && st != DB_DONE) rc = ERR_DB;
    buf_free(&in);
    db_reset(s);
    return rc;
}

static int area_in(db_conn *db, long long id, double a, double b, int top, const char *const *tracks, size_t ntracks, json_t **out) {
    db_stmt *d = db_prepare(db, "SELECT timeline FROM analysis WHERE session_id = ?1");
    if (!d) return ERR_DB;
    db_bind_int64(d, 1, id);
    int st = db_step(d);
    json_error_t e;
    const char *txt = st == DB_ROW ? (const char *)db_column_text(d, 0) : NULL;
    json_t *doc = txt ? json_loads(txt, 0, &e) : NULL;
    db_finalize(d);
    if (st != DB_ROW) return st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (!doc) return ERR_NOTFOUND; /* stored before the timeline existed: nothing to summarise */
    db_stmt *s = db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ?1 AND track = ?2 AND min_ts < ?3 AND max_end > ?4");
    db_stmt *names = db_prepare(db, "SELECT s FROM strings WHERE session_id = ?1 AND id = ?2");
    int rc = !s || !names ? ERR_DB : 0;
    if (!rc) db_bind_int64(names, 1, id);
    json_t *arr = json_array(), *t;
    nmap all = {0};
    long long total = 0, omitted = 0;
    size_t i;
    if (!rc) json_array_foreach(json_object_get(doc, "tracks"), i, t) {
        const char *tid = json_string_value(json_object_get(t, "id"));
        if (!wanted(tid, tracks, ntracks)) continue;
        nmap mine = {0};
        long long n = 0;
        rc = read_track(s, id, (int)json_integer_value(json_object_get(t, "index")), a, b, &mine, &all, &n);
        if (rc || !n) {
            free(mine.v);
            if (rc) break;
            continue; /* nothing in the window: not listed, as /timeline does */
        }
        total += n;
        if (json_array_size(arr) >= AREA_TRACKS_MAX) { /* counted in the whole, not listed */
            free(mine.v);
            omitted++;
            continue;
        }
        json_t *o = json_pack("{s:O,s:O,s:O,s:I}", "id", json_object_get(t, "id"), "label", json_object_get(t, "label"), "kind",
                              json_object_get(t, "kind"), "count", (json_int_t)n);
        nmap_json(&mine, top, names, o);
        json_array_append_new(arr, o);
    }
    if (!rc) {
        *out = json_pack("{s:f,s:f,s:f,s:I,s:o,s:I}", "start_us", a, "end_us", b, "dur_us", b - a, "count", (json_int_t)total, "tracks", arr,
                         "tracks_omitted", (json_int_t)omitted);
        nmap_json(&all, top, names, *out);
    } else {
        json_decref(arr);
        free(all.v);
    }
    db_finalize(s);
    db_finalize(names);
    json_decref(doc);
    return rc;
}

int area_summary(db_conn *db, long long id, double a, double b, int top, const char *const *tracks, size_t ntracks, json_t **out) {
    if (db_in_txn(db)) return area_in(db, id, a, b, top, tracks, ntracks, out);
    if (db_begin_read(db)) return ERR_DB;
    int rc = area_in(db, id, a, b, top, tracks, ntracks, out);
    db_exec(db, rc ? "ROLLBACK" : "COMMIT");
    return rc;
}
