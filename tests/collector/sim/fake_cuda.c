/* fake_cuda.c -- a CPU-only libcuda.so.1 for the CI simulation (README.md in this folder).
 *
 * Owns what the driver does for an injection: cuInit loads CUDA_INJECTION64_PATH and calls its
 * InitializeInjection once per process; a process forked after its parent initialised CUDA
 * gets an error, as on a real driver. Answers the device queries the collector makes through
 * dlopen("libcuda.so.1", RTLD_NOLOAD) with an H200's values, and provides the sim* "CUDA API"
 * that the simulated application calls (sim.h); each call reports to the fake CUPTI when one
 * is loaded. simNvtxPush/Pop behave like NVTX3: the first call reads NVTX_INJECTION64_PATH
 * once, loads it and looks up InitializeInjectionNvtx2. Must not link libcupti. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#define API __attribute__((visibility("default")))

/* CUresult values used here (cuda.h names). */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE 101

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t init_pid;              /* the process that ran cuInit; 0 = none yet */
static fake_cupti_api_fn cupti_api; /* resolved after cuInit when a CUPTI is loaded */

API int cuInit(unsigned flags)
{
    int rc = CUDA_SUCCESS;
    (void)flags;
    pthread_mutex_lock(&init_lock);
    if (init_pid != 0 && init_pid != getpid()) {
        rc = CUDA_ERROR_NOT_INITIALIZED; /* CUDA cannot be used after fork */
    } else if (init_pid == 0) {
        const char *inj = getenv("CUDA_INJECTION64_PATH");
        init_pid = getpid();
        if (inj && inj[0]) {
            void *h = dlopen(inj, RTLD_NOW | RTLD_LOCAL);
            int (*init)(void) = NULL;
            if (h)
                *(void **)&init = dlsym(h, "InitializeInjection");
            if (init == NULL)
                fprintf(stderr, "fake-cuda: injection %s not loaded: %s\n", inj, dlerror());
            else
                (void)init();
        }
        {
            void *c = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
            if (c)
                *(void **)&cupti_api = dlsym(c, "fake_cupti_api");
        }
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

API int cuDriverGetVersion(int *v)
{
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

API int cuDeviceGetCount(int *n)
{
    if (n == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

API int cuDeviceGet(int *dev, int ordinal)
{
    if (dev == NULL || ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

API int cuDeviceGetName(char *name, int len, int dev)
{
    if (name == NULL || len <= 0 || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "NVIDIA H200 (simulated)");
    return CUDA_SUCCESS;
}

API int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    if (bytes == NULL || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)150754820096ull;
    return CUDA_SUCCESS;
}

API int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    if (v == NULL || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) { /* CUdevice_attribute values (cuda.h) */
    case 75: *v = 9; break;    /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; break;    /* COMPUTE_CAPABILITY_MINOR */
    case 16: *v = 132; break;  /* MULTIPROCESSOR_COUNT */
    case 1: *v = 1024; break;  /* MAX_THREADS_PER_BLOCK */
    case 39: *v = 2048; break; /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 12: *v = 65536; break; /* MAX_REGISTERS_PER_BLOCK */
    case 8: *v = 49152; break; /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 10: *v = 32; break;   /* WARP_SIZE */
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---- the simulated runtime API ----------------------------------------------------------- */

static int call(enum sim_call c, const char *name, uint32_t stream, uint64_t dur, uint64_t bytes,
                int arg)
{
    sim_rec r;
    if (init_pid != getpid())
        return CUDA_ERROR_NOT_INITIALIZED;
    r.call = c;
    r.name = name;
    r.stream = stream;
    r.dur_ns = dur;
    r.bytes = bytes;
    r.arg = arg;
    if (cupti_api)
        cupti_api(&r);
    else if (dur) /* no CUPTI: the "GPU" still takes its time */
        usleep((useconds_t)(dur / 1000));
    return CUDA_SUCCESS;
}

API int simLaunch(const char *mangled, uint32_t stream, uint64_t dur_ns)
{
    return call(SIM_LAUNCH, mangled, stream, dur_ns, 0, 0);
}
API int simMemcpy(int copy_kind, uint64_t bytes)
{
    return call(SIM_MEMCPY, NULL, 7, 0, bytes, copy_kind);
}
API int simMemset(uint64_t bytes)
{
    return call(SIM_MEMSET, NULL, 7, 0, bytes, 0);
}
API int simStreamSynchronize(uint32_t stream)
{
    return call(SIM_STREAM_SYNC, NULL, stream, 0, 0, 0);
}
API int simDeviceSynchronize(void)
{
    return call(SIM_CTX_SYNC, NULL, 0, 0, 0, 0);
}
API int simEventQuery(int ready)
{
    int rc = call(SIM_EVENT_QUERY, NULL, 7, 0, 0, ready);
    return rc != CUDA_SUCCESS ? rc : ready ? 0 : 600;
}
API int simGetDevice(void)
{
    return call(SIM_GET_DEVICE, NULL, 0, 0, 0, 0);
}
API int simDeviceReset(void)
{
    return call(SIM_DEVICE_RESET, NULL, 0, 0, 0, 0);
}

/* ---- NVTX3 as the application sees it ------------------------------------------------------ */

static pthread_once_t nvtx_once = PTHREAD_ONCE_INIT;
static void (*nvtx_fn)(int push, const char *name);

/* nvtxInit.h: at the first NVTX call, read NVTX_INJECTION64_PATH once; load it; call
 * InitializeInjectionNvtx2; from then on every NVTX call goes to that library, or nowhere. */
static void nvtx_init(void)
{
    const char *p = getenv("NVTX_INJECTION64_PATH");
    void *h;
    int (*init)(const void *) = NULL;
    if (p == NULL || p[0] == '\0')
        return;
    h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    *(void **)&init = dlsym(h, "InitializeInjectionNvtx2");
    if (init == NULL || init(NULL) == 0)
        return;
    *(void **)&nvtx_fn = dlsym(h, "fake_cupti_nvtx"); /* the real libcupti has none: no ranges */
}

API void simNvtxPush(const char *name)
{
    pthread_once(&nvtx_once, nvtx_init);
    if (nvtx_fn)
        nvtx_fn(1, name);
}

API void simNvtxPop(void)
{
    pthread_once(&nvtx_once, nvtx_init);
    if (nvtx_fn)
        nvtx_fn(0, NULL);
}
