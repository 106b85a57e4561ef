/*
 * host_counters.c — host bytes in use, and GPU calls per device, without a
 * contended counter.
 *
 * Each thread owns a slot of counters (claimed on its first allocation,
 * returned by a pthread key destructor when it exits, its totals folded into
 * `retired`).  Only the owner writes a slot, with plain relaxed stores, so a
 * malloc/free costs no atomic read-modify-write; a reader sums the slots.
 * Threads beyond the slot table share one atomic overflow counter.  Slots
 * are claimed lowest first and readers sum only up to the highest ever
 * claimed: a large allocation's event reads the sum, and 512 lines read
 * cold (the block's own writes have just evicted them) cost it more than
 * the rest of its bookkeeping.  A slot also counts its thread's GPU calls
 * for the one device the thread is on (device.c's cell); they move to
 * device.c's shared counters when the thread turns to another device, and
 * when it exits.  And it holds the allocator hooks' bound for the common
 * case (gmp_host_word_bound_publish), so that the hooks read one line of
 * their own and test nothing else.
 */
#include "preload.h"

#include <pthread.h>

#define HOST_SLOTS 512

static host_slot slots[HOST_SLOTS];
static int slots_seen GMP_STARTUP_DATA; /* atomic: 1 + the highest slot ever claimed */
static int64_t retired;  /* atomic: totals of exited threads */
static int64_t overflow; /* atomic: threads that found no slot */
static uint64_t retired_allocs, retired_frees, overflow_allocs, overflow_frees; /* atomic */
static pthread_key_t slot_key;
static int key_ready; /* atomic: see ensure_key */

host_slot gmp_host_unclaimed;
__thread host_slot *gmp_host_slot __attribute__((tls_model("initial-exec"))) = &gmp_host_unclaimed;
/* atomic: what gmp_host_word_bound_publish last stored (at every start) */
static size_t word_bound GMP_STARTUP_DATA;

/* How many slots a reader sums: up to the highest ever claimed. */
static inline int slots_to_sum(void)
{
    return __atomic_load_n(&slots_seen, __ATOMIC_ACQUIRE);
}
static __thread int no_slot __attribute__((tls_model("initial-exec")));

/* The slot's GPU calls into device.c's shared counters.  A reader racing
 * this sees them twice or not at all for a moment (sums are approximate
 * while racing), never for good. */
static void move_device_calls(host_slot *s)
{
    uint32_t cell = __atomic_load_n(&s->device_cell, __ATOMIC_RELAXED);
    if (!cell)
        return;
    gmp_device_calls_shared(cell - 1, __atomic_load_n(&s->device_allocs, __ATOMIC_RELAXED),
                            __atomic_load_n(&s->device_frees, __ATOMIC_RELAXED));
    __atomic_store_n(&s->device_allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->device_frees, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->device_cell, 0, __ATOMIC_RELAXED);
}

void gmp_thread_device_calls_move(host_slot *s, uint32_t to_cell)
{
    move_device_calls(s);
    __atomic_store_n(&s->device_cell, to_cell + 1, __ATOMIC_RELAXED);
}

void gmp_thread_device_calls(uint32_t cell, uint64_t *allocs, uint64_t *frees)
{
    uint64_t a = 0, f = 0;
    for (int i = 0, n = slots_to_sum(); i < n; i++) {
        uint32_t held = __atomic_load_n(&slots[i].device_cell, __ATOMIC_RELAXED);
        if (!held || (cell != GMP_EVERY_CELL && held != cell + 1))
            continue;
        a += __atomic_load_n(&slots[i].device_allocs, __ATOMIC_RELAXED);
        f += __atomic_load_n(&slots[i].device_frees, __ATOMIC_RELAXED);
    }
    *allocs = a;
    *frees = f;
}

static void release_slot(void *p)
{
    host_slot *s = p;
    move_device_calls(s);
    __atomic_fetch_add(&retired, __atomic_load_n(&s->bytes, __ATOMIC_RELAXED),
                       __ATOMIC_RELAXED);
    __atomic_fetch_add(&retired_allocs, __atomic_load_n(&s->allocs, __ATOMIC_RELAXED),
                       __ATOMIC_RELAXED);
    __atomic_fetch_add(&retired_frees, __atomic_load_n(&s->frees, __ATOMIC_RELAXED),
                       __ATOMIC_RELAXED);
    __atomic_store_n(&s->bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->frees, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->claimed, 0, __ATOMIC_RELEASE);
    gmp_host_slot = &gmp_host_unclaimed;
}

/* Each slot's bound, then the thread that stored looks again (see
 * gmp_host_fast_path_refresh): a slot claimed meanwhile takes the bound
 * itself (take_bound), so every slot ends with the last one stored. */
GMP_START_EXIT_TEXT void gmp_host_word_bound_publish(size_t bound)
{
    __atomic_store_n(&word_bound, bound, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0, n = slots_to_sum(); i < n; i++)
        __atomic_store_n(&slots[i].word_bound, bound, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* A newly claimed slot's bound: published (slots_seen) before this, so a
 * publisher that stores after our look stores into it too. */
static void take_bound(host_slot *s)
{
    for (;;) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        size_t bound = __atomic_load_n(&word_bound, __ATOMIC_SEQ_CST);
        __atomic_store_n(&s->word_bound, bound, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&word_bound, __ATOMIC_SEQ_CST) == bound)
            return;
    }
}

/* The key that returns a slot when its thread exits, made at the process's
 * first allocation (one that never allocates pays nothing): 1 when ready;
 * 0 while another thread makes it (this allocation counts in the overflow)
 * or when it could not be made. */
static int ensure_key(void)
{
    int state = __atomic_load_n(&key_ready, __ATOMIC_ACQUIRE); /* 0, 1 making, 2, 3 failed */
    if (GMP_LIKELY(state == 2))
        return 1;
    int expected = 0;
    if (state != 0 || !__atomic_compare_exchange_n(&key_ready, &expected, 1, 0,
                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    int ok = pthread_key_create(&slot_key, release_slot) == 0;
    __atomic_store_n(&key_ready, ok ? 2 : 3, __ATOMIC_RELEASE);
    return ok;
}

static host_slot *claim_slot(void)
{
    if (no_slot || !ensure_key())
        return NULL;
    for (int i = 0; i < HOST_SLOTS; i++) {
        int expected = 0;
        if (__atomic_load_n(&slots[i].claimed, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&slots[i].claimed, &expected, 1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            /* pthread_setspecific on an early key uses static storage */
            int ok;
            {
                GMP_IN_HOOK_SCOPE();
                ok = pthread_setspecific(slot_key, &slots[i]) == 0;
            }
            if (!ok) {
                __atomic_store_n(&slots[i].claimed, 0, __ATOMIC_RELEASE);
                break;
            }
            /* before the slot counts anything: a reader that sees its
             * counts sees it (racing sums are approximate all the same) */
            int seen = __atomic_load_n(&slots_seen, __ATOMIC_RELAXED);
            while (seen < i + 1 && !__atomic_compare_exchange_n(&slots_seen, &seen, i + 1, 1,
                                                                __ATOMIC_ACQ_REL,
                                                                __ATOMIC_RELAXED))
                ;
            take_bound(&slots[i]);
            gmp_host_slot = &slots[i];
            return gmp_host_slot;
        }
    }
    no_slot = 1;
    return NULL;
}

__attribute__((noinline)) void gmp_host_account_first(uint64_t bytes, int is_free)
{
    uint64_t counted = bytes + GMP_HOST_CALL_EXTRA;
    host_slot *s = claim_slot();
    if (!s) {
        __atomic_fetch_add(&overflow, is_free ? -(int64_t)counted : (int64_t)counted,
                           __ATOMIC_RELAXED);
        __atomic_fetch_add(is_free ? &overflow_frees : &overflow_allocs, 1, __ATOMIC_RELAXED);
        return;
    }
    if (is_free)
        gmp_host_slot_free(s, counted);
    else
        gmp_host_slot_alloc(s, counted);
}

void gmp_host_counts(uint64_t *allocs, uint64_t *frees)
{
    uint64_t a = __atomic_load_n(&retired_allocs, __ATOMIC_RELAXED) +
                 __atomic_load_n(&overflow_allocs, __ATOMIC_RELAXED);
    uint64_t f = __atomic_load_n(&retired_frees, __ATOMIC_RELAXED) +
                 __atomic_load_n(&overflow_frees, __ATOMIC_RELAXED);
    for (int i = 0, n = slots_to_sum(); i < n; i++) {
        a += __atomic_load_n(&slots[i].allocs, __ATOMIC_RELAXED);
        f += __atomic_load_n(&slots[i].frees, __ATOMIC_RELAXED);
    }
    *allocs = a;
    *frees = f;
}

uint64_t gmp_host_in_use(void)
{
    uint64_t sum = (uint64_t)__atomic_load_n(&retired, __ATOMIC_RELAXED) +
                   (uint64_t)__atomic_load_n(&overflow, __ATOMIC_RELAXED);
    uint64_t calls = __atomic_load_n(&retired_allocs, __ATOMIC_RELAXED) +
                     __atomic_load_n(&overflow_allocs, __ATOMIC_RELAXED) -
                     __atomic_load_n(&retired_frees, __ATOMIC_RELAXED) -
                     __atomic_load_n(&overflow_frees, __ATOMIC_RELAXED);
    for (int i = 0, n = slots_to_sum(); i < n; i++) {
        sum += (uint64_t)__atomic_load_n(&slots[i].bytes, __ATOMIC_RELAXED);
        calls += __atomic_load_n(&slots[i].allocs, __ATOMIC_RELAXED) -
                 __atomic_load_n(&slots[i].frees, __ATOMIC_RELAXED);
    }
    sum -= calls * GMP_HOST_CALL_EXTRA;
    return (int64_t)sum > 0 ? sum : 0; /* racing threads may leave it below zero */
}
