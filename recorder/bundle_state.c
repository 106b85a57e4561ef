/*
 * bundle_state.c — metadata.json's device_state (each device as the
 * program's context saw it at the failure, with what the collectors added:
 * the device's own count, this process as the driver counts it, other
 * processes) and host_state (the host collector, read now).
 */
#include "bundle.h"
#include "collector.h"

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

void gmp_bundle_fill_host_state(gmp_jw *w)
{
    gmp_host_state s;
    gmp_host_state_read(&s);
    gmp_jw_key(w, "host_state");
    gmp_jw_obj_begin(w);
    gmp_jw_key(w, "sampled_at");
    gmp_jw_seconds(w, s.sampled_ns);
    gmp_jw_key(w, "process");
    gmp_jw_obj_begin(w);
    kbytes(w, "vm_rss", s.vm_rss);
    kbytes(w, "vm_hwm", s.vm_hwm);
    kbytes(w, "vm_size", s.vm_size);
    kbytes(w, "vm_peak", s.vm_peak);
    kbytes(w, "vm_swap", s.vm_swap);
    gmp_jw_obj_end(w);
    gmp_jw_key(w, "machine");
    gmp_jw_obj_begin(w);
    kbytes(w, "mem_total", s.mem_total);
    kbytes(w, "mem_available", s.mem_available);
    kbytes(w, "swap_total", s.swap_total);
    kbytes(w, "swap_free", s.swap_free);
    gmp_jw_obj_end(w);
    gmp_jw_key(w, "cgroup");
    if (!s.cgroup_version) {
        gmp_jw_null(w);
    } else {
        gmp_jw_obj_begin(w);
        gmp_jw_ki64(w, "version", s.cgroup_version);
        gmp_jw_kstr(w, "path", s.cgroup_path);
        kbytes(w, "memory_current", s.cg_current);
        kbytes(w, "memory_max", s.cg_max);
        kbytes(w, "memory_high", s.cg_high);
        kbytes(w, "memory_peak", s.cg_peak);
        kbytes(w, "swap_current", s.cg_swap_current);
        kbytes(w, "swap_max", s.cg_swap_max);
        gmp_jw_key(w, "events");
        gmp_jw_obj_begin(w);
        kbytes(w, "high", s.cg_events_high);
        kbytes(w, "max", s.cg_events_max);
        kbytes(w, "oom", s.cg_events_oom);
        kbytes(w, "oom_kill", s.cg_events_oom_kill);
        gmp_jw_obj_end(w);
        gmp_jw_obj_end(w);
    }
    gmp_jw_key(w, "psi_memory");
    if (!s.psi_present) {
        gmp_jw_null(w);
    } else {
        gmp_jw_obj_begin(w);
        psi_value(w, "some_avg10", s.psi_some_avg10);
        psi_value(w, "some_avg60", s.psi_some_avg60);
        psi_value(w, "some_avg300", s.psi_some_avg300);
        gmp_jw_ku64(w, "some_total_us", s.psi_some_total_us);
        psi_value(w, "full_avg10", s.psi_full_avg10);
        psi_value(w, "full_avg60", s.psi_full_avg60);
        psi_value(w, "full_avg300", s.psi_full_avg300);
        gmp_jw_ku64(w, "full_total_us", s.psi_full_total_us);
        gmp_jw_obj_end(w);
    }
    gmp_jw_key(w, "rlimits");
    gmp_jw_obj_begin(w);
    limit_pair(w, "as", s.rlimit_as);
    limit_pair(w, "data", s.rlimit_data);
    limit_pair(w, "rss", s.rlimit_rss);
    limit_pair(w, "memlock", s.rlimit_memlock);
    gmp_jw_obj_end(w);
    gmp_jw_obj_end(w);
}
