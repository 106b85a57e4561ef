/*
 * plot.c — `gmp-inspect plot BUNDLE -o FILE.svg|FILE.html`: memory in use
 * over time, one line per device and one for the host, from the bundle's
 * events; allocations and frees as ticks under the axis; each OOM marked,
 * with the request drawn on top of what was in use (and against the
 * device's total where the bundle knows it).  One self-contained file: an
 * SVG, or an HTML page holding the same SVG, no script, no network.
 */
#include "inspect.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 960
#define H 480
#define L 90  /* plot area: left, right, top, bottom margins */
#define R 170
#define T 50
#define B 70
#define MAX_SERIES 16

static const char *const colours[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

typedef struct series {
    char name[48];
    double *t, *y;
    size_t n, cap;
} series;

typedef struct plot {
    series s[MAX_SERIES];
    int ns;
    double t0, t1, ymax;
    const event_list *events;
} plot;

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (c == '"')
            fputs("&quot;", f);
        else if (c < 0x20 || c == 0x7f)
            fputc('?', f);
        else
            fputc(c, f);
    }
}

static int num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return isfinite(*out) ? 0 : -1;
}

static void where_of(json_t *ev, char *out, size_t cap)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, "device_id", &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        snprintf(out, cap, "host");
    else
        snprintf(out, cap, "%.16s:%lld", backend, (long long)dev);
}

static series *series_of(plot *p, const char *name)
{
    for (int i = 0; i < p->ns; i++)
        if (!strcmp(p->s[i].name, name))
            return &p->s[i];
    if (p->ns == MAX_SERIES)
        return NULL;
    series *s = &p->s[p->ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

static void add_point(series *s, double t, double y)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        double *nt = realloc(s->t, cap * sizeof *nt), *ny = nt ? realloc(s->y, cap * sizeof *ny) : NULL;
        if (!nt || !ny) {
            s->t = nt ? nt : s->t;
            return;
        }
        s->t = nt;
        s->y = ny;
        s->cap = cap;
    }
    s->t[s->n] = t;
    s->y[s->n] = y;
    s->n++;
}

static int is_memory_event(const char *type)
{
    return type && (!strcmp(type, "alloc") || !strcmp(type, "free") || !strcmp(type, "oom") ||
                    !strcmp(type, "oom_recovered") || !strcmp(type, "map") ||
                    !strcmp(type, "unmap"));
}

/* Time range, series, and the top of the y axis. */
static void collect(plot *p)
{
    p->t0 = INFINITY;
    p->t1 = -INFINITY;
    size_t i;
    json_t *ev;
    event_foreach(p->events, i, ev) {
        double t, y, size = 0;
        const char *type = jstr(ev, "event_type");
        if (!is_memory_event(type) || num(ev, "timestamp", &t) < 0 ||
            num(ev, "bytes_in_use", &y) < 0)
            continue;
        num(ev, "size", &size);
        char name[48];
        where_of(ev, name, sizeof name);
        series *s = series_of(p, name);
        if (s)
            add_point(s, t, y);
        p->t0 = fmin(p->t0, t);
        p->t1 = fmax(p->t1, t);
        p->ymax = fmax(p->ymax, !strcmp(type, "oom") ? y + size : y);
    }
    if (!(p->t1 > p->t0)) {
        p->t1 = p->t0 + 1;
    }
    if (!(p->ymax > 0))
        p->ymax = 1;
    p->ymax *= 1.1;
}

static double px(const plot *p, double t)
{
    return L + (t - p->t0) / (p->t1 - p->t0) * (W - L - R);
}

static double py(const plot *p, double y)
{
    return H - B - y / p->ymax * (H - T - B);
}

static void axes(FILE *f, const plot *p)
{
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#ffffff\" "
               "stroke=\"#444444\"/>\n", L, T, W - L - R, H - T - B);
    for (int k = 0; k <= 4; k++) {
        double y = p->ymax / 1.1 * k / 4;
        char label[32];
        fmt_bytes((uint64_t)y, label, sizeof label);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", L,
                py(p, y), W - R, py(p, y));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                L - 6, py(p, y) + 4, label);
    }
    /* a unit the span reads well in: events may be microseconds apart */
    double span = p->t1 - p->t0, scale = 1;
    const char *unit = "s";
    if (span < 1e-3) {
        scale = 1e6;
        unit = "\xc2\xb5s";
    } else if (span < 1) {
        scale = 1e3;
        unit = "ms";
    }
    for (int k = 0; k <= 5; k++) {
        double t = p->t0 + span * k / 5;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">"
                   "%.4g %s</text>\n",
                px(p, t), H - B + 32, (t - p->t0) * scale, unit);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">time since the "
               "first event</text>\n", L + (W - L - R) / 2, H - 12);
}

static void lines(FILE *f, const plot *p)
{
    for (int i = 0; i < p->ns; i++) {
        const series *s = &p->s[i];
        const char *c = colours[i % 8];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        for (size_t k = 0; k < s->n; k++) {
            if (k) /* a step: in use holds until the next event */
                fprintf(f, "%.1f,%.1f ", px(p, s->t[k]), py(p, s->y[k - 1]));
            fprintf(f, "%.1f,%.1f ", px(p, s->t[k]), py(p, s->y[k]));
        }
        fputs("\"/>\n", f);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", W - R + 14,
                T + 10 + 18 * i, c);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", W - R + 34, T + 15 + 18 * i);
        xml_text(f, s->name);
        fputs(" in use</text>\n", f);
    }
}

/* Allocation and free ticks under the axis, and the OOMs. */
static void marks(FILE *f, const plot *p, json_t *metadata)
{
    size_t i;
    json_t *ev;
    event_foreach(p->events, i, ev) {
        double t, y, size = 0;
        const char *type = jstr(ev, "event_type");
        if (!type || num(ev, "timestamp", &t) < 0)
            continue;
        num(ev, "size", &size);
        if (!strcmp(type, "alloc") || !strcmp(type, "free")) {
            int up = !strcmp(type, "alloc");
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n",
                    px(p, t), H - B + 4, px(p, t), H - B + (up ? 14 : 10),
                    up ? "#2ca02c" : "#999999");
        } else if (!strcmp(type, "oom") && num(ev, "bytes_in_use", &y) == 0) {
            char req[32], label[160];
            fmt_bytes((uint64_t)size, req, sizeof req);
            snprintf(label, sizeof label, "OOM: %.40s %s", jstr(ev, "api") ? jstr(ev, "api") : "?",
                     req);
            double x = px(p, t);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d62728\" "
                       "stroke-dasharray=\"6,4\" stroke-width=\"2\"/>\n", x, T, x, H - B);
            /* the request, stacked on what was in use */
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"%.1f\" fill=\"#d62728\" "
                       "fill-opacity=\"0.25\" stroke=\"#d62728\"/>\n",
                    x - 6, py(p, y + size), py(p, y) - py(p, y + size));
            int left = x > L + (W - L - R) / 2; /* keep the label inside the plot */
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"#d62728\" "
                       "text-anchor=\"%s\">", left ? x - 8 : x + 8, T + 14,
                    left ? "end" : "start");
            xml_text(f, label);
            fputs("</text>\n", f);
        }
    }
    /* the device's total and what all processes had in use there when it
     * failed: the request is drawn against what was free */
    json_t *states = json_object_get(metadata, "device_state");
    json_array_foreach(states, i, ev) {
        double total, free_b;
        if (num(ev, "total", &total) || total <= 0 || num(ev, "free", &free_b))
            continue;
        static const char *const labels[] = {"device total", "in use on the device (all processes)"};
        double ys[2] = {total, total - free_b};
        for (int k = 0; k < 2; k++)
            if (ys[k] >= 0 && ys[k] < p->ymax)
                fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ff7f0e\" "
                           "stroke-dasharray=\"%s\"/>\n<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                           "fill=\"#ff7f0e\">%s</text>\n",
                        L, py(p, ys[k]), W - R, py(p, ys[k]), k ? "6,3" : "2,3", L + 4,
                        py(p, ys[k]) - 4, labels[k]);
    }
}

static void write_svg(FILE *f, plot *p, bundle *b)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", W, H);
    fputs("<text x=\"20\" y=\"28\" font-size=\"16\">", f);
    xml_text(f, b->name);
    fputs(": ", f);
    xml_text(f, jstr(b->metadata, "reason") ? jstr(b->metadata, "reason") : "?");
    fputs("</text>\n", f);
    if (!p->ns) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">no memory events to plot</text>\n",
                W / 2 - 80, H / 2);
    } else {
        axes(f, p);
        lines(f, p);
        marks(f, p, b->metadata);
    }
    fputs("</svg>\n", f);
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect plot BUNDLE -o FILE.svg|FILE.html\n"
          "Memory in use over time (one line per device, one for the host), the\n"
          "allocations and frees under the axis, each OOM marked with its request\n"
          "drawn on top of what was in use.  One self-contained file: SVG, or HTML\n"
          "with the SVG inside (no script, no network).\n"
          "Exit status: 0, 1 when the bundle cannot be read or FILE written, 2 usage.\n",
          f);
}

int cmd_plot(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        usage(stdout);
        return EXIT_OK;
    }
    const char *path = NULL, *outp = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            outp = argv[++i];
        else if (argv[i][0] == '-' || path) {
            usage(stderr);
            return EXIT_USAGE;
        } else
            path = argv[i];
    }
    size_t olen = outp ? strlen(outp) : 0;
    int html = olen > 5 && !strcmp(outp + olen - 5, ".html");
    if (!path || !outp || (!html && !(olen > 4 && !strcmp(outp + olen - 4, ".svg")))) {
        usage(stderr);
        return EXIT_USAGE;
    }
    char err[600];
    bundle b;
    if (bundle_open(&b, path, 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect plot: %s\n", err);
        return EXIT_INVALID;
    }
    plot p;
    memset(&p, 0, sizeof p);
    p.events = &b.events;
    collect(&p);
    FILE *f = fopen(outp, "w");
    if (!f) {
        fprintf(stderr, "gmp-inspect plot: cannot write %s\n", outp);
        bundle_close(&b);
        return EXIT_INVALID;
    }
    if (html) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
        xml_text(f, b.name);
        fputs("</title>\n<style>body{font-family:sans-serif;margin:24px;background:#fff}"
              "</style></head>\n<body>\n<h1>", f);
        xml_text(f, b.name);
        fputs("</h1>\n<p>", f);
        xml_text(f, jstr(b.metadata, "exception_message") ? jstr(b.metadata, "exception_message")
                                                           : "");
        fputs("</p>\n", f);
    }
    write_svg(f, &p, &b);
    if (html)
        fputs("</body></html>\n", f);
    int bad = fclose(f) != 0;
    for (int i = 0; i < p.ns; i++) {
        free(p.s[i].t);
        free(p.s[i].y);
    }
    bundle_close(&b);
    if (bad) {
        fprintf(stderr, "gmp-inspect plot: cannot write %s\n", outp);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}
