/*
 * output.c — what a verb writes: its JSON on stdout (print_json), and its
 * output file (-o FILE of plot and export).  A file
 * that is not there, or a regular file, is written to a temporary file of
 * its own beside it, mode 0600 (it carries process names, hosts and module
 * paths out of bundles that are 0600), and renamed over the name once
 * whole: nobody reads half a file, and a file another user plants later
 * changes nothing.  A device (/dev/null, a terminal) is written where it
 * is; a symlink is followed only when the caller or root owns it (so
 * /dev/stdout works, and one another user planted in /tmp redirects
 * nothing); a FIFO is written only when a reader has it open, never
 * waited on.
 */
#include "verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where a new file goes: a temporary one beside path. */
static FILE *open_beside(out_file *o, const char *path)
{
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    if (slash == path) /* a file in / */
        dir_len = 0;
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%.*s/.gmp-inspect-XXXXXX", dir_len, dir) >=
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

FILE *out_open(out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    struct stat link, st;
    if (lstat(path, &link) != 0)
        return errno == ENOENT ? open_beside(o, path) : NULL;
    if (S_ISLNK(link.st_mode) && link.st_uid != 0 && link.st_uid != geteuid()) {
        errno = EPERM; /* planted: followed, it would write where its owner chose */
        return NULL;
    }
    if (stat(path, &st) != 0)
        return S_ISLNK(link.st_mode) && errno == ENOENT ? open_beside(o, path) : NULL;
    if (S_ISREG(st.st_mode) && !S_ISLNK(link.st_mode))
        return open_beside(o, path);
    /* a device, a pipe (/dev/stdout), or what a symlink of ours or root's
     * names: written where it is.  A FIFO opens only when a reader is there
     * (non-blocking: ENXIO otherwise), never waited on. */
    int fifo = S_ISFIFO(st.st_mode);
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0) |
                            (S_ISREG(st.st_mode) ? O_TRUNC : 0));
    if (fd < 0)
        return NULL;
    if (fifo) /* writes then wait for the reader, as any pipe's do */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    o->direct = 1;
    o->f = fdopen(fd, "w");
    if (!o->f)
        close(fd);
    return o->f;
}

int out_commit(out_file *o)
{
    int bad = fclose(o->f) != 0;
    o->f = NULL;
    if (o->direct)
        return bad ? -1 : 0;
    if (bad || rename(o->tmp, o->path) != 0) {
        unlink(o->tmp);
        return -1;
    }
    return 0;
}

int print_json(json_t *doc)
{
    int bad = !doc || json_dumpf_exact(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0 ||
              putchar('\n') == EOF;
    json_decref(doc);
    return bad ? -1 : 0;
}
