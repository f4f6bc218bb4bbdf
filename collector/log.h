/* log.h -- the collector's only output channel: one line on stderr, prefixed "firstpass: ". */
#ifndef FP_COLLECTOR_LOG_H
#define FP_COLLECTOR_LOG_H

/* Writes "firstpass: <message>\n" to stderr with a single write(2), so lines from several
 * threads or processes do not interleave. Never fails visibly, never exits. FIRSTPASS_QUIET=1
 * silences it (errors included). */
void fp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
