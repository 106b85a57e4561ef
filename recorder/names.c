/*
 * names.c — the printable names of event types, backends and APIs.  The API
 * names come from GMP_API_LIST in gpumemprof.h, so numbers and names cannot
 * drift apart; tools and the bundle writer both print through these.
 */
#include "gpumemprof.h"

static const char *const event_type_names[GMP_EV_TYPE_COUNT] = {
    [GMP_EV_NONE] = "none",
    [GMP_EV_ALLOC] = "alloc",
    [GMP_EV_FREE] = "free",
    [GMP_EV_ALLOC_FAILED] = "alloc_failed",
    [GMP_EV_OOM] = "oom",
    [GMP_EV_OOM_RECOVERED] = "oom_recovered",
    [GMP_EV_MAP] = "map",
    [GMP_EV_UNMAP] = "unmap",
    [GMP_EV_SAMPLE] = "sample",
    [GMP_EV_SIGNAL] = "signal",
    [GMP_EV_PRESSURE] = "pressure",
    [GMP_EV_MARK] = "mark",
};

static const char *const backend_names[GMP_BACKEND_COUNT] = {
    [GMP_BACKEND_CPU] = "cpu",
    [GMP_BACKEND_CUDA] = "cuda",
    [GMP_BACKEND_ROCM] = "rocm",
};

/* Arrays of characters, not of pointers: pointers would be relocated, a
 * page of the preload written by the loader in every process at start. */
#define API_NAME_MAX 32
#define GMP_API_NAME_ENTRY(id, name, library) [GMP_API_##id] = name,
static const char api_names[GMP_API_COUNT][API_NAME_MAX] = {GMP_API_LIST(GMP_API_NAME_ENTRY)};
#undef GMP_API_NAME_ENTRY
#define GMP_API_LIBRARY_ENTRY(id, name, library) [GMP_API_##id] = library,
static const char api_libraries[GMP_API_COUNT][API_NAME_MAX] = {
    GMP_API_LIST(GMP_API_LIBRARY_ENTRY)};
#undef GMP_API_LIBRARY_ENTRY
/* each with room for its NUL (a string exactly as long as the array would
 * lose it without a word) */
#define GMP_API_FITS(id, name, library)                                                  \
    _Static_assert(sizeof(name) <= API_NAME_MAX && sizeof(library) <= API_NAME_MAX, #id);
GMP_API_LIST(GMP_API_FITS)
#undef GMP_API_FITS

const char *gmp_event_type_name(unsigned type)
{
    return type < GMP_EV_TYPE_COUNT ? event_type_names[type] : "unknown";
}

const char *gmp_backend_name(unsigned backend)
{
    return backend < GMP_BACKEND_COUNT ? backend_names[backend] : "unknown";
}

const char *gmp_api_name(unsigned api)
{
    return api < GMP_API_COUNT ? api_names[api] : "unknown";
}

const char *gmp_api_library(unsigned api)
{
    return api < GMP_API_COUNT ? api_libraries[api] : "";
}
