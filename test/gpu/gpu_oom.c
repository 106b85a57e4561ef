/*
 * gpu_oom.c — a GPU program the integration tests run under the preload,
 * built twice: against the libcudart double, and (-DUSE_HIP) the
 * libamdhip64 double.  Usage: gpu_oom MODE [DEVICE]
 *   until-oom     256 MiB allocations on DEVICE until one fails; prints what
 *                 it holds and the failed size; exits 3 holding it
 *   invalid-first one allocation with no place for its pointer (the
 *                 library's invalid-value code), then until-oom
 *   (the retry modes expect the default 1 GiB device: they fill it exactly)
 *   retry-recover fail a 512 MiB request, free 512 MiB, retry: success
 *                 (PyTorch's caching allocator); prints the preload's count
 *                 of oom_recovered events; exits 0
 *   retry-fail    fail, free 256 MiB, fail again; exits 0
 *   threads       16 threads allocate and free on device and host; one hits
 *                 OOM; exits 0
 *   device-threads 8 threads each make 1000 allocate/free pairs on device
 *                 (its number % 2), then 1000 on the other device, and
 *                 exit; main waits for them, then makes 3 allocations on
 *                 device 1 and frees one; exits 0 (counts: 8003 and 8001
 *                 on device 1, 8000 and 8000 on device 0)
 *   fork          a child runs until-oom and exits; the parent waits and exits
 *                 with the child's status
 *   one-huge      one request of 4 GiB on DEVICE (more than the device): exit 3
 *   two-devices   256 MiB allocations on device 0 until one fails, then on
 *                 device 1; frees them all, waits 1.5 s; exits 0
 *   step-leak     three 96 MiB weights, then steps of six 16 MiB activations
 *                 made and freed and one 24 MiB block kept (keep_in_cache)
 *                 until one fails; prints the steps; exits 3
 *   slow-fill     64 MiB on DEVICE every 20 ms until 95% of it is in use
 *                 (by MemGetInfo), holds 500 ms, frees all; never fails; exit 0
 *   kinds         one allocation through every hooked API, then frees them;
 *                 prints the preload's count of alloc and free events
 *   deep          1 MiB allocations by deep_leaf, reached three ways 8 times
 *                 each (main > deep_outer, whose alloca varies, > deep_middle
 *                 > deep_leaf; main > deep_middle > deep_leaf; main >
 *                 deep_leaf), all kept; then until-oom: exits 3
 * Built twice for CUDA: as every program here (x86-64 gcc -O2 keeps no
 * frame pointer), and with -fno-omit-frame-pointer (gpu_oom_cuda_fp).
 */
#include "events.h"

#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef USE_HIP
#define GPU(name) hip##name
#else
#define GPU(name) cuda##name
#endif

int GPU(Malloc)(void **p, size_t size);
int GPU(Free)(void *p);
int GPU(SetDevice)(int device);
int GPU(MemGetInfo)(size_t *free_bytes, size_t *total);
int GPU(MallocManaged)(void **p, size_t size, unsigned flags);
int GPU(MallocAsync)(void **p, size_t size, void *stream);
int GPU(MallocFromPoolAsync)(void **p, size_t size, void *pool, void *stream);
int GPU(MallocPitch)(void **p, size_t *pitch, size_t width, size_t height);
int GPU(FreeAsync)(void *p, void *stream);
#ifdef USE_HIP
int hipExtMallocWithFlags(void **p, size_t size, unsigned flags);
int hipHostMalloc(void **p, size_t size, unsigned flags);
int hipHostFree(void *p);
#else
typedef struct { size_t width, height, depth; } extent;
typedef struct { void *ptr; size_t pitch, xsize, ysize; } pitched_ptr;
int cudaMalloc3D(pitched_ptr *pp, extent e);
int cudaMallocHost(void **p, size_t size);
int cudaHostAlloc(void **p, size_t size, unsigned flags);
int cudaFreeHost(void *p);
#endif

#define MIB ((size_t)1 << 20)

static void *held[4096];
static size_t nheld;

/* Allocate chunks until one fails (limit 0), or exactly `limit` chunks. */
static size_t fill(size_t chunk, size_t limit)
{
    size_t total = 0;
    void *p;
    while (nheld < 4096 && (!limit || nheld < limit) && GPU(Malloc)(&p, chunk) == 0) {
        held[nheld++] = p;
        total += chunk;
    }
    return total;
}

static int until_oom(int device)
{
    if (GPU(SetDevice)(device) != 0)
        return 4;
    size_t total = fill(256 * MIB, 0); /* stops at the first failure */
    printf("held %zu failed %zu\n", total, 256 * MIB);
    return 3;
}

/* A training step: six activations made and freed, and one 24 MiB block
 * kept in a cache that is never emptied.  The empty asm keeps the frame. */
static __attribute__((noinline)) int keep_in_cache(void)
{
    void *p;
    int rc = nheld < 4096 ? GPU(Malloc)(&p, 24 * MIB) : 2;
    if (rc == 0)
        held[nheld++] = p;
    __asm__ volatile("" ::: "memory");
    return rc;
}

static int step_leak(int device)
{
    if (GPU(SetDevice)(device) != 0)
        return 4;
    fill(96 * MIB, 3); /* the weights */
    for (int step = 0;; step++) {
        void *act[6];
        int made = 0;
        while (made < 6 && GPU(Malloc)(&act[made], 16 * MIB) == 0)
            made++;
        int kept = made == 6 ? keep_in_cache() : 2;
        while (made)
            GPU(Free)(act[--made]);
        if (kept != 0) {
            printf("steps %d\n", step);
            return 3;
        }
    }
}

/* The empty asm after each call keeps it from being a tail call: every
 * function keeps its frame, as in a real program. */
static __attribute__((noinline)) void deep_leaf(void)
{
    void *p;
    if (nheld < 4096 && GPU(Malloc)(&p, MIB) == 0)
        held[nheld++] = p;
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void deep_middle(void)
{
    deep_leaf();
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void deep_outer(int i)
{
    volatile char *scratch = alloca(64 + 48 * (size_t)i); /* the frame's size varies */
    scratch[0] = 1;
    deep_middle();
    __asm__ volatile("" ::: "memory");
}

static void *thread_main(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 2000; i++) {
        void *d = NULL;
        if (GPU(Malloc)(&d, MIB) == 0)
            GPU(Free)(d);
        free(malloc((size_t)(64 + i % 4096)));
        if (id == 5 && i == 1000) {
            void *big;
            GPU(Malloc)(&big, (size_t)1 << 40); /* far beyond the device */
            GPU(Malloc)(&big, (size_t)1 << 40);
        }
    }
    return NULL;
}

/* Each thread is on device id % 2, then turns to the other. */
static void *device_thread_main(void *arg)
{
    long id = (long)arg;
    for (int turn = 0; turn < 2; turn++) {
        if (GPU(SetDevice)((int)((id + turn) % 2)) != 0)
            return (void *)1;
        for (int i = 0; i < 1000; i++) {
            void *d = NULL;
            if (GPU(Malloc)(&d, MIB) != 0 || GPU(Free)(d) != 0)
                return (void *)1;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "until-oom";
    int device = argc > 2 ? atoi(argv[2]) : 0;
    void *p;
    if (!strcmp(mode, "invalid-first")) {
        if (GPU(Malloc)(NULL, MIB) == 0)
            return 5;
        return until_oom(device);
    }
    if (!strcmp(mode, "until-oom"))
        return until_oom(device);
    if (!strcmp(mode, "step-leak"))
        return step_leak(device);
    if (!strcmp(mode, "deep")) {
        for (int i = 0; i < 8; i++) {
            deep_outer(i);
            deep_middle();
            deep_leaf();
        }
        return until_oom(device);
    }
    if (!strcmp(mode, "retry-recover") || !strcmp(mode, "retry-fail")) {
        fill(256 * MIB, 4); /* the whole 1 GiB device, without failing */
        if (GPU(Malloc)(&p, 512 * MIB) != 2)
            return 5;
        GPU(Free)(held[--nheld]);
        if (!strcmp(mode, "retry-fail")) {
            printf("second attempt rc %d\n", GPU(Malloc)(&p, 512 * MIB));
            return 0;
        }
        GPU(Free)(held[--nheld]);
        if (GPU(Malloc)(&p, 512 * MIB) != 0)
            return 6;
        printf("recovered events %d\n", count_events(GMP_EV_OOM_RECOVERED));
        return 0;
    }
    if (!strcmp(mode, "retry-thrice")) { /* CuPy's pool: ask, free all, ask, collect, ask */
        fill(256 * MIB, 4);
        int first = GPU(Malloc)(&p, 512 * MIB), second = GPU(Malloc)(&p, 512 * MIB);
        printf("rc %d %d %d\n", first, second, GPU(Malloc)(&p, 512 * MIB));
        return 0;
    }
    if (!strcmp(mode, "fail-then-let-go")) { /* PyTorch's expandable segments */
        fill(256 * MIB, 4);
        if (GPU(Malloc)(&p, 512 * MIB) != 2)
            return 5;
        while (nheld)
            GPU(Free)(held[--nheld]);
        struct timespec ts = {0, 150 * 1000 * 1000}; /* a new sample is due */
        nanosleep(&ts, NULL);
        if (GPU(Malloc)(&p, MIB) != 0 || GPU(Free)(p) != 0)
            return 6;
        return 0;
    }
    if (!strcmp(mode, "two-devices")) { /* each device's failure, then all let go */
        for (int d = 0; d < 2; d++) {
            if (GPU(SetDevice)(d) != 0)
                return 4;
            fill(256 * MIB, 0);
        }
        while (nheld)
            GPU(Free)(held[--nheld]);
        struct timespec ts = {1, 500 * 1000 * 1000}; /* both confirmed by their timeout */
        nanosleep(&ts, NULL);
        return 0;
    }
    if (!strcmp(mode, "one-huge")) {
        if (GPU(SetDevice)(device) != 0)
            return 4;
        return GPU(Malloc)(&p, (size_t)4 << 30) == 2 ? 3 : 5;
    }
    if (!strcmp(mode, "slow-fill")) {
        size_t free_bytes = 0, total = 0;
        if (GPU(SetDevice)(device) != 0)
            return 4;
        while (GPU(MemGetInfo)(&free_bytes, &total) == 0 && free_bytes > total / 20 &&
               nheld < 4096 && GPU(Malloc)(&held[nheld], 64 * MIB) == 0) {
            nheld++;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        struct timespec hold = {0, 500 * 1000 * 1000};
        nanosleep(&hold, NULL);
        printf("filled %zu MiB\n", nheld * 64);
        while (nheld)
            GPU(Free)(held[--nheld]);
        return 0;
    }
    if (!strcmp(mode, "threads")) {
        pthread_t th[16];
        for (long i = 0; i < 16; i++)
            pthread_create(&th[i], NULL, thread_main, (void *)i);
        for (int i = 0; i < 16; i++)
            pthread_join(th[i], NULL);
        puts("threads done");
        return 0;
    }
    if (!strcmp(mode, "device-threads")) {
        pthread_t th[8];
        void *bad = NULL, *kept[3];
        for (long i = 0; i < 8; i++)
            pthread_create(&th[i], NULL, device_thread_main, (void *)i);
        for (int i = 0; i < 8; i++) {
            void *r;
            pthread_join(th[i], &r);
            bad = bad ? bad : r;
        }
        if (bad || GPU(SetDevice)(1) != 0)
            return 4;
        for (int i = 0; i < 3; i++)
            if (GPU(Malloc)(&kept[i], MIB) != 0)
                return 5;
        return GPU(Free)(kept[0]) == 0 ? 0 : 6;
    }
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            printf("child %d\n", (int)getpid());
            fflush(stdout);
            exit(until_oom(0)); /* a normal exit commits the open episode */
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
    }
    if (!strcmp(mode, "kinds")) {
        void *a, *b, *c, *d, *e, *f;
        size_t pitch;
        int bad = GPU(Malloc)(&a, MIB) | GPU(MallocManaged)(&b, MIB, 1) |
                  GPU(MallocAsync)(&c, MIB, NULL) | GPU(MallocFromPoolAsync)(&d, MIB, NULL, NULL) |
                  GPU(MallocPitch)(&e, &pitch, 1000, 100);
#ifdef USE_HIP
        bad |= hipExtMallocWithFlags(&f, MIB, 0);
        void *h;
        bad |= hipHostMalloc(&h, MIB, 0) | hipHostFree(h);
#else
        pitched_ptr pp;
        extent ext = {1000, 10, 10};
        bad |= cudaMalloc3D(&pp, ext) | GPU(Free)(pp.ptr);
        f = NULL;
        bad |= cudaMalloc(&f, MIB);
        void *h, *h2;
        bad |= cudaMallocHost(&h, MIB) | cudaHostAlloc(&h2, MIB, 0) | cudaFreeHost(h) |
               cudaFreeHost(h2);
#endif
        bad |= GPU(Free)(a) | GPU(Free)(b) | GPU(FreeAsync)(c, NULL) | GPU(Free)(d) |
               GPU(Free)(e) | GPU(Free)(f);
        printf("bad %d allocs %d frees %d\n", bad, count_events(GMP_EV_ALLOC),
               count_events(GMP_EV_FREE));
        return 0;
    }
    return 2;
}
