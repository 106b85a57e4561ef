/*
 * export.c — `gmp-inspect export PATH... --format FORMAT -o FILE`: bundles
 * in a format another viewer opens.  trace-json (export_trace.c) is Trace
 * Event JSON, for Perfetto and chrome://tracing; torch-snapshot
 * (export_torch.c) is the pickle PyTorch's memory visualiser opens.  -o -
 * writes to stdout.  Both take the same operands (bundles, directories of
 * them, live rings) and name a process the same way, with the helpers here.
 */
#include "inspect.h"

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

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect export PATH|PID|RINGFILE... --format FORMAT -o FILE\n"
          "Bundles (or every bundle under a directory: the ranks of one job side by\n"
          "side; or a running process's ring, as watch reads it) as a file another\n"
          "viewer opens:\n"
          "  trace-json      Trace Event JSON for Perfetto (ui.perfetto.dev) and\n"
          "                  chrome://tracing: bytes in use per device and for the\n"
          "                  host, each allocation and free by API and thread, each\n"
          "                  OOM, pressure warning and signal, each bundle's moment.\n"
          "  torch-snapshot  the pickle PyTorch's memory visualiser opens\n"
          "                  (pytorch.org/memory_viz): each device's allocations\n"
          "                  (each its own segment), frees and OOM as its trace up\n"
          "                  to the failure, what was alive then as segments, with\n"
          "                  their frames; no PyTorch needed here.\n"
          "                  Several processes: each one's devices in turn (the\n"
          "                  newest bundle of each; ranks in order), the list\n"
          "                  of which is which printed.\n"
          "-o - writes to stdout.\n"
          "Exit status: 0, 1 when a bundle cannot be read or FILE written, 2 usage.\n",
          f);
}

int cmd_export(int argc, char **argv)
{
    static const struct option options[] = {{"format", required_argument, NULL, 'f'},
                                            {"output", required_argument, NULL, 'o'},
                                            {0}};
    verb_args a = {.verb = "export", .usage = usage, .shortopts = "o:", .longopts = options};
    const char *format = NULL, *outp = NULL;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == 'f')
            format = optarg;
        else if (c == 'o')
            outp = optarg;
        else
            return VERB_EXIT(c);
    }
    if (verb_operands(&a, argc, 1, 4096) < 0)
        return EXIT_USAGE;
    int torch = format && !strcmp(format, "torch-snapshot");
    if (!format || (!torch && strcmp(format, "trace-json")))
        return VERB_EXIT(verb_misuse(&a, "--format wants trace-json or torch-snapshot"));
    if (!outp)
        return VERB_EXIT(verb_misuse(&a, "-o FILE is needed (- for stdout)"));
    int to_stdout = !strcmp(outp, "-");
    out_file o;
    FILE *f = to_stdout ? stdout : out_open(&o, outp);
    if (!f) {
        fprintf(stderr, "gmp-inspect export: cannot write %s\n", outp);
        return EXIT_INVALID;
    }
    int rc = torch ? export_torch(argv + optind, argc - optind, f, to_stdout ? stderr : stdout)
                   : export_trace(argv + optind, argc - optind, f);
    if ((to_stdout ? fflush(f) : out_commit(&o)) != 0) {
        fprintf(stderr, "gmp-inspect export: cannot write %s\n", outp);
        rc = EXIT_INVALID;
    }
    return rc;
}
