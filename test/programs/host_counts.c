/*
 * host_counts.c — a program that checks the preload's host counters to the
 * byte and to the call, through gmp_preload_host_counts, while four threads
 * allocate with every allocating call and then free each other's blocks (a
 * thread's own count goes below zero; the sum must not).  The bytes a block
 * counts are what malloc_usable_size says: glibc's mmap threshold is set
 * high, so that no block is mmapped (an mmapped chunk counts one header
 * word more).  Blocks of 2 MiB, over GMP_HOST_EVENT_MIN_BYTES, take the
 * hooks' other path, with an event each.
 * Prints "counts exact" and exits 0, or names the reading that is off and
 * exits 1; exits 2 when run without the preload.
 */
#include "gpumemprof.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define BLOCKS 6000

typedef int (*counts_fn)(int, gmp_host_reading *);

static void *blocks[THREADS][BLOCKS];
static uint64_t allocs_made[THREADS], frees_made[THREADS];
static pthread_barrier_t step;

/* Thread t's blocks, one of six calls each, some of them grown by realloc
 * (a free and an allocation, as the preload counts it). */
static void allocate(int t)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    for (int i = 0; i < BLOCKS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t size = 1 + (size_t)(x % 600);
        void *p = NULL;
        switch (i % 6) {
        case 0: p = malloc(size); break;
        case 1: p = calloc(1 + size % 7, 24); break;
        case 2:
            if (posix_memalign(&p, 64, size))
                p = NULL;
            break;
        case 3: p = aligned_alloc(32, 32 * (1 + size % 9)); break;
        case 4:
            p = malloc(size);
            if (p) {
                void *q = realloc(p, size * 3);
                if (q) {
                    p = q;
                    allocs_made[t]++;
                    frees_made[t]++;
                }
            }
            break;
        default: p = i % 600 == 5 ? malloc((size_t)2 << 20) : malloc(size); break;
        }
        if (!p) {
            fprintf(stderr, "thread %d: allocation %d failed\n", t, i);
            exit(1);
        }
        allocs_made[t]++;
        blocks[t][i] = p;
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    pthread_barrier_wait(&step); /* the first reading is taken */
    allocate(t);
    pthread_barrier_wait(&step); /* all allocated */
    pthread_barrier_wait(&step); /* the second reading is taken */
    int other = (t + 1) % THREADS;
    for (int i = 0; i < BLOCKS; i++) {
        free(blocks[other][i]);
        frees_made[t]++;
    }
    free(NULL); /* counts nothing */
    pthread_barrier_wait(&step); /* all freed */
    return NULL;
}

static int off(const char *what, uint64_t got, uint64_t want)
{
    if (got == want)
        return 0;
    fprintf(stderr, "%s: %llu, want %llu\n", what, (unsigned long long)got,
            (unsigned long long)want);
    return 1;
}

int main(void)
{
    counts_fn counts = (counts_fn)dlsym(RTLD_DEFAULT, GMP_PRELOAD_HOST_COUNTS_SYMBOL);
    gmp_host_reading r0, r1, r2, r3;
    if (!counts || counts(-1, &r0) != 0) {
        fprintf(stderr, "no preload counts\n");
        return 2;
    }
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    /* what the process's first event allocates for good (its ring, and
     * what the loader keeps of a lookup that failed), before any reading */
    free(malloc((size_t)2 << 20));
    pthread_t tid[THREADS];
    pthread_barrier_init(&step, NULL, THREADS + 1);
    for (int t = 0; t < THREADS; t++)
        pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t);

    counts(-1, &r0);
    pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);
    counts(-1, &r1);
    uint64_t held = 0, allocs = 0, frees = 0;
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < BLOCKS; i++)
            held += malloc_usable_size(blocks[t][i]);
        allocs += allocs_made[t];
        frees += frees_made[t];
    }
    int bad = off("bytes in use with every block held", r1.in_use - r0.in_use, held) +
              off("allocations", r1.allocations - r0.allocations, allocs) +
              off("frees", r1.frees - r0.frees, frees);

    pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);
    counts(-1, &r2);
    frees = 0;
    for (int t = 0; t < THREADS; t++)
        frees += frees_made[t];
    bad += off("bytes in use with every block freed by another thread", r2.in_use, r0.in_use) +
           off("frees after the other threads freed", r2.frees - r0.frees, frees);

    for (int t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    counts(-1, &r3);
    bad += off("bytes in use once the threads exited", r3.in_use, r0.in_use) +
           off("allocations once the threads exited", r3.allocations, r2.allocations) +
           off("frees once the threads exited", r3.frees, r2.frees);
    if (bad)
        return 1;
    printf("counts exact\n");
    return 0;
}
