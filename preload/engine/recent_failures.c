/*
 * recent_failures.c — the latest failed allocations, kept for what follows
 * one: a fatal signal (episode.c's crash: the crashing thread's own
 * failure, its unchecked NULL, else the newest) and a framework's OOM
 * message written after its failure (oom_messages.c).  Eight slots, each
 * written or read only by whoever holds its busy flag, taken by CAS and
 * never waited for: a writer that finds its slot busy drops its hint, a
 * reader tries the next best slot.  No lock and no allocation, for a
 * signal handler reads them.
 */
#include "preload.h"

#include <string.h>

#define RECENT_SLOTS 8
typedef struct recent_failure {
    int busy;     /* atomic */
    uint64_t seq; /* atomic: 0 empty, else the order of writing */
    uint32_t tid; /* atomic */
    gmp_backend backend;
    gmp_failed_request f;
} recent_failure;
static recent_failure recent[RECENT_SLOTS];
static uint64_t recent_written; /* atomic */

static int take_slot(recent_failure *r)
{
    int idle = 0;
    return __atomic_compare_exchange_n(&r->busy, &idle, 1, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

void gmp_recent_failure_note(gmp_backend backend, const gmp_failed_request *f)
{
    uint64_t seq = __atomic_add_fetch(&recent_written, 1, __ATOMIC_RELAXED);
    recent_failure *r = &recent[seq % RECENT_SLOTS];
    if (!take_slot(r))
        return;
    r->backend = backend;
    r->f = *f;
    __atomic_store_n(&r->tid, gmp_gettid(), __ATOMIC_RELAXED);
    __atomic_store_n(&r->seq, seq, __ATOMIC_RELAXED);
    __atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
}

/* The newest recent failure that is this thread's (own_only), of backend
 * (want_backend >= 0) and at since_ns or later, copied out; 0 when there is
 * none (or every candidate is being written right now). */
static int newest_recent(int own_only, int want_backend, uint64_t since_ns,
                         gmp_failed_request *f, gmp_backend *backend)
{
    uint32_t self = gmp_gettid();
    int tried[RECENT_SLOTS] = {0};
    for (;;) {
        int best = -1;
        uint64_t best_seq = 0;
        for (int i = 0; i < RECENT_SLOTS; i++) {
            uint64_t seq = __atomic_load_n(&recent[i].seq, __ATOMIC_RELAXED);
            if (tried[i] || seq <= best_seq ||
                (own_only && __atomic_load_n(&recent[i].tid, __ATOMIC_RELAXED) != self))
                continue;
            best = i;
            best_seq = seq;
        }
        if (best < 0)
            return 0;
        tried[best] = 1;
        if (!take_slot(&recent[best]))
            continue;
        int fits = (want_backend < 0 || (int)recent[best].backend == want_backend) &&
                   recent[best].f.time_ns >= since_ns;
        if (fits) {
            *f = recent[best].f;
            *backend = recent[best].backend;
        }
        __atomic_store_n(&recent[best].busy, 0, __ATOMIC_RELEASE);
        if (fits)
            return 1;
    }
}

int gmp_recent_failure_for_crash(gmp_failed_request *f, gmp_backend *backend)
{
    return newest_recent(1, -1, 0, f, backend) || newest_recent(0, -1, 0, f, backend);
}

int gmp_episode_recent_failure(gmp_backend backend, uint64_t since_ns, gmp_failed_request *f)
{
    gmp_backend found;
    return newest_recent(0, (int)backend, since_ns, f, &found);
}

int gmp_recent_failures_after_fork(void)
{
    if (!__atomic_load_n(&recent_written, __ATOMIC_RELAXED))
        return 0;
    memset(recent, 0, sizeof recent);
    __atomic_store_n(&recent_written, 0, __ATOMIC_RELAXED);
    return 1;
}
