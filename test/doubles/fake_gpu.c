/*
 * fake_gpu.c — a test double of a GPU runtime, built twice: as libcudart.so.13
 * (cuda* names) and as libamdhip64.so.5 (-DFAKE_HIP, hip* names).  It behaves
 * like the real library where the preload can tell: each device has a
 * capacity (GMP_FAKE_DEVICE_BYTES, default 1 GiB; GMP_FAKE_DEVICE_COUNT
 * devices, default 2), an allocation that does not fit returns 2
 * (cudaErrorMemoryAllocation / hipErrorOutOfMemory) and leaves the output
 * pointer alone, frees give memory back, bad arguments return 1.  Pinned
 * host allocations come from malloc.  Addresses are fake: never dereference.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_HIP
#define API(name) hip##name
#else
#define API(name) cuda##name
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAX_LIVE 65536
#define MAX_DEVICES 8

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101 };

typedef struct extent { size_t width, height, depth; } extent;
typedef struct pitched_ptr { void *ptr; size_t pitch, xsize, ysize; } pitched_ptr;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t ptr; size_t size; int device; } live[MAX_LIVE];
static size_t used[MAX_DEVICES];
static uintptr_t next_address = 0x7f0000000000;
static __thread int current;

static size_t capacity(void)
{
    const char *s = getenv("GMP_FAKE_DEVICE_BYTES");
    return s ? strtoull(s, NULL, 10) : (size_t)1 << 30;
}

static int device_count(void)
{
    const char *s = getenv("GMP_FAKE_DEVICE_COUNT");
    int n = s ? atoi(s) : 2;
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

static int device_alloc(void **out, size_t size)
{
    if (!out)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (size > capacity() - used[current]) {
        pthread_mutex_unlock(&lock);
        return OUT_OF_MEMORY;
    }
    for (int i = 0; i < MAX_LIVE; i++) {
        if (!live[i].ptr) {
            live[i].ptr = next_address;
            live[i].size = size;
            live[i].device = current;
            next_address += (size + 0xfffff) & ~(uintptr_t)0xfffff;
            next_address += 0x100000;
            used[current] += size;
            *out = (void *)live[i].ptr;
            pthread_mutex_unlock(&lock);
            return OK;
        }
    }
    pthread_mutex_unlock(&lock);
    return OUT_OF_MEMORY;
}

static int device_free(void *p)
{
    if (!p)
        return OK;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i].ptr == (uintptr_t)p) {
            used[live[i].device] -= live[i].size;
            live[i].ptr = 0;
            pthread_mutex_unlock(&lock);
            return OK;
        }
    }
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
}

EXPORT int API(GetDeviceCount)(int *n) { *n = device_count(); return OK; }
EXPORT int API(GetDevice)(int *d) { *d = current; return OK; }
EXPORT int API(SetDevice)(int d)
{
    if (d < 0 || d >= device_count())
        return INVALID_DEVICE;
    current = d;
    return OK;
}
EXPORT int API(MemGetInfo)(size_t *free_bytes, size_t *total)
{
    pthread_mutex_lock(&lock);
    *total = capacity();
    *free_bytes = capacity() - used[current];
    pthread_mutex_unlock(&lock);
    return OK;
}

EXPORT int API(Malloc)(void **p, size_t size) { return device_alloc(p, size); }
EXPORT int API(MallocManaged)(void **p, size_t size, unsigned flags) { (void)flags; return device_alloc(p, size); }
EXPORT int API(MallocAsync)(void **p, size_t size, void *stream) { (void)stream; return device_alloc(p, size); }
EXPORT int API(MallocFromPoolAsync)(void **p, size_t size, void *pool, void *stream)
{
    (void)pool;
    (void)stream;
    return device_alloc(p, size);
}
EXPORT int API(MallocPitch)(void **p, size_t *pitch, size_t width, size_t height)
{
    size_t padded = (width + 511) & ~(size_t)511;
    int rc = device_alloc(p, padded * height);
    if (rc == OK)
        *pitch = padded;
    return rc;
}
EXPORT int API(Free)(void *p) { return device_free(p); }
EXPORT int API(FreeAsync)(void *p, void *stream) { (void)stream; return device_free(p); }

#ifdef FAKE_HIP
EXPORT int hipExtMallocWithFlags(void **p, size_t size, unsigned flags) { (void)flags; return device_alloc(p, size); }
EXPORT int hipHostMalloc(void **p, size_t size, unsigned flags)
{
    (void)flags;
    return (*p = malloc(size)) ? OK : OUT_OF_MEMORY;
}
EXPORT int hipHostFree(void *p) { free(p); return OK; }
#else
EXPORT int cudaMalloc3D(pitched_ptr *pp, extent e)
{
    size_t pitch = (e.width + 511) & ~(size_t)511;
    void *p = NULL;
    int rc = device_alloc(&p, pitch * e.height * e.depth);
    if (rc == OK)
        *pp = (pitched_ptr){p, pitch, e.width, e.height};
    return rc;
}
EXPORT int cudaMallocHost(void **p, size_t size) { return (*p = malloc(size)) ? OK : OUT_OF_MEMORY; }
EXPORT int cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    (void)flags;
    return (*p = malloc(size)) ? OK : OUT_OF_MEMORY;
}
EXPORT int cudaFreeHost(void *p) { free(p); return OK; }
#endif
