/* nsys.h: the Nsight Systems importer: an `nsys export --type sqlite` file -> the loader.
 *
 * An upload whose first (decompressed) bytes are the SQLite magic is not parsed by ingest:
 * ingest hands its bytes to nsys_spool_sink, which writes them to a temporary file (memory
 * stays bounded whatever the file size). When the body is complete, nsys_import opens that
 * file read-only and feeds its rows to the SAME loader sink the JSON importer feeds, as
 * Kineto-equivalent events (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver,
 * user_annotation), so analysis, tables, report, timeline and download work unchanged.
 * Which tables and columns are read, and how, is told in nsys.c's header comment. */
#ifndef FP_NSYS_H
#define FP_NSYS_H

#include <stddef.h>

#include "ingest/load.h"

#define NSYS_MAX_GPUS 64               /* TARGET_INFO_GPU rows read */
#define NSYS_MAX_STRING (1 << 20)      /* bytes of one string or row (SQLITE_LIMIT_LENGTH) */
#define NSYS_MAX_VM_STEPS 20000000000LL /* SQLite VM steps for one import (progress handler) */

typedef struct nsys_spool nsys_spool;

/* An ingest_bytes_fn (ingest_set_sqlite_sink). ctx is a `nsys_spool **`, NULL at first:
 * the first call creates the temporary file ($TMPDIR, else /tmp; unlinked by
 * nsys_spool_free). Returns 0, ERR_NOMEM or ERR_IO (cannot create or write the file). */
int nsys_spool_sink(void *ctx, const void *buf, size_t len);

/* Closes and deletes the temporary file; accepts NULL. */
void nsys_spool_free(nsys_spool *sp);

/* Reads the spooled export into ld (its sink, then loader_set_source "nsys"); the caller
 * then runs loader_commit as for a JSON trace. 0 with *events set (rows fed), or:
 *   ERR_INVALID   truncated or corrupt SQLite file (400)
 *   ERR_NOTTRACE  an SQLite file, but not an nsys export, or a table lacks a column (422)
 *   ERR_TOOBIG    a string over NSYS_MAX_STRING, the VM step budget, or --max-events (413)
 *   ERR_NOMEM, ERR_IO, ERR_DB, or the loader sink's error
 * with a message in err. Nothing is stored on failure (the loader is not committed). */
int nsys_import(nsys_spool *sp, loader *ld, unsigned long long *events, char *err, size_t errlen);

/* A re-analysis of a session imported from an export (reanalyse.h) parses its stored events,
 * whose args lack what nsys_import computed beside them: each kernel's "blocks per SM" and
 * "est. achieved occupancy %" (estimated from the GPU table, not written, so the download
 * stays the export's). This sink, in front of the loader's, estimates them again by the
 * same code from the same table, which the stored meta's deviceProperties holds (the meta
 * must come before the events). */
typedef struct nsys_replay nsys_replay;
nsys_replay *nsys_replay_new(const ingest_sink *loader_sink); /* NULL: out of memory */
const ingest_sink *nsys_replay_sink(nsys_replay *r);
void nsys_replay_free(nsys_replay *r); /* accepts NULL */

#endif
