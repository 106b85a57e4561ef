/*
 * cuda.c — the CUDA driver collector.  Totals and names need no context
 * (cuDeviceTotalMem, cuDeviceGetName); free memory comes from cuMemGetInfo,
 * which answers for the calling thread's current context only, so it is
 * given only when that context is on the device asked about.  We never make
 * a context: a process that has none gets totals without free memory.
 */
#include "collector.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int cu_result; /* CUresult; 0 = CUDA_SUCCESS */
typedef int cu_device;

static const char *const cuda_sonames[] = {"libcuda.so.1", "libcuda.so", NULL};

static struct {
    int state; /* atomic: 0 not tried, 1 resolving, 2 ready, 3 absent */
    cu_result (*init)(unsigned);
    cu_result (*driver_version)(int *);
    cu_result (*device_count)(int *);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_name)(char *, int, cu_device);
    cu_result (*total_mem)(size_t *, cu_device);
    cu_result (*uuid)(unsigned char *, cu_device); /* CUuuid: 16 bytes */
    cu_result (*ctx_current)(void **);
    cu_result (*ctx_device)(cu_device *);
    cu_result (*mem_info)(size_t *, size_t *);
} cu;

/* The driver's functions, when it is there (loaded by the program, or by a
 * tool that may load it). */
static int bind(void)
{
    void *h = gmp_collector_open(cuda_sonames);
    if (h) {
        *(void **)&cu.init = dlsym(h, "cuInit");
        *(void **)&cu.driver_version = dlsym(h, "cuDriverGetVersion");
        *(void **)&cu.device_count = dlsym(h, "cuDeviceGetCount");
        *(void **)&cu.device_get = dlsym(h, "cuDeviceGet");
        *(void **)&cu.device_name = dlsym(h, "cuDeviceGetName");
        *(void **)&cu.total_mem = dlsym(h, "cuDeviceTotalMem_v2");
        *(void **)&cu.uuid = dlsym(h, "cuDeviceGetUuid_v2");
        if (!cu.uuid)
            *(void **)&cu.uuid = dlsym(h, "cuDeviceGetUuid");
        *(void **)&cu.ctx_current = dlsym(h, "cuCtxGetCurrent");
        *(void **)&cu.ctx_device = dlsym(h, "cuCtxGetDevice");
        *(void **)&cu.mem_info = dlsym(h, "cuMemGetInfo_v2");
    }
    int ok = h && cu.device_count && cu.device_get;
    /* a tool initialises the driver itself (no context is made by cuInit) */
    if (ok && gmp_collectors_loading_allowed() && cu.init)
        ok = cu.init(0) == 0;
    return ok;
}

static int resolve(void)
{
    return gmp_collector_resolve(&cu.state, bind);
}

static int cuda_available(const char **why)
{
    int n = 0;
    if (!resolve()) {
        *why = gmp_collectors_loading_allowed() ? "no CUDA driver (libcuda.so.1) here"
                                                : "the program has not loaded libcuda.so.1";
        return 0;
    }
    if (cu.device_count(&n) != 0) {
        *why = "the CUDA driver is not initialised";
        return 0;
    }
    if (n <= 0) {
        *why = "the CUDA driver sees no device";
        return 0;
    }
    return 1;
}

static int cuda_device_count(void)
{
    int n = 0;
    return resolve() && cu.device_count(&n) == 0 ? n : 0;
}

static int cuda_sample(int device, gmp_device_state *out)
{
    cu_device dev;
    if (device < 0 || !resolve() || cu.device_get(&dev, device) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->backend = GMP_BACKEND_CUDA;
    out->device = device;
    out->source = "cuDeviceTotalMem";
    size_t total = 0, free_bytes = 0;
    if (cu.total_mem && cu.total_mem(&total, dev) == 0)
        out->total = total;
    if (cu.device_name && cu.device_name(out->name, (int)sizeof out->name, dev) != 0)
        out->name[0] = '\0';
    out->name[sizeof out->name - 1] = '\0';
    /* free memory: only through a context the program made, on this device */
    void *ctx = NULL;
    cu_device current = -1;
    if (cu.ctx_current && cu.ctx_device && cu.mem_info && cu.ctx_current(&ctx) == 0 && ctx &&
        cu.ctx_device(&current) == 0 && current == dev &&
        cu.mem_info(&free_bytes, &total) == 0 && total) {
        out->free_bytes = free_bytes;
        out->total = total;
        out->used_bytes = total - free_bytes;
        out->known |= GMP_DS_USED;
        out->source = "cuMemGetInfo";
    } else if (out->total) {
        out->free_bytes = GMP_UNKNOWN;
    }
    return out->total ? 0 : -1;
}

static void cuda_capabilities(gmp_collector_caps *out)
{
    *out = (gmp_collector_caps){
        .backend = GMP_BACKEND_CUDA,
        .supports_device_total = 1,
        .supports_device_free = 1, /* in the program's own context */
        .supports_process_usage = 0,
        .sampling_source = "cuMemGetInfo",
    };
}

const gmp_collector gmp_collector_cuda = {
    .name = "cuda",
    .is_available = cuda_available,
    .device_count = cuda_device_count,
    .sample = cuda_sample,
    .capabilities = cuda_capabilities,
};

int gmp_cuda_device_uuid(int device, char out[48])
{
    unsigned char u[16];
    cu_device dev;
    if (!resolve() || !cu.uuid || cu.device_get(&dev, device) != 0 || cu.uuid(u, dev) != 0)
        return -1;
    snprintf(out, 48,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
    return 0;
}

int gmp_cuda_driver_version(void)
{
    int v = 0;
    return resolve() && cu.driver_version && cu.driver_version(&v) == 0 ? v : 0;
}
