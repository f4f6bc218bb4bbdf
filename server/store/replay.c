/* replay.c: a session's stored events back in their upload order (replay.h). Owns the
 * reads of one session's chunks, meta and replay row for a re-analysis; writes nothing. */
#include "store/replay.h"
#include "store/db.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/chunk.h"
#include "lib/err.h"
#include "lib/evorder.h"
#include "lib/vec.h"

/* One track's place in its events: its chunks' seqs in order, the chunk being read (idx)
 * and where in it (off, into plain). plain is let go under memory pressure and read again
 * (the inflated bytes are the same, so off stays good). */
typedef struct cursor {
    long long *seqs;
    size_t nseqs, capseqs;
    long long events;      /* in its chunks, all told (the n column) */
    long long taken;       /* given out so far */
    size_t idx, off;
    buf plain;             /* chunk seqs[idx] inflated, or empty (len 0) when let go */
    struct cursor *prev, *next; /* the held list, most recent first */
} cursor;

struct replay {
    store *st;
    long long id;
    json_t *meta;
    char source[32];
    unsigned long long bytes_in;
    long long seq_base;
    int version;           /* its analysis_version */
    char *name;            /* the name the upload gave, NULL: none */
    json_t *labels;        /* its labels, in the order the upload gave them */
    cursor *tr;            /* by track number */
    size_t ntr;
    long long events;
    /* the order: the replay row's runs, or a track at a time */
    int exact;
    buf runs_z;
    runs_reader rr;
    long long next_track;  /* a track at a time: the next one */
    long long run_track;   /* the run being given out */
    unsigned long long run_left;
    long long gpu_dev[16];
    double gpu_bw[16];
    size_t ngpu;
    cursor *head, *tail;   /* cursors holding an inflated chunk, most recent first */
    size_t held;           /* their bytes (capacity) */
};

/* ---- reading the session ---- */

static int row_meta(replay *r, db_conn *db, char *err, size_t errlen) {
    db_stmt *s = db_prepare(db, "SELECT meta, source, bytes_in, (SELECT COALESCE(MAX(seq), -1) FROM event_chunks WHERE session_id = ?1),"
                                " analysis_version, name FROM sessions WHERE id = ?1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, r->id);
    int st = db_step(s), rc = st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    if (!rc) {
        json_error_t je;
        const char *m = db_column_text(s, 0), *src = db_column_text(s, 1);
        r->meta = json_loads(m ? m : "{}", 0, &je);
        snprintf(r->source, sizeof r->source, "%s", src ? src : "kineto");
        r->bytes_in = (unsigned long long)db_column_int64(s, 2);
        r->seq_base = db_column_int64(s, 3) + 1;
        r->version = db_column_int(s, 4);
        /* a session stored without a name is "session N" (commit.c): the upload gave none */
        char dflt[48];
        snprintf(dflt, sizeof dflt, "session %lld", r->id);
        const char *nm = db_column_text(s, 5);
        if (nm && strcmp(nm, dflt) && !(r->name = strdup(nm))) rc = ERR_NOMEM;
        if (!r->meta) rc = ERR_IO, snprintf(err, errlen, "the session's stored meta is not JSON: %s", je.text);
    }
    if (rc == ERR_NOTFOUND) snprintf(err, errlen, "no session %lld", r->id);
    db_finalize(s);
    return rc;
}

/* Every chunk's (track, seq, n), the synthesized ones (track < 0) left out. */
static int row_chunks(replay *r, db_conn *db) {
    db_stmt *s = db_prepare(db, "SELECT track, seq, n FROM event_chunks WHERE session_id = ? AND track >= 0 ORDER BY track, seq");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, r->id);
    size_t cap = 0;
    int st, rc = 0;
    while (!rc && (st = db_step(s)) == DB_ROW) {
        long long t = db_column_int64(s, 0);
        if (t > INT32_MAX) { rc = ERR_IO; break; }
        if ((size_t)t >= r->ntr) {
            if (VEC_RESERVE(r->tr, cap, (size_t)t + 1, 16)) { rc = ERR_NOMEM; break; } /* zeroed (vec.h) */
            r->ntr = (size_t)t + 1;
        }
        cursor *c = &r->tr[t];
        if (VEC_RESERVE(c->seqs, c->capseqs, c->nseqs + 1, 8)) { rc = ERR_NOMEM; break; }
        c->seqs[c->nseqs++] = db_column_int64(s, 1);
        c->events += db_column_int64(s, 2);
        r->events += db_column_int64(s, 2);
    }
    if (!rc && st != DB_DONE) rc = ERR_DB;
    db_finalize(s);
    return rc;
}

/* JSON [[dev, bytes/s], ...] into gpu_dev/gpu_bw. */
static void parse_bw(replay *r, const char *text) {
    json_error_t je;
    json_t *a = text ? json_loads(text, 0, &je) : NULL, *v;
    size_t i;
    json_array_foreach(a, i, v) {
        if (r->ngpu >= sizeof r->gpu_bw / sizeof r->gpu_bw[0]) break;
        json_t *d = json_array_get(v, 0), *b = json_array_get(v, 1);
        if (!json_is_integer(d) || !json_is_number(b)) continue;
        r->gpu_dev[r->ngpu] = json_integer_value(d);
        r->gpu_bw[r->ngpu++] = json_number_value(b);
    }
    json_decref(a);
}

/* {"name", "labels"} of the replay row: the name and labels as the upload gave them. */
static int parse_identity(replay *r, const char *text) {
    json_error_t je;
    json_t *o = text ? json_loads(text, 0, &je) : NULL, *l = json_object_get(o, "labels");
    const char *nm = json_string_value(json_object_get(o, "name"));
    int rc = json_is_object(l) ? 0 : ERR_IO;
    free(r->name);
    r->name = NULL;
    if (!rc && nm && !(r->name = strdup(nm))) rc = ERR_NOMEM;
    if (!rc) r->labels = json_incref(l);
    json_decref(o);
    return rc;
}

/* Where "key=value" stands in the stored report's workload line ("name (k=v, k2=v2); ...",
 * report.c: the labels in the order the analysis saw them), or -1. */
static long label_pos(const char *line, const char *k, const char *v) {
    if (!line) return -1;
    size_t kl = strlen(k), vl = strlen(v);
    for (const char *p = strstr(line, k); p; p = strstr(p + 1, k)) {
        int opens = p >= line + 2 && (!strncmp(p - 2, " (", 2) || !strncmp(p - 2, ", ", 2));
        char end = p[kl + 1 + vl];
        if (opens && p[kl] == '=' && !strncmp(p + kl + 1, v, vl) && (end == ',' || end == ')')) return (long)(p - line);
    }
    return -1;
}

/* The labels of byk (by key) in their workload-line order when the line shows every one,
 * else as they are; a new object. Why: a session stored before the replay row keeps no
 * order of its labels but this line, which the re-analysis writes again. */
static json_t *in_line_order(json_t *byk, const char *line) {
    size_t n = json_object_size(byk), i = 0;
    struct lp { long pos; const char *k; } *v = calloc(n ? n : 1, sizeof *v);
    json_t *out = json_object(), *val;
    const char *k;
    int all = v && out;
    json_object_foreach(byk, k, val) {
        if (!all) break;
        v[i].k = k;
        v[i].pos = label_pos(line, k, json_string_value(val));
        all = v[i++].pos >= 0;
    }
    for (size_t a = 1; all && a < n; a++) /* a few labels: insertion sort */
        for (size_t b = a; b > 0 && v[b - 1].pos > v[b].pos; b--) {
            struct lp t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
    if (all)
        for (i = 0; i < n; i++) json_object_set(out, v[i].k, json_object_get(byk, v[i].k));
    else if (out)
        json_object_update(out, byk);
    free(v);
    return out;
}

/* A session stored before the replay row: its labels from the labels table, in the order
 * its stored workload line shows them; failing that, those the collector's firstpass object
 * named first, in its order (prepare_identity, load.c), then the others by key. */
static int labels_of_table(replay *r, db_conn *db) {
    json_t *byk = json_object(), *fp = json_object_get(json_object_get(r->meta, "firstpass"), "labels");
    r->labels = json_object();
    db_stmt *s = byk && r->labels ? db_prepare(db, "SELECT key, value FROM labels WHERE session_id = ? ORDER BY key") : NULL;
    int rc = s ? 0 : ERR_DB, st = DB_DONE;
    if (s) db_bind_int64(s, 1, r->id);
    while (!rc && (st = db_step(s)) == DB_ROW)
        json_object_set_new(byk, db_column_text(s, 0), json_string(db_column_text(s, 1) ? db_column_text(s, 1) : ""));
    if (!rc && st != DB_DONE) rc = ERR_DB;
    db_finalize(s);
    const char *k;
    json_t *v;
    if (json_is_object(fp))
        json_object_foreach(fp, k, v) if (json_object_get(byk, k)) json_object_set(r->labels, k, json_object_get(byk, k));
    json_object_foreach(byk, k, v) if (!json_object_get(r->labels, k)) json_object_set(r->labels, k, v);
    json_decref(byk);
    if (rc || json_object_size(r->labels) < 2) return rc;
    s = db_prepare(db, "SELECT report FROM analysis WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, r->id);
    if (db_step(s) == DB_ROW && db_column_text(s, 0)) {
        json_error_t je;
        json_t *rep = json_loads(db_column_text(s, 0), 0, &je);
        json_t *ordered = in_line_order(r->labels, json_string_value(json_object_get(json_object_get(rep, "draft"), "workload")));
        if (ordered) json_decref(r->labels), r->labels = ordered;
        json_decref(rep);
    }
    db_finalize(s);
    return rc;
}

/* The replay row; without one, the nsys bandwidth the efficiency document names (sessions
 * stored before version 9 kept it nowhere else; dev is not read by the analysis). */
static int row_replay(replay *r, db_conn *db) {
    db_stmt *s = db_prepare(db, "SELECT tracks, events, gpu_bw, identity FROM replay WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, r->id);
    int st = db_step(s), rc = st == DB_ROW || st == DB_DONE ? 0 : ERR_DB;
    if (st == DB_ROW) {
        size_t n = 0;
        const void *z = db_column_blob(s, 0, &n);
        r->exact = 1;
        if (buf_put(&r->runs_z, z ? z : "", n)) rc = ERR_NOMEM;
        if (!rc && db_column_int64(s, 1) != r->events) rc = ERR_IO;
        parse_bw(r, db_column_text(s, 2));
        if (!rc) rc = parse_identity(r, db_column_text(s, 3));
    }
    db_finalize(s);
    if (rc || r->exact) return rc;
    if ((rc = labels_of_table(r, db))) return rc;
    s = db_prepare(db, "SELECT effic FROM analysis WHERE session_id = ?");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, r->id);
    if (db_step(s) == DB_ROW && db_column_text(s, 0)) {
        json_error_t je;
        json_t *e = json_loads(db_column_text(s, 0), 0, &je), *d = json_object_get(e, "device");
        const char *src = json_string_value(json_object_get(d, "bandwidth_source"));
        double bw = json_number_value(json_object_get(d, "bandwidth"));
        if (src && !strcmp(src, "nsys") && bw > 0) r->gpu_dev[0] = 0, r->gpu_bw[0] = bw, r->ngpu = 1;
        json_decref(e);
    }
    db_finalize(s);
    return 0;
}

int replay_open(store *st, long long id, replay **out, char *err, size_t errlen) {
    *out = NULL;
    err[0] = '\0';
    replay *r = calloc(1, sizeof *r);
    if (!r) return snprintf(err, errlen, "out of memory"), ERR_NOMEM;
    r->st = st;
    r->id = id;
    r->run_track = -1;
    db_conn *db = store_get(st);
    /* one snapshot: a session deleted meanwhile is wholly there or wholly gone */
    int rc = !db || db_begin_read(db) ? ERR_DB : 0;
    if (!rc) rc = row_meta(r, db, err, errlen);
    if (!rc) rc = row_chunks(r, db);
    if (!rc) rc = row_replay(r, db);
    if (db && !rc) rc = db_exec(db, "COMMIT") ? ERR_DB : 0;
    rc = store_fail(st, db, rc);
    if (rc && !err[0])
        snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : rc == ERR_IO ? "the stored event order does not match the chunks"
                                                                                      : "the session's events could not be read");
    store_put(st, db);
    if (rc) {
        replay_free(r);
        return rc;
    }
    runs_reader_init(&r->rr, r->runs_z.p, r->runs_z.len);
    *out = r;
    return 0;
}

const json_t *replay_meta(const replay *r) { return r->meta; }
const char *replay_source(const replay *r) { return r->source; }
unsigned long long replay_bytes_in(const replay *r) { return r->bytes_in; }
long long replay_events(const replay *r) { return r->events; }
long long replay_seq_base(const replay *r) { return r->seq_base; }
int replay_exact(const replay *r) { return r->exact; }
int replay_version(const replay *r) { return r->version; }
const char *replay_name(const replay *r) { return r->name; }
const json_t *replay_labels(const replay *r) { return r->labels; }

size_t replay_gpu_bw(const replay *r, size_t i, long long *dev, double *bw) {
    if (i < r->ngpu) *dev = r->gpu_dev[i], *bw = r->gpu_bw[i];
    return r->ngpu;
}

/* ---- the held chunks ---- */

static void unlink_held(replay *r, cursor *c) {
    if (c->prev) c->prev->next = c->next; else if (r->head == c) r->head = c->next;
    if (c->next) c->next->prev = c->prev; else if (r->tail == c) r->tail = c->prev;
    c->prev = c->next = NULL;
}

static void push_held(replay *r, cursor *c) {
    c->next = r->head;
    if (r->head) r->head->prev = c;
    r->head = c;
    if (!r->tail) r->tail = c;
}

/* Lets c's inflated chunk go (it is read again when needed). */
static void let_go(replay *r, cursor *c) {
    unlink_held(r, c);
    r->held -= c->plain.cap;
    buf_free(&c->plain);
}

/* Chunk c->seqs[c->idx] into c->plain: read and inflated unless held; c becomes the most
 * recent, and the least recent others are let go while over REPLAY_HELD_BYTES. */
static int hold(replay *r, cursor *c, char *err, size_t errlen) {
    if (c->plain.len) {
        unlink_held(r, c);
        push_held(r, c);
        return 0;
    }
    db_conn *db = store_get(r->st);
    db_stmt *s = db ? db_prepare(db, "SELECT data FROM event_chunks WHERE session_id = ? AND seq = ?") : NULL;
    int rc = s ? 0 : ERR_DB;
    if (s) {
        db_bind_int64(s, 1, r->id);
        db_bind_int64(s, 2, c->seqs[c->idx]);
        int st = db_step(s);
        size_t n = 0;
        const void *z = st == DB_ROW ? db_column_blob(s, 0, &n) : NULL;
        rc = st == DB_DONE ? ERR_NOTFOUND : st != DB_ROW ? ERR_DB : chunk_inflate(z ? z : "", n, &c->plain);
    }
    db_finalize(s);
    rc = store_fail(r->st, db, rc);
    store_put(r->st, db);
    if (rc == ERR_NOTFOUND) snprintf(err, errlen, "session %lld was deleted during its re-analysis", r->id);
    else if (rc == ERR_IO) snprintf(err, errlen, "event chunk %lld of session %lld is malformed", c->seqs[c->idx], r->id);
    else if (rc) snprintf(err, errlen, "%s", rc == ERR_NOMEM ? "out of memory" : "the session's events could not be read");
    if (rc) {
        buf_free(&c->plain);
        return rc;
    }
    r->held += c->plain.cap;
    push_held(r, c);
    while (r->held > REPLAY_HELD_BYTES && r->tail && r->tail != c) let_go(r, r->tail);
    return 0;
}

/* ---- the order ---- */

/* The next run into run_track / run_left: 1, 0 at the end, ERR_IO, ERR_NOMEM. */
static int next_run(replay *r) {
    if (r->exact) return runs_next(&r->rr, &r->run_track, &r->run_left);
    while (r->next_track < (long long)r->ntr && !r->tr[r->next_track].events) r->next_track++;
    if (r->next_track >= (long long)r->ntr) return 0;
    r->run_track = r->next_track++;
    r->run_left = (unsigned long long)r->tr[r->run_track].events;
    return 1;
}

/* After the last run: every track must have given all its events. */
static int all_taken(const replay *r) {
    for (size_t i = 0; i < r->ntr; i++)
        if (r->tr[i].taken != r->tr[i].events) return 0;
    return 1;
}

int replay_next(replay *r, const char **json, size_t *len, char *err, size_t errlen) {
    while (!r->run_left) {
        int rc = next_run(r);
        if (rc < 0) return snprintf(err, errlen, "the session's stored event order is malformed"), rc;
        if (!rc) return all_taken(r) ? 0 : (snprintf(err, errlen, "the stored event order leaves events out"), ERR_IO);
        if (r->run_track < 0 || (size_t)r->run_track >= r->ntr) return snprintf(err, errlen, "the stored event order names a track with no events"), ERR_IO;
    }
    cursor *c = &r->tr[r->run_track];
    for (;;) {
        if (c->idx >= c->nseqs) return snprintf(err, errlen, "the stored event order asks for more events than a track holds"), ERR_IO;
        int rc = hold(r, c, err, errlen);
        if (rc) return rc;
        chunk_rec rec;
        const char *js;
        int got = chunk_next(&c->plain, &c->off, &rec, &js);
        if (got < 0) return snprintf(err, errlen, "event chunk %lld of session %lld is malformed", c->seqs[c->idx], r->id), ERR_IO;
        if (got) {
            *json = js;
            *len = rec.json_len;
            c->taken++;
            r->run_left--;
            return 1;
        }
        let_go(r, c); /* this chunk is done: the track's next one */
        c->idx++;
        c->off = 0;
    }
}

void replay_free(replay *r) {
    if (!r) return;
    for (size_t i = 0; i < r->ntr; i++) {
        free(r->tr[i].seqs);
        buf_free(&r->tr[i].plain);
    }
    free(r->tr);
    json_decref(r->meta);
    json_decref(r->labels);
    free(r->name);
    buf_free(&r->runs_z);
    runs_reader_free(&r->rr);
    free(r);
}
