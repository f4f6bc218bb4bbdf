/* tlblob.h: the stored form of one track's timeline buckets (timeline_buckets.data).
 *
 * A track's level-of-detail pyramid is TL_BUCKETS records of {float busy_us; u32 count;
 * u32 top_name} in host byte order: TL_BLOB_RAW bytes. Stored as they are, that is 48 KiB
 * per track whatever the session's size, about 100 KB for a 100-event session, and 995 MB
 * of the 1.3 GB database of 10,000 such sessions (bench/README.md). A short session's
 * records are nearly all zero (idle) or alike (fully busy), so they are stored compressed
 * behind a 4-byte tag: a 100-event track takes about 200 bytes. Lossless, so the timeline
 * reply does not change.
 *
 * Three forms, told apart by length and tag, so no schema change was needed:
 *   - raw: exactly TL_BLOB_RAW bytes; what the first databases hold, and what is kept when
 *     compressing does not make the records smaller;
 *   - "TLz" 0x01, then a zlib stream of the TL_BLOB_RAW bytes: what databases written
 *     before the zstd form hold (read, never written);
 *   - "TLz" 0x02, then a zstd frame of them (zstd level TL_ZSTD_LEVEL): written now. Why
 *     zstd: zlib's level 1 took 45 ms for the 386 tracks of the many-thread shape, a fifth of
 *     its host walk; zstd 6 ms, and 18 % smaller (bench/README.md, issue 24).
 * A packed blob is always shorter than TL_BLOB_RAW, so a raw one is never mistaken for it. */
#ifndef FP_TLBLOB_H
#define FP_TLBLOB_H

#include <stddef.h>

/* Resolution of a track's timeline pyramid: its buckets over the session's span. */
#define TL_BUCKETS 4096

#define TL_BLOB_RAW ((size_t)TL_BUCKETS * 12)

#define TL_ZSTD_LEVEL 1

/* The blob to store for the records raw (TL_BLOB_RAW bytes), written to out (room for
 * TL_BLOB_RAW bytes) with cctx (a ZSTD_CCtx, reused across calls): its length, TL_BLOB_RAW
 * when it is raw. */
size_t tl_blob_pack(const unsigned char *raw, unsigned char *out, void *cctx);

/* The records of a stored blob: blob itself when raw, else inflated into scratch (room
 * for TL_BLOB_RAW bytes). NULL when it is neither form (damaged or not a timeline blob). */
const unsigned char *tl_blob_unpack(const void *blob, size_t len, unsigned char *scratch);

#endif
