/*
 * test_supervise.c — gmp-run as a supervisor in front of a job: one Ctrl-C
 * on a real terminal (a pty) is one SIGINT for the command, and a command
 * that dies of it takes gmp-run with it, as a shell expects; each signal
 * sent to gmp-run reaches the command once, and gmp-run exits with the
 * command's status; a gmp-run killed with its command (timeout -s KILL)
 * loses nothing: `gmp-inspect recover`, or the next gmp-run, writes the
 * bundle into the dump directory the process used, and no job directory
 * is left; a process that outlives its gmp-run takes the job directory
 * with it when it exits; a program built with AddressSanitizer runs under
 * gmp-run as alone.
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

/* python3 that counts the signals it catches for a while, prints them and
 * exits 3 */
#define COUNTER                                                                            \
    "python3 -c 'import signal, sys, time\n"                                               \
    "n = {}\n"                                                                             \
    "def count(s, f): n[signal.Signals(s).name] = n.get(signal.Signals(s).name, 0) + 1\n"  \
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,\n"            \
    "          signal.SIGUSR1, signal.SIGUSR2): signal.signal(s, count)\n"                 \
    "print(\"ready\", flush=True)\n"                                                       \
    "time.sleep(%s)\n"                                                                     \
    "print(\"got\", sorted(n.items()), flush=True)\n"                                      \
    "sys.exit(3)'"

/* A terminal: python3's pty runs `sh FILE` as its session's foreground
 * group, types Ctrl-C once it has said "ready", and prints what it wrote,
 * then "status N" (or "status signal N"); a snprintf format (its %% doubled). */
#define ON_A_TERMINAL                                                                      \
    "python3 -c 'import os, pty, sys, time\n"                                              \
    "pid, fd = pty.fork()\n"                                                               \
    "if pid == 0: os.execvp(\"sh\", [\"sh\", sys.argv[1]])\n"                              \
    "seen, sent = b\"\", False\n"                                                          \
    "while True:\n"                                                                        \
    "    try: d = os.read(fd, 4096)\n"                                                     \
    "    except OSError: break\n"                                                          \
    "    if not d: break\n"                                                                \
    "    seen += d\n"                                                                      \
    "    if b\"ready\" in seen and not sent:\n"                                            \
    "        time.sleep(0.3); os.write(fd, b\"\\x03\"); sent = True\n"                     \
    "_, st = os.waitpid(pid, 0)\n"                                                         \
    "print(seen.decode().replace(\"\\r\", \"\"))\n"                                        \
    "print(\"status\", os.WEXITSTATUS(st) if os.WIFEXITED(st) else \"signal %%d\" %% "     \
    "os.WTERMSIG(st))' "

/* Shell: until the counter, its stdout in file $o, has said "ready" (its
 * handlers are set); a fixed second was not enough under a sanitizer */
#define UNTIL_READY                                                                        \
    "i=0; until grep -q ready \"$o\" 2>/dev/null || [ $i -ge 600 ]; do "                   \
    "sleep 0.05; i=$((i+1)); done"

static int last_status; /* the shell's, of the last run */

static void run(const char *script)
{
    char full[16384];
    snprintf(full, sizeof full, "export GMP_RUN=%s/gmp-run GMP_INSPECT=%s SLEEPER_PID=%s/pid; %s",
             paths.build, inspect_path(), paths.scratch, script);
    last_status = run_script(&paths, full, out, sizeof out, err, sizeof err);
}

/* gmp-run and a command, as a file the terminal's sh runs. */
static void on_a_terminal(const char *command)
{
    char file[600], script[8192];
    snprintf(file, sizeof file, "%s/on_a_terminal.sh", paths.scratch);
    snprintf(script, sizeof script, "exec \"%s/gmp-run\" -- %s\n", paths.build, command);
    write_file(file, script, strlen(script));
    snprintf(script, sizeof script, ON_A_TERMINAL "'%s'", file);
    run(script);
}

/* Directories left in the run directory (job directories among them). */
static int left_in_run_dir(void)
{
    return count_prefixed(paths.rundir, "gmp-run-") + count_prefixed(paths.rundir, ".gmp-run-");
}

static void test_ctrl_c_is_one_sigint(void **state)
{
    (void)state;
    char counter[2048];
    snprintf(counter, sizeof counter, COUNTER, "1.5");
    on_a_terminal(counter);
    if (!strstr(out, "got [('SIGINT', 1)]\n") || !strstr(out, "status 3\n"))
        fail_msg("one Ctrl-C under gmp-run:\n%s\n%s", out, err);
    assert_int_equal(left_in_run_dir(), 0);
}

/* A command that dies of the Ctrl-C: gmp-run dies of it too (a shell
 * running it sees SIGINT and stops its script, as without gmp-run). */
static void test_ctrl_c_death_is_passed_on(void **state)
{
    (void)state;
    on_a_terminal("python3 -c 'import time; print(\"ready\", flush=True); time.sleep(5)'");
    if (!strstr(out, "KeyboardInterrupt") || !strstr(out, "status signal 2\n"))
        fail_msg("a Ctrl-C death under gmp-run:\n%s\n%s", out, err);
}

static void test_signals_reach_the_command_once(void **state)
{
    (void)state;
    char script[4096], counter[2048];
    snprintf(counter, sizeof counter, COUNTER, "2");
    snprintf(script, sizeof script,
             "o=$(mktemp); \"$GMP_RUN\" -- %s >\"$o\" & p=$!; " UNTIL_READY "; "
             "for s in TERM HUP QUIT USR1 USR2 INT; do kill -$s $p; sleep 0.05; done; "
             "wait $p; r=$?; cat \"$o\"; rm -f \"$o\"; echo \"status $r\"",
             counter);
    run(script);
    if (!strstr(out, "got [('SIGHUP', 1), ('SIGINT', 1), ('SIGQUIT', 1), ('SIGTERM', 1), "
                     "('SIGUSR1', 1), ('SIGUSR2', 1)]\n") ||
        !strstr(out, "status 3\n"))
        fail_msg("signals sent to gmp-run:\n%s\n%s", out, err);
}

/* A signal sent to the whole process group (`kill -- -PGID`; timeout(1)
 * signals its child, then its group) reaches the command from the sender:
 * gmp-run does not pass it on again.  One that a command which left the
 * group (setsid) did not get from the sender, gmp-run passes on. */
static void test_group_signals_reach_the_command_once(void **state)
{
    (void)state;
    char file[600], script[4096], counter[2048];
    snprintf(counter, sizeof counter, COUNTER, "2");
    snprintf(file, sizeof file, "%s/group.sh", paths.scratch);
    for (int own_session = 0; own_session < 2; own_session++) {
        /* a shell leading its group, which it signals (surviving it) */
        snprintf(script, sizeof script,
                 "for s in TERM HUP QUIT USR1 USR2 INT; do trap '' $s; done\n"
                 "o=$(mktemp); \"$GMP_RUN\" -- %s%s >\"$o\" & p=$!\n" UNTIL_READY "\n"
                 "for s in TERM HUP QUIT USR1 USR2 INT; do /bin/kill -s $s -- -$$; sleep 0.05; done\n"
                 "wait $p; r=$?; cat \"$o\"; rm -f \"$o\"; echo \"status $r\"\n",
                 own_session ? "setsid " : "", counter);
        write_file(file, script, strlen(script));
        snprintf(script, sizeof script, "setsid sh '%s'", file);
        run(script);
        if (!strstr(out, "got [('SIGHUP', 1), ('SIGINT', 1), ('SIGQUIT', 1), ('SIGTERM', 1), "
                         "('SIGUSR1', 1), ('SIGUSR2', 1)]\n") ||
            !strstr(out, "status 3\n"))
            fail_msg("signals sent to the group%s:\n%s\n%s",
                     own_session ? ", the command in a session of its own" : "", out, err);
    }
    /* timeout's way: its child, then its group (3 s: room for the
     * counter to set its handlers, under a sanitizer too) */
    snprintf(counter, sizeof counter, COUNTER, "6");
    snprintf(script, sizeof script, "timeout -s TERM 3 \"$GMP_RUN\" -- %s; echo \"status $?\"",
             counter);
    run(script);
    if (!strstr(out, "got [('SIGTERM', 1)]\n") || !strstr(out, "status 124\n"))
        fail_msg("timeout -s TERM:\n%s\n%s", out, err);
}

/* python3 holding 32 MiB, asleep, its pid in $SLEEPER_PID:
 * what timeout -s KILL kills with gmp-run; then the shell waits until the
 * kernel has ended it (the kill is asynchronous) */
#define SLEEPER                                                                            \
    "python3 -c 'import os, time\n"                                                        \
    "open(os.environ[\"SLEEPER_PID\"], \"w\").write(str(os.getpid()))\n"                  \
    "keep = [bytearray(8 << 20) for _ in range(4)]\n"                                      \
    "time.sleep(30)'"
#define SLEEPER_GONE                                                                       \
    "p=$(cat \"$SLEEPER_PID\"); while [ -e /proc/$p ] && "                                 \
    "! grep -q ') Z' /proc/$p/stat; do sleep 0.05; done"

static void expect_sleeper_bundle(void)
{
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "confirmed_by"), "recovered");
    json_decref(md);
    if (!strstr(show_output(bundle), "\nProcess:          pid ") ||
        !strstr(show_output(bundle), " -c import os, time"))
        fail_msg("the recovered bundle does not name the command:\n%s", show_output(bundle));
}

/* gmp-run killed with its command: the ring stays in a job directory no
 * one holds; recover with no argument writes its bundle where the process
 * would have, and removes the directory. */
static void test_killed_gmp_run_loses_nothing(void **state)
{
    (void)state;
    run("timeout -s KILL 1.5 \"$GMP_RUN\" -- " SLEEPER "; echo \"status $?\"; " SLEEPER_GONE);
    if (!strstr(out, "status 137\n"))
        fail_msg("timeout: %s %s", out, err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
    assert_int_equal(count_prefixed(paths.rundir, "gmp-run-"), 1);
    run("\"$GMP_INSPECT\" recover");
    if (!strstr(out, ": killed; bundle: "))
        fail_msg("recover: %s %s", out, err);
    expect_sleeper_bundle();
    assert_int_equal(left_in_run_dir(), 0);
}

/* ... or the next gmp-run writes it, first thing, and says so. */
static void test_next_gmp_run_writes_what_was_left(void **state)
{
    (void)state;
    run("timeout -s KILL 1.5 \"$GMP_RUN\" -- " SLEEPER "; " SLEEPER_GONE
        "; \"$GMP_RUN\" -- true; echo \"status $?\"");
    const char *said = strstr(err, "gmp-run: an earlier job's pid ");
    if (!strstr(out, "status 0\n") || !said || strstr(said + 1, "gmp-run: "))
        fail_msg("the next gmp-run: %s %s", out, err);
    expect_sleeper_bundle();
    assert_int_equal(left_in_run_dir(), 0);
}

/* A process that outlives gmp-run keeps the job directory while it runs,
 * and takes it with it when it exits. */
static void test_no_litter_after_a_daemon(void **state)
{
    (void)state;
    /* the daemon outlives gmp-run by seconds; then its end is waited for
     * (up to 30 s: a loaded machine starts python3 slowly), not guessed */
    run("\"$GMP_RUN\" -- sh -c 'python3 -c \"import time; x = bytearray(8 << 20); "
        "time.sleep(3)\" & sleep 0.7'; ls \"$GMP_RUN_DIR\" | grep -c '^gmp-run-'; "
        "for i in $(seq 300); do [ \"$(ls \"$GMP_RUN_DIR\" | grep -c '^gmp-run-')\" = 0 ] && break; "
        "sleep 0.1; done; echo \"status $?\"");
    if (strncmp(out, "1\n", 2))
        fail_msg("no job directory while the daemon ran: %s %s", out, err);
    assert_int_equal(left_in_run_dir(), 0);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

/* The job's stderr a pipe, which gmp-run passes on (to read a Go
 * program's last words in it): what reaches the reader is what reaches it
 * without gmp-run, stdout and stderr in the order written when they share
 * the pipe; a reader that goes away ends the writer with SIGPIPE (141) as
 * it would; a daemon's late line still arrives. */
/* job with its RUN where gmp-run goes: "" bare, or "$GMP_RUN --" */
static void with_runner(char *script, size_t cap, const char *job, const char *runner)
{
    const char *at = strstr(job, "RUN ");
    snprintf(script, cap, "%.*s%s%s", (int)(at - job), job, runner, at + 3);
}

static void test_output_through_a_pipe_as_without(void **state)
{
    (void)state;
    static const char *const jobs[] = {
        "{ RUN sh -c 'echo a; echo b >&2; echo c; echo d >&2; exit 5'; echo \"status $?\"; } "
        "2>&1 | tr '\\n' ' '",
        "{ RUN sh -c 'while :; do echo x >&2; done'; echo \"status $?\" >\"$SLEEPER_PID.st\"; } "
        "2>&1 | head -n 2 >/dev/null; cat \"$SLEEPER_PID.st\"",
        "RUN sh -c '(sleep 0.5; echo late >&2) & echo early >&2' 2>&1 | cat",
    };
    static char bare[sizeof out];
    for (size_t i = 0; i < sizeof jobs / sizeof *jobs; i++) {
        char script[2048];
        with_runner(script, sizeof script, jobs[i], "");
        run(script);
        memcpy(bare, out, sizeof out);
        with_runner(script, sizeof script, jobs[i], "\"$GMP_RUN\" --");
        run(script);
        if (strcmp(out, bare) || !bare[0])
            fail_msg("%s\nbare:  %s\nunder: %s\n%s", jobs[i], bare, out, err);
    }
}

/* gmp-run killed alone (kill -9 of its pid) while its job writes stderr to
 * a pipe: the relay that passes the pipe on is a process of its own, so
 * the job's later lines still arrive, as they would have without it.  The
 * kill waits for the job to have begun (a fixed wait could come before
 * gmp-run had started it, on a busy machine). */
static void test_output_outlives_a_killed_gmp_run(void **state)
{
    (void)state;
    run("( \"$GMP_RUN\" -- sh -c ': >\"$SLEEPER_PID.began\"; sleep 1; echo after >&2' 2>&1 & "
        "echo $! >\"$SLEEPER_PID.run\"; wait ) | cat >\"$SLEEPER_PID.out\" & "
        "i=0; until [ -e \"$SLEEPER_PID.began\" ] && [ -s \"$SLEEPER_PID.run\" ] || [ $i = 400 ]; "
        "do sleep 0.05; i=$((i + 1)); done; "
        "kill -9 $(cat \"$SLEEPER_PID.run\"); wait; cat \"$SLEEPER_PID.out\"");
    if (strcmp(out, "after\n"))
        fail_msg("the job's line after gmp-run was killed: \"%s\" %s", out, err);
}

/* A program built with AddressSanitizer, whose runtime refuses to start
 * behind a preload: under gmp-run it runs as it does alone, its own
 * report included.  Skipped with a line where gcc cannot build one. */
static void test_asan_program_runs_as_alone(void **state)
{
    (void)state;
    /* the sanitizer stage's own ASAN_OPTIONS send reports to its logs */
    skip_under_preload_sanitizer("an ASan program's report goes to the stage's log files");
    char script[4096];
    snprintf(script, sizeof script,
             "cd '%s' && printf '%%s\\n' '#include <stdio.h>' '#include <stdlib.h>' "
             "'int main(int argc, char **argv) {' '    char *p = malloc(10);' "
             "'    (void)argv;' '    p[argc > 1 ? 10 : 0] = 1;' '    puts(\"wrote\");' "
             "'    free(p);' '    return 0;' '}' > asan.c && "
             "gcc -g -fsanitize=address -o asan asan.c 2>/dev/null || exit 77; "
             "for a in '' overflow; do ./asan $a; echo \"alone $?\"; "
             "\"$GMP_RUN\" -- ./asan $a; echo \"under $?\"; done",
             paths.scratch);
    run(script);
    if (WIFEXITED(last_status) && WEXITSTATUS(last_status) == 77) {
        printf("SKIP  test_asan_program_runs_as_alone: gcc cannot build with -fsanitize=address\n");
        return;
    }
    if (!strstr(out, "wrote\nalone 0\nwrote\nunder 0\n") || !strstr(out, "alone 1\nunder 1\n") ||
        strstr(err, "does not come first"))
        fail_msg("an ASan program alone and under gmp-run:\n%s\n%s", out, err);
    const char *first = strstr(err, "heap-buffer-overflow");
    if (!first || !strstr(first + 1, "heap-buffer-overflow"))
        fail_msg("ASan's report, alone and under gmp-run:\n%s", err);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "supervise");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctrl_c_is_one_sigint),
        cmocka_unit_test(test_ctrl_c_death_is_passed_on),
        cmocka_unit_test(test_signals_reach_the_command_once),
        cmocka_unit_test(test_group_signals_reach_the_command_once),
        cmocka_unit_test(test_killed_gmp_run_loses_nothing),
        cmocka_unit_test(test_next_gmp_run_writes_what_was_left),
        cmocka_unit_test(test_no_litter_after_a_daemon),
        cmocka_unit_test(test_output_through_a_pipe_as_without),
        cmocka_unit_test(test_output_outlives_a_killed_gmp_run),
        cmocka_unit_test(test_asan_program_runs_as_alone),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
