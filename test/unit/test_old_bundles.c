/*
 * test_old_bundles.c — bundles an earlier version wrote read the same
 * today.  test/fixtures/bundles_v1/ holds six bundles written by the
 * preload of 041ca1e (schema_version 1, before metadata.json said its
 * kind): a host allocation refused by RLIMIT_AS, a SIGSEGV after a failed
 * malloc, a CUDA device run out, a training loop's steady growth on it,
 * Python's MemoryError, and a process killed by SIGKILL recovered from its
 * ring by gmp-run; and, in expected/, what that version's gmp-inspect said
 * of them (make.sh there made both).  Every line of CASES runs today's
 * gmp-inspect the same way — show, events, validate, triage in each format,
 * list, leaks, metrics, diff, both exports, plot — and its output must be
 * that version's, byte for byte, and its exit status too: a reader
 * restructured, or a field added to the bundle, must not change what an
 * older bundle says.  Four changes were made on purpose since:
 * expected/triage_json has triage's "runs" key (an empty list: none of
 * these processes was a rank of a run), added when triage learnt runs;
 * expected/plot_* are the HTML report's pages, show's answer above the
 * chart and hover text on its marks (the chart otherwise the same); and
 * expected/show_* name the failed request's code as its library does
 * ("failed with ENOMEM (code 12)", not "returned code 12"); and the event
 * lines of expected/show_* and expected/events_host_rlimit do so too
 * ("result ENOMEM (code 12)", not "result 12").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARGS_MAX 16

typedef struct buffer {
    char *data;
    size_t len, cap;
} buffer;

static void append(buffer *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void append_file(buffer *b, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        append(b, chunk, (size_t)n);
    close(fd);
}

/* gmp-inspect with args (OUT.svg, OUT.html: a file in out_dir): its
 * stdout, then the file it wrote, then "exit N", as make.sh records it. */
static void run_inspect(char *args, const char *out_dir, buffer *got)
{
    char *argv[ARGS_MAX + 2], paths[ARGS_MAX + 1][600];
    int argc = 0;
    argv[argc++] = (char *)inspect_path();
    for (char *save = NULL, *tok = strtok_r(args, " ", &save); tok && argc <= ARGS_MAX;
         tok = strtok_r(NULL, " ", &save)) {
        if (!strncmp(tok, "OUT.", 4)) {
            snprintf(paths[argc], sizeof paths[argc], "%.500s/%.60s", out_dir, tok);
            tok = paths[argc];
        }
        argv[argc++] = tok;
    }
    argv[argc] = NULL;
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 2);
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    char chunk[65536];
    ssize_t n;
    while ((n = read(pipefd[0], chunk, sizeof chunk)) > 0)
        append(got, chunk, (size_t)n);
    close(pipefd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char file[600];
    snprintf(file, sizeof file, "%.500s/OUT.svg", out_dir);
    append_file(got, file);
    snprintf(file, sizeof file, "%.500s/OUT.html", out_dir);
    append_file(got, file);
    char line[32];
    int len = snprintf(line, sizeof line, "exit %d\n", exit_code_of(status));
    append(got, line, (size_t)len);
}

static void test_every_verb_reads_them_as_before(void **state)
{
    (void)state;
    const char *fixtures = getenv("GMP_TEST_FIXTURES");
    assert_non_null(fixtures);
    char dir[4096], cases[4200];
    snprintf(dir, sizeof dir, "%s/bundles_v1", fixtures);
    snprintf(cases, sizeof cases, "%s/CASES", dir);
    assert_int_equal(chdir(dir), 0); /* CASES names the bundles from here */
    FILE *f = fopen(cases, "r");
    assert_non_null(f);
    char line[2048], out_dir[512], failures[4096] = "";
    int n = 0, bad = 0;
    scratch_make(out_dir, sizeof out_dir, "old-bundles");
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *bar = strchr(line, '|');
        if (!bar)
            continue;
        *bar = '\0';
        char expected[4300];
        snprintf(expected, sizeof expected, "%.4000s/expected/%.200s", dir, line);
        buffer want = {0}, got = {0};
        append_file(&want, expected);
        run_inspect(bar + 1, out_dir, &got);
        n++;
        if (!want.len || got.len != want.len || memcmp(got.data, want.data, got.len)) {
            bad++;
            size_t used = strlen(failures);
            snprintf(failures + used, sizeof failures - used, " %.100s", line);
            char saved[700];
            snprintf(saved, sizeof saved, "%.500s/%.150s.got", out_dir, line);
            write_file(saved, got.data, got.len); /* kept for a diff when it fails */
        }
        free(want.data);
        free(got.data);
        char file[600];
        snprintf(file, sizeof file, "%.500s/OUT.svg", out_dir);
        unlink(file);
        snprintf(file, sizeof file, "%.500s/OUT.html", out_dir);
        unlink(file);
    }
    fclose(f);
    assert_true(n >= 20); /* every case of CASES ran */
    if (bad)
        fail_msg("%d of %d cases differ from what gmp-inspect said of these bundles at 041ca1e:%s "
                 "(today's output in %s/CASE.got; expected in %s/expected)",
                 bad, n, failures, out_dir, dir);
    scratch_remove(out_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_verb_reads_them_as_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
