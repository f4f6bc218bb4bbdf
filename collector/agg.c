/* agg.c -- aggregator: name interning, per-name stats, NVTX pairing, bounded event store.
 *
 * Owns every heap block hanging off fp_agg. Must not include CUPTI headers or know record
 * layouts (record.c does), and must not do I/O (session_json.c, upload.c do). Allocation
 * happens only when something new appears (a name, a stats row beyond capacity, an event
 * chunk, a map resize), never per record in the steady state. */
#include "agg.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK (64 * 1024)

/* FNV-1a, 32-bit: names are short and hashing must be cheap and deterministic. */
static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Grows *p (element size sz) so that index need-1 is valid; new space zeroed. 0 or -1. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    size_t ncap;
    void *q;
    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    q = realloc(*p, ncap * sz);
    if (q == NULL)
        return -1;
    memset((char *)q + *cap * sz, 0, (ncap - *cap) * sz);
    *p = q;
    *cap = ncap;
    return 0;
}

/* ---- u64 map ---------------------------------------------------------------------------- */

static int map_resize(fp_u64map *m, size_t ncap)
{
    fp_u64map nm = {0};
    size_t i;
    nm.keys = malloc(ncap * sizeof *nm.keys);
    nm.vals = malloc(ncap * sizeof *nm.vals);
    nm.used = calloc(ncap, 1);
    nm.cap = ncap;
    if (nm.keys == NULL || nm.vals == NULL || nm.used == NULL) {
        fp_u64map_free(&nm);
        return -1;
    }
    for (i = 0; i < m->cap; i++)
        if (m->used[i])
            (void)fp_u64map_put(&nm, m->keys[i], m->vals[i]); /* cannot grow: ncap > 2n */
    fp_u64map_free(m);
    *m = nm;
    return 0;
}

int fp_u64map_put(fp_u64map *m, uint64_t key, uint64_t val)
{
    size_t i, mask;
    if ((m->n + 1) * 2 > m->cap && map_resize(m, m->cap ? m->cap * 2 : 64) != 0)
        return -1;
    mask = m->cap - 1;
    for (i = hash_u64(key) & mask; m->used[i]; i = (i + 1) & mask) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
    }
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

int fp_u64map_get(const fp_u64map *m, uint64_t key, uint64_t *val)
{
    size_t i, mask;
    if (m->cap == 0)
        return -1;
    mask = m->cap - 1;
    for (i = hash_u64(key) & mask; m->used[i]; i = (i + 1) & mask) {
        if (m->keys[i] == key) {
            if (val)
                *val = m->vals[i];
            return 0;
        }
    }
    return -1;
}

int fp_u64map_del(fp_u64map *m, uint64_t key)
{
    size_t i, j, mask;
    if (m->cap == 0)
        return -1;
    mask = m->cap - 1;
    for (i = hash_u64(key) & mask; m->used[i]; i = (i + 1) & mask)
        if (m->keys[i] == key)
            break;
    if (!m->used[i])
        return -1;
    /* Backward-shift deletion: move later entries of the probe run into the hole when their
     * home slot does not lie cyclically in (hole, j], so no tombstones are needed. */
    m->used[i] = 0;
    m->n--;
    for (j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
        size_t home = hash_u64(m->keys[j]) & mask;
        int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (in_range)
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->used[i] = 1;
        m->used[j] = 0;
        i = j;
    }
    return 0;
}

void fp_u64map_free(fp_u64map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

/* ---- lifecycle -------------------------------------------------------------------------- */

fp_agg *fp_agg_new(const fp_agg_config *cfg)
{
    fp_agg *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    if (cfg) {
        a->cfg = *cfg;
    } else {
        a->cfg.events = 1;
        a->cfg.max_events = 1000000;
    }
    return a;
}

void fp_agg_free(fp_agg *a)
{
    size_t i;
    char *blk;
    if (a == NULL)
        return;
    blk = a->arena;
    while (blk) {
        char *next;
        memcpy(&next, blk, sizeof next);
        free(blk);
        blk = next;
    }
    free(a->names);
    free(a->name_hash);
    free(a->htab);
    free(a->display);
    free(a->api_cache[0]);
    free(a->api_cache[1]);
    for (i = 0; i < FP_G__N; i++)
        free(a->stats[i].v);
    for (i = 0; i < a->nchunks; i++)
        free(a->chunks[i]);
    free(a->chunks);
    fp_u64map_free(&a->ext);
    fp_u64map_free(&a->ext_kind);
    fp_u64map_free(&a->ctx_dev);
    fp_u64map_free(&a->pending_ix);
    fp_u64map_free(&a->kname);
    fp_u64map_free(&a->small_ids);
    free(a->pending);
    free(a);
}

/* ---- interning -------------------------------------------------------------------------- */

/* Copies n bytes plus NUL into the arena. Blocks start with a pointer to the previous block. */
static char *arena_copy(fp_agg *a, const char *s, size_t n)
{
    char *dst;
    if (a->arena == NULL || a->arena_used + n + 1 > a->arena_cap) {
        size_t cap = sizeof(char *) + n + 1 > ARENA_BLOCK ? sizeof(char *) + n + 1 : ARENA_BLOCK;
        char *blk = malloc(cap);
        if (blk == NULL)
            return NULL;
        memcpy(blk, &a->arena, sizeof a->arena);
        a->arena = blk;
        a->arena_cap = cap;
        a->arena_used = sizeof(char *);
    }
    dst = a->arena + a->arena_used;
    memcpy(dst, s, n);
    dst[n] = '\0';
    a->arena_used += n + 1;
    return dst;
}

static int htab_rehash(fp_agg *a, size_t ncap)
{
    uint32_t *t = calloc(ncap, sizeof *t);
    size_t id, mask = ncap - 1;
    if (t == NULL)
        return -1;
    for (id = 0; id < a->nnames; id++) {
        size_t i = a->name_hash[id] & mask;
        while (t[i])
            i = (i + 1) & mask;
        t[i] = (uint32_t)id + 1;
    }
    free(a->htab);
    a->htab = t;
    a->htab_cap = ncap;
    return 0;
}

uint32_t fp_agg_intern_n(fp_agg *a, const char *s, size_t n)
{
    uint32_t h;
    size_t i, mask;
    char *copy;
    if (s == NULL)
        return FP_NAME_NONE;
    a->name_lookups++;
    h = hash_bytes(s, n);
    if (a->htab_cap) {
        mask = a->htab_cap - 1;
        for (i = h & mask; a->htab[i]; i = (i + 1) & mask) {
            uint32_t id = a->htab[i] - 1;
            if (a->name_hash[id] == h && strncmp(a->names[id], s, n) == 0 &&
                a->names[id][n] == '\0')
                return id;
        }
    }
    /* New name: the only allocating path. */
    if ((a->nnames + 1) * 2 > a->htab_cap &&
        htab_rehash(a, a->htab_cap ? a->htab_cap * 2 : 256) != 0)
        goto oom;
    if (a->nnames + 1 >= FP_NAME_NONE)
        goto oom;
    if (a->nnames + 1 > a->names_cap) {
        size_t cap = a->names_cap;
        if (grow((void **)&a->names, &cap, a->nnames + 1, sizeof *a->names) != 0)
            goto oom;
        cap = a->names_cap;
        if (grow((void **)&a->name_hash, &cap, a->nnames + 1, sizeof *a->name_hash) != 0)
            goto oom;
        a->names_cap = cap;
    }
    copy = arena_copy(a, s, n);
    if (copy == NULL)
        goto oom;
    a->names[a->nnames] = copy;
    a->name_hash[a->nnames] = h;
    mask = a->htab_cap - 1;
    for (i = h & mask; a->htab[i]; i = (i + 1) & mask)
        ;
    a->htab[i] = (uint32_t)a->nnames + 1;
    return (uint32_t)a->nnames++;
oom:
    a->oom++;
    return FP_NAME_NONE;
}

uint32_t fp_agg_intern(fp_agg *a, const char *s)
{
    return s ? fp_agg_intern_n(a, s, strlen(s)) : FP_NAME_NONE;
}

const char *fp_agg_name(const fp_agg *a, uint32_t id)
{
    if (id >= a->nnames)
        return "";
    return a->names[id];
}

/* ---- stats and events ------------------------------------------------------------------- */

static int timed(uint64_t start, uint64_t end)
{
    return start != 0 && end != 0 && end >= start;
}

static int in_window(const fp_agg *a, uint64_t start, uint64_t end)
{
    return (a->win_lo == 0 || (int64_t)start >= a->win_lo) &&
           (a->win_hi == 0 || (int64_t)end <= a->win_hi);
}

int fp_agg_stat(fp_agg *a, int g, uint32_t name, uint64_t start_ns, uint64_t end_ns,
                uint64_t bytes)
{
    fp_stat_table *t;
    fp_stat *s;
    if (g < 0 || g >= FP_G__N || name == FP_NAME_NONE) {
        a->oom++;
        return -1;
    }
    t = &a->stats[g];
    if (grow((void **)&t->v, &t->cap, (size_t)name + 1, sizeof *t->v) != 0) {
        a->oom++;
        return -1;
    }
    s = &t->v[name];
    s->calls++;
    s->bytes += bytes;
    if (!timed(start_ns, end_ns)) {
        a->untimed++;
        return 0;
    }
    if (!in_window(a, start_ns, end_ns)) {
        a->clock_outliers++;
        return 0;
    }
    {
        uint64_t d = end_ns - start_ns;
        if (s->timed == 0 || d < s->min_ns)
            s->min_ns = d;
        if (d > s->max_ns)
            s->max_ns = d;
        s->total_ns += d;
        s->timed++;
    }
    return 0;
}

int fp_agg_event(fp_agg *a, const fp_event *e)
{
    size_t ci, off;
    if (!a->cfg.events)
        return 1;
    if (!timed((uint64_t)e->start_ns, (uint64_t)e->end_ns) || e->name == FP_NAME_NONE ||
        !in_window(a, (uint64_t)e->start_ns, (uint64_t)e->end_ns))
        return 1;
    a->events_seen++;
    if (a->nevents >= a->cfg.max_events) {
        a->events_truncated = 1;
        return 1;
    }
    ci = a->nevents / FP_EVENT_CHUNK;
    off = a->nevents % FP_EVENT_CHUNK;
    if (ci >= a->nchunks) {
        fp_event *c;
        if (grow((void **)&a->chunks, &a->chunks_cap, ci + 1, sizeof *a->chunks) != 0)
            goto oom;
        c = malloc(FP_EVENT_CHUNK * sizeof *c);
        if (c == NULL)
            goto oom;
        a->chunks[ci] = c;
        a->nchunks = ci + 1;
    }
    a->chunks[ci][off] = *e;
    a->nevents++;
    return 0;
oom:
    a->oom++;
    return -1;
}

const fp_event *fp_agg_event_at(const fp_agg *a, size_t i)
{
    if (i >= a->nevents)
        return NULL;
    return &a->chunks[i / FP_EVENT_CHUNK][i % FP_EVENT_CHUNK];
}

/* ---- NVTX pairing ----------------------------------------------------------------------- */

static fp_pending *pending_find(fp_agg *a, uint32_t id)
{
    uint64_t ix;
    if (fp_u64map_get(&a->pending_ix, id, &ix) != 0)
        return NULL;
    return &a->pending[ix];
}

/* Removes the pending entry for p->id, moving the last entry into its slot. */
static void pending_remove(fp_agg *a, fp_pending *p)
{
    size_t ix = (size_t)(p - a->pending);
    (void)fp_u64map_del(&a->pending_ix, p->id);
    if (ix != a->npending - 1) {
        a->pending[ix] = a->pending[a->npending - 1];
        (void)fp_u64map_put(&a->pending_ix, a->pending[ix].id, ix); /* existing key: no growth */
    }
    a->npending--;
}

static fp_pending *pending_add(fp_agg *a, uint32_t id)
{
    fp_pending *p;
    if (grow((void **)&a->pending, &a->pending_cap, a->npending + 1, sizeof *a->pending) != 0)
        return NULL;
    if (fp_u64map_put(&a->pending_ix, id, a->npending) != 0)
        return NULL;
    p = &a->pending[a->npending++];
    memset(p, 0, sizeof *p);
    p->id = id;
    p->name = FP_NAME_NONE;
    p->domain = FP_NAME_NONE;
    return p;
}

static int range_complete(fp_agg *a, const fp_pending *p)
{
    fp_event e;
    a->ranges++;
    if (fp_agg_stat(a, FP_G_RANGE, p->name, (uint64_t)p->start_ns, (uint64_t)p->end_ns, 0) != 0)
        return -1;
    memset(&e, 0, sizeof e);
    e.cat = FP_CAT_RANGE;
    e.name = p->name;
    e.start_ns = p->start_ns;
    e.end_ns = p->end_ns;
    e.pid = p->pid;
    e.tid = p->tid;
    e.u.range.domain = p->domain;
    return fp_agg_event(a, &e) < 0 ? -1 : 0;
}

int fp_agg_range_start(fp_agg *a, uint32_t id, int64_t ts_ns, uint32_t name, uint32_t domain,
                       uint32_t pid, uint32_t tid)
{
    fp_pending *p = pending_find(a, id);
    fp_pending done;
    if (p && p->have_start) {
        a->ranges_duplicate++;
        return 0;
    }
    if (p == NULL) {
        p = pending_add(a, id);
        if (p == NULL) {
            a->oom++;
            return -1;
        }
    }
    p->have_start = 1;
    p->start_ns = ts_ns;
    p->name = name;
    p->domain = domain;
    p->pid = pid;
    p->tid = tid;
    if (!p->have_end)
        return 0;
    done = *p;
    pending_remove(a, p);
    return range_complete(a, &done);
}

int fp_agg_range_end(fp_agg *a, uint32_t id, int64_t ts_ns)
{
    fp_pending *p = pending_find(a, id);
    fp_pending done;
    if (p && p->have_end) {
        a->ranges_duplicate++;
        return 0;
    }
    if (p == NULL) {
        /* END before START: wait for the START (Invariant: have_end without have_start). */
        p = pending_add(a, id);
        if (p == NULL) {
            a->oom++;
            return -1;
        }
        p->have_end = 1;
        p->end_ns = ts_ns;
        return 0;
    }
    p->have_end = 1;
    p->end_ns = ts_ns;
    done = *p;
    pending_remove(a, p);
    return range_complete(a, &done);
}

int fp_agg_move_pending(fp_agg *src, fp_agg *dst)
{
    size_t i;
    int rc = 0;
    for (i = 0; i < src->npending; i++) {
        fp_pending *s = &src->pending[i];
        fp_pending *d = pending_add(dst, s->id);
        if (d == NULL) {
            dst->oom++;
            rc = -1;
            continue;
        }
        *d = *s;
        d->name = s->name == FP_NAME_NONE ? FP_NAME_NONE : fp_agg_intern(dst, fp_agg_name(src, s->name));
        d->domain = s->domain == FP_NAME_NONE ? FP_NAME_NONE
                                              : fp_agg_intern(dst, fp_agg_name(src, s->domain));
    }
    fp_u64map_free(&src->pending_ix);
    src->npending = 0;
    return rc;
}

void fp_agg_finish(fp_agg *a)
{
    size_t i;
    for (i = 0; i < a->npending; i++) {
        if (a->pending[i].have_start)
            a->ranges_unmatched_start++;
        else
            a->ranges_unmatched_end++;
    }
    a->npending = 0;
    fp_u64map_free(&a->pending_ix);
}

/* ---- correlation, contexts, devices ----------------------------------------------------- */

void fp_agg_external(fp_agg *a, uint32_t correlation, uint32_t kind, uint64_t external_id)
{
    if (a->ext.n >= a->cfg.max_events && fp_u64map_get(&a->ext, correlation, NULL) != 0) {
        a->ext_dropped++;
        return;
    }
    if (fp_u64map_put(&a->ext, correlation, external_id) != 0 ||
        fp_u64map_put(&a->ext_kind, correlation, kind) != 0)
        a->oom++;
}

int fp_agg_external_get(const fp_agg *a, uint32_t correlation, uint64_t *id, uint32_t *kind)
{
    uint64_t k = 0;
    if (fp_u64map_get(&a->ext, correlation, id) != 0)
        return -1;
    (void)fp_u64map_get(&a->ext_kind, correlation, &k);
    if (kind)
        *kind = (uint32_t)k;
    return 0;
}

void fp_agg_context(fp_agg *a, uint32_t context, uint32_t device)
{
    if (fp_u64map_put(&a->ctx_dev, context, device) != 0)
        a->oom++;
}

uint32_t fp_agg_context_device(const fp_agg *a, uint32_t context)
{
    uint64_t d = 0;
    (void)fp_u64map_get(&a->ctx_dev, context, &d);
    return (uint32_t)d;
}

fp_device *fp_agg_device(fp_agg *a, uint32_t id)
{
    return id < FP_MAX_DEVICES ? &a->devices[id] : NULL;
}

/* ---- enum spellings (values pinned by _Static_assert in record.c) ------------------------ */

const char *fp_memory_kind_str(unsigned kind)
{
    static const char *const s[] = {"Unknown", "Pageable", "Pinned", "Device", "Array",
                                    "Managed", "Device Static", "Managed Static"};
    return kind < sizeof s / sizeof s[0] ? s[kind] : "<unknown>";
}

const char *fp_memcpy_kind_str(unsigned kind)
{
    static const char *const s[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                    "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    return kind < sizeof s / sizeof s[0] ? s[kind] : "<unknown>";
}

const char *fp_sync_type_str(unsigned type)
{
    static const char *const s[] = {"Unknown Sync", "Event Sync", "Stream Wait Event",
                                    "Stream Sync", "Context Sync"};
    return type < sizeof s / sizeof s[0] ? s[type] : "Unknown Sync";
}
