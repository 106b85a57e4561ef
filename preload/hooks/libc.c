/*
 * libc.c — malloc and its relatives: the hooks, and what they count.
 *
 * Each hook calls the allocator past the preload (libc_real.c finds it),
 * then counts the block in this thread's slot (in_use.h).  Cost for the
 * common case: the real call, the block's size read from glibc's chunk
 * header and two adds into the slot.  Events are recorded only for
 * allocations of at least GMP_HOST_EVENT_MIN_BYTES and for every failure;
 * errno is kept exactly as the real function left it.  A block of the
 * bootstrap pool (dlsym's, while the reals were found) is told by its
 * address in free, realloc and malloc_usable_size, never counted, and
 * never handed to the real allocator.
 */
#include "libc_real.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* ---- bookkeeping ------------------------------------------------------ */

/* What the counters add for a block of glibc's (GMP_HOST_CALL_EXTRA more
 * than its bytes, see in_use.h): the size word before the block, its flags
 * (the low 3 bits) masked. */
static inline size_t glibc_chunk_counted_of_word(size_t word)
{
    return word & ~(size_t)7;
}

/* A block's bytes from glibc's chunk header: the size word, masked, less
 * that word.  This is malloc_usable_size's answer, but for an mmapped
 * chunk (one word more of header, so 8 bytes more here): malloc and free
 * count the same number, and no test of the flag stands in the common
 * case. */
static inline size_t glibc_chunk_bytes_of_word(size_t word)
{
    return glibc_chunk_counted_of_word(word) - GMP_HOST_CALL_EXTRA;
}

static inline size_t glibc_chunk_word(const void *p)
{
    return ((const size_t *)p)[-1];
}

static inline size_t glibc_chunk_bytes(const void *p)
{
    return glibc_chunk_bytes_of_word(glibc_chunk_word(p));
}

static size_t allocator_bytes(void *p)
{
    size_t n = gmp_libc_real.malloc_usable_size(p);
    /* an allocator asked about a block it never made (the loader's, from
     * before it was there) may answer anything */
    return n < ((size_t)1 << 48) ? n : 0;
}

/* Bytes counted for a block the real allocator just gave for `size` asked. */
static __attribute__((noinline)) size_t foreign_bytes_added(void *p, size_t size)
{
    if (gmp_libc_real.sizes_from == SIZE_TABLE)
        return gmp_sizes_put(p, size) == 0 ? size : 0;
    if (size >= gmp_pl.host_event_min && gmp_sizes_put(p, size) == 0)
        return size;
    return allocator_bytes(p);
}

/* Bytes counted for a live block, as when it was added; take removes its
 * entry (it is being freed or has moved). */
static __attribute__((noinline)) size_t foreign_bytes(void *p, int take)
{
    uint64_t kept;
    int (*lookup)(const void *, uint64_t *) = take ? gmp_sizes_take : gmp_sizes_get;
    if (gmp_libc_real.sizes_from == SIZE_TABLE)
        return lookup(p, &kept) == 0 ? (size_t)kept : 0;
    size_t n = allocator_bytes(p);
    if (n >= gmp_pl.host_event_min && lookup(p, &kept) == 0)
        return (size_t)kept;
    return n;
}

static inline size_t bytes_added(void *p, size_t size)
{
    return GMP_LIKELY(gmp_libc_real.sizes_from == SIZE_GLIBC_CHUNK) ? glibc_chunk_bytes(p)
                                                      : foreign_bytes_added(p, size);
}

static inline size_t bytes_of(void *p, int take)
{
    return GMP_LIKELY(gmp_libc_real.sizes_from == SIZE_GLIBC_CHUNK) ? glibc_chunk_bytes(p)
                                                      : foreign_bytes(p, take);
}

/* Counters see every allocation of the process, our own and those made
 * inside GPU libraries' calls included, so allocation and free always pair
 * up; events and episodes are only for the program's own calls. */
#define ACCOUNTING() GMP_LIKELY(gmp_pl_active())
#define RECORDING() GMP_LIKELY(!gmp_in_hook)

#define COLD __attribute__((noinline, cold))
/* the hottest two hooks: each starts a cache line (see free), beside the
 * start's text (.text.hot follows .text.startup): a process that starts,
 * allocates and exits faults in one block of the library's text */
#define GMP_HOT_ALIGNED __attribute__((aligned(64), section(".text.hot")))

/* A large allocation, or any while an episode is open: the event, the
 * watchdog and the episode, out of the hot path's way. */
static COLD void alloc_event(gmp_api api, void *p, size_t size)
{
    int saved = errno;
    GMP_IN_HOOK_SCOPE();
    uint64_t in_use = gmp_host_in_use();
    if (size >= gmp_pl.host_event_min) {
        uint64_t now = gmp_now_realtime_ns();
        uint32_t stack_id = gmp_stack_id_here();
        gmp_host_live_add((uintptr_t)p, size, api, now, stack_id);
        gmp_pl_event_at(now, stack_id, GMP_EV_ALLOC, GMP_BACKEND_CPU, -1, api, (uintptr_t)p,
                        size, 0, in_use);
        if (GMP_UNLIKELY(in_use >= gmp_pl.watchdog_min))
            gmp_watchdog_note_use(size);
        gmp_metrics_note_host(in_use);
        gmp_peak_watch_note(in_use);
    }
    if (gmp_any_episode_open()) {
        gmp_episode_success(GMP_BACKEND_CPU, -1, size, in_use);
        gmp_episode_check_deadlines();
    }
    errno = saved;
}

/* After a successful allocation of `size` asked, with p's usable bytes.
 * The common path touches neither errno nor anything shared. */
static inline void after_alloc(gmp_api api, void *p, size_t size)
{
    gmp_host_account_alloc(bytes_added(p, size));
    if (GMP_UNLIKELY(size >= gmp_pl.host_event_min || gmp_any_episode_open()) && RECORDING())
        alloc_event(api, p, size);
}

static COLD void after_failure(gmp_api api, size_t size, int err)
{
    if (!RECORDING())
        return;
    GMP_IN_HOOK_SCOPE(); /* the caller puts errno back */
    uint64_t in_use = gmp_host_in_use();
    if (err == ENOMEM)
        gmp_episode_failure(GMP_BACKEND_CPU, -1, api, size, err, in_use, NULL);
    else
        gmp_pl_event(GMP_EV_ALLOC_FAILED, GMP_BACKEND_CPU, -1, api, 0, size, err, in_use);
}

static COLD void free_event(gmp_api api, void *p, size_t got)
{
    int saved = errno;
    GMP_IN_HOOK_SCOPE();
    uint64_t in_use = gmp_host_in_use(); /* already without this block */
    gmp_pl_event(GMP_EV_FREE, GMP_BACKEND_CPU, -1, api, (uintptr_t)p, got, 0, in_use);
    if (GMP_UNLIKELY(gmp_watchdog_above()))
        gmp_watchdog_note_use(0); /* memory held above the threshold is seen when it goes */
    errno = saved;
}

static inline void before_free(gmp_api api, void *p)
{
    size_t got = bytes_of(p, 1);
    gmp_host_account_free(got);
    if (GMP_UNLIKELY(got >= gmp_pl.host_event_min)) {
        gmp_live_taken gone;
        gmp_host_live_take((uintptr_t)p, &gone);
        if (RECORDING())
            free_event(api, p, got);
    }
}

/* Common tail of every allocating hook: result p for `size` bytes.  errno
 * is read only when the call failed (it is the failure's), and left as the
 * real call set it. */
static __attribute__((noinline)) void *finish_alloc_slow(gmp_api api, void *p, size_t size)
{
    if (GMP_UNLIKELY(gmp_libc_in_pool(p)))
        return p; /* the pool's, while another thread resolves: not counted */
    if (GMP_LIKELY(p != NULL)) {
        if (ACCOUNTING())
            after_alloc(api, p, size);
        return p;
    }
    int err = errno;
    if (ACCOUNTING() && size)
        after_failure(api, size, err);
    errno = err;
    return p;
}

/* The same, its common case inline: a small request while this thread's
 * slot's bound holds (a block of glibc's, active, no episode open: see
 * word_bound_now), and its block's size word below the bound too, as free
 * decides: a pool block (dlsym's, while another thread resolved)
 * has SIZE_MAX there.  Two adds and no call: the hook's own frame stays a
 * push and a pop around the real call.  The request is tested against the
 * word's bound, 8 above the bytes' (a request that passes it and is not
 * below the bytes' bound has a word at least as large: a chunk holds the
 * request and its own size word), only so that no word is read while the
 * bound is 0. */
static inline __attribute__((always_inline)) void *finish_alloc(gmp_api api, void *p,
                                                                size_t size)
{
    host_slot *s = gmp_host_slot;
    size_t bound = __atomic_load_n(&s->word_bound, __ATOMIC_RELAXED);
    if (GMP_LIKELY(p != NULL && size < bound)) { /* a block of glibc's: its word can be read */
        size_t word = glibc_chunk_word(p);
        if (GMP_LIKELY(word < bound)) {
            gmp_host_slot_alloc(s, glibc_chunk_counted_of_word(word));
            return p;
        }
    }
    return finish_alloc_slow(api, p, size);
}

/* ---- the hooks -------------------------------------------------------- */

/* The bound below which a block's size word sends malloc and free down
 * their common case: 8 above host_event_min (the word counts itself, and
 * its flags are under 8: a word below it is a block of fewer bytes than
 * host_event_min) while blocks are glibc's, the preload is active and no
 * episode is open; 0 otherwise, and then every call takes the full path. */
GMP_START_EXIT_TEXT static size_t word_bound_now(void)
{
    if (gmp_libc_real.sizes_from != SIZE_GLIBC_CHUNK || !gmp_pl_active() || gmp_any_episode_open())
        return 0;
    size_t min = gmp_pl.host_event_min;
    return min < SIZE_MAX - 8 ? min + 8 : SIZE_MAX;
}

/* Lock-free, for an episode may open on any thread, in a signal handler
 * too: store, then look again.  Whoever changes an input calls this after
 * the change, so the last store is made after every change it did not see,
 * by a thread that saw it. */
GMP_START_EXIT_TEXT void gmp_host_fast_path_refresh(void)
{
    for (;;) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        size_t bound = word_bound_now();
        gmp_host_word_bound_publish(bound);
        if (word_bound_now() == bound)
            return;
    }
}

GMP_EXPORT GMP_HOT_ALIGNED void *malloc(size_t size)
{
    void *p = __atomic_load_n(&gmp_libc_real.malloc_entry, __ATOMIC_ACQUIRE)(size);
    return finish_alloc(GMP_API_MALLOC, p, size);
}

static __attribute__((noinline)) void free_slow(void *p)
{
    if (!p || GMP_UNLIKELY(gmp_libc_in_pool(p)))
        return;
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return; /* cannot happen: p came from a real allocator we resolved */
    if (ACCOUNTING())
        before_free(GMP_API_FREE, p);
    gmp_libc_real.free(p);
}

/* The common case inline, as finish_alloc's: a small block of glibc's
 * while this thread's bound holds; no register saved, the real free a tail
 * call.  One compare of the raw size word decides it (word_bound_now), and
 * a pool block's word is SIZE_MAX.  Both hooks start a cache line of their
 * own: on this project's AMD EPYC VM that took the churn from 1.11x to
 * 1.09x of bare (the same code, only placed). */
GMP_EXPORT GMP_HOT_ALIGNED void free(void *p)
{
    host_slot *s = gmp_host_slot;
    size_t bound = __atomic_load_n(&s->word_bound, __ATOMIC_RELAXED);
    if (GMP_LIKELY(p != NULL && bound != 0)) { /* a block of glibc's: its word can be read */
        size_t word = glibc_chunk_word(p);
        if (GMP_LIKELY(word < bound)) {
            gmp_host_slot_free(s, glibc_chunk_counted_of_word(word));
            gmp_libc_real.free(p);
            return;
        }
    }
    free_slow(p);
}

GMP_EXPORT void *calloc(size_t n, size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_real.calloc)) {
        /* dlsym's own calloc while we resolve: the pool is zeroed */
        if (n && size > SIZE_MAX / n) {
            errno = ENOMEM;
            return NULL;
        }
        if (!gmp_libc_have_real())
            return gmp_libc_pool_alloc(n * size, 16);
    }
    void *p = gmp_libc_real.calloc(n, size);
    size_t total = n && size > SIZE_MAX / n ? SIZE_MAX : n * size;
    return finish_alloc(GMP_API_CALLOC, p, total);
}

/* The bytes of realloc's old block, its size entry and live entry taken
 * now (*live says whether there was one): once the real call has freed it,
 * another thread may get the same address. */
static inline size_t realloc_old_bytes(int accounting, void *old, gmp_live_taken *held,
                                       int *live)
{
    size_t n = accounting && old ? bytes_of(old, 1) : 0;
    *live = n >= gmp_pl.host_event_min && gmp_host_live_take((uintptr_t)old, held) == 0;
    return n;
}

/* Tail of realloc and reallocarray: the old block's bytes leave the
 * counters when it moved, grew or was freed (size 0); when the call failed
 * the old block lives on, with its size entry back. */
static void *finish_realloc(gmp_api api, int accounting, void *old, size_t old_size, void *p,
                            size_t size, int err, const gmp_live_taken *held)
{
    if (accounting) {
        if (p || !size) {
            gmp_host_account_free(old_size);
            /* the old block is gone (moved, or grown where it was) */
            if (old_size >= gmp_pl.host_event_min && RECORDING())
                free_event(api, old, old_size);
        }
        if (p)
            after_alloc(api, p, size);
        else if (size) {
            if (gmp_libc_real.sizes_from != SIZE_GLIBC_CHUNK && old_size)
                foreign_bytes_added(old, old_size); /* kept again, by the same rule */
            if (held)
                gmp_host_live_put_back(held);
            after_failure(api, size, err);
        }
    }
    errno = err;
    return p;
}

/* realloc of a pool block: move it to the real allocator. */
static void *realloc_from_pool(void *old, size_t size)
{
    void *p = malloc(size);
    if (p) {
        size_t keep = gmp_libc_pool_size(old) < size ? gmp_libc_pool_size(old) : size;
        memcpy(p, old, keep);
    }
    return p;
}

GMP_EXPORT void *realloc(void *old, size_t size)
{
    if (GMP_UNLIKELY(old && gmp_libc_in_pool(old)))
        return realloc_from_pool(old, size);
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return gmp_libc_pool_alloc(size, 16);
    int accounting = ACCOUNTING(), live;
    gmp_live_taken held;
    size_t old_size = realloc_old_bytes(accounting, old, &held, &live);
    void *p = gmp_libc_real.realloc(old, size);
    return finish_realloc(GMP_API_REALLOC, accounting, old, old_size, p, size, errno,
                          live ? &held : NULL);
}

GMP_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    if (n && size > SIZE_MAX / n) {
        if (!gmp_libc_have_real() || !gmp_libc_real.reallocarray) {
            errno = ENOMEM;
            return NULL;
        }
        void *p = gmp_libc_real.reallocarray(old, n, size); /* the real one reports it */
        return finish_alloc(GMP_API_REALLOCARRAY, p, SIZE_MAX);
    }
    if (GMP_UNLIKELY((old && gmp_libc_in_pool(old)) || !gmp_libc_have_real() ||
                     !gmp_libc_real.reallocarray))
        return realloc(old, n * size);
    int accounting = ACCOUNTING(), live;
    gmp_live_taken held;
    size_t old_size = realloc_old_bytes(accounting, old, &held, &live);
    void *p = gmp_libc_real.reallocarray(old, n, size);
    return finish_realloc(GMP_API_REALLOCARRAY, accounting, old, old_size, p, n * size,
                          errno, live ? &held : NULL);
}

GMP_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_have_real())) {
        void *p = gmp_libc_pool_alloc(size, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int saved = errno;
    int rc = gmp_libc_real.posix_memalign(out, align, size);
    if (rc != 0)
        errno = rc; /* the failure's code, for the bookkeeping */
    finish_alloc(GMP_API_POSIX_MEMALIGN, rc == 0 ? *out : NULL, size);
    errno = saved; /* posix_memalign reports through its result, not errno */
    return rc;
}

GMP_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return gmp_libc_pool_alloc(size, align);
    void *p = gmp_libc_real.aligned_alloc(align, size);
    return finish_alloc(GMP_API_ALIGNED_ALLOC, p, size);
}

GMP_EXPORT void *memalign(size_t align, size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return gmp_libc_pool_alloc(size, align);
    void *p = gmp_libc_real.memalign(align, size);
    return finish_alloc(GMP_API_MEMALIGN, p, size);
}

GMP_EXPORT void *valloc(size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return gmp_libc_pool_alloc(size, 4096);
    void *p = gmp_libc_real.valloc(size);
    return finish_alloc(GMP_API_VALLOC, p, size);
}

GMP_EXPORT void *pvalloc(size_t size)
{
    if (GMP_UNLIKELY(!gmp_libc_have_real()))
        return gmp_libc_pool_alloc((size + 4095) & ~(size_t)4095, 4096);
    void *p = gmp_libc_real.pvalloc(size);
    return finish_alloc(GMP_API_PVALLOC, p, size);
}

GMP_EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (GMP_UNLIKELY(gmp_libc_in_pool(p)))
        return gmp_libc_pool_size(p);
    if (GMP_UNLIKELY(!gmp_libc_have_real()) || !gmp_libc_real.malloc_usable_size)
        return 0;
    return gmp_libc_real.malloc_usable_size(p);
}
