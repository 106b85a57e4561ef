/*
 * job_output.c — what the job wrote to stderr, for the words a runtime
 * writes past the preload (Go's "fatal error: runtime: out of memory",
 * with raw system calls).  gmp-run reads it without changing where it goes:
 *
 *   a regular file (a Slurm output file, `> log 2>&1`): read back, from
 *     where it ended when a process was first seen;
 *   a pipe (a CI runner's): the job writes into a pipe whose bytes a small
 *     process of gmp-run's (the relay) passes on, in order, keeping the
 *     last 64 KiB in memory gmp-run shares.  When the job's stdout is that
 *     same pipe, it goes through too, so the two stay in the order the job
 *     wrote them.  The relay is a process of its own so that the pipe lives
 *     as long as its writers do, whatever becomes of gmp-run (killed alone,
 *     or ended while a daemon of the job still writes): it ends when the
 *     last writer closes, or when its own reader goes away, and the job's
 *     next write then fails as it would have (SIGPIPE, or EPIPE).  It
 *     ignores the signals a terminal or a scheduler sends the job, and
 *     leaves with it;
 *   a terminal, or anything else: left alone, and not read.
 */
#include "job_output.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAIL_BYTES (64 * 1024)

typedef struct shared_tail {
    uint64_t passed; /* atomic: bytes passed on in all */
    char bytes[TAIL_BYTES]; /* the last of them, a ring */
} shared_tail;

static enum { NONE, FILE_BACK, RELAY } mode = NONE;
static int file_fd = -1;     /* FILE_BACK: the file, opened for reading */
static int relay_write = -1; /* RELAY: the job's end of the pipe */
static int relay_stdout;     /* RELAY: stdout is the same pipe */
static pid_t relay_pid;
static shared_tail *tail;

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The relay: the pipe passed on to stderr until every writer has closed it,
 * or stderr's reader has gone. */
static void relay(int from)
{
    static const int ignored[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        signal(ignored[i], SIG_IGN);
    prctl(PR_SET_NAME, "gmp-run relay"); /* told apart from gmp-run in ps */
    /* nothing of gmp-run's held open here (its job directory's lock, the
     * job's stdin and stdout): the pipe and stderr alone */
    if (from != 3) {
        dup2(from, 3);
        from = 3;
    }
    gmp_close_from(4);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    char buf[16384];
    for (;;) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || write_all(2, buf, (size_t)n) < 0)
            _exit(0);
        uint64_t at = __atomic_load_n(&tail->passed, __ATOMIC_RELAXED);
        for (ssize_t i = 0; i < n; i++)
            tail->bytes[(at + (uint64_t)i) % TAIL_BYTES] = buf[i];
        __atomic_store_n(&tail->passed, at + (uint64_t)n, __ATOMIC_RELEASE);
    }
}

void job_output_prepare(void)
{
    struct stat err, out;
    if (fstat(2, &err) < 0)
        return;
    if (S_ISREG(err.st_mode)) {
        file_fd = open("/proc/self/fd/2", O_RDONLY | O_CLOEXEC);
        mode = file_fd >= 0 ? FILE_BACK : NONE;
        return;
    }
    if (!S_ISFIFO(err.st_mode))
        return; /* a terminal stays a terminal */
    void *shared = mmap(NULL, sizeof *tail, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    int p[2];
    if (shared == MAP_FAILED)
        return;
    if (pipe2(p, O_CLOEXEC) < 0) {
        munmap(shared, sizeof *tail);
        return;
    }
    tail = shared;
    relay_pid = fork();
    if (relay_pid == 0) {
        close(p[1]);
        relay(p[0]);
    }
    close(p[0]);
    if (relay_pid < 0) { /* no relay: the job keeps its own stderr */
        close(p[1]);
        munmap(shared, sizeof *tail);
        tail = NULL;
        return;
    }
    relay_write = p[1];
    relay_stdout = fstat(1, &out) == 0 && out.st_dev == err.st_dev && out.st_ino == err.st_ino;
    mode = RELAY;
}

void job_output_in_child(void)
{
    if (mode != RELAY)
        return;
    dup2(relay_write, 2); /* dup2 clears close-on-exec on the copy */
    if (relay_stdout)
        dup2(relay_write, 1);
    close(relay_write);
}

void job_output_after_fork(void)
{
    if (mode == RELAY) {
        close(relay_write); /* the job's alone now: its last close ends the relay */
        relay_write = -1;
    }
}

int job_output_relay_pid(void)
{
    return mode == RELAY ? (int)relay_pid : 0;
}

void job_output_finish(void)
{
    if (mode == FILE_BACK)
        close(file_fd);
    if (mode != RELAY)
        return;
    /* the command has ended: the relay passes on its last bytes and ends
     * with it, unless a daemon of the job still writes (then it goes on) */
    for (int waited = 0; waited < 40; waited++) {
        if (waitpid(relay_pid, NULL, WNOHANG) != 0)
            return;
        struct timespec five = {0, 5 * 1000 * 1000};
        nanosleep(&five, NULL);
    }
}

long long job_output_offset(void)
{
    struct stat st;
    if (mode == FILE_BACK)
        return fstat(file_fd, &st) == 0 ? (long long)st.st_size : -1;
    return mode == RELAY ? (long long)__atomic_load_n(&tail->passed, __ATOMIC_ACQUIRE) : -1;
}

/* The relay has passed on what the job wrote: no new byte for 20 ms (at
 * most 200 ms), so the words of a process just reaped are there. */
static void relay_settle(void)
{
    uint64_t seen = __atomic_load_n(&tail->passed, __ATOMIC_ACQUIRE);
    for (int quiet = 0, waited = 0; quiet < 4 && waited < 40; waited++) {
        struct timespec five = {0, 5 * 1000 * 1000};
        nanosleep(&five, NULL);
        uint64_t now = __atomic_load_n(&tail->passed, __ATOMIC_ACQUIRE);
        quiet = now == seen ? quiet + 1 : 0;
        seen = now;
    }
}

size_t job_output_since(long long from, char *out, size_t cap)
{
    if (from < 0 || cap == 0)
        return 0;
    size_t n = 0;
    if (mode == FILE_BACK) {
        long long end = job_output_offset();
        if (end <= from)
            return 0;
        if (end - from > (long long)cap - 1)
            from = end - (long long)cap + 1;
        ssize_t r = pread(file_fd, out, cap - 1, (off_t)from);
        n = r > 0 ? (size_t)r : 0;
    } else if (mode == RELAY) {
        relay_settle();
        uint64_t passed = __atomic_load_n(&tail->passed, __ATOMIC_ACQUIRE);
        uint64_t start = (uint64_t)from, oldest = passed > TAIL_BYTES ? passed - TAIL_BYTES : 0;
        if (start < oldest)
            start = oldest;
        if (passed - start > cap - 1)
            start = passed - (cap - 1);
        for (uint64_t i = start; i < passed; i++)
            out[n++] = tail->bytes[i % TAIL_BYTES];
    }
    out[n] = '\0';
    return n;
}
