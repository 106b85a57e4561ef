/*
 * events.c — `gmp-inspect events BUNDLE [--json]`: every event of a
 * bundle, oldest first, as lines (draw/event_lines.c) or, with --json, as a
 * JSON array one event a line, each as the bundle holds it.
 */
#include "draw.h"
#include "verbs.h"

static void events_usage(FILE *f)
{
    fputs("usage: gmp-inspect events BUNDLE [--json]\n"
          "Print every event of the bundle, oldest first: one line each, or\n"
          "with --json the events as a JSON array.\n"
          "Exit status: 0, 1 when the bundle cannot be read, 2 usage error.\n",
          f);
}

int cmd_events(int argc, char **argv)
{
    static const struct option options[] = {{"json", no_argument, NULL, 'j'}, {0}};
    verb_args a = {.verb = "events", .usage = events_usage, .longopts = options};
    int as_json = 0;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'j')
            return VERB_EXIT(c);
        as_json = inspect_raw_json = 1;
    }
    if (verb_operands(&a, argc, 1, 1) < 0)
        return EXIT_USAGE;
    const char *path = argv[optind];
    bundle b;
    char err[1024];
    if (bundle_open(&b, path, 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect events: ");
        print_clean(stderr, err, 1000);
        fputc('\n', stderr);
        return EXIT_INVALID;
    }
    size_t i;
    json_t *ev;
    if (as_json) /* one event a line, as the bundle holds them */
        fputs("[", stdout);
    event_foreach(&b.events, i, ev) {
        if (!as_json) {
            print_event(ev, i == b.events.failure);
            continue;
        }
        fputs(i ? ",\n " : "\n ", stdout);
        event_print_raw(&b.events, i, stdout);
    }
    if (as_json)
        fputs("\n]\n", stdout);
    bundle_close(&b);
    return EXIT_OK;
}
