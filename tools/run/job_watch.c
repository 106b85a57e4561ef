/*
 * job_watch.c — gmp-run's eyes on its job from outside.  The preload sees
 * what a process allocates through the C library and the GPU runtimes; a
 * JVM's, V8's or Go's heap grows through mmap it never sees, and a static
 * binary takes no preload at all.  So, twenty times a second, gmp-run walks
 * its process tree (/proc/PID/task/TID/children), and for each process:
 *
 *   - finds its ring in the job directory, or, when it has none (no
 *     preload, or none of its allocations was worth one yet), makes a
 *     proxy ring for it (gmp_ring_create_proxy): its start time,
 *     command line and cgroup, so that a SIGKILL leaves a ring to recover
 *     whatever the runtime; the proxy goes once the process has its own,
 *     or 2 s after the process is gone (its reaper reads it first).
 *     A process younger than a look (50 ms) is left for the next one: a
 *     build's or a shell loop's thousands of short processes would each
 *     cost a file made, mapped, unmapped and removed.  So a process killed
 *     within 50-100 ms of its start leaves no proxy, as one killed before
 *     the first look it lived through never did;
 *   - pushes a host `sample` event into that ring (as the preload's
 *     GMP_SAMPLE_MS does: address = the memory left under its cgroup's
 *     limit, size = that limit, in_use = the process's RSS) whenever the
 *     RSS moved by 1/64 or 1 MiB, and every 10 s regardless: the curve up
 *     to a kill, without pushing a steady process's own events out.
 *
 * How a process ended is decided where it is reaped (gmp_rings_reaped) and
 * recovered (gmp_rings_recover), as for every ring; when, the first look
 * that sees it dead (a zombie, or gone) notes in its ring, where its
 * reaper has not: a launcher that polls its ranks every few seconds reaps
 * a rank the OOM killer killed seconds after its death.  One end only the
 * job's output tells: a Go program writes its out-of-memory words and exits
 * 2 past the C library; what a proxied process's life added to the job's
 * stderr (job_output.c: a file read back, a pipe passed on) is searched
 * for them (job_watch_go_last_words).
 */
#include "job_watch.h"
#include "group_signal.h"
#include "job_output.h"

#include "collector.h"
#include "ring.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_WATCHED 1024
#define PROXY_EVENTS 2048                   /* 100 s of samples at the fastest */
#define QUIET_SAMPLE_NS (10ull * 1000000000) /* a sample this often, moved or not */

/* The files of /proc/PID a look reads of a process with a ring, kept open
 * while it lives and read again from their start: here /proc/PID/stat took
 * 7.3 us opened, read and closed, 2.9 us read again, and the four files
 * 25 us and 9 (a look at such a process took 55 us).  An open file names
 * the process it was opened for, never a later one under its pid.  Kept
 * for the first KEPT_MAX such processes, within the limit on open files. */
enum { KEPT_STAT, KEPT_CGROUP, KEPT_CMDLINE, KEPT_CHILDREN, KEPT_FILES };
#define KEPT_MAX 256

typedef struct watched {
    int pid;
    uint64_t start_ticks;
    int mapped;      /* ring is attached (its own) or made (a proxy) */
    int is_proxy;
    gmp_ring ring;
    char cgroup_dir[512]; /* as last sampled; "" unknown */
    int cgroup_version;
    uint64_t cgroup_text_hash; /* of the /proc/PID/cgroup it was found from */
    uint64_t last_rss, last_sample_ns;
    long long stderr_from; /* the job's stderr file's size when first seen; -1 none */
    int alive;             /* seen this tick */
    uint64_t rss_now;      /* read as this tick saw it (0: exiting, or unknown) */
    int reaped_here;       /* gmp-run reaped it: gmp_rings_reaped judged its rings */
    int kept;              /* fd[] open (keep_files) */
    int fd[KEPT_FILES];
} watched;

static watched table[MAX_WATCHED];
static size_t count;
static size_t kept_count, kept_room; /* processes whose files are kept; how many may be */
static char job_dir[4096];
static const gmp_config *job_cfg;
static uint64_t machine_total;
void job_watch_init(const char *dir, const gmp_config *job)
{
    gmp_strlcpy(job_dir, dir, sizeof job_dir);
    job_cfg = job;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    machine_total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    /* 128 files left for gmp-run's own, and its job's output */
    struct rlimit files;
    rlim_t spare = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur > 128
                       ? (files.rlim_cur - 128) / KEPT_FILES
                       : 0;
    kept_room = spare < KEPT_MAX ? (size_t)spare : KEPT_MAX;
}

/* w's files opened to be kept, when there is room (else none is). */
static void keep_files(watched *w)
{
    if (w->kept || kept_count >= kept_room)
        return;
    char num[24], children[64];
    gmp_fmt_u64((uint64_t)w->pid, num);
    gmp_strjoin(children, sizeof children, "task/", num, "/children", (char *)NULL);
    const char *names[KEPT_FILES] = {"stat", "cgroup", "cmdline", children};
    for (int k = 0; k < KEPT_FILES; k++)
        if ((w->fd[k] = gmp_open_proc_file(w->pid, names[k])) < 0) {
            while (k-- > 0)
                close(w->fd[k]);
            return;
        }
    w->kept = 1;
    kept_count++;
}

static void let_files_go(watched *w)
{
    if (!w->kept)
        return;
    for (int k = 0; k < KEPT_FILES; k++)
        close(w->fd[k]);
    w->kept = 0;
    kept_count--;
}

/* /proc/PID/name of w's own process (its kept file `which`), or of whatever
 * process has the pid now (w NULL, or its files not kept), into buf, as
 * gmp_read_proc_file: its length (0: empty, as a childless process's
 * children), or -1 (a kept file's process gone: they are let go). */
static ssize_t read_of(watched *w, int which, int pid, const char *name, char *buf, size_t cap)
{
    if (!w || !w->kept)
        return gmp_read_proc_file(pid, name, buf, cap);
    ssize_t n;
    do
        n = pread(w->fd[which], buf, cap - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        let_files_go(w);
        return -1;
    }
    buf[n] = '\0';
    return n;
}

/* pid's entry, or NULL: the table holds one a pid at most (find makes a
 * reused pid's entry over). */
static watched *entry_of(int pid)
{
    for (size_t i = 0; i < count; i++)
        if (table[i].pid == pid)
            return &table[i];
    return NULL;
}

/* The ring files in the job directory as this look listed them, each
 * NUL-ended: every proxied process asks which is its own, and one listing
 * a look instead of one a process saves five system calls a process.  A
 * ring made since shows at the next look, as one made just after a
 * listing always did.  whole: 0 when they did not all fit (the directory
 * is then asked again). */
static struct {
    int done, whole;
    size_t len;
    char names[64 * 1024];
} listed;

static void list_job_dir(void)
{
    listed.done = 1;
    listed.whole = 1;
    listed.len = 0;
    DIR *d = opendir(job_dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name) + 1;
        if (strncmp(e->d_name, "ring_", 5))
            continue;
        if (listed.len + n > sizeof listed.names) {
            listed.whole = 0;
            break;
        }
        memcpy(listed.names + listed.len, e->d_name, n);
        listed.len += n;
    }
    closedir(d);
}

/* Whether the file name (in the job directory) is its own ring, its path
 * then in out: name begins with prefix, is not the file named mine (the
 * proxy made for it, "" none: a look at every proxied process asks this
 * again), and its header, alone, says a ring that is no proxy. */
static int is_own_ring(const char *name, const char *prefix, const char *mine, char *out,
                       size_t cap)
{
    if (strncmp(name, prefix, strlen(prefix)))
        return 0;
    gmp_strjoin(out, cap, job_dir, "/", name, (char *)NULL);
    if (!strcmp(out, mine))
        return 0;
    gmp_ring_header h;
    int fd = open(out, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int own = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
              !memcmp(h.magic, GMP_RING_MAGIC, 8) && !(h.flags & GMP_RING_FLAG_PROXY);
    close(fd);
    return own;
}

/* Its own ring's file in the job directory (not a proxy), into out: 0, or
 * -1 when it has none. */
static int own_ring_of(int pid, const char *mine, char *out, size_t cap)
{
    char prefix[40], num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    gmp_strjoin(prefix, sizeof prefix, "ring_", num, "_", (char *)NULL);
    if (!listed.done)
        list_job_dir();
    if (listed.whole) {
        for (size_t at = 0; at < listed.len; at += strlen(listed.names + at) + 1)
            if (is_own_ring(listed.names + at, prefix, mine, out, cap))
                return 0;
        return -1;
    }
    DIR *d = opendir(job_dir);
    if (!d)
        return -1;
    int found = -1;
    for (struct dirent *e; found < 0 && (e = readdir(d)) != NULL;)
        if (is_own_ring(e->d_name, prefix, mine, out, cap))
            found = 0;
    closedir(d);
    return found;
}

static void unmap(watched *w, int remove_proxy)
{
    if (w->mapped)
        gmp_ring_close(&w->ring, remove_proxy && w->is_proxy);
    w->mapped = 0;
    w->is_proxy = 0;
}

/* Whether the process started less than a look ago. */
static int younger_than_a_look(const watched *w)
{
    long hz = sysconf(_SC_CLK_TCK);
    uint64_t now = gmp_clock_ticks_now();
    return hz > 0 && now && now - w->start_ticks < (uint64_t)(JOB_WATCH_LOOK_MS * hz / 1000);
}

/* Its own ring when it has one (a proxy it had goes); else a proxy. */
static void ensure_ring(watched *w)
{
    if (!w->mapped && younger_than_a_look(w))
        return;
    if (w->mapped && !w->is_proxy) {
        if (access(w->ring.path, F_OK) == 0)
            return;
        unmap(w, 0); /* its file went (a Go program keeps its ring in memory) */
    }
    char path[4200];
    gmp_ring own;
    if (own_ring_of(w->pid, w->mapped ? w->ring.path : "", path, sizeof path) == 0 &&
        gmp_ring_attach_writable(&own, path, NULL, 0) == 0) {
        if (own.hdr->proc_start_ticks == w->start_ticks) {
            unmap(w, 1);
            w->ring = own;
            w->mapped = 1;
            return;
        }
        gmp_ring_close(&own, 0); /* an earlier process's, under the same pid */
    }
    if (!w->mapped && gmp_ring_create_proxy(&w->ring, job_dir, PROXY_EVENTS, w->pid) == 0) {
        if (w->ring.hdr->proc_start_ticks != w->start_ticks) { /* it was gone already */
            gmp_ring_close(&w->ring, 1);
            return;
        }
        w->mapped = w->is_proxy = 1;
        /* its bundle where its own ring's would go: no proxy is left
         * behind for want of a dump directory */
        gmp_ring_config_fill(&w->ring.hdr->config, job_cfg, PROXY_EVENTS);
    }
}

static void sample(watched *w)
{
    if (!w->mapped)
        return;
    /* where it is now: an exec since, a move into a cgroup of its own (the
     * directory found again only when its /proc/PID/cgroup says another) */
    char text[2048];
    int got = read_of(w, KEPT_CGROUP, w->pid, "cgroup", text, sizeof text) > 0;
    uint64_t hash = got ? gmp_text_hash(GMP_TEXT_HASH_SEED, text) : 0;
    if (!got || hash != w->cgroup_text_hash || w->cgroup_version < 0) {
        w->cgroup_version =
            got ? gmp_cgroup_memory_dir_in(w->pid, text, w->cgroup_dir, sizeof w->cgroup_dir)
                : -1;
        w->cgroup_text_hash = hash;
    }
    if (w->cgroup_version < 0)
        w->cgroup_dir[0] = '\0';
    uint64_t rss = w->rss_now, now = gmp_now_realtime_ns();
    if (!rss)
        return; /* exiting: no reading of it */
    char oom_file[sizeof w->ring.hdr->cgroup_oom_file];
    if (w->cgroup_dir[0] && gmp_cgroup_oom_file_in(w->cgroup_dir, w->cgroup_version, oom_file,
                                                   sizeof oom_file) == 0)
        gmp_ring_cgroup_moved(&w->ring, oom_file);
    if (w->is_proxy) {
        char cmdline[1024];
        ssize_t n = read_of(w, KEPT_CMDLINE, w->pid, "cmdline", cmdline, sizeof cmdline);
        gmp_ring_proxy_refresh(&w->ring, cmdline, n);
    }
    uint64_t moved = rss > w->last_rss ? rss - w->last_rss : w->last_rss - rss;
    uint64_t step = w->last_rss / 64 > (1u << 20) ? w->last_rss / 64 : (1u << 20);
    if (w->last_sample_ns && moved < step && now - w->last_sample_ns < QUIET_SAMPLE_NS)
        return;
    uint64_t limit = 0, used = 0;
    if (w->cgroup_dir[0]) {
        char buf[64];
        limit = gmp_file_value(w->cgroup_dir, w->cgroup_version == 2 ? "memory.max"
                                                                      : "memory.limit_in_bytes",
                               buf, sizeof buf);
        used = gmp_file_value(w->cgroup_dir, w->cgroup_version == 2 ? "memory.current"
                                                                     : "memory.usage_in_bytes",
                              buf, sizeof buf);
        used = used == GMP_UNKNOWN ? 0 : used;
    }
    if (!limit || limit == GMP_UNKNOWN || (machine_total && limit > machine_total))
        limit = machine_total; /* no limit of its own: the machine's */
    gmp_event ev = {.time_ns = now,
                    .type = GMP_EV_SAMPLE,
                    .backend = GMP_BACKEND_CPU,
                    .device = -1,
                    .api = GMP_API_UNKNOWN,
                    .address = limit > used ? limit - used : 0,
                    .size = limit,
                    .in_use = rss,
                    .thread_id = (uint32_t)w->pid};
    gmp_ring_push(&w->ring, &ev);
    w->last_rss = rss;
    w->last_sample_ns = now;
}

/* The entry of the process pid names now (started at start_ticks), given
 * pid's entry as entry_of found it (NULL: none): that one, made over when
 * the pid was reused, else a new one (NULL when the table is full). */
static watched *find(watched *w, int pid, uint64_t start_ticks)
{
    if (w) {
        if (w->start_ticks == start_ticks)
            return w;
        unmap(w, 0); /* the pid reused: another process */
        let_files_go(w);
        memset(w, 0, sizeof *w);
        w->pid = pid;
        w->start_ticks = start_ticks;
        return w;
    }
    if (count == MAX_WATCHED)
        return NULL;
    w = &table[count++];
    memset(w, 0, sizeof *w);
    w->pid = pid;
    w->start_ticks = start_ticks;
    w->stderr_from = job_output_offset();
    return w;
}

static void visit_children(int pid, long threads, watched *w, int depth);

/* One child: a dead one kept for its reaper, a live one looked at, then
 * its own children. */
static void visit_child(int child, int depth)
{
    if (child == job_output_relay_pid() || child == group_signal_canary_pid())
        return; /* gmp-run's own, not the job's */
    gmp_proc_look look;
    char stat[1024];
    watched *known = entry_of(child);
    int kept = known && known->kept; /* a kept file that fails: the pid read afresh */
    if (read_of(known, KEPT_STAT, child, "stat", stat, sizeof stat) > 0 ||
        (kept && gmp_read_proc_file(child, "stat", stat, sizeof stat) > 0))
        gmp_proc_look_in(stat, &look);
    else
        memset(&look, 0, sizeof look);
    if (gmp_proc_look_dead(&look)) { /* dead, not reaped: kept for its reaper */
        if (known) {
            known->alive = 1;
            if (known->mapped) /* dated now, not when a launcher that polls reaps it */
                gmp_ring_note_death_time(known->ring.hdr, gmp_now_realtime_ns());
        }
        return;
    }
    watched *w = look.start_ticks ? find(known, child, look.start_ticks) : NULL;
    if (w) {
        w->alive = 1;
        w->rss_now = look.resident;
        ensure_ring(w);
        if (w->mapped)
            keep_files(w);
        sample(w);
    }
    if (depth < 64)
        visit_children(child, look.threads, w, depth + 1);
}

/* The children one thread of pid made (w: pid's entry, whose kept file of
 * children is its first thread's, or NULL). */
static void visit_children_of_thread(int pid, const char *tid, watched *w, int depth)
{
    char file[160], buf[4096];
    gmp_strjoin(file, sizeof file, "task/", tid, "/children", (char *)NULL);
    if (read_of(w, KEPT_CHILDREN, pid, file, buf, sizeof buf) <= 0)
        return;
    for (char *p = buf; *p;) {
        int child = (int)strtol(p, &p, 10);
        if (child <= 0)
            break;
        visit_child(child, depth);
        while (*p == ' ')
            p++;
    }
}

/* Each child of pid (every thread's), then theirs.  threads: as its stat
 * said (0 unknown); a process of one thread is asked only of its own, not
 * its task directory listed (five system calls fewer a process a look; a
 * process whose leader ended before its threads counts them, and is). */
static void visit_children(int pid, long threads, watched *w, int depth)
{
    char num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    if (threads == 1) {
        visit_children_of_thread(pid, num, w, depth);
        return;
    }
    char path[96];
    gmp_strjoin(path, sizeof path, "/proc/", num, "/task", (char *)NULL);
    DIR *tasks = opendir(path);
    if (!tasks)
        return;
    for (struct dirent *t; (t = readdir(tasks)) != NULL;)
        if (t->d_name[0] >= '0' && t->d_name[0] <= '9')
            visit_children_of_thread(pid, t->d_name, NULL, depth);
    closedir(tasks);
}

/* A proxy whose process is gone, another's to reap (perhaps before the
 * proxy was made), is kept only if its cgroup's OOM killer killed while it
 * lived: 1 when it was not, and the proxy goes. */
static int proxy_without_a_kill(const watched *w)
{
    if (!w->mapped || !w->is_proxy)
        return 0;
    char file[sizeof w->ring.hdr->cgroup_oom_file];
    memcpy(file, w->ring.hdr->cgroup_oom_file, sizeof file);
    file[sizeof file - 1] = '\0';
    uint64_t then = w->ring.hdr->oom_kills_at_start, now = gmp_cgroup_oom_kills(file);
    return then != UINT64_MAX && now == then;
}

/* Proxies of processes gone, to be removed a while later.  A process is
 * gone from /proc once its parent has reaped it, and a preloaded parent
 * (torchrun, a launcher in Python) reads its proxy right after: how it
 * ended, noted for the run's verdict (gmp_rings_reaped).  Removed at once,
 * the proxy went between the parent's wait and its look, on a busy machine,
 * and a rank the launcher stopped "left no bundle".  So the proxy waits
 * GONE_GRACE_NS; where the reaper got there first, the file is gone already. */
#define GONE_GRACE_NS (2ull * 1000000000)
#define GONE_MAX 64
static struct {
    char path[GMP_PATH_MAX];
    uint64_t due_ns;
} gone[GONE_MAX];
static size_t gone_count;

/* The proxies whose time has come (all of them: now_ns UINT64_MAX). */
static void remove_gone_proxies(uint64_t now_ns)
{
    for (size_t i = 0; i < gone_count;) {
        if (gone[i].due_ns > now_ns) {
            i++;
            continue;
        }
        unlink(gone[i].path);
        gone[i] = gone[--gone_count];
    }
}

/* w's process was not seen this look: gone, its own ring the reaper's to
 * judge, a proxy removed (after GONE_GRACE_NS) as proxy_without_a_kill
 * says.  Its death is dated now where neither its reaper (one without the
 * preload) nor a look that saw it dead did, once its pid is another's or
 * none: a look that missed a live process dates nothing. */
static void forget_gone(watched *w, uint64_t now_ns)
{
    if (w->mapped && gmp_proc_start_ticks(w->pid) != w->start_ticks)
        gmp_ring_note_death_time(w->ring.hdr, gmp_now_realtime_ns());
    int remove = proxy_without_a_kill(w);
    if (remove && gone_count == GONE_MAX) { /* the oldest goes early */
        size_t oldest = 0;
        for (size_t i = 1; i < gone_count; i++)
            if (gone[i].due_ns < gone[oldest].due_ns)
                oldest = i;
        unlink(gone[oldest].path);
        gone[oldest] = gone[--gone_count];
    }
    if (remove) {
        gmp_strlcpy(gone[gone_count].path, w->ring.path, sizeof gone[gone_count].path);
        gone[gone_count++].due_ns = now_ns + GONE_GRACE_NS;
    }
    unmap(w, 0);
    let_files_go(w);
}

void job_watch_tick(long long now_ns)
{
    listed.done = 0;
    for (size_t i = 0; i < count; i++)
        table[i].alive = 0;
    visit_children((int)getpid(), 1, NULL, 0); /* gmp-run has one thread */
    for (size_t i = 0; i < count;) {
        if (table[i].alive) {
            i++;
            continue;
        }
        forget_gone(&table[i], (uint64_t)now_ns);
        table[i] = table[--count];
    }
    remove_gone_proxies((uint64_t)now_ns);
}

/* Go's own last words, as its runtime writes them (raw system calls, past
 * the preload): the "cannot allocate" line, which states the size, when it
 * is there, else the fatal error's. */
static const char *const go_oom_lines[] = {"runtime: out of memory: cannot allocate ",
                                           "fatal error: runtime: out of memory"};

int job_watch_go_last_words(int pid, char *out, size_t cap)
{
    watched *w = entry_of(pid);
    if (!w || !w->is_proxy || w->stderr_from < 0)
        return -1;
    static char text[64 * 1024 + 1];
    if (!job_output_since(w->stderr_from, text, sizeof text))
        return -1;
    for (size_t k = 0; k < sizeof go_oom_lines / sizeof *go_oom_lines; k++) {
        const char *line = NULL;
        for (const char *p = text; (p = strstr(p, go_oom_lines[k])) != NULL; p++)
            if (p == text || p[-1] == '\n')
                line = p; /* the last one */
        if (line) {
            snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
            return 0;
        }
    }
    return -1;
}

void job_watch_reaped(int pid)
{
    watched *w = entry_of(pid);
    if (w)
        w->reaped_here = 1;
}

/* The job is over.  A process another reaped since the last look (a shell's
 * last command) is judged as the look would have judged it: a proxy kept
 * for it would be recovered next, and its death asked of the whole kernel
 * log (the log read since gmp-run began cannot answer for a process that
 * started in the same clock tick), 5 ms after every `gmp-run sh -c 'sleep
 * 1'` here.  One gmp-run reaped keeps what the reaper decided; one still
 * running (a daemon) keeps its proxy, for a death later. */
void job_watch_end(void)
{
    remove_gone_proxies(UINT64_MAX); /* the job's reapers are done */
    for (size_t i = 0; i < count; i++) {
        watched *w = &table[i];
        unmap(w, !w->reaped_here && proxy_without_a_kill(w) &&
                     gmp_ring_process_gone(w->ring.hdr));
        let_files_go(w);
    }
    count = 0;
}
