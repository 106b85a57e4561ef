/*
 * spank_gmp.h — what the files of the Slurm plugin share.  One plugin,
 * loaded by three programs with three sets of rights:
 *   spank_gmp.c       the --gmp option and the hooks Slurm calls: which work
 *                     runs where
 *   task_watch.c      slurmstepd, as root: what the kernel log and each
 *                     task's memory cgroup say of the task's end
 *   recover_launch.c  slurmstepd: `gmp-inspect recover` as the job's user,
 *                     holding nothing of root's, never holding slurmstepd
 *   step_summary.c    srun, as the user: the one line at the end of a step
 * Root's side hands the user's side strings (a verdict, paths to open as
 * the user), never a descriptor, memory or right.  Links only libc.
 */
#ifndef GMP_SPANK_GMP_H
#define GMP_SPANK_GMP_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define SPANK_HIDDEN __attribute__((visibility("hidden")))

#define TASK_CGROUPS_MAX 16  /* hierarchies a task is in (cgroup v1 has ~13) */
#define CGROUP_PATH_MAX 768
#define VICTIMS_PASSED_MAX 32 /* --oom-killed arguments for one recover */

/* One task of the step, noted in slurmstepd when it was forked (its
 * cgroups are final by then; it has not exec'd yet). */
typedef struct task_note {
    pid_t pid;
    int exited;
    /* its memory cgroup as the kernel log names it, relative to the
     * hierarchy ("/slurm/uid_1000/job_5/step_0/task_0"); "" unknown */
    char memcg[CGROUP_PATH_MAX];
    char oom_counter[CGROUP_PATH_MAX]; /* memory.oom_control or memory.events; "" none */
    uint64_t kills_at_start;           /* its oom_kill then; UINT64_MAX unknown */
    /* cgroup.procs of each hierarchy it is in: where its recover goes */
    char procs[TASK_CGROUPS_MAX][CGROUP_PATH_MAX];
    int n_procs;
} task_note;

/* What root found of a task's end, as recover's arguments. */
typedef struct task_verdict {
    char evidence[1024]; /* of the task's own death ("oom_killer: ..."); "" none */
    int n_victims;       /* other processes of its cgroup the OOM killer killed */
    char victims[VICTIMS_PASSED_MAX][48]; /* "PID@USEC" */
    int memory_seen;     /* any sign of the OOM killer in the task's cgroup */
} task_verdict;

/* task_watch.c, in slurmstepd as root.  task_watch_note: at post-fork,
 * the task pid's cgroups and counter (and, the first time, the kernel log
 * followed from its end on); NULL when it cannot be noted.  task_watch_find:
 * the note of a pid.  task_watch_verdict: at the task's end (status its wait
 * status), what the log said since of it and of its cgroup, and its
 * cgroup's count. */
SPANK_HIDDEN task_note *task_watch_note(pid_t pid);
SPANK_HIDDEN task_note *task_watch_find(pid_t pid);
SPANK_HIDDEN void task_watch_verdict(const task_note *t, int status, task_verdict *v);
SPANK_HIDDEN int task_watch_all_exited(uint32_t local_tasks);
/* At the step's end: the notes and the kernel log let go. */
SPANK_HIDDEN void task_watch_end(void);

/* recover_launch.c.  One recover to start: who it runs as, its arguments
 * and environment (strings made in slurmstepd before the fork), the task
 * whose cgroups it joins, and a file to append its line to, opened as the
 * user ("" none). */
typedef struct recover_job {
    uid_t uid;
    gid_t gid;
    const gid_t *gids;
    int ngids;
    const char *inspect;
    char *const *argv;
    char *const *envp;
    const char *home; /* where it starts ("" for /) */
    const task_note *task;
    const char *say_to;
} recover_job;
/* Fork and start it; never waits for it.  0, or -1 having said why. */
SPANK_HIDDEN int recover_launch(const recover_job *job);
/* Wait for the recovers still running, at most wait_ms, then kill what is
 * left: at the step's last task and at its end.  Recovers past their own
 * deadline are killed on every call. */
SPANK_HIDDEN void recover_settle(int wait_ms);

/* step_summary.c, in srun as the user: the step's line, from the bundles of
 * step ("JOB.STEP") in dump_dir and $HOME/oom_dumps. */
SPANK_HIDDEN void step_summary(const char *step, const char *dump_dir);

/* Slurm's logging, from spank.h (declared here to keep spank.h in one file). */
void slurm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
