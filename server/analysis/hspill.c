/* hspill.c: sorted runs of host ranges in a scratch file of their own (hspill.h says why).
 *
 * Schema (one table, made by the first hspill_write):
 *   hrun(id INTEGER PRIMARY KEY, data BLOB): a block of up to HSPILL_BLOCK hspans in start
 *   order; id = role << 48 | run << 24 | block, so a run is the id range of its blocks, read
 *   in order by the rowid b-tree alone.
 * Invariants (ERR_INTERNAL): role is below HSPILL_ROLES, a role has fewer than 2^24 runs and a run fewer
 * than 2^24 blocks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/hspill.h"
#include "lib/err.h"
#include "lib/tmpfile.h"

#define HSPILL_BLOCK 4096 /* ranges a row: 64 KiB */
#define ID_BITS 24
#define RUN_ID(role, run) ((long long)(role) << (2 * ID_BITS) | (long long)(run) << ID_BITS)

static int fail(sqlite3 *db, char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "analysis failed: the host ranges' scratch file: %s: %s", what,
             db ? sqlite3_errmsg(db) : strerror(errno));
    return db ? ERR_DB : ERR_IO;
}

/* The file, its table and the write transaction the runs go into until hspill_close. */
static int open_file(hspill *h, char *err, size_t errlen) {
    char path[4096];
    int fd = tmpfile_make("steps", path, sizeof path);
    if (fd < 0) return fail(NULL, err, errlen, "cannot create it");
    close(fd);
    if (!(h->path = strdup(path))) {
        unlink(path);
        return ERR_NOMEM;
    }
    if (sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_exec(h->db,
                     "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-256;"
                     "CREATE TABLE hrun(id INTEGER PRIMARY KEY, data BLOB NOT NULL); BEGIN",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h->db, "INSERT INTO hrun(id, data) VALUES (?, ?)", -1, &h->ins, NULL) != SQLITE_OK)
        return fail(h->db, err, errlen, "cannot open it");
    return 0;
}

int hspan_by_start(const void *x, const void *y) {
    const hspan *p = x, *q = y;
    return p->ts < q->ts ? -1 : p->ts > q->ts;
}

int hspill_write(hspill *h, int role, hspan *span, size_t n, char *err, size_t errlen) {
    if (!n) return 0;
    if (role < 0 || role >= HSPILL_ROLES || h->nruns[role] >= 1u << ID_BITS || n / HSPILL_BLOCK >= 1u << ID_BITS) return ERR_INTERNAL;
    if (!h->db && !h->path) {
        int rc = open_file(h, err, errlen);
        if (rc) return rc;
    }
    if (!h->db) return ERR_INTERNAL; /* written after hspill_close */
    qsort(span, n, sizeof *span, hspan_by_start);
    long long id = RUN_ID(role, h->nruns[role]++);
    for (size_t i = 0; i < n; i += HSPILL_BLOCK, id++) {
        size_t k = n - i < HSPILL_BLOCK ? n - i : HSPILL_BLOCK;
        sqlite3_bind_int64(h->ins, 1, id);
        sqlite3_bind_blob(h->ins, 2, span + i, (int)(k * sizeof *span), SQLITE_STATIC);
        int ok = sqlite3_step(h->ins) == SQLITE_DONE;
        sqlite3_reset(h->ins);
        if (!ok) return fail(h->db, err, errlen, "cannot write it");
    }
    return 0;
}

int hspill_close(hspill *h, char *err, size_t errlen) {
    if (!h->db) return 0;
    sqlite3_finalize(h->ins);
    h->ins = NULL;
    int rc = sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : fail(h->db, err, errlen, "cannot commit it");
    sqlite3_close(h->db);
    h->db = NULL;
    return rc;
}

void hspill_free(hspill *h) {
    sqlite3_finalize(h->ins);
    sqlite3_close(h->db);
    if (h->path) unlink(h->path);
    free(h->path);
    memset(h, 0, sizeof *h);
}

int hspill_attach(sqlite3 *db, const hspill *h, char *err, size_t errlen) {
    if (!h->path) return 0;
    sqlite3_stmt *at = NULL;
    int ok = sqlite3_prepare_v2(db, "ATTACH ? AS hspill", -1, &at, NULL) == SQLITE_OK &&
             sqlite3_bind_text(at, 1, h->path, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(at) == SQLITE_DONE;
    sqlite3_finalize(at);
    return ok ? 0 : fail(db, err, errlen, "cannot attach it");
}

/* ---- the merge ---- */

/* A run being read: its statement and the block its last step gave (valid until the next). */
typedef struct run_cur {
    sqlite3_stmt *q;
    const unsigned char *blk;
    size_t n, i;          /* ranges in blk, the next one's place */
    double head;          /* blk[i]'s start, while i < n */
} run_cur;

struct hmerge {
    run_cur *c;
    size_t nc;
    int rc;
};

/* The run's next block, or n = 0 at its end. */
static void cur_block(hmerge *m, run_cur *c) {
    c->n = c->i = 0;
    int st = sqlite3_step(c->q);
    if (st == SQLITE_ROW) {
        c->blk = sqlite3_column_blob(c->q, 0);
        c->n = (size_t)sqlite3_column_bytes(c->q, 0) / sizeof(hspan);
    } else if (st != SQLITE_DONE) m->rc = ERR_DB;
}

static void cur_head(run_cur *c) {
    if (c->i < c->n) memcpy(&c->head, c->blk + c->i * sizeof(hspan), sizeof c->head); /* blk may be unaligned */
}

void hmerge_rewind(hmerge *m) {
    for (size_t k = 0; k < m->nc; k++) {
        run_cur *c = &m->c[k];
        sqlite3_reset(c->q);
        cur_block(m, c);
        cur_head(c);
    }
}

int hmerge_open(sqlite3 *db, const hspill *h, int role, hmerge **out) {
    *out = NULL;
    if (role < 0 || role >= HSPILL_ROLES) return ERR_INTERNAL;
    hmerge *m = calloc(1, sizeof *m);
    if (!m || (h->nruns[role] && !(m->c = calloc(h->nruns[role], sizeof *m->c)))) {
        free(m);
        return ERR_NOMEM;
    }
    *out = m;
    for (; m->nc < h->nruns[role]; m->nc++) {
        run_cur *c = &m->c[m->nc];
        if (sqlite3_prepare_v2(db, "SELECT data FROM hspill.hrun WHERE id >= ?1 AND id < ?2 ORDER BY id", -1, &c->q, NULL))
            return ERR_DB;
        sqlite3_bind_int64(c->q, 1, RUN_ID(role, m->nc));
        sqlite3_bind_int64(c->q, 2, RUN_ID(role, m->nc + 1));
    }
    hmerge_rewind(m);
    return m->rc;
}

/* Why a linear scan for the least head: there are few runs (a run is 1,048,576 ranges:
 * 20 at --max-events' 20M), and the scan is a compare per run. */
int hmerge_next(hmerge *m, hspan *out) {
    run_cur *best = NULL;
    for (size_t k = 0; k < m->nc; k++)
        if (m->c[k].i < m->c[k].n && (!best || m->c[k].head < best->head)) best = &m->c[k];
    if (!best || m->rc) return 0;
    memcpy(out, best->blk + best->i++ * sizeof(hspan), sizeof *out);
    if (best->i == best->n) cur_block(m, best);
    cur_head(best);
    return 1;
}

int hmerge_rc(const hmerge *m) { return m->rc; }

void hmerge_close(hmerge *m) {
    if (!m) return;
    for (size_t k = 0; k < m->nc; k++) sqlite3_finalize(m->c[k].q);
    free(m->c);
    free(m);
}
