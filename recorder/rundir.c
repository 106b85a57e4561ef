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
    struct stat st;
    if (lstat(path, &st) < 0) {
        gmp_strlcpy(why, gmp_strerror(errno), why_cap);
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        gmp_strlcpy(why, "it is a symbolic link", why_cap);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        gmp_strlcpy(why, "it is not a directory", why_cap);
        return -1;
    }
    if (st.st_uid != getuid()) {
        gmp_strlcpy(why, "it belongs to another user", why_cap);
        return -1;
    }
    if (st.st_mode & 077) {
        gmp_strlcpy(why, "it is open to group or others (want 0700)", why_cap);
        return -1;
    }
    return 0;
}
