/*
 * spank_gmp.c — the Slurm way in: a SPANK plugin that gives `srun` and
 * `sbatch` a --gmp[=DUMP_DIR] option, and the hooks Slurm calls, each
 * doing its part where it runs (spank_gmp.h names the other files):
 *   srun, sbatch (as the user)   the option; srun's line when its step ends
 *   the task (as the user, just before exec)
 *                                the preload in its LD_PRELOAD, the dump
 *                                directory in GMP_DUMP_DIR
 *   slurmstepd (as root)         each task noted when forked; at its end,
 *                                root's verdict, and recover started as the
 *                                user to write the bundles its processes
 *                                could not (SIGKILL leaves only a ring)
 * A step asked for has the preload in every task; a `#SBATCH --gmp` batch
 * script has it too (its own python, that one's children), marked so that
 * the srun, sbatch and salloc it starts load none (the preload sees to
 * that); the steps its sruns start ask for their own through the option
 * Slurm forwards.  Jobs that do not ask are not touched.
 *
 * plugstack.conf:   optional /usr/local/lib/gpumemprof/spank_gmp.so
 * with, when the preload and gmp-inspect are not where `make install`
 * puts them beside it:  preload=/path/libgpumemprof_preload.so
 * inspect=/path/gmp-inspect.  Links only libc; in slurmstepd it speaks
 * through Slurm's log, in srun only the one summary line on srun's stderr.
 */
#include <slurm/spank.h>

#include "spank_gmp.h"

#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What Slurm looks up in the plugin; every other symbol stays hidden. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(gpumemprof, 1);

/* At the step's last task, how long the recovers still running may take
 * before they are killed: a recover writes a bundle in milliseconds, and
 * slurmstepd must not be held (Slurm's UnkillableStepTimeout is 60 s). */
#define STEP_END_WAIT_MS 500
#ifndef SLURM_BATCH_SCRIPT
#define SLURM_BATCH_SCRIPT 0xfffffffbu /* slurm/slurm.h's step id of a batch script */
#endif

static int asked;                  /* --gmp was given */
static char dump_dir[PATH_MAX];    /* its DUMP_DIR, or "" */
static char preload[PATH_MAX];     /* the preload for the tasks */
static char inspect[PATH_MAX];     /* gmp-inspect, for recover */

static int gmp_option(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    asked = 1;
    if (optarg && *optarg) {
        if (strlen(optarg) >= sizeof dump_dir || strchr(optarg, '\n')) {
            slurm_error("gpumemprof: --gmp=%.64s...: not a directory name", optarg);
            return -1;
        }
        snprintf(dump_dir, sizeof dump_dir, "%s", optarg);
    }
    return 0;
}

#define GMP_OPTION                                                                        \
    {"gmp", "[dump_dir]",                                                                 \
     "Record memory with gpumemprof in every task of the step; a task that runs out of "  \
     "memory, the kernel's OOM kill included, leaves a bundle in DUMP_DIR (default "      \
     "./oom_dumps)",                                                                      \
     2, 0, gmp_option}

/* srun's and slurmstepd's table; sbatch and salloc take only options a
 * plugin registers in slurm_spank_init (Slurm skips the table there). */
struct spank_option spank_options[] = {GMP_OPTION, SPANK_OPTIONS_TABLE_END};
static struct spank_option allocator_option = GMP_OPTION;

/* path: dir of this plugin + rel, when that file exists. */
static int beside(const char *rel, char *out, size_t cap)
{
    Dl_info info;
    if (!dladdr((void *)gmp_option, &info) || !info.dli_fname || info.dli_fname[0] != '/')
        return -1;
    const char *slash = strrchr(info.dli_fname, '/');
    int n = snprintf(out, cap, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, rel);
    return n > 0 && (size_t)n < cap && access(out, F_OK) == 0 ? 0 : -1;
}

/* The plugin's arguments (preload=, inspect=), else the files beside it
 * (a build directory) or where `make install` puts them from it. */
static void find_files(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (!strncmp(av[i], "preload=", 8))
            snprintf(preload, sizeof preload, "%s", av[i] + 8);
        else if (!strncmp(av[i], "inspect=", 8))
            snprintf(inspect, sizeof inspect, "%s", av[i] + 8);
        else
            slurm_error("gpumemprof: plugin argument %s is not preload= or inspect=", av[i]);
    }
    if (!preload[0] && beside("libgpumemprof_preload.so", preload, sizeof preload) &&
        beside("../libgpumemprof_preload.so", preload, sizeof preload))
        preload[0] = '\0';
    if (!inspect[0] && beside("gmp-inspect", inspect, sizeof inspect) &&
        beside("../../bin/gmp-inspect", inspect, sizeof inspect))
        inspect[0] = '\0';
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    find_files(ac, av);
    if (spank_context() == S_CTX_ALLOCATOR)
        spank_option_register(sp, &allocator_option);
    return 0;
}

static int is_batch_step(spank_t sp)
{
    uint32_t step = 0;
    return spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS &&
           step == SLURM_BATCH_SCRIPT;
}

/* In the task, as its user, just before exec: the preload in its
 * LD_PRELOAD, after what was there (an ASan runtime must stay first).  A
 * batch script's is marked (GMP_SLURM_SCRIPT), for the preload to keep
 * itself out of the launchers the script starts. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!asked)
        return 0;
    if (!preload[0] || access(preload, R_OK) != 0) {
        slurm_error("gpumemprof: --gmp: the preload %s cannot be read; the task runs "
                    "without it (set preload= in plugstack.conf)", preload[0] ? preload : "");
        return 0;
    }
    char have[PATH_MAX * 2] = "", value[PATH_MAX * 3];
    if (spank_getenv(sp, "LD_PRELOAD", have, sizeof have) != ESPANK_SUCCESS)
        have[0] = '\0';
    if (strstr(have, preload))
        snprintf(value, sizeof value, "%s", have);
    else
        snprintf(value, sizeof value, "%s%s%s", have, have[0] ? ":" : "", preload);
    spank_setenv(sp, "LD_PRELOAD", value, 1);
    if (dump_dir[0])
        spank_setenv(sp, "GMP_DUMP_DIR", dump_dir, 1);
    if (is_batch_step(sp))
        spank_setenv(sp, "GMP_SLURM_SCRIPT", "1", 1);
    return 0;
}

/* In slurmstepd, as root, for each task once it is in its cgroups and
 * before it execs: what root will need to know of its end. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    pid_t pid;
    if (asked && spank_get_item(sp, S_TASK_PID, &pid) == ESPANK_SUCCESS && pid > 0 &&
        !task_watch_note(pid))
        slurm_error("gpumemprof: task %d cannot be watched; its end is written up without "
                    "root's word", (int)pid);
    return 0;
}

/* A variable of the task's environment as "NAME=value" in out, when it is
 * set and fits; else out stays "". */
static void task_env(spank_t sp, const char *name, char *out, size_t cap)
{
    char value[PATH_MAX];
    out[0] = '\0';
    if (spank_getenv(sp, name, value, sizeof value) == ESPANK_SUCCESS && value[0] &&
        !strchr(value, '\n') && (size_t)snprintf(out, cap, "%s=%s", name, value) >= cap)
        out[0] = '\0';
}

/* The job's output file, for a batch step: slurmstepd's stderr is the
 * script's (Slurm makes it so); its path, to be opened by the user's
 * recover as the user.  "" when it is not a file. */
static void job_output(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/fd/2", out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    if (out[0] != '/' || strstr(out, " (deleted)"))
        out[0] = '\0';
}

/* recover for the task that ended: its arguments and environment made
 * here, before the fork (recover_launch.c's child makes no strings). */
static void start_recover(spank_t sp, const task_note *note, int status,
                          const task_verdict *verdict, uid_t uid, gid_t gid, const gid_t *gids,
                          int ngids)
{
    char pid_text[24], signal_text[24], say_to[PATH_MAX] = "";
    char *argv[8 + 2 * VICTIMS_PASSED_MAX];
    int n = 0;
    argv[n++] = "gmp-inspect";
    argv[n++] = "recover";
    if (note && WIFSIGNALED(status)) {
        snprintf(pid_text, sizeof pid_text, "%d", (int)note->pid);
        snprintf(signal_text, sizeof signal_text, "%d", WTERMSIG(status));
        argv[n++] = "--pid";
        argv[n++] = pid_text;
        argv[n++] = "--signal";
        argv[n++] = signal_text;
        if (verdict->evidence[0]) {
            argv[n++] = "--evidence";
            argv[n++] = (char *)verdict->evidence;
        }
    }
    for (int i = 0; i < verdict->n_victims; i++) {
        argv[n++] = "--oom-killed";
        argv[n++] = (char *)verdict->victims[i];
    }
    if (is_batch_step(sp)) { /* no srun to say it: the line goes in the job's output */
        job_output(say_to, sizeof say_to);
        if (say_to[0])
            argv[n++] = "--say";
    }
    argv[n] = NULL;
    /* the run directory as the task's preload resolved it, and the home
     * its bundles fall back to: the task's own variables */
    char home[PATH_MAX + 8], user[300], run_dir[PATH_MAX + 16], xdg[PATH_MAX + 24];
    task_env(sp, "HOME", home, sizeof home);
    task_env(sp, "USER", user, sizeof user);
    task_env(sp, "GMP_RUN_DIR", run_dir, sizeof run_dir);
    task_env(sp, "XDG_RUNTIME_DIR", xdg, sizeof xdg);
    if (home[0] && home[5] != '/')
        home[0] = '\0'; /* not an absolute path */
    char *envp[8];
    int e = 0;
    envp[e++] = "PATH=/usr/bin:/bin";
    envp[e++] = "LANG=C";
    if (home[0])
        envp[e++] = home;
    if (user[0])
        envp[e++] = user;
    if (run_dir[0])
        envp[e++] = run_dir;
    if (xdg[0])
        envp[e++] = xdg;
    envp[e] = NULL;
    recover_job job = {.uid = uid,
                       .gid = gid,
                       .gids = gids,
                       .ngids = ngids,
                       .inspect = inspect,
                       .argv = argv,
                       .envp = envp,
                       .home = home[0] ? home + 5 : "",
                       .task = note,
                       .say_to = say_to};
    recover_launch(&job);
}

/* In slurmstepd, as root, when a task was reaped.  A task a signal ended,
 * or whose cgroup the OOM killer visited (a batch script's python, a
 * worker), left rings and no bundles: recover, as the job's user, writes
 * them now, while the verdict root read is fresh, with that verdict as
 * its arguments.  Never waits on it, but at the step's last task. */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int status = 0;
    pid_t pid = 0;
    uint32_t tasks = 1;
    if (!asked || spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS)
        return 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS)
        tasks = 1;
    task_note *note = task_watch_find(pid);
    task_verdict verdict;
    memset(&verdict, 0, sizeof verdict);
    if (note) {
        note->exited = 1;
        task_watch_verdict(note, status, &verdict);
    }
    uid_t uid;
    gid_t gid, *gids = NULL;
    int ngids = 0;
    if ((WIFSIGNALED(status) || verdict.memory_seen) &&
        spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_GID, &gid) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids) == ESPANK_SUCCESS) {
        if (!inspect[0])
            slurm_error("gpumemprof: a task was killed, and gmp-inspect was not found to "
                        "write its bundle (set inspect= in plugstack.conf)");
        else
            start_recover(sp, note, status, &verdict, uid, gid, gids, ngids);
    }
    if (!note || task_watch_all_exited(tasks))
        recover_settle(STEP_END_WAIT_MS); /* the step's kill comes next */
    return 0;
}

/* srun, once the step has its ids (at exit they are no longer asked for). */
static char step_name[48];
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    uint32_t job = 0, step = 0;
    if (asked && spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS)
        snprintf(step_name, sizeof step_name, "%u.%u", job, step);
    return 0;
}

/* srun, when its step is over: one line in the job's output (srun's
 * stderr) when the step's tasks left bundles.  slurmstepd, at the step's
 * end: no recover outlives it, and what was noted of the tasks goes. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (!asked)
        return 0;
    if (spank_context() == S_CTX_REMOTE) {
        recover_settle(0);
        task_watch_end();
    }
    else if (spank_context() == S_CTX_LOCAL && step_name[0])
        step_summary(step_name, dump_dir);
    return 0;
}
#pragma GCC visibility pop
