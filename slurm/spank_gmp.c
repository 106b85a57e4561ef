/*
 * spank_gmp.c — the Slurm way in: a SPANK plugin that gives `srun` and
 * `sbatch` a --gmp[=DUMP_DIR] option.  A step asked for has the preload
 * in every one of its tasks (set in each task's environment just before
 * exec: never in srun, slurmstepd or the batch script's shell, whose
 * sruns ask for their own steps through the option Slurm forwards), and
 * the bundles go to DUMP_DIR (default: ./oom_dumps of each task).
 *
 * A task the kernel kills leaves a ring and no bundle.  When slurmstepd
 * reaps a task a signal ended, the plugin runs `gmp-inspect recover`
 * at once, while the task's cgroup (whose oom_kill count is the evidence)
 * still exists, as the job's user with a clean environment: it never
 * writes as root into a user's directories.  A kill with no OOM in the
 * cgroup (scancel, `kill -9`, a time limit) is written up as a kill, not
 * an OOM.  When srun's step is over, one line in the job's output says how
 * many of its tasks ran out of memory and where the first one's bundle is.
 * Jobs that do not ask are not touched.
 *
 * plugstack.conf:   optional /usr/local/lib/gpumemprof/spank_gmp.so
 * with, when the preload and gmp-inspect are not where `make install`
 * puts them beside it:  preload=/path/libgpumemprof_preload.so
 * inspect=/path/gmp-inspect.  Links only libc; loaded by srun, sbatch and
 * slurmstepd, it speaks through Slurm's log, and in srun only the one
 * summary line on srun's stderr.
 */
#include <slurm/spank.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

SPANK_PLUGIN(gpumemprof, 1);

#define RECOVER_WAIT_S 60 /* a recovery that takes longer is given up */
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
 * LD_PRELOAD, after what was there (an ASan runtime must stay first). */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!asked || is_batch_step(sp))
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
    return 0;
}

/* ---- the step's summary, in srun ------------------------------------------ */

/* The string value of "key" in JSON text our recorder wrote ("" none). */
static void json_value(const char *text, const char *key, char *out, size_t cap)
{
    char pattern[64];
    out[0] = '\0';
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *at = strstr(text, pattern);
    if (!at)
        return;
    size_t n = 0;
    for (at += strlen(pattern); *at && *at != '"' && n + 1 < cap; at++) {
        if (*at == '\\' && at[1])
            at++;
        out[n++] = (unsigned char)*at < 0x20 ? '?' : *at;
    }
    out[n] = '\0';
}

static int read_small(const char *dir, const char *bundle, const char *file, char *buf,
                      size_t cap)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s/%s", dir, bundle, file) >= (int)sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

typedef struct step_tally {
    int memory, pressure, other;
    char first[256], first_words[200];
    const char *first_dir;
} step_tally;

/* One bundle of the step, counted: a death of memory, a pressure warning,
 * or a kill or crash with no sign of memory. */
static void tally(step_tally *t, const char *dir, const char *name)
{
    char text[16384], reason[128], type[128], module[128];
    if (read_small(dir, name, "metadata.json", text, sizeof text) < 0)
        return;
    json_value(text, "reason", reason, sizeof reason);
    json_value(text, "exception_type", type, sizeof type);
    json_value(text, "exception_module", module, sizeof module);
    if (!strcmp(reason, "memory_pressure")) {
        t->pressure++;
        return;
    }
    int oom_killed = !strcmp(module, "kernel") && !strcmp(type, "oom_killer");
    if (!strcmp(reason, "killed") && !oom_killed) {
        t->other++;
        return;
    }
    t->memory++;
    if (!t->first[0] || strcmp(name, t->first) < 0) { /* names begin with their time */
        snprintf(t->first, sizeof t->first, "%s", name);
        snprintf(t->first_words, sizeof t->first_words, "%s",
                 oom_killed ? "killed by the kernel's OOM killer" : reason);
        t->first_dir = dir;
    }
}

/* The bundles in dir of step want, counted into t: how many. */
static int tally_dir(step_tally *t, const char *dir, const char *want)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char text[8192], of[48];
        if (strncmp(e->d_name, "oom_dump_", 9) ||
            read_small(dir, e->d_name, "manifest.json", text, sizeof text) < 0)
            continue;
        json_value(text, "slurm_job", of, sizeof of);
        if (!strcmp(of, want)) {
            tally(t, dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static char step_name[48]; /* srun's "JOB.STEP", once the step has its ids */

/* srun, once the step has its ids (at exit they are no longer asked for). */
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
 * stderr) when the step's tasks left bundles, which Slurm's own
 * "Detected 1 oom-kill event(s)" line does not point to. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (!asked || spank_context() != S_CTX_LOCAL || !step_name[0])
        return 0;
    const char *dir = dump_dir[0] ? dump_dir : "oom_dumps";
    /* and where a task's bundle goes when that directory cannot be had */
    char fallback[PATH_MAX] = "", a[PATH_MAX], b[PATH_MAX];
    const char *home = getenv("HOME");
    if (home && home[0] == '/')
        snprintf(fallback, sizeof fallback, "%s/oom_dumps", home);
    if (fallback[0] && realpath(dir, a) && realpath(fallback, b) && !strcmp(a, b))
        fallback[0] = '\0';
    step_tally t = {0};
    int in_dir = tally_dir(&t, dir, step_name);
    int in_fallback = fallback[0] ? tally_dir(&t, fallback, step_name) : 0;
    char dirs[2 * PATH_MAX + 2];
    snprintf(dirs, sizeof dirs, "%s%s%s", in_dir || !in_fallback ? dir : "",
             in_dir && in_fallback ? " " : "", in_fallback ? fallback : "");
    if (t.memory)
        fprintf(stderr, "gpumemprof: step %s: %d task(s) ran out of memory; the first: %s "
                        "(%s/%s); `gmp-inspect triage %s` for all%s\n",
                step_name, t.memory, t.first_words, t.first_dir, t.first, dirs,
                t.pressure ? ", memory-pressure warnings included" : "");
    else if (t.pressure || t.other)
        fprintf(stderr, "gpumemprof: step %s: no task ran out of memory; %d memory-pressure "
                        "warning(s), %d kill(s) or crash(es) with no sign of memory, in %s\n",
                step_name, t.pressure, t.other, dirs);
    return 0;
}

/* The child: become the job's user, with a clean environment, and run
 * gmp-inspect recover on the user's run directory.  HOME is the task's
 * (task_home, "" for none), else the password file's: a dump directory
 * that cannot be had gives way to $HOME/oom_dumps, where the task's own
 * bundles went. */
static void recover_child(uid_t uid, gid_t gid, const char *run_dir, const char *task_home)
{
    struct passwd *pw = getpwuid(uid);
    /* the kernel log, opened as root for recover to read as the user
     * (dmesg_restrict): whether the OOM killer named this task */
    int kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    if (kmsg >= 0 && kmsg < 3) { /* past stdin, stdout and stderr, made /dev/null below */
        int high = fcntl(kmsg, F_DUPFD, 3);
        close(kmsg);
        kmsg = high;
    }
    char kmsg_env[32] = "";
    if (kmsg >= 0)
        snprintf(kmsg_env, sizeof kmsg_env, "GMP_KMSG_FD=%d", kmsg);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1); /* its words go nowhere: the bundle is the answer */
        dup2(null, 2);
    }
    if ((pw ? initgroups(pw->pw_name, gid) : setgroups(0, NULL)) != 0 || setgid(gid) != 0 ||
        setuid(uid) != 0 || (uid != 0 && setuid(0) == 0))
        _exit(126);
    char home[PATH_MAX + 8], user[300], dir[PATH_MAX + 16];
    snprintf(home, sizeof home, "HOME=%s",
             task_home[0] ? task_home : pw && pw->pw_dir ? pw->pw_dir : "/");
    snprintf(user, sizeof user, "USER=%s", pw && pw->pw_name ? pw->pw_name : "");
    snprintf(dir, sizeof dir, "GMP_RUN_DIR=%s", run_dir);
    char *env[8] = {"PATH=/usr/bin:/bin", "LANG=C", home, user};
    int n = 4;
    if (kmsg_env[0])
        env[n++] = kmsg_env;
    if (run_dir[0])
        env[n++] = dir;
    char *argv[] = {"gmp-inspect", "recover", NULL};
    if (chdir(pw && pw->pw_dir ? pw->pw_dir : "/") != 0 && chdir("/") != 0)
        _exit(126);
    execve(inspect, argv, env);
    _exit(127);
}

/* In slurmstepd, as root, when a task was reaped: a task a signal ended
 * (SIGKILL from the OOM killer, scancel's SIGTERM) left its ring; write
 * its bundle now, while its cgroup says whether the kernel's OOM killer
 * did it, so that no ring stays behind. */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int status = 0;
    uid_t uid;
    gid_t gid;
    if (!asked || is_batch_step(sp) ||
        spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
        !WIFSIGNALED(status) ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return 0;
    if (!inspect[0]) {
        slurm_error("gpumemprof: a task was killed, and gmp-inspect was not found to write "
                    "its bundle (set inspect= in plugstack.conf)");
        return 0;
    }
    char run_dir[PATH_MAX] = "", task_home[PATH_MAX] = "";
    if (spank_getenv(sp, "GMP_RUN_DIR", run_dir, sizeof run_dir) != ESPANK_SUCCESS)
        run_dir[0] = '\0';
    if (spank_getenv(sp, "HOME", task_home, sizeof task_home) != ESPANK_SUCCESS ||
        task_home[0] != '/')
        task_home[0] = '\0';
    pid_t child = fork();
    if (child == 0)
        recover_child(uid, gid, run_dir, task_home);
    if (child < 0) {
        slurm_error("gpumemprof: cannot fork to recover a killed task: %s", strerror(errno));
        return 0;
    }
    int rc = -1;
    for (int waited = 0; waited < RECOVER_WAIT_S * 20; waited++) {
        if (waitpid(child, &rc, WNOHANG) == child)
            break;
        rc = -1;
        struct timespec tick = {0, 50 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    if (rc == -1) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        slurm_error("gpumemprof: recovering a killed task took over %d s; given up",
                    RECOVER_WAIT_S);
    } else if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
        slurm_error("gpumemprof: gmp-inspect recover for a killed task failed (status %d)",
                    rc);
    }
    return 0;
}
