/* record.c -- decodes CUPTI activity records into aggregator calls.
 *
 * Owns the mapping from CUPTI record layouts (cupti_activity.h, 13.0 U1 struct versions) to
 * fp_agg stats, events and range halves, plus the per-cbid API name cache. Needs CUPTI headers
 * only: it must not call libcupti (names come through agg->api_name, injected by inject.c),
 * must not lock (the caller does) and must not keep CUPTI-owned pointers. */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

/* agg.c spells these enums without including CUPTI; pin the values it relies on. */
_Static_assert(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE == 1 && CUPTI_ACTIVITY_MEMORY_KIND_PINNED == 2 &&
                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE == 3 &&
                   CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC == 7,
               "CUpti_ActivityMemoryKind values changed: update fp_memory_kind_str");
_Static_assert(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD == 1 && CUPTI_ACTIVITY_MEMCPY_KIND_DTOH == 2 &&
                   CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == 8 && CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == 10,
               "CUpti_ActivityMemcpyKind values changed: update fp_memcpy_kind_str");
_Static_assert(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE == 1 &&
                   CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE == 4,
               "CUpti_ActivitySynchronizationType values changed: update fp_sync_type_str");

/* Length of name without a trailing "_v<digits>". */
static size_t strip_version(const char *name)
{
    size_t n = strlen(name), i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i < n && i >= 2 && name[i - 1] == 'v' && name[i - 2] == '_' && i - 2 > 0)
        return i - 2;
    return n;
}

uint32_t fp_record_api_name(fp_agg *agg, int driver, uint32_t cbid)
{
    int d = driver ? 1 : 0;
    const char *raw = NULL;
    char fallback[48];
    uint32_t id;

    if (cbid < agg->api_cache_cap[d] && agg->api_cache[d][cbid] != 0)
        return agg->api_cache[d][cbid] - 1;
    if (agg->api_name)
        raw = agg->api_name(d, cbid);
    if (raw == NULL) {
        snprintf(fallback, sizeof fallback, "%s_api_%u", d ? "driver" : "runtime", cbid);
        raw = fallback;
    }
    id = fp_agg_intern_n(agg, raw, strip_version(raw));
    if (id == FP_NAME_NONE)
        return id;
    /* cbids are small dense enums (< 1000 today); cap the cache so a garbage cbid cannot
     * make it huge -- such cbids just skip the cache. */
    if (cbid < 65536 && cbid >= agg->api_cache_cap[d]) {
        size_t cap = agg->api_cache_cap[d] ? agg->api_cache_cap[d] : 1024;
        uint32_t *p;
        while (cap <= cbid)
            cap *= 2;
        p = realloc(agg->api_cache[d], cap * sizeof *p);
        if (p == NULL) {
            agg->oom++;
            return id;
        }
        memset(p + agg->api_cache_cap[d], 0, (cap - agg->api_cache_cap[d]) * sizeof *p);
        agg->api_cache[d] = p;
        agg->api_cache_cap[d] = cap;
    }
    if (cbid < agg->api_cache_cap[d])
        agg->api_cache[d][cbid] = id + 1;
    return id;
}

/* Display id for a mangled kernel id, demangled once and cached in agg->display. */
static uint32_t kernel_display(fp_agg *agg, uint32_t mangled)
{
    char buf[8192];
    uint32_t id;
    if (mangled < agg->display_cap && agg->display[mangled] != 0)
        return agg->display[mangled] - 1;
    if (fp_demangle_full(fp_agg_name(agg, mangled), buf, sizeof buf) == 0)
        id = fp_agg_intern(agg, buf);
    else
        id = mangled;
    if (id == FP_NAME_NONE)
        return mangled;
    if (mangled >= agg->display_cap) {
        size_t cap = agg->display_cap ? agg->display_cap : 256;
        uint32_t *p;
        while (cap <= mangled)
            cap *= 2;
        p = realloc(agg->display, cap * sizeof *p);
        if (p == NULL) {
            agg->oom++;
            return id;
        }
        memset(p + agg->display_cap, 0, (cap - agg->display_cap) * sizeof *p);
        agg->display = p;
        agg->display_cap = cap;
    }
    agg->display[mangled] = id + 1;
    return id;
}

void fp_record_name_kernels(fp_agg *agg)
{
    const fp_stat_table *t = &agg->stats[FP_G_KERNEL];
    size_t id, i, n = t->cap;
    for (id = 0; id < n; id++)
        if (agg->stats[FP_G_KERNEL].v[id].calls != 0)
            (void)kernel_display(agg, (uint32_t)id);
    for (i = 0; i < agg->nevents; i++) {
        fp_event *e = (fp_event *)fp_agg_event_at(agg, i);
        uint32_t d;
        if (e->cat != FP_CAT_KERNEL || e->u.k.mangled != FP_NAME_NONE)
            continue;
        d = kernel_display(agg, e->name);
        if (d != e->name) {
            e->u.k.mangled = e->name;
            e->name = d;
        }
    }
}

/* The interned id of a kernel's name. CUPTI shares one name string across all records of a
 * kernel (cupti_activity.h, CUpti_ActivityKernel10.name), so the pointer is the key: no hash
 * of a 0.2-2 KB PyTorch or CUTLASS name per record on CUPTI's thread. The strcmp guards against
 * the pointer being reused for another name after a module unload; it is a vector compare,
 * not a byte loop (test_record_names_cached_by_pointer). */
static uint32_t kernel_id(fp_agg *agg, const char *name)
{
    uint64_t v;
    uint32_t id;
    if (name == NULL)
        return fp_agg_intern(agg, "<unknown kernel>");
    if (fp_u64map_get(&agg->kname, (uint64_t)(uintptr_t)name, &v) == 0 &&
        strcmp(fp_agg_name(agg, (uint32_t)v), name) == 0)
        return (uint32_t)v;
    id = fp_agg_intern(agg, name);
    if (id != FP_NAME_NONE && fp_u64map_put(&agg->kname, (uint64_t)(uintptr_t)name, id) != 0)
        agg->oom++;
    return id;
}

/* Keys of agg->small_ids: the record kind in the top byte, its enum values below. */
#define SMALL_MEMCPY(copy, src, dst) \
    ((1ULL << 56) | ((uint64_t)(copy) << 16) | ((uint64_t)(src) << 8) | (uint64_t)(dst))
#define SMALL_MEMSET(kind) ((2ULL << 56) | (uint64_t)(kind))
#define SMALL_SYNC(type)   ((3ULL << 56) | (uint64_t)(type))

/* Cached id for a name made from enum values: formatted and interned once per key. */
static uint32_t small_id(fp_agg *agg, uint64_t key, const char *name)
{
    uint64_t v;
    uint32_t id;
    if (fp_u64map_get(&agg->small_ids, key, &v) == 0)
        return (uint32_t)v;
    id = fp_agg_intern(agg, name);
    if (id != FP_NAME_NONE && fp_u64map_put(&agg->small_ids, key, id) != 0)
        agg->oom++;
    return id;
}

static uint32_t memcpy_id(fp_agg *agg, unsigned copy, unsigned src, unsigned dst)
{
    uint64_t key = SMALL_MEMCPY(copy & 0xff, src & 0xff, dst & 0xff), v;
    char name[96];
    if (fp_u64map_get(&agg->small_ids, key, &v) == 0)
        return (uint32_t)v;
    snprintf(name, sizeof name, "Memcpy %s (%s -> %s)", fp_memcpy_kind_str(copy),
             fp_memory_kind_str(src), fp_memory_kind_str(dst));
    return small_id(agg, key, name);
}

static int on_kernel(fp_agg *agg, const CUpti_ActivityKernel10 *k)
{
    fp_event e;
    uint32_t mangled = kernel_id(agg, k->name);
    if (mangled == FP_NAME_NONE)
        return -1;
    if (fp_agg_stat(agg, FP_G_KERNEL, mangled, k->start, k->end, 0) != 0)
        return -1;
    memset(&e, 0, sizeof e);
    e.cat = FP_CAT_KERNEL;
    e.name = mangled; /* the display name comes at send time (fp_record_name_kernels) */
    e.start_ns = (int64_t)k->start;
    e.end_ns = (int64_t)k->end;
    e.correlation = k->correlationId;
    e.pid = k->deviceId;
    e.tid = k->streamId;
    e.u.k.grid[0] = k->gridX;
    e.u.k.grid[1] = k->gridY;
    e.u.k.grid[2] = k->gridZ;
    e.u.k.block[0] = k->blockX;
    e.u.k.block[1] = k->blockY;
    e.u.k.block[2] = k->blockZ;
    e.u.k.static_smem = k->staticSharedMemory;
    e.u.k.dynamic_smem = k->dynamicSharedMemory;
    e.u.k.registers = k->registersPerThread;
    e.u.k.context = k->contextId;
    e.u.k.mangled = FP_NAME_NONE;
    return fp_agg_event(agg, &e) < 0 ? -1 : 0;
}

static int copy_common(fp_agg *agg, fp_event *e, uint32_t name, uint64_t bytes)
{
    e->name = name;
    if (e->name == FP_NAME_NONE)
        return -1;
    if (fp_agg_stat(agg, FP_G_MEMCPY, e->name, (uint64_t)e->start_ns, (uint64_t)e->end_ns,
                    bytes) != 0)
        return -1;
    return fp_agg_event(agg, e) < 0 ? -1 : 0;
}

static int on_memcpy(fp_agg *agg, const CUpti_ActivityMemcpy6 *m)
{
    fp_event e;
    memset(&e, 0, sizeof e);
    e.cat = FP_CAT_MEMCPY;
    e.start_ns = (int64_t)m->start;
    e.end_ns = (int64_t)m->end;
    /* correlationId matches the driver API record, runtimeCorrelationId the runtime one
     * (design note 1); the runtime id is what cudaMemcpy* events carry. */
    e.correlation = m->runtimeCorrelationId ? m->runtimeCorrelationId : m->correlationId;
    e.pid = m->deviceId;
    e.tid = m->streamId;
    e.u.m.bytes = m->bytes;
    e.u.m.context = m->contextId;
    e.u.m.driver_correlation = m->correlationId;
    e.u.m.src_device = UINT32_MAX;
    e.u.m.dst_device = UINT32_MAX;
    e.u.m.copy_kind = m->copyKind;
    e.u.m.src_kind = m->srcKind;
    e.u.m.dst_kind = m->dstKind;
    e.u.m.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
    return copy_common(agg, &e, memcpy_id(agg, m->copyKind, m->srcKind, m->dstKind), m->bytes);
}

static int on_memcpy_p2p(fp_agg *agg, const CUpti_ActivityMemcpyPtoP4 *m)
{
    fp_event e;
    memset(&e, 0, sizeof e);
    e.cat = FP_CAT_MEMCPY;
    e.start_ns = (int64_t)m->start;
    e.end_ns = (int64_t)m->end;
    e.correlation = m->correlationId;
    e.pid = m->deviceId;
    e.tid = m->streamId;
    e.u.m.bytes = m->bytes;
    e.u.m.context = m->contextId;
    e.u.m.driver_correlation = m->correlationId;
    e.u.m.src_device = m->srcDeviceId;
    e.u.m.dst_device = m->dstDeviceId;
    e.u.m.copy_kind = m->copyKind;
    e.u.m.src_kind = m->srcKind;
    e.u.m.dst_kind = m->dstKind;
    e.u.m.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
    return copy_common(agg, &e, memcpy_id(agg, m->copyKind, m->srcKind, m->dstKind), m->bytes);
}

static int on_memset(fp_agg *agg, const CUpti_ActivityMemset4 *m)
{
    char name[64];
    uint64_t v;
    uint32_t id;
    fp_event e;
    memset(&e, 0, sizeof e);
    if (fp_u64map_get(&agg->small_ids, SMALL_MEMSET(m->memoryKind), &v) == 0) {
        id = (uint32_t)v;
    } else {
        snprintf(name, sizeof name, "Memset (%s)", fp_memory_kind_str(m->memoryKind));
        id = small_id(agg, SMALL_MEMSET(m->memoryKind), name);
    }
    e.cat = FP_CAT_MEMSET;
    e.start_ns = (int64_t)m->start;
    e.end_ns = (int64_t)m->end;
    e.correlation = m->correlationId;
    e.pid = m->deviceId;
    e.tid = m->streamId;
    e.u.m.bytes = m->bytes;
    e.u.m.context = m->contextId;
    e.u.m.src_device = UINT32_MAX;
    e.u.m.dst_device = UINT32_MAX;
    e.u.m.dst_kind = (uint8_t)m->memoryKind;
    e.u.m.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0;
    e.u.m.value = m->value;
    return copy_common(agg, &e, id, m->bytes);
}

static int on_api(fp_agg *agg, const CUpti_ActivityAPI *a, int driver)
{
    fp_event e;
    uint32_t name = fp_record_api_name(agg, driver, a->cbid);
    if (name == FP_NAME_NONE)
        return -1;
    if (fp_agg_stat(agg, driver ? FP_G_DRIVER : FP_G_RUNTIME, name, a->start, a->end, 0) != 0)
        return -1;
    memset(&e, 0, sizeof e);
    e.cat = driver ? FP_CAT_DRIVER : FP_CAT_RUNTIME;
    e.name = name;
    e.start_ns = (int64_t)a->start;
    e.end_ns = (int64_t)a->end;
    e.correlation = a->correlationId;
    e.pid = a->processId;
    e.tid = a->threadId;
    e.u.api.cbid = a->cbid;
    e.u.api.ret = a->returnValue;
    return fp_agg_event(agg, &e) < 0 ? -1 : 0;
}

static int on_sync(fp_agg *agg, const CUpti_ActivitySynchronization2 *s)
{
    fp_event e;
    uint32_t name;
    /* By default CUPTI records every cudaEventQuery/cudaStreamQuery, finished or not (the
     * header, cuptiActivityEnableAllSyncRecords); a poll that returned not-ready did not wait
     * for anything. inject.c turns those records off; any that come anyway are counted here
     * (test_record_sync_not_ready_polls_are_not_syncs). */
    if (s->returnValue != 0) {
        agg->sync_not_ready++;
        return 0;
    }
    name = small_id(agg, SMALL_SYNC(s->type), fp_sync_type_str(s->type));
    if (name == FP_NAME_NONE)
        return -1;
    if (fp_agg_stat(agg, FP_G_SYNC, name, s->start, s->end, 0) != 0)
        return -1;
    memset(&e, 0, sizeof e);
    e.cat = FP_CAT_SYNC;
    e.name = name;
    e.start_ns = (int64_t)s->start;
    e.end_ns = (int64_t)s->end;
    e.correlation = s->correlationId;
    e.pid = fp_agg_context_device(agg, s->contextId);
    e.tid = s->streamId; /* CUPTI_SYNCHRONIZATION_INVALID_VALUE for context syncs */
    e.u.sync.type = (uint32_t)s->type;
    e.u.sync.context = s->contextId;
    return fp_agg_event(agg, &e) < 0 ? -1 : 0;
}

static int on_marker(fp_agg *agg, const CUpti_ActivityMarker2 *m)
{
    uint32_t pid = 0, tid = 0;
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        agg->instant_markers++;
        return 0;
    }
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        uint32_t name = fp_agg_intern(agg, m->name ? m->name : "<unnamed range>");
        uint32_t domain = m->domain ? fp_agg_intern(agg, m->domain) : FP_NAME_NONE;
        if (name == FP_NAME_NONE)
            return -1;
        if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
            m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
            pid = m->objectId.pt.processId;
            tid = m->objectId.pt.threadId;
        }
        return fp_agg_range_start(agg, m->id, (int64_t)m->timestamp, name, domain, pid, tid);
    }
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
        return fp_agg_range_end(agg, m->id, (int64_t)m->timestamp);
    agg->unknown_kinds++; /* a marker that is none of the three: nothing to pair */
    return 1;
}

static void on_device(fp_agg *agg, const CUpti_ActivityDevice5 *d)
{
    fp_device *dev = fp_agg_device(agg, d->id);
    if (dev == NULL)
        return;
    dev->present = 1;
    snprintf(dev->name, sizeof dev->name, "%s", d->name ? d->name : "");
    dev->total_mem = (long long)d->globalMemorySize;
    dev->cc_major = (int)d->computeCapabilityMajor;
    dev->cc_minor = (int)d->computeCapabilityMinor;
    dev->num_sms = (int)d->numMultiprocessors;
    dev->max_threads_per_block = (int)d->maxThreadsPerBlock;
    dev->max_threads_per_sm = (int)(d->maxWarpsPerMultiprocessor * d->numThreadsPerWarp);
    dev->regs_per_block = (int)d->maxRegistersPerBlock;
    dev->smem_per_block = (int)d->maxSharedMemoryPerBlock;
    dev->warp_size = (int)d->numThreadsPerWarp;
}

int fp_process_record(fp_agg *agg, const CUpti_Activity *rec)
{
    agg->records++;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return on_kernel(agg, (const CUpti_ActivityKernel10 *)rec);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return on_memcpy(agg, (const CUpti_ActivityMemcpy6 *)rec);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
        return on_memcpy_p2p(agg, (const CUpti_ActivityMemcpyPtoP4 *)rec);
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return on_memset(agg, (const CUpti_ActivityMemset4 *)rec);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        return on_api(agg, (const CUpti_ActivityAPI *)rec, 0);
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return on_api(agg, (const CUpti_ActivityAPI *)rec, 1);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return on_sync(agg, (const CUpti_ActivitySynchronization2 *)rec);
    case CUPTI_ACTIVITY_KIND_MARKER:
        return on_marker(agg, (const CUpti_ActivityMarker2 *)rec);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)rec;
        fp_agg_external(agg, x->correlationId, (uint32_t)x->externalKind, x->externalId);
        return 0;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
        const CUpti_ActivityContext3 *c = (const CUpti_ActivityContext3 *)rec;
        fp_agg_context(agg, c->contextId, c->deviceId);
        return 0;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE:
        on_device(agg, (const CUpti_ActivityDevice5 *)rec);
        return 0;
    default:
        agg->unknown_kinds++;
        return 1;
    }
}
