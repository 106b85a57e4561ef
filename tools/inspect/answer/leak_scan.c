/*
 * leak_scan.c — memory that grew and was never given back, per allocation
 * site and per device, from a bundle's allocation and free events, judged
 * by the rule the Python package shares (gmp_growth_judge,
 * recorder/growth.c): what a site (or a device) holds after its frees
 * climbs in every quarter of the window.  The answer `gmp-inspect leaks`
 * says in words or as the seed's leak-detection result (leaks_result).
 * Host blocks under GMP_HOST_EVENT_MIN_BYTES have no events: their growth
 * shows only in the host's line, not at a site.
 */
#include "answer.h"

#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

static void add_point(leak_track *k, double t, double v)
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

static leak_track *track_of(leak_scan *s, int is_device, int64_t stack, const char *device)
{
    for (int i = 0; i < s->ntr; i++)
        if (s->tr[i].is_device == is_device &&
            (is_device ? !strcmp(s->tr[i].device, device) : s->tr[i].stack == stack))
            return &s->tr[i];
    if (s->ntr == LEAK_TRACKS_MAX)
        return NULL;
    leak_track *k = &s->tr[s->ntr++];
    memset(k, 0, sizeof *k);
    k->is_device = is_device;
    k->stack = stack;
    snprintf(k->device, sizeof k->device, "%s", is_device ? device : "");
    return k;
}

/* An event's count of bytes when it is one: a number in [0, HOSTILE_BYTES],
 * else -1 (past that it is a hostile file's). */
static double amount(int has, double v)
{
    return has && v >= 0 && v <= HOSTILE_BYTES ? v : -1;
}

/* Every allocation and free up to the failure (what a dying process gave
 * back afterwards, at its exit, is no recovery): its site's series and its
 * device's. */
static void scan(leak_scan *s, bundle *b)
{
    size_t i;
    json_t *ev;
    event_record r;
    event_records_until(&b->events, events_until_failure(&b->events), i, ev, &r) {
        if (!r.has_time || (r.type != GMP_EV_ALLOC && r.type != GMP_EV_FREE))
            continue;
        double in_use = amount(r.has_in_use_real, r.in_use_real);
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
        s->stamp[s->nstamp] = r.time;
        double t = (double)s->nstamp++;
        uint64_t address = r.address;
        char where[48];
        event_where(ev, where, sizeof where);
        leak_track *dev = track_of(s, 1, 0, where);
        if (dev && in_use >= 0)
            add_point(dev, t, in_use);
        if (r.type == GMP_EV_FREE) {
            s->frees++;
            live_block *bl = address ? live_free(&s->live, 0, address) : NULL;
            if (bl) {
                leak_track *site = &s->tr[bl->mark];
                site->held -= (double)bl->size;
                add_point(site, t, site->held);
            }
            continue;
        }
        s->allocs++;
        int64_t stack = r.stack_id;
        double size = amount(r.has_size_real, r.size_real);
        leak_track *site = size > 0 && address ? track_of(s, 0, stack > 0 ? stack : 0, NULL)
                                             : NULL;
        if (!site)
            continue;
        site->held += size;
        add_point(site, t, site->held);
        live_block *made = live_alloc(&s->live, 0, address, (uint64_t)size, stack);
        if (made)
            made->mark = site - s->tr;
    }
}

/* What the severity of a device's growth is a share of: the device's
 * total; the host's nearest limit (RLIMIT_AS, its cgroup's, the machine). */
static double limit_of(bundle *b, const char *device)
{
    if (!strcmp(device, "host")) {
        const bundle_host_state *h = bundle_host_state_of(b);
        if (h && h->has_as_soft && h->as_soft > 0)
            return (double)h->as_soft;
        if (h && h->has_cgroup_max && h->cgroup_max > 0)
            return (double)h->cgroup_max;
        if (h && h->has_mem_total && h->mem_total > 0)
            return (double)h->mem_total;
        return 0;
    }
    size_t n;
    const bundle_device *d = bundle_devices_of(b, &n);
    for (size_t i = 0; i < n; i++) {
        char w[48];
        snprintf(w, sizeof w, "%.16s:%lld", d[i].backend ? d[i].backend : "?",
                 (long long)(d[i].has_device ? d[i].device : -1));
        if (!strcmp(w, device) && d[i].has_total && d[i].total > 0)
            return (double)d[i].total;
    }
    return 0;
}

static int by_increase(const void *a, const void *b)
{
    double x = ((const leak_site *)a)->increase, y = ((const leak_site *)b)->increase;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The sites that grew, named, merged by name (two stacks of one line are
 * one site), largest growth first. */
static int named_sites(leak_scan *s, bundle *b, leak_site *out, int cap)
{
    int n = 0;
    for (int i = 0; i < s->ntr; i++) {
        leak_track *k = &s->tr[i];
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

static void suggestions(json_t *list, leak_scan *s, leak_site *sites, int nsites)
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
        leak_track *d = &s->tr[i];
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

json_t *leaks_result(const leak_scan *s)
{
    const leak_site *sites = s->sites;
    int nsites = s->nsites;
    json_t *sugg = s->suggestions;
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
        const leak_track *d = &s->tr[i];
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

leak_scan *leaks_find(bundle *b, double window)
{
    leak_scan *s = calloc(1, sizeof *s);
    json_t *sugg = s ? json_array() : NULL;
    if (!sugg) {
        free(s);
        return NULL;
    }
    live_set_init(&s->live, REPLAY_LIVE_MAX);
    s->suggestions = sugg;
    scan(s, b);
    /* the window: from the first event of its last seconds, in events */
    size_t from = 0, last = s->nstamp ? s->nstamp - 1 : 0;
    while (window > 0 && from < last && s->stamp[from] < s->stamp[last] - window)
        from++;
    s->window_s = s->nstamp ? s->stamp[last] - s->stamp[from] : 0;
    for (int i = 0; i < s->ntr; i++) {
        leak_track *k = &s->tr[i];
        gmp_growth_judge(k->t, k->v, k->n, from ? (double)(last - from) : 0,
                         k->is_device ? limit_of(b, k->device) : 0, &k->g);
    }
    s->nsites = named_sites(s, b, s->sites, LEAK_SITES_MAX);
    suggestions(sugg, s, s->sites, s->nsites);
    return s;
}

void leaks_free(leak_scan *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->ntr; i++) {
        free(s->tr[i].t);
        free(s->tr[i].v);
    }
    json_decref(s->suggestions);
    live_set_release(&s->live);
    free(s->stamp);
    free(s);
}
