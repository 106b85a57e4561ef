/*
 * gpumemprof.h — the one public header of gpumemprof.
 *
 * gpumemprof records the memory a process allocates (GPU and host) into a
 * bounded ring that lives in a shared file mapping, and writes a diagnostic
 * bundle (oom_dump_<time>_<pid>_<backend>_<seq>/) when the process runs out
 * of memory.  This header is the C form of the flight recorder: build a
 * config, create a recorder, record events, snapshot them oldest first,
 * classify an error, and dump a bundle; read the memory collectors, judge a
 * series for growth, and reach the preload's recorder from inside a
 * preloaded program.  It is what bindings and C programs use; the
 * recorder's internals (the full dump request the preload builds, the
 * recovery of other processes' rings) are in headers of its own.
 *
 * Thread safety: gmp_record() and gmp_snapshot() may be called from any
 * number of threads at once and never block or allocate.  gmp_dump_exception()
 * does not allocate either, so it may run on an emergency path.
 */
#ifndef GPUMEMPROF_H
#define GPUMEMPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMP_API __attribute__((visibility("default")))

#define GMP_VERSION_STRING "0.1.0"
#define GMP_BUNDLE_SCHEMA_VERSION 2 /* 2: metadata.json says its kind; 1: the seed's */
#define GMP_PATH_MAX 4096

/* ---- event model --------------------------------------------------------- */

typedef enum gmp_event_type {
    GMP_EV_NONE = 0,
    GMP_EV_ALLOC,          /* a successful allocation */
    GMP_EV_FREE,           /* memory given back */
    GMP_EV_ALLOC_FAILED,   /* an allocation call failed with a non-OOM error */
    GMP_EV_OOM,            /* an allocation failed for lack of memory */
    GMP_EV_OOM_RECOVERED,  /* a later allocation succeeded: the episode closed */
    GMP_EV_MAP,            /* virtual memory mapped onto physical memory */
    GMP_EV_UNMAP,
    GMP_EV_SAMPLE,         /* a periodic reading of a collector */
    GMP_EV_SIGNAL,         /* a fatal signal arrived */
    GMP_EV_PRESSURE,       /* usage crossed a limit threshold */
    GMP_EV_MARK,           /* a user annotation */
    GMP_EV_TYPE_COUNT
} gmp_event_type;

typedef enum gmp_backend {
    GMP_BACKEND_CPU = 0,
    GMP_BACKEND_CUDA,
    GMP_BACKEND_ROCM,
    GMP_BACKEND_COUNT
} gmp_backend;

/* Every API an event can name, with the library that owns it ("" none).
 * One list, so numbers, names and owners never drift. */
#define GMP_API_LIST(X)                                                        \
    X(UNKNOWN, "unknown", "")                                                  \
    X(MALLOC, "malloc", "libc")                                                \
    X(FREE, "free", "libc")                                                    \
    X(CALLOC, "calloc", "libc")                                                \
    X(REALLOC, "realloc", "libc")                                              \
    X(REALLOCARRAY, "reallocarray", "libc")                                    \
    X(POSIX_MEMALIGN, "posix_memalign", "libc")                                \
    X(ALIGNED_ALLOC, "aligned_alloc", "libc")                                  \
    X(MEMALIGN, "memalign", "libc")                                            \
    X(VALLOC, "valloc", "libc")                                                \
    X(PVALLOC, "pvalloc", "libc")                                              \
    X(CUDA_MALLOC, "cudaMalloc", "libcudart")                                  \
    X(CUDA_FREE, "cudaFree", "libcudart")                                      \
    X(CUDA_MALLOC_MANAGED, "cudaMallocManaged", "libcudart")                   \
    X(CUDA_MALLOC_HOST, "cudaMallocHost", "libcudart")                         \
    X(CUDA_HOST_ALLOC, "cudaHostAlloc", "libcudart")                           \
    X(CUDA_FREE_HOST, "cudaFreeHost", "libcudart")                             \
    X(CUDA_MALLOC_PITCH, "cudaMallocPitch", "libcudart")                       \
    X(CUDA_MALLOC_3D, "cudaMalloc3D", "libcudart")                             \
    X(CUDA_MALLOC_ASYNC, "cudaMallocAsync", "libcudart")                       \
    X(CUDA_MALLOC_FROM_POOL_ASYNC, "cudaMallocFromPoolAsync", "libcudart")     \
    X(CUDA_FREE_ASYNC, "cudaFreeAsync", "libcudart")                           \
    X(CU_MEM_ALLOC, "cuMemAlloc_v2", "libcuda")                                \
    X(CU_MEM_ALLOC_MANAGED, "cuMemAllocManaged", "libcuda")                    \
    X(CU_MEM_ALLOC_PITCH, "cuMemAllocPitch_v2", "libcuda")                     \
    X(CU_MEM_ALLOC_HOST, "cuMemAllocHost_v2", "libcuda")                       \
    X(CU_MEM_HOST_ALLOC, "cuMemHostAlloc", "libcuda")                          \
    X(CU_MEM_ALLOC_ASYNC, "cuMemAllocAsync", "libcuda")                        \
    X(CU_MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync", "libcuda")      \
    X(CU_MEM_FREE, "cuMemFree_v2", "libcuda")                                  \
    X(CU_MEM_FREE_HOST, "cuMemFreeHost", "libcuda")                            \
    X(CU_MEM_FREE_ASYNC, "cuMemFreeAsync", "libcuda")                          \
    X(CU_MEM_CREATE, "cuMemCreate", "libcuda")                                 \
    X(CU_MEM_RELEASE, "cuMemRelease", "libcuda")                               \
    X(CU_MEM_MAP, "cuMemMap", "libcuda")                                       \
    X(CU_MEM_UNMAP, "cuMemUnmap", "libcuda")                                   \
    X(HIP_MALLOC, "hipMalloc", "libamdhip64")                                  \
    X(HIP_FREE, "hipFree", "libamdhip64")                                      \
    X(HIP_MALLOC_MANAGED, "hipMallocManaged", "libamdhip64")                   \
    X(HIP_HOST_MALLOC, "hipHostMalloc", "libamdhip64")                         \
    X(HIP_HOST_FREE, "hipHostFree", "libamdhip64")                             \
    X(HIP_EXT_MALLOC_WITH_FLAGS, "hipExtMallocWithFlags", "libamdhip64")       \
    X(HIP_MALLOC_ASYNC, "hipMallocAsync", "libamdhip64")                       \
    X(HIP_MALLOC_FROM_POOL_ASYNC, "hipMallocFromPoolAsync", "libamdhip64")     \
    X(HIP_FREE_ASYNC, "hipFreeAsync", "libamdhip64")                           \
    X(HIP_MALLOC_PITCH, "hipMallocPitch", "libamdhip64")                       \
    X(USER, "user", "")                                                        \
    X(MMAP, "mmap", "libc")

#define GMP_API_ENUM_ENTRY(id, name, library) GMP_API_##id,
typedef enum gmp_api { GMP_API_LIST(GMP_API_ENUM_ENTRY) GMP_API_COUNT } gmp_api;
#undef GMP_API_ENUM_ENTRY

/* One fixed-size record.  Nothing in it points anywhere: the ring can be read
 * by another process, after this one is dead. */
typedef struct gmp_event {
    uint64_t time_ns;   /* CLOCK_REALTIME, ns since the epoch; 0 = stamp now */
    uint64_t seq;       /* ring sequence, assigned by gmp_record */
    uint64_t address;
    uint64_t size;      /* bytes requested or released */
    uint64_t in_use;    /* bytes in use for this backend/device after the event */
    uint32_t thread_id; /* kernel tid; 0 = the caller's */
    int32_t result;     /* the call's return code (0 = success) */
    uint32_t stack_id;  /* 0 = none */
    int16_t device;     /* -1 for host memory */
    uint16_t api;       /* gmp_api */
    uint8_t type;       /* gmp_event_type */
    uint8_t backend;    /* gmp_backend */
    uint16_t flags;     /* GMP_EVENT_FLAG_* */
    uint32_t reserved;  /* zero; keeps the record 64 bytes with no padding */
} gmp_event;

/* gmp_event.flags */
#define GMP_EVENT_FLAG_CUPTI 0x0001u /* recorded from a CUPTI callback, not a hook */

GMP_API const char *gmp_event_type_name(unsigned type);
GMP_API const char *gmp_backend_name(unsigned backend);
GMP_API const char *gmp_api_name(unsigned api);
/* The library an API belongs to: "libc", "libcudart", "libcuda",
 * "libamdhip64"; "" for none (unknown, user). */
GMP_API const char *gmp_api_library(unsigned api);

/* ---- configuration ------------------------------------------------------- */

#define GMP_METADATA_MAX 8192
#define GMP_CONTEXT_MAX 1024

/* Which path records CUDA memory (GMP_CUDA_MODE). */
typedef enum gmp_cuda_mode {
    GMP_CUDA_MODE_AUTO = 0,  /* CUPTI when CUDA_INJECTION64_PATH names us, else hooks */
    GMP_CUDA_MODE_INTERPOSE, /* the hooks only; an injection does nothing */
    GMP_CUDA_MODE_CUPTI      /* CUPTI; the hooks while it is not running */
} gmp_cuda_mode;

/* When a fatal signal writes a bundle (GMP_ON_CRASH). */
typedef enum gmp_on_crash {
    GMP_ON_CRASH_AFTER_FAILURE = 0, /* only once an allocation failed in this process */
    GMP_ON_CRASH_ALWAYS,
    GMP_ON_CRASH_NEVER
} gmp_on_crash;

/* NVML, for other processes' usage of a GPU (GMP_NVML). */
typedef enum gmp_nvml_mode {
    GMP_NVML_AUTO = 0, /* when the program loaded libnvidia-ml.so.1 */
    GMP_NVML_LOAD,     /* the preload loads it, once the process uses a CUDA device */
    GMP_NVML_OFF
} gmp_nvml_mode;

typedef struct gmp_config {
    /* the numbers first and the default dump directory next: a process that
     * sets nothing touches one page of this at start-up */
    int enabled;                       /* GMP_ENABLED */
    uint32_t buffer_size;              /* GMP_BUFFER_SIZE: events kept */
    uint32_t max_dumps;                /* GMP_MAX_DUMPS */
    uint64_t max_total_mb;             /* GMP_MAX_TOTAL_MB */
    /* read by the preload */
    uint64_t host_event_min_bytes;     /* GMP_HOST_EVENT_MIN_BYTES */
    uint32_t oom_confirm_ms;           /* GMP_OOM_CONFIRM_MS */
    int oom_policy_first;              /* GMP_OOM_POLICY=first|episode */
    gmp_on_crash on_crash;             /* GMP_ON_CRASH */
    int watchdog;                      /* GMP_WATCHDOG */
    uint64_t watchdog_min_mb;          /* GMP_WATCHDOG_MIN_MB: heap that starts it */
    uint32_t pressure_pct;             /* GMP_PRESSURE_PCT of the nearest limit */
    uint32_t prom_interval_s;          /* GMP_PROM_INTERVAL_S */
    gmp_cuda_mode cuda_mode;           /* GMP_CUDA_MODE=auto|interpose|cupti */
    int stacks;                        /* GMP_STACKS: allocation stacks */
    int leak_check;                    /* GMP_LEAK_CHECK: a leak report at exit */
    uint32_t sample_ms;                /* GMP_SAMPLE_MS: sample events every N ms, 0 none */
    gmp_nvml_mode nvml;                /* GMP_NVML=auto|load|off */
    char dump_dir[GMP_PATH_MAX];       /* GMP_DUMP_DIR */
    char prom_file[GMP_PATH_MAX];      /* GMP_PROM_FILE: Prometheus textfile ("" none; %p = pid) */
    char run_dir[GMP_PATH_MAX];        /* GMP_RUN_DIR ("": the rule of rundir.c) */
    char context[GMP_CONTEXT_MAX];     /* GMP_CONTEXT */
    char metadata_json[GMP_METADATA_MAX]; /* GMP_METADATA: a JSON object */
} gmp_config;

/* Fill the defaults (one place holds them: the option list of
 * recorder/config.c, which docs/user-guide.md's table is made from). */
GMP_API void gmp_config_defaults(gmp_config *cfg);
/* Defaults, then the GMP_* variables.  Bad values print one stderr line,
 * naming each variable and the value used instead; returns how many were bad. */
GMP_API int gmp_config_from_env(gmp_config *cfg);
/* For bindings, which should not mirror the struct: a config with the
 * defaults on the heap (NULL when out of memory), freed by gmp_config_free;
 * and one setting by its variable's name ("GMP_DUMP_DIR"), checked as the
 * environment's would be: 0, or -1 and one stderr line (the value is kept). */
GMP_API gmp_config *gmp_config_new(void);
GMP_API void gmp_config_free(gmp_config *cfg);
GMP_API int gmp_config_set(gmp_config *cfg, const char *variable, const char *value);

/* ---- classification ------------------------------------------------------ */

typedef struct gmp_classification {
    int is_oom;
    char reason[160]; /* e.g. "cudaErrorMemoryAllocation",
                         "torch.cuda.OutOfMemoryError",
                         "message_pattern:out of memory" */
} gmp_classification;

/* A return code of an allocation API (api may be GMP_API_UNKNOWN). */
GMP_API gmp_classification gmp_classify_result(gmp_backend backend, gmp_api api,
                                               long code);
/* An exception (any argument may be NULL): type, module, message text. */
GMP_API gmp_classification gmp_classify_exception(const char *type,
                                                  const char *module,
                                                  const char *message);

/* ---- the recorder -------------------------------------------------------- */

typedef struct gmp_recorder gmp_recorder;

/* Returns NULL only when out of memory.  A disabled config gives a recorder
 * whose record/dump calls do nothing.  The ring file is created lazily, on
 * the first event, in the run directory. */
GMP_API gmp_recorder *gmp_recorder_create(const gmp_config *cfg);
/* Unmaps and removes the ring file (a normal exit leaves nothing behind). */
GMP_API void gmp_recorder_destroy(gmp_recorder *rec);

/* Record one event.  Fills seq, and time_ns/thread_id when 0.  Returns 0, or
 * -1 when the event was dropped (disabled, ring unavailable, slot busy). */
GMP_API int gmp_record(gmp_recorder *rec, const gmp_event *ev);

/* Copy up to max events, oldest first, never torn or duplicated. */
GMP_API size_t gmp_snapshot(gmp_recorder *rec, gmp_event *out, size_t max);

/* Path of the live ring file ("" when none yet, or anonymous). */
GMP_API const char *gmp_recorder_ring_path(const gmp_recorder *rec);
/* The directory its bundles go to (absolute). */
GMP_API const char *gmp_recorder_dump_dir(const gmp_recorder *rec);

/* Context and custom metadata of the bundles written from now on (the
 * metadata must be a JSON object).  0, or -1 when refused. */
GMP_API int gmp_recorder_set_context(gmp_recorder *rec, const char *context);
GMP_API int gmp_recorder_set_metadata(gmp_recorder *rec, const char *json_object);

/* In a child after fork: forget the parent's ring (the parent keeps it);
 * the child makes its own on its first event. */
GMP_API void gmp_recorder_after_fork(gmp_recorder *rec);
/* At exit: remove the ring file but keep recording possible until the
 * process is gone (late threads and destructors stay safe). */
GMP_API void gmp_recorder_release_ring(gmp_recorder *rec);

/* Under LD_PRELOAD=libgpumemprof_preload.so, a program finds the preload's
 * recorder with dlsym(RTLD_DEFAULT, GMP_PRELOAD_RECORDER_SYMBOL) and may add
 * context, metadata and its own events to it (NULL when recording is off). */
#define GMP_PRELOAD_RECORDER_SYMBOL "gmp_preload_recorder"
typedef gmp_recorder *(*gmp_preload_recorder_fn)(void);
/* For a program that catches an OOM and reports it there, the preload's
 * GMP_PRELOAD_DUMP_EXCEPTION_SYMBOL takes gmp_dump_exception's arguments and
 * makes the report the bundle of the failure the preload saw (the episode
 * still open, or the bundle written in the last 10 s), so that one OOM is
 * one bundle; a report with no such failure is a bundle of its own. */
#define GMP_PRELOAD_DUMP_EXCEPTION_SYMBOL "gmp_preload_dump_exception"
/* PyTorch's out-of-memory observer (GMP_TORCH_HISTORY=1) hands its snapshot
 * (a pickle) and a summary of its largest blocks (JSON) to the preload's
 * GMP_PRELOAD_TORCH_SNAPSHOT_SYMBOL: int (int device, uint64_t request,
 * uint64_t device_free, const char *snapshot, size_t snapshot_len,
 * const char *blocks_json, size_t blocks_len).  They join the bundle of
 * that OOM (its open episode written now, or the bundle written in the
 * last 10 s; else one of its own) as torch_snapshot.pickle and
 * torch_blocks.json.  0, or -1. */
#define GMP_PRELOAD_TORCH_SNAPSHOT_SYMBOL "gmp_preload_torch_snapshot"

/* A program that measures a stretch of itself (the Python profiler) reads
 * the preload's counters of its host allocations:
 *   int  GMP_PRELOAD_PEAK_WATCH_BEGIN_SYMBOL(void): a watch (>= 0) whose
 *        peak starts at the bytes in use now; -1 when none is free or the
 *        preload does not record;
 *   int  GMP_PRELOAD_HOST_COUNTS_SYMBOL(int watch, gmp_host_reading *out):
 *        0, or -1 when the preload does not record (watch -1: no peak);
 *   void GMP_PRELOAD_PEAK_WATCH_END_SYMBOL(int watch).
 * A watch's peak is the most bytes in use seen since it began, at each
 * allocation of GMP_HOST_EVENT_MIN_BYTES or more and at each read (the
 * common path of small blocks reads no shared counter); watches are
 * independent, so measurements may nest and run in several threads. */
typedef struct gmp_host_reading {
    uint64_t in_use;      /* bytes in the process's host blocks now */
    uint64_t allocations; /* calls that took host bytes, so far */
    uint64_t frees;       /* calls that gave them back, so far */
    uint64_t peak;        /* the watch's peak (0 without one) */
} gmp_host_reading;
#define GMP_PRELOAD_PEAK_WATCH_BEGIN_SYMBOL "gmp_preload_peak_watch_begin"
#define GMP_PRELOAD_HOST_COUNTS_SYMBOL "gmp_preload_host_counts"
#define GMP_PRELOAD_PEAK_WATCH_END_SYMBOL "gmp_preload_peak_watch_end"

/* A device's memory as the process saw it (its own context's view), and
 * what the collectors added (known says which of those fields hold). */
#define GMP_DS_USED 0x1u          /* used_bytes: the device's own count */
#define GMP_DS_DRIVER_PROCESS 0x2u /* driver_process_bytes */
#define GMP_DS_OTHERS 0x4u        /* other_processes_bytes and _count */
typedef struct gmp_device_state {
    gmp_backend backend;
    int device;
    uint64_t free_bytes, total;  /* as the runtime or driver reported them */
    uint64_t process_bytes;      /* what this process held there (its live allocations) */
    uint64_t sampled_ns;         /* when (CLOCK_REALTIME) */
    unsigned known;              /* GMP_DS_* */
    uint64_t used_bytes;         /* all processes, contexts included */
    uint64_t driver_process_bytes; /* this process as the driver counts it */
    uint64_t other_processes_bytes;
    uint32_t other_process_count;
    char name[96];               /* "" unknown */
    const char *source;          /* "cuMemGetInfo", "cuMemGetInfo+nvml", ...; NULL unknown */
} gmp_device_state;

/* ---- growth that is never given back (recorder/growth.c) ----------------- */

/* gmp_growth_judge reads a series of what is held over time (held[i] bytes
 * at t[i], t ascending: seconds, or any clock, such as an event's place
 * among a bundle's events; a value holds until the next) in its last
 * window_s of that clock (<= 0: all of it), cut into four quarters: when
 * the lowest held in each quarter rises in every one, by 1 MiB or more and
 * by 2% of what is held at the end, memory grew and was never given back
 * (a leak, or a cache that never lets go).  limit (bytes; <= 0 unknown) is
 * what the severity is a share of: high from 10% of it, medium from 2%
 * (without one: of what is held at the end, from 50% and 10%).  0, or -1
 * for a bad series (out is then all zero). */
enum { GMP_GROWTH_NONE, GMP_GROWTH_LOW, GMP_GROWTH_MEDIUM, GMP_GROWTH_HIGH };
typedef struct gmp_growth {
    int detected;
    int severity;          /* GMP_GROWTH_* */
    unsigned rises;        /* quarters whose lowest rose over the one before (0-3) */
    size_t points;         /* of the series inside the window (8 needed) */
    double window_s;       /* the window's span, on the series' clock */
    double floor_first, floor_last; /* the lowest held in the first and last quarter */
    double end;            /* held at the end */
    double increase;       /* floor_last - floor_first */
} gmp_growth;
GMP_API int gmp_growth_judge(const double *t, const double *held, size_t n, double window_s,
                             double limit, gmp_growth *out);
GMP_API const char *gmp_growth_severity_name(int severity); /* "none" ... "high" */

/* ---- the collectors, for bindings and tools ------------------------------ */

/* The memory collectors (cuda, nvml, rocm, host, in that order): how many,
 * and the name of collector i (NULL past the end).  gmp_collector_sample
 * reads every device collector i sees into out (at most cap; the host is one
 * entry with device -1) and returns how many, or -1 when it cannot sample
 * here (*why_not, when given, says why: static text).  In the preload's
 * process the collectors use only the GPU libraries the program loaded;
 * GMP_SAMPLE_MAY_LOAD, for a tool, lets them load what they need, from then
 * on, in this copy of the library. */
#define GMP_SAMPLE_MAY_LOAD 0x1u
/* GMP_SAMPLE_PROCESS_LIMIT: the host entry is this process against the
 * nearest limit it runs under: RLIMIT_AS (its address space, VmSize, is
 * then used_bytes), its memory cgroup, or the machine, whichever it is
 * nearest to running out of; source says which ("RLIMIT_AS", "cgroup",
 * "meminfo").  Without it: the cgroup's when one binds, else the machine's. */
#define GMP_SAMPLE_PROCESS_LIMIT 0x2u
GMP_API int gmp_collector_count(void);
GMP_API const char *gmp_collector_name(int i);
GMP_API int gmp_collector_sample(int i, unsigned flags, gmp_device_state *out, size_t cap,
                                 const char **why_not);
/* What collector i can tell, whether or not it can sample here. */
typedef struct gmp_collector_caps {
    gmp_backend backend;
    int supports_device_total;
    int supports_device_free;
    int supports_process_usage; /* this process's and others' bytes */
    const char *sampling_source;  /* "cuMemGetInfo", "nvml", ... */
} gmp_collector_caps;
GMP_API int gmp_collector_capabilities(int i, gmp_collector_caps *out); /* 0, or -1 */

/* gmp_dump of an exception, for bindings (no struct): backend by name
 * ("cuda", "rocm" or "hip", "cpu"; another name is written as cpu),
 * metadata_json a JSON object or NULL, traceback_fd as python_traceback_fd. */
GMP_API const char *gmp_dump_exception(gmp_recorder *rec, const char *reason,
                                       const char *exception_type,
                                       const char *exception_module,
                                       const char *exception_message, const char *context,
                                       const char *backend, const char *metadata_json,
                                       int traceback_fd, char *path_out, size_t path_cap);

/* Add the file name (a plain file name; data, len bytes) to the bundle at
 * path and list it in its manifest, rewritten atomically; never replaces a
 * file the bundle has.  For bindings (the Python recorder attaches the
 * events as the program recorded them).  Not for a signal handler: it
 * allocates.  0, or -1 with errno. */
GMP_API int gmp_bundle_attach(const char *bundle, const char *name, const char *data,
                              size_t len);

/* Apply the retention rules to a dump directory: at most max_dumps bundles
 * and max_total_mb, oldest first; keep (a bundle name) is never removed.
 * Returns how many bundles were removed, or -1 on error. */
GMP_API int gmp_retention_apply(const char *dump_dir, uint32_t max_dumps,
                                uint64_t max_total_mb, const char *keep);

#ifdef __cplusplus
}
#endif
#endif /* GPUMEMPROF_H */
