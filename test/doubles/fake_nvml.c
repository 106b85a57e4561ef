/*
 * fake_nvml.c — a test double of NVML, libnvidia-ml.so.1, for the NVML
 * collector: GMP_FAKE_DEVICE_COUNT devices of GMP_FAKE_DEVICE_BYTES, found
 * by index or by the UUID the libcuda double gives (fa ce 00.. device).
 * Each lists two compute processes: this one, holding what the libcuda
 * double handed out plus GMP_FAKE_CONTEXT_BYTES (a context's own memory,
 * default 0), and, when GMP_FAKE_OTHER_BYTES is set, process
 * GMP_FAKE_OTHER_PID (default 4242) holding that much.
 */
#include "fake_device.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { NVML_OK = 0, NVML_UNINITIALIZED = 1, NVML_INVALID = 2, NVML_NOT_FOUND = 6,
       NVML_INSUFFICIENT_SIZE = 7 };

typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } process_t;

static int inits;
static int handles[FAKE_MAX_DEVICES]; /* a handle points at its index */

static size_t ours(int dev)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    size_t (*used)(int) = cuda ? (size_t (*)(int))dlsym(cuda, "fake_cuda_used") : NULL;
    size_t n = used ? used(dev) : 0;
    if (cuda)
        dlclose(cuda);
    return n + fake_env_bytes("GMP_FAKE_CONTEXT_BYTES", 0);
}

EXPORT int nvmlInit_v2(void) { __atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED); return NVML_OK; }
EXPORT int nvmlShutdown(void) { __atomic_sub_fetch(&inits, 1, __ATOMIC_RELAXED); return NVML_OK; }
EXPORT int nvmlSystemGetDriverVersion(char *out, unsigned len)
{
    snprintf(out, len, "999.12.34");
    return NVML_OK;
}
EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inits)
        return NVML_UNINITIALIZED;
    *n = (unsigned)fake_device_count();
    return NVML_OK;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h)
{
    if (!inits)
        return NVML_UNINITIALIZED;
    if (i >= (unsigned)fake_device_count())
        return NVML_INVALID;
    handles[i] = (int)i;
    *h = &handles[i];
    return NVML_OK;
}
EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **h)
{
    for (int i = 0; i < fake_device_count(); i++) {
        char want[48];
        snprintf(want, sizeof want, "GPU-face0000-0000-0000-0000-0000000000%02x", i);
        if (!strcmp(uuid, want))
            return nvmlDeviceGetHandleByIndex_v2((unsigned)i, h);
    }
    return NVML_NOT_FOUND;
}
EXPORT int nvmlDeviceGetName(void *h, char *out, unsigned len)
{
    snprintf(out, len, "Fake GPU %d", *(int *)h);
    return NVML_OK;
}
EXPORT int nvmlDeviceGetMemoryInfo(void *h, memory_t *m)
{
    int dev = *(int *)h;
    m->total = fake_capacity();
    m->used = ours(dev) + fake_env_bytes("GMP_FAKE_OTHER_BYTES", 0);
    m->free = m->used < m->total ? m->total - m->used : 0;
    return NVML_OK;
}
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *count, process_t *out)
{
    int dev = *(int *)h;
    size_t other = fake_env_bytes("GMP_FAKE_OTHER_BYTES", 0);
    unsigned n = other ? 2 : 1;
    if (*count < n) {
        *count = n;
        return NVML_INSUFFICIENT_SIZE;
    }
    out[0] = (process_t){(unsigned)getpid(), ours(dev), 0, 0};
    if (other)
        out[1] = (process_t){(unsigned)fake_env_bytes("GMP_FAKE_OTHER_PID", 4242), other, 0, 0};
    *count = n;
    return NVML_OK;
}
