/*
 * hip_table.h — the HIP (libamdhip64) allocation hooks, one line each, in
 * the same form as cuda_runtime_table.h (checked by check/hip_decls.c).
 */
#define GMP_HIP_ALLOCS(ALLOC)                                                              \
    ALLOC(hipMalloc, GMP_API_HIP_MALLOC, GMP_ON_DEVICE, (void **p, size_t size), (p, size),  \
          *p, size, size)                                                                  \
    ALLOC(hipMallocManaged, GMP_API_HIP_MALLOC_MANAGED, GMP_ON_DEVICE,                     \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size)   \
    ALLOC(hipHostMalloc, GMP_API_HIP_HOST_MALLOC, GMP_ON_HOST,                             \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size)   \
    ALLOC(hipExtMallocWithFlags, GMP_API_HIP_EXT_MALLOC_WITH_FLAGS, GMP_ON_DEVICE,         \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size)   \
    ALLOC(hipMallocAsync, GMP_API_HIP_MALLOC_ASYNC, GMP_ON_DEVICE,                         \
          (void **p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size)           \
    ALLOC(hipMallocFromPoolAsync, GMP_API_HIP_MALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,       \
          (void **p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s), (p, size, pool, s), \
          *p, size, size)                                                                  \
    ALLOC(hipMallocPitch, GMP_API_HIP_MALLOC_PITCH, GMP_ON_DEVICE,                         \
          (void **p, size_t *pitch, size_t width, size_t height), (p, pitch, width, height), \
          *p, width *height, *pitch *height)

#define GMP_HIP_FREES(FREE)                                                                \
    FREE(hipFree, GMP_API_HIP_FREE, (void *p), (p), p)                                     \
    FREE(hipHostFree, GMP_API_HIP_HOST_FREE, (void *p), (p), p)                            \
    FREE(hipFreeAsync, GMP_API_HIP_FREE_ASYNC, (void *p, GMP_T_STREAM s), (p, s), p)
