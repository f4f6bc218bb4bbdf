/* utf8.h: text cut at a byte limit without splitting a UTF-8 character.
 *
 * Owns no memory. Why it exists: the analysis formats names into fixed buffers (a report
 * line, a next experiment, a question's summary); snprintf cuts at a byte, and a name cut
 * inside a multi-byte character is invalid UTF-8, which Jansson refuses: json_pack then
 * returned NULL and the suspect, line or evidence silently went missing. The input is
 * valid UTF-8 (the importer validates every string); only the cut end is repaired. */
#ifndef FP_UTF8_H
#define FP_UTF8_H

#include <stddef.h>

/* The length of s[0..len) cut to at most max bytes at a character boundary. */
size_t utf8_cut(const char *s, size_t len, size_t max);

/* snprintf, and when the output was cut, the cut character's leading bytes dropped. The
 * return value is vsnprintf's (the length it wanted), so `o += ...; if (o < n)` chains of
 * appends behave as with snprintf. */
int utf8_snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* s when it is at most max bytes long; else its first max bytes or fewer, cut at a
 * character boundary and ended with an ellipsis ("\u2026"), in buf of n >= max + 4 bytes.
 * For a name repeated where its whole text is kept elsewhere (a timeline band, evidence). */
const char *utf8_clip(const char *s, size_t max, char *buf, size_t n);

#endif
