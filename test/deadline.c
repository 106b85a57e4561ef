/*
 * deadline.c — a command run by the tests that outlives its deadline.
 *
 * Before it is ended, what every process under it was doing goes to the
 * test program's own stderr: each process's command line, each thread's
 * state, kernel wait and system call, and each thread's stack where
 * eu-stack (elfutils) is installed.  A hang that CI alone meets then says
 * where it hung, where an alarm in the child left only "killed by signal
 * 14".  The command itself is then ended with SIGALRM, as that alarm did,
 * and everything still under it with SIGKILL, so that no process left
 * behind slows the tests after it.  A daemon that left the tree on purpose
 * (double fork, setsid and a new parent) is not under it, and is left.
 */
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PROCS 8192
#define MAX_SHOWN 32   /* processes described; a fork bomb's tree stops here */
#define STACK_SECONDS 20

/* The text of a small /proc file, its last newline gone; "" when unreadable. */
static void proc_text(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' '; /* cmdline's separators */
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
}

/* The state letter and parent from /proc/PID/stat (after the command's
 * closing parenthesis, which the command itself may contain). */
static int stat_fields(const char *path, char *state, pid_t *ppid)
{
    char buf[1024];
    proc_text(path, buf, sizeof buf);
    const char *close_paren = strrchr(buf, ')');
    int parent;
    if (!close_paren || sscanf(close_paren + 1, " %c %d", state, &parent) != 2)
        return -1;
    *ppid = parent;
    return 0;
}

/* pid and every process under it, parents before their children; the
 * count. */
static int tree_of(pid_t root, pid_t *out, int cap)
{
    static pid_t pids[MAX_PROCS], parents[MAX_PROCS];
    int all = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) && all < MAX_PROCS) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        char path[64], state;
        pid_t ppid;
        if (*end || pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        if (stat_fields(path, &state, &ppid) == 0) {
            pids[all] = (pid_t)pid;
            parents[all++] = ppid;
        }
    }
    if (d)
        closedir(d);
    int n = 0;
    out[n++] = root;
    for (int next = 0; next < n; next++)
        for (int i = 0; i < all && n < cap; i++)
            if (parents[i] == out[next])
                out[n++] = pids[i];
    return n;
}

static void describe_threads(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[400], comm[64], wchan[64], sys[128], state = '?';
        pid_t ignored;
        snprintf(path, sizeof path, "%s/%s/comm", dir, de->d_name);
        proc_text(path, comm, sizeof comm);
        snprintf(path, sizeof path, "%s/%s/wchan", dir, de->d_name);
        proc_text(path, wchan, sizeof wchan);
        snprintf(path, sizeof path, "%s/%s/syscall", dir, de->d_name);
        proc_text(path, sys, sizeof sys);
        snprintf(path, sizeof path, "%s/%s/stat", dir, de->d_name);
        stat_fields(path, &state, &ignored);
        char *space = strchr(sys, ' ');
        if (space)
            *space = '\0'; /* the call's number; its arguments say little here */
        fprintf(stderr, "    thread %s (%s): state %c, waiting in %s, system call %s\n",
                de->d_name, comm, state, wchan[0] ? wchan : "-", sys[0] ? sys : "-");
    }
    if (d)
        closedir(d);
}

/* eu-stack's view of pid's threads, on our stderr, bounded in time. */
static void show_stacks(pid_t pid)
{
    static const char tool[] = "/usr/bin/eu-stack";
    if (access(tool, X_OK) != 0)
        return;
    char arg[16];
    snprintf(arg, sizeof arg, "%d", (int)pid);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        dup2(2, 1);
        alarm(STACK_SECONDS);
        execl(tool, tool, "-i", "-p", arg, (char *)NULL);
        _exit(127);
    }
    if (child > 0)
        waitpid(child, NULL, 0);
}

static void report_and_end(pid_t root, int seconds)
{
    static pid_t tree[MAX_PROCS];
    int n = tree_of(root, tree, MAX_PROCS);
    fprintf(stderr, "\n== a command ran past its %d s deadline; %d process(es) under the test:\n",
            seconds, n);
    for (int i = 0; i < n && i < MAX_SHOWN; i++) {
        char path[64], cmd[512], state = '?';
        pid_t ppid = 0;
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)tree[i]);
        proc_text(path, cmd, sizeof cmd);
        snprintf(path, sizeof path, "/proc/%d/stat", (int)tree[i]);
        stat_fields(path, &state, &ppid);
        fprintf(stderr, "  pid %d (parent %d), state %c: %s\n", (int)tree[i], (int)ppid, state,
                cmd[0] ? cmd : "-");
        describe_threads(tree[i]);
    }
    for (int i = 0; i < n && i < MAX_SHOWN; i++)
        show_stacks(tree[i]);
    fprintf(stderr, "== end of the processes past the deadline\n");
    kill(root, SIGALRM);
    for (int i = 1; i < n; i++)
        kill(tree[i], SIGKILL);
}

int wait_with_deadline(pid_t pid, int seconds)
{
    int status = 0;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready;
        do
            ready = poll(&p, 1, seconds * 1000);
        while (ready < 0 && errno == EINTR);
        close(fd);
        if (ready == 0)
            report_and_end(pid, seconds);
    }
    /* without pidfd (a kernel before 5.3) the child's own alarm ends it */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}
