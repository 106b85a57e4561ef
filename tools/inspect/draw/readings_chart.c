/*
 * readings_chart.c — `gmp-inspect plot READINGS.json -o OUT.svg|OUT.html`: a
 * file of readings as a chart, drawn as a bundle's is (chart.c): one line per device
 * (or named series) of its bytes in use over time, and each one's total
 * as a labelled limit.  READINGS.json is what `gpumemprof monitor --format
 * json` writes (an array of readings: timestamp, collector, backend,
 * device_id, used_bytes, total_bytes), or an object {"title", "readings"}
 * whose readings name their line ("series"), as `gpumemprof analyze` and
 * `tfmemprof analyze --visualize` hand theirs over: the toolkit draws in
 * one place.  A reading that is not one (no time, a time before 1970 or
 * past the year 5000, no bytes, a count past 2^60) is left out, so that
 * the axes stay finite; a file past 64 MiB is refused.
 */
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define READINGS_MAX ((off_t)64 << 20)

static int num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return isfinite(*out) ? 0 : -1;
}

/* The line a reading is of: its "series", else "COLLECTOR WHERE". */
static void line_of(json_t *r, char *name, size_t cap)
{
    const char *named = jstr(r, "series"), *collector = jstr(r, "collector");
    const char *backend = jstr(r, "backend");
    double device = -1;
    if (named) {
        snprintf(name, cap, "%.60s", named);
        return;
    }
    num(r, "device_id", &device);
    if (!collector || !strcmp(collector, "host"))
        collector = ""; /* "host", not "host host" */
    if (device < 0)
        snprintf(name, cap, "%.16s%shost", collector, *collector ? " " : "");
    else
        snprintf(name, cap, "%.16s%s%.16s:%.0f", collector, *collector ? " " : "",
                 backend ? backend : "device", device);
}

typedef struct point {
    double t, y;
} point;

static int by_time(const void *a, const void *b)
{
    double x = ((const point *)a)->t, y = ((const point *)b)->t;
    return x < y ? -1 : x > y;
}

/* A series' points in time order (a CSV turned into readings may not be). */
static void sort_series(series *s)
{
    point *pts = s->n ? malloc(s->n * sizeof *pts) : NULL;
    if (!pts)
        return;
    for (size_t k = 0; k < s->n; k++)
        pts[k] = (point){s->t[k], s->y[k]};
    qsort(pts, s->n, sizeof *pts, by_time);
    for (size_t k = 0; k < s->n; k++) {
        s->t[k] = pts[k].t;
        s->y[k] = pts[k].y;
    }
    free(pts);
}

static void collect(plot *p, json_t *readings)
{
    double totals[MAX_SERIES] = {0};
    p->t0 = INFINITY;
    p->t1 = -INFINITY;
    size_t i;
    json_t *r;
    json_array_foreach(readings, i, r) {
        double t, used, total;
        if (num(r, "timestamp", &t) || t < 0 || t > PLOT_TIME_MAX ||
            (num(r, "used_bytes", &used) && num(r, "device_used", &used)) || used < 0 ||
            used > PLOT_BYTES_MAX)
            continue;
        char name[80], label[96];
        line_of(r, name, sizeof name);
        snprintf(label, sizeof label, "%s in use", name);
        series *s = plot_series(p, name, label);
        if (!s)
            continue;
        plot_point(s, t, used);
        if ((!num(r, "total_bytes", &total) || !num(r, "device_total", &total)) && total > 0 &&
            total <= PLOT_BYTES_MAX)
            totals[s - p->s] = fmax(totals[s - p->s], total);
        p->t0 = fmin(p->t0, t);
        p->t1 = fmax(p->t1, t);
        p->ymax = fmax(p->ymax, used);
    }
    /* one line per total: the devices of one size share it */
    for (int k = 0; k < p->ns; k++) {
        sort_series(&p->s[k]);
        if (!(totals[k] > 0))
            continue;
        char what[64];
        int more = 0;
        for (int m = k + 1; m < p->ns; m++)
            if (totals[m] == totals[k]) {
                totals[m] = 0;
                more++;
            }
        if (more)
            snprintf(what, sizeof what, "%.30s and %d more: total", p->s[k].name, more);
        else
            snprintf(what, sizeof what, "%.50s total", p->s[k].name);
        plot_limit(p, what, totals[k]);
    }
    if (!(p->t1 > p->t0))
        p->t1 = p->t0 + 1;
}

int plot_readings(plot *p, const char *path, char *title, size_t title_cap, char *err,
                  size_t err_cap)
{
    struct stat st;
    json_error_t e;
    json_t *doc = NULL;
    if (stat(path, &st) == 0 && st.st_size > READINGS_MAX)
        snprintf(e.text, sizeof e.text, "larger than 64 MiB");
    else
        doc = json_load_file(path, JSON_DECODE_ANY, &e);
    json_t *readings = json_is_object(doc) ? json_object_get(doc, "readings") : doc;
    if (!json_is_array(readings)) {
        snprintf(err, err_cap, "%s: not a bundle, nor a file of readings (%s)", path,
                 doc ? "no array of readings" : e.text);
        json_decref(doc);
        return -1;
    }
    const char *base = strrchr(path, '/');
    snprintf(title, title_cap, "%.250s", jstr(doc, "title") ? jstr(doc, "title")
                                         : base ? base + 1 : path);
    memset(p, 0, sizeof *p);
    p->readings = 1;
    collect(p, readings);
    plot_axis(p);
    json_decref(doc);
    return 0;
}
