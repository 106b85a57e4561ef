/*
 * test_outcome.c — a bundle says how its process ended.  It is written at
 * the failure, while the process may go on; the preload rewrites it when the
 * process ends: python3 that catches its MemoryError and exits 0 survived
 * (show says so first, triage passes it), one that lets it go died with 1
 * (triage fails), a bundle read while its process still runs says so, and a
 * forked child's exit never speaks for its parent's bundle.  A process
 * killed by SIGKILL after a failure it went on from: whoever writes up the
 * kill (gmp-run) says it in the failure's bundle too, and the kill's own
 * bundle does not tell the failure again.  A caught failure, then an
 * uncaught one at another line: each its own bundle and outcome (survived,
 * naming the death's bundle; the death); a request retried at one line is
 * one bundle.  A SIGTERM sent while the bundle is being written waits for
 * it to be whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16], bundle[1024];

/* python3 -c CODE under the preload (GMP_OOM_POLICY=first when asked:
 * the bundle is written at the failure itself); returns its exit code. */
static int python(const char *code, int at_failure)
{
    char script[4096];
    snprintf(script, sizeof script,
             "export GMP_WATCHDOG=0 %s LD_PRELOAD=\"%s\"; python3 -c '%s'",
             at_failure ? "GMP_OOM_POLICY=first" : "", paths.preload, code);
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

/* The one bundle's outcome: "exited 0", "killed SIGSEGV", "running". */
static const char *outcome_of_the_bundle(void)
{
    static char said[64];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *o = json_object_get(md, "outcome");
    const char *state = json_str(o, "state");
    if (!strcmp(state, "exited"))
        snprintf(said, sizeof said, "exited %lld", json_int(o, "exit_status"));
    else
        snprintf(said, sizeof said, "%s", state);
    json_decref(md);
    return said;
}

/* gmp-inspect VERB DIR: its exit code, its stdout in out. */
static int inspect(const char *verb, const char *path)
{
    const char *argv[] = {inspect_path(), verb, path, NULL};
    return exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
}

/* After triage into out: show of the bundle of its survived failure's
 * group ("e.g. PATH"), into out. */
static void show_the_survived(void)
{
    char *failure = strstr(out, "survived a failed allocation");
    char *example = failure ? strstr(failure, "e.g. ") : NULL;
    assert_non_null(example);
    char path[1024];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(example + 5, "\n"), example + 5);
    assert_int_equal(inspect("show", path), 0);
}

#define CAUGHT "try:\n    bytearray(1 << 46)\nexcept MemoryError:\n    print(\"caught\")\n"

static void test_caught_memory_error_survived(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    assert_int_equal(python(CAUGHT, 0), 0);
    assert_string_equal(out, "caught\n");
    assert_string_equal(outcome_of_the_bundle(), "exited 0");
    expect_headline(bundle, "the process survived: an allocation of host memory failed (ENOMEM),"
                            " and it went on and exited 0; no death");
    assert_int_equal(inspect("triage", paths.dumps), 0);
    if (!strstr(out, "0 out-of-memory death(s), ") || !strstr(out, ", 1 failure(s) survived") ||
        !strstr(out, "survived a failed allocation"))
        fail_msg("triage does not count it as survived:\n%s", out);
}

static void test_uncaught_memory_error_died(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    assert_int_equal(python("bytearray(1 << 46)", 0), 1);
    assert_string_equal(outcome_of_the_bundle(), "exited 1");
    expect_headline(bundle, "the process ran out of host memory (ENOMEM)");
    assert_int_equal(inspect("show", bundle), 0);
    if (!strstr(out, "\nOutcome:          exited 1\n"))
        fail_msg("show does not say how it ended:\n%s", out);
    assert_int_equal(inspect("triage", paths.dumps), 3);
}

/* Written at the failure: while the process runs on, its bundle says so;
 * at its end (exit 3), the bundle says that. */
static void test_written_while_running_then_rewritten(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    int code = python("import glob, json, os, sys\n" CAUGHT
                      "d = glob.glob(os.environ[\"GMP_DUMP_DIR\"] + \"/oom_dump_*\")[0]\n"
                      "print(json.load(open(d + \"/metadata.json\"))[\"outcome\"])\n"
                      "sys.exit(3)\n",
                      1);
    assert_int_equal(code, 3);
    assert_string_equal(out, "caught\n{'state': 'running'}\n");
    assert_string_equal(outcome_of_the_bundle(), "exited 3");
    assert_int_equal(inspect("show", bundle), 0);
    assert_non_null(strstr(out, "\nOutcome:          exited 3\n"));
}

/* Children forked after the failure exit 0 (sys.exit, os._exit); then
 * the parent is killed by SIGKILL, which no code of its own sees: the
 * bundle, the parent's, still says its process was running, not that it
 * exited 0. */
static void test_forked_child_does_not_speak_for_its_parent(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    int code = python("import os, signal, sys\n" CAUGHT
                      "pid = os.fork()\n"
                      "if pid == 0:\n    sys.exit(0)\n"
                      "os.waitpid(pid, 0)\n"
                      "child = os.fork()\n"
                      "if child == 0:\n    os._exit(0)\n"
                      "os.waitpid(child, 0)\n"
                      "os.kill(os.getpid(), signal.SIGKILL)\n",
                      1);
    assert_int_equal(code, 128 + 9);
    assert_string_equal(outcome_of_the_bundle(), "running");
}

/* Under gmp-run, the same: a caught failure, then a kill -9 of its own.
 * Two bundles, neither an out-of-memory death: the failure's says the
 * process survived it and was killed later, naming the kill's bundle; the
 * kill's is a SIGKILL with nothing tying it to memory.  triage passes. */
static void test_killed_later_said_in_the_failure_bundle(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    char script[4096];
    snprintf(script, sizeof script,
             "export GMP_WATCHDOG=0 GMP_OOM_POLICY=first LD_PRELOAD=\"%s\"; "
             "\"%s/gmp-run\" -- python3 -c 'import os, signal\n" CAUGHT
             "os.kill(os.getpid(), signal.SIGKILL)\n'",
             paths.preload, paths.build);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     128 + 9);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    assert_int_equal(inspect("triage", paths.dumps), 0);
    if (!strstr(out, "0 out-of-memory death(s), ") ||
        !strstr(out, "1 killed or crashed with no sign of memory, 1 failure(s) survived"))
        fail_msg("triage:\n%s", out);
    /* the failure's bundle, the one with the Python line, names the other */
    show_the_survived();
    const char *headline = "\nWhat happened:    the process survived: an allocation of host "
                           "memory failed (ENOMEM), and it went on; killed by SIGKILL later; "
                           "its death is written up in oom_dump_";
    if (!strstr(out, headline))
        fail_msg("the failure's bundle does not say it was killed later:\n%s", out);
}

/* A failure caught in one function, then another, uncaught, in the next:
 * two bundles, each with its own outcome.  The first says the process went
 * on from it and names the bundle of the death; the second, at its own
 * line, is the death (exited 1).  triage: one death, one survived. */
static void test_caught_then_fatal_each_its_own(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    assert_int_equal(python("def probe():\n"
                            "    try:\n"
                            "        bytearray(1 << 46)\n"
                            "    except MemoryError:\n"
                            "        print(\"caught\")\n"
                            "def main():\n"
                            "    bytearray(1 << 47)\n"
                            "probe()\n"
                            "main()\n",
                            0),
                     1);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    assert_int_equal(inspect("triage", paths.dumps), 3);
    if (!strstr(out, " 1 out-of-memory death(s), ") || !strstr(out, ", 1 failure(s) survived") ||
        !strstr(out, "  ENOMEM  at <string>:7 in main\n") ||
        !strstr(out, "  ENOMEM  at <string>:3 in probe\n"))
        fail_msg("triage does not tell the death from the failure survived:\n%s", out);
    show_the_survived();
    if (!strstr(out, "\nWhat happened:    the process survived: an allocation of host memory "
                     "failed (ENOMEM), and it went on; exited 1 later, of another failure "
                     "written up in oom_dump_") ||
        !strstr(out, "(another_failure)"))
        fail_msg("the caught failure's bundle does not say the process went on:\n%s", out);
}

/* The same request failing again at the same line (a loop that retries
 * it) is one failure: one bundle, the process's death. */
static void test_retries_of_one_request_are_one(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    assert_int_equal(python("for _ in range(3):\n"
                            "    try:\n"
                            "        bytearray(1 << 46)\n"
                            "    except MemoryError:\n"
                            "        pass\n"
                            "raise SystemExit(1)\n",
                            0),
                     1);
    assert_string_equal(outcome_of_the_bundle(), "exited 1");
}

/* A pool stops its worker with SIGTERM while the worker's exit writes up
 * the failure it went on from (multiprocessing's Pool does at its end).
 * strace holds each mkdirat for 0.6 s, so the bundle takes a second or
 * more to write, and the parent's SIGTERM comes 0.3 s into it.  The bundle
 * is finished all the same: the writing thread holds such signals back,
 * and a handler on another thread waits for it.  One bundle, whole, of the
 * failed request; before, the worker died with it half written under its
 * hidden name, and nothing was left. */
static void test_stop_sent_while_its_bundle_is_written(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    char script[4096];
    snprintf(script, sizeof script,
             "py=$(python3 -c 'import sys; print(sys.executable)') && "
             "GMP_WATCHDOG=0 strace -f -qq -o /dev/null -e trace=mkdirat "
             "-e inject=mkdirat:delay_exit=600000 env LD_PRELOAD=\"%s\" \"$py\" -c '"
             "import os, signal, sys, time\n"
             "r, w = os.pipe()\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    try:\n"
             "        bytearray(1 << 46)\n"
             "    except MemoryError:\n"
             "        os.write(w, b\"x\")\n"
             "    sys.exit(0)\n"
             "os.read(r, 1)\n"
             "time.sleep(0.3)\n"
             "os.kill(pid, signal.SIGTERM)\n"
             "print(\"worker\", os.waitpid(pid, 0)[1])\n'",
             paths.preload);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     0);
    /* it ends as it ended: by the SIGTERM, or by its exit if that came first */
    if (strcmp(out, "worker 0\n") && strcmp(out, "worker 15\n"))
        fail_msg("the worker: %s; stderr: %s", out, err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "ENOMEM");
    assert_true(json_int(json_object_get(md, "failed_request"), "size") >= 1ll << 46);
    json_decref(md);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "outcome");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caught_memory_error_survived),
        cmocka_unit_test(test_uncaught_memory_error_died),
        cmocka_unit_test(test_written_while_running_then_rewritten),
        cmocka_unit_test(test_forked_child_does_not_speak_for_its_parent),
        cmocka_unit_test(test_killed_later_said_in_the_failure_bundle),
        cmocka_unit_test(test_caught_then_fatal_each_its_own),
        cmocka_unit_test(test_retries_of_one_request_are_one),
        cmocka_unit_test(test_stop_sent_while_its_bundle_is_written),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
