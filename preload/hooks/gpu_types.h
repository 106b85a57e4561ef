/*
 * gpu_types.h — the few CUDA and HIP types the hook tables need, declared
 * here so the preload builds without any GPU SDK.  check/cuda_decls.c and
 * check/hip_decls.c prove at compile time, against the real headers, that
 * these layouts and every hooked prototype match.
 */
#ifndef GMP_GPU_TYPES_H
#define GMP_GPU_TYPES_H

#include <stddef.h>

typedef int gmp_gpu_status;        /* cudaError_t, hipError_t: int-sized enums */
typedef void *gmp_gpu_stream;      /* cudaStream_t, hipStream_t */
typedef void *gmp_gpu_mempool;     /* cudaMemPool_t, hipMemPool_t */

typedef struct gmp_cuda_extent {
    size_t width, height, depth;
} gmp_cuda_extent;

typedef struct gmp_cuda_pitched_ptr {
    void *ptr;
    size_t pitch, xsize, ysize;
} gmp_cuda_pitched_ptr;

/* The CUDA driver's (cuda.h) */
typedef int gmp_cu_result;                 /* CUresult */
typedef unsigned long long gmp_cu_devptr;  /* CUdeviceptr (the _v2 ABI) */
typedef unsigned long long gmp_cu_handle;  /* CUmemGenericAllocationHandle */
typedef unsigned long long gmp_cu_flags64; /* cuuint64_t, unsigned long long flags */

typedef struct gmp_cu_mem_location {
    int type; /* CUmemLocationType: 1 device, 2 host, 3 host NUMA node */
    int id;
} gmp_cu_mem_location;

typedef struct gmp_cu_mem_alloc_prop { /* CUmemAllocationProp */
    int type;
    int requested_handle_types;
    gmp_cu_mem_location location;
    void *win32_handle_metadata;
    unsigned char alloc_flags[8];
} gmp_cu_mem_alloc_prop;

#endif
