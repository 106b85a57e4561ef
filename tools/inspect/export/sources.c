/*
 * sources.c — what both exports read: every bundle at or under the
 * operands (bundles, directories of them; live rings are taken apart by
 * each export), in the order of their times, and a process's name as a
 * viewer shows it.
 */
#include "export.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BUNDLES 4096

typedef struct found {
    char **paths;
    size_t n;
} found;

static void collect(const char *path, void *arg)
{
    found *f = arg;
    if (f->n < MAX_BUNDLES && (f->paths[f->n] = strdup(path)))
        f->n++;
}

static int by_name(const void *a, const void *b)
{
    /* oom_dump_<time>_<pid>_...: the name's order is the time's */
    const char *x = strrchr(*(char *const *)a, '/'), *y = strrchr(*(char *const *)b, '/');
    return strcmp(x ? x : *(char *const *)a, y ? y : *(char *const *)b);
}

char **export_bundle_paths(char **operands, int n, size_t *count)
{
    found all = {calloc(MAX_BUNDLES + 1, sizeof(char *)), 0};
    if (!all.paths)
        return NULL;
    for (int i = 0; i < n; i++) {
        char manifest[4200];
        snprintf(manifest, sizeof manifest, "%s/manifest.json", operands[i]);
        if (is_ring_target(operands[i]))
            continue;
        if (access(manifest, F_OK) == 0)
            collect(operands[i], &all); /* a bundle, whatever it was renamed to */
        else
            for_each_bundle(operands[i], collect, &all);
    }
    qsort(all.paths, all.n, sizeof *all.paths, by_name);
    *count = all.n;
    return all.paths;
}

void export_paths_free(char **paths, size_t n)
{
    for (size_t i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

void export_process_label(bundle *b, int with_pid, char *out, size_t cap)
{
    int64_t pid = 0;
    jint(b->manifest, "pid", &pid);
    json_t *cmd = json_object_get(json_object_get(b->environment, "process"), "cmdline");
    const char *exe = jstr(json_object_get(b->environment, "process"), "exe");
    const char *first = json_string_value(json_array_get(cmd, 0));
    const char *prog = first ? first : exe ? exe : "process";
    const char *slash = strrchr(prog, '/');
    const char *rank = bundle_rank(b), *host = bundle_host(b);
    char parts[160] = "";
    size_t n = 0;
    if (with_pid)
        n += (size_t)snprintf(parts + n, sizeof parts - n, ", pid %lld", (long long)pid);
    if (rank && n < sizeof parts)
        n += (size_t)snprintf(parts + n, sizeof parts - n, ", rank %.16s", rank);
    if (host && n < sizeof parts)
        snprintf(parts + n, sizeof parts - n, ", on %.64s", host);
    /* viewers show the pid beside the name themselves */
    if (parts[0])
        snprintf(out, cap, "%.80s (%s)", slash ? slash + 1 : prog, parts + 2);
    else
        snprintf(out, cap, "%.80s", slash ? slash + 1 : prog);
}

void export_ring_label(const ring_copy_t *r, int with_pid, char *out, size_t cap)
{
    const char *space = strchr(r->cmdline, ' ');
    char prog[256];
    snprintf(prog, sizeof prog, "%.*s", (int)(space ? space - r->cmdline : (long)strlen(r->cmdline)),
             r->cmdline);
    const char *slash = strrchr(prog, '/');
    if (with_pid)
        snprintf(out, cap, "%s (pid %d, live ring)", slash ? slash + 1 : prog, r->pid);
    else
        snprintf(out, cap, "%s (live ring)", slash ? slash + 1 : prog);
}
