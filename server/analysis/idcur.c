/* idcur.c: a cursor over rows in correlation-id order that answers "what has id x" for ids
 * asked mostly in rising order (an.h: idcur).
 *
 * Owns nothing but the cursor's position; the statement and what fold keeps are the
 * caller's. Why a cursor that steps: the host walk asks for each runtime call's GPU work
 * and the idle gaps for each gap's launch, both mostly in rising id order, and a point query
 * per ask (a seek and a reset) was most of what they spent (host_walk, issue 24; 75M of
 * an_idle_gaps' 113M instructions on the flat shape at 30 MB). */
#include "analysis/an.h"
#include "lib/err.h"

/* Further ahead than this many ids: seek instead of stepping. Why: threads that launch in
 * turn (a thread pool) see ids hundreds apart, and stepping IDCUR_STEPS ids before the seek
 * was a quarter of the request thread (bench/README.md, issue 24). An id gap of at most
 * 4 x IDCUR_STEPS is stepped; a seek after IDCUR_STEPS ids bounds it when ids are sparse. */
#define IDCUR_STEPS 16

static int idcur_next(A *a, idcur *c) {
    int rc = sqlite3_step(c->s);
    c->pend = rc == SQLITE_ROW;
    return c->pend || rc == SQLITE_DONE ? 0 : an_dberr(a);
}

/* The next id: fold takes each of its rows, the first with first = 1. */
static int idcur_group(A *a, idcur *c) {
    int rc = 0, first = 1;
    c->row = c->pend;
    if (!c->row) return 0;
    c->id = sqlite3_column_int64(c->s, 0);
    do {
        c->fold(c, first);
        first = 0;
        rc = idcur_next(a, c);
    } while (!rc && c->pend && sqlite3_column_int64(c->s, 0) == c->id);
    return rc;
}

int idcur_seek(A *a, idcur *c, long long id) {
    sqlite3_reset(c->s);
    sqlite3_bind_int64(c->s, 1, id);
    c->from = id;
    int rc = idcur_next(a, c);
    return rc ? rc : idcur_group(a, c);
}

int idcur_get(A *a, idcur *c, long long id) {
    int rc = 0;
    /* unsigned: ids anywhere in int64 (a hostile trace) cannot overflow the distance */
    if (id < c->from || (c->row && id > c->id && (unsigned long long)id - (unsigned long long)c->id > 4 * IDCUR_STEPS))
        rc = idcur_seek(a, c, id);
    for (int i = 0; !rc && c->row && c->id < id; i++) {
        if (i == IDCUR_STEPS) { rc = idcur_seek(a, c, id); break; }
        c->from = c->id + 1;
        rc = idcur_group(a, c);
    }
    return rc;
}
