/*
 * leaks.c — `gmp-inspect leaks BUNDLE [--window S] [--json]`: memory that
 * grew and was never given back, per allocation site and per device
 * (answer/leak_scan.c finds it), in plain words, or (--json) the seed's
 * leak-detection result — detected, severity, memory_increase_mb,
 * time_window_seconds, suggestions — with the sites and devices behind it.
 */
#include "answer.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>

#define SHOWN 5
#define EXIT_GROWTH_FOUND 3 /* as triage says an OOM was found */

static void print_words(const leak_scan *s, bundle *b)
{
    const leak_site *sites = s->sites;
    int nsites = s->nsites;
    json_t *sugg = s->suggestions;
    printf("Leaks in %s: the last %.1f s of its events (%llu allocations, %llu frees)\n",
           b->name, s->window_s, (unsigned long long)s->allocs, (unsigned long long)s->frees);
    char amount[32], held[32];
    if (nsites) {
        printf("Growth never given back, by site:\n");
        for (int k = 0; k < nsites && k < SHOWN; k++) {
            fmt_bytes((uint64_t)sites[k].increase, amount, sizeof amount);
            fmt_bytes((uint64_t)(sites[k].held > 0 ? sites[k].held : 0), held, sizeof held);
            printf("  +%-10s held %-10s %-6s  ", amount, held,
                   gmp_growth_severity_name(sites[k].severity));
            print_clean(stdout, sites[k].where, 400);
            putchar('\n');
        }
    }
    for (int i = 0; i < s->ntr; i++) {
        const leak_track *d = &s->tr[i];
        if (!d->is_device)
            continue;
        if (d->g.detected) {
            fmt_bytes((uint64_t)d->g.increase, amount, sizeof amount);
            printf("%-8s grew by %s and never came back down (the lowest it held rose in every "
                   "quarter; severity %s)\n", d->device, amount,
                   gmp_growth_severity_name(d->g.severity));
        } else {
            printf("%-8s no growth that stayed%s\n", d->device,
                   d->g.points < 8 ? " (too few allocations and frees to tell)" : "");
        }
    }
    size_t i;
    json_t *line;
    json_array_foreach(sugg, i, line) {
        printf("%s", i ? "  " : "Suggestion: ");
        print_clean(stdout, json_string_value(line), 800);
        putchar('\n');
    }
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect leaks BUNDLE [--window SECONDS] [--json]\n"
          "Memory that grew and was never given back, per allocation site and per\n"
          "device, from the bundle's allocations and frees: what a site or device\n"
          "holds after its frees climbing in every quarter of the window (default:\n"
          "all the events).  --json: the result as a JSON object (detected, severity,\n"
          "memory_increase_mb, time_window_seconds, suggestions, sites, devices).\n"
          "Exit status: 0 no growth, 3 growth found, 1 the bundle cannot be read, 2 usage.\n",
          f);
}

int cmd_leaks(int argc, char **argv)
{
    static const struct option options[] = {{"window", required_argument, NULL, 'w'},
                                            {"json", no_argument, NULL, 'j'},
                                            {0}};
    verb_args a = {.verb = "leaks", .usage = usage, .longopts = options};
    double window = 0;
    int as_json = 0;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == 'j') {
            as_json = 1;
        } else if (c == 'w') {
            char *end;
            window = strtod(optarg, &end);
            if (*end || !(window > 0) || window > 1e9)
                return VERB_EXIT(verb_misuse(&a, "--window wants a number of seconds"));
        } else {
            return VERB_EXIT(c);
        }
    }
    if (verb_operands(&a, argc, 1, 1) < 0)
        return EXIT_USAGE;
    char err[600];
    bundle b;
    if (bundle_open(&b, argv[optind], 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect leaks: %s\n", err);
        return EXIT_INVALID;
    }
    leak_scan *s = leaks_find(&b, window);
    if (!s) {
        bundle_close(&b);
        fprintf(stderr, "gmp-inspect leaks: out of memory\n");
        return EXIT_INVALID;
    }
    json_t *result = leaks_result(s);
    int detected = json_is_true(json_object_get(result, "detected"));
    int rc = EXIT_OK;
    if (as_json)
        rc = print_json(result) < 0 ? EXIT_INVALID : EXIT_OK;
    else {
        print_words(s, &b);
        json_decref(result);
    }
    leaks_free(s);
    bundle_close(&b);
    return rc == EXIT_OK && detected ? EXIT_GROWTH_FOUND : rc;
}
