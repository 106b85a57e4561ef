/*
 * device_pairs.c — device allocate/free pairs through the cudart test
 * double (no GPU needed): PAIRS cudaMalloc(1 MiB)/cudaFree, timed; prints
 * nanoseconds per pair.  Run with and without the preload, the difference
 * is what the preload adds to one pair.  Usage: device_pairs PAIRS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 1000000;
    void *p;
    if (cudaMalloc(&p, 1 << 20) != 0) /* the driver loads here, not in the timing */
        return 3;
    cudaFree(p);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < pairs; i++) {
        if (cudaMalloc(&p, 1 << 20) != 0)
            return 4;
        cudaFree(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / pairs;
    printf("%.1f\n", ns);
    return 0;
}
