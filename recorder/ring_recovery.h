/*
 * ring_recovery.h — rings of other processes: the bundles of processes
 * that died without writing one (a SIGKILL runs nothing: its ring file
 * stays), which rings stay and which go, and gmp-run's job directories.
 * Internal: gmp-run, `gmp-inspect recover`, the preload's wait hooks and
 * the Slurm path use them.
 */
#ifndef GMP_RING_RECOVERY_H
#define GMP_RING_RECOVERY_H

#include "gpumemprof.h"

/* A process killed by SIGKILL (the kernel OOM killer) runs nothing: its ring
 * file stays in the run directory.  gmp-run and `gmp-inspect recover` write
 * its bundle from there.  */

/* The run directory cfg names (GMP_RUN_DIR, else the per-user default). */
GMP_API void gmp_run_dir_path(const gmp_config *cfg, char *out, size_t cap);

/* Remove the ring files this process left under its previous image, before
 * an exec (same pid, same start time): that image did not die.  Returns how
 * many were removed. */
GMP_API int gmp_rings_forget_exec(const char *run_dir);

/* A parent reaped child pid with wait status `status`.  Only the parent
 * learns how a child ended, so it decides what the child's ring means: a
 * death that may be of memory (SIGKILL, or a crash after a failed
 * allocation the child did not write up itself) keeps the ring, with the
 * signal noted for the bundle written from it; an exit, a signal a user or
 * a pipeline sends (SIGPIPE, SIGINT, SIGTERM, ...) or a crash with no
 * failed allocation removes it.  Returns 1 when a ring was kept. */
GMP_API int gmp_rings_reaped(const char *run_dir, int pid, int status);

/* The same note of how a rank ended (GMP_RUN_ENDS_FILE), written by the
 * process itself as a signal that is no death of memory ends it: its ring
 * goes with it, and the parent that reaps it then finds none.  In a signal
 * handler: no allocation. */
struct gmp_ring_header;
GMP_API void gmp_ring_note_own_end(const char *run_dir, const struct gmp_ring_header *h,
                                   int sig);

/* Bounds on the rings of dead processes nobody recovered (0: the default). */
typedef struct gmp_rings_limits {
    uint32_t max_count;  /* rings of dead processes kept, newest first (64, at most 64) */
    uint64_t max_bytes;  /* their bytes on disk (256 MiB) */
    uint64_t max_age_s;  /* a ring not written for this long is reaped (one day) */
} gmp_rings_limits;

/* Remove the rings in run_dir of processes that are gone and either
 * exec'd into a program without the preload, or were last written more
 * than max_age_s ago, or are the oldest beyond max_count / max_bytes.  Only
 * the caller's own regular files.  Returns how many were removed. */
GMP_API int gmp_rings_reap(const char *run_dir, const gmp_rings_limits *limits);

/* A process the kernel's OOM killer killed, as a privileged caller read it
 * in the kernel log (Slurm's plugin, as root, of its step's own processes):
 * the ring of pid that started before killed_us (microseconds since boot,
 * the log's clock) is its victim's. */
typedef struct gmp_oom_victim {
    int pid;
    uint64_t killed_us;
} gmp_oom_victim;

typedef struct gmp_recover_options {
    const char *dump_dir;  /* NULL: where each process would have written */
    int pid;               /* with signal: a death seen first hand (0: none) */
    int signal;
    /* What a privileged caller found of pid's death ("oom_killer: ..." or
     * "cgroup_oom_kill: ..."), or NULL.  Given, it is pid's evidence
     * instead of what this process may read itself; no other ring gets it. */
    const char *evidence;
    const gmp_oom_victim *oom_victims; /* n_oom_victims of them, or NULL */
    int n_oom_victims;
    /* The caller's retention, for the bundles of rings the caller does not
     * own (0: 5 bundles, 256 MiB).  Such a ring never chooses where its
     * bundle goes (dump_dir, else ./oom_dumps) nor what retention removes. */
    uint32_t max_dumps;
    uint64_t max_total_mb;
    /* A death seen first hand as an exit with exit_status after a
     * runtime's own out-of-memory words that pid wrote past the preload
     * (Go's, with raw system calls; gmp-run read them where the job's
     * stderr went): then only pid's ring is written up, with those words. */
    const char *last_words;
    int exit_status;
} gmp_recover_options;

typedef void (*gmp_recover_report_fn)(const char *bundle_path, int pid, const char *reason,
                                      void *arg);

/* For every ring in run_dir whose process is gone (no such pid, or another
 * process under that pid now): write its bundle from the ring (reason: the
 * signal that killed it when known, else "killed"), then remove the ring.
 * Returns the number of bundles written, or -1 when run_dir is unreadable,
 * or is not a directory of the caller's closed to others (errno EPERM). */
GMP_API int gmp_rings_recover(const char *run_dir, const gmp_recover_options *opt,
                              gmp_recover_report_fn report, void *arg);

/* gmp-run's job directories (RUN_DIR/gmp-run-XXXXXX), where the processes
 * of one gmp-run's command keep their rings; gmp-run holds its own (flock)
 * for its whole life.  gmp_job_dir_make: a new one, held, its path in out;
 * the fd that holds it (close-on-exec), or -1 with why.
 * gmp_job_dirs_sweep: for each job directory in run_dir that no gmp-run
 * holds (it ended, or was killed), the bundles of its dead processes'
 * rings (as gmp_rings_recover), then the directory removed once empty;
 * returns the bundles written, or -1 when run_dir cannot be read.
 * gmp_job_dir_leave: a process whose ring was the last of a job directory
 * no gmp-run holds any more removes it (anything else: nothing). */
GMP_API int gmp_job_dir_make(const char *run_dir, char *out, size_t cap, char *why,
                             size_t why_cap);
GMP_API int gmp_job_dirs_sweep(const char *run_dir, const gmp_recover_options *opt,
                               gmp_recover_report_fn report, void *arg);
GMP_API void gmp_job_dir_leave(const char *job_dir);
/* dir is a gmp-run job directory (by its name). */
GMP_API int gmp_is_job_dir(const char *dir);
/* In a job directory: how each rank of a run the job's processes reaped
 * ended, a line each, "PID RANK EXIT SIGNAL NS KEY" ("-" for none; KEY the
 * run's, as a manifest's "run"); gmp-run reads it at its end. */
#define GMP_RUN_ENDS_FILE "run_ends"
/* Those lines gmp-run keeps beside a run's bundles in the dump directory,
 * <prefix><ns>_<pid>.txt, for triage; retention removes them with the
 * last bundle of their runs. */
#define GMP_RUN_ENDS_NOTE_PREFIX GMP_RUN_ENDS_FILE "_"

#endif
