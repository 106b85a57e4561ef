/*
 * test_inspect.c — gmp-inspect as a user and a CI job run it: a bundle of
 * ours and one of the Python recorder read and validate; every hostile input
 * (truncated, random bytes, 100k-deep nesting, a 600 MiB file, symlinked or
 * FIFO members, wrong types, path tricks, missing files, count mismatches)
 * gets a clear message and a non-zero exit from every verb (export too),
 * never a crash or a hang; --help works for each verb; usage errors exit 2.
 * What `show` says of a well-formed bundle is test_show.c's.
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

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char scratch[256];
static char good[4096]; /* a bundle written by the recorder */
static char out[1 << 16], err[1 << 16];

static int run_verb(const char *verb, const char *arg, const char *arg2)
{
    return inspect_verb(verb, arg, arg2, out, sizeof out, err, sizeof err);
}

static int setup(void **state)
{
    (void)state;
    scratch_make(scratch, sizeof scratch, "inspect");
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/good", scratch);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", scratch);
    snprintf(cfg.context, sizeof cfg.context, "ctx\x1b[31m with an escape");
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    for (int i = 0; i < 50; i++) {
        gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CUDA, .device = 1,
                        .api = GMP_API_CUDA_MALLOC, .size = 1u << 20,
                        .in_use = (uint64_t)(i + 1) << 20};
        gmp_record(rec, &ev);
    }
    gmp_dump_request req = {.reason = "cudaErrorMemoryAllocation",
                            .exception_message = "cudaMalloc failed",
                            .backend = GMP_BACKEND_CUDA,
                            .failed = {1, GMP_API_CUDA_MALLOC, 3ull << 30, 1, 2}};
    assert_non_null(gmp_dump(rec, &req, good, sizeof good));
    gmp_recorder_destroy(rec);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    scratch_remove(scratch);
    return 0;
}

static void test_good_bundles(void **state)
{
    (void)state;
    assert_int_equal(run_verb("validate", good, NULL), 0);
    assert_non_null(strstr(out, "valid"));
    assert_int_equal(run_verb("show", good, NULL), 0);
    assert_non_null(strstr(out, "cudaErrorMemoryAllocation"));
    assert_non_null(strstr(out, "cudaMalloc of 3.0 GiB on device 1"));
    assert_non_null(strstr(out, "In use at dump:"));
    assert_null(strchr(out, '\x1b')); /* control characters never reach the terminal */
    assert_int_equal(run_verb("events", good, NULL), 0);
    assert_int_equal(count_lines(out), 50);
    assert_int_equal(run_verb("events", good, "--json"), 0);
    json_error_t jerr;
    json_t *listed = json_loads(out, 0, &jerr);
    assert_true(json_is_array(listed));
    assert_int_equal(json_array_size(listed), 50);
    assert_string_equal(json_string_value(json_object_get(json_array_get(listed, 0), "api")),
                        "cudaMalloc");
    json_decref(listed);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/good", scratch);
    assert_int_equal(run_verb("list", dir, NULL), 0);
    assert_non_null(strstr(out, "cudaErrorMemoryAllocation  50 events"));

    char seed[4096];
    snprintf(seed, sizeof seed, "%s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1",
             getenv("GMP_TEST_FIXTURES") ? getenv("GMP_TEST_FIXTURES") : "test/fixtures");
    assert_int_equal(run_verb("validate", seed, NULL), 0);
    assert_int_equal(run_verb("show", seed, NULL), 0);
    assert_non_null(strstr(out, "torch.cuda.OutOfMemoryError"));
    assert_non_null(strstr(out, "batch_size=32"));
    assert_int_equal(run_verb("events", seed, NULL), 0);
    assert_non_null(strstr(out, "memory_allocated=16642998272"));
}

/* A copy of the good bundle named name, for one hostile change. */
static void copy_good(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/hostile/%s", scratch, name);
    char parent[1024];
    snprintf(parent, sizeof parent, "%s/hostile", scratch);
    mkdir(parent, 0700);
    assert_int_equal(mkdir(path, 0700), 0);
    static const char *const files[] = {"manifest.json", "events.json", "metadata.json",
                                        "environment.json"};
    for (int i = 0; i < 4; i++) {
        char from[8192], to[8192], *data = malloc(1 << 20);
        snprintf(from, sizeof from, "%s/%s", good, files[i]);
        snprintf(to, sizeof to, "%s/%s", path, files[i]);
        int fd = open(from, O_RDONLY);
        ssize_t n = read(fd, data, 1 << 20);
        close(fd);
        write_file(to, data, (size_t)n);
        free(data);
    }
}

/* Every verb refuses the bundle with a message and a non-zero exit. */
static void expect_refused(const char *bundle, const char *why, int show_too)
{
    int rc = run_verb("validate", bundle, NULL);
    if (rc != 1 || !strstr(out, why))
        fail_msg("validate %s: rc=%d, want 1 and \"%s\" in: %s%s", bundle, rc, why, out, err);
    if (!show_too)
        return;
    rc = run_verb("show", bundle, NULL);
    if (rc != 1 || !err[0])
        fail_msg("show %s: rc=%d stderr=%s", bundle, rc, err);
    rc = run_verb("events", bundle, NULL);
    if (rc != 1 || !err[0])
        fail_msg("events %s: rc=%d stderr=%s", bundle, rc, err);
    static const char *const formats[] = {"trace-json", "torch-snapshot"};
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {inspect_path(), "export", bundle, "--format", formats[i],
                              "-o", "/dev/null", NULL};
        int status = run_capture(argv, out, sizeof out, err, sizeof err);
        if (WIFSIGNALED(status) || WEXITSTATUS(status) != 1 || !err[0] ||
            strstr(err, "Sanitizer") || strstr(err, "runtime error:"))
            fail_msg("export --format %s %s: status %d stderr=%s", formats[i], bundle, status,
                     err);
    }
}

/* The cgroup's oom_kill counter is the cgroup's since it was made: show
 * counts only the kills while the process ran when the bundle knows the
 * count at its start, and says "since it was made" when it does not. */
static void test_cgroup_kills_are_not_all_this_process(void **state)
{
    (void)state;
    char md_path[8192];
    snprintf(md_path, sizeof md_path, "%s/metadata.json", good);
    json_t *md = json_load_file(md_path, 0, NULL);
    assert_non_null(md);
    json_t *cg = json_object_get(json_object_get(md, "host_state"), "cgroup");
    if (!json_is_integer(json_object_get(cg, "memory_current"))) {
        print_message("[     SKIP ] no memory cgroup here\n");
        json_decref(md);
        return;
    }
    /* the recorder wrote the count at its start: no kill since */
    assert_true(json_is_integer(json_object_get(cg, "oom_kill_at_start")));
    assert_int_equal(run_verb("show", good, NULL), 0);
    assert_null(strstr(out, "OOM kill"));

    static const struct { int at_start; const char *want; } cases[] = {
        {3, ", 2 OOM kill(s) in it while the process ran;"},
        {5, NULL},
        {-1, ", 5 OOM kill(s) in it since it was made;"},
    };
    for (size_t i = 0; i < 3; i++) {
        char name[32], copy[4096];
        snprintf(name, sizeof name, "kills%zu", i);
        copy_good(name, copy, sizeof copy);
        json_object_set_new(json_object_get(cg, "events"), "oom_kill", json_integer(5));
        if (cases[i].at_start >= 0)
            json_object_set_new(cg, "oom_kill_at_start", json_integer(cases[i].at_start));
        else
            json_object_del(cg, "oom_kill_at_start");
        char *text = json_dumps(md, 0);
        write_file_in(copy, "metadata.json", text, strlen(text));
        free(text);
        assert_int_equal(run_verb("show", copy, NULL), 0);
        if (cases[i].want ? !strstr(out, cases[i].want) : strstr(out, "OOM kill") != NULL)
            fail_msg("oom_kill 5, at start %d:\n%s", cases[i].at_start, out);
    }
    json_decref(md);
}

/* A string a bundle's writer chose, with DEL as it is (valid JSON) or a
 * terminal's escape spelled \u001b: each is shown escaped, never raw,
 * though text with neither (the most of them) skips the cleaning. */
static void test_raw_control_characters_shown_escaped(void **state)
{
    (void)state;
    static const char *const messages[] = {"cudaMalloc\x7f failed", "cudaMalloc\\u001b]0;x failed"};
    for (int i = 0; i < 2; i++) {
        char b[4096], name[16], metadata[1024];
        snprintf(name, sizeof name, "raw%d", i);
        copy_good(name, b, sizeof b);
        int n = snprintf(metadata, sizeof metadata,
                         "{\"kind\":\"out_of_memory\",\"reason\":\"x\",\"backend\":\"cuda\","
                         "\"exception_message\":\"%s\"}",
                         messages[i]);
        write_file_in(b, "metadata.json", metadata, (size_t)n);
        assert_int_equal(run_verb("show", b, NULL), 0);
        if (strchr(out, '\x7f') || strchr(out, '\x1b') ||
            !strstr(out, i ? "cudaMalloc\\x1b]0;x failed" : "cudaMalloc\\x7f failed"))
            fail_msg("show says:\n%s", out);
    }
}

static void test_hostile_bundles(void **state)
{
    (void)state;
    char b[4096];
    static char buf[200001];

    copy_good("truncated", b, sizeof b);
    write_file_in(b, "manifest.json", "{\"schema_version\": 1, \"bundle_na", 32);
    expect_refused(b, "invalid JSON", 1);

    copy_good("random", b, sizeof b);
    srand(3);
    for (int i = 0; i < 4096; i++)
        buf[i] = (char)rand();
    write_file_in(b, "metadata.json", buf, 4096);
    expect_refused(b, "metadata.json", 1);

    copy_good("deep", b, sizeof b);
    memset(buf, '[', 100000);
    memset(buf + 100000, ']', 100000);
    write_file_in(b, "events.json", buf, 200000);
    expect_refused(b, "depth", 1);
    buf[0] = '{';
    memcpy(buf, "{\"a\":", 5);
    memset(buf + 5, '{', 99995);
    write_file_in(b, "metadata.json", buf, 100000);
    expect_refused(b, "metadata.json", 1);

    copy_good("huge", b, sizeof b);
    char path[8192];
    snprintf(path, sizeof path, "%s/events.json", b);
    assert_int_equal(truncate(path, 600ll << 20), 0); /* sparse: costs no disk */
    expect_refused(b, "larger than", 1);

    copy_good("symlink", b, sizeof b);
    snprintf(path, sizeof path, "%s/manifest.json", b);
    unlink(path);
    char target[8192];
    snprintf(target, sizeof target, "%s/manifest.json", good);
    assert_int_equal(symlink(target, path), 0);
    expect_refused(b, "symbolic link", 1);

    copy_good("fifo", b, sizeof b);
    snprintf(path, sizeof path, "%s/events.json", b);
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_refused(b, "not a regular file", 1);

    copy_good("types", b, sizeof b);
    static const char types[] =
        "{\"schema_version\":\"1\",\"bundle_name\":7,\"created_at_utc\":\"yesterday\","
        "\"reason\":null,\"backend\":[],\"event_count\":-3,\"files\":{}}";
    write_file_in(b, "manifest.json", types, sizeof types - 1);
    expect_refused(b, "field \"schema_version\" must be an integer", 0);
    assert_non_null(strstr(out, "field \"files\" must be an array"));
    assert_non_null(strstr(out, "field \"event_count\" must be an integer"));
    assert_true(count_lines(out) >= 6); /* one line per problem */
    if (run_verb("show", b, NULL) != 0) /* still says what it can */
        fail_msg("show on a manifest of wrong types failed: %s", err);

    copy_good("array", b, sizeof b);
    write_file_in(b, "manifest.json", "[1,2,3]", 7);
    expect_refused(b, "must be JSON objects", 1);

    copy_good("empty", b, sizeof b);
    write_file_in(b, "metadata.json", "", 0);
    expect_refused(b, "metadata.json", 1);

    copy_good("missing", b, sizeof b);
    snprintf(path, sizeof path, "%s/events.json", b);
    unlink(path);
    expect_refused(b, "events.json", 1);

    copy_good("escape", b, sizeof b);
    static const char escape[] =
        "{\"schema_version\":1,\"bundle_name\":\"escape\",\"created_at_utc\":"
        "\"2026-03-03T12:00:00Z\",\"reason\":\"x\",\"backend\":\"cuda\",\"event_count\":50,"
        "\"files\":[\"manifest.json\",\"events.json\",\"metadata.json\",\"environment.json\","
        "\"../../../../etc/passwd\"]}";
    write_file_in(b, "manifest.json", escape, sizeof escape - 1);
    expect_refused(b, "not a plain file name", 0);

    copy_good("count", b, sizeof b);
    write_file_in(b, "events.json", "[{}, {}]", 8);
    expect_refused(b, "event_count is 50 but events.json holds 2", 0);

    copy_good("newer", b, sizeof b);
    static const char newer[] =
        "{\"schema_version\":99,\"bundle_name\":\"newer\",\"created_at_utc\":"
        "\"2026-03-03T12:00:00Z\",\"reason\":\"x\",\"backend\":\"cuda\",\"event_count\":50,"
        "\"files\":[\"manifest.json\",\"events.json\",\"metadata.json\",\"environment.json\"]}";
    write_file_in(b, "manifest.json", newer, sizeof newer - 1);
    expect_refused(b, "newer than this tool reads", 0);

    /* allocations.json of the wrong shape: validate says so, show says the rest */
    copy_good("held", b, sizeof b);
    static const char held_manifest[] =
        "{\"schema_version\":1,\"bundle_name\":\"held\",\"created_at_utc\":"
        "\"2026-03-03T12:00:00Z\",\"reason\":\"x\",\"backend\":\"cuda\",\"event_count\":50,"
        "\"files\":[\"manifest.json\",\"events.json\",\"metadata.json\",\"environment.json\","
        "\"allocations.json\",\"stacks.json\"]}";
    write_file_in(b, "manifest.json", held_manifest, sizeof held_manifest - 1);
    static const char held[] = "{\"live_count\":\"2\",\"live_bytes\":-1,\"by_device\":[7,{}],"
                               "\"top_stacks\":[{\"stack_id\":1.5,\"count\":1,\"bytes\":1}],"
                               "\"allocations\":{}}";
    write_file_in(b, "allocations.json", held, sizeof held - 1);
    write_file_in(b, "stacks.json", "[{\"id\":1,\"frames\":[\"zz\",null,7]}]", 33);
    expect_refused(b, "allocations.json: field \"live_count\" must be an integer", 0);
    if (run_verb("show", b, NULL) != 0)
        fail_msg("show with a damaged allocations.json failed: %s", err);
    write_file_in(b, "allocations.json", "{\"live_count\":1,\"live_bytes\":5,\"by_device\":[{\"device\":"
        "\"x\"}],\"by_api\":[],\"top_stacks\":[{\"stack_id\":1,\"count\":1,\"bytes\":5}],"
        "\"allocations\":[]}", 139);
    if (run_verb("show", b, NULL) != 0 || !strstr(out, "no frame this bundle can name (stack id 1)"))
        fail_msg("show with an unsymbolisable stack: %s%s", out, err);

    /* a leak report whose leaks.json is damaged: refused with a message */
    snprintf(b, sizeof b, "%s/hostile/leak_report_x", scratch);
    assert_int_equal(mkdir(b, 0700), 0);
    write_file_in(b, "manifest.json", "{}", 2);
    write_file_in(b, "leaks.json", "[[[", 3);
    if (run_verb("show", b, NULL) != 1 || !strstr(err, "leaks.json"))
        fail_msg("show of a damaged leak report: rc %s", err);

    /* not a bundle at all */
    snprintf(path, sizeof path, "%s/hostile/plainfile", scratch);
    write_file(path, "x", 1);
    expect_refused(path, "not a bundle directory", 1);
    snprintf(path, sizeof path, "%s/hostile/does-not-exist", scratch);
    expect_refused(path, "No such file", 1);

    /* list over all of the above: none is named oom_dump_*, no crash */
    snprintf(path, sizeof path, "%s/hostile", scratch);
    assert_int_equal(run_verb("list", path, NULL), 0);
}

static void test_list_reports_unreadable_bundles(void **state)
{
    (void)state;
    char dir[1024], b[2048];
    snprintf(dir, sizeof dir, "%s/listdir", scratch);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(b, sizeof b, "%s/oom_dump_20260101T000000Z_1_cpu_1", dir);
    assert_int_equal(mkdir(b, 0700), 0);
    write_file_in(b, "manifest.json", "{oops", 5);
    assert_int_equal(run_verb("list", dir, NULL), 1);
    assert_non_null(strstr(out, "unreadable"));
    assert_int_equal(run_verb("list", dir, "--json"), 1);
    assert_non_null(strstr(out, "\"error\""));
}

/* A dump directory where one bundle is meant: show and plot read its
 * newest (by name: names begin with the UTC time), and say so on stderr. */
static void test_a_directory_means_its_newest(void **state)
{
    (void)state;
    const char *fixtures = getenv("GMP_TEST_FIXTURES");
    assert_non_null(fixtures);
    char dir[1024], newest[256] = "", want[400];
    snprintf(dir, sizeof dir, "%s/bundles_v1/bundles", fixtures);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "oom_dump_", 9) && ++n && strcmp(e->d_name, newest) > 0)
            snprintf(newest, sizeof newest, "%s", e->d_name);
    closedir(d);
    assert_int_equal(run_verb("show", dir, NULL), 0);
    snprintf(want, sizeof want, "Bundle            %s\n", newest);
    if (strncmp(out, want, strlen(want)))
        fail_msg("show of the directory: %.300s", out);
    snprintf(want, sizeof want, " holds %d bundle(s) (`gmp-inspect list` names them); the newest: ",
             n);
    if (!strstr(err, want) || !strstr(err, newest))
        fail_msg("stderr: %s", err);
    char svg[sizeof scratch + 32];
    snprintf(svg, sizeof svg, "%s/newest.svg", scratch);
    const char *argv[] = {inspect_path(), "plot", dir, "-o", svg, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
    struct stat st;
    assert_int_equal(stat(svg, &st), 0);
    assert_non_null(strstr(err, newest));
}

/* show --json: the same answer as the text, as JSON a script reads. */
static void test_show_as_json(void **state)
{
    (void)state;
    assert_int_equal(run_verb("show", good, NULL), 0);
    static char text[sizeof out];
    snprintf(text, sizeof text, "%s", out);
    assert_int_equal(run_verb("show", "--json", good), 0);
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr);
    if (!json_is_object(doc))
        fail_msg("not one JSON object (%s): %s", jerr.text, out);
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    const char *headline = json_string_value(json_object_get(doc, "what_happened"));
    json_t *causes = json_object_get(doc, "likely_causes");
    const char *first = json_string_value(json_object_get(json_array_get(causes, 0), "cause"));
    char line[600], cause[600];
    snprintf(line, sizeof line, "\nWhat happened:    %s\n", headline ? headline : "?");
    snprintf(cause, sizeof cause, "\n  1. %s\n", first ? first : "?");
    if (!kind || strcmp(kind, "out_of_memory") ||
        !json_is_true(json_object_get(doc, "death_of_memory")) || !strstr(text, line) ||
        !strstr(text, cause) ||
        json_integer_value(json_object_get(json_object_get(doc, "failed_request"), "size")) !=
            3ll << 30)
        fail_msg("show --json:\n%s\nshow:\n%s", out, text);
    json_decref(doc);
    /* two bundles: an array of two */
    const char *argv[] = {inspect_path(), "show", "--json", good, good, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
    doc = json_loads(out, 0, &jerr);
    assert_int_equal(json_array_size(doc), 2);
    json_decref(doc);
}

static void test_help_and_usage(void **state)
{
    (void)state;
    static const char *const verbs[] = {"list", "show", "events", "validate"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run_verb(verbs[i], "--help", NULL), 0);
        assert_non_null(strstr(out, "usage: gmp-inspect"));
        assert_non_null(strstr(out, verbs[i]));
    }
    assert_int_equal(run_verb("--help", NULL, NULL), 0);
    assert_int_equal(run_verb("frobnicate", NULL, NULL), 2);
    assert_int_equal(run_verb("validate", NULL, NULL), 2);
    assert_int_equal(run_verb("show", NULL, NULL), 2);
    assert_int_equal(run_verb("validate", "--bogus", NULL), 2);
    assert_int_equal(run_verb("show", good, "--bogus"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_bundles),
        cmocka_unit_test(test_raw_control_characters_shown_escaped),
        cmocka_unit_test(test_cgroup_kills_are_not_all_this_process),
        cmocka_unit_test(test_hostile_bundles),
        cmocka_unit_test(test_list_reports_unreadable_bundles),
        cmocka_unit_test(test_a_directory_means_its_newest),
        cmocka_unit_test(test_show_as_json),
        cmocka_unit_test(test_help_and_usage),
    };
    return cmocka_run_group_tests_name("inspect", tests, setup, teardown);
}
