/*
 * cuda_runtime_table.h — the CUDA runtime (libcudart) allocation hooks, one
 * line each.  Types are written as GMP_T_* so that cuda_runtime.c expands
 * the table with our minimal ABI types and check/cuda_decls.c with the real
 * CUDA headers' types (a mismatch there is a compile error).
 *
 * ALLOC(name, api, where, params, args, ptr, requested, size, cupti, cupti_args)
 *   where: GMP_ON_DEVICE|GMP_ON_HOST
 * FREE(name, api, params, args, ptr, cupti, cupti_args)
 * cupti: the CUPTI callback's name (its CUPTI_RUNTIME_TRACE_CBID_ and its
 * <cupti>_params struct); cupti_args: the call's arguments read from that
 * struct (`q`), in the order of params, so the CUPTI path (cupti.c) runs
 * each row's own expressions on them.
 * `_ptsz` entries are the per-thread-default-stream twins cudart exports.
 */
#define GMP_CUDART_ALLOCS(ALLOC)                                                           \
    ALLOC(cudaMalloc, GMP_API_CUDA_MALLOC, GMP_ON_DEVICE, (void **p, size_t size), (p, size), \
          *p, size, size,                                                                  \
          cudaMalloc_v3020, (q->devPtr, q->size))                                          \
    ALLOC(cudaMallocManaged, GMP_API_CUDA_MALLOC_MANAGED, GMP_ON_DEVICE,                   \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size,   \
          cudaMallocManaged_v6000, (q->devPtr, q->size, q->flags))                         \
    ALLOC(cudaMallocHost, GMP_API_CUDA_MALLOC_HOST, GMP_ON_HOST, (void **p, size_t size),  \
          (p, size), *p, size, size,                                                       \
          cudaMallocHost_v3020, (q->ptr, q->size))                                         \
    ALLOC(cudaHostAlloc, GMP_API_CUDA_HOST_ALLOC, GMP_ON_HOST,                             \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size,   \
          cudaHostAlloc_v3020, (q->pHost, q->size, q->flags))                              \
    ALLOC(cudaMallocPitch, GMP_API_CUDA_MALLOC_PITCH, GMP_ON_DEVICE,                       \
          (void **p, size_t *pitch, size_t width, size_t height), (p, pitch, width, height), \
          *p, width *height, *pitch *height,                                               \
          cudaMallocPitch_v3020, (q->devPtr, q->pitch, q->width, q->height))               \
    ALLOC(cudaMalloc3D, GMP_API_CUDA_MALLOC_3D, GMP_ON_DEVICE,                             \
          (GMP_T_CUDA_PITCHED_PTR * pp, GMP_T_CUDA_EXTENT e), (pp, e), pp->ptr,            \
          e.width *e.height *e.depth, pp->pitch *e.height *e.depth,                        \
          cudaMalloc3D_v3020, (q->pitchedDevPtr, q->extent))                               \
    ALLOC(cudaMallocAsync, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE,                       \
          (void **p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size,           \
          cudaMallocAsync_v11020, (q->devPtr, q->size, q->hStream))                        \
    ALLOC(cudaMallocAsync_ptsz, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE,                  \
          (void **p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size,           \
          cudaMallocAsync_ptsz_v11020, (q->devPtr, q->size, q->hStream))                   \
    ALLOC(cudaMallocFromPoolAsync, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,     \
          (void **p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s), (p, size, pool, s), \
          *p, size, size,                                                                  \
          cudaMallocFromPoolAsync_v11020, (q->ptr, q->size, q->memPool, q->stream))        \
    ALLOC(cudaMallocFromPoolAsync_ptsz, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE, \
          (void **p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s), (p, size, pool, s), \
          *p, size, size,                                                                  \
          cudaMallocFromPoolAsync_ptsz_v11020, (q->ptr, q->size, q->memPool, q->stream))

#define GMP_CUDART_FREES(FREE)                                                             \
    FREE(cudaFree, GMP_API_CUDA_FREE, (void *p), (p), p,                                   \
          cudaFree_v3020, (q->devPtr))                                                     \
    FREE(cudaFreeHost, GMP_API_CUDA_FREE_HOST, (void *p), (p), p,                          \
          cudaFreeHost_v3020, (q->ptr))                                                    \
    FREE(cudaFreeAsync, GMP_API_CUDA_FREE_ASYNC, (void *p, GMP_T_STREAM s), (p, s), p,     \
          cudaFreeAsync_v11020, (q->devPtr, q->hStream))                                   \
    FREE(cudaFreeAsync_ptsz, GMP_API_CUDA_FREE_ASYNC, (void *p, GMP_T_STREAM s), (p, s), p, \
          cudaFreeAsync_ptsz_v11020, (q->devPtr, q->hStream))
