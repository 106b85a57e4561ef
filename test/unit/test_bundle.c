/*
 * test_bundle.c — what a bundle holds and how it appears: the four files
 * with the seed's fields and values, 0700/0600 modes, the dump directory
 * made only when a bundle is written, the ring file in the run directory
 * (never the working directory) and gone after a normal exit, a refused
 * symlink at the dump directory, and a writer SIGKILLed at random moments
 * never leaving a visible oom_dump_* that fails `gmp-inspect validate`;
 * sizes and times past INT64_MAX written as the integers they are.
 * (test_bundle_rewrites.c has a bundle rewritten after it was written.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "bundle.h"
#include "recorder_fixtures.h"
#include "support.h"

#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void assert_mode(const char *path, mode_t want)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    if ((st.st_mode & 07777) != want)
        fail_msg("%s has mode %o, want %o", path, st.st_mode & 07777, want);
}

static void test_bundle_contents(void **state)
{
    (void)state;
    char dir[256], path[4096], dumps[512];
    scratch_make(dir, sizeof dir, "bundle");
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    gmp_recorder *rec = make_recorder(dir, 100, 5);
    record_allocs(rec, 150);

    struct stat st;
    assert_int_equal(stat(dumps, &st), -1); /* nothing written yet: no directory */
    const char *ring = gmp_recorder_ring_path(rec);
    char run_prefix[512];
    snprintf(run_prefix, sizeof run_prefix, "%s/run/ring_", dir);
    assert_int_equal(strncmp(ring, run_prefix, strlen(run_prefix)), 0);
    assert_mode(ring, 0600);

    assert_non_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
    assert_mode(dumps, 0700);
    assert_mode(path, 0700);
    const char *name = strrchr(path, '/') + 1;
    char stamp[32];
    int pid = 0, seq = 0;
    assert_int_equal(sscanf(name, "oom_dump_%16[0-9TZ]_%d_cuda_%d", stamp, &pid, &seq), 3);
    assert_int_equal(pid, getpid());
    assert_int_equal(strlen(stamp), 16);

    static const char *const files[] = {"manifest.json", "events.json", "metadata.json",
                                        "environment.json", "modules.json"};
    for (size_t i = 0; i < 5; i++) {
        char f[8192];
        snprintf(f, sizeof f, "%s/%s", path, files[i]);
        assert_mode(f, 0600);
    }
    json_t *man = bundle_file(path, "manifest.json");
    assert_int_equal(json_integer_value(json_object_get(man, "schema_version")), 2);
    assert_string_equal(json_string_value(json_object_get(man, "bundle_name")), name);
    assert_string_equal(json_string_value(json_object_get(man, "reason")),
                        "cudaErrorMemoryAllocation");
    assert_string_equal(json_string_value(json_object_get(man, "backend")), "cuda");
    assert_int_equal(json_integer_value(json_object_get(man, "event_count")), 100);
    const char *created = json_string_value(json_object_get(man, "created_at_utc"));
    assert_int_equal(strlen(created), 20);
    assert_int_equal(created[10], 'T');
    assert_int_equal(json_array_size(json_object_get(man, "files")), 5);
    json_decref(man);

    /* the module map: this program and libc, each with its load bias and
     * build-id, as /proc/self/maps and the ELF notes give them */
    json_t *mods = bundle_file(path, "modules.json");
    size_t mi;
    json_t *mod;
    int self = 0, libc = 0;
    json_array_foreach(mods, mi, mod) {
        const char *mpath = json_str(mod, "path"), *id = json_str(mod, "build_id");
        const char *slash = strrchr(mpath, '/');
        assert_non_null(slash);
        assert_int_equal(strncmp(json_str(mod, "base"), "0x", 2), 0);
        if (!strcmp(slash, "/test_bundle")) {
            self++;
            assert_true(strlen(id) == 40 && strspn(id, "0123456789abcdef") == 40);
        }
        libc += !strncmp(slash, "/libc.so", 8) || !strncmp(slash, "/libc-", 6);
    }
    assert_int_equal(self, 1);
    assert_int_equal(libc, 1);
    json_decref(mods);

    json_t *events = bundle_file(path, "events.json");
    assert_int_equal(json_array_size(events), 100);
    json_t *first = json_array_get(events, 0), *last = json_array_get(events, 99);
    assert_int_equal(json_integer_value(json_object_get(first, "seq")), 50);
    assert_int_equal(json_integer_value(json_object_get(last, "seq")), 149);
    assert_string_equal(json_string_value(json_object_get(last, "event_type")), "alloc");
    assert_string_equal(json_string_value(json_object_get(last, "api")), "cudaMalloc");
    assert_int_equal(json_integer_value(json_object_get(last, "device_id")), 0);
    assert_int_equal(json_integer_value(json_object_get(last, "bytes_in_use")), 150 << 20);
    assert_true(json_is_real(json_object_get(last, "timestamp")));
    assert_int_equal(json_integer_value(json_object_get(last, "thread_id")), getpid());
    json_decref(events);

    json_t *md = bundle_file(path, "metadata.json");
    assert_string_equal(json_string_value(json_object_get(md, "reason")),
                        "cudaErrorMemoryAllocation");
    assert_string_equal(json_string_value(json_object_get(md, "exception_module")),
                        "libcudart");
    assert_string_equal(json_string_value(json_object_get(md, "context")), "unit-test");
    assert_int_equal(json_integer_value(json_object_get(md, "captured_event_count")), 100);
    json_t *custom = json_object_get(md, "custom_metadata");
    assert_int_equal(json_integer_value(json_object_get(custom, "batch_size")), 32);
    assert_string_equal(json_string_value(json_object_get(custom, "model_name")), "resnet50");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_string_value(json_object_get(fr, "api")), "cudaMalloc");
    assert_int_equal(json_integer_value(json_object_get(fr, "size")), 2ll << 30);
    assert_int_equal(json_integer_value(json_object_get(fr, "code")), 2);
    assert_string_equal(json_string_value(json_object_get(md, "confirmed_by")),
                        "second_failure");
    assert_int_equal(json_integer_value(json_object_get(md, "recovered_episodes")), 1);
    json_t *use = json_array_get(json_object_get(md, "bytes_in_use"), 0);
    assert_int_equal(json_integer_value(json_object_get(use, "bytes")), 150 << 20);
    json_decref(md);

    json_t *env = bundle_file(path, "environment.json");
    assert_int_equal(json_integer_value(json_object_get(env, "pid")), getpid());
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_string_equal(json_string_value(json_object_get(env, "cwd")), cwd);
    json_t *sys = json_object_get(env, "system");
    assert_string_equal(json_string_value(json_object_get(sys, "platform")), "Linux");
    assert_string_equal(json_string_value(json_object_get(sys, "detected_backend")), "cuda");
    assert_true(json_is_array(json_object_get(json_object_get(env, "process"), "cmdline")));
    json_decref(env);

    /* the tool agrees */
    const char *argv[] = {inspect_path(), "validate", path, NULL};
    char out[4096], err[4096];
    assert_int_equal(run_capture(argv, out, sizeof out, err, sizeof err), 0);

    /* a normal exit removes the ring */
    char ring_copy[4096];
    snprintf(ring_copy, sizeof ring_copy, "%s", ring);
    gmp_recorder_destroy(rec);
    assert_int_equal(access(ring_copy, F_OK), -1);
    scratch_remove(dir);
}

static void test_secrets_never_written(void **state)
{
    (void)state;
    char dir[256], path[4096];
    scratch_make(dir, sizeof dir, "secret");
    setenv("GMP_API_TOKEN", "hunter2-token-value", 1);
    setenv("NCCL_PASSWORD", "hunter2-password-value", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
    gmp_recorder *rec = make_recorder(dir, 64, 5);
    record_allocs(rec, 3);
    assert_non_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
    json_t *env = bundle_file(path, "environment.json");
    json_t *vars = json_object_get(env, "environment");
    assert_string_equal(json_string_value(json_object_get(vars, "CUDA_VISIBLE_DEVICES")), "0,1");
    assert_string_equal(json_string_value(json_object_get(vars, "GMP_API_TOKEN")), "[REDACTED]");
    char *all = json_dumps(env, 0);
    assert_null(strstr(all, "hunter2"));
    free(all);
    json_decref(env);
    unsetenv("GMP_API_TOKEN");
    unsetenv("NCCL_PASSWORD");
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

/* Another process with our pid (containers sharing a dump directory) has
 * taken the names: the bundle goes to a free one and still validates. */
static void test_taken_names_are_skipped(void **state)
{
    (void)state;
    char dir[256], path[4096], dumps[512], taken[1024], stamp[32];
    scratch_make(dir, sizeof dir, "taken");
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    assert_int_equal(mkdir(dumps, 0700), 0);
    gmp_recorder *rec = make_recorder(dir, 64, 100);
    record_allocs(rec, 5);
    time_t now = time(NULL);
    for (time_t t = now; t <= now + 1; t++) {
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        for (int seq = 1; seq <= 8; seq++) {
            snprintf(taken, sizeof taken, "%s/oom_dump_%s_%d_cuda_%d", dumps, stamp,
                     getpid(), seq);
            mkdir(taken, 0700);
        }
    }
    assert_non_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
    const char *argv[] = {inspect_path(), "validate", path, NULL};
    char out[4096], err[4096];
    if (run_capture(argv, out, sizeof out, err, sizeof err) != 0)
        fail_msg("bundle under a free name does not validate: %s", out);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

static void test_disabled_writes_nothing(void **state)
{
    (void)state;
    char dir[256], path[4096], dumps[512];
    scratch_make(dir, sizeof dir, "disabled");
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    cfg.enabled = 0;
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/dumps", dir);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", dir);
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    gmp_event ev = {.type = GMP_EV_ALLOC, .size = 1};
    assert_int_equal(gmp_record(rec, &ev), -1);
    assert_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    assert_int_equal(access(dumps, F_OK), -1);
    assert_int_equal(count_prefixed(dir, ""), 0);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

static void test_unsafe_directories(void **state)
{
    (void)state;
    char dir[256], path[4096], target[512], link[512], err[2048];
    scratch_make(dir, sizeof dir, "unsafe");
    /* a run directory open to others: refused, recording goes on in memory */
    snprintf(target, sizeof target, "%s/run", dir);
    assert_int_equal(mkdir(target, 0777), 0);
    assert_int_equal(chmod(target, 0777), 0);
    gmp_recorder *rec = make_recorder(dir, 64, 5);
    stderr_capture_begin();
    record_allocs(rec, 10);
    stderr_capture_end(err, sizeof err);
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "open to group or others"));
    assert_string_equal(gmp_recorder_ring_path(rec), "");
    assert_int_equal(count_prefixed(target, "ring_"), 0);
    gmp_event out[16];
    assert_int_equal(gmp_snapshot(rec, out, 16), 10);

    /* a symlink planted at the dump directory: refused, target untouched;
     * with no home of ours, no bundle */
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    assert_int_equal(mkdir(target, 0700), 0);
    snprintf(link, sizeof link, "%s/dumps", dir);
    assert_int_equal(symlink(target, link), 0);
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL, fallback[512];
    snprintf(fallback, sizeof fallback, "%s/home", dir);
    setenv("HOME", fallback, 1); /* not made yet */
    stderr_capture_begin();
    assert_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
    stderr_capture_end(err, sizeof err);
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "symbolic link (refused); no bundle written"));
    /* with one: the bundle is there, retention too, and one line says so */
    assert_int_equal(mkdir(fallback, 0700), 0);
    strcat(fallback, "/oom_dumps");
    for (int i = 0; i < 7; i++) { /* max_dumps 5 */
        stderr_capture_begin();
        assert_non_null(gmp_dump(rec, &cuda_oom, path, sizeof path));
        stderr_capture_end(err, sizeof err);
        assert_int_equal(count_lines(err), 1);
        assert_non_null(strstr(err, "; bundles go to "));
        assert_non_null(strstr(err, fallback));
        assert_memory_equal(path, fallback, strlen(fallback));
    }
    assert_int_equal(count_prefixed(fallback, "oom_dump_"), 5);
    assert_int_equal(count_prefixed(target, ""), 0);
    if (home)
        setenv("HOME", home, 1);
    else
        unsetenv("HOME");
    free(home);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* A child dumps bundles in a loop until killed at a random moment. */
static void test_sigkill_never_leaves_a_bad_bundle(void **state)
{
    (void)state;
    char dir[256], dumps[512], path[4096];
    scratch_make(dir, sizeof dir, "kill");
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    /* kill anywhere within about three dumps, however fast this build is */
    gmp_recorder *timing = make_recorder(dir, 20000, 1000);
    record_allocs(timing, 20000);
    uint64_t t0 = now_us();
    assert_non_null(gmp_dump(timing, &cuda_oom, path, sizeof path));
    uint64_t window_us = 3 * (now_us() - t0) + 1000;
    gmp_recorder_destroy(timing);
    scratch_remove(dumps);

    srand((unsigned)time(NULL));
    int rounds = 40;
    for (int r = 0; r < rounds; r++) {
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        if (pid == 0) {
            gmp_recorder *rec = make_recorder(dir, 20000, 1000);
            record_allocs(rec, 20000);
            if (write(ready[1], "r", 1) != 1)
                _exit(1);
            for (;;)
                gmp_dump(rec, &cuda_oom, path, sizeof path);
        }
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        close(ready[1]);
        uint64_t delay = (uint64_t)rand() % window_us;
        struct timespec ts = {(time_t)(delay / 1000000), (long)(delay % 1000000) * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    DIR *d = opendir(dumps);
    assert_non_null(d);
    struct dirent *de;
    int visible = 0;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "oom_dump_", 9) != 0)
            continue;
        visible++;
        char out[4096], err[4096];
        snprintf(path, sizeof path, "%s/%s", dumps, de->d_name);
        const char *argv[] = {inspect_path(), "validate", path, NULL};
        int status = run_capture(argv, out, sizeof out, err, sizeof err);
        if (status != 0)
            fail_msg("killed writer left an invalid visible bundle: %s", out);
    }
    closedir(d);
    print_message("%d rounds, kills within %llu us: %d whole bundles visible, "
                  "%d hidden temporaries\n", rounds, (unsigned long long)window_us, visible,
                  count_prefixed(dumps, ".tmp_oom_dump_"));
    assert_true(visible > 0);
    scratch_remove(dir);
}

/* malloc(2^64 - 4): a size past INT64_MAX is an integer in every file,
 * with all its digits, and gmp-inspect reads it as the size it is (show
 * said "malloc of ?" while it was written as a real). */
static void test_sizes_past_int64_are_integers(void **state)
{
    (void)state;
    char dir[256], path[4096], out[1 << 15], err[4096];
    scratch_make(dir, sizeof dir, "bundle-wide");
    gmp_recorder *rec = make_recorder(dir, 64, 5);
    uint64_t huge = UINT64_MAX - 3;
    gmp_event ev = {.type = GMP_EV_OOM, .backend = GMP_BACKEND_CPU, .device = -1,
                    .api = GMP_API_MALLOC, .size = huge, .result = 12};
    assert_int_equal(gmp_record(rec, &ev), 0);
    gmp_dump_request req = {.reason = "ENOMEM", .exception_type = "ENOMEM",
                            .backend = GMP_BACKEND_CPU,
                            .failed = {.present = 1, .api = GMP_API_MALLOC, .size = huge,
                                       .device = -1, .code = 12}};
    assert_non_null(gmp_dump(rec, &req, path, sizeof path));
    static const char *const files[] = {"metadata.json", "events.json"};
    for (size_t i = 0; i < 2; i++) {
        char file[4200], text[1 << 15];
        snprintf(file, sizeof file, "%s/%s", path, files[i]);
        FILE *f = fopen(file, "r");
        assert_non_null(f);
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        if (!strstr(text, "\"size\":18446744073709551612") ||
            strstr(text, "18446744073709551612.0"))
            fail_msg("%s does not hold the size as an integer:\n%s", files[i], text);
    }
    const char *validate[] = {inspect_path(), "validate", path, NULL};
    assert_int_equal(run_capture(validate, out, sizeof out, err, sizeof err), 0);
    const char *show[] = {inspect_path(), "show", path, NULL};
    assert_int_equal(run_capture(show, out, sizeof out, err, sizeof err), 0);
    if (!strstr(out, "\nFailed request:   malloc of 16.0 EiB of host memory") ||
        !strstr(out, "asked for 16.0 EiB at once") || !strstr(out, "malloc             cpu       16.0 EiB"))
        fail_msg("show:\n%s", out);
    /* events --json: the bundle's events as it holds them, the size whole */
    const char *events[] = {inspect_path(), "events", path, "--json", NULL};
    assert_int_equal(run_capture(events, out, sizeof out, err, sizeof err), 0);
    if (strncmp(out, "[\n {\"seq\":0,", 12) || !strstr(out, "\"size\":18446744073709551612,") ||
        strstr(out, "e+19") || strcmp(out + strlen(out) - 4, "}\n]\n"))
        fail_msg("events --json:\n%s", out);
    /* and every other output: the trace's args and triage's JSON carry the
     * integer, the torch snapshot's pickle the same number */
    char trace[4300];
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    const char *to_trace[] = {inspect_path(), "export", path, "--format", "trace-json", "-o",
                              trace, NULL};
    assert_int_equal(run_capture(to_trace, out, sizeof out, err, sizeof err), 0);
    FILE *f = fopen(trace, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    fclose(f);
    out[n] = '\0';
    if (!strstr(out, "\"size\":18446744073709551612,") || strstr(out, "e19") ||
        strstr(out, "gmp-u64"))
        fail_msg("trace-json:\n%s", out);
    const char *triage[] = {inspect_path(), "triage", path, "--format", "json", NULL};
    assert_int_equal(exit_code_of(run_capture(triage, out, sizeof out, err, sizeof err)), 3);
    if (!strstr(out, "\"largest_request\": 18446744073709551612,"))
        fail_msg("triage --format json:\n%s", out);
    char pickle[4300];
    snprintf(pickle, sizeof pickle, "%s/snap.pickle", dir);
    const char *to_torch[] = {inspect_path(), "export", path, "--format", "torch-snapshot",
                              "-o", pickle, NULL};
    assert_int_equal(run_capture(to_torch, out, sizeof out, err, sizeof err), 0);
    f = fopen(pickle, "rb");
    assert_non_null(f);
    n = fread(out, 1, sizeof out, f);
    fclose(f);
    /* LONG1 of 8 bytes: 0xfffffffffffffffc needs a ninth, the sign's */
    static const unsigned char exact[] = {0x8a, 9,    0xfc, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0};
    if (!memmem(out, n, exact, sizeof exact))
        fail_msg("the torch snapshot does not hold 2^64-4 as its size");
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

/* 2^63+1 has 19 digits, as many as a time in nanoseconds in every
 * manifest: in a document with no longer number it is read exactly all the
 * same. */
static void test_nineteen_digits_past_int64(void **state)
{
    (void)state;
    char dir[256], path[4096], out[1 << 15], err[4096];
    scratch_make(dir, sizeof dir, "bundle-19");
    gmp_recorder *rec = make_recorder(dir, 64, 5);
    gmp_event just_past = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CPU, .device = -1,
                           .api = GMP_API_MALLOC, .size = (1ull << 63) + 1};
    assert_int_equal(gmp_record(rec, &just_past), 0);
    gmp_dump_request req = {.reason = "ENOMEM", .exception_type = "ENOMEM",
                            .backend = GMP_BACKEND_CPU,
                            .failed = {.present = 1, .api = GMP_API_MALLOC, .size = 1 << 20,
                                       .device = -1, .code = 12}};
    assert_non_null(gmp_dump(rec, &req, path, sizeof path));
    const char *events[] = {inspect_path(), "events", path, "--json", NULL};
    assert_int_equal(run_capture(events, out, sizeof out, err, sizeof err), 0);
    if (!strstr(out, "\"size\":9223372036854775809,") || strstr(out, "e+18"))
        fail_msg("events --json:\n%s\n%s", out, err);
    const char *show[] = {inspect_path(), "show", path, NULL};
    assert_int_equal(run_capture(show, out, sizeof out, err, sizeof err), 0);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bundle_contents),
        cmocka_unit_test(test_secrets_never_written),
        cmocka_unit_test(test_taken_names_are_skipped),
        cmocka_unit_test(test_disabled_writes_nothing),
        cmocka_unit_test(test_unsafe_directories),
        cmocka_unit_test(test_sigkill_never_leaves_a_bad_bundle),
        cmocka_unit_test(test_sizes_past_int64_are_integers),
        cmocka_unit_test(test_nineteen_digits_past_int64),
    };
    return cmocka_run_group_tests_name("bundle", tests, NULL, NULL);
}
