/*
 * prom_textfile.c — GMP_PROM_FILE: a Prometheus textfile (node_exporter's
 * textfile collector format) rewritten atomically every GMP_PROM_INTERVAL_S
 * by a thread of its own, and once more at exit.  Bytes in use and peaks
 * per device and for the host, allocation and free counts, OOM episodes,
 * recovered episodes and bundles written, labelled by pid, host and rank.
 * "%p" in the path is the pid, so the processes of one job can share a
 * directory.  Only processes that ask for it pay: no thread otherwise.
 */
#include "preload.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static char labels[512];     /* pid="..",host="..",rank=".." */
static char path[GMP_PATH_MAX], tmp[GMP_PATH_MAX + 32];
static char text[64 * 1024];
static uint64_t host_peak;   /* atomic */
static int running;          /* atomic: the thread exists */
static int busy;             /* atomic: a write in progress, or none to start */
static int forked;           /* atomic: this process is a fork child */

void gmp_metrics_note_host(uint64_t in_use)
{
    uint64_t top = __atomic_load_n(&host_peak, __ATOMIC_RELAXED);
    while (in_use > top && !__atomic_compare_exchange_n(&host_peak, &top, in_use, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *v)
{
    size_t n = 0;
    for (; *v && n + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n') {
            out[n++] = '\\';
            out[n++] = *v == '\n' ? 'n' : *v;
        } else {
            out[n++] = *v;
        }
    }
    out[n] = '\0';
}

static void make_labels(void)
{
    static const char *const rank_vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                            "PMI_RANK", "LOCAL_RANK"};
    const char *rank = "";
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars && !*rank; i++)
        if (getenv(rank_vars[i]))
            rank = getenv(rank_vars[i]);
    struct utsname u;
    char host[160], r[96];
    label_value(host, sizeof host, uname(&u) == 0 ? u.nodename : "");
    label_value(r, sizeof r, rank);
    snprintf(labels, sizeof labels, "pid=\"%d\",host=\"%s\",rank=\"%s\"", (int)getpid(), host, r);
    /* the path, with %p the pid */
    const char *p = gmp_pl.prom_file;
    size_t n = 0;
    for (; *p && n + 24 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%d", (int)getpid());
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
}

typedef struct out {
    size_t len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text + o->len, sizeof text - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len = o->len + (size_t)n < sizeof text ? o->len + (size_t)n : sizeof text - 1;
}

static void header(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP gpumemprof_%s %s\n# TYPE gpumemprof_%s %s\n", name, help, name, type);
}

/* One sample line per device with memory, then one for the host. */
static void per_device(out *o, const char *name, int which, uint64_t host_value)
{
    for (int b = GMP_BACKEND_CUDA; b < GMP_BACKEND_COUNT; b++)
        for (int i = 0; i <= GMP_MAX_DEVICES; i++) {
            uint64_t v[4];
            gmp_device_stats((gmp_backend)b, i, &v[0], &v[1], &v[2], &v[3]);
            if (!v[2])
                continue; /* never allocated there */
            char dev[16];
            if (i == 0)
                snprintf(dev, sizeof dev, "pinned");
            else
                snprintf(dev, sizeof dev, "%d", i - 1);
            put(o, "gpumemprof_%s{%s,backend=\"%s\",device=\"%s\"} %llu\n", name, labels,
                gmp_backend_name((unsigned)b), dev, (unsigned long long)v[which]);
        }
    put(o, "gpumemprof_%s{%s,backend=\"cpu\",device=\"host\"} %llu\n", name, labels,
        (unsigned long long)host_value);
}

static void write_now(void);

/* A rewrite by the thread, unless one is under way or the file is held. */
static void metrics_write(void)
{
    if (path[0] && !__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) {
        write_now();
        __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
    }
}

int gmp_metrics_hold(void)
{
    /* the thread may be writing right now: wait for it (a second at
     * most), since a process that left first would leave its temporary
     * file behind, or, at exit, its older file as the last */
    for (int i = 0; path[0] && i < 1000; i++) {
        if (!__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
            return 1;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

void gmp_metrics_release(void)
{
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

void gmp_metrics_flush(void)
{
    if (gmp_metrics_hold())
        write_now(); /* and held for good: this write is the last */
}

static void write_now(void)
{
    GMP_IN_HOOK_SCOPE();
    out o = {0};
    uint64_t host = gmp_host_in_use(), host_allocs, host_frees, episodes, recovered;
    gmp_metrics_note_host(host);
    gmp_host_counts(&host_allocs, &host_frees);
    gmp_episode_counts(&episodes, &recovered);
    header(&o, "bytes_in_use", "gauge", "Bytes in use now, per device and for the host.");
    per_device(&o, "bytes_in_use", 0, host);
    header(&o, "peak_bytes", "gauge", "The most bytes in use seen, per device and for the host.");
    per_device(&o, "peak_bytes", 1, __atomic_load_n(&host_peak, __ATOMIC_RELAXED));
    header(&o, "allocations_total", "counter", "Allocation calls that succeeded.");
    per_device(&o, "allocations_total", 2, host_allocs);
    header(&o, "frees_total", "counter", "Free calls that returned memory.");
    per_device(&o, "frees_total", 3, host_frees);
    header(&o, "oom_episodes_total", "counter", "Out-of-memory episodes opened.");
    put(&o, "gpumemprof_oom_episodes_total{%s} %llu\n", labels, (unsigned long long)episodes);
    header(&o, "recovered_episodes_total", "counter",
           "Out-of-memory episodes the program recovered from.");
    put(&o, "gpumemprof_recovered_episodes_total{%s} %llu\n", labels,
        (unsigned long long)recovered);
    header(&o, "bundles_written_total", "counter", "Diagnostic bundles written.");
    put(&o, "gpumemprof_bundles_written_total{%s} %llu\n", labels,
        (unsigned long long)gmp_pl_bundles_written());
    /* a fresh file of ours: one left by a crash goes, one planted by
     * another user (whom a sticky directory lets keep it) stops this write */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
        int ok = gmp_write_all(fd, text, o.len) == 0;
        close(fd);
        if (!ok || rename(tmp, path) != 0)
            unlink(tmp);
    }
}

static void *metrics_main(void *arg)
{
    (void)arg;
    GMP_IN_HOOK_SCOPE(); /* nothing this thread does is the program's */
    /* a fork child's first write waits an interval: one that execs at
     * once (a shell, a launcher) leaves no file of its own, the new
     * image writes it; one that exits at once writes it then */
    int wait_first = __atomic_load_n(&forked, __ATOMIC_RELAXED);
    for (;; wait_first = 0) {
        if (!wait_first)
            metrics_write();
        struct timespec ts = {(time_t)gmp_pl.cfg->prom_interval_s, 0};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

GMP_START_EXIT_TEXT void gmp_metrics_start(void)
{
    if (!gmp_pl.prom_file || __atomic_exchange_n(&running, 1, __ATOMIC_ACQ_REL))
        return;
    make_labels();
    if (gmp_spawn_thread(metrics_main, 128 * 1024) < 0)
        __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
}

void gmp_metrics_after_fork(void)
{
    if (!gmp_pl.prom_file)
        return;
    __atomic_store_n(&running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&busy, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&forked, 1, __ATOMIC_RELAXED);
    gmp_metrics_start(); /* the child's own file (its pid in labels and %p) */
}
