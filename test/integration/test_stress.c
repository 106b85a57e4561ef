/*
 * test_stress.c — the preload under load, each run asserting that
 * nothing is lost or corrupt:
 *   - 32 threads failing at once: one bundle per OOM episode (the metrics
 *     file counts both), one stderr line each, every bundle valid;
 *   - 100 forks while allocating: a bundle per child, each holding only
 *     that child's own events (its ring is its own), no ring left behind;
 *   - an exec chain (sh -> python3 -> sh -> a C program), one pid: each
 *     level that fails writes its own bundle with its own events only;
 *   - 1,000 processes writing bundles into one directory under retention:
 *     never more than GMP_MAX_DUMPS after the last exits, all valid, no
 *     temporary left;
 *   - four threads allocating with every call and freeing each other's
 *     blocks: bytes in use, allocations and frees exact (host_counts).
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

static preload_paths paths;
static char out[1 << 16], err[1 << 20];

static int shell(const char *script)
{
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

/* gmp-inspect validate over every bundle of the dump directory. */
static void all_valid(int want)
{
    char script[4096];
    snprintf(script, sizeof script,
             "n=0; for b in \"$GMP_DUMP_DIR\"/oom_dump_*; do '%s' validate \"$b\" >/dev/null || "
             "{ echo \"invalid: $b\"; exit 1; }; n=$((n+1)); done; echo $n",
             inspect_path());
    /* run_script empties the dump directory first: call the shell by hand */
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    setenv("GMP_DUMP_DIR", paths.dumps, 1);
    char o[4096], e[4096];
    int status = run_capture(argv, o, sizeof o, e, sizeof e);
    unsetenv("GMP_DUMP_DIR");
    if (exit_code_of(status) != 0 || atoi(o) != want)
        fail_msg("validate: %s%s (want %d bundles)", o, e, want);
}

/* fn(bundle path, its pid, arg) for every bundle of the dump directory. */
static void each_bundle(void (*fn)(const char *bundle, long long pid, void *arg), void *arg)
{
    DIR *d = opendir(paths.dumps);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "oom_dump_", 9))
            continue;
        char bundle[1200];
        snprintf(bundle, sizeof bundle, "%s/%s", paths.dumps, e->d_name);
        json_t *m = bundle_file(bundle, "manifest.json");
        fn(bundle, json_int(m, "pid"), arg);
        json_decref(m);
    }
    if (d)
        closedir(d);
}

static long long metric(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    const char *v = p ? strstr(p, "} ") : NULL;
    return v ? atoll(v + 2) : -1;
}

static void test_32_threads_fail_at_once(void **state)
{
    (void)state;
    char script[8192], prom[600];
    snprintf(prom, sizeof prom, "%s/metrics.prom", paths.scratch);
    for (int round = 0; round < 3; round++) {
        snprintf(script, sizeof script,
                 "GMP_MAX_DUMPS=1000 GMP_PROM_FILE='%s' LD_PRELOAD='%s' "
                 "exec %s/test/programs/stress oom-threads 32",
                 prom, paths.preload, paths.build);
        assert_int_equal(shell(script), 0);
        int bundles = count_prefixed(paths.dumps, "oom_dump_");
        FILE *f = fopen(prom, "r");
        char text[8192] = "";
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = '\0';
        if (f)
            fclose(f);
        long long episodes = metric(text, "gpumemprof_oom_episodes_total");
        if (bundles < 1 || episodes != bundles ||
            metric(text, "gpumemprof_bundles_written_total") != bundles ||
            count_lines(err) != bundles)
            fail_msg("%d bundles, %lld episodes, stderr:\n%s", bundles, episodes, err);
        all_valid(bundles);
    }
}

/* Every event of the bundle was recorded by its own process. */
static void events_all_of(const char *bundle, long long pid, void *arg)
{
    (void)arg;
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    int allocs = 0;
    json_array_foreach(events, i, ev) {
        if (json_int(ev, "thread_id") != pid)
            fail_msg("%s holds an event of thread %lld", bundle, json_int(ev, "thread_id"));
        allocs += !strcmp(json_str(ev, "event_type"), "alloc");
    }
    assert_int_equal(allocs, 3);
    json_decref(events);
}

static void test_100_forks_while_allocating(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "GMP_MAX_DUMPS=1000 GMP_HOST_EVENT_MIN_BYTES=1048576 LD_PRELOAD='%s' "
             "exec %s/test/programs/stress fork-alloc 100",
             paths.preload, paths.build);
    assert_int_equal(shell(script), 0);
    assert_string_equal(out, "100 children exited 0\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 100);
    all_valid(100);
    each_bundle(events_all_of, NULL);
    assert_int_equal(count_prefixed(paths.rundir, "ring_"), 0); /* all exited normally */
}

typedef struct chain {
    long long pids[2];
    int n, saw_python, saw_c;
} chain;

/* One level's bundle: its failure, and none of the other level's. */
static void chain_level(const char *bundle, long long pid, void *arg)
{
    chain *c = arg;
    json_t *md = bundle_file(bundle, "metadata.json");
    if (c->n < 2)
        c->pids[c->n++] = pid;
    long long size = json_int(json_object_get(md, "failed_request"), "size");
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (!strcmp(json_str(ev, "event_type"), "oom") && json_int(ev, "size") >> 50 != size >> 50)
            fail_msg("%s holds another level's failure of %lld", bundle, json_int(ev, "size"));
    }
    c->saw_python += size >> 50 == 1; /* bytearray(1 << 50) asks a byte more */
    c->saw_c += size == 1ll << 60;
    json_decref(events);
    json_decref(md);
}

/* One pid through sh, python3, sh and host_oom: python3's MemoryError and
 * host_oom's failure each in their own bundle, with their own events: the
 * MemoryError's open episode is written at the exec. */
static void test_exec_chain(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_MAX_DUMPS=100; exec python3 -c '"
             "import os\n"
             "try:\n    bytearray(1 << 50)\nexcept MemoryError:\n    print(\"python failed\", flush=True)\n"
             "os.execvp(\"sh\", [\"sh\", \"-c\", \"exec %s/test/programs/host_oom fail-twice\"])'",
             paths.preload, paths.build);
    assert_int_equal(shell(script), 0);
    assert_string_equal(out, "python failed\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    all_valid(2);
    chain c = {{0, 0}, 0, 0, 0};
    each_bundle(chain_level, &c);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.pids[0], c.pids[1]); /* exec: one process */
    assert_int_equal(c.saw_python, 1);
    assert_int_equal(c.saw_c, 1);
    assert_int_equal(count_prefixed(paths.rundir, "ring_"), 0);
}

static void test_1000_processes_one_directory(void **state)
{
    (void)state;
    if (preload_under_tsan()) {
        print_message("SKIP with the preload under TSan: 1000 processes take minutes there\n");
        skip();
    }
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_MAX_DUMPS=20; seq 1000 | "
             "xargs -P 8 -I{} %s/test/programs/host_oom fail-twice 2>/dev/null; echo done",
             paths.preload, paths.build);
    assert_int_equal(shell(script), 0);
    assert_string_equal(out, "done\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 20);
    assert_int_equal(count_prefixed(paths.dumps, ".tmp_"), 0);
    all_valid(20);
}

/* The counters a Python profiler and the metrics file read are exact to
 * the byte and the call, three times in a row (host_counts says what it
 * checks; the watchdog, which allocates on a thread of its own, is off). */
static void test_host_counts_exact_across_threads(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("the sanitizer's own malloc, which the program calls first");
    char script[4096];
    snprintf(script, sizeof script,
             "export GMP_WATCHDOG=0 LD_PRELOAD='%s'; for i in 1 2 3; do "
             "%s/test/programs/host_counts || exit 1; done",
             paths.preload, paths.build);
    if (shell(script) != 0)
        fail_msg("host_counts: %s%s", out, err);
    assert_string_equal(out, "counts exact\ncounts exact\ncounts exact\n");
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "stress");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_32_threads_fail_at_once),
        cmocka_unit_test(test_100_forks_while_allocating),
        cmocka_unit_test(test_exec_chain),
        cmocka_unit_test(test_1000_processes_one_directory),
        cmocka_unit_test(test_host_counts_exact_across_threads),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
