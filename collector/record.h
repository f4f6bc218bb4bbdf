/* record.h -- one CUPTI activity record -> aggregator updates. */
#ifndef FP_COLLECTOR_RECORD_H
#define FP_COLLECTOR_RECORD_H

#include <cupti_activity.h>

#include "agg.h"

/* Interned display name of an API call: agg->api_name(driver, cbid) with "_v[0-9]+" stripped
 * ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"), cached per domain by cbid so the namer
 * runs once per cbid. Without a namer, or when it returns NULL: "runtime_api_<cbid>" /
 * "driver_api_<cbid>". FP_NAME_NONE on OOM. */
uint32_t fp_record_api_name(fp_agg *agg, int driver, uint32_t cbid);

/* Applies one record to agg: kernels (KERNEL, CONCURRENT_KERNEL), MEMCPY, MEMCPY2, MEMSET,
 * RUNTIME, DRIVER, SYNCHRONIZATION, MARKER, EXTERNAL_CORRELATION, CONTEXT and DEVICE; every
 * string is interned, no CUPTI pointer is kept. Uses only CUPTI's headers, no libcupti symbol.
 * Returns 0 when applied, 1 for a kind that is counted but not used (OVERHEAD, MARKER_DATA,
 * INTERNAL_LAUNCH_API, NAME, unknown kinds: agg->unknown_kinds), -1 on OOM (agg->oom). */
int fp_process_record(fp_agg *agg, const CUpti_Activity *rec);

/* Display names for kernels, at send time: demangles every kernel row's name once
 * (fp_demangle_full; templates too where the process has a C++ runtime) into agg->display,
 * and gives each kernel event its display name, with the mangled one in u.k.mangled when they
 * differ. Kernel records keep their mangled name until then: demangling allocates and costs
 * microseconds, too much for CUPTI's thread. Call once, after the last record. */
void fp_record_name_kernels(fp_agg *agg);

#endif
