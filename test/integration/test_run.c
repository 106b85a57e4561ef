/*
 * test_run.c — the assassination: processes killed by SIGKILL run no code,
 * so their bundle is written afterwards from the ring they left.  gmp-run
 * around python3 killed with kill -9 (the command itself, and a grandchild
 * reaped by a preloaded shell), exec and os._exit leaving no false bundle,
 * the sites of a killed process and a killed rank's run named from its
 * ring, and `gmp-inspect recover` later, for a ring whose process is gone
 * (and not for one whose process lives).  The kernel's OOM killer's kills
 * are test_oom_killer.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "killed_run.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_gmp_run_kill_9(void **state)
{
    (void)state;
    run("\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- " SELF_KILL);
    assert_true(ends_with_status(137));
    if (!strstr(err, "gmp-run: pid ") || !strstr(err, " died (SIGKILL); bundle: ") ||
        count_lines(err) != 1)
        fail_msg("stderr: %s", err);
    json_t *md = killed_bundle("SIGKILL", 4);
    assert_true(json_is_null(json_object_get(md, "failed_request")));
    json_t *outcome = json_object_get(md, "outcome");
    assert_string_equal(json_str(outcome, "state"), "killed");
    assert_string_equal(json_str(outcome, "signal"), "SIGKILL");
    json_decref(md);
    expect_first_cause(bundle, "killed without a word (SIGKILL)");
    /* no evidence of the OOM killer: not called an out-of-memory death */
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nWhat happened:    the process was killed by SIGKILL, cause unknown") ||
        strstr(out, "ran out of"))
        fail_msg("show says:\n%s", out);
}

/* Killed under a shell the preload reaches: the shell's wait notes the
 * signal, gmp-run writes the bundle, and exits with the shell's status. */
static void test_gmp_run_grandchild(void **state)
{
    (void)state;
    run("\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- sh -c \"" SELF_KILL "; exit 4\"");
    assert_true(ends_with_status(4));
    json_decref(killed_bundle("SIGKILL", 4));
}

/* A process whose main thread ended first reads as a zombie in /proc,
 * its live threads counted, though it runs on: gmp-run's look does not
 * date its death then.  Killed 1.5 s after its start, 1.2 s after its
 * main thread ended, its bundle is dated by the kill. */
static void test_killed_after_its_main_thread_ended(void **state)
{
    (void)state;
    char script[2048];
    snprintf(script, sizeof script,
             "echo \"t0 $(date +%%s%%N)\"; \"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- "
             "sh -c '%s/test/programs/leader_exits 1500; exit 4'",
             paths.build);
    run(script);
    assert_true(ends_with_status(4));
    long long t0 = strncmp(out, "t0 ", 3) ? 0 : atoll(out + 3);
    json_t *manifest = only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle);
    double after = (double)(json_int(manifest, "created_at_ns") - t0) / 1e9;
    json_decref(manifest);
    if (!t0 || after < 1.2 || after > 5)
        fail_msg("the kill 1.5 s after the start is dated %.2f s after it:\n%s\nstderr: %s",
                 after, out, err);
}

/* An exec leaves the old image's ring, os._exit skips the destructor:
 * neither is a death, so neither gets a bundle. */
static void test_exec_and_quick_exit_are_not_deaths(void **state)
{
    (void)state;
    run("\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- python3 -c 'import os\n"
        "keep = [bytearray(8 << 20) for _ in range(4)]\n"
        "os.execv(\"/bin/sh\", [\"sh\", \"-c\", \"exit 5\"])'");
    assert_true(ends_with_status(5));
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
    run("\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- python3 -c 'import os\n"
        "keep = [bytearray(8 << 20) for _ in range(4)]\n"
        "os._exit(3)'");
    assert_true(ends_with_status(3));
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
    assert_string_equal(err, "");
}

static void expect_killed_site(const char *mode, const char *where)
{
    char script[2048];
    snprintf(script, sizeof script,
             "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- %s/test/programs/host_oom %s",
             paths.build, mode);
    run(script);
    assert_true(ends_with_status(137));
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    json_t *mods = bundle_file(bundle, "modules.json");
    size_t i;
    json_t *m;
    int program = 0;
    json_array_foreach(mods, i, m) {
        const char *path = json_str(m, "path"), *id = json_str(m, "build_id");
        program += strstr(path, "/host_oom") && id && strlen(id) >= 16;
    }
    json_decref(mods);
    if (program != 1)
        fail_msg("%s: modules.json does not list host_oom once with its build-id", mode);
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    const char *sites = strstr(out, "\nTop allocation sites");
    if (!sites || !strstr(sites, where) || strstr(out, "stack id"))
        fail_msg("%s: show names no site %s:\n%s", mode, where, out);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bundle);
    assert_int_equal(system(cmd), 0);
}

/* A process killed without a word still gets its sites named; so does a
 * forked child whose stack its parent had made before the child's ring
 * existed. */
static void test_killed_bundle_names_sites(void **state)
{
    (void)state;
    expect_killed_site("hold-die KILL", " (host_oom.c:");
    expect_killed_site("fork-kill", "hold_16_mib (host_oom.c:");
}

/* A rank of a torchrun run killed by SIGKILL: its ring kept its launcher's
 * variables, so the bundle written after its death names its rank (in its
 * name, _r2_, and in triage's ranks) and its run as its own would have
 * (show's Run line); triage sites it where it held the most. */
static void test_killed_rank_names_its_run(void **state)
{
    (void)state;
    char script[2048];
    snprintf(script, sizeof script,
             "export TORCHELASTIC_RUN_ID=7f3a RANK=2 LOCAL_RANK=0 WORLD_SIZE=3 GROUP_RANK=1 "
             "MASTER_ADDR=10.0.0.5 MASTER_PORT=29500; "
             "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- %s/test/programs/host_oom hold-die KILL",
             paths.build);
    run(script);
    assert_true(ends_with_status(137));
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    if (!strstr(bundle, "_cpu_r2_"))
        fail_msg("the killed rank's bundle does not name rank 2: %s", bundle);
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    run_capture(show, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nRun:              torchrun run 7f3a, rank 2 of 3 (local 0) on node 1, "
                     "rendezvous 10.0.0.5:29500\n"))
        fail_msg("show names no run:\n%s", out);
    const char *triage[] = {inspect_path(), "triage", paths.dumps, NULL};
    run_capture(triage, out, sizeof out, err, sizeof err);
    if (!strstr(out, "    ranks 2  hosts "))
        fail_msg("triage names no rank:\n%s", out);
    /* no call failed: the site is where it held the most, as show's "Held
     * by" says (it was "-") */
    const char *signature = strstr(out, "  SIGKILL  at ");
    if (!signature || !strncmp(signature, "  SIGKILL  at -", 15) ||
        !strstr(signature, " (host_oom.c:"))
        fail_msg("triage names no site for the killed rank:\n%s", out);
}

/* Without gmp-run: the ring stays until `gmp-inspect recover`, which leaves
 * a live process's ring alone.  The shell here is not preloaded, so nobody
 * noted the signal: the reason says "killed". */
static void test_inspect_recover(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof script,
             "export GMP_RUN_DIR=\"%s/later\"; mkdir -p -m 700 \"$GMP_RUN_DIR\"; "
             "LD_PRELOAD='%s' python3 -c 'import os, time\n"
             "keep = [bytearray(8 << 20) for _ in range(4)]\n"
             "time.sleep(3)' & live=$!; "
             "LD_PRELOAD='%s' " SELF_KILL "; sleep 0.5; "
             "%s recover \"$GMP_RUN_DIR\" --dump-dir \"$GMP_DUMP_DIR\"; "
             "%s recover \"$GMP_RUN_DIR\"; kill $live; wait $live; ls \"$GMP_RUN_DIR\" | wc -l",
             paths.scratch, paths.preload, paths.preload, inspect_path(), inspect_path());
    run(script);
    char *first = strstr(out, ": killed; bundle: ");
    if (!first || strncmp(out, "pid ", 4) != 0)
        fail_msg("recover printed: %s", out);
    if (!strstr(out, "\nno ring of a dead process in "))
        fail_msg("a second recover found more: %s", out);
    json_decref(killed_bundle("killed", 4));
    (void)first;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "run");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gmp_run_kill_9),
        cmocka_unit_test(test_gmp_run_grandchild),
        cmocka_unit_test(test_killed_after_its_main_thread_ended),
        cmocka_unit_test(test_exec_and_quick_exit_are_not_deaths),
        cmocka_unit_test(test_killed_bundle_names_sites),
        cmocka_unit_test(test_killed_rank_names_its_run),
        cmocka_unit_test(test_inspect_recover),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
