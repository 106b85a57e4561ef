/*
 * recover_launch.c — `gmp-inspect recover` for a task, started from
 * slurmstepd as the job's user: it holds nothing of root's, and slurmstepd
 * never waits on it for long.
 *
 * The user may stop, trace or take over their recover as any process of
 * theirs, so it must hold nothing root could: the child closes every
 * descriptor slurmstepd had before anything else, leaves slurmstepd's
 * session, joins the task's own cgroups (so it is killed with the step,
 * charged to the job, and never outlives it), gives up slurmstepd's
 * immunity to the OOM killer (oom_score_adj -1000) and its signal mask,
 * then becomes the user with the groups Slurm resolved for the job (no
 * name-service lookup: after fork in a threaded slurmstepd, one could
 * block on a lock another thread held) and only then opens what it writes
 * to: /dev/null, or the job's output file, as the user.  The verdict that
 * needed root reaches it as arguments.
 *
 * slurmstepd does not wait when it starts one: the task's end returns at
 * once.  Only when the step's last task has ended does it give the
 * recovers still running a short while (the step's kill would cut them
 * off), and then kills them; a recover past its own deadline is killed
 * whenever the plugin runs.  Both are far below Slurm's
 * UnkillableStepTimeout, so no user (a stopped recover) and no slow file
 * system can make Slurm drain the node.  Recovers are reaped here with
 * waitpid on their own pids: slurmstepd's wait for any child may reap one
 * first, and then the pid is simply no longer ours to kill.
 */
#include "spank_gmp.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RECOVER_DEADLINE_MS 10000 /* a recover still running this long is killed */
#define RUNNING_MAX 64

static struct running {
    pid_t pid; /* 0: a free entry */
    long long started_ms;
} running[RUNNING_MAX];

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t ignored = write(fd, text, strlen(text));
        (void)ignored;
        close(fd);
    }
}

/* The child, between fork and exec: system calls only (slurmstepd has
 * threads, whose locks a child of the fork may find held). */
static void child(const recover_job *job)
{
    gmp_close_from(3); /* slurmstepd's, all of them: sockets, the kernel log */
    /* every signal unblocked and to its default action: by the system
     * calls, since glibc's wrappers refuse its own two (32 and 33), which an
     * ignoring ancestor may have passed down */
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
    } dfl = {SIG_DFL, 0, NULL, 0};
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
    setsid();
    for (int i = 0; job->task && i < job->task->n_procs; i++)
        write_text(job->task->procs[i], "0"); /* 0: the writer itself */
    write_text("/proc/self/oom_score_adj", "0");
    umask(077);
    if (setgroups((size_t)job->ngids, job->gids) != 0 || setgid(job->gid) != 0 ||
        setuid(job->uid) != 0 || getuid() != job->uid || geteuid() != job->uid ||
        (job->uid != 0 && setuid(0) == 0))
        _exit(126);
    /* as the user from here: what it opens, it could have opened itself */
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        _exit(126);
    int out = -1;
    if (job->say_to[0]) {
        out = open(job->say_to, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (out >= 0 && (fstat(out, &st) != 0 || !S_ISREG(st.st_mode))) {
            close(out);
            out = -1;
        }
    }
    dup2(null, 0);
    dup2(null, 1);
    dup2(out >= 0 ? out : null, 2);
    gmp_close_from(3);
    if (!job->home[0] || chdir(job->home) != 0)
        if (chdir("/") != 0)
            _exit(126);
    execve(job->inspect, job->argv, job->envp);
    _exit(127);
}

/* Reap what has ended; kill what ran past its deadline, or everything
 * still running when kill_all. */
static int sweep(int kill_all)
{
    int left = 0;
    long long now = now_ms();
    for (int i = 0; i < RUNNING_MAX; i++) {
        if (!running[i].pid)
            continue;
        int st;
        pid_t r = waitpid(running[i].pid, &st, WNOHANG);
        if (r == running[i].pid || (r < 0 && errno == ECHILD)) {
            running[i].pid = 0; /* ended (or slurmstepd's own wait took it) */
            continue;
        }
        if (r == 0 && (kill_all || now - running[i].started_ms > RECOVER_DEADLINE_MS)) {
            /* not reaped: the pid is still this child's, never another's */
            kill(running[i].pid, SIGKILL);
            slurm_error("gpumemprof: gmp-inspect recover (pid %d) was still running after "
                        "%lld ms; killed",
                        (int)running[i].pid, now - running[i].started_ms);
        }
        left++;
    }
    return left;
}

void recover_settle(int wait_ms)
{
    long long until = now_ms() + wait_ms;
    struct timespec tick = {0, 5 * 1000 * 1000};
    while (sweep(0) && now_ms() < until)
        nanosleep(&tick, NULL);
    if (!sweep(1))
        return;
    /* killed: gone within a tick, unless the kernel holds it (D state);
     * then it dies with the step's cgroup, not waited on here */
    for (int i = 0; i < 20 && sweep(0); i++)
        nanosleep(&tick, NULL);
}

int recover_launch(const recover_job *job)
{
    sweep(0);
    int slot = -1;
    for (int i = 0; i < RUNNING_MAX && slot < 0; i++)
        if (!running[i].pid)
            slot = i;
    if (slot < 0) {
        slurm_error("gpumemprof: %d recovers still running; a killed task's ring is left for "
                    "the next `gmp-inspect recover`",
                    RUNNING_MAX);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        child(job);
    if (pid < 0) {
        slurm_error("gpumemprof: cannot fork to recover a killed task: %s", strerror(errno));
        return -1;
    }
    running[slot] = (struct running){pid, now_ms()};
    return 0;
}
