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
 * process (a different start time in /proc/PID/stat).
 */
#include "bundle.h"
#include "dumpdir.h"
#include "gpumemprof.h"
#include "kernel_log.h"
#include "ring.h"
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
static int is_ring_name(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, "ring_", 5) && n > 9 && !strcmp(name + n - 4, ".gmr");
}

/* "ring_<pid>_..." for this pid? */
static int ring_of_pid(const char *name, int pid)
{
    char prefix[40], num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    gmp_strjoin(prefix, sizeof prefix, "ring_", num, "_", (char *)NULL);
    return !strncmp(name, prefix, strlen(prefix)) && is_ring_name(name);
}

/* The fixed part of a ring file's header, read (not mapped) and checked. */
static int read_header(int dirfd, const char *name, gmp_ring_header *h, int *fd_out)
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
    if (!ring_of_pid(name, s->pid) || read_header(dirfd, name, &h, NULL) < 0 || h.pid != s->pid)
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
static int may_be_memory_death(uint32_t flags, int sig)
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
    uint64_t ticks; /* the newest's process */
    int keep, kept; /* the signal noted in its rings / it was */
} reaped_child;

/* The child's ring: of its pid, not yet noted by a parent, the newest (an
 * older one is another process's that had the pid before). */
static int find_child_ring(int dirfd, const char *name, void *arg)
{
    reaped_child *c = arg;
    gmp_ring_header h;
    if (!ring_of_pid(name, c->pid) || read_header(dirfd, name, &h, NULL) < 0 ||
        h.pid != c->pid || __atomic_load_n(&h.death_signal, __ATOMIC_RELAXED) != 0 ||
        h.start_time_ns < c->newest_ns || strlen(name) >= sizeof c->newest)
        return 0;
    c->newest_ns = h.start_time_ns;
    gmp_strlcpy(c->newest, name, sizeof c->newest);
    return 0;
}

/* Each ring of the reaped process: the signal noted (a death that may be
 * of memory), or the ring removed. */
static int decide_child_ring(int dirfd, const char *name, void *arg)
{
    reaped_child *c = arg;
    gmp_ring_header h;
    int fd;
    if (!ring_of_pid(name, c->pid) || read_header(dirfd, name, &h, &fd) < 0)
        return 0;
    int ours = h.pid == c->pid && h.proc_start_ticks == c->ticks &&
               __atomic_load_n(&h.death_signal, __ATOMIC_RELAXED) == 0;
    int kept = 0;
    if (ours && c->keep) {
        int32_t sig = c->sig;
        kept = pwrite(fd, &sig, sizeof sig, offsetof(gmp_ring_header, death_signal)) ==
               (ssize_t)sizeof sig;
        c->kept |= kept;
    }
    close(fd);
    if (ours && !kept)
        unlinkat(dirfd, name, 0);
    return 0;
}

int gmp_rings_reaped(const char *run_dir, int pid, int status)
{
    if (pid <= 0 || !(WIFEXITED(status) || WIFSIGNALED(status)))
        return 0;
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return 0;
    reaped_child c = {.pid = pid, .sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0};
    gmp_dir_foreach(dirfd, find_child_ring, &c);
    gmp_ring_header h;
    int kept = 0;
    if (c.newest[0] && read_header(dirfd, c.newest, &h, NULL) == 0) {
        /* the same for each ring of that process: its own, and gmp-run's
         * proxy of it made before it had its own */
        c.ticks = h.proc_start_ticks;
        c.keep = c.sig && may_be_memory_death(h.flags, c.sig);
        gmp_dir_foreach(dirfd, decide_child_ring, &c);
        kept = c.kept;
    }
    close(dirfd);
    return kept;
}

/* ---- reaping ----------------------------------------------------------- */

static int process_gone(const gmp_ring_header *h);

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
    if (!is_ring_name(name) || strlen(name) >= sizeof r->dead[0].name ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return 0;
    if (read_header(dirfd, name, &h, NULL) < 0) {
        if (r->now - st.st_mtime > (time_t)r->lim->max_age_s && other_version(dirfd, name))
            r->removed += unlinkat(dirfd, name, 0) == 0;
        return 0;
    }
    if (!process_gone(&h))
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

/* ---- recovery -------------------------------------------------------------- */

static int process_gone(const gmp_ring_header *h)
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
    char state = gmp_proc_state(h->pid);
    return state == 'Z' || state == 'X';
}

/* What the events say: the last OOM the process saw, and its backend. */
typedef struct ring_story {
    gmp_failed_request failed;
    uint32_t failed_stack_id;
    gmp_backend failed_backend;
    gmp_backend gpu_backend; /* the last GPU backend seen, or CPU */
} ring_story;

static int read_story(const gmp_event *ev, void *arg)
{
    ring_story *s = arg;
    if (ev->backend != GMP_BACKEND_CPU && ev->backend < GMP_BACKEND_COUNT)
        s->gpu_backend = (gmp_backend)ev->backend;
    if (ev->type == GMP_EV_OOM) {
        s->failed = (gmp_failed_request){.present = 1,
                                         .api = (gmp_api)ev->api,
                                         .size = ev->size,
                                         .device = ev->device,
                                         .code = ev->result,
                                         .in_use = ev->in_use,
                                         .time_ns = ev->time_ns};
        s->failed_stack_id = ev->stack_id;
        s->failed_backend = ev->backend < GMP_BACKEND_COUNT ? (gmp_backend)ev->backend
                                                            : GMP_BACKEND_CPU;
    } else if (ev->type == GMP_EV_OOM_RECOVERED) {
        s->failed.present = 0;
    }
    return 0;
}

/* A string from another process's file: at most src_cap bytes, maybe no NUL. */
static void copy_bounded(char *dst, size_t cap, const char *src, size_t src_cap)
{
    size_t n = strnlen(src, src_cap);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The rings of one process (pid, start ticks) in a run directory, proxy
 * or its own: a proxy stands in only where the process has no ring of its
 * own (it made its own after gmp-run made the proxy, and died before
 * gmp-run dropped it). */
typedef struct twin_scan {
    int pid;
    uint64_t ticks;
    int own_found;      /* a ring of its own is there */
    int remove_proxies; /* remove each proxy of it */
} twin_scan;

static int twin_one(int dirfd, const char *name, void *arg)
{
    twin_scan *t = arg;
    gmp_ring_header h;
    if (!ring_of_pid(name, t->pid) || read_header(dirfd, name, &h, NULL) < 0 ||
        h.proc_start_ticks != t->ticks)
        return 0;
    if (!(h.flags & GMP_RING_FLAG_PROXY))
        t->own_found = 1;
    else if (t->remove_proxies)
        unlinkat(dirfd, name, 0);
    return 0;
}

/* twin_one over the directory through a descriptor of its own: the caller
 * is inside a walk of dirfd, whose position this must not move. */
static void scan_twins(int dirfd, twin_scan *t)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    gmp_dir_foreach(fd, twin_one, t);
    close(fd);
}

typedef struct recover_ctx {
    const char *run_dir;
    const gmp_recover_options *opt;
    gmp_recover_report_fn report;
    void *arg;
    int written;
} recover_ctx;

static int recover_one(int dirfd, const char *name, void *arg)
{
    recover_ctx *rc = arg;
    gmp_ring_header h;
    struct stat st;
    if (!is_ring_name(name) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode) || read_header(dirfd, name, &h, NULL) < 0 || !process_gone(&h))
        return 0;
    int ours = st.st_uid == geteuid();
    int words = rc->opt->last_words && rc->opt->pid > 0;
    if (words && h.pid != rc->opt->pid)
        return 0; /* a death written up from its words: that process's ring alone */
    /* no death of memory: an exec, a crash the process wrote up itself, a
     * signal its parent saw that a user or a pipeline sends */
    int noted = rc->opt->pid && rc->opt->pid == h.pid ? rc->opt->signal : h.death_signal;
    if ((h.flags & (GMP_RING_FLAG_EXEC | GMP_RING_FLAG_SELF_WRITTEN)) ||
        (!words && noted > 0 && !may_be_memory_death(h.flags, noted))) {
        unlinkat(dirfd, name, 0);
        return 0;
    }
    twin_scan twins = {h.pid, h.proc_start_ticks, 0, 0};
    if (h.flags & GMP_RING_FLAG_PROXY) {
        scan_twins(dirfd, &twins);
        if (twins.own_found) { /* its own ring tells it */
            unlinkat(dirfd, name, 0);
            return 0;
        }
    }
    char path[GMP_PATH_MAX], why[128];
    gmp_ring ring;
    if (gmp_strjoin(path, sizeof path, rc->run_dir, "/", name, (char *)NULL) < 0 ||
        gmp_ring_attach(&ring, path, why, sizeof why) < 0)
        return 0;
    const gmp_ring_header *live = ring.hdr;

    ring_story story = {.gpu_backend = GMP_BACKEND_CPU};
    gmp_ring_foreach(&ring, UINT64_MAX, read_story, &story, NULL);
    if (story.failed.present) {
        story.failed.stack_depth = gmp_ring_stack_lookup(story.failed_stack_id, story.failed.stack,
                                                         GMP_STACK_MAX, &ring);
        story.failed.stack_id = story.failed_stack_id;
    }
    int sig = rc->opt->pid && rc->opt->pid == live->pid ? rc->opt->signal
                                                          : __atomic_load_n(&live->death_signal,
                                                                            __ATOMIC_RELAXED);
    char signame[24] = "killed", evidence[512] = "";
    if (sig > 0 && sig < 65) {
        const char *abbrev = sigabbrev_np(sig);
        gmp_strjoin(signame, sizeof signame, "SIG", abbrev ? abbrev : "?", (char *)NULL);
    }
    if (rc->opt->evidence)
        gmp_strlcpy(evidence, rc->opt->evidence, sizeof evidence);
    char cgroup_file[sizeof live->cgroup_oom_file];
    copy_bounded(cgroup_file, sizeof cgroup_file, live->cgroup_oom_file,
                 sizeof live->cgroup_oom_file);
    /* The OOM killer is named only for its victim: the kernel log names the
     * pid.  The cgroup's counter says only that it killed some process of
     * the cgroup while this one ran: this one, or another whose death left
     * this one to a person's kill -9; said so, never as fact. */
    uint64_t kills_then = live->oom_kills_at_start, kills_now = gmp_cgroup_oom_kills(cgroup_file);
    int named = (rc->opt->evidence && !strncmp(rc->opt->evidence, "oom_killer:", 11)) ||
                gmp_kernel_log_names_victim(live->pid, live->proc_start_ticks);
    if (named) {
        char num[24];
        gmp_fmt_u64((uint64_t)live->pid, num);
        gmp_strjoin(evidence + strlen(evidence), sizeof evidence - strlen(evidence),
                    evidence[0] ? "; " : "", "oom_killer: the kernel log says \"Killed process ",
                    num, "\"", (char *)NULL);
    }
    if ((sig == SIGKILL || sig == 0) && kills_then != UINT64_MAX && kills_now != UINT64_MAX &&
        kills_now > kills_then) {
        char a[24], b[24];
        gmp_fmt_u64(kills_then, a);
        gmp_fmt_u64(kills_now, b);
        gmp_strjoin(evidence + strlen(evidence), sizeof evidence - strlen(evidence),
                    evidence[0] ? "; " : "",
                    named ? "oom_killer: oom_kill in " : "cgroup_oom_kill: oom_kill in ",
                    cgroup_file, " rose from ", a, " to ", b, " while it ran",
                    named ? "" : "; the cgroup's OOM killer killed a process while it ran, and "
                                 "nothing here says which",
                    (char *)NULL);
    }

    /* gmp-run's proxy of a process with no ring of its own (a grandchild
     * whose parent took no preload) whose end nobody saw: only the kernel
     * naming it as the OOM killer's victim makes it a death worth a bundle;
     * an exit is likelier, the cgroup's count alone may be another's kill */
    if ((__atomic_load_n(&live->flags, __ATOMIC_RELAXED) & GMP_RING_FLAG_PROXY) && sig <= 0 &&
        !named && !words) {
        gmp_ring_close(&ring, 0);
        unlinkat(dirfd, name, 0);
        return 0;
    }

    char dump_dir[GMP_PATH_MAX];
    if (rc->opt->dump_dir)
        gmp_strlcpy(dump_dir, rc->opt->dump_dir, sizeof dump_dir);
    else if (ours)
        copy_bounded(dump_dir, sizeof dump_dir, live->config.dump_dir,
                     sizeof live->config.dump_dir);
    else if (!getcwd(dump_dir, sizeof dump_dir) ||
             gmp_strlcat(dump_dir, "/oom_dumps", sizeof dump_dir) < 0)
        dump_dir[0] = '\0';
    /* the directory the bundle will be written in, now: the earlier
     * bundles it looks for are there too (the fallback's, when the
     * configured one is another user's); "" when none can be had */
    char configured[GMP_PATH_MAX];
    gmp_strlcpy(configured, dump_dir, sizeof configured);
    int dump_fd = dump_dir[0] == '/' ? gmp_dump_dir_open(configured, dump_dir, sizeof dump_dir)
                                     : -1;
    if (dump_fd >= 0)
        close(dump_fd);
    else
        dump_dir[0] = '\0';
    /* A failure the process wrote up itself while it ran, and went on
     * from: that bundle tells it, and this one only the death. */
    uint64_t told_ns = 0;
    if (story.failed.present && dump_dir[0] == '/' &&
        gmp_bundle_patch_ended(dump_dir, live->pid, live->start_time_ns, NULL, NULL,
                               &told_ns) > 0 &&
        story.failed.time_ns <= told_ns)
        story.failed.present = 0;

    char command[256], pidtext[24], message[1024];
    copy_bounded(command, sizeof command, live->cmdline, sizeof live->cmdline);
    for (char *c = command; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' '; /* a python -c script: one line in the message */
    if (!command[0])
        gmp_strlcpy(command, "a process", sizeof command);
    gmp_fmt_u64((uint64_t)live->pid, pidtext);
    /* "python3 grow.py (pid 123) was killed by SIGKILL; oom_killer: ..." or
     * "... was killed by SIGKILL, cause unknown (no sign of the OOM killer)." */
    gmp_strjoin(message, sizeof message, command, " (pid ", pidtext, ") ",
                sig > 0 ? "was killed by " : "died without exiting (the signal was not seen)",
                sig > 0 ? signame : "",
                evidence[0] ? "; " : story.failed.present ? " after a failed allocation."
                                                          : ", cause unknown (no sign of the "
                                                            "kernel's OOM killer).",
                evidence, (char *)NULL);
    char words_reason[96] = "";
    if (words) { /* the runtime's words are the message; its exit the end */
        gmp_strlcpy(message, rc->opt->last_words, sizeof message);
        const char *pattern = gmp_classify_oom_line(message);
        gmp_strjoin(words_reason, sizeof words_reason, "message_pattern:",
                    pattern ? pattern : "out of memory", (char *)NULL);
    }

    char context[GMP_CONTEXT_MAX];
    copy_bounded(context, sizeof context, live->config.context, sizeof live->config.context);
    gmp_dump_request req = {
        .reason = words ? words_reason : signame,
        .exception_type = named ? "oom_killer" : words ? NULL : signame,
        .exception_module = named ? "kernel" : NULL,
        .exception_message = message,
        .backend = story.failed.present ? story.failed_backend : story.gpu_backend,
        .confirmed_by = words ? "message" : "recovered",
        .failed = story.failed,
        .evidence = evidence[0] ? evidence : NULL,
        .stack_lookup = __atomic_load_n(&live->stacks_used, __ATOMIC_ACQUIRE)
                            ? gmp_ring_stack_lookup
                            : NULL,
        .stack_lookup_arg = &ring,
        .python_frame_lookup = gmp_ring_python_lookup,
        .python_frame_lookup_arg = &ring,
        /* a signal seen by its parent; unseen: it did not exit, and how it
         * ended is not known */
        .outcome = {sig > 0 ? GMP_OUTCOME_KILLED : GMP_OUTCOME_GONE, sig > 0 ? sig : 0},
    };
    if (words)
        req.outcome = (gmp_outcome){GMP_OUTCOME_EXITED, rc->opt->exit_status};
    gmp_host_state host; /* the machine as the recoverer sees it, the process's cgroup */
    gmp_host_state_read(&host);
    gmp_host_state_read_cgroup(&host, cgroup_file);
    gmp_bundle_input in = {
        .host = &host,
        .dump_dir = dump_dir,
        .ring = &ring,
        .req = &req,
        .context = context,
        .metadata_json = "{}",
        .time_ns = gmp_now_realtime_ns(),
        .pid = live->pid > 0 ? live->pid : -1,
    };
    char bundle[GMP_PATH_MAX], bname[256];
    int ok = dump_dir[0] == '/' &&
             gmp_bundle_write(&in, bundle, sizeof bundle, bname, sizeof bname) == 0;
    uint32_t max_dumps = ours ? live->config.max_dumps : rc->opt->max_dumps;
    uint64_t max_mb = ours ? live->config.max_total_mb : rc->opt->max_total_mb;
    int pid = live->pid;
    uint64_t started = live->start_time_ns;
    gmp_ring_close(&ring, 0);
    if (!ok)
        return 0;
    /* a failure it survived was written up while it ran: now it has ended */
    gmp_bundle_patch_ended(dump_dir, pid, started, &req.outcome, bname, NULL);
    unlinkat(dirfd, name, 0);
    twins.remove_proxies = 1; /* written up from its own ring: no proxy stands in */
    scan_twins(dirfd, &twins);
    static gmp_config defaults; /* the limits of a ring that holds none */
    gmp_config_defaults(&defaults);
    gmp_retention_apply(dump_dir, max_dumps ? max_dumps : defaults.max_dumps,
                        max_mb ? max_mb : defaults.max_total_mb, bname);
    rc->written++;
    if (rc->report)
        rc->report(bundle, pid, words ? "exited after out-of-memory words" : signame, rc->arg);
    return 0;
}

int gmp_rings_recover(const char *run_dir, const gmp_recover_options *opt,
                      gmp_recover_report_fn report, void *arg)
{
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return -1;
    gmp_recover_options o = opt ? *opt : (gmp_recover_options){0};
    recover_ctx rc = {run_dir, &o, report, arg, 0};
    int r = gmp_dir_foreach(dirfd, recover_one, &rc);
    close(dirfd);
    return r < 0 ? -1 : rc.written;
}
