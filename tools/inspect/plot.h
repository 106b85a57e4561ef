/*
 * plot.h — what plot.c (a bundle's memory over time) and plot_readings.c
 * (a file of readings: `gpumemprof monitor`'s, tfmemprof's) share: the
 * chart being drawn, and the steps that fill and draw it.
 */
#ifndef GMP_PLOT_H
#define GMP_PLOT_H

#include "inspect.h"

#include <stdio.h>

#define W 960
#define H 480
#define L 90  /* plot area: left, right, top, bottom margins */
#define R 220
#define T 50
#define B 70
#define MAX_SERIES 16
/* past these a time or a count is a hostile file's: the axes stay finite */
#define PLOT_TIME_MAX 1e11                   /* seconds since 1970 */
#define PLOT_BYTES_MAX 1152921504606846976.0 /* 2^60 */

typedef struct series {
    char name[64];
    char label[96]; /* the legend's words */
    double *t, *y;
    size_t n, cap;
} series;

/* A limit the memory ran against: drawn as a labelled line. */
#define MAX_LIMITS 8
typedef struct limit {
    char label[64];
    double bytes;
} limit;

typedef struct plot {
    series s[MAX_SERIES];
    int ns;
    double t0, t1, ymax, ystep; /* the y axis: round ticks ystep apart up to ymax */
    limit lim[MAX_LIMITS];
    int nlim;
    int has_alloc, has_free, has_oom, has_pressure;
    double first_request; /* the chart's scale when nothing was ever in use */
    const event_list *events;
    json_t *metadata;
    double vm_size; /* the address space when the host's request failed; 0 unknown */
    int readings;   /* a file of readings, not a bundle's events */
} plot;

/* series name (made with its legend's label when new; NULL when the
 * chart has MAX_SERIES already); a point of it; a limit's labelled line */
series *plot_series(plot *p, const char *name, const char *label);
void plot_point(series *s, double t, double y);
void plot_limit(plot *p, const char *what, double bytes);
/* The y axis from what the series and limits reach. */
void plot_axis(plot *p);
/* The chart as SVG: title, then the axes, limits, lines, the bundle's
 * marks (b NULL: none) and the legend. */
void plot_svg(FILE *f, plot *p, const char *title, bundle *b);
void plot_free(plot *p);
/* s as SVG text (escaped). */
void plot_xml_text(FILE *f, const char *s);
/* `gmp-inspect plot FILE.json`: a file of readings drawn to outp. */
int plot_readings(const char *path, const char *outp, int html);

#endif
