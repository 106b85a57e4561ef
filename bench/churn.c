/*
 * churn.c — the malloc/free churn of `make bench`: each of THREADS threads
 * keeps 64 live slots and does OPS operations, each freeing a random slot's
 * block or allocating one of 16-272 bytes into it.  Prints the loop's wall
 * time and the process's CPU time over it, in seconds, start-up left out.
 * Usage: churn THREADS OPS
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long ops;

static void *worker(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uintptr_t)arg;
    void *slot[64] = {0};
    for (long i = 0; i < ops; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned s = (unsigned)(x & 63);
        if (slot[s]) {
            free(slot[s]);
            slot[s] = NULL;
        } else {
            slot[s] = malloc(16 + (size_t)((x >> 8) % 257));
            if (slot[s])
                *(volatile char *)slot[s] = 1;
        }
    }
    for (int s = 0; s < 64; s++)
        free(slot[s]);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    ops = argc > 2 ? atol(argv[2]) : 5000000;
    if (threads < 1 || threads > 64 || ops < 1)
        return 2;
    pthread_t tid[64];
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, worker, (void *)t);
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    printf("%.6f %.6f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
           (double)(cb.tv_sec - ca.tv_sec) + (double)(cb.tv_nsec - ca.tv_nsec) / 1e9);
    return 0;
}
