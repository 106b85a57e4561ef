/*
 * cupti.c — CUPTI injection, the second way into CUDA.
 *
 * With CUDA_INJECTION64_PATH naming this library, the driver loads it at
 * cuInit and calls InitializeInjection; we then load libcupti (at run time,
 * like every GPU library), subscribe to the runtime and driver allocation
 * callbacks, and record each call at API_EXIT from its return value and
 * parameters.  That reaches programs the interposer cannot (LD_PRELOAD
 * cleared by a launcher, libraries bound with -Bsymbolic).  Only one path
 * records at a time (GMP_CUDA_MODE): once the subscription holds, the CUDA
 * hooks pass calls straight through.  When libcupti cannot be loaded or
 * another subscriber holds CUPTI (Nsight, a profiler), one stderr line, and
 * the interposer carries on.  A runtime call and the driver call it makes
 * are one event: driver callbacks inside a runtime allocation are skipped.
 * Built only where cupti.h is found; nothing here links against CUDA.
 */
#include "cuda_driver.h"

#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

static struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*result_string)(CUptiResult, const char **);
} cupti;

GMP_EXPORT int InitializeInjection(void);

static __thread int in_runtime_alloc; /* depth of runtime allocation calls */

/* The callbacks we subscribe to, and what each records.  p points to the
 * call's <name>_params (generated_cuda*_meta.h).
 * R_ALLOC/D_ALLOC(name, api, where, ptr, requested, size)
 * R_FREE/D_FREE(name, api, ptr)   D_MAP(name, api, event, ptr, size) */
#define CUPTI_RUNTIME(ALLOC, FREE)                                                         \
    ALLOC(cudaMalloc_v3020, GMP_API_CUDA_MALLOC, GMP_ON_DEVICE, *p->devPtr, p->size, p->size) \
    ALLOC(cudaMallocManaged_v6000, GMP_API_CUDA_MALLOC_MANAGED, GMP_ON_DEVICE, *p->devPtr, \
          p->size, p->size)                                                                \
    ALLOC(cudaMallocHost_v3020, GMP_API_CUDA_MALLOC_HOST, GMP_ON_HOST, *p->ptr, p->size,   \
          p->size)                                                                         \
    ALLOC(cudaHostAlloc_v3020, GMP_API_CUDA_HOST_ALLOC, GMP_ON_HOST, *p->pHost, p->size,   \
          p->size)                                                                         \
    ALLOC(cudaMallocPitch_v3020, GMP_API_CUDA_MALLOC_PITCH, GMP_ON_DEVICE, *p->devPtr,     \
          p->width *p->height, *p->pitch *p->height)                                       \
    ALLOC(cudaMalloc3D_v3020, GMP_API_CUDA_MALLOC_3D, GMP_ON_DEVICE, p->pitchedDevPtr->ptr, \
          p->extent.width *p->extent.height *p->extent.depth,                              \
          p->pitchedDevPtr->pitch *p->extent.height *p->extent.depth)                      \
    ALLOC(cudaMallocAsync_v11020, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE, *p->devPtr,    \
          p->size, p->size)                                                                \
    ALLOC(cudaMallocAsync_ptsz_v11020, GMP_API_CUDA_MALLOC_ASYNC, GMP_ON_DEVICE, *p->devPtr, \
          p->size, p->size)                                                                \
    ALLOC(cudaMallocFromPoolAsync_v11020, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC,             \
          GMP_ON_DEVICE, *p->ptr, p->size, p->size)                                        \
    ALLOC(cudaMallocFromPoolAsync_ptsz_v11020, GMP_API_CUDA_MALLOC_FROM_POOL_ASYNC,        \
          GMP_ON_DEVICE, *p->ptr, p->size, p->size)                                        \
    FREE(cudaFree_v3020, GMP_API_CUDA_FREE, p->devPtr)                                     \
    FREE(cudaFreeHost_v3020, GMP_API_CUDA_FREE_HOST, p->ptr)                               \
    FREE(cudaFreeAsync_v11020, GMP_API_CUDA_FREE_ASYNC, p->devPtr)                         \
    FREE(cudaFreeAsync_ptsz_v11020, GMP_API_CUDA_FREE_ASYNC, p->devPtr)

#define CUPTI_DRIVER(ALLOC, FREE, MAP)                                                     \
    ALLOC(cuMemAlloc_v2, GMP_API_CU_MEM_ALLOC, GMP_ON_DEVICE, *p->dptr, p->bytesize,       \
          p->bytesize)                                                                     \
    ALLOC(cuMemAllocManaged, GMP_API_CU_MEM_ALLOC_MANAGED, GMP_ON_DEVICE, *p->dptr,        \
          p->bytesize, p->bytesize)                                                        \
    ALLOC(cuMemAllocPitch_v2, GMP_API_CU_MEM_ALLOC_PITCH, GMP_ON_DEVICE, *p->dptr,         \
          p->WidthInBytes *p->Height, *p->pPitch *p->Height)                               \
    ALLOC(cuMemAllocHost_v2, GMP_API_CU_MEM_ALLOC_HOST, GMP_ON_HOST, *p->pp, p->bytesize,  \
          p->bytesize)                                                                     \
    ALLOC(cuMemHostAlloc, GMP_API_CU_MEM_HOST_ALLOC, GMP_ON_HOST, *p->pp, p->bytesize,     \
          p->bytesize)                                                                     \
    ALLOC(cuMemAllocAsync, GMP_API_CU_MEM_ALLOC_ASYNC, GMP_ON_DEVICE, *p->dptr,            \
          p->bytesize, p->bytesize)                                                        \
    ALLOC(cuMemAllocAsync_ptsz, GMP_API_CU_MEM_ALLOC_ASYNC, GMP_ON_DEVICE, *p->dptr,       \
          p->bytesize, p->bytesize)                                                        \
    ALLOC(cuMemAllocFromPoolAsync, GMP_API_CU_MEM_ALLOC_FROM_POOL_ASYNC, GMP_ON_DEVICE,    \
          *p->dptr, p->bytesize, p->bytesize)                                              \
    ALLOC(cuMemAllocFromPoolAsync_ptsz, GMP_API_CU_MEM_ALLOC_FROM_POOL_ASYNC,              \
          GMP_ON_DEVICE, *p->dptr, p->bytesize, p->bytesize)                               \
    ALLOC(cuMemCreate, GMP_API_CU_MEM_CREATE, prop_where(p->prop), *p->handle, p->size,    \
          p->size)                                                                         \
    FREE(cuMemFree_v2, GMP_API_CU_MEM_FREE, p->dptr)                                       \
    FREE(cuMemFreeHost, GMP_API_CU_MEM_FREE_HOST, p->p)                                    \
    FREE(cuMemFreeAsync, GMP_API_CU_MEM_FREE_ASYNC, p->dptr)                               \
    FREE(cuMemFreeAsync_ptsz, GMP_API_CU_MEM_FREE_ASYNC, p->dptr)                          \
    FREE(cuMemRelease, GMP_API_CU_MEM_RELEASE, p->handle)                                  \
    MAP(cuMemMap, GMP_API_CU_MEM_MAP, GMP_EV_MAP, p->ptr, p->size)                         \
    MAP(cuMemUnmap, GMP_API_CU_MEM_UNMAP, GMP_EV_UNMAP, p->ptr, p->size)

_Static_assert(sizeof(CUmemLocation) == sizeof(gmp_cu_mem_location) &&
                   offsetof(CUmemLocation, id) == offsetof(gmp_cu_mem_location, id),
               "cuda.h's CUmemLocation is the one the driver hooks read");

static int prop_where(const CUmemAllocationProp *prop)
{
    return gmp_cu_location_where(prop ? (const gmp_cu_mem_location *)&prop->location : NULL);
}

#define CASE_ALLOC(cbid_prefix, name, api, where, ptr, requested, size)                    \
    case cbid_prefix##name: {                                                              \
        const name##_params *p = params;                                                   \
        gmp_gpu_alloc_done(&gmp_cuda_driver, api, where, rc,                               \
                           rc == 0 ? (uint64_t)(uintptr_t)(ptr) : 0, (requested),          \
                           rc == 0 ? (uint64_t)(size) : 0);                                \
        return;                                                                            \
    }
#define CASE_FREE(cbid_prefix, name, api, ptr)                                             \
    case cbid_prefix##name: {                                                              \
        const name##_params *p = params;                                                   \
        gmp_gpu_free_done(&gmp_cuda_driver, api, rc, (uint64_t)(uintptr_t)(ptr));          \
        return;                                                                            \
    }
#define CASE_MAP(cbid_prefix, name, api, type, ptr, size)                                  \
    case cbid_prefix##name: {                                                              \
        const name##_params *p = params;                                                   \
        gmp_gpu_map_done(&gmp_cuda_driver, api, type, rc, (uint64_t)(ptr), (size));        \
        return;                                                                            \
    }
#define R_ALLOC(name, ...) CASE_ALLOC(CUPTI_RUNTIME_TRACE_CBID_, name, __VA_ARGS__)
#define R_FREE(name, ...) CASE_FREE(CUPTI_RUNTIME_TRACE_CBID_, name, __VA_ARGS__)
#define D_ALLOC(name, ...) CASE_ALLOC(CUPTI_DRIVER_TRACE_CBID_, name, __VA_ARGS__)
#define D_FREE(name, ...) CASE_FREE(CUPTI_DRIVER_TRACE_CBID_, name, __VA_ARGS__)
#define D_MAP(name, ...) CASE_MAP(CUPTI_DRIVER_TRACE_CBID_, name, __VA_ARGS__)

static void record_runtime(CUpti_CallbackId cbid, const void *params, int rc)
{
    switch (cbid) {
        CUPTI_RUNTIME(R_ALLOC, R_FREE)
    default:
        return;
    }
}

static void record_driver(CUpti_CallbackId cbid, const void *params, int rc)
{
    switch (cbid) {
        CUPTI_DRIVER(D_ALLOC, D_FREE, D_MAP)
    default:
        return;
    }
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *data)
{
    (void)userdata;
    const CUpti_CallbackData *cb = data;
    if (!cb)
        return;
    int runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (runtime) {
        if (cb->callbackSite == CUPTI_API_ENTER) {
            in_runtime_alloc++;
            return;
        }
        in_runtime_alloc--;
    } else if (in_runtime_alloc > 0 || cb->callbackSite != CUPTI_API_EXIT) {
        return; /* the runtime call around it is the event */
    }
    if (!gmp_pl_active())
        return;
    int rc = cb->functionReturnValue ? *(const int *)cb->functionReturnValue : 0;
    gmp_event_flags = GMP_EVENT_FLAG_CUPTI;
    if (runtime)
        record_runtime(cbid, cb->functionParams, rc);
    else
        record_driver(cbid, cb->functionParams, rc);
    gmp_event_flags = 0;
}

/* ---- loading and subscribing ---------------------------------------------- */

/* By soname first (LD_LIBRARY_PATH, the loader cache), then the toolkit. */
static void *open_cupti(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so", NULL};
    static const char *const homes[] = {"", "/usr/local/cuda", "/usr/local/cuda/extras/CUPTI",
                                        NULL};
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    const char *env_home = getenv("CUDA_HOME");
    for (const char *const *home = homes; *home; home++) {
        const char *dir = **home ? *home : env_home;
        if (!dir || !*dir)
            continue;
        char path[GMP_PATH_MAX];
        gmp_strjoin(path, sizeof path, dir, "/lib64/libcupti.so", (char *)NULL);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static const char *result_text(CUptiResult r)
{
    const char *s = NULL;
    if (!cupti.result_string || cupti.result_string(r, &s) != CUPTI_SUCCESS || !s)
        return "unknown error";
    return s;
}

#define R_ENABLE(name, ...) CUPTI_RUNTIME_TRACE_CBID_##name,
#define D_ENABLE(name, ...) CUPTI_DRIVER_TRACE_CBID_##name,
#define NOTHING(...)

static int subscribe(void)
{
    void *h = open_cupti();
    if (!h) {
        gmp_log("CUPTI injection: cannot load libcupti; recording CUDA through the "
                "interposer");
        return -1;
    }
    *(void **)&cupti.subscribe = gmp_dlsym_real(h, "cuptiSubscribe");
    *(void **)&cupti.unsubscribe = gmp_dlsym_real(h, "cuptiUnsubscribe");
    *(void **)&cupti.enable_callback = gmp_dlsym_real(h, "cuptiEnableCallback");
    *(void **)&cupti.result_string = gmp_dlsym_real(h, "cuptiGetResultString");
    if (!cupti.subscribe || !cupti.unsubscribe || !cupti.enable_callback) {
        gmp_log("CUPTI injection: libcupti lacks the callback API; recording CUDA through "
                "the interposer");
        return -1;
    }
    CUpti_SubscriberHandle subscriber;
    CUptiResult r = cupti.subscribe(&subscriber, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        gmp_log("CUPTI injection: cuptiSubscribe failed (%s%s); recording CUDA through the "
                "interposer",
                result_text(r),
                r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                    ? ": another tool, such as Nsight or a profiler, holds CUPTI"
                    : "");
        return -1;
    }
    static const CUpti_CallbackId runtime_ids[] = {CUPTI_RUNTIME(R_ENABLE, R_ENABLE)};
    static const CUpti_CallbackId driver_ids[] = {CUPTI_DRIVER(D_ENABLE, D_ENABLE, D_ENABLE)};
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof runtime_ids / sizeof *runtime_ids; i++)
        r = cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof driver_ids / sizeof *driver_ids; i++)
        r = cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]);
    if (r != CUPTI_SUCCESS) {
        cupti.unsubscribe(subscriber);
        gmp_log("CUPTI injection: cuptiEnableCallback failed (%s); recording CUDA through "
                "the interposer",
                result_text(r));
        return -1;
    }
    return 0;
}

/* GMP_CUDA_MODE=cupti with no CUDA_INJECTION64_PATH: name this library, so
 * the driver loads it at cuInit (the variable is then visible to the program
 * and its children, which is what that mode asks for). */
GMP_START_EXIT_TEXT void gmp_cupti_prepare(void)
{
    if (gmp_pl.cfg->cuda_mode != GMP_CUDA_MODE_CUPTI || getenv("CUDA_INJECTION64_PATH"))
        return;
    static char self[GMP_PATH_MAX];
    Dl_info info;
    if (!dladdr((void *)InitializeInjection, &info) || !info.dli_fname ||
        !realpath(info.dli_fname, self) || setenv("CUDA_INJECTION64_PATH", self, 0) != 0)
        gmp_log("GMP_CUDA_MODE=cupti: cannot set CUDA_INJECTION64_PATH; recording CUDA "
                "through the interposer");
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names us. */
int InitializeInjection(void)
{
    static int done;
    if (!gmp_pl_active() || gmp_pl.cfg->cuda_mode == GMP_CUDA_MODE_INTERPOSE ||
        __atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return 1;
    GMP_IN_HOOK_SCOPE();
    if (subscribe() == 0)
        __atomic_store_n(&gmp_cuda_via_cupti, 1, __ATOMIC_RELEASE);
    return 1;
}
