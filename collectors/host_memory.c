/*
 * host_memory.c — the host collector: this process (/proc/self/status), the
 * machine (/proc/meminfo), its memory cgroup (v2: memory.current, max,
 * high, peak, swap, events; v1: usage, limit, max usage), PSI memory,
 * /dev/shm's size and room, and the memory rlimits.  Plain reads into
 * fixed buffers, no allocation: it
 * runs on the dump path too, in a signal handler included.
 */
#include "collector.h"
#include "util.h"

#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>

uint64_t gmp_text_value(const char *text, const char *key, uint64_t unit)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) || (p[kl] != ':' && p[kl] != ' '))
            continue;
        p += kl + 1;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p < '0' || *p > '9')
            return GMP_UNKNOWN;
        uint64_t v = 0;
        for (; *p >= '0' && *p <= '9'; p++)
            v = v * 10 + (uint64_t)(*p - '0');
        return v * unit;
    }
    return GMP_UNKNOWN;
}

/* Paths of cgroup files: /sys/fs/cgroup + the cgroup's path (Kubernetes'
 * are ~200 bytes).  Small: this runs on the dump path, maybe in a signal
 * handler on a small alternate stack. */
#define CGROUP_PATH_MAX 1024

uint64_t gmp_file_value(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[CGROUP_PATH_MAX + 64];
    if (gmp_strjoin(path, sizeof path, dir, "/", name, (char *)NULL) < 0 ||
        gmp_read_file(path, buf, cap) <= 0 || buf[0] < '0' || buf[0] > '9')
        return GMP_UNKNOWN;
    uint64_t v = 0;
    for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* "avg10=1.50" -> 150 */
static uint32_t psi_hundredths(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    if (!p)
        return 0;
    p += strlen(key);
    uint32_t whole = 0, frac = 0, digits = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        whole = whole * 10 + (uint32_t)(*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9' && digits < 2; p++, digits++)
            frac = frac * 10 + (uint32_t)(*p - '0');
    while (digits++ < 2)
        frac *= 10;
    return whole * 100 + frac;
}

static void read_psi(gmp_host_state *s, const char *dir, char *buf, size_t cap)
{
    char path[CGROUP_PATH_MAX + 32];
    ssize_t n = -1;
    if (s->cgroup_version == 2 &&
        gmp_strjoin(path, sizeof path, dir, "/memory.pressure", (char *)NULL) == 0)
        n = gmp_read_file(path, buf, cap);
    if (n <= 0)
        n = gmp_read_file("/proc/pressure/memory", buf, cap);
    if (n <= 0)
        return;
    const char *some = strstr(buf, "some "), *full = strstr(buf, "full ");
    s->psi_present = some != NULL;
    if (some) {
        s->psi_some_avg10 = psi_hundredths(some, "avg10=");
        s->psi_some_avg60 = psi_hundredths(some, "avg60=");
        s->psi_some_avg300 = psi_hundredths(some, "avg300=");
        const char *t = strstr(some, "total=");
        for (t = t ? t + 6 : ""; *t >= '0' && *t <= '9'; t++)
            s->psi_some_total_us = s->psi_some_total_us * 10 + (uint64_t)(*t - '0');
    }
    if (full) {
        s->psi_full_avg10 = psi_hundredths(full, "avg10=");
        s->psi_full_avg60 = psi_hundredths(full, "avg60=");
        s->psi_full_avg300 = psi_hundredths(full, "avg300=");
        const char *t = strstr(full, "total=");
        for (t = t ? t + 6 : ""; *t >= '0' && *t <= '9'; t++)
            s->psi_full_total_us = s->psi_full_total_us * 10 + (uint64_t)(*t - '0');
    }
}

static void read_rlimit(int resource, uint64_t out[2])
{
    struct rlimit rl;
    out[0] = out[1] = GMP_UNKNOWN;
    if (getrlimit(resource, &rl) == 0) {
        out[0] = rl.rlim_cur == RLIM_INFINITY ? GMP_UNKNOWN : (uint64_t)rl.rlim_cur;
        out[1] = rl.rlim_max == RLIM_INFINITY ? GMP_UNKNOWN : (uint64_t)rl.rlim_max;
    }
}

static void read_cgroup_at(gmp_host_state *s, const char *dir, int version, char *buf,
                           size_t cap);

static void read_cgroup(gmp_host_state *s, char *buf, size_t cap)
{
    char dir[CGROUP_PATH_MAX];
    read_cgroup_at(s, dir, gmp_cgroup_memory_dir(dir, sizeof dir), buf, cap);
}

void gmp_cgroup_binding_limit(const char *dir, int version, uint64_t *used, uint64_t *limit,
                              char *path_out, size_t path_cap, char *buf, size_t cap)
{
    const char *root = version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const char *max_file = version == 2 ? "memory.max" : "memory.limit_in_bytes";
    const char *use_file = version == 2 ? "memory.current" : "memory.usage_in_bytes";
    size_t root_len = strlen(root);
    uint64_t room = *limit != GMP_UNKNOWN && *used != GMP_UNKNOWN
                        ? (*limit > *used ? *limit - *used : 0)
                        : GMP_UNKNOWN;
    char up[CGROUP_PATH_MAX];
    gmp_strlcpy(up, dir, sizeof up);
    if (path_out && path_cap)
        path_out[0] = '\0';
    if (strncmp(up, root, root_len) || up[root_len] != '/')
        return;
    for (int depth = 0; depth < 16; depth++) {
        char *slash = strrchr(up, '/');
        if (!slash || (size_t)(slash - up) <= root_len)
            return;
        *slash = '\0';
        uint64_t max = gmp_file_value(up, max_file, buf, cap);
        uint64_t in_use = gmp_file_value(up, use_file, buf, cap);
        if (version == 1 && max != GMP_UNKNOWN && max >= (1ull << 62))
            max = GMP_UNKNOWN;
        if (max == GMP_UNKNOWN || in_use == GMP_UNKNOWN)
            continue;
        uint64_t left = max > in_use ? max - in_use : 0;
        if (room == GMP_UNKNOWN || left < room) {
            room = left;
            *limit = max;
            *used = in_use;
            if (path_out && path_cap)
                gmp_strlcpy(path_out, up, path_cap);
        }
    }
}

void gmp_host_state_read_cgroup(gmp_host_state *s, const char *oom_file)
{
    char dir[CGROUP_PATH_MAX], buf[2048];
    size_t n = strlen(oom_file);
    int version = n > 14 && !strcmp(oom_file + n - 14, "/memory.events")        ? 2
                  : n > 19 && !strcmp(oom_file + n - 19, "/memory.oom_control") ? 1
                                                                                 : -1;
    if (version < 0 || n >= sizeof dir || strncmp(oom_file, "/sys/fs/cgroup/", 15) ||
        strstr(oom_file, "/../"))
        return;
    memcpy(dir, oom_file, n + 1);
    *strrchr(dir, '/') = '\0';
    gmp_host_state probe;
    read_cgroup_at(&probe, dir, version, buf, sizeof buf);
    if (probe.cg_current == GMP_UNKNOWN) /* gone with its processes */
        return;
    /* the cgroup's part, the rest as it was */
    s->cgroup_version = probe.cgroup_version;
    memcpy(s->cgroup_path, probe.cgroup_path, sizeof s->cgroup_path);
    memcpy(s->cg_limit_path, probe.cg_limit_path, sizeof s->cg_limit_path);
    s->cg_current = probe.cg_current;
    s->cg_max = probe.cg_max;
    s->cg_peak = probe.cg_peak;
    s->cg_high = probe.cg_high;
    s->cg_swap_current = probe.cg_swap_current;
    s->cg_swap_max = probe.cg_swap_max;
    s->cg_events_high = probe.cg_events_high;
    s->cg_events_max = probe.cg_events_max;
    s->cg_events_oom = probe.cg_events_oom;
    s->cg_events_oom_kill = probe.cg_events_oom_kill;
}

static void read_cgroup_at(gmp_host_state *s, const char *dir, int version, char *buf,
                           size_t cap)
{
    s->cg_current = s->cg_max = s->cg_peak = s->cg_high = GMP_UNKNOWN;
    s->cg_limit_path[0] = '\0';
    s->cg_swap_current = s->cg_swap_max = GMP_UNKNOWN;
    s->cg_events_high = s->cg_events_max = s->cg_events_oom = s->cg_events_oom_kill = GMP_UNKNOWN;
    if (version < 0) {
        read_psi(s, "", buf, cap);
        return;
    }
    s->cgroup_version = version;
    gmp_strlcpy(s->cgroup_path, dir, sizeof s->cgroup_path);
    if (version == 2) {
        s->cg_current = gmp_file_value(dir, "memory.current", buf, cap);
        s->cg_max = gmp_file_value(dir, "memory.max", buf, cap);
        s->cg_high = gmp_file_value(dir, "memory.high", buf, cap);
        s->cg_peak = gmp_file_value(dir, "memory.peak", buf, cap);
        s->cg_swap_current = gmp_file_value(dir, "memory.swap.current", buf, cap);
        s->cg_swap_max = gmp_file_value(dir, "memory.swap.max", buf, cap);
        char path[CGROUP_PATH_MAX + 32];
        if (gmp_strjoin(path, sizeof path, dir, "/memory.events", (char *)NULL) == 0 &&
            gmp_read_file(path, buf, cap) > 0) {
            s->cg_events_high = gmp_text_value(buf, "high", 1);
            s->cg_events_max = gmp_text_value(buf, "max", 1);
            s->cg_events_oom = gmp_text_value(buf, "oom", 1);
            s->cg_events_oom_kill = gmp_text_value(buf, "oom_kill", 1);
        }
    } else {
        s->cg_current = gmp_file_value(dir, "memory.usage_in_bytes", buf, cap);
        s->cg_max = gmp_file_value(dir, "memory.limit_in_bytes", buf, cap);
        s->cg_peak = gmp_file_value(dir, "memory.max_usage_in_bytes", buf, cap);
        if (s->cg_max != GMP_UNKNOWN && s->cg_max >= (1ull << 62))
            s->cg_max = GMP_UNKNOWN; /* v1 says "no limit" with a huge number */
        char path[CGROUP_PATH_MAX + 32];
        if (gmp_strjoin(path, sizeof path, dir, "/memory.oom_control", (char *)NULL) == 0 &&
            gmp_read_file(path, buf, cap) > 0)
            s->cg_events_oom_kill = gmp_text_value(buf, "oom_kill", 1);
    }
    gmp_cgroup_binding_limit(dir, version, &s->cg_current, &s->cg_max, s->cg_limit_path,
                             sizeof s->cg_limit_path, buf, cap);
    read_psi(s, dir, buf, cap);
}

void gmp_host_state_read(gmp_host_state *s)
{
    char buf[2048]; /* the lines we read come first in each file */
    memset(s, 0, sizeof *s);
    s->sampled_ns = gmp_now_realtime_ns();
    s->vm_rss = s->vm_hwm = s->vm_size = s->vm_peak = s->vm_swap = GMP_UNKNOWN;
    if (gmp_read_file("/proc/self/status", buf, sizeof buf) > 0) {
        s->vm_rss = gmp_text_value(buf, "VmRSS", 1024);
        s->vm_hwm = gmp_text_value(buf, "VmHWM", 1024);
        s->vm_size = gmp_text_value(buf, "VmSize", 1024);
        s->vm_peak = gmp_text_value(buf, "VmPeak", 1024);
        s->vm_swap = gmp_text_value(buf, "VmSwap", 1024);
    }
    s->mem_total = s->mem_available = s->swap_total = s->swap_free = GMP_UNKNOWN;
    if (gmp_read_file("/proc/meminfo", buf, sizeof buf) > 0) {
        s->mem_total = gmp_text_value(buf, "MemTotal", 1024);
        s->mem_available = gmp_text_value(buf, "MemAvailable", 1024);
        s->swap_total = gmp_text_value(buf, "SwapTotal", 1024);
        s->swap_free = gmp_text_value(buf, "SwapFree", 1024);
    }
    /* statfs, not statvfs: glibc's statvfs reads /proc/mounts through stdio */
    struct statfs shm;
    s->shm_total = s->shm_available = GMP_UNKNOWN;
    if (statfs("/dev/shm", &shm) == 0 && shm.f_blocks > 0) {
        s->shm_total = (uint64_t)shm.f_blocks * (uint64_t)shm.f_frsize;
        s->shm_available = (uint64_t)shm.f_bavail * (uint64_t)shm.f_frsize;
    }
    read_cgroup(s, buf, sizeof buf);
    read_rlimit(RLIMIT_AS, s->rlimit_as);
    read_rlimit(RLIMIT_DATA, s->rlimit_data);
    read_rlimit(RLIMIT_RSS, s->rlimit_rss);
    read_rlimit(RLIMIT_MEMLOCK, s->rlimit_memlock);
}

/* ---- the generic interface: the host as device -1 ------------------------ */

static int host_available(const char **why)
{
    char buf[256];
    if (gmp_read_file("/proc/meminfo", buf, sizeof buf) <= 0) {
        *why = "/proc/meminfo is not readable";
        return 0;
    }
    return 1;
}

static int host_device_count(void)
{
    return 1;
}

/* used of total as a share, for comparing limits (0 when either is unknown). */
static double share(uint64_t used, uint64_t total)
{
    return used == GMP_UNKNOWN || total == GMP_UNKNOWN || !total ? 0.0 : (double)used / total;
}

/* The host entry: against the cgroup's limit when it has one below the
 * machine's; with process_limit, against RLIMIT_AS instead when the address
 * space is nearer its limit than the cgroup or machine is to theirs. */
static int host_sample_with(int device, gmp_device_state *out, int process_limit)
{
    gmp_host_state s;
    if (device != -1)
        return -1;
    gmp_host_state_read(&s);
    if (s.mem_total == GMP_UNKNOWN)
        return -1;
    memset(out, 0, sizeof *out);
    out->backend = GMP_BACKEND_CPU;
    out->device = -1;
    out->sampled_ns = s.sampled_ns;
    gmp_strlcpy(out->name, "host memory", sizeof out->name);
    int cgroup_bound = s.cg_max != GMP_UNKNOWN && s.cg_current != GMP_UNKNOWN &&
                       s.cg_max < s.mem_total;
    if (cgroup_bound) {
        out->total = s.cg_max;
        out->used_bytes = s.cg_current;
        out->source = "cgroup";
    } else {
        uint64_t avail = s.mem_available != GMP_UNKNOWN ? s.mem_available : 0;
        out->total = s.mem_total;
        out->used_bytes = s.mem_total > avail ? s.mem_total - avail : 0;
        out->source = "meminfo";
    }
    int address_space = process_limit && s.rlimit_as[0] != GMP_UNKNOWN &&
                        share(s.vm_size, s.rlimit_as[0]) > share(out->used_bytes, out->total);
    if (address_space) {
        out->total = s.rlimit_as[0];
        out->used_bytes = s.vm_size;
        out->source = "RLIMIT_AS";
    }
    out->free_bytes = out->total > out->used_bytes ? out->total - out->used_bytes : 0;
    out->known = GMP_DS_USED;
    if (s.vm_rss != GMP_UNKNOWN) {
        out->driver_process_bytes = s.vm_rss;
        out->known |= GMP_DS_DRIVER_PROCESS;
        if (!address_space) { /* others' share of an address space means nothing */
            out->other_processes_bytes = out->used_bytes > s.vm_rss ? out->used_bytes - s.vm_rss : 0;
            out->known |= GMP_DS_OTHERS;
        }
    }
    return 0;
}

static int host_sample(int device, gmp_device_state *out)
{
    return host_sample_with(device, out, 0);
}

int gmp_host_sample_process_limit(gmp_device_state *out)
{
    return host_sample_with(-1, out, 1);
}

static void host_capabilities(gmp_collector_caps *out)
{
    *out = (gmp_collector_caps){
        .backend = GMP_BACKEND_CPU,
        .supports_device_total = 1,
        .supports_device_free = 1,
        .supports_process_usage = 1,
        .sampling_source = "procfs",
    };
}

const gmp_collector gmp_collector_host = {
    .name = "host",
    .is_available = host_available,
    .device_count = host_device_count,
    .sample = host_sample,
    .capabilities = host_capabilities,
};
