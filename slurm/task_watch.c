/*
 * task_watch.c — root's own reading of how each task of a step ended, in
 * slurmstepd: the verdict that needs root is made here, not in the user's
 * recover.
 *
 * At post-fork (the task placed in its cgroups, not yet exec'd) the task's
 * cgroups are noted from /proc/PID/cgroup: where its recover will run, and
 * the memory cgroup whose oom_kill count Slurm's task/cgroup reads too.
 * The kernel log is opened once per slurmstepd and followed from its end,
 * so only records written while the step's tasks ran are read, never the
 * log's history (dmesg_restrict hides that from users for a reason).  At a
 * task's end its verdict is: the log's "Killed process PID" for the task's
 * own pid; the OOM killer's "oom-kill:...,task_memcg=CG,...,pid=N" for the
 * other processes that died in the task's memory cgroup (its children: a
 * batch script's python, a worker); and the cgroup's count from fork to
 * end.  Every answer is about the task's own processes: a ring that names
 * another pid gets nothing from root.
 */
#include "spank_gmp.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VICTIMS_KEPT 256
#define LOG_READS_MAX 50000   /* per look: a log flooded faster than read still ends */
#define LOG_LOOK_MS 200       /* and so does a look at a slow one */

typedef struct victim {
    pid_t pid;
    uint64_t us;                 /* when the kernel logged it, microseconds since boot */
    char memcg[CGROUP_PATH_MAX]; /* its memory cgroup; "" when the record did not say */
} victim;

static struct {
    int log_fd; /* the kernel log, read up to where it was last; -1 none */
    int log_opened;
    task_note **notes;
    int n_notes, cap_notes;
    victim victims[VICTIMS_KEPT];
    int n_victims;
} watch = {.log_fd = -1};

/* ---- cgroup hierarchies ----------------------------------------------- */

#define CGROUP_MOUNTS_MAX 32

/* The cgroup hierarchies' mounts, read from /proc/self/mountinfo once per
 * slurmstepd (not once per hierarchy of every task): cgroup2's, and each
 * v1 one with its options ("rw,cpu,cpuacct", "rw,xattr,name=systemd"). */
static struct cgroup_mount {
    int v2;
    char opts[256];
    char dir[512];
} mounts[CGROUP_MOUNTS_MAX];
static int n_mounts = -1; /* -1: not read yet */

static void read_mounts(void)
{
    n_mounts = 0;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    while (f && n_mounts < CGROUP_MOUNTS_MAX && fgets(line, sizeof line, f)) {
        /* id parent maj:min root mountpoint options [tags] - fstype source superoptions */
        char mountpoint[1024], fstype[32], superopts[1024], *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %1023s", mountpoint) != 1 ||
            sscanf(dash + 3, "%31s %*s %1023s", fstype, superopts) != 2 ||
            (strcmp(fstype, "cgroup") && strcmp(fstype, "cgroup2")) ||
            strchr(mountpoint, '\\')) /* mountinfo escapes blanks as \040: not ours */
            continue;
        struct cgroup_mount *m = &mounts[n_mounts];
        m->v2 = !strcmp(fstype, "cgroup2");
        if ((size_t)snprintf(m->opts, sizeof m->opts, ",%s,", superopts) < sizeof m->opts &&
            (size_t)snprintf(m->dir, sizeof m->dir, "%s", mountpoint) < sizeof m->dir)
            n_mounts++;
    }
    if (f)
        fclose(f);
}

/* Where the hierarchy of a /proc/PID/cgroup line is mounted: "0::" is
 * cgroup2's; "memory" or "cpu,cpuacct" or "name=systemd" the v1 mount whose
 * options hold each of them.  0, or -1. */
static int hierarchy_mount(const char *controllers, char *out, size_t cap)
{
    if (n_mounts < 0)
        read_mounts();
    for (int i = 0; i < n_mounts; i++) {
        const struct cgroup_mount *m = &mounts[i];
        if (m->v2 != !controllers[0])
            continue;
        char want[256], *save = NULL;
        snprintf(want, sizeof want, "%s", controllers);
        int all = 1; /* strtok_r: slurmstepd has other threads */
        for (char *c = strtok_r(want, ",", &save); c && all; c = strtok_r(NULL, ",", &save)) {
            char item[270];
            snprintf(item, sizeof item, ",%s,", c);
            all = strstr(m->opts, item) != NULL;
        }
        if (all && (size_t)snprintf(out, cap, "%s", m->dir) < cap)
            return 0;
    }
    return -1;
}

/* "oom_kill N" in a memory.oom_control or memory.events; UINT64_MAX none. */
static uint64_t oom_kills(const char *file)
{
    if (!file[0])
        return UINT64_MAX;
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return UINT64_MAX;
    char text[1024];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return UINT64_MAX;
    text[n] = '\0';
    for (char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        unsigned long long v;
        if (sscanf(line, "oom_kill %llu", &v) == 1)
            return v;
    }
    return UINT64_MAX;
}

/* The task's cgroups, from /proc/PID/cgroup. */
static void note_cgroups(task_note *t)
{
    char path[64], line[2048];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)t->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char v2_path[CGROUP_PATH_MAX] = "", v2_mount[1024] = "";
    int memory_v1 = 0;
    while (fgets(line, sizeof line, f) && t->n_procs < TASK_CGROUPS_MAX) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/' || strstr(c2 + 1, "/../"))
            continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        char mount[1024];
        if (hierarchy_mount(controllers, mount, sizeof mount) < 0)
            continue;
        if ((size_t)snprintf(t->procs[t->n_procs], CGROUP_PATH_MAX, "%s%s/cgroup.procs", mount,
                             !strcmp(cg, "/") ? "" : cg) >= CGROUP_PATH_MAX)
            continue;
        t->n_procs++;
        char with_commas[300];
        snprintf(with_commas, sizeof with_commas, ",%s,", controllers);
        if (strstr(with_commas, ",memory,")) {
            memory_v1 = 1;
            snprintf(t->memcg, sizeof t->memcg, "%s", cg);
            if ((size_t)snprintf(t->oom_counter, sizeof t->oom_counter,
                                 "%s%s/memory.oom_control", mount,
                                 !strcmp(cg, "/") ? "" : cg) >= sizeof t->oom_counter)
                t->oom_counter[0] = '\0';
        } else if (!controllers[0]) {
            snprintf(v2_path, sizeof v2_path, "%s", cg);
            snprintf(v2_mount, sizeof v2_mount, "%s", mount);
        }
    }
    fclose(f);
    if (!memory_v1 && v2_path[0]) { /* cgroup v2 (or the hybrid's, without memory) */
        char events[CGROUP_PATH_MAX];
        if ((size_t)snprintf(events, sizeof events, "%s%s/memory.events", v2_mount,
                             !strcmp(v2_path, "/") ? "" : v2_path) < sizeof events &&
            access(events, R_OK) == 0) {
            snprintf(t->memcg, sizeof t->memcg, "%s", v2_path);
            snprintf(t->oom_counter, sizeof t->oom_counter, "%s", events);
        }
    }
    t->kills_at_start = oom_kills(t->oom_counter);
}

/* ---- the kernel log --------------------------------------------------- */

/* /dev/kmsg, followed from its end: records of the step's time only.  Kept
 * open close-on-exec in slurmstepd (root's process) for the step's life;
 * closed in every child the plugin starts. */
static void log_follow(void)
{
    if (watch.log_opened)
        return;
    watch.log_opened = 1;
    watch.log_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (watch.log_fd >= 0 && lseek(watch.log_fd, 0, SEEK_END) < 0) {
        close(watch.log_fd);
        watch.log_fd = -1;
    }
}

static void note_victim(pid_t pid, uint64_t us, const char *memcg, size_t memcg_len)
{
    for (int i = 0; i < watch.n_victims; i++)
        if (watch.victims[i].pid == pid && watch.victims[i].us + 1000000 >= us) {
            if (memcg_len && !watch.victims[i].memcg[0] && memcg_len < CGROUP_PATH_MAX) {
                memcpy(watch.victims[i].memcg, memcg, memcg_len);
                watch.victims[i].memcg[memcg_len] = '\0';
            }
            return; /* the same kill, in its second record */
        }
    if (watch.n_victims == VICTIMS_KEPT)
        return;
    victim *v = &watch.victims[watch.n_victims++];
    v->pid = pid;
    v->us = us;
    v->memcg[0] = '\0';
    if (memcg_len && memcg_len < CGROUP_PATH_MAX) {
        memcpy(v->memcg, memcg, memcg_len);
        v->memcg[memcg_len] = '\0';
    }
}

/* One record: "PRI,SEQ,USEC,FLAGS;message".  The OOM killer writes two per
 * victim: "oom-kill:constraint=...,task_memcg=CG,task=NAME,pid=N,uid=U" and
 * "... Killed process N (NAME) total-vm:...". */
static void read_record(const char *rec)
{
    const char *at = strchr(rec, ',');
    at = at ? strchr(at + 1, ',') : NULL;
    const char *msg = strchr(rec, ';');
    if (!at || !msg)
        return;
    uint64_t us = strtoull(at + 1, NULL, 10);
    msg++;
    const char *p;
    if (!strncmp(msg, "oom-kill:", 9)) {
        const char *cg = strstr(msg, ",task_memcg=");
        p = strstr(msg, ",pid=");
        if (!p)
            return;
        long pid = strtol(p + 5, NULL, 10);
        size_t cg_len = cg ? strcspn(cg + 12, ",\n") : 0;
        if (pid > 0)
            note_victim((pid_t)pid, us, cg ? cg + 12 : "", cg_len);
    } else if ((p = strstr(msg, "Killed process ")) != NULL) {
        char *end;
        long pid = strtol(p + 15, &end, 10);
        if (pid > 0 && *end == ' ')
            note_victim((pid_t)pid, us, "", 0);
    }
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The records written since the last look. */
static void log_read(void)
{
    if (watch.log_fd < 0)
        return;
    char rec[2048];
    long long until = now_ms() + LOG_LOOK_MS;
    for (int i = 0; i < LOG_READS_MAX; i++) {
        ssize_t n = read(watch.log_fd, rec, sizeof rec - 1);
        if (n < 0 && errno == EPIPE)
            continue; /* records overwritten while we read */
        if (n <= 0)
            return; /* EAGAIN: nothing newer */
        rec[n] = '\0';
        read_record(rec);
        if (i % 1000 == 999 && now_ms() > until)
            return;
    }
}

/* ---- the tasks -------------------------------------------------------- */

task_note *task_watch_note(pid_t pid)
{
    log_follow();
    if (watch.n_notes == watch.cap_notes) {
        int cap = watch.cap_notes ? 2 * watch.cap_notes : 16;
        task_note **grown = realloc(watch.notes, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        watch.notes = grown;
        watch.cap_notes = cap;
    }
    task_note *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pid = pid;
    t->kills_at_start = UINT64_MAX;
    note_cgroups(t);
    watch.notes[watch.n_notes++] = t;
    return t;
}

task_note *task_watch_find(pid_t pid)
{
    for (int i = watch.n_notes - 1; i >= 0; i--)
        if (watch.notes[i]->pid == pid)
            return watch.notes[i];
    return NULL;
}

int task_watch_all_exited(uint32_t local_tasks)
{
    int exited = 0;
    for (int i = 0; i < watch.n_notes; i++)
        exited += watch.notes[i]->exited;
    return exited >= (int)local_tasks;
}

/* cg is under (or is) the task's memory cgroup. */
static int within(const char *cg, const char *task_cg)
{
    size_t n = strlen(task_cg);
    return n && !strncmp(cg, task_cg, n) && (cg[n] == '\0' || cg[n] == '/');
}

void task_watch_verdict(const task_note *t, int status, task_verdict *v)
{
    memset(v, 0, sizeof *v);
    log_read();
    int named = 0;
    for (int i = 0; i < watch.n_victims; i++) {
        const victim *k = &watch.victims[i];
        if (k->pid == t->pid) {
            named = 1; /* read from the task's fork on: this task, not an earlier pid */
        } else if (k->memcg[0] && within(k->memcg, t->memcg)) {
            v->memory_seen = 1;
            if (v->n_victims < VICTIMS_PASSED_MAX)
                snprintf(v->victims[v->n_victims++], sizeof v->victims[0], "%d@%llu",
                         (int)k->pid, (unsigned long long)k->us);
        }
    }
    uint64_t now = oom_kills(t->oom_counter);
    int rose = t->kills_at_start != UINT64_MAX && now != UINT64_MAX && now > t->kills_at_start;
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    v->memory_seen |= named || rose;
    /* the words recover itself would use, from what only root may read */
    size_t n = 0;
    if (named)
        n = (size_t)snprintf(v->evidence, sizeof v->evidence,
                             "oom_killer: the kernel log says \"Killed process %d\"", (int)t->pid);
    /* the log names the victims in its cgroup, and not this task: the kill
     * the cgroup counted was another's, this one's was not the OOM killer's */
    int other = 0;
    for (int i = 0; i < watch.n_victims && !named && !other; i++)
        if (watch.victims[i].memcg[0] && within(watch.victims[i].memcg, t->memcg))
            other = (int)watch.victims[i].pid;
    char others[96] = "";
    if (other)
        snprintf(others, sizeof others,
                 "; the kernel log names the OOM killer's victim since it started, pid %d, not "
                 "this one",
                 other);
    if (rose && killed && n < sizeof v->evidence)
        snprintf(v->evidence + n, sizeof v->evidence - n,
                 "%s%soom_kill in %s rose from %llu to %llu while it ran%s", n ? "; " : "",
                 named ? "oom_killer: " : other ? "kernel_log: " : "cgroup_oom_kill: ",
                 t->oom_counter, (unsigned long long)t->kills_at_start, (unsigned long long)now,
                 named   ? ""
                 : other ? others
                         : "; the cgroup's OOM killer killed a process while it ran, and "
                           "nothing here says which");
}

void task_watch_end(void)
{
    for (int i = 0; i < watch.n_notes; i++)
        free(watch.notes[i]);
    free(watch.notes);
    watch.notes = NULL;
    watch.n_notes = watch.cap_notes = 0;
    watch.n_victims = 0;
    if (watch.log_fd >= 0)
        close(watch.log_fd);
    watch.log_fd = -1;
    watch.log_opened = 0;
    n_mounts = -1;
}
