/*
 * test_deaths.c — deaths that are not of memory leave nothing behind.  A
 * process that dies of a signal a user or a pipeline sends (SIGPIPE,
 * SIGINT, SIGTERM, ...), of a crash with no failed allocation, or that
 * execs into a program without the preload writes no bundle and leaves no
 * ring file, under a preloaded shell and under gmp-run alike; a crash
 * after a failed allocation is one bundle; and the rings nobody recovers
 * are bounded and reaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static preload_paths paths;
static char program[1200];
static char out[1 << 16], err[1 << 16];

/* SCRIPT run by a shell that has the preload itself, as everything it
 * starts (a shell that exports LD_PRELOAD is not preloaded: its children are). */
static void run_preloaded(const char *script)
{
    char file[1024], full[8192];
    snprintf(file, sizeof file, "%s/script.sh", paths.scratch);
    write_file(file, script, strlen(script));
    snprintf(full, sizeof full,
             "ulimit -c 0; export GMP_RUN=%s/gmp-run; export LD_PRELOAD=\"%s\"; exec sh '%s'",
             paths.build, paths.preload, file);
    run_script(&paths, full, out, sizeof out, err, sizeof err);
}

/* sh -c SCRIPT without the preload. */
static void run_bare(const char *script)
{
    char full[12288];
    snprintf(full, sizeof full, "ulimit -c 0; unset LD_PRELOAD; %s", script);
    run_script(&paths, full, out, sizeof out, err, sizeof err);
}

static int rings(void)
{
    return count_prefixed(paths.rundir, "ring_");
}

static int bundles(void)
{
    return count_prefixed(paths.dumps, "oom_dump_");
}

/* A pipeline's reader stops early: sort dies of SIGPIPE after a large
 * allocation.  Ten times: no ring stays, nothing is said. */
static void test_pipeline_sigpipe(void **state)
{
    (void)state;
    char file[1024], script[2048];
    static char bare[sizeof out];
    snprintf(file, sizeof file, "%s/pipeline.sh", paths.scratch);
    const char *pipeline = "for i in 1 2 3 4 5 6 7 8 9 10; do "
                           "bash -c 'seq 1 300000 | sort -n | head -1'; done\n";
    write_file(file, pipeline, strlen(pipeline));
    snprintf(script, sizeof script, "sh '%s'", file);
    run_bare(script);
    snprintf(bare, sizeof bare, "%s", out);
    assert_int_equal(count_lines(bare), 10);
    run_preloaded(script);
    if (strcmp(out, bare) || err[0] || rings() || bundles())
        fail_msg("preloaded: '%s', stderr '%s', %d ring(s), %d bundle(s)", out, err, rings(),
                 bundles());

    snprintf(script, sizeof script, "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- sh '%s'",
             file);
    run_preloaded(script);
    if (strcmp(out, bare) || err[0] || bundles())
        fail_msg("under gmp-run: '%s', stderr '%s', %d bundle(s)", out, err, bundles());
}

/* Each way of dying with a ring in place: the exit status is the bare
 * run's, and there is no bundle, no ring and no word, whether a preloaded
 * shell or gmp-run reaps the process. */
static void test_signals_and_plain_crashes_leave_nothing(void **state)
{
    (void)state;
    static const char *const hows[] = {"PIPE", "INT",  "TERM", "HUP", "QUIT",
                                       "ALRM", "USR1", "USR2", "segv", "ABRT"};
    for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
        char script[4096];
        static char bare[sizeof out], bare_err[sizeof err];
        snprintf(script, sizeof script, "%s hold-die %s; echo \"status $?\"", program, hows[i]);
        run_bare(script);
        snprintf(bare, sizeof bare, "%s", out);
        snprintf(bare_err, sizeof bare_err, "%s", err); /* the shell's "Terminated" */
        run_preloaded(script);
        if (strcmp(out, bare) || strcmp(err, bare_err) || rings() || bundles())
            fail_msg("%s under a preloaded shell: %s (bare %s), stderr '%s', %d ring(s), "
                     "%d bundle(s)", hows[i], out, bare, err, rings(), bundles());
        snprintf(script, sizeof script,
                 "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- %s hold-die %s; echo \"status $?\"",
                 program, hows[i]);
        run_preloaded(script);
        if (strcmp(out, bare) || strstr(err, "gmp-run") || strstr(err, "gpumemprof") ||
            bundles())
            fail_msg("%s under gmp-run: %s (bare %s), stderr '%s', %d bundle(s)", hows[i], out,
                     bare, err, bundles());
    }
}

/* The same deaths with nobody preloaded to reap the process (its parent is
 * a plain shell, as slurmstepd, a container's runtime or a scheduler is):
 * a stop (SIGTERM, Ctrl-C, a closed pipe, ...) or a crash no failed
 * allocation came before takes the ring with it, so recover finds nothing;
 * the exit status is the bare run's. */
static void test_unreaped_deaths_leave_nothing(void **state)
{
    (void)state;
    static const char *const stops[] = {"PIPE", "INT",  "TERM", "HUP",  "QUIT",
                                        "ALRM", "USR1", "USR2", "segv", "ABRT"};
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        char script[4096];
        static char bare[sizeof out];
        snprintf(script, sizeof script, "%s hold-die %s; echo \"status $?\"", program, stops[i]);
        run_bare(script);
        snprintf(bare, sizeof bare, "%s", out);
        snprintf(script, sizeof script,
                 "LD_PRELOAD='%s' %s hold-die %s; echo \"status $?\"; %s recover \"$GMP_RUN_DIR\"",
                 paths.preload, program, stops[i], inspect_path());
        run_bare(script);
        if (strncmp(out, bare, strlen(bare)) || !strstr(out, "no ring of a dead process") ||
            rings() || bundles())
            fail_msg("%s: %s (bare %s), %d ring(s), %d bundle(s)", stops[i], out, bare, rings(),
                     bundles());
    }

}

/* What the program sees of the signals it never touched, once the preload
 * has a ring (and its handlers): the default action, always; what it sets
 * is what it gets back; the default it restores still takes the ring away
 * when the signal comes. */
static void test_dispositions_are_the_programs(void **state)
{
    (void)state;
    char script[4096];
    /* the program's dispositions start from this process's: a test run under
     * nohup would hand it SIGHUP ignored, which no shell between may undo */
    signal(SIGHUP, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    snprintf(script, sizeof script,
             "LD_PRELOAD='%s' %s dispositions; echo \"status $?\"; ls \"$GMP_RUN_DIR\" | wc -l",
             paths.preload, program);
    run_bare(script);
    assert_string_equal(out, "TERM dfl signal-was-dfl mine old-mine dfl signal-was-dfl\n"
                             "HUP dfl signal-was-dfl mine old-mine dfl signal-was-dfl\n"
                             "status 143\n0\n");
    assert_int_equal(bundles(), 0);
    /* Python's view: the default, and a handler set and restored by what
     * getsignal said (None there would make signal.signal raise) */
    snprintf(script, sizeof script,
             "LD_PRELOAD='%s' python3 -c 'import signal, os\n"
             "held = bytearray(64 << 20)\n"
             "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):\n"
             "    was = signal.getsignal(s)\n"
             "    signal.signal(s, lambda *a: None)\n"
             "    signal.signal(s, was)\n"
             "    print(s.name, was == signal.SIG_DFL)\n"
             "os.kill(os.getpid(), signal.SIGTERM)\n'; echo \"status $?\"; "
             "ls \"$GMP_RUN_DIR\" | wc -l",
             paths.preload);
    run_bare(script);
    assert_string_equal(out, "SIGTERM True\nSIGHUP True\nSIGUSR1 True\nstatus 143\n0\n");
}

/* A crash after a failed allocation: the process writes its bundle, and
 * that is the only one (gmp-run finds no ring to write another from). */
static void test_crash_after_failure_is_one_bundle(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- %s/test/programs/naive_malloc "
             "1152921504606846976; echo \"status $?\"",
             paths.build);
    run_preloaded(script);
    assert_string_equal(out, "status 139\n");
    assert_int_equal(bundles(), 1);
    if (strstr(err, "gmp-run") || count_lines(err) != 1 ||
        !strstr(err, "gpumemprof: SIGSEGV after failed allocation"))
        fail_msg("stderr: %s", err);
}

/* An exec into a program without the preload is no death: the ring says
 * so.  Nobody preloaded reaps it here, or a preloaded shell sees it exit
 * (an exit costs a shell no look at the run directory): recover drops the
 * ring without a bundle, and so does the next process that makes a ring;
 * gmp-run, which reaps every process, leaves nothing. */
static void test_exec_is_not_a_death(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "LD_PRELOAD='%s' %s hold-die exec-clean; echo \"status $?\"; "
             "ls \"$GMP_RUN_DIR\" | wc -l; %s recover \"$GMP_RUN_DIR\"; "
             "ls \"$GMP_RUN_DIR\" | wc -l",
             paths.preload, program, inspect_path());
    run_bare(script);
    if (strncmp(out, "status 3\n1\n", 11) || !strstr(out, "no ring of a dead process") ||
        strcmp(out + strlen(out) - 2, "0\n"))
        fail_msg("out: %s", out);
    assert_int_equal(bundles(), 0);

    snprintf(script, sizeof script,
             "%s hold-die exec-clean; echo \"status $?\"; %s hold-die none; "
             "ls \"$GMP_RUN_DIR\" | wc -l",
             program, program);
    run_preloaded(script);
    if (strcmp(out, "status 3\n0\n") || err[0] || bundles())
        fail_msg("under a preloaded shell: %s, stderr '%s', %d bundle(s)", out, err, bundles());

    snprintf(script, sizeof script,
             "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- %s hold-die exec-clean; "
             "echo \"status $?\"",
             program);
    run_preloaded(script);
    if (strcmp(out, "status 3\n") || err[0] || bundles() || rings())
        fail_msg("under gmp-run: %s, stderr '%s', %d bundle(s)", out, err, bundles());
}

/* Rings of dead processes nobody recovers: a process that makes its ring
 * reaps the oldest beyond 64, and those last written more than a day ago. */
static void test_dead_rings_are_bounded(void **state)
{
    (void)state;
    char script[4096];
    /* 70 processes killed by SIGKILL: each ring may be an OOM kill's, so
     * each is kept, up to 64 (the 70th's ring was made before it died) */
    snprintf(script, sizeof script,
             "for i in $(seq 70); do %s hold-die KILL; done; cd \"$GMP_RUN_DIR\"; "
             "ls | wc -l; ls -t | tail -1 > ../oldest",
             program);
    run_preloaded(script);
    assert_string_equal(out, "65\n");
    /* five last written two days ago go at the next ring made (a process
     * that then exits: its own ring goes with it) */
    snprintf(script, sizeof script,
             "cd \"$GMP_RUN_DIR\" && ls -t | tail -5 | xargs touch -d '2 days ago' && "
             "%s hold-die none; ls | wc -l",
             program);
    run_preloaded(script);
    assert_string_equal(out, "60\n");
}

/* Each test starts with no ring in the run directory and no bundle. */
static int empty_run_dir(void **state)
{
    (void)state;
    char script[2400];
    snprintf(script, sizeof script, "rm -f '%s'/ring_*; rm -rf '%s'/oom_dump_*", paths.rundir,
             paths.dumps);
    return system(script) == 0 ? 0 : -1;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "deaths");
    snprintf(program, sizeof program, "%s/test/programs/host_oom", paths.build);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_pipeline_sigpipe, empty_run_dir),
        cmocka_unit_test_setup(test_signals_and_plain_crashes_leave_nothing, empty_run_dir),
        cmocka_unit_test_setup(test_unreaped_deaths_leave_nothing, empty_run_dir),
        cmocka_unit_test_setup(test_dispositions_are_the_programs, empty_run_dir),
        cmocka_unit_test_setup(test_crash_after_failure_is_one_bundle, empty_run_dir),
        cmocka_unit_test_setup(test_exec_is_not_a_death, empty_run_dir),
        cmocka_unit_test_setup(test_dead_rings_are_bounded, empty_run_dir),
    };
    return cmocka_run_group_tests_name("deaths", tests, setup, preload_paths_teardown);
}
