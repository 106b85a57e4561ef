/*
 * init.c — the preload's lifecycle.
 *
 * Constructor: read the GMP_* config once and create the recorder (whose
 * ring is made only on the first event worth keeping, so the shells, git
 * and compilers LD_PRELOAD also reaches leave no file, start no thread and
 * print nothing).  Set-user-ID processes (AT_SECURE) and GMP_ENABLED=0 record
 * nothing.  fork: the child forgets the parent's ring and episodes and makes
 * its own on first use.  exit: commit an open episode, then remove the live
 * ring file (its mapping stays, so a late allocation in another thread or
 * destructor can never touch freed memory).
 */
#include "gpu_family.h"
#include "collector.h"
#include "recorder.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>

/* Read while recording is off too (a CUPTI or dlsym path that asks the
 * mode): all zero, every choice its first. */
static gmp_config config_when_off;
gmp_preload gmp_pl GMP_STARTUP_DATA = {.cfg = &config_when_off};

/* glibc's, behind pthread_atfork: the handler goes when this object does */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso_handle);
extern void *__dso_handle;
__thread int gmp_in_hook __attribute__((tls_model("initial-exec")));
__thread uint16_t gmp_event_flags __attribute__((tls_model("initial-exec")));

static void after_fork_in_child(void)
{
    gmp_gettid_after_fork();
    __atomic_store_n(&gmp_pl.pid, (int)getpid(), __ATOMIC_RELAXED);
    if (!gmp_pl_active())
        return;
    gmp_recorder_after_fork(gmp_pl.rec);
    gmp_episode_after_fork();
    gmp_watchdog_after_fork();
    gmp_metrics_after_fork();
}

/* Runs once, when the dynamic linker initialises the preload. */
__attribute__((constructor)) static void on_load(void)
{
    GMP_IN_HOOK_SCOPE();
    if (getauxval(AT_SECURE)) {
        __atomic_store_n(&gmp_pl.state, GMP_PL_DISABLED, __ATOMIC_RELEASE);
        return;
    }
    /* the config lives in the recorder's static storage: no heap block
     * left for a leak checker, no page touched for what is not set */
    gmp_pl.rec = gmp_recorder_create_static_from_env();
    const gmp_config *cfg = gmp_pl.rec ? gmp_recorder_config(gmp_pl.rec) : NULL;
    if (!cfg || !cfg->enabled) {
        __atomic_store_n(&gmp_pl.state, GMP_PL_DISABLED, __ATOMIC_RELEASE);
        return;
    }
    gmp_pl.cfg = cfg;
    gmp_pl.host_event_min = cfg->host_event_min_bytes;
    gmp_pl.confirm_ns = (uint64_t)cfg->oom_confirm_ms * 1000000ull;
    gmp_pl.watchdog_min = cfg->watchdog_min_mb << 20;
    /* without the variable, its page of the config is not even read */
    gmp_pl.prom_file = getenv("GMP_PROM_FILE") && cfg->prom_file[0] ? cfg->prom_file : NULL;
    if (cfg->stacks)
        gmp_recorder_on_new_ring(gmp_pl.rec, gmp_stack_ring_ready);
    gmp_pl.pid = (int)getpid();
    if (gmp_cupti_prepare)
        gmp_cupti_prepare();
    else if (cfg->cuda_mode == GMP_CUDA_MODE_CUPTI)
        gmp_log("GMP_CUDA_MODE=cupti: built without CUPTI support; recording CUDA through "
                "the interposer");
    /* what pthread_atfork does (it is a stub linked into us, at the far end
     * of our text: a page fault of its own in every process) */
    __register_atfork(NULL, NULL, after_fork_in_child, __dso_handle);
    __atomic_store_n(&gmp_pl.state, GMP_PL_ACTIVE, __ATOMIC_RELEASE);
    if (cfg->on_crash == GMP_ON_CRASH_ALWAYS)
        gmp_crash_arm();
    gmp_metrics_start();
}

GMP_START_EXIT_TEXT void gmp_pl_finish(void)
{
    if (!gmp_pl_active())
        return;
    GMP_IN_HOOK_SCOPE();
    gmp_episode_commit_all("exit");
    if (gmp_pl.cfg->leak_check)
        gmp_leak_check_at_exit();
    /* the watcher may be writing a bundle whose deadline just passed:
     * exiting now would cut it off half-written */
    gmp_episode_wait_commits(5000);
    if (gmp_pl.prom_file)
        gmp_metrics_flush(); /* the last word, with this exit's bundles counted */
    __atomic_store_n(&gmp_pl.state, GMP_PL_EXITING, __ATOMIC_RELEASE);
    gmp_recorder_release_ring(gmp_pl.rec);
}

__attribute__((destructor)) GMP_START_EXIT_TEXT static void on_exit_process(void)
{
    gmp_pl_finish();
}

void *gmp_lazy_table(void **slot, int *state, size_t len)
{
    void *t = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(t != NULL))
        return t;
    int expected = 0; /* 0 none, 1 making, 2 ready, 3 failed */
    if (!__atomic_compare_exchange_n(state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        __atomic_store_n(state, 3, __ATOMIC_RELEASE);
        return NULL;
    }
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    __atomic_store_n(state, 2, __ATOMIC_RELEASE);
    return p;
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
        gmp_run_dir_path(gmp_recorder_config(gmp_pl.rec), run_dir, sizeof run_dir);
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
    if (!with_stacks.live_foreach)
        with_stacks.live_foreach = gmp_device_foreach_live;
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
        with_stacks.device_count = gmp_gpu_device_states(devices, 16, may_call);
    }
    const char *p = gmp_dump(gmp_pl.rec, &with_stacks, path, cap);
    if (p && req->kind == GMP_BUNDLE_OOM)
        __atomic_fetch_add(&bundles_written, 1, __ATOMIC_RELAXED);
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
        .time_ns = now_ns, /* 0: the recorder reads the clock */
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
