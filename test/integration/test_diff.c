/*
 * test_diff.c — `gmp-inspect diff A B` on two runs of the CUDA double that
 * differ in device size and in PYTORCH_CUDA_ALLOC_CONF: it names the peak
 * that moved and the variable that changed, and says nothing of what did
 * not; a bundle against itself differs in nothing (exit 0, as diff(1)).
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
#include <sys/wait.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* One OOM bundle of gpu_oom_cuda until-oom under `env`, moved to dest. */
static void run_into(const char *env, const char *dest)
{
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_WATCHDOG=0 %s; %s/test/gpu/gpu_oom_cuda until-oom 0; "
             "mv \"$GMP_DUMP_DIR\"/oom_dump_* '%s'",
             paths.preload, env, paths.build, dest);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
}

static int diff(const char *a, const char *b)
{
    const char *argv[] = {inspect_path(), "diff", a, b, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_diff(void **state)
{
    (void)state;
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a", paths.scratch);
    snprintf(b, sizeof b, "%s/b", paths.scratch);
    run_into("GMP_FAKE_DEVICE_BYTES=1073741824", a);
    run_into("GMP_FAKE_DEVICE_BYTES=2147483648 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
             b);
    assert_int_equal(diff(a, b), 1);
    char peak[128], conf[128];
    snprintf(peak, sizeof peak, "%-22s %s\n", "peak cuda:0", "1.0 GiB  ->  2.0 GiB");
    snprintf(conf, sizeof conf, "%-22s %s\n", "PYTORCH_CUDA_ALLOC_CONF",
             "(unset)  ->  expandable_segments:True");
    if (!strstr(out, peak) || !strstr(out, conf) || strstr(out, "request") ||
        strstr(out, "reason"))
        fail_msg("diff said:\n%s", out);
    /* show lists the variables that shape memory */
    const char *show[] = {inspect_path(), "show", b, NULL};
    run_capture(show, out, sizeof out, err, sizeof err);
    const char *env = strstr(out, "\nEnvironment:      ");
    if (!env || !strstr(env, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"))
        fail_msg("show:\n%s", out);
    assert_int_equal(diff(a, a), 0);
    assert_string_equal(out, "no difference in reason, request, peaks or configuration\n");
    const char *argv[] = {inspect_path(), "diff", a, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    assert_int_equal(WEXITSTATUS(status), 2);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "diff");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
