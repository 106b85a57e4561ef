/*
 * outcome.c — how the process ended, in every bundle it wrote.  A bundle is
 * written at the failure, while the process may run on (a notebook kernel,
 * a server, a program that catches its MemoryError): its metadata.json says
 * "outcome": {"state": "running"}.  When the process ends in a way its own
 * code sees, each bundle it wrote is rewritten with how: exited with its
 * status (0: it survived the failure, and the readers say it was no death)
 * or killed by the signal our crash handler hands on to its default action.
 * The ends seen: exit() and a return from main (an on_exit handler, which
 * glibc gives the status), _exit and _Exit (their hooks), a fatal signal
 * (crash.c).  A bundle written at that moment carries the outcome from the
 * start; so does that of a runtime's last words that a failing exit
 * fulfils (oom_messages.c).  A death no code in the process sees (SIGKILL) leaves "running";
 * gmp-run's bundle of that death says who killed it.
 *
 * Each failure keeps its own outcome: when the process dies (a non-zero
 * exit, a fatal signal) after failures of several episodes, the newest
 * failure's bundle tells the death, and each older one's outcome names that
 * bundle (death_bundle): the process went on from those, and readers call
 * them survived.  A bundle written after the end was noted (a crash's, an
 * episode the exit confirms) is the newest, and the others are rewritten
 * to name it.
 *
 * No allocation and no lock (a try-flag, skipped when taken): the crash
 * path runs it in a signal handler.  A forked child forgets the parent's
 * bundles; a vfork child, which shares our memory, is told apart by its pid.
 */
#include "bundle.h"
#include "preload.h"
#include "start_path.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEPT 8 /* the newest bundles of this process whose outcome is written */

static char written[KEPT][GMP_PATH_MAX];
static int written_failure[KEPT]; /* of a failure (not a pressure warning) */
/* atomic: slot k holds bundle n once written_seq[k] is n + 1 (the path is
 * copied in before, so a reader that sees it reads the whole path) */
static unsigned written_seq[KEPT];
/* every process sets these as it starts and ends: on the loader's page */
static unsigned written_count GMP_STARTUP_DATA; /* atomic; slot = n % KEPT */
static int ending_state GMP_STARTUP_DATA;       /* atomic: the first end seen wins */
static int ending_code GMP_STARTUP_DATA;
static int patching GMP_STARTUP_DATA; /* atomic try-flag over patch_buf */
static char patch_buf[128 * 1024];

GMP_START_EXIT_TEXT static int ours(void)
{
    return gmp_start_getpid() == __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED);
}

void gmp_outcome_now(gmp_outcome *o)
{
    o->state = (gmp_outcome_state)__atomic_load_n(&ending_state, __ATOMIC_ACQUIRE);
    o->code = __atomic_load_n(&ending_code, __ATOMIC_RELAXED);
}

/* A death: an end that is not an exit of 0. */
static int died(const gmp_outcome *o)
{
    return o->state == GMP_OUTCOME_KILLED || (o->state == GMP_OUTCOME_EXITED && o->code != 0);
}

/* Rewrite the outcome of the bundles kept (patching held): the newest
 * failure's bundle tells a death, the older failures' name it. */
static void patch_kept(unsigned n)
{
    gmp_outcome o;
    gmp_outcome_now(&o);
    unsigned first = n > KEPT ? n - KEPT : 0;
    long death = -1;
    for (unsigned i = first; died(&o) && i < n; i++)
        if (__atomic_load_n(&written_seq[i % KEPT], __ATOMIC_ACQUIRE) == i + 1 &&
            written_failure[i % KEPT])
            death = (long)i;
    const char *death_name = NULL;
    if (death >= 0) {
        death_name = strrchr(written[death % KEPT], '/');
        death_name = death_name ? death_name + 1 : written[death % KEPT];
    }
    for (unsigned i = first; i < n; i++)
        if (__atomic_load_n(&written_seq[i % KEPT], __ATOMIC_ACQUIRE) == i + 1) /* whole */
            gmp_bundle_patch_outcome_of(written[i % KEPT], &o,
                                        death >= 0 && (long)i != death &&
                                                written_failure[i % KEPT]
                                            ? death_name
                                            : NULL,
                                        patch_buf, sizeof patch_buf);
}

void gmp_outcome_note_bundle(const char *path, int failure)
{
    if (!ours())
        return;
    unsigned n = __atomic_fetch_add(&written_count, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&written_seq[n % KEPT], 0, __ATOMIC_RELAXED);
    gmp_strlcpy(written[n % KEPT], path, sizeof written[0]);
    written_failure[n % KEPT] = failure;
    __atomic_store_n(&written_seq[n % KEPT], n + 1, __ATOMIC_RELEASE);
    /* written after the end was told (it carries that outcome): it is the
     * death of the failures before it, when there are any */
    if (!failure || n == 0 ||
        __atomic_load_n(&ending_state, __ATOMIC_ACQUIRE) == GMP_OUTCOME_RUNNING ||
        __atomic_exchange_n(&patching, 1, __ATOMIC_ACQUIRE))
        return;
    int saved = errno;
    patch_kept(n + 1);
    __atomic_store_n(&patching, 0, __ATOMIC_RELEASE);
    errno = saved;
}

GMP_START_EXIT_TEXT void gmp_outcome_end(gmp_outcome_state state, int code)
{
    if (!ours() || !gmp_pl.cfg->enabled)
        return;
    gmp_messages_end(); /* our line a runtime's printed frames held back */
    int expected = GMP_OUTCOME_RUNNING;
    __atomic_store_n(&ending_code, code, __ATOMIC_RELAXED);
    if (!__atomic_compare_exchange_n(&ending_state, &expected, (int)state, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return; /* told already: the first end is the one */
    if (state == GMP_OUTCOME_EXITED && code != 0)
        gmp_messages_write_last_words(code); /* PHP's, GHC's: they end so */
    unsigned n = __atomic_load_n(&written_count, __ATOMIC_ACQUIRE);
    if (n == 0 || __atomic_exchange_n(&patching, 1, __ATOMIC_ACQUIRE))
        return;
    int saved = errno;
    patch_kept(n);
    __atomic_store_n(&patching, 0, __ATOMIC_RELEASE);
    errno = saved;
}

/* exit() and a return from main: glibc hands on_exit's handlers the status. */
GMP_START_EXIT_TEXT static void at_exit_with(int status, void *arg)
{
    (void)arg;
    gmp_outcome_end(GMP_OUTCOME_EXITED, status & 0xff);
}

GMP_START_EXIT_TEXT void gmp_outcome_watch_exit(void)
{
    on_exit(at_exit_with, NULL);
}

void gmp_outcome_after_fork(void)
{
    __atomic_store_n(&written_count, 0, __ATOMIC_RELAXED);
    for (int k = 0; k < KEPT; k++) {
        __atomic_store_n(&written_seq[k], 0, __ATOMIC_RELAXED);
        written_failure[k] = 0;
    }
    __atomic_store_n(&ending_state, GMP_OUTCOME_RUNNING, __ATOMIC_RELAXED);
    __atomic_store_n(&patching, 0, __ATOMIC_RELAXED);
}
