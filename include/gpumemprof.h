/*
 * gpumemprof.h — the one public header of gpumemprof.
 *
 * gpumemprof records the memory a process allocates (GPU and host) into a
 * bounded ring that lives in a shared file mapping, and writes a diagnostic
 * bundle (oom_dump_<time>_<pid>_<backend>_<seq>/) when the process runs out
 * of memory.  This header is the C form of the flight recorder: build a
 * config, create a recorder, record events, snapshot them oldest first,
 * classify an error, and dump a bundle.  The LD_PRELOAD interposer is built
 * on exactly this API; nothing here knows about hooks.
 *
 * Thread safety: gmp_record() and gmp_snapshot() may be called from any
 * number of threads at once and never block or allocate.  gmp_dump() does
 * not allocate either, so it may run on an emergency path.
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
    int enabled;                       /* GMP_ENABLED, default 1 */
    uint32_t buffer_size;              /* GMP_BUFFER_SIZE, events kept, default 10000 */
    uint32_t max_dumps;                /* GMP_MAX_DUMPS, default 5 */
    uint64_t max_total_mb;             /* GMP_MAX_TOTAL_MB, default 256 */
    /* read by the preload */
    uint64_t host_event_min_bytes;     /* GMP_HOST_EVENT_MIN_BYTES, default 1 MiB */
    uint32_t oom_confirm_ms;           /* GMP_OOM_CONFIRM_MS, default 1000 */
    int oom_policy_first;              /* GMP_OOM_POLICY=first|episode, default episode */
    gmp_on_crash on_crash;             /* GMP_ON_CRASH, default after-failure */
    int watchdog;                      /* GMP_WATCHDOG, default 1 */
    uint64_t watchdog_min_mb;          /* GMP_WATCHDOG_MIN_MB: heap that starts it, default 256 */
    uint32_t pressure_pct;             /* GMP_PRESSURE_PCT of the nearest limit, default 90 */
    uint32_t prom_interval_s;          /* GMP_PROM_INTERVAL_S, default 15 */
    gmp_cuda_mode cuda_mode;           /* GMP_CUDA_MODE=auto|interpose|cupti, default auto */
    int stacks;                        /* GMP_STACKS: allocation stacks, default 1 */
    int leak_check;                    /* GMP_LEAK_CHECK: a leak report at exit, default 0 */
    uint32_t sample_ms;                /* GMP_SAMPLE_MS: sample events every N ms, 0 none */
    gmp_nvml_mode nvml;                /* GMP_NVML=auto|load|off, default auto */
    char dump_dir[GMP_PATH_MAX];       /* GMP_DUMP_DIR, default ./oom_dumps */
    char prom_file[GMP_PATH_MAX];      /* GMP_PROM_FILE: Prometheus textfile ("" none; %p = pid) */
    char run_dir[GMP_PATH_MAX];        /* GMP_RUN_DIR ("" = default rule) */
    char context[GMP_CONTEXT_MAX];     /* GMP_CONTEXT, default "" */
    char metadata_json[GMP_METADATA_MAX]; /* GMP_METADATA: a JSON object, default "{}" */
} gmp_config;

/* Fill the documented defaults. */
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

#define GMP_STACK_MAX 32

typedef struct gmp_failed_request {
    int present;
    gmp_api api;
    uint64_t size;
    int device;
    long code;
    uint64_t in_use; /* bytes in use on that device when it failed */
    /* the failing call's return addresses, innermost first (the program's
     * frames: the recorder's own are left out); symbolise with modules.json */
    uint32_t stack_depth;
    uint64_t stack[GMP_STACK_MAX];
    /* the time of its "oom" event (CLOCK_REALTIME), which names that event
     * among retries of the same size; 0: not known */
    uint64_t time_ns;
    /* the process's address space when it failed (VmSize), which RLIMIT_AS
     * limits; read then, not when the bundle is written, after the program
     * let go of memory; 0: not known */
    uint64_t vm_size;
    /* the failing call's stack as the events name stacks (stacks.json: its
     * Python frames, a Python thread's own lines, with its native ones);
     * 0: none */
    uint32_t stack_id;
} gmp_failed_request;

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

/* One live device allocation (or cuMemCreate handle), for allocations.json
 * and the leak report. */
typedef struct gmp_live_allocation {
    uint64_t address;  /* the handle, for cuMemCreate */
    uint64_t size;
    uint64_t time_ns;  /* when it was made (CLOCK_REALTIME) */
    uint32_t stack_id; /* 0 none */
    int16_t device;    /* -1: pinned host memory */
    uint8_t backend;
    uint16_t api;
} gmp_live_allocation;
typedef void (*gmp_live_visit_fn)(const gmp_live_allocation *a, void *ctx);
/* Calls visit once per live allocation (lock-free, no allocation). */
typedef void (*gmp_live_foreach_fn)(gmp_live_visit_fn visit, void *ctx, void *arg);

/* What gmp_dump writes. */
typedef enum gmp_bundle_kind {
    GMP_BUNDLE_OOM = 0, /* oom_dump_...: the bundle */
    GMP_BUNDLE_LEAKS    /* leak_report_...: leaks.json, stacks, modules, environment */
} gmp_bundle_kind;

/* Fills frames (at most max) of stack `id`; returns how many, 0 unknown. */
typedef uint32_t (*gmp_stack_lookup_fn)(uint32_t id, uint64_t *frames, uint32_t max, void *arg);

/* A stack's frame that is a Python frame, not a return address: the tag
 * and the frame's id, which a gmp_python_frame_lookup_fn names (innermost
 * first, after the native frames). */
#define GMP_PYTHON_FRAME_TAG (1ull << 63)
typedef struct gmp_python_frame {
    char file[256];     /* co_filename, UTF-8 */
    char function[128]; /* the qualified name where the code has one */
    uint32_t line;      /* 0: not known */
} gmp_python_frame;
/* 0 with *out filled, or -1 (an id not known). */
typedef int (*gmp_python_frame_lookup_fn)(uint32_t id, gmp_python_frame *out, void *arg);

/* How the process that wrote a bundle ended: metadata.json's "outcome".
 * RUNNING (zero) while it still runs; the preload rewrites it at the end. */
typedef enum gmp_outcome_state {
    GMP_OUTCOME_RUNNING = 0,
    GMP_OUTCOME_EXITED, /* code: the exit status (0: it survived) */
    GMP_OUTCOME_KILLED, /* code: the signal */
    GMP_OUTCOME_GONE,   /* ended without exiting, by a signal nobody saw */
} gmp_outcome_state;

typedef struct gmp_outcome {
    gmp_outcome_state state;
    int code;
} gmp_outcome;

typedef struct gmp_dump_request {
    const char *reason;            /* classification reason */
    const char *exception_type;    /* NULL -> null */
    const char *exception_module;
    const char *exception_message;
    const char *context;           /* NULL -> config context */
    gmp_backend backend;
    const char *metadata_json;     /* JSON object; NULL -> config metadata */
    const char *confirmed_by;      /* how the OOM episode was confirmed, or NULL */
    gmp_failed_request failed;
    uint32_t recovered_episodes;
    const char *evidence;          /* why we believe the reason, e.g. the kernel OOM killer */
    int python_traceback_fd;       /* > 0: its contents become python_traceback.txt */
    /* the frames of the events' stack_id (1-based), for stacks.json; NULL: none */
    gmp_stack_lookup_fn stack_lookup;
    void *stack_lookup_arg;
    /* metadata.json's device_state: every device whose memory is known */
    const gmp_device_state *devices;
    uint32_t device_count;
    /* allocations.json (or leaks.json): the live allocations; NULL none */
    gmp_live_foreach_fn live_foreach;
    void *live_arg;
    gmp_bundle_kind kind;
    gmp_outcome outcome;           /* how the process ended; zero: it still runs */
    /* the Python frames those stacks hold (GMP_PYTHON_FRAME_TAG); NULL: none */
    gmp_python_frame_lookup_fn python_frame_lookup;
    void *python_frame_lookup_arg;
    /* > 0: allocations.json as it was at the failure (a memfd that
     * gmp_bundle_live_snapshot wrote), used instead of live_foreach now,
     * after the program may have let go; live_snapshot_stacks: the stack
     * ids it names, a bitmap of GMP_BUNDLE_STACK_IDS bits */
    int live_snapshot_fd;
    const uint64_t *live_snapshot_stacks;
    /* the host as it was at the failure (metadata.json's host_state); NULL:
     * read when the bundle is written */
    const struct gmp_host_state *host;
} gmp_dump_request;

#define GMP_BUNDLE_STACK_IDS 4096 /* stacks.json holds ids up to this */

/* Write a bundle into the dump directory, apply retention, and return the
 * bundle's path in path_out.  Returns path_out, or NULL when disabled or on
 * failure (one stderr line says why).  Allocates nothing. */
GMP_API const char *gmp_dump(gmp_recorder *rec, const gmp_dump_request *req,
                             char *path_out, size_t path_cap);
/* gmp_dump of an exception, for bindings (no struct): backend by name
 * ("cuda", "rocm" or "hip", "cpu"; another name is written as cpu),
 * metadata_json a JSON object or NULL, traceback_fd as python_traceback_fd. */
GMP_API const char *gmp_dump_exception(gmp_recorder *rec, const char *reason,
                                       const char *exception_type,
                                       const char *exception_module,
                                       const char *exception_message, const char *context,
                                       const char *backend, const char *metadata_json,
                                       int traceback_fd, char *path_out, size_t path_cap);

/* Set exception_type, exception_module and exception_message of the bundle
 * at path (a framework said more than the failing call); metadata.json is
 * rewritten atomically.  buf is scratch (64 KiB is plenty).  0, or -1. */
GMP_API int gmp_bundle_patch_exception(const char *bundle, const char *type,
                                       const char *module, const char *message, char *buf,
                                       size_t cap);

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

/* ---- rings of other processes ---------------------------------------------
 * A process killed by SIGKILL (the kernel OOM killer) runs nothing: its ring
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

#ifdef __cplusplus
}
#endif
#endif /* GPUMEMPROF_H */
