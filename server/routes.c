/* routes.c: the REST API's route table and its handlers.
 *
 * The table below is the whole API surface; docs/api.md and api/openapi.yaml describe
 * the same routes. Handlers parse and validate parameters, take a pooled connection,
 * call query_* and pick the representation (JSON, text/plain, CSV). Uploads (POST
 * /api/v1/sessions) are streamed by http.c and never reach this table's handlers. */
#include "routes.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "download.h"
#include "err.h"
#include "query.h"
#include "report.h"
#include "text.h"

typedef int (*handler)(app *a, http_req *rq, http_reply *out);

typedef struct route {
    const char *method;
    const char *pattern; /* "{id}" matches a positive integer */
    handler fn;
} route;

#define LIMIT_MAX 10000

/* ---- parameter helpers ---- */

/* Parses an optional integer parameter in [lo, hi]; writes a 400 reply when invalid. */
static int int_param(http_req *rq, http_reply *out, const char *key, long long dflt, long long lo, long long hi, long long *v) {
    const char *s = http_query(rq, key);
    *v = dflt;
    if (!s) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi) {
        http_error(out, 400, "invalid_parameter", "%s must be an integer from %lld to %lld, not '%.64s'", key, lo, hi, s);
        return -1;
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
        http_error(out, 400, "invalid_parameter", "%s must be a number, not '%.64s'", key, s);
        return -1;
    }
    *v = x;
    return 0;
}

static int db_fail(http_reply *out, int rc, long long id) {
    if (rc == ERR_NOTFOUND) return http_error(out, 404, "not_found", "no session %lld", id);
    return http_error(out, http_status_from_err(rc), http_code_from_err(rc), "the query failed");
}

/* Runs fn with a pooled connection. */
#define WITH_DB(a, out, call)                                                           \
    do {                                                                                \
        sqlite3 *db_ = store_get((a)->st);                                              \
        if (!db_) return http_error(out, 500, "database_error", "no database connection"); \
        rc_ = call;                                                                     \
        store_put((a)->st, db_);                                                        \
    } while (0)

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

static int h_health(app *a, http_req *rq, http_reply *out) {
    (void)a; (void)rq;
    return http_json(out, 200, json_pack("{s:s}", "status", "ok"));
}

static int h_list(app *a, http_req *rq, http_reply *out) {
    list_filter f;
    memset(&f, 0, sizeof f);
    const char *labels[16];
    int n = http_query_all(rq, "label", labels, 16);
    char kv[16][512];
    for (int i = 0; i < n; i++) {
        const char *colon = strchr(labels[i], ':');
        if (!colon || colon == labels[i] || strlen(labels[i]) >= sizeof kv[i])
            return http_error(out, 400, "invalid_parameter", "label must be key:value, not '%.64s'", labels[i]);
        snprintf(kv[i], sizeof kv[i], "%s", labels[i]);
        kv[i][colon - labels[i]] = '\0';
        f.label_keys[i] = kv[i];
        f.label_values[i] = kv[i] + (colon - labels[i]) + 1;
    }
    f.nlabels = n;
    f.name = http_query(rq, "name");
    f.source = http_query(rq, "source");
    long long lim, next, since, until;
    if (int_param(rq, out, "limit", 50, 1, 1000, &lim) || int_param(rq, out, "next", 0, 0, (1LL << 62), &next) ||
        int_param(rq, out, "since", 0, 0, (1LL << 40), &since) || int_param(rq, out, "until", 0, 0, (1LL << 40), &until))
        return 0;
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

static int h_get(app *a, http_req *rq, http_reply *out) {
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_session(db_, rq->id, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
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
    if (!query_sort_column(sort)) return http_error(out, 400, "invalid_parameter", "sort must be one of: %s", query_sort_fields());
    const char *g = http_query(rq, "group_by");
    if (g && strcmp(g, "input_shape") && strcmp(g, "name"))
        return http_error(out, 400, "invalid_parameter", "group_by must be input_shape or name");
    long long lim;
    if (int_param(rq, out, "limit", 100, 1, LIMIT_MAX, &lim)) return 0;
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
        return t ? http_text(out, 200, "text/plain; charset=utf-8", t, len) : http_error(out, 500, "out_of_memory", "out of memory");
    }
    return http_json(out, 200, body);
}

static int h_kernels(app *a, http_req *rq, http_reply *out) {
    const char *sort = http_query(rq, "sort");
    if (!sort) sort = "total_us";
    if (strcmp(sort, "total_us") && strcmp(sort, "calls") && strcmp(sort, "mean_us"))
        return http_error(out, 400, "invalid_parameter", "sort must be one of: total_us, calls, mean_us");
    long long lim;
    if (int_param(rq, out, "limit", 100, 1, LIMIT_MAX, &lim)) return 0;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_kernels(db_, rq->id, sort, (int)lim, &body));
    if (rc_) return db_fail(out, rc_, rq->id);
    static const char *const cols[] = {"name", "kind", "calls", "total_us", "mean_us", "min_us", "max_us", "share", "grid", "block",
                                       "registers_per_thread", "shared_memory_bytes", NULL};
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

/* PUT {"lines":{"next_experiment":"..."}}: any subset; null or "" restores the draft. */
static int h_report_put(app *a, http_req *rq, http_reply *out) {
    json_error_t je;
    json_t *doc = rq->body ? json_loadb(rq->body, rq->body_len, 0, &je) : NULL;
    if (!doc) return http_error(out, 400, "invalid_json", "the body must be a JSON object: %s", rq->body ? je.text : "empty body");
    json_t *lines = json_object_get(doc, "lines");
    int rc = 0;
    if (!json_is_object(lines)) {
        json_decref(doc);
        return http_error(out, 422, "invalid_report", "the body needs a \"lines\" object");
    }
    const char *k;
    json_t *v;
    json_object_foreach(lines, k, v) {
        int known = 0;
        for (int i = 0; i < REPORT_LINES; i++) known |= !strcmp(k, report_line_keys[i]);
        if (!known || !(json_is_string(v) || json_is_null(v)) || (json_is_string(v) && json_string_length(v) > 4000)) {
            /* k belongs to doc: format the reply before doc goes (ASan found the use after free). */
            http_error(out, 422, "invalid_report", "'%.40s' must be one of workload, hardware, top_cuda_time, top_cpu_cost, "
                                                   "next_experiment, with a string (at most 4000 bytes) or null", k);
            json_decref(doc);
            return 0;
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

static int h_timeline(app *a, http_req *rq, http_reply *out) {
    double s, e;
    long long nb;
    if (num_param(rq, out, "start_us", &s) || num_param(rq, out, "end_us", &e) || int_param(rq, out, "buckets", 1000, 1, 10000, &nb)) return 0;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_timeline(db_, rq->id, s, e, (int)nb, &body));
    return rc_ ? db_fail(out, rc_, rq->id) : http_json(out, 200, body);
}

static int h_trace(app *a, http_req *rq, http_reply *out) {
    int gz = http_accepts_gzip(rq), err = 0;
    download *d = download_open(a->st, rq->id, gz, &err);
    if (!d) return db_fail(out, err, rq->id);
    out->status = 200;
    out->content_type = "application/json";
    out->stream_read = download_read;
    out->stream_free = download_free;
    out->stream_cls = d;
    out->gzip_encoded = gz;
    snprintf(out->disposition, sizeof out->disposition, "attachment; filename=\"firstpass-session-%lld.json\"", rq->id);
    return 0;
}

static int h_compare(app *a, http_req *rq, http_reply *out) {
    long long base, head;
    if (int_param(rq, out, "base", 0, 1, (1LL << 62), &base) || int_param(rq, out, "head", 0, 1, (1LL << 62), &head)) return 0;
    if (!base || !head) return http_error(out, 400, "invalid_parameter", "base and head session ids are required");
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, query_compare(db_, base, head, &body));
    if (rc_ == ERR_NOTFOUND) return http_error(out, 404, "not_found", "session %lld or %lld does not exist", base, head);
    if (rc_) return db_fail(out, rc_, 0);
    static const char *const cols[] = {"name", "kind", "status", "base", "head", "delta", "relative", NULL};
    return text_or_csv(rq, out, body, "operators", cols);
}

/* ---- the table ---- */

static const route routes[] = {
    {"GET", "/healthz", h_health},
    {"GET", "/api/v1/sessions", h_list},
    {"GET", "/api/v1/sessions/{id}", h_get},
    {"DELETE", "/api/v1/sessions/{id}", h_delete},
    {"GET", "/api/v1/sessions/{id}/operators", h_operators},
    {"GET", "/api/v1/sessions/{id}/kernels", h_kernels},
    {"GET", "/api/v1/sessions/{id}/phases", h_phases},
    {"GET", "/api/v1/sessions/{id}/gpu", h_gpu},
    {"GET", "/api/v1/sessions/{id}/report", h_report},
    {"PUT", "/api/v1/sessions/{id}/report", h_report_put},
    {"GET", "/api/v1/sessions/{id}/timeline", h_timeline},
    {"GET", "/api/v1/sessions/{id}/trace", h_trace},
    {"GET", "/api/v1/compare", h_compare},
    {NULL, NULL, NULL},
};

/* POST /api/v1/sessions is a route too, but http.c streams it; it is listed for Allow. */
static const char *const extra_methods[][2] = {{"POST", "/api/v1/sessions"}, {NULL, NULL}};

/* Matches path against pattern; sets *id for "{id}". */
static int match(const char *pattern, const char *path, long long *id) {
    while (*pattern && *path) {
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
        r->fn(a, rq, out);
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
    http_error(out, 405, "method_not_allowed", "%s is not allowed on %s; allowed: %s", rq->method, rq->path, allow);
    return 0;
}
