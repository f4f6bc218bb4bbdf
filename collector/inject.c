/* inject.c -- the CUPTI injection entry point: InitializeInjection, buffer callbacks, enables,
 * the optional periodic flush thread, and the atexit upload.
 *
 * Owns the process-global collector state `g` (CUPTI's buffer callbacks get no user pointer,
 * so the aggregator must be reachable from a global), the 8 MiB buffer pool, and every call
 * that needs the CUDA driver (cuptiActivity*, cuptiSubscribe, dlsym'd libcuda queries). Must
 * never exit, abort or crash the profiled program: each failure is one fp_log line and, where
 * it matters, the collector disables itself. Record decoding lives in record.c, JSON in
 * session_json.c, HTTP and spool in upload.c; libcuda is never linked, only dlopen'ed with
 * RTLD_NOLOAD (it is already in the process when the driver loads us). */
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg.h"
#include "buffer.h"
#include "log.h"
#include "session.h"
#include "session_json.h"
#include "upload.h"

#define FP_BUF_SIZE  (8u * 1024u * 1024u) /* CUPTI's samples use 8 MiB; 1-10 MiB recommended */
#define FP_BUF_ALIGN 8                    /* ACTIVITY_RECORD_ALIGNMENT */
#define FP_MAX_WARNINGS 8

/* Global collector state. Why global: see the file comment. Guards:
 *  - init_lock: InitializeInjection's once-only section (initialized).
 *  - lock: agg, part, part_start_ns, warnings; taken by bufferCompleted (CUPTI's thread or
 *    the thread calling cuptiActivityFlushAll). Never held while calling FlushAll, because
 *    FlushAll runs bufferCompleted synchronously (Kineto, CuptiActivityApi.cpp).
 *  - pool_lock: the buffer pool (free, nfree, nalloc, pool_refused).
 *  - in_callback: atomic; buf_completed calls in progress, so that the exit path can wait
 *    for a delivery CUPTI's worker started before the final flush.
 *  - flush_lock + flush_cond: flush_stop.
 * Fields set once in init before any callback is registered are read without locks. */
static struct {
    pthread_mutex_t init_lock;
    int initialized;          /* InitializeInjection ran (successfully or not) */
    int enabled;              /* collecting; set once in init, cleared at exit (under lock) */

    pthread_mutex_t lock;
    fp_agg *agg;              /* current session's aggregator; NULL after exit */
    unsigned part;            /* periodic flush number, 0 = no flush yet */
    long long part_start_ns;  /* start of the current part (session start for part 0) */
    const char *warnings[FP_MAX_WARNINGS];
    size_t nwarnings;

    pthread_mutex_t pool_lock;
    void **free;              /* free buffers, up to max_buffers */
    size_t nfree, nalloc, max_buffers;
    unsigned long long pool_refused; /* buffer requests refused (CUPTI counts the records) */
    atomic_int in_callback;

    pthread_t flush_thread;
    int flush_running;
    int flush_stop;
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cond;

    /* configuration, read once */
    pid_t pid;
    fp_agg_config cfg;
    long flush_s;
    int nvtx, driver_api;
    fp_upload_opts up;
    fp_session_meta base;     /* name, labels, host, pid, command, cupti_version */
} g = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .pool_lock = PTHREAD_MUTEX_INITIALIZER,
    .flush_lock = PTHREAD_MUTEX_INITIALIZER,
    .flush_cond = PTHREAD_COND_INITIALIZER,
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

static void add_warning(const char *w)
{
    pthread_mutex_lock(&g.lock);
    if (g.nwarnings < FP_MAX_WARNINGS)
        g.warnings[g.nwarnings++] = w;
    pthread_mutex_unlock(&g.lock);
}

/* ---- buffers ---------------------------------------------------------------------------- */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *b = NULL;
    pthread_mutex_lock(&g.pool_lock);
    if (g.nfree > 0) {
        b = g.free[--g.nfree];
    } else if (g.nalloc < g.max_buffers) {
        b = aligned_alloc(FP_BUF_ALIGN, FP_BUF_SIZE);
        if (b != NULL)
            g.nalloc++;
    }
    if (b == NULL)
        g.pool_refused++;
    pthread_mutex_unlock(&g.pool_lock);
    *buffer = b;
    *size = b ? FP_BUF_SIZE : 0;
    *max_records = 0; /* fill the buffer */
}

static void pool_put(uint8_t *buffer)
{
    if (buffer == NULL)
        return;
    pthread_mutex_lock(&g.pool_lock);
    if (g.nfree < g.max_buffers) {
        g.free[g.nfree++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&g.pool_lock);
    free(buffer); /* only if the pool is somehow full */
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
    if (g.agg != NULL && valid > 0)
        (void)fp_process_buffer(g.agg, buffer, valid);
    pthread_mutex_unlock(&g.lock);
    pool_put(buffer);
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

static char *read_cmdline(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    char *buf;
    size_t n, i;
    if (f == NULL)
        return NULL;
    buf = malloc(65536);
    if (buf == NULL) {
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, 65535, f);
    fclose(f);
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return buf;
}

typedef int (*cu_int_fn)(int *);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_dev_name_fn)(char *, int, int);
typedef int (*cu_dev_attr_fn)(int *, int, int);
typedef int (*cu_dev_mem_fn)(size_t *, int);

/* Driver version and device properties from the libcuda already in the process (never
 * linked, never loaded by us). Fills devices the DEVICE records did not. Call without g.lock
 * held except for the brief copy into agg. Returns the driver version or 0. */
static int query_driver(fp_agg *agg)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cu_int_fn drv_ver, dev_count;
    cu_dev_get_fn dev_get;
    cu_dev_name_fn dev_name;
    cu_dev_attr_fn dev_attr;
    cu_dev_mem_fn dev_mem;
    int ver = 0, n = 0, i;

    if (h == NULL)
        return 0;
    *(void **)&drv_ver = dlsym(h, "cuDriverGetVersion");
    *(void **)&dev_count = dlsym(h, "cuDeviceGetCount");
    *(void **)&dev_get = dlsym(h, "cuDeviceGet");
    *(void **)&dev_name = dlsym(h, "cuDeviceGetName");
    *(void **)&dev_attr = dlsym(h, "cuDeviceGetAttribute");
    *(void **)&dev_mem = dlsym(h, "cuDeviceTotalMem_v2");
    if (drv_ver == NULL || drv_ver(&ver) != 0)
        ver = 0;
    if (dev_count && dev_get && dev_name && dev_attr && dev_count(&n) == 0) {
        for (i = 0; i < n && i < FP_MAX_DEVICES; i++) {
            fp_device *d = fp_agg_device(agg, (uint32_t)i);
            int dev, v;
            size_t mem = 0;
            if (d == NULL || d->present || dev_get(&dev, i) != 0)
                continue;
            if (dev_name(d->name, (int)sizeof d->name, dev) != 0)
                d->name[0] = '\0';
            if (dev_mem && dev_mem(&mem, dev) == 0)
                d->total_mem = (long long)mem;
#define ATTR(field, a) d->field = dev_attr(&v, a, dev) == 0 ? v : 0
            ATTR(cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
            ATTR(cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
            ATTR(num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
            ATTR(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
            ATTR(max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
            ATTR(regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
            ATTR(smem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
            ATTR(warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
#undef ATTR
            d->present = 1;
        }
    }
    dlclose(h); /* drops only the reference NOLOAD took */
    return ver;
}

static int runtime_version(void)
{
    int (*fn)(int *);
    int v = 0;
    *(void **)&fn = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
    if (fn && fn(&v) == 0 && v > 0)
        return v;
    return CUDA_VERSION; /* the toolkit this collector was built against */
}

/* Finishes agg (counts still-open ranges as unmatched), writes it as a session covering
 * [start_ns, end_ns], gzips it and uploads or spools it. Frees agg. Runs on the exit path or
 * the flush thread, never under g.lock. */
static void send_session(fp_agg *agg, long long start_ns, long long end_ns, unsigned part,
                         int last)
{
    fp_session_meta m = g.base;
    fp_label *labels = NULL;
    const char *warnings[FP_MAX_WARNINGS];
    size_t nwarn, i;
    char partbuf[32], file[256];
    fp_gz gz;

    m.start_ns = start_ns;
    m.end_ns = end_ns;
    m.driver_version = query_driver(agg);
    m.runtime_version = runtime_version();
    fp_agg_finish(agg);
    if (g.flush_s > 0) {
        /* every part is its own session; a label ties them together */
        labels = calloc(g.base.nlabels + 1, sizeof *labels);
        if (labels != NULL) {
            memcpy(labels, g.base.labels, g.base.nlabels * sizeof *labels);
            snprintf(partbuf, sizeof partbuf, "%u%s", part, last ? "-last" : "");
            labels[g.base.nlabels].key = (char *)"firstpass_part";
            labels[g.base.nlabels].value = partbuf;
            m.labels = labels;
            m.nlabels = g.base.nlabels + 1;
        }
    }
    pthread_mutex_lock(&g.lock);
    nwarn = g.nwarnings;
    for (i = 0; i < nwarn; i++)
        warnings[i] = g.warnings[i];
    pthread_mutex_unlock(&g.lock);
    /* A refused request makes CUPTI drop records, and CUPTI counts those in dropped_records:
     * the refusals are reported on their own, never added (they are the same drops). */
    pthread_mutex_lock(&g.pool_lock);
    agg->requests_refused += g.pool_refused;
    g.pool_refused = 0;
    pthread_mutex_unlock(&g.pool_lock);

    if (fp_gz_init(&gz) != 0) {
        fp_log("session LOST: zlib init failed");
    } else if (fp_session_write(agg, &m, warnings, nwarn, fp_gz_write, &gz) != 0 ||
               fp_gz_finish(&gz) != 0) {
        fp_log("session LOST: out of memory while encoding %zu events", agg->nevents);
    } else {
        snprintf(file, sizeof file, "session-%s-%lld-%lld-%u.json.gz",
                 g.base.host ? g.base.host : "host", g.base.pid, start_ns, part);
        (void)fp_deliver(&g.up, gz.out.p, gz.out.len, file);
    }
    fp_gz_free(&gz);
    free(labels);
    fp_agg_free(agg);
}

static long long now_ns(void)
{
    uint64_t t = 0;
    if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    return (long long)t;
}

/* ---- periodic flush --------------------------------------------------------------------- */

/* Swaps in a fresh aggregator (open ranges, devices and contexts carried over) and sends the
 * old one as its own session. */
static void flush_part(void)
{
    fp_agg *fresh = fp_agg_new(&g.cfg), *old;
    long long start, end;
    unsigned part;
    size_t i;
    unsigned long long dropped;
    CUptiResult r;

    if (fresh == NULL) {
        fp_log("periodic flush skipped: out of memory");
        return;
    }
    fresh->api_name = api_namer;
    r = cuptiActivityFlushAll(0); /* completed buffers only; runs buf_completed here */
    if (r != CUPTI_SUCCESS)
        fp_log("cuptiActivityFlushAll: %s", cupti_err(r));
    wait_callbacks();
    dropped = read_dropped();
    end = now_ns();
    pthread_mutex_lock(&g.lock);
    old = g.agg;
    if (old == NULL) {
        pthread_mutex_unlock(&g.lock);
        fp_agg_free(fresh);
        return;
    }
    old->dropped_records += dropped;
    (void)fp_agg_move_pending(old, fresh);
    memcpy(fresh->devices, old->devices, sizeof fresh->devices);
    for (i = 0; i < old->ctx_dev.cap; i++)
        if (old->ctx_dev.used[i])
            fp_agg_context(fresh, (uint32_t)old->ctx_dev.keys[i], (uint32_t)old->ctx_dev.vals[i]);
    g.agg = fresh;
    part = g.part++;
    start = g.part_start_ns;
    g.part_start_ns = end;
    pthread_mutex_unlock(&g.lock);
    send_session(old, start, end, part, 0);
}

static void *flush_main(void *arg)
{
    sigset_t all;
    (void)arg;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the app's signals go to the app's threads */
    pthread_mutex_lock(&g.flush_lock);
    while (!g.flush_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += g.flush_s;
        while (!g.flush_stop &&
               pthread_cond_timedwait(&g.flush_cond, &g.flush_lock, &dl) != ETIMEDOUT)
            ;
        if (g.flush_stop)
            break;
        pthread_mutex_unlock(&g.flush_lock);
        flush_part();
        pthread_mutex_lock(&g.flush_lock);
    }
    pthread_mutex_unlock(&g.flush_lock);
    return NULL;
}

/* ---- exit ------------------------------------------------------------------------------- */

static void at_exit(void)
{
    fp_agg *agg;
    long long start, end;
    unsigned part;
    unsigned long long dropped;
    CUptiResult r;

    if (getpid() != g.pid)
        return; /* a forked child inherited our atexit: its parent owns this session */
    if (g.flush_running) {
        pthread_mutex_lock(&g.flush_lock);
        g.flush_stop = 1;
        pthread_cond_signal(&g.flush_cond);
        pthread_mutex_unlock(&g.flush_lock);
        pthread_join(g.flush_thread, NULL); /* bounded: an upload in flight has timeouts */
        g.flush_running = 0;
    }
    r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        fp_log("cuptiActivityFlushAll(FORCED): %s; sending what arrived", cupti_err(r));
    wait_callbacks();
    dropped = read_dropped();
    end = now_ns();
    pthread_mutex_lock(&g.lock);
    agg = g.agg;
    if (agg != NULL)
        agg->dropped_records += dropped;
    g.agg = NULL; /* late buffers are returned to the pool unread */
    g.enabled = 0;
    part = g.part;
    start = g.part_start_ns;
    pthread_mutex_unlock(&g.lock);
    if (agg != NULL)
        send_session(agg, start, end, part, 1);
}

/* ---- callbacks (optional) --------------------------------------------------------------- */

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (dom == CUPTI_CB_DOMAIN_STATE && cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
        fp_log("CUPTI reported a fatal error; collection stops, what was recorded is sent");
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

static void subscribe(void)
{
    CUpti_SubscriberHandle sub;
    CUptiResult r = cuptiSubscribe(&sub, on_callback, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        fp_log("another CUPTI tool is subscribed (torch.profiler, nsys, ncu?): flush callbacks "
               "off, activity tracing kept; the session is flagged");
        add_warning("cupti_multiple_subscribers");
        return;
    }
    if (r != CUPTI_SUCCESS) {
        fp_log("cuptiSubscribe: %s (flush callbacks off; activity tracing kept)", cupti_err(r));
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
    g.base.command = read_cmdline();
    if (cuptiGetVersion(&v) == CUPTI_SUCCESS)
        g.base.cupti_version = v;
}

/* Sets NVTX_INJECTION64_PATH to the libcupti we are linked to, unless the user set it. Only
 * effective if the program made no NVTX call before cuInit (NVTX reads it once). */
static void setup_nvtx(void)
{
    Dl_info info;
    if (getenv("NVTX_INJECTION64_PATH") != NULL)
        return;
    if (dladdr((void *)cuptiActivityEnable, &info) == 0 || info.dli_fname == NULL) {
        fp_log("NVTX_INJECTION64_PATH not set and libcupti path unknown: NVTX ranges off");
        return;
    }
    if (setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0) != 0)
        fp_log("setenv(NVTX_INJECTION64_PATH) failed: NVTX ranges off");
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
    /* cudaGetDevice is called around nearly every framework op; Kineto drops it as noise. */
    (void)cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
}

/* Sets CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER. */
static CUptiResult set_per_thread_buffers(uint8_t on)
{
    size_t size = sizeof on;
    return cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &on);
}

static void init_collector(void)
{
    const char *en = getenv("FIRSTPASS_ENABLE");
    char spool[4096];
    CUptiResult r, per_thread;

    if (en && strcmp(en, "0") == 0) {
        fp_log("disabled by FIRSTPASS_ENABLE=0");
        return;
    }
    read_config();
    g.part_start_ns = now_ns();
    g.free = calloc(g.max_buffers, sizeof *g.free);
    g.agg = fp_agg_new(&g.cfg);
    if (g.free == NULL || g.agg == NULL) {
        fp_log("out of memory at start; collector disabled");
        goto disable;
    }
    g.agg->api_name = api_namer;

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
        setup_nvtx();
    subscribe();
    g.enabled = 1;
    if (atexit(at_exit) != 0)
        fp_log("atexit failed: the session will not be sent at exit");
    if (g.flush_s > 0) {
        if (pthread_create(&g.flush_thread, NULL, flush_main, NULL) == 0)
            g.flush_running = 1;
        else
            fp_log("cannot start the flush thread; sending once at exit");
    }
    if (g.up.server && g.up.server[0])
        fp_log("collecting (CUPTI %lld, events %s, cap %zu); upload to %s at exit",
               g.base.cupti_version, g.cfg.events ? "on" : "off", g.cfg.max_events,
               g.up.server);
    else if (fp_spool_dir(spool, sizeof spool, 0) == 0)
        fp_log("collecting (CUPTI %lld); FIRSTPASS_SERVER not set, session goes to %s",
               g.base.cupti_version, spool);
    return;
disable:
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
