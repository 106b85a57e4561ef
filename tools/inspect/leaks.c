/*
 * leaks.c — `gmp-inspect leaks BUNDLE [--window S] [--json]`: memory that
 * grew and was never given back, per allocation site and per device, from
 * the bundle's allocation and free events, judged by the rule the Python
 * package shares (gmp_growth_judge, recorder/growth.c): what a site (or a
 * device) holds after its frees climbs in every quarter of the window.
 * Plain words, or (--json) the seed's leak-detection result — detected,
 * severity, memory_increase_mb, time_window_seconds, suggestions — with
 * the sites and devices behind it.  Host blocks under
 * GMP_HOST_EVENT_MIN_BYTES have no events: their growth shows only in
 * the host's line, not at a site.
 */
#include "gpumemprof.h"
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TRACKS 512
#define ADDR_SLOTS (1u << 16) /* power of two; more live blocks than this are not followed */
#define BYTES_MAX ((double)((int64_t)1 << 50)) /* past this a count is a hostile file's */
#define MIB (1024.0 * 1024.0)
#define SHOWN 5
#define EXIT_GROWTH_FOUND 3 /* as triage says an OOM was found */

/* A series of what one site (stack > 0, or 0: no stack) or one device
 * ("host", "cuda:0") held over time. */
typedef struct track {
    int is_device;
    int64_t stack;
    char device[48];
    double *t, *v;
    size_t n, cap;
    double held;
    gmp_growth g;
} track;

typedef struct block {
    uint64_t address; /* 0: empty, 1: deleted */
    int track;
    double size;
} block;

/* The series' clock is the events' order, not their time: quarters of
 * activity, so that a pause (a first CUDA call, a checkpoint) is no flat
 * stretch, while a site that stops allocating is flat over the events
 * that follow.  stamp[k] is event k's time, for the window in seconds. */
typedef struct leak_scan {
    track tr[MAX_TRACKS];
    int ntr;
    block *blocks;
    uint64_t allocs, frees;
    double *stamp;
    size_t nstamp, stamp_cap;
    double window_s;
} leak_scan;

static void add_point(track *k, double t, double v)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 32;
        double *nt = realloc(k->t, cap * sizeof *nt);
        if (nt)
            k->t = nt;
        double *nv = nt ? realloc(k->v, cap * sizeof *nv) : NULL;
        if (!nv)
            return; /* out of memory: the series stops growing, it is still judged */
        k->v = nv;
        k->cap = cap;
    }
    k->t[k->n] = t;
    k->v[k->n++] = v;
}

static track *track_of(leak_scan *s, int is_device, int64_t stack, const char *device)
{
    for (int i = 0; i < s->ntr; i++)
        if (s->tr[i].is_device == is_device &&
            (is_device ? !strcmp(s->tr[i].device, device) : s->tr[i].stack == stack))
            return &s->tr[i];
    if (s->ntr == MAX_TRACKS)
        return NULL;
    track *k = &s->tr[s->ntr++];
    memset(k, 0, sizeof *k);
    k->is_device = is_device;
    k->stack = stack;
    snprintf(k->device, sizeof k->device, "%s", is_device ? device : "");
    return k;
}

static size_t slot_of(uint64_t address)
{
    return (size_t)((address * 0x9E3779B97F4A7C15ull) >> 48) & (ADDR_SLOTS - 1);
}

static void block_put(leak_scan *s, uint64_t address, int tr, double size)
{
    size_t i = slot_of(address);
    for (size_t probe = 0; probe < ADDR_SLOTS; probe++, i = (i + 1) & (ADDR_SLOTS - 1))
        if (s->blocks[i].address <= 1 || s->blocks[i].address == address) {
            s->blocks[i] = (block){address, tr, size};
            return;
        }
}

static block *block_find(leak_scan *s, uint64_t address)
{
    size_t i = slot_of(address);
    for (size_t probe = 0; probe < ADDR_SLOTS; probe++, i = (i + 1) & (ADDR_SLOTS - 1)) {
        if (!s->blocks[i].address)
            return NULL;
        if (s->blocks[i].address == address)
            return &s->blocks[i];
    }
    return NULL;
}

static double number(json_t *ev, const char *key)
{
    json_t *v = json_object_get(ev, key);
    double d = json_is_number(v) ? json_number_value(v) : -1;
    return d >= 0 && d <= BYTES_MAX ? d : -1;
}

/* Every allocation and free up to the failure (what a dying process gave
 * back afterwards, at its exit, is no recovery): its site's series and its
 * device's. */
static void scan(leak_scan *s, bundle *b)
{
    size_t i;
    json_t *ev;
    event_foreach_until(&b->events, events_until_failure(&b->events), i, ev) {
        const char *type = jstr(ev, "event_type"), *hex = jstr(ev, "address");
        json_t *ts = json_object_get(ev, "timestamp");
        if (!type || !json_is_number(ts) || (strcmp(type, "alloc") && strcmp(type, "free")))
            continue;
        double in_use = number(ev, "bytes_in_use");
        if (s->nstamp == s->stamp_cap) {
            size_t cap = s->stamp_cap ? 2 * s->stamp_cap : 1024;
            double *grown = realloc(s->stamp, cap * sizeof *grown);
            if (!grown) {
                json_decref(ev);
                break;
            }
            s->stamp = grown;
            s->stamp_cap = cap;
        }
        s->stamp[s->nstamp] = json_number_value(ts);
        double t = (double)s->nstamp++;
        uint64_t address = hex ? strtoull(hex, NULL, 16) : 0;
        char where[48];
        event_where(ev, where, sizeof where);
        track *dev = track_of(s, 1, 0, where);
        if (dev && in_use >= 0)
            add_point(dev, t, in_use);
        if (!strcmp(type, "free")) {
            s->frees++;
            block *bl = address > 1 ? block_find(s, address) : NULL;
            if (bl) {
                track *site = &s->tr[bl->track];
                site->held -= bl->size;
                add_point(site, t, site->held);
                bl->address = 1;
            }
            continue;
        }
        s->allocs++;
        int64_t stack = 0;
        double size = number(ev, "size");
        jint(ev, "stack_id", &stack);
        track *site = size > 0 && address > 1 ? track_of(s, 0, stack > 0 ? stack : 0, NULL)
                                             : NULL;
        if (!site)
            continue;
        site->held += size;
        add_point(site, t, site->held);
        block_put(s, address, (int)(site - s->tr), size);
    }
}

/* What the severity of a device's growth is a share of: the device's
 * total; the host's nearest limit (RLIMIT_AS, its cgroup's, the machine). */
static double limit_of(bundle *b, const char *device)
{
    json_t *md = b->metadata, *hs = json_object_get(md, "host_state");
    int64_t v;
    if (!strcmp(device, "host")) {
        if (!jint(json_object_get(json_object_get(hs, "rlimits"), "as"), "soft", &v) && v > 0)
            return (double)v;
        if (!jint(json_object_get(hs, "cgroup"), "memory_max", &v) && v > 0)
            return (double)v;
        if (!jint(json_object_get(hs, "machine"), "mem_total", &v) && v > 0)
            return (double)v;
        return 0;
    }
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(md, "device_state"), i, st) {
        char w[48];
        int64_t d = -1;
        const char *backend = jstr(st, "backend");
        jint(st, "device", &d);
        snprintf(w, sizeof w, "%.16s:%lld", backend ? backend : "?", (long long)d);
        if (!strcmp(w, device) && !jint(st, "total", &v) && v > 0)
            return (double)v;
    }
    return 0;
}

typedef struct found_site {
    char where[400];
    double increase, held;
    int severity;
} found_site;

static int by_increase(const void *a, const void *b)
{
    double x = ((const found_site *)a)->increase, y = ((const found_site *)b)->increase;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The sites that grew, named, merged by name (two stacks of one line are
 * one site), largest growth first. */
static int named_sites(leak_scan *s, bundle *b, found_site *out, int cap)
{
    int n = 0;
    for (int i = 0; i < s->ntr; i++) {
        track *k = &s->tr[i];
        if (k->is_device || !k->g.detected)
            continue;
        char where[400];
        if (k->stack > 0)
            name_site(b, k->stack, where, sizeof where);
        else
            snprintf(where, sizeof where, "allocations with no stack recorded");
        int m = 0;
        while (m < n && strcmp(out[m].where, where))
            m++;
        if (m == n) {
            if (n == cap)
                continue;
            memset(&out[n], 0, sizeof out[n]);
            snprintf(out[n].where, sizeof out[n].where, "%s", where);
            n++;
        }
        out[m].increase += k->g.increase;
        out[m].held += k->held;
        out[m].severity = k->g.severity > out[m].severity ? k->g.severity : out[m].severity;
    }
    qsort(out, (size_t)n, sizeof *out, by_increase);
    return n;
}

static void suggestions(json_t *list, leak_scan *s, found_site *sites, int nsites)
{
    char amount[32], span[64];
    snprintf(span, sizeof span, "%.1f s", s->window_s);
    for (int k = 0; k < nsites && k < 3; k++) {
        char line[700];
        fmt_bytes((uint64_t)sites[k].increase, amount, sizeof amount);
        if (snprintf(line, sizeof line,
                     "%s kept %s more over %s and never gave it back: free what it allocates "
                     "once used, or bound the list or cache that keeps it",
                     sites[k].where, amount, span) < 0)
            continue;
        json_array_append_new(list, json_string(line));
    }
    for (int i = 0; i < s->ntr; i++) {
        track *d = &s->tr[i];
        if (!d->is_device || !d->g.detected || nsites)
            continue;
        char line[700];
        fmt_bytes((uint64_t)d->g.increase, amount, sizeof amount);
        if (!strcmp(d->device, "host"))
            snprintf(line, sizeof line,
                     "host memory grew by %s over %s and never came back down, and no site "
                     "explains it: look for many small blocks (under GMP_HOST_EVENT_MIN_BYTES "
                     "they have no events of their own)", amount, span);
        else
            snprintf(line, sizeof line,
                     "%s grew by %s over %s and never came back down: check for tensors kept "
                     "alive (a list of losses, a cache that grows every step)",
                     d->device, amount, span);
        json_array_append_new(list, json_string(line));
    }
}

static void print_words(leak_scan *s, bundle *b, found_site *sites, int nsites, json_t *sugg)
{
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
        track *d = &s->tr[i];
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

static json_t *result_json(leak_scan *s, found_site *sites, int nsites, json_t *sugg)
{
    double increase = 0, device_increase = 0;
    int severity = 0;
    json_t *jsites = json_array(), *jdevices = json_array();
    for (int k = 0; k < nsites; k++) {
        increase += sites[k].increase;
        severity = sites[k].severity > severity ? sites[k].severity : severity;
        json_array_append_new(jsites, json_pack("{s:s, s:f, s:f, s:s}", "site", sites[k].where,
                                                "memory_increase_mb", sites[k].increase / MIB,
                                                "held_mb", sites[k].held / MIB, "severity",
                                                gmp_growth_severity_name(sites[k].severity)));
    }
    for (int i = 0; i < s->ntr; i++) {
        track *d = &s->tr[i];
        if (!d->is_device)
            continue;
        if (d->g.detected) {
            device_increase = d->g.increase > device_increase ? d->g.increase : device_increase;
            severity = d->g.severity > severity ? d->g.severity : severity;
        }
        json_array_append_new(jdevices, json_pack(
            "{s:s, s:b, s:s, s:f, s:f, s:i}", "device", d->device, "detected", d->g.detected,
            "severity", gmp_growth_severity_name(d->g.severity), "memory_increase_mb",
            d->g.detected ? d->g.increase / MIB : 0.0, "time_window_seconds", s->window_s,
            "rises", (int)d->g.rises));
    }
    int detected = nsites > 0 || device_increase > 0;
    return json_pack("{s:b, s:s, s:f, s:f, s:o, s:o, s:o, s:{s:I, s:I}}", "detected", detected,
                     "severity", gmp_growth_severity_name(severity), "memory_increase_mb",
                     (nsites ? increase : device_increase) / MIB, "time_window_seconds",
                     s->window_s, "suggestions", json_incref(sugg), "sites", jsites, "devices",
                     jdevices, "events", "allocations", (json_int_t)s->allocs, "frees",
                     (json_int_t)s->frees);
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
    leak_scan *s = calloc(1, sizeof *s);
    block *blocks = s ? calloc(ADDR_SLOTS, sizeof *blocks) : NULL;
    if (!blocks) {
        free(s);
        bundle_close(&b);
        fprintf(stderr, "gmp-inspect leaks: out of memory\n");
        return EXIT_INVALID;
    }
    s->blocks = blocks;
    scan(s, &b);
    /* the window: from the first event of its last seconds, in events */
    size_t from = 0, last = s->nstamp ? s->nstamp - 1 : 0;
    while (window > 0 && from < last && s->stamp[from] < s->stamp[last] - window)
        from++;
    s->window_s = s->nstamp ? s->stamp[last] - s->stamp[from] : 0;
    for (int i = 0; i < s->ntr; i++) {
        track *k = &s->tr[i];
        gmp_growth_judge(k->t, k->v, k->n, from ? (double)(last - from) : 0,
                         k->is_device ? limit_of(&b, k->device) : 0, &k->g);
    }
    found_site sites[32];
    int nsites = named_sites(s, &b, sites, 32);
    json_t *sugg = json_array();
    suggestions(sugg, s, sites, nsites);
    json_t *result = result_json(s, sites, nsites, sugg);
    int detected = json_is_true(json_object_get(result, "detected"));
    int rc = EXIT_OK;
    if (as_json)
        rc = print_json(result) < 0 ? EXIT_INVALID : EXIT_OK;
    else {
        print_words(s, &b, sites, nsites, sugg);
        json_decref(result);
    }
    json_decref(sugg);
    for (int i = 0; i < s->ntr; i++) {
        free(s->tr[i].t);
        free(s->tr[i].v);
    }
    free(blocks);
    free(s->stamp);
    free(s);
    bundle_close(&b);
    return rc == EXIT_OK && detected ? EXIT_GROWTH_FOUND : rc;
}
