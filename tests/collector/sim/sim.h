/* sim.h -- the seam between the fake libcuda.so.1 and the fake libcupti.so.13 of the CI
 * simulation (tests/collector/sim/README.md), and the "CUDA API" the simulated application
 * calls.
 *
 * The real driver reports what an application does to CUPTI through private export tables;
 * here the fake libcuda calls fake_cupti_api() in the fake libcupti, found with
 * dlopen("libcupti.so.13", RTLD_NOLOAD) once the driver has loaded an injection. When no CUPTI
 * is loaded (no injection, or the collector disabled itself before enabling anything), the
 * calls simply run, as they would on a real GPU. */
#ifndef FP_SIM_H
#define FP_SIM_H

#include <stdint.h>

/* What one simulated CUDA call did; the fake CUPTI turns it into 13.0 activity records. */
enum sim_call {
    SIM_LAUNCH,       /* cudaLaunchKernel: RUNTIME (+ DRIVER cuLaunchKernel) + CONCURRENT_KERNEL */
    SIM_MEMCPY,       /* cudaMemcpy: RUNTIME + MEMCPY (arg = copy kind, bytes) */
    SIM_MEMSET,       /* cudaMemset: RUNTIME + MEMSET */
    SIM_STREAM_SYNC,  /* cudaStreamSynchronize: RUNTIME + SYNCHRONIZATION (stream) */
    SIM_CTX_SYNC,     /* cudaDeviceSynchronize: RUNTIME + SYNCHRONIZATION (context) */
    SIM_EVENT_QUERY,  /* cudaEventQuery: RUNTIME + SYNCHRONIZATION (event), arg = ready */
    SIM_GET_DEVICE,   /* cudaGetDevice: RUNTIME only */
    SIM_DEVICE_RESET, /* cudaDeviceReset: subscriber callback (ENTER), RUNTIME */
    SIM_NVTX_PUSH,    /* nvtxRangePushA: MARKER START (through the NVTX injection) */
    SIM_NVTX_POP      /* nvtxRangePop: MARKER END */
};

typedef struct sim_rec {
    enum sim_call call;
    const char *name;   /* kernel (mangled) or range name */
    uint32_t stream;
    uint64_t dur_ns;    /* simulated GPU time; the call spins this long */
    uint64_t bytes;
    int arg;            /* memcpy kind (CUpti_ActivityMemcpyKind) or event ready flag */
} sim_rec;

/* In the fake libcupti (version node FAKE_SIM): records one call. */
typedef void (*fake_cupti_api_fn)(const sim_rec *r);

/* Exported by the fake libcuda.so.1 (the simulated application links it). Each does what the
 * name says in simulation: nothing real happens on any device. */
int simLaunch(const char *mangled, uint32_t stream, uint64_t dur_ns);
int simMemcpy(int copy_kind, uint64_t bytes);
int simMemset(uint64_t bytes);
int simStreamSynchronize(uint32_t stream);
int simDeviceSynchronize(void);
int simEventQuery(int ready);   /* 0 = cudaSuccess, 600 = cudaErrorNotReady */
int simGetDevice(void);
int simDeviceReset(void);
void simNvtxPush(const char *name); /* NVTX3: reads NVTX_INJECTION64_PATH at the first call */
void simNvtxPop(void);

/* Test hooks in the fake libcupti (FAKE_SIM node), reached with dlsym by the app:
 * fake_cupti_flushes() counts cuptiActivityFlushAll calls so far; fake_cupti_deadlocks() counts
 * detected lock-order inversions (FAKE_CUPTI_ABBA=1). */
typedef unsigned long (*fake_cupti_count_fn)(void);

#endif
