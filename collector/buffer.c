/* buffer.c -- the loop over one CUPTI activity buffer.
 *
 * Owns nothing: it only calls cuptiActivityGetNextRecord and hands each record to record.c.
 * Must not free or keep the buffer (inject.c's pool owns it) and must not lock. */
#include "buffer.h"

#include <cupti.h>

#include "record.h"

long fp_process_buffer(fp_agg *agg, uint8_t *buf, size_t valid)
{
    CUpti_Activity *rec = NULL;
    long n = 0;
    for (;;) {
        CUptiResult st = cuptiActivityGetNextRecord(buf, valid, &rec);
        if (st == CUPTI_ERROR_MAX_LIMIT_REACHED)
            return n;
        if (st != CUPTI_SUCCESS) {
            /* INVALID_KIND and friends: the rest of the buffer cannot be walked. */
            agg->buffer_errors++;
            return -1;
        }
        (void)fp_process_record(agg, rec);
        n++;
    }
}
