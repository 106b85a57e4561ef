/*
 * signal_actions.c — the program sees its own signal dispositions.
 *
 * crash.c puts handlers of ours where a signal's action is the default (the
 * stop signals once the process has a ring, the crash signals after a
 * failed allocation).  Nothing the program does may see them, for programs
 * decide by what they find: Python's signal.getsignal() says None for a
 * handler it did not install (and signal.signal(sig, None) is a TypeError),
 * the JVM and Rust's runtime install theirs only over the default, a
 * launcher restores what it found.  So:
 *   asked      where ours is, the answer is the default action (SIG_DFL);
 *   set to the default action, ours stays (ours ends in the default
 *              action: a program that restores the default it found gets
 *              what it would have had without us, and the ring still goes);
 *   set to anything else, the program's replaces ours, as it would the
 *              default.
 * sigaction is replaced in one call; signal() and its kin (glibc's signal,
 * bsd_signal, sysv_signal and sigset reach the kernel without passing
 * through sigaction's symbol) are called as they are, and their answer and
 * a default they set are put right after.  A program that asks the kernel
 * itself (Go's runtime, with raw system calls) sees ours.
 */
#include "preload.h"

#include <string.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*handler_fn)(int);
typedef handler_fn (*signal_fn)(int, handler_fn);

int gmp_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    GMP_REAL_FN(sigaction, sigaction_fn)
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(sig, act, old);
}

static int asks_default(const struct sigaction *act)
{
    return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

GMP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct sigaction ours;
    if (act && asks_default(act) && gmp_pl_active() && gmp_signal_default_is_ours(sig, &ours))
        act = &ours;
    int r = gmp_real_sigaction(sig, act, old);
    if (r == 0 && old && (old->sa_flags & SA_SIGINFO) &&
        gmp_signal_handler_is_ours((void *)old->sa_sigaction)) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
    }
    return r;
}

/* The answer of a signal() kin, with ours said as SIG_DFL; ours back where
 * it set the default. */
static handler_fn signal_put_right(int sig, handler_fn set, handler_fn was)
{
    if (was == SIG_ERR)
        return was;
    if (gmp_signal_handler_is_ours((void *)was))
        was = SIG_DFL;
    struct sigaction ours;
    if (set == SIG_DFL && gmp_pl_active() && gmp_signal_default_is_ours(sig, &ours))
        gmp_real_sigaction(sig, &ours, NULL);
    return was;
}

#define FOR_EACH_SIGNAL_KIN(X) X(signal) X(bsd_signal) X(sysv_signal) X(sigset)

#define SIGNAL_KIN_HOOK(name)                                                              \
    GMP_EXPORT handler_fn name(int sig, handler_fn handler);                               \
    handler_fn name(int sig, handler_fn handler)                                           \
    {                                                                                      \
        GMP_REAL_FN(name, signal_fn)                                                       \
        if (!fn) {                                                                         \
            errno = ENOSYS;                                                                \
            return SIG_ERR;                                                                \
        }                                                                                  \
        return signal_put_right(sig, handler, fn(sig, handler));                           \
    }
FOR_EACH_SIGNAL_KIN(SIGNAL_KIN_HOOK)
