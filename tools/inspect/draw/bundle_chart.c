/*
 * bundle_chart.c — a bundle's events as a chart (chart.c draws it): memory
 * in use over time, one line per device and one for the host; beside them
 * the quantity each limit is about, where samples say it (a device's used
 * bytes, all processes', against its total; the memory cgroup's usage
 * against its limit); the limits it ran against (RLIMIT_AS, the memory
 * cgroup's, each device's total).
 */
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A sample event as the limit's own quantity: a device's used bytes (all
 * processes: its total less its free), the memory cgroup's usage (its
 * limit less what was left under it, when the sample's limit is the
 * cgroup's).  0 with the series' name and label, or -1. */
static int sample_series(const plot *p, json_t *ev, const event_record *r, double *used,
                         char *name, char *label)
{
    double total = r->size_real, y;
    const char *left = jstr(ev, "address");
    if (!r->has_size_real || total <= 0 || !left)
        return -1;
    double free_b = (double)r->address;
    if (free_b > total)
        return -1;
    *used = total - free_b;
    char where[48];
    event_where(ev, where, 48);
    if (strcmp(where, "host")) {
        snprintf(name, 64, "%.40s, all processes", where);
        snprintf(label, 96, "%.40s used, all processes", where);
        return 0;
    }
    json_t *cg = json_object_get(json_object_get(p->metadata, "host_state"), "cgroup");
    if (jreal(cg, "memory_max", &y) || y != total)
        return -1; /* the machine's: not a limit this chart draws */
    snprintf(name, 64, "host cgroup");
    snprintf(label, 96, "memory cgroup usage");
    return 0;
}

static int is_memory_event(gmp_event_type type)
{
    return type == GMP_EV_ALLOC || type == GMP_EV_FREE || type == GMP_EV_OOM ||
           type == GMP_EV_OOM_RECOVERED || type == GMP_EV_MAP || type == GMP_EV_UNMAP;
}

/* A time the axes can hold: since 1970 and before the year 5000. */
static int plottable_time(double t)
{
    return t >= 0 && t <= PLOT_TIME_MAX;
}

/* Time range, series, and the top of the y axis. */
static void collect(plot *p)
{
    p->t0 = INFINITY;
    p->t1 = -INFINITY;
    size_t i;
    json_t *ev;
    json_t *fr = json_object_get(p->metadata, "failed_request");
    double failed_vm = 0;
    jreal(fr, "vm_size", &failed_vm);
    event_record r;
    event_records_until(p->events, p->events->n, i, ev, &r) {
        double t = r.time, y = r.in_use_real, size = r.size_real;
        char name[64], label[96];
        if (r.type == GMP_EV_SAMPLE && r.has_time && plottable_time(t) &&
            !sample_series(p, ev, &r, &y, name, label)) {
            series *s = plot_series(p, name, label);
            if (s)
                plot_point(s, t, y);
            p->t0 = fmin(p->t0, t);
            p->t1 = fmax(p->t1, t);
            p->ymax = fmax(p->ymax, y);
            continue;
        }
        if (!is_memory_event(r.type) || !r.has_time || !plottable_time(t) ||
            !r.has_in_use_real || y < 0 || y > PLOT_BYTES_MAX)
            continue; /* absurd values would stretch the axes past drawing */
        event_where(ev, name, sizeof name);
        snprintf(label, sizeof label, "%s in use", name);
        series *s = plot_series(p, name, label);
        if (s)
            plot_point(s, t, y);
        /* the host's failed request: drawn on the address space it found */
        int oom = r.type == GMP_EV_OOM;
        if (oom && failed_vm > 0 && !strcmp(name, "host") &&
            json_equal(json_object_get(ev, "timestamp"), json_object_get(fr, "timestamp"))) {
            p->vm_size = failed_vm;
            y = failed_vm;
        }
        p->t0 = fmin(p->t0, t);
        p->t1 = fmax(p->t1, t);
        /* a request far beyond what was in use would flatten every line:
         * the axis holds it only when it is of the lines' order */
        p->ymax = fmax(p->ymax, y);
        if (oom && y + size <= 4 * fmax(y, 1))
            p->ymax = fmax(p->ymax, y + size);
        if (oom)
            p->first_request = p->first_request > 0 ? p->first_request : size;
    }
    if (!(p->t1 > p->t0)) {
        p->t1 = p->t0 + 1;
    }
}

/* The limits that bounded what was plotted: RLIMIT_AS and the memory
 * cgroup's for the host, each device's total for its line.  The axis
 * reaches a limit near the lines (up to 4 times their top); one far above
 * is named in the legend as off the chart. */
static void limits(plot *p, bundle *b)
{
    int host = 0;
    for (int i = 0; i < p->ns; i++)
        host |= !strcmp(p->s[i].name, "host");
    json_t *hs = json_object_get(b->metadata, "host_state");
    double v;
    if (host && !jreal(json_object_get(json_object_get(hs, "rlimits"), "as"), "soft", &v))
        plot_limit(p, "RLIMIT_AS", v);
    if (host && !jreal(json_object_get(hs, "cgroup"), "memory_max", &v))
        plot_limit(p, "cgroup limit", v);
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(b->metadata, "device_state"), i, st) {
        double dev = -1, total;
        jreal(st, "device", &dev);
        const char *backend = jstr(st, "backend");
        char what[48];
        snprintf(what, sizeof what, "%.16s:%.0f total", backend ? backend : "device", dev);
        if (!jreal(st, "total", &total))
            plot_limit(p, what, total);
    }
    plot_axis(p);
}

void plot_bundle(plot *p, bundle *b)
{
    p->events = &b->events;
    p->metadata = b->metadata;
    collect(p);
    limits(p, b);
}
