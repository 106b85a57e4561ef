/*
 * next_probe.c — a library loaded after the preload, whose RTLD_NEXT
 * lookups must search after *it*: next_probe_only is defined here and
 * nowhere after, so glibc answers NULL; a dlsym that lost its caller would
 * search after the preload and find it.
 */
#include <dlfcn.h>

__attribute__((visibility("default"))) int next_probe_only(void);
__attribute__((visibility("default"))) int next_probe_only(void) { return 1; }

/* What dlsym(RTLD_NEXT, name) gives when asked from this library. */
__attribute__((visibility("default"))) void *next_probe_lookup(const char *name);
__attribute__((visibility("default"))) void *next_probe_lookup(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    __asm__ volatile("" ::: "memory"); /* no tail call: the caller must be us */
    return p;
}
