/*
 * info.c — `gmp-inspect info [--json]`: the collectors' view of this
 * machine: which collectors can sample here and why not,
 * what they can tell, each device they see, the host's memory and limits,
 * and the driver versions.  Unlike the preload, this tool may load the GPU
 * libraries to ask them (gmp_collectors_may_load); it still makes no CUDA
 * context.  --json writes the same with the bundle's own field writers, so
 * its fields are those of a bundle's device_state and host_state.
 */
#include "bundle.h"
#include "collector.h"
#include "answer.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEVICES 16

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect info [--json]\n"
          "What gpumemprof's collectors see on this machine: CUDA driver, NVML,\n"
          "ROCm and the host (process, machine, cgroup, PSI, rlimits); each\n"
          "collector's devices, or why it cannot sample here.  Works on a machine\n"
          "with no GPU.\n"
          "Exit status: 0, 2 usage error.\n",
          f);
}

typedef struct collector_view {
    const gmp_collector *c;
    int available;
    const char *why;
    gmp_collector_caps caps;
    gmp_device_state devices[MAX_DEVICES];
    uint32_t count;
} collector_view;

static void look(collector_view *v, int i)
{
    memset(v, 0, sizeof *v);
    v->c = gmp_collectors[i];
    v->c->capabilities(&v->caps);
    int n = gmp_collector_sample(i, GMP_SAMPLE_MAY_LOAD, v->devices, MAX_DEVICES, &v->why);
    v->available = n >= 0;
    v->count = n > 0 ? (uint32_t)n : 0;
    if (!v->why)
        v->why = "";
}

static void print_text(collector_view *views, int nviews, const gmp_host_state *host,
                       const gmp_gpu_probe_result *p)
{
    printf("gpumemprof %s collectors on this machine:\n", GMP_VERSION_STRING);
    for (int i = 0; i < nviews; i++) {
        collector_view *v = &views[i];
        printf("  %-5s ", v->c->name);
        if (!v->available) {
            printf("not available: %s\n", v->why);
            continue;
        }
        printf("available (%s%s%s)\n", v->caps.sampling_source,
               v->caps.supports_device_free ? ", free" : "",
               v->caps.supports_process_usage ? ", per-process usage" : "");
        for (uint32_t k = 0; k < v->count; k++) {
            const gmp_device_state *d = &v->devices[k];
            char total[32], free_b[32], used[32], others[32];
            fmt_bytes(d->total, total, sizeof total);
            if (d->device >= 0)
                printf("        %s:%d %-28s total %s", gmp_backend_name(d->backend), d->device,
                       d->name[0] ? d->name : "(no name)", total);
            else
                printf("        host (%s) total %s", d->source, total);
            if (d->free_bytes != GMP_UNKNOWN) {
                fmt_bytes(d->free_bytes, free_b, sizeof free_b);
                printf(", free %s", free_b);
            } else {
                printf(", free unknown (no context of ours)");
            }
            if (d->known & GMP_DS_USED) {
                fmt_bytes(d->used_bytes, used, sizeof used);
                printf(", used %s", used);
            }
            if (d->known & GMP_DS_OTHERS) {
                fmt_bytes(d->other_processes_bytes, others, sizeof others);
                if (d->device >= 0)
                    printf(", other processes %s (%u)", others, d->other_process_count);
                else
                    printf(", other processes %s", others);
            }
            putchar('\n');
        }
    }
    const gmp_host_state *h = host;
    char a[32], b[32];
    if (h->vm_rss != GMP_UNKNOWN) {
        fmt_bytes(h->mem_available != GMP_UNKNOWN ? h->mem_available : 0, a, sizeof a);
        fmt_bytes(h->mem_total != GMP_UNKNOWN ? h->mem_total : 0, b, sizeof b);
        printf("Machine: %s available of %s", a, b);
        if (h->swap_total != GMP_UNKNOWN && h->swap_total) {
            fmt_bytes(h->swap_total, a, sizeof a);
            printf(", swap %s", a);
        }
        putchar('\n');
    }
    if (h->shm_total != GMP_UNKNOWN) {
        fmt_bytes(h->shm_available != GMP_UNKNOWN ? h->shm_available : 0, a, sizeof a);
        fmt_bytes(h->shm_total, b, sizeof b);
        printf("Shared memory: /dev/shm, %s available of %s\n", a, b);
    }
    if (h->cgroup_version) {
        fmt_bytes(h->cg_current != GMP_UNKNOWN ? h->cg_current : 0, a, sizeof a);
        printf("Cgroup:  v%d %s: %s", h->cgroup_version, h->cgroup_path, a);
        if (h->cg_max != GMP_UNKNOWN) {
            fmt_bytes(h->cg_max, b, sizeof b);
            printf(" of %s limit", b);
        } else {
            printf(", no limit");
        }
        if (h->cg_events_oom_kill != GMP_UNKNOWN)
            printf(", %llu OOM kill(s) so far", (unsigned long long)h->cg_events_oom_kill);
        putchar('\n');
    }
    if (h->psi_present)
        printf("PSI:     memory some avg10 %u.%02u%%, full avg10 %u.%02u%%\n",
               h->psi_some_avg10 / 100, h->psi_some_avg10 % 100, h->psi_full_avg10 / 100,
               h->psi_full_avg10 % 100);
    if (h->rlimit_as[0] != GMP_UNKNOWN) {
        fmt_bytes(h->rlimit_as[0], a, sizeof a);
        printf("Limits:  RLIMIT_AS %s\n", a);
    }
    if (p->cuda_driver_version)
        printf("CUDA driver API: %d.%d\n", p->cuda_driver_version / 1000,
               p->cuda_driver_version % 1000 / 10);
    if (p->nvml_driver_version[0])
        printf("NVIDIA driver:   %s\n", p->nvml_driver_version);
    if (p->hip_runtime_version)
        printf("HIP runtime:     %d.%d.%d\n", p->hip_runtime_version / 10000000,
               p->hip_runtime_version / 100000 % 100, p->hip_runtime_version % 100000);
}

/* The document is made by the bundle's own field writers, so that its
 * fields are a bundle's, into memory; then printed as every verb prints. */
static int print_info_json(collector_view *views, int nviews, const gmp_host_state *host,
                           const gmp_gpu_probe_result *p)
{
    enum { CAP = 1 << 20 }; /* 4 collectors x 16 devices need some 20 KiB */
    char *buf = malloc(CAP);
    if (!buf)
        return EXIT_INVALID;
    gmp_jw w;
    gmp_jw_init(&w, -1, buf, CAP);
    gmp_jw_obj_begin(&w);
    gmp_jw_kstr(&w, "generator", "gpumemprof " GMP_VERSION_STRING);
    gmp_jw_key(&w, "collectors");
    gmp_jw_arr_begin(&w);
    for (int i = 0; i < nviews; i++) {
        collector_view *v = &views[i];
        gmp_jw_obj_begin(&w);
        gmp_jw_kstr(&w, "name", v->c->name);
        gmp_jw_key(&w, "available");
        gmp_jw_bool(&w, v->available);
        gmp_jw_kstr(&w, "why_not", v->available ? NULL : v->why);
        gmp_jw_key(&w, "capabilities");
        gmp_jw_obj_begin(&w);
        gmp_jw_kstr(&w, "backend", gmp_backend_name(v->caps.backend));
        gmp_jw_key(&w, "supports_device_total");
        gmp_jw_bool(&w, v->caps.supports_device_total);
        gmp_jw_key(&w, "supports_device_free");
        gmp_jw_bool(&w, v->caps.supports_device_free);
        gmp_jw_key(&w, "supports_process_usage");
        gmp_jw_bool(&w, v->caps.supports_process_usage);
        gmp_jw_kstr(&w, "sampling_source", v->caps.sampling_source);
        gmp_jw_obj_end(&w);
        gmp_bundle_fill_device_state(&w, "devices", v->devices, v->count);
        gmp_jw_obj_end(&w);
    }
    gmp_jw_arr_end(&w);
    gmp_bundle_fill_host_state(&w, host, 1, UINT64_MAX);
    int cuda = 0, rocm = 0;
    for (int i = 0; i < p->device_count; i++) {
        cuda += p->devices[i].backend == GMP_BACKEND_CUDA;
        rocm += p->devices[i].backend == GMP_BACKEND_ROCM;
    }
    /* this program's view: it is no Python (`gpumemprof info` adds that) */
    gmp_bundle_fill_system(&w, cuda ? "cuda" : rocm ? "rocm" : "cpu", p);
    gmp_bundle_fill_software(&w, p); /* "gpu": driver versions and devices */
    gmp_jw_obj_end(&w);
    json_t *doc = gmp_jw_finish(&w) == 0 ? json_loadb(buf, w.len, 0, NULL) : NULL;
    free(buf);
    return print_json(doc) < 0 ? EXIT_INVALID : EXIT_OK;
}

int cmd_info(int argc, char **argv)
{
    static const struct option options[] = {{"json", no_argument, NULL, 'j'}, {0}};
    verb_args a = {.verb = "info", .usage = usage, .longopts = options};
    int json = 0;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'j')
            return VERB_EXIT(c);
        json = 1;
    }
    if (verb_operands(&a, argc, 0, 0) < 0)
        return EXIT_USAGE;
    gmp_collectors_may_load(1);
    collector_view views[4];
    int n = 0;
    for (int i = 0; i < gmp_collector_count() && n < 4; i++)
        look(&views[n++], i);
    gmp_gpu_probe();
    gmp_host_state host;
    gmp_host_state_read(&host);
    if (json)
        return print_info_json(views, n, &host, gmp_gpu_probe_get());
    print_text(views, n, &host, gmp_gpu_probe_get());
    return EXIT_OK;
}
