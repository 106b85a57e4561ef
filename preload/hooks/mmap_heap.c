/*
 * mmap_heap.c — heaps that come straight from mmap.  LuaJIT, GHC, PHP,
 * Guile and Mono map their heaps themselves; when the kernel refuses
 * (RLIMIT_AS, overcommit, a cgroup at its limit) no malloc fails, the
 * runtime prints its own words and dies, and no hook of the malloc family
 * saw a thing.  So an mmap that asks for memory to write in — private,
 * anonymous, writable, of at least GMP_HOST_EVENT_MIN_BYTES — and fails
 * with ENOMEM is a failed host allocation: an episode, as malloc's is.  Not
 * so a reservation of address space (PROT_NONE, MAP_NORESERVE: Go's, V8's
 * and the JVM's, which ask again for less when one is refused), huge pages
 * (MAP_HUGETLB: PostgreSQL asks for them first and falls back), shared
 * memory, a file's mapping, one of ours, nor one an allocator makes that
 * malloc goes through or falls back to (jemalloc, tcmalloc, mimalloc,
 * CPython's arenas: the malloc that fails next names the program's
 * request).  A large one that succeeds closes an open episode, as a success
 * of the malloc family does; mapped memory is not counted in use (its
 * munmap is not followed).
 * A large writable shared mapping of a tmpfs file (/dev/shm) arms the crash
 * handlers: its pages come at the touch, and a full tmpfs gives SIGBUS
 * instead of a failure (shm_fault.c says so).
 */
#include "bundle.h"
#include "preload.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The code that called mmap is an allocator that malloc goes through, or
 * that goes to malloc when its map is refused: CPython maps its 1 MiB
 * arenas itself and, refused one, asks malloc for the object. */
static int called_by_an_allocator(const void *caller)
{
    static char buf[16384];
    static int busy; /* one reader of buf at a time: the others say no */
    if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
        return 0;
    char path[4096];
    gmp_maps_object_at(caller, buf, sizeof buf, path, sizeof path);
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
    const char *slash = strrchr(path, '/');
    return slash && (!strncmp(slash, "/libjemalloc", 12) || !strncmp(slash, "/libtcmalloc", 12) ||
                     !strncmp(slash, "/libmimalloc", 12) || !strncmp(slash, "/libc.so", 8) ||
                     !strncmp(slash, "/libpython", 10) || !strncmp(slash, "/python", 7));
}

static inline int heap_like(size_t len, int prot, int flags, int fd)
{
    return (flags & (MAP_ANONYMOUS | MAP_PRIVATE)) == (MAP_ANONYMOUS | MAP_PRIVATE) &&
           !(flags & (MAP_NORESERVE | MAP_HUGETLB)) && fd == -1 && (prot & PROT_WRITE) &&
           len >= gmp_pl.host_event_min && gmp_pl_active() && !gmp_in_hook;
}

static __attribute__((noinline, cold)) void after_heap_map(void *p, size_t len, int err,
                                                          const void *caller)
{
    GMP_IN_HOOK_SCOPE();
    uint64_t in_use = gmp_host_in_use();
    if (p != MAP_FAILED) {
        gmp_episode_success(GMP_BACKEND_CPU, -1, len, in_use);
    } else if (err == ENOMEM && !called_by_an_allocator(caller)) {
        gmp_episode_failure(GMP_BACKEND_CPU, -1, GMP_API_MMAP, len, err, in_use, NULL);
    }
    errno = err;
}

static inline int shared_file_like(size_t len, int prot, int flags, int fd)
{
    return (flags & MAP_SHARED) && fd >= 0 && (prot & PROT_WRITE) &&
           len >= gmp_pl.host_event_min && gmp_pl_active() && !gmp_in_hook;
}

/* The handlers, and what they read made ready here, where the loader's
 * lock and mapping memory are allowed: CPython's symbols, and the tables
 * of stacks and Python frames (a stack taken now maps them), so that the
 * SIGBUS bundle names the program's line. */
static __attribute__((noinline, cold)) void after_shared_map(int fd, int err)
{
    if (gmp_shm_fd_can_fill(fd)) {
        GMP_IN_HOOK_SCOPE();
        gmp_pl_probe_python();
        (void)gmp_stack_id_here();
        gmp_crash_arm();
    }
    errno = err;
}

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

#define MMAP_HOOK(name)                                                                    \
    GMP_EXPORT void *name(void *addr, size_t len, int prot, int flags, int fd, off_t off); \
    void *name(void *addr, size_t len, int prot, int flags, int fd, off_t off)             \
    {                                                                                      \
        GMP_REAL_FN(name, mmap_fn)                                                         \
        void *p = fn ? fn(addr, len, prot, flags, fd, off)                                 \
                     : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);         \
        if (GMP_UNLIKELY(heap_like(len, prot, flags, fd)) &&                               \
            (p == MAP_FAILED || gmp_any_episode_open()))                                   \
            after_heap_map(p, len, errno, __builtin_return_address(0));                    \
        else if (GMP_UNLIKELY(shared_file_like(len, prot, flags, fd)) && p != MAP_FAILED)   \
            after_shared_map(fd, errno);                                                   \
        return p;                                                                          \
    }
MMAP_HOOK(mmap)
MMAP_HOOK(mmap64)
