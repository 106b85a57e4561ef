/*
 * test_relays.c — what a launcher and its ranks print about a rank's
 * out-of-memory death, read as they meant it: torch.distributed's
 * "[rankN]: " before each line of a rank's uncaught error (behind it, the
 * rank's own traceback and exception); torch.multiprocessing.spawn's
 * parent relaying its child's traceback, and torchrun's agent summing up
 * its ranks' failures (ChildFailedError, its "Root Cause"), which are no
 * death of the launcher's: the child's own bundle tells it.
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
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), file);
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
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), file, file);
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
             paths.preload, speaker_library(&paths, "libtorch_cpu.so"), file);
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

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "relays");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_prefixed_lines),
        cmocka_unit_test(test_relayed_traceback_is_no_death),
        cmocka_unit_test(test_torchrun_relays_are_no_death),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
