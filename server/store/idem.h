/* idem.h: the Idempotency-Key of uploads (issue 50; IETF httpapi draft "The Idempotency-Key
 * HTTP Header Field"): a second upload of one key is told the session the first one stored,
 * or that the first one is still in flight, on this server or on another replica of one
 * PostgreSQL database.
 *
 * Owns the upload_claims table and reads sessions.idempotency_key (schema.sql, version 10);
 * commit.c stores the key on the session and deletes its claim in the session's transaction.
 * A claim is a row (key, owner, claimed_at, seen_at): owner is the claiming server's process
 * (a random id per start), seen_at its last refresh (idem_refresh, every IDEM_REFRESH_S while
 * it holds claims). A claim not refreshed for IDEM_STALE_S belongs to a server that died: the
 * next upload of its key takes it over. Each call takes a pooled connection of its own. */
#ifndef FP_IDEM_H
#define FP_IDEM_H

#include "store/store.h"

#define IDEM_KEY_MAX 255   /* bytes of a key (visible ASCII, http.c checks) */
#define IDEM_REFRESH_S 10  /* how often a server refreshes the claims it holds */
#define IDEM_STALE_S 60    /* a claim older than this since its last refresh is a dead server's */
#define IDEM_RETRY_S 5     /* the Retry-After of a 409: a key in flight */

enum { IDEM_CLAIMED = 0, IDEM_STORED = 1 };

/* Claims key for an upload by owner at now (unix seconds). IDEM_CLAIMED: it is this upload's
 * (release it with idem_release unless its session commits); IDEM_STORED: a stored session
 * holds the key, *session_id and *events are its (nothing claimed); ERR_CONFLICT: another
 * upload of the key is in flight, *since when it began; ERR_DBDOWN, ERR_DB. Why the claim
 * first, the lookup second: a session commits with its claim's delete in one transaction, so
 * whichever way two uploads of one key interleave, the second either finds the claim (409) or,
 * having claimed, finds the session (200): never neither. */
int idem_claim(store *st, const char *key, const char *owner, long long now, long long *session_id, long long *events, long long *since);
/* Deletes owner's claim of key (the upload failed or was dropped). 0 or ERR_DB. */
int idem_release(store *st, const char *key, const char *owner);
/* Marks owner's claims as alive now. 0 or ERR_DB. */
int idem_refresh(store *st, const char *owner, long long now);

#endif
