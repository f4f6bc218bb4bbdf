/* download.h: the Chrome-trace download of a stored session, streamed.
 *
 * Events come back chunk by chunk from event_chunks, exactly as uploaded (args kept,
 * metadata and flow events included), wrapped in {"traceEvents":[...], <top-level keys>}.
 * Memory per download: one batch of compressed chunks (1 MiB and one chunk at most), one
 * inflated chunk and the output window, whatever the session's size. Between two batches (while the client reads) it holds
 * no database connection and no transaction (download.c says why). A session deleted while
 * its download runs ends the download with an error (-1): the stream is cut short. */
#ifndef FP_DOWNLOAD_H
#define FP_DOWNLOAD_H

#include "store/store.h"

typedef struct download download;

/* NULL with *err set to ERR_NOTFOUND / ERR_DB / ERR_NOMEM. */
download *download_open(store *s, long long id, int gzip, int *err);
/* Like MHD's content reader: bytes written (> 0), 0 at the end, -1 on error. */
long download_read(void *d, unsigned long long pos, char *out, size_t max);
void download_free(void *d);

#endif
