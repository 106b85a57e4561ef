/*
 * gpu_family.c — the generic path of the GPU hook tables (gpu_family.h):
 * finding the real functions, the current device, and turning each call's
 * outcome into live-allocation bookkeeping, events and OOM episodes.
 */
#include "gpu_family.h"
#include "collector.h"


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

/* force: at a failure or a pressure check, whatever the last sample's age */
static void sample_device(gmp_gpu_family *f, int device, uint64_t now, int force)
{
    if (!gmp_device_memory_due(f->backend, device, now, force))
        return;
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
    if (info(&free_bytes, &total) == 0 && total) /* this thread's current device */
        gmp_device_memory_note(f->backend, device, free_bytes, total);
}

/* The device a request just failed on, read now: its memory (the frees a
 * framework makes before it raises come after), and who else held it.
 * out, or NULL when it could not be read. */
static gmp_device_state *device_at_failure(gmp_gpu_family *f, int device, gmp_device_state *out)
{
    sample_device(f, device, gmp_now_realtime_ns(), 1);
    return gmp_device_memory_at_failure(f->backend, device, out);
}

/* GMP_NVML=load: the user asked us to load NVML (never done otherwise) */
static void load_nvml_once(void)
{
    static int loaded; /* atomic */
    if (!__atomic_load_n(&loaded, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&loaded, 1, __ATOMIC_RELAXED))
        gmp_nvml_load();
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
