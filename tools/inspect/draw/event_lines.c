/*
 * event_lines.c — one event on one line, for `show` (the events up to the
 * failure, the failed one marked) and `gmp-inspect events BUNDLE`.  Events
 * of shapes we do not write (the Python recorder's) are printed as their
 * key=value pairs.
 */
#include "draw.h"

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
    else if (!jint(ev, "result", &result) && result) {
        char name[64];
        if (result_code_name(api, result, name, sizeof name))
            printf("  result %s (code %lld)", name, (long long)result);
        else
            printf("  result %lld", (long long)result);
    }
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
