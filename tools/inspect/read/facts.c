/*
 * facts.c — what a bundle records, decoded once into typed fields: the
 * failed request (bundle_failure_of), which show, triage, diff, diagnose,
 * the sites, the Python stack and the torch export read; the devices and
 * the host as they were then (bundle_devices_of, bundle_host_state_of), which
 * show, diagnose, leaks and the torch export read; how its process ended
 * (bundle_outcome_of), which kind.c and show read; what a failed call's
 * code is called (result_code_name), which show and the event lines print.
 * The document stays the reader's for what no field holds.
 */
#include "gpu_results.h"
#include "read.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

const bundle_failure *bundle_failure_of(bundle *b)
{
    if (!b->failure_read) {
        b->failure_read = 1;
        bundle_failure *f = &b->failure;
        memset(f, 0, sizeof *f);
        json_t *doc = json_object_get(b->metadata, "failed_request");
        if (json_is_object(doc)) {
            f->doc = doc;
            f->api = jstr(doc, "api");
            f->has_size = !ju64(doc, "size", &f->size);
            f->device = -1;
            f->has_device = !jint(doc, "device", &f->device);
            f->has_code = !jint(doc, "code", &f->code);
            f->has_in_use = !jint(doc, "bytes_in_use", &f->in_use);
            f->has_stack_id = !jint(doc, "stack_id", &f->stack_id);
            f->stack = json_object_get(doc, "stack");
            f->timestamp = json_object_get(doc, "timestamp");
        }
    }
    return b->failure.doc ? &b->failure : NULL;
}

const bundle_device *bundle_devices_of(bundle *b, size_t *n)
{
    if (!b->devices_read) {
        b->devices_read = 1;
        bundle_metadata_whole(b);
        json_t *all = json_object_get(b->metadata, "device_state");
        size_t i, count = json_array_size(all);
        json_t *st;
        b->devices = count ? calloc(count, sizeof *b->devices) : NULL;
        json_array_foreach(all, i, st) {
            if (!b->devices || !json_is_object(st))
                continue;
            bundle_device *d = &b->devices[b->device_count++];
            d->backend = jstr(st, "backend");
            d->name = jstr(st, "name");
            d->others_source = jstr(st, "other_processes_source");
            d->has_device = !jint(st, "device", &d->device);
            d->has_free = !jint(st, "free", &d->free);
            d->has_total = !jint(st, "total", &d->total);
            d->has_mine = !jint(st, "process_bytes", &d->mine);
            d->has_others = !jint(st, "other_processes_bytes", &d->others);
            d->has_others_count = !jint(st, "other_process_count", &d->others_count);
        }
    }
    *n = b->device_count;
    return b->device_count ? b->devices : NULL;
}

const bundle_host_state *bundle_host_state_of(bundle *b)
{
    if (!b->host_read) {
        b->host_read = 1;
        bundle_host_state *h = &b->host;
        memset(h, 0, sizeof *h);
        bundle_metadata_whole(b);
        json_t *hs = json_object_get(b->metadata, "host_state");
        b->has_host = json_is_object(hs);
        json_t *proc = json_object_get(hs, "process"), *mach = json_object_get(hs, "machine");
        json_t *cg = json_object_get(hs, "cgroup");
        h->has_rss = !jint(proc, "vm_rss", &h->rss);
        h->has_hwm = !jint(proc, "vm_hwm", &h->hwm);
        h->has_vm_size = !jint(proc, "vm_size", &h->vm_size);
        h->has_cgroup_current = !jint(cg, "memory_current", &h->cgroup_current);
        h->has_cgroup_max = !jint(cg, "memory_max", &h->cgroup_max);
        h->has_cgroup_kills = !jint(json_object_get(cg, "events"), "oom_kill", &h->cgroup_kills);
        h->has_cgroup_kills_at_start = !jint(cg, "oom_kill_at_start", &h->cgroup_kills_at_start);
        h->cgroup_limit_path = jstr(cg, "limit_path");
        h->has_available = !jint(mach, "mem_available", &h->available);
        h->has_mem_total = !jint(mach, "mem_total", &h->mem_total);
        h->has_swap_total = !jint(mach, "swap_total", &h->swap_total);
        h->has_shm = !jint(mach, "shm_total", &h->shm_total) &&
                     !jint(mach, "shm_available", &h->shm_available) && h->shm_total > 0;
        h->has_as_soft = !jint(json_object_get(json_object_get(hs, "rlimits"), "as"), "soft",
                               &h->as_soft);
    }
    return b->has_host ? &b->host : NULL;
}

const bundle_outcome *bundle_outcome_of(bundle *b)
{
    if (!b->outcome_read) {
        b->outcome_read = 1;
        bundle_outcome *o = &b->outcome;
        memset(o, 0, sizeof *o);
        json_t *doc = json_object_get(b->metadata, "outcome");
        const char *state = jstr(doc, "state");
        static const struct {
            const char *name;
            bundle_end end;
        } ends[] = {{"running", BUNDLE_END_RUNNING}, {"exited", BUNDLE_END_EXITED},
                    {"killed", BUNDLE_END_KILLED}, {"gone", BUNDLE_END_GONE}};
        o->end = state ? BUNDLE_END_OTHER : BUNDLE_END_UNKNOWN;
        for (size_t i = 0; state && i < sizeof ends / sizeof *ends; i++)
            if (!strcmp(state, ends[i].name))
                o->end = ends[i].end;
        json_t *status = json_object_get(doc, "exit_status");
        o->has_exit_status = o->end == BUNDLE_END_EXITED && json_is_integer(status);
        o->exit_status = o->has_exit_status ? (long long)json_integer_value(status) : -1;
        o->signal = jstr(doc, "signal");
        o->death_bundle = jstr(doc, "death_bundle");
    }
    return &b->outcome;
}

/* A GPU library's other codes by name: {code, name} in one table each. */
typedef struct gpu_result {
    int code;
    const char *name;
} gpu_result;
#define GPU_RESULT_ENTRY(name, value) {value, #name},
static const gpu_result cudart_results[] = {GMP_FOR_EACH_CUDART_RESULT(GPU_RESULT_ENTRY)};
static const gpu_result cu_results[] = {GMP_FOR_EACH_CU_RESULT(GPU_RESULT_ENTRY)};
static const gpu_result hip_results[] = {GMP_FOR_EACH_HIP_RESULT(GPU_RESULT_ENTRY)};
#undef GPU_RESULT_ENTRY

#define LIBRARY_RESULTS(library, table) {library, table, sizeof table / sizeof *table}
static const struct {
    const char *library;
    const gpu_result *results;
    size_t count;
} gpu_libraries[] = {LIBRARY_RESULTS("libcudart", cudart_results),
                     LIBRARY_RESULTS("libcuda", cu_results),
                     LIBRARY_RESULTS("libamdhip64", hip_results)};
#undef LIBRARY_RESULTS

static const char *gpu_result_name(const char *library, int64_t code)
{
    for (size_t l = 0; l < sizeof gpu_libraries / sizeof *gpu_libraries; l++) {
        if (strcmp(library, gpu_libraries[l].library))
            continue;
        for (size_t i = 0; i < gpu_libraries[l].count; i++)
            if (gpu_libraries[l].results[i].code == code)
                return gpu_libraries[l].results[i].name;
    }
    return NULL;
}

/* An out-of-memory code by the classifier the preload decided with, so the
 * name is the one its library gives it; another by its library's table or
 * errno. */
int result_code_name(const char *api_name, int64_t code, char *out, size_t cap)
{
    unsigned api = GMP_API_UNKNOWN;
    for (unsigned i = 0; api_name && i < GMP_API_COUNT && api == GMP_API_UNKNOWN; i++)
        if (!strcmp(gmp_api_name(i), api_name))
            api = i;
    const char *library = gmp_api_library(api);
    int host = !strcmp(library, "libc");
    gmp_backend backend = host                              ? GMP_BACKEND_CPU
                          : !strncmp(library, "libcuda", 7) ? GMP_BACKEND_CUDA
                          : !strcmp(library, "libamdhip64") ? GMP_BACKEND_ROCM
                                                            : GMP_BACKEND_COUNT;
    if (backend != GMP_BACKEND_COUNT && code > INT32_MIN && code < INT32_MAX) {
        gmp_classification c = gmp_classify_result(backend, (gmp_api)api, (long)code);
        if (c.is_oom) {
            snprintf(out, cap, "%s", c.reason);
            return 1;
        }
    }
    /* the rest: an errno of libc's, a GPU library's own code */
    const char *named = !host                          ? gpu_result_name(library, code)
                        : code > 0 && code < 4096 ? gmp_errno_name((int)code)
                                                       : NULL;
    if (named)
        snprintf(out, cap, "%s", named);
    return named != NULL;
}
