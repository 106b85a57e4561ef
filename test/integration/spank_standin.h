/*
 * spank_standin.h — the stand-in slurmstepd of test_spank: the fake job the
 * plugin asks about, and what the test does as slurmstepd and srun do.
 */
#ifndef GMP_TEST_SPANK_STANDIN_H
#define GMP_TEST_SPANK_STANDIN_H

#include <slurm/spank.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What Slurm tells the plugin of the job, and where the stand-in runs it. */
typedef struct standin {
    spank_context_t context;
    uint32_t job_id, step_id, local_tasks;
    uid_t uid;
    gid_t gid, gids[2];
    int ngids;
    pid_t task_pid;
    int task_status;
    char env[32][1024]; /* the job's environment, "NAME=value" */
    int nenv;
    char build[1024];       /* the plugin is BUILD/spank_gmp.so (absolute) */
    char task_dir[512];     /* where a task starts */
    char task_cgroup[512];  /* the memory cgroup a task is placed in */
    pid_t main_pid;         /* the test's own: the tripwire ignores it */
    char nss_mark[600];     /* made when a forked child looked a name up */
} standin;
extern standin slurm;
extern spank_t handle;
extern void *plugin;

typedef int (*hook_fn)(spank_t, int, char **);
/* The plugin's hook name (the test fails when there is none). */
hook_fn hook(const char *name);
/* A fresh plugin, as a new slurmstepd (or srun) loads it: inspect= names
 * what it runs for recover; --gmp=DUMP_DIR given. */
void load_plugin(spank_context_t context, const char *inspect, const char *dump_dir);
/* The step's end, as slurmstepd reaches it (spank_fini), then unloaded. */
void unload_plugin(void);
/* The job's environment: the account's HOME and run directory, and one
 * more "NAME=value" (or NULL). */
void job_env(const char *home, const char *rundir, const char *extra);

long long now_ms(void);
void write_text(const char *path, const char *text);

typedef struct task_run {
    const char *const *argv;
    int kill_after_ms;      /* > 0: a person's kill -9, this long after it started */
    void (*meanwhile)(void); /* while it runs */
    pid_t pid;
    int status, exit_ms;
} task_run;

/* One task, as slurmstepd runs it (forked, in its cgroup, noted at
 * post-fork, released to exec as the account), then its end handed to the
 * plugin's task-exit, timed. */
void run_task(task_run *r);

/* The spy's report, from the task directory (spank_spy.c), into report;
 * reported: the rest of the line that begins with label ("" none). */
extern char report[65536];
void read_report(void);
const char *reported(const char *label, char *out, size_t cap);

/* A memory cgroup of its own, limited to limit bytes (v1 or v2), its
 * directory in out; -1 where there is no memory controller to use. */
int memcg_make(const char *name, const char *limit, char *out, size_t cap);

#endif
