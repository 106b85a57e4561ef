/*
 * fake_cupti.c — a test double of CUPTI's callback API, libcupti.so.13, over
 * the driver double: cuptiSubscribe takes one subscriber (a second, or any
 * with GMP_FAKE_CUPTI_BUSY=1, gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * as when Nsight holds CUPTI), cuptiEnableCallback picks callback ids, and
 * the driver double's enter/exit notifications (fake_cuda_set_callback)
 * reach the subscriber as CUpti_CallbackData with the call's parameters and
 * return value, under the real callback ids.  Built only where cupti.h is.
 */
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static CUpti_CallbackFunc subscriber_fn;
static void *subscriber_data;
static unsigned char enabled[2][4096]; /* [runtime?][cbid] */

typedef struct known { const char *name; int runtime; CUpti_CallbackId cbid; } known;
static const known ids[] = {
    {"cudaMalloc_v3020", 1, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020},
    {"cudaFree_v3020", 1, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020},
    {"cuMemAlloc_v2", 0, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2},
    {"cuMemAllocAsync", 0, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync},
    {"cuMemFree_v2", 0, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2},
    {"cuMemCreate", 0, CUPTI_DRIVER_TRACE_CBID_cuMemCreate},
    {"cuMemRelease", 0, CUPTI_DRIVER_TRACE_CBID_cuMemRelease},
    {"cuMemMap", 0, CUPTI_DRIVER_TRACE_CBID_cuMemMap},
    {"cuMemUnmap", 0, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap},
};

/* From the driver double: domain 1 driver, 2 runtime; site 0 enter, 1 exit. */
static void bridge(int domain, const char *name, int site, void *params, const int *result)
{
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (strcmp(ids[i].name, name) || ids[i].runtime != (domain == 2) ||
            !enabled[ids[i].runtime][ids[i].cbid] || !subscriber_fn)
            continue;
        CUpti_CallbackData data;
        memset(&data, 0, sizeof data);
        data.callbackSite = site ? CUPTI_API_EXIT : CUPTI_API_ENTER;
        data.functionName = name;
        data.functionParams = params;
        data.functionReturnValue = (void *)result;
        subscriber_fn(subscriber_data,
                      ids[i].runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                      ids[i].cbid, &data);
    }
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc fn, void *data)
{
    const char *busy = getenv("GMP_FAKE_CUPTI_BUSY");
    if ((busy && !strcmp(busy, "1")) || subscriber_fn)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*set)(void (*)(int, const char *, int, void *, const int *)) =
        driver ? (void (*)(void (*)(int, const char *, int, void *, const int *)))dlsym(
                     driver, "fake_cuda_set_callback")
               : NULL;
    if (!set)
        return CUPTI_ERROR_NOT_INITIALIZED;
    subscriber_fn = fn;
    subscriber_data = data;
    *h = (CUpti_SubscriberHandle)&subscriber_fn;
    set(bridge);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
    (void)h;
    subscriber_fn = NULL;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle h,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    (void)h;
    if (cbid >= 4096 || (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API))
        return CUPTI_ERROR_INVALID_PARAMETER;
    enabled[domain == CUPTI_CB_DOMAIN_RUNTIME_API][cbid] = (unsigned char)!!enable;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
             ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
             : r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR";
    return CUPTI_SUCCESS;
}
