/* fake_cupti.c -- a CPU-only libcupti.so.13 for the CI simulation (README.md in this folder).
 *
 * Owns a model of the CUPTI 13.0 activity API as the collector and Kineto use it: buffer
 * callbacks registered process-wide (a second client's registration takes over every buffer
 * still held), buffers requested from the client, per thread by default
 * (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER = 1) or one shared buffer, full buffers
 * delivered by a worker thread, cuptiActivityFlushAll(0) and FORCED delivering on the calling
 * thread under the internal lock, drops counted when a request is refused, one subscriber,
 * a replaceable timestamp clock, and records laid out as the real 13.0 structs (the real
 * headers are included, so a size or field change breaks this build, not the test).
 * Must not link the collector or know its internals: it sees only CUPTI entry points.
 *
 * Knobs (environment, read once):
 *   FAKE_CUPTI_REFUSE=NAME          cuptiActivityEnable(NAME) fails with NOT_COMPATIBLE
 *   FAKE_CUPTI_PER_THREAD_LOCKED=1  the per-thread attribute cannot be changed
 *   FAKE_CUPTI_ABBA=1               cuptiActivityGetNumDroppedRecords, called by the worker
 *                                   from inside a buffer-completed callback, first waits for a
 *                                   FlushAll on another thread (which holds the internal lock
 *                                   and calls back into the client): a client that holds its
 *                                   own lock there deadlocks; detected after 3 s, counted and
 *                                   printed as "fake-cupti: DEADLOCK" instead of hanging. */
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

#define API __attribute__((visibility("default")))
#define MAX_THREADS 4096
#define MAX_NAMES 1024
#define MAX_DEPTH 64

typedef struct fbuf {
    uint8_t *p;
    size_t size, used;
    struct fbuf *next;
} fbuf;

/* Everything below is guarded by L (CUPTI's internal lock; recursive because FlushAll calls
 * back into the client, which may call CUPTI again on the same thread). */
static pthread_mutex_t L = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc req_fn;
static CUpti_BuffersCallbackCompleteFunc done_fn;
static CUpti_TimestampCallbackFunc ts_fn;
static uint8_t per_thread = 1;
static int per_thread_locked, abba, knobs_read;
static char refuse[64];
static unsigned char enabled[CUPTI_ACTIVITY_KIND_COUNT];
static unsigned char runtime_off[1024]; /* cbids switched off by cuptiActivityEnableRuntimeApi */
static int all_sync = 1;
static size_t dropped;
static unsigned long nflushes, ndeadlocks;
static struct {
    pid_t tid;
    fbuf *cur;
    uint32_t stack[MAX_DEPTH];
    int depth;
} slots[MAX_THREADS];
static size_t nslots;
static fbuf *shared_cur;               /* the one buffer when per_thread == 0 */
static fbuf *qhead, *qtail;            /* full buffers waiting for the worker */
static int worker_started;
static pthread_t worker;
static char *names[MAX_NAMES];         /* kernel and range names: one pointer per name */
static size_t nnames;
static uint32_t next_corr, next_marker;
static CUpti_CallbackFunc sub_fn;
static void *sub_ud;
static char sub_name[64];
static int sub_active;
static unsigned char sub_reset_on;

/* ABBA knob: the worker inside a completion callback, and whether a FlushAll holds L. */
static pthread_mutex_t abba_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t abba_c = PTHREAD_COND_INITIALIZER;
static int flush_holding;
/* The worker is inside a completion callback. (Not __thread: clang 14's LeakSanitizer crashes
 * on the dynamic TLS of a dlopen'ed library with glibc 2.36.) */
static volatile int worker_delivering;

static int in_worker_delivery(void)
{
    return worker_started && pthread_equal(pthread_self(), worker) && worker_delivering;
}

static void read_knobs(void)
{
    const char *s;
    if (knobs_read)
        return;
    knobs_read = 1;
    s = getenv("FAKE_CUPTI_REFUSE");
    snprintf(refuse, sizeof refuse, "%s", s ? s : "");
    s = getenv("FAKE_CUPTI_PER_THREAD_LOCKED");
    per_thread_locked = s && strcmp(s, "1") == 0;
    s = getenv("FAKE_CUPTI_ABBA");
    abba = s && strcmp(s, "1") == 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    if (ts_fn)
        return ts_fn();
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t gettid_u32(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static size_t kind_size(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MARKER: return sizeof(CUpti_ActivityMarker2);
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: return sizeof(CUpti_ActivityMarkerData2);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_CONTEXT: return sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    default: return 0;
    }
}

/* ---- buffers ------------------------------------------------------------------------ */

static void deliver(CUpti_BuffersCallbackCompleteFunc fn, fbuf *b)
{
    if (fn)
        fn(NULL, 0, b->p, b->size, b->used);
    free(b);
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&L);
    for (;;) {
        fbuf *b;
        CUpti_BuffersCallbackCompleteFunc fn;
        while (qhead == NULL)
            pthread_cond_wait(&qcond, &L);
        b = qhead;
        qhead = b->next;
        if (qhead == NULL)
            qtail = NULL;
        fn = done_fn; /* whoever is registered now gets it, as in CUPTI */
        /* The worker delivers without the internal lock (FlushAll delivers with it). */
        pthread_mutex_unlock(&L);
        worker_delivering = 1;
        deliver(fn, b);
        worker_delivering = 0;
        pthread_mutex_lock(&L);
    }
    return NULL;
}

static void queue_full(fbuf *b)
{
    b->next = NULL;
    if (qtail)
        qtail->next = b;
    else
        qhead = b;
    qtail = b;
    pthread_cond_signal(&qcond);
}

static int slot_index(void)
{
    pid_t t = (pid_t)gettid_u32();
    size_t i;
    for (i = 0; i < nslots; i++)
        if (slots[i].tid == t)
            return (int)i;
    if (nslots == MAX_THREADS)
        return -1;
    slots[nslots].tid = t;
    return (int)nslots++;
}

/* Appends one record of n bytes; under L. Requests a buffer from the client when needed; a
 * refused request drops the record (counted), and the next record asks again. */
static void emit(const void *rec, size_t n)
{
    fbuf **cur;
    int si;
    if (req_fn == NULL)
        return;
    if (per_thread) {
        si = slot_index();
        if (si < 0) {
            dropped++;
            return;
        }
        cur = &slots[si].cur;
    } else {
        cur = &shared_cur;
    }
    if (*cur && (*cur)->used + n > (*cur)->size) {
        queue_full(*cur);
        *cur = NULL;
    }
    if (*cur == NULL) {
        uint8_t *p = NULL;
        size_t size = 0, maxn = 0;
        req_fn(&p, &size, &maxn);
        if (p == NULL || size < n) {
            dropped++;
            return;
        }
        *cur = calloc(1, sizeof **cur);
        if (*cur == NULL) {
            dropped++;
            return;
        }
        (*cur)->p = p;
        (*cur)->size = size;
    }
    memcpy((*cur)->p + (*cur)->used, rec, n);
    (*cur)->used += n;
}

/* ---- names ------------------------------------------------------------------------------ */

/* CUPTI shares one name pointer across all records of a kernel; so does this. Under L. */
static const char *intern(const char *s)
{
    size_t i;
    if (s == NULL)
        return NULL;
    for (i = 0; i < nnames; i++)
        if (strcmp(names[i], s) == 0)
            return names[i];
    if (nnames == MAX_NAMES)
        return "<too many names>";
    names[nnames] = strdup(s);
    return names[nnames] ? names[nnames++] : "<oom>";
}

/* ---- activity API ----------------------------------------------------------------------- */

API CUptiResult cuptiGetVersion(uint32_t *version)
{
    if (version == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = 130001;
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetResultString(CUptiResult r, const char **str)
{
    switch (r) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_NOT_COMPATIBLE: *str = "CUPTI_ERROR_NOT_COMPATIBLE"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        break;
    case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
    default: *str = "CUPTI_ERROR_(fake)"; break;
    }
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    if (ts == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&L);
    *ts = now_ns();
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
    if (fn == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&L);
    ts_fn = fn;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    read_knobs();
    if (size == NULL || value == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (attr == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) {
        if (per_thread_locked || *size != sizeof(uint8_t))
            return CUPTI_ERROR_INVALID_PARAMETER;
        pthread_mutex_lock(&L);
        per_thread = *(uint8_t *)value ? 1 : 0;
        pthread_mutex_unlock(&L);
    }
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                               CUpti_BuffersCallbackCompleteFunc done)
{
    if (req == NULL || done == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&L);
    /* Process-wide: a second client replaces the first, and every buffer still held is
     * completed into the new client's callback. */
    req_fn = req;
    done_fn = done;
    if (!worker_started && pthread_create(&worker, NULL, worker_main, NULL) == 0) {
        pthread_detach(worker);
        worker_started = 1;
    }
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

static const char *kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_MARKER: return "MARKER";
    default: return "?";
    }
}

API CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    void *cuda;
    read_knobs();
    if ((unsigned)kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    /* Measured on a machine without a driver: every enable fails with UNKNOWN. */
    cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda == NULL)
        return CUPTI_ERROR_UNKNOWN;
    dlclose(cuda);
    if (refuse[0] && strcmp(refuse, kind_name(kind)) == 0)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    pthread_mutex_lock(&L);
    enabled[kind] = 1;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    if ((unsigned)kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&L);
    enabled[kind] = 0;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    if (cbid >= sizeof runtime_off)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&L);
    runtime_off[cbid] = enable ? 0 : 1;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable)
{
    pthread_mutex_lock(&L);
    all_sync = enable ? 1 : 0;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
    (void)ctx;
    (void)stream;
    read_knobs();
    if (n == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (abba && in_worker_delivery()) {
        struct timespec dl;
        int got = 0;
        /* Wait (up to 5 s) until another thread is inside FlushAll holding L, then take L the
         * way CUPTI re-enters its own lock here. */
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        pthread_mutex_lock(&abba_m);
        while (!flush_holding && pthread_cond_timedwait(&abba_c, &abba_m, &dl) == 0)
            ;
        pthread_mutex_unlock(&abba_m);
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 3;
        got = pthread_mutex_timedlock(&L, &dl) == 0;
        if (!got) {
            fprintf(stderr, "fake-cupti: DEADLOCK: cuptiActivityGetNumDroppedRecords waited 3 s "
                            "for CUPTI's lock, held by a FlushAll blocked in the client\n");
            ndeadlocks++;
            *n = 0; /* the count stays for a later call */
            return CUPTI_SUCCESS;
        }
    } else {
        pthread_mutex_lock(&L);
    }
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    fbuf *list = NULL, **tail = &list, *b;
    size_t i;
    pthread_mutex_lock(&L);
    if (req_fn == NULL) {
        pthread_mutex_unlock(&L);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    nflushes++;
    pthread_mutex_lock(&abba_m);
    flush_holding++;
    pthread_cond_broadcast(&abba_c);
    pthread_mutex_unlock(&abba_m);
    /* Full buffers first, then the current ones: flag 0 returns those with records (all
     * records here are complete when written), FORCED returns every buffer, empty included. */
    while (qhead) {
        b = qhead;
        qhead = b->next;
        *tail = b;
        tail = &b->next;
    }
    qtail = NULL;
    for (i = 0; i < nslots + 1; i++) {
        fbuf **cur = i < nslots ? &slots[i].cur : &shared_cur;
        if (*cur && ((*cur)->used > 0 || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))) {
            *tail = *cur;
            tail = &(*cur)->next;
            *cur = NULL;
        }
    }
    *tail = NULL;
    /* Delivered on this thread with the internal lock held: a client that takes its own
     * lock in the callback must never call CUPTI while holding it. */
    while (list) {
        b = list;
        list = b->next;
        deliver(done_fn, b);
    }
    pthread_mutex_lock(&abba_m);
    flush_holding--;
    pthread_mutex_unlock(&abba_m);
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    size_t off, n;
    CUpti_Activity *r;
    if (buf == NULL || rec == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    off = *rec ? (size_t)((uint8_t *)*rec - buf) + kind_size((*rec)->kind) : 0;
    if (off + sizeof(CUpti_ActivityKind) > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    r = (CUpti_Activity *)(buf + off);
    n = kind_size(r->kind);
    if (n == 0)
        return CUPTI_ERROR_INVALID_KIND;
    if (off + n > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = r;
    return CUPTI_SUCCESS;
}

/* ---- callback API ----------------------------------------------------------------------- */

static const char *runtime_name(uint32_t cbid)
{
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020: return "cudaGetDevice_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020: return "cudaMemcpy_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020: return "cudaMemset_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020: return "cudaStreamSynchronize_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020: return "cudaEventQuery_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020: return "cudaDeviceReset_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020: return "cudaDeviceSynchronize_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: return "cudaLaunchKernel_v7000";
    default: return NULL;
    }
}

API CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain dom, uint32_t cbid, const char **name)
{
    const char *n = NULL;
    if (name == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
        n = runtime_name(cbid);
    else if (dom == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
        n = "cuLaunchKernel";
    *name = n;
    return n ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

API CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *ud,
                                  CUpti_SubscriberParams *params)
{
    if (sub == NULL || fn == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&L);
    if (sub_active) {
        if (params && params->oldSubscriberName && params->oldSubscriberSize > 0)
            snprintf(params->oldSubscriberName, params->oldSubscriberSize, "CUPTI for %s",
                     sub_name);
        pthread_mutex_unlock(&L);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    sub_active = 1;
    sub_fn = fn;
    sub_ud = ud;
    snprintf(sub_name, sizeof sub_name, "%s",
             params && params->subscriberName ? params->subscriberName : "unnamed");
    *sub = (CUpti_SubscriberHandle)&sub_active;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *ud)
{
    return cuptiSubscribe_v2(sub, fn, ud, NULL);
}

API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    (void)sub;
    pthread_mutex_lock(&L);
    sub_active = 0;
    sub_fn = NULL;
    sub_reset_on = 0;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                    CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
    (void)sub;
    pthread_mutex_lock(&L);
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020)
        sub_reset_on = enable ? 1 : 0;
    pthread_mutex_unlock(&L);
    return CUPTI_SUCCESS;
}

/* ---- NVTX injection ----------------------------------------------------------------------- */

/* NVTX3 looks this up in the library NVTX_INJECTION64_PATH names (nvtxInit.h). The real one
 * receives export tables; the simulated NVTX in the fake libcuda only checks it exists and then
 * calls fake_cupti_nvtx. */
API int InitializeInjectionNvtx2(const void *get_export_table)
{
    (void)get_export_table;
    return 1;
}

API void fake_cupti_nvtx(int push, const char *name)
{
    CUpti_ActivityMarker2 m;
    int si;
    pthread_mutex_lock(&L);
    si = slot_index();
    if (si < 0) {
        pthread_mutex_unlock(&L);
        return;
    }
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = (uint32_t)getpid();
    m.objectId.pt.threadId = gettid_u32();
    m.timestamp = now_ns();
    if (push) {
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
        m.id = ++next_marker;
        m.name = intern(name);
        if (slots[si].depth < MAX_DEPTH)
            slots[si].stack[slots[si].depth++] = m.id;
    } else {
        if (slots[si].depth == 0) {
            pthread_mutex_unlock(&L);
            return;
        }
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
        m.id = slots[si].stack[--slots[si].depth];
    }
    if (enabled[CUPTI_ACTIVITY_KIND_MARKER])
        emit(&m, sizeof m);
    pthread_mutex_unlock(&L);
}

/* ---- simulated CUDA calls ------------------------------------------------------------------ */

static void spin_until(uint64_t t)
{
    struct timespec ts;
    for (;;) {
        clock_gettime(CLOCK_REALTIME, &ts);
        if ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec >= t)
            return;
    }
}

static void api_record(CUpti_ActivityKind kind, uint32_t cbid, uint64_t s, uint64_t e,
                       uint32_t corr, uint32_t ret)
{
    CUpti_ActivityAPI a;
    if (!enabled[kind] || (kind == CUPTI_ACTIVITY_KIND_RUNTIME && cbid < sizeof runtime_off &&
                           runtime_off[cbid]))
        return;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.cbid = cbid;
    a.start = s;
    a.end = e;
    a.processId = (uint32_t)getpid();
    a.threadId = gettid_u32();
    a.correlationId = corr;
    a.returnValue = ret;
    emit(&a, sizeof a);
}

static void sync_record(CUpti_ActivitySynchronizationType type, uint64_t s, uint64_t e,
                        uint32_t corr, uint32_t stream, uint32_t ret)
{
    CUpti_ActivitySynchronization2 y;
    if (!enabled[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION])
        return;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = type;
    y.start = s;
    y.end = e;
    y.correlationId = corr;
    y.contextId = 1;
    y.streamId = stream;
    y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    y.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    y.returnValue = ret;
    emit(&y, sizeof y);
}

static void on_launch(const sim_rec *r, uint32_t corr, uint64_t t0)
{
    CUpti_ActivityKernel10 k;
    uint64_t t1 = now_ns();
    api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, t0, t1, corr, 0);
    api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, t0,
               t1, corr, 0);
    if (!enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
        return;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = intern(r->name);
    k.start = now_ns();
    if (r->dur_ns) {
        struct timespec ts; /* the GPU's time passes in real time, whatever CUPTI's clock is */
        clock_gettime(CLOCK_REALTIME, &ts);
        spin_until((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + r->dur_ns);
    }
    k.end = now_ns();
    k.completed = k.end;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = r->stream;
    k.correlationId = corr;
    k.gridX = 128;
    k.gridY = k.gridZ = 1;
    k.blockX = 256;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 32;
    k.staticSharedMemory = 1024;
    emit(&k, sizeof k);
}

API void fake_cupti_api(const sim_rec *r)
{
    uint32_t corr;
    uint64_t t0, t1;
    CUpti_CallbackFunc cb = NULL;
    void *ud = NULL;

    pthread_mutex_lock(&L);
    corr = ++next_corr;
    t0 = now_ns();
    switch (r->call) {
    case SIM_LAUNCH:
        on_launch(r, corr, t0);
        break;
    case SIM_MEMCPY: {
        CUpti_ActivityMemcpy6 m;
        memset(&m, 0, sizeof m);
        m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = (uint8_t)r->arg;
        m.srcKind = r->arg == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE
                                                              : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.dstKind = r->arg == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE
                                                              : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.bytes = r->bytes;
        m.start = now_ns();
        m.end = m.start + 1000;
        m.deviceId = 0;
        m.contextId = 1;
        m.streamId = 7;
        m.correlationId = corr;
        m.runtimeCorrelationId = corr;
        t1 = now_ns();
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, t0,
                   t1 + 1000, corr, 0);
        if (enabled[CUPTI_ACTIVITY_KIND_MEMCPY])
            emit(&m, sizeof m);
        break;
    }
    case SIM_MEMSET: {
        CUpti_ActivityMemset4 m;
        memset(&m, 0, sizeof m);
        m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        m.bytes = r->bytes;
        m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.start = now_ns();
        m.end = m.start + 500;
        m.contextId = 1;
        m.streamId = 7;
        m.correlationId = corr;
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, t0,
                   now_ns(), corr, 0);
        if (enabled[CUPTI_ACTIVITY_KIND_MEMSET])
            emit(&m, sizeof m);
        break;
    }
    case SIM_STREAM_SYNC:
        t1 = now_ns();
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                   t0, t1, corr, 0);
        sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t0, t1, corr,
                    r->stream, 0);
        break;
    case SIM_CTX_SYNC:
        t1 = now_ns();
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
                   t0, t1, corr, 0);
        sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t0, t1, corr,
                    CUPTI_SYNCHRONIZATION_INVALID_VALUE, 0);
        break;
    case SIM_EVENT_QUERY: {
        uint32_t ret = r->arg ? 0 : 600; /* CUDA_ERROR_NOT_READY */
        t1 = now_ns();
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, t0,
                   t1, corr, ret);
        /* The header: by default a record for every query, complete or not. */
        if (ret == 0 || all_sync)
            sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t0, t1, corr, 7,
                        ret);
        break;
    }
    case SIM_GET_DEVICE:
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, t0,
                   now_ns(), corr, 0);
        break;
    case SIM_DEVICE_RESET:
        cb = sub_active && sub_reset_on ? sub_fn : NULL;
        ud = sub_ud;
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&L);
    if (r->call == SIM_DEVICE_RESET) {
        /* Callbacks run on the calling thread without CUPTI's lock. */
        CUpti_CallbackData cd;
        memset(&cd, 0, sizeof cd);
        cd.callbackSite = CUPTI_API_ENTER;
        cd.functionName = "cudaDeviceReset";
        cd.correlationId = corr;
        if (cb)
            cb(ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020,
               &cd);
        pthread_mutex_lock(&L);
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, t0,
                   now_ns(), corr, 0);
        pthread_mutex_unlock(&L);
    }
}

API unsigned long fake_cupti_flushes(void)
{
    unsigned long n;
    pthread_mutex_lock(&L);
    n = nflushes;
    pthread_mutex_unlock(&L);
    return n;
}

API unsigned long fake_cupti_deadlocks(void)
{
    return ndeadlocks;
}
