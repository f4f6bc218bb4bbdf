/* text.h: plain-text and CSV renderings of API replies, for people using curl. */
#ifndef FP_TEXT_H
#define FP_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* Each returns a malloc'd NUL-terminated string (length in *len) or NULL on OOM. */
char *text_operators(const json_t *reply, size_t *len);   /* key_averages().table() layout */
char *csv_rows(const json_t *rows, const char *const *cols, size_t *len); /* header + rows */
char *text_report(const json_t *report, size_t *len);     /* exactly five lines */
char *text_rows(const json_t *rows, const char *const *cols, size_t *len); /* aligned columns */
/* GET /sessions/{id}/regressions as text: two header lines (verdict, thresholds), then the items. */
char *text_regressions(const json_t *reply, size_t *len);
/* GET /sessions/{id}/suspects as text: the verdict line (healthy, wall, GPU, steps), then one
 * block per suspect (rank, category, culprit, time at stake, next experiment). */
char *text_suspects(const json_t *reply, size_t *len);
/* GET /efficiency as text: the device and session figures, one "key: value" a line, then
 * the operator rows (cols) as text_rows lays them out. */
char *text_efficiency(const json_t *reply, const char *const *cols, size_t *len);

#endif
