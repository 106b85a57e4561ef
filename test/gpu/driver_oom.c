/*
 * driver_oom.c — a program that reaches the CUDA driver double the ways real
 * programs do, for the integration tests (run with and without the
 * preload).  Built twice: reaching libcuda by dlopen/dlsym/cuGetProcAddress,
 * and (-DDIRECT_LINK, driver_direct) linked against it.  Usage:
 *   driver_oom static-cudart DEVICE  as static cudart 13: dlopen libcuda.so.1,
 *                 dlsym cuGetProcAddress_v2, the self-query, then cuMemAlloc
 *                 version 3020 through what it returned, from the program's
 *                 own cudaMalloc and libcudart_static_ frames: 256 MiB chunks on
 *                 DEVICE until one fails; prints "held H failed F alloc_events
 *                 N"; exits 3 holding them
 *   driver_oom vmm DEVICE   as older PyTorch's expandable segments: dlopen
 *                 libcuda.so.1 RTLD_NOLOAD (cudart loaded it), dlsym
 *                 cuMemCreate and friends, reserve a range, create and map
 *                 256 MiB until cuMemCreate fails; exits 3 holding them
 *   driver_oom vmm-cycle    create+map four chunks, unmap+release them; prints
 *                 the preload's alloc/free/map/unmap event counts
 *   driver_oom vmm-host     creates four chunks of pinned host memory (location
 *                 HOST); prints how many cuMemCreate events the preload
 *                 booked on the host and on a device, then releases them
 *   driver_oom lookups      one line per lookup: its status and the object the
 *                 returned pointer lies in (dlsym, cuGetProcAddress v1 and
 *                 v2, versions, _ptsz, unknown names, RTLD_NEXT)
 *   driver_direct direct DEVICE  cuMemAlloc_v2 called directly until OOM
 */
#include "events.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define CHUNK (256 * MIB)

typedef unsigned long long devptr;
typedef unsigned long long handle_t;
typedef struct { int type; int id; } mem_location;
typedef struct { int type; int handle_types; mem_location location; void *win32; unsigned char flags[8]; } alloc_prop;
typedef int (*gpa_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa_v1_fn)(const char *, void **, int, unsigned long long);

void *next_probe_lookup(const char *name);

/* The four driver functions a cudart needs to allocate. */
typedef struct driver_api {
    int (*init)(unsigned);
    int (*retain)(void **, int);
    int (*set_current)(void *);
    int (*alloc)(devptr *, size_t);
} driver_api;

/* 256 MiB on `device` until an allocation fails; exits 3 on the OOM code. */
static int until_oom(const driver_api *d, int device)
{
    void *ctx = NULL;
    if (d->init(0) || d->retain(&ctx, device) || d->set_current(ctx))
        return 11;
    unsigned long long held = 0;
    devptr p;
    int rc;
    while ((rc = d->alloc(&p, CHUNK)) == 0)
        held += CHUNK;
    printf("held %llu failed %llu alloc_events %d\n", held, CHUNK,
           count_events_of(GMP_EV_ALLOC, "cuMemAlloc_v2"));
    return rc == 2 ? 3 : 4;
}

#ifdef DIRECT_LINK
int cuInit(unsigned flags);
int cuMemAlloc_v2(devptr *p, size_t size);
int cuCtxSetCurrent(void *ctx);
int cuDevicePrimaryCtxRetain(void **ctx, int dev);

int main(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[1], "direct"))
        return 2;
    driver_api d = {cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuMemAlloc_v2};
    return until_oom(&d, atoi(argv[2]));
}
#else
int cudaSetDevice(int device);

static const char *module_of(const void *p)
{
    Dl_info info;
    if (!p)
        return "NULL";
    if (!dladdr(p, &info) || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static void *must(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "no %s: %s\n", name, dlerror());
        exit(10);
    }
    return p;
}

/* The driver as static cudart 13 finds it. */
static gpa_v2_fn boot_driver(void **handle)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(12);
    gpa_v2_fn boot = (gpa_v2_fn)must(h, "cuGetProcAddress_v2"), gpa = NULL;
    int found = -1;
    if (boot("cuGetProcAddress", (void **)&gpa, 13000, 0, &found) || !gpa || found)
        exit(13);
    if (handle)
        *handle = h;
    return gpa;
}

static void *proc(gpa_v2_fn gpa, const char *name, int version, unsigned long long flags)
{
    void *fn = NULL;
    int found = -1;
    if (gpa(name, &fn, version, flags, &found) || !fn)
        exit(14);
    return fn;
}

/* As nvcc's static cudart lies in a program: its cudaMalloc, and under it
 * the runtime's own functions (named libcudart_static_<hash>), inside the
 * executable, above the driver.  Neither call is a tail call, so that
 * both frames stay on the stack as the real runtime's do. */
static int (*static_runtime_alloc)(devptr *, size_t);

__attribute__((noinline)) static int libcudart_static_5b2fe4c1(devptr *p, size_t size)
{
    int rc = static_runtime_alloc(p, size);
    __asm__ volatile("" ::: "memory");
    return rc;
}

__attribute__((noinline)) static int cudaMalloc(devptr *p, size_t size)
{
    int rc = libcudart_static_5b2fe4c1(p, size);
    __asm__ volatile("" ::: "memory");
    return rc;
}

static int static_cudart(int device)
{
    gpa_v2_fn gpa = boot_driver(NULL);
    driver_api d;
    *(void **)&d.init = proc(gpa, "cuInit", 2000, 0);
    *(void **)&d.retain = proc(gpa, "cuDevicePrimaryCtxRetain", 7000, 0);
    *(void **)&d.set_current = proc(gpa, "cuCtxSetCurrent", 4000, 0);
    *(void **)&static_runtime_alloc = proc(gpa, "cuMemAlloc", 3020, 0);
    d.alloc = cudaMalloc;
    return until_oom(&d, device);
}

typedef struct vmm {
    int (*create)(handle_t *, size_t, const alloc_prop *, unsigned long long);
    int (*release)(handle_t);
    int (*reserve)(devptr *, size_t, size_t, devptr, unsigned long long);
    int (*map)(devptr, size_t, size_t, handle_t, unsigned long long);
    int (*unmap)(devptr, size_t);
} vmm;

/* As PyTorch before 2.3: cudart has loaded libcuda; find it by name. */
static vmm vmm_functions(int device)
{
    if (cudaSetDevice(device))
        exit(11);
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        exit(12);
    vmm v;
    *(void **)&v.create = must(h, "cuMemCreate");
    *(void **)&v.release = must(h, "cuMemRelease");
    *(void **)&v.reserve = must(h, "cuMemAddressReserve");
    *(void **)&v.map = must(h, "cuMemMap");
    *(void **)&v.unmap = must(h, "cuMemUnmap");
    return v;
}

static int expandable_segments(int device, int cycle)
{
    vmm v = vmm_functions(device);
    alloc_prop prop = {.type = 1, .location = {.type = 1, .id = device}};
    devptr base = 0;
    if (v.reserve(&base, 64 * CHUNK, 0, 0, 0))
        return 15;
    handle_t handles[64];
    int n = 0, rc = 0;
    while (n < (cycle ? 4 : 64) && (rc = v.create(&handles[n], CHUNK, &prop, 0)) == 0) {
        if (v.map(base + n * CHUNK, CHUNK, 0, handles[n], 0))
            return 16;
        n++;
    }
    if (cycle) {
        while (n-- > 0)
            if (v.unmap(base + n * CHUNK, CHUNK) || v.release(handles[n]))
                return 17;
        printf("alloc %d free %d map %d unmap %d\n", count_events_of(GMP_EV_ALLOC, "cuMemCreate"),
               count_events_of(GMP_EV_FREE, "cuMemRelease"), count_events(GMP_EV_MAP),
               count_events(GMP_EV_UNMAP));
        return 0;
    }
    printf("held %llu failed %llu map_events %d\n", n * CHUNK, CHUNK, count_events(GMP_EV_MAP));
    return rc == 2 ? 3 : 4;
}

static int pinned_host_chunks(void)
{
    vmm v = vmm_functions(0);
    alloc_prop prop = {.type = 1, .location = {.type = 2, .id = 0}};
    handle_t handles[4];
    for (int i = 0; i < 4; i++)
        if (v.create(&handles[i], CHUNK, &prop, 0))
            return 18;
    printf("host %d device %d\n", count_events_on(GMP_EV_ALLOC, "cuMemCreate", -1),
           count_events_on(GMP_EV_ALLOC, "cuMemCreate", 0));
    for (int i = 0; i < 4; i++)
        if (v.release(handles[i]))
            return 19;
    return 0;
}

static void line(const char *what, int rc, int found, void *fn)
{
    printf("%s rc=%d status=%d module=%s\n", what, rc, found, module_of(fn));
}

static void gpa_line(gpa_v2_fn gpa, const char *name, int version, unsigned long long flags)
{
    char what[128];
    void *fn = (void *)1; /* the driver must set it, even to NULL */
    int found = -1;
    int rc = gpa(name, &fn, version, flags, &found);
    snprintf(what, sizeof what, "gpa:%s@%d%s", name, version, flags & 2 ? "/ptsz" : "");
    line(what, rc, found, fn);
}

static int lookups(void)
{
    void *h = NULL;
    gpa_v2_fn gpa = boot_driver(&h);
    line("dlsym:cuGetProcAddress_v2", 0, 0, dlsym(h, "cuGetProcAddress_v2"));
    gpa_line(gpa, "cuGetProcAddress", 13000, 0);
    gpa_line(gpa, "cuMemAlloc", 3020, 0);
    gpa_line(gpa, "cuMemAlloc", 2000, 0);   /* the 32-bit ABI: not ours */
    gpa_line(gpa, "cuMemAllocAsync", 11020, 0);
    gpa_line(gpa, "cuMemAllocAsync", 11020, 2);
    gpa_line(gpa, "cuMemCreate", 12000, 0);
    gpa_line(gpa, "cuMemCreate", 9000, 0);  /* version not sufficient */
    gpa_line(gpa, "cuCtxGetDevice", 2000, 0);
    gpa_line(gpa, "cuNoSuchFunction", 13000, 0);
    gpa_line(gpa, "", 13000, 0);            /* the empty-name probe */
    gpa_line(gpa, "cuGetProcAddress", 11030, 0);

    /* the old self-query hands back the 4-argument cuGetProcAddress */
    gpa_v1_fn v1 = NULL;
    if (gpa("cuGetProcAddress", (void **)&v1, 11030, 0, NULL) || !v1)
        return 13;
    void *fn = NULL;
    int rc = v1("cuMemFree", (void **)&fn, 3020, 0);
    line("gpa1:cuMemFree@3020", rc, 0, fn);
    rc = v1("cuMemFreeHost", (void **)&fn, 2000, 0);
    line("gpa1:cuMemFreeHost@2000", rc, 0, fn);

    /* the same entry point through both routes is one wrapper */
    void *a = NULL, *b = dlsym(h, "cuMemAlloc_v2");
    gpa("cuMemAlloc", &a, 3020, 0, NULL);
    printf("same:cuMemAlloc_v2 %d\n", a == b);
    void *legacy = NULL, *ptsz = NULL;
    gpa("cuMemAllocAsync", &legacy, 11020, 0, NULL);
    gpa("cuMemAllocAsync", &ptsz, 11020, 2, NULL);
    printf("distinct:cuMemAllocAsync/ptsz %d\n", legacy != ptsz);

    line("dlsym:cuMemCreate", 0, 0, dlsym(h, "cuMemCreate"));
    line("dlsym:cuMemAllocAsync_ptsz", 0, 0, dlsym(h, "cuMemAllocAsync_ptsz"));
    line("dlsym:cuMemAlloc", 0, 0, dlsym(h, "cuMemAlloc"));
    line("dlsym:cuCtxGetDevice", 0, 0, dlsym(h, "cuCtxGetDevice"));
    dlerror();
    void *none = dlsym(h, "cuNoSuchFunction");
    printf("dlsym:cuNoSuchFunction %s dlerror=%d\n", module_of(none), dlerror() != NULL);
    line("dlsym:default:strlen", 0, 0, dlsym(RTLD_DEFAULT, "strlen"));
    line("dlsym:next:puts", 0, 0, dlsym(RTLD_NEXT, "puts"));
    line("probe:next:next_probe_only", 0, 0, next_probe_lookup("next_probe_only"));
    line("probe:next:getpid", 0, 0, next_probe_lookup("getpid"));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *mode = argv[1];
    int device = argc > 2 ? atoi(argv[2]) : 0;
    if (!strcmp(mode, "static-cudart"))
        return static_cudart(device);
    if (!strcmp(mode, "vmm"))
        return expandable_segments(device, 0);
    if (!strcmp(mode, "vmm-cycle"))
        return expandable_segments(device, 1);
    if (!strcmp(mode, "vmm-host"))
        return pinned_host_chunks();
    if (!strcmp(mode, "lookups"))
        return lookups();
    return 2;
}
#endif
