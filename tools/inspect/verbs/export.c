/*
 * export.c — `gmp-inspect export PATH... --format FORMAT -o FILE`: bundles
 * in a format another viewer opens.  trace-json (export/trace.c) is Trace
 * Event JSON, for Perfetto and chrome://tracing; torch-snapshot
 * (export/torch.c) is the pickle PyTorch's memory visualiser opens.  -o -
 * writes to stdout.
 */
#include "export.h"
#include "verbs.h"

#include <string.h>

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
