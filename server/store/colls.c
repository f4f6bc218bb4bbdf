/* colls.c: the collectives table of a job (colls.h). */
#include "store/colls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/chunk.h"

typedef struct coll {
    char name[64];
    long long group, calls, ranks, last_rank;
    double bytes, time;
    int unknown; /* a call whose dtype is unknown: no bytes */
} coll;

/* Bytes of one element of a PyTorch dtype name, 0 when unknown. */
static int dtype_size(const char *d) {
    static const struct { const char *n; int s; } t[] = {
        {"Float", 4}, {"float", 4}, {"Half", 2}, {"BFloat16", 2}, {"Double", 8}, {"Int", 4}, {"Long", 8}, {"Short", 2},
        {"Byte", 1}, {"Char", 1}, {"Bool", 1}, {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}, {"ComplexDouble", 16}};
    for (size_t i = 0; d && i < sizeof t / sizeof *t; i++)
        if (!strcmp(d, t[i].n)) return t[i].s;
    return 0;
}

/* "all_reduce", "allreduce", "_allgather_base"... without '_' and in lower case, into out. */
static void squash(const char *s, char *out, size_t cap) {
    size_t k = 0;
    for (; s && *s && k + 1 < cap; s++)
        if (*s != '_') out[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    out[k] = 0;
}

/* nccl-tests' bus bandwidth factor for a collective of n ranks. */
static double bus_factor(const char *name, long long n) {
    char s[64];
    squash(name, s, sizeof s);
    if (n < 1) return 1;
    if (strstr(s, "allreduce")) return 2.0 * (double)(n - 1) / (double)n;
    if (strstr(s, "allgather") || strstr(s, "reducescatter") || strstr(s, "alltoall")) return (double)(n - 1) / (double)n;
    return 1;
}

static long long int_arg(const json_t *a, const char *k) {
    const json_t *v = json_object_get(a, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : json_is_real(v) ? (long long)json_real_value(v) : -1;
}

/* One collective kernel's args into the table (rows, *nrows of COLLS_ROWS_MAX). */
static void add_call(coll *rows, size_t *nrows, long long rank, const json_t *args, double dur) {
    const char *name = json_string_value(json_object_get(args, "Collective name"));
    if (!name || !*name) return;
    long long g = int_arg(args, "Group size");
    char sq[64];
    squash(name, sq, sizeof sq);
    long long nel = int_arg(args, strstr(sq, "allgather") ? "Out msg nelems" : "In msg nelems");
    int es = dtype_size(json_string_value(json_object_get(args, "dtype")));
    size_t i = 0;
    while (i < *nrows && !(rows[i].group == g && !strcmp(rows[i].name, name))) i++;
    if (i == *nrows) {
        if (*nrows == COLLS_ROWS_MAX) return;
        memset(&rows[i], 0, sizeof rows[i]);
        snprintf(rows[i].name, sizeof rows[i].name, "%s", name);
        rows[i].group = g;
        rows[i].last_rank = -1;
        (*nrows)++;
    }
    coll *c = &rows[i];
    c->calls++;
    c->time += dur;
    if (nel >= 0 && es) c->bytes += (double)nel * es;
    else c->unknown = 1;
    if (c->last_rank != rank) {
        c->ranks++;
        c->last_rank = rank;
    }
}

/* A session's GPU kernels with a "Collective name" into rows. */
static int read_session(db_stmt *s, long long id, coll *rows, size_t *nrows) {
    db_bind_int64(s, 1, id);
    buf in = {0};
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        if (chunk_inflate(db_column_blob(s, 0, NULL), db_column_bytes(s, 0), &in)) continue;
        size_t off = 0;
        chunk_rec r;
        const char *js;
        while (chunk_next(&in, &off, &r, &js) == 1) {
            if (r.cls != EV_GPU || !js || !memmem(js, r.json_len, "\"Collective name\"", 17)) continue;
            json_error_t e;
            json_t *ev = json_loadb(js, r.json_len, 0, &e);
            const json_t *args = json_object_get(ev, "args");
            add_call(rows, nrows, id, json_is_object(args) ? args : ev, r.dur);
            json_decref(ev);
        }
    }
    buf_free(&in);
    db_reset(s);
    return st == DB_DONE ? 0 : -1;
}

static int by_time_desc(const void *pa, const void *pb) {
    const coll *a = pa, *b = pb;
    return (a->time < b->time) - (a->time > b->time);
}

json_t *colls_of(db_conn *db, const long long *ids, size_t n) {
    /* chunks with GPU work only: event_chunks.gpu counts a chunk's kernels, copies and
     * memsets (NULL in chunks stored before version 5: read) */
    db_stmt *s = db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ?1 AND (gpu IS NULL OR gpu > 0)");
    if (!s) return NULL;
    coll *rows = calloc(COLLS_ROWS_MAX, sizeof *rows);
    size_t nrows = 0;
    int rc = rows ? 0 : -1;
    for (size_t i = 0; !rc && i < n && i < COLLS_RANKS_MAX; i++) rc = read_session(s, ids[i], rows, &nrows);
    db_finalize(s);
    if (rc) {
        free(rows);
        return NULL;
    }
    if (nrows) qsort(rows, nrows, sizeof *rows, by_time_desc);
    json_t *out = json_array();
    for (size_t i = 0; i < nrows; i++) {
        coll *c = &rows[i];
        double alg = !c->unknown && c->time > 0 ? c->bytes / c->time / 1e3 : -1; /* bytes/us / 1e3 = GB/s */
        json_array_append_new(out, json_pack("{s:s,s:o,s:I,s:I,s:o,s:f,s:o,s:o}", "collective", c->name, "group_size",
                                             c->group > 0 ? json_integer(c->group) : json_null(), "calls", (json_int_t)c->calls, "ranks",
                                             (json_int_t)c->ranks, "bytes", c->unknown ? json_null() : json_real(c->bytes), "time_us", c->time,
                                             "algbw_gbps", alg >= 0 ? json_real(alg) : json_null(), "busbw_gbps",
                                             alg >= 0 ? json_real(alg * bus_factor(c->name, c->group)) : json_null()));
    }
    free(rows);
    return out;
}
