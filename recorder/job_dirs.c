/*
 * job_dirs.c — gmp-run's job directories: one per gmp-run, inside the
 * per-user run directory, named gmp-run-XXXXXX, where every process of its
 * command keeps its ring.  gmp-run holds an flock on the directory for its
 * whole life; a directory no one holds is a job whose gmp-run is gone
 * (ended, or killed by SIGKILL with its command).  Such a job is swept by
 * the next gmp-run and by `gmp-inspect recover`: the rings of its dead
 * processes become bundles, and the directory goes once it is empty.  A
 * process that outlives its gmp-run removes the directory itself when its
 * ring was the last (gmp_job_dir_leave), so a finished job leaves nothing.
 *
 * A new directory is made under a name the sweep does not take
 * (.gmp-run-new-XXXXXX), held, and only then renamed: a sweep can never
 * find it unheld and empty before its gmp-run holds it.
 */
#include "gpumemprof.h"
#include "ring_recovery.h"
#include "rundir.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JOB_PREFIX "gmp-run-"
#define NEW_PREFIX ".gmp-run-new-"
#define NEW_ABANDONED_S 60 /* a new directory its maker never renamed: gone after this */

int gmp_job_dir_make(const char *run_dir, char *out, size_t cap, char *why, size_t why_cap)
{
    if (gmp_run_dir_ensure(run_dir, why, why_cap) < 0)
        return -1;
    char fresh[4096];
    gmp_strjoin(fresh, sizeof fresh, run_dir, "/" NEW_PREFIX "XXXXXX", (char *)NULL);
    if (!mkdtemp(fresh)) {
        gmp_strlcpy(why, strerror(errno), why_cap);
        return -1;
    }
    int fd = open(fresh, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        gmp_strlcpy(why, strerror(errno), why_cap);
        if (fd >= 0)
            close(fd);
        rmdir(fresh);
        return -1;
    }
    gmp_strjoin(out, cap, run_dir, "/" JOB_PREFIX, strrchr(fresh, '-') + 1, (char *)NULL);
    if (rename(fresh, out) < 0) {
        gmp_strlcpy(why, strerror(errno), why_cap);
        close(fd);
        rmdir(fresh);
        return -1;
    }
    return fd;
}

/* The directory at dirfd/name, if no one holds it: an fd that holds it now
 * (the caller closes it), else -1. */
static int take_unheld(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_uid != getuid() || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int gmp_job_dirs_sweep(const char *run_dir, const gmp_recover_options *opt,
                       gmp_recover_report_fn report, void *arg)
{
    int dirfd = gmp_run_dir_open(run_dir, NULL, 0);
    if (dirfd < 0)
        return errno == ENOENT ? 0 : -1;
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return -1;
    }
    int written = 0;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int job = !strncmp(e->d_name, JOB_PREFIX, strlen(JOB_PREFIX));
        int fresh = !strncmp(e->d_name, NEW_PREFIX, strlen(NEW_PREFIX));
        if (!job && !fresh)
            continue;
        int held = take_unheld(dirfd, e->d_name);
        if (held < 0)
            continue;
        char path[4096];
        gmp_strjoin(path, sizeof path, run_dir, "/", e->d_name, (char *)NULL);
        struct stat st;
        if (job) {
            int n = gmp_rings_recover(path, opt, report, arg);
            written += n > 0 ? n : 0;
            unlinkat(held, GMP_RUN_ENDS_FILE, 0); /* its gmp-run, which told them, is gone */
            rmdir(path); /* not while a process of the job still lives (its ring) */
        } else if (fstat(held, &st) == 0 && now - st.st_mtime > NEW_ABANDONED_S) {
            rmdir(path);
        }
        close(held);
    }
    closedir(d);
    return written;
}

int gmp_is_job_dir(const char *dir)
{
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    return !strncmp(base, JOB_PREFIX, strlen(JOB_PREFIX));
}

void gmp_job_dir_leave(const char *dir)
{
    if (!gmp_is_job_dir(dir))
        return;
    int saved = errno;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* its gmp-run is gone: none reads */
            unlinkat(fd, GMP_RUN_ENDS_FILE, 0);  /* the ends it would have told */
            rmdir(dir);                          /* only when this ring was the last */
        }
        close(fd);
    }
    errno = saved;
}
