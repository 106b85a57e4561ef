/*
 * cuda_driver.c — the CUDA driver family: the table of cuda_driver_table.h
 * expanded twice through the generic path of gpu_family.h.
 *
 * Exported hooks catch programs linked against libcuda.  Everything else
 * (static cudart, the libraries' private cudart, PyTorch, XLA) gets the
 * driver's functions from dlsym or cuGetProcAddress; for those we hand back
 * a routed wrapper that calls exactly the pointer the driver gave, so ABI
 * versions and per-thread-stream variants stay what the caller asked for.
 * Each entry has GMP_ROUTE_SLOTS wrappers, one per distinct driver pointer
 * (the legacy and _ptsz variants of one name are two); a pointer beyond
 * that is handed back unwrapped rather than mixed up.
 *
 * cuGetProcAddress itself is routed too: its self-query returns our
 * wrapper, so a cudart that resolves ~400 entry points through the pointer
 * it got back asks us each time.  We call the real one first with the
 * caller's version and flags, keep its status and symbol status, and swap
 * only a found pointer of an entry point in the table.
 */
#include "cuda_driver.h"

#include <string.h>

#define GMP_T_DEVPTR gmp_cu_devptr
#define GMP_T_HANDLE gmp_cu_handle
#define GMP_T_MEMPROP gmp_cu_mem_alloc_prop
#define GMP_T_STREAM gmp_gpu_stream
#define GMP_T_MEMPOOL gmp_gpu_mempool
#include "cuda_driver_table.h"

gmp_gpu_family gmp_cuda_driver = {GMP_BACKEND_CUDA, "cuCtxGetDevice",
                                   "cuMemGetInfo_v2", NULL, NULL};

int gmp_cu_location_where(const void *where)
{
    const gmp_cu_mem_location *location = where;
    if (!location)
        return GMP_ON_DEVICE;
    if (location->type == 1 && location->id >= 0)
        return location->id;
    return location->type == 2 || location->type == 3 ? GMP_ON_HOST : GMP_ON_DEVICE;
}

/* ---- exported hooks ----------------------------------------------------- */

#define EXPORT_ALLOC(name, base, since, api, where, params, args, ptr, requested, size, ...) \
    GMP_GPU_ALLOC_HOOK(gmp_cuda_driver, name, api, where, params, args, ptr, requested, size)
#define EXPORT_FREE(name, base, since, api, params, args, ptr, ...)                        \
    GMP_GPU_FREE_HOOK(gmp_cuda_driver, name, api, params, args, ptr)
#define EXPORT_MAP(name, base, since, api, type, params, args, ptr, size, ...)             \
    GMP_GPU_MAP_HOOK(gmp_cuda_driver, name, api, type, params, args, ptr, size)
GMP_CUDA_DRIVER_ALLOCS(EXPORT_ALLOC)
GMP_CUDA_DRIVER_FREES(EXPORT_FREE)
GMP_CUDA_DRIVER_MAPS(EXPORT_MAP)

/* ---- routed wrappers ---------------------------------------------------- */

#define GMP_ROUTE_SLOTS 4
#define FOR_EACH_SLOT(M, ...) \
    M(0, __VA_ARGS__) M(1, __VA_ARGS__) M(2, __VA_ARGS__) M(3, __VA_ARGS__)

/* The driver function slot k of `name` calls (atomic; set once). */
#define TARGET(name, k, params)                                                            \
    gmp_gpu_status(*fn) params = __atomic_load_n(&name##_targets[k], __ATOMIC_ACQUIRE)

#define ROUTED_ALLOC_SLOT(k, name, api, where, params, args, ptr, requested, size)         \
    static gmp_gpu_status name##_routed_##k params                                         \
    {                                                                                      \
        TARGET(name, k, params);                                                           \
        GMP_GPU_ALLOC_BODY(gmp_cuda_driver, fn, api, where, args, ptr, requested, size);   \
    }
#define ROUTED_FREE_SLOT(k, name, api, params, args, ptr)                                  \
    static gmp_gpu_status name##_routed_##k params                                         \
    {                                                                                      \
        TARGET(name, k, params);                                                           \
        GMP_GPU_FREE_BODY(gmp_cuda_driver, fn, api, args, ptr);                            \
    }
#define ROUTED_MAP_SLOT(k, name, api, type, params, args, ptr, size)                       \
    static gmp_gpu_status name##_routed_##k params                                         \
    {                                                                                      \
        TARGET(name, k, params);                                                           \
        GMP_GPU_MAP_BODY(gmp_cuda_driver, fn, api, type, args, ptr, size);                 \
    }

#define TARGETS(name, params) static gmp_gpu_status(*name##_targets[GMP_ROUTE_SLOTS]) params;
#define ROUTED_ALLOC(name, base, since, api, where, params, args, ptr, requested, size, ...) \
    TARGETS(name, params)                                                                  \
    FOR_EACH_SLOT(ROUTED_ALLOC_SLOT, name, api, where, params, args, ptr, requested, size)
#define ROUTED_FREE(name, base, since, api, params, args, ptr, ...)                        \
    TARGETS(name, params)                                                                  \
    FOR_EACH_SLOT(ROUTED_FREE_SLOT, name, api, params, args, ptr)
#define ROUTED_MAP(name, base, since, api, type, params, args, ptr, size, ...)             \
    TARGETS(name, params)                                                                  \
    FOR_EACH_SLOT(ROUTED_MAP_SLOT, name, api, type, params, args, ptr, size)
GMP_CUDA_DRIVER_ALLOCS(ROUTED_ALLOC)
GMP_CUDA_DRIVER_FREES(ROUTED_FREE)
GMP_CUDA_DRIVER_MAPS(ROUTED_MAP)

/* ---- cuGetProcAddress: v1 (CUDA 11.3+) and _v2 (12.0+, symbol status) --- */

typedef int gmp_cu_proc_status; /* CUdriverProcAddressQueryResult */
static void *route_by_proc(const char *symbol, void *real, int version);

#define PROC_PARAMS_V1                                                                     \
    (const char *symbol, void **pfn, int version, gmp_cu_flags64 flags)
#define PROC_PARAMS_V2                                                                     \
    (const char *symbol, void **pfn, int version, gmp_cu_flags64 flags, gmp_cu_proc_status *found)
#define PROC_ARGS_V1 (symbol, pfn, version, flags)
#define PROC_ARGS_V2 (symbol, pfn, version, flags, found)

/* Not-found results and the empty-name probe pass untouched. */
#define PROC_BODY(fn, args)                                                                \
    gmp_cu_result status;                                                                  \
    {                                                                                      \
        GMP_IN_HOOK_SCOPE();                                                               \
        status = fn args;                                                                  \
    }                                                                                      \
    if (status == 0 && pfn && *pfn && symbol && symbol[0])                                 \
        *pfn = route_by_proc(symbol, *pfn, version);                                       \
    return status

GMP_EXPORT gmp_cu_result cuGetProcAddress PROC_PARAMS_V1;
gmp_cu_result cuGetProcAddress PROC_PARAMS_V1
{
    GMP_GPU_RESOLVE_REAL(cuGetProcAddress, PROC_PARAMS_V1)
    PROC_BODY(fn, PROC_ARGS_V1);
}

GMP_EXPORT gmp_cu_result cuGetProcAddress_v2 PROC_PARAMS_V2;
gmp_cu_result cuGetProcAddress_v2 PROC_PARAMS_V2
{
    GMP_GPU_RESOLVE_REAL(cuGetProcAddress_v2, PROC_PARAMS_V2)
    PROC_BODY(fn, PROC_ARGS_V2);
}

#define ROUTED_PROC_SLOT(k, name, params, args)                                            \
    static gmp_cu_result name##_routed_##k params                                          \
    {                                                                                      \
        TARGET(name, k, params);                                                           \
        PROC_BODY(fn, args);                                                               \
    }
TARGETS(cuGetProcAddress, PROC_PARAMS_V1)
TARGETS(cuGetProcAddress_v2, PROC_PARAMS_V2)
FOR_EACH_SLOT(ROUTED_PROC_SLOT, cuGetProcAddress, PROC_PARAMS_V1, PROC_ARGS_V1)
FOR_EACH_SLOT(ROUTED_PROC_SLOT, cuGetProcAddress_v2, PROC_PARAMS_V2, PROC_ARGS_V2)

/* ---- the routing table ---------------------------------------------------- */

typedef struct route {
    const char *name; /* the exported name dlsym is asked for */
    const char *base; /* the name cuGetProcAddress is asked for */
    int since;        /* ... from this version on, with this ABI */
    void *exported;   /* our hook of that name */
    void **targets;   /* GMP_ROUTE_SLOTS driver functions */
    void *wrappers[GMP_ROUTE_SLOTS];
} route;

#define ROUTE_ENTRIES(M)                                                                   \
    GMP_CUDA_DRIVER_ALLOCS(M)                                                              \
    GMP_CUDA_DRIVER_FREES(M)                                                               \
    GMP_CUDA_DRIVER_MAPS(M)                                                                \
    M(cuGetProcAddress_v2, cuGetProcAddress, 12000, _)                                     \
    M(cuGetProcAddress, cuGetProcAddress, 0, _)

#define ROUTE_INDEX(name, ...) ROUTE_AT_##name,
enum { ROUTE_ENTRIES(ROUTE_INDEX) ROUTE_COUNT };
#undef ROUTE_INDEX

/* Route i (entries of one base name: the higher `since` first), made by
 * code: a table of these pointers would be relocated, a page of the
 * library written by the loader, in every process at start. */
static void route_at(int i, route *r)
{
    switch (i) {
#define ROUTE_CASE(name, base, since, ...)                                                 \
    case ROUTE_AT_##name:                                                                  \
        *r = (route){#name, #base, since, (void *)name, (void **)name##_targets,           \
                     {(void *)name##_routed_0, (void *)name##_routed_1,                    \
                      (void *)name##_routed_2, (void *)name##_routed_3}};                  \
        return;
        ROUTE_ENTRIES(ROUTE_CASE)
#undef ROUTE_CASE
    }
    *r = (route){0};
}

/* The wrapper of `r` that calls exactly `real`. */
static void *wrap(const route *r, void *real)
{
    if (real == r->exported ||
        __atomic_load_n(&gmp_pl.state, __ATOMIC_ACQUIRE) == GMP_PL_DISABLED)
        return real;
    for (int k = 0; k < GMP_ROUTE_SLOTS; k++) {
        void *cur = __atomic_load_n(&r->targets[k], __ATOMIC_ACQUIRE);
        if (!cur && __atomic_compare_exchange_n(&r->targets[k], &cur, real, 0,
                                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return r->wrappers[k];
        if (cur == real)
            return r->wrappers[k];
    }
    return real;
}

/* The route dlsym of name takes into *r: its index, or -1. */
static int route_named(const char *name, route *r)
{
    for (int i = 0; i < ROUTE_COUNT; i++) {
        route_at(i, r);
        if (!strcmp(name, r->name))
            return i;
    }
    return -1;
}

int gmp_cuda_routed_name(const char *name)
{
    route r;
    return route_named(name, &r);
}

void *gmp_cuda_route_by_name(const char *name, void *real)
{
    route r;
    return route_named(name, &r) < 0 ? real : wrap(&r, real);
}

static void *route_by_proc(const char *symbol, void *real, int version)
{
    if (symbol[0] != 'c' || symbol[1] != 'u')
        return real;
    route r;
    for (int i = 0; i < ROUTE_COUNT; i++) {
        route_at(i, &r);
        if (version >= r.since && !strcmp(symbol, r.base))
            return wrap(&r, real);
    }
    return real;
}
