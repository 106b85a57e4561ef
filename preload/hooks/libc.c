/*
 * libc.c — malloc and its relatives.
 *
 * The real functions come from dlsym(RTLD_NEXT), so an allocator preloaded
 * after us (jemalloc, tcmalloc, mimalloc) keeps working.  dlsym itself may
 * allocate before we know the real malloc; those few requests are served
 * from a static bootstrap pool, and pointers from it are recognised by
 * address in free/realloc/malloc_usable_size and never handed to the real
 * allocator.
 *
 * Cost for the common case: the real call, one usable-size lookup and a
 * per-thread counter update.  Events are recorded only for allocations of
 * at least GMP_HOST_EVENT_MIN_BYTES and for every failure; errno is kept
 * exactly as the real function left it.
 *
 * How a block's size is known is decided once, when the reals are found:
 * glibc's chunk header only when the real malloc provably is glibc's (it
 * lives in the object that defines gnu_get_libc_version: gperftools and
 * mimalloc export __libc_malloc as their own malloc, so comparing with that
 * proves nothing); the allocator's malloc_usable_size only when it lives in
 * the same object as its malloc, with large blocks kept at their requested
 * size (sizes.c: size classes overshoot by up to a tenth); otherwise every
 * block's requested size, in sizes.c.
 */
#include "preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

typedef enum size_source {
    SIZE_TABLE,       /* an allocator that cannot be asked: sizes.c only */
    SIZE_ALLOCATOR,   /* the allocator's malloc_usable_size; large blocks in sizes.c */
    SIZE_GLIBC_CHUNK, /* glibc's malloc: its chunk header, without a call */
} size_source;

static void *malloc_first(size_t size);

typedef struct libc_real {
    /* What the malloc hook calls: malloc_first until the real functions
     * are resolved, then the real malloc, so the hook tests nothing first. */
    void *(*malloc_entry)(size_t);
    /* how a block's size is known; set before malloc is published
     * (SIZE_TABLE until then: no block comes from the real allocator yet) */
    size_source sizes_from;
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
} libc_real;

static libc_real real GMP_STARTUP_DATA = {.malloc_entry = malloc_first}; /* every process resolves */
static int resolving; /* atomic: a thread is inside dlsym for the reals */

/* ---- bootstrap pool --------------------------------------------------- */

#define POOL_SIZE (256 * 1024)
static char pool[POOL_SIZE] __attribute__((aligned(64)));
static size_t pool_used; /* atomic */

typedef struct pool_header {
    size_t size;
    size_t pad;
} pool_header;

static inline int in_pool(const void *p)
{
    return (uintptr_t)p - (uintptr_t)pool < POOL_SIZE; /* one compare */
}

static void *pool_alloc(size_t size, size_t align)
{
    if (align < 16)
        align = 16;
    size_t need = sizeof(pool_header) + size + align;
    size_t off = __atomic_fetch_add(&pool_used, (need + 15) & ~(size_t)15, __ATOMIC_RELAXED);
    if (off + need > POOL_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = (uintptr_t)(pool + off + sizeof(pool_header));
    uintptr_t p = (start + align - 1) & ~(uintptr_t)(align - 1);
    ((pool_header *)p)[-1].size = size;
    /* where glibc keeps a chunk's size: read as one, above any threshold,
     * so free's common case sends a pool block on to free_slow */
    ((pool_header *)p)[-1].pad = SIZE_MAX;
    return (void *)p; /* static storage: already zeroed, calloc-ready */
}

static size_t pool_size(const void *p)
{
    return ((const pool_header *)p)[-1].size;
}

/* ---- resolving the real functions ------------------------------------ */

/* A dlsym fallback allocates: the pool serves it. */
#define RESOLVE(name) real.name = (__typeof__(real.name))gmp_real_function(#name)

static size_source size_source_of(void *malloc_fn, void *usable_size_fn)
{
    uintptr_t home = gmp_object_of(malloc_fn);
    if (!home || home != gmp_object_of(usable_size_fn))
        return SIZE_TABLE;
#if defined(__x86_64__) && defined(__GLIBC__)
    /* the chunk layout read below is x86-64 glibc's; tunables can change it */
    if (home == gmp_object_of((void *)gnu_get_libc_version) && getenv("GLIBC_TUNABLES") == NULL)
        return SIZE_GLIBC_CHUNK;
#endif
    return SIZE_ALLOCATOR;
}

static void resolve_libc(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&resolving, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return; /* another thread (or dlsym's own calloc) is resolving */
    int saved = errno;
    GMP_IN_HOOK_SCOPE();
    RESOLVE(free);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(reallocarray);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    RESOLVE(malloc_usable_size);
    void *(*m)(size_t) = (void *(*)(size_t))gmp_real_function("malloc");
    real.sizes_from = size_source_of((void *)m, (void *)real.malloc_usable_size);
    __atomic_store_n(&real.malloc, m, __ATOMIC_RELEASE); /* published last */
    if (m)
        __atomic_store_n(&real.malloc_entry, m, __ATOMIC_RELEASE);
    gmp_host_fast_path_refresh();
    errno = saved;
}

static int have_real(void)
{
    if (GMP_LIKELY(__atomic_load_n(&real.malloc, __ATOMIC_ACQUIRE) != NULL))
        return 1;
    resolve_libc();
    return __atomic_load_n(&real.malloc, __ATOMIC_ACQUIRE) != NULL;
}

/* The malloc hook's callee until the real functions are resolved: dlsym's
 * own requests while we resolve are served by the pool. */
static void *malloc_first(size_t size)
{
    if (!have_real())
        return pool_alloc(size, 16);
    return real.malloc(size);
}

/* ---- lookups past us --------------------------------------------------- */

/* Every allocation function a hook here stands for.  A lookup through a
 * library's own handle (ctypes.CDLL("libc.so.6").malloc, cffi, JNA) finds
 * the allocator's function past the preload; dlsym.c asks gmp_libc_route
 * for the hook instead, when what was found is the very function the hook
 * forwards to (an allocator loaded after us, or a library's own malloc,
 * is left as found). */
#define FOR_EACH_LIBC_HOOK(X)                                                                     \
    X(malloc) X(free) X(calloc) X(realloc) X(reallocarray) X(posix_memalign) X(aligned_alloc)    \
    X(memalign) X(valloc) X(pvalloc) X(malloc_usable_size)

int gmp_libc_routed_name(const char *name)
{
#define IS(fn) !strcmp(name, #fn) ||
    return FOR_EACH_LIBC_HOOK(IS) 0;
#undef IS
}

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
    size_t n = real.malloc_usable_size(p);
    /* an allocator asked about a block it never made (the loader's, from
     * before it was there) may answer anything */
    return n < ((size_t)1 << 48) ? n : 0;
}

/* Bytes counted for a block the real allocator just gave for `size` asked. */
static __attribute__((noinline)) size_t foreign_bytes_added(void *p, size_t size)
{
    if (real.sizes_from == SIZE_TABLE)
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
    if (real.sizes_from == SIZE_TABLE)
        return lookup(p, &kept) == 0 ? (size_t)kept : 0;
    size_t n = allocator_bytes(p);
    if (n >= gmp_pl.host_event_min && lookup(p, &kept) == 0)
        return (size_t)kept;
    return n;
}

static inline size_t bytes_added(void *p, size_t size)
{
    return GMP_LIKELY(real.sizes_from == SIZE_GLIBC_CHUNK) ? glibc_chunk_bytes(p)
                                                      : foreign_bytes_added(p, size);
}

static inline size_t bytes_of(void *p, int take)
{
    return GMP_LIKELY(real.sizes_from == SIZE_GLIBC_CHUNK) ? glibc_chunk_bytes(p)
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
    if (GMP_UNLIKELY(in_pool(p)))
        return p; /* malloc_first's, while another thread resolves: not counted */
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
 * decides: a pool block (malloc_first's, while another thread resolved)
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
    if (real.sizes_from != SIZE_GLIBC_CHUNK || !gmp_pl_active() || gmp_any_episode_open())
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
    void *p = __atomic_load_n(&real.malloc_entry, __ATOMIC_ACQUIRE)(size);
    return finish_alloc(GMP_API_MALLOC, p, size);
}

static __attribute__((noinline)) void free_slow(void *p)
{
    if (!p || GMP_UNLIKELY(in_pool(p)))
        return;
    if (GMP_UNLIKELY(!have_real()))
        return; /* cannot happen: p came from a real allocator we resolved */
    if (ACCOUNTING())
        before_free(GMP_API_FREE, p);
    real.free(p);
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
            real.free(p);
            return;
        }
    }
    free_slow(p);
}

GMP_EXPORT void *calloc(size_t n, size_t size)
{
    if (GMP_UNLIKELY(!real.calloc)) {
        /* dlsym's own calloc while we resolve: the pool is zeroed */
        if (n && size > SIZE_MAX / n) {
            errno = ENOMEM;
            return NULL;
        }
        if (!have_real())
            return pool_alloc(n * size, 16);
    }
    void *p = real.calloc(n, size);
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
            if (real.sizes_from != SIZE_GLIBC_CHUNK && old_size)
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
        size_t keep = pool_size(old) < size ? pool_size(old) : size;
        memcpy(p, old, keep);
    }
    return p;
}

GMP_EXPORT void *realloc(void *old, size_t size)
{
    if (GMP_UNLIKELY(old && in_pool(old)))
        return realloc_from_pool(old, size);
    if (GMP_UNLIKELY(!have_real()))
        return pool_alloc(size, 16);
    int accounting = ACCOUNTING(), live;
    gmp_live_taken held;
    size_t old_size = realloc_old_bytes(accounting, old, &held, &live);
    void *p = real.realloc(old, size);
    return finish_realloc(GMP_API_REALLOC, accounting, old, old_size, p, size, errno,
                          live ? &held : NULL);
}

GMP_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    if (n && size > SIZE_MAX / n) {
        if (!have_real() || !real.reallocarray) {
            errno = ENOMEM;
            return NULL;
        }
        void *p = real.reallocarray(old, n, size); /* the real one reports it */
        return finish_alloc(GMP_API_REALLOCARRAY, p, SIZE_MAX);
    }
    if (GMP_UNLIKELY((old && in_pool(old)) || !have_real() || !real.reallocarray))
        return realloc(old, n * size);
    int accounting = ACCOUNTING(), live;
    gmp_live_taken held;
    size_t old_size = realloc_old_bytes(accounting, old, &held, &live);
    void *p = real.reallocarray(old, n, size);
    return finish_realloc(GMP_API_REALLOCARRAY, accounting, old, old_size, p, n * size,
                          errno, live ? &held : NULL);
}

GMP_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (GMP_UNLIKELY(!have_real())) {
        void *p = pool_alloc(size, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int saved = errno;
    int rc = real.posix_memalign(out, align, size);
    if (rc != 0)
        errno = rc; /* the failure's code, for the bookkeeping */
    finish_alloc(GMP_API_POSIX_MEMALIGN, rc == 0 ? *out : NULL, size);
    errno = saved; /* posix_memalign reports through its result, not errno */
    return rc;
}

GMP_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (GMP_UNLIKELY(!have_real()))
        return pool_alloc(size, align);
    void *p = real.aligned_alloc(align, size);
    return finish_alloc(GMP_API_ALIGNED_ALLOC, p, size);
}

GMP_EXPORT void *memalign(size_t align, size_t size)
{
    if (GMP_UNLIKELY(!have_real()))
        return pool_alloc(size, align);
    void *p = real.memalign(align, size);
    return finish_alloc(GMP_API_MEMALIGN, p, size);
}

GMP_EXPORT void *valloc(size_t size)
{
    if (GMP_UNLIKELY(!have_real()))
        return pool_alloc(size, 4096);
    void *p = real.valloc(size);
    return finish_alloc(GMP_API_VALLOC, p, size);
}

GMP_EXPORT void *pvalloc(size_t size)
{
    if (GMP_UNLIKELY(!have_real()))
        return pool_alloc((size + 4095) & ~(size_t)4095, 4096);
    void *p = real.pvalloc(size);
    return finish_alloc(GMP_API_PVALLOC, p, size);
}

GMP_EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (GMP_UNLIKELY(in_pool(p)))
        return pool_size(p);
    if (GMP_UNLIKELY(!have_real()) || !real.malloc_usable_size)
        return 0;
    return real.malloc_usable_size(p);
}

void *gmp_libc_route(const char *name, void *found)
{
    if (!found || !have_real())
        return found;
#define ROUTE(fn)                                                                                 \
    if (!strcmp(name, #fn))                                                                       \
        return found == (void *)real.fn ? (void *)fn : found;
    FOR_EACH_LIBC_HOOK(ROUTE)
#undef ROUTE
    return found;
}
