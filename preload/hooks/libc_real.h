/*
 * libc_real.h — the allocator past the preload, as libc.c's hooks reach it
 * (libc_real.c finds it).  The real functions come from dlsym(RTLD_NEXT),
 * so an allocator preloaded after us (jemalloc, tcmalloc, mimalloc) keeps
 * working.  dlsym itself may allocate before we know the real malloc;
 * those few requests are served from a static bootstrap pool, whose
 * blocks are told by their address and never handed to the real
 * allocator.
 */
#ifndef GMP_LIBC_REAL_H
#define GMP_LIBC_REAL_H

#include "preload.h"

#include <stddef.h>
#include <stdint.h>

/* How a block's size is known, decided once, when the reals are found. */
typedef enum size_source {
    SIZE_TABLE,       /* an allocator that cannot be asked: sizes.c only */
    SIZE_ALLOCATOR,   /* the allocator's malloc_usable_size; large blocks in sizes.c */
    SIZE_GLIBC_CHUNK, /* glibc's malloc: its chunk header, without a call */
} size_source;

typedef struct libc_real {
    /* What the malloc hook calls: libc_real.c's first malloc until the
     * real functions are resolved, then the real malloc, so the hook tests
     * nothing first. */
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

GMP_HIDDEN extern libc_real gmp_libc_real;

/* The bootstrap pool: what dlsym allocates while the reals are found. */
#define GMP_LIBC_POOL_SIZE (256 * 1024)
GMP_HIDDEN extern char gmp_libc_pool[GMP_LIBC_POOL_SIZE];
static inline int gmp_libc_in_pool(const void *p)
{
    return (uintptr_t)p - (uintptr_t)gmp_libc_pool < GMP_LIBC_POOL_SIZE; /* one compare */
}
/* size bytes aligned to align (16 at least), zeroed; NULL with ENOMEM
 * when the pool is spent.  A block's size word, where glibc keeps a
 * chunk's, reads SIZE_MAX: free's common case sends it on to its slow
 * path. */
GMP_HIDDEN void *gmp_libc_pool_alloc(size_t size, size_t align);
GMP_HIDDEN size_t gmp_libc_pool_size(const void *p);

/* Whether the real functions are known: finds them on the first call. */
GMP_HIDDEN int gmp_libc_have_real(void);

#endif
