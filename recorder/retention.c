/*
 * retention.c — keeps a dump directory within max_dumps bundles and
 * max_total_mb, removing the oldest bundles first.
 *
 * Rules: only real directories named oom_dump_* whose manifest.json names
 * them (ours, or the Python recorder's) count and are ever removed, and in
 * them only the caller's own files (never a symlink's target, never another
 * user's file); a bundle that cannot be removed is passed over, not a stop
 * for everyone's retention; the bundle just written (keep) survives
 * even when it alone is over the size cap — unlike the Python recorder,
 * which would delete it; every process writing into the directory takes the
 * same flock first, so two writers never prune the same bundle.  The lock is
 * tried without blocking for up to two seconds, so a dump from a signal
 * handler can never deadlock on it.  Directories are read with getdents64
 * into a stack buffer (opendir allocates) and the oldest is found by
 * repeated scans, so nothing is allocated however many bundles there are.
 * Age is the manifest's created_at_ns (the name's time in seconds and the
 * directory's mtime for bundles without one, e.g. the Python recorder's).
 * Temporaries of writers that died mid-bundle (.tmp_oom_dump_*, pid gone,
 * older than a minute) are removed too, and gmp-run's notes of a run's
 * ranks (run_ends_*.txt) once the bundles of their runs are all gone.
 *
 * A bundle written for a stderr message alone (reason message_pattern:...)
 * says less than one written for a failed allocation: such bundles go
 * first, and one just written never evicts a bundle of a failed allocation
 * (the directory then stays one over its count until the next bundle).
 * Then the bundles of a distributed run after its first ("run_first":
 * false in the manifest: another bundle of that run was there when it was
 * written): when every rank runs out, the first is the root cause, and the
 * ranks the launcher stopped go before it, oldest first.
 */
#include "bundle.h"
#include "ring_recovery.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME ".gmp-retention.lock"
#define LOCK_TRIES 200 /* x 10 ms */
#define STALE_TMP_SECONDS 60

/* "oom_dump_YYYYMMDDTHHMMSSZ_..." -> seconds since the epoch, or -1. */
static int64_t name_time(const char *name)
{
    const char *p = name + strlen(GMP_BUNDLE_PREFIX);
    int v[6] = {0};
    static const int widths[6] = {4, 2, 2, 2, 2, 2};
    for (int f = 0; f < 6; f++) {
        if (f == 3) {
            if (*p++ != 'T')
                return -1;
        }
        for (int k = 0; k < widths[f]; k++, p++) {
            if (*p < '0' || *p > '9')
                return -1;
            v[f] = v[f] * 10 + (*p - '0');
        }
    }
    if (*p != 'Z')
        return -1;
    /* days from civil (Howard Hinnant) */
    int y = v[0] - (v[1] <= 2);
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (v[1] + (v[1] > 2 ? -3 : 9)) + 2) / 5 + v[2] - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    return days * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
}

typedef struct bundle_info {
    int64_t created_ns; /* manifest's created_at_ns, else name time + mtime */
    uint64_t bytes;
    int message_only;   /* written for a stderr message alone */
    int follower;       /* a run's bundle after its first ("run_first": false) */
} bundle_info;

/* Does the manifest say "bundle_name": "<name>" (either spacing)? */
static int names_itself(const char *manifest, const char *name)
{
    const char *p = strstr(manifest, "\"bundle_name\"");
    if (!p)
        return 0;
    p += strlen("\"bundle_name\"");
    p += strspn(p, " \t\n\r");
    if (*p++ != ':')
        return 0;
    p += strspn(p, " \t\n\r");
    size_t n = strlen(name);
    return *p == '"' && !strncmp(p + 1, name, n) && p[1 + n] == '"';
}

int gmp_manifest_read(int bfd, const char *name, char *buf, size_t cap)
{
    int fd = openat(bfd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, cap - 1) : -1;
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return names_itself(buf, name) ? 0 : -1;
}

/* From the bundle's manifest.json, when it is a regular file that names
 * the bundle (else 0: not a bundle of ours): created_at_ns (-1 when absent;
 * file timestamps are jiffy-coarse and names have whole seconds: neither
 * orders bundles written by many processes in one second), whether its
 * reason is a message pattern, and whether it followed its run's first. */
static int read_manifest(int bfd, const char *name, int64_t *created_ns, int *message_only,
                         int *follower)
{
    static const char key[] = "\"created_at_ns\":";
    char buf[4096];
    *message_only = 0;
    *follower = 0;
    *created_ns = -1;
    if (gmp_manifest_read(bfd, name, buf, sizeof buf) < 0)
        return 0;
    *message_only = strstr(buf, "\"reason\":\"message_pattern:") != NULL;
    *follower = strstr(buf, "\"run_first\":false") != NULL;
    const char *p = strstr(buf, key);
    if (!p)
        return 1;
    p += sizeof key - 1;
    int64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 19; p++, digits++)
        v = v * 10 + (*p - '0');
    if (digits)
        *created_ns = v;
    return 1;
}

static int add_file_size(int dirfd, const char *name, void *arg)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        *(uint64_t *)arg += (uint64_t)st.st_size;
    return 0;
}

/* Is name a real bundle directory?  Fills info. */
static int bundle_stat(int dirfd, const char *name, bundle_info *info)
{
    if (strncmp(name, GMP_BUNDLE_PREFIX, strlen(GMP_BUNDLE_PREFIX)) != 0)
        return 0;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    int64_t secs = name_time(name);
    if (secs < 0)
        secs = st.st_mtim.tv_sec;
    info->created_ns = secs * 1000000000 + st.st_mtim.tv_nsec % 1000000000;
    info->bytes = (uint64_t)st.st_size;
    info->message_only = 0;
    info->follower = 0;
    int bfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return 0;
    int64_t exact;
    int ours = read_manifest(bfd, name, &exact, &info->message_only, &info->follower);
    if (ours && exact > 0)
        info->created_ns = exact;
    if (ours)
        gmp_dir_foreach(bfd, add_file_size, &info->bytes);
    close(bfd);
    return ours;
}

static int unlink_entry(int dirfd, const char *name, void *arg)
{
    (void)arg;
    struct stat st;
    /* the caller's files and symlinks (never their targets); a subdirectory,
     * or another user's file, stays and keeps the bundle */
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid())
        unlinkat(dirfd, name, 0);
    return 0;
}

/* A bundle goes from readers' sight whole: renamed to a temporary's name
 * first (".tmp_oom_dump_...", which a later prune removes once its writer
 * is gone, should this one be killed half-way), then emptied and removed.
 * Emptied in place, a writer killed in between left a visible bundle with
 * no manifest. */
static int remove_bundle(int dirfd, const char *name)
{
    char hidden[300];
    const char *was = name;
    size_t pl = strlen(GMP_BUNDLE_TMP_PREFIX);
    if (strncmp(name, GMP_BUNDLE_TMP_PREFIX, pl) != 0 && !strncmp(name, "oom_dump_", 9) &&
        pl + strlen(name + 9) < sizeof hidden) {
        gmp_strjoin(hidden, sizeof hidden, GMP_BUNDLE_TMP_PREFIX, name + 9, (char *)NULL);
        if (renameat(dirfd, name, dirfd, hidden) == 0)
            name = hidden;
    }
    int bfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = -1;
    if (bfd >= 0) {
        gmp_dir_foreach(bfd, unlink_entry, NULL);
        close(bfd);
        rc = unlinkat(dirfd, name, AT_REMOVEDIR);
    }
    if (rc != 0 && name != was)
        renameat(dirfd, name, dirfd, was); /* another's file kept it: seen again, as it was */
    return rc;
}

int gmp_bundle_remove(const char *path)
{
    char dir[GMP_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= sizeof dir)
        return -1;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    int dirfd = gmp_dir_open_safely(dir, 0, 0, NULL, 0);
    if (dirfd < 0)
        return -1;
    int rc = remove_bundle(dirfd, slash + 1);
    close(dirfd);
    return rc;
}

/* The oldest bundle of one class (the message-only ones, or all). */
typedef struct oldest_of {
    int have;
    bundle_info info;
    char name[256];
} oldest_of;

#define PASSED_OVER_MAX 8 /* bundles that would not go, per call (on a signal's stack) */

typedef struct scan_state {
    const char *keep;
    char (*passed_over)[256];
    int passed_over_count;
    uint64_t count, bytes;
    int keep_is_message_only;
    oldest_of oldest, oldest_message, oldest_follower;
} scan_state;

static int older(const bundle_info *a, const char *an, const bundle_info *b,
                 const char *bn)
{
    if (a->created_ns != b->created_ns)
        return a->created_ns < b->created_ns;
    return strcmp(an, bn) < 0;
}

static void consider(oldest_of *o, const bundle_info *info, const char *name)
{
    if (!o->have || older(info, name, &o->info, o->name)) {
        o->have = 1;
        o->info = *info;
        gmp_strlcpy(o->name, name, sizeof o->name);
    }
}

static int scan_one(int dirfd, const char *name, void *arg)
{
    scan_state *st = arg;
    bundle_info info;
    if (!bundle_stat(dirfd, name, &info))
        return 0;
    /* one that would not go is no longer ours to count */
    for (int i = 0; i < st->passed_over_count; i++)
        if (!strcmp(st->passed_over[i], name))
            return 0;
    st->count++;
    st->bytes += info.bytes;
    if (st->keep && !strcmp(name, st->keep)) {
        st->keep_is_message_only = info.message_only;
        return 0;
    }
    if (strlen(name) >= sizeof st->oldest.name)
        return 0;
    consider(&st->oldest, &info, name);
    if (info.message_only)
        consider(&st->oldest_message, &info, name);
    if (info.follower)
        consider(&st->oldest_follower, &info, name);
    return 0;
}

/* A temporary whose writer is gone: ".tmp_oom_dump_<time>_<pid>_..." */
static int remove_stale_tmp(int dirfd, const char *name, void *arg)
{
    (void)arg;
    size_t pl = strlen(GMP_BUNDLE_TMP_PREFIX);
    if (strncmp(name, GMP_BUNDLE_TMP_PREFIX, pl) != 0)
        return 0;
    const char *p = strchr(name + pl, '_');
    long pid = p ? strtol(p + 1, NULL, 10) : 0;
    struct stat st;
    if (pid <= 0 || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISDIR(st.st_mode))
        return 0;
    if (time(NULL) - st.st_mtim.tv_sec < STALE_TMP_SECONDS)
        return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    remove_bundle(dirfd, name);
    return 0;
}

/* run_ends_<ns>_<pid>.txt: gmp-run's note of the ranks of a run that left
 * no bundle, written after that run's bundles.  Once no bundle older than
 * the note is left, none of the runs it speaks of has a bundle here and
 * triage has nothing to join it to: it goes with them.  Only a regular
 * file of ours. */
static int remove_orphan_run_ends(int dirfd, const char *name, void *arg)
{
    const int64_t *oldest_ns = arg;
    size_t pl = strlen(GMP_RUN_ENDS_NOTE_PREFIX);
    if (strncmp(name, GMP_RUN_ENDS_NOTE_PREFIX, pl) != 0)
        return 0;
    char *end;
    long long ns = strtoll(name + pl, &end, 10);
    struct stat st;
    if (end == name + pl || *end != '_' || ns >= *oldest_ns ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
        return 0;
    unlinkat(dirfd, name, 0);
    return 0;
}

static int take_lock(int dirfd)
{
    int fd = openat(dirfd, LOCK_NAME,
                    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    for (int i = 0; i < LOCK_TRIES; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return -1;
}

int gmp_retention_apply(const char *dump_dir, uint32_t max_dumps,
                        uint64_t max_total_mb, const char *keep)
{
    int dirfd = gmp_dir_open_safely(dump_dir, 0, 0, NULL, 0);
    if (dirfd < 0)
        return -1;
    int lock = take_lock(dirfd);
    if (lock < 0) {
        gmp_log("retention in %s skipped: its lock is busy or cannot be created",
                dump_dir);
        close(dirfd);
        return -1;
    }
    uint64_t max_bytes = max_total_mb * 1024 * 1024;
    int removed = 0, passed_over_count = 0;
    char passed_over[PASSED_OVER_MAX][256];
    for (;;) {
        scan_state st;
        memset(&st, 0, sizeof st);
        st.keep = keep;
        st.passed_over = passed_over;
        st.passed_over_count = passed_over_count;
        if (gmp_dir_foreach(dirfd, scan_one, &st) < 0)
            break;
        int over = (max_dumps && st.count > max_dumps) ||
                   (max_bytes && st.bytes > max_bytes);
        /* message-only bundles first, and a message-only one evicts no
         * other; then the ranks that followed a run's first, before it */
        const oldest_of *victim = st.oldest_message.have      ? &st.oldest_message
                                  : st.keep_is_message_only ? NULL
                                  : st.oldest_follower.have ? &st.oldest_follower
                                                            : &st.oldest;
        if (!over || !victim || !victim->have)
            break;
        if (remove_bundle(dirfd, victim->name) == 0) {
            removed++;
        } else { /* not all ours to remove: the next oldest instead */
            if (passed_over_count == PASSED_OVER_MAX)
                break;
            gmp_strlcpy(passed_over[passed_over_count++], victim->name, 256);
        }
    }
    if (removed) { /* the notes of runs whose bundles are all gone */
        scan_state left;
        memset(&left, 0, sizeof left);
        left.passed_over = passed_over;
        if (gmp_dir_foreach(dirfd, scan_one, &left) == 0) {
            int64_t oldest_ns = left.oldest.have ? left.oldest.info.created_ns : INT64_MAX;
            gmp_dir_foreach(dirfd, remove_orphan_run_ends, &oldest_ns);
        }
    }
    gmp_dir_foreach(dirfd, remove_stale_tmp, NULL);
    close(lock); /* releases the flock */
    close(dirfd);
    return removed;
}
