/*
 * preload.h — what the files of the LD_PRELOAD interposer share, in layers
 * (the sections below): the lifecycle and services, then finding real
 * functions, then what records, then what it records for.
 *
 * The preload records; it never changes what the program sees.  Every hook
 * calls the real function, keeps its exact result and errno, and only then
 * does bookkeeping.  The pieces:
 *   init.c        process lifecycle: constructor, config, fork, exit
 *   services.c    what every file calls on: events, bundles, lazy tables,
 *                 threads, the run directory, the C API's way in
 *   libc.c        malloc and friends, and what they count
 *   libc_real.c   the allocator past them, and a bootstrap pool for dlsym
 *   mmap_heap.c   a heap a runtime maps itself, refused (ENOMEM)
 *   host_counters.c per-thread host counters (bytes in use without contention)
 *   in_use.h      those counters and the live tables, as the hooks inline them
 *   sizes.c       block sizes an allocator behind us cannot be asked for
 *   device.c      live device allocations and bytes in use per device
 *   episode.c     OOM episodes: open, confirm, recover, commit a bundle
 *   gpu_family.h  the one generic path every GPU hook table goes through
 *   dlsym.c       the exported dlsym: how programs reach the CUDA driver
 *   next.c        the real functions behind hooks, found without dlsym
 *   cuda_driver.c the driver's hooks, exported and routed (cuGetProcAddress)
 *   cupti.c       CUPTI injection, the second way into CUDA
 *   unwind.c      return addresses, by rules learned per address (x86-64)
 *   stack.c       the return addresses of a failing call; allocation stacks
 *   stack_ring.c  those stacks and their objects in the ring, for recover
 *   crash.c       deaths by a signal: crashes after a failed allocation, stops
 *   signal_actions.c sigaction and signal: the program sees its own dispositions
 *   outcome.c     how the process ended, in every bundle it wrote
 *   exit_and_wait.c _exit and the wait family: what a ring left behind means
 *   slurm_launchers.c srun, sbatch, salloc: never recorded, never handed the
 *                 preload by a --gmp batch script
 *   watchdog.c    the slow death: pressure against the nearest memory limit
 *   oom_messages.c OOM messages on stderr, for failures no hook saw
 *   launcher_relays.c a launcher's lines that are its ranks' words
 *   message_speakers.c whether the process can mean such a message
 *   stderr.c      what the program writes to stderr: write, writev, stdio
 *   messages.h    those files' declarations, a layer of this header
 *   python.c      the Python stack of the thread that failed
 *   prom_textfile.c the Prometheus textfile (GMP_PROM_FILE)
 *   peak_watch.c  host counters and peaks for a program measuring itself
 */
#ifndef GMP_PRELOAD_H
#define GMP_PRELOAD_H

/* How the line naming a bundle ends: how to read it, ready to paste. */
#define GMP_READ_IT "; read it: gmp-inspect show "

#include "dump_request.h"
#include "gpumemprof.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define GMP_EXPORT __attribute__((visibility("default")))

#define GMP_MAX_DEVICES 64

enum gmp_preload_state { GMP_PL_UNINIT = 0, GMP_PL_ACTIVE, GMP_PL_DISABLED, GMP_PL_EXITING };

typedef struct gmp_preload {
    int state;                 /* atomic, gmp_preload_state */
    gmp_recorder *rec;
    const gmp_config *cfg;     /* the recorder's: what GMP_* said */
    int pid;                   /* ours (a vfork child's differs); reset after fork */
    /* from the config, in the units the hooks want, beside the state they
     * read anyway (the malloc hook's one cache line) */
    uint64_t host_event_min;   /* GMP_HOST_EVENT_MIN_BYTES */
    uint64_t watchdog_min;     /* GMP_WATCHDOG_MIN_MB, in bytes */
    uint64_t confirm_ns;       /* GMP_OOM_CONFIRM_MS, in ns */
    const char *prom_file;     /* GMP_PROM_FILE when set and not empty, else NULL */
} gmp_preload;

GMP_HIDDEN extern gmp_preload gmp_pl;

/* A forked child's reset of one variable: stored only when there is
 * something to clear, so a child that execs at once (a shell's) copies no
 * page of ours. */
#define GMP_CLEAR_IN_CHILD(var)                                                         \
    do {                                                                                \
        if (__atomic_load_n(&(var), __ATOMIC_RELAXED))                                   \
            __atomic_store_n(&(var), 0, __ATOMIC_RELAXED);                               \
    } while (0)

/* Set while this thread runs our own code: allocations made by it (dlsym,
 * pthread_create, ...) pass straight through and are not recorded. */
GMP_HIDDEN extern __thread int gmp_in_hook __attribute__((tls_model("initial-exec")));

/* The one way to hold it: GMP_IN_HOOK_SCOPE() at the top of a block raises
 * it until the block is left, by whatever return. */
static inline void gmp_in_hook_leave(int *unused)
{
    (void)unused;
    gmp_in_hook--;
}
#define GMP_IN_HOOK_SCOPE()                                                                 \
    __attribute__((cleanup(gmp_in_hook_leave), unused)) int gmp_in_hook_scope_ = gmp_in_hook++

/* Set while this thread runs a fatal-signal handler: the dump then calls
 * nothing but system calls (no GPU library, no dynamic loader). */
GMP_HIDDEN extern __thread int gmp_in_signal __attribute__((tls_model("initial-exec")));

/* Flags (GMP_EVENT_FLAG_*) for the events this thread records right now. */
GMP_HIDDEN extern __thread uint16_t gmp_event_flags __attribute__((tls_model("initial-exec")));

static inline int gmp_pl_active(void)
{
    return __atomic_load_n(&gmp_pl.state, __ATOMIC_ACQUIRE) == GMP_PL_ACTIVE;
}

/* ==== the lifecycle and the services every file calls on =========================== */

/* init.c: what exit() does for us (commit open episodes, wait for bundles
 * being written, remove the ring); _exit calls it too. */
GMP_HIDDEN void gmp_pl_finish(void);

/* services.c: a table made on first use: an anonymous mapping of len bytes (untouched
 * pages cost nothing) published in *slot.  Callers that race to make it
 * each map one, the first published is everyone's; NULL for good once a
 * mapping failed.  *state is the table's atomic word (1: failed). */
GMP_HIDDEN void *gmp_lazy_table(void **slot, int *state, size_t len);

/* A detached thread of ours; 0, or -1 (memory may be gone: callers cope). */
GMP_HIDDEN int gmp_spawn_thread(void *(*main_fn)(void *), size_t stack_size);

/* services.c: the run directory, resolved on first use ("" when unknown), and
 * CPython's version for the bundles, looked up once (the first bundle or
 * failure; a process pays nothing at start for either). */
GMP_HIDDEN const char *gmp_pl_run_dir(void);
GMP_HIDDEN void gmp_pl_probe_python(void);

/* services.c: gmp_dump into the preload's recorder, counting the bundles;
 * a failed request's bundle tells its moment from its failure snapshot. */
GMP_HIDDEN const char *gmp_pl_dump(const gmp_dump_request *req, char *path, size_t cap);

/* device_memory.c: each device's memory as the hooks last read it.
 * _due: whether a reading at now is to be taken (force: at a failure or a
 * pressure check; else at most every 100 ms, one thread at a time); _note:
 * the reading (free and total of the device; what this process holds there
 * is noted with it); _at_failure: the device as last read, with who else
 * holds it (a wide collector), in out, or NULL when never read. */
GMP_HIDDEN int gmp_device_memory_due(gmp_backend backend, int device, uint64_t now, int force);
GMP_HIDDEN void gmp_device_memory_note(gmp_backend backend, int device, uint64_t free_bytes,
                                       uint64_t total);
GMP_HIDDEN gmp_device_state *gmp_device_memory_at_failure(gmp_backend backend, int device,
                                                          gmp_device_state *out);
/* A device's free and total memory, as the program's own thread (which has
 * the context) last saw them after an allocation: for the watchdog.
 * total 0 = never seen. */
GMP_HIDDEN void gmp_gpu_device_memory(gmp_backend backend, int device, uint64_t *free_bytes,
                                      uint64_t *total);
/* Every device whose memory was seen, for a bundle's device_state;
 * may_call: the wide collectors (NVML) may be asked now.  at_failure (NULL:
 * none) is the failed device as it was then (its failure snapshot): it
 * stands for that device. */
GMP_HIDDEN uint32_t gmp_gpu_device_states(gmp_device_state *out, uint32_t max, int may_call,
                                          const gmp_device_state *at_failure);

/* failure_snapshot.c: the moment of a failure that opens an episode, kept
 * for its bundle: the live allocations, the host, and the device that
 * refused as its hook family read it then (device_then; NULL for the
 * host's).  _find: the snapshot of failed request f (its backend, device
 * and time), taken for the caller until _done, or NULL (none, or another
 * thread has it: the bundle then tells what is live now).  _live: its
 * allocations.json as a memfd still ours, with the stack ids it names, or
 * -1; _host, _device: the host and the device then (NULL: not read). */
typedef struct gmp_failure_snapshot gmp_failure_snapshot;
GMP_HIDDEN void gmp_failure_snapshot_take(gmp_backend backend, int device, uint64_t failure_ns,
                                          const gmp_device_state *device_then);
GMP_HIDDEN const gmp_failure_snapshot *gmp_failure_snapshot_find(gmp_backend backend,
                                                                 const gmp_failed_request *f);
GMP_HIDDEN void gmp_failure_snapshot_done(const gmp_failure_snapshot *snap);
GMP_HIDDEN int gmp_failure_snapshot_live(const gmp_failure_snapshot *snap,
                                         const uint64_t **stacks);
GMP_HIDDEN const struct gmp_host_state *gmp_failure_snapshot_host(const gmp_failure_snapshot *snap);
GMP_HIDDEN const gmp_device_state *gmp_failure_snapshot_device(const gmp_failure_snapshot *snap);
GMP_HIDDEN uint64_t gmp_pl_bundles_written(void);

/* One event into the preload's recorder at time now_ns (the caller read the
 * clock already: one read a call), its thread filled in. */
GMP_HIDDEN void gmp_pl_event_at(uint64_t now_ns, uint32_t stack_id, gmp_event_type type,
                                gmp_backend backend, int device, gmp_api api,
                                uint64_t address, uint64_t size, int32_t result,
                                uint64_t in_use);

/* One event into the preload's recorder (fills time and thread). */
GMP_HIDDEN void gmp_pl_event(gmp_event_type type, gmp_backend backend, int device,
                             gmp_api api, uint64_t address, uint64_t size, int32_t result,
                             uint64_t in_use);

/* init.c */
GMP_EXPORT gmp_recorder *gmp_preload_recorder(void); /* see gpumemprof.h */
/* program_dump.c; see GMP_PRELOAD_TORCH_SNAPSHOT_SYMBOL in gpumemprof.h */
GMP_EXPORT int gmp_preload_torch_snapshot(int device, uint64_t request, uint64_t device_free,
                                          const char *snapshot, size_t snapshot_len,
                                          const char *blocks_json, size_t blocks_len);
/* program_dump.c; see GMP_PRELOAD_DUMP_EXCEPTION_SYMBOL in gpumemprof.h */
GMP_EXPORT const char *gmp_preload_dump_exception(gmp_recorder *rec, const char *reason,
                                                  const char *exception_type,
                                                  const char *exception_module,
                                                  const char *exception_message,
                                                  const char *context, const char *backend,
                                                  const char *metadata_json, int traceback_fd,
                                                  char *path_out, size_t path_cap);

/* ==== finding the real functions =================================================== */

/* next.c: the one way a hook finds its real function.  The definition of
 * name in the first object after the preload, RTLD_LOCAL ones included,
 * read from the objects' symbol tables (no dl* call: a program's pending
 * dlerror() string stays valid, and nothing is allocated); else, for an
 * IFUNC or an object whose tables we cannot read, dlsym(RTLD_NEXT); else
 * the definition before the preload (a preload loaded by CUDA as its
 * injection library comes last).  NULL when there is none. */
GMP_HIDDEN void *gmp_real_function(const char *name);
/* The program's own function name, searched from the first object on, as
 * RTLD_DEFAULT would (CPython's, for tracebacks); NULL when absent. */
GMP_HIDDEN void *gmp_global_symbol(const char *name);
/* The loaded object whose segments hold address, as its load bias plus one
 * (0: none): by segments, not symbols (dladdr scans those: slow). */
GMP_HIDDEN uintptr_t gmp_object_of(const void *address);
/* The loaded object that holds pc, found lock-free (glibc's
 * _dl_find_object, 2.35 on; no lock, no allocation: a signal handler may
 * ask): 0 with its mapped range, its PT_GNU_EH_FRAME (or NULL) and its path
 * ("" for the program); 1 when no object holds pc (JIT code); -1 when this
 * glibc cannot say. */
typedef struct gmp_found_object {
    uintptr_t start, end;
    const void *eh_frame;
    const char *path;
} gmp_found_object;
GMP_HIDDEN int gmp_find_object(const void *pc, gmp_found_object *out);
/* dl_iterate_phdr (glibc's own, past a sanitizer's interceptor), kept out
 * of a fork's way: every walk of the loaded objects goes through here. */
struct dl_phdr_info;
GMP_HIDDEN void gmp_each_object(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg);
/* pthread_atfork's three handlers: fork waits for the walks under way. */
GMP_HIDDEN void gmp_walks_fork_prepare(void);
GMP_HIDDEN void gmp_walks_fork_parent(void);
GMP_HIDDEN void gmp_walks_fork_child(void);

/* dlsym.c: the real dlsym (found by dlvsym: gmp_real_function falls back on
 * it), for a library the preload opened itself (CUPTI). */
GMP_HIDDEN void *gmp_dlsym_real(void *handle, const char *name);

/* `fn`, the real function `name` of type `type`, found once (NULL when there
 * is none). */
#define GMP_REAL_FN(name, type)                                                            \
    static type real_##name;                                                               \
    type fn = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);                             \
    if (GMP_UNLIKELY(!fn)) {                                                               \
        fn = (type)gmp_real_function(#name);                                               \
        __atomic_store_n(&real_##name, fn, __ATOMIC_RELEASE);                              \
    }

/* ==== what is in use: host and devices ============================================= */

#include "in_use.h"

/* ==== allocation stacks ============================================================ */

/* unwind.c: the return addresses above the caller's frame, innermost first
 * (the first is in the caller); at most max (64). */
GMP_HIDDEN uint32_t gmp_unwind(uint64_t *out, uint32_t max);
/* cfi.c: one step of a walk, from a frame to its caller, by the call-frame
 * information of its return address (x86-64).  A word of the stack is
 * read only inside span, [lo, hi): lo the walk's start, hi as far as the
 * kernel has said pages are readable, raised as the walk needs (start with
 * both at the first frame's stack pointer).  find_fde is libgcc's
 * _Unwind_Find_FDE. */
typedef struct gmp_stack_span {
    uintptr_t lo, hi;
} gmp_stack_span;
typedef struct gmp_frame {
    uintptr_t pc;  /* the return address into the frame */
    uintptr_t sp;  /* the stack pointer there (its callee's CFA) */
    uintptr_t rbp; /* and %rbp, when rbp_known */
    int rbp_known;
} gmp_frame;
typedef struct gmp_eh_bases {
    void *tbase, *dbase, *func;
} gmp_eh_bases;
typedef const void *(*gmp_find_fde_fn)(void *pc, gmp_eh_bases *bases);
/* eh_frame_hdr.c: the FDE that may cover pc, from its object's sorted
 * table, neither mapping nor allocating (NULL: not in any such table) */
GMP_HIDDEN const void *gmp_fde_in_tables(void *pc, gmp_eh_bases *bases);
enum {
    GMP_STEP_UNKNOWN = -1, /* no call-frame information, one not followed, a read refused */
    GMP_STEP_END = 0,      /* the outermost frame */
    GMP_STEP_CALLER = 1,   /* *caller is the caller's frame */
};
GMP_HIDDEN int gmp_cfi_step(gmp_find_fde_fn find_fde, gmp_stack_span *span,
                            const gmp_frame *f, gmp_frame *caller);
/* stack.c: the caller's return addresses, the preload's frames left out. */
GMP_HIDDEN uint32_t gmp_stack_capture(uint64_t *out, uint32_t max);
/* The stack here as an id of the deduplicated table (0: none, GMP_STACKS=0,
 * or the table full); gmp_stack_lookup gives its frames back (a
 * gmp_stack_lookup_fn for bundles). */
#define GMP_ALLOC_STACK_DEPTH 16
GMP_HIDDEN uint32_t gmp_stack_id_here(void);
/* The same in the tables that exist, never mapping one: for a failure,
 * where memory is short and a table's address space not ours to take
 * (a map that failed then would leave the process without tables). */
GMP_HIDDEN uint32_t gmp_stack_id_in_tables_made(void);
GMP_HIDDEN uint32_t gmp_stack_lookup(uint32_t id, uint64_t *frames, uint32_t max, void *arg);
/* Each stack of the table, in the order they were made. */
GMP_HIDDEN void gmp_stack_foreach_known(void (*fn)(uint32_t id, const uint64_t *frames,
                                                   uint32_t depth, void *arg),
                                        void *arg);

/* stack_ring.c: a new stack of the table, and the objects its frames lie
 * in, copied into the ring (now, or when the ring is made: the recorder
 * calls gmp_stack_ring_ready with each new ring). */
struct gmp_ring;
GMP_HIDDEN void gmp_stack_ring_note(uint32_t id, const uint64_t *frames, uint32_t depth);
GMP_HIDDEN void gmp_python_frame_ring_note(uint32_t id, const gmp_python_frame *frame);
/* The rank torch.multiprocessing.spawn gave this process (python_frames.c
 * reads it), for its bundles and its ring. */
GMP_HIDDEN void gmp_spawn_index_note(long index);
GMP_HIDDEN void gmp_stack_ring_ready(struct gmp_ring *ring);
/* Does a loaded segment of the object hold `at`?  The extent of all its
 * segments in *lo, *hi either way. */
struct dl_phdr_info;
GMP_HIDDEN int gmp_object_extent(const struct dl_phdr_info *info, uint64_t at, uint64_t *lo,
                                 uint64_t *hi);

/* ==== deaths: failures, crashes, pressure, leaks =================================== */

/* episode.c */
/* A failed allocation; device_then: the device as the hook family read it
 * just then (NULL for the host's), for the failure's snapshot. */
GMP_HIDDEN void gmp_episode_failure(gmp_backend backend, int device, gmp_api api,
                                    uint64_t size, long code, uint64_t in_use,
                                    const gmp_device_state *device_then);
GMP_HIDDEN void gmp_episode_success(gmp_backend backend, int device, uint64_t size,
                                    uint64_t in_use);
/* Commits every open episode (at exit); confirmed_by names why. */
GMP_HIDDEN void gmp_episode_commit_all(const char *confirmed_by);
/* Commits the open episodes of one backend now (a framework said its OOM). */
GMP_HIDDEN void gmp_episode_commit_backend(gmp_backend backend, const char *confirmed_by);
/* The program reports an OOM it caught: it takes an open episode (prefer's
 * first) whose bundle its report becomes; the failed request, its thread's
 * Python stack then (*traceback_fd, the caller's to close; -1 none) and the
 * recovered count.  1, or 0 when none is open. */
GMP_HIDDEN int gmp_episode_adopt(gmp_backend prefer, gmp_backend *backend,
                                 gmp_failed_request *f, int *traceback_fd,
                                 uint32_t *recovered_episodes);
/* recent_failures.c: the newest failed request of backend at since_ns
 * (CLOCK_REALTIME) or later, copied into *f, whether or not its episode
 * recovered: for a framework's OOM message that follows it.  1, or 0 when
 * there is none. */
GMP_HIDDEN int gmp_episode_recent_failure(gmp_backend backend, uint64_t since_ns,
                                          gmp_failed_request *f);
/* Every failed request is noted; a fatal signal takes the crashing
 * thread's own (its unchecked NULL), else the newest (1, or 0: none). */
GMP_HIDDEN void gmp_recent_failure_note(gmp_backend backend, const gmp_failed_request *f);
GMP_HIDDEN int gmp_recent_failure_for_crash(gmp_failed_request *f, gmp_backend *backend);
/* In a forked child: forgets them; 1 when there were any (so an episode
 * may have been open), else 0. */
GMP_HIDDEN int gmp_recent_failures_after_fork(void);
/* Commits episodes whose confirmation time has passed. */
GMP_HIDDEN void gmp_episode_check_deadlines(void);
GMP_HIDDEN void gmp_episode_after_fork(void);
/* OOM episodes opened, and closed as recovered, since start. */
GMP_HIDDEN void gmp_episode_counts(uint64_t *episodes, uint64_t *recovered_episodes);
/* Waits (at most max_ms) for bundles other threads are writing right now. */
GMP_HIDDEN void gmp_episode_wait_commits(unsigned max_ms);
/* Non-zero while any episode is open: hooks then look at deadlines. */
GMP_HIDDEN extern int gmp_episodes_open;

static inline int gmp_any_episode_open(void)
{
    return __atomic_load_n(&gmp_episodes_open, __ATOMIC_RELAXED) != 0;
}

/* episode.c: a fatal signal is killing the process; writes the bundle the
 * GMP_ON_CRASH mode asks for (async-signal-safe, no allocation, no lock).
 * Returns 1 when it wrote one. */
GMP_HIDDEN int gmp_episode_crash(int sig, const siginfo_t *info);
/* shm_fault.c: whether a SIGBUS is a touch of a shared mapping of a tmpfs
 * file (/dev/shm) that had no room for the page (or, raised again by the
 * process's own handler, one while such a mapping's tmpfs is full); then
 * the failed request
 * it stands for in *f and the words about the file and its room in detail
 * (in the signal handler: no allocation, no lock). */
GMP_HIDDEN int gmp_shm_fault(const siginfo_t *info, gmp_failed_request *f, char *detail,
                             size_t cap);
/* Whether fd is a file of a sized tmpfs, whose shared mapping may meet it. */
GMP_HIDDEN int gmp_shm_fd_can_fill(int fd);

/* outcome.c: how the process ended, in every bundle it wrote.  now gives
 * the outcome for a bundle written at this moment; note_bundle remembers a
 * bundle written (failure: of a failure, not a pressure warning); end says
 * how the process ends (first call wins) and
 * rewrites the bundles it wrote (async-signal-safe); watch_exit asks glibc
 * for exit()'s status (on_exit). */
GMP_HIDDEN void gmp_outcome_now(gmp_outcome *o);
GMP_HIDDEN void gmp_outcome_note_bundle(const char *path, int failure);
GMP_HIDDEN void gmp_outcome_end(gmp_outcome_state state, int code);
GMP_HIDDEN void gmp_outcome_watch_exit(void);
GMP_HIDDEN void gmp_outcome_after_fork(void);

/* crash.c: fatal-signal handlers (GMP_ON_CRASH).  arm installs them once and
 * gives the calling thread an alternate stack; called at start (always) or
 * at a thread's first failed allocation (after-failure). */
GMP_HIDDEN void gmp_crash_arm(void);
/* ... and with the stop handlers, once the process has a ring to remove. */
GMP_HIDDEN void gmp_crash_ring_made(void);
/* sig ends the process by default and is no crash (SIGTERM, SIGINT, ...). */
GMP_HIDDEN int gmp_signal_is_stop(int sig);
/* The signals other processes send to end this one (SIGTERM, SIGINT, ...),
 * held back from this thread while it writes a bundle, then let through:
 * one sent meanwhile is delivered once the bundle is whole. */
GMP_HIDDEN void gmp_stop_signals_hold(sigset_t *old);
GMP_HIDDEN void gmp_stop_signals_release(const sigset_t *old);
/* For signal_actions.c: whether a handler (an SA_SIGINFO one's address) is
 * ours; whether ours stands in for sig's default action now (and which, in
 * ours). */
GMP_HIDDEN int gmp_signal_handler_is_ours(const void *handler);
GMP_HIDDEN int gmp_signal_default_is_ours(int sig, struct sigaction *ours);
/* signal_actions.c: libc's sigaction, past our hook. */
GMP_HIDDEN int gmp_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* watchdog.c: memory worth watching is in use (a large heap, GPU memory)
 * and this thread just allocated `allocated` bytes: pressure (GMP_WATCHDOG)
 * is checked here when a check is due, and GMP_SAMPLE_MS's thread is
 * started once.  The GPU path does the same in parts, to sample its device
 * fresh between them: due says whether a check is due now and, if so,
 * reserves it for the caller, who then runs check; start_sampler starts
 * the sampling thread when asked for. */
GMP_HIDDEN void gmp_watchdog_note_use(uint64_t allocated);
GMP_HIDDEN int gmp_watchdog_due(uint64_t allocated, uint64_t now_realtime_ns /* 0: read it */);
GMP_HIDDEN void gmp_watchdog_check(void);
GMP_HIDDEN void gmp_watchdog_start_sampler(void);
/* The last check found usage above the threshold, not yet written up: a
 * free is then worth a check (the usage held there a while); otherwise a
 * free, which can only lower usage, costs nothing. */
GMP_HIDDEN int gmp_watchdog_above(void);
/* The death's bundle is written: the memory-pressure warning written in the
 * crossing still under way, the death it warned of, is removed (one
 * episode, one bundle) and what the death's line says of it goes into
 * note, " (replaces the memory-pressure warning W)"; 1 then, once, else 0
 * and note is "". */
GMP_HIDDEN int gmp_watchdog_replace_warning(char *note, size_t cap);
/* A bundle that tells a failure was written (gmp_pl_dump calls it for every
 * bundle but the watchdog's own warning, confirmed_by
 * GMP_CONFIRMED_BY_WATCHDOG): no warning in this crossing after it (a rank
 * that failed, then sleeps holding its memory until its launcher stops it,
 * warned after its death); a check below the threshold ends it. */
#define GMP_CONFIRMED_BY_WATCHDOG "watchdog"
GMP_HIDDEN void gmp_watchdog_death_told(void);
/* A failure of backend's device (the host's: GMP_BACKEND_CPU, every host
 * limit; device -1 of a GPU backend: each of its devices) was written up
 * (gmp_pl_dump): no warning of that memory ever after.  A warning is
 * written before the failure of its crossing, never while (an episode is
 * open) or after it (PyTorch's frees after a failed cudaMalloc bring the
 * device below the threshold and back, and a warning then came after the
 * death's bundle).  A failure recovered from, with no bundle, stops none. */
GMP_HIDDEN void gmp_watchdog_failed(gmp_backend backend, int device);
GMP_HIDDEN void gmp_watchdog_after_fork(void);

/* sampler.c: one sample event per collector's device into the ring. */
GMP_HIDDEN void gmp_sampler_tick(void);

/* leak_check.c: at exit, GMP_LEAK_CHECK's report of what was never freed. */
GMP_HIDDEN void gmp_leak_check_at_exit(void);

/* ==== what the program says: stderr, Python ======================================== */

#include "messages.h"

/* init.c: the main program is Go built with cgo (the only Go the dynamic
 * linker loads us into). */
GMP_HIDDEN int gmp_main_program_is_go(void);

/* python.c: in a CPython thread holding the GIL, its Python stack in a
 * memfd (the caller closes it); else -1. */
GMP_HIDDEN int gmp_python_traceback_fd(void);
/* The worker loop (a pool's, which catches every exception of its task and
 * hands it on) that the Python stack in traceback_fd runs under, by the
 * name metadata.json's caught_by gives it; NULL for none.  Reads, no
 * allocation: a signal handler calls it. */
GMP_HIDDEN const char *gmp_python_worker_loop(int traceback_fd);
/* python_frames.c: this thread's Python frames (CPython 3.9-3.15),
 * innermost first, as GMP_PYTHON_FRAME_TAG | id, at most max; 0 when it
 * runs none.  gmp_python_frame_lookup names an id (a
 * gmp_python_frame_lookup_fn for bundles). */
GMP_HIDDEN uint32_t gmp_python_frames(uint64_t *out, uint32_t max, int may_map);
/* This thread's Python stack as one number (its frames' code objects and
 * lines, hashed; nothing named, nothing mapped): two failures with the
 * same one are the same request made again.  0 when it runs no Python. */
GMP_HIDDEN uint64_t gmp_python_stack_hash(void);
GMP_HIDDEN int gmp_python_frame_lookup(uint32_t id, gmp_python_frame *out, void *arg);
GMP_HIDDEN void gmp_python_frames_foreach_known(void (*fn)(uint32_t id, const gmp_python_frame *f,
                                                           void *arg),
                                                void *arg);

/* ==== outputs and other ways in ==================================================== */

/* prom_textfile.c: the GMP_PROM_FILE textfile: a thread rewriting it (start,
 * after fork), a last write (at exit), the file held while the image goes
 * (exec), and host peaks seen by the hooks. */
GMP_HIDDEN void gmp_metrics_start(void);
GMP_HIDDEN void gmp_metrics_after_fork(void);
GMP_HIDDEN void gmp_metrics_flush(void); /* at exit: waits for a write in progress */
GMP_HIDDEN int gmp_metrics_hold(void);   /* 1: no write in progress, none to start */
GMP_HIDDEN void gmp_metrics_release(void);
GMP_HIDDEN void gmp_metrics_note_host(uint64_t in_use);
/* peak_watch.c: bytes in use seen at a large allocation, for open watches */
GMP_HIDDEN void gmp_peak_watch_note(uint64_t in_use);
GMP_EXPORT int gmp_preload_peak_watch_begin(void);
GMP_EXPORT int gmp_preload_host_counts(int watch, gmp_host_reading *out);
GMP_EXPORT void gmp_preload_peak_watch_end(int watch);

/* slurm_launchers.c: whether path names one of Slurm's launchers; the
 * environment an exec of path is to pass (envp, or a copy whose LD_PRELOAD
 * lost the preload, for a launcher started from a --gmp batch script),
 * given back with _done after the exec returns; at start, whether this
 * process is a launcher (then it records nothing). */
#define GMP_LAUNCHER_STACK_ENV 512
GMP_HIDDEN int gmp_is_slurm_launcher(const char *path);
GMP_HIDDEN char *const *gmp_launcher_env(const char *path, char *const *envp);
GMP_HIDDEN void gmp_launcher_env_done(char *const *used, char *const *envp);
GMP_HIDDEN int gmp_slurm_launcher_start(void);

/* cupti.c, where built (weak: absent without cupti.h): GMP_CUDA_MODE=cupti
 * sets CUDA_INJECTION64_PATH to this library when the user did not. */
GMP_HIDDEN void gmp_cupti_prepare(void) __attribute__((weak));

#endif
