/* colls.h: the collectives table of a job (issue 51, item 4): what tb-profiler's distributed
 * view gives, from the NCCL kernels' own args.
 *
 * Owns the read of a session's collective kernels: the GPU kernels whose args carry PyTorch's
 * "Collective name" (with "In msg nelems", "Out msg nelems", "Group size", "dtype", as Kineto
 * records them since PyTorch 2.2), summed by collective over the ranks given. Per collective:
 * calls, bytes (nccl-tests' S: the output for all-gather, the input otherwise; null where a
 * dtype is unknown), kernel time, achieved algorithm bandwidth (bytes over kernel time) and
 * bus bandwidth, algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and
 * all-to-all, x 1 otherwise (n the group size), as nccl-tests define them. Writes nothing. */
#ifndef FP_COLLS_H
#define FP_COLLS_H

#include <jansson.h>
#include "store/db.h"

#define COLLS_RANKS_MAX 64 /* ranks of a job whose kernels are read (the first in rank order) */
#define COLLS_ROWS_MAX 64  /* collectives (name, group size) listed at most */

/* ids: the sessions (ranks) to read, n of them (at most COLLS_RANKS_MAX read). A new array of
 * {"collective","group_size","calls","ranks","bytes","time_us","algbw_gbps","busbw_gbps"},
 * the most kernel time first; NULL on a database error. */
json_t *colls_of(db_conn *db, const long long *ids, size_t n);

#endif
