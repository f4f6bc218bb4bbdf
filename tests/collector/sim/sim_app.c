/* sim_app.c -- the application of the CI simulation: a "CUDA program" that runs on the fake
 * libcuda.so.1 and, through CUDA_INJECTION64_PATH, the unmodified libfirstpass-cupti.so.
 *
 * Owns the scenarios (usage below); run.sh sets the environment and check.py checks the
 * sessions they leave. Each scenario prints what it did on stdout ("sim: ..." lines) so the
 * checks can compare. It links the fake libcuda only (and libstdc++, as a CUDA C++ program
 * does); CUPTI entry points used by the Kineto-like second client are looked up in the
 * libcupti the collector loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "sim.h"

#define PREFILL "_Z14matmul_prefillPKfS0_Pfi"
#define DECODE  "_ZN4vllm13decode_kernelIfLi128EEEvPT_PKS1_i"

static void *cupti_sym(const char *name)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    void *s = h ? dlsym(h, name) : NULL;
    if (s == NULL) {
        fprintf(stderr, "sim: %s not found in a loaded libcupti\n", name);
        exit(2);
    }
    return s;
}

static unsigned long flushes(void)
{
    fake_cupti_count_fn f;
    *(void **)&f = cupti_sym("fake_cupti_flushes");
    return f();
}

/* Waits until the collector has called cuptiActivityFlushAll at least once more (its drain
 * or part flush); 0, or -1 after timeout_s. */
static int wait_flush(int timeout_s)
{
    unsigned long n0 = flushes();
    int i;
    for (i = 0; i < timeout_s * 100; i++) {
        if (flushes() > n0)
            return 0;
        usleep(10000);
    }
    printf("sim: no FlushAll within %d s\n", timeout_s);
    return -1;
}

static void init_or_die(void)
{
    int rc = cuInit(0);
    if (rc != 0) {
        fprintf(stderr, "sim: cuInit: %d\n", rc);
        exit(2);
    }
}

/* The smoke program's shape: prefill x1 and decode x50, each in an NVTX range. */
static void prefill_decode(void)
{
    int i;
    simNvtxPush("prefill");
    simLaunch(PREFILL, 7, 200000);
    simDeviceSynchronize();
    simNvtxPop();
    for (i = 0; i < 50; i++) {
        simNvtxPush("decode_step");
        simLaunch(DECODE, 7, 20000);
        simStreamSynchronize(7);
        simNvtxPop();
    }
}

static int basic(void)
{
    int i;
    init_or_die();
    simMemset(1 << 20);
    simMemset(1 << 20);
    simMemcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4 << 20);
    prefill_decode();
    for (i = 0; i < 10; i++)
        simGetDevice();
    for (i = 0; i < 30; i++)
        simEventQuery(0); /* a watchdog polling an event that is not ready */
    simEventQuery(1);
    simMemcpy(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 16384);
    printf("sim: basic pid %d nvtx_env %s\n", (int)getpid(),
           getenv("NVTX_INJECTION64_PATH") ? "set" : "unset");
    return 0;
}

static int launches(const char *name, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (simLaunch(name, 7, 0) != 0)
            return -1;
    simStreamSynchronize(7);
    return 0;
}

static int nlaunch_per_thread;

static void *thread_main(void *arg)
{
    (void)arg;
    launches("_Z13thread_kernelv", nlaunch_per_thread);
    return NULL;
}

static int threads(int nthreads, int per)
{
    pthread_t t[256];
    int i;
    if (nthreads > 256)
        return 2;
    init_or_die();
    nlaunch_per_thread = per;
    for (i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    for (i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    printf("sim: threads %d x %d launches\n", nthreads, per);
    return 0;
}

static int fork_scenario(void)
{
    pid_t c = fork(), c2;
    int st;
    if (c == 0) { /* forked before any CUDA: initialises its own */
        init_or_die();
        launches("_Z12child_kernelv", 20);
        printf("sim: child %d ran 20\n", (int)getpid());
        exit(0);
    }
    waitpid(c, &st, 0);
    init_or_die();
    launches("_Z13parent_kernelv", 10);
    fflush(stdout);
    c2 = fork();
    if (c2 == 0) { /* forked after the parent's cuInit: CUDA is unusable here */
        printf("sim: late child cuInit %d launch %d\n", cuInit(0), simLaunch("_Z4latev", 7, 0));
        exit(0);
    }
    waitpid(c2, &st, 0);
    printf("sim: parent %d ran 10, child %d\n", (int)getpid(), (int)c);
    return 0;
}

/* ---- a Kineto-like second client (libkineto/src/CuptiActivityApi.cpp) ---- */

static unsigned long k_kernels, k_buffers, k_unknown;
static uint8_t *k_bufs[64];
static int k_nbufs;
static CUptiResult (*p_next)(uint8_t *, size_t, CUpti_Activity **);

static void CUPTIAPI k_req(uint8_t **b, size_t *size, size_t *maxn)
{
    *b = aligned_alloc(8, 4 << 20);
    *size = *b ? 4 << 20 : 0;
    *maxn = 0;
    if (*b && k_nbufs < 64)
        k_bufs[k_nbufs++] = *b;
}

static void CUPTIAPI k_done(CUcontext ctx, uint32_t stream, uint8_t *b, size_t size, size_t valid)
{
    CUpti_Activity *r = NULL;
    int i, mine = 0;
    (void)ctx;
    (void)stream;
    (void)size;
    for (i = 0; i < k_nbufs; i++)
        mine |= k_bufs[i] == b;
    k_buffers++;
    if (!mine) { /* Kineto: "bufferCompleted called with unknown buffer"; dropped */
        k_unknown++;
        while (p_next(b, valid, &r) == CUPTI_SUCCESS)
            k_kernels += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        return;
    }
    while (p_next(b, valid, &r) == CUPTI_SUCCESS)
        k_kernels += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    free(b);
}

static void CUPTIAPI k_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *p)
{
    (void)ud;
    (void)d;
    (void)id;
    (void)p;
}

/* ApproximateClock.h on x86: raw TSC cycles, not ns. */
static uint64_t CUPTIAPI k_tsc(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 3;
}

static int kineto(void)
{
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                             CUpti_SubscriberParams *);
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*reg_ts)(CUpti_TimestampCallbackFunc);
    CUptiResult (*en)(CUpti_ActivityKind), (*dis)(CUpti_ActivityKind);
    CUptiResult (*flush)(uint32_t);
    CUpti_SubscriberHandle sub;
    CUpti_SubscriberParams sp;
    char old[256] = "";
    static const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
        CUPTI_ACTIVITY_KIND_MEMCPY,            CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_DRIVER,
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
    size_t i;
    CUptiResult sr;

    init_or_die();
    prefill_decode(); /* 51 kernels before the profiler starts */
    wait_flush(10);   /* ... and a periodic drain after them */
    launches("_Z14before_profilev", 5); /* still in the collector's buffer at the takeover */

    *(void **)&subscribe = cupti_sym("cuptiSubscribe_v2");
    *(void **)&reg = cupti_sym("cuptiActivityRegisterCallbacks");
    *(void **)&reg_ts = cupti_sym("cuptiActivityRegisterTimestampCallback");
    *(void **)&en = cupti_sym("cuptiActivityEnable");
    *(void **)&dis = cupti_sym("cuptiActivityDisable");
    *(void **)&flush = cupti_sym("cuptiActivityFlushAll");
    *(void **)&p_next = cupti_sym("cuptiActivityGetNextRecord");

    /* torch.profiler start: enableCuptiActivities */
    memset(&sp, 0, sizeof sp);
    sp.structSize = sizeof sp;
    sp.subscriberName = "kineto";
    sp.oldSubscriberName = old;
    sp.oldSubscriberSize = sizeof old;
    sr = subscribe(&sub, k_cb, NULL, &sp);
    reg(k_req, k_done);
    reg_ts(k_tsc);
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        en(kinds[i]);
    launches("_Z14profiled_stepv", 20);
    /* torch.profiler stop: flush, then disable what it enabled */
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        dis(kinds[i]);
    launches("_Z13after_profilev", 10);
    printf("sim: kineto subscribe %d%s%s kernels %lu buffers %lu unknown_buffers %lu\n", (int)sr,
           old[0] ? " old " : "", old, k_kernels, k_buffers, k_unknown);
    return 0;
}

/* ---- exits ---- */

static int spool_has_part(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null | grep -q -- '-%d-.*\\.json\\.gz$'", dir,
             (int)getpid());
    return system(cmd) == 0;
}

/* vLLM's fork executor: a worker forked before CUDA, initialising its own, ending in _exit. */
static int fork_exit(void)
{
    pid_t c = fork();
    int st, i;
    if (c == 0) {
        const char *spool = getenv("FIRSTPASS_SPOOL");
        init_or_die();
        launches("_Z13worker_kernelv", 10);
        for (i = 0; i < 1000 && !(spool && spool_has_part(spool)); i++)
            usleep(10000);
        launches("_Z11after_partv", 5); /* not flushed before _exit: lost, by design */
        printf("sim: worker %d part seen %d, _exit\n", (int)getpid(), i < 1000);
        fflush(stdout);
        _exit(0);
    }
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void app_term(int sig)
{
    static const char msg[] = "sim: the application's own SIGTERM handler ran\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    (void)sig;
    _exit(7);
}

static _Noreturn void sigterm_wait(int own_handler)
{
    if (own_handler)
        signal(SIGTERM, app_term); /* installed before cuInit, like a server's */
    init_or_die();
    launches("_Z11before_termv", 10);
    printf("sim: ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}

/* ---- the shape of tests/gpu/smoke.cu, for tests/gpu/selftest.sh ---- */

static int smoke_workload(void)
{
    int i, polls = 0;
    init_or_die();
    simMemset(4 << 20);
    simMemset(4 << 20);
    simMemcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 16384);
    simNvtxPush("prefill");
    simLaunch("_Z14matmul_prefillPKfS0_Pfi", 7, 200000);
    simDeviceSynchronize();
    simNvtxPop();
    simLaunch("_Z12scale_kernelIfEvPT_S0_i", 7, 1000);
    for (i = 0; i < 50; i++) {
        simNvtxPush("decode_step");
        simLaunch("_Z18decode_step_kernelPfi", 7, 5000);
        simStreamSynchronize(7);
        simNvtxPop();
    }
    simLaunch("_Z11spin_kernelx", 7, 100000);
    while (polls++ < 5)
        simEventQuery(0);
    simEventQuery(1);
    simMemcpy(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 16384);
    printf("smoke: kernels 53 event_polls %d (x[0]=1)\n", polls);
    return 0;
}

static int smoke_shape(int argc, char **argv)
{
    if (argc == 2)
        return smoke_workload();
    if (argc == 4 && strcmp(argv[2], "--sleep") == 0) {
        int rc = smoke_workload();
        usleep((useconds_t)(atof(argv[3]) * 1e6));
        return rc;
    }
    if (argc == 3 && strcmp(argv[2], "--fork-exit") == 0) {
        pid_t c = fork();
        int st = 0;
        if (c == 0) {
            int rc = smoke_workload();
            printf("smoke: worker %d sleeps, then _exit\n", (int)getpid());
            fflush(stdout);
            usleep(2500000);
            _exit(rc);
        }
        waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (argc == 6 && strcmp(argv[2], "--bench") == 0) {
        long n = atol(argv[3]), g = atol(argv[4]), r = atol(argv[5]), i;
        struct timespec t0, t1;
        init_or_die();
        for (i = 0; i < 1000; i++)
            simLaunch("_Z12empty_kernelv", 8, 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (i = 0; i < n + (3 + r) * g; i++) /* a "graph" replays as plain launches here */
            simLaunch("_Z12empty_kernelv", 8, 0);
        simStreamSynchronize(8);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        {
            double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                        (double)(n + (3 + r) * g);
            printf("smoke: bench launches %ld ns_per_launch %.1f graph_nodes %ld replays %ld "
                   "ns_per_node %.1f\n", n, ns, g, r, ns);
        }
        printf("smoke: kernels %ld\n", 1000 + n + (3 + r) * g);
        return 0;
    }
    fprintf(stderr, "usage: sim_app smoke-shape [--sleep S | --fork-exit | --bench N G R]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    int rc = 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(s, "basic") == 0)
        rc = basic();
    else if (strcmp(s, "small") == 0) {
        init_or_die();
        rc = launches("_Z5smallv", 10);
        printf("sim: small ran 10 (%d)\n", rc);
    } else if (strcmp(s, "threads") == 0 && argc == 4)
        rc = threads(atoi(argv[2]), atoi(argv[3]));
    else if (strcmp(s, "many") == 0 && argc == 3) {
        init_or_die();
        rc = launches("_Z11many_kernelv", atoi(argv[2]));
        printf("sim: many %d launches\n", atoi(argv[2]));
    } else if (strcmp(s, "fork") == 0)
        rc = fork_scenario();
    else if (strcmp(s, "kineto") == 0)
        rc = kineto();
    else if (strcmp(s, "smoke-shape") == 0)
        rc = smoke_shape(argc, argv);
    else if (strcmp(s, "forkexit") == 0)
        rc = fork_exit();
    else if (strcmp(s, "sigterm") == 0)
        sigterm_wait(0);
    else if (strcmp(s, "sigterm-chain") == 0)
        sigterm_wait(1);
    else
        fprintf(stderr, "usage: sim_app basic|small|threads N M|many N|fork|kineto|forkexit|"
                        "sigterm|sigterm-chain\n");
    return rc;
}
