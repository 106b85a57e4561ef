/*
 * test_deadline.c — the deadline every command the tests run is held to
 * (test/deadline.c): a command that outlives it is described on stderr,
 * process by process and thread by thread, then ended with SIGALRM, and
 * what it started is not left running; a command that ends in time is
 * waited for as it is, and nothing is said.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t start_shell(const char *script)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

/* The pid the report gives the process whose command line is `cmd`. */
static pid_t reported_pid(const char *report, const char *cmd)
{
    const char *line = report;
    while ((line = strstr(line, "  pid "))) {
        const char *end = strchr(line, '\n');
        const char *colon = strstr(line, ": ");
        if (colon && end && colon < end && !strncmp(colon + 2, cmd, strlen(cmd)))
            return (pid_t)atoi(line + strlen("  pid "));
        line += 1;
    }
    return -1;
}

/* gone from /proc, or a zombie nobody reaps here, within two seconds */
static int ended_soon(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        char path[64], buf[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return 1;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *paren = strrchr(buf, ')');
        if (paren && paren[1] == ' ' && paren[2] == 'Z')
            return 1;
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    return 0;
}

static void test_a_hang_is_described_then_ended(void **state)
{
    (void)state;
    pid_t pid = start_shell("sleep 101 & exec sleep 102");
    static char report[1 << 16];
    stderr_capture_begin();
    int status = wait_with_deadline(pid, 1);
    stderr_capture_end(report, sizeof report);

    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGALRM);
    if (!strstr(report, "ran past its 1 s deadline; 2 process(es) under the test"))
        fail_msg("the report:\n%s", report);
    pid_t root = reported_pid(report, "sleep 102"), left = reported_pid(report, "sleep 101");
    assert_int_equal(root, pid);
    assert_true(left > 0);
    char parent[64];
    snprintf(parent, sizeof parent, "pid %d (parent %d), state S: sleep 101", (int)left,
             (int)pid);
    assert_non_null(strstr(report, parent));
    assert_non_null(strstr(report, "(sleep): state S, waiting in "));
    if (access("/usr/bin/eu-stack", X_OK) == 0 && !strstr(report, "nanosleep"))
        fail_msg("no stack in the report:\n%s", report);
    assert_non_null(strstr(report, "== end of the processes past the deadline"));
    /* what the command started does not outlive it */
    assert_true(ended_soon(left));
}

static void test_a_command_in_time_is_waited_for(void **state)
{
    (void)state;
    pid_t pid = start_shell("sleep 0.2; exit 3");
    char said[4096];
    stderr_capture_begin();
    int status = wait_with_deadline(pid, 10);
    stderr_capture_end(said, sizeof said);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    assert_string_equal(said, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_hang_is_described_then_ended),
        cmocka_unit_test(test_a_command_in_time_is_waited_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
