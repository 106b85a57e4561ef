/*
 * group_signal.c — passing a signal on to the command once.  gmp-run passes
 * the signals it gets on to its command, which shares its process group.
 * A sender that signals the whole group — timeout(1) signals its child and
 * then its group, a person types `kill -- -PGID` — has reached the command
 * already: passing it on makes two, and a program that takes a second
 * SIGINT or SIGTERM as "force quit" force-quits.  siginfo does not tell a
 * group's signal from one sent to gmp-run alone, and moving the command to
 * a group of its own would change job control and let a group SIGKILL miss
 * it.  So a canary tells: a child of gmp-run that stays in its group and
 * does nothing but write, on a pipe, each signal that reaches it and its
 * sender.  A signal gmp-run got from a sender is passed on unless, within
 * WAIT_NS, the canary got the same from the same sender.  The kernel's own
 * (a terminal's Ctrl-C, SI_KERNEL) never come here: gmp_run.c lets the
 * command have them from the terminal alone.
 */
#include "group_signal.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_NS (100ll * 1000 * 1000) /* a canary seldom waits this long to run */
#define KEPT 32

typedef struct note {
    int sig;
    pid_t sender;
} note;

typedef struct dated {
    note n;
    long long at_ns;
} dated;

static pid_t canary;
static int canary_read = -1, noted_read = -1, noted_write = -1;
static dated waiting[KEPT], seen[KEPT]; /* gmp-run's to judge; the canary's */
static size_t n_waiting, n_seen;

static int canary_write = -1;

static void canary_saw(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (info && info->si_code == SI_USER) {
        note n = {sig, info->si_pid};
        ssize_t w = write(canary_write, &n, sizeof n);
        (void)w; /* a full pipe: gmp-run passes it on, as without a canary */
    }
}

static void canary_main(pid_t parent, const int *sigs, size_t n)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives gmp-run */
    if (getppid() != parent)
        _exit(0);
    prctl(PR_SET_NAME, "gmp-run canary"); /* told apart from gmp-run in ps */
    if (canary_write != 3) {
        dup2(canary_write, 3);
        canary_write = 3;
    }
    gmp_close_from(4); /* no pipe of the job's held open here */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && null >= 0; fd++)
        dup2(null, fd);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = canary_saw;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigset_t mask;
    sigemptyset(&mask);
    for (size_t i = 0; i < n; i++)
        sigaction(sigs[i], &sa, NULL);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    for (;;)
        pause();
}

int group_signal_start(const int *sigs, size_t n)
{
    int c[2], g[2];
    if (pipe2(c, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    if (pipe2(g, O_CLOEXEC | O_NONBLOCK) < 0) {
        close(c[0]);
        close(c[1]);
        return -1;
    }
    pid_t parent = getpid();
    canary_write = c[1];
    canary = fork();
    if (canary == 0) {
        close(c[0]);
        close(g[0]);
        close(g[1]);
        canary_main(parent, sigs, n);
    }
    close(c[1]);
    canary_write = -1;
    if (canary < 0) {
        canary = 0;
        close(c[0]);
        close(g[0]);
        close(g[1]);
        return -1;
    }
    canary_read = c[0];
    noted_read = g[0];
    noted_write = g[1];
    return 0;
}

int group_signal_canary_pid(void)
{
    return (int)canary;
}

void group_signal_canary_gone(void)
{
    canary = 0;
}

int group_signal_note(int sig, pid_t sender)
{
    note n = {sig, sender};
    if (canary <= 0 || noted_write < 0 || write(noted_write, &n, sizeof n) != sizeof n)
        return -1;
    return 0;
}

size_t group_signal_fds(int *fds)
{
    size_t n = 0;
    if (canary_read >= 0)
        fds[n++] = canary_read;
    if (noted_read >= 0)
        fds[n++] = noted_read;
    return n;
}

/* What fd holds now, each dated now, appended to list (the oldest go
 * first when it is full). */
static void drain(int fd, dated *list, size_t *count, long long now_ns)
{
    note n;
    while (fd >= 0 && read(fd, &n, sizeof n) == (ssize_t)sizeof n) {
        if (*count == KEPT)
            memmove(list, list + 1, (--*count) * sizeof *list);
        list[(*count)++] = (dated){n, now_ns};
    }
}

long long group_signal_settle(pid_t command, long long now_ns)
{
    drain(canary_read, seen, &n_seen, now_ns);
    drain(noted_read, waiting, &n_waiting, now_ns);
    /* a canary's note serves every signal of the same sender near it (timeout
     * signals its child, then the group: the command has had one) */
    size_t kept = 0;
    for (size_t i = 0; i < n_seen; i++)
        if (now_ns - seen[i].at_ns < 2 * WAIT_NS)
            seen[kept++] = seen[i];
    n_seen = kept;
    if (!n_waiting)
        return -1;
    int in_our_group = command > 0 && getpgid(command) == getpgrp();
    long long next = -1;
    kept = 0;
    for (size_t i = 0; i < n_waiting; i++) {
        dated *w = &waiting[i];
        int group_had_it = 0;
        for (size_t k = 0; k < n_seen && !group_had_it; k++)
            group_had_it = seen[k].n.sig == w->n.sig && seen[k].n.sender == w->n.sender;
        if (group_had_it && in_our_group)
            continue;
        long long due = w->at_ns + WAIT_NS - now_ns;
        if (!in_our_group || canary <= 0 || due <= 0) {
            if (command > 0)
                kill(command, w->n.sig);
            continue;
        }
        next = next < 0 || due < next ? due : next;
        waiting[kept++] = *w;
    }
    n_waiting = kept;
    return next;
}

void group_signal_stop(void)
{
    if (canary > 0) {
        kill(canary, SIGKILL);
        while (waitpid(canary, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    canary = 0;
}
