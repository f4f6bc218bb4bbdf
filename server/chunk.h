/* chunk.h: the layout of one stored event chunk (event_chunks.data).
 *
 * A chunk is zlib-deflated; inflated it is a run of records, each
 *   OFFSET SIZE  DESCRIPTION
 *   0      8     ts, double, us          (0 when the event had none)
 *   8      8     dur, double, us         (0 when the event had none)
 *   16     4     name string id          (strings table of the session)
 *   20     4     kind string id
 *   24     1     class (trace.h enum ev_class)
 *   25     1     ph, first character
 *   26     2     reserved, 0
 *   28     4     json length N
 *   32     N     the original event, compact JSON
 * little-endian as the host writes it (the database is not meant to move between
 * architectures of different byte order). */
#ifndef FP_CHUNK_H
#define FP_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define CHUNK_EVENTS 2048        /* events per chunk at most */
#define CHUNK_BYTES (512u << 10) /* inflated bytes per chunk, about */
#define CHUNK_HDR 32

typedef struct chunk_rec {
    double ts, dur;
    uint32_t name, kind;
    uint8_t cls, ph;
    uint32_t json_len;
} chunk_rec;

/* Appends one record; 0 or ERR_NOMEM. */
int chunk_append(buf *b, const chunk_rec *r, const char *json);

/* Inflates a stored chunk into out (reset first). 0, ERR_NOMEM or ERR_IO. */
int chunk_inflate(const void *z, size_t zlen, buf *out);

/* Walks inflated records: *off starts at 0; returns 1 with r and *json set, 0 at the
 * end, -1 on a malformed record. */
int chunk_next(const buf *b, size_t *off, chunk_rec *r, const char **json);

#endif
