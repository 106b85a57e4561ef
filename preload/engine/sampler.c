/*
 * sampler.c — GMP_SAMPLE_MS: a `sample` event per device and one for the
 * host every N ms, from the monitor thread (watchdog.c), so a bundle shows
 * how free memory moved before the failure, other processes included.
 * The thread has no CUDA context and never makes one: a GPU is read through
 * NVML when the program has it loaded, else as the program's own thread
 * last saw it.  Event fields: address = free bytes, size = total, in_use =
 * this process's bytes there (host: its RSS).
 */
#include "collector.h"
#include "preload.h"

static void record_sample(gmp_backend backend, int device, uint64_t free_bytes,
                          uint64_t total, uint64_t process_bytes)
{
    gmp_pl_event(GMP_EV_SAMPLE, backend, device, GMP_API_UNKNOWN, free_bytes, total, 0,
                 process_bytes);
}

void gmp_sampler_tick(void)
{
    gmp_device_state s;
    if (gmp_collector_host.sample(-1, &s) == 0)
        record_sample(GMP_BACKEND_CPU, -1, s.free_bytes, s.total,
                      s.known & GMP_DS_DRIVER_PROCESS ? s.driver_process_bytes : 0);
    const char *why;
    int nvml = gmp_pl.cfg->nvml != GMP_NVML_OFF && gmp_collector_nvml.is_available(&why);
    for (int b = GMP_BACKEND_CUDA; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d < GMP_MAX_DEVICES; d++) {
            uint64_t free_bytes, total;
            gmp_gpu_device_memory((gmp_backend)b, d, &free_bytes, &total);
            if (!total)
                continue; /* a device the program never used */
            if (b == GMP_BACKEND_CUDA && nvml && gmp_collector_nvml.sample(d, &s) == 0) {
                free_bytes = s.free_bytes;
                total = s.total;
            }
            record_sample((gmp_backend)b, d, free_bytes, total,
                          gmp_device_in_use((gmp_backend)b, d));
        }
}
