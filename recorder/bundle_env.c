/*
 * bundle_env.c — environment.json: who the process was and what the machine
 * looked like (pid, cwd, kernel, command line, limits, cgroup, and an
 * allow-list of environment variables with secret-looking values redacted),
 * and the manifest's "program", the executable's file name.
 * Read straight from uname(2), getrlimit(2), /proc and `environ` into fixed
 * buffers: this runs on the dump path, where malloc may be what failed.
 */
#include "bundle.h"
#include "redact.h"
#include "collector.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

extern char **environ;

/* Exact names worth knowing when memory ran out, then whole prefixes (only
 * those no other tool shares: Terraform's TF_* are not TensorFlow's).  The
 * names are one string, each NUL-ended, an empty name last: an array of
 * pointers to them would be relocated, a page of the preload written by
 * the loader in every process at start. */
static const char env_names[] =
    "TF_CPP_MIN_LOG_LEVEL\0" "TF_CPP_VMODULE\0" "TF_FORCE_GPU_ALLOW_GROWTH\0"
    "TF_GPU_ALLOCATOR\0" "TF_GPU_THREAD_MODE\0" "TF_XLA_FLAGS\0" "TF_ENABLE_ONEDNN_OPTS\0"
    "TF_FORCE_UNIFIED_MEMORY\0" "TF_DETERMINISTIC_OPS\0" "TF_CUDNN_DETERMINISTIC\0"
    "TF_NUM_INTEROP_THREADS\0" "TF_NUM_INTRAOP_THREADS\0"
    "CUDA_VISIBLE_DEVICES\0" "HIP_VISIBLE_DEVICES\0" "ROCR_VISIBLE_DEVICES\0"
    "CUDA_LAUNCH_BLOCKING\0" "CUDA_MODULE_LOADING\0" "PYTORCH_CUDA_ALLOC_CONF\0"
    "PYTORCH_HIP_ALLOC_CONF\0" "PYTORCH_ALLOC_CONF\0" "PYTORCH_NO_CUDA_MEMORY_CACHING\0"
    "OMP_NUM_THREADS\0" "MALLOC_ARENA_MAX\0" "LD_PRELOAD\0" "RANK\0" "LOCAL_RANK\0"
    "WORLD_SIZE\0" "LOCAL_WORLD_SIZE\0" "NODE_RANK\0" "SLURM_JOB_ID\0" "SLURM_PROCID\0"
    "SLURM_LOCALID\0" "OMPI_COMM_WORLD_RANK\0" "OMPI_COMM_WORLD_SIZE\0"
    "PMI_RANK\0" "PMI_SIZE\0"
    /* the run a rank belongs to, and its other records: torchrun's (torch
     * elastic) run, restarts and error file, the rendezvous, PyTorch's NCCL
     * flight recorder */
    "TORCHELASTIC_RUN_ID\0" "TORCHELASTIC_RESTART_COUNT\0" "TORCHELASTIC_MAX_RESTARTS\0"
    "TORCHELASTIC_ERROR_FILE\0" "GROUP_RANK\0" "ROLE_RANK\0" "MASTER_ADDR\0" "MASTER_PORT\0"
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE\0" "TORCH_NCCL_TRACE_BUFFER_SIZE\0"
    "TORCH_NCCL_DUMP_ON_TIMEOUT\0" "SLURM_STEP_ID\0" "SLURM_NODEID\0" "SLURM_NTASKS\0"
    /* a runtime's own limits: the JVM's -Xmx, V8's --max-old-space-size, Go's,
     * GHC's -M, Mono's max-heap-size, the Boehm GC's, PyPy's, R's */
    "JAVA_TOOL_OPTIONS\0" "JDK_JAVA_OPTIONS\0" "_JAVA_OPTIONS\0" "NODE_OPTIONS\0" "GOMEMLIMIT\0"
    "GOGC\0" "GHCRTS\0" "MONO_GC_PARAMS\0" "MONO_ENV_OPTIONS\0" "GC_MAXIMUM_HEAP_SIZE\0"
    "PYPY_GC_MAX\0" "R_MAX_VSIZE\0"
    "";
static const char *const env_prefixes[] = {"GMP_", "XLA_", "NCCL_", "JAX_"};
static int env_name_allowed(const char *name, size_t len)
{
    for (const char *n = env_names; *n; n += strlen(n) + 1)
        if (strlen(n) == len && !memcmp(n, name, len))
            return 1;
    for (size_t i = 0; i < sizeof env_prefixes / sizeof *env_prefixes; i++) {
        size_t pl = strlen(env_prefixes[i]);
        if (len > pl && !memcmp(env_prefixes[i], name, pl))
            return 1;
    }
    return 0;
}

static void write_environ(gmp_jw *w)
{
    gmp_jw_key(w, "environment");
    gmp_jw_obj_begin(w);
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        size_t len = (size_t)(eq - *e);
        if (!env_name_allowed(*e, len))
            continue;
        char key[256];
        if (len >= sizeof key)
            continue;
        memcpy(key, *e, len);
        key[len] = '\0';
        gmp_jw_key(w, key);
        /* credentials masked in a copy (at most this much: a longer value is
         * cut, never written unchecked) */
        char value[4096];
        if (gmp_env_name_is_secret(*e, len)) {
            gmp_jw_str(w, "[REDACTED]");
        } else {
            gmp_strlcpy(value, eq + 1, sizeof value);
            gmp_redact_text(value, strlen(value));
            gmp_jw_str(w, value);
        }
    }
    gmp_jw_obj_end(w);
}

static void write_rlimit(gmp_jw *w, const char *name, int resource)
{
    struct rlimit rl;
    gmp_jw_key(w, name);
    if (getrlimit(resource, &rl) < 0) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_obj_begin(w);
    gmp_jw_key(w, "soft");
    if (rl.rlim_cur == RLIM_INFINITY)
        gmp_jw_str(w, "unlimited");
    else
        gmp_jw_u64(w, rl.rlim_cur);
    gmp_jw_key(w, "hard");
    if (rl.rlim_max == RLIM_INFINITY)
        gmp_jw_str(w, "unlimited");
    else
        gmp_jw_u64(w, rl.rlim_max);
    gmp_jw_obj_end(w);
}

static void write_cmdline(gmp_jw *w, char *buf, size_t cap)
{
    ssize_t n = gmp_read_file("/proc/self/cmdline", buf, cap);
    if (n > 0)
        gmp_redact_args(buf, (size_t)n);
    gmp_jw_key(w, "cmdline");
    gmp_jw_arr_begin(w);
    for (ssize_t i = 0; i < n;) {
        size_t len = strnlen(buf + i, (size_t)(n - i));
        gmp_jw_strn(w, buf + i, len);
        i += (ssize_t)len + 1;
    }
    gmp_jw_arr_end(w);
    gmp_jw_key(w, "cmdline_truncated");
    gmp_jw_bool(w, n >= 0 && (size_t)n + 1 >= cap);
}

/* First line of a /proc file, without its newline. */
static void write_first_line(gmp_jw *w, const char *key, const char *path,
                             char *buf, size_t cap)
{
    ssize_t n = gmp_read_file(path, buf, cap);
    gmp_jw_key(w, key);
    if (n <= 0) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_strn(w, buf, strcspn(buf, "\n"));
}

/* "12040" -> "12.4" (CUDA), HIP's 50221153 -> "5.2.21153"; NULL for 0 */
static const char *version_text(int v, int hip, char *out, size_t cap)
{
    if (v <= 0)
        return NULL;
    char a[24], b[24], c[24];
    if (hip) {
        gmp_fmt_u64((uint64_t)v / 10000000, a);
        gmp_fmt_u64((uint64_t)v / 100000 % 100, b);
        gmp_fmt_u64((uint64_t)v % 100000, c);
        gmp_strjoin(out, cap, a, ".", b, ".", c, (char *)NULL);
    } else {
        gmp_fmt_u64((uint64_t)v / 1000, a);
        gmp_fmt_u64((uint64_t)v % 1000 / 10, b);
        gmp_strjoin(out, cap, a, ".", b, (char *)NULL);
    }
    return out;
}

/* The machine, and the software the seed lists beside it (CPython, torch,
 * CUDA as the process's own libraries saw it; null where it loaded none). */
void gmp_bundle_fill_system(gmp_jw *w, const char *backend, const gmp_gpu_probe_result *p)
{
    struct utsname u;
    int have_uts = uname(&u) == 0;
    gmp_jw_key(w, "system");
    gmp_jw_obj_begin(w);
    gmp_jw_kstr(w, "platform", "Linux");
    gmp_jw_kstr(w, "hostname", have_uts ? u.nodename : NULL);
    gmp_jw_kstr(w, "kernel", have_uts ? u.release : NULL);
    gmp_jw_kstr(w, "kernel_version", have_uts ? u.version : NULL);
    gmp_jw_kstr(w, "machine", have_uts ? u.machine : NULL);
    gmp_jw_kstr(w, "detected_backend", backend);
    gmp_jw_ku64(w, "page_size", (uint64_t)sysconf(_SC_PAGESIZE));
    gmp_jw_ku64(w, "cpu_count", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    gmp_jw_kstr(w, "gpumemprof_version", GMP_VERSION_STRING);
    gmp_jw_kstr(w, "python_version", p && p->python_version[0] ? p->python_version : NULL);
    gmp_jw_kstr(w, "torch_version", p && p->torch_version[0] ? p->torch_version : NULL);
    int cuda_devices = 0;
    int n = p ? __atomic_load_n(&p->device_count, __ATOMIC_ACQUIRE) : 0;
    for (int i = 0; i < n; i++)
        cuda_devices += p->devices[i].backend == GMP_BACKEND_CUDA;
    gmp_jw_key(w, "cuda_available");
    gmp_jw_bool(w, cuda_devices > 0);
    char v[80];
    gmp_jw_kstr(w, "cuda_version",
                !p ? NULL
                   : version_text(p->cuda_runtime_version ? p->cuda_runtime_version
                                                          : p->cuda_driver_version,
                                  0, v, sizeof v));
    gmp_jw_obj_end(w);
}

long gmp_decimal(const char *v, size_t len, size_t max_digits)
{
    size_t n = v ? strnlen(v, len) : 0;
    if (!n || n > max_digits)
        return -1;
    long r = 0;
    for (size_t k = 0; k < n; k++) {
        if (v[k] < '0' || v[k] > '9')
            return -1;
        r = r * 10 + (v[k] - '0');
    }
    return r;
}

/* A non-negative decimal variable of at most 9 digits, or -1. */
static long env_number(const char *name)
{
    const char *v = getenv(name);
    return v ? gmp_decimal(v, strlen(v), 9) : -1;
}

static void place_value(char *out, size_t cap, const char *var)
{
    const char *v = getenv(var);
    out[0] = '\0';
    if (v && strlen(v) < cap) /* a value that does not fit is no id */
        gmp_strlcpy(out, v, cap);
}

void gmp_job_place_here(gmp_job_place *out)
{
    memset(out, 0, sizeof *out);
    place_value(out->job, sizeof out->job, "SLURM_JOB_ID");
    if (!out->job[0])
        return;
    place_value(out->step, sizeof out->step, "SLURM_STEP_ID");
    place_value(out->task, sizeof out->task, "SLURM_PROCID");
    place_value(out->local, sizeof out->local, "SLURM_LOCALID");
    place_value(out->node, sizeof out->node, "SLURMD_NODENAME");
}

/* A field of a place that may come from another process's file: bounded. */
static void place_key(gmp_jw *w, const char *key, const char *v, size_t cap)
{
    size_t n = strnlen(v, cap);
    gmp_jw_key(w, key);
    if (n)
        gmp_jw_strn(w, v, n);
    else
        gmp_jw_null(w);
}

void gmp_bundle_fill_place(gmp_jw *w, const gmp_job_place *p)
{
    gmp_jw_key(w, "slurm");
    if (!p || !p->job[0]) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_obj_begin(w);
    place_key(w, "job_id", p->job, sizeof p->job);
    place_key(w, "step_id", p->step, sizeof p->step);
    place_key(w, "task_id", p->task, sizeof p->task);
    place_key(w, "local_id", p->local, sizeof p->local);
    place_key(w, "node", p->node, sizeof p->node);
    gmp_jw_obj_end(w);
}

void gmp_bundle_job_name(const gmp_job_place *p, char *out, size_t cap)
{
    out[0] = '\0';
    if (!p || !p->job[0])
        return;
    size_t j = strnlen(p->job, sizeof p->job), s = strnlen(p->step, sizeof p->step);
    if (j + s + 2 > cap)
        return;
    memcpy(out, p->job, j);
    out[j] = '\0';
    if (s) {
        out[j] = '.';
        memcpy(out + j + 1, p->step, s);
        out[j + 1 + s] = '\0';
    }
}

long gmp_bundle_rank(void)
{
    static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                       "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        long r = env_number(vars[i]);
        if (r >= 0)
            return r;
    }
    return gmp_run_rank_learned_here(); /* torch.multiprocessing.spawn's index */
}

static void knumber_or_null(gmp_jw *w, const char *key, long v)
{
    gmp_jw_key(w, key);
    if (v >= 0)
        gmp_jw_i64(w, v);
    else
        gmp_jw_null(w);
}

/* Where this process sits in a distributed job. */
static void write_rank(gmp_jw *w)
{
    gmp_jw_key(w, "rank");
    gmp_jw_obj_begin(w);
    knumber_or_null(w, "rank", gmp_bundle_rank());
    knumber_or_null(w, "local_rank", env_number("LOCAL_RANK"));
    knumber_or_null(w, "world_size", env_number("WORLD_SIZE"));
    knumber_or_null(w, "slurm_procid", env_number("SLURM_PROCID"));
    knumber_or_null(w, "ompi_comm_world_rank", env_number("OMPI_COMM_WORLD_RANK"));
    knumber_or_null(w, "torch_spawn_index", gmp_run_rank_learned_here());
    gmp_jw_obj_end(w);
}

static void version_key(gmp_jw *w, const char *key, int v, int hip)
{
    char out[80];
    gmp_jw_kstr(w, key, version_text(v, hip, out, sizeof out));
}

/* The GPU libraries the process had loaded. */
void gmp_bundle_fill_software(gmp_jw *w, const gmp_gpu_probe_result *p)
{
    static const gmp_gpu_probe_result none;
    if (!p)
        p = &none;
    gmp_jw_key(w, "gpu");
    gmp_jw_obj_begin(w);
    version_key(w, "cuda_driver_version", p->cuda_driver_version, 0);
    version_key(w, "cuda_runtime_version", p->cuda_runtime_version, 0);
    gmp_jw_kstr(w, "nvidia_driver_version",
                p->nvml_driver_version[0] ? p->nvml_driver_version : NULL);
    version_key(w, "hip_runtime_version", p->hip_runtime_version, 1);
    gmp_jw_key(w, "devices");
    gmp_jw_arr_begin(w);
    int n = __atomic_load_n(&p->device_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "backend", gmp_backend_name(p->devices[i].backend));
        gmp_jw_ki64(w, "device", p->devices[i].device);
        gmp_jw_kstr(w, "name", p->devices[i].name[0] ? p->devices[i].name : NULL);
        gmp_jw_ku64(w, "total", p->devices[i].total);
        gmp_jw_obj_end(w);
    }
    gmp_jw_arr_end(w);
    gmp_jw_obj_end(w);
}

void gmp_bundle_fill_program(gmp_jw *w, int self, const gmp_ring_header *h)
{
    char exe[sizeof h->exe];
    size_t n = 0;
    if (self) {
        ssize_t got = readlink("/proc/self/exe", exe, sizeof exe);
        n = got > 0 && (size_t)got < sizeof exe ? (size_t)got : 0; /* whole, or none */
    } else if (h) {
        n = strnlen(h->exe, sizeof h->exe); /* another process's file: bounded */
        memcpy(exe, h->exe, n);
    }
    if (!n || n == sizeof exe)
        return;
    exe[n] = '\0';
    const char *slash = strrchr(exe, '/');
    const char *name = slash ? slash + 1 : exe;
    if (*name)
        gmp_jw_kstr(w, "program", name);
}

void gmp_bundle_fill_environment_of(gmp_jw *w, const gmp_ring_header *h, const char *backend)
{
    gmp_jw_obj_begin(w);
    gmp_jw_ki64(w, "pid", h ? h->pid : 0);
    gmp_jw_key(w, "cwd");
    gmp_jw_null(w);
    gmp_bundle_fill_system(w, backend, NULL);
    gmp_jw_key(w, "process");
    gmp_jw_obj_begin(w);
    if (h) {
        gmp_jw_ki64(w, "ppid", h->ppid);
        gmp_jw_ku64(w, "uid", h->uid);
        /* the header is another process's file: bounded, never trusted */
        gmp_jw_key(w, "exe");
        gmp_jw_strn(w, h->exe, strnlen(h->exe, sizeof h->exe));
        gmp_jw_key(w, "command");
        gmp_jw_strn(w, h->cmdline, strnlen(h->cmdline, sizeof h->cmdline));
        gmp_bundle_fill_place(w, &h->place);
        gmp_jw_kstr(w, "launcher",
                    gmp_run_vars_value(h->run_vars, sizeof h->run_vars, GMP_LAUNCHER_VAR));
    }
    gmp_jw_ki64(w, "recovered_by_pid", getpid());
    gmp_jw_obj_end(w);
    if (h)
        gmp_bundle_fill_run_vars(w, h->run_vars, sizeof h->run_vars);
    gmp_jw_obj_end(w);
}

void gmp_bundle_fill_environment(gmp_jw *w, char *scratch, size_t half,
                                 const char *backend, const gmp_gpu_probe_result *software)
{
    gmp_jw_obj_begin(w);
    gmp_jw_ki64(w, "pid", getpid());
    gmp_jw_key(w, "cwd");
    if (getcwd(scratch, half))
        gmp_jw_str(w, scratch);
    else
        gmp_jw_null(w);

    gmp_bundle_fill_system(w, backend, software);

    gmp_jw_key(w, "process");
    gmp_jw_obj_begin(w);
    gmp_jw_ki64(w, "ppid", getppid());
    gmp_jw_ku64(w, "uid", getuid());
    ssize_t n = readlink("/proc/self/exe", scratch, half - 1);
    gmp_jw_key(w, "exe");
    if (n > 0)
        gmp_jw_strn(w, scratch, (size_t)n);
    else
        gmp_jw_null(w);
    write_cmdline(w, scratch, half);
    write_first_line(w, "cgroup", "/proc/self/cgroup", scratch, half);
    gmp_jw_key(w, "rlimits");
    gmp_jw_obj_begin(w);
    write_rlimit(w, "as", RLIMIT_AS);
    write_rlimit(w, "data", RLIMIT_DATA);
    write_rlimit(w, "rss", RLIMIT_RSS);
    write_rlimit(w, "memlock", RLIMIT_MEMLOCK);
    write_rlimit(w, "stack", RLIMIT_STACK);
    write_rlimit(w, "nofile", RLIMIT_NOFILE);
    write_rlimit(w, "core", RLIMIT_CORE);
    gmp_jw_obj_end(w);
    write_rank(w);
    gmp_job_place here;
    gmp_job_place_here(&here);
    gmp_bundle_fill_place(w, &here);
    gmp_launcher_here(scratch);
    gmp_jw_kstr(w, "launcher", scratch[0] ? scratch : NULL);
    gmp_jw_obj_end(w);

    gmp_bundle_fill_software(w, software);
    write_environ(w);
    gmp_jw_obj_end(w);
}
