/*
 * ring.h — the event ring: a bounded, lock-free, multi-writer ring of
 * fixed-size records in a MAP_SHARED mapping, so another process (gmp-inspect
 * watch, gmp-run after a SIGKILL) can read it while the writer runs or after
 * it died.  Layout of a ring file: one gmp_ring_header, then slot_count
 * 64-byte slots, then the site records: the allocation stacks the events
 * name and the objects those stacks pass through, so that a bundle written
 * after the process died can still name where its memory went.  A slot's
 * stamp says which sequence number it holds and whether a writer is inside
 * it, so readers can tell torn slots from whole.
 */
#ifndef GMP_RING_H
#define GMP_RING_H

#include "dump_request.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>

#define GMP_RING_MAGIC "GMPRING"
#define GMP_RING_VERSION 6u
#define GMP_RING_HEADER_SIZE 16384u
#define GMP_RING_MIN_EVENTS 16u
#define GMP_RING_MAX_EVENTS (1u << 24)
#define GMP_RING_STACK_DEPTH 16     /* frames kept of an allocation stack */
#define GMP_RING_STACK_RECORDS 512  /* distinct stacks a ring made here names */
#define GMP_RING_MODULE_RECORDS 128 /* distinct objects those stacks pass through */
#define GMP_RING_PYTHON_RECORDS 256 /* distinct Python frames those stacks hold */

/* Stamp of a slot: 0 never written; (seq+1)<<1 holds seq whole;
 * ((seq+1)<<1)|1 a writer of seq is inside. */
typedef struct gmp_ring_slot {
    uint64_t stamp;
    uint64_t word[7];
} gmp_ring_slot;

/* What the process that owns the ring was told, so a reader that outlives it
 * (recover after SIGKILL) writes the bundle where the process would have. */
typedef struct gmp_ring_config_copy {
    uint32_t buffer_size;
    uint32_t max_dumps;
    uint64_t max_total_mb;
    char dump_dir[GMP_PATH_MAX];  /* absolute */
    char context[GMP_CONTEXT_MAX];
} gmp_ring_config_copy;

/* An allocation stack that events name by stack_id.  Records are claimed
 * in order and published by id, written last: a record whose id is 0 was
 * being written when the process died and is skipped. */
typedef struct gmp_ring_stack_record {
    uint32_t id;    /* atomic: 0 until depth and frames are whole */
    uint32_t depth;
    uint64_t frames[GMP_RING_STACK_DEPTH]; /* innermost first */
} gmp_ring_stack_record;

/* A Python frame that stacks name (GMP_PYTHON_FRAME_TAG | id): published
 * by its id, written last.  A file name too long keeps its end. */
typedef struct gmp_ring_python_record {
    uint32_t id; /* atomic: 0 until the rest is whole */
    uint32_t line;
    char file[200];
    char function[88];
} gmp_ring_python_record;

/* A loaded object, as modules.json lists one: its path, load bias and GNU
 * build-id, and the extent of its segments (an address outside every
 * record belongs to an object the ring does not know). */
typedef struct gmp_ring_module_record {
    uint64_t start, end;
    uint64_t base;
    uint32_t ready; /* atomic: 1 once the rest is whole */
    char build_id[68]; /* hex; "" none */
    char path[400];
} gmp_ring_module_record;

/* Where the process sits in a Slurm job, from its environment when its
 * ring was made ("" each: not in one), so that a bundle written after it
 * died still names its job, step, task and node. */
typedef struct gmp_job_place {
    char job[24];   /* SLURM_JOB_ID */
    char step[24];  /* SLURM_STEP_ID */
    char task[16];  /* SLURM_PROCID: the task's rank in its step */
    char local[16]; /* SLURM_LOCALID */
    char node[64];  /* SLURMD_NODENAME */
} gmp_job_place;
/* This process's place (getenv only: fine on the dump path). */
GMP_HIDDEN void gmp_job_place_here(gmp_job_place *out);

/* The launcher's variables of the run a process is a rank of, as they
 * were when its ring was made, so that a bundle written after it died
 * names its run and rank as its own would (torchrun's run id, restart
 * count and error file, the rendezvous, the rank in the world and on its
 * node, PyTorch's NCCL flight recorder): "NAME=VALUE" strings one after
 * another, each NUL-ended, an empty one after the last; a variable that
 * does not fit is left out. */
#define GMP_RUN_VARS_SIZE 1024
GMP_HIDDEN void gmp_run_vars_here(char *out, size_t cap);
/* Those of process pid (0: this one; another's read from /proc/PID/environ,
 * for gmp-run's proxy ring of a process that has none of its own). */
GMP_HIDDEN void gmp_run_vars_of(int pid, char *out, size_t cap);
/* The next NAME=VALUE of a block that may come from another process's
 * file (bounded by end, NULL after the last); its NAME's length in
 * *name_len. */
GMP_HIDDEN const char *gmp_run_vars_next(const char *at, const char *end, size_t *name_len);
/* The value of NAME in such a block, or NULL; RANK's as a number, or -1. */
GMP_HIDDEN const char *gmp_run_vars_value(const char *vars, size_t cap, const char *name);
GMP_HIDDEN long gmp_run_vars_rank(const char *vars, size_t cap);
/* A rank the process's own code gave it where its environment names none:
 * torch.multiprocessing.spawn's index of the process (the preload reads it
 * from the interpreter).  Kept as GMP_SPAWN_RANK_VAR in the run variables
 * of every ring made from now on and appended to `ring_vars` (this
 * process's ring's, or NULL), which a reader after a SIGKILL goes by;
 * gmp_run_vars_rank takes it where RANK is not.  The first one stays.
 * gmp_run_rank_to_ring appends the one learned, if any, to a ring's block
 * that lacks it (a ring made while it was being learned). */
#define GMP_SPAWN_RANK_VAR "GMP_SPAWN_RANK"
GMP_HIDDEN void gmp_run_rank_learned(long rank, char *ring_vars, size_t cap);
GMP_HIDDEN void gmp_run_rank_to_ring(char *ring_vars, size_t cap);
GMP_HIDDEN long gmp_run_rank_learned_here(void); /* -1: none */
/* The process that started this one, as "PID:TICKS" (its pid and its start
 * in clock ticks since boot, which tells a reused pid apart): the ranks a
 * launcher started are one run where nothing else names it (torch's
 * multiprocessing.spawn, a rendezvous torchrun gave no id).  Kept first in
 * the run variables as GMP_LAUNCHER_VAR, written as environment.json's
 * process.launcher; "" when it cannot be read. */
/* The run a process is a rank of, as a key its run's other bundles share
 * (the manifest's "run"; "" when it is none's): "torchrun|ID|RESTART" (the
 * same on every node), else "slurm|JOB.STEP", else, for a rank, a world
 * size or a rendezvous, "launcher|HOST|PID:TICKS|ADDR:PORT"; from a run
 * variables block (gmp_run_vars_here's, or a ring's) and a Slurm place.
 * Only letters, digits and ._:-| in it (others become '_'): JSON holds it
 * as it is, and a reader finds it by plain text search. */
#define GMP_RUN_KEY_SIZE 320
GMP_HIDDEN void gmp_run_key(const char *vars, size_t cap, const gmp_job_place *place,
                            char *out, size_t out_cap);
#define GMP_LAUNCHER_SIZE 48
#define GMP_LAUNCHER_VAR "GMP_LAUNCHER"
GMP_HIDDEN void gmp_launcher_here(char *out);

typedef struct gmp_ring_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint32_t slot_size;
    uint32_t capacity;     /* events a snapshot keeps (GMP_BUFFER_SIZE) */
    uint64_t slot_count;   /* power of two >= capacity */
    int32_t pid;
    int32_t ppid;
    uint32_t uid;
    uint32_t flags;        /* atomic: GMP_RING_FLAG_* */
    uint64_t start_time_ns;
    uint64_t proc_start_ticks; /* /proc/PID/stat starttime: tells pid reuse apart */
    int32_t death_signal;      /* atomic: set by a parent that reaped it (0 unknown) */
    uint64_t oom_kills_at_start; /* the cgroup's oom_kill count then (UINT64_MAX unknown) */
    char cgroup_oom_file[512]; /* memory.events (v2) or memory.oom_control (v1) */
    char exe[1024];            /* /proc/self/exe, for a bundle written after death */
    char cmdline[1024];        /* arguments joined by spaces, truncated */
    gmp_ring_config_copy config;
    uint32_t stack_records;  /* the site regions' sizes, in records (0: none) */
    uint32_t module_records;
    uint64_t stacks_used;    /* atomic: stack records claimed */
    uint64_t modules_used;   /* atomic: module records claimed */
    uint32_t python_records; /* the Python frames' region, in records */
    uint32_t death_after_ms; /* atomic: the death, in ms after start_time_ns, plus
                              * 1 (0 unknown): its reaper's wait, or gmp-run's
                              * first sight of it dead, whichever came first */
    uint64_t python_used;    /* atomic: Python frame records claimed */
    gmp_job_place place;     /* its Slurm job, step, task and node */
    char run_vars[GMP_RUN_VARS_SIZE]; /* its run's launcher variables */
    /* on a line of their own: every writer touches these */
    _Alignas(64) uint64_t head;    /* next sequence number */
    _Alignas(64) uint64_t dropped; /* events lost to a busy slot */
} gmp_ring_header;

/* What a reader of a dead process's ring must know beside its events. */
#define GMP_RING_FLAG_FAILED 1u       /* an allocation failed: an oom event was recorded */
#define GMP_RING_FLAG_EXEC 2u         /* an exec is replacing the image: not a death */
#define GMP_RING_FLAG_SELF_WRITTEN 4u /* the process wrote its crash bundle itself */
#define GMP_RING_FLAG_PROXY 8u        /* gmp-run's, for a process with no ring of its own */

typedef struct gmp_ring {
    gmp_ring_header *hdr;
    gmp_ring_slot *slots;
    gmp_ring_stack_record *stacks;   /* stack_records of them */
    gmp_ring_module_record *modules; /* module_records of them */
    gmp_ring_python_record *python;  /* python_records of them */
    uint32_t stack_records, module_records, python_records; /* checked against the file's size */
    uint64_t mask;
    uint32_t capacity;
    size_t map_len;
    int is_file;
    int attached; /* another process's, mapped by gmp_ring_attach: guarded */
    char path[GMP_PATH_MAX];
} gmp_ring;

/* Ring files in a run directory (ring_recovery.c): is name one,
 * "ring_<anything>.gmr"; is it one of pid's; its header's fixed part,
 * read (not mapped) and checked, 0 or -1, the file left open in *fd_out
 * when that is not NULL; and whether the process that wrote it is gone
 * (its pid is, or is another process's now, or it is dead, not reaped). */
GMP_HIDDEN int gmp_ring_file_name(const char *name);
GMP_HIDDEN int gmp_ring_file_of_pid(const char *name, int pid);
GMP_HIDDEN int gmp_ring_file_header(int dirfd, const char *name, gmp_ring_header *h,
                                    int *fd_out);
GMP_HIDDEN int gmp_ring_process_gone(const gmp_ring_header *h);
/* Whether a death by signal sig may be of memory, for a ring with these
 * flags: SIGKILL, or a crash after a failed allocation the process did not
 * write up itself. */
GMP_HIDDEN int gmp_ring_death_may_be_memory(uint32_t flags, int sig);
/* When h's process died, as near as known: the time noted in its
 * death_after_ms, else (none noted, or one that cannot be) fallback_ns.
 * Noting: the death seen at now_ns, in a ring mapped writable, unless a
 * time is noted already (an earlier one: gmp-run sees a zombie before a
 * launcher that polls every few seconds reaps it). */
GMP_HIDDEN uint64_t gmp_ring_death_ns(const gmp_ring_header *h, uint64_t fallback_ns);
GMP_HIDDEN uint32_t gmp_ring_death_after_ms(const gmp_ring_header *h, uint64_t now_ns);
GMP_HIDDEN void gmp_ring_note_death_time(gmp_ring_header *h, uint64_t now_ns);

/* Create a ring for capacity events.  dir != NULL: a file "ring_<pid>_<ns>.gmr"
 * in dir (blocks reserved up front, so a full disk never SIGBUSes a writer);
 * dir == NULL or the file failed: an anonymous shared mapping.  0 or -1. */
GMP_HIDDEN int gmp_ring_create(gmp_ring *ring, const char *dir, uint32_t capacity);
/* A proxy: the ring file gmp-run keeps in dir for process pid of its job,
 * which has none of its own (a static binary, a Go program, a JVM before
 * its first large malloc): the header says pid's start time, command line
 * and cgroup as its own ring would, flagged GMP_RING_FLAG_PROXY.  0 or -1. */
GMP_HIDDEN int gmp_ring_create_proxy(gmp_ring *ring, const char *dir, uint32_t capacity,
                                     int pid);
/* A proxy's header brought up to date with its process after an exec: its
 * program and command line (cmdline: the n bytes of /proc/PID/cmdline the
 * caller read, or NULL to read them here). */
GMP_HIDDEN void gmp_ring_proxy_refresh(gmp_ring *ring, const char *cmdline, ssize_t n);
/* A ring's process (its own ring's or a proxy's) in the memory cgroup whose
 * OOM kills oom_file counts: when that is a move, the file and the count
 * from now.  A process that moved itself after its ring was made (a
 * shell's `echo $$ > cgroup.procs; exec java`, whose ring the shell made)
 * is recovered with the cgroup it died in. */
GMP_HIDDEN void gmp_ring_cgroup_moved(gmp_ring *ring, const char *oom_file);
/* The config a ring's reader goes by (its dump directory, retention,
 * context): the process's own, or for a proxy its supervisor's (gmp-run's
 * command's, which the process would have used had it made a ring). */
GMP_HIDDEN void gmp_ring_config_fill(gmp_ring_config_copy *c, const gmp_config *cfg,
                                     uint32_t capacity);
/* Map an existing ring file read-only, checking every header field against
 * the file's size.  0, or -1 with a reason in why.  _writable: to push
 * events into another process's ring too (its header is the file's, and
 * may change under the caller). */
GMP_HIDDEN int gmp_ring_attach(gmp_ring *ring, const char *path, char *why,
                               size_t why_cap);
GMP_HIDDEN int gmp_ring_attach_writable(gmp_ring *ring, const char *path, char *why,
                                        size_t why_cap);
GMP_HIDDEN void gmp_ring_close(gmp_ring *ring, int remove_file);
/* Attached mappings are guarded (ring_guard.c): a file truncated under its
 * reader reads as zeroes from then on, never raises SIGBUS. */
GMP_HIDDEN void gmp_ring_guard(const void *start, size_t len);
GMP_HIDDEN void gmp_ring_unguard(const void *start);

/* Append; returns the sequence number, or UINT64_MAX when dropped. */
GMP_HIDDEN uint64_t gmp_ring_push(gmp_ring *ring, const gmp_event *ev);

/* Visit the newest min(limit, capacity) events, oldest first, each whole and once.
 * A visitor returning non-zero stops the walk.  *torn (optional) counts
 * slots skipped because a writer was inside or had overwritten them. */
typedef int (*gmp_ring_visit_fn)(const gmp_event *ev, void *arg);
GMP_HIDDEN size_t gmp_ring_foreach(const gmp_ring *ring, uint64_t limit,
                                   gmp_ring_visit_fn fn, void *arg,
                                   uint64_t *torn);
GMP_HIDDEN size_t gmp_ring_snapshot(const gmp_ring *ring, gmp_event *out,
                                    size_t max, uint64_t *torn);

/* Site records (ring_sites.c).  Adding copies one stack or object into
 * the next free record and publishes it.  Past a region's end, a stack or
 * Python frame writes over the second half of its region in turn (the
 * first half keeps the first ones); an object is refused, -1.
 * Async-signal-safe: no lock, no allocation; a record never waits for
 * another writer. */
GMP_HIDDEN int gmp_ring_add_stack(gmp_ring *ring, uint32_t id, const uint64_t *frames,
                                  uint32_t depth);
GMP_HIDDEN int gmp_ring_add_module(gmp_ring *ring, const gmp_ring_module_record *module);
GMP_HIDDEN int gmp_ring_add_python(gmp_ring *ring, uint32_t id, const gmp_python_frame *frame);
/* A gmp_python_frame_lookup_fn over a ring's Python frame records (arg:
 * the gmp_ring); the strings NUL-terminated copies. */
GMP_HIDDEN int gmp_ring_python_lookup(uint32_t id, gmp_python_frame *out, void *ring);
/* A gmp_stack_lookup_fn over a ring's stack records (arg: the gmp_ring),
 * for a bundle written from the ring of a process that is gone. */
GMP_HIDDEN uint32_t gmp_ring_stack_lookup(uint32_t id, uint64_t *frames, uint32_t max,
                                          void *ring);
/* Visits each published module record as a NUL-terminated copy (the ring
 * may be another user's file: nothing in it is trusted). */
GMP_HIDDEN void gmp_ring_foreach_module(const gmp_ring *ring,
                                        void (*fn)(const gmp_ring_module_record *m, void *arg),
                                        void *arg);

#endif
