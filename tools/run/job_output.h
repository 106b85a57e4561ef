/*
 * job_output.h — the job's stderr as gmp-run reads it (job_output.c): read
 * back from a regular file, passed on from a pipe by a relay process, a
 * terminal left alone.
 */
#ifndef GMP_JOB_OUTPUT_H
#define GMP_JOB_OUTPUT_H

#include <stddef.h>

/* Before the fork: what gmp-run's stderr is, and when it is a pipe, a pipe
 * for the job and the relay that passes it on. */
void job_output_prepare(void);
/* In the child, before the exec: the job's stderr (and its stdout, when it
 * is the same pipe) made gmp-run's pipe. */
void job_output_in_child(void);
/* In gmp-run after the fork. */
void job_output_after_fork(void);
/* The relay's pid (not a process of the job), or 0 when there is none. */
int job_output_relay_pid(void);
/* The command has ended: the relay given a moment to pass on its last
 * bytes and end (a daemon's pipe it goes on serving). */
void job_output_finish(void);
/* Where the job's stderr ends now (a position to read from later), or -1
 * when it cannot be read. */
long long job_output_offset(void);
/* What the job wrote to stderr since position from, at most its last
 * cap - 1 bytes, NUL-terminated in out; returns how many. */
size_t job_output_since(long long from, char *out, size_t cap);

#endif
