/*
 * kernel_log.c — the OOM killer's word from the kernel log (kernel_log.h).
 *
 * /dev/kmsg gives one record per read(2), oldest first, and no way to start
 * at a time; a long-lived machine's log holds 100,000 records, and gmp-run
 * asks of every short-lived process it saw whose end it did not.  So the
 * log is read once per process, and after that only the records written
 * since; the victims it named are kept (the newest VICTIMS_KEPT: a question
 * the kept ones cannot answer reads the whole log again, on a descriptor of
 * its own, as does a second thread while the first reads).  gmp-run starts
 * at the log's end (gmp_kernel_log_follow): the records already there are
 * of processes older than its job.
 */
#include "kernel_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define VICTIMS_KEPT 256
#define READS_PER_PASS 100000 /* a log written faster than read still ends */

typedef struct victim {
    int pid;
    uint64_t us; /* when the kernel logged it, microseconds since boot */
} victim;

static struct {
    int busy;            /* atomic: its one reader now */
    int open;            /* fd is the log, read up to where it was last */
    int fd;
    pid_t pid;           /* whose: a forked child shares fd's place, so reads its own */
    uint64_t from_ticks; /* 0: read from its first record; else from this clock tick on */
    uint64_t oldest_us;  /* read from its first record: that record's time */
    unsigned seen;       /* victims noted; the newest in kept[(seen - 1) % VICTIMS_KEPT] */
    victim kept[VICTIMS_KEPT];
} log_cache;

/* /dev/kmsg as this user may open it (dmesg_restrict keeps most users out),
 * else -1.  No descriptor is ever taken from a privileged parent: one that
 * root opened and handed to a user's process is the user's to copy
 * (pidfd_getfd, ptrace) and read whole.  Slurm's plugin reads the log
 * itself, as root, and hands over only its verdict on its own step's
 * processes (gmp_recover_options). */
static int open_log(void)
{
    return open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

/* The victim a record names ("priority,sequence,microseconds since
 * boot,flags;...Killed process 1234 (python3)..."): its pid, else 0. */
static int record_victim(const char *rec, uint64_t *us)
{
    const char *at = strchr(rec, ',');
    at = at ? strchr(at + 1, ',') : NULL;
    *us = 0;
    for (at = at ? at + 1 : NULL; at && *at >= '0' && *at <= '9'; at++)
        *us = *us * 10 + (uint64_t)(*at - '0');
    const char *named = strstr(rec, "Killed process ");
    if (!named)
        return 0;
    long pid = 0;
    for (named += strlen("Killed process "); *named >= '0' && *named <= '9' && pid < 1 << 30;
         named++)
        pid = pid * 10 + (*named - '0');
    return *named == ' ' ? (int)pid : 0;
}

/* Each record fd has not read yet, until note says it has its answer: 1
 * when it read to the log's end, 0 when it stopped before.  *oldest, when
 * 0, becomes the first record's time (the log holds nothing older). */
static int read_records(int fd, int (*note)(int pid, uint64_t us, void *arg), void *arg,
                        uint64_t *oldest)
{
    char rec[2048];
    for (int i = 0; i < READS_PER_PASS; i++) {
        ssize_t n = read(fd, rec, sizeof rec - 1);
        if (n < 0 && errno == EPIPE)
            continue; /* records overwritten while we read */
        if (n <= 0)
            return 1; /* EAGAIN: nothing newer */
        rec[n] = '\0';
        uint64_t us;
        int pid = record_victim(rec, &us);
        if (oldest && !*oldest)
            *oldest = us ? us : 1;
        if (pid > 0 && note(pid, us, arg))
            return 0;
    }
    return 0;
}

static int keep_victim(int pid, uint64_t us, void *arg)
{
    (void)arg;
    log_cache.kept[log_cache.seen++ % VICTIMS_KEPT] = (victim){pid, us};
    return 0;
}

typedef struct question {
    int pid;
    uint64_t started_us;
    int found;
    int other; /* a victim of the process's life that is not it */
} question;

static int answers(int pid, uint64_t us, void *arg)
{
    question *q = arg;
    q->found = pid == q->pid && us >= q->started_us;
    if (!q->found && !q->other && us >= q->started_us)
        q->other = pid;
    return q->found;
}

/* The whole log, on a descriptor of its own.  Another victim counts only
 * where the log still holds the process's start. */
static int read_whole_log(question *q)
{
    int fd = open_log();
    if (fd < 0)
        return 0;
    uint64_t oldest = 0;
    read_records(fd, answers, q, &oldest);
    close(fd);
    if (!oldest || oldest > q->started_us)
        q->other = 0;
    return q->found;
}

/* The cache's answer, read to the log's end: 1 or 0, or -1 where it cannot
 * say (it began after the process started; victims of the process's life
 * went out of the table). */
static int cached_answer(question *q, uint64_t start_ticks)
{
    if (log_cache.from_ticks && !(start_ticks > log_cache.from_ticks))
        return -1; /* started before the first record read, or in its tick */
    if (!log_cache.from_ticks && !(log_cache.oldest_us && log_cache.oldest_us <= q->started_us))
        return -1; /* the log no longer holds its start */
    unsigned n = log_cache.seen < VICTIMS_KEPT ? log_cache.seen : VICTIMS_KEPT;
    if (log_cache.seen > VICTIMS_KEPT &&
        log_cache.kept[log_cache.seen % VICTIMS_KEPT].us >= q->started_us)
        return -1; /* victims of its life went out of the table */
    for (unsigned i = 0; i < n; i++)
        if (log_cache.kept[i].us >= q->started_us) {
            if (log_cache.kept[i].pid == q->pid)
                return 1;
            if (!q->other)
                q->other = log_cache.kept[i].pid;
        }
    return 0;
}

static int whole_log_answer(question *q, int *other)
{
    q->other = 0;
    int found = read_whole_log(q);
    *other = q->other;
    return found;
}

int gmp_kernel_log_names_victim(int pid, uint64_t start_ticks, int *other)
{
    long hz = sysconf(_SC_CLK_TCK);
    question q = {pid, hz > 0 ? start_ticks * (1000000 / (uint64_t)hz) : 0, 0, 0};
    *other = 0;
    if (__atomic_exchange_n(&log_cache.busy, 1, __ATOMIC_ACQUIRE))
        return whole_log_answer(&q, other); /* another thread reads the cache's */
    if (log_cache.open && log_cache.pid != getpid()) {
        __atomic_store_n(&log_cache.busy, 0, __ATOMIC_RELEASE);
        return whole_log_answer(&q, other);
    }
    if (!log_cache.open && (log_cache.fd = open_log()) >= 0) {
        log_cache.open = 1;
        log_cache.pid = getpid();
    }
    int said = -1;
    if (log_cache.open) {
        if (read_records(log_cache.fd, keep_victim, NULL,
                         log_cache.from_ticks ? NULL : &log_cache.oldest_us))
            said = cached_answer(&q, start_ticks);
    }
    __atomic_store_n(&log_cache.busy, 0, __ATOMIC_RELEASE);
    if (said >= 0) {
        *other = said ? 0 : q.other;
        return said;
    }
    return log_cache.open ? whole_log_answer(&q, other) : 0;
}

void gmp_kernel_log_follow(void)
{
    if (__atomic_exchange_n(&log_cache.busy, 1, __ATOMIC_ACQUIRE))
        return;
    if (log_cache.open) {
        if (log_cache.pid == getpid()) /* read from the first: stays whole */
            read_records(log_cache.fd, keep_victim, NULL,
                         log_cache.from_ticks ? NULL : &log_cache.oldest_us);
    } else if ((log_cache.fd = open_log()) >= 0) {
        uint64_t now = gmp_clock_ticks_now();
        if (now && lseek(log_cache.fd, 0, SEEK_END) >= 0) {
            log_cache.from_ticks = now;
            log_cache.open = 1;
            log_cache.pid = getpid();
        } else {
            close(log_cache.fd);
        }
    }
    __atomic_store_n(&log_cache.busy, 0, __ATOMIC_RELEASE);
}
