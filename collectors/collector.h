/*
 * collector.h — device and host memory collectors behind one interface (seed
 * 001's contract in C): a name, whether it can sample here, a sample of one
 * device, and what it can tell.  The preload samples them at a failure and
 * into every bundle; `gmp-inspect info` shows them.
 *
 * None of them creates a CUDA context or loads a GPU library the program
 * did not load: in the preload they only look for libraries already there
 * (dlopen RTLD_NOLOAD).  A tool may let them load what they need
 * (gmp_collectors_may_load), as `gmp-inspect info` does, and even then the
 * CUDA collector reads device totals without a context.
 *
 *   cuda.c   cuMemGetInfo in the calling thread's context, device names,
 *            driver version
 *   nvml.c   libnvidia-ml.so.1: device used/free/total without a context,
 *            per-process usage (who else holds this GPU)
 *   rocm.c   hipMemGetInfo, and rocm-smi's library when loaded
 *   host_memory.c  /proc/self/status, /proc/meminfo, cgroup v2/v1, PSI, rlimits
 */
#ifndef GMP_COLLECTOR_H
#define GMP_COLLECTOR_H

#include "gpumemprof.h"
#include "util.h"

#include <stdint.h>

#define GMP_UNKNOWN UINT64_MAX

typedef struct gmp_collector {
    const char *name;
    /* 1 when it can sample now; else 0 and why in `why` (static text) */
    int (*is_available)(const char **why);
    int (*device_count)(void);
    /* One device (-1: the host); fills out (device_state's fields, unknown
     * ones GMP_UNKNOWN) and returns 0, or -1. */
    int (*sample)(int device, gmp_device_state *out);
    void (*capabilities)(gmp_collector_caps *out);
} gmp_collector;

GMP_HIDDEN extern const gmp_collector gmp_collector_cuda;
GMP_HIDDEN extern const gmp_collector gmp_collector_nvml;
GMP_HIDDEN extern const gmp_collector gmp_collector_rocm;
GMP_HIDDEN extern const gmp_collector gmp_collector_host;

/* Every collector, host last; NULL-terminated. */
GMP_HIDDEN extern const gmp_collector *const gmp_collectors[];

/* Tools: the collectors may dlopen the libraries they need (and call
 * cuInit / nvmlInit).  Off by default: the preload never loads one. */
GMP_HIDDEN void gmp_collectors_may_load(int yes);
GMP_HIDDEN int gmp_collectors_loading_allowed(void);

/* A collector's library functions, bound once: *state is 0 not tried,
 * 1 binding, 2 ready, 3 absent; bind() fills the collector's table and
 * says whether it can work.  Returns 1 when ready. */
GMP_HIDDEN int gmp_collector_resolve(int *state, int (*bind)(void));

/* A library: the handle when it is loaded (or loadable, when allowed). */
GMP_HIDDEN void *gmp_collector_open(const char *const *sonames);

/* Versions and names the GPU libraries give without a context, for
 * environment.json.  Filled by gmp_gpu_probe (normal context: it may call
 * into the libraries); read on the dump path as they are.  "" unknown. */
typedef struct gmp_gpu_probe_result {
    int cuda_driver_version;   /* cuDriverGetVersion: 12040 = 12.4; 0 unknown */
    int cuda_runtime_version;  /* cudaRuntimeGetVersion of a shared libcudart */
    char nvml_driver_version[32]; /* "550.54.15" */
    int hip_runtime_version;   /* hipRuntimeGetVersion */
    char python_version[64];   /* Py_GetVersion, up to the first space */
    char torch_version[48];    /* torch/version.py next to the loaded libtorch */
    int device_count;
    struct {
        gmp_backend backend;
        int device;
        char name[96];
        uint64_t total;
    } devices[16];
} gmp_gpu_probe_result;

/* Refresh what can be learned now (cheap once everything is found);
 * gmp_python_probe records CPython's version from its Py_GetVersion, when
 * the caller found one (the preload, at the first failure or bundle,
 * without a dl* call). */
GMP_HIDDEN void gmp_gpu_probe(void);
/* Only torch's version (a file beside the loaded libtorch: no allocation,
 * no GPU library called), for a host OOM, where the rest may not run. */
GMP_HIDDEN void gmp_torch_probe(void);
GMP_HIDDEN void gmp_python_probe(const char *(*py_get_version)(void));
/* The same for a program that calls the recorder itself (the Python
 * package without the preload): Py_GetVersion looked up with dlsym, so
 * only in a normal context. */
GMP_HIDDEN void gmp_python_probe_lookup(void);
GMP_HIDDEN const gmp_gpu_probe_result *gmp_gpu_probe_get(void);
/* The name of a device from the probe, or NULL. */
GMP_HIDDEN const char *gmp_gpu_probe_device_name(gmp_backend backend, int device);

/* The host in detail, for metadata.json's host_state and `gmp-inspect info`.
 * Read from /proc and /sys into the struct: no allocation. */
typedef struct gmp_host_state {
    uint64_t sampled_ns;
    /* this process (/proc/self/status), bytes */
    uint64_t vm_rss, vm_hwm, vm_size, vm_peak, vm_swap;
    /* the machine (/proc/meminfo) */
    uint64_t mem_total, mem_available, swap_total, swap_free;
    /* /dev/shm as this process sees it (its mount namespace's: a
     * container's is often 64 MiB), where POSIX shared memory lives */
    uint64_t shm_total, shm_available;
    /* the memory cgroup; cgroup_version 0 when none */
    int cgroup_version;
    char cgroup_path[256];
    /* cg_current and cg_max are of the cgroup whose limit binds
     * (gmp_cgroup_binding_limit): that ancestor's path, else "" */
    char cg_limit_path[256];
    uint64_t cg_current, cg_max, cg_peak, cg_high; /* GMP_UNKNOWN: none / "max" */
    uint64_t cg_swap_current, cg_swap_max;
    uint64_t cg_events_high, cg_events_max, cg_events_oom, cg_events_oom_kill;
    /* PSI memory: the cgroup's, else the machine's; avg10 etc. in hundredths */
    int psi_present;
    uint32_t psi_some_avg10, psi_some_avg60, psi_some_avg300;
    uint32_t psi_full_avg10, psi_full_avg60, psi_full_avg300;
    uint64_t psi_some_total_us, psi_full_total_us;
    /* soft and hard limits (GMP_UNKNOWN: unlimited) */
    uint64_t rlimit_as[2], rlimit_data[2], rlimit_rss[2], rlimit_memlock[2];
} gmp_host_state;

GMP_HIDDEN void gmp_host_state_read(gmp_host_state *out);
/* The limit that binds a cgroup (dir, cgroup version 1 or 2): on entry
 * *used and *limit are its own (GMP_UNKNOWN: none); an ancestor whose limit
 * leaves less room (its limit less its usage, which counts ours) replaces
 * them, and its path goes to path_out ("" when none does).  Slurm limits a
 * job's and a step's cgroups, not a task's.  At most 16 levels, never the
 * hierarchy's root; plain reads into buf, no allocation. */
GMP_HIDDEN void gmp_cgroup_binding_limit(const char *dir, int version, uint64_t *used,
                                         uint64_t *limit, char *path_out, size_t path_cap,
                                         char *buf, size_t cap);
/* The host entry against the nearest limit (GMP_SAMPLE_PROCESS_LIMIT). */
GMP_HIDDEN int gmp_host_sample_process_limit(gmp_device_state *out);
/* Its cgroup part from another process's memory cgroup, named by the file
 * that counts its OOM kills (a ring's): left as it was when that cgroup
 * cannot be read (removed with its processes). */
GMP_HIDDEN void gmp_host_state_read_cgroup(gmp_host_state *s, const char *oom_file);

/* The number on the line of text that starts with `key` (then ':' or ' '),
 * times unit ("VmRSS:  123 kB" with unit 1024); GMP_UNKNOWN without one. */
GMP_HIDDEN uint64_t gmp_text_value(const char *text, const char *key, uint64_t unit);
/* The number in dir/name (a cgroup file); GMP_UNKNOWN for "max", absent or
 * unreadable.  buf is scratch. */
GMP_HIDDEN uint64_t gmp_file_value(const char *dir, const char *name, char *buf, size_t cap);

/* Helpers the collectors share (cuda.c, nvml.c, rocm.c). */
GMP_HIDDEN int gmp_cuda_device_uuid(int device, char out[48]); /* "GPU-..." as NVML spells it */
GMP_HIDDEN int gmp_cuda_driver_version(void);                  /* 0 unknown */
GMP_HIDDEN int gmp_nvml_driver_version(char *out, unsigned cap);
GMP_HIDDEN void gmp_nvml_load(void); /* GMP_NVML=load: the preload loads NVML itself */
GMP_HIDDEN int gmp_hip_runtime_version(void);

#endif
