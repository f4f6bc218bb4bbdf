/* utf8.h: text cut at a byte limit without splitting a UTF-8 character; UTF-8 checked, and
 * repaired where text from a client must become JSON.
 *
 * Owns no memory. Why it exists: the analysis formats names into fixed buffers (a report
 * line, a next experiment, a question's summary); snprintf cuts at a byte, and a name cut
 * inside a multi-byte character is invalid UTF-8, which Jansson refuses: json_pack then
 * returned NULL and the suspect, line or evidence silently went missing. The input is
 * valid UTF-8 (the importer validates every string); only the cut end is repaired. */
#ifndef FP_UTF8_H
#define FP_UTF8_H

#include <stdarg.h>
#include <stddef.h>

/* The length of s[0..len) cut to at most max bytes at a character boundary. */
size_t utf8_cut(const char *s, size_t len, size_t max);

/* snprintf, and when the output was cut, the cut character's leading bytes dropped. The
 * return value is vsnprintf's (the length it wanted), so `o += ...; if (o < n)` chains of
 * appends behave as with snprintf. */
int utf8_snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int utf8_vsnprintf(char *buf, size_t n, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* s when it is at most max bytes long; else its first max bytes or fewer, cut at a
 * character boundary and ended with an ellipsis ("\u2026"), in buf of n >= max + 4 bytes.
 * For a name repeated where its whole text is kept elsewhere (a timeline band, evidence). */
const char *utf8_clip(const char *s, size_t max, char *buf, size_t n);

/* The length of the longest prefix of s[0..n) that is UTF-8 as RFC 3629 has it: n when all
 * of it is. Overlong forms (C0 AF), encoded surrogates (ED A0 80) and code points over
 * U+10FFFF (F4 90 80 80) are not; a NUL byte is (JSON text holds none raw). Why RFC 3629 and
 * not the shape alone: YAJL checks only the shape of a sequence, and Jansson, which refuses
 * the rest, then returned NULL for the reply or the name (issue 22). ASCII goes 8 bytes a step. */
size_t utf8_valid_prefix(const char *s, size_t n);

/* s[0..n) into out with each byte that starts no valid sequence (utf8_valid_prefix's rule)
 * written as U+FFFD (EF BF BD) instead; out has room for 3 * n bytes, is not NUL-terminated
 * and does not overlap s. Returns the bytes written. Inside a JSON string this keeps the
 * text JSON: a replaced byte is never a quote, a backslash or a control character. */
size_t utf8_scrub(const char *s, size_t n, char *out);

#endif
