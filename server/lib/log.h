/* log.h: the server's one way to write a log line (logfmt, one line per call, on stderr).
 *
 *   log_line("info", "pruned", "session=%lld reason=%s", id, reason);
 *   -> level=info msg=pruned session=12 reason=age
 *
 * msg is free text: written bare when it is one plain word, double-quoted (logfmt_quote)
 * otherwise. fields is a printf format for the key=value pairs after it (NULL: none); a
 * value that is free text must be quoted by the caller with logfmt_quote. The line is
 * formatted first and written with one call, so lines of threads never interleave. */
#ifndef FP_LOG_H
#define FP_LOG_H

void log_line(const char *level, const char *msg, const char *fields, ...) __attribute__((format(printf, 3, 4)));

#endif
