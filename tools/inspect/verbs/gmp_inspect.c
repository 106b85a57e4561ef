/*
 * gmp_inspect.c — gmp-inspect: reads the bundles gpumemprof writes.  The
 * table below is every verb; verb V is cmd_V in verbs/V.c, which parses
 * its options and calls the rooms under it (read/, answer/, draw/,
 * export/).  It never changes a bundle; recover writes new ones for
 * processes that died without a word, through the recorder library, and
 * prune deletes the ones retention lets go.
 */
#include "gpumemprof.h"
#include "verbs.h"

#include <string.h>

typedef struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} verb;

static const verb verbs[] = {
    {"list", cmd_list, "one line per bundle in a dump directory"},
    {"show", cmd_show, "what failed, in plain words, with the last events"},
    {"events", cmd_events, "every event of a bundle (--json for JSON)"},
    {"validate", cmd_validate, "check bundles are whole and well-formed (CI)"},
    {"recover", cmd_recover, "bundles of killed processes, from the rings they left"},
    {"triage", cmd_triage, "group many bundles by signature, for CI (exit 3 on OOM)"},
    {"diff", cmd_diff, "what changed between two bundles"},
    {"plot", cmd_plot, "memory over time, the OOM marked: one SVG or HTML file"},
    {"leaks", cmd_leaks, "memory that grew and was never given back, by site (exit 3)"},
    {"export", cmd_export, "bundles for Perfetto and chrome://tracing (trace-json) or PyTorch's "
                           "memory viz (torch-snapshot)"},
    {"watch", cmd_watch, "a live view of a running process, from its ring"},
    {"prune", cmd_prune, "apply the retention rules to a dump directory"},
    {"metrics", cmd_metrics, "a Prometheus textfile from bundles"},
    {"info", cmd_info, "what the memory collectors see on this machine"},
};

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect VERB [ARGS...]\n\n", f);
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        fprintf(f, "  %-9s %s\n", verbs[i].name, verbs[i].summary);
    fputs("\n`gmp-inspect VERB --help` says more.  gmp-inspect "
          GMP_VERSION_STRING "\n", f);
}

int main(int argc, char **argv)
{
    json_arena_install(); /* before any JSON value is made */
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        puts("gmp-inspect " GMP_VERSION_STRING);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        if (!strcmp(argv[1], verbs[i].name))
            return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "gmp-inspect: unknown verb '%.64s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
