/* routes.c: the REST API's route table and its handlers.
 *
 * The table below is the whole API surface; docs/api.md and api/openapi.yaml describe
 * the same routes. Handlers parse and validate parameters, take a pooled connection,
 * call query_* and pick the representation (JSON, text/plain, CSV). Uploads (POST
 * /api/v1/sessions) are streamed by http.c and never reach this table's handlers. */
#include "http/routes.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analyze.h"
#include "analysis/report.h"
#include "http/capture.h"
#include "http/metrics.h"
#include "http/rcache.h"
#include "http/text.h"
#include "ingest/reanalyse.h"
#include "lib/err.h"
#include "lib/version.h"
#include "store/backup.h"
#include "store/download.h"
#include "store/history.h"
#include "store/area.h"
#include "store/jobs.h"
#include "store/query.h"

typedef int (*handler)(app *a, http_req *rq, http_reply *out);

typedef struct route {
    const char *method;
    const char *pattern; /* "{id}" matches a positive integer, "{name}" one non-empty segment, "{tail}" the non-empty rest */
    handler fn;
    int cached;          /* a 200 reply may be kept in the reply cache (rcache.h): CACHE_* */
} route;

#define LIMIT_MAX 10000

/* route.cached: which write generation a kept reply is checked against. A session's
 * replies change only with writes to stored sessions; the list changes with uploads too. */
enum { CACHE_NO, CACHE_SESSION, CACHE_LIST };

/* ---- parameter helpers ---- */

/* Parses an optional integer parameter in [lo, hi]: 0, or ERR_PARAM with its 400 reply. */
static int int_param(http_req *rq, http_reply *out, const char *key, long long dflt, long long lo, long long hi, long long *v) {
    const char *s = http_query(rq, key);
    *v = dflt;
    if (!s) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi) {
        return http_error(out, ERR_PARAM, "%s must be an integer from %lld to %lld, not '%.64s'", key, lo, hi, s);
    }
    *v = x;
    return 0;
}
static int num_param(http_req *rq, http_reply *out, const char *key, double *v) {
    const char *s = http_query(rq, key);
    *v = NAN;
    if (!s) return 0;
    char *end;
    double x = strtod(s, &end);
    if (!*s || *end || !isfinite(x)) {
        return http_error(out, ERR_PARAM, "%s must be a number, not '%.64s'", key, s);
    }
    *v = x;
    return 0;
}

static int db_fail(http_reply *out, int rc, long long id) {
    if (rc == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no session %lld", id);
    if (rc == ERR_FULL) return http_error(out, ERR_FULL, "the disk is full: delete sessions to free space");
    if (rc == ERR_DBDOWN) return http_error(out, ERR_DBDOWN, "the database does not answer: try again later");
    return http_error(out, rc, "the query failed");
}

static int text_or_csv(http_req *rq, http_reply *out, json_t *body, const char *rows_key, const char *const *cols) {
    const char *f = http_query(rq, "format");
    size_t len;
    if (f && !strcmp(f, "csv")) {
        char *t = csv_rows(json_object_get(body, rows_key), cols, &len);
        json_decref(body);
        return http_text(out, 200, "text/csv; charset=utf-8", t, len);
    }
    if (http_wants_text(rq)) {
        char *t = text_rows(json_object_get(body, rows_key), cols, &len);
        json_decref(body);
        return http_text(out, 200, "text/plain; charset=utf-8", t, len);
    }
    return http_json(out, 200, body);
}

/* ---- handlers ---- */

/* Liveness and the database: a replica whose database does not answer says 503, so that a
 * load balancer's health check takes it out until the database is back. */
static int h_health(app *a, http_req *rq, http_reply *out) {
    (void)rq;
    if (store_ping(a->st)) return http_error(out, ERR_DBDOWN, "the %s database does not answer", store_backend(a->st));
    return http_json(out, 200, json_pack("{s:s,s:{s:s,s:b}}", "status", "ok", "database", "backend", store_backend(a->st), "reachable", 1));
}

/* GET /livez: the process answers, whatever its database does: a liveness probe that
 * restarted every replica during a database blip (what /healthz would do, 503) is worse
 * than the blip. Which build answers, too. GET /readyz is /healthz: the database answers. */
static int h_live(app *a, http_req *rq, http_reply *out) {
    (void)a, (void)rq;
    return http_json(out, 200, json_pack("{s:s,s:s,s:s}", "status", "ok", "version", FP_VERSION, "revision", fp_revision()));
}

/* Repeated label=k:v (http_labels: the upload's parser) into f, which points into *l
 * (free it with fp_labels_free(*l, *n) when f is done); a 400 reply when one is malformed. */
static int label_params(http_req *rq, http_reply *out, fp_label **l, size_t *n, hist_labels *f) {
    int rc = http_labels(rq, out, HIST_LABELS_MAX, l, n);
    f->n = rc ? 0 : (int)*n;
    for (int i = 0; i < f->n; i++) {
        f->keys[i] = (*l)[i].key;
        f->values[i] = (*l)[i].value;
    }
    return rc;
}

_Static_assert(sizeof(((list_filter *)0)->label_keys) / sizeof(char *) == HIST_LABELS_MAX, "one label limit for every route");

/* Runs fn with the request's ?label= filters parsed (a 400 when one is malformed). */
typedef int (*labelled_fn)(app *a, http_req *rq, http_reply *out, const hist_labels *l);
static int with_labels(app *a, http_req *rq, http_reply *out, labelled_fn fn) {
    fp_label *l = NULL;
    size_t n = 0;
    hist_labels hl;
    int rc = label_params(rq, out, &l, &n, &hl);
    if (!rc) rc = fn(a, rq, out, &hl);
    fp_labels_free(l, n);
    return rc;
}

static int list_labelled(app *a, http_req *rq, http_reply *out, const hist_labels *l) {
    list_filter f;
    memset(&f, 0, sizeof f);
    memcpy(f.label_keys, l->keys, sizeof f.label_keys);
    memcpy(f.label_values, l->values, sizeof f.label_values);
    f.nlabels = l->n;
    f.name = http_query(rq, "name");
    f.q = http_query(rq, "q");
    if (f.q && !*f.q) f.q = NULL;
    f.source = http_query(rq, "source");
    long long lim, next, since, until;
    if (int_param(rq, out, "limit", 50, 1, 1000, &lim) || int_param(rq, out, "next", 0, 0, (1LL << 62), &next) ||
        int_param(rq, out, "since", 0, 0, (1LL << 40), &since) || int_param(rq, out, "until", 0, 0, (1LL << 40), &until))
        return ERR_PARAM;
    f.limit = (int)lim;
    f.before_id = next;
    f.since = since;
    f.until = until;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_list(db_, &f, &body));
    if (rc_) return db_fail(out, rc_, 0);
    static const char *const cols[] = {"id", "name", "source", "hardware", "duration_us", "event_count", "top_cuda_operator", "created_at", NULL};
    return text_or_csv(rq, out, body, "sessions", cols);
}

static int h_list(app *a, http_req *rq, http_reply *out) { return with_labels(a, rq, out, list_labelled); }

static int h_get(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_session(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    json_object_set_new(body, "current_analysis_version", json_integer(ANALYSIS_VERSION)); /* analyze.h */
    return http_json(out, 200, body);
}

/* POST /api/v1/sessions/{id}/reanalyse: the session's analysis computed again from its
 * stored events (ingest/reanalyse.h), now, in this request (as an upload is): 200 with the
 * new version once it is committed. A failure leaves the old analysis and answers its
 * error; it is recorded on the session too. */
static int h_reanalyse(app *a, http_req *rq, http_reply *out) {
    reanalyse_result res;
    char err[512];
    int rc = reanalyse_session(a->imports, a->st, rq->id, 0, (int)a->cfg->reanalyse_lease_s, NULL, &res, err, sizeof err);
    if (rc == ERR_NOTFOUND || rc == ERR_CONFLICT || rc == ERR_BUSY || rc == ERR_DBDOWN) return http_error(out, rc, "%s", err);
    if (rc) return http_error(out, rc, "the re-analysis of session %lld failed; its analysis stays as it was: %s", rq->id, err);
    return http_json(out, 200, json_pack("{s:I,s:i,s:i,s:i,s:I,s:s,s:f}", "session_id", (json_int_t)rq->id, "analysis_version", res.version,
                                         "previous_analysis_version", res.before, "current_analysis_version", ANALYSIS_VERSION,
                                         "events", (json_int_t)res.events, "event_order", res.exact ? "upload" : "by_track", "ms", res.ms));
}

/* A reply's "analysis_versions" ({"base", "head"}: query.c, history.c) completed with this
 * server's version, whether the two sides' figures come from different analyses, and the
 * older side to re-analyse (when it is older than this server's). */
static void version_advice(json_t *body, long long base, long long head) {
    json_t *av = json_object_get(body, "analysis_versions");
    if (!json_is_object(av)) return;
    json_t *b = json_object_get(av, "base"), *h = json_object_get(av, "head"), *re = json_array();
    int differ = json_is_integer(b) && json_is_integer(h) && json_integer_value(b) != json_integer_value(h);
    if (differ) {
        json_int_t bv = json_integer_value(b), hv = json_integer_value(h), old = bv < hv ? bv : hv;
        if (old < ANALYSIS_VERSION) json_array_append_new(re, json_integer(bv < hv ? base : head));
    }
    json_object_set_new(av, "current", json_integer(ANALYSIS_VERSION));
    json_object_set_new(av, "differ", json_boolean(differ));
    json_object_set_new(av, "reanalyse", re);
}

static int h_delete(app *a, http_req *rq, http_reply *out) {
    int rc = store_delete_session(a->st, rq->id);
    if (rc) return db_fail(out, rc, rq->id);
    out->status = 204;
    return 0;
}

static int h_operators(app *a, http_req *rq, http_reply *out) {
    const char *sort = http_query(rq, "sort");
    if (!sort) sort = "cuda_time_total";
    if (!query_sort_column(sort)) return http_error(out, ERR_PARAM, "sort must be one of: %s", query_sort_fields());
    const char *g = http_query(rq, "group_by");
    if (g && strcmp(g, "input_shape") && strcmp(g, "name"))
        return http_error(out, ERR_PARAM, "group_by must be input_shape or name");
    long long lim;
    if (int_param(rq, out, "limit", 100, 1, LIMIT_MAX, &lim)) return ERR_PARAM;
    json_t *body = NULL;
    int rc_;
    int by_shape = g && !strcmp(g, "input_shape");
    WITH_DB(a, out, query_operators(db_, rq->id, sort, (int)lim, http_query(rq, "kind"), by_shape, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    const char *f = http_query(rq, "format");
    if (f && !strcmp(f, "csv")) {
        static const char *const cols[] = {"name", "kind", "input_shapes", "calls", "self_cpu_time_total_us", "cpu_time_total_us", "cpu_time_avg_us",
                                           "self_cuda_time_total_us", "cuda_time_total_us", "cuda_time_avg_us", "cpu_memory_usage_bytes",
                                           "self_cpu_memory_usage_bytes", "cuda_memory_usage_bytes", "self_cuda_memory_usage_bytes", NULL};
        return text_or_csv(rq, out, body, "operators", by_shape ? cols : cols);
    }
    if (http_wants_text(rq)) {
        size_t len;
        char *t = text_operators(body, &len);
        json_decref(body);
        return t ? http_text(out, 200, "text/plain; charset=utf-8", t, len) : http_error(out, ERR_NOMEM, "out of memory");
    }
    return http_json(out, 200, body);
}

static int h_kernels(app *a, http_req *rq, http_reply *out) {
    const char *sort = http_query(rq, "sort");
    if (!sort) sort = "total_us";
    if (strcmp(sort, "total_us") && strcmp(sort, "calls") && strcmp(sort, "mean_us"))
        return http_error(out, ERR_PARAM, "sort must be one of: total_us, calls, mean_us");
    long long lim;
    if (int_param(rq, out, "limit", 100, 1, LIMIT_MAX, &lim)) return ERR_PARAM;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_kernels(db_, rq->id, sort, (int)lim, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "kind", "calls", "total_us", "mean_us", "min_us", "max_us", "share", "grid", "block",
                                       "registers_per_thread", "shared_memory_bytes", "est_occupancy", "est_sm_efficiency",
                                       "blocks_per_sm", "tensor_core", NULL};
    return text_or_csv(rq, out, body, "kernels", cols);
}

static int h_phases(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_phases(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "kind", "count", "total_us", "mean_us", "gpu_busy_us", "kernels", "kernel_mean_us", "cpu_only_us", NULL};
    return text_or_csv(rq, out, body, "phases", cols);
}

static int h_gpu(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_gpu(db_, rq->id, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

static int h_efficiency(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_efficiency(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "shape", "dtype", "precision_class", "calls", "gpu_us", "flops", "bytes", "tflops",
                                       "gbps", "intensity", "bound", "peak_fraction", "peak_used", "status", "gpu_us_min",
                                       "gpu_us_median", "gpu_us_max", "unit", "roof_us", "best_unit", "best_roof_us", "above_roof_us",
                                       "kernel_us_mean", "blocks_per_sm", "bound_reason", NULL};
    const char *f = http_query(rq, "format");
    if ((f && !strcmp(f, "csv")) || !http_wants_text(rq)) return text_or_csv(rq, out, body, "operators", cols);
    size_t len;
    char *t = text_efficiency(body, cols, &len);
    json_decref(body);
    return t ? http_text(out, 200, "text/plain; charset=utf-8", t, len) : http_error(out, ERR_NOMEM, "out of memory");
}

static int h_report(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_report(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    if (http_wants_text(rq)) {
        size_t len;
        char *t = text_report(body, &len);
        json_decref(body);
        return http_text(out, 200, "text/plain; charset=utf-8", t, len);
    }
    return http_json(out, 200, body);
}

static int h_suspects(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_suspects(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    const char *f = http_query(rq, "format");
    if (f && !strcmp(f, "csv")) {
        static const char *const cols[] = {"category", "culprit", "at_stake_us", "at_stake_fraction", "at_stake_per_step_us", "smell",
                                           "next_experiment", NULL};
        return text_or_csv(rq, out, body, "suspects", cols);
    }
    if (!http_wants_text(rq)) return http_json(out, 200, body);
    size_t len;
    char *t = text_suspects(body, &len);
    json_decref(body);
    return t ? http_text(out, 200, "text/plain; charset=utf-8", t, len) : http_error(out, ERR_NOMEM, "out of memory");
}

static int h_steps(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    /* paged (issue 50): the default page is every step a session holds at the default
     * --max-steps, so a reply of today's shape stays whole */
    long long off, lim;
    if (int_param(rq, out, "offset", 0, 0, (1LL << 62), &off) || int_param(rq, out, "limit", LIMIT_MAX, 1, LIMIT_MAX, &lim)) return ERR_PARAM;
    WITH_DB(a, out, query_steps(db_, rq->id, off, lim, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "start_us", "dur_us", "kernel_us", "memcpy_us", "memset_us", "communication_us",
                                       "runtime_us", "data_loading_us", "cpu_exec_us", "other_us", NULL};
    return text_or_csv(rq, out, body, "steps", cols);
}

static int h_memory(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_memory(db_, rq->id, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "kind", "calls", "self_cuda_memory_usage_bytes", "cuda_memory_usage_bytes",
                                       "self_cpu_memory_usage_bytes", "cpu_memory_usage_bytes", NULL};
    return text_or_csv(rq, out, body, "top_operators", cols);
}

/* ---- jobs: sessions that share a job label (jobs.h) ---- */

static int h_jobs(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, jobs_list(db_, &body));
    if (rc_) return db_fail(out, rc_, 0);
    static const char *const cols[] = {"job", "sessions", "ranks", "newest_session_id", NULL};
    return text_or_csv(rq, out, body, "jobs", cols);
}

/* The ranks of a job as flat rows, for text and CSV (nested objects do not fit a cell). */
static json_t *job_rows(const json_t *job) {
    json_t *rows = json_array(), *r;
    const json_t *strag = json_object_get(job, "straggler");
    size_t i;
    json_array_foreach(json_object_get(job, "ranks"), i, r) {
        const json_t *st = json_object_get(r, "steps"), *top = json_object_get(r, "top_suspect"), *c = json_object_get(r, "communication");
        json_t *o = json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:b}", "rank", json_object_get(r, "rank"), "session_id",
                              json_object_get(r, "session_id"), "name", json_object_get(r, "name"), "step_range", json_object_get(st, "range"),
                              "steps", json_object_get(st, "count"), "step_mean_us", json_object_get(st, "mean_us"), "gpu_idle_fraction",
                              json_object_get(r, "gpu_idle_fraction"), "top_suspect", json_object_get(top, "category"), "top_culprit",
                              json_object_get(top, "culprit"), "comm_at_stake_us", json_object_get(c, "at_stake_us"), "comm_overlap_us",
                              json_object_get(c, "overlap_us"), "straggler",
                              json_is_object(strag) && json_equal(json_object_get(strag, "session_id"), json_object_get(r, "session_id")));
        json_array_append_new(rows, o);
    }
    return json_pack("{s:o}", "rows", rows);
}

static int h_job(app *a, http_req *rq, http_reply *out) {
    const char *job = rq->path + strlen("/api/v1/jobs/");
    size_t n = strlen(job); /* the route's {tail}: a label value may hold '/' */
    char name[HTTP_TEXT_MAX + 1];
    if (!n || n > HTTP_TEXT_MAX || !fp_utf8_valid(job, n))
        return http_error(out, ERR_PARAM, "a job is 1 to %d bytes of UTF-8 (the value of its sessions' job label)", HTTP_TEXT_MAX);
    snprintf(name, sizeof name, "%.*s", (int)n, job);
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, jobs_get(db_, name, &body));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no session carries the label job:%s", name);
    if (rc_) return db_fail(out, rc_, 0);
    const char *f = http_query(rq, "format");
    if (!(f && !strcmp(f, "csv")) && !http_wants_text(rq)) return http_json(out, 200, body);
    static const char *const cols[] = {"rank", "session_id", "name", "step_range", "steps", "step_mean_us", "gpu_idle_fraction",
                                       "top_suspect", "top_culprit", "comm_at_stake_us", "comm_overlap_us", "straggler", NULL};
    json_t *flat = job_rows(body);
    json_decref(body);
    return text_or_csv(rq, out, flat, "rows", cols);
}

/* PUT {"lines":{"next_experiment":"..."}}: any subset; null or "" restores the draft. */
static int h_report_put(app *a, http_req *rq, http_reply *out) {
    json_error_t je;
    json_t *doc = rq->body ? json_loadb(rq->body, rq->body_len, 0, &je) : NULL;
    if (!doc) return http_error(out, ERR_PARSE, "the body must be a JSON object: %s", rq->body ? je.text : "empty body");
    json_t *lines = json_object_get(doc, "lines");
    int rc = 0;
    if (!json_is_object(lines)) {
        json_decref(doc);
        return http_error(out, ERR_BAD_REPORT, "the body needs a \"lines\" object");
    }
    const char *k;
    json_t *v;
    json_object_foreach(lines, k, v) {
        int known = 0;
        for (int i = 0; i < REPORT_LINES; i++) known |= !strcmp(k, report_line_keys[i]);
        if (!known || !(json_is_string(v) || json_is_null(v)) || (json_is_string(v) && json_string_length(v) > 4000)) {
            /* k belongs to doc: format the reply before doc goes (ASan found the use after free). */
            rc = http_error(out, ERR_BAD_REPORT, "'%.40s' must be one of workload, hardware, top_cuda_time, top_cpu_cost, "
                                                 "next_experiment, with a string (at most 4000 bytes) or null", k);
            json_decref(doc);
            return rc;
        }
    }
    /* Check the session first so that a PUT to an unknown id is a 404, not an orphan edit. */
    json_t *probe = NULL;
    int rc_;
    WITH_DB(a, out, query_session(db_, rq->id, &probe));
    json_decref(probe);
    if (rc_) { json_decref(doc); return db_fail(out, rc_, rq->id); }
    json_object_foreach(lines, k, v) {
        rc = store_set_report_line(a->st, rq->id, k, json_string_value(v));
        if (rc) break;
    }
    json_decref(doc);
    if (rc) return db_fail(out, rc, rq->id);
    return h_report(a, rq, out);
}

#define TIMELINE_US_MAX 9e15

static int h_timeline(app *a, http_req *rq, http_reply *out) {
    double s, e;
    long long nb;
    if (num_param(rq, out, "start_us", &s) || num_param(rq, out, "end_us", &e) || int_param(rq, out, "buckets", 1000, 1, 10000, &nb)) return ERR_PARAM;
    /* Microseconds since 1970 stay under 2^53 for 285 years; beyond, bucket indexes no
     * longer fit an int (1e300 was undefined behaviour in the resampler, issue 22). */
    if (fabs(s) > TIMELINE_US_MAX || fabs(e) > TIMELINE_US_MAX)
        return http_error(out, ERR_PARAM, "start_us and end_us must lie within +-9e15 (microseconds)");
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_timeline(db_, rq->id, s, e, (int)nb, http_client_gone, rq, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

#define EVENT_Q_MAX 8192

static int h_events(app *a, http_req *rq, http_reply *out) {
    event_query q = {http_query(rq, "ref"), http_query(rq, "track"), http_query(rq, "q"), NAN, NAN, 1, 0};
    const char *dir = http_query(rq, "dir"), *match = http_query(rq, "match");
    if (num_param(rq, out, "ts_us", &q.ts_us) || num_param(rq, out, "dur_us", &q.dur_us)) return ERR_PARAM;
    if (dir && strcmp(dir, "next") && strcmp(dir, "prev")) return http_error(out, ERR_PARAM, "dir must be next or prev");
    if (dir && !strcmp(dir, "prev")) q.dir = -1;
    if (q.q && !*q.q) return http_error(out, ERR_PARAM, "q must not be empty");
    /* a finding's link names its culprit whole (issue 51, item 3): "aten::mm" must not stop
     * at "aten::mm_backward"; a name is an interned string, EVENT_Q_MAX bounds the search */
    if (q.q && strlen(q.q) > EVENT_Q_MAX) return http_error(out, ERR_PARAM, "q must be at most %d bytes", EVENT_Q_MAX);
    if (match && strcmp(match, "contains") && strcmp(match, "exact")) return http_error(out, ERR_PARAM, "match must be contains or exact");
    if (match && !strcmp(match, "exact")) q.exact = 1;
    if (!q.q && !q.ref && (!q.track || isnan(q.ts_us)))
        return http_error(out, ERR_PARAM, "name an event: ref, or track and ts_us; or search with q");
    if (q.q && !q.ref && isnan(q.ts_us)) q.ts_us = q.dir > 0 ? -INFINITY : INFINITY;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_event(db_, rq->id, &q, &body));
    if (rc_ == ERR_PARAM) return http_error(out, ERR_PARAM, "ref must be TRACK:SEQ:INDEX, from an earlier reply");
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no session %lld, or no such event in it", rq->id);
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

/* An area selection's summary (store/area.h): the window is required and bounded like
 * /timeline's; names per track 1..AREA_NAMES_MAX; tracks, at most AREA_TRACKS_MAX ids. */
#define AREA_TRACKS_PARAM_MAX 16384 /* bytes of ?tracks= */

static int h_area(app *a, http_req *rq, http_reply *out) {
    double s, e;
    long long nn;
    if (num_param(rq, out, "start_us", &s) || num_param(rq, out, "end_us", &e) || int_param(rq, out, "names", 10, 1, AREA_NAMES_MAX, &nn))
        return ERR_PARAM;
    if (isnan(s) || isnan(e)) return http_error(out, ERR_PARAM, "start_us and end_us are required (microseconds, as /timeline gives them)");
    if (fabs(s) > TIMELINE_US_MAX || fabs(e) > TIMELINE_US_MAX)
        return http_error(out, ERR_PARAM, "start_us and end_us must lie within +-9e15 (microseconds)");
    if (!(e > s)) return http_error(out, ERR_PARAM, "end_us must be after start_us");
    const char *tq = http_query(rq, "tracks");
    char copy[AREA_TRACKS_PARAM_MAX + 1]; /* the ids, cut at the commas (no heap: WITH_DB may return) */
    const char *ids[AREA_TRACKS_MAX];
    size_t nids = 0;
    if (tq) {
        if (!*tq || strlen(tq) > AREA_TRACKS_PARAM_MAX)
            return http_error(out, ERR_PARAM, "tracks must be 1 to %d bytes of comma-separated track ids", AREA_TRACKS_PARAM_MAX);
        memcpy(copy, tq, strlen(tq) + 1);
        for (char *p = copy, *tok; (tok = strsep(&p, ","));) {
            if (!*tok) continue;
            if (nids == AREA_TRACKS_MAX) return http_error(out, ERR_PARAM, "tracks names at most %d track ids", AREA_TRACKS_MAX);
            ids[nids++] = tok;
        }
    }
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, area_summary(db_, rq->id, s, e, (int)nn, tq ? ids : NULL, nids, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

static int h_busy(app *a, http_req *rq, http_reply *out) {
    double s, e;
    long long nb;
    if (num_param(rq, out, "start_us", &s) || num_param(rq, out, "end_us", &e) || int_param(rq, out, "buckets", 0, 0, 10000, &nb)) return ERR_PARAM;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_busy(db_, rq->id, s, e, (int)nb, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

/* The Chrome trace, streamed (download.h). With Accept-Encoding: gzip the body is sent gzip'd
 * (Content-Encoding: a client inflates it as it reads). ?format=gzip is the .json.gz file
 * itself (application/gzip, no Content-Encoding): a browser keeps it compressed, and
 * Perfetto and chrome://tracing open it as it is (issue 51, item 6: a 1M-event session is
 * 254 MB of JSON, 19 MB as gzip). Same memory bound either way: one deflate stream. */
static int h_trace(app *a, http_req *rq, http_reply *out) {
    const char *f = http_query(rq, "format");
    if (f && strcmp(f, "json") && strcmp(f, "gzip")) return http_error(out, ERR_PARAM, "format must be json or gzip");
    int file = f && !strcmp(f, "gzip"), gz = file || http_accepts_gzip(rq), err = 0;
    download *d = download_open(a->st, rq->id, gz, &err);
    if (!d) return db_fail(out, err, rq->id);
    out->status = 200;
    out->content_type = file ? "application/gzip" : "application/json";
    out->stream_read = download_read;
    out->stream_free = download_free;
    out->stream_cls = d;
    out->gzip_encoded = gz && !file;
    snprintf(out->disposition, sizeof out->disposition, "attachment; filename=\"firstpass-session-%lld.json%s\"", rq->id, file ? ".gz" : "");
    return 0;
}

static int h_compare(app *a, http_req *rq, http_reply *out) {
    long long base, head;
    if (int_param(rq, out, "base", 0, 1, (1LL << 62), &base) || int_param(rq, out, "head", 0, 1, (1LL << 62), &head)) return ERR_PARAM;
    if (!base || !head) return http_error(out, ERR_PARAM, "base and head session ids are required");
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_compare(db_, base, head, &body));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "session %lld or %lld does not exist", base, head);
    if (rc_) return db_fail(out, rc_, 0);
    version_advice(body, base, head);
    /* flat columns, one value a cell (text.c reads "base.calls" as member calls of base) */
    static const char *const cols[] = {"name", "kind", "status", "base.calls", "head.calls", "delta.calls", "base.cuda_time_total_us",
                                       "head.cuda_time_total_us", "delta.cuda_time_total_us", "relative.cuda_time_total",
                                       "base.cpu_time_total_us", "head.cpu_time_total_us", "delta.cpu_time_total_us", "relative.cpu_time_total",
                                       "base.self_cuda_time_total_us", "head.self_cuda_time_total_us", "base.self_cpu_time_total_us",
                                       "head.self_cpu_time_total_us", NULL};
    return text_or_csv(rq, out, body, "operators", cols);
}

/* ---- history: baselines, regressions, trends (history.c) ---- */

/* The {name} segment of /api/v1/baselines/{name}; writes a 400 when it is not a name. */
static int baseline_name(http_req *rq, http_reply *out, char *name, size_t len) {
    const char *p = rq->path + strlen("/api/v1/baselines/");
    size_t n = strcspn(p, "/");
    snprintf(name, len, "%.*s", (int)(n < len ? n : len - 1), p);
    if (n < len && history_name_valid(name)) return 0;
    return http_error(out, ERR_PARAM, "a baseline name is 1 to %d characters of A-Z a-z 0-9 . _ -, not '%.*s'", HIST_NAME_MAX,
               (int)(n < 64 ? n : 64), p);
}

/* {"session_id":N,"labels":{"k":"v"}} -> id and labels (borrowed from doc); 422 reply when
 * the shape is wrong. */
static int baseline_body(json_t *doc, http_reply *out, long long *id, json_t **labels) {
    json_t *sid = json_object_get(doc, "session_id"), *l = json_object_get(doc, "labels");
    if (!json_is_integer(sid) || json_integer_value(sid) < 1) {
        return http_error(out, ERR_BAD_BASELINE, "the body needs \"session_id\": a positive integer");
    }
    *id = json_integer_value(sid);
    *labels = json_is_null(l) ? NULL : l;
    if (!l || json_is_null(l)) return 0;
    const char *k;
    json_t *v;
    int ok = json_is_object(l) && json_object_size(l) <= HIST_LABELS_MAX;
    if (ok) json_object_foreach(l, k, v) ok &= *k && strlen(k) < 256 && json_is_string(v) && json_string_length(v) < 256;
    if (ok) return 0;
    return http_error(out, ERR_BAD_BASELINE, "\"labels\" must be an object of at most %d string values (keys and values under 256 bytes)",
               HIST_LABELS_MAX);
}

static int h_baseline_put(app *a, http_req *rq, http_reply *out) {
    char name[HIST_NAME_MAX + 1];
    if (baseline_name(rq, out, name, sizeof name)) return ERR_PARAM;
    json_error_t je;
    json_t *doc = rq->body ? json_loadb(rq->body, rq->body_len, 0, &je) : NULL, *labels = NULL, *body = NULL;
    if (!json_is_object(doc)) {
        json_decref(doc);
        return http_error(out, ERR_PARSE, "the body must be a JSON object: %s", rq->body ? je.text : "empty body");
    }
    long long sid = 0;
    int created = 0, rc_ = 0;
    if ((rc_ = baseline_body(doc, out, &sid, &labels))) { json_decref(doc); return rc_; }
    WITH_DB(a, out, history_baseline_put(db_, name, sid, labels, &created, &body));
    json_decref(doc);
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOSESSION, "no session %lld", sid);
    if (rc_) return db_fail(out, rc_, 0);
    if (created) snprintf(out->location, sizeof out->location, "/api/v1/baselines/%s", name);
    return http_json(out, created ? 201 : 200, body);
}

static int h_baseline_get(app *a, http_req *rq, http_reply *out) {
    char name[HIST_NAME_MAX + 1];
    if (baseline_name(rq, out, name, sizeof name)) return ERR_PARAM;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, history_baseline_get(db_, name, &body));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no baseline '%s'", name);
    return rc_ ? db_fail(out, rc_, 0) : http_json(out, 200, body);
}

static int h_baseline_delete(app *a, http_req *rq, http_reply *out) {
    char name[HIST_NAME_MAX + 1];
    if (baseline_name(rq, out, name, sizeof name)) return ERR_PARAM;
    int rc_;
    WITH_DB(a, out, history_baseline_delete(db_, name));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no baseline '%s'", name);
    if (rc_) return db_fail(out, rc_, 0);
    out->status = 204;
    return 0;
}

static int baselines_labelled(app *a, http_req *rq, http_reply *out, const hist_labels *f) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, history_baseline_list(db_, f, &body));
    if (rc_) return db_fail(out, rc_, 0);
    static const char *const cols[] = {"name", "session_id", "session_name", "labels", "updated_at", NULL};
    return text_or_csv(rq, out, body, "baselines", cols);
}

static int h_baselines(app *a, http_req *rq, http_reply *out) { return with_labels(a, rq, out, baselines_labelled); }

/* A threshold: a number >= 0, default dflt; 400 reply otherwise. */
static int threshold_param(http_req *rq, http_reply *out, const char *key, double dflt, double *v) {
    if (num_param(rq, out, key, v)) return ERR_PARAM;
    if (isnan(*v)) *v = dflt;
    if (*v >= 0) return 0;
    return http_error(out, ERR_PARAM, "%s must be a number >= 0", key);
}

static int h_regressions(app *a, http_req *rq, http_reply *out) {
    hist_thresholds t;
    if (threshold_param(rq, out, "rel", HIST_REL_DEFAULT, &t.rel) || threshold_param(rq, out, "abs_us", HIST_ABS_US_DEFAULT, &t.abs_us) ||
        threshold_param(rq, out, "abs_calls", HIST_ABS_CALLS_DEFAULT, &t.abs_calls) ||
        threshold_param(rq, out, "abs_share", HIST_ABS_SHARE_DEFAULT, &t.abs_share))
        return ERR_PARAM;
    /* ?gate=steps (default: the step and the named phases decide) or operators (every item
     * too); history.h */
    const char *gate = http_query(rq, "gate");
    if (gate && strcmp(gate, "steps") && strcmp(gate, "operators") && strcmp(gate, "memory"))
        return http_error(out, ERR_PARAM, "gate must be steps, operators or memory");
    t.strict = gate && !strcmp(gate, "operators");
    /* ?gate=memory: the steps gate and the GPU memory peak (history.h), abs_bytes its floor */
    t.memory = gate && !strcmp(gate, "memory");
    if (threshold_param(rq, out, "abs_bytes", HIST_ABS_BYTES_DEFAULT, &t.abs_bytes)) return ERR_PARAM;
    const char *name = http_query(rq, "baseline");
    if (name && !history_name_valid(name))
        return http_error(out, ERR_PARAM, "baseline must be a baseline name (A-Z a-z 0-9 . _ -, 1 to %d), not '%.64s'",
                          HIST_NAME_MAX, name);
    json_t *body = NULL;
    char msg[256] = "";
    int rc_;
    WITH_DB(a, out, history_regressions(db_, rq->id, name, &t, &body, msg, sizeof msg));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "%s", msg);
    if (rc_) return db_fail(out, rc_, rq->id);
    version_advice(body, json_integer_value(json_object_get(body, "base_session_id")), rq->id);
    const char *f = http_query(rq, "format");
    size_t len = 0;
    char *txt = NULL;
    if (f && !strcmp(f, "csv")) {
        static const char *const cols[] = {"direction", "kind", "category", "name", "metric", "unit", "status", "base", "head", "delta", "relative", NULL};
        txt = csv_rows(json_object_get(body, "items"), cols, &len);
    } else if (http_wants_text(rq)) {
        txt = text_regressions(body, &len);
    } else {
        return http_json(out, 200, body);
    }
    json_decref(body);
    if (!txt) return http_error(out, ERR_NOMEM, "out of memory");
    return http_text(out, 200, f && !strcmp(f, "csv") ? "text/csv; charset=utf-8" : "text/plain; charset=utf-8", txt, len);
}

static int trends_labelled(app *a, http_req *rq, http_reply *out, const hist_labels *l) {
    hist_trend_query q;
    long long lim;
    int needs_op = 0;
    q.labels = *l;
    if (int_param(rq, out, "limit", 30, 1, 1000, &lim)) return ERR_PARAM;
    q.limit = (int)lim;
    q.metric = http_query(rq, "metric");
    if (!q.metric) q.metric = "cuda_time_total";
    q.op = http_query(rq, "operator");
    q.kind = http_query(rq, "kind");
    if (!history_trend_metric(q.metric, &needs_op))
        return http_error(out, ERR_PARAM, "metric must be one of: %s", history_trend_metrics());
    if (needs_op && (!q.op || !*q.op)) return http_error(out, ERR_PARAM, "metric %s needs operator=NAME", q.metric);
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, history_trends(db_, &q, &body));
    if (rc_) return db_fail(out, rc_, 0);
    static const char *const cols[] = {"session_id", "created_at", "name", "value", NULL};
    return text_or_csv(rq, out, body, "points", cols);
}

static int h_trends(app *a, http_req *rq, http_reply *out) { return with_labels(a, rq, out, trends_labelled); }

/* GET /metrics: Prometheus text. Outside /api/ (like /healthz), so tokens never guard it. */
static int h_metrics(app *a, http_req *rq, http_reply *out) {
    (void)rq;
    size_t len = 0;
    char *t = metrics_render(a->st, &len);
    if (!t) return http_error(out, ERR_NOMEM, "out of memory");
    return http_text(out, 200, METRICS_CONTENT_TYPE, t, len);
}

/* POST /api/v1/admin/backup: a consistent copy into --backup-dir (backup.h). Backups
 * switched off (--backup-dir none) are a 403: the route exists, this server refuses it. */
static int h_backup(app *a, http_req *rq, http_reply *out) {
    (void)rq;
    const char *dir = a->cfg->backup_dir;
    if (!dir || !*dir) return http_error(out, ERR_OFF, "backups are off on this server (--backup-dir none)");
    backup_result res;
    char err[512];
    int rc = backup_run(a->st, dir, &res, err, sizeof err);
    if (rc == ERR_CONFLICT) return http_error(out, ERR_RUNNING, "%s", err);
    if (rc) return http_error(out, rc == ERR_IO ? ERR_BACKUP : rc, "%s", err);
    return http_json(out, 201, json_pack("{s:s,s:I,s:I}", "path", res.path, "bytes", (json_int_t)res.bytes, "sessions",
                                         (json_int_t)res.sessions));
}

/* ---- the table ---- */

static const route routes[] = {
    {"GET", "/healthz", h_health, CACHE_NO},
    {"GET", "/livez", h_live, CACHE_NO},
    {"GET", "/readyz", h_health, CACHE_NO},
    {"GET", "/api/v1/sessions", h_list, CACHE_LIST},
    {"GET", "/api/v1/sessions/{id}", h_get, CACHE_SESSION},
    {"DELETE", "/api/v1/sessions/{id}", h_delete, CACHE_NO},
    {"GET", "/api/v1/sessions/{id}/operators", h_operators, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/kernels", h_kernels, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/phases", h_phases, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/gpu", h_gpu, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/report", h_report, CACHE_SESSION},
    {"PUT", "/api/v1/sessions/{id}/report", h_report_put, CACHE_NO},
    {"GET", "/api/v1/sessions/{id}/suspects", h_suspects, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/steps", h_steps, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/memory", h_memory, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/efficiency", h_efficiency, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/timeline", h_timeline, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/events", h_events, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/area", h_area, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/busy", h_busy, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/trace", h_trace, CACHE_NO},
    {"GET", "/api/v1/compare", h_compare, CACHE_SESSION},
    {"GET", "/api/v1/sessions/{id}/regressions", h_regressions, CACHE_NO},
    {"GET", "/api/v1/baselines", h_baselines, CACHE_NO},
    {"GET", "/api/v1/baselines/{name}", h_baseline_get, CACHE_NO},
    {"PUT", "/api/v1/baselines/{name}", h_baseline_put, CACHE_NO},
    {"DELETE", "/api/v1/baselines/{name}", h_baseline_delete, CACHE_NO},
    {"GET", "/api/v1/trends", h_trends, CACHE_NO},
    {"GET", "/api/v1/jobs", h_jobs, CACHE_LIST},
    {"GET", "/api/v1/jobs/{tail}", h_job, CACHE_LIST},
    {"GET", "/metrics", h_metrics, CACHE_NO},
    {"POST", "/api/v1/admin/backup", h_backup, CACHE_NO},
    {"GET", "/api/v1/targets", capture_h_targets, CACHE_NO},
    {"GET", "/api/v1/captures", capture_h_list, CACHE_NO},
    {"POST", "/api/v1/captures", capture_h_create, CACHE_NO},
    {"GET", "/api/v1/captures/{id}", capture_h_get, CACHE_NO},
    {"POST", "/api/v1/captures/{id}/status", capture_h_status, CACHE_NO},
    {"POST", "/api/v1/captures/{id}/cancel", capture_h_cancel, CACHE_NO},
    {"PUT", "/api/v1/agents/{name}", capture_h_agent_put, CACHE_NO},
    {"POST", "/api/v1/agents/{name}/poll", capture_h_agent_poll, CACHE_NO},
    {"POST", "/api/v1/sessions/{id}/reanalyse", h_reanalyse, CACHE_NO},
    {NULL, NULL, NULL, CACHE_NO},
};

/* POST /api/v1/sessions is a route too, but http.c streams it; it is listed for Allow. */
static const char *const extra_methods[][2] = {{"POST", "/api/v1/sessions"}, {NULL, NULL}};

/* Matches path against pattern; sets *id for "{id}". A "{name}" segment is any run of
 * characters up to the next '/': its handler validates it, so a bad name is a 400, not a 404. */
static int match(const char *pattern, const char *path, long long *id) {
    while (*pattern && *path) {
        if (!strcmp(pattern, "{tail}")) return 1; /* the rest of the path, '/' included (a job label's value) */
        if (!strncmp(pattern, "{name}", 6)) {
            size_t n = strcspn(path, "/");
            if (!n) return 0;
            path += n;
            pattern += 6;
            continue;
        }
        if (!strncmp(pattern, "{id}", 4)) {
            if (!isdigit((unsigned char)*path)) return 0;
            char *end;
            errno = 0;
            long long v = strtoll(path, &end, 10);
            if (errno || v <= 0) return 0;
            *id = v;
            path = end;
            pattern += 4;
            continue;
        }
        if (*pattern++ != *path++) return 0;
    }
    return !*pattern && (!*path || !strcmp(path, "/"));
}

/* The reply cache's key: http_cache_key (reply.h), "" when it would not fit: not cached. */
static void cache_key(const http_req *rq, char *key, size_t n) { http_cache_key(rq, key, n); }

/* Runs a cacheable GET through the reply cache. The generation is read before the
 * handler runs, so a write that lands meanwhile makes the entry miss next time. */
static int run_cached(app *a, const route *r, http_req *rq, http_reply *out) {
    char key[2048];
    cache_key(rq, key, sizeof key);
    unsigned long gen = r->cached == CACHE_LIST ? store_list_generation(a->st) : store_generation(a->st);
    unsigned vary = 0;
    if (key[0] && rcache_get(a->cache, key, gen, &out->text, &out->text_len, &out->content_type, &vary)) {
        out->status = 200;
        if (rq->vary) *rq->vary |= vary;
        return 0;
    }
    unsigned before = rq->vary ? *rq->vary : 0;
    int rc = r->fn(a, rq, out);
    if (rc || !key[0] || out->status != 200 || out->stream_read || http_render(out) || !out->text) return rc;
    rcache_put(a->cache, key, gen, out->text, out->text_len, out->content_type, rq->vary ? *rq->vary & ~before : 0);
    return 0;
}

const char *routes_pattern(const char *method, const char *path) {
    long long id;
    for (const route *r = routes; r->method; r++)
        if (match(r->pattern, path, &id)) return r->pattern;
    for (int i = 0; extra_methods[i][0]; i++)
        if (match(extra_methods[i][1], path, &id)) return extra_methods[i][1];
    if (strncmp(path, "/api/", 5) && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) return "static";
    return "other";
}

int routes_dispatch(app *a, http_req *rq, http_reply *out) {
    char allow[64] = "";
    int path_known = 0;
    const char *method = strcmp(rq->method, "HEAD") ? rq->method : "GET";
    for (const route *r = routes; r->method; r++) {
        long long id = -1;
        if (!match(r->pattern, rq->path, &id)) continue;
        path_known = 1;
        if (strcmp(r->method, method)) {
            if (!strstr(allow, r->method)) snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s", allow[0] ? ", " : "", r->method);
            continue;
        }
        rq->id = id;
        int rc = r->cached ? run_cached(a, r, rq, out) : r->fn(a, rq, out);
        /* A handler that failed without a reply still answers: its code's row, a plain word. */
        if (rc && !out->status) http_error(out, rc, "the request failed");
        return 0;
    }
    for (int i = 0; extra_methods[i][0]; i++) {
        long long id;
        if (match(extra_methods[i][1], rq->path, &id) && !strstr(allow, extra_methods[i][0])) {
            path_known = 1;
            snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s", allow[0] ? ", " : "", extra_methods[i][0]);
        }
    }
    if (!path_known) return ROUTE_NONE;
    snprintf(out->allow, sizeof out->allow, "%s", allow);
    http_error(out, ERR_METHOD, "%s is not allowed on %s; allowed: %s", rq->method, rq->path, allow);
    return 0; /* a reply was given (the 405) */
}
