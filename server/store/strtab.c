/* strtab.c: fp_strings(P), the string table as an eponymous table-valued function (strtab.h). */
#include "store/strtab.h"

#include <stdlib.h>
#include <string.h>

#include "lib/intern.h"

typedef struct {
    sqlite3_vtab_cursor base;
    const intern *strs; /* NULL: no rows */
    size_t i, n;
} cursor;

enum { COL_ID, COL_S, COL_P }; /* COL_P: the hidden argument */

static int st_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out, char **err) {
    (void)aux, (void)argc, (void)argv, (void)err;
    int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(id INTEGER, s TEXT, p HIDDEN)");
    if (rc != SQLITE_OK) return rc;
    *out = sqlite3_malloc(sizeof **out);
    if (!*out) return SQLITE_NOMEM;
    memset(*out, 0, sizeof **out);
    return SQLITE_OK;
}

static int st_disconnect(sqlite3_vtab *v) {
    sqlite3_free(v);
    return SQLITE_OK;
}

/* The one plan: p given (argvIndex 1). Without it the table is not usable: a constraint on
 * the hidden column is what makes fp_strings(?) a function call. */
static int st_best_index(sqlite3_vtab *v, sqlite3_index_info *ix) {
    (void)v;
    for (int i = 0; i < ix->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &ix->aConstraint[i];
        if (c->iColumn != COL_P || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
        if (!c->usable) return SQLITE_CONSTRAINT;
        ix->aConstraintUsage[i].argvIndex = 1;
        ix->aConstraintUsage[i].omit = 1;
        ix->estimatedCost = 1000;
        ix->orderByConsumed = ix->nOrderBy == 1 && ix->aOrderBy[0].iColumn == COL_ID && !ix->aOrderBy[0].desc;
        return SQLITE_OK;
    }
    return SQLITE_CONSTRAINT;
}

static int st_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out) {
    (void)v;
    cursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static int st_close(sqlite3_vtab_cursor *cur) {
    sqlite3_free(cur);
    return SQLITE_OK;
}

static int st_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr, int argc, sqlite3_value **argv) {
    (void)idx, (void)idxstr;
    cursor *c = (cursor *)cur;
    c->strs = argc == 1 ? sqlite3_value_pointer(argv[0], STRTAB_POINTER) : NULL;
    c->i = 0;
    c->n = c->strs ? intern_count(c->strs) : 0;
    return SQLITE_OK;
}

static int st_next(sqlite3_vtab_cursor *cur) {
    ((cursor *)cur)->i++;
    return SQLITE_OK;
}

static int st_eof(sqlite3_vtab_cursor *cur) {
    const cursor *c = (const cursor *)cur;
    return c->i >= c->n;
}

/* SQLITE_STATIC: the table does not change while a statement reads it (strtab.h). */
static int st_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
    const cursor *c = (const cursor *)cur;
    if (col == COL_ID) sqlite3_result_int64(ctx, (sqlite3_int64)c->i);
    else if (col == COL_S) sqlite3_result_text(ctx, intern_str(c->strs, (long)c->i), -1, SQLITE_STATIC);
    else sqlite3_result_null(ctx);
    return SQLITE_OK;
}

static int st_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
    *rowid = (sqlite3_int64)((const cursor *)cur)->i;
    return SQLITE_OK;
}

/* xCreate NULL: eponymous only, no CREATE VIRTUAL TABLE of it. */
static const sqlite3_module module = {
    .iVersion = 0,
    .xConnect = st_connect,
    .xBestIndex = st_best_index,
    .xDisconnect = st_disconnect,
    .xOpen = st_open,
    .xClose = st_close,
    .xFilter = st_filter,
    .xNext = st_next,
    .xEof = st_eof,
    .xColumn = st_column,
    .xRowid = st_rowid,
};

int strtab_register(sqlite3 *db) { return sqlite3_create_module_v2(db, "fp_strings", &module, NULL, NULL); }
