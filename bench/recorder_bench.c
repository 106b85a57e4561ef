/*
 * recorder_bench.c — the recorder alone: nanoseconds per event pushed into
 * the ring by 1 and by 2 threads at once, and the latency of a dump (a whole
 * bundle written, retention applied) with 10k and with 1M events in the
 * ring.  Prints "push1 NS", "push2 NS", "dump10k MS", "dump1m MS"; with a
 * second argument, push1, push2 or dump, only those (bench/run.sh times
 * the pushes every round, one thread's pinned, and the dumps less often).
 * Usage: recorder_bench DIR [push1|push2|dump]
 */
#include "gpumemprof.h"
#include "ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PUSHES 10000000L

static gmp_ring ring;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *pusher(void *arg)
{
    gmp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = GMP_EV_ALLOC;
    ev.time_ns = 1;
    for (long i = 0; i < PUSHES; i++) {
        ev.size = (uint64_t)i;
        gmp_ring_push(&ring, &ev);
    }
    (void)arg;
    return NULL;
}

static double push_ns(int threads)
{
    pthread_t t[2];
    double a = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, pusher, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return (now_s() - a) * 1e9 / (double)PUSHES; /* per event, per thread */
}

static double dump_ms(const char *dir, uint32_t events)
{
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/dumps", dir);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", dir);
    cfg.buffer_size = events;
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    gmp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = GMP_EV_ALLOC;
    ev.backend = GMP_BACKEND_CUDA;
    for (uint32_t i = 0; i < events; i++) {
        ev.size = 1 << 20;
        ev.in_use = (uint64_t)i << 20;
        gmp_record(rec, &ev);
    }
    gmp_dump_request req = {.reason = "cudaErrorMemoryAllocation", .backend = GMP_BACKEND_CUDA};
    char path[4096];
    double a = now_s();
    gmp_dump(rec, &req, path, sizeof path);
    double ms = (now_s() - a) * 1e3;
    gmp_recorder_destroy(rec);
    return ms;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp", *only = argc > 2 ? argv[2] : "";
    int all = !*only;
    if (gmp_ring_create(&ring, NULL, 1 << 16) < 0)
        return 3;
    if (all || !strcmp(only, "push1"))
        printf("push1 %.2f\n", push_ns(1));
    if (all || !strcmp(only, "push2"))
        printf("push2 %.2f\n", push_ns(2));
    gmp_ring_close(&ring, 0);
    if (all || !strcmp(only, "dump")) {
        printf("dump10k %.2f\n", dump_ms(dir, 10000));
        printf("dump1m %.2f\n", dump_ms(dir, 1000000));
    }
    return 0;
}
