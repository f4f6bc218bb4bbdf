/* hspill.h: the step breakdown's host ranges past its limit (steps.c), as sorted runs in a
 * scratch file of their own, and their k-way merge back into start order.
 *
 * Owns that file (tmpfile.h "steps"), its table and the merge's cursors. Must not know what
 * a range means or read the analysis' state: steps.c hands it arrays and reads hspans back.
 *
 * Why a file of its own: the walk's connection holds the write locks of the three scratch
 * files while the jobs read them (scratch.sql says why wscratch exists); this one is written
 * by its own connection during the walk, committed before the steps job starts, and then
 * only that job reads it. Why sorted runs of blocks, not a row a range sorted by SQLite:
 * 2.5M top-level ranges as rows were 860 ms of INSERTs in the walk and 970 ms of sorting in
 * the job; a run is sorted in memory (it is the array the walk held) and written as blocks.
 *
 * Memory: the writer none of its own (the caller's array is sorted in place); the merge one
 * block per run (HSPILL_BLOCK ranges, 64 KiB) at a time. */
#ifndef FP_HSPILL_H
#define FP_HSPILL_H

#include <stddef.h>
#include <sqlite3.h>

/* The lists a file holds runs of (steps.c's roles: DataLoader, outermost, runtime, collectives). */
#define HSPILL_ROLES 4

/* A host range the step breakdown reads (steps.c). */
typedef struct hspan { double ts, te; } hspan;
/* qsort's order of hspans: by start. */
int hspan_by_start(const void *x, const void *y);

typedef struct hspill {
    sqlite3 *db;          /* the writer's connection, open until hspill_close */
    sqlite3_stmt *ins;
    char *path;           /* the file, until hspill_free; NULL: nothing spilled */
    unsigned nruns[HSPILL_ROLES]; /* per role: the runs written */
} hspill;

/* Sorts span[0..n) by start and writes it as the next run of role (< HSPILL_ROLES): the first call
 * creates the file. err: the message of an ERR_DB or ERR_IO. */
int hspill_write(hspill *h, int role, hspan *span, size_t n, char *err, size_t errlen);
/* Commits the file and closes the writer: call before a reader attaches it. */
int hspill_close(hspill *h, char *err, size_t errlen);
/* Closes what is open and removes the file. */
void hspill_free(hspill *h);
/* Attaches the file to db as "hspill" (a no-op when nothing was spilled). */
int hspill_attach(sqlite3 *db, const hspill *h, char *err, size_t errlen);

/* One role's runs merged into start order, on a connection that attached the file. */
typedef struct hmerge hmerge;
int hmerge_open(sqlite3 *db, const hspill *h, int role, hmerge **out);
/* The next range in start order into *out: 1, or 0 at the end or on an error (hmerge_rc). */
int hmerge_next(hmerge *m, hspan *out);
int hmerge_rc(const hmerge *m);
/* Back to the first range. */
void hmerge_rewind(hmerge *m);
void hmerge_close(hmerge *m);

#endif
