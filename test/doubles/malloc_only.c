/*
 * malloc_only.c — a test double of the plainest allocator one can preload:
 * it exports malloc and free and nothing else (no malloc_usable_size, no
 * calloc or realloc: those stay glibc's).  Blocks come from one big
 * anonymous arena, bumped forward and never reused; each carries its size
 * in a header glibc's malloc_usable_size would misread.  free of a block it
 * never made (glibc's calloc's) is ignored, as such allocators do.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#define ARENA_SIZE ((size_t)64 << 30) /* address space only: pages cost when touched */

static char *arena;
static size_t used; /* atomic */

static int make_arena(void)
{
    char *expected = NULL;
    if (__atomic_load_n(&arena, __ATOMIC_ACQUIRE))
        return 0;
    void *m = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    if (!__atomic_compare_exchange_n(&arena, &expected, (char *)m, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        munmap(m, ARENA_SIZE);
    return 0;
}

__attribute__((visibility("default"))) void *malloc(size_t size)
{
    size_t need = (size + 16 + 15) & ~(size_t)15, at = 0;
    if (size > ARENA_SIZE || make_arena() < 0 ||
        (at = __atomic_fetch_add(&used, need, __ATOMIC_RELAXED)) + need > ARENA_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    /* a header that is no glibc chunk: "size" bits a glibc reader would trust */
    ((uint64_t *)(arena + at))[0] = 0x5a5a5a5a5a5a5a5aull;
    ((uint64_t *)(arena + at))[1] = (uint64_t)size | 0x7000000000000000ull;
    return arena + at + 16;
}

__attribute__((visibility("default"))) void free(void *p)
{
    (void)p; /* a bump arena gives nothing back; foreign blocks are ignored */
}
