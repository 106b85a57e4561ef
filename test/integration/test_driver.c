/*
 * test_driver.c — real processes reaching the CUDA driver double
 * (libcuda.so.1) the ways real programs do, under the preload: as static
 * cudart does (dlopen, dlsym of cuGetProcAddress_v2, the self-query, then
 * cuMemAlloc version 3020), as older PyTorch's expandable segments do (dlsym
 * of cuMemCreate on an RTLD_NOLOAD handle), linked directly, and through the
 * cudart double calling into it; a program built by nvcc with static cudart;
 * lookups that must come back exactly as without the preload; and the CUPTI
 * injection path over the CUPTI double, with its fallbacks.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static preload_paths paths;
static char doubles[1200];
static char out[1 << 16], err[1 << 16];
static int status;

/* Run build/test/gpu/PROGRAM ARGS with `env` exported (the preload only
 * when `env` names LD_PRELOAD as "$L", so plain runs compare against it; $P
 * is the preload's file alone, for CUDA_INJECTION64_PATH).  With the
 * preload under a sanitizer the plain runs have its runtime preloaded too,
 * the lookups it intercepts (strlen, puts) then resolving to it in both. */
static void run(const char *env, const char *program, const char *args)
{
    char script[8192];
    const char *runtime = preload_sanitizer();
    snprintf(script, sizeof script,
             "export P='%s' L='%s' LD_PRELOAD='%s' LD_LIBRARY_PATH='%s' GMP_WATCHDOG=0; "
             "export %s; exec %s/test/gpu/%s %s",
             paths.preload_so, paths.preload, runtime ? runtime : "", doubles,
             env ? env : "GMP_UNUSED=1", paths.build, program, args);
    status = run_script(&paths, script, out, sizeof out, err, sizeof err);
}

static int code(void)
{
    return exit_code_of(status);
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "driver");
    snprintf(doubles, sizeof doubles, "%s/test/doubles", paths.build);
    return 0;
}

/* The bundle of one OOM: its reason, API, size, device and what was held. */
static void expect_bundle(const char *api, unsigned long long size, int device,
                          unsigned long long held)
{
    char line[256];
    snprintf(line, sizeof line, "gpumemprof: OOM on cuda:%d (%s 256.0 MiB, ", device, api);
    if (!strstr(err, line) || count_lines(err) != 1)
        fail_msg("want one line \"%s...\", got: %s", line, err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "backend"), "cuda");
    assert_string_equal(json_str(md, "reason"), "CUDA_ERROR_OUT_OF_MEMORY");
    assert_string_equal(json_str(md, "exception_module"), "libcuda");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), api);
    assert_int_equal(json_int(fr, "size"), size);
    assert_int_equal(json_int(fr, "device"), device);
    assert_int_equal(json_int(fr, "code"), 2);
    assert_int_equal(json_int(fr, "bytes_in_use"), held);
    /* the device as it was then, whichever call reached it (cuMemCreate
     * names its device instead of using the current one) */
    json_t *st = json_array_get(json_object_get(md, "device_state"), 0);
    if (!st || json_int(st, "device") != device || json_int(st, "total") <= 0 ||
        json_int(st, "free") > json_int(st, "total") - (long long)held)
        fail_msg("want device %d's free and total as held then, got device_state %s", device,
                 json_dumps(json_object_get(md, "device_state"), JSON_COMPACT));
    json_decref(md);
    json_t *man = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
    assert_string_equal(json_str(man, "backend"), "cuda");
    json_decref(man);
}

/* PROGRAM ARGS fills a device until the driver says OOM: without the preload
 * its events count is -1, with it one event per allocation (four), the exit
 * status is 3 both times, and the bundle names `api`. */
static void expect_driver_oom(const char *program, const char *args, const char *events,
                              const char *api, int device)
{
    char want[128];
    run("GMP_UNUSED=1", program, args);
    assert_int_equal(code(), 3);
    snprintf(want, sizeof want, "held 1073741824 failed 268435456 %s -1\n", events);
    assert_string_equal(out, want);
    run("LD_PRELOAD=\"$L\"", program, args);
    assert_int_equal(code(), 3);
    snprintf(want, sizeof want, "held 1073741824 failed 268435456 %s 4\n", events);
    assert_string_equal(out, want);
    expect_bundle(api, 256ull << 20, device, 1ull << 30);
}

/* dlopen, dlsym of cuGetProcAddress_v2, the self-query, cuMemAlloc/3020;
 * the failure and what was held are named at the program's own line, not
 * in the runtime compiled into it (its cudaMalloc, its libcudart_static_
 * functions), as a real GPU showed they were */
static void test_static_cudart_way(void **state)
{
    (void)state;
    expect_driver_oom("driver_oom", "static-cudart 1", "alloc_events", "cuMemAlloc_v2", 1);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    const char *failed = strstr(shown, "\nFailed at:        ");
    const char *held = strstr(shown, "\nHeld by:          ");
    if (!failed || !held || !strstr(failed, "(driver_oom.c:") ||
        !strstr(held, "(driver_oom.c:") || strstr(shown, "no frame of the program's own") ||
        strstr(shown, "libcudart_static_") || strstr(shown, "cudaMalloc ("))
        fail_msg("named inside the runtime, not at the program's line:\n%s", shown);
}

/* RTLD_NOLOAD handle, dlsym of cuMemCreate and cuMemMap */
static void test_older_pytorch_vmm_way(void **state)
{
    (void)state;
    expect_driver_oom("driver_oom", "vmm 0", "map_events", "cuMemCreate", 0);
    /* physical memory comes back on cuMemRelease, mappings are events */
    run("LD_PRELOAD=\"$L\"", "driver_oom", "vmm-cycle");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "alloc 4 free 4 map 4 unmap 4\n");
    assert_string_equal(err, "");
    /* pinned host memory made with cuMemCreate is the host's, not device 0's */
    run("LD_PRELOAD=\"$L\"", "driver_oom", "vmm-host");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "host 4 device 0\n");
}

static void test_linked_directly(void **state)
{
    (void)state;
    expect_driver_oom("driver_direct", "direct 1", "alloc_events", "cuMemAlloc_v2", 1);
}

/* The cudart double calls the driver through cuGetProcAddress pointers we
 * routed: still one event per allocation, named by the runtime API. */
static void test_runtime_over_driver_is_one_event(void **state)
{
    (void)state;
    run("LD_PRELOAD=\"$L\"", "gpu_oom_cuda", "until-oom 0");
    assert_int_equal(code(), 3);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    int allocs = 0;
    json_array_foreach(events, i, ev) {
        if (strncmp(json_str(ev, "api"), "cuda", 4))
            fail_msg("event %zu names %s, not the runtime API called", i, json_str(ev, "api"));
        allocs += !strcmp(json_str(ev, "event_type"), "alloc");
    }
    assert_int_equal(allocs, 4);
    json_decref(events);
}

/* Each line of `plain` as it must read under the preload: the entry points
 * we route now lie in the preload, everything else is unchanged. */
static void expected_lookups(const char *plain, char *want, size_t cap)
{
    static const char *const routed[] = {
        "dlsym:cuGetProcAddress_v2 ",   "gpa:cuGetProcAddress@13000 ", "gpa:cuMemAlloc@3020 ",
        "gpa:cuMemAllocAsync@11020 ",   "gpa:cuMemAllocAsync@11020/ptsz ",
        "gpa:cuMemCreate@12000 ",       "gpa:cuGetProcAddress@11030 ", "gpa1:cuMemFree@3020 ",
        "gpa1:cuMemFreeHost@2000 ",     "dlsym:cuMemCreate ",          "dlsym:cuMemAllocAsync_ptsz ",
        NULL};
    want[0] = '\0';
    char copy[8192];
    snprintf(copy, sizeof copy, "%s", plain);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char line[512];
        snprintf(line, sizeof line, "%s", l);
        for (const char *const *r = routed; *r; r++) {
            char *m = strstr(line, "module=libcuda.so.1");
            if (!strncmp(line, *r, strlen(*r)) && m)
                strcpy(m, "module=libgpumemprof_preload.so");
        }
        strncat(want, line, cap - strlen(want) - 2);
        strcat(want, "\n");
    }
}

static void test_lookups_as_without_preload(void **state)
{
    (void)state;
    static char plain[8192], want[8192];
    run(NULL, "driver_oom", "lookups");
    assert_int_equal(code(), 0);
    snprintf(plain, sizeof plain, "%.8191s", out);
    /* the double answers like the driver: versions, _ptsz, not found */
    assert_non_null(strstr(plain, "gpa:cuMemAlloc@2000 rc=0 status=0 module=libcuda.so.1\n"));
    assert_non_null(strstr(plain, "gpa:cuMemCreate@9000 rc=500 status=2 module=NULL\n"));
    assert_non_null(strstr(plain, "gpa:cuNoSuchFunction@13000 rc=500 status=1 module=NULL\n"));
    assert_non_null(strstr(plain, "distinct:cuMemAllocAsync/ptsz 1\n"));
    /* RTLD_NEXT from a library searches after that library */
    assert_non_null(strstr(plain, "probe:next:next_probe_only rc=0 status=0 module=NULL\n"));

    run("LD_PRELOAD=\"$L\"", "driver_oom", "lookups");
    assert_int_equal(code(), 0);
    expected_lookups(plain, want, sizeof want);
    assert_string_equal(out, want);
    assert_string_equal(err, "");

    run("LD_PRELOAD=\"$L\" GMP_ENABLED=0", "driver_oom", "lookups");
    assert_int_equal(code(), 0);
    assert_string_equal(out, plain); /* disabled: nothing routed */
}

/* PROGRAM (a real cudart reaching the driver double) with and without the
 * preload: the same output and status, the same lookups in the same order
 * (name, version, flags), made by `caller` without the preload and all
 * through our cuGetProcAddress with it.  `env` places the driver double. */
static void expect_lookups_routed(const char *program, const char *env, const char *caller)
{
    char log_plain[600], log_preload[600], script_env[2048], plain[256];
    snprintf(log_plain, sizeof log_plain, "%s/lookups.plain", paths.scratch);
    snprintf(log_preload, sizeof log_preload, "%s/lookups.preload", paths.scratch);
    unlink(log_plain); /* the double appends */
    unlink(log_preload);
    snprintf(script_env, sizeof script_env, "%s GMP_FAKE_CUDA_LOG='%s'", env, log_plain);
    run(script_env, program, "");
    int plain_code = code();
    snprintf(plain, sizeof plain, "%.255s", out);
    snprintf(script_env, sizeof script_env, "%s GMP_FAKE_CUDA_LOG='%s' LD_PRELOAD=\"$L\"", env,
             log_preload);
    run(script_env, program, "");
    assert_int_equal(code(), plain_code);
    assert_string_equal(out, plain);
    assert_string_equal(err, "");

    FILE *a = fopen(log_plain, "r"), *b = fopen(log_preload, "r");
    assert_non_null(a);
    assert_non_null(b);
    char la[512], lb[512], want_plain[128];
    snprintf(want_plain, sizeof want_plain, " %s\n", caller);
    int lines = 0, memalloc = 0;
    while (fgets(la, sizeof la, a)) {
        if (!fgets(lb, sizeof lb, b))
            fail_msg("the preload run made fewer lookups (%d)", lines);
        char *ca = strrchr(la, ' '), *cb = strrchr(lb, ' ');
        assert_non_null(ca);
        assert_non_null(cb);
        if (ca - la != cb - lb || strncmp(la, lb, (size_t)(ca - la)))
            fail_msg("lookup %d differs: %s vs %s", lines, la, lb);
        assert_string_equal(ca, want_plain);
        assert_string_equal(cb, " libgpumemprof_preload.so\n");
        memalloc += !strncmp(la, "cuMemAlloc 3020 ", 16);
        lines++;
    }
    assert_null(fgets(lb, sizeof lb, b));
    fclose(a);
    fclose(b);
    assert_true(lines > 100);
    assert_int_equal(memalloc, 1);
}

/* nvcc's static cudart asks for ~440 driver entry points; the double lacks
 * most, so cudart gives up with an error, identically with the preload. */
static void test_nvcc_static_cudart(void **state)
{
    (void)state;
    char program[1100];
    snprintf(program, sizeof program, "%s/test/gpu/static_cudart", paths.build);
    if (!exists(program)) {
        print_message("SKIP: no nvcc on this machine, static_cudart not built\n");
        skip();
    }
    expect_lookups_routed("static_cudart", "GMP_UNUSED=1", "static_cudart");
}

/* NVIDIA's shared libcudart finds the driver double (alone in a directory
 * on LD_LIBRARY_PATH) and resolves through it the same way. */
static void test_real_shared_cudart(void **state)
{
    (void)state;
    char program[1100], dir[600], link[700], target[2048], env[1000];
    snprintf(program, sizeof program, "%s/test/gpu/gpu_smoke_cuda", paths.build);
    if (!exists(program)) {
        print_message("SKIP: no libcudart on this machine, gpu_smoke_cuda not built\n");
        skip();
    }
    snprintf(dir, sizeof dir, "%s/driver-only", paths.scratch);
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    snprintf(target, sizeof target, "%s/libcuda.so.1", doubles);
    assert_int_equal(mkdir(dir, 0700), 0);
    if (target[0] != '/') {
        char cwd[512];
        assert_non_null(getcwd(cwd, sizeof cwd));
        snprintf(target, sizeof target, "%s/%s/libcuda.so.1", cwd, doubles);
    }
    assert_int_equal(symlink(target, link), 0);
    snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s'", dir);
    expect_lookups_routed("gpu_smoke_cuda", env, "libcudart.so.13");
}

/* ---- CUPTI injection ------------------------------------------------------ */

static int have_cupti_double(void)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/libcupti.so.13", doubles);
    if (exists(path))
        return 1;
    print_message("SKIP: built without cupti.h, no CUPTI injection\n");
    return 0;
}

/* The events of the one bundle: how many, and how many CUPTI recorded. */
static void bundle_events(int *total, int *from_cupti, int *allocs)
{
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    *total = (int)json_array_size(events);
    *from_cupti = *allocs = 0;
    json_array_foreach(events, i, ev) {
        json_t *flags = json_object_get(ev, "flags");
        *from_cupti += flags && json_integer_value(flags) == 1;
        *allocs += !strcmp(json_str(ev, "event_type"), "alloc");
    }
    json_decref(events);
}

static void test_cupti_injection(void **state)
{
    (void)state;
    if (!have_cupti_double())
        skip();
    int total, cupti, allocs;
    /* injection alone: a process the preload never reached */
    run("CUDA_INJECTION64_PATH=\"$P\"", "gpu_oom_cuda", "until-oom 1");
    assert_int_equal(code(), 3);
    assert_non_null(strstr(err, "OOM on cuda:1 (cudaMalloc 256.0 MiB, cudaErrorMemoryAllocation)"));
    assert_int_equal(count_lines(err), 1);
    bundle_events(&total, &cupti, &allocs);
    assert_int_equal(allocs, 4);
    assert_int_equal(cupti, total);

    /* with the preload too: one path records, one event per allocation */
    run("CUDA_INJECTION64_PATH=\"$P\" LD_PRELOAD=\"$L\"", "gpu_oom_cuda", "until-oom 1");
    assert_int_equal(code(), 3);
    assert_int_equal(count_lines(err), 1);
    bundle_events(&total, &cupti, &allocs);
    assert_int_equal(allocs, 4);
    assert_int_equal(total, 5);
    assert_int_equal(cupti, 5);

    /* VMM through CUPTI: handles, releases, mappings */
    run("CUDA_INJECTION64_PATH=\"$P\" LD_PRELOAD=\"$L\"", "driver_oom", "vmm-cycle");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "alloc 4 free 4 map 4 unmap 4\n");
    /* and pinned host memory booked where the interposer books it */
    run("CUDA_INJECTION64_PATH=\"$P\" LD_PRELOAD=\"$L\"", "driver_oom", "vmm-host");
    assert_int_equal(code(), 0);
    assert_string_equal(out, "host 4 device 0\n");

    /* GMP_CUDA_MODE=cupti points the driver at us by itself */
    run("GMP_CUDA_MODE=cupti LD_PRELOAD=\"$L\"", "gpu_oom_cuda", "until-oom 0");
    assert_int_equal(code(), 3);
    assert_int_equal(count_lines(err), 1);
    bundle_events(&total, &cupti, &allocs);
    assert_int_equal(cupti, 5);
}

static void test_cupti_fallbacks(void **state)
{
    (void)state;
    if (!have_cupti_double())
        skip();
    int total, cupti, allocs;
    /* another subscriber holds CUPTI: one line, the interposer records */
    run("GMP_FAKE_CUPTI_BUSY=1 CUDA_INJECTION64_PATH=\"$P\" LD_PRELOAD=\"$L\"", "gpu_oom_cuda",
        "until-oom 0");
    assert_int_equal(code(), 3);
    assert_int_equal(count_lines(err), 2);
    assert_non_null(strstr(err, "gpumemprof: CUPTI injection: cuptiSubscribe failed "
                                "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another "
                                "tool, such as Nsight or a profiler, holds CUPTI); recording "
                                "CUDA through the interposer\n"));
    bundle_events(&total, &cupti, &allocs);
    assert_int_equal(allocs, 4);
    assert_int_equal(cupti, 0);

    /* no libcupti to load: the driver alone on the library path (the
     * program's run path to the doubles is lost to a sanitizer's dlopen) */
    char alone[600], driver[1300], env[1500];
    snprintf(alone, sizeof alone, "%s/driver-alone", paths.scratch);
    snprintf(driver, sizeof driver, "%s/libcuda.so.1", doubles);
    mkdir(alone, 0700);
    char link[700];
    snprintf(link, sizeof link, "%s/libcuda.so.1", alone);
    unlink(link);
    assert_int_equal(symlink(driver, link), 0);
    snprintf(env, sizeof env,
             "LD_LIBRARY_PATH='%s' CUDA_HOME=/nonexistent CUDA_INJECTION64_PATH=\"$P\" "
             "LD_PRELOAD=\"$L\"",
             alone);
    run(env, "driver_oom", "static-cudart 0");
    assert_int_equal(code(), 3);
    if (!exists("/usr/local/cuda/lib64/libcupti.so")) {
        assert_non_null(strstr(err, "gpumemprof: CUPTI injection: cannot load libcupti; "
                                    "recording CUDA through the interposer\n"));
        bundle_events(&total, &cupti, &allocs);
        assert_int_equal(cupti, 0);
    }
    assert_non_null(strstr(out, "alloc_events 4\n"));

    /* GMP_CUDA_MODE=interpose: the injection does nothing */
    run("GMP_CUDA_MODE=interpose CUDA_INJECTION64_PATH=\"$P\" LD_PRELOAD=\"$L\"",
        "gpu_oom_cuda", "until-oom 0");
    assert_int_equal(code(), 3);
    assert_int_equal(count_lines(err), 1);
    bundle_events(&total, &cupti, &allocs);
    assert_int_equal(allocs, 4);
    assert_int_equal(cupti, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_cudart_way),
        cmocka_unit_test(test_older_pytorch_vmm_way),
        cmocka_unit_test(test_linked_directly),
        cmocka_unit_test(test_runtime_over_driver_is_one_event),
        cmocka_unit_test(test_lookups_as_without_preload),
        cmocka_unit_test(test_nvcc_static_cudart),
        cmocka_unit_test(test_real_shared_cudart),
        cmocka_unit_test(test_cupti_injection),
        cmocka_unit_test(test_cupti_fallbacks),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
