/*
 * plot.c — `gmp-inspect plot BUNDLE|READINGS.json -o FILE.svg|FILE.html`:
 * memory over time, each OOM marked (draw/), as one self-contained file
 * written whole (output.c): the SVG, or the HTML page (report.c) that
 * holds show's answer above it.
 */
#include "draw.h"
#include "verbs.h"

#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect plot BUNDLE|DIR|READINGS.json -o FILE.svg|FILE.html\n"
          "A dump directory (DIR): its newest bundle, named on stderr.\n"
          "Memory in use over time (one line per device, one for the host), the\n"
          "allocations and frees under the axis, each OOM marked with its request\n"
          "drawn on top of what was in use; hover over a mark, a line or a limit\n"
          "for its words.  One self-contained file: SVG, or an HTML page that\n"
          "answers first (show's what happened, who held the memory, the likely\n"
          "causes and the Python stack), then draws the chart across the window's\n"
          "width (no script, no network).  READINGS.json: what\n"
          "`gpumemprof monitor --format json` wrote, one line per device read.\n"
          "Exit status: 0, 1 when the input cannot be read or FILE written, 2 usage.\n",
          f);
}

int cmd_plot(int argc, char **argv)
{
    static const struct option options[] = {{"output", required_argument, NULL, 'o'}, {0}};
    verb_args a = {.verb = "plot", .usage = usage, .shortopts = "o:", .longopts = options};
    const char *outp = NULL;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'o')
            return VERB_EXIT(c);
        outp = optarg;
    }
    if (verb_operands(&a, argc, 1, 1) < 0)
        return EXIT_USAGE;
    const char *path = argv[optind];
    static char newest[4096];
    if (verb_newest_bundle("plot", path, newest, sizeof newest) > 0)
        path = newest; /* a dump directory: its newest bundle */
    size_t olen = outp ? strlen(outp) : 0;
    int html = olen > 5 && !strcmp(outp + olen - 5, ".html");
    if (!outp || (!html && !(olen > 4 && !strcmp(outp + olen - 4, ".svg"))))
        return VERB_EXIT(verb_misuse(&a, "-o wants a file ending .svg or .html"));
    struct stat st;
    char err[600], title[600];
    plot p;
    bundle b;
    int is_bundle = !(stat(path, &st) == 0 && S_ISREG(st.st_mode));
    if (is_bundle ? bundle_open(&b, path, 0, 1, err, sizeof err)
                  : plot_readings(&p, path, title, sizeof title, err, sizeof err)) {
        fprintf(stderr, "gmp-inspect plot: %s\n", err);
        return EXIT_INVALID;
    }
    if (is_bundle) {
        memset(&p, 0, sizeof p);
        plot_bundle(&p, &b);
        snprintf(title, sizeof title, "%.300s: %.250s", b.name,
                 jstr(b.metadata, "reason") ? jstr(b.metadata, "reason") : "?");
    }
    out_file o;
    FILE *f = out_open(&o, outp);
    int bad = !f;
    if (f) {
        if (html)
            report_page(f, &p, title, is_bundle ? b.name : title, is_bundle ? &b : NULL);
        else
            plot_svg(f, &p, title, is_bundle ? &b : NULL);
        bad = out_commit(&o) != 0;
    }
    plot_free(&p);
    if (is_bundle)
        bundle_close(&b);
    if (bad) {
        fprintf(stderr, "gmp-inspect plot: cannot write %s\n", outp);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}
