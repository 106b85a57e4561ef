/*
 * dumpdir.c — where a bundle lands (see dumpdir.h).  The configured dump
 * directory, ./oom_dumps by default, often sits in a shared or borrowed
 * place: another user may have made /tmp/oom_dumps first or planted a
 * symlink there (gmp_dir_open_safely refuses both), or the working
 * directory is read-only.  A bundle is written at the one moment that will
 * not come again, so rather than lose it, it goes to $HOME/oom_dumps —
 * a place only the user can make — and one stderr line says so.  With no
 * home of the user's own, nothing is written, also said in one line.
 */
#include "dumpdir.h"
#include "gpumemprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gmp_dump_dir_fallback(char *out, size_t cap)
{
    const char *home = getenv("HOME");
    struct stat st;
    if (!home || home[0] != '/' || !home[1] || stat(home, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid())
        return -1;
    return gmp_strjoin(out, cap, home, home[strlen(home) - 1] == '/' ? "" : "/", "oom_dumps",
                       (char *)NULL) < 0
               ? -1
               : 0;
}

/* The fallback, when it is not the directory just refused. */
static int home_dump_dir(const char *refused, char *out, size_t cap)
{
    return gmp_dump_dir_fallback(out, cap) < 0 || strcmp(out, refused) == 0 ? -1 : 0;
}

int gmp_dump_dir_open(const char *configured, char *used, size_t used_cap)
{
    char why[96] = "", fallback[GMP_PATH_MAX], fallback_why[96];
    int fd = gmp_dir_open_safely(configured, 1, 0700, why, sizeof why);
    if (fd >= 0) {
        if (gmp_strlcpy(used, configured, used_cap) < 0)
            used[0] = '\0';
        return fd;
    }
    int err = errno;
    const char *verb = err == ELOOP || err == EPERM ? "refusing the" : "cannot create";
    if (home_dump_dir(configured, fallback, sizeof fallback) == 0 &&
        gmp_strlcpy(used, fallback, used_cap) == 0 &&
        (fd = gmp_dir_open_safely(fallback, 1, 0700, fallback_why, sizeof fallback_why)) >= 0) {
        gmp_log("%s dump directory %s: %s; bundles go to %s instead", verb, configured, why,
                fallback);
        return fd;
    }
    gmp_log("%s dump directory %s: %s; no bundle written", verb, configured, why);
    used[0] = '\0';
    errno = err;
    return -1;
}
