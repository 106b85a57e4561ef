/*
 * spank_standin.c — a stand-in for slurmstepd (and srun), for test_spank:
 * the SPANK calls Slurm gives a plugin, over a fake job (spank_standin.h);
 * a task run as slurmstepd runs one; the spy's report read back; a memory
 * cgroup for the tasks; and a tripwire on this program's own name-service
 * functions, which notes a call made in a forked child.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spank_standin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

standin slurm;
spank_t handle = (spank_t)&slurm;
void *plugin;

/* ---- the SPANK calls Slurm gives a plugin ------------------------------ */

/* exported (-rdynamic), for the plugin's calls to find */
#pragma GCC visibility push(default)

spank_err_t spank_get_item(spank_t spank, spank_item_t item, ...)
{
    (void)spank;
    va_list ap;
    va_start(ap, item);
    spank_err_t rc = ESPANK_SUCCESS;
    switch (item) {
    case S_JOB_UID:
        *va_arg(ap, uid_t *) = slurm.uid;
        break;
    case S_JOB_GID:
        *va_arg(ap, gid_t *) = slurm.gid;
        break;
    case S_JOB_ID:
        *va_arg(ap, uint32_t *) = slurm.job_id;
        break;
    case S_JOB_STEPID:
        *va_arg(ap, uint32_t *) = slurm.step_id;
        break;
    case S_JOB_LOCAL_TASK_COUNT:
        *va_arg(ap, uint32_t *) = slurm.local_tasks;
        break;
    case S_TASK_PID:
        *va_arg(ap, pid_t *) = slurm.task_pid;
        break;
    case S_TASK_EXIT_STATUS:
        *va_arg(ap, int *) = slurm.task_status;
        break;
    case S_JOB_SUPPLEMENTARY_GIDS: {
        gid_t **gids = va_arg(ap, gid_t **);
        *gids = slurm.gids;
        *va_arg(ap, int *) = slurm.ngids;
        break;
    }
    default:
        rc = ESPANK_BAD_ARG;
    }
    va_end(ap);
    return rc;
}

static int env_find(const char *var)
{
    size_t n = strlen(var);
    for (int i = 0; i < slurm.nenv; i++)
        if (!strncmp(slurm.env[i], var, n) && slurm.env[i][n] == '=')
            return i;
    return -1;
}

spank_err_t spank_getenv(spank_t spank, const char *var, char *buf, int len)
{
    (void)spank;
    int i = env_find(var);
    if (i < 0)
        return ESPANK_ENV_NOEXIST;
    if (snprintf(buf, (size_t)len, "%s", slurm.env[i] + strlen(var) + 1) >= len)
        return ESPANK_NOSPACE;
    return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t spank, const char *var, const char *val, int overwrite)
{
    (void)spank;
    int i = env_find(var);
    if (i >= 0 && !overwrite)
        return ESPANK_ENV_EXISTS;
    if (i < 0 && (i = slurm.nenv++) >= 32)
        return ESPANK_NOSPACE;
    snprintf(slurm.env[i], sizeof slurm.env[i], "%s=%s", var, val);
    return ESPANK_SUCCESS;
}

spank_context_t spank_context(void)
{
    return slurm.context;
}

spank_err_t spank_option_register(spank_t spank, struct spank_option *opt)
{
    (void)spank;
    (void)opt;
    return ESPANK_SUCCESS;
}

void slurm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("slurmstepd: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
}

/* ---- a tripwire: name-service lookups in a child of the fork ---------- */

#define NSS_TRIPWIRE(ret, name, params, args)                                              \
    ret name params                                                                        \
    {                                                                                      \
        if (getpid() != slurm.main_pid)                                                          \
            close(open(slurm.nss_mark, O_WRONLY | O_CREAT, 0600));                               \
        ret(*real) params = (ret(*) params)dlsym(RTLD_NEXT, #name);                        \
        return real args;                                                                  \
    }
NSS_TRIPWIRE(struct passwd *, getpwuid, (uid_t uid), (uid))
NSS_TRIPWIRE(struct passwd *, getpwnam, (const char *name), (name))
NSS_TRIPWIRE(int, getpwuid_r,
             (uid_t uid, struct passwd *pw, char *buf, size_t len, struct passwd **out),
             (uid, pw, buf, len, out))
NSS_TRIPWIRE(int, initgroups, (const char *user, gid_t group), (user, group))
NSS_TRIPWIRE(int, getgrouplist, (const char *user, gid_t group, gid_t *groups, int *n),
             (user, group, groups, n))
NSS_TRIPWIRE(struct group *, getgrgid, (gid_t gid), (gid))

#pragma GCC visibility pop

/* ---- slurmstepd's part ------------------------------------------------- */

hook_fn hook(const char *name)
{
    hook_fn fn = (hook_fn)dlsym(plugin, name);
    if (!fn)
        fail_msg("the plugin has no %s", name);
    return fn;
}

/* A fresh plugin, as a new slurmstepd loads it: inspect= names what it runs
 * for recover; --gmp=DUMPS given. */
void load_plugin(spank_context_t context, const char *inspect, const char *dump_dir)
{
    char path[1200], arg[1300];
    snprintf(path, sizeof path, "%s/spank_gmp.so", slurm.build);
    plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!plugin)
        fail_msg("dlopen %s: %s", path, dlerror());
    slurm.context = context;
    snprintf(arg, sizeof arg, "inspect=%s", inspect);
    char *av[] = {arg};
    assert_int_equal(hook("slurm_spank_init")(handle, 1, av), 0);
    struct spank_option *options = dlsym(plugin, "spank_options");
    assert_non_null(options);
    assert_int_equal(options[0].cb(options[0].val, dump_dir, context == S_CTX_REMOTE), 0);
}

/* The step's end, as slurmstepd reaches it (spank_fini), then the plugin
 * unloaded. */
void unload_plugin(void)
{
    if (plugin && slurm.context == S_CTX_REMOTE)
        hook("slurm_spank_exit")(handle, 0, NULL);
    if (plugin)
        dlclose(plugin);
    plugin = NULL;
}

/* The job's environment: the account's HOME and run directory, and one
 * more "NAME=value" (or NULL). */
void job_env(const char *home, const char *rundir, const char *extra)
{
    slurm.nenv = 0;
    spank_setenv(handle, "HOME", home, 1);
    spank_setenv(handle, "USER", "gmp-spank-user", 1);
    spank_setenv(handle, "PATH", "/usr/bin:/bin", 1);
    spank_setenv(handle, "GMP_RUN_DIR", rundir, 1);
    if (extra) {
        const char *eq = strchr(extra, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - extra), extra);
        spank_setenv(handle, name, eq + 1, 1);
    }
}

long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* One task, as slurmstepd runs it, then its end handed to the plugin. */
void run_task(task_run *r)
{
    int go[2];
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    pid_t pid = fork();
    if (pid == 0) { /* slurmstepd's child: the user, then the hook, then exec */
        char c;          /* (no cmocka here: a failure ends this child alone) */
        int adj = open("/proc/self/oom_score_adj", O_WRONLY);
        if (adj < 0 || write(adj, "0", 1) != 1 || setgroups((size_t)slurm.ngids, slurm.gids) ||
            setgid(slurm.gid) || setuid(slurm.uid) || chdir(slurm.task_dir) || read(go[0], &c, 1) != 1)
            _exit(125);
        close(adj);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        hook_fn task_init = (hook_fn)dlsym(plugin, "slurm_spank_task_init");
        if (!task_init || task_init(handle, 0, NULL) != 0)
            _exit(124);
        char *envp[33];
        for (int i = 0; i < slurm.nenv; i++)
            envp[i] = slurm.env[i];
        envp[slurm.nenv] = NULL;
        execve(r->argv[0], (char *const *)r->argv, envp);
        _exit(127);
    }
    assert_true(pid > 0);
    close(go[0]);
    char text[32];
    snprintf(text, sizeof text, "%d", (int)pid);
    char procs[600];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", slurm.task_cgroup);
    write_text(procs, text);
    slurm.task_pid = pid;
    hook_fn post_fork = (hook_fn)dlsym(plugin, "slurm_spank_task_post_fork"); /* optional */
    int noted = post_fork ? post_fork(handle, 0, NULL) : 0;
    assert_int_equal(write(go[1], "x", 1), 1);
    close(go[1]);
    assert_int_equal(noted, 0);
    if (r->meanwhile)
        r->meanwhile();
    if (r->kill_after_ms > 0) {
        struct timespec t = {r->kill_after_ms / 1000, (r->kill_after_ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
        kill(pid, SIGKILL);
    }
    assert_int_equal(waitpid(pid, &r->status, 0), pid);
    r->pid = pid;
    slurm.task_status = r->status;
    long long t0 = now_ms();
    assert_int_equal(hook("slurm_spank_task_exit")(handle, 0, NULL), 0);
    r->exit_ms = (int)(now_ms() - t0);
}

/* ---- what the spy was handed ------------------------------------------ */

char report[65536];

void read_report(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/spy.report", slurm.task_dir);
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) { /* the spy runs on while task-exit returns */
        fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, report, sizeof report - 1) : -1;
        if (fd >= 0)
            close(fd);
        report[n > 0 ? n : 0] = '\0';
        if (!strstr(report, "\nend\n")) {
            fd = -1;
            usleep(20000);
        }
    }
    if (fd < 0)
        fail_msg("the spy wrote no report");
}

/* The value after "label " on the report's line that starts so ("" none). */
const char *reported(const char *label, char *out, size_t cap)
{
    char want[128];
    snprintf(want, sizeof want, "\n%s", label);
    const char *at = strstr(report, want);
    out[0] = '\0';
    if (at) {
        at += strlen(want);
        snprintf(out, cap, "%.*s", (int)strcspn(at, "\n"), at);
    }
    return out;
}


/* ---- a memory cgroup for the tasks --------------------------------------- */

int memcg_make(const char *name, const char *limit, char *memcg, size_t cap)
{
    char path[600];
    if (access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) == 0) {
        snprintf(memcg, cap, "/sys/fs/cgroup/memory/%s", name);
        if (mkdir(memcg, 0755) && errno != EEXIST)
            return -1;
        snprintf(path, sizeof path, "%s/memory.limit_in_bytes", memcg);
        write_text(path, limit);
        return 0;
    }
    FILE *f = fopen("/sys/fs/cgroup/cgroup.controllers", "r");
    char controllers[512] = "";
    if (!f || !fgets(controllers, sizeof controllers, f) || !strstr(controllers, "memory")) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    int fd = open("/sys/fs/cgroup/cgroup.subtree_control", O_WRONLY);
    if (fd >= 0) {
        ssize_t ignored = write(fd, "+memory", 7);
        (void)ignored;
        close(fd);
    }
    snprintf(memcg, cap, "/sys/fs/cgroup/%s", name);
    if (mkdir(memcg, 0755) && errno != EEXIST)
        return -1;
    snprintf(path, sizeof path, "%s/memory.max", memcg);
    if (access(path, W_OK) != 0)
        return -1;
    write_text(path, limit);
    snprintf(path, sizeof path, "%s/memory.swap.max", memcg);
    if (access(path, W_OK) == 0)
        write_text(path, "0");
    return 0;
}
