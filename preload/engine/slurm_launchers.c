/*
 * slurm_launchers.c — Slurm's own commands stay free of the preload.
 *
 * `#SBATCH --gmp` puts the preload in the batch script's environment (the
 * Slurm plugin does, so that the script's own processes are recorded: the
 * python it runs, that one's children) and marks it there with
 * GMP_SLURM_SCRIPT=1.  The srun, sbatch and salloc the script starts must
 * not carry it: srun would hand it to every task of a step through the
 * environment it forwards (a step that asks has it added back by the plugin,
 * one that does not must stay bare), sbatch to a whole new job.  So an exec
 * of one of them from a process so marked passes an environment whose
 * LD_PRELOAD names no preload of ours, and the launcher never loads it.
 * Where the preload reached a launcher anyway (posix_spawn, whose exec is
 * glibc's own; a user's own LD_PRELOAD) it records nothing there: Slurm's
 * memory is not the job's.  Under the mark it also takes itself out of the
 * environment the launcher forwards.
 */
#include "preload.h"
#include "start_path.h"

#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

extern char **environ;

GMP_START_EXIT_TEXT static const char *base_name(const char *path)
{
    const char *name = path ? path : "";
    for (const char *p = name; *p; p++)
        if (*p == '/')
            name = p + 1;
    return name;
}

static const char launcher_names[][8] GMP_START_EXIT_RODATA = {"srun", "sbatch", "salloc"};

GMP_START_EXIT_TEXT int gmp_is_slurm_launcher(const char *path)
{
    const char *name = base_name(path);
    for (size_t i = 0; i < sizeof launcher_names / sizeof *launcher_names; i++)
        if (gmp_start_same(name, launcher_names[i]))
            return 1;
    return 0;
}

static int marked(char *const *envp)
{
    for (char *const *e = envp; e && *e; e++)
        if (!strcmp(*e, "GMP_SLURM_SCRIPT=1"))
            return 1;
    return 0;
}

/* value ("LD_PRELOAD=a.so:b.so") without our preload, into out: ld.so splits
 * the list at colons and spaces; an entry is ours when its file is named
 * libgpumemprof_preload*.  0, or -1 when it does not fit. */
static int without_ours(const char *value, char *out, size_t cap)
{
    size_t n = 0;
    const char *p = value + strlen("LD_PRELOAD=");
    if (cap < sizeof "LD_PRELOAD=")
        return -1;
    memcpy(out, "LD_PRELOAD=", strlen("LD_PRELOAD="));
    n = strlen("LD_PRELOAD=");
    while (*p) {
        size_t len = strcspn(p, ": ");
        const char *entry_end = p + len;
        const char *slash = memrchr(p, '/', len);
        const char *file = slash ? slash + 1 : p;
        int ours = (size_t)(entry_end - file) >= strlen("libgpumemprof_preload") &&
                   !strncmp(file, "libgpumemprof_preload", strlen("libgpumemprof_preload"));
        if (len && !ours) {
            if (n + len + 2 > cap)
                return -1;
            if (n > strlen("LD_PRELOAD="))
                out[n++] = ':';
            memcpy(out + n, p, len);
            n += len;
        }
        p = *entry_end ? entry_end + 1 : entry_end;
    }
    out[n] = '\0';
    return 0;
}

/* The copy, in static storage, not on the hook's stack: a vfork child
 * (dash's) runs the hook on its parent's stack, and a large object there
 * leaves what a sanitizer marked on it for the parent to trip over once
 * the child has exec'd.  The parent of a vfork child waits for the exec;
 * two threads exec'ing launchers at once take turns by a try-flag (the
 * second passes its environment as it is, and its launcher records
 * nothing). */
static struct {
    int busy; /* atomic */
    char *stack[GMP_LAUNCHER_STACK_ENV];
    char **mapped;
    size_t mapped_len;
    char value[4096];
} copy;

char *const *gmp_launcher_env(const char *path, char *const *envp)
{
    if (!envp || !gmp_is_slurm_launcher(path) || !marked(envp) ||
        __atomic_exchange_n(&copy.busy, 1, __ATOMIC_ACQUIRE))
        return envp;
    size_t n = 0;
    while (envp[n])
        n++;
    char **out = copy.stack;
    copy.mapped = NULL;
    if (n + 1 > GMP_LAUNCHER_STACK_ENV) {
        copy.mapped_len = (n + 1) * sizeof *out;
        void *m = mmap(NULL, copy.mapped_len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            __atomic_store_n(&copy.busy, 0, __ATOMIC_RELEASE);
            return envp; /* the launcher then loads it, and records nothing */
        }
        out = copy.mapped = m;
    }
    for (size_t i = 0; i <= n; i++) {
        out[i] = envp[i];
        if (envp[i] && !strncmp(envp[i], "LD_PRELOAD=", 11) &&
            without_ours(envp[i], copy.value, sizeof copy.value) == 0)
            out[i] = copy.value;
    }
    return out;
}

void gmp_launcher_env_done(char *const *used, char *const *envp)
{
    if (used == envp)
        return; /* no copy was made for this exec */
    if (copy.mapped)
        munmap(copy.mapped, copy.mapped_len);
    copy.mapped = NULL;
    __atomic_store_n(&copy.busy, 0, __ATOMIC_RELEASE);
}

GMP_START_EXIT_TEXT int gmp_slurm_launcher_start(void)
{
    if (!gmp_is_slurm_launcher((const char *)getauxval(AT_EXECFN)))
        return 0;
    static char value[4096]; /* the environment's own entry is left as it was */
    for (char **e = environ; marked(environ) && e && *e; e++)
        if (!strncmp(*e, "LD_PRELOAD=", 11) && without_ours(*e, value, sizeof value) == 0) {
            *e = value;
            break;
        }
    return 1;
}
