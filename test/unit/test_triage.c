/*
 * test_triage.c — `gmp-inspect triage` over 2,000 bundles (3 signatures,
 * 8 ranks, written by the recorder and copied, in one dump directory per
 * node as a job would leave them): 3 groups with the right counts and ranks, exit
 * 3, well-formed JUnit XML (xmllint), Markdown and JSON, all under 5 s; and
 * the exit-status table in every format: 0 for warnings and kills nothing
 * ties to memory (listed, never failures), 1 for a missing path or an
 * unreadable bundle, 3 for an out-of-memory death whatever else is there,
 * 2 for an unknown format, said in words.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "dump_request.h"
#include "support.h"

#include <jansson.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char scratch[256], jobs[512];
static char out[1 << 20], err[1 << 16];

enum { PER_RANK_A = 125, PER_RANK_B = 88, PER_RANK_C = 37, RANKS = 8 };

/* A copy of bundle directory src at dst (its files, flat). */
static void copy_bundle(const char *src, const char *dst)
{
    static const char *const files[] = {"manifest.json", "metadata.json", "events.json",
                                        "environment.json", "modules.json"};
    assert_int_equal(mkdir(dst, 0700), 0);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char from[4400], to[4400];
        static char buf[1 << 16];
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dst, files[i]);
        FILE *in = fopen(from, "rb");
        assert_non_null(in);
        size_t n = fread(buf, 1, sizeof buf, in);
        fclose(in);
        write_file(to, buf, n);
    }
}

/* One bundle per signature and rank from the recorder, then copies of it
 * (as many processes of one rank failing alike would leave). */
static void write_bundles(void)
{
    for (int r = 0; r < RANKS; r++) {
        gmp_config cfg;
        gmp_config_defaults(&cfg);
        snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/node%d/dumps", jobs, r / 4);
        snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", scratch);
        cfg.max_dumps = 10000;
        cfg.max_total_mb = 100000;
        char rank[16];
        snprintf(rank, sizeof rank, "%d", r);
        setenv("RANK", rank, 1);
        gmp_recorder *rec = gmp_recorder_create(&cfg);
        assert_non_null(rec);
        gmp_dump_request sig[3] = {
            {.reason = "cudaErrorMemoryAllocation",
             .backend = GMP_BACKEND_CUDA,
             .failed = {1, GMP_API_CUDA_MALLOC, (1ull << 30) + (uint64_t)r, 0, 2, 0, 0, {0}}},
            {.reason = "ENOMEM",
             .backend = GMP_BACKEND_CPU,
             .failed = {1, GMP_API_MALLOC, 4096, -1, 12, 0, 0, {0}}},
            {.reason = "message_pattern:cuda out of memory", .backend = GMP_BACKEND_CUDA},
        };
        static const int copies[3] = {PER_RANK_A, PER_RANK_B, PER_RANK_C};
        for (int k = 0; k < 3; k++) {
            char path[4096];
            assert_non_null(gmp_dump(rec, &sig[k], path, sizeof path));
            for (int i = 1; i < copies[k]; i++) {
                char dst[4200];
                snprintf(dst, sizeof dst, "%s_copy%d", path, i);
                copy_bundle(path, dst);
            }
        }
        gmp_recorder_destroy(rec);
    }
    unsetenv("RANK");
}

static int triage(const char *format, double *seconds)
{
    const char *argv[] = {inspect_path(), "triage", jobs, "--format", format, NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (seconds)
        *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_groups_counts_and_formats(void **state)
{
    (void)state;
    write_bundles();
    double secs = 0;
    assert_int_equal(triage("json", &secs), 3);
    print_message("triage of 2000 bundles: %.2f s\n", secs);
    if (secs > 5.0)
        fail_msg("triage of 2000 bundles took %.1f s", secs);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "bundles")), 2000);
    assert_int_equal(json_integer_value(json_object_get(root, "oom_bundles")), 2000);
    json_t *groups = json_object_get(root, "groups");
    assert_int_equal(json_array_size(groups), 3);
    static const struct { const char *reason, *api; long count; } want[] = {
        {"cudaErrorMemoryAllocation", "cudaMalloc", PER_RANK_A * RANKS},
        {"ENOMEM", "malloc", PER_RANK_B * RANKS},
        {"message_pattern:cuda out of memory", "-", PER_RANK_C * RANKS},
    };
    for (size_t i = 0; i < 3; i++) { /* largest group first */
        json_t *g = json_array_get(groups, i);
        assert_string_equal(json_str(g, "reason"), want[i].reason);
        assert_string_equal(json_str(g, "api"), want[i].api);
        assert_int_equal(json_int(g, "count"), want[i].count);
        assert_int_equal(json_array_size(json_object_get(g, "ranks")), RANKS);
        assert_int_equal(json_array_size(json_object_get(g, "hosts")), 1);
    }
    assert_int_equal(json_int(json_array_get(groups, 0), "largest_request"), (1ll << 30) + 7);
    json_decref(root);

    assert_int_equal(triage("junit", NULL), 3);
    char xml[700];
    snprintf(xml, sizeof xml, "%s/report.xml", scratch);
    write_file(xml, out, strlen(out));
    char cmd[1600], x_out[4096], x_err[4096];
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s' && grep -c '<testcase ' '%s'", xml, xml);
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    int st = run_capture(sh, x_out, sizeof x_out, x_err, sizeof x_err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("xmllint: %s", x_err);
    assert_string_equal(x_out, "3\n");

    assert_int_equal(triage("markdown", NULL), 3);
    assert_non_null(strstr(out, "| 1 | 1000 | out of memory | `cuda` | `cudaMalloc` | "
                                "`cudaErrorMemoryAllocation` | `-` |"));
    assert_int_equal(triage("text", NULL), 3);
    assert_non_null(strstr(out, "3 signature(s) in 2000 bundle(s): 2000 out-of-memory death(s)"));
}

static int triage_paths(const char *format, const char *a, const char *b)
{
    const char *argv[] = {inspect_path(), "triage", "--format", format, a, b, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* One bundle of req in dir. */
static void dump_one(const char *dir, const gmp_dump_request *req)
{
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s", dir);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", scratch);
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    assert_non_null(rec);
    char path[4096];
    assert_non_null(gmp_dump(rec, req, path, sizeof path));
    gmp_recorder_destroy(rec);
}

/* Every format, the same status; the JUnit report fails exactly then. */
static void expect_everywhere(const char *a, const char *b, int status, const char *words)
{
    static const char *const formats[] = {"text", "json", "markdown", "junit"};
    for (size_t i = 0; i < 4; i++) {
        int got = triage_paths(formats[i], a, b);
        if (got != status)
            fail_msg("--format %s: exit %d, not %d\n%s%s", formats[i], got, status, out, err);
        if (!strcmp(formats[i], "json")) {
            json_t *root = json_loads(out, 0, NULL);
            assert_non_null(root);
            assert_int_equal(json_int(root, "exit_status"), status);
            json_decref(root);
        } else if (!strcmp(formats[i], "junit")) {
            int fails = strstr(out, "<failure") != NULL, errors = strstr(out, "<error") != NULL;
            assert_int_equal(fails, status == 3);
            assert_int_equal(errors && !fails, status == 1);
        } else if (words && !strstr(out, words)) {
            fail_msg("--format %s does not say \"%s\":\n%s", formats[i], words, out);
        }
    }
}

static void test_exit_status_table(void **state)
{
    (void)state;
    char quiet[600], oom[600], broken[700], missing[600];
    snprintf(quiet, sizeof quiet, "%s/quiet", scratch);
    snprintf(oom, sizeof oom, "%s/oom", scratch);
    snprintf(missing, sizeof missing, "%s/no-such-dir", scratch);
    gmp_dump_request pressure = {.reason = "memory_pressure", .exception_type = "memory_pressure",
                                 .backend = GMP_BACKEND_CPU};
    gmp_dump_request killed = {.reason = "SIGKILL", .exception_type = "SIGKILL",
                               .confirmed_by = "recovered", .backend = GMP_BACKEND_CPU};
    gmp_dump_request failed = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                               .failed = {1, GMP_API_MALLOC, 4096, -1, 12, 0, 0, {0}}};
    gmp_dump_request survived = failed;
    survived.outcome = (gmp_outcome){GMP_OUTCOME_EXITED, 0};
    dump_one(quiet, &pressure);
    dump_one(quiet, &killed);
    dump_one(quiet, &survived);
    dump_one(oom, &failed);

    /* a warning, a kill nothing ties to memory and a failure the process
     * went on from (it exited 0): listed, not failures */
    expect_everywhere(quiet, quiet, 0, "0 out-of-memory death(s), 2 memory-pressure warning(s), "
                                       "2 killed or crashed with no sign of memory, 2 failure(s) "
                                       "survived");
    assert_int_equal(triage_paths("junit", quiet, quiet), 0);
    assert_non_null(strstr(out, "survived a failed allocation (not an out-of-memory death)"));
    assert_int_equal(triage_paths("junit", quiet, quiet), 0);
    assert_non_null(strstr(out, "memory-pressure warning (not an out-of-memory death)"));
    assert_non_null(strstr(out, "killed, cause unknown (not an out-of-memory death)"));
    assert_int_equal(triage_paths("text", quiet, quiet), 0);
    assert_non_null(strstr(out, "bundle(s), killed, cause unknown  cpu  -  SIGKILL"));

    /* a typo in a path, or a directory of bundles that cannot be read */
    expect_everywhere(missing, quiet, 1, "1 unreadable");
    assert_non_null(strstr(err, "no-such-dir: No such file or directory"));
    snprintf(broken, sizeof broken, "%s/broken/oom_dump_20260101T000000Z_1_cpu_1", scratch);
    char parent[700];
    snprintf(parent, sizeof parent, "%s/broken", scratch);
    mkdir(parent, 0700);
    mkdir(broken, 0700);
    char manifest[800];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", broken);
    write_file(manifest, "{\"reason\": ", 11);
    expect_everywhere(parent, quiet, 1, "1 unreadable");

    /* an out-of-memory death wins over everything else */
    expect_everywhere(oom, parent, 3, "1 out-of-memory death(s)");
    expect_everywhere(oom, missing, 3, "1 out-of-memory death(s)");

    const char *bad[] = {inspect_path(), "triage", "--format", "xml", quiet, NULL};
    int status = run_capture(bad, out, sizeof out, err, sizeof err);
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_non_null(strstr(err, "unknown format 'xml' (text, json, markdown, junit or line)"));
}

/* A Python failure's site is its innermost frame of the program's own
 * (not numpy's, not the standard library's), by the file's base name, so
 * the same line fails alike on every machine. */
static void test_python_site(void **state)
{
    (void)state;
    char dir[600], tb[700];
    snprintf(dir, sizeof dir, "%s/python", scratch);
    snprintf(tb, sizeof tb, "%s/traceback.txt", scratch);
    static const char printed[] =
        "Traceback (most recent call last):\n"
        "  File \"/home/a/job/train.py\", line 80, in <module>\n"
        "    main()\n"
        "  File \"/home/a/job/train.py\", line 42, in step\n"
        "    x = np.ones((10**13,))\n"
        "  File \"/venv/lib/python3.11/site-packages/numpy/_core/numeric.py\", line 232, in ones\n"
        "    a = empty(shape, dtype, order)\n"
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 72.8 TiB\n";
    write_file(tb, printed, sizeof printed - 1);
    FILE *f = fopen(tb, "r");
    assert_non_null(f);
    gmp_dump_request req = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                            .failed = {1, GMP_API_MALLOC, 80000000000000ull, -1, 12, 0, 0, {0}},
                            .python_traceback_fd = fileno(f)};
    dump_one(dir, &req);
    fclose(f);
    assert_int_equal(triage_paths("json", dir, dir), 3);
    json_t *root = json_loads(out, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_str(json_array_get(json_object_get(root, "groups"), 0), "site"),
                        "train.py:42 in step");
    json_decref(root);
}

static void test_no_oom_exits_0(void **state)
{
    (void)state;
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", scratch);
    mkdir(empty, 0700);
    const char *argv[] = {inspect_path(), "triage", empty, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_non_null(strstr(out, "0 signature(s) in 0 bundle(s)"));
}

/* A rank's bundle with a failure time no clock can hold (1e300, as a
 * hostile or broken writer might put): its run is told from when the
 * bundle was written, never from the absurd number. */
static void test_run_time_past_any_clock(void **state)
{
    (void)state;
    char dir[600], pattern[700];
    snprintf(dir, sizeof dir, "%s/absurd", scratch);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "10.0.0.9", 1);
    setenv("MASTER_PORT", "29500", 1);
    gmp_dump_request failed = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                               .failed = {1, GMP_API_MALLOC, 4096, -1, 12, 0, 0, {0}}};
    dump_one(dir, &failed);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    snprintf(pattern, sizeof pattern, "%s/oom_dump_*/metadata.json", dir);
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    json_t *md = json_load_file(g.gl_pathv[0], 0, NULL);
    assert_non_null(md);
    json_object_set_new(json_object_get(md, "failed_request"), "timestamp", json_real(1e300));
    assert_int_equal(json_dump_file(md, g.gl_pathv[0], 0), 0);
    json_decref(md);
    globfree(&g);
    /* the directory twice: the bundle counted twice, as every triage does */
    expect_everywhere(dir, dir, 3, "rank 1 ran out of host memory first, at 20");
    assert_int_equal(triage_paths("text", dir, dir), 3);
    assert_null(strstr(out, "an unknown time"));
}

/* A rank that died of a limit of its runtime's own names that limit in
 * its run's verdict: Node's heap is not the machine's memory, which had
 * room to spare. */
static void test_run_names_a_runtimes_own_limit(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/node_run", scratch);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "10.0.0.9", 1);
    setenv("MASTER_PORT", "29501", 1);
    gmp_dump_request said = {
        .reason = "message_pattern:out of memory", .backend = GMP_BACKEND_CPU,
        .exception_type = "FATAL ERROR",
        .exception_message = "Reached heap limit Allocation failed - JavaScript heap out of "
                             "memory"};
    dump_one(dir, &said);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    /* the directory twice, as above: two of one rank */
    expect_everywhere(dir, dir, 3, "rank 1 ran out of V8's JavaScript heap first, at 20");
}

/* triage parses metadata.json without the host and device state it never
 * reads (half the text); a bundle it so reads is one every verb reads, and
 * one no verb can read is unreadable to it too: host_state written first
 * and indented, or holding what reads as keys and braces inside strings,
 * is cut and the bundle read; a number past a double's range, a bad token
 * or a byte that is not UTF-8 in host_state leaves the bundle unreadable,
 * as show finds it. */
static void test_lean_reading_reads_as_every_verb(void **state)
{
    (void)state;
    static const struct {
        const char *name, *host_state;
        int first, readable;
    } variants[] = {
        {"indented-first", "{\n  \"process\": {\"vm_rss\": 1024},\n  \"machine\": []\n}", 1, 1},
        {"strings", "{\"a\":\"}\\\",\\\"kind\\\":\\\"x\",\"host_state\":\"{[\",\"b\":[\"]\"]}", 0,
         1},
        {"overflow", "{\"process\":{\"vm_rss\":1e999}}", 0, 0},
        {"bad-token", "{\"process\":tru}", 0, 0},
        {"not-utf8", "{\"process\":\"\xff\xfe\"}", 1, 0},
    };
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        char dir[600], pattern[700];
        snprintf(dir, sizeof dir, "%s/lean-%s", scratch, variants[v].name);
        gmp_dump_request failed = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                                   .failed = {1, GMP_API_MALLOC, 4096, -1, 12, 0, 0, {0}}};
        dump_one(dir, &failed);
        snprintf(pattern, sizeof pattern, "%s/oom_dump_*/metadata.json", dir);
        glob_t g;
        assert_int_equal(glob(pattern, 0, NULL, &g), 0);
        json_t *md = json_load_file(g.gl_pathv[0], 0, NULL);
        assert_non_null(md);
        json_object_del(md, "host_state");
        char *rest = json_dumps(md, JSON_INDENT(variants[v].first ? 2 : 0));
        json_decref(md);
        assert_non_null(rest);
        /* rest is "{...}": host_state spliced in as its first or last member */
        static char text[1 << 16];
        size_t n = strlen(rest);
        if (variants[v].first)
            snprintf(text, sizeof text, "{\n  \"host_state\": %s,%s", variants[v].host_state,
                     rest + 1);
        else
            snprintf(text, sizeof text, "%.*s,\"host_state\":%s}", (int)(n - 1), rest,
                     variants[v].host_state);
        free(rest);
        write_file(g.gl_pathv[0], text, strlen(text));
        char bundle[4200];
        snprintf(bundle, sizeof bundle, "%.*s", (int)(strlen(g.gl_pathv[0]) - 14),
                 g.gl_pathv[0]);
        globfree(&g);
        const char *show[] = {inspect_path(), "show", bundle, NULL};
        int shown = run_capture(show, out, sizeof out, err, sizeof err) == 0;
        if (shown != variants[v].readable)
            fail_msg("%s: show %s it\n%s%s", variants[v].name, shown ? "reads" : "cannot read",
                     out, err);
        expect_everywhere(dir, dir, variants[v].readable ? 3 : 1,
                          variants[v].readable ? "2 out-of-memory death(s), 0 memory-pressure"
                                               : "2 unreadable");
    }
}

static int setup(void **state)
{
    (void)state;
    /* 12,000 small files: on tmpfs when there is one, a disk may take 10x longer */
    if (access("/dev/shm", W_OK) == 0)
        setenv("TMPDIR", "/dev/shm", 1);
    scratch_make(scratch, sizeof scratch, "triage");
    snprintf(jobs, sizeof jobs, "%s/job", scratch);
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
        cmocka_unit_test(test_groups_counts_and_formats),
        cmocka_unit_test(test_no_oom_exits_0),
        cmocka_unit_test(test_exit_status_table),
        cmocka_unit_test(test_python_site),
        cmocka_unit_test(test_run_time_past_any_clock),
        cmocka_unit_test(test_run_names_a_runtimes_own_limit),
        cmocka_unit_test(test_lean_reading_reads_as_every_verb),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
