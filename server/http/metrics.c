/* metrics.c: Prometheus counters and histograms of requests, uploads and retention.
 *
 * Owns every series (below, guarded by one mutex) and their text rendering. It knows no
 * MHD and no SQL: the database gauges come from store_usage_get and store_size_bytes.
 * A mutex rather than atomics: a request updates three related values (counter, bucket,
 * sum) that a scrape must see together, and the critical sections are a few adds. */
#include "http/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/buf.h"

#define MAX_SERIES 512 /* (route, method, status) triples; ~25 routes x few methods x few statuses */
#define MAX_ROUTES 64  /* route patterns with a duration histogram */

static const double req_le[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double ingest_le[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
#define REQ_NB (sizeof req_le / sizeof req_le[0])
#define INGEST_NB (sizeof ingest_le / sizeof ingest_le[0])

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "other"};
#define NMETHODS (sizeof methods / sizeof methods[0])

typedef struct hist {
    unsigned long long bucket[16]; /* non-cumulative counts per le bound; [nb] is +Inf */
    double sum;                    /* seconds */
    unsigned long long count;
} hist;
_Static_assert(REQ_NB < 16 && INGEST_NB < 16, "hist.bucket holds every bound plus +Inf");

typedef struct series {
    const char *route; /* static: routes_pattern's */
    unsigned method;   /* index into methods[] */
    int status;
    unsigned long long n;
} series;

typedef struct route_hist {
    const char *route;
    hist h;
} route_hist;

/* Everything below is guarded by g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static series g_series[MAX_SERIES];
static size_t g_nseries;
static unsigned long long g_series_overflow; /* requests past MAX_SERIES: route="other" */
static route_hist g_routes[MAX_ROUTES];
static size_t g_nroutes;
static unsigned long long g_uploads[2];      /* [0] rejected, [1] accepted */
static unsigned long long g_ingest_bytes, g_ingest_events;
static hist g_ingest;
static unsigned long long g_pruned_age, g_pruned_size;

static void hist_add(hist *h, const double *le, size_t nb, double v) {
    size_t i = 0;
    while (i < nb && v > le[i]) i++;
    h->bucket[i]++;
    h->sum += v;
    h->count++;
}

static unsigned method_index(const char *m) {
    for (unsigned i = 0; i + 1 < NMETHODS; i++)
        if (!strcmp(m, methods[i])) return i;
    return NMETHODS - 1;
}

/* Finds or adds the series; NULL when the table is full. Caller holds g_lock. */
static series *series_of(const char *route, unsigned method, int status) {
    for (size_t i = 0; i < g_nseries; i++)
        if (g_series[i].method == method && g_series[i].status == status && !strcmp(g_series[i].route, route)) return &g_series[i];
    if (g_nseries == MAX_SERIES) return NULL;
    g_series[g_nseries] = (series){route, method, status, 0};
    return &g_series[g_nseries++];
}

static hist *route_hist_of(const char *route) {
    for (size_t i = 0; i < g_nroutes; i++)
        if (!strcmp(g_routes[i].route, route)) return &g_routes[i].h;
    if (g_nroutes == MAX_ROUTES) return NULL;
    memset(&g_routes[g_nroutes], 0, sizeof g_routes[g_nroutes]);
    g_routes[g_nroutes].route = route;
    return &g_routes[g_nroutes++].h;
}

void metrics_request(const char *route, const char *method, int status, double seconds) {
    unsigned m = method_index(method);
    pthread_mutex_lock(&g_lock);
    series *s = series_of(route, m, status);
    if (s) s->n++;
    else g_series_overflow++;
    hist *h = route_hist_of(route);
    if (h) hist_add(h, req_le, REQ_NB, seconds);
    if (!strcmp(route, "/api/v1/sessions") && !strcmp(method, "POST")) g_uploads[status == 201]++;
    pthread_mutex_unlock(&g_lock);
}

void metrics_ingest(unsigned long long bytes, unsigned long long events, double seconds) {
    pthread_mutex_lock(&g_lock);
    g_ingest_bytes += bytes;
    g_ingest_events += events;
    hist_add(&g_ingest, ingest_le, INGEST_NB, seconds);
    pthread_mutex_unlock(&g_lock);
}

void metrics_pruned(const char *reason) {
    pthread_mutex_lock(&g_lock);
    if (!strcmp(reason, "age")) g_pruned_age++;
    else g_pruned_size++;
    pthread_mutex_unlock(&g_lock);
}

/* ---- rendering ---- */

/* printf into the buffer; a failed allocation is remembered in *bad. */
__attribute__((format(printf, 3, 4)))
static void put(buf *b, int *bad, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (buf_vprintf(b, fmt, ap)) *bad = 1;
    va_end(ap);
}

static void header(buf *b, int *bad, const char *name, const char *type, const char *help) {
    put(b, bad, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's _bucket (cumulative), _sum and _count lines; labels is "" or `k="v",`. */
static void hist_lines(buf *b, int *bad, const char *name, const char *labels, const hist *h, const double *le, size_t nb) {
    unsigned long long cum = 0;
    for (size_t i = 0; i < nb; i++) {
        cum += h->bucket[i];
        put(b, bad, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, le[i], cum);
    }
    cum += h->bucket[nb];
    put(b, bad, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, cum);
    size_t l = strlen(labels);
    /* _sum/_count take the labels without the trailing comma, in braces, or none. */
    if (l) {
        put(b, bad, "%s_sum{%.*s} %.6f\n", name, (int)(l - 1), labels, h->sum);
        put(b, bad, "%s_count{%.*s} %llu\n", name, (int)(l - 1), labels, h->count);
    } else {
        put(b, bad, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, h->count);
    }
}

static void render_requests(buf *b, int *bad) {
    header(b, bad, "firstpass_http_requests_total", "counter",
           "HTTP requests answered, by route pattern, method and status (route=\"other\": no route matched).");
    for (size_t i = 0; i < g_nseries; i++)
        put(b, bad, "firstpass_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n", g_series[i].route,
            methods[g_series[i].method], g_series[i].status, g_series[i].n);
    if (g_series_overflow)
        put(b, bad, "firstpass_http_requests_total{route=\"other\",method=\"other\",status=\"other\"} %llu\n", g_series_overflow);
    header(b, bad, "firstpass_http_request_duration_seconds", "histogram",
           "Seconds from a request's headers to its reply being queued, by route pattern.");
    for (size_t i = 0; i < g_nroutes; i++) {
        char labels[160];
        snprintf(labels, sizeof labels, "route=\"%s\",", g_routes[i].route);
        hist_lines(b, bad, "firstpass_http_request_duration_seconds", labels, &g_routes[i].h, req_le, REQ_NB);
    }
}

static void render_ingest(buf *b, int *bad) {
    header(b, bad, "firstpass_uploads_total", "counter",
           "Uploads (POST /api/v1/sessions): accepted = 201, rejected = any other reply.");
    put(b, bad, "firstpass_uploads_total{result=\"accepted\"} %llu\n", g_uploads[1]);
    put(b, bad, "firstpass_uploads_total{result=\"rejected\"} %llu\n", g_uploads[0]);
    header(b, bad, "firstpass_ingest_bytes_total", "counter", "Bytes received (as sent, compressed or not) of accepted uploads.");
    put(b, bad, "firstpass_ingest_bytes_total %llu\n", g_ingest_bytes);
    header(b, bad, "firstpass_ingest_events_total", "counter", "Trace events parsed in accepted uploads.");
    put(b, bad, "firstpass_ingest_events_total %llu\n", g_ingest_events);
    header(b, bad, "firstpass_ingest_duration_seconds", "histogram",
           "Seconds from an accepted upload's headers to its session being committed.");
    hist_lines(b, bad, "firstpass_ingest_duration_seconds", "", &g_ingest, ingest_le, INGEST_NB);
    header(b, bad, "firstpass_retention_pruned_total", "counter", "Sessions deleted by retention (--retain-days: age, --max-db-bytes: size).");
    put(b, bad, "firstpass_retention_pruned_total{reason=\"age\"} %llu\n", g_pruned_age);
    put(b, bad, "firstpass_retention_pruned_total{reason=\"size\"} %llu\n", g_pruned_size);
}

/* Gauges read outside g_lock: they query SQLite, which must not hold up requests. */
static void render_db(buf *b, int *bad, store *st) {
    store_usage u;
    int ok = !store_usage_get(st, &u);
    header(b, bad, "firstpass_db_size_bytes", "gauge", "Bytes on disk of the database file plus its WAL.");
    put(b, bad, "firstpass_db_size_bytes %lld\n", store_size_bytes(st));
    if (!ok) return; /* no sample beats a wrong one */
    header(b, bad, "firstpass_db_used_bytes", "gauge",
           "Bytes of database pages in use: (page_count - freelist_count) * page_size, what --max-db-bytes limits.");
    put(b, bad, "firstpass_db_used_bytes %lld\n", (u.pages - u.free_pages) * u.page_size);
    header(b, bad, "firstpass_sessions_stored", "gauge", "Sessions in the database.");
    put(b, bad, "firstpass_sessions_stored %lld\n", u.sessions);
}

char *metrics_render(store *st, size_t *len) {
    buf b = {0};
    int bad = 0;
    pthread_mutex_lock(&g_lock);
    render_ingest(&b, &bad);
    render_requests(&b, &bad);
    pthread_mutex_unlock(&g_lock);
    render_db(&b, &bad, st);
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
