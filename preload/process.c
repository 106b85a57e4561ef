/*
 * process.c — the ends of processes that skip our destructor, so that a
 * ring left in the run directory always means "killed":
 *   _exit/_Exit   (os._exit in multiprocessing workers): commit an open
 *                 episode and remove the ring, as a normal exit does;
 *   wait family   a parent that reaps a child killed by a signal notes the
 *                 signal in the child's ring (only the parent ever learns
 *                 it), so gmp-run and `gmp-inspect recover` can name it.
 * exec() needs nothing here: the new image removes the old one's ring when
 * it starts (init.c).  A vfork child shares our memory and must touch
 * nothing of the parent's: it is told apart by its pid.
 */
#include "preload.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void note_reaped(pid_t pid, int status)
{
    if (pid > 0 && WIFSIGNALED(status) && gmp_pl_active() && gmp_pl.run_dir[0]) {
        int saved = errno;
        gmp_in_hook++;
        gmp_rings_note_death(gmp_pl.run_dir, (int)pid, WTERMSIG(status));
        gmp_in_hook--;
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
        before_quick_exit();                                                               \
        GMP_REAL_FN(name, exit_fn)                                                         \
        if (fn)                                                                            \
            fn(status);                                                                    \
        syscall(SYS_exit_group, status);                                                   \
        __builtin_unreachable();                                                           \
    }
QUICK_EXIT(_exit)
QUICK_EXIT(_Exit)
