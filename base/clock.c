/*
 * clock.c — the wall clock every event is stamped with, read in every hook.
 *
 * clock_gettime(CLOCK_REALTIME) costs 35 ns in the vDSO of a virtual
 * machine, two of them a device allocate/free pair.  Where the kernel keeps
 * its own time with the TSC (clocksource "tsc", an invariant TSC, rdtsc not
 * trapped by prctl), the time is the TSC scaled from an anchor: a pair of
 * (TSC, CLOCK_REALTIME) readings and the ns per tick measured between two
 * such pairs.  The first 10 ms of a process read clock_gettime and measure
 * the rate; after that the anchor is renewed when it has reached ten times
 * as far as the rate was measured over, at most a second (taking up the
 * clock's steps and slews, and a rate measured over the last stretch), so
 * an extrapolated time is within a few microseconds of clock_gettime's.
 * Elsewhere, or until then, it is clock_gettime.
 *
 * The anchor is a seqlock: readers take plain loads and retry with
 * clock_gettime when a renewal is under way; one renewer at a time (the
 * odd sequence, taken by compare-and-swap, never waited for).  Nothing
 * here allocates or blocks: it is called from signal handlers too.
 */
#include "util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define CALIBRATE_NS (10ull * 1000 * 1000) /* the first rate, measured over */
#define RENEW_NS (1000ull * 1000 * 1000)   /* an anchor's longest reach */
#define PAIR_TICKS 2000                    /* a (TSC, time) pair's longest read */

static uint64_t clock_gettime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>

#define LOAD(field) __atomic_load_n(&anchor.field, __ATOMIC_RELAXED)
#define STORE(field, v) __atomic_store_n(&anchor.field, (v), __ATOMIC_RELAXED)

static struct {
    uint64_t seq;   /* odd while renewed */
    uint64_t tsc;   /* the anchor: the TSC and the time read together */
    uint64_t ns;
    uint64_t mult;  /* ns per tick, 32.32 fixed point; 0: not in use */
    uint64_t reach; /* ticks an anchor is trusted for */
} anchor;           /* every field atomic */

enum { TSC_UNASKED, TSC_READABLE, TSC_USABLE, TSC_UNUSABLE };
static int tsc_state; /* atomic */

/* rdtsc does not trap (prctl) and the TSC is invariant: it may be read. */
static int tsc_readable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8)))
        return 0;
    int mode = 0;
    return prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_ENABLE;
}

/* The kernel keeps its own time with the TSC: it found it synchronised
 * across CPUs and trusts it.  Asked once a process has run 10 ms, so that
 * the short-lived do not pay for the read. */
static int kernel_clock_is_tsc(void)
{
    char source[8] = {0};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, source, sizeof source - 1);
    close(fd);
    return n >= 4 && memcmp(source, "tsc\n", 4) == 0;
}

/* A (TSC, time) pair read together, or 0 when the read was interrupted
 * (the TSC moved too far across it to say when the time was taken). */
static uint64_t read_pair(uint64_t *ns)
{
    uint64_t before = __rdtsc();
    *ns = clock_gettime_ns();
    uint64_t after = __rdtsc();
    return after - before < PAIR_TICKS ? before + (after - before) / 2 : 0;
}

/* Under the odd sequence: a first anchor, or a rate and a new anchor. */
static void renew(uint64_t tsc, uint64_t ns)
{
    uint64_t at_tsc = LOAD(tsc), at_ns = LOAD(ns);
    uint64_t mult = 0;
    if (at_tsc && tsc > at_tsc && ns > at_ns) {
        int state = __atomic_load_n(&tsc_state, __ATOMIC_RELAXED);
        if (state == TSC_READABLE) {
            state = kernel_clock_is_tsc() ? TSC_USABLE : TSC_UNUSABLE;
            __atomic_store_n(&tsc_state, state, __ATOMIC_RELAXED);
        }
        unsigned __int128 rate = ((unsigned __int128)(ns - at_ns) << 32) / (tsc - at_tsc);
        /* between 0.01 and 100 ns a tick: anything else is not a TSC */
        if (state == TSC_USABLE && rate > (1ull << 32) / 100 && rate < (100ull << 32))
            mult = (uint64_t)rate;
    } /* else the first pair, or the TSC or the clock went back: start again */
    STORE(tsc, tsc);
    STORE(ns, ns);
    STORE(mult, mult);
    /* a rate measured over T is trusted for 10 T: a pair's read (under
     * PAIR_TICKS, well under a microsecond) then errs by at most a few
     * microseconds at the end of the reach */
    uint64_t reach_ns = (ns - at_ns) * 10 < RENEW_NS ? (ns - at_ns) * 10 : RENEW_NS;
    STORE(reach, mult ? (reach_ns << 32) / mult : 0);
}

/* The slow path: clock_gettime, and the anchor set or renewed when due and
 * no other thread is at it.  Out of line: the fast path then needs no
 * frame of its own. */
__attribute__((noinline)) static uint64_t read_and_renew(void)
{
    int state = __atomic_load_n(&tsc_state, __ATOMIC_RELAXED);
    if (state == TSC_UNASKED) {
        state = tsc_readable() ? TSC_READABLE : TSC_UNUSABLE;
        __atomic_store_n(&tsc_state, state, __ATOMIC_RELAXED);
    }
    if (state == TSC_UNUSABLE)
        return clock_gettime_ns();
    uint64_t ns;
    uint64_t tsc = read_pair(&ns);
    uint64_t seq = __atomic_load_n(&anchor.seq, __ATOMIC_RELAXED);
    uint64_t at_tsc = LOAD(tsc), at_ns = LOAD(ns);
    int due = !at_tsc || tsc <= at_tsc || ns <= at_ns ||
              (LOAD(mult) ? tsc - at_tsc >= LOAD(reach) : ns - at_ns >= CALIBRATE_NS);
    if (!tsc || !due || (seq & 1) ||
        !__atomic_compare_exchange_n(&anchor.seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return ns;
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the odd sequence before the fields */
    renew(tsc, ns);
    __atomic_store_n(&anchor.seq, seq + 2, __ATOMIC_RELEASE);
    return ns;
}

uint64_t gmp_now_realtime_ns(void)
{
    uint64_t seq = __atomic_load_n(&anchor.seq, __ATOMIC_ACQUIRE);
    uint64_t mult = LOAD(mult);
    if (__builtin_expect(!(seq & 1) && mult, 1)) {
        uint64_t base_tsc = LOAD(tsc), base_ns = LOAD(ns), reach = LOAD(reach);
        uint64_t ticks = __rdtsc() - base_tsc;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__builtin_expect(ticks < reach && LOAD(seq) == seq, 1))
            return base_ns + (uint64_t)(((unsigned __int128)ticks * mult) >> 32);
    }
    return read_and_renew();
}

int gmp_clock_uses_tsc(void)
{
    return LOAD(mult) != 0;
}

void gmp_clock_after_fork(void)
{
    /* a renewer in another thread of the parent is gone with it */
    uint64_t seq = LOAD(seq);
    if (seq & 1) {
        STORE(mult, 0);
        __atomic_store_n(&anchor.seq, seq + 1, __ATOMIC_RELEASE);
    }
}
#else
uint64_t gmp_now_realtime_ns(void)
{
    return clock_gettime_ns();
}

int gmp_clock_uses_tsc(void)
{
    return 0;
}

void gmp_clock_after_fork(void)
{
}
#endif
