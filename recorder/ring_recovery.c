/*
 * ring_recovery.c — the ring files of other processes (gpumemprof.h, "rings of
 * other processes"): a process killed by SIGKILL runs nothing, so its ring
 * stays in the run directory, and gmp-run or `gmp-inspect recover` write its
 * bundle from it afterwards.  A ring left behind must mean a death that may
 * be of memory, so everything else removes it:
 *   - exec: the new image removes its old image's ring at start
 *     (gmp_rings_forget_exec); an image without the preload cannot, so the
 *     ring says GMP_RING_FLAG_EXEC and readers drop it once the pid is gone;
 *   - only the parent learns how a child ended: a preloaded parent (or
 *     gmp-run) that reaps it removes its ring unless the death may be of
 *     memory (SIGKILL; a crash after a failed allocation whose bundle the
 *     process did not write itself), and notes the signal otherwise
 *     (gmp_rings_reaped);
 *   - rings nobody recovers do not pile up: a process that makes its ring
 *     reaps rings of processes long gone, and the oldest beyond a count and
 *     a size, and a day-old ring of another layout version (an older
 *     preload's, which nothing here reads) (gmp_rings_reap).
 *
 * A ring is "of a dead process" when its pid is gone, or is now another
 * process (a different start time in /proc/PID/stat).  The bundle of a ring
 * that is left is written by ring_to_bundle.c.
 */
#include "gpumemprof.h"
#include "bundle.h"
#include "ring.h"
#include "ring_recovery.h"
#include "rundir.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void gmp_run_dir_path(const gmp_config *cfg, char *out, size_t cap)
{
    gmp_run_dir_resolve(cfg ? cfg->run_dir : NULL, out, cap);
}

/* "ring_<anything>.gmr"? */
int gmp_ring_file_name(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, "ring_", 5) && n > 9 && !strcmp(name + n - 4, ".gmr");
}

/* "ring_<pid>_..." for this pid? */
int gmp_ring_file_of_pid(const char *name, int pid)
{
    char prefix[40], num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    gmp_strjoin(prefix, sizeof prefix, "ring_", num, "_", (char *)NULL);
    return !strncmp(name, prefix, strlen(prefix)) && gmp_ring_file_name(name);
}

/* The fixed part of a ring file's header, read (not mapped) and checked. */
int gmp_ring_file_header(int dirfd, const char *name, gmp_ring_header *h, int *fd_out)
{
    int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h ||
        memcmp(h->magic, GMP_RING_MAGIC, 8) != 0 || h->version != GMP_RING_VERSION) {
        close(fd);
        return -1;
    }
    if (fd_out)
        *fd_out = fd;
    else
        close(fd);
    return 0;
}

typedef struct exec_scan {
    int pid;
    uint64_t ticks;
    int removed;
} exec_scan;

static int forget_one(int dirfd, const char *name, void *arg)
{
    exec_scan *s = arg;
    gmp_ring_header h;
    if (!gmp_ring_file_of_pid(name, s->pid) || gmp_ring_file_header(dirfd, name, &h, NULL) < 0 ||
        h.pid != s->pid)
        return 0;
    if (!s->ticks) /* read only when a ring of our pid is there at all */
        s->ticks = gmp_proc_start_ticks(0);
    if (s->ticks && h.proc_start_ticks == s->ticks && unlinkat(dirfd, name, 0) == 0)
        s->removed++;
    return 0;
}

int gmp_rings_forget_exec(const char *run_dir)
{
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return 0;
    exec_scan s = {(int)getpid(), 0, 0};
    gmp_dir_foreach(dirfd, forget_one, &s);
    close(dirfd);
    return s.removed;
}

/* Whether a death by sig may be of memory, for a ring with these flags:
 * SIGKILL (the kernel OOM killer's), or a crash after a failed allocation
 * that the process could not write up itself.  Signals a user or a
 * pipeline sends (SIGPIPE, SIGINT, SIGTERM, ...), a crash with no failed
 * allocation, and an exit are not. */
int gmp_ring_death_may_be_memory(uint32_t flags, int sig)
{
    if (flags & (GMP_RING_FLAG_EXEC | GMP_RING_FLAG_SELF_WRITTEN))
        return 0;
    switch (sig) {
    case SIGKILL:
        return 1;
    case SIGSEGV: case SIGBUS: case SIGABRT: case SIGILL: case SIGFPE: case SIGSYS: case SIGTRAP:
        return (flags & GMP_RING_FLAG_FAILED) != 0;
    default:
        return 0;
    }
}

typedef struct reaped_child {
    int pid, sig; /* sig 0: it exited */
    char newest[256];
    uint64_t newest_ns;
    gmp_ring_header *newest_header; /* as read when found: the file may go
                                     * before it is read again (gmp-run
                                     * removes a proxy of a process gone) */
    uint64_t ticks; /* the newest's process */
    int keep, kept; /* the signal noted in its rings / it was */
} reaped_child;

/* The child's ring: of its pid, not yet noted by a parent, the newest (an
 * older one is another process's that had the pid before). */
static int find_child_ring(int dirfd, const char *name, void *arg)
{
    reaped_child *c = arg;
    gmp_ring_header h;
    if (!gmp_ring_file_of_pid(name, c->pid) || gmp_ring_file_header(dirfd, name, &h, NULL) < 0 ||
        h.pid != c->pid || __atomic_load_n(&h.death_signal, __ATOMIC_RELAXED) != 0 ||
        h.start_time_ns < c->newest_ns || strlen(name) >= sizeof c->newest)
        return 0;
    c->newest_ns = h.start_time_ns;
    gmp_strlcpy(c->newest, name, sizeof c->newest);
    memcpy(c->newest_header, &h, sizeof h);
    return 0;
}

uint32_t gmp_ring_death_after_ms(const gmp_ring_header *h, uint64_t now_ns)
{
    if (now_ns <= h->start_time_ns)
        return 0;
    uint64_t ms = (now_ns - h->start_time_ns) / 1000000 + 1;
    return ms > UINT32_MAX ? 0 : (uint32_t)ms;
}

uint64_t gmp_ring_death_ns(const gmp_ring_header *h, uint64_t fallback_ns)
{
    uint32_t after = __atomic_load_n(&h->death_after_ms, __ATOMIC_RELAXED);
    if (!after)
        return fallback_ns;
    uint64_t at = h->start_time_ns + (uint64_t)(after - 1) * 1000000;
    return at >= h->start_time_ns && at <= fallback_ns ? at : fallback_ns;
}

void gmp_ring_note_death_time(gmp_ring_header *h, uint64_t now_ns)
{
    uint32_t none = 0, after = gmp_ring_death_after_ms(h, now_ns);
    if (after)
        __atomic_compare_exchange_n(&h->death_after_ms, &none, after, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
}

/* Each ring of the reaped process: the signal noted (a death that may be
 * of memory), or the ring removed. */
static int decide_child_ring(int dirfd, const char *name, void *arg)
{
    reaped_child *c = arg;
    gmp_ring_header h;
    int fd;
    if (!gmp_ring_file_of_pid(name, c->pid) || gmp_ring_file_header(dirfd, name, &h, &fd) < 0)
        return 0;
    int ours = h.pid == c->pid && h.proc_start_ticks == c->ticks &&
               __atomic_load_n(&h.death_signal, __ATOMIC_RELAXED) == 0;
    int kept = 0;
    if (ours && c->keep) {
        /* when, then how: its bundle, written at the job's end or by a
         * later `recover`, dates the death, not its own writing; a time
         * gmp-run noted when it saw the process dead is kept, as earlier */
        uint32_t after = gmp_ring_death_after_ms(&h, gmp_now_realtime_ns());
        int32_t sig = c->sig;
        int dated = h.death_after_ms || !after ||
                    pwrite(fd, &after, sizeof after, offsetof(gmp_ring_header, death_after_ms)) ==
                        (ssize_t)sizeof after;
        kept = dated && pwrite(fd, &sig, sizeof sig, offsetof(gmp_ring_header, death_signal)) ==
                            (ssize_t)sizeof sig;
        c->kept |= kept;
    }
    close(fd);
    if (ours && !kept)
        unlinkat(dirfd, name, 0);
    return 0;
}

/* In a gmp-run job's directory, how a rank of a run ended, as one line of
 * GMP_RUN_ENDS_FILE ("PID RANK EXIT SIGNAL NS KEY", "-" for none): gmp-run
 * tells the run's verdict from them at its end, where a rank the launcher
 * stopped left no bundle.  A process of no run is not written. */
static void note_end(int dirfd, const char *run_dir, const gmp_ring_header *h, int status)
{
    char key[GMP_RUN_KEY_SIZE];
    if (!gmp_is_job_dir(run_dir))
        return;
    gmp_run_key(h->run_vars, sizeof h->run_vars, &h->place, key, sizeof key);
    if (!key[0])
        return;
    long rank = gmp_decimal(h->place.task, sizeof h->place.task, 7);
    if (rank < 0)
        rank = gmp_run_vars_rank(h->run_vars, sizeof h->run_vars);
    char pid[24], r[24] = "-", code[24] = "-", sig[24] = "-", ns[24], line[GMP_RUN_KEY_SIZE + 128];
    gmp_fmt_i64(h->pid, pid);
    if (rank >= 0)
        gmp_fmt_i64(rank, r);
    if (WIFEXITED(status))
        gmp_fmt_i64(WEXITSTATUS(status), code);
    else
        gmp_fmt_i64(WTERMSIG(status), sig);
    gmp_fmt_u64(gmp_ring_death_ns(h, gmp_now_realtime_ns()), ns);
    if (gmp_strjoin(line, sizeof line, pid, " ", r, " ", code, " ", sig, " ", ns, " ", key, "\n",
                    (char *)NULL) < 0)
        return;
    int fd = openat(dirfd, GMP_RUN_ENDS_FILE,
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t ignored = write(fd, line, strlen(line)); /* one write: lines never interleave */
    (void)ignored;
    close(fd);
}

void gmp_ring_note_own_end(const char *run_dir, const gmp_ring_header *h, int sig)
{
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return;
    note_end(dirfd, run_dir, h, sig & 0x7f); /* the status a parent would read */
    close(dirfd);
}

int gmp_rings_reaped(const char *run_dir, int pid, int status)
{
    if (pid <= 0 || !(WIFEXITED(status) || WIFSIGNALED(status)))
        return 0;
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return 0;
    gmp_ring_header h;
    reaped_child c = {
        .pid = pid, .sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0, .newest_header = &h};
    gmp_dir_foreach(dirfd, find_child_ring, &c);
    int kept = 0;
    if (c.newest[0]) {
        /* the same for each ring of that process: its own, and gmp-run's
         * proxy of it made before it had its own */
        c.ticks = h.proc_start_ticks;
        note_end(dirfd, run_dir, &h, status);
        c.keep = c.sig && gmp_ring_death_may_be_memory(h.flags, c.sig);
        gmp_dir_foreach(dirfd, decide_child_ring, &c);
        kept = c.kept;
    }
    close(dirfd);
    return kept;
}

/* Whether the process that wrote a ring is gone: its pid is, or is now
 * another process (another start time), or it is dead and not yet reaped. */
int gmp_ring_process_gone(const gmp_ring_header *h)
{
    if (h->pid <= 0)
        return 1;
    if (kill(h->pid, 0) < 0 && errno == ESRCH)
        return 1;
    uint64_t now = gmp_proc_start_ticks(h->pid);
    if (now != 0 && h->proc_start_ticks != 0 && now != h->proc_start_ticks)
        return 1; /* another process under that pid */
    /* dead, not yet reaped: its parent died with it (a gmp-run killed with
     * its command) and the one it went to has not waited yet */
    gmp_proc_look look;
    return gmp_proc_look_at(h->pid, &look) == 0 && gmp_proc_look_dead(&look);
}

/* ---- reaping ----------------------------------------------------------- */

#define REAP_MAX 64
typedef struct dead_ring {
    char name[64]; /* "ring_<pid>_<ns>.gmr" */
    uint64_t start_ns, bytes;
} dead_ring;

typedef struct reap_scan {
    const gmp_rings_limits *lim;
    time_t now;
    dead_ring dead[REAP_MAX]; /* kept: the newest REAP_MAX of the dead */
    int n;
    int removed;
} reap_scan;

/* Index of the oldest dead ring kept, or -1 when none is. */
static int oldest_dead(const reap_scan *r)
{
    int oldest = -1;
    for (int i = 0; i < r->n; i++)
        if (oldest < 0 || r->dead[i].start_ns < r->dead[oldest].start_ns)
            oldest = i;
    return oldest;
}

/* A ring of ours whose layout is another version's (a preload of before
 * an upgrade): nothing here reads it, and only its age says it is done. */
static int other_version(int dirfd, const char *name)
{
    char head[12];
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int other = pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
                !memcmp(head, GMP_RING_MAGIC, 8);
    uint32_t version;
    memcpy(&version, head + 8, sizeof version);
    close(fd);
    return other && version != GMP_RING_VERSION;
}

static int reap_one(int dirfd, const char *name, void *arg)
{
    reap_scan *r = arg;
    gmp_ring_header h;
    struct stat st;
    if (!gmp_ring_file_name(name) || strlen(name) >= sizeof r->dead[0].name ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return 0;
    if (gmp_ring_file_header(dirfd, name, &h, NULL) < 0) {
        if (r->now - st.st_mtime > (time_t)r->lim->max_age_s && other_version(dirfd, name))
            r->removed += unlinkat(dirfd, name, 0) == 0;
        return 0;
    }
    if (!gmp_ring_process_gone(&h))
        return 0;
    uint32_t flags = __atomic_load_n(&h.flags, __ATOMIC_RELAXED);
    if ((flags & GMP_RING_FLAG_EXEC) || r->now - st.st_mtime > (time_t)r->lim->max_age_s) {
        r->removed += unlinkat(dirfd, name, 0) == 0;
        return 0;
    }
    /* keep the newest REAP_MAX candidates; the oldest one out goes now */
    dead_ring d = {.start_ns = h.start_time_ns, .bytes = (uint64_t)st.st_blocks * 512};
    gmp_strlcpy(d.name, name, sizeof d.name);
    if (r->n == REAP_MAX) {
        int oldest = oldest_dead(r);
        if (d.start_ns < r->dead[oldest].start_ns) {
            r->removed += unlinkat(dirfd, d.name, 0) == 0;
            return 0;
        }
        r->removed += unlinkat(dirfd, r->dead[oldest].name, 0) == 0;
        r->dead[oldest] = d;
        return 0;
    }
    r->dead[r->n++] = d;
    return 0;
}

int gmp_rings_reap(const char *run_dir, const gmp_rings_limits *limits)
{
    gmp_rings_limits lim = limits ? *limits : (gmp_rings_limits){0};
    if (!lim.max_count || lim.max_count > REAP_MAX)
        lim.max_count = REAP_MAX;
    if (!lim.max_bytes)
        lim.max_bytes = 256ull << 20;
    if (!lim.max_age_s)
        lim.max_age_s = 24 * 3600;
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return 0;
    reap_scan r = {.lim = &lim, .now = time(NULL)};
    gmp_dir_foreach(dirfd, reap_one, &r);
    /* over the count or the bytes: the oldest dead first */
    for (;;) {
        uint64_t bytes = 0;
        for (int i = 0; i < r.n; i++)
            bytes += r.dead[i].bytes;
        int oldest = oldest_dead(&r);
        if (oldest < 0 || ((uint32_t)r.n <= lim.max_count && bytes <= lim.max_bytes))
            break;
        r.removed += unlinkat(dirfd, r.dead[oldest].name, 0) == 0;
        r.dead[oldest] = r.dead[--r.n];
    }
    close(dirfd);
    return r.removed;
}
