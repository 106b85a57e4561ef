/*
 * rundir.c — the per-user runtime directory for live rings (see rundir.h).
 * A ring holds what the program allocated and where; it must never land in
 * a directory another user controls, nor in the program's working directory.
 */
#include "rundir.h"

#include <errno.h>
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
    /* another user may make /tmp/gpumemprof-<uid> first: then the user's own
     * place under $HOME, which nobody else can take (every process of the
     * user, and recover, come to the same answer) */
    struct stat st;
    const char *home = getenv("HOME");
    if (lstat(out, &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != getuid()) && home &&
        home[0] == '/' && home[1] && stat(home, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == getuid()) {
        gmp_strlcpy(out, home, cap);
        gmp_strlcat(out, "/.gpumemprof-run", cap);
    }
}

int gmp_run_dir_taken(const char *configured)
{
    if ((configured && *configured) || getenv("XDG_RUNTIME_DIR"))
        return 0;
    char uid[24], dflt[64];
    gmp_fmt_u64((uint64_t)getuid(), uid);
    gmp_strlcpy(dflt, "/tmp/gpumemprof-", sizeof dflt);
    gmp_strlcat(dflt, uid, sizeof dflt);
    struct stat st;
    return lstat(dflt, &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != getuid());
}

/* A directory opened the safe way (no symlink at its end, none of another
 * user on the way, ours), then closed to group and others: the fd, or -1
 * with errno EPERM for every refusal. */
static int private_dir(int fd, char *why, size_t why_cap)
{
    struct stat st;
    if (fd < 0) {
        if (errno == ELOOP)
            errno = EPERM;
        return -1;
    }
    if (fstat(fd, &st) == 0 && (st.st_mode & 077)) {
        if (why)
            gmp_strlcpy(why, "it is open to group or others (want 0700)", why_cap);
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

int gmp_run_dir_ensure(const char *path, char *why, size_t why_cap)
{
    int fd = private_dir(gmp_dir_open_safely(path, 1, 0700, why, why_cap), why, why_cap);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int gmp_run_dir_open(const char *path, char *why, size_t why_cap)
{
    return private_dir(gmp_dir_open_safely(path, 0, 0, why, why_cap), why, why_cap);
}
