/* test_record.c -- cmocka cases for collector/record.c: hand-built CUPTI 13.0 records in,
 * exact aggregates and JSON out. Needs CUPTI headers only (no libcupti). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_runtime_cbid.h>

#include "agg.h"
#include "record.h"
#include "session_json.h"

#define T0 1700000000000000000ULL /* session start (ns, CUPTI clock) */

static int namer_calls;

static const char *fake_namer(int driver, uint32_t cbid)
{
    namer_calls++;
    if (!driver && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
        return "cudaLaunchKernel_v7000";
    if (!driver && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020)
        return "cudaMemcpy_v3020";
    if (driver && cbid == 307)
        return "cuLaunchKernel";
    return NULL;
}

static fp_agg *new_agg(void)
{
    fp_agg *a = fp_agg_new(NULL);
    a->api_name = fake_namer;
    namer_calls = 0;
    return a;
}

static CUpti_ActivityKernel10 kernel(const char *name, uint64_t start, uint64_t end,
                                     uint32_t corr)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = name;
    k.start = start;
    k.end = end;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = corr;
    k.gridX = 108; k.gridY = 1; k.gridZ = 1;
    k.blockX = 256; k.blockY = 1; k.blockZ = 1;
    k.registersPerThread = 40;
    k.staticSharedMemory = 4096;
    k.dynamicSharedMemory = 0;
    return k;
}

static CUpti_ActivityAPI api(CUpti_ActivityKind kind, uint32_t cbid, uint64_t s, uint64_t e,
                             uint32_t corr)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.cbid = cbid;
    a.start = s;
    a.end = e;
    a.processId = 4242;
    a.threadId = 4243;
    a.correlationId = corr;
    return a;
}

static CUpti_ActivityMarker2 marker(uint32_t flags, uint32_t id, uint64_t ts, const char *name,
                                    const char *domain)
{
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = (CUpti_ActivityFlag)flags;
    m.id = id;
    m.timestamp = ts;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = 4242;
    m.objectId.pt.threadId = 4243;
    m.name = name;
    m.domain = domain;
    return m;
}

static const fp_stat *stat_of(fp_agg *a, int g, const char *name)
{
    uint32_t id = fp_agg_intern(a, name);
    if (id >= a->stats[g].cap || a->stats[g].v[id].calls == 0)
        return NULL;
    return &a->stats[g].v[id];
}

static void test_record_kernel_demangled_with_mangled_kept(void **state)
{
    fp_agg *a = new_agg();
    char mangled[] = "_Z6decodePfS_i"; /* CUPTI owns the string: prove we copy it */
    CUpti_ActivityKernel10 k1 = kernel(mangled, T0 + 1000, T0 + 3500, 11);
    CUpti_ActivityKernel10 k2 = kernel(mangled, T0 + 5000, T0 + 6000, 12);
    const fp_event *e;
    const fp_stat *s;
    (void)state;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k1), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k2), 0);
    memset(mangled, 'x', sizeof mangled - 1);
    e = fp_agg_event_at(a, 0);
    assert_string_equal(fp_agg_name(a, e->name), "_Z6decodePfS_i"); /* not demangled on CUPTI's thread */
    fp_record_name_kernels(a);
    s = stat_of(a, FP_G_KERNEL, "_Z6decodePfS_i");
    assert_non_null(s);
    assert_int_equal(s->calls, 2);
    assert_int_equal(s->total_ns, 3500);
    assert_int_equal(s->min_ns, 1000);
    assert_int_equal(s->max_ns, 2500);
    assert_int_equal(a->nevents, 2);
    e = fp_agg_event_at(a, 0);
    assert_string_equal(fp_agg_name(a, e->name), "decode(float*, float*, int)");
    assert_string_equal(fp_agg_name(a, e->u.k.mangled), "_Z6decodePfS_i");
    assert_int_equal(e->correlation, 11);
    assert_int_equal(e->pid, 0);
    assert_int_equal(e->tid, 7);
    assert_int_equal(e->u.k.grid[0], 108);
    assert_int_equal(e->u.k.block[0], 256);
    assert_int_equal(e->u.k.registers, 40);
    assert_int_equal(e->u.k.static_smem, 4096);
    fp_agg_free(a);
}

/* No C++ runtime in this test (as in a Python process before torch): the small demangler names
 * plain kernels, a template keeps its mangled name, and libstdc++ is not loaded for it. */
static void test_record_templates_stay_mangled_without_a_cxx_runtime(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityKernel10 k = kernel("_ZN4vllm13decode_kernelIfLi128EEEvPT_PKS1_i", T0 + 1, T0 + 2, 1);
    const fp_event *e;
    (void)state;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k), 0);
    fp_record_name_kernels(a);
    e = fp_agg_event_at(a, 0);
    assert_string_equal(fp_agg_name(a, e->name), "_ZN4vllm13decode_kernelIfLi128EEEvPT_PKS1_i");
    assert_int_equal(e->u.k.mangled, FP_NAME_NONE);
    assert_null(dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD));
    fp_agg_free(a);
}

/* Per-record work on CUPTI's thread is bounded: a kernel name is hashed once per CUPTI name
 * pointer, a memcpy/memset/sync name once per enum combination, not once per record. */
static void test_record_names_cached_by_pointer(void **state)
{
    fp_agg *a = new_agg();
    char name[1500], other[] = "_Z5otherv";
    CUpti_ActivityKernel10 k;
    CUpti_ActivityMemcpy6 m;
    CUpti_ActivitySynchronization2 y;
    uint64_t before;
    int i;
    (void)state;
    memset(name, 'a', sizeof name - 1); /* a CUTLASS-sized name */
    memcpy(name, "_Z4gemm", 7);
    name[sizeof name - 1] = '\0';
    k = kernel(name, T0 + 1, T0 + 2, 1);
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 64;
    m.start = T0 + 1;
    m.end = T0 + 2;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.start = T0 + 1;
    y.end = T0 + 2;
    before = a->name_lookups;
    for (i = 0; i < 1000; i++) {
        assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k), 0);
        assert_int_equal(fp_process_record(a, (CUpti_Activity *)&m), 0);
        assert_int_equal(fp_process_record(a, (CUpti_Activity *)&y), 0);
    }
    assert_int_equal(a->name_lookups - before, 3);
    assert_int_equal(stat_of(a, FP_G_KERNEL, name)->calls, 1000);
    assert_int_equal(stat_of(a, FP_G_MEMCPY, "Memcpy HtoD (Pinned -> Device)")->calls, 1000);
    assert_int_equal(stat_of(a, FP_G_SYNC, "Stream Sync")->calls, 1000);
    /* the same pointer now holding another name (module unloaded, memory reused) */
    memcpy(name, other, sizeof other);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k), 0);
    assert_int_equal(stat_of(a, FP_G_KERNEL, "_Z5otherv")->calls, 1);
    fp_agg_free(a);
}

static void test_record_api_names_stripped_and_cached(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityAPI r1 = api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0 + 100, T0 + 104, 11);
    CUpti_ActivityAPI r2 = api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0 + 200, T0 + 206, 12);
    CUpti_ActivityAPI d1 = api(CUPTI_ACTIVITY_KIND_DRIVER, 307, T0 + 101, T0 + 103, 13);
    CUpti_ActivityAPI u1 = api(CUPTI_ACTIVITY_KIND_RUNTIME, 9999, T0 + 300, T0 + 301, 14);
    const fp_stat *s;
    const fp_event *e;
    (void)state;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&r1), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&r2), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&d1), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&u1), 0);
    assert_int_equal(namer_calls, 3); /* launch once, cuLaunchKernel once, 9999 once */
    s = stat_of(a, FP_G_RUNTIME, "cudaLaunchKernel");
    assert_non_null(s);
    assert_int_equal(s->calls, 2);
    assert_int_equal(s->total_ns, 10);
    assert_non_null(stat_of(a, FP_G_DRIVER, "cuLaunchKernel"));
    assert_non_null(stat_of(a, FP_G_RUNTIME, "runtime_api_9999"));
    assert_null(stat_of(a, FP_G_RUNTIME, "cudaLaunchKernel_v7000"));
    e = fp_agg_event_at(a, 2);
    assert_int_equal(e->cat, FP_CAT_DRIVER);
    assert_int_equal(e->pid, 4242);
    assert_int_equal(e->tid, 4243);
    assert_int_equal(e->u.api.cbid, 307);
    fp_agg_free(a);
}

static void test_record_strip_version_only_trailing(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    (void)state;
    /* no namer: fallback names have no _v suffix and keep their digits */
    assert_string_equal(fp_agg_name(a, fp_record_api_name(a, 0, 17)), "runtime_api_17");
    assert_string_equal(fp_agg_name(a, fp_record_api_name(a, 1, 5)), "driver_api_5");
    assert_string_equal(fp_agg_name(a, fp_agg_intern_n(a, "x", 1)), "x");
    fp_agg_free(a);
}

static void test_record_memcpy_memset_names_and_bytes(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityMemcpy6 m;
    CUpti_ActivityMemset4 s;
    const fp_stat *st;
    const fp_event *e;
    (void)state;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 1 << 20;
    m.start = T0 + 10000;
    m.end = T0 + 10400;
    m.streamId = 7;
    m.correlationId = 90;        /* driver API */
    m.runtimeCorrelationId = 21; /* runtime API */
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&m), 0);
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    m.bytes = 4096;
    m.runtimeCorrelationId = 0;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&m), 0);
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 512;
    s.value = 0;
    s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    s.start = T0 + 20000;
    s.end = T0 + 20010;
    s.streamId = 7;
    s.correlationId = 22;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s), 0);

    st = stat_of(a, FP_G_MEMCPY, "Memcpy HtoD (Pageable -> Device)");
    assert_non_null(st);
    assert_int_equal(st->bytes, 1 << 20);
    assert_int_equal(st->total_ns, 400);
    st = stat_of(a, FP_G_MEMCPY, "Memcpy DtoH (Device -> Pinned)");
    assert_non_null(st);
    assert_int_equal(st->bytes, 4096);
    st = stat_of(a, FP_G_MEMCPY, "Memset (Device)");
    assert_non_null(st);
    assert_int_equal(st->bytes, 512);
    assert_int_equal(st->total_ns, 10);
    e = fp_agg_event_at(a, 0);
    assert_int_equal(e->correlation, 21);
    assert_int_equal(e->u.m.driver_correlation, 90);
    e = fp_agg_event_at(a, 1);
    assert_int_equal(e->correlation, 90);
    assert_int_equal(e->u.m.async, 1);
    assert_int_equal(fp_agg_event_at(a, 2)->cat, FP_CAT_MEMSET);
    fp_agg_free(a);
}

static void test_record_sync_uses_context_device(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityContext3 c;
    CUpti_ActivitySynchronization2 s;
    const fp_event *e;
    (void)state;
    memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
    c.contextId = 3;
    c.deviceId = 2;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&c), 0);
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s.start = T0 + 500;
    s.end = T0 + 1500;
    s.contextId = 3;
    s.streamId = 7;
    s.correlationId = 30;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s), 0);
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    s.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s), 0);
    assert_int_equal(stat_of(a, FP_G_SYNC, "Stream Sync")->total_ns, 1000);
    assert_int_equal(stat_of(a, FP_G_SYNC, "Context Sync")->calls, 1);
    e = fp_agg_event_at(a, 0);
    assert_int_equal(e->cat, FP_CAT_SYNC);
    assert_int_equal(e->pid, 2);
    assert_int_equal(e->tid, 7);
    fp_agg_free(a);
}

/* cudaEventQuery/cudaStreamQuery polls that found the work unfinished come as sync records
 * with returnValue CUDA_ERROR_NOT_READY (600): they are not synchronisations. */
static void test_record_sync_not_ready_polls_are_not_syncs(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivitySynchronization2 s;
    int i;
    (void)state;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    s.contextId = 1;
    s.streamId = 7;
    s.returnValue = 600;
    for (i = 0; i < 30; i++) {
        s.start = T0 + 100 * (uint64_t)i;
        s.end = s.start + 10;
        assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s), 0);
    }
    s.returnValue = 0;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s), 0);
    assert_int_equal(stat_of(a, FP_G_SYNC, "Event Sync")->calls, 1);
    assert_int_equal(a->nevents, 1);
    assert_int_equal(a->sync_not_ready, 30);
    assert_int_equal(a->records, 31);
    fp_agg_free(a);
}

static void test_record_marker_end_before_start_pairs(void **state)
{
    fp_agg *a = new_agg();
    char name[] = "prefill";
    CUpti_ActivityMarker2 s1 = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, T0 + 1000, name, NULL);
    CUpti_ActivityMarker2 e1 = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, T0 + 9000, NULL, NULL);
    CUpti_ActivityMarker2 e2 = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 2, T0 + 20000, NULL, NULL);
    CUpti_ActivityMarker2 s2 = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 2, T0 + 12000, "decode_step", "llm");
    CUpti_ActivityMarker2 s3 = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 3, T0 + 30000, "never_ends", NULL);
    CUpti_ActivityMarker2 e4 = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 4, T0 + 31000, NULL, NULL);
    CUpti_ActivityMarker2 mk = marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 5, T0 + 32000, "mark", NULL);
    const fp_event *e;
    (void)state;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s1), 0);
    memset(name, 'x', sizeof name - 1); /* CUPTI may reuse the memory */
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&e1), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&e2), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s2), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&s3), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&e4), 0);
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&mk), 0);
    fp_agg_finish(a);
    assert_int_equal(stat_of(a, FP_G_RANGE, "prefill")->total_ns, 8000);
    assert_int_equal(stat_of(a, FP_G_RANGE, "decode_step")->total_ns, 8000);
    assert_null(stat_of(a, FP_G_RANGE, "never_ends"));
    assert_int_equal(a->ranges, 2);
    assert_int_equal(a->ranges_unmatched_start, 1);
    assert_int_equal(a->ranges_unmatched_end, 1);
    assert_int_equal(a->instant_markers, 1);
    e = fp_agg_event_at(a, 1);
    assert_string_equal(fp_agg_name(a, e->name), "decode_step");
    assert_string_equal(fp_agg_name(a, e->u.range.domain), "llm");
    assert_int_equal(e->pid, 4242);
    assert_int_equal(e->tid, 4243);
    fp_agg_free(a);
}

static void test_record_external_correlation_and_unknown_kinds(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityExternalCorrelation x;
    CUpti_ActivityOverhead3 ov;
    uint64_t id = 0;
    uint32_t kind = 0;
    (void)state;
    memset(&x, 0, sizeof x);
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 123456789012ULL;
    x.correlationId = 11;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&x), 0);
    assert_int_equal(fp_agg_external_get(a, 11, &id, &kind), 0);
    assert_true(id == 123456789012ULL);
    assert_int_equal(kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
    assert_int_equal(fp_agg_external_get(a, 12, &id, &kind), -1);
    memset(&ov, 0, sizeof ov);
    ov.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&ov), 1);
    assert_int_equal(a->unknown_kinds, 1);
    assert_int_equal(a->records, 2);
    fp_agg_free(a);
}

static void test_record_untimed_kernel_counted_not_stored(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityKernel10 k = kernel("oom_kernel", 0, 0, 1);
    (void)state;
    assert_int_equal(fp_process_record(a, (CUpti_Activity *)&k), 0);
    assert_int_equal(stat_of(a, FP_G_KERNEL, "oom_kernel")->calls, 1);
    assert_int_equal(stat_of(a, FP_G_KERNEL, "oom_kernel")->timed, 0);
    assert_int_equal(a->untimed, 1);
    assert_int_equal(a->nevents, 0);
    fp_agg_free(a);
}

/* The whole path: records -> aggregator -> native session JSON, checked value by value. */
static void test_record_session_json_exact(void **state)
{
    fp_agg *a = new_agg();
    CUpti_ActivityMarker2 ms = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, T0 + 1000, "prefill", NULL);
    CUpti_ActivityMarker2 me = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, T0 + 100000, NULL, NULL);
    CUpti_ActivityAPI launch = api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0 + 2000, T0 + 2500, 5);
    CUpti_ActivityKernel10 k = kernel("_Z4gemmPKfS0_Pf", T0 + 3000, T0 + 53000, 5);
    CUpti_ActivityDevice5 dev;
    fp_session_meta m;
    fp_membuf out = {0};
    json_t *j, *evs, *ev;
    json_error_t je;
    char *s;
    (void)state;
    memset(&dev, 0, sizeof dev);
    dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    dev.id = 0;
    dev.name = "NVIDIA H100 80GB HBM3";
    dev.globalMemorySize = 85000000000ULL;
    dev.computeCapabilityMajor = 9;
    dev.numMultiprocessors = 132;
    dev.maxThreadsPerBlock = 1024;
    dev.maxWarpsPerMultiprocessor = 64;
    dev.numThreadsPerWarp = 32;
    dev.maxRegistersPerBlock = 65536;
    dev.maxSharedMemoryPerBlock = 49152;
    fp_process_record(a, (CUpti_Activity *)&dev);
    fp_process_record(a, (CUpti_Activity *)&ms);
    fp_process_record(a, (CUpti_Activity *)&k); /* GPU record arrives before its launch */
    fp_process_record(a, (CUpti_Activity *)&launch);
    fp_process_record(a, (CUpti_Activity *)&me);
    fp_agg_finish(a);
    fp_record_name_kernels(a);
    memset(&m, 0, sizeof m);
    m.name = "infer";
    m.pid = 4242;
    m.start_ns = (long long)T0;
    m.end_ns = (long long)T0 + 200000;
    assert_int_equal(fp_session_write(a, &m, NULL, 0, fp_membuf_write, &out), 0);
    j = json_loads(out.p, 0, &je);
    assert_non_null(j);
    s = json_dumps(json_object_get(json_object_get(j, "firstpass"), "aggregates"),
                   JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
        "{\"kernels\":[{\"name\":\"gemm(float const*, float const*, float*)\",\"calls\":1,"
        "\"total_ns\":50000,\"min_ns\":50000,\"max_ns\":50000,\"mangled\":\"_Z4gemmPKfS0_Pf\"}],"
        "\"apis\":[{\"name\":\"cudaLaunchKernel\",\"kind\":\"cuda_runtime\",\"calls\":1,"
        "\"total_ns\":500,\"min_ns\":500,\"max_ns\":500}],"
        "\"ranges\":[{\"name\":\"prefill\",\"calls\":1,\"total_ns\":99000,\"min_ns\":99000,\"max_ns\":99000}],"
        "\"memcpy\":[],\"syncs\":[]}");
    free(s);
    evs = json_object_get(j, "traceEvents");
    assert_int_equal(json_array_size(evs), 3);
    /* sorted by start: range (1 us), launch (2 us), kernel (3 us) */
    ev = json_array_get(evs, 0);
    assert_string_equal(json_string_value(json_object_get(ev, "cat")), "user_annotation");
    assert_true(json_real_value(json_object_get(ev, "ts")) == 1.0);
    assert_true(json_real_value(json_object_get(ev, "dur")) == 99.0);
    ev = json_array_get(evs, 1);
    assert_string_equal(json_string_value(json_object_get(ev, "cat")), "cuda_runtime");
    assert_string_equal(json_string_value(json_object_get(ev, "name")), "cudaLaunchKernel");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ev, "args"), "correlation")), 5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ev, "args"), "cbid")),
                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    assert_true(json_real_value(json_object_get(ev, "dur")) == 0.5);
    ev = json_array_get(evs, 2);
    assert_string_equal(json_string_value(json_object_get(ev, "cat")), "kernel");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ev, "args"), "correlation")), 5);
    assert_true(json_real_value(json_object_get(ev, "dur")) == 50.0);
    s = json_dumps(json_object_get(j, "deviceProperties"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
        "[{\"id\":0,\"name\":\"NVIDIA H100 80GB HBM3\",\"totalGlobalMem\":85000000000,\"computeMajor\":9,"
        "\"computeMinor\":0,\"numSms\":132,\"maxThreadsPerBlock\":1024,\"maxThreadsPerMultiprocessor\":2048,"
        "\"regsPerBlock\":65536,\"sharedMemPerBlock\":49152,\"warpSize\":32}]");
    free(s);
    json_decref(j);
    fp_membuf_free(&out);
    fp_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_kernel_demangled_with_mangled_kept),
        cmocka_unit_test(test_record_templates_stay_mangled_without_a_cxx_runtime),
        cmocka_unit_test(test_record_names_cached_by_pointer),
        cmocka_unit_test(test_record_api_names_stripped_and_cached),
        cmocka_unit_test(test_record_strip_version_only_trailing),
        cmocka_unit_test(test_record_memcpy_memset_names_and_bytes),
        cmocka_unit_test(test_record_sync_uses_context_device),
        cmocka_unit_test(test_record_sync_not_ready_polls_are_not_syncs),
        cmocka_unit_test(test_record_marker_end_before_start_pairs),
        cmocka_unit_test(test_record_external_correlation_and_unknown_kinds),
        cmocka_unit_test(test_record_untimed_kernel_counted_not_stored),
        cmocka_unit_test(test_record_session_json_exact),
    };
    return cmocka_run_group_tests_name("collector_record", tests, NULL, NULL);
}
