/*
 * test_show.c — what `gmp-inspect show` reads out of a bundle the recorder
 * wrote, where the words are the point: pinned host memory said as such;
 * the request a framework's message states when no call shows it (PyTorch's
 * expandable segments, JAX's pool); a MemoryError near RLIMIT_AS naming the
 * limit; growth with one free; "Failed at" from PHP's words, past Cython's
 * frames, from a traceback and from the frames a JVM or Node printed; a host
 * limit "near" only past the warning's threshold.  test_inspect.c holds the
 * verbs' behaviour on hostile and well-formed input.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char scratch[256];
static char out[1 << 16], err[1 << 16];

static int run_verb(const char *verb, const char *arg, const char *arg2)
{
    return inspect_verb(verb, arg, arg2, out, sizeof out, err, sizeof err);
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
    write_file_in(bundle, "environment.json", text, strlen(text));
    free(text);
    text = json_dumps(md, 0);
    write_file_in(bundle, "metadata.json", text, strlen(text));
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
    write_file_in(bundle, "stacks.json", stacks, sizeof stacks - 1);
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

static int setup(void **state)
{
    (void)state;
    scratch_make(scratch, sizeof scratch, "show");
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
        cmocka_unit_test(test_pinned_host_said_so),
        cmocka_unit_test(test_the_request_the_framework_states),
        cmocka_unit_test(test_limit_without_a_failed_call),
        cmocka_unit_test(test_growth_with_one_free),
        cmocka_unit_test(test_failed_at_from_php_words),
        cmocka_unit_test(test_failed_at_past_cython_frames),
        cmocka_unit_test(test_failed_at_from_a_traceback),
        cmocka_unit_test(test_failed_at_from_printed_frames),
        cmocka_unit_test(test_near_is_past_the_threshold),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
