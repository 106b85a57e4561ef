/*
 * gpu_family.h — the one generic path behind every GPU hook table.
 *
 * A family (CUDA runtime, HIP, later the CUDA driver) is a table of hooks,
 * each expanded by GMP_GPU_ALLOC_HOOK / GMP_GPU_FREE_HOOK into a wrapper that
 * finds the real function, calls it with the caller's arguments, returns its
 * exact status, and hands the outcome to gmp_gpu_alloc_done/_free_done.
 * While the real call runs, gmp_in_hook is raised: a driver call made by the
 * runtime is not a second event, and the library's own mallocs are counted
 * but not recorded.
 */
#ifndef GMP_GPU_FAMILY_H
#define GMP_GPU_FAMILY_H

#include "gpu_types.h"
#include "preload.h"

typedef struct gmp_gpu_family {
    gmp_backend backend;
    const char *const *sonames;  /* tried with RTLD_NOLOAD when RTLD_NEXT fails */
    const char *get_device_name; /* "cudaGetDevice", "hipGetDevice" */
    int (*get_device)(int *);    /* atomic: resolved on first use */
} gmp_gpu_family;

/* The real function `name` of the family, or NULL (never ourselves). */
GMP_HIDDEN void *gmp_gpu_resolve(gmp_gpu_family *f, const char *name);

GMP_HIDDEN void gmp_gpu_alloc_done(gmp_gpu_family *f, gmp_api api, int host_memory,
                                   gmp_gpu_status status, uint64_t ptr,
                                   uint64_t requested, uint64_t size);
GMP_HIDDEN void gmp_gpu_free_done(gmp_gpu_family *f, gmp_api api, gmp_gpu_status status,
                                  uint64_t ptr);

/* What a hook returns when the real library cannot be found: the families'
 * "shared object symbol not found" (cudaErrorSharedObjectSymbolNotFound and
 * hipErrorSharedObjectSymbolNotFound are both 302). */
#define GMP_GPU_SYMBOL_NOT_FOUND 302

/* Inside a hook: find the real `name` once (or return the family's
 * symbol-not-found status), call it with the caller's arguments with
 * gmp_in_hook raised, and leave its result in `status`. */
#define GMP_GPU_CALL_REAL(family, name, params, args)                                       \
    static gmp_gpu_status (*real) params;                                                   \
    gmp_gpu_status (*fn) params = __atomic_load_n(&real, __ATOMIC_ACQUIRE);                 \
    if (GMP_UNLIKELY(!fn)) {                                                                \
        fn = (gmp_gpu_status(*) params)gmp_gpu_resolve(&family, #name);                     \
        if (!fn)                                                                            \
            return GMP_GPU_SYMBOL_NOT_FOUND;                                                \
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);                                      \
    }                                                                                       \
    gmp_in_hook++;                                                                          \
    gmp_gpu_status status = fn args;                                                        \
    gmp_in_hook--

/* An allocating hook.  ptr_expr and size are read only after the real call
 * succeeded (they may dereference the caller's out-pointers). */
#define GMP_GPU_ALLOC_HOOK(family, name, api, host_memory, params, args, ptr_expr,          \
                           requested, size)                                                \
    GMP_EXPORT gmp_gpu_status name params;                                                  \
    GMP_EXPORT gmp_gpu_status name params                                                   \
    {                                                                                       \
        GMP_GPU_CALL_REAL(family, name, params, args);                                      \
        if (status == 0)                                                                    \
            gmp_gpu_alloc_done(&family, api, host_memory, 0, (uint64_t)(uintptr_t)(ptr_expr), \
                               (requested), (size));                                        \
        else                                                                                \
            gmp_gpu_alloc_done(&family, api, host_memory, status, 0, (requested), 0);       \
        return status;                                                                      \
    }

#define GMP_GPU_FREE_HOOK(family, name, api, params, args, ptr_expr)                        \
    GMP_EXPORT gmp_gpu_status name params;                                                  \
    GMP_EXPORT gmp_gpu_status name params                                                   \
    {                                                                                       \
        GMP_GPU_CALL_REAL(family, name, params, args);                                      \
        gmp_gpu_free_done(&family, api, status, (uint64_t)(uintptr_t)(ptr_expr));           \
        return status;                                                                      \
    }

#endif
