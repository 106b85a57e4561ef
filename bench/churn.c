/*
 * churn.c — the malloc/free churn of `make bench`: each of THREADS threads
 * keeps 64 live slots and does OPS operations, each freeing a random slot's
 * block or allocating one of 16-272 bytes into it.
 *
 * The operations run in passes of PASS_OPS, each pass of them twice: once
 * calling malloc and free as any program does (through the PLT: whatever a
 * preloaded tool put there, or glibc's own in a bare process), once
 * calling glibc's own straight (found in libc.so.6 by version, past any
 * preload), in the order A B, then B A.  A pass starts and ends with no
 * block of its own alive, so neither kind frees what the other allocated.
 * A tool's cost is then the ratio of the two kinds' times in one process, a
 * millisecond apart: on a shared VM whose speed drifts by a third from one
 * run to the next, and within a run, that ratio holds to a few thousandths
 * where whole runs against a bare run ranged over 0.75-1.58x; in a bare
 * process it reads 1.00x, which says the method adds nothing of its own.
 *
 * Prints "WALL CPU WALL_RATIO CPU_RATIO": the passes through the PLT in
 * seconds, summed over the threads (wall: each thread's own clock around
 * its passes; CPU: the thread's CPU clock), start-up left out; then the
 * median over every pair of passes of the one through the PLT over the
 * direct one, by each clock.  Usage: churn THREADS OPS
 */
#include "median.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASS_OPS 50000

static long ops;
static void *(*glibc_malloc)(size_t);
static void (*glibc_free)(void *);

typedef struct spent {
    double wall, cpu;
} spent;

/* a thread's passes: their sums, and each pair's ratio (PLT over direct) */
typedef struct thread_sums {
    spent plt, direct;
    double *wall_ratio, *cpu_ratio;
    long pairs;
} thread_sums;

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One pass of n operations from seed x, its time added to *to; MALLOC and
 * FREE are the calls the pass makes (a macro, so that the PLT pass calls
 * malloc by name as a program does). */
#define PASS(name, MALLOC, FREE)                                                                  \
    static void name(long n, uint64_t x, spent *to)                                              \
    {                                                                                             \
        void *slot[64] = {0};                                                                     \
        double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);           \
        for (long i = 0; i < n; i++) {                                                            \
            x ^= x << 13;                                                                         \
            x ^= x >> 7;                                                                          \
            x ^= x << 17;                                                                         \
            unsigned s = (unsigned)(x & 63);                                                      \
            if (slot[s]) {                                                                        \
                FREE(slot[s]);                                                                    \
                slot[s] = NULL;                                                                   \
            } else {                                                                              \
                slot[s] = MALLOC(16 + (size_t)((x >> 8) % 257));                                  \
                if (slot[s])                                                                      \
                    *(volatile char *)slot[s] = 1;                                                \
            }                                                                                     \
        }                                                                                         \
        for (int s = 0; s < 64; s++)                                                              \
            FREE(slot[s]);                                                                        \
        to->cpu += seconds(CLOCK_THREAD_CPUTIME_ID) - cpu;                                        \
        to->wall += seconds(CLOCK_MONOTONIC) - wall;                                              \
    }

/* A direct call to a jump through memory, as a call through the PLT is:
 * calling the pointer itself read 1% faster than the PLT in a bare process. */
static __attribute__((noinline)) void *glibc_malloc_stub(size_t n)
{
    return glibc_malloc(n);
}
static __attribute__((noinline)) void glibc_free_stub(void *p)
{
    glibc_free(p);
}
PASS(through_plt, malloc, free)
PASS(straight_to_glibc, glibc_malloc_stub, glibc_free_stub)

/* glibc's malloc and free themselves, by version: dlsym on libc.so.6's
 * handle answers with the preload's, interposed before it.  The first
 * version each architecture had (x86_64, aarch64, i386, riscv64). */
static int find_glibc(void)
{
    static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0", "GLIBC_2.27"};
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    for (size_t v = 0; libc && v < sizeof versions / sizeof *versions; v++) {
        glibc_malloc = (void *(*)(size_t))dlvsym(libc, "malloc", versions[v]);
        glibc_free = (void (*)(void *))dlvsym(libc, "free", versions[v]);
        Dl_info in;
        if (glibc_malloc && glibc_free && dladdr((void *)glibc_malloc, &in) && in.dli_fname &&
            strstr(in.dli_fname, "libc.so"))
            return 0;
    }
    return -1;
}

static void *worker(void *arg)
{
    thread_sums *sums = arg;
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uintptr_t)arg;
    for (long done = 0; done < ops; done += PASS_OPS, sums->pairs++) {
        long n = ops - done < PASS_OPS ? ops - done : PASS_OPS;
        spent plt = {0, 0}, direct = {0, 0};
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        if (sums->pairs & 1) {
            through_plt(n, seed, &plt);
            straight_to_glibc(n, seed, &direct);
        } else {
            straight_to_glibc(n, seed, &direct);
            through_plt(n, seed, &plt);
        }
        sums->plt.wall += plt.wall;
        sums->plt.cpu += plt.cpu;
        sums->direct.wall += direct.wall;
        sums->direct.cpu += direct.cpu;
        sums->wall_ratio[sums->pairs] = plt.wall / direct.wall;
        sums->cpu_ratio[sums->pairs] = direct.cpu > 0 ? plt.cpu / direct.cpu : 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    ops = argc > 2 ? atol(argv[2]) : 5000000;
    if (threads < 1 || threads > 64 || ops < 1)
        return 2;
    if (find_glibc() != 0) {
        fprintf(stderr, "churn: glibc's own malloc and free not found in libc.so.6\n");
        return 2;
    }
    long most = (ops + PASS_OPS - 1) / PASS_OPS;
    double *wall_ratio = calloc((size_t)(most * threads), sizeof *wall_ratio);
    double *cpu_ratio = calloc((size_t)(most * threads), sizeof *cpu_ratio);
    if (!wall_ratio || !cpu_ratio)
        return 2;
    pthread_t tid[64];
    static thread_sums sums[64];
    for (int t = 0; t < threads; t++) {
        sums[t].wall_ratio = wall_ratio + t * most;
        sums[t].cpu_ratio = cpu_ratio + t * most;
        pthread_create(&tid[t], NULL, worker, &sums[t]);
    }
    spent plt = {0, 0};
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        plt.wall += sums[t].plt.wall;
        plt.cpu += sums[t].plt.cpu;
    }
    printf("%.6f %.6f %.6f %.6f\n", plt.wall, plt.cpu, bench_median(wall_ratio, most * threads),
           bench_median(cpu_ratio, most * threads));
    free(wall_ratio);
    free(cpu_ratio);
    return 0;
}
