/* auth.h: bearer-token access control (--tokens-file).
 *
 * auth.c owns the tokens file format and its parser, the in-memory token table and the
 * check of an `Authorization: Bearer TOKEN` header. The table holds only SHA-256 digests
 * (a plaintext token is hashed as it is read), so every comparison is digest against digest,
 * of one fixed length, in constant time. http.c decides which requests need a token and
 * builds the 401/403 replies; nothing in auth.c logs, and no token ever leaves it.
 *
 * File format, one token a line (blank lines and lines starting with '#' are skipped):
 *     NAME TOKEN           plaintext, 16..4096 characters of [A-Za-z0-9-._~+/] then '='s
 *     NAME sha256:HEX      the SHA-256 of the token as 64 hex digits (hashed at rest)
 * NAME is 1..64 characters of [A-Za-z0-9._@-]; it is what the access log shows. */
#ifndef FP_AUTH_H
#define FP_AUTH_H

#include <stddef.h>

#define AUTH_DIGEST_LEN 32
#define AUTH_NAME_MAX 64
#define AUTH_TOKEN_MIN 16
#define AUTH_TOKEN_MAX 4096

typedef struct auth_tokens auth_tokens;

/* auth_check's verdicts. */
enum { AUTH_OK = 0, AUTH_MISSING, AUTH_MALFORMED, AUTH_DENIED };

/* Parses the text of a tokens file. NULL on error with "line N: why" in err. A file with no
 * token is an error too: a server that was asked for tokens must not run open. */
auth_tokens *auth_parse(const char *text, size_t len, char *err, size_t errlen);
/* Reads and parses path; errors are "PATH:N: why" or "PATH: why". */
auth_tokens *auth_load(const char *path, char *err, size_t errlen);
void auth_free(auth_tokens *t);
size_t auth_count(const auth_tokens *t);
size_t auth_plaintext_count(const auth_tokens *t); /* tokens not given as sha256: */

/* Checks an Authorization header value (NULL when absent). On AUTH_OK, *name (when name is
 * not NULL) is the token's NAME, owned by t. */
int auth_check(const auth_tokens *t, const char *authorization, const char **name);

/* 1 when a and b (n bytes each) are equal; the time taken does not depend on the bytes. */
int auth_equal(const unsigned char *a, const unsigned char *b, size_t n);

#endif
