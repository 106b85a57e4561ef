/*
 * group_signal.h — which signals gmp-run got were sent to its whole
 * process group, and so reached its command already (group_signal.c).
 */
#ifndef GMP_GROUP_SIGNAL_H
#define GMP_GROUP_SIGNAL_H

#include <stddef.h>
#include <sys/types.h>

/* Before the command's fork: the canary, a child that stays in gmp-run's
 * process group and notes each of sigs that reaches it.  0, or -1 when it
 * cannot be had (then every signal is passed on at once). */
int group_signal_start(const int *sigs, size_t n);
/* The canary's pid (not a process of the job), or 0. */
int group_signal_canary_pid(void);
/* The canary is gone (reaped): signals are passed on at once from now. */
void group_signal_canary_gone(void);
/* From gmp-run's signal handler: a signal a process sent (SI_USER), to
 * pass on to the command unless its group had it.  0 when noted, -1 when
 * it must be passed on now (no canary). */
int group_signal_note(int sig, pid_t sender);
/* The descriptors a wait should wake for (n filled, at most 2). */
size_t group_signal_fds(int *fds);
/* Pass on to command each noted signal that the canary did not get from
 * the same sender within the wait; nanoseconds until the next is due, or
 * -1 when none waits. */
long long group_signal_settle(pid_t command, long long now_ns);
/* The end: the canary killed and reaped. */
void group_signal_stop(void);

#endif
