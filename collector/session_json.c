/* session_json.c -- writes the native session JSON from an aggregator.
 *
 * Owns the document layout (contract.md "Native session JSON"): the small parts (firstpass
 * object, aggregates, deviceProperties) are built with Jansson, the traceEvents array is
 * streamed by hand through a 64 KiB staging buffer so that a million events never exist as
 * json_t trees. Must not see CUPTI types (it reads fp_agg only) and must not do network I/O. */
#include "session_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

#define STAGE 65536

typedef struct out {
    fp_write_fn fn;
    void *ctx;
    char buf[STAGE];
    size_t len;
    int err;
} out;

static void out_flush(out *o)
{
    if (o->err || o->len == 0)
        return;
    if (o->fn(o->ctx, o->buf, o->len) != 0)
        o->err = 1;
    o->len = 0;
}

static void out_put(out *o, const char *s, size_t n)
{
    if (o->err)
        return;
    if (o->len + n > STAGE)
        out_flush(o);
    if (n > STAGE) {
        if (!o->err && o->fn(o->ctx, s, n) != 0)
            o->err = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void out_puts(out *o, const char *s)
{
    out_put(o, s, strlen(s));
}

static void out_printf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(out *o, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        o->err = 1;
        return;
    }
    out_put(o, tmp, (size_t)n);
}

/* JSON string with quotes; control characters escaped, bytes >= 0x80 passed through (names
 * come from C strings that are UTF-8 in practice; Jansson on the server rejects invalid
 * UTF-8, so invalid bytes are replaced by '?'). */
static void out_str(out *o, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    out_put(o, "\"", 1);
    while (*p) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            p++;
        if (p > run)
            out_put(o, (const char *)run, (size_t)(p - run));
        if (*p == '\0')
            break;
        if (*p >= 0x80) {
            /* validate one UTF-8 sequence */
            size_t need = (*p >= 0xF0 && *p <= 0xF4) ? 3 : (*p >= 0xE0) ? 2 : (*p >= 0xC2 && *p < 0xE0) ? 1 : 0;
            size_t k;
            int ok = need > 0 && *p < 0xF5;
            for (k = 1; ok && k <= need; k++)
                if ((p[k] & 0xC0) != 0x80)
                    ok = 0;
            if (ok) {
                out_put(o, (const char *)p, need + 1);
                p += need + 1;
            } else {
                out_put(o, "?", 1);
                p++;
            }
            continue;
        }
        switch (*p) {
        case '"': out_put(o, "\\\"", 2); break;
        case '\\': out_put(o, "\\\\", 2); break;
        case '\n': out_put(o, "\\n", 2); break;
        case '\t': out_put(o, "\\t", 2); break;
        case '\r': out_put(o, "\\r", 2); break;
        default: out_printf(o, "\\u%04x", *p); break;
        }
        p++;
    }
    out_put(o, "\"", 1);
}

static void out_json(out *o, json_t *j)
{
    char *s;
    if (j == NULL) {
        o->err = 1;
        return;
    }
    s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s == NULL) {
        o->err = 1;
        return;
    }
    out_puts(o, s);
    free(s);
}

void fp_format_us(long long ns, char *buf, size_t len)
{
    unsigned long long a = ns < 0 ? 0ULL - (unsigned long long)ns : (unsigned long long)ns;
    snprintf(buf, len, "%s%llu.%03llu", ns < 0 ? "-" : "", a / 1000, a % 1000);
}

/* ---- aggregates ------------------------------------------------------------------------- */

typedef struct row {
    const char *name;
    const char *mangled;   /* kernels only, NULL if the name is not demangled */
    const char *kind;      /* apis only */
    const fp_stat *st;
} row;

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->st->total_ns != y->st->total_ns)
        return x->st->total_ns > y->st->total_ns ? -1 : 1;
    if (x->st->calls != y->st->calls)
        return x->st->calls > y->st->calls ? -1 : 1;
    return strcmp(x->name, y->name);
}

static uint32_t display_of(const fp_agg *a, uint32_t mangled)
{
    if (mangled < a->display_cap && a->display[mangled] != 0)
        return a->display[mangled] - 1;
    return mangled;
}

/* Appends the rows of group g to rows[*n]. */
static void collect(const fp_agg *a, int g, const char *kind, row *rows, size_t *n)
{
    const fp_stat_table *t = &a->stats[g];
    size_t id;
    for (id = 0; id < t->cap; id++) {
        row *r;
        if (t->v[id].calls == 0)
            continue;
        r = &rows[(*n)++];
        r->st = &t->v[id];
        r->kind = kind;
        r->mangled = NULL;
        if (g == FP_G_KERNEL) {
            uint32_t d = display_of(a, (uint32_t)id);
            r->name = fp_agg_name(a, d);
            if (d != id)
                r->mangled = fp_agg_name(a, (uint32_t)id);
        } else {
            r->name = fp_agg_name(a, (uint32_t)id);
        }
    }
}

static size_t group_rows(const fp_agg *a, int g)
{
    size_t n = 0, id;
    for (id = 0; id < a->stats[g].cap; id++)
        if (a->stats[g].v[id].calls)
            n++;
    return n;
}

/* New reference: [{"name","calls","total_ns","min_ns","max_ns",...}] for groups g1 (and g2). */
static json_t *agg_array(const fp_agg *a, int g1, const char *k1, int g2, const char *k2,
                         int with_bytes)
{
    size_t n = group_rows(a, g1) + (g2 >= 0 ? group_rows(a, g2) : 0), m = 0, i;
    row *rows = calloc(n ? n : 1, sizeof *rows);
    json_t *arr = json_array();
    if (rows == NULL || arr == NULL)
        goto err;
    collect(a, g1, k1, rows, &m);
    if (g2 >= 0)
        collect(a, g2, k2, rows, &m);
    qsort(rows, m, sizeof *rows, row_cmp);
    for (i = 0; i < m; i++) {
        const fp_stat *s = rows[i].st;
        json_t *o = json_object();
        int rc = 0;
        if (o == NULL || json_array_append_new(arr, o) != 0)
            goto err;
        rc |= json_object_set_new(o, "name", json_string(rows[i].name));
        if (rows[i].kind)
            rc |= json_object_set_new(o, "kind", json_string(rows[i].kind));
        rc |= json_object_set_new(o, "calls", json_integer((json_int_t)s->calls));
        rc |= json_object_set_new(o, "total_ns", json_integer((json_int_t)s->total_ns));
        rc |= json_object_set_new(o, "min_ns", json_integer((json_int_t)s->min_ns));
        rc |= json_object_set_new(o, "max_ns", json_integer((json_int_t)s->max_ns));
        if (s->timed != s->calls)
            rc |= json_object_set_new(o, "untimed", json_integer((json_int_t)(s->calls - s->timed)));
        if (with_bytes)
            rc |= json_object_set_new(o, "bytes", json_integer((json_int_t)s->bytes));
        if (rows[i].mangled)
            rc |= json_object_set_new(o, "mangled", json_string(rows[i].mangled));
        if (rc != 0)
            goto err;
    }
    free(rows);
    return arr;
err:
    free(rows);
    json_decref(arr);
    return NULL;
}

/* New reference: the complete "firstpass" object. */
static json_t *firstpass_obj(const fp_agg *a, const fp_session_meta *meta,
                             const char *const *warnings, size_t nwarnings)
{
    fp_session_meta m = *meta;
    json_t *fp, *ag, *col, *w;
    size_t i;
    int rc = 0;

    m.dropped_records = a->dropped_records;
    m.events_truncated = a->events_truncated;
    fp = fp_session_meta_to_json(&m);
    ag = json_object();
    col = json_object();
    w = json_array();
    if (fp == NULL || ag == NULL || col == NULL || w == NULL)
        goto err;
    rc |= json_object_set_new(ag, "kernels", agg_array(a, FP_G_KERNEL, NULL, -1, NULL, 0));
    rc |= json_object_set_new(ag, "apis", agg_array(a, FP_G_RUNTIME, "cuda_runtime", FP_G_DRIVER,
                                                    "cuda_driver", 0));
    rc |= json_object_set_new(ag, "ranges", agg_array(a, FP_G_RANGE, NULL, -1, NULL, 0));
    rc |= json_object_set_new(ag, "memcpy", agg_array(a, FP_G_MEMCPY, NULL, -1, NULL, 1));
    rc |= json_object_set_new(ag, "syncs", agg_array(a, FP_G_SYNC, NULL, -1, NULL, 0));
#define C(k, v) rc |= json_object_set_new(col, k, json_integer((json_int_t)(v)))
    C("records", a->records);
    C("unknown_kinds", a->unknown_kinds);
    C("untimed_records", a->untimed);
    C("clock_outliers", a->clock_outliers);
    C("sync_not_ready", a->sync_not_ready);
    C("events_seen", a->events_seen);
    C("events_written", a->nevents);
    C("max_events", a->cfg.max_events);
    C("ranges", a->ranges);
    C("ranges_unmatched_start", a->ranges_unmatched_start);
    C("ranges_unmatched_end", a->ranges_unmatched_end);
    C("ranges_duplicate", a->ranges_duplicate);
    C("instant_markers", a->instant_markers);
    C("external_ids_dropped", a->ext_dropped);
    C("buffer_errors", a->buffer_errors);
    C("buffer_requests_refused", a->requests_refused);
    C("out_of_memory", a->oom);
#undef C
    rc |= json_object_set_new(col, "events_enabled", json_boolean(a->cfg.events));
    for (i = 0; i < nwarnings; i++)
        if (warnings[i])
            rc |= json_array_append_new(w, json_string(warnings[i]));
    rc |= json_object_set_new(fp, "aggregates", ag);
    ag = NULL;
    rc |= json_object_set_new(fp, "collector", col);
    col = NULL;
    rc |= json_object_set_new(fp, "warnings", w);
    w = NULL;
    if (rc != 0)
        goto err;
    return fp;
err:
    json_decref(fp);
    json_decref(ag);
    json_decref(col);
    json_decref(w);
    return NULL;
}

/* New reference: deviceProperties array. */
static json_t *devices_arr(const fp_agg *a)
{
    json_t *arr = json_array();
    size_t i;
    if (arr == NULL)
        return NULL;
    for (i = 0; i < FP_MAX_DEVICES; i++) {
        const fp_device *d = &a->devices[i];
        json_t *o;
        if (!d->present)
            continue;
        o = json_pack("{s:I, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
                      "id", (json_int_t)i, "name", d->name, "totalGlobalMem",
                      (json_int_t)d->total_mem, "computeMajor", d->cc_major, "computeMinor",
                      d->cc_minor, "numSms", d->num_sms, "maxThreadsPerBlock",
                      d->max_threads_per_block, "maxThreadsPerMultiprocessor",
                      d->max_threads_per_sm, "regsPerBlock", d->regs_per_block,
                      "sharedMemPerBlock", d->smem_per_block, "warpSize", d->warp_size);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---- trace events ----------------------------------------------------------------------- */

static const char *const cat_names[FP_CAT__N] = {
    "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync",
    "user_annotation",
};

typedef struct ev_ref {
    int64_t start, end;
    size_t i;
} ev_ref;

/* Start ascending, then longer first, so that enclosing events precede what they enclose. */
static int ev_cmp(const void *a, const void *b)
{
    const ev_ref *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void write_external(out *o, const fp_agg *a, uint32_t corr)
{
    uint64_t ext;
    uint32_t kind;
    if (corr != 0 && fp_agg_external_get(a, corr, &ext, &kind) == 0)
        out_printf(o, ",\"external id\":%" PRIu64 ",\"external kind\":%u", ext, kind);
}

static void write_event(out *o, const fp_agg *a, const fp_event *e, long long t0)
{
    char ts[32], dur[32];
    fp_format_us(e->start_ns - t0, ts, sizeof ts);
    fp_format_us(e->end_ns - e->start_ns, dur, sizeof dur);
    out_printf(o, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cat_names[e->cat]);
    out_str(o, fp_agg_name(a, e->name));
    out_printf(o, ",\"pid\":%u,\"tid\":%u,\"ts\":%s,\"dur\":%s,\"args\":{", e->pid, e->tid, ts,
               dur);
    switch (e->cat) {
    case FP_CAT_KERNEL:
        out_printf(o,
                   "\"correlation\":%u,\"device\":%u,\"stream\":%u,\"context\":%u,"
                   "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"registers per thread\":%u,"
                   "\"shared memory\":%lld,\"static shared memory\":%d,"
                   "\"dynamic shared memory\":%d",
                   e->correlation, e->pid, e->tid, e->u.k.context, e->u.k.grid[0],
                   e->u.k.grid[1], e->u.k.grid[2], e->u.k.block[0], e->u.k.block[1],
                   e->u.k.block[2], (unsigned)e->u.k.registers,
                   (long long)e->u.k.static_smem + e->u.k.dynamic_smem, e->u.k.static_smem,
                   e->u.k.dynamic_smem);
        if (e->u.k.mangled != FP_NAME_NONE) {
            out_puts(o, ",\"mangled\":");
            out_str(o, fp_agg_name(a, e->u.k.mangled));
        }
        write_external(o, a, e->correlation);
        break;
    case FP_CAT_MEMCPY:
        out_printf(o,
                   "\"correlation\":%u,\"device\":%u,\"stream\":%u,\"context\":%u,"
                   "\"bytes\":%" PRIu64 ",\"kind\":\"%s\",\"src_kind\":\"%s\","
                   "\"dst_kind\":\"%s\",\"async\":%s,\"driver_correlation\":%u",
                   e->correlation, e->pid, e->tid, e->u.m.context, e->u.m.bytes,
                   fp_memcpy_kind_str(e->u.m.copy_kind), fp_memory_kind_str(e->u.m.src_kind),
                   fp_memory_kind_str(e->u.m.dst_kind), e->u.m.async ? "true" : "false",
                   e->u.m.driver_correlation);
        if (e->u.m.src_device != UINT32_MAX)
            out_printf(o, ",\"src_device\":%u,\"dst_device\":%u", e->u.m.src_device,
                       e->u.m.dst_device);
        write_external(o, a, e->correlation);
        break;
    case FP_CAT_MEMSET:
        out_printf(o,
                   "\"correlation\":%u,\"device\":%u,\"stream\":%u,\"context\":%u,"
                   "\"bytes\":%" PRIu64 ",\"memory_kind\":\"%s\",\"value\":%u,\"async\":%s",
                   e->correlation, e->pid, e->tid, e->u.m.context, e->u.m.bytes,
                   fp_memory_kind_str(e->u.m.dst_kind), e->u.m.value,
                   e->u.m.async ? "true" : "false");
        write_external(o, a, e->correlation);
        break;
    case FP_CAT_RUNTIME:
    case FP_CAT_DRIVER:
        out_printf(o, "\"correlation\":%u,\"cbid\":%u", e->correlation, e->u.api.cbid);
        if (e->u.api.ret != 0)
            out_printf(o, ",\"return\":%u", e->u.api.ret);
        write_external(o, a, e->correlation);
        break;
    case FP_CAT_SYNC:
        out_printf(o, "\"correlation\":%u,\"context\":%u,\"stream\":%u,\"sync_type\":%u",
                   e->correlation, e->u.sync.context, e->tid, e->u.sync.type);
        break;
    case FP_CAT_RANGE:
        out_puts(o, "\"domain\":");
        out_str(o, e->u.range.domain == FP_NAME_NONE ? "default"
                                                      : fp_agg_name(a, e->u.range.domain));
        break;
    default:
        break;
    }
    out_puts(o, "}}");
}

int fp_session_write(const fp_agg *a, const fp_session_meta *meta,
                     const char *const *warnings, size_t nwarnings, fp_write_fn fn, void *ctx)
{
    out *o = malloc(sizeof *o);
    ev_ref *refs = NULL;
    json_t *fp = NULL, *dev = NULL;
    size_t i;
    int rc = -1;

    if (o == NULL)
        return -1;
    o->fn = fn;
    o->ctx = ctx;
    o->len = 0;
    o->err = 0;
    fp = firstpass_obj(a, meta, warnings, nwarnings);
    dev = devices_arr(a);
    if (fp == NULL || dev == NULL)
        goto done;
    if (a->nevents > 0) {
        refs = malloc(a->nevents * sizeof *refs);
        if (refs == NULL)
            goto done;
        for (i = 0; i < a->nevents; i++) {
            const fp_event *e = fp_agg_event_at(a, i);
            refs[i].start = e->start_ns;
            refs[i].end = e->end_ns;
            refs[i].i = i;
        }
        qsort(refs, a->nevents, sizeof *refs, ev_cmp);
    }
    out_puts(o, "{\"schemaVersion\":1,\"firstpass\":");
    out_json(o, fp);
    out_puts(o, ",\"deviceProperties\":");
    out_json(o, dev);
    out_puts(o, ",\"traceEvents\":[");
    for (i = 0; i < a->nevents && !o->err; i++) {
        if (i > 0)
            out_puts(o, ",\n");
        write_event(o, a, fp_agg_event_at(a, refs[i].i), meta->start_ns);
    }
    out_puts(o, "]}\n");
    out_flush(o);
    rc = o->err ? -1 : 0;
done:
    json_decref(fp);
    json_decref(dev);
    free(refs);
    free(o);
    return rc;
}
