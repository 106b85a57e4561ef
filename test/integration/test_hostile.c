/*
 * test_hostile.c — the preload in hostile environments.  In each
 * the program's output and exit status are what they are without the
 * preload, we say at most one line on stderr, no partial bundle is ever
 * visible, and nothing outside the dump directory is touched:
 *   - a dump directory that cannot be made (under a regular file);
 *   - the same, and a dump directory that is a symlink or another user's,
 *     with a home of the user's own: the bundle goes to $HOME/oom_dumps,
 *     one more line says so (a program that dies and is recovered too);
 *   - a full file system (a small tmpfs, where this test may mount one);
 *   - a symlink planted at the dump directory, and at the temporary names
 *     the next bundles would take;
 *   - `ulimit -n 16`;
 *   - a program whose data file took fd 2, and one halfway through a line
 *     on stderr when it fails: no line of ours in either;
 *   - garbage (huge, negative, non-numeric, 60 KiB long: exec passes no
 *     longer) in every GMP_ variable, and invalid GMP_METADATA;
 *   - a set-user-ID root copy of a program, run by another user: nothing
 *     recorded at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16], base_out[1 << 16];
static int base_status;

/* PROGRAM ARGS as the test runs it without the preload. */
static void baseline(const char *program)
{
    char script[4096];
    snprintf(script, sizeof script, "exec %s", program);
    base_status = exit_code_of(run_script(&paths, script, base_out, sizeof base_out, err,
                                          sizeof err));
    assert_string_equal(err, "");
}

/* setup (shell) then PROGRAM under the preload: same output and status,
 * at most max_lines stderr lines. */
static void same_under_preload_said(const char *setup_sh, const char *program, int max_lines)
{
    char script[8192];
    snprintf(script, sizeof script, "%s export LD_PRELOAD='%s'; exec %s", setup_sh,
             paths.preload, program);
    int status = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    assert_string_equal(out, base_out);
    assert_int_equal(status, base_status);
    if (count_lines(err) > max_lines)
        fail_msg("more than %d line(s) on stderr:\n%s", max_lines, err);
}

static void same_under_preload(const char *setup_sh, const char *program)
{
    same_under_preload_said(setup_sh, program, 1);
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static char oom_program[1200];

static void test_dump_directory_cannot_be_made(void **state)
{
    (void)state;
    char setup_sh[2048];
    snprintf(setup_sh, sizeof setup_sh,
             "echo x > '%s/plainfile'; export GMP_DUMP_DIR='%s/plainfile/dumps';",
             paths.scratch, paths.scratch);
    same_under_preload(setup_sh, oom_program);
    if (!strstr(err, "cannot create dump directory") || count_lines(err) != 1)
        fail_msg("stderr: %s", err);
}

static void test_full_file_system(void **state)
{
    (void)state;
    char mnt[600];
    snprintf(mnt, sizeof mnt, "%s/small", paths.scratch);
    mkdir(mnt, 0700);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=128k,mode=0700") != 0) {
        print_message("SKIP: cannot mount a small tmpfs here (not root?)\n");
        skip();
    }
    char setup_sh[2048];
    snprintf(setup_sh, sizeof setup_sh,
             "mkdir '%s/dumps' && dd if=/dev/zero of='%s/filler' bs=4k 2>/dev/null; "
             "export GMP_DUMP_DIR='%s/dumps';",
             mnt, mnt, mnt);
    same_under_preload(setup_sh, oom_program);
    char dumps[700];
    snprintf(dumps, sizeof dumps, "%s/dumps", mnt);
    int left = entries(dumps);
    if (count_lines(err) != 1 || !strstr(err, "cannot write a bundle") || left != 0)
        fail_msg("stderr: %s; %d entries left in the dump directory", err, left);
    assert_int_equal(entries(mnt), 2); /* dumps and filler: nothing else */
    umount2(mnt, MNT_DETACH);
}

static void test_symlink_at_dump_directory(void **state)
{
    (void)state;
    char setup_sh[2048], victim[600];
    snprintf(victim, sizeof victim, "%s/victim", paths.scratch);
    mkdir(victim, 0700);
    snprintf(setup_sh, sizeof setup_sh,
             "rm -f '%s/link'; ln -s '%s' '%s/link'; export GMP_DUMP_DIR='%s/link';",
             paths.scratch, victim, paths.scratch, paths.scratch);
    same_under_preload(setup_sh, oom_program);
    if (!strstr(err, "symbolic link") || count_lines(err) != 1)
        fail_msg("stderr: %s", err);
    assert_int_equal(entries(victim), 0);
}

/* The dump directory cannot be had, the user has a home: the bundle goes to
 * $HOME/oom_dumps, kept there under the retention rules, and a line says
 * so; nothing is written where the refused path points. */
static void test_dump_directory_falls_back_home(void **state)
{
    (void)state;
    char home_dumps[700], victim[600], setup_sh[4096], want[1200];
    snprintf(home_dumps, sizeof home_dumps, "%s/home/oom_dumps", paths.scratch);
    snprintf(victim, sizeof victim, "%s/victim3", paths.scratch);
    mkdir(victim, 0700);
    const char *configured[] = {"plainfile/dumps", "link3", "theirs"};
    for (size_t i = 0; i < 3; i++) {
        if (i == 2 && geteuid() != 0) {
            print_message("SKIP: a dump directory of another owner needs root to make\n");
            break;
        }
        snprintf(setup_sh, sizeof setup_sh,
                 "cd '%s' && echo x > plainfile && rm -rf home link3 theirs && mkdir -m 0700 home && "
                 "ln -s '%s' link3 && mkdir -m 0700 theirs && chown 65534 theirs && "
                 "export GMP_DUMP_DIR=\"$PWD/%s\" GMP_MAX_DUMPS=1;",
                 paths.scratch, victim, configured[i]);
        for (int run = 0; run < 2; run++) /* the second's retention: one bundle left */
            same_under_preload_said(setup_sh, oom_program, 2);
        snprintf(want, sizeof want, "; bundles go to %s instead", home_dumps);
        if (count_lines(err) != 2 || !strstr(err, want) || !strstr(err, configured[i]) ||
            count_prefixed(home_dumps, "oom_dump_") != 1)
            fail_msg("GMP_DUMP_DIR=%s: %d bundle(s) in %s; stderr: %s", configured[i],
                     count_prefixed(home_dumps, "oom_dump_"), home_dumps, err);
        assert_int_equal(entries(victim), 0);
    }
    /* a process that failed, went on, and was killed: recover writes the
     * death in the same fallback and says in the failure's bundle there
     * that the process ended, naming the death's */
    char script[8192];
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf home && mkdir -m 0700 home && "
             "export GMP_DUMP_DIR=\"$PWD/link3\" GMP_OOM_POLICY=first; "
             "LD_PRELOAD='%s' %s/test/programs/host_oom fail-sleep >/dev/null 2>&1 & p=$!; "
             "for i in $(seq 100); do ls '%s' 2>/dev/null | grep -q ^oom_dump_ && break; "
             "sleep 0.05; done; kill -9 $p; wait $p; "
             "%s recover >/dev/null; echo \"recover $?\"; "
             "echo \"ended $(cat '%s'/*/metadata.json | grep -c '\"death_bundle\":')\"; "
             "%s list >/dev/null; echo \"list $?\"",
             paths.scratch, paths.preload, paths.build, home_dumps, inspect_path(), home_dumps,
             inspect_path());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    if (strcmp(out, "recover 0\nended 1\nlist 0\n") ||
        count_prefixed(home_dumps, "oom_dump_") != 2)
        fail_msg("recovered: %s; %d bundle(s); stderr: %s", out,
                 count_prefixed(home_dumps, "oom_dump_"), err);
    assert_int_equal(entries(victim), 0);
    /* the default listing (of the refused directory: none there) counts them */
    snprintf(want, sizeof want, "gmp-inspect list: 2 more bundle(s) in %s, where", home_dumps);
    if (!strstr(err, want))
        fail_msg("list without DIR does not count the fallback's bundles: %s", err);
}

/* Symlinks at the temporary names of the next bundles (this second and the
 * next three, seq 1 to 3, the pid the program will have): none followed,
 * the bundle written under another name. */
static void test_symlink_at_temporary_names(void **state)
{
    (void)state;
    char setup_sh[4096], victim[600];
    snprintf(victim, sizeof victim, "%s/victim2", paths.scratch);
    mkdir(victim, 0700);
    snprintf(setup_sh, sizeof setup_sh,
             "export GMP_DUMP_DIR='%s'; mkdir -p \"$GMP_DUMP_DIR\"; now=$(date +%%s); "
             "for s in 0 1 2 3; do "
             "t=$(date -u -d @$((now+s)) +%%Y%%m%%dT%%H%%M%%SZ); for q in 1 2 3; do "
             "ln -s '%s' \"$GMP_DUMP_DIR/.tmp_oom_dump_${t}_$$_cpu_$q\"; done; done;",
             paths.dumps, victim);
    same_under_preload(setup_sh, oom_program);
    assert_int_equal(entries(victim), 0);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 1);
    json_t *m = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
    json_decref(m);
    if (count_lines(err) != 1 || !strstr(err, "bundle: "))
        fail_msg("stderr: %s", err);
}

static void test_sixteen_file_descriptors(void **state)
{
    (void)state;
    same_under_preload("ulimit -n 16;", oom_program);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 1);
    json_t *m = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
    json_decref(m);
}

/* A program that closed stderr and opened its data file, which took fd 2,
 * then caught a failed allocation: its data holds no word of ours (the
 * line would go to the stderr the process started with, which is gone),
 * and the bundle is written all the same. */
static void test_no_line_in_a_file_that_took_fd_2(void **state)
{
    (void)state;
    char program[2048], data[600], text[256] = "";
    snprintf(data, sizeof data, "%s/data", paths.scratch);
    snprintf(program, sizeof program, "%s/test/programs/host_oom stderr-taken '%s'", paths.build,
             data);
    char script[4800];
    snprintf(script, sizeof script, "export LD_PRELOAD='%s'; exec %s", paths.preload, program);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     0);
    FILE *f = fopen(data, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_string_equal(text, "data\nmore data\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 1);
}

/* A program halfway through a line on stderr when its allocation fails:
 * a line of ours is never spliced into it (the program's line is what it
 * wrote, byte for byte); ours comes once the program's line has ended,
 * and the bundle is written. */
static void test_no_line_spliced_into_the_programs(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script, "export LD_PRELOAD='%s'; exec %s/test/programs/host_oom mid-line",
             paths.preload, paths.build);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     0);
    static const char theirs[] = "\"\"\"\"\"\"\n", ours[] = "gpumemprof: OOM on host (malloc ";
    const char *after = err + sizeof theirs - 1;
    if (strncmp(err, theirs, sizeof theirs - 1) || strncmp(after, ours, sizeof ours - 1) ||
        strchr(after, '\n') != err + strlen(err) - 1)
        fail_msg("stderr: %s", err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 1);
}

/* Garbage in every variable: the program as ever, one line naming them. */
static void test_garbage_in_every_variable(void **state)
{
    (void)state;
    static const char *const vars[] = {
        "GMP_ENABLED", "GMP_DUMP_DIR", "GMP_RUN_DIR", "GMP_BUFFER_SIZE", "GMP_MAX_DUMPS",
        "GMP_MAX_TOTAL_MB", "GMP_CONTEXT", "GMP_METADATA", "GMP_HOST_EVENT_MIN_BYTES",
        "GMP_OOM_CONFIRM_MS", "GMP_OOM_POLICY", "GMP_CUDA_MODE", "GMP_STACKS",
        "GMP_ON_CRASH", "GMP_WATCHDOG", "GMP_WATCHDOG_MIN_MB", "GMP_PRESSURE_PCT",
        "GMP_PROM_INTERVAL_S", "GMP_LEAK_CHECK", "GMP_SAMPLE_MS", "GMP_NVML",
    }; /* GMP_PROM_FILE: any name is a file name, written as asked */
    /* as long as a variable can be through exec (MAX_ARG_STRLEN is 128 KiB,
     * all of them together within ARG_MAX); the parser alone gets 1 MiB in
     * test_config */
    enum { LONG = 60 * 1024 };
    char *huge = malloc(LONG);
    memset(huge, '9', LONG - 1);
    huge[LONG - 1] = '\0';
    const char *garbage[] = {huge, "-5", "not-a-number", "18446744073709551616"};
    /* a plain program (python3 may be a shell shim: every process of a
     * chain reads the garbage and says so once) */
    char quiet[1200];
    snprintf(quiet, sizeof quiet, "%s/test/programs/host_oom quiet", paths.build);
    baseline(quiet);
    for (size_t g = 0; g < 4; g++) {
        for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
            setenv(vars[i], garbage[g], 1);
        same_under_preload("cd \"$(dirname \"$GMP_RUN_DIR\")\" 2>/dev/null || cd /;", quiet);
        for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
            unsetenv(vars[i]);
        if (g != 1 && (count_lines(err) != 1 || !strstr(err, "GMP_")))
            fail_msg("garbage %zu: stderr %s", g, err);
    }
    free(huge);
    /* invalid metadata beside an OOM: the bundle has the default, one warning line */
    baseline(oom_program);
    setenv("GMP_METADATA", "{\"a\": [1, 2", 1);
    char script[4096];
    snprintf(script, sizeof script, "export LD_PRELOAD='%s'; exec %s", paths.preload,
             oom_program);
    int status = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    unsetenv("GMP_METADATA");
    assert_int_equal(status, base_status);
    assert_string_equal(out, base_out);
    if (count_lines(err) != 2 || !strstr(err, "GMP_METADATA="))
        fail_msg("stderr: %s", err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_int_equal(json_object_size(json_object_get(md, "custom_metadata")), 0);
    json_decref(md);
}

/* A set-user-ID root program run by another user: secure execution, so
 * nothing at all is recorded (no bundle, no ring) and it runs as ever. */
static void test_setuid_program_records_nothing(void **state)
{
    (void)state;
    if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
        print_message("SKIP: needs root and setpriv to make and run a setuid copy\n");
        skip();
    }
    char dir[600], cmd[16384];
    snprintf(dir, sizeof dir, "/tmp/gmp-setuid-%d", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "rm -rf %s && mkdir -m 0755 %s && mkdir -m 0777 %s/dumps %s/run && "
             "cp %s/test/programs/host_oom %s/host_oom && chmod 4755 %s/host_oom && "
             "cp /usr/bin/id %s/id && chmod 4755 %s/id && cd %s && "
             "if [ \"$(setpriv --reuid=65534 --regid=65534 --clear-groups ./id -u)\" != 0 ]; then "
             "echo nosuid; exit 0; fi; "
             "setpriv --reuid=65534 --regid=65534 --clear-groups env "
             "LD_PRELOAD='%s' GMP_DUMP_DIR=%s/dumps GMP_RUN_DIR=%s/run ./host_oom fail-twice; "
             "echo status $?",
             dir, dir, dir, dir, paths.build, dir, dir, dir, dir, dir, paths.preload, dir, dir);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    char dumps[700], run[700];
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    int left = entries(dumps) + entries(run);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    const char *rm[] = {"/bin/sh", "-c", cmd, NULL};
    char o[256], e[256];
    run_capture(rm, o, sizeof o, e, sizeof e);
    if (!strcmp(out, "nosuid\n")) {
        print_message("SKIP: the set-user-ID bit has no effect here (a nosuid mount?)\n");
        skip();
    }
    if (strcmp(out, "status 0\n"))
        fail_msg("out: %s err: %s", out, err);
    if (left)
        fail_msg("a setuid program left %d files; stderr %s", left, err);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "hostile");
    snprintf(oom_program, sizeof oom_program, "%s/test/programs/host_oom fail-twice",
             paths.build);
    baseline(oom_program);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump_directory_cannot_be_made),
        cmocka_unit_test(test_full_file_system),
        cmocka_unit_test(test_symlink_at_dump_directory),
        cmocka_unit_test(test_symlink_at_temporary_names),
        cmocka_unit_test(test_dump_directory_falls_back_home),
        cmocka_unit_test(test_sixteen_file_descriptors),
        cmocka_unit_test(test_no_line_in_a_file_that_took_fd_2),
        cmocka_unit_test(test_no_line_spliced_into_the_programs),
        cmocka_unit_test(test_garbage_in_every_variable),
        cmocka_unit_test(test_setuid_program_records_nothing),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
