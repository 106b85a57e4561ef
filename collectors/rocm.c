/*
 * rocm.c — the ROCm collector: hipMemGetInfo answers for the calling
 * thread's current device, hipDeviceTotalMem and hipDeviceGetName for any;
 * rocm-smi's library (librocm_smi64), when the program loaded it, gives
 * VRAM used by the whole device, other processes included.
 */
#include "collector.h"

#include <dlfcn.h>
#include <string.h>

typedef int hip_error; /* 0 = hipSuccess */

static const char *const hip_sonames[] = {"libamdhip64.so.6", "libamdhip64.so.5",
                                          "libamdhip64.so", NULL};
static const char *const smi_sonames[] = {"librocm_smi64.so.7", "librocm_smi64.so.6",
                                          "librocm_smi64.so.5", "librocm_smi64.so.1",
                                          "librocm_smi64.so", NULL};

static struct {
    int state; /* atomic: 0 not tried, 1 resolving, 2 ready, 3 absent */
    hip_error (*count)(int *);
    hip_error (*get_device)(int *);
    hip_error (*mem_info)(size_t *, size_t *);
    hip_error (*total_mem)(size_t *, int);
    hip_error (*name)(char *, int, int);
    hip_error (*runtime_version)(int *);
    int smi; /* rsmi_init succeeded */
    int (*smi_total)(uint32_t, int, uint64_t *);
    int (*smi_usage)(uint32_t, int, uint64_t *);
} hip;

#define RSMI_MEM_TYPE_VRAM 0

static int bind(void)
{
    void *h = gmp_collector_open(hip_sonames);
    if (h) {
        *(void **)&hip.count = dlsym(h, "hipGetDeviceCount");
        *(void **)&hip.get_device = dlsym(h, "hipGetDevice");
        *(void **)&hip.mem_info = dlsym(h, "hipMemGetInfo");
        *(void **)&hip.total_mem = dlsym(h, "hipDeviceTotalMem");
        *(void **)&hip.name = dlsym(h, "hipDeviceGetName");
        *(void **)&hip.runtime_version = dlsym(h, "hipRuntimeGetVersion");
    }
    /* rocm-smi only as the program has it: never loaded for a sample */
    void *smi = dlopen(smi_sonames[0], RTLD_LAZY | RTLD_NOLOAD);
    for (const char *const *so = smi_sonames + 1; !smi && *so; so++)
        smi = dlopen(*so, RTLD_LAZY | RTLD_NOLOAD);
    if (smi) {
        int (*init)(uint64_t) = (int (*)(uint64_t))dlsym(smi, "rsmi_init");
        *(void **)&hip.smi_total = dlsym(smi, "rsmi_dev_memory_total_get");
        *(void **)&hip.smi_usage = dlsym(smi, "rsmi_dev_memory_usage_get");
        hip.smi = init && hip.smi_total && hip.smi_usage && init(0) == 0;
    }
    int ok = h && hip.count;
    return ok;
}

static int resolve(void)
{
    return gmp_collector_resolve(&hip.state, bind);
}

static int rocm_device_count(void)
{
    int n = 0;
    return resolve() && hip.count(&n) == 0 ? n : 0;
}

static int rocm_available(const char **why)
{
    if (!resolve()) {
        *why = gmp_collectors_loading_allowed() ? "no HIP runtime (libamdhip64) here"
                                                : "the program has not loaded libamdhip64";
        return 0;
    }
    if (rocm_device_count() <= 0) {
        *why = "HIP sees no device";
        return 0;
    }
    return 1;
}

static int rocm_sample(int device, gmp_device_state *out)
{
    if (device < 0 || !resolve())
        return -1;
    memset(out, 0, sizeof *out);
    out->backend = GMP_BACKEND_ROCM;
    out->device = device;
    out->free_bytes = GMP_UNKNOWN;
    out->source = "hipDeviceTotalMem";
    size_t total = 0, free_bytes = 0;
    if (hip.total_mem && hip.total_mem(&total, device) == 0)
        out->total = total;
    if (hip.name && hip.name(out->name, (int)sizeof out->name, device) != 0)
        out->name[0] = '\0';
    out->name[sizeof out->name - 1] = '\0';
    int current = -1;
    if (hip.get_device && hip.mem_info && hip.get_device(&current) == 0 && current == device &&
        hip.mem_info(&free_bytes, &total) == 0 && total) {
        out->total = total;
        out->free_bytes = free_bytes;
        out->used_bytes = total - free_bytes;
        out->known |= GMP_DS_USED;
        out->source = "hipMemGetInfo";
    }
    uint64_t smi_total = 0, smi_used = 0;
    if (hip.smi && hip.smi_total((uint32_t)device, RSMI_MEM_TYPE_VRAM, &smi_total) == 0 &&
        hip.smi_usage((uint32_t)device, RSMI_MEM_TYPE_VRAM, &smi_used) == 0 && smi_total) {
        out->total = smi_total;
        out->used_bytes = smi_used;
        out->free_bytes = smi_total > smi_used ? smi_total - smi_used : 0;
        out->known |= GMP_DS_USED;
        out->source = "rocm-smi";
    }
    return out->total ? 0 : -1;
}

static void rocm_capabilities(gmp_collector_caps *out)
{
    *out = (gmp_collector_caps){
        .backend = GMP_BACKEND_ROCM,
        .supports_device_total = 1,
        .supports_device_free = 1,
        .supports_process_usage = 0,
        .sampling_source = "hipMemGetInfo",
    };
}

const gmp_collector gmp_collector_rocm = {
    .name = "rocm",
    .is_available = rocm_available,
    .device_count = rocm_device_count,
    .sample = rocm_sample,
    .capabilities = rocm_capabilities,
};

int gmp_hip_runtime_version(void)
{
    int v = 0;
    return resolve() && hip.runtime_version && hip.runtime_version(&v) == 0 ? v : 0;
}
