/*
 * cuda_driver_decls.c — compile-time proof that the CUDA driver hooks match
 * cuda.h: every table entry declared again with the real types (a
 * conflicting prototype is a compile error), our minimal structs against the
 * real layouts.  Built by `make` when /usr/local/cuda is present; no code.
 */
#include <cuda.h>
#include <stddef.h>

#include "../gpu_family.h"

#define GMP_T_DEVPTR CUdeviceptr
#define GMP_T_HANDLE CUmemGenericAllocationHandle
#define GMP_T_MEMPROP CUmemAllocationProp
#define GMP_T_STREAM CUstream
#define GMP_T_MEMPOOL CUmemoryPool
#include "../cuda_driver_table.h"

/* _ptsz twins are declared only in per-thread-stream mode: they are
 * checked against their base function's type below. */
#define DECLARE_ALLOC(name, base, since, api, where, params, args, ptr, requested, size, ...) \
    extern CUresult name params;
#define DECLARE_FREE(name, base, since, api, params, args, ptr, ...) extern CUresult name params;
#define DECLARE_MAP(name, base, since, api, type, params, args, ptr, size, ...) \
    extern CUresult name params;
GMP_CUDA_DRIVER_ALLOCS(DECLARE_ALLOC)
GMP_CUDA_DRIVER_FREES(DECLARE_FREE)
GMP_CUDA_DRIVER_MAPS(DECLARE_MAP)

/* cuda.h names the 5-argument cuGetProcAddress_v2 "cuGetProcAddress". */
extern CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *found);

#define SAME_TYPE(a, b) _Static_assert(__builtin_types_compatible_p(__typeof__(a), __typeof__(b)), #b)
SAME_TYPE(cuMemAllocAsync, cuMemAllocAsync_ptsz);
SAME_TYPE(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz);
SAME_TYPE(cuMemFreeAsync, cuMemFreeAsync_ptsz);

_Static_assert(sizeof(CUresult) == sizeof(gmp_cu_result), "CUresult size");
_Static_assert(sizeof(CUdeviceptr) == sizeof(gmp_cu_devptr), "CUdeviceptr: the _v2 ABI");
_Static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(gmp_cu_handle), "handle size");
_Static_assert(sizeof(cuuint64_t) == sizeof(gmp_cu_flags64), "cuuint64_t size");
_Static_assert(sizeof(CUdriverProcAddressQueryResult) == sizeof(int), "symbol status size");
_Static_assert(sizeof(CUmemAllocationProp) == sizeof(gmp_cu_mem_alloc_prop), "prop size");
_Static_assert(offsetof(CUmemAllocationProp, location) ==
                   offsetof(gmp_cu_mem_alloc_prop, location), "prop layout");
_Static_assert(offsetof(CUmemLocation, id) == offsetof(gmp_cu_mem_location, id),
               "location layout");
_Static_assert(CU_MEM_LOCATION_TYPE_DEVICE == 1 && CU_MEM_LOCATION_TYPE_HOST == 2 &&
                   CU_MEM_LOCATION_TYPE_HOST_NUMA == 3, "location types");
_Static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == 2, "ptsz flag");
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == 2, "the OOM code is 2");
_Static_assert(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND == GMP_GPU_SYMBOL_NOT_FOUND,
               "symbol-not-found code");

/* the names the tools print for a failed call's code (base/gpu_results.h) */
#include "gpu_results.h"
#define GMP_SAME_VALUE(name, value) _Static_assert(name == value, #name);
GMP_FOR_EACH_CU_RESULT(GMP_SAME_VALUE)
#undef GMP_SAME_VALUE
