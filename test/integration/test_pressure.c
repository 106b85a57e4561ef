/*
 * test_pressure.c — the slow death: a process under `ulimit -v` growing
 * slowly to 95% of its address-space limit.  The watchdog writes one
 * memory_pressure bundle per crossing of GMP_PRESSURE_PCT (not one per
 * sample), names the limit and the usage, and writes nothing when
 * GMP_WATCHDOG=0; the death it warned of, when it follows in the same
 * crossing, is one bundle with it; and no warning follows a failure.
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

/* host_oom slow-grow ROUNDS under a 600 MB address-space limit. */
static void grow(const char *env, int rounds)
{
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096];
    snprintf(script, sizeof script,
             "ulimit -v 600000; export LD_PRELOAD='%s' %s; exec %s/test/programs/host_oom "
             "slow-grow %d",
             paths.preload, env ? env : "", paths.build, rounds);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    assert_string_equal(out, "grew and shrank\n");
}

static int pressure_bundles(void)
{
    return count_prefixed(paths.dumps, "oom_dump_");
}

static void test_one_bundle_per_crossing(void **state)
{
    (void)state;
    grow(NULL, 1);
    assert_int_equal(pressure_bundles(), 1); /* five samples above: one bundle */
    if (strncmp(err, "gpumemprof: memory pressure: VmSize ", 36) || count_lines(err) != 1)
        fail_msg("stderr: %s", err);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    expect_first_cause(bundle, "memory close to a limit");
    expect_headline(bundle, "memory came close to a limit; a warning, written before anything "
                            "failed");
    /* a healthy program's warning: nothing failed, and show says no more */
    const char *shown = show_output(bundle);
    if (!strstr(shown, "\nOutcome:          exited 0: no death followed the warning\n") ||
        strstr(shown, "after the failure") || strstr(shown, "limit was reached"))
        fail_msg("show says:\n%s", shown);
    assert_string_equal(json_str(md, "reason"), "memory_pressure");
    assert_string_equal(json_str(md, "confirmed_by"), "watchdog");
    const char *msg = json_str(md, "exception_message");
    if (!strstr(msg, "% of RLIMIT_AS 585.9 MiB (threshold 90%)."))
        fail_msg("message: %s", msg);
    if (!strstr(json_str(md, "evidence"), "VmSize "))
        fail_msg("evidence: %s", json_str(md, "evidence"));
    json_decref(md);
}

/* The death the warning warned of, in the same crossing: one episode,
 * one bundle, the death's; its line says it replaces the warning. */
static void test_the_death_it_warned_of_is_one_bundle(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096];
    snprintf(script, sizeof script,
             "ulimit -v 600000; export LD_PRELOAD='%s'; exec %s/test/programs/host_oom slow-death",
             paths.preload, paths.build);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 1);
    assert_string_equal(out, "died of it\n");
    if (strncmp(err, "gpumemprof: memory pressure: VmSize ", 36) || count_lines(err) != 2 ||
        !strstr(err, "\ngpumemprof: OOM on host (malloc ") ||
        !strstr(err, " (replaces the memory-pressure warning oom_dump_"))
        fail_msg("stderr: %s", err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "reason"), "ENOMEM");
    json_decref(md);
}

/* Falling back below the threshold re-arms it. */
static void test_again_after_falling_below(void **state)
{
    (void)state;
    grow(NULL, 2);
    assert_int_equal(pressure_bundles(), 2);
    assert_int_equal(count_lines(err), 2);
}

/* A warning comes before a failure, never after one: python3 whose
 * allocation failed under the limit (caught), and which later grows to 95%
 * of it and holds there, gets the failure's bundle alone (a warning came
 * after it). */
static void test_no_warning_after_a_failure(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096];
    snprintf(script, sizeof script,
             "ulimit -v 600000; export LD_PRELOAD='%s'; exec python3 -c 'import resource, time\n"
             "try:\n"
             "    bytearray(1 << 40)\n"
             "except MemoryError:\n"
             "    pass\n"
             "time.sleep(1.5)  # its bundle written (GMP_OOM_CONFIRM_MS), far below the limit\n"
             "soft = resource.getrlimit(resource.RLIMIT_AS)[0]\n"
             "def vm():\n"
             "    return [int(l.split()[1]) << 10 for l in open(\"/proc/self/status\")\n"
             "            if l.startswith(\"VmSize:\")][0]\n"
             "keep = []\n"
             "while vm() + (16 << 20) < soft // 100 * 95:\n"
             "    keep.append(bytearray(8 << 20))\n"
             "    time.sleep(0.01)\n"
             "time.sleep(0.5)\n"
             "print(\"held\")'",
             paths.preload);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    assert_string_equal(out, "held\n");
    if (pressure_bundles() != 1 || strstr(err, "memory pressure"))
        fail_msg("%d bundle(s); stderr: %s", pressure_bundles(), err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "reason"), "ENOMEM");
    json_decref(md);
}

static void test_watchdog_off(void **state)
{
    (void)state;
    grow("GMP_WATCHDOG=0", 1);
    assert_int_equal(pressure_bundles(), 0);
    assert_string_equal(err, "");
}

/* A threshold above any crossing writes nothing. */
static void test_threshold_is_honoured(void **state)
{
    (void)state;
    grow("GMP_PRESSURE_PCT=99", 1);
    assert_int_equal(pressure_bundles(), 0);
}

/* A process with a small heap and no GPU memory starts no watchdog. */
static void test_small_process_starts_no_thread(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script, "export LD_PRELOAD='%s'; exec %s/test/programs/host_oom quiet",
             paths.preload, paths.build);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    assert_string_equal(out, "ok threads=1\n");
}

/* Nor does a healthy process with a large heap: Python 3.12 warns at every
 * fork of a multi-threaded process (each DataLoader worker), so the
 * pressure checks run on the allocating thread.  python3 holding 300 MiB
 * (over GMP_WATCHDOG_MIN_MB), growing and freeing, then forking. */
static void test_large_heap_starts_no_thread(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; exec python3 -W error -c 'import os\n"
             "keep = [bytearray(10 << 20) for _ in range(30)]\n"
             "for _ in range(50):\n"
             "    keep.append(bytearray(10 << 20)); keep.pop(0)\n"
             "with open(\"/proc/self/status\") as f:\n"
             "    threads = [l for l in f if l.startswith(\"Threads:\")]\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    os._exit(0)\n"
             "os.waitpid(pid, 0)\n"
             "print(threads[0].split()[1])'",
             paths.preload);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    assert_string_equal(out, "1\n");
    assert_string_equal(err, "");
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "pressure");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_bundle_per_crossing),
        cmocka_unit_test(test_the_death_it_warned_of_is_one_bundle),
        cmocka_unit_test(test_again_after_falling_below),
        cmocka_unit_test(test_no_warning_after_a_failure),
        cmocka_unit_test(test_watchdog_off),
        cmocka_unit_test(test_threshold_is_honoured),
        cmocka_unit_test(test_small_process_starts_no_thread),
        cmocka_unit_test(test_large_heap_starts_no_thread),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
