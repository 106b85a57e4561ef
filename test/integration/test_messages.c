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
 * stderr is ignored.
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

/* PyTorch's words in full: past 128 bytes, as they are */
#define TORCH_MESSAGE                                                                     \
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "   \
    "79.15 GiB of which 3.12 GiB is free. Including non-PyTorch memory, this process "    \
    "has 76.02 GiB memory in use. Of the allocated memory 75.50 GiB is allocated by "     \
    "PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated."

/* The stand-in of a framework's library (test/doubles/speaker.c) by name:
 * preloaded into a process that prints that framework's line, so that the
 * line comes from where the framework is loaded, as in life. */
static const char *speaker(const char *name)
{
    static char path[4][1200];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/test/doubles/speakers/%s", paths.build, name);
    return p;
}

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
             paths.preload, speaker("libtorch_cpu.so"), paths.build, env ? env : "",
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
    const char *with = lib ? speaker(lib) : "";
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
             paths.preload, speaker("libtorch_cpu.so"), paths.build);
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
             paths.preload, speaker("libtorch_cpu.so"), file);
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

/* torch.distributed prints an uncaught error with "[rankN]: " before each
 * line: behind it the traceback is a traceback and the exception's line
 * names torch's OutOfMemoryError (it was the JVM's, by the word
 * "OutOfMemoryError" left in an unparsed message). */
static void test_rank_prefixed_lines(void **state)
{
    (void)state;
    char script[8192], file[700];
    snprintf(file, sizeof file, "%s/train.py", paths.scratch);
    static const char program[] =
        "import sys, traceback\n"
        "def hook(t, v, tb):\n"
        "    for line in ''.join(traceback.format_exception(t, v, tb)).splitlines():\n"
        "        print('[rank1]: ' + line, file=sys.stderr)\n"
        "sys.excepthook = hook\n"
        "class OutOfMemoryError(RuntimeError):\n"
        "    pass\n"
        "OutOfMemoryError.__module__ = 'torch'\n"
        "def train_step():\n"
        "    raise OutOfMemoryError('" TORCH_MESSAGE "')\n"
        "train_step()\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script, "export LD_PRELOAD='%s %s'; exec python3 '%s'",
             paths.preload, speaker("libtorch_cpu.so"), file);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     1);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "exception_type"), "OutOfMemoryError");
    assert_string_equal(json_str(md, "exception_module"), "torch");
    json_decref(md);
    const char *shown = show_output(bundle);
    if (strstr(shown, "JVM") || !strstr(shown, "\nPython stack:     ") ||
        !strstr(shown, "train.py:10 in train_step"))
        fail_msg("show says:\n%s", shown);
}

/* torch.multiprocessing.spawn's parent raises its child's traceback
 * again, in its own exception: the child's MemoryError and the child's
 * torch OutOfMemoryError are the child's deaths (its own bundle tells
 * them), not deaths of the parent, which wrote two false bundles. */
static void test_relayed_traceback_is_no_death(void **state)
{
    (void)state;
    char script[8192], file[700];
    snprintf(file, sizeof file, "%s/spawn.py", paths.scratch);
    static const char program[] =
        "import sys\n"
        "class ProcessRaisedException(Exception):\n"
        "    pass\n"
        "ProcessRaisedException.__module__ = 'torch.multiprocessing.spawn'\n"
        "last = sys.argv[1]\n"
        "child = ('Traceback (most recent call last):\\n'\n"
        "         '  File \"/w/train.py\", line 9, in worker\\n'\n"
        "         '    step(batch)\\n' + last + '\\n')\n"
        "raise ProcessRaisedException('\\n\\n-- Process 1 terminated with the following "
        "error:\\n' + child)\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s %s'; python3 '%s' MemoryError; echo $?; "
             "python3 '%s' 'torch.OutOfMemoryError: " TORCH_MESSAGE "'; echo $?",
             paths.preload, speaker("libtorch_cpu.so"), file, file);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "1\n1\n");
    if (!strstr(err, "-- Process 1 terminated with the following error:\nTraceback") ||
        count_prefixed(paths.dumps, "oom_dump_") != 0)
        fail_msg("bundles: %d; stderr: %s", count_prefixed(paths.dumps, "oom_dump_"), err);
}

/* torchrun's agent relays its ranks' words twice: with --tee, each line
 * of a rank's log, behind "[default1]:"; at its end, its ChildFailedError's
 * summary, whose "Root Cause" holds the traceback of a rank that used
 * @record, indented.  Neither is a death of the agent (torch is loaded in
 * it: it wrote a false bundle for each).  What the agent says of its own
 * after the summary's closing rule is its own: one bundle, its words. */
static void test_torchrun_relays_are_no_death(void **state)
{
    (void)state;
    char script[8192], file[700];
    snprintf(file, sizeof file, "%s/agent.py", paths.scratch);
    static const char program[] =
        "import sys\n"
        "relayed = ('Traceback (most recent call last):\\n'\n"
        "           '  File \"/w/train.py\", line 9, in main\\n'\n"
        "           '    step(batch)\\n'\n"
        "           'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.')\n"
        "for line in relayed.splitlines():\n"
        "    print('[default1]:' + line, file=sys.stderr, flush=True)\n"
        "print('[default1]:RuntimeError: DefaultCPUAllocator: can\\'t allocate memory: you tried "
        "to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)', file=sys.stderr)\n"
        "summary = ('Traceback (most recent call last):\\n'\n"
        "           '  File \"/v/bin/torchrun\", line 8, in <module>\\n'\n"
        "           '    sys.exit(main())\\n'\n"
        "           'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \\n'\n"
        "           '=' * 60 + '\\ntrain.py FAILED\\n' + '-' * 60 + '\\nFailures:\\n'\n"
        "           '  <NO_OTHER_FAILURES>\\n' + '-' * 60 + '\\n'\n"
        "           'Root Cause (first observed failure):\\n[0]:\\n'\n"
        "           '  rank      : 1 (local_rank: 1)\\n'\n"
        "           '  exitcode  : 1 (pid: 17244)\\n'\n"
        "           '  error_file: /tmp/torchelastic_u/attempt_0/1/error.json\\n'\n"
        "           '  traceback : ' + relayed.replace('\\n', '\\n  ') + '\\n  \\n' + '=' * 60)\n"
        "print(summary, file=sys.stderr, flush=True)\n"
        "class OutOfMemoryError(RuntimeError):\n"
        "    pass\n"
        "OutOfMemoryError.__module__ = 'torch'\n"
        "raise OutOfMemoryError('" TORCH_MESSAGE "')\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script, "export LD_PRELOAD='%s %s'; python3 '%s'; echo $?",
             paths.preload, speaker("libtorch_cpu.so"), file);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "1\n");
    if (!strstr(err, "[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                     "2.00 GiB.\n") ||
        !strstr(err, "\n  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                     "GiB.\n"))
        fail_msg("the relays were not printed: %s", err);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "exception_message"), TORCH_MESSAGE);
    json_decref(md);
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
                 paths.preload, cases[i].lib ? speaker(cases[i].lib) : "",
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

/* script's exit status (run_script's: its output in out and err), or -1
 * after a SKIP line for test when it exited 77: what it needs (node, a
 * JDK) is not installed here. */
static int run_needing(const char *script, const char *test, const char *missing)
{
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    if (code == 77)
        printf("SKIP  %s: %s\n", test, missing);
    return code == 77 ? -1 : code;
}

/* Node's heap reaches the --max-old-space-size NODE_OPTIONS sets: V8 says
 * so in its own form ("FATAL ERROR: ... JavaScript heap out of memory") and
 * aborts.  One bundle with those words, whose outcome is the abort; the
 * status is Node's own (134); show names V8's limit and where it was set.
 * Skipped with a line where node is not installed. */
static void test_node_heap_limit(void **state)
{
    (void)state;
    char script[4096], bundle[1024];
    snprintf(script, sizeof script,
             "command -v node >/dev/null || exit 77; export LD_PRELOAD='%s'; "
             "NODE_OPTIONS=--max-old-space-size=32 node -e 'const a = []; "
             "while (true) a.push(new Array(1e5).fill(1))' >/dev/null 2>&1",
             paths.preload);
    int code = run_needing(script, "test_node_heap_limit", "node is not installed");
    if (code < 0)
        return;
    assert_int_equal(code, 128 + 6);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    if (!strstr(json_str(md, "exception_message"), "JavaScript heap out of memory"))
        fail_msg("message: %s", json_str(md, "exception_message"));
    json_t *outcome = json_object_get(md, "outcome");
    assert_string_equal(json_str(outcome, "state"), "killed");
    assert_string_equal(json_str(outcome, "signal"), "SIGABRT");
    json_decref(md);
    expect_headline(bundle, "Node (V8) ran out of memory: its JavaScript heap reached its limit\n");
    expect_first_cause(bundle, "Node (V8) ran out of memory: its JavaScript heap reached its limit");
    if (!strstr(show_output(bundle), "; NODE_OPTIONS sets --max-old-space-size=32\n"))
        fail_msg("show does not say where the limit was set:\n%s", show_output(bundle));
}

/* An ArrayBuffer that Node cannot allocate under `ulimit -v`: calloc fails,
 * V8 throws "RangeError: Array buffer allocation failed" and prints the
 * script's frames after it.  The bundle's exception is V8's, and it failed
 * at the script's line (not inside node's allocator, the failed call's own
 * native frame).  Skipped with a line where node is not installed. */
static void test_node_array_buffer(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096], bundle[1024];
    scratch_remove(paths.dumps);
    snprintf(script, sizeof script,
             "command -v node >/dev/null || exit 77; cd '%s' && printf '%%s\\n' "
             "'const keep = [];' 'function grow() {' "
             "'  for (;;) keep.push(new ArrayBuffer(64 << 20));' '}' 'grow();' >grow.js && "
             "ulimit -v 3000000 && LD_PRELOAD='%s' node grow.js",
             paths.scratch, paths.preload);
    int code = run_needing(script, "test_node_array_buffer", "node is not installed");
    if (code < 0)
        return;
    assert_int_equal(code, 1);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    if (strcmp(json_str(md, "exception_type"), "RangeError") ||
        strcmp(json_str(md, "exception_message"), "Array buffer allocation failed"))
        fail_msg("exception: %s: %s\nstderr: %s", json_str(md, "exception_type"),
                 json_str(md, "exception_message"), err);
    json_decref(md);
    if (!strstr(show_output(bundle), "\nFailed at:        grow.js:3 in grow\n"))
        fail_msg("show:\n%s\nstderr: %s", show_output(bundle), err);
}

/* The JVM's heap reaches -Xmx: an uncaught java.lang.OutOfMemoryError (the
 * filled list unreachable by then, so the JVM has the memory to say so),
 * then the JVM's exit 1.  One bundle, which says the JVM's Java heap was full,
 * that the command line set -Xmx16m, and that the process exited 1, and
 * names none of the JVM's native blocks as what held the heap; it failed
 * at the Java line its printed stack names (in show and triage).  The
 * JVM's words on stderr are whole: our line comes after its "\tat" lines,
 * never between them and the exception's.  A second program catches the
 * error, prints it and exits 0: its bundle says it survived.  Skipped with
 * a line where no JDK is installed. */
static void test_jvm_heap_space(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"", "1"}, /* uncaught */
        {"try { fill(); } catch (OutOfMemoryError e) { System.err.println(e); }", "0"},
    };
    for (size_t i = 0; i < 2; i++) {
        char script[4096], bundle[1024];
        scratch_remove(paths.dumps);
        snprintf(script, sizeof script,
                 "command -v javac >/dev/null || exit 77; cd '%s' && printf '%%s\\n' "
                 "'import java.util.*;' 'public class Heap {' "
                 "'  static void fill() {' '    List<long[]> kept = new ArrayList<>();' "
                 "'    while (true) kept.add(new long[1 << 16]);' '  }' "
                 "'  public static void main(String[] a) { %s' "
                 "'    if (a.length == 0) fill(); } }' >Heap.java && "
                 "javac Heap.java && LD_PRELOAD='%s' java -Xmx16m Heap %s",
                 paths.scratch, cases[i][0], paths.preload, i ? "caught" : "");
        int code = run_needing(script, "test_jvm_heap_space", "no JDK (javac) is installed");
        if (code < 0)
            return;
        assert_int_equal(code, atoi(cases[i][1]));
        if (!strstr(err, "java.lang.OutOfMemoryError: Java heap space\n"))
            fail_msg("case %zu, the JVM's words: %s", i, err);
        if (i == 0 && (!strstr(err, "Java heap space\n\tat Heap.fill(Heap.java:5)\n\tat "
                                    "Heap.main(Heap.java:8)\ngpumemprof: ")))
            fail_msg("our line splits the JVM's report: %s", err);
        json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
        json_t *outcome = json_object_get(md, "outcome");
        assert_string_equal(json_str(outcome, "state"), "exited");
        assert_int_equal(json_int(outcome, "exit_status"), atoi(cases[i][1]));
        json_decref(md);
        if (i == 0) {
            expect_headline(bundle, "the JVM ran out of memory: its Java heap was full\n");
            expect_first_cause(bundle, "the JVM ran out of memory: its Java heap was full");
            if (!strstr(show_output(bundle), "; the command line sets -Xmx16m\n"))
                fail_msg("show does not say where the limit was set:\n%s", show_output(bundle));
            /* the JVM's own native blocks (os::malloc's) did not hold its heap */
            if (strstr(show_output(bundle), "\nHeld by:"))
                fail_msg("show names a holder of the Java heap:\n%s", show_output(bundle));
            if (!strstr(show_output(bundle), "\nFailed at:        Heap.java:5 in Heap.fill\n"))
                fail_msg("show does not name the Java line:\n%s", show_output(bundle));
            const char *argv[] = {inspect_path(), "triage", paths.dumps, NULL};
            static char triaged[1 << 14], terr[4096];
            run_capture(argv, triaged, sizeof triaged, terr, sizeof terr);
            if (!strstr(triaged, "message_pattern:java.lang.outofmemoryerror  at Heap.java:5 in "
                                 "Heap.fill\n"))
                fail_msg("triage sites the Java heap's death:\n%s", triaged);
        } else {
            expect_headline(bundle, "the process survived");
        }
    }
}

/* A JVM that cannot start another thread under `ulimit -v` says so in
 * words that match "out of memory" first ("unable to create native thread:
 * possibly out of memory or process/resource limits reached"); its "\tat"
 * lines follow, and our line waits until they end, as for the heap.  The
 * bundle fails at the program's Java line.  Skipped with a line where no
 * JDK is installed. */
static void test_jvm_native_thread(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    char script[4096], bundle[1024];
    snprintf(script, sizeof script,
             "command -v javac >/dev/null || exit 77; cd '%s' && printf '%%s\\n' "
             "'public class Threads {' '  static void spawn() {' "
             "'    Thread t = new Thread(() -> { try { Thread.sleep(600000); } "
             "catch (InterruptedException e) {} });' "
             "'    t.setDaemon(true); t.start();' '  }' "
             "'  public static void main(String[] a) { for (;;) spawn(); } }' >Threads.java && "
             "javac Threads.java && ulimit -v 3000000 && LD_PRELOAD='%s' java -XX:+UseSerialGC "
             "-Xss16m -Xmx64m -XX:CompressedClassSpaceSize=64m -XX:ReservedCodeCacheSize=32m "
             "Threads",
             paths.scratch, paths.preload);
    int code = run_needing(script, "test_jvm_native_thread", "no JDK (javac) is installed");
    if (code < 0)
        return;
    assert_int_equal(code, 1);
    if (!strstr(err, "java.lang.OutOfMemoryError: unable to create native thread") ||
        !strstr(err, "\tat Threads.spawn(Threads.java:4)\n\tat Threads.main(Threads.java:6)\n"
                     "gpumemprof: "))
        fail_msg("our line splits the JVM's report, or it is not there: %s", err);
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    if (!strstr(show_output(bundle), "\nFailed at:        Threads.java:4 in Threads.spawn\n"))
        fail_msg("show does not name the Java line:\n%s", show_output(bundle));
}

/* The flags a JVM in a container runs with: -XX:+ExitOnOutOfMemoryError
 * makes HotSpot print "Terminating due to java.lang.OutOfMemoryError: Java
 * heap space" to stdout itself, then _exit(3), and there was no bundle at
 * all; -XX:+HeapDumpOnOutOfMemoryError prints the error's name to stdout
 * before its heap dump, then the uncaught error's report to stderr.  Each
 * is one bundle that says the Java heap was full; the first exited 3, the
 * second failed at the Java line.  The program's own stdout (System.out,
 * through libjava) is never read: a Java program printing the same words
 * there makes no bundle.  Skipped with a line where no JDK is installed. */
static void test_jvm_exit_on_oom(void **state)
{
    (void)state;
    static const struct {
        const char *flags, *status, *want;
    } cases[] = {
        {"-XX:+ExitOnOutOfMemoryError", "3", "\nOutcome:          exited 3\n"},
        {"-XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath=dump.hprof", "1",
         "\nFailed at:        Heap.java:5 in Heap.fill\n"},
        {"", "0", NULL}, /* prints the words to stdout and exits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char script[4096], bundle[1024];
        scratch_remove(paths.dumps);
        snprintf(script, sizeof script,
                 "command -v javac >/dev/null || exit 77; cd '%s' && rm -f dump.hprof && "
                 "printf '%%s\\n' 'import java.util.*;' 'public class Heap {' "
                 "'  static void fill() {' '    List<long[]> kept = new ArrayList<>();' "
                 "'    while (true) kept.add(new long[1 << 16]);' '  }' "
                 "'  public static void main(String[] a) { if (a.length > 0) { System.out.println("
                 "\"Terminating due to java.lang.OutOfMemoryError: Java heap space\"); return; }' "
                 "'    fill(); } }' >Heap.java && "
                 "javac Heap.java && LD_PRELOAD='%s' java -Xmx16m %s Heap %s; s=$?; "
                 "rm -f dump.hprof; exit $s",
                 paths.scratch, paths.preload, cases[i].flags, cases[i].want ? "" : "quote");
        int code = run_needing(script, "test_jvm_exit_on_oom", "no JDK (javac) is installed");
        if (code < 0)
            return;
        assert_int_equal(code, atoi(cases[i].status));
        if (!cases[i].want) {
            assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
            continue;
        }
        json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
        expect_headline(bundle, "the JVM ran out of memory: its Java heap was full\n");
        if (!strstr(show_output(bundle), cases[i].want))
            fail_msg("case %zu, show:\n%s\nstdout: %s\nstderr: %s", i, show_output(bundle), out,
                     err);
        if (!strstr(err, "gpumemprof: OOM message on stdout (java.lang.outofmemoryerror); "))
            fail_msg("case %zu, stderr: %s", i, err);
    }
}

/* Direct buffers past -XX:MaxDirectMemorySize, in JDK 17's words ("Cannot
 * reserve N bytes of direct buffer memory (allocated: A, limit: L)", where
 * older JDKs said "Direct buffer memory"): the bundle says the direct
 * buffers reached their limit and that the command line set it (it said
 * "a memory it manages itself"), and, those buffers being the JVM's
 * mallocs, what held them.  Skipped with a line where no JDK is installed. */
static void test_jvm_direct_buffers(void **state)
{
    (void)state;
    char script[4096], bundle[1024];
    scratch_remove(paths.dumps);
    snprintf(script, sizeof script,
             "command -v javac >/dev/null || exit 77; cd '%s' && printf '%%s\\n' "
             "'import java.nio.*;' 'import java.util.*;' 'public class Direct {' "
             "'  public static void main(String[] a) {' "
             "'    List<ByteBuffer> kept = new ArrayList<>();' "
             "'    while (true) kept.add(ByteBuffer.allocateDirect(1 << 20)); } }' >Direct.java && "
             "javac Direct.java && LD_PRELOAD='%s' java -XX:MaxDirectMemorySize=8m Direct",
             paths.scratch, paths.preload);
    int code = run_needing(script, "test_jvm_direct_buffers", "no JDK (javac) is installed");
    if (code < 0)
        return;
    assert_int_equal(code, 1);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    expect_headline(bundle, "the JVM ran out of memory: its direct buffers reached their limit\n");
    const char *shown = show_output(bundle);
    if (!strstr(shown, "; the command line sets -XX:MaxDirectMemorySize=8m\n") ||
        !strstr(shown, "\nHeld by:          "))
        fail_msg("show:\n%s\nstderr: %s", shown, err);
}

/* PyTorch's DataLoader hands each batch its workers make to the main
 * process through /dev/shm, a tmpfs of its own size (64 MiB in a
 * container unless --shm-size says more).  Full, the worker's collate
 * fails with "unable to allocate shared memory(shm) ...: No space left on
 * device" and the main process re-raises it, the worker's traceback inside
 * its message: the real torch, batches of 64 MiB, a /dev/shm of 20 MiB (a
 * mount namespace of its own).  No allocation call failed and the machine
 * had memory to spare; it wrote nothing.  One bundle, of the main process
 * that died: PyTorch's shared memory, the size of /dev/shm, the program's
 * line (the loop over the DataLoader), no heap block called its holder;
 * as rank 1 of a run, the run's verdict says it ran out of /dev/shm, not
 * of host memory.  Skipped with a line where there is no torch or no mount namespace. */
static void test_torch_dataloader_shm_full(void **state)
{
    (void)state;
    const char *python = torch_python_or_skip_line("test_torch_dataloader_shm_full");
    char command[4096], script[4400], file[700], bundle[1024];
    if (!python)
        return;
    snprintf(file, sizeof file, "%s/loader.py", paths.scratch);
    static const char program[] =
        "import torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Samples(Dataset):\n"
        "    def __len__(self):\n"
        "        return 16\n"
        "    def __getitem__(self, i):\n"
        "        return torch.ones(4 << 20)\n"
        "if __name__ == '__main__':\n"
        "    for batch in DataLoader(Samples(), batch_size=4, num_workers=2):\n"
        "        print(batch.shape)\n";
    write_file(file, program, sizeof program - 1);
    snprintf(command, sizeof command,
             "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 "
             "OMP_NUM_THREADS=1 LD_PRELOAD=\"%s\" exec %s %s",
             paths.preload, python, file);
    small_shm_script(script, sizeof script, command);
    int code = run_needing(script, "test_torch_dataloader_shm_full",
                           "no mount namespace of its own here (unshare -m)");
    if (code < 0)
        return;
    assert_int_equal(code, 1);
    if (!strstr(err, "unable to allocate shared memory(shm)"))
        fail_msg("not torch's shared memory failure; stderr: %s", err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    expect_headline(bundle, "PyTorch ran out of memory: /dev/shm was full, the shared memory "
                            "through which it hands tensors between processes");
    const char *shown = show_output(bundle);
    if (!strstr(shown, "; /dev/shm holds 20.0 MiB in all (") ||
        !strstr(shown, "\nFailed at:        loader.py:9 in <module>\n") ||
        strstr(shown, "\nHeld by:"))
        fail_msg("show:\n%s\nstderr: %s", shown, err);
    /* a rank's: its run's verdict names the memory that ran out */
    const char *argv[] = {inspect_path(), "triage", "--format", "line", paths.dumps, NULL};
    static char verdict[1 << 14], terr[4096];
    run_capture(argv, verdict, sizeof verdict, terr, sizeof terr);
    if (!strstr(verdict, ": rank 1 ran out of shared memory (/dev/shm) at "))
        fail_msg("the run's verdict:\n%s", verdict);
}

/* A DataLoader worker whose dataset fills /dev/shm through Python's
 * shared memory: the worker dies of SIGBUS under PyTorch's own handler
 * ("Unexpected bus error encountered in worker. This might be caused by
 * insufficient shared memory (shm)."), which raises it again without its
 * address; the main process raises "DataLoader worker ... exited
 * unexpectedly" and exits 1.  It wrote nothing.  One bundle, the worker's:
 * the tmpfs full, at the dataset's line; our line after PyTorch's on
 * stderr.  The real torch; skipped with a line where there is no torch or
 * no mount namespace. */
static void test_torch_worker_bus_error(void **state)
{
    (void)state;
    const char *python = torch_python_or_skip_line("test_torch_worker_bus_error");
    char command[4096], script[4400], file[700], bundle[1024];
    if (!python)
        return;
    snprintf(file, sizeof file, "%s/bus.py", paths.scratch);
    static const char program[] =
        "import torch\n"
        "from multiprocessing import shared_memory\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Samples(Dataset):\n"
        "    def __len__(self):\n"
        "        return 4\n"
        "    def __getitem__(self, i):\n"
        "        shm = shared_memory.SharedMemory(create=True, size=64 << 20)\n"
        "        for at in range(0, 64 << 20, 4096):\n"
        "            shm.buf[at:at + 4096] = b'x' * 4096\n"
        "        return torch.ones(4)\n"
        "if __name__ == '__main__':\n"
        "    for batch in DataLoader(Samples(), batch_size=2, num_workers=1):\n"
        "        print(batch.shape)\n";
    write_file(file, program, sizeof program - 1);
    snprintf(command, sizeof command,
             "OMP_NUM_THREADS=1 LD_PRELOAD=\"%s\" %s %s 2>&1 >/dev/null | tr -d \"\\000\" >&2",
             paths.preload, python, file);
    small_shm_script(script, sizeof script, command);
    int code = run_needing(script, "test_torch_worker_bus_error",
                           "no mount namespace of its own here (unshare -m)");
    if (code < 0)
        return;
    if (!strstr(err, "Unexpected bus error encountered in worker") ||
        !strstr(err, "exited unexpectedly"))
        fail_msg("not PyTorch's worker bus error; stderr: %s", err);
    /* PyTorch writes its words with their NUL (taken out here), then ours */
    if (!strstr(err, "(shm).\ngpumemprof: SIGBUS after failed allocation (mmap 4.0 KiB on host, "
                     "ENOSPC); bundle: "))
        fail_msg("no line of ours after PyTorch's; stderr: %s", err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    expect_headline(bundle, "the process ran out of memory: a tmpfs it shared memory through "
                            "(/dev/shm, as a rule) was full");
    const char *shown = show_output(bundle);
    if (!strstr(shown, "; it had mapped /dev/shm/psm_") ||
        !strstr(shown, "\nFailed at:        bus.py:10 in Samples.__getitem__\n"))
        fail_msg("show:\n%s\nstderr: %s", shown, err);
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
        cmocka_unit_test(test_node_heap_limit),
        cmocka_unit_test(test_node_array_buffer),
        cmocka_unit_test(test_jvm_heap_space),
        cmocka_unit_test(test_jvm_native_thread),
        cmocka_unit_test(test_jvm_exit_on_oom),
        cmocka_unit_test(test_jvm_direct_buffers),
        cmocka_unit_test(test_torch_dataloader_shm_full),
        cmocka_unit_test(test_torch_worker_bus_error),
        cmocka_unit_test(test_printed_traceback_is_masked),
        cmocka_unit_test(test_rank_prefixed_lines),
        cmocka_unit_test(test_relayed_traceback_is_no_death),
        cmocka_unit_test(test_torchrun_relays_are_no_death),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
