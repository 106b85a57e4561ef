/*
 * services.c — what every preload file calls on: emitting an event into the
 * recorder, writing a bundle (with the preload's stacks, live allocations
 * as they were at the failure, and device states), tables mapped on first use, the preload's own
 * threads, the run directory, and the C API's way in for programs.  The
 * lifecycle (init.c) starts and ends them; the hooks use them.
 */
#include "bundle.h"
#include "collector.h"
#include "preload.h"
#include "recorder.h"
#include "ring_recovery.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *gmp_lazy_table(void **slot, int *state, size_t len)
{
    void *t = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(t != NULL) || __atomic_load_n(state, __ATOMIC_RELAXED))
        return t;
    /* Every thread that finds no table maps one and the first published
     * wins: no thread ever goes without (a live table that dropped a
     * device allocation made while another thread was mapping it left the
     * block's free unmatched and its bytes in use for good), and none
     * waits, not even a signal handler that interrupted the first. */
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        __atomic_store_n(state, 1, __ATOMIC_RELAXED);
        return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    }
    void *first = NULL;
    if (__atomic_compare_exchange_n(slot, &first, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return p;
    munmap(p, len); /* untouched: only its address space goes */
    return first;
}

int gmp_spawn_thread(void *(*main_fn)(void *), size_t stack_size)
{
    pthread_attr_t attr;
    pthread_t tid;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, stack_size);
    int rc;
    {
        GMP_IN_HOOK_SCOPE(); /* pthread_create's own allocations are not the program's */
        rc = pthread_create(&tid, &attr, main_fn, NULL);
    }
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

static uint64_t bundles_written; /* atomic */

void gmp_pl_probe_python(void)
{
    /* found in the symbol tables: no allocation, so fine where malloc just
     * failed; not in a signal handler (the loader's lock) */
    static int done; /* atomic */
    if (!gmp_in_signal && !__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        gmp_python_probe((const char *(*)(void))gmp_global_symbol("Py_GetVersion"));
}

const char *gmp_pl_run_dir(void)
{
    static char run_dir[GMP_PATH_MAX];
    static int state; /* atomic: 0 none, 1 filling, 2 ready */
    int expected = 0;
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2 &&
        __atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        gmp_recorder_run_dir(gmp_pl.rec, run_dir, sizeof run_dir);
        __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2 ? run_dir : "";
}

const char *gmp_pl_dump(const gmp_dump_request *req, char *path, size_t cap)
{
    gmp_pl_probe_python();
    gmp_dump_request with_stacks = *req;
    if (gmp_pl.cfg->stacks && !with_stacks.stack_lookup)
        with_stacks.stack_lookup = gmp_stack_lookup;
    if (with_stacks.stack_lookup == gmp_stack_lookup && !with_stacks.python_frame_lookup)
        with_stacks.python_frame_lookup = gmp_python_frame_lookup;
    if (!with_stacks.live_foreach)
        with_stacks.live_foreach = gmp_device_foreach_live;
    /* the failure's moment: what was held, the host and the device then */
    const gmp_failure_snapshot *then = gmp_failure_snapshot_find(req->backend, &req->failed);
    const uint64_t *stacks;
    int live = then && with_stacks.live_foreach == gmp_device_foreach_live && !gmp_in_signal
                   ? gmp_failure_snapshot_live(then, &stacks)
                   : -1;
    if (live >= 0) {
        with_stacks.live_snapshot_fd = live;
        with_stacks.live_snapshot_stacks = stacks;
        with_stacks.host = gmp_failure_snapshot_host(then);
    }
    /* versions, names and NVML's view: not in a signal handler, nor for
     * host memory (the loader and NVML may allocate: malloc is what failed) */
    int may_call = !gmp_in_signal && req->backend != GMP_BACKEND_CPU;
    if (may_call)
        gmp_gpu_probe();
    else if (!gmp_in_signal) /* the loader's list is locked: never in a handler */
        gmp_torch_probe();
    gmp_device_state devices[16];
    if (!with_stacks.devices) {
        with_stacks.devices = devices;
        with_stacks.device_count =
            gmp_gpu_device_states(devices, 16, may_call, gmp_failure_snapshot_device(then));
    }
    if (with_stacks.outcome.state == GMP_OUTCOME_RUNNING)
        gmp_outcome_now(&with_stacks.outcome);
    /* a SIGTERM now would end the process with the bundle half written,
     * under its hidden name: never seen, the failure with it */
    sigset_t held;
    if (!gmp_in_signal)
        gmp_stop_signals_hold(&held);
    const char *p = gmp_dump(gmp_pl.rec, &with_stacks, path, cap);
    if (!gmp_in_signal)
        gmp_stop_signals_release(&held);
    gmp_failure_snapshot_done(then);
    if (p && req->kind == GMP_BUNDLE_OOM) {
        __atomic_fetch_add(&bundles_written, 1, __ATOMIC_RELAXED);
        gmp_outcome_note_bundle(p, !req->confirmed_by ||
                                       strcmp(req->confirmed_by, GMP_CONFIRMED_BY_WATCHDOG));
        /* a failure told, whoever told it (an episode, a framework's words,
         * the program's own report): no pressure warning after it */
        if (!req->confirmed_by || strcmp(req->confirmed_by, GMP_CONFIRMED_BY_WATCHDOG)) {
            gmp_watchdog_death_told();
            gmp_watchdog_failed(req->backend, req->failed.present ? req->failed.device : -1);
        }
    }
    return p;
}

uint64_t gmp_pl_bundles_written(void)
{
    return __atomic_load_n(&bundles_written, __ATOMIC_RELAXED);
}

void gmp_pl_event(gmp_event_type type, gmp_backend backend, int device, gmp_api api,
                  uint64_t address, uint64_t size, int32_t result, uint64_t in_use)
{
    gmp_pl_event_at(0, 0, type, backend, device, api, address, size, result, in_use);
}

void gmp_pl_event_at(uint64_t now_ns, uint32_t stack_id, gmp_event_type type,
                     gmp_backend backend, int device, gmp_api api, uint64_t address,
                     uint64_t size, int32_t result, uint64_t in_use)
{
    gmp_event ev = {
        .time_ns = now_ns ? now_ns : gmp_now_realtime_ns(),
        .thread_id = gmp_gettid(),
        .stack_id = stack_id,
        .address = address,
        .size = size,
        .in_use = in_use,
        .result = result,
        .device = (int16_t)device,
        .api = (uint16_t)api,
        .type = (uint8_t)type,
        .backend = (uint8_t)backend,
        .flags = gmp_event_flags,
    };
    gmp_record(gmp_pl.rec, &ev);
}

/* For programs: dlsym(RTLD_DEFAULT, "gmp_preload_recorder") finds the
 * recorder of the preload, to add context, metadata or their own events. */
GMP_EXPORT gmp_recorder *gmp_preload_recorder(void)
{
    return gmp_pl_active() ? gmp_pl.rec : NULL;
}
