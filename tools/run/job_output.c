/*
 * job_output.c — what the job wrote to stderr, for the words a runtime
 * writes past the preload (Go's "fatal error: runtime: out of memory",
 * with raw system calls).  gmp-run reads it without changing where it goes:
 *
 *   a regular file (a Slurm output file, `> log 2>&1`): read back, from
 *     where it ended when a process was first seen;
 *   a pipe (a CI runner's): the job writes into a pipe of gmp-run's, which
 *     passes every byte on, in order, and keeps the last 64 KiB.  When the
 *     job's stdout is that same pipe, it goes through too, so the two stay
 *     in the order the job wrote them.  A reader that went away is passed
 *     back (the job's next write fails as it would have).  Writers that
 *     outlive gmp-run (a daemon) are served by a copy of it that exits
 *     when the last of them closes;
 *   a terminal, or anything else: left alone, and not read.
 */
#include "job_output.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAIL_BYTES (64 * 1024)

static enum { NONE, FILE_BACK, RELAY } mode = NONE;
static int file_fd = -1;             /* FILE_BACK: the file, opened for reading */
static int relay_read = -1, relay_write = -1, relay_stdout = 0;
static char tail[TAIL_BYTES];        /* RELAY: the last bytes passed on, a ring */
static uint64_t passed;              /* RELAY: bytes passed on in all */

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
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    relay_read = p[0];
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
    close(relay_read);
    close(relay_write);
}

void job_output_after_fork(void)
{
    if (mode != RELAY)
        return;
    close(relay_write);
    relay_write = -1;
    /* nobody waits on it: a read finds what there is and returns */
    fcntl(relay_read, F_SETFL, fcntl(relay_read, F_GETFL) | O_NONBLOCK);
}

int job_output_fd(void)
{
    return mode == RELAY ? relay_read : -1;
}

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

/* What the pipe holds now, passed on; 0 at its end (every writer closed),
 * 1 while writers remain. */
static int pump(int blocking)
{
    char buf[16384];
    for (;;) {
        ssize_t n = read(relay_read, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && !blocking)
            return 1;
        if (n <= 0)
            return 0;
        if (write_all(2, buf, (size_t)n) < 0) {
            /* the reader went away: so does ours, and the job's next
             * write fails as it would have (SIGPIPE, or EPIPE) */
            close(relay_read);
            relay_read = -1;
            mode = NONE;
            return 0;
        }
        for (ssize_t i = 0; i < n; i++)
            tail[(passed + (uint64_t)i) % TAIL_BYTES] = buf[i];
        passed += (uint64_t)n;
    }
}

void job_output_pump(void)
{
    if (mode == RELAY && relay_read >= 0 && !pump(0)) {
        if (relay_read >= 0)
            close(relay_read);
        relay_read = -1;
    }
}

void job_output_finish(void)
{
    if (mode == FILE_BACK && file_fd >= 0)
        close(file_fd);
    if (mode != RELAY || relay_read < 0)
        return;
    if (!pump(0)) { /* every writer gone: all passed on */
        close(relay_read);
        return;
    }
    /* a process of the job still holds the pipe: a copy of us serves it to
     * its end, as the pipe it was given would have; gmp-run returns now */
    fcntl(relay_read, F_SETFL, fcntl(relay_read, F_GETFL) & ~O_NONBLOCK);
    pid_t pid = fork();
    if (pid == 0) {
        pump(1);
        _exit(0);
    }
    close(relay_read);
}

long long job_output_offset(void)
{
    struct stat st;
    if (mode == FILE_BACK)
        return fstat(file_fd, &st) == 0 ? (long long)st.st_size : -1;
    return mode == RELAY ? (long long)passed : -1;
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
    } else if (mode == RELAY || passed) {
        uint64_t start = (uint64_t)from, oldest = passed > TAIL_BYTES ? passed - TAIL_BYTES : 0;
        if (start < oldest)
            start = oldest;
        if (passed - start > cap - 1)
            start = passed - (cap - 1);
        for (uint64_t i = start; i < passed; i++)
            out[n++] = tail[i % TAIL_BYTES];
    }
    out[n] = '\0';
    return n;
}
