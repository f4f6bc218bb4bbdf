/* test_strtab.c: store/strtab.c, the string table read as fp_strings(P). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "lib/intern.h"
#include "store/strtab.h"

static sqlite3 *open_db(void) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(strtab_register(db), SQLITE_OK);
    assert_int_equal(strtab_register(db), SQLITE_OK); /* again: replaced, as each commit does */
    return db;
}

/* Every string once, in id order, its text whole (an embedded quote, a long one). */
static void test_strtab_rows_in_id_order(void **state) {
    (void)state;
    intern *t = intern_new();
    char k[4096];
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof k, "void kernel<%d>(\"Params\")", i);
        assert_int_equal(intern_id(t, k, strlen(k)), i);
    }
    memset(k, 'x', sizeof k - 1);
    k[sizeof k - 1] = '\0';
    assert_int_equal(intern_id(t, k, strlen(k)), 2000);
    sqlite3 *db = open_db();
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, s FROM fp_strings(?) ORDER BY id", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_bind_pointer(s, 1, t, STRTAB_POINTER, NULL), SQLITE_OK);
    long n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        assert_int_equal(sqlite3_column_int64(s, 0), n);
        assert_string_equal((const char *)sqlite3_column_text(s, 1), intern_str(t, n));
        n++;
    }
    assert_int_equal(n, 2001);
    sqlite3_finalize(s);
    /* an INSERT ... SELECT, as the commit writes the strings table */
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE strings(session_id INT, id INT, s TEXT, PRIMARY KEY (session_id, id)) WITHOUT ROWID",
                                  NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO strings SELECT 7, id, s FROM fp_strings(?) ORDER BY id", -1, &s, NULL), SQLITE_OK);
    sqlite3_bind_pointer(s, 1, t, STRTAB_POINTER, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_changes(db), 2001);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT length(s) FROM strings WHERE id = 2000", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), (int)sizeof k - 1);
    sqlite3_finalize(s);
    sqlite3_close(db);
    intern_free(t);
}

/* No table bound, or a pointer of another type (or a plain value): no rows, never a read
 * of what is not an intern table. Without the argument there is no plan at all. */
static void test_strtab_needs_its_pointer(void **state) {
    (void)state;
    intern *t = intern_new();
    assert_int_equal(intern_id(t, "a", 1), 0);
    sqlite3 *db = open_db();
    for (int how = 0; how < 3; how++) {
        sqlite3_stmt *s = NULL;
        assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM fp_strings(?)", -1, &s, NULL), SQLITE_OK);
        if (how == 1) sqlite3_bind_pointer(s, 1, t, "something-else", NULL);
        if (how == 2) sqlite3_bind_int64(s, 1, (sqlite3_int64)(intptr_t)t);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(s, 0), 0);
        sqlite3_finalize(s);
    }
    sqlite3_stmt *s = NULL;
    assert_int_not_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM fp_strings", -1, &s, NULL), SQLITE_OK);
    sqlite3_finalize(s);
    sqlite3_close(db);
    intern_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strtab_rows_in_id_order),
        cmocka_unit_test(test_strtab_needs_its_pointer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
