/*
 * test_inspect.c — gmp-inspect as a user and a CI job run it: a bundle of
 * ours and one of the Python recorder read and validate; every hostile input
 * (truncated, random bytes, 100k-deep nesting, a 600 MiB file, symlinked or
 * FIFO members, wrong types, path tricks, missing files, count mismatches)
 * gets a clear message and a non-zero exit from every verb (export too),
 * never a crash or a hang; --help works for each verb; usage errors exit 2.
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
    const char *argv[] = {inspect_path(), verb, arg, arg2, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    if (WIFSIGNALED(status))
        fail_msg("gmp-inspect %s %s died of signal %d", verb, arg ? arg : "",
                 WTERMSIG(status));
    /* a sanitizer build exits 1 on a finding, like a refused bundle */
    if (strstr(err, "Sanitizer") || strstr(err, "runtime error:"))
        fail_msg("gmp-inspect %s %s: %s", verb, arg ? arg : "", err);
    return WEXITSTATUS(status);
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

/* A recorder whose bundles go to scratch/NAME. */
static gmp_recorder *recorder_in(const char *name)
{
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/%s", scratch, name);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", scratch);
    return gmp_recorder_create(&cfg);
}

/* The Python API's MemoryError with no failed call, alone in dump dir
 * name: its path into bundle. */
static void python_memory_error(const char *name, char *bundle, size_t cap)
{
    gmp_recorder *rec = recorder_in(name);
    gmp_dump_request req = {.reason = "MemoryError", .exception_type = "MemoryError",
                            .exception_message = "", .backend = GMP_BACKEND_CPU};
    assert_non_null(gmp_dump(rec, &req, bundle, cap));
    gmp_recorder_destroy(rec);
}

/* rec's bundle for req, then rec destroyed and show of the bundle into out. */
static void show_of_dump(gmp_recorder *rec, const gmp_dump_request *req)
{
    char bundle[4096];
    assert_non_null(gmp_dump(rec, req, bundle, sizeof bundle));
    gmp_recorder_destroy(rec);
    assert_int_equal(run_verb("show", bundle, NULL), 0);
}

/* Pinned host memory is said as such in "In use at dump", beside the
 * host's own: never two lines of "host". */
static void test_pinned_host_said_so(void **state)
{
    (void)state;
    gmp_recorder *rec = recorder_in("pinned");
    gmp_event host = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CPU, .device = -1,
                      .api = GMP_API_MALLOC, .size = 2u << 20, .in_use = 2u << 20};
    gmp_event pinned = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CUDA, .device = -1,
                        .api = GMP_API_CUDA_HOST_ALLOC, .size = 4096, .in_use = 4096};
    gmp_record(rec, &host);
    gmp_record(rec, &pinned);
    gmp_dump_request req = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                            .failed = {1, GMP_API_MALLOC, 1ull << 40, -1, 12}};
    show_of_dump(rec, &req);
    if (!strstr(out, "In use at dump:   host 2.0 MiB; pinned host 4.0 KiB\n"))
        fail_msg("show says:\n%s", out);
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

static void put(const char *bundle, const char *file, const char *data, size_t len)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", bundle, file);
    unlink(path);
    write_file(path, data, len);
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
        put(copy, "metadata.json", text, strlen(text));
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
        put(b, "metadata.json", metadata, (size_t)n);
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
    put(b, "manifest.json", "{\"schema_version\": 1, \"bundle_na", 32);
    expect_refused(b, "invalid JSON", 1);

    copy_good("random", b, sizeof b);
    srand(3);
    for (int i = 0; i < 4096; i++)
        buf[i] = (char)rand();
    put(b, "metadata.json", buf, 4096);
    expect_refused(b, "metadata.json", 1);

    copy_good("deep", b, sizeof b);
    memset(buf, '[', 100000);
    memset(buf + 100000, ']', 100000);
    put(b, "events.json", buf, 200000);
    expect_refused(b, "depth", 1);
    buf[0] = '{';
    memcpy(buf, "{\"a\":", 5);
    memset(buf + 5, '{', 99995);
    put(b, "metadata.json", buf, 100000);
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
    put(b, "manifest.json", types, sizeof types - 1);
    expect_refused(b, "field \"schema_version\" must be an integer", 0);
    assert_non_null(strstr(out, "field \"files\" must be an array"));
    assert_non_null(strstr(out, "field \"event_count\" must be an integer"));
    assert_true(count_lines(out) >= 6); /* one line per problem */
    if (run_verb("show", b, NULL) != 0) /* still says what it can */
        fail_msg("show on a manifest of wrong types failed: %s", err);

    copy_good("array", b, sizeof b);
    put(b, "manifest.json", "[1,2,3]", 7);
    expect_refused(b, "must be JSON objects", 1);

    copy_good("empty", b, sizeof b);
    put(b, "metadata.json", "", 0);
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
    put(b, "manifest.json", escape, sizeof escape - 1);
    expect_refused(b, "not a plain file name", 0);

    copy_good("count", b, sizeof b);
    put(b, "events.json", "[{}, {}]", 8);
    expect_refused(b, "event_count is 50 but events.json holds 2", 0);

    copy_good("newer", b, sizeof b);
    static const char newer[] =
        "{\"schema_version\":99,\"bundle_name\":\"newer\",\"created_at_utc\":"
        "\"2026-03-03T12:00:00Z\",\"reason\":\"x\",\"backend\":\"cuda\",\"event_count\":50,"
        "\"files\":[\"manifest.json\",\"events.json\",\"metadata.json\",\"environment.json\"]}";
    put(b, "manifest.json", newer, sizeof newer - 1);
    expect_refused(b, "newer than this tool reads", 0);

    /* allocations.json of the wrong shape: validate says so, show says the rest */
    copy_good("held", b, sizeof b);
    static const char held_manifest[] =
        "{\"schema_version\":1,\"bundle_name\":\"held\",\"created_at_utc\":"
        "\"2026-03-03T12:00:00Z\",\"reason\":\"x\",\"backend\":\"cuda\",\"event_count\":50,"
        "\"files\":[\"manifest.json\",\"events.json\",\"metadata.json\",\"environment.json\","
        "\"allocations.json\",\"stacks.json\"]}";
    put(b, "manifest.json", held_manifest, sizeof held_manifest - 1);
    static const char held[] = "{\"live_count\":\"2\",\"live_bytes\":-1,\"by_device\":[7,{}],"
                               "\"top_stacks\":[{\"stack_id\":1.5,\"count\":1,\"bytes\":1}],"
                               "\"allocations\":{}}";
    put(b, "allocations.json", held, sizeof held - 1);
    put(b, "stacks.json", "[{\"id\":1,\"frames\":[\"zz\",null,7]}]", 33);
    expect_refused(b, "allocations.json: field \"live_count\" must be an integer", 0);
    if (run_verb("show", b, NULL) != 0)
        fail_msg("show with a damaged allocations.json failed: %s", err);
    put(b, "allocations.json", "{\"live_count\":1,\"live_bytes\":5,\"by_device\":[{\"device\":"
        "\"x\"}],\"by_api\":[],\"top_stacks\":[{\"stack_id\":1,\"count\":1,\"bytes\":5}],"
        "\"allocations\":[]}", 139);
    if (run_verb("show", b, NULL) != 0 || !strstr(out, "no frame this bundle can name (stack id 1)"))
        fail_msg("show with an unsymbolisable stack: %s%s", out, err);

    /* a leak report whose leaks.json is damaged: refused with a message */
    snprintf(b, sizeof b, "%s/hostile/leak_report_x", scratch);
    assert_int_equal(mkdir(b, 0700), 0);
    put(b, "manifest.json", "{}", 2);
    put(b, "leaks.json", "[[[", 3);
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
    put(b, "manifest.json", "{oops", 5);
    assert_int_equal(run_verb("list", dir, NULL), 1);
    assert_non_null(strstr(out, "unreadable"));
    assert_int_equal(run_verb("list", dir, "--json"), 1);
    assert_non_null(strstr(out, "\"error\""));
}

/* A bundle of `reason` on a 4 GiB device 0 with `free` bytes free: `allocs`
 * 20 MiB cuMemCreates before it, the failed one (size 0: none) and the
 * framework's message; `gmp-inspect show` of it into out. */
static void show_of(const char *name, const char *reason, int allocs, uint64_t failed_size,
                    uint64_t free_bytes, const char *message)
{
    gmp_recorder *rec = recorder_in(name);
    for (int i = 0; i < allocs; i++) {
        gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CUDA, .device = 0,
                        .api = GMP_API_CU_MEM_CREATE, .address = 0x1000u + (uint64_t)i,
                        .size = 20u << 20, .in_use = (uint64_t)(i + 1) * (20u << 20)};
        gmp_record(rec, &ev);
    }
    gmp_device_state dev = {.backend = GMP_BACKEND_CUDA, .device = 0, .free_bytes = free_bytes,
                            .total = 4ull << 30, .known = GMP_DS_USED,
                            .used_bytes = (4ull << 30) - free_bytes, .source = "cuMemGetInfo"};
    gmp_dump_request req = {.reason = reason, .exception_type = "OutOfMemoryError",
                            .exception_message = message, .backend = GMP_BACKEND_CUDA,
                            .devices = &dev, .device_count = 1,
                            .failed = {failed_size > 0, GMP_API_CU_MEM_CREATE, failed_size, 0, 2,
                                       (uint64_t)allocs * (20u << 20)}};
    show_of_dump(rec, &req);
}

/* What a framework's message says it asked for, when no call shows it: PyTorch's
 * expandable segments map a request 20 MiB at a time (an H100 said "Tried to
 * allocate 79.66 GiB" of a 79.18 GiB device, and the pieces looked like a leak
 * and the free memory after the release like fragmentation); JAX's BFC pool
 * fails with no call failing at all. */
static void test_the_request_the_framework_states(void **state)
{
    (void)state;
    show_of("pieces", "CUDA_ERROR_OUT_OF_MEMORY", 200, 20u << 20, 3u << 30,
            "CUDA out of memory. Tried to allocate 4.10 GiB. GPU 0 has a total capacity of "
            "4.00 GiB of which 3.00 GiB is free. Of the allocated memory 0 bytes is allocated "
            "by PyTorch");
    if (!strstr(out, "1. a request larger than the device could ever give\n     evidence: asked "
                     "for 4.1 GiB at once (its message says; the driver was asked for it 20.0 "
                     "MiB at a time); device 0 has 4.0 GiB in all") ||
        !strstr(out, "cuMemCreate of 20.0 MiB on device 0 failed with CUDA_ERROR_OUT_OF_MEMORY "
                     "(code 2), one piece of the 4.1 GiB its message says was asked for") ||
        strstr(out, "2. ") || strstr(out, "leak") || strstr(out, "fragmentation"))
        fail_msg("pieces:\n%s", out);

    show_of("pool", "message_pattern:out of memory", 8, 0, 2u << 30,
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 5.54GiB with allocator "
            "GPU_0_bfc on device 0.");
    if (!strstr(out, "1. the framework's own memory pool ran out") ||
        !strstr(out, "2. a request larger than the device could ever give\n     evidence: asked "
                     "for 5.5 GiB at once (its message says); device 0 has 4.0 GiB in all"))
        fail_msg("pool:\n%s", out);

    /* the size a message rounds is the call's own, not a larger request */
    show_of("whole", "cudaErrorMemoryAllocation", 8, 100u << 20, 50u << 20,
            "CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a total capacity of "
            "4.00 GiB of which 50.00 MiB is free. 3 allocated tensors");
    if (strstr(out, "one piece") || strstr(out, "its message says") ||
        !strstr(out, "a single request larger than the device's free memory"))
        fail_msg("whole:\n%s", out);
}

/* The Python API alone (no preload) writes a MemoryError with no failed
 * call: its address space at 96% of RLIMIT_AS is the same verdict the
 * preload's bundle gives, "a host limit was reached", not "nothing in this
 * bundle points at one". */
static void test_limit_without_a_failed_call(void **state)
{
    (void)state;
    char bundle[4096];
    python_memory_error("no-call", bundle, sizeof bundle);
    json_t *env = bundle_file(bundle, "environment.json"), *md = bundle_file(bundle, "metadata.json");
    json_object_set_new(json_object_get(json_object_get(env, "process"), "rlimits"), "as",
                        json_pack("{s:I, s:I}", "soft", (json_int_t)1 << 30, "hard",
                                  (json_int_t)1 << 30));
    json_object_set_new(json_object_get(json_object_get(md, "host_state"), "process"), "vm_size",
                        json_integer((json_int_t)((1ll << 30) / 100 * 96)));
    char *text = json_dumps(env, 0);
    put(bundle, "environment.json", text, strlen(text));
    free(text);
    text = json_dumps(md, 0);
    put(bundle, "metadata.json", text, strlen(text));
    free(text);
    json_decref(env);
    json_decref(md);
    assert_int_equal(run_verb("show", bundle, NULL), 0);
    if (!strstr(out, "  1. a host limit was reached (the address-space limit)\n     evidence: "
                     "RLIMIT_AS is 1.0 GiB; 983.0 MiB (96% of it) was mapped (VmSize) when the "
                     "bundle was written; the failed request's size is not known\n"))
        fail_msg("show:\n%s", out);
}

/* Growth with a single free among its allocations (a scratch given back
 * once, as PyTorch's allocator does before a failure): the evidence counts
 * it as "only 1 free", not "1 frees". */
static void test_growth_with_one_free(void **state)
{
    (void)state;
    gmp_recorder *rec = recorder_in("one-free");
    uint64_t in_use = 0;
    for (int i = 0; i < 8; i++) {
        in_use += 256ull << 20;
        gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CPU, .device = -1,
                        .api = GMP_API_MALLOC, .address = 0x10000000ull * (uint64_t)(i + 1),
                        .size = 256ull << 20, .in_use = in_use};
        gmp_record(rec, &ev);
        if (i == 3) {
            in_use -= 256ull << 20;
            gmp_event gone = {.type = GMP_EV_FREE, .backend = GMP_BACKEND_CPU, .device = -1,
                              .api = GMP_API_FREE, .address = 0x40000000ull,
                              .size = 256ull << 20, .in_use = in_use};
            gmp_record(rec, &gone);
        }
    }
    gmp_dump_request req = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU,
                            .failed = {1, GMP_API_MALLOC, 256ull << 20, -1, 12}};
    show_of_dump(rec, &req);
    if (!strstr(out, "in 8 allocations and only 1 free before the failure"))
        fail_msg("show:\n%s", out);
}

/* PHP's fatal error names the script and line where memory_limit was
 * reached, and no call failed: "Failed at" is that place (in show, its
 * JSON and triage), the script by its name; words that only look like it
 * name none. */
static void test_failed_at_from_php_words(void **state)
{
    (void)state;
    static const struct {
        const char *said, *want;
    } cases[] = {
        {"PHP Fatal error:  Allowed memory size of 134217728 bytes exhausted (tried to allocate "
         "20480 bytes) in /srv/app/src/Loader.php on line 88",
         "\nFailed at:        Loader.php:88\n"},
        {"Allowed memory size of 1 bytes exhausted in on line 4", NULL},
        {"Allowed memory size of 1 bytes exhausted (tried to allocate 2 bytes) in /x/y.php on line",
         NULL},
        {"Allowed memory size of 1 bytes exhausted (tried to allocate 2 bytes) in /x/ on line 3",
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32];
        snprintf(name, sizeof name, "php-%zu", i);
        gmp_recorder *rec = recorder_in(name);
        gmp_dump_request req = {.reason = "message_pattern:php: memory exhausted",
                                .exception_type = "php.E_ERROR",
                                .exception_message = cases[i].said,
                                .backend = GMP_BACKEND_CPU};
        show_of_dump(rec, &req);
        if (cases[i].want ? !strstr(out, cases[i].want) : strstr(out, "\nFailed at:") != NULL)
            fail_msg("case %zu, show:\n%s", i, out);
    }
}

/* A device failure whose printed Python stack is a framework's Cython
 * frame alone (CuPy's pool: "cupy/cuda/memory.pyx"), while the failing
 * call's frames, walked from the interpreter, reach the program's line:
 * "Failed at" and the Python stack are the program's. */
static void test_failed_at_past_cython_frames(void **state)
{
    (void)state;
    gmp_recorder *rec = recorder_in("cython");
    gmp_dump_request req = {.reason = "cudaErrorMemoryAllocation", .backend = GMP_BACKEND_CUDA,
                            .exception_type = "OutOfMemoryError",
                            .exception_message = "Out of memory allocating 1,073,741,824 bytes",
                            .failed = {.present = 1, .api = GMP_API_CUDA_MALLOC,
                                       .size = 1ull << 30, .device = 0, .code = 2,
                                       .stack_id = 7}};
    char bundle[4096];
    assert_non_null(gmp_dump(rec, &req, bundle, sizeof bundle));
    gmp_recorder_destroy(rec);
    static const char stacks[] =
        "[{\"id\": 7, \"frames\": [], \"python\": ["
        "{\"file\": \"/home/u/train.py\", \"line\": 12, \"function\": \"step\"},"
        "{\"file\": \"/home/u/train.py\", \"line\": 30, \"function\": \"<module>\"}]}]";
    static const char printed[] =
        "Stack (most recent call first):\n"
        "  File \"cupy/cuda/memory.pyx\", line 1560 in "
        "cupy.cuda.memory.SingleDeviceMemoryPool._try_malloc\n";
    put(bundle, "stacks.json", stacks, sizeof stacks - 1);
    assert_int_equal(gmp_bundle_attach(bundle, "python_traceback.txt", printed,
                                       sizeof printed - 1),
                     0);
    assert_int_equal(run_verb("show", bundle, NULL), 0);
    if (!strstr(out, "\nFailed at:        train.py:12 in step\n") ||
        !strstr(out, "\nPython stack:     /home/u/train.py:12 in step  (innermost first)\n") ||
        strstr(out, "memory.pyx"))
        fail_msg("show:\n%s", out);
}

/* The Python API's MemoryError, no call failed: "Failed at" is the
 * traceback's innermost line of the program's, in show's text as in its
 * JSON (the text had only the Python stack). */
static void test_failed_at_from_a_traceback(void **state)
{
    (void)state;
    char bundle[4096];
    python_memory_error("traceback", bundle, sizeof bundle);
    static const char printed[] = "Traceback (most recent call last):\n"
                                  "  File \"/srv/job/train.py\", line 41, in <module>\n"
                                  "    main()\n"
                                  "  File \"/srv/job/train.py\", line 29, in grow\n"
                                  "    x = bytearray(1 << 40)\n"
                                  "MemoryError\n";
    assert_int_equal(gmp_bundle_attach(bundle, "python_traceback.txt", printed,
                                       sizeof printed - 1),
                     0);
    assert_int_equal(run_verb("show", bundle, NULL), 0);
    if (!strstr(out, "\nFailed at:        train.py:29 in grow\n"))
        fail_msg("show:\n%s", out);
    assert_int_equal(run_verb("show", bundle, "--json"), 0);
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "failed_at")),
                        "train.py:29 in grow");
    json_decref(doc);
}

/* The frames a runtime printed after its OOM line (printed_stack.txt):
 * "Failed at" is the innermost of the program's own, past the JDK's
 * classes, Node's own modules and node_modules; a stack of the library's
 * alone names its innermost frame, said to be a library's; lines that only
 * look like frames name none. */
static void test_failed_at_from_printed_frames(void **state)
{
    (void)state;
    static const struct {
        const char *printed, *want;
    } cases[] = {
        {"\tat java.base/java.util.Arrays.copyOf(Arrays.java:3512)\n"
         "\tat java.base/java.util.ArrayList.grow(ArrayList.java:237)\n"
         "\tat com.acme.Loader.fill(Loader.java:41)\n\tat com.acme.Main.main(Main.java:9)\n",
         "\nFailed at:        Loader.java:41 in com.acme.Loader.fill\n"},
        {"    at new ArrayBuffer (<anonymous>)\n"
         "    at readAll (/srv/app/node_modules/pkg/read.js:9:3)\n"
         "    at load (/srv/app/load.js:12:7)\n"
         "    at Module._compile (node:internal/modules/cjs/loader:1521:14)\n",
         "\nFailed at:        load.js:12 in load\n"},
        {"    at file:///srv/app/main.mjs:4:11\n", "\nFailed at:        main.mjs:4\n"},
        {"\tat java.base/java.util.Arrays.copyOf(Arrays.java:3512)\n",
         "\nFailed at:        Arrays.java:3512 in java.util.Arrays.copyOf  (no frame of the "
         "program's own)\n"},
        {"\tat (X.java:1)\n\tat a.b(X.java:)\n\tat a.b(X.java:-3)\n\tat a.b(:7)\n"
         "    at f (x.js:1)\n    at f (:1:2)\n    at f (x.js:0:2)\n    at \n",
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32], bundle[4096];
        snprintf(name, sizeof name, "printed-%zu", i);
        gmp_recorder *rec = recorder_in(name);
        gmp_dump_request req = {.reason = "message_pattern:java.lang.outofmemoryerror",
                                .exception_type = "OutOfMemoryError",
                                .exception_module = "java.lang",
                                .exception_message = "Java heap space",
                                .backend = GMP_BACKEND_CPU};
        assert_non_null(gmp_dump(rec, &req, bundle, sizeof bundle));
        gmp_recorder_destroy(rec);
        assert_int_equal(gmp_bundle_attach(bundle, "printed_stack.txt", cases[i].printed,
                                           strlen(cases[i].printed)),
                         0);
        assert_int_equal(run_verb("show", bundle, NULL), 0);
        if (cases[i].want ? !strstr(out, cases[i].want) : strstr(out, "\nFailed at:") != NULL)
            fail_msg("case %zu, show:\n%s", i, out);
    }
}

/* A pressure warning whose evidence lists its cgroup at PCT% of its limit,
 * written at a threshold of 90%: show of it into out. */
static void warning_with_cgroup_at(const char *name, int pct)
{
    gmp_recorder *rec = recorder_in(name);
    char evidence[300];
    snprintf(evidence, sizeof evidence,
             "cuda:0 in use 140.0 GiB of cuda:0 memory 140.0 GiB (99%%); cgroup usage %d.0 GiB "
             "of cgroup memory limit 100.0 GiB (%d%%)",
             pct, pct);
    gmp_dump_request req = {.reason = "memory_pressure", .exception_type = "memory_pressure",
                            .exception_message = "cuda:0 in use 140.0 GiB is 99% of cuda:0 "
                                                 "memory 140.0 GiB (threshold 90%).",
                            .backend = GMP_BACKEND_CUDA, .confirmed_by = "watchdog",
                            .evidence = evidence};
    show_of_dump(rec, &req);
}

/* "near" is at or above the threshold the warning was written at: a
 * cgroup at 2% of its limit is not near (a warning of an H200 that was
 * full called it so), one at 95% is. */
static void test_near_is_past_the_threshold(void **state)
{
    (void)state;
    warning_with_cgroup_at("far", 2);
    if (strstr(out, "host limit was near"))
        fail_msg("a cgroup at 2%% called near:\n%s", out);
    warning_with_cgroup_at("near", 95);
    if (!strstr(out, "a host limit was near (the memory cgroup)"))
        fail_msg("a cgroup at 95%% not called near:\n%s", out);
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
        cmocka_unit_test(test_pinned_host_said_so),
        cmocka_unit_test(test_cgroup_kills_are_not_all_this_process),
        cmocka_unit_test(test_hostile_bundles),
        cmocka_unit_test(test_list_reports_unreadable_bundles),
        cmocka_unit_test(test_the_request_the_framework_states),
        cmocka_unit_test(test_limit_without_a_failed_call),
        cmocka_unit_test(test_growth_with_one_free),
        cmocka_unit_test(test_failed_at_from_php_words),
        cmocka_unit_test(test_near_is_past_the_threshold),
        cmocka_unit_test(test_failed_at_past_cython_frames),
        cmocka_unit_test(test_failed_at_from_a_traceback),
        cmocka_unit_test(test_failed_at_from_printed_frames),
        cmocka_unit_test(test_a_directory_means_its_newest),
        cmocka_unit_test(test_show_as_json),
        cmocka_unit_test(test_help_and_usage),
    };
    return cmocka_run_group_tests_name("inspect", tests, setup, teardown);
}
