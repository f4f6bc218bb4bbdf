/* log.h -- the collector's only output channel: one line on stderr.
 *
 * Two forms. fp_log is the CUPTI collector's, inside other people's programs: "firstpass:
 * <message>". fp_logkv is firstpass-upload's agent (--watch), a logfmt line like the server's
 * (README, "Logs"): `level=info msg=sent file="/traces/x.json.gz" session=42`, every free text
 * (a path, a server's or an engine's answer) quoted by fp_q, so that no file name can split a
 * line or forge a key. fp_log_logfmt(1) turns the remaining fp_log calls of a process into
 * `level=info msg="<message>"` lines (the agent sets it: all its lines are logfmt then). */
#ifndef FP_COLLECTOR_LOG_H
#define FP_COLLECTOR_LOG_H

#include <stddef.h>

/* Writes "firstpass: <message>\n" to stderr with a single write(2), so lines from several
 * threads or processes do not interleave. Never fails visibly, never exits. FIRSTPASS_QUIET=1
 * silences it (errors included). */
void fp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* From now on fp_log writes logfmt (on != 0). Call before any thread starts. */
void fp_log_logfmt(int on);

/* One logfmt line: "level=<level> msg=<msg>[ <fields>]\n", one write(2). msg is written bare
 * when it is one plain word, else quoted. fields is a printf format of key=value pairs whose
 * free-text values come from fp_q (NULL: none). Lines are cut at 4 KiB. FIRSTPASS_QUIET=1
 * silences it. */
void fp_logkv(const char *level, const char *msg, const char *fields, ...) __attribute__((format(printf, 3, 4)));

/* s as a double-quoted logfmt value: '"' and '\' escaped, newline as \n, CR as \r, tab as \t,
 * other control bytes as \xHH; at most 1 KiB (cut with "..."). The text lives in one of 8
 * buffers of the calling thread, reused in turn: at most 8 fp_q values a line. NULL gives "". */
const char *fp_q(const char *s);

/* As fp_q into the caller's buffer out of n bytes (n >= 8). Returns out. */
const char *fp_q_into(const char *s, char *out, size_t n);

#endif
