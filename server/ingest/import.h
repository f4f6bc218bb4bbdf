/* import.h: the importer's one door: bytes and limits in, a committed session id out.
 *
 * import.c owns everything an upload goes through between the transport and the
 * database: the upload slots (how many run at once, paused for a VACUUM), the streaming
 * JSON parser (parse.h), the Nsight Systems spool and importer (nsys.h) and the loader
 * (load.h: scratch database, analysis, the one committing transaction). No MHD here:
 * http.c feeds it a POST body chunk by chunk; the unit tests and bench/ feed it a file.
 *
 *   importer *im;
 *   import_begin(pool, &opts, &im, err, sizeof err);   // ERR_BUSY: no slot (503, retry)
 *   while (bytes) import_feed(im, p, n);               // first error sticks: import_error
 *   import_finish(im, &id, &events);                   // committed: a 201 may go out
 *   import_free(im);                                   // accepts NULL; rolls back the rest
 *
 * The first error of an importer sticks: later feeds are no-ops that return it, so a
 * transport may keep draining a body it has already refused (http.c does). */
#ifndef FP_IMPORT_H
#define FP_IMPORT_H

#include <stddef.h>

#include "session.h"
#include "store/store.h"

/* The limits of one upload; each is a server flag (http/main.c, --help). */
typedef struct import_limits {
    unsigned long long max_upload;   /* bytes as received (--max-upload); 0: none */
    unsigned long long max_inflated; /* decompressed bytes (--max-inflated); 0: none */
    unsigned long long max_events;   /* events in one session (--max-events); 0: none */
    unsigned long long max_tracks;   /* distinct (pid, tid) tracks: threads, processes, GPU
                                        streams (--max-tracks); 0: none */
    unsigned long long max_name_bytes_per_event; /* distinct names, kinds and shapes may total
                                        LOAD_NAME_BYTES_FREE plus this per event
                                        (--max-name-bytes-per-event); 0: none */
    unsigned long long max_distinct; /* distinct strings, and distinct operators by name and
                                        shapes, each at most this (--max-distinct, load.h);
                                        0: none */
    unsigned long long max_steps;    /* steps (ProfilerStep#N ranges) the analysis splits and
                                        stores one by one, the earliest (--max-steps); the
                                        rest are counted, not split; 0: none */
} import_limits;

/* Upload slots: at most max_uploads imports at once (--max-uploads). Thread-safe. */
typedef struct import_pool import_pool;
import_pool *import_pool_new(store *st, unsigned max_uploads, const import_limits *lim);
void import_pool_free(import_pool *p); /* accepts NULL; no import may be running */
/* Holds new imports off (ERR_BUSY from import_begin) for a VACUUM: 0 when none is in
 * flight and none will start until import_resume; ERR_CONFLICT when some are running. */
int import_pause(import_pool *p);
void import_resume(import_pool *p);

typedef struct import_opts {
    const char *name;          /* the session's name, or NULL */
    const fp_label *labels;    /* its labels (parsed with fp_label_parse_one), borrowed */
    size_t nlabels;
    int gzip;                  /* 1: the body is gzip (Content-Encoding); 0: sniffed */
    unsigned long long declared_bytes; /* the body's announced length, 0 when unknown */
    const char *idempotency_key; /* the Idempotency-Key header (store/idem.h), NULL: none;
                                    the transport checked it (1..IDEM_KEY_MAX visible ASCII) */
} import_opts;

/* import_begin's answer for a key a stored session holds: no importer, *prior says which. */
#define IMPORT_STORED 1
typedef struct import_prior {
    long long session_id, events; /* IMPORT_STORED: the session holding the key */
    long long since;              /* ERR_CONFLICT on a key: when the upload in flight began (unix s) */
} import_prior;

typedef struct importer importer;

/* Takes a slot and opens the loader. 0 with *out set, or ERR_PARAM (a label load.h refuses:
 * load_label_refused), ERR_BUSY (no slot, or paused: the message says which), ERR_TOOBIG
 * (declared_bytes over max_upload), ERR_NOMEM, ERR_DB; the message in err. On failure *out is NULL and no slot is held.
 * With o->idempotency_key the key is claimed first (store/idem.h): IMPORT_STORED when a
 * stored session holds it (prior: which; no importer, nothing stored), ERR_CONFLICT when
 * another upload of it is in flight, here or on another server of the database (prior->since);
 * the importer holds the claim until its session commits (the key stored with it) or it is
 * freed (the claim released). prior may be NULL when no key is given. */
int import_begin(import_pool *p, const import_opts *o, importer **out, import_prior *prior, char *err, size_t errlen);
/* Parses the next bytes of the body. 0, or the upload's (first) error: ERR_PARSE,
 * ERR_INVALID, ERR_NOTTRACE, ERR_TOOBIG, ERR_FORMAT, ERR_IO, ERR_NOMEM, ERR_DB. */
int import_feed(importer *im, const void *data, size_t n);
/* The session's name when neither ?name= nor the trace names it (a form's filename), before
 * import_finish; copied. 0, or ERR_NOMEM. */
int import_set_fallback_name(importer *im, const char *name);
/* Ends the body: checks it, imports a spooled nsys export, analyses and commits in one
 * transaction. 0 with *id (the new session) and *events, or the first error. */
int import_finish(importer *im, long long *id, unsigned long long *events);
/* The message of the first error (never NULL; "" when there was none). */
const char *import_error(const importer *im);
/* Bytes fed so far, as received. */
unsigned long long import_received(const importer *im);
/* Frees the parser, spool and loader and gives the slot back; whatever was not committed
 * is rolled back (nothing of a failed or dropped upload stays). Accepts NULL. */
void import_free(importer *im);

/* A re-analysis (reanalyse.h) goes through the same door: its bytes are the session's stored
 * events (store/replay.h) and import_finish replaces that session's analysis and events
 * instead of adding a session. Limits apply as to an upload, but --max-upload (the bytes
 * fed are the events' stored text, not what was sent). */
typedef struct import_replay_opts {
    long long id;          /* the session */
    const char *claimer;   /* its claim (store/reanalysis.h), borrowed */
    long long seq_base;    /* replay_seq_base */
    const char *source;    /* the session's source as a static string, NULL: decided as for an upload */
    const char *name;      /* the name and labels the upload gave (replay_name, replay_labels): */
    const fp_label *labels;/* what ?name= and ?label= are to an upload, borrowed */
    size_t nlabels;
    /* 1: a background re-analysis: it takes a slot only when one is free, never a second
     * one, and is not counted against uploads: they get --max-uploads slots whatever it
     * holds; when they fill them, it is told to stop (its next import_feed or its
     * import_finish fails with ERR_BUSY; an analysis already running finishes first, one
     * over --max-uploads meanwhile). So an upload never waits, nor is refused, because of
     * it. 0: a slot like an upload's (ERR_BUSY when none). */
    int background;
} import_replay_opts;
int import_begin_replay(import_pool *p, const import_replay_opts *o, importer **out, char *err, size_t errlen);
/* 1 when a background re-analysis would get a slot now (none is paused, full or held by
 * another background one); a hint: import_begin_replay decides. */
int import_background_room(import_pool *p);
/* An nsys export's measured DRAM bandwidth (replay_gpu_bw), before import_finish. */
void import_set_bandwidth(importer *im, long long dev, double bytes_per_s);

#endif
