/* watch.h -- the watching agent's files: which traces in the watched directories are whole,
 * what their names say (engine, rank), and which were sent already (the state file).
 *
 * watch.c owns the inotify descriptor, the table of files seen and the state file. It sends
 * nothing (agent.c does) and never touches the network. One thread uses a watcher and the
 * state's file entries (agent.c's main loop); the state's captures in flight may be written
 * from any thread (fp_state_capture_put takes the state's lock, as every line written does).
 *
 * Files are opened without following links, relative to their watched directory (openat,
 * O_NOFOLLOW): only regular files that are entries of a watched directory are ever read, and
 * the descriptor whose content was checked is the one handed out to be uploaded (issue 50:
 * a link planted by a writer of the directory made a root agent send root's 0600 trace).
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
 * be at it, -1 never: corrupt, not that format, unreadable, a symbolic link or a file of more
 * than one hard link; why in err. Opens it as fp_open_in does. */
int fp_file_complete(const char *path, int kind, char *err, size_t errlen);

/* The same check on an open descriptor of the file name in directory dirfd (an SQLite
 * export's -journal and -wal are looked for there). The descriptor is left at offset 0. */
int fp_fd_complete(int fd, int dirfd, const char *name, int kind, char *err, size_t errlen);

/* Opens name in dirfd for reading without following a link (O_NOFOLLOW), and only when it is
 * a regular file of one link: the descriptor with its fstat in *st, or -1 with why in err
 * (errno ENOENT when it is gone). */
struct stat;
int fp_open_in(int dirfd, const char *name, struct stat *st, char *err, size_t errlen);

/* ---- the state file: what was sent, across restarts -------------------------------------- */

enum {
    FP_ST_NONE = 0,    /* no entry for this version of the file */
    FP_ST_SENDING,     /* written before the upload: after a crash the upload may have landed */
    FP_ST_DONE,        /* the server answered 201 (session id kept) */
    FP_ST_SPOOLED,     /* the server was down: the session document is in the spool */
    FP_ST_REFUSED      /* the server refused it (4xx): not sent again until the file changes */
};

typedef struct fp_state fp_state;

/* An entry of a file that cannot be stat'ed at start is kept this long after the file's mtime
 * (its directory may not be mounted yet: dropping it sent everything again, issue 50). */
#define FP_STATE_KEEP_GONE_S (30LL * 24 * 3600)
#define FP_STATE_CAPTURES_MAX 64 /* captures in flight remembered (one a target at most) */

/* Opens the state file at path (created with its directory, mode 0600, when missing), reads
 * it (the last line of a path wins), drops the entries of files that changed (and of files
 * not found for FP_STATE_KEEP_GONE_S), logs what it kept and dropped, and rewrites it
 * compacted (tmp file, fsync, rename). A state file that exists but cannot be read is an
 * error (NULL, the reason and the fix in err), never taken as empty. One line a file:
 * "<status>\t<size>\t<mtime_ns>\t<session_id>\t<path>", the path with '%', tab, CR and LF
 * escaped as %25, %09, %0D, %0A; a capture in flight is "capture\t<id>\t0\t0\t<target>%09<url>"
 * (id 0: ended). */
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

/* A capture this agent started on an engine: the target, its engine URL, the capture id. */
typedef struct fp_state_capture {
    char target[65];
    char url[512];
    long long id;
} fp_state_capture;

/* Records (capture_id > 0) or clears (0) the capture in flight on target, fsync'ed before it
 * returns: the agent writes it before calling /start_profile and clears it once the engine
 * answered /stop_profile, so that a crash or a stop in between leaves a line that the next
 * start acts on (it stops that engine first). Any thread. 0, or -1 (the write failed, or
 * FP_STATE_CAPTURES_MAX targets are in flight). */
int fp_state_capture_put(fp_state *s, const char *target, const char *url, long long capture_id);

/* Copies up to max captures in flight into out; returns how many. Any thread. */
size_t fp_state_captures(fp_state *s, fp_state_capture *out, size_t max);

/* ---- the watcher ------------------------------------------------------------------------- */

typedef struct fp_watch fp_watch;

typedef struct fp_watch_file {
    const char *path;     /* valid until the next fp_watch_* call */
    const char *dir;      /* the watched directory it is in (as its pattern expanded) */
    long long size, mtime_ns;
    int fd;               /* the file, open for reading at offset 0: the descriptor that was
                             checked whole; the caller reads it (uploads) and closes it */
    fp_name_info info;
} fp_watch_file;

#define FP_WATCH_RESCAN_S 30        /* default: seconds between full reads of the directories */
#define FP_WATCH_MAX_FILES 100000   /* default: trace-named files watched at once */

/* A watcher that holds settle_s (size and mtime unchanged this long) before checking a file.
 * NULL on out of memory. inotify is used where it can be (fp_watch_wait). */
fp_watch *fp_watch_new(double settle_s);
void fp_watch_free(fp_watch *w); /* accepts NULL */

/* Reads every directory whole only every rescan_s seconds (inotify names the files that
 * change between; a directory without an inotify watch is read at every scan), and keeps
 * at most max_files trace-named files (about 200 bytes each; more are not watched, logged). */
void fp_watch_limits(fp_watch *w, double rescan_s, size_t max_files);

/* Watches the directories that pattern names: one directory, or a glob(3) pattern of them
 * (expanded again at each scan, so that directories made later are watched too).
 * Subdirectories are not entered. 0, or -1 (out of memory). */
int fp_watch_add(fp_watch *w, const char *pattern);

/* Brings the table up to date: the patterns' directories (globs expanded again), the files
 * inotify named since (stat'ed again), and every directory whole at a full scan (at the first
 * call, every rescan_s, after inotify lost events, without inotify). Files are stat'ed
 * without following links; only regular files count. Call it each time round. 0, or -1 on
 * out of memory. */
int fp_watch_scan(fp_watch *w);

/* The next file that is whole and has no state entry (rules 1-5), in path order within a
 * scan: 1 with *f filled (f->fd open: the caller closes it), 0 when none is ready now. Opens
 * the file (fp_open_in) and runs the content check on that descriptor, once per version
 * (seconds for a GB-size trace). Logs a file it will never send (corrupt, a link) once. */
int fp_watch_next(fp_watch *w, const fp_state *st, fp_watch_file *f);

/* Puts off path's next fp_watch_next for seconds (the server is down and the file cannot be
 * spooled: it is retried from where it is); also makes it a candidate again after its state
 * entry went back to none. */
void fp_watch_defer(fp_watch *w, const char *path, double seconds);

/* As fp_watch_defer for a failure: the wait doubles from base at each call for this version of
 * the file, up to max; returns it. *failing_for gets the seconds since the first failure. */
double fp_watch_backoff(fp_watch *w, const char *path, double base, double max, double *failing_for);

/* Trace-named files in the table. */
size_t fp_watch_count(const fp_watch *w);

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
