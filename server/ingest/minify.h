/* minify.h: an event's JSON text without the whitespace outside its strings (the stored
 * text is compact: lib/chunk.h).
 *
 * Owns nothing: a pure function of its bytes. Must not parse: it trusts that the text is
 * JSON that YAJL accepted (a backslash outside a string, which JSON forbids, would be read
 * as an escape). */
#ifndef FP_MINIFY_H
#define FP_MINIFY_H

#include <stddef.h>

/* Writes json (n bytes of JSON that YAJL accepted, or such JSON already compact) to out
 * without the whitespace outside strings; returns its length. out has room for n bytes,
 * does not overlap json, and is not NUL-terminated. */
size_t ingest_minify(const char *json, size_t n, char *out);

/* Tests: 0 turns the SSE2 blocks off (the byte loop alone, as before them); 1 back on. */
void ingest_minify_set_simd(int on);

#endif
