/*
 * test_install.c — `make install DESTDIR=...`: the tools, the preload, the
 * header, the library, the man pages and bash's completions land under
 * PREFIX; the man pages render without a warning; bash-completion loads
 * the completions from there; the installed gmp-run finds the installed
 * preload in ../lib and runs a command through it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char scratch[256], out[1 << 16], err[1 << 16];

static int sh(const char *cmd)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
}

static void test_install(void **state)
{
    (void)state;
    const char *build = getenv("GMP_BUILD");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "make -s install BUILD='%s' DESTDIR='%s/root' PREFIX=/opt/gmp",
             build && *build ? build : "build", scratch);
    if (sh(cmd) != 0)
        fail_msg("make install: %s", err);
    static const char *const files[] = {
        "bin/gmp-inspect", "bin/gmp-run", "lib/libgpumemprof_preload.so",
        "lib/libgpumemprof.a", "lib/libgpumemprof.so", "include/gpumemprof.h",
        "share/man/man1/gmp-inspect.1",
        "share/man/man1/gmp-run.1", "share/gpumemprof/site/sitecustomize.py",
        "share/bash-completion/completions/gmp-inspect.bash",
        "share/bash-completion/completions/gmp-run.bash"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/root/opt/gmp/%s", scratch, files[i]);
        if (access(path, R_OK) != 0)
            fail_msg("not installed: %s", path);
    }
    /* the Slurm plugin, where it was built: installed where it finds the
     * preload and gmp-inspect from itself, and the plugstack.conf line said */
    char plugin[1024];
    snprintf(plugin, sizeof plugin, "%s/spank_gmp.so", build && *build ? build : "build");
    if (access(plugin, R_OK) == 0) {
        static const char *const beside[] = {"lib/gpumemprof/spank_gmp.so",
                                             "lib/gpumemprof/../libgpumemprof_preload.so",
                                             "lib/gpumemprof/../../bin/gmp-inspect"};
        for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/root/opt/gmp/%s", scratch, beside[i]);
            if (access(path, R_OK) != 0)
                fail_msg("the Slurm plugin's %s is not there: %s", beside[i], path);
        }
        if (!strstr(out, "optional /opt/gmp/lib/gpumemprof/spank_gmp.so\n"))
            fail_msg("make install does not say the plugstack.conf line: %s", out);
    }
    /* the man pages render, with no warning from groff */
    if (sh("command -v groff") == 0) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s/root/opt/gmp/share/man/man1' && for m in gmp-inspect.1 gmp-run.1; do "
                 "groff -man -Tutf8 -ww -z $m || exit 1; done; "
                 "groff -man -Tutf8 gmp-run.1 | col -b 2>/dev/null | grep -c 'gmp-run \\[--dump-dir DIR\\]'",
                 scratch);
        assert_int_equal(sh(cmd), 0);
        assert_string_equal(err, "");
        assert_string_equal(out, "1\n");
    }
    /* bash-completion finds the completions under PREFIX by itself, and
     * they complete what the installed gmp-inspect says it takes */
    snprintf(cmd, sizeof cmd, "bash test/unit/completion_check.sh '%s' '%s/root/opt/gmp'",
             build && *build ? build : "build", scratch);
    if (sh(cmd) != 0)
        fail_msg("the installed completion: %s%s", out, err);
    /* the installed gmp-run finds the installed preload, and puts it before
     * what LD_PRELOAD already named (a sanitizer's runtime where ours is
     * built with one) */
    const char *runtime = preload_sanitizer();
    preload_sanitizer_environment();
    snprintf(cmd, sizeof cmd,
             "export LD_PRELOAD='%s'; env -u GMP_PRELOAD_LIBRARY '%s/root/opt/gmp/bin/gmp-run' "
             "-- sh -c 'echo \"$LD_PRELOAD\"'",
             runtime ? runtime : "", scratch);
    assert_int_equal(sh(cmd), 0);
    char want[2048];
    snprintf(want, sizeof want, "%s/root/opt/gmp/bin/../lib/libgpumemprof_preload.so%s%s\n",
             scratch, runtime ? " " : "", runtime ? runtime : "");
    assert_string_equal(out, want);
    /* GMP_TORCH_HISTORY=1: the installed sitecustomize first on PYTHONPATH */
    snprintf(cmd, sizeof cmd,
             "GMP_TORCH_HISTORY=1 PYTHONPATH=/elsewhere '%s/root/opt/gmp/bin/gmp-run' "
             "-- sh -c 'echo \"$PYTHONPATH\"'",
             scratch);
    assert_int_equal(sh(cmd), 0);
    snprintf(want, sizeof want, "%s/root/opt/gmp/bin/../share/gpumemprof/site:/elsewhere\n",
             scratch);
    assert_string_equal(out, want);
}

static int setup(void **state)
{
    (void)state;
    scratch_make(scratch, sizeof scratch, "install");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    scratch_remove(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_install),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
