/*
 * cupti.c — CUPTI injection, the second way into CUDA.
 *
 * With CUDA_INJECTION64_PATH naming this library, the driver loads it at
 * cuInit and calls InitializeInjection; we then load libcupti (at run time,
 * like every GPU library), subscribe to the runtime and driver allocation
 * callbacks, and record each call at API_EXIT from its return value and
 * parameters (a free takes its block out of the live table at API_ENTER,
 * as the interposer's does before the real call: once the memory is
 * given back, another thread may be handed the same address).  That reaches programs the interposer cannot (LD_PRELOAD
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

/* A free between its API_ENTER and API_EXIT: the block taken out, if ours
 * (a free's callbacks do not nest: the driver call inside a runtime free
 * is skipped). */
static __thread gmp_live_taken free_taken;
static __thread int free_took;

/* The callbacks we subscribe to are the rows of the hook tables, with
 * CUDA's own types: each row's `cupti_args` read the call's arguments out
 * of CUPTI's <name>_params, and the row's own expressions (pointer, sizes,
 * where) record it, exactly as the row's hook would. */
#define GMP_T_DEVPTR CUdeviceptr
#define GMP_T_HANDLE CUmemGenericAllocationHandle
#define GMP_T_MEMPROP CUmemAllocationProp
#define GMP_T_STREAM CUstream
#define GMP_T_MEMPOOL CUmemoryPool
#define GMP_T_CUDA_EXTENT struct cudaExtent
#define GMP_T_CUDA_PITCHED_PTR struct cudaPitchedPtr
#include "cuda_driver_table.h"
#include "cuda_runtime_table.h"

_Static_assert(sizeof(CUmemLocation) == sizeof(gmp_cu_mem_location) &&
                   offsetof(CUmemLocation, id) == offsetof(gmp_cu_mem_location, id),
               "cuda.h's CUmemLocation is the one the driver hooks read");

/* One function a row, taking the callback's site (1 at API_ENTER), the
 * call's result (at API_EXIT) and then its arguments. */
#define WITH_RESULT(...) (int enter, int rc, __VA_ARGS__)
#define RECORD_ALLOC(name, api, where, params, ptr, requested, size)                       \
    static void record_##name WITH_RESULT params                                           \
    {                                                                                      \
        if (!enter)                                                                        \
            gmp_gpu_alloc_done(&gmp_cuda_driver, api, where, rc,                           \
                               rc == 0 ? (uint64_t)(uintptr_t)(ptr) : 0, (requested),      \
                               rc == 0 ? (uint64_t)(size) : 0);                            \
    }
#define RECORD_FREE(name, api, params, ptr)                                                \
    static void record_##name WITH_RESULT params                                           \
    {                                                                                      \
        if (enter) {                                                                       \
            free_took = gmp_gpu_free_begin(&gmp_cuda_driver, api, (uint64_t)(uintptr_t)(ptr), \
                                           &free_taken);                                   \
            return;                                                                        \
        }                                                                                  \
        gmp_gpu_free_end(&gmp_cuda_driver, api, rc, (uint64_t)(uintptr_t)(ptr),            \
                         free_took ? &free_taken : NULL);                                  \
        free_took = 0;                                                                     \
    }
#define RECORD_MAP(name, api, type, params, ptr, size)                                     \
    static void record_##name WITH_RESULT params                                           \
    {                                                                                      \
        if (!enter)                                                                        \
            gmp_gpu_map_done(&gmp_cuda_driver, api, type, rc, (uint64_t)(ptr), (size));    \
    }
#define R_ALLOC_FN(name, api, where, params, args, ptr, requested, size, cupti, cargs)     \
    RECORD_ALLOC(cupti, api, where, params, ptr, requested, size)
#define R_FREE_FN(name, api, params, args, ptr, cupti, cargs)                              \
    RECORD_FREE(cupti, api, params, ptr)
#define D_ALLOC_FN(name, base, since, api, where, params, args, ptr, requested, size, cargs) \
    RECORD_ALLOC(name, api, where, params, ptr, requested, size)
#define D_FREE_FN(name, base, since, api, params, args, ptr, cargs)                        \
    RECORD_FREE(name, api, params, ptr)
#define D_MAP_FN(name, base, since, api, type, params, args, ptr, size, cargs)             \
    RECORD_MAP(name, api, type, params, ptr, size)
/* the rows' parameters the recording does not read (streams, flags) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
GMP_CUDART_ALLOCS(R_ALLOC_FN)
GMP_CUDART_FREES(R_FREE_FN)
GMP_CUDA_DRIVER_ALLOCS(D_ALLOC_FN)
GMP_CUDA_DRIVER_FREES(D_FREE_FN)
GMP_CUDA_DRIVER_MAPS(D_MAP_FN)
#pragma GCC diagnostic pop

/* The switch cases: a callback id to its row. */
#define WITH_RC(...) (enter, rc, __VA_ARGS__)
#define CASE(prefix, cupti, cargs)                                                         \
    case prefix##cupti: {                                                                  \
        const cupti##_params *q = params;                                                  \
        record_##cupti WITH_RC cargs;                                                      \
        return;                                                                            \
    }
#define R_ALLOC_CASE(name, api, where, params, args, ptr, requested, size, cupti, cargs)   \
    CASE(CUPTI_RUNTIME_TRACE_CBID_, cupti, cargs)
#define R_FREE_CASE(name, api, params, args, ptr, cupti, cargs)                            \
    CASE(CUPTI_RUNTIME_TRACE_CBID_, cupti, cargs)
#define D_ALLOC_CASE(name, base, since, api, where, params, args, ptr, requested, size, cargs) \
    CASE(CUPTI_DRIVER_TRACE_CBID_, name, cargs)
#define D_FREE_CASE(name, base, since, api, params, args, ptr, cargs)                      \
    CASE(CUPTI_DRIVER_TRACE_CBID_, name, cargs)
#define D_MAP_CASE(name, base, since, api, type, params, args, ptr, size, cargs)           \
    CASE(CUPTI_DRIVER_TRACE_CBID_, name, cargs)

static void record_runtime(CUpti_CallbackId cbid, const void *params, int enter, int rc)
{
    switch (cbid) {
        GMP_CUDART_ALLOCS(R_ALLOC_CASE)
        GMP_CUDART_FREES(R_FREE_CASE)
    default:
        return;
    }
}

static void record_driver(CUpti_CallbackId cbid, const void *params, int enter, int rc)
{
    switch (cbid) {
        GMP_CUDA_DRIVER_ALLOCS(D_ALLOC_CASE)
        GMP_CUDA_DRIVER_FREES(D_FREE_CASE)
        GMP_CUDA_DRIVER_MAPS(D_MAP_CASE)
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
    int enter = cb->callbackSite == CUPTI_API_ENTER;
    if (runtime) {
        if (enter)
            in_runtime_alloc++;
        else
            in_runtime_alloc--;
    } else if (in_runtime_alloc > 0) {
        return; /* the runtime call around it is the event */
    }
    if (!gmp_pl_active())
        return;
    int rc = !enter && cb->functionReturnValue ? *(const int *)cb->functionReturnValue : 0;
    gmp_event_flags = GMP_EVENT_FLAG_CUPTI;
    if (runtime)
        record_runtime(cbid, cb->functionParams, enter, rc);
    else
        record_driver(cbid, cb->functionParams, enter, rc);
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

#define R_ALLOC_ID(name, api, where, params, args, ptr, requested, size, cupti, cargs)     \
    CUPTI_RUNTIME_TRACE_CBID_##cupti,
#define R_FREE_ID(name, api, params, args, ptr, cupti, cargs) CUPTI_RUNTIME_TRACE_CBID_##cupti,
#define D_ID(name, ...) CUPTI_DRIVER_TRACE_CBID_##name,
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
    static const CUpti_CallbackId runtime_ids[] = {GMP_CUDART_ALLOCS(R_ALLOC_ID)
                                                       GMP_CUDART_FREES(R_FREE_ID)};
    static const CUpti_CallbackId driver_ids[] = {GMP_CUDA_DRIVER_ALLOCS(D_ID)
                                                      GMP_CUDA_DRIVER_FREES(D_ID)
                                                          GMP_CUDA_DRIVER_MAPS(D_ID)};
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
