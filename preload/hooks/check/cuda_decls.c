/*
 * cuda_decls.c — compile-time proof that the CUDA runtime hooks match the
 * real CUDA headers: every table entry is declared again with the real types
 * (a conflicting prototype is a compile error), and our minimal structs have
 * the real layouts.  Built by `make` when /usr/local/cuda is present; it
 * produces no code.
 */
#include <cuda_runtime_api.h>
#include <stddef.h>

#include "../gpu_types.h"

#define GMP_T_STREAM cudaStream_t
#define GMP_T_MEMPOOL cudaMemPool_t
#define GMP_T_CUDA_EXTENT struct cudaExtent
#define GMP_T_CUDA_PITCHED_PTR struct cudaPitchedPtr
#include "../cuda_runtime_table.h"

/* _ptsz twins are declared by the headers only in per-thread-stream mode:
 * check them against their base function's type instead. */
#define DECLARE_ALLOC(name, api, host, params, args, ptr, requested, size, ...) \
    extern cudaError_t name params;
#define DECLARE_FREE(name, api, params, args, ptr, ...) extern cudaError_t name params;
GMP_CUDART_ALLOCS(DECLARE_ALLOC)
GMP_CUDART_FREES(DECLARE_FREE)

_Static_assert(__builtin_types_compatible_p(__typeof__(cudaMallocAsync),
                                            __typeof__(cudaMallocAsync_ptsz)),
               "cudaMallocAsync_ptsz");
_Static_assert(__builtin_types_compatible_p(__typeof__(cudaFreeAsync),
                                            __typeof__(cudaFreeAsync_ptsz)),
               "cudaFreeAsync_ptsz");
_Static_assert(sizeof(cudaError_t) == sizeof(gmp_gpu_status), "cudaError_t size");
_Static_assert(sizeof(cudaStream_t) == sizeof(gmp_gpu_stream), "cudaStream_t size");
_Static_assert(sizeof(cudaMemPool_t) == sizeof(gmp_gpu_mempool), "cudaMemPool_t size");
_Static_assert(sizeof(struct cudaExtent) == sizeof(gmp_cuda_extent), "cudaExtent size");
_Static_assert(offsetof(struct cudaExtent, depth) == offsetof(gmp_cuda_extent, depth),
               "cudaExtent layout");
_Static_assert(sizeof(struct cudaPitchedPtr) == sizeof(gmp_cuda_pitched_ptr),
               "cudaPitchedPtr size");
_Static_assert(offsetof(struct cudaPitchedPtr, pitch) == offsetof(gmp_cuda_pitched_ptr, pitch),
               "cudaPitchedPtr layout");
_Static_assert(cudaErrorMemoryAllocation == 2, "the OOM code is 2");
_Static_assert(cudaErrorSharedObjectSymbolNotFound == 302, "symbol-not-found code");

/* the names the tools print for a failed call's code (base/gpu_results.h) */
#include "gpu_results.h"
#define GMP_SAME_VALUE(name, value) _Static_assert(name == value, #name);
GMP_FOR_EACH_CUDART_RESULT(GMP_SAME_VALUE)
#undef GMP_SAME_VALUE
