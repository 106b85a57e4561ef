/*
 * device_pairs.c — device allocate/free pairs through the cudart test
 * double (no GPU needed), or the real runtime: PAIRS cudaMalloc(1 MiB)/
 * cudaFree in 21 batches, timed; prints the median batch's nanoseconds per
 * pair, so that a burst of the driver's own (a real one's clocks change
 * under it) moves one batch, not the number.  Run with and without the
 * preload, the difference is what the preload adds to one pair.
 * Usage: device_pairs PAIRS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 21

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 1000000;
    void *p;
    if (cudaMalloc(&p, 1 << 20) != 0) /* the driver loads here, not in the timing */
        return 3;
    cudaFree(p);
    long each = pairs / BATCHES > 0 ? pairs / BATCHES : 1;
    double ns[BATCHES];
    for (int batch = 0; batch < BATCHES; batch++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < each; i++) {
            if (cudaMalloc(&p, 1 << 20) != 0)
                return 4;
            cudaFree(p);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns[batch] = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / each;
    }
    qsort(ns, BATCHES, sizeof ns[0], by_value);
    printf("%.1f\n", ns[BATCHES / 2]);
    return 0;
}
