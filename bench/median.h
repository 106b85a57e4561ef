/*
 * median.h — the median of a run's own values, for the bench programs that
 * time in pairs inside one run (churn.c, start_pairs.c): what each prints
 * for bench/summary.py to take the rounds' median of in turn.
 */
#ifndef GMP_BENCH_MEDIAN_H
#define GMP_BENCH_MEDIAN_H

#include <stdlib.h>

static int bench_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), n > 0; sorts v. */
static double bench_median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, bench_by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
