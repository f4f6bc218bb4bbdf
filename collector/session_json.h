/* session_json.h -- aggregator + metadata -> native session JSON (docs/contract.md). */
#ifndef FP_COLLECTOR_SESSION_JSON_H
#define FP_COLLECTOR_SESSION_JSON_H

#include <stddef.h>

#include "agg.h"
#include "membuf.h"
#include "session.h"

/* Output sink: writes n bytes, returns 0 or -1 (the writer then stops and returns -1). */
typedef int (*fp_write_fn)(void *ctx, const char *p, size_t n);

/* Writes the whole document: schemaVersion, the "firstpass" object (meta, with
 * dropped_records and events_truncated taken from agg, plus "aggregates", "collector" counters
 * and "warnings"), deviceProperties, and traceEvents (sorted by start, longer first; ts/dur in
 * microseconds with 3 decimals relative to meta->start_ns). warnings may be NULL. The
 * aggregator is not modified. Returns 0, or -1 on OOM or a sink error. */
int fp_session_write(const fp_agg *agg, const fp_session_meta *meta,
                     const char *const *warnings, size_t nwarnings, fp_write_fn fn, void *ctx);

/* Formats ns as microseconds with 3 decimals ("-1.500", "12.000") into buf (>= 32 bytes). */
void fp_format_us(long long ns, char *buf, size_t len);

#endif
