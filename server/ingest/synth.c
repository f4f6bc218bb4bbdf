/* synth.c: process/thread names and launch flows a download adds (synth.h). */
#include "ingest/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/utf8.h"

/* Appends a string literal (its length known at compile time). */
#define PUTS(b, lit) buf_put((b), (lit), sizeof(lit) - 1)

typedef struct S {
    trace_ctx *t;
    synth_emit emit;
    void *ctx;
    buf js;
    long meta_name, flow_name, empty_kind;
} S;

/* v as a JSON string literal (Jansson escapes it). 0 or ERR_NOMEM. */
static int put_quoted(buf *b, const char *v) {
    json_t *s = json_string(v);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    int rc = q ? buf_puts(b, q) : ERR_NOMEM;
    free(q);
    return rc;
}

/* ,"key": */
static int put_key(buf *b, const char *key) { return buf_printf(b, ",\"%s\":", key); }

/* pid/tid as the trace had them: an integer stays a JSON number, anything else is a
 * JSON string (ingest.h keeps both as text). */
static int put_id(buf *b, const char *key, const char *v) {
    char *end;
    errno = 0;
    (void)strtoll(v, &end, 10);
    int num = (*v == '-' || (*v >= '0' && *v <= '9')) && !*end && !errno && (v[0] != '0' || !v[1]) && !(v[0] == '-' && (v[1] == '0' || !v[1]));
    if (put_key(b, key)) return ERR_NOMEM;
    return num ? buf_puts(b, v) : put_quoted(b, v);
}

/* The shortest decimal that reads back as the same double: a flow point must land
 * inside the slice it binds to, so the digits of ts must survive. */
static int put_ts(buf *b, double ts) {
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.15g", ts);
    if (strtod(tmp, NULL) != ts) snprintf(tmp, sizeof tmp, "%.17g", ts);
    return put_key(b, "ts") || buf_puts(b, tmp) ? ERR_NOMEM : 0;
}

static int put_str(buf *b, const char *key, const char *v) { return put_key(b, key) || put_quoted(b, v) ? ERR_NOMEM : 0; }

static int send(S *s, double ts, long name, uint8_t ph) {
    chunk_rec r = {ts, 0, (uint32_t)name, (uint32_t)s->empty_kind, EV_OTHER, ph, (uint32_t)s->js.len, 0};
    return s->emit(s->ctx, &r, s->js.p);
}

/* {"ph":"M","name":WHAT,"pid":..,"tid":..,"args":{"name":LABEL,...}} */
static int emit_name(S *s, const char *what, const char *pid, const char *tid, const char *label) {
    buf *b = &s->js;
    buf_reset(b);
    int rc = PUTS(b, "{\"ph\":\"M\"") || put_str(b, "name", what) || put_id(b, "pid", pid) || put_id(b, "tid", tid) ||
             PUTS(b, ",\"args\":{\"name\":") || put_quoted(b, label) || PUTS(b, ",\"firstpass_synthesized\":true}}");
    return rc ? ERR_NOMEM : send(s, 0, s->meta_name, 'M');
}

/* "GPU 0 (NVIDIA A100-SXM4-80GB)" when deviceProperties names the device. */
static void gpu_label(const trace_ctx *t, long long dev, char *out, size_t n) {
    json_t *dp = json_object_get(t->meta, "deviceProperties"), *d;
    size_t i;
    json_array_foreach(dp, i, d) {
        json_t *id = json_object_get(d, "id");
        const char *nm = json_string_value(json_object_get(d, "name"));
        if (json_is_integer(id) && json_integer_value(id) == dev && nm) {
            utf8_snprintf(out, n, "GPU %lld (%s)", dev, nm);
            return;
        }
    }
    snprintf(out, n, "GPU %lld", dev);
}

static int names(S *s) {
    trace_ctx *t = s->t;
    intern *pids = intern_new();
    /* Per distinct pid: 1 named, 2 seen and needing a name. */
    unsigned char *state = calloc(t->ntracks ? t->ntracks : 1, 1);
    long *first = calloc(t->ntracks ? t->ntracks : 1, sizeof *first);
    int rc = pids && state && first ? 0 : ERR_NOMEM;
    for (size_t i = 0; i < t->ntracks && !rc; i++) {
        const track_info *ti = &t->tracks[i];
        long p = intern_id(pids, ti->pid, strlen(ti->pid));
        if (p < 0) { rc = ERR_NOMEM; break; }
        if ((size_t)p + 1 == intern_count(pids)) first[p] = (long)i;
        if (ti->process_named) state[p] = 1;
        else if (ti->shown && !state[p]) state[p] = 2;
        if (ti->shown && ti->gpu) first[p] = (long)i; /* a GPU track names its pid after the device */
    }
    char label[300];
    for (size_t p = 0; p < (pids ? intern_count(pids) : 0) && !rc; p++) {
        if (state[p] != 2) continue;
        const track_info *ti = &t->tracks[first[p]];
        if (ti->gpu) gpu_label(t, ti->device, label, sizeof label);
        else utf8_snprintf(label, sizeof label, "process %s", ti->pid); /* a long pid cut inside a character: not JSON */
        rc = emit_name(s, "process_name", ti->pid, "0", label);
    }
    for (size_t i = 0; i < t->ntracks && !rc; i++) {
        const track_info *ti = &t->tracks[i];
        if (!ti->shown || ti->thread_named) continue;
        if (ti->gpu) snprintf(label, sizeof label, "stream %lld", ti->stream);
        else utf8_snprintf(label, sizeof label, "thread %s", ti->tid);
        rc = emit_name(s, "thread_name", ti->pid, ti->tid, label);
    }
    intern_free(pids);
    free(state);
    free(first);
    return rc;
}

static int flow_point(S *s, char ph, long long id, const track_info *ti, double ts) {
    buf *b = &s->js;
    buf_reset(b);
    int rc = buf_printf(b, "{\"ph\":\"%c\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%lld", ph, id) || put_id(b, "pid", ti->pid) || put_id(b, "tid", ti->tid) || put_ts(b, ts) ||
             (ph == 'f' && PUTS(b, ",\"bp\":\"e\"")) || PUTS(b, ",\"args\":{\"firstpass_synthesized\":true}}");
    return rc ? ERR_NOMEM : send(s, ts, s->flow_name, (uint8_t)ph);
}

/* One s/f pair per GPU activity whose correlation names a runtime call (the first
 * such call in file order, as analyze.c's join takes). */
static int flows(S *s) {
    static const char sql[] =
        "SELECT g.seq, g.track, g.ts, r.track, r.ts FROM scratch.ev g"
        " JOIN scratch.ev r ON r.seq = (SELECT r2.seq FROM scratch.ev r2 WHERE r2.corr = g.corr AND r2.cls = 1 ORDER BY r2.seq LIMIT 1)"
        " WHERE g.cls = 2 AND g.corr IS NOT NULL ORDER BY g.seq";
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->t->db, sql, -1, &q, NULL) != SQLITE_OK) return ERR_DB;
    int rc = 0, st;
    while (!rc && (st = sqlite3_step(q)) == SQLITE_ROW) {
        long long id = sqlite3_column_int64(q, 0), gt = sqlite3_column_int64(q, 1), rt = sqlite3_column_int64(q, 3);
        if (gt < 0 || rt < 0 || (size_t)gt >= s->t->ntracks || (size_t)rt >= s->t->ntracks) continue;
        rc = flow_point(s, 's', id, &s->t->tracks[rt], sqlite3_column_double(q, 4));
        if (!rc) rc = flow_point(s, 'f', id, &s->t->tracks[gt], sqlite3_column_double(q, 2));
    }
    if (!rc && st != SQLITE_DONE) rc = ERR_DB;
    sqlite3_finalize(q);
    return rc;
}

int synth_run(trace_ctx *t, synth_emit emit, void *ctx) {
    S s = {t, emit, ctx, {0}, -1, -1, -1};
    s.meta_name = intern_id(t->strs, "metadata", 8);
    s.flow_name = intern_id(t->strs, "ac2g", 4);
    s.empty_kind = intern_id(t->strs, "", 0);
    int rc = s.meta_name < 0 || s.flow_name < 0 || s.empty_kind < 0 ? ERR_NOMEM : names(&s);
    if (!rc && !t->has_launch_flows) rc = flows(&s);
    buf_free(&s.js);
    return rc;
}
