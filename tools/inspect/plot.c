/*
 * plot.c — `gmp-inspect plot BUNDLE -o FILE.svg|FILE.html`: memory in use
 * over time, one line per device and one for the host, from the bundle's
 * events; beside them the quantity each limit is about, where samples say
 * it (a device's used bytes, all processes', against its total; the memory
 * cgroup's usage against its limit); allocations and frees as ticks under
 * the axis; the memory-pressure moments; each OOM marked, with the request
 * drawn on top of what was in use — on the address space the failing call
 * found (VmSize) when RLIMIT_AS is the limit, so the box crosses the line
 * it hit; the limits it ran against (RLIMIT_AS, the memory cgroup's, each
 * device's total) as labelled lines; round ticks and a legend for all of
 * it.  One self-contained file: an SVG, or an HTML page holding the same
 * SVG, no script, no network.
 */
#include "inspect.h"
#include "plot.h"

#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

/* The marks' colours, and the lines' (none of the marks': a line must not
 * read as allocation ticks or a warning in the legend). */
#define ALLOC_TICK "#2ca02c"
#define FREE_TICK "#999999"
#define FAILED "#d62728"
#define PRESSURE "#9467bd"
#define LIMIT "#ff7f0e"
static const char *const colours[] = {"#1f77b4", "#8c564b", "#17becf", "#e377c2",
                                      "#bcbd22", "#393b79", "#404040", "#c49c94"};

void plot_xml_text(FILE *f, const char *raw)
{
    char shown[4096]; /* controls and invisible format characters made visible first */
    clean_text_n(raw, strnlen(raw, (sizeof shown - 1) / 6), shown, sizeof shown);
    for (const char *s = shown; *s; s++) {
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
    uint64_t wide;
    if (json_is_wide_size(v, &wide))
        *out = (double)wide;
    else if (json_is_number(v))
        *out = json_number_value(v);
    else
        return -1;
    return isfinite(*out) ? 0 : -1;
}

/* The series of name (made with label when new). */
series *plot_series(plot *p, const char *name, const char *label)
{
    for (int i = 0; i < p->ns; i++)
        if (!strcmp(p->s[i].name, name))
            return &p->s[i];
    if (p->ns == MAX_SERIES)
        return NULL;
    series *s = &p->s[p->ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->label, sizeof s->label, "%s", label);
    return s;
}

/* A sample event as the limit's own quantity: a device's used bytes (all
 * processes: its total less its free), the memory cgroup's usage (its
 * limit less what was left under it, when the sample's limit is the
 * cgroup's).  0 with the series' name and label, or -1. */
static int sample_series(const plot *p, json_t *ev, double *used, char *name, char *label)
{
    double total, y;
    const char *left = jstr(ev, "address");
    if (num(ev, "size", &total) || total <= 0 || !left)
        return -1;
    double free_b = (double)strtoull(left, NULL, 16);
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
    if (num(cg, "memory_max", &y) || y != total)
        return -1; /* the machine's: not a limit this chart draws */
    snprintf(name, 64, "host cgroup");
    snprintf(label, 96, "memory cgroup usage");
    return 0;
}

void plot_point(series *s, double t, double y)
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
    num(fr, "vm_size", &failed_vm);
    event_foreach(p->events, i, ev) {
        double t, y, size = 0;
        const char *type = jstr(ev, "event_type");
        char name[64], label[96];
        if (type && !strcmp(type, "sample") && !num(ev, "timestamp", &t) && plottable_time(t) &&
            !sample_series(p, ev, &y, name, label)) {
            series *s = plot_series(p, name, label);
            if (s)
                plot_point(s, t, y);
            p->t0 = fmin(p->t0, t);
            p->t1 = fmax(p->t1, t);
            p->ymax = fmax(p->ymax, y);
            continue;
        }
        if (!is_memory_event(type) || num(ev, "timestamp", &t) < 0 || !plottable_time(t) ||
            num(ev, "bytes_in_use", &y) < 0 || y < 0 || y > PLOT_BYTES_MAX)
            continue; /* absurd values would stretch the axes past drawing */
        num(ev, "size", &size);
        event_where(ev, name, sizeof name);
        snprintf(label, sizeof label, "%s in use", name);
        series *s = plot_series(p, name, label);
        if (s)
            plot_point(s, t, y);
        /* the host's failed request: drawn on the address space it found */
        if (!strcmp(type, "oom") && failed_vm > 0 && !strcmp(name, "host") &&
            json_equal(json_object_get(ev, "timestamp"), json_object_get(fr, "timestamp"))) {
            p->vm_size = failed_vm;
            y = failed_vm;
        }
        p->t0 = fmin(p->t0, t);
        p->t1 = fmax(p->t1, t);
        /* a request far beyond what was in use would flatten every line:
         * the axis holds it only when it is of the lines' order */
        p->ymax = fmax(p->ymax, y);
        if (!strcmp(type, "oom") && y + size <= 4 * fmax(y, 1))
            p->ymax = fmax(p->ymax, y + size);
        if (!strcmp(type, "oom"))
            p->first_request = p->first_request > 0 ? p->first_request : size;
    }
    if (!(p->t1 > p->t0)) {
        p->t1 = p->t0 + 1;
    }
}

/* A step of 1, 2 or 5 times a power of base that puts about n ticks
 * under top (time: 0.5 s, 1 s, 2 s...). */
static double nice_step(double top, double base, int n)
{
    double raw = top / n, unit = 1;
    while (unit * base <= raw)
        unit *= base;
    while (unit > raw && unit > 1e-9)
        unit /= base;
    static const double m[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (unit * m[i] >= raw)
            return unit * m[i];
    return unit * base;
}

void plot_limit(plot *p, const char *what, double bytes)
{
    if (p->nlim == MAX_LIMITS || !(bytes > 0))
        return;
    char amount[32];
    fmt_bytes((uint64_t)bytes, amount, sizeof amount);
    snprintf(p->lim[p->nlim].label, sizeof p->lim[0].label, "%s %s", what, amount);
    p->lim[p->nlim++].bytes = bytes;
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
    if (host && !num(json_object_get(json_object_get(hs, "rlimits"), "as"), "soft", &v))
        plot_limit(p, "RLIMIT_AS", v);
    if (host && !num(json_object_get(hs, "cgroup"), "memory_max", &v))
        plot_limit(p, "cgroup limit", v);
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(b->metadata, "device_state"), i, st) {
        double dev = -1, total;
        num(st, "device", &dev);
        const char *backend = jstr(st, "backend");
        char what[48];
        snprintf(what, sizeof what, "%.16s:%.0f total", backend ? backend : "device", dev);
        if (!num(st, "total", &total))
            plot_limit(p, what, total);
    }
    plot_axis(p);
}

void plot_axis(plot *p)
{
    if (!(p->ymax > 0)) /* nothing in use: the request sets the scale */
        p->ymax = p->first_request;
    double top = p->ymax > 0 ? p->ymax : 1;
    for (int k = 0; k < p->nlim; k++)
        if (p->lim[k].bytes <= 4 * top)
            p->ymax = fmax(p->ymax, p->lim[k].bytes);
    if (!(p->ymax > 0))
        p->ymax = 1;
    /* a power of two: 256 MiB, 512 MiB, 768 MiB... read round in binary units */
    p->ystep = 1;
    while (p->ystep * 5 < p->ymax * 1.05)
        p->ystep *= 2;
    p->ymax = ceil(p->ymax * 1.05 / p->ystep) * p->ystep;
}

static double px(const plot *p, double t)
{
    return L + (t - p->t0) / (p->t1 - p->t0) * (W - L - R);
}

static double py(const plot *p, double y)
{
    return H - B - y / p->ymax * (H - T - B);
}

/* "512 MiB", "1.5 GiB": a tick's bytes without a needless ".0" */
static void round_bytes(double v, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, "%.3g %s", v, units[u]);
}

static void axes(FILE *f, const plot *p)
{
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#ffffff\" "
               "stroke=\"#444444\"/>\n", L, T, W - L - R, H - T - B);
    for (double y = 0; y <= p->ymax * (1 + 1e-9); y += p->ystep) {
        char label[32];
        round_bytes(y, label, sizeof label);
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
    double step = nice_step(span * scale, 10, 5) / scale;
    for (double t = 0; t <= span * (1 + 1e-9); t += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">"
                   "%.3g %s</text>\n",
                px(p, p->t0 + t), H - B + 32, t * scale, unit);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">time since the "
               "first %s</text>\n", L + (W - L - R) / 2, H - 12, p->readings ? "reading" : "event");
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
    }
}

/* One legend row: a line swatch (colour, dashes or "none"), then text. */
static int legend_row(FILE *f, int row, const char *colour, const char *dashes, int width,
                      const char *text)
{
    int x = W - R + 14, y = T + 10 + 18 * row;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
               "stroke-width=\"%d\" stroke-dasharray=\"%s\"/>\n",
            x, y, x + 14, y, colour, width, dashes);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", W - R + 34, y + 4);
    plot_xml_text(f, text);
    fputs("</text>\n", f);
    return row + 1;
}

/* Everything drawn, named: the lines, the ticks, the OOM, the limits. */
static void legend(FILE *f, const plot *p)
{
    int row = 0;
    for (int i = 0; i < p->ns; i++)
        row = legend_row(f, row, colours[i % 8], "none", 3, p->s[i].label);
    if (p->has_alloc)
        row = legend_row(f, row, ALLOC_TICK, "none", 2, "allocation (tick)");
    if (p->has_free)
        row = legend_row(f, row, FREE_TICK, "none", 2, "free (tick)");
    if (p->has_oom)
        row = legend_row(f, row, FAILED, "6,4", 2,
                         p->vm_size > 0 ? "failed request (box, on VmSize)"
                                        : "failed request (box: size)");
    if (p->has_pressure)
        row = legend_row(f, row, PRESSURE, "2,2", 2, "memory-pressure warning");
    for (int k = 0; k < p->nlim; k++) {
        char text[96];
        snprintf(text, sizeof text, "%s%s", p->lim[k].label,
                 p->lim[k].bytes > p->ymax ? " (off the chart)" : "");
        row = legend_row(f, row, LIMIT, "8,3", 2, text);
    }
}

/* Each limit within the chart: a line across it, labelled. */
static void limit_lines(FILE *f, const plot *p)
{
    for (int k = 0; k < p->nlim; k++) {
        if (p->lim[k].bytes > p->ymax)
            continue;
        double y = py(p, p->lim[k].bytes);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"" LIMIT "\" "
                   "stroke-width=\"2\" stroke-dasharray=\"8,3\"/>\n<text x=\"%d\" y=\"%.1f\" "
                   "font-size=\"11\" fill=\"" LIMIT "\">",
                L, y, W - R, y, L + 4, y - 4);
        plot_xml_text(f, p->lim[k].label);
        fputs("</text>\n", f);
    }
}

/* Allocation and free ticks under the axis, the memory-pressure moments,
 * and the OOMs: a dashed line, and the request as a box on top of what was
 * in use (at least a few pixels tall; cut at the chart's top, and said so,
 * when it reaches past it). */
static void marks(FILE *f, plot *p, json_t *metadata)
{
    size_t i;
    json_t *ev;
    event_foreach(p->events, i, ev) {
        double t, y, size = 0;
        const char *type = jstr(ev, "event_type");
        if (!type || num(ev, "timestamp", &t) < 0)
            continue;
        num(ev, "size", &size);
        double x = px(p, t);
        if (!strcmp(type, "alloc") || !strcmp(type, "free")) {
            int up = !strcmp(type, "alloc");
            p->has_alloc |= up;
            p->has_free |= !up;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n",
                    x, H - B + 4, x, H - B + (up ? 14 : 10), up ? ALLOC_TICK : FREE_TICK);
        } else if (!strcmp(type, "pressure")) {
            p->has_pressure = 1;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"" PRESSURE "\" stroke-width=\"2\" stroke-dasharray=\"2,2\"/>\n"
                       "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"" PRESSURE "\" "
                       "text-anchor=\"middle\">pressure</text>\n",
                    x, T, x, H - B, x, T - 4);
        } else if (!strcmp(type, "oom") && num(ev, "bytes_in_use", &y) == 0) {
            p->has_oom = 1;
            json_t *fr = json_object_get(metadata, "failed_request");
            if (p->vm_size > 0 &&
                json_equal(json_object_get(ev, "timestamp"), json_object_get(fr, "timestamp")))
                y = p->vm_size; /* RLIMIT_AS counts the address space, not malloc's bytes */
            char req[32], label[200];
            fmt_bytes((uint64_t)size, req, sizeof req);
            double top = py(p, y + size), bottom = py(p, y);
            int cut = top < T;
            if (cut)
                top = T;
            if (bottom - top < 6) /* a small request still shows */
                top = bottom - 6;
            snprintf(label, sizeof label, "OOM: %.40s %s%s", jstr(ev, "api") ? jstr(ev, "api") : "?",
                     req, cut ? " (reaches above the chart)" : "");
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"" FAILED "\" "
                       "stroke-dasharray=\"6,4\" stroke-width=\"2\"/>\n", x, T, x, H - B);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"%.1f\" "
                       "fill=\"" FAILED "\" fill-opacity=\"0.35\" stroke=\"" FAILED "\" "
                       "stroke-width=\"2\"/>\n",
                    x - 8, top, bottom - top);
            int left = x > L + (W - L - R) / 2; /* keep the label inside the plot */
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"" FAILED "\" "
                       "text-anchor=\"%s\">", left ? x - 10 : x + 10, T + 14,
                    left ? "end" : "start");
            plot_xml_text(f, label);
            fputs("</text>\n", f);
        }
    }
    /* what all processes had in use on a device when it failed: the
     * request is drawn against what was free (not drawn over a limit's
     * line: a full device's is its total's) */
    json_array_foreach(json_object_get(metadata, "device_state"), i, ev) {
        double total, free_b;
        if (num(ev, "total", &total) || total <= 0 || num(ev, "free", &free_b) ||
            total - free_b < 0 || total - free_b > p->ymax)
            continue;
        double y = py(p, total - free_b);
        int over_limit = 0;
        for (int k = 0; k < p->nlim; k++)
            over_limit |= p->lim[k].bytes <= p->ymax && fabs(py(p, p->lim[k].bytes) - y) < 14;
        if (over_limit)
            continue;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"" LIMIT "\" "
                   "stroke-dasharray=\"2,3\"/>\n<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                   "fill=\"" LIMIT "\" text-anchor=\"end\">in use on the device (all "
                   "processes)</text>\n",
                L, y, W - R, y, W - R - 24, y + 13);
    }
}

void plot_svg(FILE *f, plot *p, const char *title, bundle *b)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", W, H);
    fputs("<text x=\"20\" y=\"28\" font-size=\"16\">", f);
    plot_xml_text(f, title);
    fputs("</text>\n", f);
    if (!p->ns) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">no memory %s to plot</text>\n",
                W / 2 - 80, H / 2, p->readings ? "readings" : "events");
    } else {
        axes(f, p);
        limit_lines(f, p);
        lines(f, p);
        if (b)
            marks(f, p, b->metadata);
        legend(f, p);
    }
    fputs("</svg>\n", f);
}

void plot_free(plot *p)
{
    for (int i = 0; i < p->ns; i++) {
        free(p->s[i].t);
        free(p->s[i].y);
    }
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect plot BUNDLE|READINGS.json -o FILE.svg|FILE.html\n"
          "Memory in use over time (one line per device, one for the host), the\n"
          "allocations and frees under the axis, each OOM marked with its request\n"
          "drawn on top of what was in use.  One self-contained file: SVG, or HTML\n"
          "with the SVG inside (no script, no network).  READINGS.json: what\n"
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
    size_t olen = outp ? strlen(outp) : 0;
    int html = olen > 5 && !strcmp(outp + olen - 5, ".html");
    if (!outp || (!html && !(olen > 4 && !strcmp(outp + olen - 4, ".svg"))))
        return VERB_EXIT(verb_misuse(&a, "-o wants a file ending .svg or .html"));
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        return plot_readings(path, outp, html);
    char err[600];
    bundle b;
    if (bundle_open(&b, path, 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect plot: %s\n", err);
        return EXIT_INVALID;
    }
    plot p;
    memset(&p, 0, sizeof p);
    p.events = &b.events;
    p.metadata = b.metadata;
    collect(&p);
    limits(&p, &b);
    out_file o;
    FILE *f = out_open(&o, outp);
    if (!f) {
        fprintf(stderr, "gmp-inspect plot: cannot write %s\n", outp);
        bundle_close(&b);
        return EXIT_INVALID;
    }
    if (html) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
        plot_xml_text(f, b.name);
        fputs("</title>\n<style>body{font-family:sans-serif;margin:24px;background:#fff}"
              "</style></head>\n<body>\n<h1>", f);
        plot_xml_text(f, b.name);
        fputs("</h1>\n<p>", f);
        plot_xml_text(f, jstr(b.metadata, "exception_message") ? jstr(b.metadata, "exception_message")
                                                           : "");
        fputs("</p>\n", f);
    }
    char title[600];
    snprintf(title, sizeof title, "%.300s: %.250s", b.name,
             jstr(b.metadata, "reason") ? jstr(b.metadata, "reason") : "?");
    plot_svg(f, &p, title, &b);
    if (html)
        fputs("</body></html>\n", f);
    int bad = out_commit(&o) != 0;
    plot_free(&p);
    bundle_close(&b);
    if (bad) {
        fprintf(stderr, "gmp-inspect plot: cannot write %s\n", outp);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}
