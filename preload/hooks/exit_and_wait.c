/*
 * exit_and_wait.c — the ends of processes that skip our destructor, so that a
 * ring left in the run directory always means a death that may be of
 * memory:
 *   _exit/_Exit   (os._exit in multiprocessing workers): commit an open
 *                 episode and remove the ring, as a normal exit does, and
 *                 say the status in the bundles written (outcome.c);
 *   wait family   only the parent learns how a child was killed: a
 *                 preloaded parent that reaps a child killed by a signal
 *                 removes its ring, or notes the signal in it when the death
 *                 may be of memory (gmp_rings_reaped), so gmp-run and
 *                 `gmp-inspect recover` write bundles for those deaths and
 *                 no others.
 *   exec family   the image is replaced without exit(): an OOM episode
 *                 still open (Python caught its MemoryError, then exec'd)
 *                 is written first, confirmed by "exec", and the ring says
 *                 an exec is under way (cleared if the exec fails).  A new
 *                 image with the preload removes the old one's ring when it
 *                 makes its own (recorder.c); otherwise readers drop it once
 *                 the process is gone.
 * A vfork child shares our memory and must touch nothing of the parent's:
 * it is told apart by its pid.
 */
#include "preload.h"
#include "recorder.h"
#include "ring.h"
#include "ring_recovery.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Only a death by a signal: a child that exits removes its own ring, and
 * one an exec left carries the exec mark that readers drop (a shell reaps
 * every command it runs: an exit costs it no look at the run directory). */
static void note_reaped(pid_t pid, int status)
{
    if (pid > 0 && WIFSIGNALED(status) && gmp_pl_active()) {
        int saved = errno;
        GMP_IN_HOOK_SCOPE();
        const char *run_dir = gmp_pl_run_dir();
        if (run_dir[0])
            gmp_rings_reaped(run_dir, (int)pid, status);
        errno = saved;
    }
}

/* Hooks of the wait functions that report an int status: call the real one
 * (with a status of our own when the caller passed none), note a death. */
#define GMP_WAIT_HOOKS(X)                                                                  \
    X(wait, (int *status), (st))                                                           \
    X(waitpid, (pid_t pid, int *status, int options), (pid, st, options))                  \
    X(wait3, (int *status, int options, struct rusage *usage), (st, options, usage))       \
    X(wait4, (pid_t pid, int *status, int options, struct rusage *usage),                  \
      (pid, st, options, usage))

#define WAIT_HOOK(name, params, args)                                                      \
    GMP_EXPORT pid_t name params;                                                          \
    typedef pid_t (*name##_fn) params;                                                     \
    pid_t name params                                                                      \
    {                                                                                      \
        GMP_REAL_FN(name, name##_fn)                                                       \
        if (!fn) {                                                                         \
            errno = ENOSYS;                                                                \
            return -1;                                                                     \
        }                                                                                  \
        int own = 0, *st = status ? status : &own;                                         \
        pid_t r = fn args;                                                                 \
        if (r > 0)                                                                         \
            note_reaped(r, *st);                                                           \
        return r;                                                                          \
    }
GMP_WAIT_HOOKS(WAIT_HOOK)

GMP_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options);
typedef int (*waitid_fn)(idtype_t, id_t, siginfo_t *, int);
int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
    GMP_REAL_FN(waitid, waitid_fn)
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    int r = fn(idtype, id, info, options);
    if (r == 0 && info && info->si_pid > 0 &&
        (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED))
        note_reaped(info->si_pid, info->si_status & 0x7f); /* a status that says "killed" */
    return r;
}

/* What exit() would have done for us, when the program skips it. */
static void before_quick_exit(void)
{
    if (getpid() == __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED))
        gmp_pl_finish(); /* not in a vfork child: the ring is the parent's */
}

typedef void (*exit_fn)(int);
#define QUICK_EXIT(name)                                                                   \
    GMP_EXPORT __attribute__((noreturn)) void name(int status);                            \
    void name(int status)                                                                  \
    {                                                                                      \
        gmp_outcome_end(GMP_OUTCOME_EXITED, status & 0xff);                                \
        before_quick_exit();                                                               \
        GMP_REAL_FN(name, exit_fn)                                                         \
        if (fn)                                                                            \
            fn(status);                                                                    \
        syscall(SYS_exit_group, status);                                                   \
        __builtin_unreachable();                                                           \
    }
QUICK_EXIT(_exit)
QUICK_EXIT(_Exit)

/* What before_exec did, for exec_failed to undo. */
enum { EXEC_RING_MARKED = 1, EXEC_METRICS_HELD = 2 };

/* Before the image goes: the bundle of an open episode, the ring marked,
 * and the metrics file held, so that no rewrite is cut off halfway, its
 * temporary file left behind (not in a vfork child: the episodes, the ring
 * and the metrics thread are the parent's). */
static int before_exec(void)
{
    if (!gmp_pl_active() || getpid() != __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED))
        return 0;
    int saved = errno;
    GMP_IN_HOOK_SCOPE();
    if (gmp_any_episode_open()) {
        gmp_episode_commit_all("exec");
        gmp_episode_wait_commits(5000);
    }
    gmp_recorder_ring_flags(gmp_pl.rec, GMP_RING_FLAG_EXEC, 0);
    int done = EXEC_RING_MARKED;
    if (gmp_pl.prom_file && gmp_metrics_hold())
        done |= EXEC_METRICS_HELD;
    errno = saved;
    return done;
}

/* The exec returned: the image lives on, and so does the meaning of its
 * ring, and its metrics thread writes again. */
static void exec_failed(int done)
{
    if (done & EXEC_RING_MARKED)
        gmp_recorder_ring_flags(gmp_pl.rec, 0, GMP_RING_FLAG_EXEC);
    if (done & EXEC_METRICS_HELD)
        gmp_metrics_release();
}

/* The exec functions with an argument vector.  glibc's own calls between
 * them are internal, so each must be hooked.  Each calls the real function
 * that takes an environment (execv is execve with environ, as in glibc), so
 * that one generic path can hand a Slurm launcher its environment without
 * the preload (slurm_launchers.c).  Columns: the hook, its parameters, the
 * real function called and its type, its arguments (ENV(e): the
 * environment passed), the file it starts (NULL: only its descriptor is
 * known). */
#define GMP_EXEC_HOOKS(X)                                                                  \
    X(execve, (const char *path, char *const argv[], char *const envp[]), execve,          \
      (const char *, char *const[], char *const[]), (path, argv, ENV(envp)), path)         \
    X(execv, (const char *path, char *const argv[]), execve,                               \
      (const char *, char *const[], char *const[]), (path, argv, ENV(environ)), path)      \
    X(execvp, (const char *file, char *const argv[]), execvpe,                             \
      (const char *, char *const[], char *const[]), (file, argv, ENV(environ)), file)      \
    X(execvpe, (const char *file, char *const argv[], char *const envp[]), execvpe,        \
      (const char *, char *const[], char *const[]), (file, argv, ENV(envp)), file)         \
    X(fexecve, (int fd, char *const argv[], char *const envp[]), fexecve,                  \
      (int, char *const[], char *const[]), (fd, argv, envp), NULL)                         \
    X(execveat, (int dirfd, const char *path, char *const argv[], char *const envp[],      \
                 int flags),                                                               \
      execveat, (int, const char *, char *const[], char *const[], int),                    \
      (dirfd, path, argv, ENV(envp), flags), path)

extern char **environ;
/* the environment passed: the one given, unless a launcher gets a copy */
#define ENV(e) (given = (e), used = gmp_launcher_env(started, given))
#define EXEC_HOOK(name, params, real, real_params, args, file)                             \
    GMP_EXPORT int name params;                                                            \
    typedef int (*name##_real_fn) real_params;                                             \
    int name params                                                                        \
    {                                                                                      \
        GMP_REAL_FN(real, name##_real_fn)                                                  \
        if (!fn) {                                                                         \
            errno = ENOSYS;                                                                \
            return -1;                                                                     \
        }                                                                                  \
        const char *started = file;                                                        \
        char *const *given = NULL, *const *used = NULL;                                    \
        (void)started;                                                                     \
        int done = before_exec();                                                          \
        int rc = fn args;                                                                  \
        int saved = errno;                                                                 \
        gmp_launcher_env_done(used, given);                                                \
        exec_failed(done);                                                                 \
        errno = saved;                                                                     \
        return rc;                                                                         \
    }
GMP_EXEC_HOOKS(EXEC_HOOK)
#undef ENV

/* execl, execlp, execle: their arguments gathered into a vector (on the
 * stack, or mapped when there are very many), then the vector form. */
#define STACK_ARGS 256
typedef enum { LIST_PLAIN, LIST_PATH, LIST_ENV } list_kind;

static int exec_list(list_kind kind, const char *path, const char *arg0, va_list ap)
{
    va_list count_ap;
    va_copy(count_ap, ap);
    size_t n = 1;
    while (va_arg(count_ap, const char *))
        n++;
    va_end(count_ap);
    char *stack_args[STACK_ARGS];
    char **argv = stack_args;
    size_t len = (n + 1) * sizeof *argv;
    if (n + 1 > STACK_ARGS) {
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            errno = E2BIG;
            return -1;
        }
        argv = m;
    }
    argv[0] = (char *)arg0;
    for (size_t i = 1; i < n; i++)
        argv[i] = va_arg(ap, char *);
    argv[n] = va_arg(ap, char *); /* the NULL */
    char *const *envp = kind == LIST_ENV ? va_arg(ap, char *const *) : environ;
    int rc = kind == LIST_PATH ? execvp(path, argv) : execve(path, argv, envp);
    int saved = errno;
    if (argv != stack_args)
        munmap(argv, len);
    errno = saved;
    return rc;
}

#define EXEC_LIST_HOOK(name, kind)                                                         \
    GMP_EXPORT int name(const char *path, const char *arg, ...);                           \
    int name(const char *path, const char *arg, ...)                                       \
    {                                                                                      \
        va_list ap;                                                                        \
        va_start(ap, arg);                                                                 \
        int rc = exec_list(kind, path, arg, ap);                                           \
        va_end(ap);                                                                        \
        return rc;                                                                         \
    }
EXEC_LIST_HOOK(execl, LIST_PLAIN)
EXEC_LIST_HOOK(execlp, LIST_PATH)
EXEC_LIST_HOOK(execle, LIST_ENV)
