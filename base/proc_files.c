/*
 * proc_files.c — what /proc and the cgroup files say of a process: its
 * memory cgroup and that cgroup's OOM-kill count, its state, parent, start
 * and threads from /proc/PID/stat, and the reads under them, which never
 * block on a FIFO or a device named where a file was expected.  Like
 * util.c (whose header declares these), nothing here allocates or takes a
 * lock: the bundle writer and the watchdog call it where malloc has failed.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gmp_cgroup_memory_dir(char *out, size_t cap)
{
    return gmp_cgroup_memory_dir_of(0, out, cap);
}

static int proc_exiting(int pid);

int gmp_cgroup_memory_dir_of(int pid, char *out, size_t cap)
{
    char buf[2048];
    if (gmp_read_proc_file(pid, "cgroup", buf, sizeof buf) <= 0)
        return -1;
    return gmp_cgroup_memory_dir_in(pid, buf, out, cap);
}

int gmp_cgroup_memory_dir_in(int pid, char *buf, char *out, size_t cap)
{
    /* "0::/path" (v2) and "N:memory:/path" (v1), one a line */
    for (int version = 2; version >= 1; version--) {
        const char *tag = version == 2 ? "0::" : ":memory:";
        for (char *line = buf; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            char *hit = strstr(line, tag);
            if (hit && hit < line + len && (version == 1 || hit == line)) {
                char path[1024], probe[1024 + 64];
                size_t plen = len - (size_t)(hit + strlen(tag) - line);
                if (plen >= sizeof path)
                    break;
                memcpy(path, hit + strlen(tag), plen);
                path[plen] = '\0';
                if (!strcmp(path, "/")) {
                    /* v1 names the root for any process that has begun
                     * to exit: where it lived is no longer said */
                    if (version == 1 && pid && proc_exiting(pid))
                        return -1;
                    path[0] = '\0';
                }
                /* v2 only where the memory controller is on (memory.current) */
                if (gmp_strjoin(out, cap, version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory",
                                path, (char *)NULL) == 0 &&
                    gmp_strjoin(probe, sizeof probe, out,
                                version == 2 ? "/memory.current" : "/memory.usage_in_bytes",
                                (char *)NULL) == 0 &&
                    access(probe, R_OK) == 0)
                    return version;
                break;
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    return -1;
}

int gmp_cgroup_oom_file(char *out, size_t cap)
{
    return gmp_cgroup_oom_file_of(0, out, cap);
}

int gmp_cgroup_oom_file_in(const char *dir, int version, char *out, size_t cap)
{
    return gmp_strjoin(out, cap, dir, version == 2 ? "/memory.events" : "/memory.oom_control",
                       (char *)NULL);
}

int gmp_cgroup_oom_file_of(int pid, char *out, size_t cap)
{
    char dir[4096];
    int version = gmp_cgroup_memory_dir_of(pid, dir, sizeof dir);
    return version < 0 ? -1 : gmp_cgroup_oom_file_in(dir, version, out, cap);
}

static ssize_t read_regular(const char *path, char *buf, size_t cap, int extra_flags,
                            int known_regular);

/* A cgroup's OOM file as we name one: under /sys/fs/cgroup, no ".." in it.
 * The path may come from a ring another process wrote. */
static int is_cgroup_oom_file(const char *file)
{
    size_t n = strlen(file);
    return !strncmp(file, "/sys/fs/cgroup/", 15) && !strstr(file, "/../") &&
           ((n > 14 && !strcmp(file + n - 14, "/memory.events")) ||
            (n > 19 && !strcmp(file + n - 19, "/memory.oom_control")));
}

uint64_t gmp_cgroup_oom_kills(const char *file)
{
    char buf[1024];
    if (!is_cgroup_oom_file(file) || read_regular(file, buf, sizeof buf, O_NOFOLLOW, 0) <= 0)
        return UINT64_MAX;
    for (const char *p = buf; (p = strstr(p, "oom_kill ")); p++) {
        if (p != buf && p[-1] != '\n')
            continue; /* not oom_kill_disable's line */
        uint64_t v = 0;
        for (p += 9; *p >= '0' && *p <= '9'; p++)
            v = v * 10 + (uint64_t)(*p - '0');
        return v;
    }
    return UINT64_MAX;
}

/* Field `field` (3: state, 4: ppid, 22: starttime) of a /proc/PID/stat
 * text, or NULL.  Fields count from after the command's name, which may
 * hold spaces and parentheses. */
static const char *stat_text_field(const char *text, int field)
{
    const char *p = strrchr(text, ')');
    if (!p)
        return NULL;
    p++;
    for (int f = 3; f < field; f++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    while (*p == ' ')
        p++;
    return *p ? p : NULL;
}

/* The same of /proc/PID/stat (pid 0: this process), read into buf; NULL
 * when it cannot be read. */
static const char *proc_stat_field(int pid, int field, char *buf, size_t cap)
{
    return gmp_read_proc_file(pid, "stat", buf, cap) > 0 ? stat_text_field(buf, field) : NULL;
}

/* The field n fields on from the one p is at (NULL stays NULL). */
static const char *proc_stat_skip(const char *p, int n)
{
    for (; p && *p && n > 0; n--) {
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
    return p;
}

/* The decimal number p is at; 0 for none. */
static uint64_t proc_stat_decimal(const char *p)
{
    uint64_t v = 0;
    for (; p && *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

static uint64_t proc_stat_number(int pid, int field)
{
    char buf[1024];
    return proc_stat_decimal(proc_stat_field(pid, field, buf, sizeof buf));
}

char gmp_proc_state(int pid)
{
    char buf[1024];
    const char *p = proc_stat_field(pid, 3, buf, sizeof buf);
    return p ? *p : 0;
}

int gmp_proc_parent(int pid)
{
    return (int)proc_stat_number(pid, 4);
}

/* Field 9 holds the kernel's task flags; PF_EXITING (0x4) is set first
 * thing in the task's exit, before it lets its memory go. */
#define GMP_PF_EXITING 0x4u

static int proc_exiting(int pid)
{
    return (proc_stat_number(pid, 9) & GMP_PF_EXITING) != 0;
}

uint64_t gmp_proc_start_ticks(int pid)
{
    return proc_stat_number(pid, 22);
}

uint64_t gmp_clock_ticks_now(void)
{
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec t;
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &t) != 0)
        return 0;
    return (uint64_t)t.tv_sec * (uint64_t)hz + (uint64_t)t.tv_nsec / (1000000000u / (uint64_t)hz);
}

int gmp_proc_look_at(int pid, gmp_proc_look *out)
{
    char buf[1024];
    if (gmp_read_proc_file(pid, "stat", buf, sizeof buf) <= 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return gmp_proc_look_in(buf, out);
}

int gmp_proc_look_in(const char *stat_text, gmp_proc_look *out)
{
    const char *p = stat_text_field(stat_text, 3);
    memset(out, 0, sizeof *out);
    if (!p)
        return -1;
    out->state = *p;
    const char *flags = proc_stat_skip(p, 9 - 3), *threads = proc_stat_skip(flags, 20 - 9),
               *start = proc_stat_skip(threads, 22 - 20);
    out->threads = (long)proc_stat_decimal(threads);
    out->start_ticks = proc_stat_decimal(start);
    if (!(proc_stat_decimal(flags) & GMP_PF_EXITING))
        out->resident = proc_stat_decimal(proc_stat_skip(start, 24 - 22)) *
                        (uint64_t)sysconf(_SC_PAGESIZE);
    return 0;
}

/* Never a FIFO or a device: one of those named where a file was expected
 * would block the reader for ever or read without end (known_regular: a
 * file procfs makes, not looked at). */
static ssize_t read_regular(const char *path, char *buf, size_t cap, int extra_flags,
                            int known_regular)
{
    if (!cap)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
    if (fd < 0)
        return -1;
    struct stat st;
    if (!known_regular && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

ssize_t gmp_read_file(const char *path, char *buf, size_t cap)
{
    return read_regular(path, buf, cap, 0, 0);
}

int gmp_proc_path(char *out, size_t cap, int pid, const char *name)
{
    char num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    return gmp_strjoin(out, cap, "/proc/", pid ? num : "self", "/", name, (char *)NULL);
}

int gmp_open_proc_file(int pid, const char *name)
{
    char path[96];
    if (gmp_proc_path(path, sizeof path, pid, name) < 0)
        return -1;
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}

ssize_t gmp_read_proc_file(int pid, const char *name, char *buf, size_t cap)
{
    char path[96];
    if (gmp_proc_path(path, sizeof path, pid, name) < 0)
        return -1;
    return read_regular(path, buf, cap, 0, 1);
}
