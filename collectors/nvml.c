/*
 * nvml.c — the NVML collector (libnvidia-ml.so.1): a device's used, free
 * and total memory without a CUDA context, and the processes holding it, so
 * a bundle can say "other processes hold 30 GiB of this GPU".  Devices are
 * named by CUDA ordinal: NVML's own order may differ (CUDA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER), so an ordinal is matched to NVML by UUID when the CUDA
 * driver is there, and taken as NVML's index only when it is not.
 */
#include "collector.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

typedef int nvml_return; /* 0 = NVML_SUCCESS */
typedef void *nvml_device;
typedef struct { unsigned long long total, free, used; } nvml_memory;
/* nvmlProcessInfo_t of the _v2/_v3 calls; v1 lacks the two instance ids */
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } nvml_process_v2;
typedef struct { unsigned pid; unsigned long long used; } nvml_process_v1;
#define NVML_VALUE_NOT_AVAILABLE (~0ull)
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define MAX_PROCESSES 64

static const char *const nvml_sonames[] = {"libnvidia-ml.so.1", NULL};

static struct {
    int state; /* atomic: 0 not tried, 1 resolving, 2 ready, 3 absent */
    nvml_return (*init)(void);
    nvml_return (*count)(unsigned *);
    nvml_return (*by_index)(unsigned, nvml_device *);
    nvml_return (*by_uuid)(const char *, nvml_device *);
    nvml_return (*memory)(nvml_device, nvml_memory *);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*driver_version)(char *, unsigned);
    nvml_return (*processes)(nvml_device, unsigned *, void *);
    int processes_v1; /* only the unversioned call: the short struct */
} nv;

static int bind(void)
{
    void *h = gmp_collector_open(nvml_sonames);
    if (h) {
        *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
        *(void **)&nv.count = dlsym(h, "nvmlDeviceGetCount_v2");
        *(void **)&nv.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
        *(void **)&nv.by_uuid = dlsym(h, "nvmlDeviceGetHandleByUUID");
        *(void **)&nv.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
        *(void **)&nv.name = dlsym(h, "nvmlDeviceGetName");
        *(void **)&nv.driver_version = dlsym(h, "nvmlSystemGetDriverVersion");
        *(void **)&nv.processes = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
        if (!nv.processes)
            *(void **)&nv.processes = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
        if (!nv.processes) {
            *(void **)&nv.processes = dlsym(h, "nvmlDeviceGetComputeRunningProcesses");
            nv.processes_v1 = 1;
        }
    }
    /* nvmlInit is counted: ours never undoes the program's */
    int ok = h && nv.init && nv.count && nv.by_index && nv.memory && nv.init() == 0;
    return ok;
}

static int resolve(void)
{
    return gmp_collector_resolve(&nv.state, bind);
}

static int nvml_available(const char **why)
{
    unsigned n = 0;
    if (!resolve()) {
        *why = gmp_collectors_loading_allowed()
                   ? "no NVML (libnvidia-ml.so.1) here, or it would not start"
                   : "the program has not loaded libnvidia-ml.so.1 (GMP_NVML=load loads it)";
        return 0;
    }
    if (nv.count(&n) != 0 || n == 0) {
        *why = "NVML sees no device";
        return 0;
    }
    return 1;
}

static int nvml_device_count(void)
{
    unsigned n = 0;
    return resolve() && nv.count(&n) == 0 ? (int)n : 0;
}

/* The NVML device of a CUDA ordinal. */
static int device_of(int ordinal, nvml_device *out)
{
    char uuid[48];
    if (nv.by_uuid && gmp_cuda_device_uuid(ordinal, uuid) == 0)
        return nv.by_uuid(uuid, out) == 0 ? 0 : -1;
    return nv.by_index((unsigned)ordinal, out) == 0 ? 0 : -1;
}

/* This process's and the others' bytes, from the running compute processes. */
static void add_processes(nvml_device dev, gmp_device_state *out)
{
    union {
        nvml_process_v2 v2[MAX_PROCESSES];
        nvml_process_v1 v1[MAX_PROCESSES];
    } p;
    unsigned n = MAX_PROCESSES;
    if (!nv.processes || nv.processes(dev, &n, &p) != 0)
        return; /* too many to list (INSUFFICIENT_SIZE) or not allowed */
    unsigned self = (unsigned)getpid();
    uint64_t mine = 0, others = 0;
    uint32_t other_count = 0;
    int mine_known = 0, others_known = 1;
    for (unsigned i = 0; i < n && i < MAX_PROCESSES; i++) {
        unsigned pid = nv.processes_v1 ? p.v1[i].pid : p.v2[i].pid;
        unsigned long long used = nv.processes_v1 ? p.v1[i].used : p.v2[i].used;
        if (pid == self) {
            if (used != NVML_VALUE_NOT_AVAILABLE) {
                mine += used;
                mine_known = 1;
            }
            continue;
        }
        other_count++;
        if (used == NVML_VALUE_NOT_AVAILABLE)
            others_known = 0; /* in a container NVML may not say */
        else
            others += used;
    }
    if (mine_known) {
        out->driver_process_bytes = mine;
        out->known |= GMP_DS_DRIVER_PROCESS;
    }
    out->other_process_count = other_count;
    if (others_known) {
        out->other_processes_bytes = others;
        out->known |= GMP_DS_OTHERS;
    }
}

static int nvml_sample(int device, gmp_device_state *out)
{
    nvml_device dev;
    nvml_memory m;
    if (device < 0 || !resolve() || device_of(device, &dev) < 0 || nv.memory(dev, &m) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->backend = GMP_BACKEND_CUDA;
    out->device = device;
    out->source = "nvml";
    out->total = m.total;
    out->free_bytes = m.free;
    out->used_bytes = m.used;
    out->known = GMP_DS_USED;
    if (nv.name && nv.name(dev, out->name, sizeof out->name) != 0)
        out->name[0] = '\0';
    out->name[sizeof out->name - 1] = '\0';
    add_processes(dev, out);
    return 0;
}

static void nvml_capabilities(gmp_collector_caps *out)
{
    *out = (gmp_collector_caps){
        .backend = GMP_BACKEND_CUDA,
        .supports_device_total = 1,
        .supports_device_free = 1,
        .supports_process_usage = 1,
        .sampling_source = "nvml",
    };
}

const gmp_collector gmp_collector_nvml = {
    .name = "nvml",
    .is_available = nvml_available,
    .device_count = nvml_device_count,
    .sample = nvml_sample,
    .capabilities = nvml_capabilities,
};

int gmp_nvml_driver_version(char *out, unsigned cap)
{
    out[0] = '\0';
    return resolve() && nv.driver_version && nv.driver_version(out, cap) == 0 ? 0 : -1;
}

void gmp_nvml_load(void)
{
    dlopen(nvml_sonames[0], RTLD_LAZY | RTLD_LOCAL); /* kept: resolve finds it */
}
