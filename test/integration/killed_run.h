/*
 * killed_run.h — what test_run.c and test_oom_killer.c share: a script
 * run with gmp-run's path in $GMP_RUN, its last command's status read from
 * its output, and the checks of the one bundle a killed process leaves,
 * written afterwards from its ring.  Each test file has its own copy of
 * this state (every name here is static).
 */
#ifndef GMP_TEST_KILLED_RUN_H
#define GMP_TEST_KILLED_RUN_H

#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* python3 that holds four 8 MiB buffers (four events), then kills itself. */
#define SELF_KILL                                                                          \
    "python3 -c 'import os, signal\n"                                                      \
    "keep = [bytearray(8 << 20) for _ in range(4)]\n"                                      \
    "os.kill(os.getpid(), signal.SIGKILL)'"

/* sh -c SCRIPT; out ends with "status N" of its last command. */
static __attribute__((unused)) void run(const char *script)
{
    char full[12288];
    snprintf(full, sizeof full, "export GMP_RUN=%s/gmp-run; %s; echo \"status $?\"",
             paths.build, script);
    run_script(&paths, full, out, sizeof out, err, sizeof err);
}

static __attribute__((unused)) int ends_with_status(int code)
{
    char want[32];
    snprintf(want, sizeof want, "status %d\n", code);
    size_t n = strlen(out), w = strlen(want);
    return n >= w && !strcmp(out + n - w, want);
}

static char bundle[1024]; /* the one bundle's path, after killed_bundle */

/* The one bundle: reason, and allocation events of 8 MiB in it. */
static __attribute__((unused)) json_t *killed_bundle(const char *reason, int min_allocs)
{
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), reason);
    assert_string_equal(json_str(md, "confirmed_by"), "recovered");
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    int big = 0;
    json_array_foreach(events, i, ev) {
        big += !strcmp(json_str(ev, "event_type"), "alloc") && json_int(ev, "size") >= 8 << 20;
    }
    json_decref(events);
    if (big < min_allocs)
        fail_msg("want at least %d allocations of 8 MiB in the bundle, found %d", min_allocs, big);
    /* the machine as the recoverer sees it; the dead process's own part is gone */
    json_t *hs = json_object_get(md, "host_state");
    assert_true(json_is_null(json_object_get(hs, "process")));
    assert_string_equal(json_str(hs, "sampled_by"), "recovery");
    assert_true(json_int(json_object_get(hs, "machine"), "mem_total") > 0);
    json_t *env = bundle_file(bundle, "environment.json");
    if (!strstr(json_str(json_object_get(env, "process"), "command"), "python3"))
        fail_msg("the bundle does not name the killed command");
    json_decref(env);
    return md;
}

#endif
