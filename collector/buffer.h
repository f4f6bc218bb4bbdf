/* buffer.h -- walks one completed CUPTI activity buffer. */
#ifndef FP_COLLECTOR_BUFFER_H
#define FP_COLLECTOR_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "agg.h"

/* Feeds every record of buf[0, valid) to fp_process_record, in order, using
 * cuptiActivityGetNextRecord (never sizeof: record sizes are CUPTI's business). Stops at
 * CUPTI_ERROR_MAX_LIMIT_REACHED (end of buffer; a partial last record is skipped by CUPTI) or
 * at any other error, which is counted in agg->buffer_errors. Returns the number of records
 * processed, or -1 if the walk stopped on an error. */
long fp_process_buffer(fp_agg *agg, uint8_t *buf, size_t valid);

#endif
