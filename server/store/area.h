/* area.h: an area selection's summary (GET /api/v1/sessions/{id}/area, issue 51 item 3):
 * what Perfetto's area selection gives, from the stored event chunks of a window.
 *
 * Owns the read of the events in [start_us, end_us) on the timeline's tracks: per track the
 * events overlapping the window (every nesting depth; what /timeline draws and counts) and
 * their time by name (each event's time clipped to the window), the AREA_NAMES_MAX longest
 * names at most, the rest summed as "other"; and the same by name over every track read.
 * Writes nothing. */
#ifndef FP_AREA_H
#define FP_AREA_H

#include <jansson.h>
#include "store/db.h"

#define AREA_NAMES_MAX 50   /* names per track (and overall) at most; ?names= default 10 */
#define AREA_TRACKS_MAX 256 /* track ids in ?tracks= at most, and tracks listed at most (the
                             * rest count in the whole: tracks_omitted says how many) */

/* tracks: track ids to read (NULL: every track), ntracks of them. {"start_us","end_us",
 * "dur_us","count","tracks":[{"id","label","kind","count","names":[{"name","count",
 * "total_us","mean_us"}],"other":{"names","count","total_us"}}],"tracks_omitted","names":[...],
 * "other":{...}}.
 * ERR_NOTFOUND (no such session), ERR_DB, ERR_NOMEM. */
int area_summary(db_conn *db, long long id, double start_us, double end_us, int names, const char *const *tracks, size_t ntracks,
                 json_t **out);

#endif
