/*
 * bundle.h — the bundle writer: one oom_dump_<time>_<pid>_<backend>_<seq>
 * directory with manifest.json, events.json, metadata.json and
 * environment.json.  Written under a hidden temporary name and renamed when
 * whole, so a reader (or retention) never sees half a bundle, even when the
 * writer is killed.  No heap allocation anywhere on this path.
 */
#ifndef GMP_BUNDLE_H
#define GMP_BUNDLE_H

#include "collector.h"
#include "dump_request.h"
#include "jsonw.h"
#include "ring.h"

#define GMP_BUNDLE_PREFIX "oom_dump_"
#define GMP_BUNDLE_TMP_PREFIX ".tmp_oom_dump_"
#define GMP_LEAK_REPORT_PREFIX "leak_report_"
#define GMP_LEAK_REPORT_TMP_PREFIX ".tmp_leak_report_"
#define GMP_JW_BUF 16384

typedef struct gmp_bundle_input {
    const char *dump_dir;
    const gmp_ring *ring;          /* NULL: no events */
    const gmp_dump_request *req;
    const char *context;           /* resolved: request, else config */
    const char *metadata_json;     /* a checked JSON object */
    uint64_t time_ns;              /* when the bundle is made */
    int32_t pid;                   /* whose bundle: 0 = the calling process */
    /* What the collectors saw, sampled by the caller (the writer asks no
     * collector): metadata.json's host_state, and environment.json's GPU
     * libraries, devices and framework versions (NULL: none known). */
    const gmp_host_state *host;
    const gmp_gpu_probe_result *software;
} gmp_bundle_input;

/* Writes the bundle in in->dump_dir or its fallback (dumpdir.h); returns 0
 * with its path in path_out (and its name in name_out when given), or -1
 * after one stderr line. */
GMP_HIDDEN int gmp_bundle_write(const gmp_bundle_input *in, char *path_out,
                                size_t path_cap, char *name_out, size_t name_cap);

/* The environment.json object of the calling process (bundle_env.c);
 * scratch holds /proc reads. */
GMP_HIDDEN void gmp_bundle_fill_environment(gmp_jw *w, char *scratch, size_t cap,
                                            const char *backend,
                                            const gmp_gpu_probe_result *software);

/* environment.json's "gpu" (driver versions, devices), from the
 * collectors' probe (NULL: all null). */
GMP_HIDDEN void gmp_bundle_fill_software(gmp_jw *w, const gmp_gpu_probe_result *p);
/* environment.json's "system": the machine, and python_version,
 * torch_version, cuda_available, cuda_version from the probe (NULL: null). */
GMP_HIDDEN void gmp_bundle_fill_system(gmp_jw *w, const char *backend,
                                       const gmp_gpu_probe_result *p);

/* The manifest's "program": the file name of the calling process's
 * executable (self), else of the one h kept; nothing where it is not known
 * whole.  A reader that opens the manifest alone (triage of many bundles)
 * tells by it the interpreter whose words a MemoryError are. */
GMP_HIDDEN void gmp_bundle_fill_program(gmp_jw *w, int self, const gmp_ring_header *h);

/* environment.json of a dead process, from what its ring header kept. */
GMP_HIDDEN void gmp_bundle_fill_environment_of(gmp_jw *w, const gmp_ring_header *h,
                                               const char *backend);

/* modules.json of the calling process (modules.c); buf holds /proc reads. */
GMP_HIDDEN void gmp_modules_write(gmp_jw *w, char *buf, size_t cap);
/* fn on each line of the calling process's /proc/self/maps, read into buf
 * with no allocation and no lock; a line longer than buf is skipped. */
GMP_HIDDEN void gmp_maps_foreach(char *buf, size_t cap, void (*fn)(const char *line, void *arg),
                                 void *arg);
/* The path of the mapped object that holds addr, into out ("" when none
 * does), read as gmp_maps_foreach reads: buf is the caller's. */
GMP_HIDDEN void gmp_maps_object_at(const void *addr, char *buf, size_t buf_cap, char *out,
                                   size_t cap);
/* modules.json of a process that is gone: the objects its ring recorded
 * (those its stacks pass through), each with its end. */
GMP_HIDDEN void gmp_modules_write_from_ring(gmp_jw *w, const gmp_ring *ring);

/* allocations.json / leaks.json (bundle_live.c): the live allocations,
 * largest first; marks the stack ids it names in stacks_seen. */
GMP_HIDDEN void gmp_bundle_fill_live(gmp_jw *w, const gmp_dump_request *req, uint64_t now_ns,
                                     uint64_t *stacks_seen, uint32_t max_stack_id);
/* The same, now, into a memfd for a bundle written later (its fd, or -1);
 * stacks_seen (GMP_BUNDLE_STACK_IDS bits) the ids it names.  No heap. */
GMP_HIDDEN int gmp_bundle_live_snapshot(const gmp_dump_request *req, uint64_t now_ns,
                                        uint64_t *stacks_seen);

/* metadata.json's device_state and host_state (bundle_state.c); a bundle
 * written for a dead process (self 0) has no process part. */
GMP_HIDDEN void gmp_bundle_fill_device_state(gmp_jw *w, const char *key,
                                             const gmp_device_state *devices, uint32_t count);
GMP_HIDDEN void gmp_bundle_fill_host_state(gmp_jw *w, const gmp_host_state *s, int self,
                                           uint64_t oom_kills_at_start);

/* The process's rank from RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or
 * PMI_RANK; -1 when none is set. */
GMP_HIDDEN long gmp_bundle_rank(void);
/* The decimal number of at most max_digits digits that v's first len
 * bytes (or up to its NUL) hold, nothing else; -1 when they hold none:
 * ranks and tasks read from the environment or another process's ring. */
GMP_HIDDEN long gmp_decimal(const char *v, size_t len, size_t max_digits);
/* retention.c: the manifest.json of the bundle directory bfd (named name)
 * into buf, NUL-ended, when it is a regular file (no symlink followed, no
 * FIFO waited on) that names the bundle: 0, else -1. */
GMP_HIDDEN int gmp_manifest_read(int bfd, const char *name, char *buf, size_t cap);

/* run_vars.c: a dead process's run variables as environment.json's
 * "environment" holds a living one's; the manifest's "run" and "run_first"
 * (of dead's ring, or of this process when self; nothing when neither or
 * when it is no run's), first when no other bundle in dump_dirfd names that
 * run yet and it is no memory-pressure warning (warning). */
GMP_HIDDEN void gmp_bundle_fill_run_vars(gmp_jw *w, const char *vars, size_t cap);
GMP_HIDDEN void gmp_bundle_fill_run(gmp_jw *w, const gmp_ring_header *dead, int self,
                                    const gmp_job_place *place, int dump_dirfd, int warning);

/* environment.json's process.slurm (null outside Slurm), and the job's
 * name in a manifest: "JOB.STEP" ("" outside Slurm). */
GMP_HIDDEN void gmp_bundle_fill_place(gmp_jw *w, const gmp_job_place *p);
GMP_HIDDEN void gmp_bundle_job_name(const gmp_job_place *p, char *out, size_t cap);


/* bundle_patch.c: as gmp_bundle_patch_exception, and also context and
 * custom_metadata (a JSON object) when not NULL: a program's own report of
 * the failure a bundle was written for.  0, or -1 with the bundle as it was. */
GMP_HIDDEN int gmp_bundle_patch_program(const char *bundle, const char *type,
                                        const char *module, const char *message,
                                        const char *context, const char *metadata_json,
                                        char *buf, size_t cap);

/* bundle_patch.c: add the file name (data, len bytes) to the bundle at
 * path and list it in its manifest (rewritten atomically); never replaces
 * a file the bundle has.  buf is scratch, twice the manifest's size. */
/* metadata.json's "outcome" of the bundle at path rewritten (atomically);
 * buf is scratch (128 KiB is plenty); no allocation: for a signal handler.
 * 0, or -1 with the file untouched (a bundle without the key too). */
GMP_HIDDEN int gmp_bundle_patch_outcome(const char *bundle, const gmp_outcome *outcome, char *buf,
                                        size_t cap);
/* The same, naming death_bundle (NULL: none), the process's later bundle
 * that tells its death: this one's failure it went on from. */
GMP_HIDDEN int gmp_bundle_patch_outcome_of(const char *bundle, const gmp_outcome *outcome,
                                           const char *death_bundle, char *buf, size_t cap);
/* The bundles in dump_dir of process pid (started at start_ns, realtime)
 * that still say "running", rewritten with how it ended: a death it never
 * saw (SIGKILL), written up afterwards in the bundle named death_bundle,
 * which their outcome names (the failure they tell was not the death).
 * With outcome NULL, only looked for: *newest_ns (if not NULL) the newest
 * one's time (its directory's mtime).  Ours only (the euid's);
 * allocates.  The number rewritten (or found), or -1. */
GMP_HIDDEN int gmp_bundle_patch_ended(const char *dump_dir, int pid, uint64_t start_ns,
                                      const gmp_outcome *outcome, const char *death_bundle,
                                      uint64_t *newest_ns);
/* The "outcome" value: {"state":"running"}, {"state":"exited","exit_status":N},
 * {"state":"killed","signal":"SIGKILL"} or {"state":"gone"}. */
GMP_HIDDEN void gmp_bundle_write_outcome(gmp_jw *w, const gmp_outcome *outcome);

/* Remove the bundle at path (a directory we wrote: our own files in it,
 * never a symlink's target; retention.c's rules).  0, or -1. */
GMP_HIDDEN int gmp_bundle_remove(const char *path);

GMP_HIDDEN int gmp_bundle_add_file(const char *bundle, const char *name, const char *data,
                                   size_t len, char *buf, size_t cap);
/* The same, or data in place of the file the bundle has under that name
 * (renamed over it, so a reader sees one whole). */
GMP_HIDDEN int gmp_bundle_put_file(const char *bundle, const char *name, const char *data,
                                   size_t len, char *buf, size_t cap);

#endif
