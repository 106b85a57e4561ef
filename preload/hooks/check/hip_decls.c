/*
 * hip_decls.c — compile-time proof that the HIP hooks match Debian's HIP
 * headers (libamdhip64-dev), like cuda_decls.c.  Built by `make` when
 * /usr/include/hip is present; it produces no code.
 */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>

#include "../gpu_types.h"

#define GMP_T_STREAM hipStream_t
#define GMP_T_MEMPOOL hipMemPool_t
#include "../hip_table.h"

#define DECLARE_ALLOC(name, api, host, params, args, ptr, requested, size) \
    extern hipError_t name params;
#define DECLARE_FREE(name, api, params, args, ptr) extern hipError_t name params;
GMP_HIP_ALLOCS(DECLARE_ALLOC)
GMP_HIP_FREES(DECLARE_FREE)

_Static_assert(sizeof(hipError_t) == sizeof(gmp_gpu_status), "hipError_t size");
_Static_assert(sizeof(hipStream_t) == sizeof(gmp_gpu_stream), "hipStream_t size");
_Static_assert(hipErrorOutOfMemory == 2, "the OOM code is 2");
_Static_assert(hipErrorSharedObjectSymbolNotFound == 302, "symbol-not-found code");

/* the names the tools print for a failed call's code (base/gpu_results.h) */
#include "gpu_results.h"
#define GMP_SAME_VALUE(name, value) _Static_assert(name == value, #name);
GMP_FOR_EACH_HIP_RESULT(GMP_SAME_VALUE)
#undef GMP_SAME_VALUE
