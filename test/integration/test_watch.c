/*
 * test_watch.c — the live tools: `gmp-inspect watch --once --json` on a
 * running python3 under the preload reports its live bytes (found by its
 * pid under gmp-run too, whose job directory holds its ring), `watch` in a
 * tmux terminal refreshes its screen, and `gmp-inspect prune` applies the
 * retention rules by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "dump_request.h"
#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* A python3 under the preload holding 5 x 8 MiB for a few seconds, started
 * in the background by the script; $! is its pid.  The script goes on once
 * it holds them all (a file it makes then; at most 30 s on a loaded
 * machine), not after a guess at how long that takes. */
#define HOLDER                                                                             \
    "mkdir -p -m 700 \"$GMP_RUN_DIR\"; rm -f \"$GMP_RUN_DIR/held\"; "                        \
    "LD_PRELOAD=\"$P\" python3 -c 'import os, time\n"                                      \
    "keep = [bytearray(8 << 20) for _ in range(5)]\n"                                      \
    "open(os.environ[\"GMP_RUN_DIR\"] + \"/held\", \"w\").close()\n"                       \
    "time.sleep(%d)' & "                                                                   \
    "i=0; while [ ! -e \"$GMP_RUN_DIR/held\" ] && [ $i -lt 300 ]; do sleep 0.1; "          \
    "i=$((i + 1)); done; "

static void test_watch_once_json(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export P='%s'; " HOLDER "echo \"pid $!\"; %s watch $! --once --json; kill $!",
             paths.preload, 3, inspect_path());
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    int pid = 0;
    assert_int_equal(sscanf(out, "pid %d", &pid), 1);
    json_error_t je;
    json_t *o = json_loads(strchr(out, '\n') + 1, 0, &je);
    if (!o)
        fail_msg("not JSON: %s", out);
    assert_int_equal(json_int(o, "pid"), pid);
    assert_true(json_is_true(json_object_get(o, "alive")));
    json_t *host = json_array_get(json_object_get(o, "bytes_in_use"), 0);
    assert_string_equal(json_str(host, "where"), "host");
    long long bytes = json_int(host, "bytes");
    if (bytes < 5ll * (8 << 20) || bytes > 5ll * (8 << 20) + (64 << 20))
        fail_msg("live bytes %lld, want the 40 MiB it holds", bytes);
    assert_int_equal(json_array_size(json_object_get(o, "last_events")), 5);
    json_decref(o);
}

/* Under gmp-run, the ring lives in the job's own directory (and the
 * job's GMP_RUN_DIR names that one): watch finds the process by its pid
 * all the same. */
static void test_watch_finds_a_process_under_gmp_run(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export HELD='%s/held'; rm -f \"$HELD\"; "
             "%s/gmp-run -- python3 -c 'import os, time\n"
             "keep = [bytearray(8 << 20) for _ in range(5)]\n"
             "f = open(os.environ[\"HELD\"] + \".tmp\", \"w\")\n"
             "f.write(str(os.getpid())); f.close()\n"
             "os.rename(f.name, os.environ[\"HELD\"])\n"
             "time.sleep(3)' & "
             "i=0; while [ ! -e \"$HELD\" ] && [ $i -lt 300 ]; do sleep 0.1; "
             "i=$((i + 1)); done; child=$(cat \"$HELD\"); "
             "echo \"pid $child\"; %s watch \"$child\" --once --json; kill $child; wait",
             paths.scratch, paths.build, inspect_path());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    int pid = 0;
    assert_int_equal(sscanf(out, "pid %d", &pid), 1);
    json_error_t je;
    json_t *o = json_loads(strchr(out, '\n') + 1, 0, &je);
    if (!o)
        fail_msg("not JSON: %s%s", out, err);
    assert_int_equal(json_int(o, "pid"), pid);
    json_t *host = json_array_get(json_object_get(o, "bytes_in_use"), 0);
    if (json_int(host, "bytes") < 5ll * (8 << 20))
        fail_msg("live bytes %lld, want the 40 MiB it holds", json_int(host, "bytes"));
    json_decref(o);
}

/* --once into a pipe: plain text, not a terminal's control codes. */
static void test_watch_once_is_plain_text(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export P='%s'; " HOLDER "%s watch $! --once | cat; kill $!",
             paths.preload, 3, inspect_path());
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    if (strchr(out, '\033') || !strstr(out, "(one snapshot)") || strstr(out, "Ctrl-C"))
        fail_msg("watch --once into a pipe:\n%s", out);
    assert_non_null(strstr(out, "bytes in use"));
}

static void test_watch_refreshes_in_a_terminal(void **state)
{
    (void)state;
    if (system("command -v tmux >/dev/null 2>&1") != 0) {
        print_message("SKIP: no tmux\n");
        skip();
    }
    char script[8192];
    snprintf(script, sizeof script,
             "export P='%s'; " HOLDER
             "T=\"tmux -L gmp-watch-$$\"; "
             "$T new-session -d -x 120 -y 40 \"GMP_RUN_DIR='$GMP_RUN_DIR' %s watch $!\"; "
             /* a whole screen ends with its last events; a loaded machine
              * may need more than one look to see it */
             "whole() { i=0; while [ $i -lt 40 ]; do s=$($T capture-pane -p); "
             "case $s in *'last events:'*'  in use '*) break;; esac; sleep 0.25; "
             "i=$((i + 1)); done; printf '%%s\\n' \"$s\"; }; "
             "sleep 1.5; whole; echo '----'; sleep 1.5; whole; "
             "$T kill-server; kill $!",
             paths.preload, 15, inspect_path());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    char *second = strstr(out, "\n----\n");
    if (!second)
        fail_msg("tmux output: %s\nstderr: %s", out, err);
    *second = '\0';
    second += 6;
    int a = 0, b = 0;
    const char *ra = strstr(out, "(refresh "), *rb = strstr(second, "(refresh ");
    if (!ra || !rb || sscanf(ra, "(refresh %d", &a) != 1 || sscanf(rb, "(refresh %d", &b) != 1)
        fail_msg("no watch screen: %s / %s", out, second);
    assert_true(b > a); /* it refreshed */
    const char *host = strstr(second, "\nhost ");
    if (!host || !strstr(host, " MiB\n"))
        fail_msg("no host line in: %s", second);
    assert_non_null(strstr(second, "last events:"));
}

static void test_prune(void **state)
{
    (void)state;
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/prune", paths.scratch);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s", paths.rundir);
    cfg.max_dumps = 100;
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    gmp_dump_request req = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU};
    char path[4096];
    for (int i = 0; i < 6; i++)
        assert_non_null(gmp_dump(rec, &req, path, sizeof path));
    gmp_recorder_destroy(rec);
    const char *argv[] = {inspect_path(), "prune", cfg.dump_dir, "--max-dumps", "2", NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    assert_int_equal(WEXITSTATUS(status), 0);
    if (!strstr(out, "removed 4 bundle(s)"))
        fail_msg("prune said: %s", out);
    assert_int_equal(count_prefixed(cfg.dump_dir, "oom_dump_"), 2);
    /* the newest stays: the last one written is among the two */
    assert_int_equal(access(path, F_OK), 0);
    const char *bad[] = {inspect_path(), "prune", cfg.dump_dir, "--max-dumps", "0", NULL};
    status = run_capture(bad, out, sizeof out, err, sizeof err);
    assert_int_equal(WEXITSTATUS(status), 2);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "watch");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_once_json),
        cmocka_unit_test(test_watch_once_is_plain_text),
        cmocka_unit_test(test_watch_finds_a_process_under_gmp_run),
        cmocka_unit_test(test_watch_refreshes_in_a_terminal),
        cmocka_unit_test(test_prune),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
