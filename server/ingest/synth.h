/* synth.h: the events a download adds that the upload lacked, so that every stored
 * session opens well in Perfetto UI and chrome://tracing:
 *
 *  - ph "M" process_name for every pid with shown events but no process_name event
 *    ("GPU 0 (NVIDIA A100)" for GPU pids, "process 1234" otherwise), and thread_name for
 *    every track with shown events but no thread_name ("stream 7" on GPU tracks,
 *    "thread 5678" on CPU ones). Shown = any ph other than M, s, t, f.
 *  - flow pairs linking each CUDA runtime/driver call to the GPU activity it launched
 *    (joined by correlation, as analyze.c does), in Kineto's own shape:
 *      {"ph":"s","cat":"ac2g","name":"ac2g","id":N,"pid":..,"tid":..,"ts":<call start>}
 *      {"ph":"f","cat":"ac2g","name":"ac2g","id":N,"pid":..,"tid":..,"ts":<gpu start>,"bp":"e"}
 *    only when the upload has no launch flows of its own (what Kineto writes: cat ac2g,
 *    async_cpu_to_gpu, or cat async with name launch in 2021), so a round trip never
 *    doubles them. pid and tid are written as JSON numbers when they are integers, even
 *    where the trace spelt them as strings ("25738"): both viewers read the two alike. N is the GPU event's
 *    sequence number: unique per session even when one call (cudaGraphLaunch) starts
 *    many kernels that share a correlation id.
 *
 * Every synthesized event carries args.firstpass_synthesized = true, so a reader (and
 * the round-trip test) can tell them from the uploaded ones. They are not counted in
 * the session's event_count or counts, and they are stored in event chunks of track
 * SYNTH_TRACK, which the timeline never reads.
 *
 * Runs after analyze_run (it uses scratch.ev and its correlation index). */
#ifndef FP_SYNTH_H
#define FP_SYNTH_H

#include "lib/chunk.h"
#include "analysis/trace.h"

#define SYNTH_TRACK (-1)

/* Receives each synthesized event; returns 0 or an ERR_*. */
typedef int (*synth_emit)(void *ctx, const chunk_rec *r, const char *json);

/* Emits the missing names and launch flows of t; 0 or the first ERR_*. */
int synth_run(trace_ctx *t, synth_emit emit, void *ctx);

#endif
