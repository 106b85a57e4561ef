/*
 * test_trust.c — what another user, or the author of a ring, may not
 * decide.  A run directory must be the caller's and closed to others for
 * every reader (recover, watch), as the preload wants it; a ring the caller
 * does not own never chooses where its bundle goes nor what retention
 * removes; a path named inside a ring is never a FIFO that hangs the reader.
 * The cases that need another owner run as root (chown to nobody) and skip
 * with a line otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ring.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534

static preload_paths paths;
static char program[1200];
static char out[1 << 16], err[1 << 16];

/* SCRIPT under sh, the preload exported to what it starts. */
static int run_preloaded(const char *script)
{
    char full[8192];
    snprintf(full, sizeof full, "ulimit -c 0; export LD_PRELOAD=\"%s\"; %s", paths.preload,
             script);
    return run_script(&paths, full, out, sizeof out, err, sizeof err);
}

static int run_bare(const char *script)
{
    char full[8192];
    snprintf(full, sizeof full, "unset LD_PRELOAD; %s", script);
    return run_script(&paths, full, out, sizeof out, err, sizeof err);
}

/* The one ring in the run directory, its path in out_path. */
static void only_ring(char *out_path, size_t cap)
{
    DIR *d = opendir(paths.rundir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "ring_", 5) && n++ == 0)
            snprintf(out_path, cap, "%s/%s", paths.rundir, e->d_name);
    closedir(d);
    if (n != 1)
        fail_msg("%d rings in %s", n, paths.rundir);
}

/* A run directory open to others, a symlink to a good one (named with a
 * trailing slash, which would follow it), and, as root, one owned by
 * someone else: recover and watch refuse each, with one line and exit 1. */
static void test_run_dir_not_ours_is_refused(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "d='%s/open'; mkdir -p \"$d\"; chmod 0755 \"$d\"; "
             "%s recover \"$d\"; echo \"recover $?\"; "
             "GMP_RUN_DIR=\"$d\" %s watch 1 --once; echo \"watch $?\"; "
             "ln -sfn '%s' '%s/link'; %s recover '%s/link/'; echo \"link $?\"",
             paths.scratch, inspect_path(), inspect_path(), paths.rundir, paths.scratch,
             inspect_path(), paths.scratch);
    run_bare(script);
    if (!strstr(out, "recover 1\n") || !strstr(out, "watch 1\n") || !strstr(out, "link 1\n") ||
        count_lines(err) != 3 || !strstr(err, "open to group or others") ||
        !strstr(err, "symbolic link"))
        fail_msg("out: %s\nstderr: %s", out, err);

    if (geteuid() != 0) {
        print_message("[     SKIP ] a run directory of another owner: needs root to chown\n");
        return;
    }
    /* someone else made it first and planted a ring naming our dump
     * directory with max_dumps=1: the ring is not even read */
    snprintf(script, sizeof script,
             "d='%s/theirs'; mkdir -p \"$d\"; chmod 0700 \"$d\"; "
             "GMP_RUN_DIR=\"$d\" GMP_MAX_DUMPS=1 LD_PRELOAD='%s' %s hold-die KILL; "
             "chown -R %d \"$d\"; %s recover \"$d\"; echo \"recover $?\"; ls \"$d\" | wc -l",
             paths.scratch, paths.preload, program, NOBODY, inspect_path());
    run_bare(script);
    if (strcmp(out, "recover 1\n1\n") || !strstr(err, "belongs to another user") ||
        count_prefixed(paths.dumps, "oom_dump_") != 0)
        fail_msg("out: %s\nstderr: %s", out, err);
}

/* A ring that another user owns, in our run directory, names our dump
 * directory and max_dumps=1: its bundle goes to ./oom_dumps under our
 * limits, and our three bundles stay. */
static void test_foreign_ring_chooses_nothing(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("[     SKIP ] a ring of another owner: needs root to chown\n");
        return;
    }
    char script[4096], ring[1024], ours[600], here[600];
    snprintf(ours, sizeof ours, "%s/ours", paths.scratch);
    snprintf(here, sizeof here, "%s/cwd/oom_dumps", paths.scratch);
    snprintf(script, sizeof script,
             "export GMP_DUMP_DIR='%s'; for i in 1 2 3; do %s hold-fail 1 >/dev/null; done; "
             "GMP_MAX_DUMPS=1 %s hold-die KILL",
             ours, program, program);
    run_preloaded(script);
    assert_int_equal(count_prefixed(ours, "oom_dump_"), 3);
    only_ring(ring, sizeof ring);
    assert_int_equal(chown(ring, NOBODY, NOBODY), 0);
    snprintf(script, sizeof script, "mkdir -p '%s/cwd' && cd '%s/cwd' && %s recover '%s'",
             paths.scratch, paths.scratch, inspect_path(), paths.rundir);
    run_bare(script);
    if (!strstr(out, "bundle: ") || !strstr(out, here) || count_prefixed(ours, "oom_dump_") != 3 ||
        count_prefixed(here, "oom_dump_") != 1 || count_prefixed(paths.rundir, "ring_") != 0)
        fail_msg("out: %s\nstderr: %s\n%d bundle(s) of ours", out, err,
                 count_prefixed(ours, "oom_dump_"));
}

/* The ring of a process killed by SIGKILL names a FIFO as its cgroup's OOM
 * file: recover writes the bundle without opening it, and never hangs. */
static void test_fifo_named_by_a_ring_does_not_hang(void **state)
{
    (void)state;
    char script[4096], ring[1024], fifo[600];
    snprintf(script, sizeof script, "%s hold-die KILL", program);
    run_preloaded(script);
    only_ring(ring, sizeof ring);
    snprintf(fifo, sizeof fifo, "%s/fifo", paths.scratch);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char names[2][sizeof fifo + 64] = {{0}};
    snprintf(names[0], sizeof names[0], "%s", fifo);
    /* named as a cgroup's file would be, and out of /sys/fs/cgroup by ".." */
    snprintf(fifo, sizeof fifo, "%s/memory.events", paths.scratch);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(names[1], sizeof names[1], "/sys/fs/cgroup/x/../../..%s", fifo);
    for (int i = 0; i < 2; i++) {
        if (i) {
            snprintf(script, sizeof script, "%s hold-die KILL", program);
            run_preloaded(script);
            only_ring(ring, sizeof ring);
        }
        int fd = open(ring, O_WRONLY);
        assert_true(fd >= 0);
        char field[sizeof ((gmp_ring_header *)0)->cgroup_oom_file] = {0};
        assert_true(strlen(names[i]) < sizeof field);
        memcpy(field, names[i], strlen(names[i]));
        assert_int_equal(pwrite(fd, field, sizeof field,
                                offsetof(gmp_ring_header, cgroup_oom_file)),
                         (ssize_t)sizeof field);
        close(fd);
        snprintf(script, sizeof script, "timeout 20 %s recover '%s'; echo \"status $?\"",
                 inspect_path(), paths.rundir);
        run_bare(script);
        if (!strstr(out, "bundle: ") || !strstr(out, "status 0\n"))
            fail_msg("%s: out: %s\nstderr: %s", names[i], out, err);
    }
}

static int empty_dirs(void **state)
{
    (void)state;
    char script[1200];
    snprintf(script, sizeof script, "rm -rf '%s'/ring_* '%s/cwd' '%s/ours'", paths.rundir,
             paths.scratch, paths.scratch);
    return system(script) == 0 ? 0 : -1;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "trust");
    snprintf(program, sizeof program, "%s/test/programs/host_oom", paths.build);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_run_dir_not_ours_is_refused, empty_dirs),
        cmocka_unit_test_setup(test_foreign_ring_chooses_nothing, empty_dirs),
        cmocka_unit_test_setup(test_fifo_named_by_a_ring_does_not_hang, empty_dirs),
    };
    return cmocka_run_group_tests_name("trust", tests, setup, preload_paths_teardown);
}
