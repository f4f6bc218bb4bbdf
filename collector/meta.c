/* meta.c -- what the process and the CUDA driver say about themselves, for a session's metadata:
 * the command line, the driver version and device properties, the runtime version.
 *
 * Owns nothing. libcuda is never linked and never loaded here: it is reached with
 * dlopen("libcuda.so.1", RTLD_NOLOAD), because it is already in the process when the driver
 * loads the collector. Must not call CUPTI or take the collector's locks (the caller owns the
 * aggregator it fills). */
#include "meta.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

char *fp_meta_cmdline(void)
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

int fp_meta_driver(fp_agg *agg)
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

int fp_meta_runtime_version(void)
{
    int (*fn)(int *);
    int v = 0;
    *(void **)&fn = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
    if (fn && fn(&v) == 0 && v > 0)
        return v;
    return CUDA_VERSION; /* the toolkit this collector was built against */
}

