/*
 * gpu_family.c — the generic path of the GPU hook tables (gpu_family.h):
 * finding the real functions, the current device, and turning each call's
 * outcome into live-allocation bookkeeping, events and OOM episodes.
 */
#include "gpu_family.h"
#include "collector.h"

#include <string.h>

int gmp_cuda_via_cupti;

static int current_device(gmp_gpu_family *f)
{
    int (*get)(int *) = __atomic_load_n(&f->get_device, __ATOMIC_ACQUIRE);
    if (!get) {
        get = (int (*)(int *))gmp_real_function(f->get_device_name);
        if (!get)
            return 0;
        __atomic_store_n(&f->get_device, get, __ATOMIC_RELEASE);
    }
    int device = 0;
    GMP_IN_HOOK_SCOPE();
    int status = get(&device);
    return status == 0 && device >= 0 ? device : 0;
}

/* Free and total memory per device, sampled at most every 100 ms, with
 * what this process held then: a bundle written later (at exit, after the
 * program freed) must not count the difference as another process's. */
#define DEVICE_SAMPLE_NS (100ull * 1000 * 1000)
typedef struct device_sample {
    uint64_t at_ns, free_bytes, total, ours; /* atomics */
} device_sample;
static device_sample device_memory[GMP_BACKEND_COUNT][GMP_MAX_DEVICES];

/* force: at a failure or a pressure check, whatever the last sample's age */
static void sample_device(gmp_gpu_family *f, int device, uint64_t now, int force)
{
    if (device < 0 || device >= GMP_MAX_DEVICES)
        return;
    uint64_t last = __atomic_load_n(&device_memory[f->backend][device].at_ns, __ATOMIC_RELAXED);
    if (!force && (now - last < DEVICE_SAMPLE_NS ||
                   !__atomic_compare_exchange_n(&device_memory[f->backend][device].at_ns,
                                                &last, now, 0, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED)))
        return;
    if (force)
        __atomic_store_n(&device_memory[f->backend][device].at_ns, now, __ATOMIC_RELAXED);
    int (*info)(size_t *, size_t *) = __atomic_load_n(&f->mem_info, __ATOMIC_ACQUIRE);
    if (!info) {
        info = (int (*)(size_t *, size_t *))gmp_real_function(f->mem_info_name);
        if (!info)
            return;
        __atomic_store_n(&f->mem_info, info, __ATOMIC_RELEASE);
    }
    if (!force)
        gmp_gpu_probe(); /* names and versions, once the libraries are there */
    size_t free_bytes = 0, total = 0;
    if (info(&free_bytes, &total) == 0 && total) { /* this thread's current device */
        __atomic_store_n(&device_memory[f->backend][device].ours,
                         gmp_device_in_use(f->backend, device), __ATOMIC_RELAXED);
        __atomic_store_n(&device_memory[f->backend][device].free_bytes, free_bytes,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&device_memory[f->backend][device].total, total, __ATOMIC_RELEASE);
    }
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

/* GMP_NVML=load: the user asked us to load NVML (never done otherwise) */
static void load_nvml_once(void)
{
    static int loaded; /* atomic */
    if (!__atomic_load_n(&loaded, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&loaded, 1, __ATOMIC_RELAXED))
        gmp_nvml_load();
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

/* The device a request just failed on, read now: its memory (the frees a
 * framework makes before it raises come after), and who else held it, from
 * a wide collector.  out, or NULL when it could not be read. */
static gmp_device_state *device_at_failure(gmp_gpu_family *f, int device, gmp_device_state *out)
{
    if (device < 0 || device >= GMP_MAX_DEVICES)
        return NULL;
    sample_device(f, device, gmp_now_realtime_ns(), 1);
    if (!__atomic_load_n(&device_memory[f->backend][device].total, __ATOMIC_ACQUIRE))
        return NULL;
    device_state_now(f->backend, device, out);
    gmp_device_state wide = *out;
    if (widen(f->backend, device, &wide) == 0)
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

/* Whether the memory query (the current device's) speaks of the device an
 * allocation was on: always for the current device's calls, and for those
 * that name their device (cuMemCreate, PyTorch's expandable segments' only
 * allocation) when it is the current one.  Host memory: never. */
static int samples_device(gmp_gpu_family *f, int where, int device)
{
    return where == GMP_ON_DEVICE || (where >= 0 && current_device(f) == device);
}

void gmp_gpu_alloc_done(gmp_gpu_family *f, gmp_api api, int where, gmp_gpu_status status,
                        uint64_t ptr, uint64_t requested, uint64_t size)
{
    if (gmp_in_hook || !gmp_pl_active())
        return; /* nested in another GPU call: that one is the event */
    GMP_IN_HOOK_SCOPE();
    int device = where == GMP_ON_DEVICE ? current_device(f) : where;
    if (status == 0) {
        uint64_t now = gmp_now_realtime_ns();
        uint32_t stack_id = gmp_stack_id_here();
        gmp_device_add(f->backend, device, ptr, size, api, now, stack_id);
        uint64_t in_use = gmp_device_in_use(f->backend, device);
        gmp_pl_event_at(now, stack_id, GMP_EV_ALLOC, f->backend, device, api, ptr, size, 0,
                        in_use);
        /* GPU memory in use: pressure is worth watching, against the
         * device as it is now */
        int check = gmp_watchdog_due(size, now);
        if (samples_device(f, where, device))
            sample_device(f, device, now, check);
        if (check)
            gmp_watchdog_check();
        gmp_watchdog_start_sampler();
        if (f->backend == GMP_BACKEND_CUDA && gmp_pl.cfg->nvml == GMP_NVML_LOAD)
            load_nvml_once();
        if (gmp_any_episode_open()) {
            gmp_episode_success(f->backend, device, size, in_use);
            gmp_episode_check_deadlines();
        }
    } else {
        /* the device as it was when the request failed, for the bundle */
        gmp_device_state then, *read = NULL;
        if (samples_device(f, where, device))
            read = device_at_failure(f, device, &then);
        gmp_episode_failure(f->backend, device, api, requested, status,
                            gmp_device_in_use(f->backend, device), read);
    }
}

/* A free that succeeded, of a block taken from the table (or NULL: not
 * one of ours). */
static void freed(gmp_gpu_family *f, gmp_api api, uint64_t ptr, const gmp_live_taken *taken)
{
    GMP_IN_HOOK_SCOPE();
    if (taken)
        gmp_pl_event(GMP_EV_FREE, f->backend, taken->device, api, ptr, taken->size, 0,
                     gmp_device_in_use(f->backend, taken->device));
    if (GMP_UNLIKELY(gmp_watchdog_above()) && gmp_watchdog_due(0, 0)) {
        /* memory held above the threshold a while is seen when it goes */
        sample_device(f, current_device(f), gmp_now_realtime_ns(), 1);
        gmp_watchdog_check();
    }
}

int gmp_gpu_free_begin(gmp_gpu_family *f, gmp_api api, uint64_t ptr, gmp_live_taken *taken)
{
    if (gmp_in_hook || !gmp_pl_active())
        return 0;
    GMP_IN_HOOK_SCOPE();
    return gmp_device_take(f->backend, api, ptr, taken) == 0;
}

void gmp_gpu_free_end(gmp_gpu_family *f, gmp_api api, gmp_gpu_status status, uint64_t ptr,
                      const gmp_live_taken *taken)
{
    if (taken && status != 0) {
        gmp_device_put_back(taken); /* the block lives on */
        return;
    }
    if (!gmp_in_hook && status == 0 && ptr && gmp_pl_active())
        freed(f, api, ptr, taken);
}

void gmp_gpu_map_done(gmp_gpu_family *f, gmp_api api, gmp_event_type type,
                      gmp_gpu_status status, uint64_t ptr, uint64_t size)
{
    if (gmp_in_hook || !gmp_pl_active())
        return;
    GMP_IN_HOOK_SCOPE();
    int device = current_device(f);
    if (status == 0)
        gmp_pl_event(type, f->backend, device, api, ptr, size, 0,
                     gmp_device_in_use(f->backend, device));
    else if (type == GMP_EV_MAP) /* failing for memory (page tables) is an OOM too */
        gmp_episode_failure(f->backend, device, api, size, status,
                            gmp_device_in_use(f->backend, device), NULL);
}
