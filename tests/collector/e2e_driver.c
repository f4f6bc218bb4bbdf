/* e2e_driver.c -- the collector pipeline without a GPU: a synthetic CUPTI record stream goes
 * through record.c, agg.c, session_json.c and upload.c (not inject.c) to a real server, or
 * to the spool when the server is unreachable.
 *
 * Stream (times in us from the session start):
 *   NVTX "prefill" [1, 5001): cudaLaunchKernel + gemm_prefill kernel of 4000 us
 *   NVTX "decode_step" x20, step i at 10000 + i*1000, 900 us long, each with three launches
 *   and kernels attention (100 us), rmsnorm (50 us), mlp (200 us), matching correlation ids
 *   one Memcpy HtoD (Pageable -> Device) of 1 MiB, 80 us, before the prefill.
 * Env: FIRSTPASS_SERVER, FIRSTPASS_TOKEN, FIRSTPASS_SPOOL, FIRSTPASS_NAME (default
 * "e2e-synthetic"), FIRSTPASS_LABELS. Exit: 0 uploaded, 3 spooled, 1 lost or error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include "agg.h"
#include "log.h"
#include "record.h"
#include "session.h"
#include "session_json.h"
#include "upload.h"

#define T0 1700000000000000000LL
#define US 1000LL

static const char *namer(int driver, uint32_t cbid)
{
    if (!driver && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
        return "cudaLaunchKernel_v7000";
    if (!driver && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020)
        return "cudaMemcpy_v3020";
    return NULL;
}

static uint32_t next_corr = 1, next_marker = 1;

static void range(fp_agg *a, const char *name, long long s, long long e)
{
    CUpti_ActivityMarker2 m;
    uint32_t id = next_marker++;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = (uint32_t)getpid();
    m.objectId.pt.threadId = (uint32_t)getpid();
    m.id = id;
    /* END first for odd ids: pairing must not depend on arrival order */
    if (id % 2) {
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
        m.timestamp = (uint64_t)(T0 + e);
        fp_process_record(a, (CUpti_Activity *)&m);
    }
    m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    m.timestamp = (uint64_t)(T0 + s);
    m.name = name;
    fp_process_record(a, (CUpti_Activity *)&m);
    if (id % 2 == 0) {
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
        m.name = NULL;
        m.timestamp = (uint64_t)(T0 + e);
        fp_process_record(a, (CUpti_Activity *)&m);
    }
}

/* A cudaLaunchKernel of 5 us at t and its kernel starting 2 us after the call returns. */
static long long launch(fp_agg *a, const char *mangled, long long t, long long dur, int grid)
{
    CUpti_ActivityAPI api;
    CUpti_ActivityKernel10 k;
    uint32_t corr = next_corr++;
    memset(&api, 0, sizeof api);
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    api.start = (uint64_t)(T0 + t);
    api.end = (uint64_t)(T0 + t + 5 * US);
    api.processId = (uint32_t)getpid();
    api.threadId = (uint32_t)getpid();
    api.correlationId = corr;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = mangled;
    k.start = (uint64_t)(T0 + t + 7 * US);
    k.end = (uint64_t)(T0 + t + 7 * US + dur);
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = corr;
    k.gridX = grid; k.gridY = 1; k.gridZ = 1;
    k.blockX = 128; k.blockY = 1; k.blockZ = 1;
    k.registersPerThread = 32;
    fp_process_record(a, (CUpti_Activity *)&k); /* GPU records often arrive first */
    fp_process_record(a, (CUpti_Activity *)&api);
    return t + 7 * US + dur;
}

int main(void)
{
    fp_agg *a = fp_agg_new(NULL);
    fp_session_meta m;
    fp_upload_opts o;
    CUpti_ActivityMemcpy6 cp;
    CUpti_ActivityDevice5 dev;
    char host[64] = "e2e-host", file[128];
    const char *name = getenv("FIRSTPASS_NAME");
    long long t;
    int i, rc;
    fp_gz gz;

    if (a == NULL)
        return 1;
    a->api_name = namer;
    memset(&dev, 0, sizeof dev);
    dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    dev.name = "Synthetic GPU";
    dev.globalMemorySize = 80ULL << 30;
    dev.computeCapabilityMajor = 9;
    dev.numMultiprocessors = 132;
    dev.numThreadsPerWarp = 32;
    fp_process_record(a, (CUpti_Activity *)&dev);

    memset(&cp, 0, sizeof cp);
    cp.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    cp.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    cp.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    cp.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    cp.bytes = 1 << 20;
    cp.start = (uint64_t)(T0 + 200);
    cp.end = (uint64_t)(T0 + 200 + 80 * US);
    cp.streamId = 7;
    cp.correlationId = next_corr;
    cp.runtimeCorrelationId = next_corr++;
    fp_process_record(a, (CUpti_Activity *)&cp);

    range(a, "prefill", 1 * US, 5001 * US);
    launch(a, "_Z12gemm_prefillPKfS0_Pfi", 100 * US, 4000 * US, 1024);
    for (i = 0; i < 20; i++) {
        long long s = 10000 * US + i * 1000 * US;
        range(a, "decode_step", s, s + 900 * US);
        t = launch(a, "_Z9attentionPfi", s + 10 * US, 100 * US, 32);
        t = launch(a, "_Z7rmsnormPfi", t + 10 * US, 50 * US, 32);
        launch(a, "_Z3mlpPfi", t + 10 * US, 200 * US, 64);
    }
    fp_agg_finish(a);

    memset(&m, 0, sizeof m);
    m.name = (char *)(name && name[0] ? name : "e2e-synthetic");
    if (fp_labels_parse(getenv("FIRSTPASS_LABELS"), &m.labels, &m.nlabels) != 0)
        fp_log("malformed FIRSTPASS_LABELS ignored");
    gethostname(host, sizeof host - 1);
    m.host = host;
    m.pid = getpid();
    m.command = (char *)"e2e_driver";
    m.cupti_version = 130001;
    m.runtime_version = 13000;
    m.start_ns = T0;
    m.end_ns = T0 + 40000 * US;

    fp_record_name_kernels(a);
    if (fp_gz_init(&gz) != 0 || fp_session_write(a, &m, NULL, 0, fp_gz_write, &gz) != 0 ||
        fp_gz_finish(&gz) != 0) {
        fp_log("e2e_driver: encoding failed");
        return 1;
    }
    memset(&o, 0, sizeof o);
    o.server = getenv("FIRSTPASS_SERVER");
    o.token = getenv("FIRSTPASS_TOKEN");
    o.connect_timeout_s = 3;
    o.timeout_s = 20;
    snprintf(file, sizeof file, "session-%s-%d-%lld-0.json.gz", "e2e", (int)getpid(), T0);
    rc = fp_deliver(&o, gz.out.p, gz.out.len, file);
    fp_gz_free(&gz);
    fp_labels_free(m.labels, m.nlabels);
    fp_agg_free(a);
    return rc == 0 ? 0 : rc == 1 ? 3 : 1;
}
