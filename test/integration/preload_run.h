/*
 * preload_run.h — what test_preload.c and test_setups.c share: the
 * preload's paths, host_oom (test/programs/host_oom.c) as the program, a
 * shell script run under the preload with its output kept, and the checks
 * of a bundle's count and of our one stderr line.  Each test file has its
 * own copy of this state (every name here is static).
 */
#ifndef GMP_TEST_PRELOAD_RUN_H
#define GMP_TEST_PRELOAD_RUN_H

#include "support.h"

#include <stdio.h>
#include <string.h>

static preload_paths paths;
static char program[1200];
static char out[1 << 16], err[1 << 16];
static int status;

/* Run `sh -c SCRIPT` with the preload's variables set; extra: "VAR=V ..." */
static __attribute__((unused)) void run_sh(const char *extra_env, const char *script)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "export GMP_WATCHDOG=0 %s; " /* the watchdog has its own tests */
             "export LD_PRELOAD=\"%s${LD_PRELOAD_AFTER:+ $LD_PRELOAD_AFTER}\"; %s",
             extra_env ? extra_env : "", paths.preload, script);
    status = run_script(&paths, cmd, out, sizeof out, err, sizeof err);
}

static __attribute__((unused)) int exit_code(void)
{
    return exit_code_of(status);
}

static __attribute__((unused)) int bundle_count(void)
{
    return count_prefixed(paths.dumps, "oom_dump_");
}

/* Exactly one stderr line of ours, of the documented shape. */
static __attribute__((unused)) void assert_one_oom_line(const char *where)
{
    int ours = 0;
    for (const char *p = err; (p = strstr(p, "gpumemprof: ")); p++)
        ours++;
    if (ours != 1)
        fail_msg("want one gpumemprof line, got %d: %s", ours, err);
    char want[128];
    snprintf(want, sizeof want, "gpumemprof: OOM on %s (", where);
    if (!strstr(err, want) || !strstr(err, "); bundle: "))
        fail_msg("stderr line not of the documented shape: %s", err);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "preload");
    snprintf(program, sizeof program, "%s/test/programs/host_oom", paths.build);
    return 0;
}

#endif
