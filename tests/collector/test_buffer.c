/* test_buffer.c -- cmocka cases for collector/buffer.c through the real libcupti (no GPU
 * needed: cuptiActivityGetNextRecord works on hand-built buffers, design note section 6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "agg.h"
#include "buffer.h"

#define T0 1700000000000000000ULL

typedef struct packer {
    uint8_t *buf;
    size_t len, cap;
    size_t last_off; /* offset of the last record packed */
} packer;

static void pack(packer *p, const void *rec, size_t n)
{
    assert_true(p->len + n <= p->cap);
    assert_int_equal(n % 8, 0); /* records are 8-byte aligned structs */
    memcpy(p->buf + p->len, rec, n);
    p->last_off = p->len;
    p->len += n;
}

static void pack_all(packer *p)
{
    CUpti_ActivityKernel10 k;
    CUpti_ActivityMemcpy6 m;
    CUpti_ActivityAPI a;
    CUpti_ActivityMarker2 mk;
    CUpti_ActivitySynchronization2 s;

    memset(&mk, 0, sizeof mk);
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    mk.id = 1;
    mk.timestamp = T0 + 10;
    mk.name = "prefill";
    pack(p, &mk, sizeof mk);

    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211;
    a.start = T0 + 20;
    a.end = T0 + 25;
    a.correlationId = 5;
    pack(p, &a, sizeof a);

    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "_Z4stepv";
    k.start = T0 + 30;
    k.end = T0 + 80;
    k.correlationId = 5;
    k.streamId = 7;
    pack(p, &k, sizeof k);

    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    m.bytes = 64;
    m.start = T0 + 90;
    m.end = T0 + 95;
    pack(p, &m, sizeof m);

    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s.start = T0 + 96;
    s.end = T0 + 99;
    pack(p, &s, sizeof s);

    memset(&mk, 0, sizeof mk);
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
    mk.id = 1;
    mk.timestamp = T0 + 100;
    pack(p, &mk, sizeof mk);
}

static int setup(void **state)
{
    packer *p = calloc(1, sizeof *p);
    p->cap = 64 * 1024;
    p->buf = aligned_alloc(8, p->cap);
    memset(p->buf, 0, p->cap);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    packer *p = *state;
    free(p->buf);
    free(p);
    return 0;
}

static void test_buffer_walks_every_record(void **state)
{
    packer *p = *state;
    fp_agg *a = fp_agg_new(NULL);
    uint32_t k;
    pack_all(p);
    assert_int_equal(fp_process_buffer(a, p->buf, p->len), 6);
    assert_int_equal(a->records, 6);
    assert_int_equal(a->buffer_errors, 0);
    assert_int_equal(a->ranges, 1);
    k = fp_agg_intern(a, "_Z4stepv");
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].total_ns, 50);
    assert_int_equal(a->nevents, 5); /* range, api, kernel, memcpy, sync */
    fp_agg_free(a);
}

static void test_buffer_truncated_last_record_is_skipped(void **state)
{
    packer *p = *state;
    fp_agg *a = fp_agg_new(NULL);
    pack_all(p);
    /* validSize ends 8 bytes into the last record (the END marker) */
    assert_int_equal(fp_process_buffer(a, p->buf, p->last_off + 8), 5);
    assert_int_equal(a->buffer_errors, 0);
    assert_int_equal(a->ranges, 0);
    assert_int_equal(a->npending, 1);
    fp_agg_finish(a);
    assert_int_equal(a->ranges_unmatched_start, 1);
    fp_agg_free(a);
}

static void test_buffer_empty_and_invalid(void **state)
{
    packer *p = *state;
    fp_agg *a = fp_agg_new(NULL);
    uint32_t bad = 9999;
    assert_int_equal(fp_process_buffer(a, p->buf, 0), 0);
    pack_all(p);
    memcpy(p->buf + p->last_off, &bad, sizeof bad); /* corrupt the kind of the last record */
    assert_int_equal(fp_process_buffer(a, p->buf, p->len), -1);
    assert_int_equal(a->records, 5);
    assert_int_equal(a->buffer_errors, 1);
    assert_int_equal(fp_process_buffer(a, NULL, 100), -1);
    assert_int_equal(a->buffer_errors, 2);
    fp_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_buffer_walks_every_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer_truncated_last_record_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer_empty_and_invalid, setup, teardown),
    };
    return cmocka_run_group_tests_name("collector_buffer", tests, NULL, NULL);
}
