/*
 * job_watch.h — gmp-run's watch over its job from outside (job_watch.c):
 * a ring for every process of the job, a proxy where it has none of its
 * own, and host samples in it, so a kill leaves a bundle whatever the
 * runtime.
 */
#ifndef GMP_JOB_WATCH_H
#define GMP_JOB_WATCH_H

#include "gpumemprof.h"

#include <stddef.h>

/* The job directory the rings live in, and the config a process of the job
 * goes by (a proxy's bundle goes where the process's own would have). */
void job_watch_init(const char *job_dir, const gmp_config *job);
/* How often gmp-run looks (job_watch_tick): twenty times a second. */
#define JOB_WATCH_LOOK_MS 50

/* One look at every process under gmp-run, at now_ns (CLOCK_MONOTONIC):
 * rings made or found, samples pushed; processes gone since the last look
 * are let go. */
void job_watch_tick(long long now_ns);
/* A proxied process (no preload in it: a Go program) that exited 2: the Go
 * runtime's out-of-memory line written to the job's stderr in its life
 * (job_output.h), into out; 0, or -1 when there is none (or nothing could
 * be read). */
int job_watch_go_last_words(int pid, char *out, size_t cap);
/* gmp-run reaped pid (gmp_rings_reaped judged its rings). */
void job_watch_reaped(int pid);
/* Let every ring go.  The files stay for the reaper and recovery to
 * decide, but for the proxies of processes gone (the job's reapers have
 * read them), and that of a process another reaped since the last look,
 * which goes as the look would have let it go. */
void job_watch_end(void);

#endif
