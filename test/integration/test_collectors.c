/*
 * test_collectors.c — what a bundle says held the memory and what the
 * machine looked like, from real processes under the preload:
 * the libcuda and NVML doubles for the devices (another process holding
 * 100 MiB of the GPU), this machine's real /proc and cgroup for the host.
 *   - device free/total at the failure, this process's and the others'
 *     bytes, as NVML lists them when the program loaded it (or GMP_NVML=load)
 *     and estimated otherwise, NVML never loaded by us unasked;
 *   - allocations.json: the live allocations, largest first, summing to the
 *     bytes in use, by API, their stacks symbolising to the allocating
 *     function (show names it);
 *   - host_state: RSS, machine, the rlimit the test set, cgroup when any;
 *   - the leak report lists exactly what the program left;
 *   - a secret-looking variable's value appears in no file;
 *   - rank in the bundle name and manifest; python and torch versions;
 *   - GMP_SAMPLE_MS sample events; `gmp-inspect info` with and without GPUs.
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
#include <unistd.h>

#define MIB (1024ll * 1024)
#define OTHER (100 * MIB)

static preload_paths paths;
static char out[1 << 16], err[1 << 16];
static char doubles[1100];

/* The held program under the preload; env: assignments for it ("A=1 B=2"),
 * or shell commands ending in ';'. */
static int held(const char *env, const char *mode)
{
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_FAKE_OTHER_BYTES=%lld; %s exec %s/test/gpu/held %s",
             paths.preload, OTHER, env ? env : "", paths.build, mode);
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

static json_t *device0(json_t *md)
{
    json_t *states = json_object_get(md, "device_state");
    assert_int_equal(json_array_size(states), 1);
    json_t *d = json_array_get(states, 0);
    assert_int_equal(json_int(d, "device"), 0);
    return d;
}

/* The sum of the program's "alloc ADDRESS SIZE" lines. */
static long long printed_total(const char *text, const char *tag)
{
    long long total = 0;
    for (const char *p = text; (p = strstr(p, tag)); p++) {
        unsigned long long size = 0;
        char addr[64];
        if (sscanf(p + strlen(tag), " %63s %llu", addr, &size) == 2)
            total += (long long)size;
    }
    return total;
}

/* One line of a program holding device, pinned and host memory, killed
 * by SIGKILL: the recovered bundle's top sites list that line once per
 * kind of memory, and each row says which; so does "Held by", whose total
 * is of every kind. */
static void test_killed_sites_name_their_memory(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; %s/test/gpu/held wait-mixed > '%s/held.out' & pid=$!; "
             "for i in $(seq 100); do grep -q ready '%s/held.out' && break; sleep 0.1; done; "
             "kill -9 $pid; wait $pid; unset LD_PRELOAD; '%s' recover \"$GMP_RUN_DIR\" "
             ">/dev/null; '%s' show \"$GMP_DUMP_DIR\"/oom_dump_*",
             paths.preload, paths.build, paths.scratch, paths.scratch, inspect_path(),
             inspect_path());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    const char *sites = strstr(out, "\nTop allocation sites");
    if (!sites || !strstr(sites, "64.0 MiB in 1 allocation(s) of cuda:0 memory  allocate_each (held.c:") ||
        !strstr(sites, "32.0 MiB in 1 allocation(s) of pinned host memory  allocate_each (held.c:") ||
        !strstr(sites, "16.0 MiB in 1 allocation(s) of host memory  allocate_each (held.c:") ||
        !strstr(out, "\nHeld by:          64.0 MiB of cuda:0 memory in 1 allocation(s) made at "
                     "allocate_each (held.c:"))
        fail_msg("show:\n%s\nstderr: %s", out, err);
}

static void test_device_state_from_nvml_the_program_loaded(void **state)
{
    (void)state;
    char env[2048];
    snprintf(env, sizeof env, "GMP_TEST_DLOPEN=%s/libnvidia-ml.so.1", doubles);
    assert_int_equal(held(env, "hold"), 3);
    long long mine = printed_total(out, "alloc");
    assert_int_equal(mine, 480 * MIB);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    json_t *d = device0(md);
    assert_int_equal(json_int(d, "total"), 1024 * MIB);
    assert_int_equal(json_int(d, "free"), 1024 * MIB - mine - OTHER); /* at the failure */
    assert_int_equal(json_int(d, "process_bytes"), mine);
    assert_int_equal(json_int(d, "driver_process_bytes"), mine);
    assert_int_equal(json_int(d, "other_processes_bytes"), OTHER);
    assert_int_equal(json_int(d, "other_process_count"), 1);
    assert_string_equal(json_str(d, "other_processes_source"), "driver");
    assert_string_equal(json_str(d, "name"), "Fake GPU 0");
    assert_string_equal(json_str(d, "sampling_source"), "cuMemGetInfo+nvml");
    json_decref(md);
}

/* Unasked, the preload never loads NVML: the others are an estimate. */
static void test_nvml_never_loaded_unasked(void **state)
{
    (void)state;
    char env[2048];
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", doubles);
    assert_int_equal(held(env, "hold"), 3);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *d = device0(md);
    assert_string_equal(json_str(d, "other_processes_source"), "estimate");
    assert_int_equal(json_int(d, "other_processes_bytes"), OTHER);
    assert_string_equal(json_str(d, "sampling_source"), "cuMemGetInfo");
    json_decref(md);
    json_t *mods = bundle_file(bundle, "modules.json");
    char *text = json_dumps(mods, 0);
    assert_null(strstr(text, "libnvidia-ml"));
    free(text);
    json_decref(mods);
    /* GMP_NVML=load: the user asked */
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s GMP_NVML=load", doubles);
    assert_int_equal(held(env, "hold"), 3);
    md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(device0(md), "other_processes_source"), "driver");
    json_decref(md);
}

static void test_live_allocations_sum_to_bytes_in_use(void **state)
{
    (void)state;
    assert_int_equal(held(NULL, "hold"), 3);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *a = bundle_file(bundle, "allocations.json");
    long long in_use = json_int(json_object_get(md, "failed_request"), "bytes_in_use");
    assert_int_equal(in_use, 480 * MIB);
    assert_int_equal(json_int(a, "live_bytes"), in_use);
    assert_int_equal(json_int(a, "live_count"), 4);
    /* every allocation the program printed, largest first, none other */
    json_t *list = json_object_get(a, "allocations");
    assert_int_equal(json_array_size(list), 4);
    long long sum = 0, previous = -1;
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) {
        char line[128];
        long long size = json_int(x, "size");
        snprintf(line, sizeof line, "alloc %s %lld\n", json_str(x, "address"), size);
        if (!strstr(out, line))
            fail_msg("%s not printed by the program:\n%s", line, out);
        if (previous >= 0 && size > previous)
            fail_msg("not largest first: %lld after %lld", size, previous);
        previous = size;
        sum += size;
        assert_true(json_int(x, "stack_id") > 0);
    }
    assert_int_equal(sum, in_use);
    assert_string_equal(json_str(json_array_get(list, 3), "api"), "cudaMallocManaged");
    json_t *by_api = json_object_get(a, "by_api");
    assert_int_equal(json_array_size(by_api), 2);
    json_array_foreach(by_api, i, x) {
        long long want = strcmp(json_str(x, "api"), "cudaMalloc") ? 32 * MIB : 448 * MIB;
        assert_int_equal(json_int(x, "bytes"), want);
    }
    /* the stacks symbolise to the function that allocated */
    char *argv_show[] = {(char *)inspect_path(), "show", bundle, NULL};
    assert_int_equal(exit_code_of(run_capture((const char *const *)argv_show, out, sizeof out,
                                              err, sizeof err)), 0);
    if (!strstr(out, "Held:             4 live allocation(s), 480.0 MiB") ||
        !strstr(out, "480.0 MiB in 4 allocation(s)  allocate_weights (held.c:") ||
        !strstr(out, "\nHeld by:          480.0 MiB in 4 allocation(s) made at allocate_weights "
                     "(held.c:") ||
        !strstr(out, "other processes 100.0 MiB"))
        fail_msg("show:\n%s", out);
    json_decref(a);
    json_decref(md);
}

/* GMP_STACKS=0: no stacks, and the bundle says so by having none. */
static void test_no_stacks_when_off(void **state)
{
    (void)state;
    assert_int_equal(held("GMP_STACKS=0", "hold"), 3);
    char bundle[1024];
    json_t *a = only_bundle_file(paths.dumps, "allocations.json", bundle, sizeof bundle);
    assert_int_equal(json_int(json_array_get(json_object_get(a, "allocations"), 0), "stack_id"),
                     0);
    char path[1100];
    snprintf(path, sizeof path, "%s/stacks.json", bundle);
    assert_int_not_equal(access(path, F_OK), 0);
    json_decref(a);
}

static void test_host_state(void **state)
{
    (void)state;
    /* RLIMIT_RSS: a limit the bundle records that no run enforces (a
     * sanitizer's shadow memory cannot live under `ulimit -v`) */
    assert_int_equal(held("ulimit -S -m 8000000;", "hold"), 3);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    json_t *hs = json_object_get(md, "host_state");
    json_t *proc = json_object_get(hs, "process");
    assert_true(json_int(proc, "vm_rss") > 0);
    assert_true(json_int(proc, "vm_hwm") >= json_int(proc, "vm_rss"));
    json_t *mach = json_object_get(hs, "machine");
    assert_true(json_int(mach, "mem_total") > 0);
    assert_true(json_int(mach, "mem_available") <= json_int(mach, "mem_total"));
    json_t *rss = json_object_get(json_object_get(hs, "rlimits"), "rss");
    assert_int_equal(json_int(rss, "soft"), 8000000ll * 1024);
    /* the cgroup as this machine has it */
    char cg[4096] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    size_t n = f ? fread(cg, 1, sizeof cg - 1, f) : 0;
    cg[n] = '\0';
    if (f)
        fclose(f);
    json_t *group = json_object_get(hs, "cgroup");
    if (strstr(cg, "0::/") || strstr(cg, ":memory:")) {
        if (json_is_object(group))
            assert_true(json_int(group, "memory_current") > 0);
        else
            print_message("the memory cgroup is not readable here; host_state.cgroup null\n");
    }
    json_decref(md);
}

static void test_leak_report_lists_what_was_left(void **state)
{
    (void)state;
    assert_int_equal(held("GMP_LEAK_CHECK=1", "leak"), 0);
    if (!strstr(err, "gpumemprof: leak check: 2 GPU allocations never freed (64.0 MiB); report: ") ||
        count_lines(err) != 1)
        fail_msg("stderr: %s", err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
    assert_int_equal(count_prefixed(paths.dumps, "leak_report_"), 1);
    char report[1024];
    const char *at = strstr(err, "report: ") + 8;
    snprintf(report, sizeof report, "%.*s", (int)strcspn(at, "\n"), at);
    json_t *leaks = bundle_file(report, "leaks.json");
    assert_int_equal(json_int(leaks, "live_count"), 2);
    assert_int_equal(json_int(leaks, "live_bytes"), 64 * MIB);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(leaks, "allocations"), i, x) {
        char line[128];
        snprintf(line, sizeof line, "left %s %lld\n", json_str(x, "address"),
                 json_int(x, "size"));
        if (!strstr(out, line))
            fail_msg("%s is not what the program left:\n%s", line, out);
    }
    json_t *manifest = bundle_file(report, "manifest.json");
    assert_string_equal(json_str(manifest, "kind"), "leak_report");
    json_decref(manifest);
    json_decref(leaks);
    /* show reads it, naming where the leaked bytes came from */
    const char *show[] = {inspect_path(), "show", report, NULL};
    assert_int_equal(exit_code_of(run_capture(show, out, sizeof out, err, sizeof err)), 0);
    if (!strstr(out, "exited with 2 GPU allocation(s) never freed (64.0 MiB)") ||
        !strstr(out, "64.0 MiB in 2 allocation(s)  allocate_weights (held.c:") ||
        !strstr(out, "), called from main\n"))
        fail_msg("show:\n%s", out);
    /* everything freed: one line, no report */
    assert_int_equal(held("GMP_LEAK_CHECK=1", "clean"), 0);
    assert_string_equal(err, "gpumemprof: leak check: all 3 GPU allocations were freed\n");
    assert_int_equal(count_prefixed(paths.dumps, "leak_report_"), 0);
    /* off by default */
    assert_int_equal(held(NULL, "leak"), 0);
    assert_string_equal(err, "");
}

/* grep -r VALUE DIR finds nothing */
static void expect_nowhere(const char *dir, const char *value)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "grep -rl -- '%s' '%s'", value, dir);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char o[4096], e[1024];
    int status = run_capture(argv, o, sizeof o, e, sizeof e);
    if (exit_code_of(status) != 1)
        fail_msg("'%s' found in: %s", value, o);
}

static void test_secrets_never_written(void **state)
{
    (void)state;
    assert_int_equal(held("MY_API_TOKEN=tok-71c3e9 NCCL_IB_AUTH_KEY=key-5a0d2f "
                          "XLA_FLAGS=--xla_gpu_memory_fraction=0.5",
                          "hold --api-token arg-3c4d5e DB_PASSWORD=pw-6f7a8b --epochs 3"),
                     3);
    char bundle[1024];
    json_t *env = only_bundle_file(paths.dumps, "environment.json", bundle, sizeof bundle);
    json_t *vars = json_object_get(env, "environment");
    assert_string_equal(json_str(vars, "NCCL_IB_AUTH_KEY"), "[REDACTED]");
    assert_string_equal(json_str(vars, "XLA_FLAGS"), "--xla_gpu_memory_fraction=0.5");
    /* secret-looking options on the command line are masked, the rest kept */
    json_t *cmd = json_object_get(json_object_get(env, "process"), "cmdline");
    assert_string_equal(json_string_value(json_array_get(cmd, 2)), "--api-token");
    assert_string_equal(json_string_value(json_array_get(cmd, 3)), "**********");
    assert_string_equal(json_string_value(json_array_get(cmd, 4)), "DB_PASSWORD=*********");
    assert_string_equal(json_string_value(json_array_get(cmd, 6)), "3");
    json_decref(env);
    expect_nowhere(paths.dumps, "tok-71c3e9");
    expect_nowhere(paths.dumps, "key-5a0d2f");
    expect_nowhere(paths.dumps, "arg-3c4d5e");
    expect_nowhere(paths.dumps, "pw-6f7a8b");
}

/* A rank in the name and the manifest; the GPU, Python and torch in
 * environment.json (a library at torch/lib/ beside a version.py). */
static void test_rank_and_versions(void **state)
{
    (void)state;
    char torch[1200], cmd[8192], env[4096];
    snprintf(torch, sizeof torch, "%s/site/torch", paths.scratch);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/lib && cp %s/libnvidia-ml.so.1 %s/lib/libc10.so && "
             /* as torch 2.15 writes it: the name first in __all__ */
             "printf \"from typing import Optional\\n\\n__all__ = ['__version__', 'debug', "
             "'git_version']\\n__version__ = '9.8.7+fake'\\ngit_version = 'x'\\n\" > %s/version.py",
             torch, doubles, torch, torch);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
    snprintf(env, sizeof env, "RANK=3 LOCAL_RANK=1 WORLD_SIZE=8 GMP_TEST_DLOPEN=%s/lib/libc10.so",
             torch);
    assert_int_equal(held(env, "hold"), 3);
    char bundle[1024];
    json_t *manifest = only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle);
    if (!strstr(bundle, "_cuda_r3_"))
        fail_msg("bundle name without its rank: %s", bundle);
    assert_int_equal(json_int(manifest, "rank"), 3);
    char host[256];
    gethostname(host, sizeof host);
    assert_string_equal(json_str(manifest, "host"), host);
    json_decref(manifest);
    json_t *e = bundle_file(bundle, "environment.json");
    json_t *rank = json_object_get(json_object_get(e, "process"), "rank");
    assert_int_equal(json_int(rank, "rank"), 3);
    assert_int_equal(json_int(rank, "local_rank"), 1);
    assert_int_equal(json_int(rank, "world_size"), 8);
    json_t *sys = json_object_get(e, "system");
    assert_string_equal(json_str(sys, "torch_version"), "9.8.7+fake");
    /* the seed's fields: CUDA as the process's runtime saw it */
    assert_true(json_is_true(json_object_get(sys, "cuda_available")));
    assert_string_equal(json_str(sys, "cuda_version"), "13.1");
    json_t *gpu = json_object_get(e, "gpu");
    assert_string_equal(json_str(gpu, "cuda_driver_version"), "13.0");
    assert_string_equal(json_str(gpu, "cuda_runtime_version"), "13.1");
    json_t *dev = json_array_get(json_object_get(gpu, "devices"), 0);
    assert_string_equal(json_str(dev, "name"), "Fake GPU 0");
    assert_int_equal(json_int(dev, "total"), 1024 * MIB);
    json_decref(e);
}

/* torch's version in the bundle of a host OOM too (a process that loaded
 * libtorch and then failed a malloc: no GPU library is called then, but
 * the version beside libtorch is still read). */
static void test_torch_version_in_a_host_oom(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    char torch[400], cmd[8192];
    snprintf(torch, sizeof torch, "%s/host-site/torch", paths.scratch);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/lib && cp %s/libmalloc_only.so %s/lib/libc10.so && "
             "printf \"__version__ = '2.3.0+cpu'\\n\" > %s/version.py && "
             "export LD_PRELOAD='%s' GMP_WATCHDOG=0 && "
             "python3 -c 'import ctypes\n"
             "ctypes.CDLL(\"%s/lib/libc10.so\")\n" PY_MALLOC_80_TIB "'",
             torch, doubles, torch, torch, paths.preload, torch);
    assert_int_equal(exit_code_of(run_script(&paths, cmd, out, sizeof out, err, sizeof err)), 0);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    json_t *e = bundle_file(bundle, "environment.json");
    assert_string_equal(json_str(json_object_get(e, "system"), "torch_version"), "2.3.0+cpu");
    assert_true(json_is_false(json_object_get(json_object_get(e, "system"), "cuda_available")));
    json_decref(e);
}

static void test_python_version(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; python3 -c 'import platform; "
             "print(platform.python_version()); bytearray(1 << 50)'",
             paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    json_t *e = only_bundle_file(paths.dumps, "environment.json", NULL, 0);
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(out, "\n"), out);
    assert_string_equal(json_str(json_object_get(e, "system"), "python_version"), want);
    json_decref(e);
}

static void test_sample_events(void **state)
{
    (void)state;
    assert_int_equal(held("GMP_SAMPLE_MS=10", "slow-oom"), 3);
    json_t *events = only_bundle_file(paths.dumps, "events.json", NULL, 0);
    long long first_free = -1, last_free = -1, host = 0, device = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (strcmp(json_str(ev, "event_type"), "sample"))
            continue;
        if (json_int(ev, "device_id") < 0) {
            host++;
            assert_true(json_int(ev, "total") > 0);
            continue;
        }
        device++;
        assert_int_equal(json_int(ev, "total"), 1024 * MIB);
        if (first_free < 0)
            first_free = json_int(ev, "free");
        last_free = json_int(ev, "free");
    }
    if (host < 3 || device < 3)
        fail_msg("%lld host and %lld device samples", host, device);
    assert_true(last_free < first_free); /* the fill shows */
    json_decref(events);
}

static void info(const char *env, int json)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s' info%s", env, inspect_path(), json ? " --json" : "");
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
}

static void test_info(void **state)
{
    (void)state;
    /* this machine as it is: the host always, GPUs where there are */
    info("", 0);
    if (!strstr(out, "  host  available") || !strstr(out, "Machine: "))
        fail_msg("info:\n%s", out);
    info("", 1);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    if (!j)
        fail_msg("info --json: %s\n%s", jerr.text, out);
    assert_true(json_integer_value(json_object_get(
                    json_object_get(json_object_get(j, "host_state"), "machine"), "mem_total")) >
                0);
    json_t *c;
    size_t i;
    json_array_foreach(json_object_get(j, "collectors"), i, c) {
        if (!strcmp(json_str(c, "name"), "host"))
            assert_true(json_is_true(json_object_get(c, "available")));
        else if (!json_is_true(json_object_get(c, "available")))
            assert_true(strlen(json_str(c, "why_not")) > 0);
    }
    json_decref(j);
    /* the doubles: two GPUs, another process holding 100 MiB of each */
    char env[2048];
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s GMP_FAKE_OTHER_BYTES=%lld", doubles, OTHER);
    info(env, 1);
    j = json_loads(out, 0, &jerr);
    assert_non_null(j);
    json_array_foreach(json_object_get(j, "collectors"), i, c) {
        if (strcmp(json_str(c, "name"), "nvml"))
            continue;
        json_t *devices = json_object_get(c, "devices");
        assert_int_equal(json_array_size(devices), 2);
        json_t *d = json_array_get(devices, 1);
        assert_int_equal(json_int(d, "other_processes_bytes"), OTHER);
        assert_int_equal(json_int(d, "free"), 1024 * MIB - OTHER);
        assert_string_equal(json_str(d, "name"), "Fake GPU 1");
    }
    assert_string_equal(json_str(json_object_get(j, "gpu"), "nvidia_driver_version"),
                        "999.12.34");
    json_decref(j);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "collectors");
    snprintf(doubles, sizeof doubles, "%s/test/doubles", paths.build);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_state_from_nvml_the_program_loaded),
        cmocka_unit_test(test_nvml_never_loaded_unasked),
        cmocka_unit_test(test_live_allocations_sum_to_bytes_in_use),
        cmocka_unit_test(test_no_stacks_when_off),
        cmocka_unit_test(test_host_state),
        cmocka_unit_test(test_leak_report_lists_what_was_left),
        cmocka_unit_test(test_secrets_never_written),
        cmocka_unit_test(test_rank_and_versions),
        cmocka_unit_test(test_torch_version_in_a_host_oom),
        cmocka_unit_test(test_python_version),
        cmocka_unit_test(test_sample_events),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_killed_sites_name_their_memory),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
