/*
 * fds.c — closing every descriptor from one up, between fork and exec: the
 * children gmp-run starts (its relay and canary) and the Slurm plugin's
 * recover, which must hold nothing of slurmstepd's.  A file of its own so
 * that the plugin, which links only what it needs, can take it alone.
 */
#include "util.h"

#include <sys/syscall.h>
#include <unistd.h>

/* close_range (Linux 5.9) where the kernel has it, else one by one.
 * System calls only: a threaded parent's child may find its locks held. */
void gmp_close_from(int first)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0u, 0) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = first; fd < (max > 0 && max < 1 << 20 ? max : 1 << 16); fd++)
        close((int)fd);
}
