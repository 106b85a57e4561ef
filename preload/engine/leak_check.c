/*
 * leak_check.c — GMP_LEAK_CHECK=1: at exit, the GPU allocations the program
 * never freed (like compute-sanitizer's leak check), as a leak report
 * (leak_report_<time>_<pid>_<backend>_<seq>/ in the dump directory:
 * leaks.json, stacks.json, modules.json, environment.json, manifest.json)
 * and one line on stderr.  Memory a context teardown (cudaDeviceReset,
 * process exit) gives back without a free call counts as leaked, as it does
 * for the sanitizer.  A process that never allocated GPU memory says
 * nothing: LD_PRELOAD reaches every shell and compiler of a job.
 */
#include "preload.h"

typedef struct leak_tally {
    uint64_t count, bytes;
    uint64_t backend_bytes[GMP_BACKEND_COUNT];
} leak_tally;

static void count_leak(const gmp_live_allocation *a, void *ctx)
{
    leak_tally *t = ctx;
    t->count++;
    t->bytes += a->size;
    if (a->backend < GMP_BACKEND_COUNT)
        t->backend_bytes[a->backend] += a->size;
}

void gmp_leak_check_at_exit(void)
{
    uint64_t made = gmp_device_allocations_ever();
    if (!made)
        return;
    leak_tally t = {0};
    gmp_gpu_foreach_live(count_leak, &t, NULL); /* host heap blocks are no GPU leak */
    char count[24], bytes[32];
    if (!t.count) {
        gmp_fmt_u64(made, count);
        gmp_log("leak check: all %s GPU allocations were freed", count);
        return;
    }
    gmp_backend backend = GMP_BACKEND_CUDA;
    for (int b = GMP_BACKEND_CUDA; b < GMP_BACKEND_COUNT; b++)
        if (t.backend_bytes[b] > t.backend_bytes[backend])
            backend = (gmp_backend)b;
    gmp_fmt_u64(t.count, count);
    gmp_fmt_bytes(t.bytes, bytes);
    char message[128], path[GMP_PATH_MAX];
    gmp_strjoin(message, sizeof message, bytes, " leaked in ", count, " allocations",
                (char *)NULL);
    gmp_dump_request req = {
        .reason = "leak_check",
        .exception_type = "leak_check",
        .exception_message = message,
        .backend = backend,
        .confirmed_by = "exit",
        .kind = GMP_BUNDLE_LEAKS,
        .live_foreach = gmp_gpu_foreach_live,
    };
    if (gmp_pl_dump(&req, path, sizeof path))
        gmp_log("leak check: %s GPU allocations never freed (%s); report: %s", count, bytes,
                path);
    else
        gmp_log("leak check: %s GPU allocations never freed (%s); no report written", count,
                bytes);
}
