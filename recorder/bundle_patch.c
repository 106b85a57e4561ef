/*
 * bundle_patch.c — fills in the exception of a bundle already written.
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
            unlinkat(dirfd, TMP_NAME, 0);
            fd = openat(dirfd, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600);
            if (fd >= 0) {
                int ok = gmp_write_all(fd, out, total) == 0;
                close(fd);
                if (ok && renameat(dirfd, TMP_NAME, dirfd, "metadata.json") == 0)
                    rc = 0;
                else
                    unlinkat(dirfd, TMP_NAME, 0);
            }
        }
    }
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}
