/*
 * peak_watch.c — the preload's host counters, for a program that measures
 * a stretch of itself (the Python profiler's profile_function and
 * profile_context): bytes in host blocks now, allocation and free calls so
 * far, and the highest bytes in use since a watch began.
 *
 * A watch is a slot of its own, so that nested and concurrent measurements
 * never reset each other's peak, and nothing the program reads elsewhere
 * (the Prometheus peak, the bundle's numbers) moves.  The peak is noted
 * where the hooks already read the sum of the counters: at an allocation
 * of GMP_HOST_EVENT_MIN_BYTES or more (the hot path of small blocks reads
 * nothing shared), and at every read.
 */
#include "preload.h"

#define PEAK_WATCHES 32

static int watch_claimed[PEAK_WATCHES]; /* atomic */
static uint64_t watch_peak[PEAK_WATCHES]; /* atomic */
static int watches_open;                  /* atomic: how many are claimed */

static void raise_to(uint64_t *peak, uint64_t in_use)
{
    uint64_t top = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (in_use > top && !__atomic_compare_exchange_n(peak, &top, in_use, 1, __ATOMIC_RELAXED,
                                                        __ATOMIC_RELAXED))
        ;
}

void gmp_peak_watch_note(uint64_t in_use)
{
    if (GMP_LIKELY(!__atomic_load_n(&watches_open, __ATOMIC_RELAXED)))
        return;
    for (int i = 0; i < PEAK_WATCHES; i++)
        if (__atomic_load_n(&watch_claimed[i], __ATOMIC_ACQUIRE))
            raise_to(&watch_peak[i], in_use);
}

GMP_EXPORT int gmp_preload_peak_watch_begin(void)
{
    if (!gmp_pl_active())
        return -1;
    for (int i = 0; i < PEAK_WATCHES; i++) {
        int free_slot = 0;
        if (__atomic_compare_exchange_n(&watch_claimed[i], &free_slot, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&watch_peak[i], gmp_host_in_use(), __ATOMIC_RELAXED);
            __atomic_add_fetch(&watches_open, 1, __ATOMIC_RELEASE);
            return i;
        }
    }
    return -1;
}

GMP_EXPORT int gmp_preload_host_counts(int watch, gmp_host_reading *out)
{
    if (!out || !gmp_pl_active())
        return -1;
    out->in_use = gmp_host_in_use();
    gmp_host_counts(&out->allocations, &out->frees);
    out->peak = 0;
    if (watch >= 0 && watch < PEAK_WATCHES &&
        __atomic_load_n(&watch_claimed[watch], __ATOMIC_ACQUIRE)) {
        raise_to(&watch_peak[watch], out->in_use);
        out->peak = __atomic_load_n(&watch_peak[watch], __ATOMIC_RELAXED);
    }
    return 0;
}

GMP_EXPORT void gmp_preload_peak_watch_end(int watch)
{
    if (watch < 0 || watch >= PEAK_WATCHES)
        return;
    int claimed = 1;
    if (__atomic_compare_exchange_n(&watch_claimed[watch], &claimed, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        __atomic_sub_fetch(&watches_open, 1, __ATOMIC_RELEASE);
}
