/*
 * gpu_smoke.c — links the real libcudart (or, -DUSE_HIP, Debian's real
 * libamdhip64) and asks for 1 MiB.  On a machine with no GPU the real
 * library returns its own error; the test checks that the preload passes it
 * through unchanged and writes no bundle.  Prints the status.
 */
#include <stdio.h>

#ifdef USE_HIP
int hipMalloc(void **p, size_t size);
#define GPU_MALLOC hipMalloc
#else
int cudaMalloc(void **p, size_t size);
#define GPU_MALLOC cudaMalloc
#endif

int main(void)
{
    void *p = NULL;
    int rc = GPU_MALLOC(&p, 1 << 20);
    printf("status %d\n", rc);
    return 0;
}
