/* test_agg.c -- cmocka cases for collector/agg.c, demangle.c and session_json.c (no CUPTI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "demangle.h"
#include "session_json.h"

static void test_agg_intern_is_stable(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t x, y, ids[5000];
    char buf[32];
    int i;
    (void)state;
    x = fp_agg_intern(a, "gemm");
    y = fp_agg_intern(a, "gemv");
    assert_int_not_equal(x, y);
    assert_int_equal(fp_agg_intern(a, "gemm"), x);
    assert_int_equal(fp_agg_intern_n(a, "gemmXYZ", 4), x);
    assert_string_equal(fp_agg_name(a, y), "gemv");
    for (i = 0; i < 5000; i++) { /* forces several rehashes and arena blocks */
        snprintf(buf, sizeof buf, "name-%d", i);
        ids[i] = fp_agg_intern(a, buf);
    }
    for (i = 0; i < 5000; i++) {
        snprintf(buf, sizeof buf, "name-%d", i);
        assert_int_equal(fp_agg_intern(a, buf), ids[i]);
        assert_string_equal(fp_agg_name(a, ids[i]), buf);
    }
    assert_int_equal(fp_agg_intern(a, NULL), FP_NAME_NONE);
    assert_string_equal(fp_agg_name(a, FP_NAME_NONE), "");
    assert_int_equal(a->nnames, 5002);
    fp_agg_free(a);
}

static void test_agg_stat_min_max_total(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t k = fp_agg_intern(a, "k");
    const fp_stat *s;
    (void)state;
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 1000, 1300, 0), 0);
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 2000, 2100, 0), 0);
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 3000, 3700, 0), 0);
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 0, 3700, 0), 0);    /* untimed */
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 5000, 4000, 0), 0); /* end < start */
    s = &a->stats[FP_G_KERNEL].v[k];
    assert_int_equal(s->calls, 5);
    assert_int_equal(s->timed, 3);
    assert_int_equal(s->total_ns, 1100);
    assert_int_equal(s->min_ns, 100);
    assert_int_equal(s->max_ns, 700);
    assert_int_equal(a->untimed, 2);
    assert_int_equal(fp_agg_stat(a, FP_G__N, k, 1, 2, 0), -1);
    fp_agg_free(a);
}

/* Records stamped on another clock (torch.profiler's TSC timestamp callback) are counted, not
 * timed: without the window a kernel "lasting" 1e18 ns would dominate every table. */
static void test_agg_records_outside_the_window_are_clock_outliers(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t k = fp_agg_intern(a, "k");
    fp_event e;
    (void)state;
    a->win_lo = 1000;
    a->win_hi = 5000;
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 1000, 1300, 0), 0);
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 10, 20, 0), 0);       /* before */
    assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, 4000, 9000, 0), 0);   /* ends after */
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].calls, 3);
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].timed, 1);
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].total_ns, 300);
    assert_int_equal(a->clock_outliers, 2);
    assert_int_equal(a->untimed, 0);
    memset(&e, 0, sizeof e);
    e.name = k;
    e.start_ns = 10;
    e.end_ns = 20;
    assert_int_equal(fp_agg_event(a, &e), 1);
    e.start_ns = 2000;
    e.end_ns = 2500;
    assert_int_equal(fp_agg_event(a, &e), 0);
    assert_int_equal(a->nevents, 1);
    fp_agg_free(a);
}

static void test_agg_u64map_delete_keeps_probe_runs(void **state)
{
    fp_u64map m = {0};
    uint64_t v, i;
    (void)state;
    for (i = 0; i < 10000; i++)
        assert_int_equal(fp_u64map_put(&m, i * 7919, i), 0);
    assert_int_equal(m.n, 10000);
    for (i = 0; i < 10000; i += 2)
        assert_int_equal(fp_u64map_del(&m, i * 7919), 0);
    assert_int_equal(fp_u64map_del(&m, 0), -1);
    for (i = 0; i < 10000; i++) {
        if (i % 2 == 0) {
            assert_int_equal(fp_u64map_get(&m, i * 7919, &v), -1);
        } else {
            assert_int_equal(fp_u64map_get(&m, i * 7919, &v), 0);
            assert_int_equal(v, i);
        }
    }
    assert_int_equal(m.n, 5000);
    fp_u64map_free(&m);
}

static void test_agg_range_pairs_in_either_order(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t pre = fp_agg_intern(a, "prefill"), dec = fp_agg_intern(a, "decode_step");
    uint32_t dom = fp_agg_intern(a, "llm");
    const fp_event *e;
    (void)state;
    /* START then END */
    assert_int_equal(fp_agg_range_start(a, 1, 1000, pre, FP_NAME_NONE, 10, 11), 0);
    assert_int_equal(a->npending, 1);
    assert_int_equal(fp_agg_range_end(a, 1, 5000), 0);
    assert_int_equal(a->npending, 0);
    /* END before START (per-thread buffers) */
    assert_int_equal(fp_agg_range_end(a, 2, 9000), 0);
    assert_int_equal(a->npending, 1);
    assert_int_equal(fp_agg_range_start(a, 2, 6000, dec, dom, 10, 12), 0);
    assert_int_equal(a->npending, 0);
    assert_int_equal(a->ranges, 2);
    assert_int_equal(a->stats[FP_G_RANGE].v[pre].total_ns, 4000);
    assert_int_equal(a->stats[FP_G_RANGE].v[dec].total_ns, 3000);
    assert_int_equal(a->nevents, 2);
    e = fp_agg_event_at(a, 1);
    assert_int_equal(e->cat, FP_CAT_RANGE);
    assert_int_equal(e->name, dec);
    assert_int_equal(e->start_ns, 6000);
    assert_int_equal(e->end_ns, 9000);
    assert_int_equal(e->u.range.domain, dom);
    assert_int_equal(e->tid, 12);
    /* duplicates and unmatched halves are counted, never invented */
    assert_int_equal(fp_agg_range_start(a, 3, 100, pre, FP_NAME_NONE, 1, 1), 0);
    assert_int_equal(fp_agg_range_start(a, 3, 200, pre, FP_NAME_NONE, 1, 1), 0);
    assert_int_equal(fp_agg_range_end(a, 4, 300), 0);
    assert_int_equal(fp_agg_range_end(a, 4, 400), 0);
    assert_int_equal(fp_agg_range_end(a, 5, 500), 0);
    assert_int_equal(a->ranges_duplicate, 2);
    fp_agg_finish(a);
    assert_int_equal(a->ranges_unmatched_start, 1);
    assert_int_equal(a->ranges_unmatched_end, 2);
    assert_int_equal(a->ranges, 2);
    assert_int_equal(a->nevents, 2);
    fp_agg_free(a);
}

static void test_agg_range_with_unknown_timestamp_is_untimed(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t r = fp_agg_intern(a, "r");
    (void)state;
    assert_int_equal(fp_agg_range_start(a, 9, 0, r, FP_NAME_NONE, 1, 1), 0);
    assert_int_equal(fp_agg_range_end(a, 9, 100), 0);
    assert_int_equal(a->stats[FP_G_RANGE].v[r].calls, 1);
    assert_int_equal(a->stats[FP_G_RANGE].v[r].timed, 0);
    assert_int_equal(a->untimed, 1);
    assert_int_equal(a->nevents, 0);
    fp_agg_free(a);
}

static void test_agg_move_pending_carries_open_ranges(void **state)
{
    fp_agg *a = fp_agg_new(NULL), *b = fp_agg_new(NULL);
    uint32_t r = fp_agg_intern(a, "serve"), rb;
    (void)state;
    fp_agg_intern(b, "something else first");
    assert_int_equal(fp_agg_range_start(a, 7, 1000, r, FP_NAME_NONE, 1, 2), 0);
    assert_int_equal(fp_agg_move_pending(a, b), 0);
    assert_int_equal(a->npending, 0);
    assert_int_equal(fp_agg_range_end(b, 7, 4000), 0);
    rb = fp_agg_intern(b, "serve");
    assert_int_equal(b->stats[FP_G_RANGE].v[rb].total_ns, 3000);
    fp_agg_finish(a);
    assert_int_equal(a->ranges_unmatched_start, 0);
    fp_agg_free(a);
    fp_agg_free(b);
}

static fp_event kernel_event(uint32_t name, int64_t s, int64_t e)
{
    fp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.cat = FP_CAT_KERNEL;
    ev.name = name;
    ev.start_ns = s;
    ev.end_ns = e;
    ev.u.k.mangled = FP_NAME_NONE;
    return ev;
}

static void test_agg_event_cap_truncates_but_keeps_aggregating(void **state)
{
    fp_agg_config cfg = {1, 3};
    fp_agg *a = fp_agg_new(&cfg);
    uint32_t k = fp_agg_intern(a, "k");
    int i;
    (void)state;
    for (i = 0; i < 5; i++) {
        fp_event e = kernel_event(k, 1000 * (i + 1), 1000 * (i + 1) + 10);
        assert_int_equal(fp_agg_stat(a, FP_G_KERNEL, k, (uint64_t)e.start_ns, (uint64_t)e.end_ns, 0), 0);
        assert_int_equal(fp_agg_event(a, &e), i < 3 ? 0 : 1);
    }
    assert_int_equal(a->nevents, 3);
    assert_int_equal(a->events_seen, 5);
    assert_int_equal(a->events_truncated, 1);
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].calls, 5);
    assert_int_equal(a->stats[FP_G_KERNEL].v[k].total_ns, 50);
    fp_agg_free(a);
}

static void test_agg_events_off_stores_nothing(void **state)
{
    fp_agg_config cfg = {0, 100};
    fp_agg *a = fp_agg_new(&cfg);
    fp_event e = kernel_event(fp_agg_intern(a, "k"), 1, 2);
    (void)state;
    assert_int_equal(fp_agg_event(a, &e), 1);
    assert_int_equal(a->nevents, 0);
    assert_int_equal(a->events_truncated, 0);
    fp_agg_free(a);
}

static void test_agg_events_span_chunks(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    uint32_t k = fp_agg_intern(a, "k");
    size_t i, n = FP_EVENT_CHUNK * 2 + 5;
    (void)state;
    for (i = 0; i < n; i++) {
        fp_event e = kernel_event(k, (int64_t)i + 1, (int64_t)i + 2);
        assert_int_equal(fp_agg_event(a, &e), 0);
    }
    assert_int_equal(a->nchunks, 3);
    for (i = 0; i < n; i++)
        assert_int_equal(fp_agg_event_at(a, i)->start_ns, (int64_t)i + 1);
    assert_null(fp_agg_event_at(a, n));
    fp_agg_free(a);
}

/* Expected strings are c++filt's output for the same inputs. */
static void test_demangle_matches_cxxfilt(void **state)
{
    static const char *cases[][2] = {
        {"_Z6kernelPfS_i", "kernel(float*, float*, int)"},
        {"_Z9vectorAddPKfS0_Pfi", "vectorAdd(float const*, float const*, float*, int)"},
        {"_Z3fooPKfS0_S_", "foo(float const*, float const*, float const)"},
        {"_ZN2ns3fooEv", "ns::foo()"},
        {"_ZN2ns3fooENS_3BarE", "ns::foo(ns::Bar)"},
        {"_ZN1a1fENS_1BES0_", "a::f(a::B, a::B)"},
        {"_ZN1a1b1cEPNS0_1dE", "a::b::c(a::b::d*)"},
        {"_Z1fN1a1bEPS0_", "f(a::b, a::b*)"},
        {"_Z1fRiOdPVKc", "f(int&, double&&, char const volatile*)"},
        {"_ZN12_GLOBAL__N_16kernelEPf", "(anonymous namespace)::kernel(float*)"},
        {"_Z5k_intjjmy", "k_int(unsigned int, unsigned int, unsigned long, unsigned long long)"},
        {"_Z1fv", "f()"},
    };
    static const char *keep[] = {
        "_Z6kernelILi4EEvPf",       /* template */
        "_ZN2ns3fooES0_",           /* bad substitution (c++filt fails too) */
        "_ZNSt6vectorIiE9push_backEOi", /* std:: */
        "_Z1fPFviE",                /* function pointer */
        "kernel_c",                 /* extern "C" */
        "_Z",
        "_Z3fo",                    /* truncated */
        "",
    };
    char buf[256];
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(fp_demangle(cases[i][0], buf, sizeof buf), 0);
        assert_string_equal(buf, cases[i][1]);
    }
    for (i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        assert_int_equal(fp_demangle(keep[i], buf, sizeof buf), -1);
        assert_string_equal(buf, "");
    }
    assert_int_equal(fp_demangle("_Z6kernelPfS_i", buf, 8), -1); /* output too small */
    assert_int_equal(fp_demangle(NULL, buf, sizeof buf), -1);
}

/* test_agg links libstdc++ (as every CUDA C++ program does): fp_demangle_full must find
 * __cxa_demangle and name the templates that make up nearly all PyTorch and CUTLASS kernels.
 * (test_record has no C++ runtime and checks the fallback.) */
static void test_demangle_full_names_templates_with_the_cxx_runtime(void **state)
{
    static const char *cases[][2] = {
        {"_ZN4vllm13decode_kernelIfLi128EEEvPT_PKS1_i",
         "void vllm::decode_kernel<float, 128>(float*, float const*, int)"},
        {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
         "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
         "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"},
        {"_Z14matmul_prefillPKfS0_Pfi", "matmul_prefill(float const*, float const*, float*, int)"},
    };
    char out[1024];
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(fp_demangle_full(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    assert_int_equal(fp_demangle_full("plain_c_kernel", out, sizeof out), -1); /* extern "C" */
    assert_string_equal(out, "");
    assert_int_equal(fp_demangle_full("_Z1fILi", out, sizeof out), -1);        /* broken */
    assert_int_equal(fp_demangle_full(cases[0][0], out, 10), -1);              /* too long */
}

static void test_session_json_format_us(void **state)
{
    char b[32];
    (void)state;
    fp_format_us(0, b, sizeof b);
    assert_string_equal(b, "0.000");
    fp_format_us(12345678, b, sizeof b);
    assert_string_equal(b, "12345.678");
    fp_format_us(-1500, b, sizeof b);
    assert_string_equal(b, "-1.500");
    fp_format_us(999, b, sizeof b);
    assert_string_equal(b, "0.999");
}

static void meta_init(fp_session_meta *m)
{
    memset(m, 0, sizeof *m);
    m->name = "t";
    m->host = "h";
    m->pid = 42;
    m->command = "./t";
    m->cupti_version = 130001;
    m->start_ns = 1000000;
    m->end_ns = 2000000;
}

static json_t *write_and_parse(const fp_agg *a, const fp_session_meta *m, fp_membuf *out)
{
    json_error_t je;
    json_t *j;
    const char *w[] = {"w1"};
    memset(out, 0, sizeof *out);
    assert_int_equal(fp_session_write(a, m, w, 1, fp_membuf_write, out), 0);
    j = json_loads(out->p, 0, &je);
    if (j == NULL)
        fail_msg("invalid JSON at %d: %s", je.position, je.text);
    return j;
}

static void test_session_json_events_exact_and_sorted(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    fp_session_meta m;
    fp_membuf out;
    fp_event e;
    json_t *j, *ev, *fp;
    uint32_t k = fp_agg_intern(a, "kernel(float*)"), mg = fp_agg_intern(a, "_Z6kernelPf");
    (void)state;
    meta_init(&m);
    /* a range that encloses the kernel, added after it: output must put the range first */
    e = kernel_event(k, 1002000, 1003500);
    e.pid = 0;
    e.tid = 7;
    e.correlation = 5;
    e.u.k.grid[0] = 4; e.u.k.grid[1] = 1; e.u.k.grid[2] = 1;
    e.u.k.block[0] = 128; e.u.k.block[1] = 1; e.u.k.block[2] = 1;
    e.u.k.registers = 32;
    e.u.k.static_smem = 1024;
    e.u.k.dynamic_smem = 256;
    e.u.k.context = 1;
    e.u.k.mangled = mg;
    assert_int_equal(fp_agg_event(a, &e), 0);
    assert_int_equal(fp_agg_range_start(a, 1, 1001000, fp_agg_intern(a, "pre\"fill\n"), FP_NAME_NONE, 42, 43), 0);
    assert_int_equal(fp_agg_range_end(a, 1, 1004000), 0);
    fp_agg_external(a, 5, 3, 777);
    a->dropped_records = 9;
    j = write_and_parse(a, &m, &out);
    assert_non_null(strstr(out.p,
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"pre\\\"fill\\n\",\"pid\":42,"
        "\"tid\":43,\"ts\":1.000,\"dur\":3.000,\"args\":{\"domain\":\"default\"}},\n"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"kernel(float*)\",\"pid\":0,\"tid\":7,"
        "\"ts\":2.000,\"dur\":1.500,\"args\":{\"correlation\":5,\"device\":0,\"stream\":7,"
        "\"context\":1,\"grid\":[4,1,1],\"block\":[128,1,1],\"registers per thread\":32,"
        "\"shared memory\":1280,\"static shared memory\":1024,\"dynamic shared memory\":256,"
        "\"mangled\":\"_Z6kernelPf\",\"external id\":777,\"external kind\":3}}]}"));
    assert_int_equal(json_integer_value(json_object_get(j, "schemaVersion")), 1);
    ev = json_object_get(j, "traceEvents");
    assert_int_equal(json_array_size(ev), 2);
    fp = json_object_get(j, "firstpass");
    assert_string_equal(json_string_value(json_object_get(fp, "format")), "firstpass-session");
    assert_int_equal(json_integer_value(json_object_get(fp, "dropped_records")), 9);
    assert_true(json_is_false(json_object_get(fp, "events_truncated")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(fp, "warnings"), 0)), "w1");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(fp, "collector"), "events_written")), 2);
    assert_int_equal(json_array_size(json_object_get(j, "deviceProperties")), 0);
    json_decref(j);
    fp_membuf_free(&out);
    fp_agg_free(a);
}

static void test_session_json_aggregates_sorted_exact(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    fp_session_meta m;
    fp_membuf out;
    json_t *j, *ag;
    char *s;
    uint32_t small = fp_agg_intern(a, "_Z5smallv"), big = fp_agg_intern(a, "big_c_kernel");
    uint32_t h2d = fp_agg_intern(a, "Memcpy HtoD (Pageable -> Device)");
    uint32_t launch = fp_agg_intern(a, "cudaLaunchKernel"), cu = fp_agg_intern(a, "cuLaunchKernel");
    uint32_t disp = fp_agg_intern(a, "small()");
    fp_device *d = fp_agg_device(a, 0);
    (void)state;
    a->display_cap = 16;
    a->display = calloc(16, sizeof *a->display);
    a->display[small] = disp + 1;
    fp_agg_stat(a, FP_G_KERNEL, small, 100, 110, 0);
    fp_agg_stat(a, FP_G_KERNEL, small, 200, 230, 0);
    fp_agg_stat(a, FP_G_KERNEL, big, 300, 1300, 0);
    fp_agg_stat(a, FP_G_MEMCPY, h2d, 10, 20, 4096);
    fp_agg_stat(a, FP_G_RUNTIME, launch, 10, 15, 0);
    fp_agg_stat(a, FP_G_DRIVER, cu, 10, 12, 0);
    fp_agg_stat(a, FP_G_DRIVER, cu, 0, 12, 0);
    d->present = 1;
    snprintf(d->name, sizeof d->name, "NVIDIA H100 80GB HBM3");
    d->total_mem = 85000000000LL;
    d->cc_major = 9;
    d->num_sms = 132;
    d->warp_size = 32;
    meta_init(&m);
    j = write_and_parse(a, &m, &out);
    ag = json_object_get(json_object_get(j, "firstpass"), "aggregates");
    s = json_dumps(ag, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
        "{\"kernels\":[{\"name\":\"big_c_kernel\",\"calls\":1,\"total_ns\":1000,\"min_ns\":1000,\"max_ns\":1000},"
        "{\"name\":\"small()\",\"calls\":2,\"total_ns\":40,\"min_ns\":10,\"max_ns\":30,\"mangled\":\"_Z5smallv\"}],"
        "\"apis\":[{\"name\":\"cudaLaunchKernel\",\"kind\":\"cuda_runtime\",\"calls\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5},"
        "{\"name\":\"cuLaunchKernel\",\"kind\":\"cuda_driver\",\"calls\":2,\"total_ns\":2,\"min_ns\":2,\"max_ns\":2,\"untimed\":1}],"
        "\"ranges\":[],"
        "\"memcpy\":[{\"name\":\"Memcpy HtoD (Pageable -> Device)\",\"calls\":1,\"total_ns\":10,\"min_ns\":10,\"max_ns\":10,\"bytes\":4096}],"
        "\"syncs\":[]}");
    free(s);
    s = json_dumps(json_object_get(j, "deviceProperties"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
        "[{\"id\":0,\"name\":\"NVIDIA H100 80GB HBM3\",\"totalGlobalMem\":85000000000,\"computeMajor\":9,"
        "\"computeMinor\":0,\"numSms\":132,\"maxThreadsPerBlock\":0,\"maxThreadsPerMultiprocessor\":0,"
        "\"regsPerBlock\":0,\"sharedMemPerBlock\":0,\"warpSize\":32}]");
    free(s);
    json_decref(j);
    fp_membuf_free(&out);
    fp_agg_free(a);
}

static void test_session_json_escapes_bad_utf8_and_controls(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    fp_session_meta m;
    fp_membuf out;
    json_t *j;
    fp_event e = kernel_event(fp_agg_intern(a, "a\x01\xff" "b\xc3\xa9\\"), 1000001, 1000002);
    (void)state;
    meta_init(&m);
    fp_agg_event(a, &e);
    j = write_and_parse(a, &m, &out);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(j, "traceEvents"), 0), "name")),
                        "a\x01?b\xc3\xa9\\");
    json_decref(j);
    fp_membuf_free(&out);
    fp_agg_free(a);
}

static int fail_sink(void *ctx, const char *p, size_t n)
{
    (void)ctx;
    (void)p;
    (void)n;
    return -1;
}

static void test_session_json_sink_error_is_reported(void **state)
{
    fp_agg *a = fp_agg_new(NULL);
    fp_session_meta m;
    (void)state;
    meta_init(&m);
    assert_int_equal(fp_session_write(a, &m, NULL, 0, fail_sink, NULL), -1);
    fp_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agg_intern_is_stable),
        cmocka_unit_test(test_agg_stat_min_max_total),
        cmocka_unit_test(test_agg_records_outside_the_window_are_clock_outliers),
        cmocka_unit_test(test_agg_u64map_delete_keeps_probe_runs),
        cmocka_unit_test(test_agg_range_pairs_in_either_order),
        cmocka_unit_test(test_agg_range_with_unknown_timestamp_is_untimed),
        cmocka_unit_test(test_agg_move_pending_carries_open_ranges),
        cmocka_unit_test(test_agg_event_cap_truncates_but_keeps_aggregating),
        cmocka_unit_test(test_agg_events_off_stores_nothing),
        cmocka_unit_test(test_agg_events_span_chunks),
        cmocka_unit_test(test_demangle_matches_cxxfilt),
        cmocka_unit_test(test_demangle_full_names_templates_with_the_cxx_runtime),
        cmocka_unit_test(test_session_json_format_us),
        cmocka_unit_test(test_session_json_events_exact_and_sorted),
        cmocka_unit_test(test_session_json_aggregates_sorted_exact),
        cmocka_unit_test(test_session_json_escapes_bad_utf8_and_controls),
        cmocka_unit_test(test_session_json_sink_error_is_reported),
    };
    return cmocka_run_group_tests_name("collector_agg", tests, NULL, NULL);
}
