/* tlblob.c: timeline bucket blobs, raw or deflated (tlblob.h). */
#include "lib/tlblob.h"

#include <string.h>
#include <zlib.h>

static const unsigned char tag[4] = {'T', 'L', 'z', 1};

size_t tl_blob_pack(const unsigned char *raw, unsigned char *out) {
    /* Room for less than raw: when deflate cannot fit there, raw is the smaller form. */
    uLongf n = (uLongf)(TL_BLOB_RAW - sizeof tag - 1);
    /* Level 1: a thread pool's hundreds of tracks are one blob each, and at the default level
     * deflate was a fifth of the request thread (bench/README.md, issue 24). */
    if (compress2(out + sizeof tag, &n, raw, (uLong)TL_BLOB_RAW, Z_BEST_SPEED) != Z_OK) {
        memcpy(out, raw, TL_BLOB_RAW);
        return TL_BLOB_RAW;
    }
    memcpy(out, tag, sizeof tag);
    return sizeof tag + (size_t)n;
}

const unsigned char *tl_blob_unpack(const void *blob, size_t len, unsigned char *scratch) {
    if (!blob) return NULL;
    if (len == TL_BLOB_RAW) return blob;
    if (len <= sizeof tag || len > TL_BLOB_RAW || memcmp(blob, tag, sizeof tag)) return NULL;
    uLongf n = (uLongf)TL_BLOB_RAW;
    const unsigned char *z = (const unsigned char *)blob + sizeof tag;
    if (uncompress(scratch, &n, z, (uLong)(len - sizeof tag)) != Z_OK || n != TL_BLOB_RAW) return NULL;
    return scratch;
}
