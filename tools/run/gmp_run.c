/*
 * gmp-run — runs a command under the preload and stays to see how it ends.
 *
 *   gmp-run [--dump-dir DIR] [--] CMD [ARG...]
 *
 * A process killed by SIGKILL (the kernel OOM killer) runs no code, so it
 * cannot write its own bundle; its event ring stays behind instead.  gmp-run
 * gives the command a job directory in the per-user run directory (so it
 * knows every descendant's ring), holds it for its life (job_dirs.c),
 * becomes the subreaper of its descendants, and decides for each one it
 * reaps what its ring means (gmp_rings_reaped: kept, with the signal, only
 * for SIGKILL or a crash after a failed allocation; removed for an exit,
 * SIGPIPE, Ctrl-C, SIGTERM, a crash with no failed allocation); when the
 * command has ended it writes the bundle of every process whose ring was
 * left by such a death (gmp_rings_recover).  Between deaths it watches the
 * job from outside (job_watch.c): a ring for every process, a proxy where
 * the process has none of its own, and host samples in it; and it reads
 * the job's stderr (job_output.c: a file read back, a pipe passed on by a
 * relay process) for a Go program's last words.  A gmp-run killed itself
 * loses nothing: its job directory, no longer held, is swept by the next
 * gmp-run (first thing) and by `gmp-inspect recover`.
 *
 * When a distributed run in the job left a bundle, gmp-run's last line on
 * stderr is its verdict (run_verdict.c): which rank ran out first, and how
 * the others ended, from the ends its processes noted.
 *
 * Its exit status is the command's (128 + the signal when it was killed).
 * Signals sent to gmp-run (a scheduler's SIGTERM, kill) go on to the
 * command once; those the terminal sends (Ctrl-C, Ctrl-\, a hangup) reach
 * the command from the terminal already, as every process of the
 * foreground group, so gmp-run does not send them again.
 * GMP_TORCH_HISTORY=1 puts gpumemprof's sitecustomize on the command's
 * PYTHONPATH (PyTorch's own memory history in a CUDA OOM's bundle).
 */
#include "gpumemprof.h"
#include "group_signal.h"
#include "job_output.h"
#include "job_watch.h"
#include "kernel_log.h"
#include "ring_recovery.h"
#include "run_verdict.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PRELOAD_NAME "libgpumemprof_preload.so"
#define LOOK_EVERY_NS (JOB_WATCH_LOOK_MS * 1000ll * 1000)

static volatile pid_t child;

static void note_child(int sig)
{
    (void)sig; /* only to end ppoll's wait */
}

/* sig's action set to handler, the one it had in was. */
static void signal_keep(int sig, void (*handler)(int), struct sigaction *was)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, was);
}

static volatile sig_atomic_t tty_interrupt; /* a Ctrl-C from the terminal came */

/* The kernel's own signals (SI_KERNEL) are the terminal's, sent to the
 * whole foreground group, the command in it: not sent twice.  A process's
 * (SI_USER) may have been sent to the group too: group_signal.c judges. */
static void forward(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (info && info->si_code == SI_KERNEL) {
        if (sig == SIGINT)
            tty_interrupt = 1;
        return;
    }
    if (info && info->si_code == SI_USER && group_signal_note(sig, info->si_pid) == 0)
        return;
    if (child > 0)
        kill(child, sig);
}

static int usage(FILE *f, int code)
{
    fputs("usage: gmp-run [--dump-dir DIR] [--] CMD [ARG...]\n\n"
          "Runs CMD with the gpumemprof preload (LD_PRELOAD) and a private run\n"
          "directory.  When CMD or any process under it is killed (SIGKILL from the\n"
          "kernel OOM killer, or another signal) without writing its own bundle,\n"
          "gmp-run writes one from the events it left, with the signal as reason and\n"
          "oom_killer evidence when its cgroup counted an OOM kill.  Exits with CMD's\n"
          "status (128 + signal when killed).  The preload is found beside gmp-run,\n"
          "in ../lib, or at $GMP_PRELOAD_LIBRARY.  With GMP_TORCH_HISTORY=1, a Python\n"
          "command that uses PyTorch on a GPU records PyTorch's memory history, and\n"
          "a CUDA OOM's bundle holds PyTorch's snapshot (torch_snapshot.pickle).\n",
          f);
    return code;
}

/* The first of places (each "/" and a path from this binary's directory)
 * that is readable, in out; -1 when none is. */
static int find_beside(const char *const *places, size_t n, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    for (size_t i = 0; i < n; i++) {
        if ((size_t)snprintf(out, cap, "%.*s%s", (int)(cap - 64), self, places[i]) < cap &&
            access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* The preload: $GMP_PRELOAD_LIBRARY, beside this binary, or in ../lib. */
static int find_preload(char *out, size_t cap)
{
    const char *env = getenv("GMP_PRELOAD_LIBRARY");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return access(out, R_OK);
    }
    static const char *const places[] = {"/" PRELOAD_NAME, "/../lib/" PRELOAD_NAME};
    return find_beside(places, 2, out, cap);
}

/* GMP_TORCH_HISTORY=1: the directory of gpumemprof's sitecustomize.py (in
 * the wheel ../_site, in the build tree site, installed
 * ../share/gpumemprof/site) goes first on the command's PYTHONPATH, where
 * each Python process runs it at start.  One line when it is not found. */
static void torch_history(void)
{
    const char *want = getenv("GMP_TORCH_HISTORY");
    if (!want || strcmp(want, "1"))
        return;
    static const char *const places[] = {"/../_site/sitecustomize.py", "/site/sitecustomize.py",
                                         "/../share/gpumemprof/site/sitecustomize.py"};
    char site[PATH_MAX];
    if (find_beside(places, 3, site, sizeof site) < 0) {
        fprintf(stderr, "gmp-run: GMP_TORCH_HISTORY=1, but no sitecustomize.py beside gmp-run; "
                        "PyTorch's history is not recorded\n");
        return;
    }
    *strrchr(site, '/') = '\0';
    const char *old = getenv("PYTHONPATH");
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", site, old && *old ? ":" : "", old ? old : "");
    setenv("PYTHONPATH", path, 1);
}

static int say_nothing(const char *line, size_t n)
{
    (void)line;
    (void)n;
    return 0;
}

/* What a process of the job makes of its environment (GMP_DUMP_DIR, made
 * absolute where it starts, the retention limits), for the proxy rings
 * gmp-run keeps on behalf of processes that make none: their bundles go
 * where their own would.  Read quietly: the preload in the job says once
 * what is wrong with a variable. */
static void job_config(gmp_config *job, const char *abs_dump)
{
    int (*gate)(const char *, size_t) = gmp_log_gate;
    gmp_log_gate = say_nothing;
    gmp_config_from_env(job);
    gmp_log_gate = gate;
    char cwd[PATH_MAX];
    if (abs_dump)
        gmp_strlcpy(job->dump_dir, abs_dump, sizeof job->dump_dir);
    else if (job->dump_dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
        const char *rel = job->dump_dir;
        while (rel[0] == '.' && rel[1] == '/')
            rel += 2;
        char joined[PATH_MAX * 2];
        snprintf(joined, sizeof joined, "%s/%s", cwd, rel);
        gmp_strlcpy(job->dump_dir, joined, sizeof job->dump_dir);
    }
}

static void report(const char *bundle, int pid, const char *reason, void *arg)
{
    fprintf(stderr, "gmp-run: %spid %d died (%s); bundle: %s\n", arg ? "an earlier job's " : "",
            pid, reason, bundle);
}

int main(int argc, char **argv)
{
    const char *dump_dir = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return usage(stdout, 0);
        if (!strcmp(argv[i], "--version")) {
            puts("gmp-run " GMP_VERSION_STRING);
            return 0;
        }
        if (!strcmp(argv[i], "--dump-dir") && i + 1 < argc) {
            dump_dir = argv[++i];
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "gmp-run: unknown option %.64s\n", argv[i]);
            return usage(stderr, 2);
        }
        break;
    }
    if (i >= argc)
        return usage(stderr, 2);

    char preload[PATH_MAX], run_dir[PATH_MAX], abs_dump[PATH_MAX];
    if (find_preload(preload, sizeof preload) < 0) {
        fprintf(stderr, "gmp-run: cannot find %s (set GMP_PRELOAD_LIBRARY)\n", PRELOAD_NAME);
        return 2;
    }
    if (dump_dir) {
        if (dump_dir[0] != '/' && getcwd(abs_dump, sizeof abs_dump))
            snprintf(abs_dump + strlen(abs_dump), sizeof abs_dump - strlen(abs_dump), "/%s",
                     dump_dir);
        else
            snprintf(abs_dump, sizeof abs_dump, "%s", dump_dir);
    }
    /* the run directory the preload uses; the rest of the configuration is
     * the preload's to read (and to warn about, once) */
    static gmp_config cfg;
    gmp_config_defaults(&cfg);
    const char *configured = getenv("GMP_RUN_DIR");
    if (configured && strlen(configured) < sizeof cfg.run_dir)
        strcpy(cfg.run_dir, configured);
    char base[PATH_MAX], why[256] = "";
    gmp_run_dir_path(&cfg, base, sizeof base);
    /* the jobs of a gmp-run that was killed: their bundles first */
    gmp_recover_options earlier = {.max_dumps = cfg.max_dumps, .max_total_mb = cfg.max_total_mb};
    gmp_job_dirs_sweep(base, &earlier, report, &earlier);
    int held = gmp_job_dir_make(base, run_dir, sizeof run_dir, why, sizeof why);
    if (held < 0) /* the command still runs; its rings stay where the preload puts them */
        fprintf(stderr, "gmp-run: cannot make a job directory in %s: %s; a process killed "
                        "without a word gets no bundle from gmp-run (gmp-inspect recover)\n",
                base, why);

    /* descendants whose parent dies come to us, so their deaths are seen */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t k = 0; k < sizeof forwarded / sizeof *forwarded; k++)
        sigaction(forwarded[k], &sa, NULL);

    /* SIGCHLD held but for the wait below, which it ends before the next
     * look at the job.  SIGPIPE ignored here: gmp-run's own lines to a
     * reader that went away fail without ending it. */
    sigset_t chld, before, waiting;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &before);
    waiting = before;
    sigdelset(&waiting, SIGCHLD);
    struct sigaction wake, pipe_was;
    memset(&wake, 0, sizeof wake);
    wake.sa_handler = note_child;
    sigaction(SIGCHLD, &wake, NULL);
    signal_keep(SIGPIPE, SIG_IGN, &pipe_was);
    group_signal_start(forwarded, sizeof forwarded / sizeof *forwarded);
    job_output_prepare();
    /* the job's deaths are looked for in the kernel log from here on */
    gmp_kernel_log_follow();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gmp-run: fork: %s\n", strerror(errno));
        if (held >= 0) {
            rmdir(run_dir);
            close(held);
        }
        return 2;
    }
    if (pid == 0) {
        for (size_t k = 0; k < sizeof forwarded / sizeof *forwarded; k++)
            signal(forwarded[k], SIG_DFL);
        sigaction(SIGPIPE, &pipe_was, NULL);
        signal(SIGCHLD, SIG_DFL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        job_output_in_child();
        const char *old = getenv("LD_PRELOAD");
        char ld[2 * PATH_MAX];
        snprintf(ld, sizeof ld, "%s%s%s", preload, old && *old ? " " : "", old ? old : "");
        setenv("LD_PRELOAD", ld, 1);
        /* AddressSanitizer wants its runtime first among the libraries and
         * refuses to start behind a preload; it runs well behind ours, so a
         * program built with it runs under gmp-run as it does alone */
        const char *asan = getenv("ASAN_OPTIONS");
        if (!asan || !strstr(asan, "verify_asan_link_order")) {
            char opts[4096];
            snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
                     asan && *asan ? ":" : "");
            setenv("ASAN_OPTIONS", opts, 1);
        }
        if (held >= 0)
            setenv("GMP_RUN_DIR", run_dir, 1);
        if (dump_dir)
            setenv("GMP_DUMP_DIR", abs_dump, 1);
        torch_history();
        execvp(argv[i], argv + i);
        fprintf(stderr, "gmp-run: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    child = pid;

    /* Reap the command, and every orphaned descendant that dies meanwhile;
     * between deaths, look at the job twenty times a second (job_watch.c). */
    int status = 0, done = 0;
    long long last_look_ns = 0;
    job_output_after_fork();
    static gmp_config job;
    job_config(&job, dump_dir ? abs_dump : NULL);
    if (held >= 0)
        job_watch_init(run_dir, &job);
    while (!done) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r > 0 && r == job_output_relay_pid())
            continue; /* the relay, done: no process of the job */
        if (r > 0 && r == group_signal_canary_pid()) {
            group_signal_canary_gone();
            continue;
        }
        if (r > 0) {
            job_watch_reaped((int)r);
            char words[512];
            if (held >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
                job_watch_go_last_words((int)r, words, sizeof words) == 0) {
                gmp_recover_options opt = {.dump_dir = dump_dir ? abs_dump : NULL,
                                           .pid = (int)r,
                                           .last_words = words,
                                           .exit_status = 2};
                gmp_rings_recover(run_dir, &opt, report, NULL);
            } else if (held >= 0) {
                gmp_rings_reaped(run_dir, (int)r, st);
            }
            if (r == pid) {
                status = st;
                done = 1;
            }
            continue;
        }
        if (r < 0 && errno != EINTR)
            break; /* ECHILD: nothing left */
        /* a look every 50 ms, however often the job's output wakes us */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long now_ns = now.tv_sec * 1000000000ll + now.tv_nsec;
        if (now_ns - last_look_ns >= LOOK_EVERY_NS) {
            if (held >= 0)
                job_watch_tick(now_ns);
            last_look_ns = now_ns;
        }
        long long left = last_look_ns + LOOK_EVERY_NS - now_ns;
        long long due = group_signal_settle(pid, now_ns); /* a signal to pass on */
        if (due >= 0 && due < left)
            left = due;
        struct timespec until = {0, left > 0 ? left : 0};
        int fds[2];
        struct pollfd watch[2];
        size_t n_watch = group_signal_fds(fds);
        for (size_t k = 0; k < n_watch; k++)
            watch[k] = (struct pollfd){.fd = fds[k], .events = POLLIN};
        ppoll(watch, n_watch, &until, &waiting);
    }
    group_signal_stop();
    if (held >= 0)
        job_watch_end();
    job_output_finish(); /* the job's last words out before gmp-run's own lines */
    /* descendants already dead but not yet reaped */
    for (int st; waitpid(-1, &st, WNOHANG) > 0;)
        ;
    child = 0;

    if (held >= 0) {
        gmp_recover_options opt = {.dump_dir = dump_dir ? abs_dump : NULL};
        gmp_rings_recover(run_dir, &opt, report, NULL);
        /* a distributed run that left a bundle: its verdict, the last line */
        static const char *const inspect_places[] = {"/gmp-inspect", "/../bin/gmp-inspect"};
        char inspect[PATH_MAX];
        run_verdict_tell(run_dir, job.dump_dir,
                         find_beside(inspect_places, 2, inspect, sizeof inspect) == 0 ? inspect
                                                                                        : NULL);
        /* while processes of the command still run (a daemon), their rings
         * keep the directory; the last to exit removes it, and a death
         * among them is swept later */
        rmdir(run_dir);
        close(held);
    }
    if (WIFSIGNALED(status)) {
        /* the command died of the terminal's Ctrl-C, as gmp-run would have:
         * die of it too, so a shell script running us stops as it would */
        if (WTERMSIG(status) == SIGINT && tty_interrupt) {
            signal(SIGINT, SIG_DFL);
            raise(SIGINT);
        }
        return 128 + WTERMSIG(status);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
