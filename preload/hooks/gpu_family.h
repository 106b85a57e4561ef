/*
 * gpu_family.h — the one generic path behind every GPU hook table.
 *
 * A family (CUDA runtime, CUDA driver, HIP) is a table of hooks, each
 * expanded by the macros below into a wrapper that calls the real function
 * with the caller's arguments, returns its exact status, and hands the
 * outcome to gmp_gpu_alloc_done or _map_done (a free takes its block out of
 * the live table first, gmp_gpu_free_begin, and ends with _free_end).
 * While the real call runs, gmp_in_hook is raised: a driver call made by
 * the runtime is not a second event, and the library's own mallocs are
 * counted but not recorded.
 *
 * Where the real function comes from differs: an exported hook finds it by
 * name (GMP_GPU_RESOLVE_REAL, gmp_real_function); a routed driver wrapper
 * (cuda_driver.c) calls the exact pointer dlsym or cuGetProcAddress
 * returned to the caller.
 */
#ifndef GMP_GPU_FAMILY_H
#define GMP_GPU_FAMILY_H

#include "gpu_types.h"
#include "preload.h"

typedef struct gmp_gpu_family {
    gmp_backend backend;
    const char *get_device_name; /* "cudaGetDevice", "cuCtxGetDevice", "hipGetDevice" */
    const char *mem_info_name;   /* "cudaMemGetInfo", "cuMemGetInfo_v2", "hipMemGetInfo" */
    int (*get_device)(int *);    /* atomic: resolved on first use */
    int (*mem_info)(size_t *, size_t *); /* atomic: resolved on first use */
} gmp_gpu_family;

/* Where an allocation lives: a device index, or one of these. */
#define GMP_ON_HOST (-1)   /* pinned host memory */
#define GMP_ON_DEVICE (-2) /* the calling thread's current device */

GMP_HIDDEN void gmp_gpu_alloc_done(gmp_gpu_family *f, gmp_api api, int where,
                                   gmp_gpu_status status, uint64_t ptr,
                                   uint64_t requested, uint64_t size);
/* A free (a hook's, or CUPTI's at API_ENTER and API_EXIT): its block
 * taken out of the live table before the real call (after it, another
 * thread may be given the same address), then the event, or the block put
 * back when the call failed.  begin: 1 when the
 * block was ours (taken filled). */
GMP_HIDDEN int gmp_gpu_free_begin(gmp_gpu_family *f, gmp_api api, uint64_t ptr,
                                  gmp_live_taken *taken);
GMP_HIDDEN void gmp_gpu_free_end(gmp_gpu_family *f, gmp_api api, gmp_gpu_status status,
                                 uint64_t ptr, const gmp_live_taken *taken);
/* cuMemMap / cuMemUnmap: a mapping event; bytes in use do not change. */
GMP_HIDDEN void gmp_gpu_map_done(gmp_gpu_family *f, gmp_api api, gmp_event_type type,
                                 gmp_gpu_status status, uint64_t ptr, uint64_t size);

/* Non-zero while CUPTI records CUDA (GMP_CUDA_MODE): the CUDA hooks then
 * only pass calls through, so one path records at a time. */
GMP_HIDDEN extern int gmp_cuda_via_cupti;

static inline int gmp_gpu_family_muted(const gmp_gpu_family *f)
{
    return f->backend == GMP_BACKEND_CUDA &&
           GMP_UNLIKELY(__atomic_load_n(&gmp_cuda_via_cupti, __ATOMIC_RELAXED));
}

/* What a hook returns when the real library cannot be found: the families'
 * "shared object symbol not found" (cudaErrorSharedObjectSymbolNotFound,
 * CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND and
 * hipErrorSharedObjectSymbolNotFound are all 302). */
#define GMP_GPU_SYMBOL_NOT_FOUND 302

/* Inside an exported hook: `fn`, the real `name`, found once (or return the
 * family's symbol-not-found status). */
#define GMP_GPU_RESOLVE_REAL(name, params)                                                 \
    typedef gmp_gpu_status(*name##_real_fn) params;                                       \
    GMP_REAL_FN(name, name##_real_fn)                                                      \
    if (GMP_UNLIKELY(!fn))                                                                 \
        return GMP_GPU_SYMBOL_NOT_FOUND;

/* Call `fn` with the caller's arguments, gmp_in_hook raised; the result is
 * left in `status`.  A muted family's call is a plain tail call. */
#define GMP_GPU_CALL(family, fn, args)                                                     \
    if (gmp_gpu_family_muted(&family))                                                     \
        return fn args;                                                                    \
    gmp_in_hook++;                                                                         \
    gmp_gpu_status status = fn args;                                                       \
    gmp_in_hook--

/* The bodies, after `fn` is known.  ptr_expr, size and where are read only
 * after the real call (they may dereference the caller's out-pointers). */
#define GMP_GPU_ALLOC_BODY(family, fn, api, where, args, ptr_expr, requested, size)        \
    GMP_GPU_CALL(family, fn, args);                                                        \
    if (status == 0)                                                                       \
        gmp_gpu_alloc_done(&family, api, where, 0, (uint64_t)(uintptr_t)(ptr_expr),        \
                           (requested), (size));                                           \
    else                                                                                   \
        gmp_gpu_alloc_done(&family, api, where, status, 0, (requested), 0);                \
    return status

#define GMP_GPU_FREE_BODY(family, fn, api, args, ptr_expr)                                 \
    if (gmp_gpu_family_muted(&family))                                                     \
        return fn args;                                                                    \
    gmp_live_taken taken_;                                                                 \
    int ours_ = gmp_gpu_free_begin(&family, api, (uint64_t)(uintptr_t)(ptr_expr), &taken_); \
    gmp_in_hook++;                                                                         \
    gmp_gpu_status status = fn args;                                                       \
    gmp_in_hook--;                                                                         \
    gmp_gpu_free_end(&family, api, status, (uint64_t)(uintptr_t)(ptr_expr),                \
                     ours_ ? &taken_ : NULL);                                              \
    return status

#define GMP_GPU_MAP_BODY(family, fn, api, type, args, ptr_expr, size)                      \
    GMP_GPU_CALL(family, fn, args);                                                        \
    gmp_gpu_map_done(&family, api, type, status, (uint64_t)(uintptr_t)(ptr_expr), (size)); \
    return status

/* Exported hooks: the symbol `name`, its real function found by name. */
#define GMP_GPU_ALLOC_HOOK(family, name, api, where, params, args, ptr_expr, requested,    \
                           size)                                                           \
    GMP_EXPORT gmp_gpu_status name params;                                                 \
    GMP_EXPORT gmp_gpu_status name params                                                  \
    {                                                                                      \
        GMP_GPU_RESOLVE_REAL(name, params)                                         \
        GMP_GPU_ALLOC_BODY(family, fn, api, where, args, ptr_expr, requested, size);       \
    }

#define GMP_GPU_FREE_HOOK(family, name, api, params, args, ptr_expr)                       \
    GMP_EXPORT gmp_gpu_status name params;                                                 \
    GMP_EXPORT gmp_gpu_status name params                                                  \
    {                                                                                      \
        GMP_GPU_RESOLVE_REAL(name, params)                                         \
        GMP_GPU_FREE_BODY(family, fn, api, args, ptr_expr);                                \
    }

#define GMP_GPU_MAP_HOOK(family, name, api, type, params, args, ptr_expr, size)            \
    GMP_EXPORT gmp_gpu_status name params;                                                 \
    GMP_EXPORT gmp_gpu_status name params                                                  \
    {                                                                                      \
        GMP_GPU_RESOLVE_REAL(name, params)                                         \
        GMP_GPU_MAP_BODY(family, fn, api, type, args, ptr_expr, size);                     \
    }

#endif
