/*
 * in_use.h — what is in use, host and devices, as the preload counts it:
 * per-thread host counters (host_counters.c) that the allocator hooks add to
 * without a lock or a shared line, the live tables of large host blocks and
 * of device allocations (device.c, device_memory.c), and the bound that
 * sends the malloc and free hooks down their common case.  A layer of
 * preload.h, which includes it; kept apart because the hottest code of the
 * preload (libc.c's hooks) inlines what is here.
 */
#ifndef GMP_IN_USE_H
#define GMP_IN_USE_H

#include "dump_request.h"
#include "gpumemprof.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>

/* host_counters.c: per-thread counters; in_use sums them (approximate while racing).
 * Only the owning thread writes a slot, so the hot path is plain stores
 * (relaxed atomics: readers in other threads never see a torn value). */
typedef struct host_slot {
    /* allocated minus freed by this thread, each call's bytes counted
     * with GMP_HOST_CALL_EXTRA more (see gmp_host_slot_alloc) */
    _Alignas(64) int64_t bytes;
    uint64_t allocs, frees; /* calls that added / returned bytes */
    /* atomic: the allocator hooks' common-case bound on a block's size
     * word for this thread, a copy of what gmp_host_word_bound_publish
     * last stored: on the line the hook writes anyway, and 0 in the
     * unclaimed slot, so the hook tests neither the slot nor a shared word */
    size_t word_bound;
    int claimed;                /* atomic */
    uint32_t device_cell;       /* atomic: 1 + the device counter cell below; 0 none */
    uint64_t device_allocs, device_frees; /* that cell's GPU calls by this thread */
} host_slot;
_Static_assert(sizeof(host_slot) == 64, "a thread's counters, one cache line");

/* This thread's slot; until it claims one (and after it exits), the
 * unclaimed slot, which is never written and whose bound is 0. */
GMP_HIDDEN extern __thread host_slot *gmp_host_slot __attribute__((tls_model("initial-exec")));
GMP_HIDDEN extern host_slot gmp_host_unclaimed;
static inline int gmp_host_slot_claimed(const host_slot *s)
{
    return s != &gmp_host_unclaimed;
}
/* A thread's first call, an allocation or a free of `bytes`: claims its
 * slot (or counts into the overflow). */
GMP_HIDDEN void gmp_host_account_first(uint64_t bytes, int is_free);
/* The common-case bound into every slot (libc.c decides it): a store into
 * each, then the caller looks again (gmp_host_fast_path_refresh). */
GMP_HIDDEN void gmp_host_word_bound_publish(size_t bound);

/* delta added to a word of a slot by the slot's own thread, its only
 * writer: a thread frees what others allocated, so its own count may go
 * below zero; the sum over threads is what counts (wrapping, never UB). */
static inline void gmp_slot_word_add(uint64_t *word, uint64_t delta)
{
#if defined(__x86_64__)
    /* One add to memory, not the load and store that relaxed atomics keep
     * apart (3% of the malloc/free churn): an aligned word changed by one
     * instruction, which readers see whole; the lock prefix is not needed
     * for that. */
    __asm__("addq %1, %0" : "+m"(*word) : "er"(delta));
#else
    __atomic_store_n(word, __atomic_load_n(word, __ATOMIC_RELAXED) + delta, __ATOMIC_RELAXED);
#endif
}

/* The same, delta taken away: one instruction, not a negation and an add. */
static inline void gmp_slot_word_sub(uint64_t *word, uint64_t delta)
{
#if defined(__x86_64__)
    __asm__("subq %1, %0" : "+m"(*word) : "er"(delta));
#else
    __atomic_store_n(word, __atomic_load_n(word, __ATOMIC_RELAXED) - delta, __ATOMIC_RELAXED);
#endif
}

/* Every host call is counted with GMP_HOST_CALL_EXTRA bytes more than its
 * block's, and the readers take that much off per call (in_use is bytes
 * less GMP_HOST_CALL_EXTRA times allocs less frees): a glibc block's bytes
 * are its chunk's size word, masked, less the word itself, so the
 * allocator hooks' common case adds and takes away the masked word as it
 * is, one instruction fewer in malloc and two in free, on the path of
 * every small block. */
#define GMP_HOST_CALL_EXTRA sizeof(size_t)
static inline void gmp_host_slot_alloc(host_slot *s, uint64_t counted)
{
    gmp_slot_word_add((uint64_t *)&s->bytes, counted);
    gmp_slot_word_add(&s->allocs, 1);
}
static inline void gmp_host_slot_free(host_slot *s, uint64_t counted)
{
    gmp_slot_word_sub((uint64_t *)&s->bytes, counted);
    gmp_slot_word_add(&s->frees, 1);
}

/* An allocation of `bytes`, and a free of them: two forms, so the hot path
 * picks its counter without a test. */
static inline void gmp_host_account_alloc(uint64_t bytes)
{
    host_slot *s = gmp_host_slot;
    if (GMP_LIKELY(gmp_host_slot_claimed(s)))
        gmp_host_slot_alloc(s, bytes + GMP_HOST_CALL_EXTRA);
    else
        gmp_host_account_first(bytes, 0); /* once per thread */
}

static inline void gmp_host_account_free(uint64_t bytes)
{
    host_slot *s = gmp_host_slot;
    if (GMP_LIKELY(gmp_host_slot_claimed(s)))
        gmp_host_slot_free(s, bytes + GMP_HOST_CALL_EXTRA);
    else
        gmp_host_account_first(bytes, 1);
}
GMP_HIDDEN uint64_t gmp_host_in_use(void);
/* libc.c: the malloc and free hooks decide their common case on one word,
 * made from the preload's state, open episodes and how block sizes are
 * known; whoever changes one of those calls this afterwards. */
GMP_HIDDEN void gmp_host_fast_path_refresh(void);
/* Calls that added and that returned host bytes, all threads (approximate while racing). */
GMP_HIDDEN void gmp_host_counts(uint64_t *allocs, uint64_t *frees);

/* GPU calls per device, counted in the calling thread's slot while the
 * thread stays on one device (a cell: one backend's device, see device.c),
 * and moved to the shared counters when it turns to another or exits: a
 * device allocation or free then takes no locked instruction for them.
 * gmp_device_calls_shared (device.c) adds to the shared counters;
 * gmp_thread_device_calls sums the threads' slots for a cell (or every
 * cell: GMP_EVERY_CELL). */
#define GMP_EVERY_CELL UINT32_MAX
GMP_HIDDEN void gmp_device_calls_shared(uint32_t cell, uint64_t allocs, uint64_t frees);
GMP_HIDDEN void gmp_thread_device_calls_move(host_slot *s, uint32_t to_cell);
GMP_HIDDEN void gmp_thread_device_calls(uint32_t cell, uint64_t *allocs, uint64_t *frees);

static inline void gmp_count_device_call(uint32_t cell, int is_free, int64_t delta)
{
    host_slot *s = gmp_host_slot;
    if (GMP_UNLIKELY(!gmp_host_slot_claimed(s))) {
        gmp_device_calls_shared(cell, is_free ? 0 : (uint64_t)delta, is_free ? (uint64_t)delta : 0);
        return;
    }
    if (GMP_UNLIKELY(__atomic_load_n(&s->device_cell, __ATOMIC_RELAXED) != cell + 1))
        gmp_thread_device_calls_move(s, cell);
    gmp_slot_word_add(is_free ? &s->device_frees : &s->device_allocs, (uint64_t)delta);
}

/* sizes.c: requested sizes of heap blocks by address (lock-free, bounded).
 * put: 0, or -1 when not kept (the table is full or could not be made);
 * get/take: 0 with *size when p is kept (take removes it), else -1. */
GMP_HIDDEN int gmp_sizes_put(const void *p, uint64_t size);
GMP_HIDDEN int gmp_sizes_get(const void *p, uint64_t *size);
GMP_HIDDEN int gmp_sizes_take(const void *p, uint64_t *size);

/* libc_real.c: the allocation functions dlsym.c routes: whether name is one,
 * and the hook for `found` (what the real lookup gave) when found is the
 * function the hook forwards to, else found. */
GMP_HIDDEN int gmp_libc_routed_name(const char *name);
GMP_HIDDEN void *gmp_libc_route(const char *name, void *found);

/* device.c */
GMP_HIDDEN void gmp_device_add(gmp_backend backend, int device, uint64_t ptr,
                               uint64_t size, gmp_api api, uint64_t now_ns, uint32_t stack_id);
/* Every live allocation (a gmp_live_foreach_fn for bundles; arg unused);
 * gmp_gpu_foreach_live: those a GPU API made (the leak check's). */
GMP_HIDDEN void gmp_gpu_foreach_live(gmp_live_visit_fn visit, void *ctx, void *arg);
GMP_HIDDEN void gmp_device_foreach_live(gmp_live_visit_fn visit, void *ctx, void *arg);
/* GPU allocations made since start (all backends, pinned host included). */
GMP_HIDDEN uint64_t gmp_device_allocations_ever(void);
/* A live allocation as the table held it. */
typedef struct gmp_live_taken {
    uint64_t ptr, size;
    uint32_t time_ms, stack_id;
    int device;
    gmp_backend backend;
    gmp_api api; /* the allocating one */
} gmp_live_taken;
/* A live host block of at least GMP_HOST_EVENT_MIN_BYTES (an entry of
 * backend cpu, counted nowhere); taken (0, or -1: not there) before the
 * real call frees or moves it, put back when that call failed. */
GMP_HIDDEN void gmp_host_live_add(uint64_t ptr, uint64_t size, gmp_api api, uint64_t now_ns,
                                  uint32_t stack_id);
GMP_HIDDEN int gmp_host_live_take(uint64_t ptr, gmp_live_taken *out);
GMP_HIDDEN void gmp_host_live_put_back(const gmp_live_taken *taken);
/* Takes ptr out (a handle, for cuMemRelease: the freeing api says which),
 * its bytes out of the counters, into *out.  0 when it was known, -1 if
 * not.  A GPU hook takes before the real free: once that returns, another
 * thread may be given the same address. */
GMP_HIDDEN int gmp_device_take(gmp_backend backend, gmp_api api, uint64_t ptr,
                               gmp_live_taken *out);
/* Puts a taken allocation back as it was (its free failed). */
GMP_HIDDEN void gmp_device_put_back(const gmp_live_taken *taken);
GMP_HIDDEN uint64_t gmp_device_in_use(gmp_backend backend, int device);
GMP_HIDDEN int gmp_device_index(int device); /* clamps into the counters' range */
/* For metrics, by counter index (0 = host memory of that backend, d+1 = device d). */
GMP_HIDDEN void gmp_device_stats(gmp_backend backend, int index, uint64_t *bytes,
                                 uint64_t *top, uint64_t *alloc_count, uint64_t *free_count);

#endif
