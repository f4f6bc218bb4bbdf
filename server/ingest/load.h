/* load.h: turns a stream of parsed trace events into one stored session.
 *
 * loader_new opens a private connection with a scratch database; the ingest parser
 * feeds it through loader_sink(); loader_commit runs the analysis and writes the
 * session, its aggregates and its event chunks in ONE transaction. loader_free
 * without a commit leaves nothing behind. */
#ifndef FP_LOAD_H
#define FP_LOAD_H

#include <stddef.h>

#include "ingest/parse.h"
#include "session.h"
#include "store/store.h"

typedef struct load_opts {
    const char *name;            /* ?name=, may be NULL */
    const fp_label *labels;      /* ?label=k:v */
    size_t nlabels;
    unsigned long long max_events; /* 0: no limit; over it: ERR_TOOBIG */
    unsigned long long bytes_in; /* bytes received, recorded on the session */
    unsigned long long max_tracks; /* 0: no limit; a track more: ERR_TOOBIG */
    unsigned long long max_name_bytes_per_event; /* 0: no limit; see LOAD_NAME_BYTES_FREE */
    unsigned long long max_distinct; /* 0: no limit; see below */
    /* A re-analysis (reanalyse.h): the session whose analysis and events the commit
     * replaces (store_replace_session) instead of adding a new one, the claim it holds,
     * and the seq its event chunks are numbered from (above the session's old ones).
     * All 0 / NULL for an upload. */
    long long replace_id;
    const char *claimer;
    long long seq_base;
    unsigned long long max_steps; /* 0: no limit; the steps the analysis splits (trace.h) */
    const char *idempotency_key; /* the upload's Idempotency-Key, claimed (store/idem.h), or NULL */
} load_opts;

/* max_distinct (--max-distinct) bounds what an upload holds in memory per distinct text, a
 * bound that does not grow with its events: the distinct strings (event names, categories,
 * input shapes, grids, blocks: the string table, t.strs) and the distinct host operators by
 * kind, name and input shapes (the operator table's second grouping, host.c's aggs) are
 * each at most max_distinct; one more: ERR_TOOBIG, naming the flag. Why: each distinct
 * text costs ~70 bytes in the string table and each operator row ~300 bytes of analysis
 * state, whatever the events: 1M distinct "Input Dims" took +268 MB and 3M 951 MB, ~6 GB
 * at --max-events (issue 43); 1,000 names x 1,000 shapes are 2,000 strings but 1M rows.
 * Real traces hold a few thousand (the 26 in shared/data/traces: at most 1,705 rows). */

/* The distinct names, kinds and shapes of one upload may total this much, plus
 * max_name_bytes_per_event for each event so far; more: ERR_TOOBIG. Each distinct name is
 * stored several times (strings, operators or kernels, the report), so 100 names of 1 MiB
 * in a 107 KB gzip stored 318 MB (issue 22). */
#define LOAD_NAME_BYTES_FREE (16ull << 20)

/* Labels follow api/session.h's rules (a non-empty key, a value that may be empty), and one
 * more: the `job` label names a job, read back at GET /api/v1/jobs/{job}, and a path segment
 * cannot be empty, so `job:` with no value would list a job nobody can fetch (issue 43). Such
 * a label is refused at upload, in ?label= (400 invalid_parameter, before the body is read)
 * and in the trace's "firstpass".labels (400 invalid_trace); the Python handler never sends
 * one (it leaves the label out when TORCHELASTIC_RUN_ID is empty). 1 when key:value is
 * refused. */
int load_label_refused(const char *key, const char *value);
#define LOAD_LABEL_REFUSED_MSG "the label job needs a value: a job is read back at /api/v1/jobs/{job} (label=job:NAME)"

typedef struct loader loader;

loader *loader_new(store *s, const load_opts *o, char *err, size_t errlen);
/* The sink to give ingest_new; valid while the loader lives. */
const ingest_sink *loader_sink(loader *l);
/* Marks the upload as the legacy autograd format (a bare array of events). */
void loader_set_legacy(loader *l, int legacy);
/* Names the session's source outright ("nsys"; a static string), for importers other than
 * the JSON parser. Without it loader_commit decides kineto / legacy / firstpass. */
void loader_set_source(loader *l, const char *source);
/* The DRAM bandwidth of device dev in bytes/s, as an nsys export's GPU table gives it (the
 * efficiency figures read it; trace.h: gpu_bw). Past 16 devices, ignored. */
void loader_set_bandwidth(loader *l, long long dev, double bytes_per_s);
/* The session's name when neither ?name= nor the collector's firstpass object gives one (a
 * form's filename); copied. 0, or ERR_NOMEM. */
int loader_set_fallback_name(loader *l, const char *name);
/* Analyses and stores (a re-analysis: replaces, and *id is replace_id). 0 with *id set,
 * or an ERR_* with a message in err. */
int loader_commit(loader *l, unsigned long long bytes_in, long long *id, char *err, size_t errlen);
void loader_free(loader *l); /* accepts NULL; rolls back whatever was not committed */

#endif
