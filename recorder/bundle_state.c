/*
 * bundle_state.c — metadata.json's device_state (each device as the
 * program's context saw it at the failure, with what the collectors added:
 * the device's own count, this process as the driver counts it, other
 * processes) and host_state (the host collector's sample, taken by the
 * caller just before).
 */
#include "bundle.h"
#include "collector.h"

#include <stddef.h>

/* A byte count, or null when unknown. */
static void kbytes(gmp_jw *w, const char *key, uint64_t v)
{
    gmp_jw_key(w, key);
    if (v == GMP_UNKNOWN)
        gmp_jw_null(w);
    else
        gmp_jw_u64(w, v);
}

void gmp_bundle_fill_device_state(gmp_jw *w, const char *key, const gmp_device_state *devices,
                                  uint32_t count)
{
    gmp_jw_key(w, key);
    gmp_jw_arr_begin(w);
    for (uint32_t i = 0; i < count && devices; i++) {
        const gmp_device_state *d = &devices[i];
        uint64_t used = d->known & GMP_DS_USED ? d->used_bytes
                        : d->total > d->free_bytes ? d->total - d->free_bytes
                                                   : 0;
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "backend", gmp_backend_name(d->backend));
        gmp_jw_ki64(w, "device", d->device);
        gmp_jw_kstr(w, "name", d->name[0] ? d->name : NULL);
        kbytes(w, "free", d->free_bytes);
        gmp_jw_ku64(w, "total", d->total);
        gmp_jw_ku64(w, "used", used);
        if (d->backend != GMP_BACKEND_CPU) /* the host's is driver_process_bytes: RSS */
            gmp_jw_ku64(w, "process_bytes", d->process_bytes);
        kbytes(w, "driver_process_bytes",
               d->known & GMP_DS_DRIVER_PROCESS ? d->driver_process_bytes : GMP_UNKNOWN);
        /* others: as the driver lists them, else what the device has in use
         * less ours (which then counts our context and caches as theirs) */
        gmp_jw_ku64(w, "other_processes_bytes",
                    d->known & GMP_DS_OTHERS ? d->other_processes_bytes
                    : used > d->process_bytes ? used - d->process_bytes
                                              : 0);
        gmp_jw_kstr(w, "other_processes_source",
                    d->known & GMP_DS_OTHERS ? "driver" : "estimate");
        if (d->known & GMP_DS_OTHERS)
            gmp_jw_ku64(w, "other_process_count", d->other_process_count);
        gmp_jw_kstr(w, "sampling_source", d->source);
        gmp_jw_key(w, "sampled_at");
        gmp_jw_seconds(w, d->sampled_ns);
        gmp_jw_obj_end(w);
    }
    gmp_jw_arr_end(w);
}

static void limit_pair(gmp_jw *w, const char *key, const uint64_t v[2])
{
    gmp_jw_key(w, key);
    gmp_jw_obj_begin(w);
    kbytes(w, "soft", v[0]);
    kbytes(w, "hard", v[1]);
    gmp_jw_obj_end(w);
}

static void psi_value(gmp_jw *w, const char *key, uint32_t hundredths)
{
    char num[32];
    size_t n = gmp_fmt_u64(hundredths / 100, num);
    num[n++] = '.';
    num[n++] = (char)('0' + hundredths % 100 / 10);
    num[n++] = (char)('0' + hundredths % 10);
    gmp_jw_key(w, key);
    gmp_jw_raw(w, num, n);
}

/* The byte counts of gmp_host_state, by JSON key, per object. */
typedef struct host_field {
    const char *key;
    size_t offset;
} host_field;
#define HF(key, member) {key, offsetof(gmp_host_state, member)}
static const host_field process_fields[] = {
    HF("vm_rss", vm_rss), HF("vm_hwm", vm_hwm), HF("vm_size", vm_size),
    HF("vm_peak", vm_peak), HF("vm_swap", vm_swap),
};
static const host_field machine_fields[] = {
    HF("mem_total", mem_total), HF("mem_available", mem_available),
    HF("swap_total", swap_total), HF("swap_free", swap_free),
    HF("shm_total", shm_total), HF("shm_available", shm_available),
};
static const host_field cgroup_fields[] = {
    HF("memory_current", cg_current), HF("memory_max", cg_max), HF("memory_high", cg_high),
    HF("memory_peak", cg_peak), HF("swap_current", cg_swap_current),
    HF("swap_max", cg_swap_max),
};
static const host_field cgroup_event_fields[] = {
    HF("high", cg_events_high), HF("max", cg_events_max), HF("oom", cg_events_oom),
    HF("oom_kill", cg_events_oom_kill),
};
#define FIELDS(a) a, sizeof a / sizeof *a

static void host_fields(gmp_jw *w, const gmp_host_state *s, const host_field *fields,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        kbytes(w, fields[i].key, *(const uint64_t *)((const char *)s + fields[i].offset));
}

static void host_object(gmp_jw *w, const char *key, const gmp_host_state *s,
                        const host_field *fields, size_t n)
{
    gmp_jw_key(w, key);
    gmp_jw_obj_begin(w);
    host_fields(w, s, fields, n);
    gmp_jw_obj_end(w);
}

static void psi(gmp_jw *w, const gmp_host_state *s)
{
    const struct { const char *key; uint32_t v; } avgs[] = {
        {"some_avg10", s->psi_some_avg10}, {"some_avg60", s->psi_some_avg60},
        {"some_avg300", s->psi_some_avg300}, {"full_avg10", s->psi_full_avg10},
        {"full_avg60", s->psi_full_avg60}, {"full_avg300", s->psi_full_avg300},
    };
    gmp_jw_key(w, "psi_memory");
    if (!s->psi_present) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_obj_begin(w);
    for (size_t i = 0; i < sizeof avgs / sizeof *avgs; i++)
        psi_value(w, avgs[i].key, avgs[i].v);
    gmp_jw_ku64(w, "some_total_us", s->psi_some_total_us);
    gmp_jw_ku64(w, "full_total_us", s->psi_full_total_us);
    gmp_jw_obj_end(w);
}

void gmp_bundle_fill_host_state(gmp_jw *w, const gmp_host_state *s, int self,
                                uint64_t oom_kills_at_start)
{
    gmp_jw_key(w, "host_state");
    if (!s) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_obj_begin(w);
    gmp_jw_key(w, "sampled_at");
    gmp_jw_seconds(w, s->sampled_ns);
    if (self) {
        host_object(w, "process", s, FIELDS(process_fields));
    } else { /* the process is gone: the machine and cgroup as its recoverer sees them */
        gmp_jw_key(w, "process");
        gmp_jw_null(w);
        gmp_jw_kstr(w, "sampled_by", "recovery");
    }
    host_object(w, "machine", s, FIELDS(machine_fields));
    gmp_jw_key(w, "cgroup");
    if (!s->cgroup_version) {
        gmp_jw_null(w);
    } else {
        gmp_jw_obj_begin(w);
        gmp_jw_ki64(w, "version", s->cgroup_version);
        gmp_jw_kstr(w, "path", s->cgroup_path);
        if (s->cg_limit_path[0]) /* memory_current and memory_max are that one's */
            gmp_jw_kstr(w, "limit_path", s->cg_limit_path);
        host_fields(w, s, FIELDS(cgroup_fields));
        host_object(w, "events", s, FIELDS(cgroup_event_fields));
        /* events->oom_kill counts since the cgroup was made: this is how
         * many of those came before the process started recording */
        if (oom_kills_at_start != UINT64_MAX)
            gmp_jw_ku64(w, "oom_kill_at_start", oom_kills_at_start);
        gmp_jw_obj_end(w);
    }
    psi(w, s);
    gmp_jw_key(w, "rlimits");
    gmp_jw_obj_begin(w);
    limit_pair(w, "as", s->rlimit_as);
    limit_pair(w, "data", s->rlimit_data);
    limit_pair(w, "rss", s->rlimit_rss);
    limit_pair(w, "memlock", s->rlimit_memlock);
    gmp_jw_obj_end(w);
    gmp_jw_obj_end(w);
}
