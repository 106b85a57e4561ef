/*
 * fake_hip.c — a test double of HIP, libamdhip64.so.5: the device memory of
 * fake_device.h behind the hip* allocation calls.  Pinned host allocations
 * come from malloc; bad arguments return 1, a bad device 101.
 */
#include "fake_device.h"

#include <string.h>

enum { INVALID_DEVICE = 101 };

static __thread int current;

static int device_alloc(void **p, size_t size)
{
    uintptr_t a = 0;
    if (!p)
        return FAKE_INVALID_VALUE;
    int rc = fake_alloc(current, &a, size);
    if (rc == FAKE_OK)
        *p = (void *)a;
    return rc;
}

EXPORT int hipGetDeviceCount(int *n) { *n = fake_device_count(); return FAKE_OK; }
EXPORT int hipGetDevice(int *d) { *d = current; return FAKE_OK; }
EXPORT int hipSetDevice(int d)
{
    if (d < 0 || d >= fake_device_count())
        return INVALID_DEVICE;
    current = d;
    return FAKE_OK;
}
EXPORT int hipMemGetInfo(size_t *free_bytes, size_t *total)
{
    *total = fake_capacity();
    *free_bytes = fake_free_bytes(current);
    return FAKE_OK;
}

EXPORT int hipDeviceTotalMem(size_t *bytes, int d)
{
    if (d < 0 || d >= fake_device_count())
        return INVALID_DEVICE;
    *bytes = fake_capacity();
    return FAKE_OK;
}
EXPORT int hipDeviceGetName(char *name, int len, int d)
{
    if (d < 0 || d >= fake_device_count() || len < 16)
        return INVALID_DEVICE;
    memcpy(name, "Fake AMD GPU ", 13);
    name[13] = (char)('0' + d);
    name[14] = '\0';
    return FAKE_OK;
}
EXPORT int hipRuntimeGetVersion(int *v) { *v = 60032830; return FAKE_OK; }

EXPORT int hipMalloc(void **p, size_t size) { return device_alloc(p, size); }
EXPORT int hipMallocManaged(void **p, size_t size, unsigned flags) { (void)flags; return device_alloc(p, size); }
EXPORT int hipExtMallocWithFlags(void **p, size_t size, unsigned flags) { (void)flags; return device_alloc(p, size); }
EXPORT int hipMallocAsync(void **p, size_t size, void *stream) { (void)stream; return device_alloc(p, size); }
EXPORT int hipMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream)
{
    (void)pool;
    (void)stream;
    return device_alloc(p, size);
}
EXPORT int hipMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    size_t padded = (width + 511) & ~(size_t)511;
    int rc = device_alloc(p, padded * height);
    if (rc == FAKE_OK)
        *pitch = padded;
    return rc;
}
EXPORT int hipFree(void *p) { return fake_free((uintptr_t)p); }
EXPORT int hipFreeAsync(void *p, void *stream) { (void)stream; return fake_free((uintptr_t)p); }
EXPORT int hipHostMalloc(void **p, size_t size, unsigned flags)
{
    (void)flags;
    return (*p = malloc(size)) ? FAKE_OK : FAKE_OUT_OF_MEMORY;
}
EXPORT int hipHostFree(void *p) { free(p); return FAKE_OK; }
