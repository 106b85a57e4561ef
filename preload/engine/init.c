/*
 * init.c — the preload's lifecycle.
 *
 * Constructor: read the GMP_* config once and create the recorder (whose
 * ring is made only on the first event worth keeping, so the shells, git
 * and compilers LD_PRELOAD also reaches leave no file, start no thread and
 * print nothing).  Set-user-ID processes (AT_SECURE), Slurm's launchers
 * (srun, sbatch, salloc) and GMP_ENABLED=0 record nothing.  fork: the
 * child forgets the parent's ring and episodes and makes its own on first
 * use.  exit: commit an open episode, then remove the live ring file (its
 * mapping stays, so a late allocation in another thread or destructor can
 * never touch freed memory).  A Go program keeps its ring
 * in memory only: its runtime ends the process with its own exit_group,
 * never through the C library, so a ring file would outlive every healthy
 * run and read as a death (the check is made when the first ring is, so
 * the processes that never make one pay nothing for it).
 */
#include "collector.h"
#include "preload.h"
#include "recorder.h"
#include "ring.h"
#include "ring_recovery.h"
#include "start_path.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/auxv.h>

/* Read while recording is off too (a CUPTI or dlsym path that asks the
 * mode): all zero, every choice its first. */
static gmp_config config_when_off;
gmp_preload gmp_pl GMP_STARTUP_DATA = {.cfg = &config_when_off};

/* glibc's, behind pthread_atfork: the handler goes when this object does */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso_handle) GMP_BOUND_AT_LOAD; /* see start_path.h */
extern void *__dso_handle;
__thread int gmp_in_hook __attribute__((tls_model("initial-exec")));
__thread uint16_t gmp_event_flags __attribute__((tls_model("initial-exec")));

static void after_fork_in_child(void)
{
    gmp_walks_fork_child();
    gmp_gettid_after_fork();
    gmp_clock_after_fork();
    __atomic_store_n(&gmp_pl.pid, gmp_start_getpid(), __ATOMIC_RELAXED);
    if (!gmp_pl_active())
        return;
    gmp_recorder_after_fork(gmp_pl.rec);
    gmp_outcome_after_fork();
    gmp_episode_after_fork();
    gmp_watchdog_after_fork();
    gmp_metrics_after_fork();
}

GMP_START_EXIT_TEXT static void set_state(enum gmp_preload_state state)
{
    __atomic_store_n(&gmp_pl.state, state, __ATOMIC_RELEASE);
    gmp_host_fast_path_refresh();
}

/* The main program is Go built with cgo (the only Go the dynamic linker
 * loads us into): the cgo runtime exports _cgo_topofstack from it.  A Go
 * library in a C program exports it too, from its own object, and there the
 * C library still ends the process. */
int gmp_main_program_is_go(void)
{
    void *sym = gmp_dlsym_real(RTLD_DEFAULT, "_cgo_topofstack");
    Dl_info info;
    struct link_map *map = NULL;
    return sym && dladdr1(sym, &info, (void **)&map, RTLD_DL_LINKMAP) && map && !map->l_prev;
}

/* The first ring was just made: in a Go program its file goes at once (the
 * mapping stays: the process's own bundles still hold its events), and
 * gmp-run, which then finds none, keeps a proxy for it.  Not decided in a
 * signal handler (the loader's lock): there the file stays. */
static void ring_ready(gmp_ring *ring)
{
    GMP_IN_HOOK_SCOPE();
    if (!gmp_in_signal && ring->is_file && ring->path[0] && gmp_main_program_is_go()) {
        unlink(ring->path);
        ring->is_file = 0;
        ring->path[0] = '\0';
    }
    if (gmp_pl.cfg->stacks)
        gmp_stack_ring_ready(ring);
    if (ring->is_file) /* a stop must not leave it behind */
        gmp_crash_ring_made();
}

static const char prom_file_equals[] GMP_START_EXIT_RODATA = "GMP_PROM_FILE=";

GMP_START_EXIT_TEXT static int environment_has(const char *name_equals)
{
    for (char **e = environ; e && *e; e++)
        if (gmp_start_begins(*e, name_equals))
            return 1;
    return 0;
}

/* Runs once, when the dynamic linker initialises the preload. */
__attribute__((constructor)) static void on_load(void)
{
    GMP_IN_HOOK_SCOPE();
    /* what pthread_atfork does (it is a stub linked into us, at the far end
     * of our text: a page fault of its own in every process); first, and
     * enabled or not: the hooks look their real functions up either way */
    __register_atfork(gmp_walks_fork_prepare, gmp_walks_fork_parent, after_fork_in_child,
                      __dso_handle);
    gmp_stderr_start(); /* before any line of ours: the config's */
    if (getauxval(AT_SECURE) || gmp_slurm_launcher_start()) {
        set_state(GMP_PL_DISABLED);
        return;
    }
    /* the config lives in the recorder's static storage: no heap block
     * left for a leak checker, no page touched for what is not set */
    gmp_pl.rec = gmp_recorder_create_static_from_env();
    const gmp_config *cfg = gmp_pl.rec ? gmp_recorder_config(gmp_pl.rec) : NULL;
    if (!cfg || !cfg->enabled) {
        set_state(GMP_PL_DISABLED);
        return;
    }
    gmp_pl.cfg = cfg;
    gmp_pl.host_event_min = cfg->host_event_min_bytes;
    gmp_pl.confirm_ns = (uint64_t)cfg->oom_confirm_ms * 1000000ull;
    gmp_pl.watchdog_min = cfg->watchdog_min_mb << 20;
    /* without the variable, its page of the config is not even read */
    gmp_pl.prom_file = environment_has(prom_file_equals) && cfg->prom_file[0] ? cfg->prom_file
                                                                               : NULL;
    gmp_recorder_on_new_ring(gmp_pl.rec, ring_ready);
    gmp_pl.pid = gmp_start_getpid();
    if (gmp_cupti_prepare)
        gmp_cupti_prepare();
    else if (cfg->cuda_mode == GMP_CUDA_MODE_CUPTI)
        gmp_log("GMP_CUDA_MODE=cupti: built without CUPTI support; recording CUDA through "
                "the interposer");
    set_state(GMP_PL_ACTIVE);
    gmp_outcome_watch_exit();
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
    set_state(GMP_PL_EXITING);
    gmp_recorder_release_ring(gmp_pl.rec);
    /* a process that outlived its gmp-run, whose ring was the job's last */
    if (gmp_recorder_ring(gmp_pl.rec))
        gmp_job_dir_leave(gmp_pl_run_dir());
}

__attribute__((destructor)) GMP_START_EXIT_TEXT static void on_exit_process(void)
{
    gmp_pl_finish();
}
