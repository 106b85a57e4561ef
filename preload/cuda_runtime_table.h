/*
 * cuda_runtime_table.h — the CUDA runtime (libcudart) allocation hooks, one
 * line each.  Types are written as GMP_T_* so that cuda_runtime.c expands
 * the table with our minimal ABI types and check/cuda_decls.c with the real
 * CUDA headers' types (a mismatch there is a compile error).
 *
 * ALLOC(name, api, where, params, args, ptr, requested, size)   where: GMP_ON_DEVICE|GMP_ON_HOST
 * FREE(name, api, params, args, ptr)
 * `_ptsz` entries are the per-thread-default-stream twins cudart exports.
 */
#define GMP_CUDART_ALLOCS(ALLOC)                                                           \
    ALLOC(cudaMalloc, GMP_API_CUDA_MALLOC, GMP_ON_DEVICE, (void **p, size_t size), (p, size), \
          *p, size, size)                                                                  \
    ALLOC(cudaMallocManaged, GMP_API_CUDA_MALLOC_MANAGED, GMP_ON_DEVICE,                   \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size)   \
    ALLOC(cudaMallocHost, GMP_API_CUDA_MALLOC_HOST, GMP_ON_HOST, (void **p, size_t size),   \
          (p, size), *p, size, size)                                                       \
    ALLOC(cudaHostAlloc, GMP_API_CUDA_HOST_ALLOC, GMP_ON_HOST,                             \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size)   \
    ALLOC(cudaMallocPitch, GMP_API_CUDA_MALLOC_PITCH, GMP_ON_DEVICE,                       \
          (void **p, size_t *pitch, size_t width, size_t height), (p, pitch, width, height), \
          *p, width *height, *pitch *height)                                               \
    ALLOC(cudaMalloc3D, GMP_API_CUDA_MALLOC_3D, GMP_ON_DEVICE,                             \
          (GMP_T_CUDA_PITCHED_PTR * pp, GMP_T_CUDA_EXTENT e), (pp, e), pp->ptr,            \
          e.width *e.height *e.depth, pp->pitch *e.height *e.depth)                        \
    ALLOC(cudaMallocAsync, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE,                       \
          (void **p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size)           \
    ALLOC(cudaMallocAsync_ptsz, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE,                  \
          (void **p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size)           \
    ALLOC(cudaMallocFromPoolAsync, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,     \
          (void **p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s), (p, size, pool, s), \
          *p, size, size)                                                                  \
    ALLOC(cudaMallocFromPoolAsync_ptsz, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE, \
          (void **p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s), (p, size, pool, s), \
          *p, size, size)

#define GMP_CUDART_FREES(FREE)                                                             \
    FREE(cudaFree, GMP_API_CUDA_FREE, (void *p), (p), p)                                   \
    FREE(cudaFreeHost, GMP_API_CUDA_FREE_HOST, (void *p), (p), p)                          \
    FREE(cudaFreeAsync, GMP_API_CUDA_FREE_ASYNC, (void *p, GMP_T_STREAM s), (p, s), p)     \
    FREE(cudaFreeAsync_ptsz, GMP_API_CUDA_FREE_ASYNC, (void *p, GMP_T_STREAM s), (p, s), p)
