/*
 * device_memory.c — what the preload knows of each device's memory: free
 * and total as the program's own threads last read them through their
 * hook family (at most every 100 ms, and at each failure and pressure
 * check), with what this process held at that moment, and who else held
 * it as a wide collector (NVML, rocm-smi) sees it.  The watchdog and the
 * sampler read it; a bundle's device_state is made from it (the failed
 * device as its failure snapshot kept it).  The hooks only report their
 * readings here (gpu_family.c): they own the calls, this file the numbers.
 */
#include "collector.h"
#include "preload.h"

#include <string.h>

/* Free and total memory per device, sampled at most every 100 ms, with
 * what this process held then: a bundle written later (at exit, after the
 * program freed) must not count the difference as another process's. */
#define DEVICE_SAMPLE_NS (100ull * 1000 * 1000)
typedef struct device_sample {
    uint64_t at_ns, free_bytes, total, ours; /* atomics */
} device_sample;
static device_sample device_memory[GMP_BACKEND_COUNT][GMP_MAX_DEVICES];

int gmp_device_memory_due(gmp_backend backend, int device, uint64_t now, int force)
{
    if (device < 0 || device >= GMP_MAX_DEVICES)
        return 0;
    device_sample *m = &device_memory[backend][device];
    uint64_t last = __atomic_load_n(&m->at_ns, __ATOMIC_RELAXED);
    if (force) {
        __atomic_store_n(&m->at_ns, now, __ATOMIC_RELAXED);
        return 1;
    }
    return now - last >= DEVICE_SAMPLE_NS &&
           __atomic_compare_exchange_n(&m->at_ns, &last, now, 0, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

void gmp_device_memory_note(gmp_backend backend, int device, uint64_t free_bytes, uint64_t total)
{
    device_sample *m = &device_memory[backend][device];
    __atomic_store_n(&m->ours, gmp_device_in_use(backend, device), __ATOMIC_RELAXED);
    __atomic_store_n(&m->free_bytes, free_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&m->total, total, __ATOMIC_RELEASE);
}

static const gmp_collector *wide_collector(gmp_backend backend)
{
    if (backend == GMP_BACKEND_CUDA)
        return gmp_pl.cfg->nvml == GMP_NVML_OFF ? NULL : &gmp_collector_nvml;
    return backend == GMP_BACKEND_ROCM ? &gmp_collector_rocm : NULL;
}

/* Fills used/driver/others from a wide collector's sample of the device. */
static int widen(gmp_backend backend, int device, gmp_device_state *into)
{
    const gmp_collector *c = wide_collector(backend);
    gmp_device_state s;
    const char *why;
    if (!c || !c->is_available(&why) || c->sample(device, &s) < 0)
        return -1;
    /* wider than our own context's view: per process, or the whole device */
    if (!(s.known & (GMP_DS_DRIVER_PROCESS | GMP_DS_OTHERS)) && strcmp(s.source, "rocm-smi"))
        return -1;
    into->known |= s.known;
    if (s.known & GMP_DS_USED)
        into->used_bytes = s.used_bytes;
    into->driver_process_bytes = s.driver_process_bytes;
    into->other_processes_bytes = s.other_processes_bytes;
    into->other_process_count = s.other_process_count;
    if (!into->name[0])
        gmp_strlcpy(into->name, s.name, sizeof into->name);
    into->source = backend == GMP_BACKEND_CUDA ? "cuMemGetInfo+nvml" : "hipMemGetInfo+rocm-smi";
    return 0;
}

/* Who else held the device, from a wide collector's view of it. */
static void take_others(gmp_device_state *s, const gmp_device_state *from)
{
    s->known |= from->known & (GMP_DS_DRIVER_PROCESS | GMP_DS_OTHERS);
    s->driver_process_bytes = from->driver_process_bytes;
    s->other_processes_bytes = from->other_processes_bytes;
    s->other_process_count = from->other_process_count;
    s->source = from->source;
    if (!s->name[0])
        gmp_strlcpy(s->name, from->name, sizeof s->name);
}

/* Device d of backend b as its last sample saw it. */
static void device_state_now(int b, int d, gmp_device_state *s)
{
    const device_sample *m = &device_memory[b][d];
    uint64_t total = __atomic_load_n(&m->total, __ATOMIC_ACQUIRE);
    *s = (gmp_device_state){
        .backend = (gmp_backend)b,
        .device = d,
        .free_bytes = __atomic_load_n(&m->free_bytes, __ATOMIC_RELAXED),
        .total = total,
        /* as held when free_bytes was read: one moment's view */
        .process_bytes = __atomic_load_n(&m->ours, __ATOMIC_RELAXED),
        .sampled_ns = __atomic_load_n(&m->at_ns, __ATOMIC_RELAXED),
        .source = b == GMP_BACKEND_CUDA ? "cuMemGetInfo" : "hipMemGetInfo",
    };
    if (s->free_bytes <= total) {
        s->used_bytes = total - s->free_bytes;
        s->known = GMP_DS_USED;
    }
    const char *name = gmp_gpu_probe_device_name((gmp_backend)b, d);
    if (name)
        gmp_strlcpy(s->name, name, sizeof s->name);
}

gmp_device_state *gmp_device_memory_at_failure(gmp_backend backend, int device,
                                               gmp_device_state *out)
{
    if (device < 0 || device >= GMP_MAX_DEVICES ||
        !__atomic_load_n(&device_memory[backend][device].total, __ATOMIC_ACQUIRE))
        return NULL;
    device_state_now(backend, device, out);
    gmp_device_state wide = *out;
    if (widen(backend, device, &wide) == 0)
        take_others(out, &wide);
    return out;
}

uint32_t gmp_gpu_device_states(gmp_device_state *out, uint32_t max, int may_call,
                               const gmp_device_state *at_failure)
{
    uint32_t n = 0;
    for (int b = GMP_BACKEND_CUDA; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d < GMP_MAX_DEVICES && n < max; d++) {
            if (!__atomic_load_n(&device_memory[b][d].total, __ATOMIC_ACQUIRE))
                continue;
            gmp_device_state *s = &out[n++];
            /* the failed device as it was at its failure, who else held
             * it included; the others now, who else holds them when the
             * caller may call into NVML (not in a signal handler, nor when
             * host memory ran out) */
            int failed_here =
                at_failure && (int)at_failure->backend == b && at_failure->device == d;
            if (failed_here)
                *s = *at_failure;
            else
                device_state_now(b, d, s);
            gmp_device_state wide = *s;
            if (!(failed_here && (s->known & (GMP_DS_DRIVER_PROCESS | GMP_DS_OTHERS))) &&
                may_call && widen((gmp_backend)b, d, &wide) == 0)
                take_others(s, &wide);
        }
    return n;
}

void gmp_gpu_device_memory(gmp_backend backend, int device, uint64_t *free_bytes,
                           uint64_t *total)
{
    *total = __atomic_load_n(&device_memory[backend][device].total, __ATOMIC_ACQUIRE);
    *free_bytes = __atomic_load_n(&device_memory[backend][device].free_bytes, __ATOMIC_RELAXED);
}
