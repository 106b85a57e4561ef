/*
 * test_leaks.c — `gmp-inspect leaks`: memory that grew and was never given
 * back, by site.  A Python training loop that keeps 2 MiB a step (a list
 * of features it never clears) beside an 8 MiB scratch it frees each step,
 * until RLIMIT_AS stops it: the kept line is the leak, the scratch line is
 * not named, the host grew, the seed's result fields are there and the
 * exit status is 3.  The same loop without the keeping (a load at the
 * start, then only scratch) has no leak and exits 0, even though it too
 * ends in a MemoryError.  --window S judges the last S seconds of the
 * events, and a window that is no number is a usage error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* keep: each step's features are kept (line 5 makes them, line 12 keeps
 * them); else only a load at the start.  Every step takes and frees an
 * 8 MiB scratch (line 8).  Then a request past the limit (line 16). */
#define LOOP                                                                               \
    "import sys, time\n"                                                                   \
    "keep = sys.argv[1] == 'keep'\n"                                                       \
    "\n"                                                                                   \
    "def features(step):\n"                                                                \
    "    return bytearray(2 << 20)\n"                                                      \
    "\n"                                                                                   \
    "def scratch():\n"                                                                     \
    "    return len(bytearray(8 << 20))\n"                                                 \
    "\n"                                                                                   \
    "kept = [] if keep else [bytearray(100 << 20)]\n"                                      \
    "for step in range(%d):\n"                                                             \
    "    kept.append(features(step)) if keep else None\n"                                  \
    "    scratch()\n"                                                                      \
    "    time.sleep(0.002)\n"                                                              \
    "print(len(kept))\n"                                                                   \
    "bytearray(1 << 40)\n"

/* The loop's one bundle (kept or not), and what leaks says of it. */
static json_t *leaks_of(const char *mode, int steps, const char *window, int want_exit,
                        char *bundle, size_t cap)
{
    char script[12288], loop[2048];
    snprintf(loop, sizeof loop, LOOP, steps);
    snprintf(script, sizeof script,
             "cat > '%s/x.py' <<'EOF'\n%sEOF\n"
             "ulimit -v 2097152; LD_PRELOAD=\"%s\" GMP_WATCHDOG=0 exec python3 '%s/x.py' %s",
             paths.scratch, loop, paths.preload, paths.scratch, mode);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     1);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, cap));
    const char *argv[] = {inspect_path(), "leaks", bundle, "--json", window ? "--window" : NULL,
                          window, NULL};
    int rc = exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
    if (rc != want_exit)
        fail_msg("leaks %s: exit %d, %d expected:\n%s%s", mode, rc, want_exit, out, err);
    json_error_t jerr;
    json_t *r = json_loads(out, 0, &jerr);
    if (!r)
        fail_msg("leaks --json is not JSON (%s):\n%s", jerr.text, out);
    return r;
}

static json_t *device(json_t *r, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(r, "devices"), i, d)
        if (!strcmp(json_string_value(json_object_get(d, "device")), name))
            return d;
    fail_msg("no device %s in the leak result", name);
    return NULL;
}

static void test_the_kept_line_is_the_leak(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char bundle[1024];
    json_t *r = leaks_of("keep", 1000, NULL, 3, bundle, sizeof bundle);
    /* the seed's result fields */
    double increase = json_real_value(json_object_get(r, "memory_increase_mb"));
    double window = json_real_value(json_object_get(r, "time_window_seconds"));
    json_t *sites = json_object_get(r, "sites"), *top = json_array_get(sites, 0);
    const char *where = json_string_value(json_object_get(top, "site"));
    if (!json_is_true(json_object_get(r, "detected")) || !where ||
        strcmp(where, "x.py:5 in features (called from x.py:12)") || json_array_size(sites) != 1)
        fail_msg("the kept line is not the one leak found:\n%s", out);
    /* kept: 2 MiB a step until the limit; the growth is what stayed over
     * the last three quarters of the window at least */
    double held = json_real_value(json_object_get(top, "held_mb"));
    if (held < 600 || increase < held * 0.6 || increase > held || window <= 0.5)
        fail_msg("growth %.1f MiB of %.1f MiB held over %.2f s:\n%s", increase, held, window,
                 out);
    const char *severity = json_string_value(json_object_get(r, "severity"));
    json_t *sugg = json_object_get(r, "suggestions");
    if (!severity || strcmp(severity, "high") || json_array_size(sugg) < 1 ||
        !strstr(json_string_value(json_array_get(sugg, 0)), "x.py:5 in features"))
        fail_msg("severity or suggestion wrong:\n%s", out);
    assert_true(json_is_true(json_object_get(device(r, "host"), "detected")));
    json_decref(r);
    /* in words */
    const char *argv[] = {inspect_path(), "leaks", bundle, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 3);
    if (!strstr(out, "Growth never given back, by site:\n") ||
        !strstr(out, "x.py:5 in features (called from x.py:12)\n") ||
        strstr(out, "in scratch") || !strstr(out, "host     grew by "))
        fail_msg("leaks in words:\n%s", out);
}

static void test_scratch_and_a_load_are_not_a_leak(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char bundle[1024];
    json_t *r = leaks_of("load", 300, NULL, 0, bundle, sizeof bundle);
    if (json_is_true(json_object_get(r, "detected")) ||
        json_array_size(json_object_get(r, "sites")) ||
        strcmp(json_string_value(json_object_get(r, "severity")), "none") ||
        json_array_size(json_object_get(r, "suggestions")) ||
        json_real_value(json_object_get(r, "memory_increase_mb")) != 0)
        fail_msg("a loop that gives back its scratch has a leak:\n%s", out);
    assert_false(json_is_true(json_object_get(device(r, "host"), "detected")));
    json_decref(r);
}

static void test_a_window_of_the_last_seconds(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char bundle[1024];
    /* growth all through (2 s at least: 2 ms a step), so a window of its
     * last second still sees it, though the machine may pause the program
     * for a good part of that second (a 0.3 s window once held only the
     * last few steps, too little to weigh) */
    json_t *r = leaks_of("keep", 1000, "1", 3, bundle, sizeof bundle);
    double window = json_real_value(json_object_get(r, "time_window_seconds"));
    if (window > 1 + 1e-6 || window < 0.5)
        fail_msg("--window 1 judged %.3f s:\n%s", window, out);
    json_decref(r);
    const char *bad[] = {inspect_path(), "leaks", bundle, "--window", "soon", NULL};
    assert_int_equal(exit_code_of(run_capture(bad, out, sizeof out, err, sizeof err)), 2);
    assert_non_null(strstr(err, "--window wants a number of seconds"));
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "leaks");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_kept_line_is_the_leak),
        cmocka_unit_test(test_scratch_and_a_load_are_not_a_leak),
        cmocka_unit_test(test_a_window_of_the_last_seconds),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
