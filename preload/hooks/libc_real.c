/*
 * libc_real.c — the allocator past the preload, found for libc.c's hooks
 * (libc_real.h): the real functions by dlsym(RTLD_NEXT), the bootstrap
 * pool that serves dlsym's own requests meanwhile, how a block's size will
 * be known, and the lookups through a library's own handle that are sent
 * to the hooks.
 *
 * How a block's size is known is decided once, when the reals are found:
 * glibc's chunk header only when the real malloc provably is glibc's (it
 * lives in the object that defines gnu_get_libc_version: gperftools and
 * mimalloc export __libc_malloc as their own malloc, so comparing with that
 * proves nothing); the allocator's malloc_usable_size only when it lives in
 * the same object as its malloc, with large blocks kept at their requested
 * size (sizes.c: size classes overshoot by up to a tenth); otherwise every
 * block's requested size, in sizes.c.
 *
 * Runs before a sanitizer's runtime has mapped its shadow (ASan calls our
 * dlsym and malloc as it starts): the Makefile builds it as PRELOAD_BOOT.
 */
#include "libc_real.h"

#include <errno.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static void *malloc_first(size_t size);


/* every process resolves: with the start's other writes */
libc_real gmp_libc_real GMP_STARTUP_DATA = {.malloc_entry = malloc_first};
static int resolving; /* atomic: a thread is inside dlsym for the reals */

/* ---- bootstrap pool --------------------------------------------------- */

char gmp_libc_pool[GMP_LIBC_POOL_SIZE] __attribute__((aligned(64)));
static size_t pool_used; /* atomic */

typedef struct pool_header {
    size_t size;
    size_t pad;
} pool_header;

void *gmp_libc_pool_alloc(size_t size, size_t align)
{
    if (align < 16)
        align = 16;
    size_t need = sizeof(pool_header) + size + align;
    size_t off = __atomic_fetch_add(&pool_used, (need + 15) & ~(size_t)15, __ATOMIC_RELAXED);
    if (off + need > GMP_LIBC_POOL_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = (uintptr_t)(gmp_libc_pool + off + sizeof(pool_header));
    uintptr_t p = (start + align - 1) & ~(uintptr_t)(align - 1);
    ((pool_header *)p)[-1].size = size;
    /* where glibc keeps a chunk's size: read as one, above any threshold,
     * so free's common case sends a pool block on to free_slow */
    ((pool_header *)p)[-1].pad = SIZE_MAX;
    return (void *)p; /* static storage: already zeroed, calloc-ready */
}

size_t gmp_libc_pool_size(const void *p)
{
    return ((const pool_header *)p)[-1].size;
}

/* ---- resolving the real functions ------------------------------------ */

/* A dlsym fallback allocates: the pool serves it. */
#define RESOLVE(name)                                                                             \
    gmp_libc_real.name = (__typeof__(gmp_libc_real.name))gmp_real_function(#name)

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
    gmp_libc_real.sizes_from =
        size_source_of((void *)m, (void *)gmp_libc_real.malloc_usable_size);
    __atomic_store_n(&gmp_libc_real.malloc, m, __ATOMIC_RELEASE); /* published last */
    if (m)
        __atomic_store_n(&gmp_libc_real.malloc_entry, m, __ATOMIC_RELEASE);
    gmp_host_fast_path_refresh();
    errno = saved;
}

int gmp_libc_have_real(void)
{
    if (GMP_LIKELY(__atomic_load_n(&gmp_libc_real.malloc, __ATOMIC_ACQUIRE) != NULL))
        return 1;
    resolve_libc();
    return __atomic_load_n(&gmp_libc_real.malloc, __ATOMIC_ACQUIRE) != NULL;
}

/* The malloc hook's callee until the real functions are resolved: dlsym's
 * own requests while we resolve are served by the pool. */
static void *malloc_first(size_t size)
{
    if (!gmp_libc_have_real())
        return gmp_libc_pool_alloc(size, 16);
    return gmp_libc_real.malloc(size);
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

void *gmp_libc_route(const char *name, void *found)
{
    if (!found || !gmp_libc_have_real())
        return found;
#define ROUTE(fn)                                                                                 \
    if (!strcmp(name, #fn))                                                                       \
        return found == (void *)gmp_libc_real.fn ? (void *)fn : found;
    FOR_EACH_LIBC_HOOK(ROUTE)
#undef ROUTE
    return found;
}
