/*
 * ring_guard.c — a reader of another process's ring survives the file being
 * truncated under it.  gmp-run, `gmp-inspect watch` and `recover` map ring
 * files that other processes own and may shrink at any time (a buggy or
 * hostile program, another user's ring in a shared directory); a load from
 * a page past the file's new end raises SIGBUS, which would end the reader
 * (and with gmp-run, the supervision of a whole job).  Each mapping a
 * reader attaches is listed here; a SIGBUS inside one replaces the whole
 * mapping with zeroed anonymous memory, where the seqlock and the ids read
 * as "nothing written", and the load is retried.  A SIGBUS anywhere else
 * takes the default action, as if this file did not exist.
 *
 * The handler is installed only where SIGBUS has its default disposition:
 * a program with a handler of its own (one that loads the recorder library
 * through Python, say) keeps it.  The list is a fixed array of atomics, so
 * the handler touches no lock and no heap.
 */
#include "ring.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GUARDED_MAX 64

static struct guarded {
    uintptr_t start; /* atomic: 0 for a free entry; published after len */
    size_t len;
} guarded[GUARDED_MAX];

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARDED_MAX; i++) {
        uintptr_t start = __atomic_load_n(&guarded[i].start, __ATOMIC_ACQUIRE);
        if (start && at >= start && at - start < guarded[i].len) {
            /* zeroes in place of the file: the faulting load now reads 0 */
            if (mmap((void *)start, guarded[i].len, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
                return;
            break;
        }
    }
    /* not a ring's: the default action, on the fault's retry */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

/* Ours as SIGBUS's handler where it has the default one; one sigaction
 * call per attach, so a program that sets its own later keeps it. */
static void install(void)
{
    struct sigaction old, ours;
    if (sigaction(SIGBUS, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL)
        return; /* ours already, or the program's own */
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGBUS, &ours, NULL);
}

void gmp_ring_guard(const void *start, size_t len)
{
    install();
    for (int i = 0; i < GUARDED_MAX; i++) {
        uintptr_t none = 0;
        if (__atomic_load_n(&guarded[i].start, __ATOMIC_RELAXED))
            continue;
        guarded[i].len = len; /* before start is published, for the handler */
        if (__atomic_compare_exchange_n(&guarded[i].start, &none, (uintptr_t)start, 0,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            return;
    }
    /* more mappings than entries: this one stays unguarded, as before */
}

void gmp_ring_unguard(const void *start)
{
    for (int i = 0; i < GUARDED_MAX; i++) {
        uintptr_t was = (uintptr_t)start;
        if (__atomic_compare_exchange_n(&guarded[i].start, &was, 0, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
            return;
    }
}
