/*
 * test_preload.c — real processes under LD_PRELOAD=libgpumemprof_preload.so
 * running out of host memory in each way (see test/programs/host_oom.c),
 * python3 dying of MemoryError under `ulimit -v`, allocators
 * preloaded after ours, and the everyday processes that must pay nothing.
 * Each asserts what a user would see: the program's output and exit status
 * unchanged, the number of bundles, what they say, one stderr line each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "preload_run.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_everyday_processes_pay_nothing(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s quiet; echo piped | cat; ls / >/dev/null; true", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    assert_string_equal(out, "ok threads=1\npiped\n"); /* no thread of ours */
    assert_string_equal(err, "");
    assert_int_equal(access(paths.dumps, F_OK), -1);  /* no dump directory */
    assert_int_equal(count_prefixed(paths.rundir, ""), 0); /* no ring file */
}

static void test_python_workload_unchanged(void **state)
{
    (void)state;
    const char *py = "python3 -c 'import json; d={str(i): i for i in range(300000)}; "
                     "s=json.dumps(d); print(len(s), sum(json.loads(s).values()))'";
    run_sh("GMP_ENABLED=0", py);
    static char plain[sizeof out];
    memcpy(plain, out, sizeof out);
    assert_int_equal(exit_code(), 0);
    run_sh(NULL, py);
    assert_int_equal(exit_code(), 0);
    assert_string_equal(out, plain);
    assert_string_equal(err, "");
    assert_int_equal(bundle_count(), 0);
    assert_int_equal(count_prefixed(paths.rundir, "ring_"), 0); /* removed at exit */
}

static void test_grow_until_enomem(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ulimit -v 400000; exec %s grow", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 1); /* the program's own status */
    unsigned long long asked = 0;
    assert_int_equal(sscanf(out, "failed at %llu", &asked), 1);
    assert_one_oom_line("host");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "reason"), "ENOMEM");
    assert_string_equal(json_str(md, "exception_type"), "ENOMEM");
    assert_string_equal(json_str(md, "exception_module"), "libc");
    assert_string_equal(json_str(md, "backend"), "cpu");
    assert_string_equal(json_str(md, "confirmed_by"), "exit");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), "malloc");
    assert_int_equal(json_int(fr, "size"), asked);
    assert_int_equal(json_int(fr, "device"), -1);
    assert_int_equal(json_int(fr, "code"), 12);
    json_decref(md);
}

static void test_python_memoryerror(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    const char *py =
        "ulimit -v 400000; exec python3 -c '\n"
        "def grow_forever():\n"
        "    size = 1 << 20\n"
        "    try:\n"
        "        while True:\n"
        "            data = b\"x\" * size\n"
        "            size = int(size * 1.5)\n"
        "    except MemoryError:\n"
        "        print(\"MemoryError at\", size, flush=True)\n"
        "        raise\n"
        "grow_forever()\n'";
    run_sh(NULL, py);
    assert_int_equal(exit_code(), 1);
    assert_non_null(strstr(err, "MemoryError"));
    unsigned long long asked = 0;
    assert_int_equal(sscanf(out, "MemoryError at %llu", &asked), 1);
    assert_one_oom_line("host");
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    long long size = json_int(json_object_get(md, "failed_request"), "size");
    /* the bytes object plus CPython's object header */
    if (size <= (long long)asked || size > (long long)asked + 64)
        fail_msg("failed_request.size %lld is not Python's request for %llu bytes", size,
                 asked);
    assert_string_equal(json_str(md, "backend"), "cpu");
    json_decref(md);

    expect_first_cause(bundle, "a host limit was reached (the address-space limit)");
    expect_headline(bundle, "the process ran out of host memory (");

    /* the Python stack of the failing thread, captured at the failure */
    char path[1100], text[4096] = "";
    snprintf(path, sizeof path, "%s/python_traceback.txt", bundle);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    if (!strstr(text, "File \"<string>\", line 6 in grow_forever\n") ||
        !strstr(text, "line 11 in <module>\n"))
        fail_msg("python_traceback.txt: %s", text);
}

/* The everyday Python death: a loop appends 20 MiB chunks until
 * MemoryError.  The bundle is confirmed at exit, so the teardown's frees
 * follow the failure in its events: show still tells the growth before the
 * failure, prints the Python stack innermost first, ends the events at the
 * failed request (marked) and says what was in use at exit for what it is.
 * What held the memory is the Python line that made it, the chunks kept
 * at the failure (N of 20 MiB: N x 20 MiB), not the interpreter's C; the
 * limit is judged by the address space when the call failed. */
static void test_python_growth_story(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    run_sh(NULL, "ulimit -v 700000; exec python3 -c '\n"
                 "chunks = []\n"
                 "def load_batch():\n"
                 "    chunks.append(bytearray(20 << 20))\n"
                 "while True:\n"
                 "    load_batch()\n'");
    assert_int_equal(exit_code(), 1);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "confirmed_by"), "exit");
    json_decref(md);
    const char *shown = show_output(bundle);
    unsigned held_mib = 0, held_count = 0;
    const char *held = strstr(shown, "\nHeld by:          ");
    char site[200] = "";
    if (!held || sscanf(held, "\nHeld by: %u.0 MiB in %u allocation(s) made at %199[^\n]",
                        &held_mib, &held_count, site) != 3 ||
        held_count < 20 || held_mib != 20 * held_count ||
        strcmp(site, "<string>:4 in load_batch (called from <string>:6)"))
        fail_msg("show does not say what held the memory:\n%s", shown);
    static const char *const want[] = {
        "a host limit was reached (the address-space limit)",
        "was mapped (VmSize) when it failed, and 20.0 MiB more was asked for",
        "steady growth, like a leak or a cache that never lets go",
        " before the failure, from one site: <string>:4 in load_batch (called from "
        "<string>:6)",
        "\nPython stack:     <string>:4 in load_batch  (innermost first)\n"
        "                  <string>:6 in <module>\n",
        "\nFailed at:        <string>:4 in load_batch\n",
        "Last 10 event(s) up to the failure, newest last:\n",
        "  <- the failed request\n  ... ",
        "In use at exit:",
    };
    expect_all_said(shown, want, sizeof want / sizeof *want);
}

/* 80 TiB from malloc on a machine with far less memory and swap: said in
 * those words, with the machine's numbers (not "nothing points at one"). */
static void test_request_no_host_could_give(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    run_sh(NULL, "exec python3 -c 'import ctypes\n" PY_MALLOC_80_TIB "'");
    assert_int_equal(exit_code(), 0);
    assert_string_equal(out, "None\n");
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    expect_first_cause(bundle, "a request larger than this host could ever give");
    const char *shown = show_output(bundle);
    if (!strstr(shown, "evidence: asked for 80.0 TiB at once; the machine has "))
        fail_msg("no numbers:\n%s", shown);
}

/* A tool run as `python3 -m` from an installed package fails with every
 * frame a library's: the site is its innermost (not runpy's outermost
 * glue, which is in every such stack), said to be no frame of the
 * program's own, and triage groups by it. */
static void test_python_site_inside_a_package(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "pkgs=%s/lib/python3/site-packages; mkdir -p $pkgs && "
             "printf 'def reserve():\n    %s\n\nreserve()\n' "
             "> $pkgs/gmp_reserve_tool.py && PYTHONPATH=$pkgs exec python3 -m gmp_reserve_tool",
             paths.scratch, "return bytearray(80 << 40)");
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 1);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    if (!strstr(shown, "\nFailed at:        gmp_reserve_tool.py:2 in reserve  "
                       "(no frame of the program's own)\n"))
        fail_msg("show names another site:\n%s", shown);
    static char triaged[1 << 16], triaged_err[4096];
    const char *triage[] = {inspect_path(), "triage", paths.dumps, NULL};
    int how = run_capture(triage, triaged, sizeof triaged, triaged_err, sizeof triaged_err);
    assert_int_equal(exit_code_of(how), 3); /* an out-of-memory death among the bundles */
    if (!strstr(triaged, "gmp_reserve_tool.py:2 in reserve"))
        fail_msg("triage groups by another site:\n%s", triaged);
}

/* A C++ program's failed allocation: show names the site as C++. */
static void test_cxx_site_reads_as_cxx(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec %s/test/programs/cxx_oom", paths.build);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 1);
    if (strncmp(err, "reserve failed\n", 15))
        fail_msg("the program's own words first: %s", err);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    if (!strstr(shown, "\nFailed at:        model::reserve(unsigned long) (cxx_oom.cc:"))
        fail_msg("the site is not C++:\n%s", shown);
}

/* A rank of a distributed run: show names the run from its launcher's
 * variables (torchrun's run id and restart, the rank in the world and on
 * its node, the rendezvous) and where the run's other records went
 * (torchrun's error file, PyTorch's NCCL flight recorder); a process with
 * none of them has no Run line. */
static void test_run_named_from_its_launcher(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s fail-twice", program);
    run_sh("TORCHELASTIC_RUN_ID=7f3a TORCHELASTIC_RESTART_COUNT=1 RANK=1 LOCAL_RANK=1 "
           "WORLD_SIZE=3 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "
           "TORCHELASTIC_ERROR_FILE=/tmp/torchelastic_7f3a/attempt_1/1/error.json "
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/nccl_trace_rank_",
           cmd);
    assert_int_equal(exit_code(), 0);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *want[] = {
        "\nRun:              torchrun run 7f3a (restart 1), rank 1 of 3 (local 1) on node 0, "
        "rendezvous 127.0.0.1:29500\n",
        "\nRun's error file: /tmp/torchelastic_7f3a/attempt_1/1/error.json (torchrun's",
        "\nNCCL trace:       /tmp/nccl_trace_rank_1 (PyTorch's NCCL flight recorder",
    };
    expect_all_said(show_output(bundle), want, sizeof want / sizeof *want);

    run_sh(NULL, cmd);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    if (strstr(show_output(bundle), "\nRun:"))
        fail_msg("a process of its own has a Run line:\n%s", show_output(bundle));
}

static void test_second_failure_and_timeout_and_first(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s fail-twice", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "confirmed_by"), "second_failure");
    json_decref(md);
    expect_first_cause(bundle, "a request larger than any machine's memory"); /* 2^60 bytes */
    /* the failed request is the first of the two same-sized failures, not
     * the one that confirmed it */
    static char listed[1 << 16], listed_err[4096];
    const char *events[] = {inspect_path(), "events", bundle, NULL};
    assert_int_equal(run_capture(events, listed, sizeof listed, listed_err, sizeof listed_err), 0);
    char *first = strstr(listed, "  oom  "), *second = first ? strstr(first + 1, "  oom  ") : NULL;
    if (!second || !strstr(first, "<- the failed request\n") ||
        strstr(first, "<- the failed request\n") > second || strstr(second, "<- the failed"))
        fail_msg("the failed request is not the first failure:\n%s", listed);

    snprintf(cmd, sizeof cmd, "%s fail-sleep", program);
    run_sh("GMP_OOM_CONFIRM_MS=300", cmd);
    assert_int_equal(exit_code(), 0);
    /* the watcher thread exists only once an episode has opened */
    assert_string_equal(out, "threads 1 then 2\n");
    md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "confirmed_by"), "timeout");
    json_decref(md);

    run_sh("GMP_OOM_POLICY=first", cmd);
    md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "confirmed_by"), "first");
    json_decref(md);
}

static void test_recovery_is_not_an_oom(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("setrlimit(RLIMIT_AS)");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s recover", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    assert_string_equal(out, "recovered\n");
    assert_string_equal(err, "");
    assert_int_equal(bundle_count(), 0);

    /* and the next bundle counts it, with its event */
    snprintf(cmd, sizeof cmd, "%s recover-then-fail", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    char path[2048];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", path, sizeof path);
    assert_int_equal(json_int(md, "recovered_episodes"), 1);
    json_decref(md);
    json_t *events = only_bundle_file(paths.dumps, "events.json", NULL, 0);
    int recovered = 0, ooms = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        recovered += !strcmp(json_str(ev, "event_type"), "oom_recovered");
        ooms += !strcmp(json_str(ev, "event_type"), "oom");
    }
    assert_int_equal(recovered, 1);
    assert_int_equal(ooms, 3);
    json_decref(events);

    /* a recovered failure that the program then calls an OOM is the
     * failed request of the message's bundle */
    snprintf(cmd, sizeof cmd, "%s recover-then-say", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    md = only_bundle_file(paths.dumps, "metadata.json", path, sizeof path);
    assert_string_equal(json_str(md, "reason"), "message_pattern:MemoryError");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), "malloc");
    assert_int_equal(json_int(fr, "size"), 300 << 20);
    json_decref(md);
    const char *shown = show_output(path);
    if (strstr(shown, "no allocation call failed") ||
        !strstr(shown, "\nFailed request:   malloc of 300.0 MiB of host memory"))
        fail_msg("show does not tell the failed malloc:\n%s", shown);
}

/* Python's small objects outgrow RLIMIT_AS: malloc(64) fails, the
 * MemoryError unwinds and its traceback is printed with memory the
 * unwinding gave back (a success the failed size would call a recovery).
 * Every time one bundle: the failed malloc, Python's exception, and the
 * limit named by the address space (CPython's arenas are mapped, not
 * malloc'd, so the bytes malloc holds are far below it). */
static void test_python_small_objects_outgrow_the_limit(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    for (int run = 0; run < 3; run++) {
        run_sh(NULL, "ulimit -v 500000; exec python3 -c '\n"
                     "cache = []\n"
                     "def remember(i):\n"
                     "    cache.append({\"id\": i, \"name\": \"x\" * 20})\n"
                     "i = 0\n"
                     "while True:\n"
                     "    remember(i)\n"
                     "    i += 1\n'");
        assert_int_equal(exit_code(), 1);
        char bundle[1024];
        json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
        assert_string_equal(json_str(md, "exception_type"), "MemoryError");
        /* the object's malloc, not the arena CPython's allocator was refused
         * (it asks malloc then): its request is what the program wanted */
        assert_string_equal(json_str(json_object_get(md, "failed_request"), "api"), "malloc");
        json_decref(md);
        expect_first_cause(bundle, "a host limit was reached (the address-space limit)");
        const char *shown = show_output(bundle);
        /* the line that failed: the dict's, the call's or the counter's */
        if (!strstr(shown, "was mapped (VmSize)") || !strstr(shown, "\nFailed at:        <string>:"))
            fail_msg("run %d:\n%s", run, shown);
    }
}

static void test_forked_child(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s fork", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    int child = 0;
    assert_int_equal(sscanf(out, "child %d", &child), 1);
    json_t *man = only_bundle_file(paths.dumps, "manifest.json", NULL, 0);
    assert_int_equal(json_int(man, "pid"), child);
    json_decref(man);
    json_t *env = only_bundle_file(paths.dumps, "environment.json", NULL, 0);
    assert_int_equal(json_int(env, "pid"), child);
    json_decref(env);
}

static void test_sixteen_threads(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s threads", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    assert_string_equal(out, "threads done\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0); /* exactly one */
    assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), 1ll << 60);
    json_decref(md);
}

static void test_c_api_inside_preloaded_process(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s api", program);
    run_sh(NULL, cmd);
    assert_int_equal(exit_code(), 0);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "context"), "epoch 3, step 120");
    assert_int_equal(json_int(json_object_get(md, "custom_metadata"), "batch_size"), 64);
    json_decref(md);
    json_t *events = only_bundle_file(paths.dumps, "events.json", NULL, 0);
    assert_string_equal(json_str(json_array_get(events, 0), "event_type"), "mark");
    json_decref(events);
}

/* A program that catches the OOM and reports it through the preload gets
 * one bundle for the one failure: the open episode's, or the one written at
 * its second failure, with its exception, context and metadata. */
static void test_program_report_is_the_oom_bundle(void **state)
{
    (void)state;
    static const char *const when[] = {"at-first", "after-second"};
    for (int i = 0; i < 2; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "rm -rf %s; %s report %s", paths.dumps, program, when[i]);
        run_sh(NULL, cmd);
        assert_int_equal(exit_code(), 0);
        json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
        if (!strstr(out, paths.dumps))
            fail_msg("%s: printed %s", when[i], out);
        assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), 1ll << 60);
        assert_string_equal(json_str(md, "confirmed_by"), i ? "second_failure" : "exception");
        assert_string_equal(json_str(md, "exception_type"), "MemoryError");
        assert_string_equal(json_str(md, "exception_message"), "caught it");
        assert_string_equal(json_str(md, "context"), "epoch 7");
        assert_int_equal(json_int(json_object_get(md, "custom_metadata"), "batch_size"), 128);
        json_decref(md);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everyday_processes_pay_nothing),
        cmocka_unit_test(test_python_workload_unchanged),
        cmocka_unit_test(test_grow_until_enomem),
        cmocka_unit_test(test_python_memoryerror),
        cmocka_unit_test(test_python_growth_story),
        cmocka_unit_test(test_request_no_host_could_give),
        cmocka_unit_test(test_python_site_inside_a_package),
        cmocka_unit_test(test_cxx_site_reads_as_cxx),
        cmocka_unit_test(test_second_failure_and_timeout_and_first),
        cmocka_unit_test(test_run_named_from_its_launcher),
        cmocka_unit_test(test_recovery_is_not_an_oom),
        cmocka_unit_test(test_python_small_objects_outgrow_the_limit),
        cmocka_unit_test(test_forked_child),
        cmocka_unit_test(test_sixteen_threads),
        cmocka_unit_test(test_c_api_inside_preloaded_process),
        cmocka_unit_test(test_program_report_is_the_oom_bundle),
    };
    return cmocka_run_group_tests_name("preload", tests, setup, preload_paths_teardown);
}
