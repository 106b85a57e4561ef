/*
 * fake_cudart.c — a test double of the CUDA runtime, libcudart.so.13, that
 * reaches the driver the way the real cudart 13 does: dlopen libcuda.so.1,
 * dlsym cuGetProcAddress_v2, ask it for cuGetProcAddress itself (the
 * self-query), then resolve every entry point by base name and ABI version
 * through the pointer it got back.  Each runtime call is one driver call,
 * reported to a CUPTI double as a runtime-domain API (fake_cuda_notify).
 * Codes pass through: the driver's CUDA_ERROR_OUT_OF_MEMORY (2) is the
 * runtime's cudaErrorMemoryAllocation (2).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_VALUE = 1, INSUFFICIENT_DRIVER = 35, PTDS = 2 };
enum { DOMAIN_RUNTIME = 2, SITE_ENTER = 0, SITE_EXIT = 1 };

typedef unsigned long long devptr;
typedef struct extent { size_t width, height, depth; } extent;
typedef struct pitched_ptr { void *ptr; size_t pitch, xsize, ysize; } pitched_ptr;
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);

static struct driver {
    int (*init)(unsigned);
    int (*retain)(void **, int);
    int (*set_current)(void *);
    int (*get_device)(int *);
    int (*get_count)(int *);
    int (*mem_info)(size_t *, size_t *);
    int (*alloc)(devptr *, size_t);
    int (*managed)(devptr *, size_t, unsigned);
    int (*pitch)(devptr *, size_t *, size_t, size_t, unsigned);
    int (*host)(void **, size_t);
    int (*host_alloc)(void **, size_t, unsigned);
    int (*free_host)(void *);
    int (*async)(devptr *, size_t, void *);
    int (*async_ptsz)(devptr *, size_t, void *);
    int (*pool)(devptr *, size_t, void *, void *);
    int (*pool_ptsz)(devptr *, size_t, void *, void *);
    int (*free)(devptr);
    int (*free_async)(devptr, void *);
    int (*free_async_ptsz)(devptr, void *);
    void (*notify)(int, const char *, int, void *, const int *);
} drv;
static int loaded; /* 1 ok, -1 no driver */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(gpa_fn gpa, const char *name, int version, unsigned long long flags, void *out)
{
    int found = 0;
    if (gpa(name, (void **)out, version, flags, &found) != 0)
        *(void **)out = NULL;
}

EXPORT int cudaRuntimeGetVersion(int *v)
{
    *v = 13010;
    return OK;
}

/* libcuda.so.1 by name, found through this library's $ORIGIN run path; where
 * a sanitizer's dlopen interceptor stands between us and the loader, the
 * loader sees the interceptor as the caller and ignores our run path, so the
 * file beside this library is tried by its full path. */
static void *open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    Dl_info self;
    if (h || !dladdr((void *)open_driver, &self) || !self.dli_fname)
        return h;
    char path[4096];
    const char *slash = strrchr(self.dli_fname, '/');
    if (!slash)
        return NULL;
    snprintf(path, sizeof path, "%.*s/libcuda.so.1", (int)(slash - self.dli_fname),
             self.dli_fname);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void load(void)
{
    void *h = open_driver();
    gpa_fn boot = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    gpa_fn gpa = NULL;
    if (!boot || boot("cuGetProcAddress", (void **)&gpa, 13000, 0, NULL) != 0 || !gpa) {
        loaded = -1;
        return;
    }
    resolve(gpa, "cuInit", 2000, 0, &drv.init);
    resolve(gpa, "cuDevicePrimaryCtxRetain", 7000, 0, &drv.retain);
    resolve(gpa, "cuCtxSetCurrent", 4000, 0, &drv.set_current);
    resolve(gpa, "cuCtxGetDevice", 2000, 0, &drv.get_device);
    resolve(gpa, "cuDeviceGetCount", 2000, 0, &drv.get_count);
    resolve(gpa, "cuMemGetInfo", 3020, 0, &drv.mem_info);
    resolve(gpa, "cuMemAlloc", 3020, 0, &drv.alloc);
    resolve(gpa, "cuMemAllocManaged", 6000, 0, &drv.managed);
    resolve(gpa, "cuMemAllocPitch", 3020, 0, &drv.pitch);
    resolve(gpa, "cuMemAllocHost", 3020, 0, &drv.host);
    resolve(gpa, "cuMemHostAlloc", 2020, 0, &drv.host_alloc);
    resolve(gpa, "cuMemFreeHost", 2000, 0, &drv.free_host);
    resolve(gpa, "cuMemAllocAsync", 11020, 0, &drv.async);
    resolve(gpa, "cuMemAllocAsync", 11020, PTDS, &drv.async_ptsz);
    resolve(gpa, "cuMemAllocFromPoolAsync", 11020, 0, &drv.pool);
    resolve(gpa, "cuMemAllocFromPoolAsync", 11020, PTDS, &drv.pool_ptsz);
    resolve(gpa, "cuMemFree", 3020, 0, &drv.free);
    resolve(gpa, "cuMemFreeAsync", 11020, 0, &drv.free_async);
    resolve(gpa, "cuMemFreeAsync", 11020, PTDS, &drv.free_async_ptsz);
    drv.notify = (void (*)(int, const char *, int, void *, const int *))dlsym(h, "fake_cuda_notify");
    loaded = drv.init && drv.alloc && drv.init(0) == OK ? 1 : -1;
}

static int ready(void)
{
    pthread_once(&once, load);
    return loaded == 1;
}

static void notify(const char *name, int site, void *params, const int *rc)
{
    if (drv.notify)
        drv.notify(DOMAIN_RUNTIME, name, site, params, rc);
}

/* A runtime call: its CUPTI params struct, enter, `call`, exit. */
#define RUNTIME(name, fields, call, ...)                                       \
    if (!ready())                                                              \
        return INSUFFICIENT_DRIVER;                                            \
    struct fields params = {__VA_ARGS__};                                      \
    notify(name, SITE_ENTER, &params, NULL);                                   \
    int rc = call;                                                             \
    notify(name, SITE_EXIT, &params, &rc);                                     \
    return rc

EXPORT int cudaGetDeviceCount(int *n) { return ready() ? drv.get_count(n) : INSUFFICIENT_DRIVER; }
EXPORT int cudaGetDevice(int *d) { return ready() ? drv.get_device(d) : INSUFFICIENT_DRIVER; }
EXPORT int cudaSetDevice(int d)
{
    void *ctx = NULL;
    if (!ready())
        return INSUFFICIENT_DRIVER;
    int rc = drv.retain(&ctx, d);
    return rc == OK ? drv.set_current(ctx) : rc;
}
EXPORT int cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    return ready() ? drv.mem_info(free_bytes, total) : INSUFFICIENT_DRIVER;
}

EXPORT int cudaMalloc(void **p, size_t size)
{
    RUNTIME("cudaMalloc_v3020", { void **p; size_t size; },
            p ? drv.alloc((devptr *)p, size) : INVALID_VALUE, p, size);
}
EXPORT int cudaMallocManaged(void **p, size_t size, unsigned flags)
{
    return ready() ? drv.managed((devptr *)p, size, flags) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    return ready() ? drv.pitch((devptr *)p, pitch, width, height, 4) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaMalloc3D(pitched_ptr *pp, extent e)
{
    if (!ready())
        return INSUFFICIENT_DRIVER;
    devptr p = 0;
    size_t pitch = 0;
    int rc = drv.pitch(&p, &pitch, e.width, e.height * e.depth, 4);
    if (rc == OK)
        *pp = (pitched_ptr){(void *)(uintptr_t)p, pitch, e.width, e.height};
    return rc;
}
EXPORT int cudaMallocHost(void **p, size_t size) { return ready() ? drv.host(p, size) : INSUFFICIENT_DRIVER; }
EXPORT int cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    return ready() ? drv.host_alloc(p, size, flags) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaFreeHost(void *p) { return ready() ? drv.free_host(p) : INSUFFICIENT_DRIVER; }
EXPORT int cudaMallocAsync(void **p, size_t size, void *stream)
{
    return ready() ? drv.async((devptr *)p, size, stream) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaMallocAsync_ptsz(void **p, size_t size, void *stream)
{
    return ready() ? drv.async_ptsz((devptr *)p, size, stream) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream)
{
    return ready() ? drv.pool((devptr *)p, size, pool, stream) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaMallocFromPoolAsync_ptsz(void **p, size_t size, void *pool, void *stream)
{
    return ready() ? drv.pool_ptsz((devptr *)p, size, pool, stream) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaFree(void *p)
{
    RUNTIME("cudaFree_v3020", { void *p; }, p ? drv.free((devptr)(uintptr_t)p) : OK, p);
}
EXPORT int cudaFreeAsync(void *p, void *stream)
{
    return ready() ? drv.free_async((devptr)(uintptr_t)p, stream) : INSUFFICIENT_DRIVER;
}
EXPORT int cudaFreeAsync_ptsz(void *p, void *stream)
{
    return ready() ? drv.free_async_ptsz((devptr)(uintptr_t)p, stream) : INSUFFICIENT_DRIVER;
}
