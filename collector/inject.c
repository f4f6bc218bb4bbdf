/* inject.c -- the CUPTI injection entry point: InitializeInjection, buffer callbacks, enables,
 * the collector's thread (drains CUPTI every FIRSTPASS_DRAIN_S, sends a part every
 * FIRSTPASS_FLUSH_S), the atexit upload, and the checks that another CUPTI client took over.
 *
 * Owns the process-global collector state `g` (CUPTI's buffer callbacks get no user pointer,
 * so the aggregator must be reachable from a global) and every call that needs the CUDA
 * driver (cuptiActivity*, cuptiSubscribe_v2); the buffers themselves are pool.c's, the
 * SIGTERM handler wake.c's, the libcuda queries meta.c's. Must never exit, abort or crash the
 * profiled program: each failure is one fp_log line and, where it matters, the collector
 * disables itself. Record decoding lives in record.c, JSON in session_json.c, HTTP and spool
 * in upload.c. */
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg.h"
#include "buffer.h"
#include "log.h"
#include "meta.h"
#include "pool.h"
#include "record.h"
#include "session.h"
#include "session_json.h"
#include "upload.h"
#include "wake.h"

#define FP_BUF_SIZE  (8u * 1024u * 1024u) /* CUPTI's samples use 8 MiB; 1-10 MiB recommended */
#define FP_BUF_ALIGN 8                    /* ACTIVITY_RECORD_ALIGNMENT */
#define FP_MAX_WARNINGS 16
#define FP_WARNING_LEN 64
/* A timed record this far outside [session start, now] is on another clock. */
#define FP_CLOCK_SLACK_NS (60LL * 1000000000LL)
/* CUPTI's clock this far from where it was against CLOCK_REALTIME at init was replaced. */
#define FP_CLOCK_DRIFT_NS 1000000000LL

/* Global collector state. Why global: see the file comment. Guards:
 *  - init_lock: InitializeInjection's once-only section (initialized).
 *  - lock: agg, part, part_start_ns, warnings; taken by bufferCompleted (CUPTI's thread or
 *    the thread calling cuptiActivityFlushAll). Never held while calling into CUPTI: FlushAll
 *    runs bufferCompleted synchronously (Kineto, CuptiActivityApi.cpp).
 *  - send_lock: one part is cut at a time (the thread's part flush against the exit); held
 *    across FlushAll, never taken inside a CUPTI callback.
 *  - pool: its own lock (pool.c).
 *  - in_callback, clock_warned: atomics.
 * Fields set once in init before any callback is registered are read without locks. */
static struct {
    pthread_mutex_t init_lock;
    int initialized;          /* InitializeInjection ran (successfully or not) */

    pthread_mutex_t lock;
    fp_agg *agg;              /* current part's aggregator; NULL once the session ended */
    unsigned part;            /* parts sent so far */
    long long part_start_ns;  /* start of the current part (session start for part 0) */
    char warnings[FP_MAX_WARNINGS][FP_WARNING_LEN];
    size_t nwarnings;

    pthread_mutex_t send_lock;
    fp_pool pool;             /* the buffers lent to CUPTI */
    atomic_int in_callback;   /* buf_completed calls in progress */
    atomic_int clock_warned;  /* cupti_clock_replaced said once */

    pthread_t thread;         /* the collector's thread: drains, parts, SIGTERM */
    int thread_running;
    volatile sig_atomic_t abort_uploads; /* set at exit and on SIGTERM: a part upload in
                                          * flight gives up (the part is already spooled) */

    /* configuration, read once */
    pid_t pid;
    fp_agg_config cfg;
    long flush_s, drain_s, exit_budget_s;
    int nvtx, driver_api, subscribe, sigterm;
    size_t max_buffers;
    long long clock_offset;   /* cuptiGetTimestamp() - CLOCK_REALTIME at init, ns */
    long long session_start_ns;
    fp_upload_opts up;
    fp_session_meta base;     /* name, labels, host, pid, command, cupti_version */
} g = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .send_lock = PTHREAD_MUTEX_INITIALIZER,
};

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == NULL)
        return "CUPTI_ERROR_?";
    return s;
}

static long env_long(const char *name, long def, long min, long max)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (s == NULL || s[0] == '\0')
        return def;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        fp_log("ignoring %s=%s (want an integer in [%ld, %ld]); using %ld", name, s, min, max,
               def);
        return def;
    }
    return v;
}

/* Adds a session warning (printf format), once: a warning already present is not repeated. */
static void add_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_warning(const char *fmt, ...)
{
    char w[FP_WARNING_LEN];
    va_list ap;
    size_t i;
    va_start(ap, fmt);
    vsnprintf(w, sizeof w, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g.lock);
    for (i = 0; i < g.nwarnings; i++)
        if (strcmp(g.warnings[i], w) == 0)
            break;
    if (i == g.nwarnings && g.nwarnings < FP_MAX_WARNINGS)
        memcpy(g.warnings[g.nwarnings++], w, sizeof w);
    pthread_mutex_unlock(&g.lock);
}

/* The session clock: CUPTI's clock as it related to CLOCK_REALTIME at init (on Linux the two
 * are equal; under WSL CUPTI uses CLOCK_MONOTONIC_RAW). Read without CUPTI, so that a
 * replaced CUPTI timestamp callback cannot move the session's start and end. */
static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec + g.clock_offset;
}

/* Torch.profiler (Kineto) registers cuptiActivityRegisterTimestampCallback with raw TSC
 * cycles on x86 (ApproximateClock.h): from then on CUPTI's clock is not the session's. Says
 * so once (log line + warning); records on the new clock fall outside the aggregator's window.
 * Called from our own thread, never under a lock of ours. */
static void clock_check(void)
{
    uint64_t c = 0;
    long long d;
    if (cuptiGetTimestamp(&c) != CUPTI_SUCCESS)
        return;
    d = (long long)c - now_ns();
    if ((d > FP_CLOCK_DRIFT_NS || d < -FP_CLOCK_DRIFT_NS) &&
        atomic_exchange(&g.clock_warned, 1) == 0) {
        fp_log("CUPTI's clock is now %.1f s away from the session's: another CUPTI client "
               "(torch.profiler?) replaced its timestamp source; records on that clock are "
               "counted in clock_outliers, not timed",
               (double)d / 1e9);
        add_warning("cupti_clock_replaced");
    }
}

/* ---- buffers ---------------------------------------------------------------------------- */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *b = fp_pool_get(&g.pool); /* NULL: refused, counted; CUPTI drops and counts records */
    *buffer = b;
    *size = b ? FP_BUF_SIZE : 0;
    *max_records = 0; /* fill the buffer */
}

/* Runs on CUPTI's worker thread, or synchronously inside cuptiActivityFlushAll (possibly
 * with CUPTI's internal lock held). So it calls nothing in CUPTI except the record walk:
 * cuptiActivityGetNumDroppedRecords here, under g.lock, could take CUPTI's lock while a
 * FlushAll on another thread holds it and waits for g.lock (the ABBA deadlock Kineto fixed
 * in CuptiActivityApi.cpp; sim scenario "abba"). Drops are read by read_dropped(). */
static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                   size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    atomic_fetch_add(&g.in_callback, 1);
    pthread_mutex_lock(&g.lock);
    if (g.agg != NULL && valid > 0) {
        g.agg->win_hi = now_ns() + FP_CLOCK_SLACK_NS;
        (void)fp_process_buffer(g.agg, buffer, valid);
    }
    pthread_mutex_unlock(&g.lock);
    /* A buffer we did not lend (another client's, after a re-registration) is not ours to
     * keep or free: its records were read above, the buffer is left alone. */
    (void)fp_pool_put(&g.pool, buffer);
    atomic_fetch_sub(&g.in_callback, 1);
}

/* CUPTI's count of records dropped since the last call (it resets on read). Called only on
 * our own threads, after a FlushAll returned, with no lock of ours held. */
static unsigned long long read_dropped(void)
{
    size_t n = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &n) != CUPTI_SUCCESS)
        return 0;
    return n;
}

/* After a FlushAll: waits (up to 2 s) for buf_completed calls in progress, e.g. a full buffer
 * CUPTI's worker began delivering before the flush, so that their records are in the part. */
static void wait_callbacks(void)
{
    int i;
    for (i = 0; i < 2000 && atomic_load(&g.in_callback) > 0; i++)
        usleep(1000);
}

/* ---- metadata --------------------------------------------------------------------------- */

static const char *api_namer(int driver, uint32_t cbid)
{
    const char *name = NULL;
    CUpti_CallbackDomain d = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    if (cuptiGetCallbackName(d, cbid, &name) != CUPTI_SUCCESS)
        return NULL;
    return name;
}

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* How a part ends: its label, the extra warning it carries, and how long its upload may take. */
typedef struct send_how {
    int last;              /* the exit's part: label "<n>-last" */
    const char *warning;   /* one more warning for this part only, or NULL */
    long long deadline;    /* mono_ns by which the upload must end; 0 = the usual timeouts */
    int abortable;         /* a part of the thread's: g.abort_uploads stops its upload */
} send_how;

/* Finishes agg (counts still-open ranges as unmatched), writes it as a session covering
 * [start_ns, end_ns], gzips it, spools it and uploads it (upload.c, fp_deliver). Frees agg.
 * Runs on the exit path or the collector's thread, never under g.lock. */
static void send_session(fp_agg *agg, long long start_ns, long long end_ns, unsigned part,
                         const send_how *how)
{
    fp_session_meta m = g.base;
    fp_upload_opts up = g.up;
    fp_label *labels = NULL;
    const char *warnings[FP_MAX_WARNINGS + 1];
    char wcopy[FP_MAX_WARNINGS][FP_WARNING_LEN];
    size_t nwarn, i;
    char partbuf[32], file[256];
    fp_gz gz;

    m.start_ns = start_ns;
    m.end_ns = end_ns;
    m.driver_version = fp_meta_driver(agg);
    m.runtime_version = fp_meta_runtime_version();
    fp_agg_finish(agg);
    fp_record_name_kernels(agg);
    if (g.flush_s > 0 || part > 0 || !how->last) {
        /* a split session: every part is its own session, a label ties them together */
        labels = calloc(g.base.nlabels + 1, sizeof *labels);
        if (labels != NULL) {
            if (g.base.nlabels > 0)
                memcpy(labels, g.base.labels, g.base.nlabels * sizeof *labels);
            snprintf(partbuf, sizeof partbuf, "%u%s", part, how->last ? "-last" : "");
            labels[g.base.nlabels].key = (char *)"firstpass_part";
            labels[g.base.nlabels].value = partbuf;
            m.labels = labels;
            m.nlabels = g.base.nlabels + 1;
        }
    }
    if (agg->clock_outliers > 0 && atomic_exchange(&g.clock_warned, 1) == 0) {
        fp_log("%llu records lie outside the session's time window: another CUPTI client "
               "(torch.profiler?) replaced CUPTI's timestamp source",
               (unsigned long long)agg->clock_outliers);
        add_warning("cupti_clock_replaced");
    }
    pthread_mutex_lock(&g.lock);
    nwarn = g.nwarnings;
    memcpy(wcopy, g.warnings, sizeof wcopy);
    pthread_mutex_unlock(&g.lock);
    for (i = 0; i < nwarn; i++)
        warnings[i] = wcopy[i];
    if (how->warning)
        warnings[nwarn++] = how->warning;
    /* A refused request makes CUPTI drop records, and CUPTI counts those in dropped_records:
     * the refusals are reported on their own, never added (they are the same drops). */
    agg->requests_refused += fp_pool_take_refused(&g.pool);
    if (how->deadline) {
        long long left_s = (how->deadline - mono_ns()) / 1000000000LL;
        up.timeout_s = left_s > 1 ? left_s : 1;
        if (up.connect_timeout_s <= 0 || up.connect_timeout_s > up.timeout_s)
            up.connect_timeout_s = up.timeout_s;
    }
    up.abort_flag = how->abortable ? &g.abort_uploads : NULL;

    if (fp_gz_init(&gz) != 0) {
        fp_log("session LOST: zlib init failed");
    } else if (fp_session_write(agg, &m, warnings, nwarn, fp_gz_write, &gz) != 0 ||
               fp_gz_finish(&gz) != 0) {
        fp_log("session LOST: out of memory while encoding %zu events", agg->nevents);
    } else {
        snprintf(file, sizeof file, "session-%s-%lld-%lld-%u.json.gz",
                 g.base.host ? g.base.host : "host", g.base.pid, start_ns, part);
        (void)fp_deliver(&up, gz.out.p, gz.out.len, file);
    }
    fp_gz_free(&gz);
    free(labels);
    fp_agg_free(agg);
}

/* ---- periodic flush --------------------------------------------------------------------- */

/* A fresh aggregator for the next part: open NVTX ranges, devices, contexts and the time
 * window carried over from old. NULL on OOM. Under g.lock. */
static fp_agg *next_agg(fp_agg *old)
{
    fp_agg *fresh = fp_agg_new(&g.cfg);
    size_t i;
    if (fresh == NULL)
        return NULL;
    fresh->api_name = api_namer;
    fresh->win_lo = old->win_lo;
    (void)fp_agg_move_pending(old, fresh);
    memcpy(fresh->devices, old->devices, sizeof fresh->devices);
    for (i = 0; i < old->ctx_dev.cap; i++)
        if (old->ctx_dev.used[i])
            fp_agg_context(fresh, (uint32_t)old->ctx_dev.keys[i], (uint32_t)old->ctx_dev.vals[i]);
    return fresh;
}

/* FIRSTPASS_FLUSH_S: takes what CUPTI has completed, swaps in a fresh aggregator and sends
 * the old one as its own session (a part). */
static void flush_part(void)
{
    fp_agg *fresh, *old;
    long long start, end;
    unsigned part;
    unsigned long long dropped;
    CUptiResult r;

    pthread_mutex_lock(&g.send_lock);
    r = cuptiActivityFlushAll(0); /* completed buffers only; runs buf_completed here */
    if (r != CUPTI_SUCCESS)
        fp_log("cuptiActivityFlushAll: %s", cupti_err(r));
    wait_callbacks();
    dropped = read_dropped();
    clock_check();
    end = now_ns();
    pthread_mutex_lock(&g.lock);
    old = g.agg;
    fresh = old ? next_agg(old) : NULL;
    if (fresh == NULL) {
        pthread_mutex_unlock(&g.lock);
        pthread_mutex_unlock(&g.send_lock);
        if (old)
            fp_log("periodic flush skipped: out of memory");
        return;
    }
    old->dropped_records += dropped;
    g.agg = fresh;
    part = g.part++;
    start = g.part_start_ns;
    g.part_start_ns = end;
    pthread_mutex_unlock(&g.lock);
    pthread_mutex_unlock(&g.send_lock);
    {
        send_how how = {0, NULL, 0, 1};
        send_session(old, start, end, part, &how);
    }
}

/* FIRSTPASS_DRAIN_S: hands CUPTI's completed buffers to buf_completed now, so that little
 * sits in CUPTI when another client re-registers the buffer callbacks and takes whatever
 * CUPTI still holds (torch.profiler does; sim scenario "kineto"). */
static void drain(void)
{
    static int failed;
    CUptiResult r = cuptiActivityFlushAll(0);
    if (r != CUPTI_SUCCESS && !failed) {
        failed = 1;
        fp_log("cuptiActivityFlushAll: %s (periodic drain)", cupti_err(r));
    }
    clock_check();
}

static void finish(long long deadline, int signal_part);

/* The collector's thread: waits on the wake pipe until the next drain or part is due. */
static void *thread_main(void *arg)
{
    sigset_t all;
    long long next_drain, next_part, now;
    (void)arg;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the app's signals go to the app's threads */
    now = mono_ns();
    next_drain = g.drain_s > 0 ? now + g.drain_s * 1000000000LL : 0;
    next_part = g.flush_s > 0 ? now + g.flush_s * 1000000000LL : 0;
    for (;;) {
        struct pollfd pfd;
        long long due = next_drain && (!next_part || next_drain < next_part) ? next_drain
                                                                             : next_part;
        int timeout = -1, r;
        now = mono_ns();
        if (due)
            timeout = due > now ? (int)((due - now + 999999) / 1000000) : 0;
        pfd.fd = fp_wake_fd();
        pfd.events = POLLIN;
        pfd.revents = 0;
        r = poll(&pfd, 1, timeout);
        if (r > 0) {
            int c = fp_wake_read();
            if (c == FP_WAKE_STOP)
                break;
            if (c == FP_WAKE_TERM) {
                /* The handler waits (up to the exit budget) for the ack, then lets SIGTERM
                 * do what it would have done: usually end the process. */
                finish(mono_ns() + g.exit_budget_s * 1000000000LL, 1);
                g.abort_uploads = 0;
                fp_wake_ack();
            }
            continue;
        }
        if (r < 0)
            continue; /* EINTR cannot happen (signals blocked); anything else: try again */
        now = mono_ns();
        if (next_part && now >= next_part) {
            flush_part();
            next_part = mono_ns() + g.flush_s * 1000000000LL;
            if (next_drain)
                next_drain = mono_ns() + g.drain_s * 1000000000LL;
        } else if (next_drain && now >= next_drain) {
            drain();
            next_drain = mono_ns() + g.drain_s * 1000000000LL;
        }
    }
    return NULL;
}

/* Stops the collector's thread by the deadline: an upload of a part in flight is aborted
 * (the part is spooled already). 0 stopped, -1 still running at the deadline. */
static int stop_thread(long long deadline)
{
    struct timespec ts;
    long long left;
    if (!g.thread_running)
        return 0;
    g.abort_uploads = 1;
    if (fp_wake_stop() != 0)
        return -1;
    /* pthread_timedjoin_np takes a CLOCK_REALTIME instant */
    left = deadline - mono_ns();
    clock_gettime(CLOCK_REALTIME, &ts);
    left += ts.tv_nsec;
    ts.tv_sec += (time_t)(left / 1000000000LL);
    ts.tv_nsec = (long)(left % 1000000000LL);
    if (ts.tv_nsec < 0) {
        ts.tv_sec--;
        ts.tv_nsec += 1000000000L;
    }
    if (pthread_timedjoin_np(g.thread, NULL, &ts) != 0)
        return -1;
    g.thread_running = 0;
    return 0;
}

/* ---- the end of a session ------------------------------------------------------------- */

/* Locks m until the mono_ns deadline. 0, or -1 when it passed. */
static int lock_by(pthread_mutex_t *m, long long deadline)
{
    while (pthread_mutex_trylock(m) != 0) {
        if (mono_ns() >= deadline)
            return -1;
        usleep(1000);
    }
    return 0;
}

/* Ends the current part: forced flush, the takeover check, then either the session ends
 * (at exit: g.agg becomes NULL, late buffers are returned unread) or, on SIGTERM, a fresh
 * aggregator goes on in case the program survives the signal. The part is spooled, then
 * uploaded by the deadline. Runs on the exit path or the collector's thread. */
static void finish(long long deadline, int signal_part)
{
    fp_agg *agg, *fresh = NULL;
    long long start, end;
    unsigned part;
    unsigned long long dropped;
    uint64_t mark;
    size_t lost = 0;
    send_how how = {!signal_part, signal_part ? "terminated_by_signal:SIGTERM" : NULL, deadline, 0};
    CUptiResult r;

    if (lock_by(&g.send_lock, deadline) != 0) {
        fp_log("session LOST: a flush still running at the end of the exit budget (%ld s)",
               g.exit_budget_s);
        return;
    }
    mark = fp_pool_seq(&g.pool);
    r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        fp_log("cuptiActivityFlushAll(FORCED): %s; sending what arrived", cupti_err(r));
    wait_callbacks();
    /* A forced flush returns every buffer CUPTI holds. One lent before it and still out went
     * to a client that re-registered the buffer callbacks after us (torch.profiler does). */
    if (r == CUPTI_SUCCESS)
        lost = fp_pool_out_before(&g.pool, mark);
    if (lost > 0) {
        fp_log("%zu buffer(s) lent to CUPTI were not returned by the final flush: another CUPTI "
               "client (torch.profiler?) re-registered the buffer callbacks and received them; "
               "this session misses their records and everything recorded after that",
               lost);
        add_warning("cupti_buffers_lost:%zu", lost);
    }
    clock_check();
    dropped = read_dropped();
    end = now_ns();
    if (lock_by(&g.lock, deadline) != 0) {
        pthread_mutex_unlock(&g.send_lock);
        fp_log("session LOST: the collector's lock is held at the end of the exit budget");
        return;
    }
    agg = g.agg;
    if (agg != NULL && signal_part)
        fresh = next_agg(agg); /* NULL on OOM: the session ends here */
    if (agg != NULL)
        agg->dropped_records += dropped;
    /* At exit, with parts already sent, an empty remainder is not worth a session. */
    if (agg != NULL && !signal_part && g.part > 0 && agg->records == 0 && dropped == 0) {
        fp_agg_free(agg);
        agg = NULL;
    }
    g.agg = fresh;
    part = g.part++;
    start = g.part_start_ns;
    g.part_start_ns = end;
    pthread_mutex_unlock(&g.lock);
    pthread_mutex_unlock(&g.send_lock);
    if (agg != NULL)
        send_session(agg, start, end, part, &how);
}

/* atexit: the part since the last flush goes out within FIRSTPASS_EXIT_BUDGET_S, spooled
 * first. The program's exit is never held longer than that (plus the last second). */
static void at_exit(void)
{
    long long deadline = mono_ns() + g.exit_budget_s * 1000000000LL;
    if (getpid() != g.pid)
        return; /* a forked child inherited our atexit: its parent owns this session */
    if (stop_thread(deadline) != 0)
        fp_log("the collector's thread did not stop within the exit budget (%ld s)",
               g.exit_budget_s);
    finish(deadline, 0);
}

/* ---- callbacks (optional) --------------------------------------------------------------- */

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (dom == CUPTI_CB_DOMAIN_STATE && cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
        fp_log("CUPTI reported a fatal error; CUPTI may record nothing more, what was recorded "
               "is sent");
        add_warning("cupti_fatal_error");
        return;
    }
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API &&
        cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
        const CUpti_CallbackData *cd = data;
        if (cd->callbackSite == CUPTI_API_ENTER)
            (void)cuptiActivityFlushAll(0);
        return;
    }
    if (dom == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
        (void)cuptiActivityFlushAll(0);
}

/* FIRSTPASS_SUBSCRIBE=1 only. A process has one CUPTI subscriber slot; taking it for three
 * callbacks would make torch.profiler's own cuptiSubscribe fail (Kineto then runs without
 * its callback features), so by default the collector uses the activity API alone. */
static void subscribe(void)
{
    CUpti_SubscriberHandle sub;
    CUpti_SubscriberParams p;
    char old[128] = "";
    CUptiResult r;
    memset(&p, 0, sizeof p);
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "firstpass";
    p.oldSubscriberName = old;
    p.oldSubscriberSize = sizeof old;
    r = cuptiSubscribe_v2(&sub, on_callback, NULL, &p);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        fp_log("another CUPTI tool is subscribed (%s): flush callbacks off, activity tracing "
               "kept; the session is flagged",
               old[0] ? old : "torch.profiler, nsys, ncu?");
        add_warning("cupti_multiple_subscribers");
        return;
    }
    if (r != CUPTI_SUCCESS) {
        fp_log("cuptiSubscribe_v2: %s (flush callbacks off; activity tracing kept)",
               cupti_err(r));
        return;
    }
    (void)cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
    (void)cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                              CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
    (void)cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                              CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
}

/* ---- init ------------------------------------------------------------------------------- */

static void read_config(void)
{
    const char *s;
    char host[256];
    uint32_t v = 0;

    g.pid = getpid();
    g.cfg.events = (int)env_long("FIRSTPASS_EVENTS", 1, 0, 1);
    g.cfg.max_events = (size_t)env_long("FIRSTPASS_MAX_EVENTS", 1000000, 0, 100000000);
    g.flush_s = env_long("FIRSTPASS_FLUSH_S", 0, 0, 86400);
    g.drain_s = env_long("FIRSTPASS_DRAIN_S", 2, 0, 3600);
    g.subscribe = (int)env_long("FIRSTPASS_SUBSCRIBE", 0, 0, 1);
    g.sigterm = (int)env_long("FIRSTPASS_SIGTERM", 1, 0, 1);
    g.exit_budget_s = env_long("FIRSTPASS_EXIT_BUDGET_S", 10, 1, 600);
    g.nvtx = (int)env_long("FIRSTPASS_NVTX", 1, 0, 1);
    g.driver_api = (int)env_long("FIRSTPASS_DRIVER_API", 0, 0, 1);
    g.max_buffers = (size_t)env_long("FIRSTPASS_MAX_BUFFERS", 32, 1, 4096);
    g.up.server = getenv("FIRSTPASS_SERVER");
    g.up.token = getenv("FIRSTPASS_TOKEN");
    g.up.connect_timeout_s = env_long("FIRSTPASS_CONNECT_TIMEOUT_S", 5, 1, 600);
    g.up.timeout_s = env_long("FIRSTPASS_TIMEOUT_S", 60, 1, 3600);

    s = getenv("FIRSTPASS_NAME");
    g.base.name = strdup(s && s[0] ? s : program_invocation_short_name);
    s = getenv("FIRSTPASS_LABELS");
    if (fp_labels_parse(s, &g.base.labels, &g.base.nlabels) != 0)
        fp_log("ignoring malformed FIRSTPASS_LABELS='%s' (want key:value,key2:value2)", s);
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        g.base.host = strdup(host);
    }
    g.base.pid = g.pid;
    g.base.command = fp_meta_cmdline();
    if (cuptiGetVersion(&v) == CUPTI_SUCCESS)
        g.base.cupti_version = v;
}

/* NVTX3 sends ranges to the library NVTX_INJECTION64_PATH names, read once at the program's
 * first NVTX call; it must be the libcupti we record through. The launcher sets it
 * (firstpass-run). Never setenv here: the driver loads us inside cuInit, when other threads
 * (OpenMP, NCCL, tokenizers) may be in getenv, and glibc's setenv may free the environ array
 * they read (sim scenario "nvtx-unset" checks the environment is left alone). This says when
 * capture is off or goes to another library, once, in the log and in the session. */
static void check_nvtx(void)
{
    const char *p = getenv("NVTX_INJECTION64_PATH");
    char want[PATH_MAX], have[PATH_MAX];
    Dl_info info;
    int known = dladdr((void *)cuptiActivityEnable, &info) != 0 && info.dli_fname != NULL &&
                realpath(info.dli_fname, want) != NULL;
    if (p == NULL || p[0] == '\0') {
        fp_log("NVTX ranges are not recorded: NVTX_INJECTION64_PATH is not set (start the "
               "program with firstpass-run, or set it to %s)",
               known ? want : "the libcupti this collector loads");
        add_warning("nvtx_injection_unset");
    } else if (known && (realpath(p, have) == NULL || strcmp(have, want) != 0)) {
        fp_log("NVTX ranges are not recorded: NVTX_INJECTION64_PATH=%s is not the libcupti "
               "this collector uses (%s)",
               p, want);
        add_warning("nvtx_injection_other_library");
    }
}

/* Kinds beyond CONCURRENT_KERNEL: a failure is logged (one line, all names) and tolerated. */
static void enable_optional(void)
{
    struct {
        CUpti_ActivityKind kind;
        const char *name;
        int on;
    } k[] = {
        {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", 1},
        {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", 1},
        {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", 1},
        {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", 1},
        {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", g.driver_api},
        {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION", 1},
        {CUPTI_ACTIVITY_KIND_MARKER, "MARKER", g.nvtx},
        {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", 1},
        {CUPTI_ACTIVITY_KIND_CONTEXT, "CONTEXT", 1},
        {CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", 1},
    };
    char failed[512] = "";
    size_t i, used = 0;
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        CUptiResult r;
        if (!k[i].on)
            continue;
        r = cuptiActivityEnable(k[i].kind);
        if (r != CUPTI_SUCCESS && used < sizeof failed) {
            int w = snprintf(failed + used, sizeof failed - used, " %s(%s)", k[i].name,
                             cupti_err(r));
            if (w > 0)
                used += (size_t)w;
            if (k[i].kind == CUPTI_ACTIVITY_KIND_MARKER)
                g.nvtx = 0;
        }
    }
    if (used > 0)
        fp_log("some record kinds are unavailable, collecting without them:%s", failed);
    /* NCCL's watchdog and PyTorch's caching allocator poll events all the time; only queries
     * that found the work done are synchronisations (record.c, on_sync). */
    (void)cuptiActivityEnableAllSyncRecords(0);
    /* cudaGetDevice is called around nearly every framework op; Kineto drops it as noise. */
    (void)cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
}

/* Sets CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER. */
static CUptiResult set_per_thread_buffers(uint8_t on)
{
    size_t size = sizeof on;
    return cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &on);
}

/* Starts the collector's thread when something needs it (a drain or part interval, the
 * SIGTERM handler), and installs that handler. */
static void start_thread(void)
{
    if (g.drain_s == 0 && g.flush_s == 0 && !g.sigterm)
        return;
    if (fp_wake_init() != 0) {
        fp_log("cannot create a pipe (%s): no periodic drain or flush, no SIGTERM handler",
               strerror(errno));
        return;
    }
    if (pthread_create(&g.thread, NULL, thread_main, NULL) != 0) {
        fp_log("cannot start the collector's thread: no periodic drain or flush, no SIGTERM "
               "handler; sending once at exit");
        return;
    }
    g.thread_running = 1;
    /* The handler waits for the thread a second longer than the thread's own budget. */
    if (g.sigterm &&
        fp_wake_sigterm(g.pid, (int)(g.exit_budget_s + 1) * 1000, &g.abort_uploads) < 0)
        fp_log("cannot install the SIGTERM handler: a SIGTERM loses the session");
}

static void init_collector(void)
{
    const char *en = getenv("FIRSTPASS_ENABLE");
    char spool[4096];
    uint64_t cupti_now = 0;
    CUptiResult r, per_thread;

    if (en && strcmp(en, "0") == 0) {
        fp_log("disabled by FIRSTPASS_ENABLE=0");
        return;
    }
    read_config();
    if (cuptiGetTimestamp(&cupti_now) == CUPTI_SUCCESS)
        g.clock_offset = (long long)cupti_now - now_ns(); /* now_ns() has offset 0 here */
    g.session_start_ns = g.part_start_ns = now_ns();
    g.agg = fp_agg_new(&g.cfg);
    if (g.agg == NULL || fp_pool_init(&g.pool, FP_BUF_SIZE, FP_BUF_ALIGN, g.max_buffers) != 0) {
        fp_log("out of memory at start; collector disabled");
        goto disable;
    }
    g.agg->api_name = api_namer;
    g.agg->win_lo = g.session_start_ns - FP_CLOCK_SLACK_NS;

    /* CUPTI 13 defaults to one buffer per thread that makes a traced call, held until a
     * FlushAll: with more such threads than FIRSTPASS_MAX_BUFFERS, every record of the extra
     * threads was dropped for the whole run (sim scenario "threads", 40 x 100). One shared
     * buffer stream instead; the header says to set it before registering the callbacks.
     * A failure is reported once collection is known to run (no driver fails here too). */
    per_thread = set_per_thread_buffers(0);

    r = cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    if (r != CUPTI_SUCCESS) {
        fp_log("cuptiActivityRegisterCallbacks: %s; collector disabled", cupti_err(r));
        goto disable;
    }
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        fp_log("cuptiActivityEnable(CONCURRENT_KERNEL): %s (no usable driver, or another "
               "profiler owns CUPTI); collector disabled, program runs untouched",
               cupti_err(r));
        goto disable;
    }
    if (per_thread != CUPTI_SUCCESS) {
        fp_log("cannot turn per-thread activity buffers off (%s): each thread that uses CUDA "
               "holds one of FIRSTPASS_MAX_BUFFERS=%zu buffers until a flush",
               cupti_err(per_thread), g.max_buffers);
        add_warning("cupti_per_thread_buffers");
    }
    enable_optional();
    if (g.nvtx)
        check_nvtx();
    if (g.subscribe)
        subscribe();
    if (atexit(at_exit) != 0)
        fp_log("atexit failed: the session will not be sent at exit");
    start_thread();
    if (g.up.server && g.up.server[0])
        fp_log("collecting (CUPTI %lld, events %s, cap %zu); upload to %s at exit",
               g.base.cupti_version, g.cfg.events ? "on" : "off", g.cfg.max_events,
               g.up.server);
    else if (fp_spool_dir(spool, sizeof spool, 0) == 0)
        fp_log("collecting (CUPTI %lld); FIRSTPASS_SERVER not set, session goes to %s",
               g.base.cupti_version, spool);
    return;
disable:
    /* The pool stays: CUPTI has our callbacks if the registration succeeded. */
    pthread_mutex_lock(&g.lock);
    fp_agg_free(g.agg);
    g.agg = NULL;
    pthread_mutex_unlock(&g.lock);
    fp_session_meta_free(&g.base);
}

/* Called by libcuda during cuInit when CUDA_INJECTION64_PATH names this library. Idempotent.
 * Returns 1 (the value NVIDIA's injection sample returns) even when the collector disabled
 * itself, so that a profiler problem never becomes a cuInit failure for the program. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    pthread_mutex_lock(&g.init_lock);
    if (!g.initialized) {
        g.initialized = 1;
        init_collector();
    }
    pthread_mutex_unlock(&g.init_lock);
    return 1;
}
