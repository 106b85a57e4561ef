/*
 * crash.c — the deaths by a signal, told as they are.
 *
 * The corrupted death: malloc returns NULL, the program writes through it,
 * SIGSEGV.  Handlers for SIGSEGV, SIGBUS, SIGABRT, SIGILL and SIGFPE write
 * the bundle (episode.c decides which, by GMP_ON_CRASH).
 *
 * The stop: SIGTERM from a launcher or a scheduler, Ctrl-C, a closed pipe,
 * SIGHUP, SIGQUIT, a CPU or file-size limit.  None of them is a death of
 * memory, so the process's ring goes with it: a ring left behind means a
 * death nobody saw (SIGKILL), which readers write up.  The one exception is
 * a stop that comes while a failure is still open, as when every rank of a
 * job runs out on the same step and the first to die has its siblings
 * stopped: that failure is then this death's cause (episode.c), told as it
 * is, and written before the ring goes.  A stop sent while a bundle is
 * being written (a pool stopping a worker whose exit writes up the failure
 * it went on from) lets that bundle be finished first: the writing thread
 * holds such signals back, and a handler on another thread waits for it.
 *
 * Both hand the signal on exactly as it would have gone: to the default
 * action with the same signal, so the exit status and the core dump do not
 * change.  A bundle written here marks the ring (readers make no second
 * one) and, when the default action follows, removes it.
 *
 * Ours goes only where the signal's action is still the default, so it acts
 * only on a signal that would otherwise end the process, and the program
 * never sees it (signal_actions.c answers SIG_DFL where ours is, and puts
 * ours back where the program asks for the default): a runtime that handles
 * SIGSEGV itself (the JVM's implicit null checks, V8's WebAssembly bounds,
 * Go) keeps its handler in front and finds it as it left it (the JVM's
 * -Xcheck:jni checks); a handler the program installs later replaces ours.
 * All go in when the process makes its ring (a process with no ring has
 * nothing to leave behind; a crash no allocation failed before then takes
 * its ring with it too), the crash handlers at the first failed allocation
 * at the latest; none with GMP_ON_CRASH=never.
 *
 * Each thread that failed an allocation gets an alternate stack (256 KiB of
 * address space, kept for the thread's life; untouched pages cost nothing),
 * so a stack exhausted by the failure still leaves room for the bundle.  A
 * program may have set a smaller alternate stack of its own (CPython's
 * faulthandler does): when the one the handler runs on has less room than a
 * bundle needs, the bundle is written on an emergency stack of ours instead
 * (makecontext/swapcontext: registers and one sigprocmask, no allocation),
 * and the handler goes on where it was.
 */
#include "preload.h"
#include "recorder.h"
#include "ring.h"
#include "ring_recovery.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define ALT_STACK_SIZE (256 * 1024)
#define EMERGENCY_STACK_SIZE (256 * 1024)
/* What writing a bundle may take, with room to spare (about 40 KiB at -O2;
 * more in sanitizer builds). */
#define DUMP_STACK_NEED (128 * 1024)
/* How long a stop waits for a bundle another thread is writing. */
#define STOP_WAITS_FOR_BUNDLE_MS 2000

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
#define FATAL_COUNT (sizeof fatal_signals / sizeof *fatal_signals)
/* Every signal whose default action ends the process, but for SIGKILL,
 * SIGSTOP's kin, the crashes above, the debugger's SIGTRAP and seccomp's
 * SIGSYS (and the real-time ones: a ring they leave is written up as a
 * death whose signal nobody saw). */
static const int stop_signals[] = {SIGHUP,  SIGINT,  SIGQUIT,   SIGPIPE,   SIGALRM,
                                   SIGTERM, SIGUSR1, SIGUSR2,   SIGIO,     SIGPROF,
                                   SIGVTALRM, SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGPWR};
#define STOP_COUNT (sizeof stop_signals / sizeof *stop_signals)

/* Of those, the ones another process sends to end this one (a launcher
 * stopping its workers, a scheduler, a terminal): held back from a thread
 * while it writes a bundle (gmp_stop_signals_hold).  Not the ones a write
 * of ours may raise itself (SIGPIPE, SIGXFSZ), nor timers. */
static const int sent_stops[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGPWR};

static struct sigaction previous[FATAL_COUNT]; /* SIG_DFL where ours went */
static int armed;                      /* atomic: 0 no, 1 installing, 2 installed */
static int stops_armed;                /* atomic: the same, for the stop handlers */
static int crashing;                   /* atomic: the first fatal signal dumps */
static __thread int has_alt_stack __attribute__((tls_model("initial-exec")));
__thread int gmp_in_signal __attribute__((tls_model("initial-exec")));

static int slot_of(int sig)
{
    for (size_t i = 0; i < FATAL_COUNT; i++)
        if (fatal_signals[i] == sig)
            return (int)i;
    return -1;
}

int gmp_signal_is_stop(int sig)
{
    for (size_t i = 0; i < STOP_COUNT; i++)
        if (stop_signals[i] == sig)
            return 1;
    return 0;
}

void gmp_stop_signals_hold(sigset_t *old)
{
    sigset_t held;
    sigemptyset(&held);
    for (size_t i = 0; i < sizeof sent_stops / sizeof *sent_stops; i++)
        sigaddset(&held, sent_stops[i]);
    sigprocmask(SIG_BLOCK, &held, old);
}

void gmp_stop_signals_release(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

static void *emergency_stack; /* mapped when the handlers are installed */
static ucontext_t handler_context, dump_context;
static int dump_sig;
static const siginfo_t *dump_info;

/* The ring goes as the process does, its end noted where gmp-run keeps
 * how a run's ranks ended (the parent that reaps it finds no ring to read
 * it from). */
static void ring_goes_with(int sig)
{
    const gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    if (!ring || !ring->is_file)
        return;
    gmp_ring_note_own_end(gmp_pl_run_dir(), ring->hdr, sig);
    gmp_recorder_release_ring(gmp_pl.rec);
}

/* What becomes of the ring once the death is written up. */
typedef enum ring_fate {
    RING_STAYS,            /* a handler of the program's follows ours */
    RING_GOES_UNLESS_FAILED, /* a crash: kept for its reader where an allocation
                              * failed before and nothing here wrote it up */
    RING_GOES,             /* a stop: never a death of memory */
} ring_fate;

static int dump_written;
static ring_fate dump_ring_fate;

/* All of it on the stack dump_for chose: a program's alternate stack (Rust
 * sets one of a few KiB) holds no more than the handler's own frame. */
static void dump_now(void)
{
    /* a stop sent while another thread writes a failure's bundle (the
     * exit's, the confirmation's watcher's) waits for it, a while: that
     * bundle, cut short, would never be seen, and the failure with it */
    if (gmp_signal_is_stop(dump_sig))
        gmp_episode_wait_commits(STOP_WAITS_FOR_BUNDLE_MS);
    /* ours went only where the default action was: it follows (bundles
     * written before, by the confirmation's watcher, are rewritten) */
    gmp_outcome_end(GMP_OUTCOME_KILLED, dump_sig);
    /* the failure's bundle, else that of the last words this death fulfils
     * (an abort or a crash, not a stop sent from outside) */
    dump_written = gmp_episode_crash(dump_sig, dump_info) ||
                   (!gmp_signal_is_stop(dump_sig) && gmp_messages_write_last_words(-1));
    /* written up here: no reader makes a second bundle of this death */
    if (dump_written)
        gmp_recorder_ring_flags(gmp_pl.rec, GMP_RING_FLAG_SELF_WRITTEN, 0);
    const gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    int failed = ring && (__atomic_load_n(&ring->hdr->flags, __ATOMIC_RELAXED) &
                          GMP_RING_FLAG_FAILED);
    if (dump_ring_fate == RING_GOES ||
        (dump_ring_fate == RING_GOES_UNLESS_FAILED && (dump_written || !failed)))
        ring_goes_with(dump_sig);
}

/* The room left below us on the alternate stack we run on; SIZE_MAX when
 * we are not on one (a thread stack: megabytes). */
static size_t stack_room(void)
{
    stack_t ss;
    char here;
    if (sigaltstack(NULL, &ss) != 0 || !(ss.ss_flags & SS_ONSTACK))
        return SIZE_MAX;
    uintptr_t low = (uintptr_t)ss.ss_sp, at = (uintptr_t)&here;
    return at > low ? at - low : 0;
}

/* The bundle, on the stack we are on when it has the room, else on ours;
 * then the ring's fate. */
static void dump_for(int sig, const siginfo_t *info, ring_fate fate)
{
    dump_sig = sig;
    dump_info = info;
    dump_ring_fate = fate;
    if (stack_room() >= DUMP_STACK_NEED || !emergency_stack) {
        dump_now();
        return;
    }
    if (getcontext(&dump_context) != 0) {
        dump_now();
        return;
    }
    dump_context.uc_stack.ss_sp = emergency_stack;
    dump_context.uc_stack.ss_size = EMERGENCY_STACK_SIZE;
    dump_context.uc_link = &handler_context; /* back here when dump_now returns */
    makecontext(&dump_context, dump_now, 0);
    swapcontext(&handler_context, &dump_context);
}

static void on_fatal(int sig, siginfo_t *info, void *ucontext)
{
    int saved = errno;
    int i = slot_of(sig);
    struct sigaction *prev = i >= 0 ? &previous[i] : NULL;
    if (!__atomic_exchange_n(&crashing, 1, __ATOMIC_ACQ_REL)) {
        GMP_IN_HOOK_SCOPE();
        gmp_in_signal++;
        /* when the default action follows, nothing is left of a death
         * written up here, nor of a crash no allocation failed before */
        dump_for(sig, info,
                 prev && !(prev->sa_flags & SA_SIGINFO) &&
                         (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN)
                     ? RING_GOES_UNLESS_FAILED
                     : RING_STAYS);
        gmp_in_signal--;
    }
    errno = saved;
    if (!prev)
        return;
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
        prev->sa_sigaction(sig, info, ucontext);
        return;
    }
    if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
        prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
        return;
    }
    /* The disposition from before us, then the signal again: a fault
     * repeats when we return (and the kernel never lets one be ignored);
     * a sent signal (kill, raise, abort) is sent once more, blocked until
     * this handler returns. */
    gmp_real_sigaction(sig, prev, NULL);
    if ((info == NULL || info->si_code <= 0) && prev->sa_handler == SIG_DFL)
        raise(sig);
}

/* A stop: the bundle of a failure still open, if one is; then the ring
 * goes (nothing here is a death of memory) and the default action follows.
 * In a vfork child (our memory, another pid) nothing of the parent's is
 * touched. */
static void on_stop(int sig, siginfo_t *info, void *ucontext)
{
    (void)ucontext;
    int saved = errno;
    if (getpid() == __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&crashing, 1, __ATOMIC_ACQ_REL)) {
        GMP_IN_HOOK_SCOPE();
        gmp_in_signal++;
        dump_for(sig, info, RING_GOES);
        gmp_in_signal--;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    gmp_real_sigaction(sig, &dfl, NULL);
    errno = saved;
    /* blocked until this handler returns, then the default action: the
     * status a parent reads is the signal's, as without us */
    raise(sig);
}

static void ours_in(struct sigaction *sa, void (*handler)(int, siginfo_t *, void *))
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = handler;
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa->sa_mask);
}

int gmp_signal_handler_is_ours(const void *handler)
{
    return handler == (const void *)on_stop || handler == (const void *)on_fatal;
}

int gmp_signal_default_is_ours(int sig, struct sigaction *ours)
{
    if (gmp_signal_is_stop(sig) && __atomic_load_n(&stops_armed, __ATOMIC_ACQUIRE) == 2)
        ours_in(ours, on_stop);
    else if (slot_of(sig) >= 0 && __atomic_load_n(&armed, __ATOMIC_ACQUIRE) == 2)
        ours_in(ours, on_fatal);
    else
        return 0;
    return 1;
}

static void give_thread_alt_stack(void)
{
    if (has_alt_stack)
        return;
    has_alt_stack = 1;
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE))
        return; /* the program has its own */
    void *mem = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return;
    stack_t alt = {.ss_sp = mem, .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&alt, NULL) != 0)
        munmap(mem, ALT_STACK_SIZE);
}

/* Whether the signal still takes its default action: no handler of the
 * program's, and not ignored. */
static int action_is_default(int sig)
{
    struct sigaction current;
    return gmp_real_sigaction(sig, NULL, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
           current.sa_handler == SIG_DFL;
}

/* The crash handlers, once (the emergency stack with them). */
static void install_crash_handlers(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&armed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    void *stack = mmap(NULL, EMERGENCY_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    emergency_stack = stack == MAP_FAILED ? NULL : stack;
    struct sigaction sa;
    ours_in(&sa, on_fatal);
    for (size_t i = 0; i < FATAL_COUNT; i++)
        if (action_is_default(fatal_signals[i]))
            gmp_real_sigaction(fatal_signals[i], &sa, &previous[i]);
    __atomic_store_n(&armed, 2, __ATOMIC_RELEASE);
}

void gmp_crash_arm(void)
{
    if (gmp_pl.cfg->on_crash == GMP_ON_CRASH_NEVER)
        return;
    int saved = errno;
    give_thread_alt_stack();
    install_crash_handlers();
    errno = saved;
}

void gmp_crash_ring_made(void)
{
    if (gmp_pl.cfg->on_crash == GMP_ON_CRASH_NEVER)
        return;
    int saved = errno;
    install_crash_handlers();
    int expected = 0;
    if (__atomic_compare_exchange_n(&stops_armed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        struct sigaction sa;
        ours_in(&sa, on_stop);
        /* asked first: a signal the program ignores (nohup's SIGHUP) is
         * never ours, not for a moment */
        for (size_t i = 0; i < STOP_COUNT; i++)
            if (action_is_default(stop_signals[i]))
                gmp_real_sigaction(stop_signals[i], &sa, NULL);
        __atomic_store_n(&stops_armed, 2, __ATOMIC_RELEASE);
    }
    errno = saved;
}
