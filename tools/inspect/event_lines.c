/*
 * event_lines.c — one event on one line, for `show` (the events up to the
 * failure, the failed one marked) and `gmp-inspect events BUNDLE` (every
 * event, as lines or, with --json, as a JSON array one event a line).
 * Events of shapes we do not write (the Python recorder's) are printed as
 * their key=value pairs.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void print_time(json_t *ev)
{
    json_t *t = json_object_get(ev, "timestamp");
    if (!json_is_number(t)) {
        printf("%-15s", "?");
        return;
    }
    double secs = json_number_value(t);
    if (!(secs >= 0 && secs < 1e12)) {
        printf("%-15s", "?");
        return;
    }
    time_t whole = (time_t)secs;
    struct tm tm;
    gmtime_r(&whole, &tm);
    printf("%02d:%02d:%02d.%06d", tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int)((secs - (double)whole) * 1e6));
}

static const char *const known_keys[] = {
    "seq", "timestamp", "event_type", "backend", "device_id", "api", "address",
    "size", "result", "thread_id", "bytes_in_use", "stack_id",
};

static int is_known(const char *key)
{
    for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
        if (!strcmp(key, known_keys[i]))
            return 1;
    return 0;
}

/* One event on one line: time, type, api, where, size, in use, then any
 * other fields (Python recorder events carry their own). */
void event_where(json_t *ev, char *out, size_t cap)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, "device_id", &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        snprintf(out, cap, "host");
    else
        snprintf(out, cap, "%.16s:%lld", backend, (long long)dev);
}

void print_event(json_t *ev, int is_failure)
{
    if (!json_is_object(ev)) {
        puts("  (not an event object)");
        return;
    }
    char size[32] = "", in_use[32] = "";
    int64_t dev = -1;
    uint64_t v;
    if (!ju64(ev, "size", &v))
        fmt_bytes(v, size, sizeof size);
    if (!ju64(ev, "bytes_in_use", &v))
        fmt_bytes(v, in_use, sizeof in_use);
    jint(ev, "device_id", &dev);
    const char *type = jstr(ev, "event_type");
    const char *api = jstr(ev, "api");
    const char *backend = jstr(ev, "backend");
    /* the watchdog's sample: size is the limit, result the percent of it */
    int pressure = type && !strcmp(type, "pressure");
    if (pressure && api && !strcmp(api, "unknown"))
        api = NULL;
    printf(is_failure ? "> " : "  ");
    print_time(ev);
    printf("  %-13.13s %-18.18s ", type ? type : "-", api ? api : "-");
    if (backend && dev >= 0)
        printf("%s:%-3lld ", backend, (long long)dev);
    else
        printf("%-7s ", backend ? backend : "-");
    printf("%10s", pressure ? "" : size);
    if (in_use[0])
        printf("  in use %s", in_use);
    int64_t result;
    uint64_t limit = 0, used = 0;
    if (pressure && !ju64(ev, "size", &limit) && limit && !ju64(ev, "bytes_in_use", &used)) {
        double pct = (double)used * 100.0 / (double)limit; /* the event's own percent is whole */
        printf(pct < 10 ? ", %.1f%% of a %s limit" : ", %.0f%% of a %s limit", pct, size);
    } else if (pressure && size[0] && !jint(ev, "result", &result))
        printf(", %lld%% of a %s limit", (long long)result, size);
    else if (!jint(ev, "result", &result) && result)
        printf("  result %lld", (long long)result);
    const char *key;
    json_t *val;
    json_object_foreach(ev, key, val) {
        if (is_known(key))
            continue;
        /* 15 digits: 0.1 as 0.1, not jansson's 0.10000000000000001 */
        char *txt = json_text_exact(val, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
        printf("  ");
        print_clean(stdout, key, 40);
        putchar('=');
        print_clean(stdout, txt ? txt : "?", 80);
        free(txt);
    }
    puts(is_failure ? "  <- the failed request" : "");
}

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
