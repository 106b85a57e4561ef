/*
 * test_gpu.c — real processes calling the CUDA runtime and HIP under the
 * preload: against the test doubles of libcudart and libamdhip64 (a device
 * that runs out, the real codes), and against the real libraries on this
 * machine with no GPU (their errors must come back unchanged, no bundle).
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct family {
    const char *program;  /* under build/test/gpu */
    const char *backend;  /* in bundles */
    const char *api;      /* the malloc of the family */
    const char *reason;
    const char *library;
    int alloc_kinds;      /* allocation APIs `kinds` exercises */
    const char *invalid;  /* the library's name for code 1 */
} family;

static const family cuda = {"gpu_oom_cuda", "cuda", "cudaMalloc", "cudaErrorMemoryAllocation",
                            "libcudart", 9, "cudaErrorInvalidValue"};
static const family hip = {"gpu_oom_hip", "rocm", "hipMalloc", "hipErrorOutOfMemory",
                           "libamdhip64", 7, "hipErrorInvalidValue"};

static preload_paths paths;
static char out[1 << 16], err[1 << 16];
static int status;

static void run(const char *env, const char *program, const char *args)
{
    char script[4096];
    /* the watchdog has its own tests: here it would race the OOM bundles */
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_WATCHDOG=0 %s; exec %s/test/gpu/%s %s",
             paths.preload, env ? env : "", paths.build, program, args);
    status = run_script(&paths, script, out, sizeof out, err, sizeof err);
}

static int code(void)
{
    return exit_code_of(status);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "gpu");
    return 0;
}

static void until_oom(const family *f, int device)
{
    char args[32];
    snprintf(args, sizeof args, "until-oom %d", device);
    run("GMP_ENABLED=0", f->program, args);
    char plain[256];
    snprintf(plain, sizeof plain, "%.255s", out);
    int plain_code = code();

    run(NULL, f->program, args);
    assert_int_equal(code(), plain_code); /* the program's own status: 3 */
    assert_string_equal(out, plain);
    unsigned long long held = 0, failed = 0;
    assert_int_equal(sscanf(out, "held %llu failed %llu", &held, &failed), 2);
    char line[256];
    snprintf(line, sizeof line, "gpumemprof: OOM on %s:%d (%s 256.0 MiB, %s); bundle: ",
             f->backend, device, f->api, f->reason);
    if (!strstr(err, line) || count_lines(err) != 1)
        fail_msg("want one line \"%s...\", got: %s", line, err);

    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    expect_first_cause(bundle, "steady growth, like a leak"); /* it ate the free memory */
    assert_string_equal(json_str(md, "backend"), f->backend);
    assert_string_equal(json_str(md, "reason"), f->reason);
    assert_string_equal(json_str(md, "exception_type"), f->reason);
    assert_string_equal(json_str(md, "exception_module"), f->library);
    assert_string_equal(json_str(md, "confirmed_by"), "exit");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), f->api);
    assert_int_equal(json_int(fr, "size"), failed);
    assert_int_equal(json_int(fr, "device"), device);
    assert_int_equal(json_int(fr, "code"), 2);
    assert_int_equal(json_int(fr, "bytes_in_use"), held); /* what the program holds */
    json_t *use = json_array_get(json_object_get(md, "bytes_in_use"), 0);
    assert_int_equal(json_int(use, "bytes"), held);
    json_decref(md);
    json_t *man = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
    assert_string_equal(json_str(man, "backend"), f->backend);
    json_decref(man);
}

static void test_cuda_until_oom(void **state)
{
    (void)state;
    until_oom(&cuda, 0);
    until_oom(&cuda, 1);
}

/* A call that failed with another of its library's codes before the
 * program ran out: the event is kept, and `events` names its code as the
 * library does, not by its number alone. */
static void other_code_named(const family *f)
{
    run(NULL, f->program, "invalid-first 0");
    assert_int_equal(code(), 3);
    char bundle[1024], want[200];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *argv[] = {inspect_path(), "events", bundle, NULL};
    static char listed[1 << 16], lerr[4096];
    run_capture(argv, listed, sizeof listed, lerr, sizeof lerr);
    snprintf(want, sizeof want, "alloc_failed  %s", f->api);
    const char *line = strstr(listed, want);
    snprintf(want, sizeof want, "  result %s (code 1)\n", f->invalid);
    const char *named = line ? strstr(line, want) : NULL;
    if (!named || memchr(line, '\n', (size_t)(named - line)))
        fail_msg("want a line \"alloc_failed  %s ...%s\"; events says:\n%s", f->api, want,
                 listed);
}

static void test_other_codes_named(void **state)
{
    (void)state;
    other_code_named(&cuda);
    other_code_named(&hip);
}

/* Each device allocation's stack (GMP_STACKS, on by default): one stack_id
 * for the four allocations of one loop, in stacks.json, whose first frame
 * addr2line puts in the program's fill(); none with GMP_STACKS=0. */
static void test_allocation_stacks(void **state)
{
    (void)state;
    run(NULL, cuda.program, "until-oom 0");
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    json_t *events = bundle_file(bundle, "events.json");
    long long id = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (strcmp(json_str(ev, "event_type"), "alloc"))
            continue;
        if (!id)
            id = json_int(ev, "stack_id");
        assert_int_equal(json_int(ev, "stack_id"), id); /* one site, one id */
    }
    json_decref(events);
    assert_true(id > 0);
    json_t *stacks = bundle_file(bundle, "stacks.json");
    assert_int_equal(json_array_size(stacks), 1);
    assert_int_equal(json_int(json_array_get(stacks, 0), "id"), id);
    const char *first =
        json_string_value(json_array_get(json_object_get(json_array_get(stacks, 0), "frames"), 0));
    assert_non_null(first);
    unsigned long long at = strtoull(first, NULL, 16);
    unsigned long long base = bundle_module_base(bundle, cuda.program);
    char program[1200];
    snprintf(program, sizeof program, "%s/test/gpu/%s", paths.build, cuda.program);
    json_decref(stacks);
    assert_true(base && at > base);
    if (access("/usr/bin/addr2line", X_OK) == 0) {
        char cmd[2600], sym[1024], none[256];
        snprintf(cmd, sizeof cmd, "addr2line -f -e '%s' 0x%llx", program, at - base - 1);
        const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        run_capture(argv, sym, sizeof sym, none, sizeof none);
        if (strncmp(sym, "fill\n", 5))
            fail_msg("the allocation's stack symbolises to %s", sym);
    }

    /* show names the site: libdw finds fill() in the program on this machine */
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    char shown[1 << 14], none2[256];
    run_capture(show, shown, sizeof shown, none2, sizeof none2);
    const char *top = strstr(shown, "Top allocation sites by live bytes");
    if (!top || !strstr(top, "1.0 GiB in 4 allocation(s)  fill") || !strstr(top, "(gpu_oom.c:") ||
        !strstr(shown, "from one site: fill"))
        fail_msg("show:\n%s", shown);

    /* a hostile modules.json naming a device or a FIFO: never handed to
     * libdw (it would block or never end), named module+offset instead */
    char mods_path[1100], fifo[700];
    snprintf(mods_path, sizeof mods_path, "%s/modules.json", bundle);
    snprintf(fifo, sizeof fifo, "%s/fifo", paths.scratch);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    static const char *const hostile[] = {"/dev/zero", NULL};
    for (int h = 0; h < 2; h++) {
        const char *target = hostile[h] ? hostile[h] : fifo;
        char json[2048];
        snprintf(json, sizeof json, "[{\"path\":\"%s\",\"base\":\"0x%llx\",\"build_id\":null}]",
                 target, base);
        write_file(mods_path, json, strlen(json));
        run_capture(show, shown, sizeof shown, none2, sizeof none2);
        const char *slash = strrchr(target, '/');
        char want[128];
        snprintf(want, sizeof want, "allocation(s)  %s+0x", slash + 1);
        if (!strstr(shown, want))
            fail_msg("show with modules at %s:\n%s", target, shown);
    }

    run("GMP_STACKS=0", cuda.program, "until-oom 0");
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    char path[1100];
    snprintf(path, sizeof path, "%s/stacks.json", bundle);
    assert_int_equal(access(path, F_OK), -1);
}

/* The device's causes, each made by the double and named first by show:
 * one request larger than the whole device, a request no block can hold
 * though memory is free (fragmentation), and memory other processes hold;
 * the bundle's device_state says why. */
static void device_cause(const char *env, const char *mode, const char *cause,
                         long long others)
{
    run(env, cuda.program, mode);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *st = json_array_get(json_object_get(md, "device_state"), 0);
    assert_int_equal(json_int(st, "total"), 1ll << 30);
    assert_int_equal(json_int(st, "other_processes_bytes"), others);
    json_decref(md);
    expect_first_cause(bundle, cause);
}

/* Allocation stacks are right whether the program keeps frame pointers or
 * not, through a frame whose size varies (alloca), and the same when a
 * stack is first seen (the call-frame walk) as the seven times after (the
 * rules learned from it): each of the three ways to deep_leaf is one stack
 * id of eight allocations, and addr2line names its frames up to main. */
static void expect_deep_stacks(const char *program)
{
    run(NULL, program, "deep 0");
    assert_int_equal(code(), 3);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    json_t *events = bundle_file(bundle, "events.json");
    long long ids[8] = {0};
    int counts[8] = {0}, nids = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (strcmp(json_str(ev, "event_type"), "alloc") || json_int(ev, "size") != 1 << 20)
            continue;
        long long id = json_int(ev, "stack_id");
        int k = 0;
        while (k < nids && ids[k] != id)
            k++;
        if (k == nids) {
            if (nids == 8)
                fail_msg("more than 8 stacks for 3 ways to one call");
            ids[nids++] = id;
        }
        counts[k]++;
    }
    json_decref(events);
    if (nids != 3 || counts[0] != 8 || counts[1] != 8 || counts[2] != 8)
        fail_msg("%s: %d stack ids (%d, %d, %d allocations), want 3 of 8", program, nids,
                 counts[0], counts[1], counts[2]);
    if (access("/usr/bin/addr2line", X_OK) != 0) {
        print_message("SKIP: no addr2line to symbolise with\n");
        return;
    }
    unsigned long long base = bundle_module_base(bundle, program);
    assert_true(base != 0);
    char image[1200];
    snprintf(image, sizeof image, "%s/test/gpu/%s", paths.build, program);
    int seen[3] = {0};
    json_t *stacks = bundle_file(bundle, "stacks.json"), *st;
    json_array_foreach(stacks, i, st) {
        json_t *frames = json_object_get(st, "frames");
        char cmd[4096];
        int len = snprintf(cmd, sizeof cmd, "addr2line -f -s -e '%s'", image);
        for (size_t f = 0; f < json_array_size(frames) && f < 5; f++)
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, " 0x%llx",
                            strtoull(json_string_value(json_array_get(frames, f)), NULL, 16) -
                                base - 1);
        const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        char sym[4096], none[256], names[512] = "";
        run_capture(argv, sym, sizeof sym, none, sizeof none);
        /* function, then file:line, for each address: the names up to main */
        int line = 0;
        for (char *s = strtok(sym, "\n"); s; s = strtok(NULL, "\n"), line++) {
            if (line % 2)
                continue;
            strncat(names, s, sizeof names - strlen(names) - 2);
            if (!strcmp(s, "main"))
                break;
            strcat(names, " ");
        }
        if (!strncmp(names, "fill until_oom", 14))
            continue; /* main's `return until_oom()` is a tail call: no main */
        int way = !strcmp(names, "deep_leaf main")                         ? 0
                  : !strcmp(names, "deep_leaf deep_middle main")            ? 1
                  : !strcmp(names, "deep_leaf deep_middle deep_outer main") ? 2
                                                                             : -1;
        if (way < 0)
            fail_msg("%s: a stack of %s", program, names);
        seen[way]++;
    }
    json_decref(stacks);
    assert_int_equal(seen[0], 1);
    assert_int_equal(seen[1], 1);
    assert_int_equal(seen[2], 1);
}

static void test_deep_stacks(void **state)
{
    (void)state;
    expect_deep_stacks("gpu_oom_cuda");    /* x86-64 gcc -O2: no frame pointer */
    expect_deep_stacks("gpu_oom_cuda_fp"); /* -fno-omit-frame-pointer */
}

static void test_device_causes(void **state)
{
    (void)state;
    device_cause(NULL, "one-huge 0", "a request larger than the device could ever give", 0);
    device_cause("GMP_FAKE_MAX_BLOCK=134217728", "until-oom 0", "fragmentation", 0);
    device_cause("GMP_FAKE_OTHER_BYTES=536870912", "until-oom 0",
                 "other processes holding memory on the device", 512ll << 20);
    /* a training loop that frees most of each step but caches 24 MiB: the
     * growth, not the last request, is the story, and its site the cache */
    device_cause(NULL, "step-leak 0", "steady growth, like a leak", 0);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    static char shown[1 << 16], none[256];
    run_capture(show, shown, sizeof shown, none, sizeof none);
    if (!strstr(shown, "evidence: what stays after the frees climbed in every quarter") ||
        !strstr(shown, "from one site: keep_in_cache (gpu_oom.c:"))
        fail_msg("show:\n%s", shown);
}

static void test_hip_until_oom(void **state)
{
    (void)state;
    until_oom(&hip, 0);
}

static void retries(const family *f)
{
    run(NULL, f->program, "retry-recover");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "recovered events 1\n");
    assert_string_equal(err, "");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);

    run(NULL, f->program, "retry-fail");
    assert_int_equal(code(), 0);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "confirmed_by"), "second_failure");
    assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), 512 << 20);
    json_decref(md);

    /* a third try of the same request, after the bundle: one OOM, one
     * bundle; the third is an event after it (CuPy's pool, on an H100) */
    run(NULL, f->program, "retry-thrice");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "rc 2 2 2\n");
    json_t *events = only_bundle_file(paths.dumps, "events.json", NULL, 0);
    json_t *ev;
    size_t i;
    int ooms = 0;
    json_array_foreach(events, i, ev) ooms += !strcmp(json_str(ev, "event_type"), "oom");
    json_decref(events);
    assert_int_equal(ooms, 2); /* the third came after the bundle was written */
    assert_int_equal(count_lines(err), 1);

    /* the device as it was at the failure, not after the program let go */
    run(NULL, f->program, "fail-then-let-go");
    assert_int_equal(code(), 0);
    md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    json_t *st = json_array_get(json_object_get(md, "device_state"), 0);
    if (json_int(st, "free") != 0 || json_int(st, "process_bytes") != 1 << 30)
        fail_msg("want device 0 full, all of it ours, got %s",
                 json_dumps(json_object_get(md, "device_state"), JSON_COMPACT));
    json_decref(md);
}

/* Two devices fail in turn, then the program lets go of everything before
 * either episode is confirmed: each bundle tells its own device's moment
 * (what was held there, the device full), not what was left when it was
 * written; the second failure does not take the first one's. */
static void test_each_failure_keeps_its_moment(void **state)
{
    (void)state;
    run(NULL, cuda.program, "two-devices");
    assert_int_equal(code(), 0);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    DIR *dir = opendir(paths.dumps);
    assert_non_null(dir);
    int seen[2] = {0, 0};
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (strncmp(e->d_name, "oom_dump_", 9))
            continue;
        char bundle[1024];
        snprintf(bundle, sizeof bundle, "%s/%s", paths.dumps, e->d_name);
        json_t *md = bundle_file(bundle, "metadata.json");
        long long device = json_int(json_object_get(md, "failed_request"), "device");
        json_t *st, *states = json_object_get(md, "device_state");
        size_t i;
        long long free_then = -1, ours_then = -1;
        json_array_foreach(states, i, st)
            if (json_int(st, "device") == device) {
                free_then = json_int(st, "free");
                ours_then = json_int(st, "process_bytes");
            }
        json_decref(md);
        assert_true(device == 0 || device == 1);
        seen[device]++;
        if (free_then != 0 || ours_then != 1ll << 30)
            fail_msg("cuda:%lld's bundle: want the device full, all of it ours, got free %lld, "
                     "ours %lld", device, free_then, ours_then);
        char want[64];
        snprintf(want, sizeof want, "Held by:          1.0 GiB in 4 allocation(s)");
        const char *shown = show_output(bundle);
        if (!strstr(shown, want))
            fail_msg("cuda:%lld's bundle: want '%s', show said:\n%s", device, want, shown);
    }
    closedir(dir);
    assert_int_equal(seen[0], 1);
    assert_int_equal(seen[1], 1);
}

static void test_caching_allocator_retries(void **state)
{
    (void)state;
    retries(&cuda);
    retries(&hip);
}

static void test_threads_and_fork(void **state)
{
    (void)state;
    const family *fams[] = {&cuda, &hip};
    for (int i = 0; i < 2; i++) {
        run(NULL, fams[i]->program, "threads");
        assert_int_equal(code(), 0);
        assert_string_equal(out, "threads done\n");
        json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
        assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), 1ll << 40);
        json_decref(md);

        run(NULL, fams[i]->program, "fork");
        assert_int_equal(code(), 3); /* the child's status, passed on */
        int child = 0;
        assert_int_equal(sscanf(out, "child %d", &child), 1);
        json_t *man = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
        assert_int_equal(json_int(man, "pid"), child);
        json_decref(man);
    }
}

/* One allocation is one event, through every hooked API, and every free
 * is matched to its allocation. */
static void test_every_api_one_event(void **state)
{
    (void)state;
    const family *fams[] = {&cuda, &hip};
    for (int i = 0; i < 2; i++) {
        run(NULL, fams[i]->program, "kinds");
        char want[64];
        snprintf(want, sizeof want, "bad 0 allocs %d frees %d\n", fams[i]->alloc_kinds,
                 fams[i]->alloc_kinds);
        assert_string_equal(out, want);
        assert_int_equal(code(), 0);
    }
}

/* The real libraries, no GPU: their own error, unchanged; no bundle. */
static void test_real_libraries_without_gpu(void **state)
{
    (void)state;
    static const char *const smokes[] = {"gpu_smoke_cuda", "gpu_smoke_hip"};
    for (int i = 0; i < 2; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/test/gpu/%s", paths.build, smokes[i]);
        if (access(path, X_OK) != 0) {
            print_message("skipped %s: the real library is not installed here\n", smokes[i]);
            continue;
        }
        run("GMP_ENABLED=0", smokes[i], "");
        char plain[256];
        snprintf(plain, sizeof plain, "%.255s", out);
        run(NULL, smokes[i], "");
        assert_string_equal(out, plain);
        assert_string_equal(err, "");
        assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
        print_message("%s: %s", smokes[i], out);
    }
}

/* The slow death on a device: filling it slowly to 95% without a failure
 * writes one memory_pressure bundle that names the device. */
static void pressure(const family *f, const char *device_name)
{
    run("GMP_WATCHDOG=1", f->program, "slow-fill 1");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "filled 1024 MiB\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "reason"), "memory_pressure");
    assert_string_equal(json_str(md, "backend"), f->backend);
    /* sampled after an allocation at most every 100 ms: 90% or more */
    char want_start[32], want_limit[64];
    snprintf(want_start, sizeof want_start, "%s in use ", device_name);
    snprintf(want_limit, sizeof want_limit, "%% of %s memory 1.0 GiB (threshold 90%%).",
             device_name);
    const char *msg = json_str(md, "exception_message");
    if (strncmp(msg, want_start, strlen(want_start)) || !strstr(msg, want_limit))
        fail_msg("message: %s", msg);
    json_decref(md);
    assert_int_equal(count_lines(err), 1);
}

static void test_cuda_device_pressure(void **state)
{
    (void)state;
    pressure(&cuda, "cuda:1");
}

static void test_hip_device_pressure(void **state)
{
    (void)state;
    pressure(&hip, "rocm:1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_device_pressure),
        cmocka_unit_test(test_allocation_stacks),
        cmocka_unit_test(test_deep_stacks),
        cmocka_unit_test(test_device_causes),
        cmocka_unit_test(test_hip_device_pressure),
        cmocka_unit_test(test_cuda_until_oom),
        cmocka_unit_test(test_hip_until_oom),
        cmocka_unit_test(test_other_codes_named),
        cmocka_unit_test(test_caching_allocator_retries),
        cmocka_unit_test(test_each_failure_keeps_its_moment),
        cmocka_unit_test(test_threads_and_fork),
        cmocka_unit_test(test_every_api_one_event),
        cmocka_unit_test(test_real_libraries_without_gpu),
    };
    return cmocka_run_group_tests_name("gpu", tests, setup, preload_paths_teardown);
}
