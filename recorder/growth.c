/*
 * growth.c — the one rule for memory that grows and is never given back,
 * shared by `gmp-inspect leaks` (per allocation site and per device, from
 * a bundle's events) and the Python package (a series of readings:
 * `gpumemprof analyze --detect-leaks`, tfmemprof's analyze), so that both
 * call the same thing a leak.
 *
 * A series is what is held over time (a site's live bytes, a device's
 * used bytes), a step function: each value holds until the next.  Its
 * clock is the caller's: seconds for readings taken at a steady interval;
 * a bundle's callers use each event's place among the bundle's events, so
 * that quarters are of activity (a first CUDA call's pause is no flat
 * stretch) and a site that stops allocating holds flat over the events
 * that follow.  The window (its last window_s of that clock, or all of
 * it) is cut into four quarters, and each quarter's floor is the lowest
 * it held there (a quarter with no point holds what came before).  What stays after the
 * frees then climbs in every quarter — three rises — for a leak or a cache
 * that never lets go; a load at the start (weights, a pool) rises once and
 * stays flat, and a loop that frees what it takes comes back to its floor.
 * The growth must also weigh: 1 MiB at least, and 2% of what is held at
 * the end.  Pure arithmetic on the caller's arrays: no allocation.
 */
#include "gpumemprof.h"

#include <string.h>

#define MIN_POINTS 8
#define MIN_GROWTH (1024.0 * 1024.0)

/* no libm: the preload links only libc */
static double lower(double a, double b)
{
    return b < a ? b : a;
}

static int severity_of(double increase, double end, double limit)
{
    double share = limit > 0 ? increase / limit : end > 0 ? increase / end : 0;
    double high = limit > 0 ? 0.10 : 0.50, medium = limit > 0 ? 0.02 : 0.10;
    return share >= high ? GMP_GROWTH_HIGH : share >= medium ? GMP_GROWTH_MEDIUM : GMP_GROWTH_LOW;
}

int gmp_growth_judge(const double *t, const double *held, size_t n, double window_s,
                     double limit, gmp_growth *out)
{
    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    if (!t || !held || !n)
        return n ? -1 : 0;
    double end_t = t[n - 1];
    size_t first = 0;
    if (window_s > 0)
        while (first < n && t[first] < end_t - window_s)
            first++;
    /* the value held when the window opens: the last one before it */
    double opening = first > 0 ? held[first - 1] : held[first];
    double t0 = first > 0 ? end_t - window_s : t[first];
    out->points = n - first;
    if (n - first < MIN_POINTS || !(end_t > t0) || !__builtin_isfinite(t0) || !__builtin_isfinite(end_t))
        return 0;
    double floors[4] = {__builtin_inf(), __builtin_inf(), __builtin_inf(), __builtin_inf()};
    double span = end_t - t0, carried = opening;
    int q = 0;
    floors[0] = opening;
    for (size_t i = first; i < n; i++) {
        if (!__builtin_isfinite(held[i]) || !__builtin_isfinite(t[i]))
            return -1;
        int at = (int)((t[i] - t0) / span * 4);
        at = at < 0 ? 0 : at > 3 ? 3 : at;
        for (; q < at; q++) /* quarters passed through hold what came before */
            floors[q + 1] = lower(floors[q + 1], carried);
        floors[at] = lower(floors[at], held[i]);
        carried = held[i];
    }
    for (; q < 3; q++)
        floors[q + 1] = lower(floors[q + 1], carried);
    for (int k = 1; k < 4; k++)
        out->rises += floors[k] > floors[k - 1];
    out->window_s = span;
    out->floor_first = floors[0];
    out->floor_last = floors[3];
    out->end = held[n - 1];
    out->increase = floors[3] - floors[0];
    out->detected = out->rises == 3 && out->increase >= MIN_GROWTH &&
                    out->increase >= 0.02 * out->end;
    out->severity = out->detected ? severity_of(out->increase, out->end, limit) : 0;
    return 0;
}

const char *gmp_growth_severity_name(int severity)
{
    static const char *const names[] = {"none", "low", "medium", "high"};
    return severity >= 0 && severity <= GMP_GROWTH_HIGH ? names[severity] : "none";
}
