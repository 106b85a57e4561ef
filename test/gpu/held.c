/*
 * held.c — a CUDA program (against the libcudart double) for the tests of
 * what a bundle says held the memory.  Usage: held MODE
 *   hold      allocate_weights(): cudaMalloc of 64, 256 and 128 MiB and a
 *             32 MiB cudaMallocManaged on device 0, one line each
 *             ("alloc ADDRESS SIZE"), then a 4 GiB request: exits 3 holding
 *   leak      allocate_weights() of 16, 32 and 48 MiB, frees the 32; prints
 *             "left ADDRESS SIZE" for the two it leaves; exits 0
 *   clean     allocates and frees three; exits 0
 *   (both keep an 8 MiB host buffer to the end: host memory, no GPU leak)
 *   slow-oom  64 MiB every 20 ms until one fails; exits 3
 *   wait      cudaMalloc of 64, 256 and 128 MiB ("alloc ADDRESS SIZE" each),
 *             then "ready PID", and waits to be killed
 *   wait-mixed from one line of allocate_each(): 64 MiB of device memory,
 *             32 MiB pinned (cudaMallocHost), 16 MiB from malloc; then
 *             "ready PID", and waits to be killed
 * GMP_TEST_DLOPEN=A:B:... dlopen those first, as PyTorch loads NVML itself,
 * or to load a library that looks like libtorch.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cudaMalloc(void **p, size_t size);
int cudaMallocManaged(void **p, size_t size, unsigned flags);
int cudaFree(void *p);
int cudaMallocHost(void **p, size_t size);
int cudaSetDevice(int device);

#define MIB ((size_t)1 << 20)

/* noinline: the bundle's stacks must name this function */
__attribute__((noinline)) static void *allocate_weights(size_t size, int managed)
{
    void *p = NULL;
    int rc = managed ? cudaMallocManaged(&p, size, 1) : cudaMalloc(&p, size);
    return rc == 0 ? p : NULL;
}

/* One line, three kinds of memory (kind 0 the device's, 1 pinned, 2 the
 * host's), as a framework's tensor constructor is. */
__attribute__((noinline)) static void *allocate_each(int kind, size_t size)
{
    void *p = NULL;
    int rc = kind == 0 ? cudaMalloc(&p, size)
             : kind == 1 ? cudaMallocHost(&p, size)
                         : ((p = malloc(size)) ? 0 : 1);
    if (rc == 0 && kind == 2)
        memset(p, 1, size);
    return rc == 0 ? p : NULL;
}

static void load_requested(void)
{
    const char *list = getenv("GMP_TEST_DLOPEN");
    char path[4096];
    while (list && *list) {
        size_t len = strcspn(list, ":");
        if (len < sizeof path) {
            memcpy(path, list, len);
            path[len] = '\0';
            if (!dlopen(path, RTLD_NOW | RTLD_LOCAL))
                fprintf(stderr, "held: cannot load %s: %s\n", path, dlerror());
        }
        list += len + (list[len] == ':');
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "hold";
    load_requested();
    if (cudaSetDevice(0) != 0)
        return 4;
    if (!strcmp(mode, "hold")) {
        static const size_t sizes[] = {64 * MIB, 256 * MIB, 128 * MIB, 32 * MIB};
        for (int i = 0; i < 4; i++) {
            void *p = allocate_weights(sizes[i], i == 3);
            if (!p)
                return 5;
            printf("alloc %p %zu\n", p, sizes[i]);
        }
        fflush(stdout);
        void *huge;
        return cudaMalloc(&huge, (size_t)4 << 30) == 2 ? 3 : 6;
    }
    if (!strcmp(mode, "leak") || !strcmp(mode, "clean")) {
        void *a = allocate_weights(16 * MIB, 0), *b = allocate_weights(32 * MIB, 0),
             *c = allocate_weights(48 * MIB, 0);
        char *staging = malloc(8 * MIB);
        if (!a || !b || !c || !staging)
            return 5;
        memset(staging, 1, 8 * MIB);
        cudaFree(b);
        if (!strcmp(mode, "clean")) {
            cudaFree(a);
            cudaFree(c);
            return 0;
        }
        printf("left %p %zu\nleft %p %zu\n", a, 16 * MIB, c, 48 * MIB);
        return 0;
    }
    if (!strcmp(mode, "wait")) {
        static const size_t sizes[] = {64 * MIB, 256 * MIB, 128 * MIB};
        for (int i = 0; i < 3; i++) {
            void *p = allocate_weights(sizes[i], 0);
            if (!p)
                return 5;
            printf("alloc %p %zu\n", p, sizes[i]);
        }
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "wait-mixed")) {
        static const size_t sizes[] = {64 * MIB, 32 * MIB, 16 * MIB};
        for (int i = 0; i < 3; i++)
            if (!allocate_each(i, sizes[i]))
                return 5;
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "slow-oom")) {
        while (allocate_weights(64 * MIB, 0)) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return 3;
    }
    return 2;
}
