/*
 * test_messages.c — OOM deaths that only stderr tells of: python3 printing
 * a PyTorch-style "torch.OutOfMemoryError: CUDA out of memory. Tried to
 * allocate ..." traceback (as frameworks allocating from their own pool
 * do).  With no failing call: a bundle of its own, reason
 * message_pattern:<pattern>.  After a failing call: the message fills the
 * exception of that call's bundle, whether the episode is still open or
 * its bundle was just written (metadata.json rewritten, still valid).  The
 * same lines through stdio and std::cerr; a rate limit's "resource
 * exhausted" is no OOM; one message-only bundle a process.  The traceback
 * Python printed becomes the bundle's Python stack when none was taken at
 * the failure.  The program's own output and status never change; other
 * stderr is ignored.  (test_relays.c has a launcher's and a rank's lines.)
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

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* python3 raising a torch.OutOfMemoryError (torch's library loaded), after
 * `before` (python code). */
static int run_python(const char *env, const char *before)
{
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s %s' GMP_CUDART='%s/test/doubles/libcudart.so.13' %s; "
             "exec python3 -c 'import ctypes, os\n"
             "%s\n"
             "class OutOfMemoryError(RuntimeError):\n"
             "    pass\n"
             "OutOfMemoryError.__module__ = \"torch\"\n"
             "def train_step():\n"
             "    raise OutOfMemoryError(\"" TORCH_MESSAGE "\")\n"
             "train_step()'",
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), paths.build, env ? env : "",
             before ? before : "");
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

/* What the user sees on stderr, but for our own lines, is Python's. */
static void expect_traceback_intact(void)
{
    assert_non_null(strstr(err, "Traceback (most recent call last):\n"));
    assert_non_null(strstr(err, "\ntorch.OutOfMemoryError: " TORCH_MESSAGE "\n"));
}

static json_t *the_bundle(void)
{
    return only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
}

static void expect_torch_exception(json_t *md)
{
    assert_string_equal(json_str(md, "exception_type"), "OutOfMemoryError");
    assert_string_equal(json_str(md, "exception_module"), "torch");
    assert_string_equal(json_str(md, "exception_message"), TORCH_MESSAGE);
}

/* The traceback Python printed is the bundle's Python stack: the failing
 * call released the GIL (ctypes does, as torch does), so none was taken at
 * the failure; show names the innermost frame first. */
static void expect_printed_stack(void)
{
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    static char shown[1 << 16], shown_err[4096];
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    assert_int_equal(run_capture(argv, shown, sizeof shown, shown_err, sizeof shown_err), 0);
    const char *stack = strstr(shown, "\nPython stack:     <string>:");
    if (!stack || !strstr(stack, " in train_step  (innermost first)\n                  <string>:"))
        fail_msg("no Python stack from the printed traceback:\n%s", shown);
    const char *validate[] = {inspect_path(), "validate", bundle, NULL};
    assert_int_equal(run_capture(validate, shown, sizeof shown, shown_err, sizeof shown_err), 0);
}

static void test_message_alone(void **state)
{
    (void)state;
    assert_int_equal(run_python(NULL, NULL), 1);
    expect_traceback_intact();
    json_t *md = the_bundle();
    assert_string_equal(json_str(md, "reason"), "message_pattern:cuda out of memory");
    assert_string_equal(json_str(md, "backend"), "cuda");
    assert_string_equal(json_str(md, "confirmed_by"), "message");
    expect_torch_exception(md);
    json_decref(md);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    expect_first_cause(bundle, "the framework's own memory pool ran out");
    expect_printed_stack();
}

/* A real failure first (the cudart double, reaching the driver), episode
 * open: the message waits for the episode's bundle. */
#define FAIL_ON_DEVICE                                                                     \
    "rt = ctypes.CDLL(os.environ[\"GMP_CUDART\"])\n"                                       \
    "p = ctypes.c_void_p()\n"                                                              \
    "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 40)) == 2"

static void test_message_fills_the_open_episode(void **state)
{
    (void)state;
    assert_int_equal(run_python(NULL, FAIL_ON_DEVICE), 1);
    expect_traceback_intact();
    json_t *md = the_bundle();
    assert_string_equal(json_str(md, "reason"), "CUDA_ERROR_OUT_OF_MEMORY");
    assert_string_equal(json_str(md, "confirmed_by"), "exit");
    assert_string_equal(json_str(json_object_get(md, "failed_request"), "api"), "cuMemAlloc_v2");
    expect_torch_exception(md);
    json_decref(md);
    expect_printed_stack();
}

/* GMP_OOM_POLICY=first: the bundle is written at the failure; the message
 * then rewrites its metadata.json (only_bundle_file validates it). */
static void test_message_patches_a_written_bundle(void **state)
{
    (void)state;
    assert_int_equal(run_python("GMP_OOM_POLICY=first", FAIL_ON_DEVICE), 1);
    json_t *md = the_bundle();
    assert_string_equal(json_str(md, "reason"), "CUDA_ERROR_OUT_OF_MEMORY");
    assert_string_equal(json_str(md, "confirmed_by"), "first");
    expect_torch_exception(md);
    json_decref(md);
    expect_printed_stack(); /* added to the bundle, and to its manifest */
}

/* Other words on stderr, and TensorFlow's warning that a request with a
 * fallback did not fit (printed in jobs that run to the end), say nothing. */
static void test_other_stderr_is_ignored(void **state)
{
    (void)state;
    static const char tf_warning[] =
        "W tensorflow/core/common_runtime/bfc_allocator.cc:271] Allocator (GPU_0_bfc) ran out "
        "of memory trying to allocate 2.55GiB with freed_by_count=0. The caller indicates "
        "that this is not a failure, but may mean that there could be performance gains if "
        "more memory were available.";
    char script[4096], want[1024];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; exec python3 -c 'import sys\n"
             "sys.stderr.write(\"warning: something else entirely\\n\")\n"
             "sys.stderr.write(\"%s\\n\")\n"
             "print(\"fine\")'",
             paths.preload, tf_warning);
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    assert_int_equal(code, 0);
    assert_string_equal(out, "fine\n");
    snprintf(want, sizeof want, "warning: something else entirely\n%s\n", tf_warning);
    assert_string_equal(err, want);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

/* A program run bare, then under the preload (with the stand-in lib of the
 * framework whose words it prints, when given): stdout and status the same,
 * stderr the same but for our lines (returned: how many there were). */
static int run_program_both_ways(const char *program, const char *how, const char *lib)
{
    char script[4096];
    static char bare_out[sizeof out], bare_err[sizeof err];
    const char *with = lib ? speaker_library(&paths, lib) : "";
    snprintf(script, sizeof script, "LD_PRELOAD='%s' '%s/test/programs/%s' %s", with, paths.build,
             program, how);
    int bare = exit_code_of(run_script(&paths, script, bare_out, sizeof bare_out, bare_err,
                                       sizeof bare_err));
    snprintf(script, sizeof script, "LD_PRELOAD='%s %s' '%s/test/programs/%s' %s", paths.preload,
             with, paths.build, program, how);
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    assert_int_equal(code, bare);
    assert_string_equal(out, bare_out);
    /* ours removed, the program's stderr is what it was */
    static char theirs[sizeof err];
    int ours = 0;
    theirs[0] = '\0';
    for (char *line = err, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            nl = line + strlen(line) - 1;
        if (!strncmp(line, "gpumemprof: ", 12))
            ours++;
        else
            strncat(theirs, line, (size_t)(nl - line + 1));
    }
    assert_string_equal(theirs, bare_err);
    return ours;
}

/* stdio writes through glibc's internal write, past the write hook:
 * fprintf (and its fortified twin), fputs, fwrite, perror, std::cerr. */
static void test_messages_written_through_stdio(void **state)
{
    (void)state;
    static const struct { const char *program, *how, *lib, *reason; } cases[] = {
        {"stderr_oom", "fprintf", "libtensorflow_framework.so", "message_pattern:out of memory"},
        {"stderr_oom", "fortified", "libtensorflow_framework.so", "message_pattern:out of memory"},
        {"stderr_oom", "fputs", "libtorch_cpu.so", "message_pattern:cuda out of memory"},
        {"stderr_oom", "fwrite", "xla_extension.so", "message_pattern:failed to allocate"},
        {"stderr_oom", "perror", "libcudart_standin.so", "message_pattern:cannot allocate memory"},
        {"cerr_oom", "", "libcudart_standin.so", "message_pattern:cuda out of memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int ours = run_program_both_ways(cases[i].program, cases[i].how, cases[i].lib);
        if (ours != 1 || count_prefixed(paths.dumps, "oom_dump_") != 1)
            fail_msg("%s %s: %d line(s) of ours, %d bundle(s); stderr: %s", cases[i].program,
                     cases[i].how, ours, count_prefixed(paths.dumps, "oom_dump_"), err);
        json_t *md = the_bundle();
        assert_string_equal(json_str(md, "reason"), cases[i].reason);
        assert_string_equal(json_str(md, "confirmed_by"), "message");
        json_decref(md);
    }
}

/* A line that merely says "resource exhausted" (a 429 from a cloud API)
 * is not about memory. */
static void test_rate_limit_is_not_an_oom(void **state)
{
    (void)state;
    assert_int_equal(run_program_both_ways("stderr_oom", "rate", "libcudart_standin.so"), 0);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

/* A framework that logs its OOM again and again: one bundle a process. */
static void test_one_message_bundle_per_process(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script, "LD_PRELOAD='%s %s' '%s/test/programs/stderr_oom' twice",
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), paths.build);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     0);
    assert_string_equal(out, "done\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 1);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "messages");
    return 0;
}

/* The printed traceback shows the program's source lines: a password in
 * a URL there reaches no bundle file. */
static void test_printed_traceback_is_masked(void **state)
{
    (void)state;
    char script[8192], file[700];
    snprintf(file, sizeof file, "%s/train.py", paths.scratch);
    static const char program[] =
        "class OutOfMemoryError(RuntimeError):\n"
        "    pass\n"
        "OutOfMemoryError.__module__ = 'torch'\n"
        "def train_step():\n"
        "    raise OutOfMemoryError('" TORCH_MESSAGE "'); fetch('https://me:s3cret-77@h.example/x')\n"
        "train_step()\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script, "export LD_PRELOAD='%s %s'; exec python3 '%s'",
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), file);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     1);
    assert_non_null(strstr(err, "s3cret-77")); /* the program's own stderr is its own */
    char bundle[1024], cmd[2400];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    snprintf(cmd, sizeof cmd, "test -s '%s/python_traceback.txt' && ! grep -r 's3cret-77' '%s'",
             bundle, bundle);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    if (exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("the password reached the bundle, or no traceback: %s", out);
}

/* Each framework's own last line, as it prints it, from a process that
 * writes it to stderr: one bundle whose exception is the framework's type,
 * module and words. */
static void test_frameworks_own_words(void **state)
{
    (void)state;
    static const struct { const char *lib, *line, *type, *module, *message, *reason; } cases[] = {
        {"_multiarray_umath.so",
         "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 72.8 TiB for an array "
         "with shape (10000000000000,) and data type float64",
         "_ArrayMemoryError", "numpy._core._exceptions",
         "Unable to allocate 72.8 TiB for an array with shape (10000000000000,) and data type "
         "float64", "message_pattern:unable to allocate"},
        {NULL, /* the interpreter's own, ending the traceback it printed */
         "Traceback (most recent call last):\n  File \"<string>\", line 2, in <module>\n"
         "MemoryError", "MemoryError", NULL, "MemoryError", "message_pattern:MemoryError"},
        {"libtorch_cpu.so",
         "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not "
         "enough memory: you tried to allocate 80000000000000 bytes.",
         "RuntimeError", NULL,
         "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: "
         "you tried to allocate 80000000000000 bytes.",
         "message_pattern:you tried to allocate"},
        {"libcupy_standin.so",
         "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824,000 bytes "
         "(allocated so far: 0 bytes).", "OutOfMemoryError", "cupy.cuda.memory",
         "Out of memory allocating 1,073,741,824,000 bytes (allocated so far: 0 bytes).",
         "message_pattern:out of memory"},
        {"xla_extension.so",
         "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
         "to allocate 17179869184 bytes.", "XlaRuntimeError", "jaxlib.xla_extension",
         "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
         "message_pattern:out of memory"},
        {"libtensorflow_framework.so",
         "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
         "tensor with shape[100000,100000] and type float", "ResourceExhaustedError",
         "tensorflow.python.framework.errors_impl",
         "OOM when allocating tensor with shape[100000,100000] and type float",
         "message_pattern:oom when allocating"},
        {"libjvm.so", "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
         "OutOfMemoryError", "java.lang", "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
         "message_pattern:java.lang.outofmemoryerror"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char script[4096];
        scratch_remove(paths.dumps);
        setenv("GMP_TEST_LINE", cases[i].line, 1); /* written to fd 2 itself, as they do */
        /* a runtime's last words are followed by the abort they announce */
        int last_words = !cases[i].lib && strncmp(cases[i].line, "Traceback", 9);
        snprintf(script, sizeof script,
                 "export LD_PRELOAD='%s %s'; python3 -c 'import os\n"
                 "os.write(2, (os.environ[\"GMP_TEST_LINE\"] + \"\\n\").encode())\n%s'",
                 paths.preload, cases[i].lib ? speaker_library(&paths, cases[i].lib) : "",
                 last_words ? "os.abort()" : "");
        assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err,
                                                 sizeof err)),
                         last_words ? 128 + 6 : 0);
        json_t *md = the_bundle();
        const char *type = json_string_value(json_object_get(md, "exception_type"));
        const char *module = json_string_value(json_object_get(md, "exception_module"));
        if (strcmp(json_str(md, "reason"), cases[i].reason) ||
            strcmp(json_str(md, "exception_message"), cases[i].message) ||
            (cases[i].type ? !type || strcmp(type, cases[i].type) : type != NULL) ||
            (cases[i].module ? !module || strcmp(module, cases[i].module) : module != NULL))
            fail_msg("%s\n-> reason %s, type %s, module %s, message %s", cases[i].line,
                     json_str(md, "reason"), type ? type : "(null)", module ? module : "(null)",
                     json_str(md, "exception_message"));
        json_decref(md);
    }
    unsetenv("GMP_TEST_LINE");
}

/* A runtime's last words count only from that runtime.  The same words
 * that python3 writes, then aborts, are a script's quoting them: no bundle
 * and no line of ours.  libstdc++'s own terminate line after a bad_alloc
 * nothing caught (no allocation failed: the program threw it itself), and
 * Rust's after an allocation error it raised, are each one bundle with
 * the words (Rust's skipped with a line where rustc is missing). */
static void test_last_words_only_from_their_runtime(void **state)
{
    (void)state;
    static const char *const quoted[] = {
        "terminate called after throwing an instance of 'std::bad_alloc'",
        "fatal error: runtime: out of memory",
        "memory allocation of 1099511627776 bytes failed",
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
    };
    char script[4096];
    for (size_t i = 0; i < sizeof quoted / sizeof *quoted; i++) {
        scratch_remove(paths.dumps);
        setenv("GMP_TEST_LINE", quoted[i], 1);
        snprintf(script, sizeof script,
                 "export LD_PRELOAD='%s'; python3 -c 'import os\n"
                 "os.write(2, (os.environ[\"GMP_TEST_LINE\"] + \"\\n\").encode())\nos.abort()'",
                 paths.preload);
        assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                         128 + 6);
        if (count_prefixed(paths.dumps, "oom_dump_") || strstr(err, "gpumemprof: "))
            fail_msg("a script quoting \"%s\" made a death: %s", quoted[i], err);
    }
    unsetenv("GMP_TEST_LINE");
    static const struct { const char *name, *build, *reason, *message, *type; } own[] = {
        {"C++", "printf '%s\\n' '#include <new>' 'int main() { throw std::bad_alloc(); }' "
                "> own.cc && g++ -o own own.cc",
         "message_pattern:std::bad_alloc",
         "terminate called after throwing an instance of 'std::bad_alloc'", "bad_alloc"},
        {"Rust", "command -v rustc >/dev/null || exit 77; printf '%s\\n' 'fn main() { "
                 "std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(1 << 40, "
                 "8).unwrap()); }' > own.rs && rustc -o own own.rs",
         "message_pattern:memory allocation of", "memory allocation of 1099511627776 bytes failed",
         NULL},
    };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
        scratch_remove(paths.dumps);
        snprintf(script, sizeof script, "cd '%s' && rm -f own && %s", paths.scratch, own[i].build);
        const char *argv[] = {"/bin/sh", "-c", script, NULL}; /* the compilers' own HOME */
        int built = exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
        if (built == 77) {
            printf("SKIP  test_last_words_only_from_their_runtime: %s: rustc is not installed\n",
                   own[i].name);
            continue;
        }
        if (built != 0)
            fail_msg("%s: building: %s", own[i].name, err);
        snprintf(script, sizeof script, "cd '%s' && LD_PRELOAD='%s' ./own", paths.scratch,
                 paths.preload);
        assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                         128 + 6);
        json_t *md = the_bundle();
        const char *type = json_string_value(json_object_get(md, "exception_type"));
        if (strcmp(json_str(md, "reason"), own[i].reason) ||
            strcmp(json_str(md, "exception_message"), own[i].message) ||
            (own[i].type && (!type || strcmp(type, own[i].type))))
            fail_msg("%s's own last words -> reason %s, type %s, message %s", own[i].name,
                     json_str(md, "reason"), type ? type : "(null)",
                     json_str(md, "exception_message"));
        json_decref(md);
    }
}

/* Words nobody in the writing process can mean: a framework's line from a
 * process without the framework (a log printed again, a test runner's
 * report), a scheduler relaying another process's fate, a compiler quoting
 * a source line, a runtime's words out of their own form, or in it with no
 * death after them.  Written as the
 * lines above are, they make no bundle and no line of ours. */
static void test_words_nobody_here_can_mean(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "2026-11-20 10:01:02 ERROR RuntimeError: CUDA out of memory. Tried to allocate 20 MiB",
        "srun: error: node1: task 0: Out Of Memory",
        "x.cc:12:5: warning: \"CUDA out of memory. Tried to allocate 2.00 GiB\" [-W#warnings]",
        "   12 |     throw std::bad_alloc();",
        "MemoryError",
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 72.8 TiB for an array",
        "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
        "E0000 xla/stream_executor: failed to allocate 17.18G (17179869184 bytes) from device",
        "   7 | fmt.Println(\"memory allocation of 1024 bytes failed\")",
        /* last words in their form, but the process goes on: no death followed */
        "terminate called after throwing an instance of 'std::bad_alloc'",
        "memory allocation of 1024 bytes failed",
        "fatal error: runtime: out of memory",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        char script[4096];
        scratch_remove(paths.dumps);
        setenv("GMP_TEST_LINE", lines[i], 1);
        snprintf(script, sizeof script,
                 "export LD_PRELOAD='%s'; exec python3 -c 'import os\n"
                 "os.write(2, (os.environ[\"GMP_TEST_LINE\"] + \"\\n\").encode())'",
                 paths.preload);
        assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err,
                                                 sizeof err)), 0);
        if (count_prefixed(paths.dumps, "oom_dump_") || strstr(err, "gpumemprof: "))
            fail_msg("a bundle of words nobody here can mean: %s\n%s", lines[i], err);
    }
    unsetenv("GMP_TEST_LINE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_alone),
        cmocka_unit_test(test_message_fills_the_open_episode),
        cmocka_unit_test(test_message_patches_a_written_bundle),
        cmocka_unit_test(test_other_stderr_is_ignored),
        cmocka_unit_test(test_messages_written_through_stdio),
        cmocka_unit_test(test_rate_limit_is_not_an_oom),
        cmocka_unit_test(test_one_message_bundle_per_process),
        cmocka_unit_test(test_frameworks_own_words),
        cmocka_unit_test(test_last_words_only_from_their_runtime),
        cmocka_unit_test(test_words_nobody_here_can_mean),
        cmocka_unit_test(test_printed_traceback_is_masked),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
