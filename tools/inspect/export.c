/*
 * export.c — `gmp-inspect export PATH... --format FORMAT -o FILE`: bundles
 * in a format another viewer opens.  trace-json (export_trace.c) is Trace
 * Event JSON, for Perfetto and chrome://tracing; torch-snapshot
 * (export_torch.c) is the pickle PyTorch's memory visualiser opens.  -o -
 * writes to stdout.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect export PATH|PID|RINGFILE... --format trace-json -o FILE\n"
          "       gmp-inspect export BUNDLE --format torch-snapshot -o FILE.pickle\n"
          "Bundles (or every bundle under a directory: the ranks of one job on one\n"
          "timeline; or a running process's ring, as watch reads it) as a file\n"
          "another viewer opens:\n"
          "  trace-json      Trace Event JSON for Perfetto (ui.perfetto.dev) and\n"
          "                  chrome://tracing: bytes in use per device and for the\n"
          "                  host, each allocation and free by API and thread, each\n"
          "                  OOM, pressure warning and signal, each bundle's moment.\n"
          "  torch-snapshot  the pickle PyTorch's memory visualiser opens\n"
          "                  (pytorch.org/memory_viz): the live allocations as\n"
          "                  segments, each device's allocations, frees and OOM as\n"
          "                  its trace, with their frames; no PyTorch needed here.\n"
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
    if (torch && (argc - optind != 1 || is_ring_target(argv[optind])))
        return VERB_EXIT(verb_misuse(&a, "torch-snapshot takes one bundle"));
    if (!outp)
        return VERB_EXIT(verb_misuse(&a, "-o FILE is needed (- for stdout)"));
    int to_stdout = !strcmp(outp, "-");
    FILE *f = to_stdout ? stdout : fopen(outp, "w");
    if (!f) {
        fprintf(stderr, "gmp-inspect export: cannot write %s\n", outp);
        return EXIT_INVALID;
    }
    int rc = torch ? export_torch(argv[optind], f) : export_trace(argv + optind, argc - optind, f);
    if ((to_stdout ? fflush(f) : fclose(f)) != 0) {
        fprintf(stderr, "gmp-inspect export: cannot write %s\n", outp);
        rc = EXIT_INVALID;
    }
    return rc;
}
