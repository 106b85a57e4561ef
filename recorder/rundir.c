/*
 * rundir.c — the per-user runtime directory for live rings (see rundir.h).
 * A ring holds what the program allocated and where; it must never land in
 * a directory another user controls, nor in the program's working directory.
 */
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gmp_run_dir_resolve(const char *configured, char *out, size_t cap)
{
    if (configured && *configured) {
        gmp_strlcpy(out, configured, cap);
        return;
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/') {
        gmp_strlcpy(out, xdg, cap);
        gmp_strlcat(out, "/gpumemprof", cap);
        return;
    }
    char uid[24];
    gmp_fmt_u64((uint64_t)getuid(), uid);
    gmp_strlcpy(out, "/tmp/gpumemprof-", cap);
    gmp_strlcat(out, uid, cap);
}

int gmp_run_dir_ensure(const char *path, char *why, size_t why_cap)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        /* a missing parent (GMP_RUN_DIR=/a/b/c): create the chain */
        if (errno != ENOENT || gmp_mkdir_p(path, 0700) < 0) {
            gmp_strlcpy(why, gmp_strerror(errno), why_cap);
            return -1;
        }
    }
    int fd = gmp_run_dir_open(path, why, why_cap);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static void say(char *why, size_t why_cap, const char *what)
{
    if (why)
        gmp_strlcpy(why, what, why_cap);
}

int gmp_run_dir_open(const char *path, char *why, size_t why_cap)
{
    /* "dir/" or "dir/." would go through a symlink that O_NOFOLLOW refuses */
    char trimmed[4096];
    if (gmp_strlcpy(trimmed, path, sizeof trimmed) < 0) {
        say(why, why_cap, "the path is too long");
        return -1;
    }
    for (size_t n = strlen(trimmed); n > 1;) {
        if (trimmed[n - 1] == '/')
            trimmed[--n] = '\0';
        else if (n > 2 && trimmed[n - 1] == '.' && trimmed[n - 2] == '/')
            trimmed[n -= 2] = '\0';
        else
            break;
    }
    int fd = open(trimmed, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int err = errno;
        struct stat link;
        /* O_NOFOLLOW with O_DIRECTORY says ENOTDIR of a symlink */
        int seen = lstat(trimmed, &link) == 0;
        say(why, why_cap,
            seen && S_ISLNK(link.st_mode)   ? "it is a symbolic link"
            : seen && link.st_uid != geteuid() ? "it belongs to another user" /* EACCES */
                                              : gmp_strerror(err));
        if (fd >= 0)
            close(fd);
        /* a refusal, as for the checks below, when the path is not ours */
        errno = seen && (S_ISLNK(link.st_mode) || link.st_uid != geteuid()) ? EPERM : err;
        return -1;
    }
    const char *problem = st.st_uid != geteuid() ? "it belongs to another user"
                          : (st.st_mode & 077)   ? "it is open to group or others (want 0700)"
                                                 : NULL;
    if (problem) {
        say(why, why_cap, problem);
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}
