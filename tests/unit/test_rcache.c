/* test_rcache.c -- cmocka cases for server/http/rcache.c (the reply cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"
#include "http/rcache.h"
#include "store/store.h"

static int get(rcache *c, const char *key, unsigned long gen, char *out, size_t n) {
    char *b = NULL;
    size_t len = 0;
    const char *ct = NULL;
    unsigned fl = 0;
    if (!rcache_get(c, key, gen, &b, &len, &ct, &fl)) return 0;
    snprintf(out, n, "%.*s|%s|%u", (int)len, b, ct, fl);
    free(b);
    return 1;
}

static void test_rcache_hit_copy_and_flags(void **state)
{
    (void)state;
    rcache *c = rcache_new(1 << 20);
    char v[64];
    assert_int_equal(get(c, "/a?", 1, v, sizeof v), 0);
    rcache_put(c, "/a?", 1, "{\"x\":1}\n", 8, "application/json", 3);
    assert_int_equal(get(c, "/a?", 1, v, sizeof v), 1);
    assert_string_equal(v, "{\"x\":1}\n|application/json|3");
    unsigned long long h, m;
    size_t bytes;
    rcache_stats(c, &h, &m, &bytes);
    assert_int_equal(h, 1);
    assert_int_equal(m, 1);
    assert_true(bytes > 8);
    rcache_free(c);
}

static void test_rcache_a_write_generation_misses_and_drops(void **state)
{
    (void)state;
    rcache *c = rcache_new(1 << 20);
    char v[64];
    rcache_put(c, "/r", 7, "old", 3, "text/plain", 0);
    assert_int_equal(get(c, "/r", 8, v, sizeof v), 0); /* rendered before the write */
    assert_int_equal(get(c, "/r", 7, v, sizeof v), 0); /* and dropped, not kept for later */
    rcache_put(c, "/r", 8, "new", 3, "text/plain", 0);
    rcache_put(c, "/r", 8, "newer", 5, "text/plain", 0); /* replaces */
    assert_int_equal(get(c, "/r", 8, v, sizeof v), 1);
    assert_string_equal(v, "newer|text/plain|0");
    rcache_free(c);
}

static void test_rcache_evicts_least_recently_used(void **state)
{
    (void)state;
    char body[1000], key[16], v[1100];
    memset(body, 'x', sizeof body);
    rcache *c = rcache_new(8000); /* room for about six 1000-byte entries */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "/k%d", i);
        rcache_put(c, key, 1, body, sizeof body, "t", 0);
    }
    assert_int_equal(get(c, "/k0", 1, v, sizeof v), 1); /* k0 is now the most recent */
    for (int i = 5; i < 9; i++) {
        snprintf(key, sizeof key, "/k%d", i);
        rcache_put(c, key, 1, body, sizeof body, "t", 0);
    }
    assert_int_equal(get(c, "/k0", 1, v, sizeof v), 1);
    assert_int_equal(get(c, "/k1", 1, v, sizeof v), 0); /* the oldest went first */
    assert_int_equal(get(c, "/k8", 1, v, sizeof v), 1);
    size_t bytes;
    unsigned long long h, m;
    rcache_stats(c, &h, &m, &bytes);
    assert_true(bytes <= 8000);
    rcache_free(c);
}

static void test_rcache_many_keys_grow_the_table(void **state)
{
    (void)state;
    rcache *c = rcache_new(64 << 20);
    char key[32], v[64];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "/s/%d/operators?", i);
        rcache_put(c, key, 1, key, strlen(key), "t", 0);
    }
    for (int i = 0; i < 5000; i += 499) {
        snprintf(key, sizeof key, "/s/%d/operators?", i);
        assert_int_equal(get(c, key, 1, v, sizeof v), 1);
        assert_int_equal(strncmp(v, key, strlen(key)), 0);
    }
    rcache_free(c);
}

static void test_rcache_off_and_oversized(void **state)
{
    (void)state;
    char v[64];
    rcache *off = rcache_new(0);
    rcache_put(off, "/a", 1, "x", 1, "t", 0);
    assert_int_equal(get(off, "/a", 1, v, sizeof v), 0);
    rcache_free(off);
    rcache *c = rcache_new(4000);
    char big[2000] = {0};
    rcache_put(c, "/big", 1, big, sizeof big, "t", 0); /* over a quarter of the budget */
    assert_int_equal(get(c, "/big", 1, v, sizeof v), 0);
    rcache_free(c);
    rcache_free(NULL);
}

/* What each kind of write bumps: the list generation moves with uploads as well, the
 * session generation only with changes to stored sessions (routes.c picks one per route). */
static void test_store_generations_for_uploads_and_writes(void **state)
{
    (void)state;
    char path[] = "/tmp/fp-test-gen-XXXXXX", db[64], err[256];
    assert_non_null(mkdtemp(path));
    snprintf(db, sizeof db, "%s/db", path);
    store *st = store_open(db, err, sizeof err);
    assert_non_null(st);
    unsigned long g = store_generation(st), l = store_list_generation(st);
    store_note_upload(st);
    assert_int_equal(store_generation(st), g);
    assert_int_equal(store_list_generation(st), l + 1);
    /* No such session, but the DELETE ran and committed: both move. */
    assert_int_equal(store_delete_session(st, 12345), ERR_NOTFOUND);
    assert_int_equal(store_generation(st), g + 1);
    assert_int_equal(store_list_generation(st), l + 2);
    store_close(st);
    char f[96];
    const char *const suffix[] = {"", "-wal", "-shm", "-lock", "-reserve"};
    for (int i = 0; i < 5; i++) { snprintf(f, sizeof f, "%s%s", db, suffix[i]); remove(f); }
    rmdir(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rcache_hit_copy_and_flags),
        cmocka_unit_test(test_rcache_a_write_generation_misses_and_drops),
        cmocka_unit_test(test_rcache_evicts_least_recently_used),
        cmocka_unit_test(test_rcache_many_keys_grow_the_table),
        cmocka_unit_test(test_rcache_off_and_oversized),
        cmocka_unit_test(test_store_generations_for_uploads_and_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
