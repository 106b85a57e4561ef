/*
 * events.h — for the GPU test programs: the preload's own events, read
 * through the public C API (found with dlsym, so the programs also run
 * without the preload, where every count is -1).
 */
#ifndef GMP_TEST_EVENTS_H
#define GMP_TEST_EVENTS_H

#include "gpumemprof.h"

#include <dlfcn.h>
#include <string.h>

#define ANY_DEVICE (-99)

/* Events of `type` (and of the API named `api`, unless NULL; and on
 * `device`, -1 the host, unless ANY_DEVICE). */
static int count_events_on(gmp_event_type type, const char *api, int device)
{
    gmp_preload_recorder_fn get =
        (gmp_preload_recorder_fn)dlsym(RTLD_DEFAULT, GMP_PRELOAD_RECORDER_SYMBOL);
    size_t (*snap)(gmp_recorder *, gmp_event *, size_t) =
        (size_t (*)(gmp_recorder *, gmp_event *, size_t))dlsym(RTLD_DEFAULT, "gmp_snapshot");
    const char *(*api_name)(unsigned) =
        (const char *(*)(unsigned))dlsym(RTLD_DEFAULT, "gmp_api_name");
    gmp_recorder *rec = get ? get() : NULL;
    if (!rec || !snap || !api_name)
        return -1;
    static gmp_event events[10000];
    size_t n = snap(rec, events, 10000);
    int count = 0;
    for (size_t i = 0; i < n; i++)
        count += events[i].type == type && (!api || !strcmp(api_name(events[i].api), api)) &&
                 (device == ANY_DEVICE || events[i].device == device);
    return count;
}

static inline int count_events_of(gmp_event_type type, const char *api)
{
    return count_events_on(type, api, ANY_DEVICE);
}

static inline int count_events(gmp_event_type type)
{
    return count_events_of(type, NULL);
}

#endif
