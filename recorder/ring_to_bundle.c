/*
 * ring_to_bundle.c — the bundle of a process killed without writing one,
 * from the ring it left (gmp_rings_recover: gmp-run and `gmp-inspect
 * recover`).  Its events tell the last failed request and its backend; the
 * ring's header, the process; the run's cgroup and the kernel's log, whether
 * the OOM killer chose it.  A ring of a process that is not gone is passed
 * over, and so is the proxy ring gmp-run made for a process that left one
 * of its own.  Which rings are left, and which removed, is
 * ring_recovery.c's.
 */
#include "bundle.h"
#include "dumpdir.h"
#include "gpumemprof.h"
#include "kernel_log.h"
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
    if (!gmp_ring_file_of_pid(name, t->pid) || gmp_ring_file_header(dirfd, name, &h, NULL) < 0 ||
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

/* When the ring's process died, as near as known: when its parent reaped
 * it or gmp-run saw it dead (noted in the ring), else now, for a caller
 * that has just reaped it itself (opt->pid) or a death nobody saw end. */
static uint64_t death_time_ns(const gmp_recover_options *opt, const gmp_ring_header *live)
{
    uint64_t now = gmp_now_realtime_ns();
    return opt->pid && opt->pid == live->pid ? now : gmp_ring_death_ns(live, now);
}

/* Whether the kernel's OOM killer is named as the killer of the ring's
 * process (1) or not (0), with the evidence written in out.  A privileged
 * caller's word (gmp_recover_options) is taken for the processes it names
 * alone: its evidence for the death it saw, its victims for theirs.
 * Otherwise the kernel log as this user may read it.  The cgroup's counter
 * says only that the OOM killer killed some process of the cgroup while
 * this one ran: this one, or another whose death left this one to a
 * person's kill -9; said so, never as fact. */
static int death_evidence(const gmp_recover_options *opt, const gmp_ring_header *live, int sig,
                          const char *cgroup_file, char *out, size_t cap)
{
    out[0] = '\0';
    if (opt->evidence && opt->pid && opt->pid == live->pid) {
        gmp_strlcpy(out, opt->evidence, cap);
        return !strncmp(opt->evidence, "oom_killer:", 11);
    }
    long hz = sysconf(_SC_CLK_TCK);
    uint64_t started_us = hz > 0 ? live->proc_start_ticks * (1000000 / (uint64_t)hz) : 0;
    int named = 0, other = 0;
    for (int i = 0; i < opt->n_oom_victims && opt->oom_victims && !named; i++)
        named = opt->oom_victims[i].pid == live->pid &&
                opt->oom_victims[i].killed_us >= started_us;
    if (!named)
        named = gmp_kernel_log_names_victim(live->pid, live->proc_start_ticks, &other);
    char num[24];
    if (named) {
        gmp_fmt_u64((uint64_t)live->pid, num);
        gmp_strjoin(out, cap, "oom_killer: the kernel log says \"Killed process ", num, "\"",
                    (char *)NULL);
    }
    uint64_t kills_then = live->oom_kills_at_start, kills_now = gmp_cgroup_oom_kills(cgroup_file);
    if ((sig == SIGKILL || sig == 0) && kills_then != UINT64_MAX && kills_now != UINT64_MAX &&
        kills_now > kills_then) {
        char a[24], b[24];
        gmp_fmt_u64(kills_then, a);
        gmp_fmt_u64(kills_now, b);
        gmp_fmt_u64((uint64_t)other, num);
        /* the log names every victim since it started, and not this one:
         * the kill the cgroup counted was another's, this one's was not
         * the OOM killer's */
        gmp_strjoin(out + strlen(out), cap - strlen(out), out[0] ? "; " : "",
                    named   ? "oom_killer: oom_kill in "
                    : other ? "kernel_log: oom_kill in "
                            : "cgroup_oom_kill: oom_kill in ",
                    cgroup_file, " rose from ", a, " to ", b, " while it ran",
                    named   ? ""
                    : other ? "; the kernel log names the OOM killer's victim since it started, "
                              "pid "
                            : "; the cgroup's OOM killer killed a process while it ran, and "
                              "nothing here says which",
                    !named && other ? num : "", !named && other ? ", not this one" : "",
                    (char *)NULL);
    }
    return named;
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
    if (!gmp_ring_file_name(name) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode) || gmp_ring_file_header(dirfd, name, &h, NULL) < 0 || !gmp_ring_process_gone(&h))
        return 0;
    int ours = st.st_uid == geteuid();
    int words = rc->opt->last_words && rc->opt->pid > 0;
    if (words && h.pid != rc->opt->pid)
        return 0; /* a death written up from its words: that process's ring alone */
    /* no death of memory: an exec, a crash the process wrote up itself, a
     * signal its parent saw that a user or a pipeline sends */
    int noted = rc->opt->pid && rc->opt->pid == h.pid ? rc->opt->signal : h.death_signal;
    if ((h.flags & (GMP_RING_FLAG_EXEC | GMP_RING_FLAG_SELF_WRITTEN)) ||
        (!words && noted > 0 && !gmp_ring_death_may_be_memory(h.flags, noted))) {
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
        const char *abbrev = gmp_signal_abbrev(sig);
        gmp_strjoin(signame, sizeof signame, "SIG", abbrev ? abbrev : "?", (char *)NULL);
    }
    char cgroup_file[sizeof live->cgroup_oom_file];
    copy_bounded(cgroup_file, sizeof cgroup_file, live->cgroup_oom_file,
                 sizeof live->cgroup_oom_file);
    int named = death_evidence(rc->opt, live, sig, cgroup_file, evidence, sizeof evidence);

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
        .time_ns = death_time_ns(rc->opt, live),
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
        rc->report(bundle, pid,
                   words   ? "exited after out-of-memory words"
                   : named ? "killed by the kernel's OOM killer"
                           : signame,
                   rc->arg);
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
