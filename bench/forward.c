/*
 * forward.c — the floor of an allocator hook: a preload whose malloc calls
 * the real one and returns its block (a hook must see the block to count
 * it), and whose free jumps on to the real free, counting nothing.  The
 * churn's "forwarding hook" column: what interposing malloc and free costs
 * before gpumemprof counts anything.  The build hides symbols by default,
 * so the two are exported by name: hidden, they would interpose nothing.
 */
#include <dlfcn.h>
#include <stdlib.h>

static void *first_malloc(size_t size);
static void *(*real_malloc)(size_t) = first_malloc;
static void (*real_free)(void *);

/* dlsym allocates nothing for these names in glibc; an early request goes
 * through here once */
static void resolve(void)
{
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
}

static void *first_malloc(size_t size)
{
    resolve();
    return real_malloc(size);
}

__attribute__((visibility("default"))) void *malloc(size_t size)
{
    void *p = real_malloc(size);
    __asm__ volatile("" ::: "memory"); /* a call and a return, as a counting hook has */
    return p;
}

__attribute__((visibility("default"))) void free(void *p)
{
    if (__builtin_expect(real_free == NULL, 0))
        resolve();
    real_free(p);
}
