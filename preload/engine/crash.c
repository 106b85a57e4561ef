/*
 * crash.c — the corrupted death: malloc returns NULL, the
 * program writes through it, SIGSEGV.  Handlers for SIGSEGV, SIGBUS,
 * SIGABRT, SIGILL and SIGFPE write the bundle (episode.c decides which,
 * by GMP_ON_CRASH), and one for SIGTERM the bundle of a failure still open
 * when the process is stopped; then they hand the signal on exactly as it
 * would have gone:
 * to the handler that was there before ours, or to the default action with
 * the same signal, so the exit status and the core dump do not change.
 *
 * A bundle written here marks the ring (readers make no second one) and,
 * when the default action follows, removes it: the death is written up.
 *
 * With the default after-failure mode nothing is installed until the first
 * failed allocation: a healthy process keeps its signal dispositions
 * untouched.  Ours goes only where the signal's action is still the
 * default, so it acts only on a signal that would otherwise end the
 * process: a runtime that handles SIGSEGV itself (the JVM's implicit null
 * checks, V8's WebAssembly bounds, Go) keeps its handler in front, sees
 * every signal, and finds it as it left it (the JVM's -Xcheck:jni checks).
 * A handler the program installs later replaces ours and works as it would
 * without us.  Each thread that failed an allocation gets an
 * alternate stack (256 KiB of address space, kept for the thread's life;
 * untouched pages cost nothing), so a stack exhausted by the failure still
 * leaves room for the bundle.  A program may have set a smaller alternate
 * stack of its own (CPython's faulthandler does): when the one the handler
 * runs on has less room than a bundle needs, the bundle is written on an
 * emergency stack of ours instead (makecontext/swapcontext: registers and
 * one sigprocmask, no allocation), and the handler goes on where it was.
 */
#include "preload.h"
#include "recorder.h"
#include "ring.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define ALT_STACK_SIZE (256 * 1024)
#define EMERGENCY_STACK_SIZE (256 * 1024)
/* What writing a bundle may take, with room to spare (about 40 KiB at -O2;
 * more in sanitizer builds). */
#define DUMP_STACK_NEED (128 * 1024)

/* SIGTERM is no crash: a launcher's stop (torchrun's, a scheduler's) that
 * can come while a failure is still open, as when every rank of a job runs
 * out on the same step and the first to die has its siblings stopped:
 * that failure is then this death's cause (episode.c), told as it is. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTERM};
#define FATAL_COUNT (sizeof fatal_signals / sizeof *fatal_signals)

static struct sigaction previous[FATAL_COUNT]; /* SIG_DFL where ours went */
static int armed;                      /* atomic: 0 no, 1 installing, 2 installed */
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

static void *emergency_stack; /* mapped when the handlers are installed */
static ucontext_t handler_context, dump_context;
static int dump_sig;
static const siginfo_t *dump_info;

static int dump_written;

static void dump_now(void)
{
    /* the failure's bundle, else that of the last words this death fulfils
     * (an abort or a crash, not a stop sent from outside) */
    dump_written = gmp_episode_crash(dump_sig, dump_info) ||
                   (dump_sig != SIGTERM && gmp_messages_write_last_words(-1));
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

/* The bundle, on the stack we are on when it has the room, else on ours. */
static void dump_for(int sig, const siginfo_t *info)
{
    dump_sig = sig;
    dump_info = info;
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
        /* ours went only where the default action was: it follows */
        gmp_outcome_end(GMP_OUTCOME_KILLED, sig);
        dump_for(sig, info);
        if (dump_written) {
            /* written up here: no reader makes a second bundle of this
             * death; when the default action follows, nothing is left */
            gmp_recorder_ring_flags(gmp_pl.rec, GMP_RING_FLAG_SELF_WRITTEN, 0);
            if (prev && !(prev->sa_flags & SA_SIGINFO) &&
                (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN))
                gmp_recorder_release_ring(gmp_pl.rec);
        }
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
    sigaction(sig, prev, NULL);
    if ((info == NULL || info->si_code <= 0) && prev->sa_handler == SIG_DFL)
        raise(sig);
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
    return sigaction(sig, NULL, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
           current.sa_handler == SIG_DFL;
}

void gmp_crash_arm(void)
{
    if (gmp_pl.cfg->on_crash == GMP_ON_CRASH_NEVER)
        return;
    int saved = errno;
    give_thread_alt_stack();
    int expected = 0;
    if (__atomic_compare_exchange_n(&armed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        void *stack = mmap(NULL, EMERGENCY_STACK_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        emergency_stack = stack == MAP_FAILED ? NULL : stack;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < FATAL_COUNT; i++)
            if (action_is_default(fatal_signals[i]))
                sigaction(fatal_signals[i], &sa, &previous[i]);
        __atomic_store_n(&armed, 2, __ATOMIC_RELEASE);
    }
    errno = saved;
}
