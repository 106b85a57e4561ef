/*
 * fuzz_common.h — what the libFuzzer harnesses share: a scratch directory
 * (on /dev/shm when there is one: the harnesses write files every run),
 * writing one file whole, and emptying a directory tree.  The tools print:
 * run.sh passes -close_fd_mask=3, so their output goes nowhere while
 * libFuzzer's and the sanitizers' reports still reach the log.
 */
#ifndef GMP_FUZZ_COMMON_H
#define GMP_FUZZ_COMMON_H

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[256];

static void fuzz_setup(const char *tag)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gmp-fuzz-%s-%d", base, tag, (int)getpid());
    mkdir(fuzz_dir, 0700);
}

static void fuzz_write(const char *path, const void *data, size_t len)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            break;
        p += n;
        len -= (size_t)n;
    }
    close(fd);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

/* Everything under dir, dir itself kept. */
static void fuzz_empty(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
