/*
 * shm_fault.c — a death of shared memory that no call returns: a process
 * that maps a file of a tmpfs shared (POSIX shared memory in /dev/shm,
 * Python's multiprocessing.shared_memory, PyTorch's shared tensors) gets
 * its pages only as it touches them, and when the tmpfs is full the kernel
 * has none to give: SIGBUS, where malloc would have returned NULL.  A
 * container's /dev/shm is 64 MiB unless --shm-size says more.
 *
 * The crash handler asks here (episode.c) whether its SIGBUS is that one:
 * a fault on an address the kernel could not back (BUS_ADRERR), inside a
 * shared mapping of a file on a sized tmpfs with less than a page left (a
 * touch past a file's end faults the same way, with room to spare).  Then
 * it is a failed allocation (one page, ENOSPC, as the filesystem says it),
 * and the bundle names the file and the room.  Runs in the signal handler:
 * /proc/self/maps read into a static buffer, statfs; no allocation, no
 * lock.  The mmap hook asks here too whether a mapping could meet that
 * death, to arm the handlers.
 */
#include "bundle.h"
#include "preload.h"

#include <errno.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A tmpfs of a size, which a process can fill: a memfd's (the kernel's own
 * mount) has none, and its pages come from memory like any other's. */
static int sized_tmpfs(const struct statfs *fs)
{
    return fs->f_type == TMPFS_MAGIC && fs->f_blocks > 0;
}

int gmp_shm_fd_can_fill(int fd)
{
    struct statfs fs;
    return fstatfs(fd, &fs) == 0 && sized_tmpfs(&fs);
}

typedef struct shared_at {
    uintptr_t addr;
    char path[GMP_PATH_MAX]; /* "" until the mapping that holds addr is found shared */
} shared_at;

static void shared_mapping(const char *line, void *arg)
{
    shared_at *s = arg;
    char *end;
    uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
    uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, &end, 16) : 0;
    /* "start-end rw-s offset dev inode /dev/shm/psm_1f2e (deleted)" */
    if (s->addr < lo || s->addr >= hi || *end != ' ' || strlen(end) < 5 || end[4] != 's')
        return;
    const char *path = strchr(end, '/');
    if (!path)
        return;
    gmp_strlcpy(s->path, path, sizeof s->path);
    size_t n = strlen(s->path);
    static const char deleted[] = " (deleted)"; /* unlinked while mapped: its directory's room */
    if (n > sizeof deleted - 1 && !strcmp(s->path + n - (sizeof deleted - 1), deleted))
        s->path[n - (sizeof deleted - 1)] = '\0';
}

/* The filesystem of path, or of its directory when the file is gone. */
static int statfs_of(const char *path, struct statfs *fs)
{
    if (statfs(path, fs) == 0)
        return 0;
    char dir[GMP_PATH_MAX];
    gmp_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    slash[slash == dir] = '\0'; /* "/x" -> "/" */
    return statfs(dir, fs);
}

int gmp_shm_fault(const siginfo_t *info, gmp_failed_request *f, char *detail, size_t cap)
{
    if (!info || info->si_signo != SIGBUS || info->si_code != BUS_ADRERR)
        return 0;
    static char maps[8192];
    static shared_at at;
    at.addr = (uintptr_t)info->si_addr;
    at.path[0] = '\0';
    gmp_maps_foreach(maps, sizeof maps, shared_mapping, &at);
    struct statfs fs;
    if (!at.path[0] || statfs_of(at.path, &fs) != 0 || !sized_tmpfs(&fs))
        return 0;
    uint64_t unit = fs.f_frsize ? (uint64_t)fs.f_frsize : (uint64_t)fs.f_bsize;
    uint64_t room = (uint64_t)fs.f_bavail * unit, page = (uint64_t)getpagesize();
    if (room >= page)
        return 0; /* room for the page: a touch past the file's end, not a full tmpfs */
    memset(f, 0, sizeof *f);
    f->present = 1;
    f->api = GMP_API_MMAP;
    f->size = page;
    f->device = -1;
    f->code = ENOSPC;
    f->in_use = gmp_host_in_use();
    f->time_ns = gmp_now_realtime_ns();
    f->stack_id = gmp_stack_id_in_tables_made();
    f->stack_depth = gmp_stack_capture(f->stack, GMP_STACK_MAX);
    char total[32], left[32];
    gmp_fmt_bytes((uint64_t)fs.f_blocks * unit, total);
    gmp_fmt_bytes(room, left);
    gmp_strjoin(detail, cap, " It touched a page of ", at.path, ", shared memory on a tmpfs of ",
                total, " with ", left, " free.", (char *)NULL);
    return 1;
}
