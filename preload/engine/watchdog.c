/*
 * watchdog.c — the slow death: swapping, pressure, then the OOM
 * killer.  Once the process holds GPU memory or a heap of
 * GMP_WATCHDOG_MIN_MB, the thread that allocates or frees (GPU memory, or
 * a large block) checks how close the process is to each limit that can
 * end it, when 100 ms have passed since the last check or (10 ms at least)
 * when it has allocated 2% of the tightest limit since:
 *   RLIMIT_AS        against VmSize
 *   its cgroup       memory.current/memory.max (v2), usage/limit_in_bytes (v1),
 *                    or an ancestor's where that leaves less room (a Slurm
 *                    job's or step's)
 *   the machine      MemTotal - MemAvailable against MemTotal
 *   each GPU         used against total, as the program's own thread saw them
 *                    after its last allocation (gpu_family.c: it has the context)
 * When the nearest has stayed above GMP_PRESSURE_PCT for 100 ms, at checks
 * with none below between (a burst that ends at once is not a slow death:
 * a program that fills a device and fails within that time gets its OOM
 * bundle alone), it writes one memory_pressure bundle (with PSI memory in
 * its evidence), and again only after a check has found usage back below.
 * When the death it warned of follows within that crossing, the death's
 * bundle replaces the warning's: one episode, one bundle (whoever writes
 * it, episode.c or a program's own report, calls
 * gmp_watchdog_replace_warning).  A memory that has
 * had a failure written up (a device, or the host's limits) is watched no
 * more: a warning comes before a failure, never after one.
 * GMP_WATCHDOG=0 turns it off.  No thread does this: a healthy process keeps the threads it made
 * (Python 3.12 warns at every fork of a multi-threaded process); a process
 * whose memory grows allocates, and so is checked.  A thread is started
 * only for GMP_SAMPLE_MS's sample events (sampler.c), and checks too.
 */
#include "bundle.h"
#include "collector.h"
#include "preload.h"
#include "verdict.h"

#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define SAMPLE_MS 100

/* The warning's bundle of the crossing under way, for the death that may
 * follow (warning_kept: atomic; the path is written before it is set). */
static char warning_path[GMP_PATH_MAX];
static int warning_kept;
#define MAX_SAMPLES 16

typedef struct limit_sample {
    char name[32];    /* "RLIMIT_AS", "cuda:0 memory" */
    char what[48];    /* "VmSize", "cuda:0 in use" */
    uint64_t used, limit;
    gmp_backend backend;
    int device;
} limit_sample;

static limit_sample make_sample(const char *name, const char *what, uint64_t used,
                                uint64_t limit, gmp_backend backend, int device)
{
    limit_sample s = {.used = used, .limit = limit, .backend = backend, .device = device};
    gmp_strlcpy(s.name, name, sizeof s.name);
    gmp_strlcpy(s.what, what, sizeof s.what);
    return s;
}

/* A byte count for a limit sample: unknown counts as 0 (no sample). */
static uint64_t known_or_0(uint64_t v)
{
    return v == GMP_UNKNOWN ? 0 : v;
}

/* The memories whose failure was written up (atomic each): their limits
 * warn no more. */
static int failed_in[GMP_BACKEND_COUNT][GMP_MAX_DEVICES + 1];
static int any_failed; /* atomic: one of them is set */

/* Where in failed_in a memory's flag is: the host's limits share one. */
static int *flag_of(gmp_backend backend, int device)
{
    return &failed_in[backend][backend == GMP_BACKEND_CPU ? 0 : gmp_device_index(device)];
}

void gmp_watchdog_failed(gmp_backend backend, int device)
{
    if ((unsigned)backend >= GMP_BACKEND_COUNT)
        return;
    __atomic_store_n(&any_failed, 1, __ATOMIC_RELAXED);
    /* a framework's words that name no device: each of its backend's */
    for (int d = device < 0 && backend != GMP_BACKEND_CPU ? 0 : device;
         d <= (device < 0 && backend != GMP_BACKEND_CPU ? GMP_MAX_DEVICES - 1 : device); d++)
        __atomic_store_n(flag_of(backend, d), 1, __ATOMIC_RELAXED);
}

static int has_failed(const limit_sample *s)
{
    return __atomic_load_n(flag_of(s->backend, s->device), __ATOMIC_RELAXED);
}

/* The memory cgroup, found at the first check (2 v2, 1 v1, -1 none, 0 not yet). */
static char cgroup_dir[GMP_PATH_MAX];
static int cgroup_version;

/* Every limit that applies now; returns how many. */
static int sample(limit_sample *out, char *buf, size_t cap)
{
    int n = 0;
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
        gmp_read_file("/proc/self/status", buf, cap) > 0)
        out[n++] = make_sample("RLIMIT_AS", "VmSize",
                               known_or_0(gmp_text_value(buf, "VmSize", 1024)),
                               (uint64_t)as.rlim_cur, GMP_BACKEND_CPU, -1);
    const char *dir = cgroup_dir;
    int version = cgroup_version;
    if (version > 0) {
        uint64_t limit = gmp_file_value(
            dir, version == 2 ? "memory.max" : "memory.limit_in_bytes", buf, cap);
        uint64_t used = gmp_file_value(
            dir, version == 2 ? "memory.current" : "memory.usage_in_bytes", buf, cap);
        if (limit != GMP_UNKNOWN && limit >= (1ull << 62)) /* v1's "unlimited" */
            limit = GMP_UNKNOWN;
        /* the job's or step's, where those bind (Slurm sets none on a task's) */
        gmp_cgroup_binding_limit(dir, version, &used, &limit, NULL, 0, buf, cap);
        if (known_or_0(limit))
            out[n++] = make_sample("cgroup memory limit", "cgroup usage", known_or_0(used),
                                   limit, GMP_BACKEND_CPU, -1);
    }
    if (gmp_read_file("/proc/meminfo", buf, cap) > 0) {
        uint64_t total = known_or_0(gmp_text_value(buf, "MemTotal", 1024));
        uint64_t avail = known_or_0(gmp_text_value(buf, "MemAvailable", 1024));
        if (total && avail <= total)
            out[n++] = make_sample("MemTotal", "memory in use on the machine", total - avail,
                                   total, GMP_BACKEND_CPU, -1);
    }
    /* devices, as the program's threads last saw them */
    for (int b = GMP_BACKEND_CUDA; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d < GMP_MAX_DEVICES && n < MAX_SAMPLES; d++) {
            uint64_t free_bytes, total;
            gmp_gpu_device_memory((gmp_backend)b, d, &free_bytes, &total);
            if (!total || free_bytes > total)
                continue;
            char num[24], name[32], what[48];
            gmp_fmt_i64(d, num);
            gmp_strjoin(name, sizeof name, gmp_backend_name((unsigned)b), ":", num, " memory",
                        (char *)NULL);
            gmp_strjoin(what, sizeof what, gmp_backend_name((unsigned)b), ":", num, " in use",
                        (char *)NULL);
            out[n++] = make_sample(name, what, total - free_bytes, total, (gmp_backend)b, d);
        }
    return n;
}

static uint32_t pct(const limit_sample *s)
{
    return s->limit ? (uint32_t)(s->used * 100 / s->limit) : 0;
}

static void write_pressure_bundle(const limit_sample *all, int n, const limit_sample *nearest,
                                  char *buf, size_t cap)
{
    char used[32], limit[32], p[24], threshold[24], message[320], evidence[1024];
    gmp_fmt_bytes(nearest->used, used);
    gmp_fmt_bytes(nearest->limit, limit);
    gmp_fmt_u64(pct(nearest), p);
    gmp_fmt_u64(gmp_pl.cfg->pressure_pct, threshold);
    /* "VmSize 930.0 MiB is 93% of RLIMIT_AS 1000.0 MiB (threshold 90%)." */
    gmp_strjoin(message, sizeof message, nearest->what, " ", used, " is ", p, "% of ",
                nearest->name, " ", limit, " (threshold ", threshold, "%).", (char *)NULL);
    evidence[0] = '\0';
    for (int i = 0; i < n; i++) {
        char u[32], l[32], q[24];
        gmp_fmt_bytes(all[i].used, u);
        gmp_fmt_bytes(all[i].limit, l);
        gmp_fmt_u64(pct(&all[i]), q);
        size_t at = strlen(evidence);
        gmp_strjoin(evidence + at, sizeof evidence - at, at ? "; " : "", all[i].what, " ", u,
                    " of ", all[i].name, " ", l, " (", q, "%)", (char *)NULL);
    }
    if (gmp_read_file("/proc/pressure/memory", buf, cap) > 0) {
        size_t at = strlen(evidence);
        buf[strcspn(buf, "\n")] = '\0';
        gmp_strjoin(evidence + at, sizeof evidence - at, "; PSI memory ", buf, (char *)NULL);
    }
    gmp_pl_event(GMP_EV_PRESSURE, nearest->backend, nearest->device, GMP_API_UNKNOWN, 0,
                 nearest->limit, (int32_t)pct(nearest), nearest->used);
    gmp_dump_request req = {
        .reason = GMP_REASON_PRESSURE,
        .exception_type = GMP_REASON_PRESSURE,
        .exception_message = message,
        .backend = nearest->backend,
        .confirmed_by = GMP_CONFIRMED_BY_WATCHDOG,
        .evidence = evidence,
    };
    if (gmp_pl_dump(&req, warning_path, sizeof warning_path)) {
        gmp_log("memory pressure: %s bundle: %s" GMP_READ_IT "%s", message, warning_path,
                warning_path);
        __atomic_store_n(&warning_kept, 1, __ATOMIC_RELEASE);
    }
}



/* A death of memory was written in the crossing under way (atomic). */
static int death_told;

void gmp_watchdog_death_told(void)
{
    __atomic_store_n(&death_told, 1, __ATOMIC_RELAXED);
}

/* Pressure: above the threshold for SAMPLE_MS at checks with none below
 * between, once per crossing, and not in a crossing during which an OOM
 * episode was open: that is the death itself, with its own bundle (a rank
 * that failed, then sleeps holding its memory, warned after its death).  *above_since is when this run of
 * checks above began (0: the last check was below; UINT64_MAX: written).
 * Returns the tightest limit seen (0 none), for the next check's growth
 * step. */
static uint64_t check_pressure(uint64_t now, uint64_t *above_since, char *buf, size_t cap)
{
    limit_sample all[MAX_SAMPLES];
    int n = sample(all, buf, cap);
    const limit_sample *nearest = NULL, *warnable = NULL; /* of all; of those not failed */
    uint64_t tightest = 0;
    for (int i = 0; i < n; i++) {
        if (!nearest || pct(&all[i]) > pct(nearest))
            nearest = &all[i];
        if (!has_failed(&all[i]) && (!warnable || pct(&all[i]) > pct(warnable)))
            warnable = &all[i];
        if (!tightest || all[i].limit < tightest)
            tightest = all[i].limit;
    }
    uint32_t threshold = gmp_pl.cfg->pressure_pct;
    if (!nearest || pct(nearest) < threshold) {
        *above_since = 0;
        __atomic_store_n(&warning_kept, 0, __ATOMIC_RELEASE); /* it stands on its own */
        __atomic_store_n(&death_told, 0, __ATOMIC_RELAXED);
    }
    else if (gmp_any_episode_open() || __atomic_load_n(&death_told, __ATOMIC_RELAXED) ||
             !warnable || pct(warnable) < threshold)
        *above_since = UINT64_MAX; /* the crossing's death is told, or only a memory that
                                    * failed is near: no warning after it */
    else if (!*above_since)
        *above_since = now;
    else if (*above_since != UINT64_MAX && now > *above_since &&
             now - *above_since >= (uint64_t)SAMPLE_MS * 1000000) {
        write_pressure_bundle(all, n, warnable, buf, cap);
        *above_since = UINT64_MAX;
    }
    return tightest;
}

#define CHECK_MIN_MS 10
static uint64_t last_check_ns; /* atomic, realtime: callers pass the time they read */
static uint64_t grown;         /* atomic: bytes allocated since the last check */
static uint64_t growth_step;   /* atomic: 2% of the tightest limit (0: none known) */
static int checking;           /* atomic: one thread checks at a time */
static uint64_t above_since;   /* see check_pressure; read by others: atomic */
static uint64_t checked_ns;    /* when the reserved check was due */

int gmp_watchdog_due(uint64_t allocated, uint64_t now)
{
    if (!gmp_pl.cfg->watchdog)
        return 0;
    uint64_t since = __atomic_add_fetch(&grown, allocated, __ATOMIC_RELAXED);
    uint64_t step = __atomic_load_n(&growth_step, __ATOMIC_RELAXED);
    if (!now)
        now = gmp_now_realtime_ns();
    uint64_t last = __atomic_load_n(&last_check_ns, __ATOMIC_RELAXED);
    uint64_t elapsed_ms = now > last ? (now - last) / 1000000 : 0; /* the clock may step back */
    if (elapsed_ms < SAMPLE_MS && (elapsed_ms < CHECK_MIN_MS || !step || since < step))
        return 0;
    if (__atomic_exchange_n(&checking, 1, __ATOMIC_ACQUIRE))
        return 0; /* another thread checks right now: never waited for */
    __atomic_store_n(&last_check_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&grown, 0, __ATOMIC_RELAXED);
    checked_ns = now;
    return 1;
}

void gmp_watchdog_check(void)
{
    static char buf[8192]; /* the checker's alone: it holds `checking` */
    int saved = errno;
    {
        GMP_IN_HOOK_SCOPE(); /* nothing the check does is the program's */
        if (!cgroup_version)
            cgroup_version = gmp_cgroup_memory_dir(cgroup_dir, sizeof cgroup_dir);
        uint64_t since = __atomic_load_n(&above_since, __ATOMIC_RELAXED);
        __atomic_store_n(&growth_step,
                         check_pressure(checked_ns, &since, buf, sizeof buf) / 50,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&above_since, since, __ATOMIC_RELAXED);
    }
    errno = saved;
    __atomic_store_n(&checking, 0, __ATOMIC_RELEASE);
}

static void *sampler_main(void *arg)
{
    (void)arg;
    GMP_IN_HOOK_SCOPE(); /* nothing this thread does is the program's */
    for (;;) {
        struct timespec ts = {gmp_pl.cfg->sample_ms / 1000, (long)(gmp_pl.cfg->sample_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        if (!gmp_pl_active())
            continue;
        gmp_sampler_tick();
        if (gmp_watchdog_due(0, 0))
            gmp_watchdog_check();
    }
    return NULL;
}

static int sampler_started; /* atomic; reset in a forked child */

int gmp_watchdog_replace_warning(char *note, size_t cap)
{
    if (cap)
        note[0] = '\0';
    /* the crossing still on: no check has found usage back below since */
    if (__atomic_load_n(&above_since, __ATOMIC_RELAXED) != UINT64_MAX ||
        !__atomic_exchange_n(&warning_kept, 0, __ATOMIC_ACQ_REL) ||
        gmp_bundle_remove(warning_path) != 0)
        return 0;
    const char *base = strrchr(warning_path, '/');
    gmp_strjoin(note, cap, " (replaces the memory-pressure warning ",
                base ? base + 1 : warning_path, ")", (char *)NULL);
    return 1;
}

int gmp_watchdog_above(void)
{
    uint64_t since = __atomic_load_n(&above_since, __ATOMIC_RELAXED);
    return since != 0 && since != UINT64_MAX;
}

void gmp_watchdog_note_use(uint64_t allocated)
{
    if (gmp_watchdog_due(allocated, 0))
        gmp_watchdog_check();
    gmp_watchdog_start_sampler();
}

void gmp_watchdog_start_sampler(void)
{
    int expected = 0;
    if (gmp_pl.cfg->sample_ms && !__atomic_load_n(&sampler_started, __ATOMIC_RELAXED) &&
        __atomic_compare_exchange_n(&sampler_started, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED) &&
        gmp_spawn_thread(sampler_main, 128 * 1024) < 0)
        __atomic_store_n(&sampler_started, 0, __ATOMIC_RELEASE); /* another try later */
}

void gmp_watchdog_after_fork(void)
{
    GMP_CLEAR_IN_CHILD(sampler_started);
    GMP_CLEAR_IN_CHILD(checking);
    GMP_CLEAR_IN_CHILD(above_since);
    GMP_CLEAR_IN_CHILD(warning_kept);
    GMP_CLEAR_IN_CHILD(death_told);
    if (__atomic_load_n(&any_failed, __ATOMIC_RELAXED)) { /* the child's memory is its own */
        memset(failed_in, 0, sizeof failed_in);
        __atomic_store_n(&any_failed, 0, __ATOMIC_RELAXED);
    }
}
