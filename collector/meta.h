/* meta.h -- session metadata from /proc and the libcuda already in the process. */
#ifndef FP_COLLECTOR_META_H
#define FP_COLLECTOR_META_H

#include "agg.h"

/* The command line, arguments joined by ' ' (new string, caller frees), or NULL. */
char *fp_meta_cmdline(void);
/* Driver version and device properties from the libcuda already in the process. Fills the
 * devices of agg that DEVICE records did not (the caller holds whatever guards agg). Returns
 * the driver version, or 0 when libcuda is not loaded or does not answer. */
int fp_meta_driver(fp_agg *agg);
/* cudaRuntimeGetVersion() when cudart is visible to dlsym(RTLD_DEFAULT), else the CUDA_VERSION
 * this collector was built against. */
int fp_meta_runtime_version(void);

#endif
