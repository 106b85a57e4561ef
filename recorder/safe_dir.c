/*
 * safe_dir.c — opening a directory that a user's path names (the dump
 * directory, the run directory) so that no other user can redirect it.
 * Both often sit in shared places (/tmp, a sticky scratch space) where
 * another user can plant a symlink at any component before we arrive.  The
 * path is walked one component at a time with openat(O_NOFOLLOW |
 * O_DIRECTORY): a symlink on the way is followed only when root or the
 * caller owns it (the kernel's protected_symlinks rule: /home -> /gpfs/home
 * still works), the last
 * component is never a symlink (also when the path ends in "/" or "/."),
 * and the directory reached must be the caller's.  System calls only and a
 * stack buffer: safe where a bundle is written from a signal handler.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(int fd, char *why, size_t why_cap, const char *what, int err)
{
    if (fd >= 0)
        close(fd);
    if (why)
        gmp_strlcpy(why, what, why_cap);
    errno = err;
    return -1;
}

/* One component below dirfd; a symlink only as the rule above allows.  On
 * the way, O_PATH: a directory we may cross but not list (0711) is fine. */
static int open_component(int dirfd, const char *name, int last, int create, mode_t mode)
{
    const int flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_CLOEXEC;
    int fd = openat(dirfd, name, flags | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
            return -1;
        fd = openat(dirfd, name, flags | O_NOFOLLOW);
    }
    if (fd >= 0 || (errno != ELOOP && errno != ENOTDIR))
        return fd;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode)) {
        errno = ENOTDIR; /* a file where a directory should be */
        return -1;
    }
    if (last || (st.st_uid != 0 && st.st_uid != geteuid())) {
        errno = ELOOP;
        return -1;
    }
    return openat(dirfd, name, flags);
}

int gmp_dir_open_safely(const char *path, int create, mode_t mode, char *why, size_t why_cap)
{
    char buf[4096];
    if (!path[0] || gmp_strlcpy(buf, path, sizeof buf) < 0)
        return refuse(-1, why, why_cap, "the path is empty or too long", ENAMETOOLONG);
    /* "a/b/" and "a/b/." name b itself: never a way through a symlink at b */
    char *end = buf + strlen(buf);
    while (end - buf > 1 &&
           (end[-1] == '/' || (end[-1] == '.' && (end - 1 == buf || end[-2] == '/'))))
        *--end = '\0';
    int fd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return refuse(-1, why, why_cap, gmp_strerror(errno), errno);
    int reached = 0; /* fd is the directory named, opened for reading */
    for (char *p = buf; *p;) {
        p += strspn(p, "/");
        char *slash = strchr(p, '/');
        if (slash)
            *slash = '\0';
        int last = !slash || !slash[1 + strspn(slash + 1, "/")];
        if (*p && strcmp(p, ".") != 0) {
            int next = open_component(fd, p, last, create, mode);
            if (next < 0) {
                int err = errno;
                struct stat st; /* a directory we may not even open: whose? */
                if (last && err == EACCES && fstatat(fd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    st.st_uid != geteuid())
                    return refuse(fd, why, why_cap, "it belongs to another user", EPERM);
                return refuse(fd, why, why_cap,
                              err != ELOOP ? gmp_strerror(err)
                              : last       ? "it is a symbolic link (refused)"
                                           : "a symbolic link on the way is neither root's "
                                             "nor yours (refused)",
                              err);
            }
            close(fd);
            fd = next;
            reached = last;
        }
        if (!slash)
            break;
        p = slash + 1;
    }
    if (!reached) { /* "/", ".", "./": the start itself, for reading */
        int rd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(fd);
        if (rd < 0)
            return refuse(-1, why, why_cap, gmp_strerror(errno), errno);
        fd = rd;
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return refuse(fd, why, why_cap, gmp_strerror(errno), errno);
    if (st.st_uid != geteuid())
        return refuse(fd, why, why_cap, "it belongs to another user", EPERM);
    return fd;
}
