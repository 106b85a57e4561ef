/*
 * hip.c — the HIP family (AMD GPUs): the table of hip_table.h expanded
 * through the generic path of gpu_family.h.
 */
#include "gpu_family.h"

#define GMP_T_STREAM gmp_gpu_stream
#define GMP_T_MEMPOOL gmp_gpu_mempool
#include "hip_table.h"

static gmp_gpu_family hip = {GMP_BACKEND_ROCM, "hipGetDevice", "hipMemGetInfo",
                             NULL, NULL};

#define ALLOC(name, api, where, params, args, ptr, requested, size) \
    GMP_GPU_ALLOC_HOOK(hip, name, api, where, params, args, ptr, requested, size)
#define FREE(name, api, params, args, ptr) GMP_GPU_FREE_HOOK(hip, name, api, params, args, ptr)
GMP_HIP_ALLOCS(ALLOC)
GMP_HIP_FREES(FREE)
