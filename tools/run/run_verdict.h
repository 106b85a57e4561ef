/*
 * run_verdict.h — gmp-run's last word on a distributed run (run_verdict.c).
 */
#ifndef GMP_RUN_VERDICT_H
#define GMP_RUN_VERDICT_H

/* At gmp-run's end, after the killed processes' bundles are written: the
 * ends the job's processes noted in job_dir (GMP_RUN_ENDS_FILE, then
 * removed); for each run among them that left a bundle in dump_dir, those
 * ends kept there (run_ends_NS_PID.txt, for triage later) and the run's
 * verdict on stderr, as `inspect triage --format line` tells it (inspect:
 * gmp-inspect's path, NULL when none is found: no verdict). */
void run_verdict_tell(const char *job_dir, const char *dump_dir, const char *inspect);

#endif
