/*
 * output.c — a verb's output file (-o FILE of plot and export): written to
 * a temporary file of its own in FILE's directory, mode 0600 (it carries
 * process names, hosts and module paths out of bundles that are 0600),
 * and renamed over FILE once whole.  So no symlink at FILE is followed (a
 * file in /tmp cannot redirect the write), no FIFO there is opened (and
 * blocked on), and nobody reads half a file.
 */
#include "inspect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *out_open(out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    if (slash == path) /* a file in / */
        dir_len = 0;
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path ||
        (size_t)snprintf(o->tmp, sizeof o->tmp, "%.*s/.gmp-inspect-XXXXXX", dir_len, dir) >=
            sizeof o->tmp) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = mkstemp(o->tmp); /* O_EXCL, mode 0600 */
    if (fd < 0)
        return NULL;
    o->f = fdopen(fd, "w");
    if (!o->f) {
        close(fd);
        unlink(o->tmp);
    }
    return o->f;
}

int out_commit(out_file *o)
{
    int bad = fclose(o->f) != 0;
    o->f = NULL;
    if (bad || rename(o->tmp, o->path) != 0) {
        unlink(o->tmp);
        return -1;
    }
    return 0;
}
