/* tlblob.c: timeline bucket blobs, raw, zlib'd (read only) or zstd'd (tlblob.h). */
#include "lib/tlblob.h"

#include <string.h>
#include <zlib.h>
#include <zstd.h>

static const unsigned char tag_zlib[4] = {'T', 'L', 'z', 1}, tag_zstd[4] = {'T', 'L', 'z', 2};

size_t tl_blob_pack(const unsigned char *raw, unsigned char *out, void *cctx) {
    /* Room for less than raw: when the frame cannot fit there, raw is the smaller form. */
    size_t cap = TL_BLOB_RAW - sizeof tag_zstd - 1;
    size_t n = ZSTD_compressCCtx(cctx, out + sizeof tag_zstd, cap, raw, TL_BLOB_RAW, TL_ZSTD_LEVEL);
    if (ZSTD_isError(n)) {
        memcpy(out, raw, TL_BLOB_RAW);
        return TL_BLOB_RAW;
    }
    memcpy(out, tag_zstd, sizeof tag_zstd);
    return sizeof tag_zstd + n;
}

const unsigned char *tl_blob_unpack(const void *blob, size_t len, unsigned char *scratch) {
    if (!blob) return NULL;
    if (len == TL_BLOB_RAW) return blob;
    if (len <= sizeof tag_zstd || len > TL_BLOB_RAW) return NULL;
    const unsigned char *z = (const unsigned char *)blob + sizeof tag_zstd;
    size_t zlen = len - sizeof tag_zstd;
    if (!memcmp(blob, tag_zstd, sizeof tag_zstd)) {
        size_t n = ZSTD_decompress(scratch, TL_BLOB_RAW, z, zlen);
        return !ZSTD_isError(n) && n == TL_BLOB_RAW ? scratch : NULL;
    }
    if (memcmp(blob, tag_zlib, sizeof tag_zlib)) return NULL;
    uLongf n = (uLongf)TL_BLOB_RAW;
    if (uncompress(scratch, &n, z, (uLong)zlen) != Z_OK || n != TL_BLOB_RAW) return NULL;
    return scratch;
}
