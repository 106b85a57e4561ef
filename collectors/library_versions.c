/*
 * library_versions.c — what the loaded GPU and Python libraries say about themselves,
 * for environment.json: CUDA driver and runtime versions, NVML's driver version, HIP's
 * runtime version, device names and totals, CPython's version and the
 * version of the torch package whose libtorch is loaded.
 *
 * Asking calls into those libraries, so it runs only in a normal context
 * where GPU memory is in play (a device allocation, at most every 100 ms;
 * a GPU failure's dump, never from a signal handler), and only again once
 * more libraries were loaded (dl_iterate_phdr's load counter).  At start
 * only CPython is asked (one lookup).  The dump path reads the result as it
 * stands.
 */
#include "collector.h"
#include "util.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

static gmp_gpu_probe_result probe;
static int probing;              /* atomic: one thread at a time */
static unsigned long long seen_adds = ~0ull; /* loads when last probed */

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the counter is the same in every entry */
}

/* The string a line "__version__ = '2.3.0'" (or "__version__: str = ...")
 * of a version.py assigns, into out: 1, or 0 where no line does.  Only a
 * line that starts with the name counts: torch's own file names it first
 * in its __all__ list ("__all__ = ['__version__', 'debug', ...]"). */
static int version_assigned(const char *text, char *out, size_t cap)
{
    for (const char *line = text, *end; *line; line = *end ? end + 1 : end) {
        end = line + strcspn(line, "\n");
        if (strncmp(line, "__version__", 11))
            continue;
        const char *p = line + 11;
        p += strspn(p, " \t");
        if (*p == ':') /* an annotation, up to its '=' */
            p += strcspn(p, "=\n");
        if (*p != '=')
            continue;
        p += 1 + strspn(p + 1, " \t");
        if (*p != '\'' && *p != '"')
            continue;
        char quote = *p++;
        size_t len = strcspn(p, quote == '\'' ? "'\n" : "\"\n");
        if (p[len] != quote)
            continue;
        if (len >= cap)
            len = cap - 1;
        memcpy(out, p, len);
        out[len] = '\0';
        return 1;
    }
    return 0;
}

/* torch/lib/libc10.so -> torch/version.py: "__version__ = '2.3.0+cu121'" */
static int find_torch(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    const char *path = info->dlpi_name;
    const char *lib = path ? strstr(path, "/torch/lib/") : NULL;
    if (!lib || (!strstr(lib, "libc10") && !strstr(lib, "libtorch")))
        return 0;
    char file[GMP_PATH_MAX], text[2048];
    size_t dir = (size_t)(lib - path) + strlen("/torch/");
    if (dir >= sizeof file - 16)
        return 0;
    memcpy(file, path, dir);
    memcpy(file + dir, "version.py", 11);
    if (gmp_read_file(file, text, sizeof text) <= 0)
        return 0;
    return version_assigned(text, arg, sizeof probe.torch_version);
}

static void add_devices(const gmp_collector *c, int *n)
{
    const char *why;
    if (!c->is_available(&why))
        return;
    int count = c->device_count();
    for (int d = 0; d < count && *n < (int)(sizeof probe.devices / sizeof *probe.devices); d++) {
        gmp_device_state s;
        if (c->sample(d, &s) < 0)
            continue;
        int i = (*n)++; /* published with device_count, once all are filled */
        probe.devices[i].backend = s.backend;
        probe.devices[i].device = d;
        probe.devices[i].total = s.total;
        gmp_strlcpy(probe.devices[i].name, s.name, sizeof probe.devices[i].name);
    }
}

void gmp_python_probe(const char *(*py_version)(void))
{
    if (!py_version || probe.python_version[0])
        return;
    /* CPython's is a static string, fine to read before Py_Initialize */
    const char *v = py_version ? py_version() : NULL;
    if (v) {
        size_t len = strcspn(v, " ");
        if (len >= sizeof probe.python_version)
            len = sizeof probe.python_version - 1;
        memcpy(probe.python_version, v, len);
        probe.python_version[len] = '\0';
    }
}

void gmp_python_probe_lookup(void)
{
    if (probe.python_version[0])
        return;
    gmp_python_probe((const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion"));
}

void gmp_torch_probe(void)
{
    if (probe.torch_version[0] || __atomic_exchange_n(&probing, 1, __ATOMIC_ACQUIRE))
        return;
    dl_iterate_phdr(find_torch, probe.torch_version);
    __atomic_store_n(&probing, 0, __ATOMIC_RELEASE);
}

void gmp_gpu_probe(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(count_loads, &adds);
    if (adds == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED) ||
        __atomic_exchange_n(&probing, 1, __ATOMIC_ACQUIRE))
        return;
    if (!probe.cuda_driver_version)
        probe.cuda_driver_version = gmp_cuda_driver_version();
    if (!probe.cuda_runtime_version) {
        /* a shared libcudart in the global scope (PyTorch's, CuPy's); a
         * static one (nvcc's default) cannot be asked */
        int (*runtime_version)(int *) =
            (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
        int v = 0;
        if (runtime_version && runtime_version(&v) == 0)
            probe.cuda_runtime_version = v;
    }
    if (!probe.nvml_driver_version[0])
        gmp_nvml_driver_version(probe.nvml_driver_version, sizeof probe.nvml_driver_version);
    if (!probe.hip_runtime_version)
        probe.hip_runtime_version = gmp_hip_runtime_version();
    if (!probe.torch_version[0])
        dl_iterate_phdr(find_torch, probe.torch_version);
    if (!probe.device_count) {
        int n = 0;
        add_devices(&gmp_collector_cuda, &n);
        add_devices(&gmp_collector_rocm, &n);
        __atomic_store_n(&probe.device_count, n, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&seen_adds, adds, __ATOMIC_RELAXED);
    __atomic_store_n(&probing, 0, __ATOMIC_RELEASE);
}

const gmp_gpu_probe_result *gmp_gpu_probe_get(void)
{
    return &probe;
}

const char *gmp_gpu_probe_device_name(gmp_backend backend, int device)
{
    int n = __atomic_load_n(&probe.device_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (probe.devices[i].backend == backend && probe.devices[i].device == device &&
            probe.devices[i].name[0])
            return probe.devices[i].name;
    return NULL;
}
