/*
 * cuda_runtime.c — the CUDA runtime family: the table of
 * cuda_runtime_table.h expanded through the generic path of gpu_family.h.
 * Reaches programs linked against the shared libcudart; statically linked
 * cudart goes through the driver (a later hook family).
 */
#include "gpu_family.h"

#define GMP_T_STREAM gmp_gpu_stream
#define GMP_T_MEMPOOL gmp_gpu_mempool
#define GMP_T_CUDA_EXTENT gmp_cuda_extent
#define GMP_T_CUDA_PITCHED_PTR gmp_cuda_pitched_ptr
#include "cuda_runtime_table.h"

static gmp_gpu_family cudart = {GMP_BACKEND_CUDA, "cudaGetDevice",
                                "cudaMemGetInfo", NULL, NULL};

#define ALLOC(name, api, where, params, args, ptr, requested, size, ...) \
    GMP_GPU_ALLOC_HOOK(cudart, name, api, where, params, args, ptr, requested, size)
#define FREE(name, api, params, args, ptr, ...) GMP_GPU_FREE_HOOK(cudart, name, api, params, args, ptr)
GMP_CUDART_ALLOCS(ALLOC)
GMP_CUDART_FREES(FREE)
