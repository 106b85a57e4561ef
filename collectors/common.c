/*
 * common.c — what the collectors share: the list of them, and the one rule
 * on libraries (see collector.h): a collector uses a GPU library the
 * program already loaded; only a tool that asks may load one.
 */
#include "collector.h"

#include <dlfcn.h>

const gmp_collector *const gmp_collectors[] = {
    &gmp_collector_cuda, &gmp_collector_nvml, &gmp_collector_rocm, &gmp_collector_host, NULL,
};

static int may_load; /* atomic */

void gmp_collectors_may_load(int yes)
{
    __atomic_store_n(&may_load, yes, __ATOMIC_RELEASE);
}

int gmp_collectors_loading_allowed(void)
{
    return __atomic_load_n(&may_load, __ATOMIC_ACQUIRE);
}

void *gmp_collector_open(const char *const *sonames)
{
    int flags = RTLD_LAZY | RTLD_LOCAL | (gmp_collectors_loading_allowed() ? 0 : RTLD_NOLOAD);
    for (const char *const *so = sonames; *so; so++) {
        /* the reference is kept: the library stays as long as we use it */
        void *h = dlopen(*so, flags);
        if (h)
            return h;
    }
    return NULL;
}

int gmp_collector_resolve(int *state, int (*bind)(void))
{
    int now = __atomic_load_n(state, __ATOMIC_ACQUIRE);
    if (now == 2)
        return 1;
    if (now == 1)
        return 0; /* another thread is binding: absent meanwhile */
    /* a tool tried already; the preload tries again, the program may have
     * loaded the library since */
    if (now == 3 && gmp_collectors_loading_allowed())
        return 0;
    if (!__atomic_compare_exchange_n(state, &now, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return now == 2;
    int ok = bind();
    __atomic_store_n(state, ok ? 2 : 3, __ATOMIC_RELEASE);
    return ok;
}
