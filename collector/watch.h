/* watch.h -- the watching agent's files: which traces in the watched directories are whole,
 * what their names say (engine, rank), and which were sent already (the state file).
 *
 * watch.c owns the inotify descriptor, the table of files seen and the state file. It sends
 * nothing (agent.c does) and never touches the network. One thread uses a watcher and its
 * state (agent.c's main loop); nothing here locks.
 *
 * A file is handed out (fp_watch_next) only when all of these hold:
 *   1. its name is a trace's (fp_name_parse: *.json, *.json.gz, *.sqlite; no dot files);
 *   2. its size and mtime have not changed for the settle time;
 *   3. a writer that inotify saw write it has closed it (IN_CLOSE_WRITE or a rename into
 *      place); files that were there before the watch began, or on a file system without
 *      inotify events (NFS), rely on 2 and 4;
 *   4. its content checks: a gzip file inflates to its end and its trailer's CRC-32 and
 *      length match (torch writes *.json.gz under its final name while it compresses, so a
 *      half-written one is there for minutes on a big model); a plain JSON file ends in '}'
 *      or ']'; an SQLite file (Nsight export) is as long as its header says and has no
 *      -journal or -wal beside it;
 *   5. the state file has no entry for that (path, size, mtime).
 * A file that changes after it was sent is a new version and is sent again. */
#ifndef FP_COLLECTOR_WATCH_H
#define FP_COLLECTOR_WATCH_H

#include <stddef.h>

enum { FP_KIND_NONE = 0, FP_KIND_JSON, FP_KIND_JSON_GZ, FP_KIND_SQLITE };

#define FP_NAME_FIELD 64

/* What a trace file's name says. Strings are "" when the name does not say. */
typedef struct fp_name_info {
    int kind;                      /* FP_KIND_*; NONE: not a trace file, never sent */
    char engine[16];               /* "vllm", "sglang", "torch" (a torch.profiler file) */
    char rank[FP_NAME_FIELD];      /* global rank (vLLM's rank-N / _rankN; SGLang: its TP rank) */
    char tp_rank[FP_NAME_FIELD];   /* tensor-parallel rank (vLLM's _tpN, SGLang's -TP-N) */
    char dp_rank[FP_NAME_FIELD];   /* data-parallel rank (_dpN, -DP-N) */
    char pp_rank[FP_NAME_FIELD];   /* pipeline rank (_ppN, -PP-N) */
    char stage[FP_NAME_FIELD];     /* SGLang profile_by_stage: what follows the ranks (EXTEND, DECODE) */
    char group[256];               /* what the files of one profile share: SGLang's profile id; the
                                      name without rank and time for vLLM and torch */
    long long stamp;               /* the writer's time stamp in the name (vLLM/torch: ms or ns), 0 */
    char name[256];                /* session name: the base name without its trace suffix */
} fp_name_info;

/* Reads a base name (no directory). Known layouts:
 *   vLLM      <instance>-rank-<R>.<ts>.pt.trace.json[.gz]
 *             [<prefix>_]dp<D>_pp<P>_tp<T>[_dcp<C>][_ep<E>]_rank<R>.<ts>.pt.trace.json[.gz]
 *   SGLang    <profile_id>-TP-<T>[-DP-<D>][-PP-<P>][-<stage>].trace.json.gz
 *   torch     <worker>.<ts>.pt.trace.json[.gz] (tensorboard_trace_handler; a worker named
 *             rank<N>, rank-<N> or rank_<N> gives the rank)
 *   anything else *.json, *.json.gz, *.sqlite: a trace with no engine.
 * Returns out->kind. Cannot fail. */
int fp_name_parse(const char *base, fp_name_info *out);

/* Whether the file at path is whole (rule 4 above): 1 whole, 0 not (yet): a writer may still
 * be at it, -1 never: corrupt, not that format, or unreadable; why in err. */
int fp_file_complete(const char *path, int kind, char *err, size_t errlen);

/* ---- the state file: what was sent, across restarts -------------------------------------- */

enum {
    FP_ST_NONE = 0,    /* no entry for this version of the file */
    FP_ST_SENDING,     /* written before the upload: after a crash the upload may have landed */
    FP_ST_DONE,        /* the server answered 201 (session id kept) */
    FP_ST_SPOOLED,     /* the server was down: the session document is in the spool */
    FP_ST_REFUSED      /* the server refused it (4xx): not sent again until the file changes */
};

typedef struct fp_state fp_state;

/* Opens the state file at path (created with its directory, mode 0600, when missing), reads
 * it (the last line of a path wins), drops the entries of files that are gone or changed and
 * rewrites it compacted (tmp file, fsync, rename). NULL with a reason in err. One line a
 * file: "<status>\t<size>\t<mtime_ns>\t<session_id>\t<path>", the path with '%', tab, CR and
 * LF escaped as %25, %09, %0D, %0A. */
fp_state *fp_state_open(const char *path, char *err, size_t errlen);
void fp_state_close(fp_state *s); /* accepts NULL */

/* FP_ST_* of (path, size, mtime_ns); *session_id (may be NULL) gets the id of a DONE entry. */
int fp_state_get(const fp_state *s, const char *path, long long size, long long mtime_ns, long long *session_id);

/* Records a status for that version and appends its line, fsync'ed before returning: a
 * SENDING line is on disk before the upload starts, a DONE line before the file is removed.
 * 0, or -1 (out of memory, or the write failed: then nothing may be assumed sent twice-safe
 * and the caller stops). */
int fp_state_put(fp_state *s, const char *path, long long size, long long mtime_ns, int status, long long session_id);

/* The i-th SENDING entry (i from 0): 1 with its path, size and mtime, 0 past the last. The
 * agent resolves these after a restart (was the upload stored?). */
int fp_state_sending(const fp_state *s, size_t i, const char **path, long long *size, long long *mtime_ns);

/* ---- the watcher ------------------------------------------------------------------------- */

typedef struct fp_watch fp_watch;

typedef struct fp_watch_file {
    const char *path;     /* valid until the next fp_watch_* call */
    const char *dir;      /* the watched directory it is in (as fp_watch_add_dir got it) */
    long long size, mtime_ns;
    fp_name_info info;
} fp_watch_file;

/* A watcher that holds settle_s (size and mtime unchanged this long) before checking a file.
 * NULL on out of memory. inotify is used where it can be (fp_watch_wait). */
fp_watch *fp_watch_new(double settle_s);
void fp_watch_free(fp_watch *w); /* accepts NULL */

/* Watches the directories that pattern names: one directory, or a glob(3) pattern of them
 * (expanded again at each scan, so that directories made later are watched too).
 * Subdirectories are not entered. 0, or -1 (out of memory). */
int fp_watch_add(fp_watch *w, const char *pattern);

/* Reads the directories: new files, changed sizes and mtimes, files gone. Cheap (readdir and
 * stat); call it each time round. 0, or -1 on out of memory. */
int fp_watch_scan(fp_watch *w);

/* The next file that is whole and has no state entry (rules 1-5), in path order within a
 * scan: 1 with *f filled, 0 when none is ready now. Runs the content check, which reads
 * the file once per version (seconds for a GB-size trace). Logs a file it will never send
 * (corrupt) once. */
int fp_watch_next(fp_watch *w, const fp_state *st, fp_watch_file *f);

/* Puts off path's next fp_watch_next for seconds (the server is down and the file cannot be
 * spooled: it is retried from where it is). */
void fp_watch_defer(fp_watch *w, const char *path, double seconds);

/* Files in dir (as given to fp_watch_add) with an mtime at or after since_ns that are not
 * settled: still being written, settling, checked incomplete, or being sent (no state entry,
 * or SENDING): what a capture still waits for. */
size_t fp_watch_pending(const fp_watch *w, const fp_state *st, const char *dir, long long since_ns);

/* Waits up to timeout_ms for a change in a watched directory (inotify), or sleeps when there
 * is no inotify. Returns early when one arrives. */
void fp_watch_wait(fp_watch *w, int timeout_ms);

/* Monotonic seconds (CLOCK_MONOTONIC). */
double fp_now(void);

#endif
