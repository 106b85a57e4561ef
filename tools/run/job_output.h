/*
 * job_output.h — the job's stderr as gmp-run reads it (job_output.c): read
 * back from a regular file, passed on from a pipe, a terminal left alone.
 */
#ifndef GMP_JOB_OUTPUT_H
#define GMP_JOB_OUTPUT_H

#include <stddef.h>

/* Before the fork: what gmp-run's stderr is, and a pipe of its own for the
 * job when it is one. */
void job_output_prepare(void);
/* In the child, before the exec: the job's stderr (and its stdout, when it
 * is the same pipe) made gmp-run's pipe. */
void job_output_in_child(void);
/* In gmp-run after the fork. */
void job_output_after_fork(void);
/* The pipe to wait on for the job's output, or -1. */
int job_output_fd(void);
/* Pass on what the job wrote since (never waits). */
void job_output_pump(void);
/* The command has ended: what is left passed on; a process of the job that
 * still holds the pipe is served to its end by a copy of gmp-run. */
void job_output_finish(void);
/* Where the job's stderr ends now (a position to read from later), or -1
 * when it cannot be read. */
long long job_output_offset(void);
/* What the job wrote to stderr since position from, at most its last
 * cap - 1 bytes, NUL-terminated in out; returns how many. */
size_t job_output_since(long long from, char *out, size_t cap);

#endif
