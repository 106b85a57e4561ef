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
 * and the bundle names the file and the room.  A runtime may catch the
 * fault first, print its own words and raise SIGBUS again with the default
 * action (PyTorch's DataLoader workers: "Unexpected bus error encountered
 * in worker. This might be caused by insufficient shared memory"): then
 * the address is gone, and a SIGBUS the process raised itself is that
 * death when one of its shared mappings is of a tmpfs so full.  Runs in
 * the signal handler:
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

/* Whether path is on a sized tmpfs with less than a page left; its size
 * and room then. */
static int full_tmpfs(const char *path, uint64_t *total, uint64_t *room)
{
    struct statfs fs;
    if (statfs_of(path, &fs) != 0 || !sized_tmpfs(&fs))
        return 0;
    uint64_t unit = fs.f_frsize ? (uint64_t)fs.f_frsize : (uint64_t)fs.f_bsize;
    *total = (uint64_t)fs.f_blocks * unit;
    *room = (uint64_t)fs.f_bavail * unit;
    return *room < (uint64_t)getpagesize();
}

typedef struct shared_at {
    uintptr_t addr; /* the fault's; any_full: any mapping will do */
    int any_full;
    char path[GMP_PATH_MAX]; /* "" until the mapping is found, on a full tmpfs */
    char file[GMP_PATH_MAX]; /* the line's (static with the rest: a handler's stack is small) */
    uint64_t total, room;    /* its tmpfs's, once found full */
} shared_at;

/* "start-end rw-s offset dev inode /dev/shm/psm_1f2e (deleted)": the
 * shared mapping of a file that holds addr, or (any_full) the first on a
 * full tmpfs, into s->path. */
static void shared_mapping(const char *line, void *arg)
{
    shared_at *s = arg;
    if (s->path[0])
        return;
    char *end;
    uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
    uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, &end, 16) : 0;
    if ((!s->any_full && (s->addr < lo || s->addr >= hi)) || *end != ' ' || strlen(end) < 5 ||
        end[4] != 's')
        return;
    const char *path = strchr(end, '/');
    if (!path)
        return;
    char *file = s->file;
    gmp_strlcpy(file, path, sizeof s->file);
    size_t n = strlen(file);
    static const char deleted[] = " (deleted)"; /* unlinked while mapped: its directory's room */
    if (n > sizeof deleted - 1 && !strcmp(file + n - (sizeof deleted - 1), deleted))
        file[n - (sizeof deleted - 1)] = '\0';
    if (full_tmpfs(file, &s->total, &s->room))
        memcpy(s->path, file, sizeof s->path);
}

int gmp_shm_fault(const siginfo_t *info, gmp_failed_request *f, char *detail, size_t cap)
{
    if (!info || info->si_signo != SIGBUS)
        return 0;
    /* raised again by the process itself, after a handler of its own */
    int raised = (info->si_code == SI_TKILL || info->si_code == SI_USER) &&
                 info->si_pid == getpid();
    if (info->si_code != BUS_ADRERR && !raised)
        return 0;
    static char maps[8192];
    static shared_at at;
    at.addr = raised ? 0 : (uintptr_t)info->si_addr;
    at.any_full = raised;
    at.path[0] = '\0';
    /* at the fault's address, a tmpfs with room for the page was a touch
     * past the file's end, not a full tmpfs */
    gmp_maps_foreach(maps, sizeof maps, shared_mapping, &at);
    if (!at.path[0])
        return 0;
    uint64_t page = (uint64_t)getpagesize();
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
    gmp_fmt_bytes(at.total, total);
    gmp_fmt_bytes(at.room, left);
    gmp_strjoin(detail, cap,
                raised ? " A handler of its own raised it again, its address gone; it had "
                         "mapped "
                       : " It touched a page of ",
                at.path, ", shared memory on a tmpfs of ", total, " with ", left, " free.",
                (char *)NULL);
    return 1;
}
