/*
 * test_pools.c — a pool worker's out-of-memory error that the main process
 * raises again, as the real pools do: PyTorch's DataLoader, Python's
 * multiprocessing.Pool and concurrent.futures.ProcessPoolExecutor (with
 * the fork and the spawn start), joblib's Parallel.  The worker's loop
 * catches the error and hands it over; the main process dies of it.  One
 * failure, one death: the main process's bundle says where the memory ran
 * out and names the worker's bundle, which has the failed request and
 * was survived (caught_by), however the pool then ended the worker; triage
 * counts one death.  A pool that is not installed skips with a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* The bundle in dumps whose metadata's reason is `reason` (its path into
 * path), among those there; fails the test when none has it. */
static void bundle_with_reason(const char *reason, char *path, size_t cap)
{
    char pattern[600];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s/oom_dump_*", paths.dumps);
    int found = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !found; i++) {
            json_t *md = bundle_file(g.gl_pathv[i], "metadata.json");
            if (!strcmp(json_str(md, "reason"), reason)) {
                snprintf(path, cap, "%s", g.gl_pathv[i]);
                found = 1;
            }
            json_decref(md);
        }
        globfree(&g);
    }
    if (!found)
        fail_msg("no bundle of reason %s in %s; stderr: %s", reason, paths.dumps, err);
}

static char verdict[1 << 14];

/* What every pool's case leaves: the main process's death and the worker's
 * bundle (their paths into main_bundle and worker_bundle); show of the
 * death names the worker's bundle, which is a failure survived, caught by
 * `loop`; triage counts one death and one failure survived (its text in
 * verdict).  `what` names the case in a failure's message. */
#define BUNDLE_PATH_CAP 1024
static void expect_death_and_worker(const char *what, const char *loop,
                                    char main_bundle[static BUNDLE_PATH_CAP],
                                    char worker_bundle[static BUNDLE_PATH_CAP])
{
    char named[BUNDLE_PATH_CAP + 32], terr[4096];
    bundle_with_reason("message_pattern:MemoryError", main_bundle, BUNDLE_PATH_CAP);
    bundle_with_reason("ENOMEM", worker_bundle, BUNDLE_PATH_CAP);
    snprintf(named, sizeof named, "\nWorker's bundle:  %s\n", worker_bundle);
    if (!strstr(show_output(main_bundle), named))
        fail_msg("%s: show names not the worker's bundle:\n%s", what, show_output(main_bundle));
    json_t *md = bundle_file(worker_bundle, "metadata.json");
    if (strcmp(json_str(md, "kind"), "survived") || strcmp(json_str(md, "caught_by"), loop))
        fail_msg("%s: the worker's bundle is %s, caught by %s", what, json_str(md, "kind"),
                 json_str(md, "caught_by"));
    json_decref(md);
    expect_headline(worker_bundle, "the process survived: an allocation of host memory "
                                   "failed (ENOMEM) in a task of ");
    assert_int_equal(inspect_verb("triage", paths.dumps, NULL, verdict, sizeof verdict, terr,
                                  sizeof terr),
                     3);
    if (!strstr(verdict, " 1 out-of-memory death(s)") ||
        !strstr(verdict, " 1 failure(s) survived"))
        fail_msg("%s: triage:\n%s", what, verdict);
}

/* A DataLoader worker whose dataset asks for more than its RLIMIT_AS
 * leaves: the worker's MemoryError is caught in the worker, handed to the
 * main process and raised there again ("MemoryError: Caught MemoryError
 * in DataLoader worker process 0.", then "Original Traceback" and the
 * worker's frames).  Two bundles: the worker's, its failed 4 GiB request,
 * which it went on from (caught by the DataLoader's worker loop); and the
 * main process's death, which says the memory ran out in one of the
 * DataLoader's workers, is failed at the dataset's line (the worker's
 * frames its traceback carries on with, kept whole though they came after
 * its bundle was written), names no holder of its own but the worker's
 * bundle, and its torch's version; triage sites its one death there.  The
 * real torch; skipped with a line where there is none. */
static void test_torch_dataloader_worker_memory_error(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    const char *python = torch_python_or_skip_line("test_torch_dataloader_worker_memory_error");
    char script[4096], file[700];
    char main_bundle[BUNDLE_PATH_CAP], worker_bundle[BUNDLE_PATH_CAP];
    if (!python)
        return;
    snprintf(file, sizeof file, "%s/worker_oom.py", paths.scratch);
    static const char program[] =
        "import resource, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "def mapped():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmSize:'):\n"
        "            return int(line.split()[1]) * 1024\n"
        "class Samples(Dataset):\n"
        "    def __len__(self):\n"
        "        return 8\n"
        "    def __getitem__(self, i):\n"
        "        if i == 5:\n"
        "            limit = mapped() + (1 << 30)\n"
        "            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "            return bytearray(4 << 30)\n"
        "        return torch.zeros(4)\n"
        "if __name__ == '__main__':\n"
        "    for batch in DataLoader(Samples(), batch_size=2, num_workers=2):\n"
        "        pass\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script, "OMP_NUM_THREADS=1 LD_PRELOAD=\"%s\" exec %s %s",
             paths.preload, python, file);
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    if (code != 1 || !strstr(err, "MemoryError: Caught MemoryError in DataLoader worker process"))
        fail_msg("exit %d, not the DataLoader's re-raise; stderr: %s", code, err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    expect_death_and_worker("DataLoader", "torch.utils.data._utils.worker._worker_loop",
                            main_bundle, worker_bundle);
    json_t *md = bundle_file(worker_bundle, "metadata.json");
    assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), (4ll << 30) + 1);
    json_decref(md);
    expect_headline(main_bundle, "PyTorch's DataLoader ran out of memory: in one of its worker "
                                 "processes, where the dataset's code runs");
    const char *shown = show_output(main_bundle);
    if (!strstr(shown, "\nFailed at:        worker_oom.py:14 in __getitem__\n") ||
        strstr(shown, "\nHeld by:"))
        fail_msg("show:\n%s\nstderr: %s", shown, err);
    json_t *env = bundle_file(main_bundle, "environment.json");
    const char *version = json_str(json_object_get(env, "system"), "torch_version");
    if (!strchr("0123456789", version[0]) || !strchr(version, '.'))
        fail_msg("torch's version: \"%s\"", version);
    json_decref(env);
    if (!strstr(verdict, "message_pattern:MemoryError  at worker_oom.py:14 in __getitem__\n"))
        fail_msg("triage:\n%s", verdict);
}

/* multiprocessing's Pool and concurrent.futures' ProcessPoolExecutor hand a
 * worker's MemoryError to the main process, which raises it again after
 * printing the worker's traceback as its cause ("RemoteTraceback").  The
 * main process's bundle says the memory ran out in one of the pool's
 * workers, is failed at the function's line, names no holder of its own
 * but the worker's bundle, and our line of it follows the quoted
 * traceback.  The worker's bundle, its failed request, is a failure it
 * survived, caught by the pool's worker loop, however the pool then ends
 * it: with the spawn start the pool's SIGTERM comes while that failure is
 * still open, which made it a second death.  One failure, one death, for
 * triage too: no distributed run made of the pool's spawned workers, and
 * in a rank's run, the rank's death alone.  Python's own library;
 * `python3` as found. */
static void test_pool_worker_memory_error(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    static const struct {
        const char *kind, *headline;
    } pools[] = {
        {"pool", "multiprocessing's Pool ran out of memory: in one of its worker processes, "
                 "where the function given to the pool runs"},
        {"executor", "concurrent.futures' ProcessPoolExecutor ran out of memory: in one of its "
                     "worker processes, where the function given to the executor runs"},
    };
    static const char *const starts[] = {"fork", "spawn"};
    static const char *const loops[] = {"multiprocessing.pool.worker",
                                        "concurrent.futures.process._process_worker"};
    char file[700], script[4096], what[64];
    char main_bundle[BUNDLE_PATH_CAP], worker_bundle[BUNDLE_PATH_CAP];
    snprintf(file, sizeof file, "%s/pool_oom.py", paths.scratch);
    static const char program[] =
        "import concurrent.futures as cf, multiprocessing as mp, sys\n"
        "def work(n):\n"
        "    return len(bytearray(n))\n"
        "if __name__ == '__main__':\n"
        "    mp.set_start_method(sys.argv[2])\n"
        "    if sys.argv[1] == 'pool':\n"
        "        with mp.Pool(1) as p:\n"
        "            p.map(work, [1 << 46])\n"
        "    else:\n"
        "        with cf.ProcessPoolExecutor(1) as ex:\n"
        "            list(ex.map(work, [1 << 46]))\n";
    write_file(file, program, sizeof program - 1);
    for (size_t k = 0; k < 2 * sizeof pools / sizeof *pools; k++) {
        size_t i = k / 2;
        const char *start = starts[k % 2];
        /* the last as rank 1 of a distributed run, whose run its pool's
         * worker is no member of */
        int ranked = k + 1 == 2 * sizeof pools / sizeof *pools;
        snprintf(script, sizeof script, "%sGMP_WATCHDOG=0 LD_PRELOAD=\"%s\" python3 %s %s %s",
                 ranked ? "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 " : "",
                 paths.preload, file, pools[i].kind, start);
        int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
        snprintf(what, sizeof what, "%s, %s", pools[i].kind, start);
        if (code != 1 || !strstr(err, "RemoteTraceback"))
            fail_msg("%s: exit %d, not the worker's error raised again; stderr: %s", what, code,
                     err);
        expect_death_and_worker(what, loops[i], main_bundle, worker_bundle);
        expect_headline(main_bundle, pools[i].headline);
        /* our line of it, though the worker's traceback it was written at
         * came inside one long write of the quoted text: after that line */
        char ours[1200];
        snprintf(ours, sizeof ours, "\"\"\"\ngpumemprof: OOM message on stderr (MemoryError); "
                                    "bundle: %s;", main_bundle);
        if (!strstr(err, ours))
            fail_msg("%s: no line of ours after the quoted traceback: %s", what, err);
        const char *shown = show_output(main_bundle);
        if (!strstr(shown, "\nFailed at:        pool_oom.py:3 in work\n") ||
            strstr(shown, "\nHeld by:"))
            fail_msg("%s: show:\n%s\nstderr: %s", what, shown, err);
        /* a pool is the program's, not a distributed run, however started */
        if (ranked ? !strstr(verdict, "\n    rank 1 ran out of host memory at ") ||
                         strstr(verdict, "rank 1 survived")
                   : strstr(verdict, " run(s), ") != NULL)
            fail_msg("%s: triage:\n%s", what, verdict);
    }
}

/* joblib's Parallel (scikit-learn's n_jobs) runs each task in a worker of
 * loky's executor, which catches its MemoryError and hands it over, and
 * SIGKILLs its workers as the main process ends, a failure of theirs
 * still open: the worker's bundle was never written.  Now it is, at the
 * failure (nothing to wait for: the loop catches it), survived, caught by
 * loky's loop; the main process's death says the memory ran out in one
 * of joblib's workers and names that bundle; triage, one death.  Debian's
 * python3-joblib under Debian's python3; skipped with a line without. */
static void test_joblib_worker_memory_error(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        return;
    /* libasan preloaded alone, without us, hangs it too: the pgrep that
     * loky runs as the pool shuts down waits forever in textdomain */
    skip_under_preload_sanitizer("joblib's pool hangs under libasan alone (loky's pgrep)");
    char file[700], script[4096];
    char main_bundle[BUNDLE_PATH_CAP], worker_bundle[BUNDLE_PATH_CAP];
    snprintf(file, sizeof file, "%s/joblib_oom.py", paths.scratch);
    static const char program[] =
        "from joblib import Parallel, delayed\n"
        "def work(n):\n"
        "    return len(bytearray(n))\n"
        "if __name__ == '__main__':\n"
        "    Parallel(n_jobs=2)(delayed(work)(n) for n in [10, 1 << 46])\n";
    write_file(file, program, sizeof program - 1);
    snprintf(script, sizeof script,
             "/usr/bin/python3 -c 'import joblib' 2>/dev/null || exit 77; "
             "GMP_WATCHDOG=0 LD_PRELOAD=\"%s\" /usr/bin/python3 %s",
             paths.preload, file);
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    if (code == 77) {
        printf("SKIP  test_joblib_worker_memory_error: no joblib for /usr/bin/python3 "
               "(Debian's python3-joblib)\n");
        return;
    }
    if (code != 1 || !strstr(err, "_RemoteTraceback"))
        fail_msg("exit %d, not the worker's error raised again; stderr: %s", code, err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 2);
    expect_death_and_worker("joblib", "loky.process_executor._process_worker", main_bundle,
                            worker_bundle);
    expect_headline(main_bundle, "joblib's process pool (loky) ran out of memory: in one of its "
                                 "worker processes, where the function given to Parallel runs");
    json_t *md = bundle_file(worker_bundle, "metadata.json");
    assert_string_equal(json_str(md, "confirmed_by"), "caught");
    assert_true(json_int(json_object_get(md, "failed_request"), "size") >= 1ll << 46);
    json_decref(md);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "pools");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_dataloader_worker_memory_error),
        cmocka_unit_test(test_pool_worker_memory_error),
        cmocka_unit_test(test_joblib_worker_memory_error),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
