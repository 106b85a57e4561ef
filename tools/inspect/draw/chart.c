/*
 * chart.c — the chart `gmp-inspect plot` draws, as SVG: round ticks on
 * both axes, one line per series, the limits the memory ran against as
 * labelled lines, a bundle's marks (allocations and frees as ticks under
 * the axis, the memory-pressure moments, each OOM with its request drawn
 * on top of what was in use — on the address space the failing call found
 * (VmSize) when RLIMIT_AS is the limit, so the box crosses the line it
 * hit), and a legend for all of it.  Each mark, line and limit carries its
 * words as an SVG <title>, which a browser shows on hover (the HTML page,
 * verbs/report.c, holds the SVG).  What fills a chart is bundle_chart.c's
 * (a bundle's events) or readings_chart.c's (a file of readings).
 */
#include "draw.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The chart's size, and its plot area's left, right, top, bottom margins. */
#define W 960
#define H 480
#define L 90
#define R 220
#define T 50
#define B 70

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

/* A hover text, as the <title> of the element it closes: "><title>...
 * </title></TAG>\n" (the element was opened without its "/>"). */
__attribute__((format(printf, 3, 4))) static void hover(FILE *f, const char *tag,
                                                        const char *fmt, ...)
{
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fputs("><title>", f);
    plot_xml_text(f, text);
    fprintf(f, "</title></%s>\n", tag);
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
        size_t peak = 0;
        for (size_t k = 0; k < s->n; k++) {
            if (k) /* a step: in use holds until the next event */
                fprintf(f, "%.1f,%.1f ", px(p, s->t[k]), py(p, s->y[k - 1]));
            fprintf(f, "%.1f,%.1f ", px(p, s->t[k]), py(p, s->y[k]));
            peak = s->y[k] > s->y[peak] ? k : peak;
        }
        fputc('"', f);
        char amount[32] = "nothing";
        if (s->n)
            fmt_bytes((uint64_t)s->y[peak], amount, sizeof amount);
        hover(f, "polyline", "%s: at most %s, at %.3g s", s->label, amount,
              s->n ? s->t[peak] - p->t0 : 0.0);
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
                   "stroke-width=\"2\" stroke-dasharray=\"8,3\"",
                L, y, W - R, y);
        hover(f, "line", "the limit: %s", p->lim[k].label);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"" LIMIT "\">", L + 4, y - 4);
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
    event_record r;
    event_records_until(p->events, p->events->n, i, ev, &r) {
        double t = r.time, y = r.in_use_real, size = r.size_real;
        if (!r.has_time)
            continue;
        double x = px(p, t);
        if (r.type == GMP_EV_ALLOC || r.type == GMP_EV_FREE) {
            int up = r.type == GMP_EV_ALLOC;
            p->has_alloc |= up;
            p->has_free |= !up;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"",
                    x, H - B + 4, x, H - B + (up ? 14 : 10), up ? ALLOC_TICK : FREE_TICK);
            char amount[32] = "?";
            if (r.has_size_real)
                fmt_bytes((uint64_t)size, amount, sizeof amount);
            hover(f, "line", "%s %.40s of %s at %.3g s", up ? "allocation:" : "free:",
                  r.api ? r.api : "?", amount, t - p->t0);
        } else if (r.type == GMP_EV_PRESSURE) {
            p->has_pressure = 1;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"" PRESSURE "\" stroke-width=\"2\" stroke-dasharray=\"2,2\"",
                    x, T, x, H - B);
            char amount[32] = "?";
            if (r.has_in_use_real)
                fmt_bytes((uint64_t)y, amount, sizeof amount);
            hover(f, "line", "memory-pressure warning at %.3g s, %s in use", t - p->t0, amount);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"" PRESSURE "\" "
                       "text-anchor=\"middle\">pressure</text>\n", x, T - 4);
        } else if (r.type == GMP_EV_OOM && r.has_in_use_real) {
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
            snprintf(label, sizeof label, "OOM: %.40s %s%s", r.api ? r.api : "?",
                     req, cut ? " (reaches above the chart)" : "");
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"" FAILED "\" "
                       "stroke-dasharray=\"6,4\" stroke-width=\"2\"/>\n", x, T, x, H - B);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"%.1f\" "
                       "fill=\"" FAILED "\" fill-opacity=\"0.35\" stroke=\"" FAILED "\" "
                       "stroke-width=\"2\"",
                    x - 8, top, bottom - top);
            char held[32];
            fmt_bytes((uint64_t)y, held, sizeof held);
            hover(f, "rect", "the failed request: %.40s of %s at %.3g s, on top of the %s %s",
                  r.api ? r.api : "?", req, t - p->t0, held,
                  y == p->vm_size ? "of address space then (VmSize)" : "in use then");
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
        if (jreal(ev, "total", &total) || total <= 0 || jreal(ev, "free", &free_b) ||
            total - free_b < 0 || total - free_b > p->ymax)
            continue;
        double y = py(p, total - free_b);
        int over_limit = 0;
        for (int k = 0; k < p->nlim; k++)
            over_limit |= p->lim[k].bytes <= p->ymax && fabs(py(p, p->lim[k].bytes) - y) < 14;
        if (over_limit)
            continue;
        char amount[32];
        fmt_bytes((uint64_t)(total - free_b), amount, sizeof amount);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"" LIMIT "\" "
                   "stroke-dasharray=\"2,3\"", L, y, W - R, y);
        hover(f, "line", "%s in use on the device by all processes when it failed", amount);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                   "fill=\"" LIMIT "\" text-anchor=\"end\">in use on the device (all "
                   "processes)</text>\n",
                W - R - 24, y + 13);
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
