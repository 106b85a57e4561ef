/*
 * oom-demo.c — the flight recorder on a real out-of-memory, no GPU needed.
 *
 * Caps its own address space with RLIMIT_AS (the "soft limit" of seed 003),
 * records every large allocation through the public API, keeps allocating
 * until malloc returns NULL with ENOMEM, classifies that failure and writes
 * a bundle.  `make demo` runs it and then reads the bundle with gmp-inspect.
 * Once the preload lands, the same happens with no code change at all.
 */
#include "gpumemprof.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define CHUNK (16u << 20)
#define LIMIT (512ull << 20)

int main(void)
{
    gmp_config cfg;
    gmp_config_from_env(&cfg);
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    if (!rec)
        return 1;

    struct rlimit rl = {LIMIT, LIMIT};
    if (setrlimit(RLIMIT_AS, &rl) < 0) {
        perror("setrlimit");
        return 1;
    }
    void *held[1024];
    size_t sizes[1024];
    size_t n = 0;
    uint64_t in_use = 0;
    for (unsigned step = 1;; step++) {
        size_t size = CHUNK * (step % 3 + 1);
        errno = 0;
        void *p = malloc(size);
        gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CPU, .device = -1,
                        .api = GMP_API_MALLOC, .address = (uintptr_t)p, .size = size};
        if (!p) {
            int err = errno;
            gmp_classification c = gmp_classify_result(GMP_BACKEND_CPU, GMP_API_MALLOC, err);
            ev.type = c.is_oom ? GMP_EV_OOM : GMP_EV_ALLOC_FAILED;
            ev.result = err;
            ev.in_use = in_use;
            gmp_record(rec, &ev);
            printf("oom-demo: malloc(%zu) failed at step %u (%s): %s\n", size, step,
                   strerror(err), c.is_oom ? c.reason : "not an OOM");
            gmp_dump_request req = {
                .reason = c.reason,
                .exception_type = "ENOMEM",
                .exception_module = "libc",
                .exception_message = "malloc returned NULL: the 512 MiB RLIMIT_AS is used up",
                .context = "oom-demo: growing a heap until it fails",
                .backend = GMP_BACKEND_CPU,
                .confirmed_by = "first",
                .failed = {.present = 1, .api = GMP_API_MALLOC, .size = size, .device = -1,
                           .code = err},
            };
            char path[GMP_PATH_MAX];
            if (gmp_dump(rec, &req, path, sizeof path))
                printf("oom-demo: bundle written: %s\n", path);
            break;
        }
        memset(p, 1, 4096);
        in_use += size;
        ev.in_use = in_use;
        gmp_record(rec, &ev);
        if (n == sizeof held / sizeof *held)
            break;
        sizes[n] = size;
        held[n++] = p;
        if (step % 4 == 0) { /* give some back now and then, like a real program */
            void *q = held[--n];
            size_t qsize = sizes[n];
            free(q);
            in_use -= qsize;
            gmp_event fr = {.type = GMP_EV_FREE, .backend = GMP_BACKEND_CPU, .device = -1,
                            .api = GMP_API_FREE, .address = (uintptr_t)q, .size = qsize,
                            .in_use = in_use};
            gmp_record(rec, &fr);
        }
    }
    while (n)
        free(held[--n]);
    gmp_recorder_destroy(rec);
    return 0;
}
