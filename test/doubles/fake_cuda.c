/*
 * fake_cuda.c — a test double of the CUDA driver, libcuda.so.1, that
 * behaves toward callers like the real one where the preload can tell:
 *   - the memory of fake_device.h behind the cuMem* calls, VMM included
 *     (cuMemCreate handles, reserved ranges, cuMemMap/cuMemUnmap);
 *   - cuGetProcAddress and cuGetProcAddress_v2 resolve base names by
 *     version (cuMemAlloc below 3020 is the old 32-bit one), give _ptsz
 *     variants for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, answer
 *     unknown names with CUDA_ERROR_NOT_FOUND and a symbol status;
 *   - cuInit loads CUDA_INJECTION64_PATH and calls its InitializeInjection;
 *   - a CUPTI double (fake_cupti.c) hears API enter/exit through
 *     fake_cuda_set_callback; fake_cudart.c reports runtime calls through
 *     fake_cuda_notify, as the real runtime reports through the driver.
 * GMP_FAKE_CUDA_LOG=FILE appends one line per cuGetProcAddress lookup:
 * "NAME VERSION FLAGS CALLER", CALLER the file name of the calling object.
 */
#include "fake_device.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

enum {
    NOT_INITIALIZED = 3, INVALID_CONTEXT = 201, INVALID_DEVICE = 101, NOT_FOUND = 500,
    PROC_SUCCESS = 0, PROC_SYMBOL_NOT_FOUND = 1, PROC_VERSION_NOT_SUFFICIENT = 2,
    PER_THREAD_DEFAULT_STREAM = 2,
};
enum { DOMAIN_DRIVER = 1, DOMAIN_RUNTIME = 2, SITE_ENTER = 0, SITE_EXIT = 1 };

typedef unsigned long long devptr;
typedef unsigned long long handle_t;
typedef struct { int type; int id; } mem_location;
typedef struct { int type; int handle_types; mem_location location; void *win32; unsigned char flags[8]; } alloc_prop;

static __thread int current; /* the device of this thread's context */
static __thread int has_context; /* cuCtxSetCurrent was called on this thread */

/* ---- the CUPTI double's ear ---------------------------------------------- */

typedef void (*api_callback)(int domain, const char *name, int site, void *params,
                             const int *result);
static api_callback callback;
EXPORT void fake_cuda_set_callback(api_callback cb) { __atomic_store_n(&callback, cb, __ATOMIC_RELEASE); }
EXPORT void fake_cuda_notify(int domain, const char *name, int site, void *params, const int *result)
{
    api_callback cb = __atomic_load_n(&callback, __ATOMIC_ACQUIRE);
    if (cb)
        cb(domain, name, site, params, result);
}

/* Run `body` (which sets rc) between enter and exit notifications with the
 * arguments laid out as CUPTI's <name>_params struct. */
#define NOTIFIED(name, fields, body, ...)                                      \
    struct fields params = {__VA_ARGS__};                                      \
    fake_cuda_notify(DOMAIN_DRIVER, name, SITE_ENTER, &params, NULL);          \
    int rc;                                                                    \
    body;                                                                      \
    fake_cuda_notify(DOMAIN_DRIVER, name, SITE_EXIT, &params, &rc);            \
    return rc

/* ---- context and devices ------------------------------------------------- */

static int initialized;

EXPORT int cuInit(unsigned flags)
{
    (void)flags;
    if (__atomic_exchange_n(&initialized, 1, __ATOMIC_ACQ_REL))
        return FAKE_OK;
    const char *inject = getenv("CUDA_INJECTION64_PATH");
    if (inject && *inject) {
        void *h = dlopen(inject, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (init)
            init();
    }
    return FAKE_OK;
}
EXPORT int cuDriverGetVersion(int *v) { *v = 13000; return FAKE_OK; }
EXPORT int cuDeviceGetCount(int *n) { *n = fake_device_count(); return FAKE_OK; }
EXPORT int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= fake_device_count())
        return INVALID_DEVICE;
    *dev = ordinal;
    return FAKE_OK;
}
/* A context is its device + 1. */
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return INVALID_DEVICE;
    *ctx = (void *)(uintptr_t)(dev + 1);
    return FAKE_OK;
}
EXPORT int cuCtxSetCurrent(void *ctx)
{
    int dev = (int)(uintptr_t)ctx - 1;
    if (dev < 0 || dev >= fake_device_count())
        return INVALID_CONTEXT;
    current = dev;
    has_context = 1;
    return FAKE_OK;
}
EXPORT int cuCtxGetDevice(int *dev) { *dev = current; return FAKE_OK; }
EXPORT int cuCtxGetCurrent(void **ctx)
{
    *ctx = has_context ? (void *)(uintptr_t)(current + 1) : NULL;
    return FAKE_OK;
}
EXPORT int cuDeviceGetName(char *name, int len, int dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake GPU %d", dev);
    return FAKE_OK;
}
EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return INVALID_DEVICE;
    *bytes = fake_capacity();
    return FAKE_OK;
}
/* Device d's UUID: fa ce .. d; the NVML double spells the same one. */
EXPORT int cuDeviceGetUuid_v2(unsigned char *uuid, int dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return INVALID_DEVICE;
    memset(uuid, 0, 16);
    uuid[0] = 0xfa;
    uuid[1] = 0xce;
    uuid[15] = (unsigned char)dev;
    return FAKE_OK;
}
/* For the NVML double: what this process holds on a device. */
EXPORT size_t fake_cuda_used(int dev)
{
    pthread_mutex_lock(&fake_lock);
    size_t n = dev >= 0 && dev < FAKE_MAX_DEVICES ? fake_used[dev] : 0;
    pthread_mutex_unlock(&fake_lock);
    return n;
}
EXPORT int cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    *total = fake_capacity();
    *free_bytes = fake_free_bytes(current);
    return FAKE_OK;
}

/* ---- allocation ---------------------------------------------------------- */

static int alloc_on(int device, devptr *out, size_t size)
{
    uintptr_t a = 0;
    if (!out)
        return FAKE_INVALID_VALUE;
    int rc = fake_alloc(device, &a, size);
    if (rc == FAKE_OK)
        *out = a;
    return rc;
}

EXPORT int cuMemAlloc_v2(devptr *p, size_t size)
{
    NOTIFIED("cuMemAlloc_v2", { devptr *p; size_t size; },
             rc = alloc_on(current, p, size), p, size);
}
/* The CUDA 2.x ABI: 32-bit pointers and sizes. */
EXPORT int cuMemAlloc(unsigned *p, unsigned size)
{
    devptr full = 0;
    int rc = alloc_on(current, &full, size);
    if (rc == FAKE_OK)
        *p = (unsigned)full;
    return rc;
}
EXPORT int cuMemAllocManaged(devptr *p, size_t size, unsigned flags)
{
    (void)flags;
    return alloc_on(current, p, size);
}
EXPORT int cuMemAllocPitch_v2(devptr *p, size_t *pitch, size_t width, size_t height, unsigned element)
{
    (void)element;
    size_t padded = (width + 511) & ~(size_t)511;
    int rc = alloc_on(current, p, padded * height);
    if (rc == FAKE_OK)
        *pitch = padded;
    return rc;
}
EXPORT int cuMemAllocHost_v2(void **p, size_t size) { return (*p = malloc(size)) ? FAKE_OK : FAKE_OUT_OF_MEMORY; }
EXPORT int cuMemHostAlloc(void **p, size_t size, unsigned flags)
{
    (void)flags;
    return (*p = malloc(size)) ? FAKE_OK : FAKE_OUT_OF_MEMORY;
}
EXPORT int cuMemFreeHost(void *p) { free(p); return FAKE_OK; }
EXPORT int cuMemAllocAsync(devptr *p, size_t size, void *stream)
{
    NOTIFIED("cuMemAllocAsync", { devptr *p; size_t size; void *stream; },
             rc = alloc_on(current, p, size), p, size, stream);
}
EXPORT int cuMemAllocAsync_ptsz(devptr *p, size_t size, void *stream) { (void)stream; return alloc_on(current, p, size); }
EXPORT int cuMemAllocFromPoolAsync(devptr *p, size_t size, void *pool, void *stream)
{
    (void)pool;
    (void)stream;
    return alloc_on(current, p, size);
}
EXPORT int cuMemAllocFromPoolAsync_ptsz(devptr *p, size_t size, void *pool, void *stream)
{
    (void)pool;
    (void)stream;
    return alloc_on(current, p, size);
}
EXPORT int cuMemFree_v2(devptr p)
{
    NOTIFIED("cuMemFree_v2", { devptr p; },
             rc = fake_free(p), p);
}
EXPORT int cuMemFreeAsync(devptr p, void *stream) { (void)stream; return fake_free(p); }
EXPORT int cuMemFreeAsync_ptsz(devptr p, void *stream) { (void)stream; return fake_free(p); }

/* ---- virtual memory management: a handle is physical memory ------------- */

static uintptr_t next_reserved = 0x600000000000;

/* Pinned host memory (location HOST or HOST_NUMA, CUDA 12.2+): handles of
 * their own range, never counted against a device. */
#define HOST_HANDLES ((handle_t)0x7e0000000000ull)
static handle_t next_host_handle = HOST_HANDLES;

static int create_on_host(handle_t *h, size_t size)
{
    pthread_mutex_lock(&fake_lock);
    *h = next_host_handle;
    next_host_handle += ((size + 0xfffff) & ~(handle_t)0xfffff) + 0x100000;
    pthread_mutex_unlock(&fake_lock);
    return FAKE_OK;
}

EXPORT int cuMemCreate(handle_t *h, size_t size, const alloc_prop *prop, unsigned long long flags)
{
    NOTIFIED("cuMemCreate", { handle_t *h; size_t size; const alloc_prop *prop; unsigned long long flags; },
             {
                 uintptr_t a = 0;
                 int type = prop ? prop->location.type : 0;
                 int device = type == 1 ? prop->location.id : -1;
                 if (h && (type == 2 || type == 3))
                     rc = create_on_host(h, size);
                 else if (!h || device < 0)
                     rc = FAKE_INVALID_VALUE;
                 else if ((rc = fake_alloc(device, &a, size)) == FAKE_OK)
                     *h = a; /* the backing's fake address doubles as the handle */
             }, h, size, prop, flags);
}
EXPORT int cuMemRelease(handle_t h)
{
    NOTIFIED("cuMemRelease", { handle_t h; },
             rc = h >= HOST_HANDLES ? FAKE_OK : fake_free(h), h);
}
EXPORT int cuMemAddressReserve(devptr *p, size_t size, size_t alignment, devptr addr, unsigned long long flags)
{
    (void)alignment;
    (void)addr;
    (void)flags;
    pthread_mutex_lock(&fake_lock);
    *p = next_reserved;
    next_reserved += (size + 0x1fffff) & ~(uintptr_t)0x1fffff;
    pthread_mutex_unlock(&fake_lock);
    return FAKE_OK;
}
EXPORT int cuMemAddressFree(devptr p, size_t size) { (void)p; (void)size; return FAKE_OK; }
EXPORT int cuMemMap(devptr p, size_t size, size_t offset, handle_t h, unsigned long long flags)
{
    NOTIFIED("cuMemMap", { devptr p; size_t size; size_t offset; handle_t h; unsigned long long flags; },
             rc = h && p ? FAKE_OK : FAKE_INVALID_VALUE, p, size, offset, h, flags);
}
EXPORT int cuMemUnmap(devptr p, size_t size)
{
    NOTIFIED("cuMemUnmap", { devptr p; size_t size; },
             rc = p ? FAKE_OK : FAKE_INVALID_VALUE, p, size);
}
EXPORT int cuMemSetAccess(devptr p, size_t size, const void *desc, size_t count)
{
    (void)p;
    (void)size;
    (void)desc;
    (void)count;
    return FAKE_OK;
}

/* ---- cuGetProcAddress ---------------------------------------------------- */

EXPORT int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *found);

typedef struct proc { const char *name; int since; void *fn, *ptsz; } proc;
#define P(name, since, fn) {name, since, (void *)fn, NULL},
#define PS(name, since, fn) {name, since, (void *)fn, (void *)fn##_ptsz},
/* One name's entries: the higher version first. */
static const proc procs[] = {
    P("cuInit", 2000, cuInit) P("cuDriverGetVersion", 2020, cuDriverGetVersion)
    P("cuDeviceGetCount", 2000, cuDeviceGetCount) P("cuDeviceGet", 2000, cuDeviceGet)
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain)
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent) P("cuCtxGetDevice", 2000, cuCtxGetDevice)
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2)
    P("cuMemAlloc", 3020, cuMemAlloc_v2) P("cuMemAlloc", 2000, cuMemAlloc)
    P("cuMemAllocManaged", 6000, cuMemAllocManaged)
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2) P("cuMemAllocHost", 3020, cuMemAllocHost_v2)
    P("cuMemHostAlloc", 2020, cuMemHostAlloc) P("cuMemFreeHost", 2000, cuMemFreeHost)
    PS("cuMemAllocAsync", 11020, cuMemAllocAsync)
    PS("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync)
    P("cuMemFree", 3020, cuMemFree_v2) PS("cuMemFreeAsync", 11020, cuMemFreeAsync)
    P("cuMemCreate", 10020, cuMemCreate) P("cuMemRelease", 10020, cuMemRelease)
    P("cuMemAddressReserve", 10020, cuMemAddressReserve)
    P("cuMemAddressFree", 10020, cuMemAddressFree) P("cuMemMap", 10020, cuMemMap)
    P("cuMemUnmap", 10020, cuMemUnmap) P("cuMemSetAccess", 10020, cuMemSetAccess)
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2) P("cuGetProcAddress", 11030, cuGetProcAddress)
};

static void log_lookup(const char *symbol, int version, unsigned long long flags, void *caller)
{
    const char *path = getenv("GMP_FAKE_CUDA_LOG");
    if (!path || !*path)
        return;
    Dl_info info;
    const char *who = dladdr(caller, &info) && info.dli_fname ? info.dli_fname : "?";
    const char *slash = strrchr(who, '/');
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s %d %llu %s\n", symbol ? symbol : "(null)", version, flags,
                slash ? slash + 1 : who);
        fclose(f);
    }
}

static int lookup(const char *symbol, void **pfn, int version, unsigned long long flags, int *found)
{
    if (!symbol || !pfn)
        return FAKE_INVALID_VALUE;
    int named = 0;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        if (strcmp(procs[i].name, symbol))
            continue;
        named = 1;
        if (version < procs[i].since)
            continue;
        *pfn = (flags & PER_THREAD_DEFAULT_STREAM) && procs[i].ptsz ? procs[i].ptsz : procs[i].fn;
        if (found)
            *found = PROC_SUCCESS;
        return FAKE_OK;
    }
    *pfn = NULL;
    if (found)
        *found = named ? PROC_VERSION_NOT_SUFFICIENT : PROC_SYMBOL_NOT_FOUND;
    return NOT_FOUND;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *found)
{
    log_lookup(symbol, version, flags, __builtin_return_address(0));
    return lookup(symbol, pfn, version, flags, found);
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
    log_lookup(symbol, version, flags, __builtin_return_address(0));
    return lookup(symbol, pfn, version, flags, NULL);
}
