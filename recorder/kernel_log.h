/*
 * kernel_log.h — the OOM killer's own word on a process, from the kernel
 * log ("Out of memory: Killed process 1234 (python3) ..."): the only
 * evidence that names its victim, asked of each dead process whose ring is
 * recovered.
 */
#ifndef GMP_KERNEL_LOG_H
#define GMP_KERNEL_LOG_H

#include "util.h"

#include <stdint.h>

/* Whether the kernel log (when this user may read it) names pid as the OOM
 * killer's victim after the process started (start_ticks: its /proc
 * starttime; 0 unknown): an earlier process under the same pid is not
 * this one.  When it does not, *other is a victim it names that the OOM
 * killer killed since then (the OOM killer ran, and chose another), or 0:
 * none, or the log cannot say (unreadable, or it no longer reaches back to
 * the process's start). */
GMP_HIDDEN int gmp_kernel_log_names_victim(int pid, uint64_t start_ticks, int *other);

/* From now on this process asks only of processes that start after this
 * call (gmp-run, of its job, before it starts the command): the log is
 * then read from its end onward, never the records already there, which
 * on a long-lived machine number 100,000, a read each. */
GMP_HIDDEN void gmp_kernel_log_follow(void);

#endif
