/* metrics.h: the server's Prometheus metrics (GET /metrics, text exposition format 0.0.4).
 *
 * http.c reports each finished request (metrics_request) and each stored upload
 * (metrics_ingest); retention.c reports each pruned session. metrics_render writes every
 * series plus the database gauges. All functions are thread-safe (MHD runs one thread per
 * connection). Route labels are route *patterns* (routes_pattern), never raw paths, so the
 * number of series stays bounded whatever clients request. */
#ifndef FP_METRICS_H
#define FP_METRICS_H

#include <stddef.h>

#include "store/store.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One finished request: route pattern (static string: routes_pattern), method, status,
 * seconds from its headers to its reply. A POST to "/api/v1/sessions" also counts in
 * firstpass_uploads_total: accepted when status is 201, rejected otherwise. */
void metrics_request(const char *route, const char *method, int status, double seconds);

/* One stored upload: bytes as received, events parsed, seconds from headers to commit. */
void metrics_ingest(unsigned long long bytes, unsigned long long events, double seconds);

/* One session deleted by retention; reason is "age" or "size". */
void metrics_pruned(const char *reason);

/* The exposition text, malloc'd (*len set); NULL when out of memory. The database gauges
 * are read from st at the call. */
char *metrics_render(store *st, size_t *len);

#endif
