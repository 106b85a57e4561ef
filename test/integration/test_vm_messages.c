/*
 * test_vm_messages.c — out-of-memory deaths that real virtual machines and
 * frameworks announce in their own words, as their users meet them: Node's
 * V8 at its heap limit and at an ArrayBuffer it cannot allocate; the JVM's
 * OutOfMemoryError for its heap, a native thread, direct buffers and
 * -XX:+ExitOnOutOfMemoryError; PyTorch's DataLoader when /dev/shm is full,
 * by its error and by a worker's bus error.  Each the real program, under
 * the preload: its own status, one bundle whose headline and causes say
 * what ran out and where its limit was set.  (test_pools.c has a pool's
 * worker's MemoryError that the main process raises again.)  A program that is not
 * installed skips with a line.  (test_messages.c has the stand-ins: lines
 * as frameworks print them.)
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

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "vm-messages");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_heap_limit),
        cmocka_unit_test(test_node_array_buffer),
        cmocka_unit_test(test_jvm_heap_space),
        cmocka_unit_test(test_jvm_native_thread),
        cmocka_unit_test(test_jvm_exit_on_oom),
        cmocka_unit_test(test_jvm_direct_buffers),
        cmocka_unit_test(test_torch_dataloader_shm_full),
        cmocka_unit_test(test_torch_worker_bus_error),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
