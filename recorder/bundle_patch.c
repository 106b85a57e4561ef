/*
 * bundle_patch.c — fills in the exception of a bundle already written, and
 * adds a file to one (the Python traceback a framework printed after it).
 *
 * A framework's own message ("torch.OutOfMemoryError: CUDA out of memory.
 * Tried to allocate ...") often reaches stderr just after the failing call
 * whose bundle was written: its type, module and message then replace those
 * fields in metadata.json, which is rewritten under a hidden name and
 * renamed over the old one, so a reader sees either file whole.  The file is
 * ours, written by jsonw.c, so its fields are found as text; nothing else
 * in it changes.  Uses only the caller's buffer.
 */
#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TMP_NAME ".metadata.json.tmp"
#define MANIFEST_TMP_NAME ".manifest.json.tmp"

/* name in dirfd replaced by data whole: written under tmp, renamed over. */
static int replace_file(int dirfd, const char *tmp, const char *name, const char *data,
                        size_t len)
{
    unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = gmp_write_all(fd, data, len) == 0;
    close(fd);
    if (ok && renameat(dirfd, tmp, dirfd, name) == 0)
        return 0;
    unlinkat(dirfd, tmp, 0);
    return -1;
}

int gmp_bundle_patch_exception(const char *bundle, const char *type, const char *module,
                               const char *message, char *buf, size_t cap)
{
    size_t half = cap / 2;
    char *in = buf, *out = buf + half;
    int dirfd = open(bundle, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return -1;
    int rc = -1;
    int fd = openat(dirfd, "metadata.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = -1;
    if (fd >= 0) {
        n = read(fd, in, half - 1);
        close(fd);
    }
    char *start = NULL, *end = NULL;
    if (n > 0 && (size_t)n < half - 1) {
        in[n] = '\0';
        start = strstr(in, "\"exception_type\":");
        end = start ? strstr(start, ",\"context\":") : NULL;
    }
    if (end) {
        /* {"exception_type":...,"exception_module":...,"exception_message":...} */
        char fields[2048];
        gmp_jw w;
        gmp_jw_init(&w, -1, fields, sizeof fields);
        gmp_jw_obj_begin(&w);
        gmp_jw_kstr(&w, "exception_type", type);
        gmp_jw_kstr(&w, "exception_module", module);
        gmp_jw_kstr(&w, "exception_message", message);
        gmp_jw_obj_end(&w);
        int whole = gmp_jw_finish(&w) == 0; /* NUL-terminates fields */
        size_t head = (size_t)(start - in), flen = whole ? strlen(fields) : 0, tail = strlen(end);
        if (whole && flen >= 2 && head + flen + tail < half) {
            memcpy(out, in, head);
            memcpy(out + head, fields + 1, flen - 2); /* without the braces */
            memcpy(out + head + flen - 2, end, tail);
            size_t total = head + flen - 2 + tail;
            rc = replace_file(dirfd, TMP_NAME, "metadata.json", out, total);
        }
    }
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

int gmp_bundle_add_file(const char *bundle, const char *name, const char *data, size_t len,
                        char *buf, size_t cap)
{
    int dirfd = open(bundle, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return -1;
    int rc = -1;
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) { /* never over one the bundle has */
        int ok = gmp_write_all(fd, data, len) == 0;
        close(fd);
        ssize_t n = -1;
        int mfd = ok ? openat(dirfd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (mfd >= 0) {
            n = read(mfd, buf, cap / 2);
            close(mfd);
        }
        /* "files":["manifest.json",... -> "files":["NAME","manifest.json",... */
        char *files = NULL;
        if (n > 0 && (size_t)n < cap / 2) {
            buf[n] = '\0';
            files = strstr(buf, "\"files\":[");
        }
        size_t nl = strlen(name);
        if (files && (size_t)n + nl + 3 < cap / 2) {
            char *out = buf + cap / 2;
            size_t head = (size_t)(files - buf) + 9;
            memcpy(out, buf, head);
            out[head] = '"';
            memcpy(out + head + 1, name, nl);
            int alone = buf[head] == ']'; /* an empty list takes no comma */
            memcpy(out + head + 1 + nl, "\",", alone ? 1 : 2);
            size_t at = head + (alone ? 2 : 3) + nl;
            memcpy(out + at, buf + head, (size_t)n - head);
            rc = replace_file(dirfd, MANIFEST_TMP_NAME, "manifest.json", out,
                              at + (size_t)n - head);
        }
        if (rc < 0)
            unlinkat(dirfd, name, 0); /* listed nowhere: not left behind */
    }
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}
