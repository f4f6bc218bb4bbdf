/* test_evq.c -- cmocka cases for server/ingest/evq.c: every event reaches the loader thread once,
 * in order, with its strings intact; the consumer's first error stops it and comes back
 * from evq_push / evq_finish; evq_free without evq_finish stops and drops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "ingest/evq.h"

#define N 20000 /* ~ 40 blocks: the queue fills and the request side waits */

typedef struct seen {
    long n;
    long fail_at; /* -1: never */
    int bad;
} seen;

static void make(ingest_event *e, long i, char *name, char *json) {
    memset(e, 0, sizeof *e);
    snprintf(name, 32, "op%ld", i);
    snprintf(json, 256, "{\"name\":\"op%ld\",\"ts\":%ld,\"pad\":\"%0100d\"}", i, i, 0);
    e->name = name;
    e->cat = "cpu_op";
    e->ph = "X";
    e->pid = "1";
    e->tid = i % 2 ? "2" : "3";
    e->ts = (double)i;
    e->has_ts = 1;
    e->shapes = i % 3 ? NULL : "[[2, 3]]";
    e->json = json;
    e->json_len = strlen(json);
}

static int consume(void *ctx, const ingest_event *e) {
    seen *s = ctx;
    char name[32], json[256];
    ingest_event want;
    make(&want, s->n, name, json);
    if (strcmp(e->name, want.name) || strcmp(e->tid, want.tid) || e->ts != want.ts || e->json_len != want.json_len ||
        memcmp(e->json, want.json, want.json_len) || e->json[e->json_len] != '\0' || (!e->shapes) != (!want.shapes) ||
        (e->shapes && strcmp(e->shapes, want.shapes)))
        s->bad = 1;
    if (s->n == s->fail_at) return ERR_DB;
    s->n++;
    return 0;
}

static void test_every_event_in_order(void **state) {
    (void)state;
    seen s = {0, -1, 0};
    evq *q = evq_new(consume, &s);
    assert_non_null(q);
    for (long i = 0; i < N; i++) {
        char name[32], json[256];
        ingest_event e;
        make(&e, i, name, json);
        assert_int_equal(evq_push(q, &e), 0);
    }
    assert_int_equal(evq_finish(q), 0);
    assert_int_equal(s.n, N); /* read after evq_finish: the thread has ended */
    assert_false(s.bad);
    evq_free(q);
}

static void test_consumer_error_comes_back(void **state) {
    (void)state;
    seen s = {0, 1000, 0};
    evq *q = evq_new(consume, &s);
    int rc = 0;
    long i;
    for (i = 0; i < N && !rc; i++) {
        char name[32], json[256];
        ingest_event e;
        make(&e, i, name, json);
        rc = evq_push(q, &e);
    }
    if (!rc) rc = evq_finish(q);
    else assert_int_equal(evq_finish(q), ERR_DB);
    assert_int_equal(rc, ERR_DB);
    assert_int_equal(s.n, 1000); /* nothing after the failing event was consumed */
    evq_free(q);
}

static void test_free_without_finish(void **state) {
    (void)state;
    seen s = {0, -1, 0};
    evq *q = evq_new(consume, &s);
    for (long i = 0; i < 3000; i++) {
        char name[32], json[256];
        ingest_event e;
        make(&e, i, name, json);
        assert_int_equal(evq_push(q, &e), 0);
    }
    evq_free(q); /* an abandoned upload: stops, frees; valgrind/ASan check the rest */
    assert_true(s.n <= 3000);
    assert_false(s.bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_in_order),
        cmocka_unit_test(test_consumer_error_comes_back),
        cmocka_unit_test(test_free_without_finish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
