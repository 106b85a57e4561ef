/*
 * common.c — what the collectors share: the list of them, the one rule
 * on libraries (see collector.h): a collector uses a GPU library the
 * program already loaded; only a tool that asks may load one; and the
 * public entry that samples one collector's devices (gmp_collector_sample,
 * for `gmp-inspect info` and the Python package's monitor and tracker).
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

int gmp_collector_count(void)
{
    return (int)(sizeof gmp_collectors / sizeof gmp_collectors[0]) - 1;
}

const char *gmp_collector_name(int i)
{
    return i >= 0 && i < gmp_collector_count() ? gmp_collectors[i]->name : NULL;
}

int gmp_collector_sample(int i, unsigned flags, gmp_device_state *out, size_t cap,
                         const char **why_not)
{
    const char *why = "no such collector";
    if (flags & GMP_SAMPLE_MAY_LOAD)
        gmp_collectors_may_load(1);
    int count = -1;
    if (i >= 0 && i < gmp_collector_count()) {
        const gmp_collector *c = gmp_collectors[i];
        why = "";
        if (c->is_available(&why)) {
            /* the host is one entry, device -1; a GPU collector's are 0.. */
            int first = c == &gmp_collector_host ? -1 : 0;
            int n = c == &gmp_collector_host ? 1 : c->device_count();
            count = 0;
            int process_limit = c == &gmp_collector_host && (flags & GMP_SAMPLE_PROCESS_LIMIT);
            for (int d = first; d < first + n && (size_t)count < cap; d++)
                if ((process_limit ? gmp_host_sample_process_limit(&out[count])
                                   : c->sample(d, &out[count])) == 0)
                    count++;
        }
    }
    if (why_not)
        *why_not = count < 0 ? why : NULL;
    return count;
}

int gmp_collector_capabilities(int i, gmp_collector_caps *out)
{
    if (i < 0 || i >= gmp_collector_count() || !out)
        return -1;
    gmp_collectors[i]->capabilities(out);
    return 0;
}
