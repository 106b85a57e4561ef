/*
 * test_growth.c — the growth rule (recorder/growth.c) that gmp-inspect
 * leaks and the Python package share: a staircase that never comes back
 * down is growth; a load at the start that stays flat, a loop that gives
 * back what it takes, noise, too few points and a window that leaves the
 * growth out are not; the severity is a share of the limit; a bad series
 * is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"

#include <math.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)
#define N 120

static double t[N], held[N];

static gmp_growth judge(size_t n, double window_s, double limit)
{
    gmp_growth g;
    assert_int_equal(gmp_growth_judge(t, held, n, window_s, limit, &g), 0);
    return g;
}

/* 1 s apart; a 1 GiB baseline, and what the test adds */
static void series(double (*extra)(int i))
{
    for (int i = 0; i < N; i++) {
        t[i] = 1000.0 + i;
        held[i] = 1024 * MIB + extra(i);
    }
}

static double staircase(int i) /* 4 MiB kept every step, 16 MiB taken and given back */
{
    return 4 * MIB * i + (i % 2 ? 16 * MIB : 0);
}
static double load_then_flat(int i)
{
    return i < 10 ? 50 * MIB * i : 500 * MIB;
}
static double sawtooth(int i) /* a loop that frees what it took */
{
    return (i % 10) * 30 * MIB;
}
static double flat(int i)
{
    return (i % 3) * 0.25 * MIB;
}

static void test_a_staircase_is_growth(void **state)
{
    (void)state;
    series(staircase);
    gmp_growth g = judge(N, 0, 0);
    assert_true(g.detected);
    assert_int_equal(g.rises, 3);
    /* the lowest of the last quarter less the first's: about 3/4 of 476 MiB */
    assert_true(g.increase > 340 * MIB && g.increase < 380 * MIB);
    assert_true(fabs(g.window_s - (N - 1)) < 1e-9);
    assert_string_equal(gmp_growth_severity_name(g.severity), "medium"); /* of 1.5 GiB held */
    /* the same growth against a 2 GiB limit is 17% of it: high */
    assert_int_equal(judge(N, 0, 2048 * MIB).severity, GMP_GROWTH_HIGH);
    /* against 100 GiB: 0.35%, low */
    assert_int_equal(judge(N, 0, 100 * 1024 * MIB).severity, GMP_GROWTH_LOW);
}

static void test_what_comes_back_or_stays_flat_is_not(void **state)
{
    (void)state;
    series(load_then_flat);
    gmp_growth g = judge(N, 0, 0);
    assert_false(g.detected);
    assert_true(g.rises < 3);
    series(sawtooth);
    assert_false(judge(N, 0, 0).detected);
    series(flat);
    assert_false(judge(N, 0, 0).detected);
    assert_string_equal(gmp_growth_severity_name(judge(N, 0, 0).severity), "none");
}

static void test_windows_and_points(void **state)
{
    (void)state;
    /* growth in the first half only; the last 40 s are flat */
    for (int i = 0; i < N; i++) {
        t[i] = i;
        held[i] = (i < 60 ? i : 60) * 8 * MIB;
    }
    assert_true(judge(N, 0, 0).detected);
    assert_false(judge(N, 40, 0).detected);
    /* seven points are too few to say */
    series(staircase);
    gmp_growth g = judge(7, 0, 0);
    assert_false(g.detected);
    assert_int_equal(g.points, 7);
    /* an event series: points only when the site allocates; a load in
     * the first second of a minute holds flat for the rest of it */
    for (int i = 0; i < 20; i++) {
        t[i] = i * 0.05;
        held[i] = i * 10 * MIB;
    }
    t[20] = 60;
    held[20] = held[19];
    assert_false(judge(21, 0, 0).detected);
}

static void test_bad_series(void **state)
{
    (void)state;
    gmp_growth g;
    series(staircase);
    held[50] = NAN;
    assert_int_equal(gmp_growth_judge(t, held, N, 0, 0, &g), -1);
    assert_false(g.detected);
    assert_int_equal(gmp_growth_judge(NULL, held, N, 0, 0, &g), -1);
    assert_int_equal(gmp_growth_judge(t, held, N, 0, 0, NULL), -1);
    assert_int_equal(gmp_growth_judge(t, held, 0, 0, 0, &g), 0);
    assert_false(g.detected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_staircase_is_growth),
        cmocka_unit_test(test_what_comes_back_or_stays_flat_is_not),
        cmocka_unit_test(test_windows_and_points),
        cmocka_unit_test(test_bad_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
