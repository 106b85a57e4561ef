/*
 * cuda_driver_table.h — the CUDA driver (libcuda) allocation hooks, one line
 * each, in the form of cuda_runtime_table.h plus two columns for
 * cuGetProcAddress: the base name it is asked for, and the version from
 * which that name has the ABI written here (cuMemAlloc below 3020 is the
 * old 32-bit cuMemAlloc, which we leave alone).  check/cuda_decls.c checks
 * the prototypes against cuda.h.
 *
 * ALLOC(name, base, since, api, where, params, args, ptr, requested, size, cupti_args)
 * FREE(name, base, since, api, params, args, ptr, cupti_args)
 * MAP(name, base, since, api, event, params, args, ptr, size, cupti_args)
 * cupti_args: the call's arguments read from CUPTI's <name>_params (`q`),
 * in the order of params: the CUPTI path (cupti.c) runs the same row.
 * cuMemCreate's "pointer" is its allocation handle; it counts physical
 * memory, which cuMemMap/cuMemUnmap only map (events, no change in use).
 */
#define GMP_CUDA_DRIVER_ALLOCS(ALLOC)                                                      \
    ALLOC(cuMemAlloc_v2, cuMemAlloc, 3020, GMP_API_CU_MEM_ALLOC, GMP_ON_DEVICE,            \
          (GMP_T_DEVPTR * p, size_t size), (p, size), *p, size, size,                      \
          (q->dptr, q->bytesize))                                                          \
    ALLOC(cuMemAllocManaged, cuMemAllocManaged, 0, GMP_API_CU_MEM_ALLOC_MANAGED,           \
          GMP_ON_DEVICE, (GMP_T_DEVPTR * p, size_t size, unsigned int flags),              \
          (p, size, flags), *p, size, size,                                                \
          (q->dptr, q->bytesize, q->flags))                                                \
    ALLOC(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, GMP_API_CU_MEM_ALLOC_PITCH,           \
          GMP_ON_DEVICE,                                                                   \
          (GMP_T_DEVPTR * p, size_t *pitch, size_t width, size_t height,                   \
           unsigned int element),                                                          \
          (p, pitch, width, height, element), *p, width *height, *pitch *height,           \
          (q->dptr, q->pPitch, q->WidthInBytes, q->Height, q->ElementSizeBytes))           \
    ALLOC(cuMemAllocHost_v2, cuMemAllocHost, 3020, GMP_API_CU_MEM_ALLOC_HOST, GMP_ON_HOST, \
          (void **p, size_t size), (p, size), *p, size, size,                              \
          (q->pp, q->bytesize))                                                            \
    ALLOC(cuMemHostAlloc, cuMemHostAlloc, 0, GMP_API_CU_MEM_HOST_ALLOC, GMP_ON_HOST,       \
          (void **p, size_t size, unsigned int flags), (p, size, flags), *p, size, size,   \
          (q->pp, q->bytesize, q->Flags))                                                  \
    ALLOC(cuMemAllocAsync, cuMemAllocAsync, 0, GMP_API_CU_MEM_ALLOC_ASYNC, GMP_ON_DEVICE,  \
          (GMP_T_DEVPTR * p, size_t size, GMP_T_STREAM s), (p, size, s), *p, size, size,   \
          (q->dptr, q->bytesize, q->hStream))                                              \
    ALLOC(cuMemAllocAsync_ptsz, cuMemAllocAsync, 0, GMP_API_CU_MEM_ALLOC_ASYNC,            \
          GMP_ON_DEVICE, (GMP_T_DEVPTR * p, size_t size, GMP_T_STREAM s), (p, size, s),    \
          *p, size, size,                                                                  \
          (q->dptr, q->bytesize, q->hStream))                                              \
    ALLOC(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 0,                             \
          GMP_API_CU_MEM_ALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,                             \
          (GMP_T_DEVPTR * p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s),             \
          (p, size, pool, s), *p, size, size,                                              \
          (q->dptr, q->bytesize, q->pool, q->hStream))                                     \
    ALLOC(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 0,                        \
          GMP_API_CU_MEM_ALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,                             \
          (GMP_T_DEVPTR * p, size_t size, GMP_T_MEMPOOL pool, GMP_T_STREAM s),             \
          (p, size, pool, s), *p, size, size,                                              \
          (q->dptr, q->bytesize, q->pool, q->hStream))                                     \
    ALLOC(cuMemCreate, cuMemCreate, 0, GMP_API_CU_MEM_CREATE,                              \
          gmp_cu_location_where(prop ? &prop->location : NULL),                            \
          (GMP_T_HANDLE * h, size_t size, const GMP_T_MEMPROP *prop,                       \
           unsigned long long flags),                                                      \
          (h, size, prop, flags), *h, size, size,                                          \
          (q->handle, q->size, q->prop, q->flags))

#define GMP_CUDA_DRIVER_FREES(FREE)                                                        \
    FREE(cuMemFree_v2, cuMemFree, 3020, GMP_API_CU_MEM_FREE, (GMP_T_DEVPTR p), (p), p,     \
          (q->dptr))                                                                       \
    FREE(cuMemFreeHost, cuMemFreeHost, 0, GMP_API_CU_MEM_FREE_HOST, (void *p), (p), p,     \
          (q->p))                                                                          \
    FREE(cuMemFreeAsync, cuMemFreeAsync, 0, GMP_API_CU_MEM_FREE_ASYNC,                     \
         (GMP_T_DEVPTR p, GMP_T_STREAM s), (p, s), p,                                      \
          (q->dptr, q->hStream))                                                           \
    FREE(cuMemFreeAsync_ptsz, cuMemFreeAsync, 0, GMP_API_CU_MEM_FREE_ASYNC,                \
         (GMP_T_DEVPTR p, GMP_T_STREAM s), (p, s), p,                                      \
          (q->dptr, q->hStream))                                                           \
    FREE(cuMemRelease, cuMemRelease, 0, GMP_API_CU_MEM_RELEASE, (GMP_T_HANDLE h), (h), h,  \
          (q->handle))

#define GMP_CUDA_DRIVER_MAPS(MAP)                                                          \
    MAP(cuMemMap, cuMemMap, 0, GMP_API_CU_MEM_MAP, GMP_EV_MAP,                             \
        (GMP_T_DEVPTR p, size_t size, size_t offset, GMP_T_HANDLE h,                       \
         unsigned long long flags),                                                        \
        (p, size, offset, h, flags), p, size,                                              \
          (q->ptr, q->size, q->offset, q->handle, q->flags))                               \
    MAP(cuMemUnmap, cuMemUnmap, 0, GMP_API_CU_MEM_UNMAP, GMP_EV_UNMAP,                     \
        (GMP_T_DEVPTR p, size_t size), (p, size), p, size,                                 \
          (q->ptr, q->size))
