/*
 * metrics.c — `gmp-inspect metrics PATH...`: the preload's Prometheus
 * textfile (GMP_PROM_FILE), made from bundles instead: per process (pid,
 * host, rank) the bytes in use at its last bundle, peaks and allocation and
 * free counts from the events the bundles kept, OOM bundles, recovered
 * episodes, bundles written.  For a node_exporter textfile directory, or a
 * push to a gateway after a job.
 */
#include "answer.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES_SEEN 32

typedef struct device_stat {
    char backend[16], device[24];
    uint64_t in_use, peak, allocs, frees;
} device_stat;

typedef struct proc {
    int64_t pid;
    char host[128], rank[32];
    uint64_t latest_ns, bundles, ooms, recovered;
    device_stat dev[MAX_DEVICES_SEEN];
    int ndev;
} proc;

typedef struct procs {
    proc *p;
    size_t n, cap;
} procs;

static device_stat *dev_of(proc *p, const char *backend, int64_t device)
{
    char d[24];
    if (!strcmp(backend, "cpu"))
        snprintf(d, sizeof d, "host");
    else if (device < 0)
        snprintf(d, sizeof d, "pinned");
    else
        snprintf(d, sizeof d, "%lld", (long long)device);
    char b[16]; /* as it is kept: the lookup compares what is kept */
    snprintf(b, sizeof b, "%.15s", backend);
    for (int i = 0; i < p->ndev; i++)
        if (!strcmp(p->dev[i].backend, b) && !strcmp(p->dev[i].device, d))
            return &p->dev[i];
    if (p->ndev == MAX_DEVICES_SEEN)
        return NULL;
    device_stat *s = &p->dev[p->ndev++];
    memset(s, 0, sizeof *s);
    snprintf(s->backend, sizeof s->backend, "%.15s", backend);
    snprintf(s->device, sizeof s->device, "%s", d);
    return s;
}

static proc *proc_of(procs *ps, int64_t pid, const char *long_host, const char *long_rank)
{
    char host[sizeof ps->p->host], rank[sizeof ps->p->rank]; /* as they are kept */
    snprintf(host, sizeof host, "%s", long_host);
    snprintf(rank, sizeof rank, "%s", long_rank);
    for (size_t i = 0; i < ps->n; i++)
        if (ps->p[i].pid == pid && !strcmp(ps->p[i].host, host) && !strcmp(ps->p[i].rank, rank))
            return &ps->p[i];
    if (array_room((void **)&ps->p, &ps->cap, ps->n, sizeof *ps->p) < 0)
        return NULL;
    proc *p = &ps->p[ps->n++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    snprintf(p->host, sizeof p->host, "%s", host);
    snprintf(p->rank, sizeof p->rank, "%s", rank);
    return p;
}

static void add_bundle(const char *path, void *arg)
{
    procs *ps = arg;
    bundle b;
    char err[600];
    if (bundle_open(&b, path, 1, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect metrics: %s\n", err);
        return;
    }
    int64_t pid = -1, created = 0, recovered = 0;
    jint(b.manifest, "pid", &pid);
    jint(b.manifest, "created_at_ns", &created);
    jint(b.metadata, "recovered_episodes", &recovered);
    const char *host = bundle_host(&b), *rank = bundle_rank(&b);
    proc *p = proc_of(ps, pid, host ? host : "", rank ? rank : "");
    if (p) {
        p->bundles++;
        p->ooms += gmp_verdict_is_death_of_memory(bundle_kind_of(&b));
        if ((uint64_t)recovered > p->recovered)
            p->recovered = (uint64_t)recovered;
        int latest = (uint64_t)created >= p->latest_ns;
        if (latest)
            p->latest_ns = (uint64_t)created;
        size_t i;
        json_t *ev;
        event_record r;
        event_records_until(&b.events, b.events.n, i, ev, &r) {
            int64_t use = r.has_in_use ? r.in_use : -1;
            device_stat *d = r.type_name && r.backend ? dev_of(p, r.backend, r.device) : NULL;
            if (!d || use < 0)
                continue;
            if ((uint64_t)use > d->peak)
                d->peak = (uint64_t)use;
            if (latest) {
                d->allocs += r.type == GMP_EV_ALLOC;
                d->frees += r.type == GMP_EV_FREE;
                d->in_use = (uint64_t)use;
            }
        }
    }
    bundle_close(&b);
}

static void label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void labels(FILE *f, const proc *p)
{
    fprintf(f, "pid=\"%lld\",host=\"", (long long)p->pid);
    label(f, p->host);
    fputs("\",rank=\"", f);
    label(f, p->rank);
    fputc('"', f);
}

/* which: 0 in use, 1 peak, 2 allocations, 3 frees */
static void per_device(const procs *ps, const char *name, const char *type, const char *help,
                       int which)
{
    printf("# HELP gpumemprof_%s %s\n# TYPE gpumemprof_%s %s\n", name, help, name, type);
    for (size_t i = 0; i < ps->n; i++)
        for (int k = 0; k < ps->p[i].ndev; k++) {
            const device_stat *d = &ps->p[i].dev[k];
            uint64_t v = which == 0 ? d->in_use : which == 1 ? d->peak
                         : which == 2 ? d->allocs : d->frees;
            printf("gpumemprof_%s{", name);
            labels(stdout, &ps->p[i]);
            fputs(",backend=\"", stdout);
            label(stdout, d->backend);
            printf("\",device=\"%s\"} %llu\n", d->device, (unsigned long long)v);
        }
}

static void per_process(const procs *ps, const char *name, const char *help, int which)
{
    printf("# HELP gpumemprof_%s %s\n# TYPE gpumemprof_%s counter\n", name, help, name);
    for (size_t i = 0; i < ps->n; i++) {
        const proc *p = &ps->p[i];
        uint64_t v = which == 0 ? p->ooms : which == 1 ? p->recovered : p->bundles;
        printf("gpumemprof_%s{", name);
        labels(stdout, p);
        printf("} %llu\n", (unsigned long long)v);
    }
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect metrics PATH...\n"
          "The Prometheus textfile the preload writes (GMP_PROM_FILE), from the\n"
          "bundles under the PATHs: per process (pid, host, rank) bytes in use at\n"
          "its last bundle, peaks and counts from the events the bundles kept, OOM\n"
          "bundles, recovered episodes, bundles written.\n"
          "Exit status: 0, 2 usage error.\n",
          f);
}

int cmd_metrics(int argc, char **argv)
{
    verb_args a = {.verb = "metrics", .usage = usage};
    for (int c; (c = verb_option(&a, argc, argv)) != -1;)
        return VERB_EXIT(c);
    if (verb_operands(&a, argc, 1, argc) < 0)
        return EXIT_USAGE;
    procs ps = {0};
    for (int i = optind; i < argc; i++)
        for_each_bundle(argv[i], add_bundle, &ps);
    per_device(&ps, "bytes_in_use", "gauge", "Bytes in use at the last bundle.", 0);
    per_device(&ps, "peak_bytes", "gauge", "The most bytes in use the bundles saw.", 1);
    per_device(&ps, "allocations_total", "counter", "Allocations in the last bundle's events.", 2);
    per_device(&ps, "frees_total", "counter", "Frees in the last bundle's events.", 3);
    per_process(&ps, "oom_episodes_total", "Out-of-memory bundles.", 0);
    per_process(&ps, "recovered_episodes_total", "Episodes recovered from.", 1);
    per_process(&ps, "bundles_written_total", "Bundles written.", 2);
    free(ps.p);
    return EXIT_OK;
}
