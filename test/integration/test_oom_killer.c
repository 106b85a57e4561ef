/*
 * test_oom_killer.c — the kernel's OOM killer, for real: a memory cgroup
 * the test makes (v2 or v1, skipped with a line where the machine will not
 * let it), a python3 and each language runtime Debian ships grown in it
 * until the killer kills it under gmp-run (one bundle, "killed by the
 * kernel's OOM killer", the cgroup and its limit, the RSS curve), Go's own
 * last words, and a person's kill -9 beside the killer's never named its
 * victim.  gmp-run's other SIGKILLs are test_run.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "killed_run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A memory cgroup for a real OOM kill: v2 (memory.max) or v1
 * (memory.limit_in_bytes) under this process's own cgroup.  Its procs
 * file in procs_out; 0, or -1 when the machine does not let us. */
static int make_memory_cgroup(char *dir, size_t cap, char *procs_out, size_t procs_cap)
{
    char self[2048];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[1024], v2[1024] = "", v1[1024] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "0::", 3))
            snprintf(v2, sizeof v2, "%s", line + 3);
        char *m = strstr(line, ":memory:");
        if (m)
            snprintf(v1, sizeof v1, "%s", m + 8);
    }
    fclose(f);
    static const struct { const char *root, *limit; } kinds[] = {
        {"/sys/fs/cgroup", "memory.max"}, {"/sys/fs/cgroup/memory", "memory.limit_in_bytes"}};
    for (int k = 0; k < 2; k++) {
        const char *rel = k == 0 ? v2 : v1;
        if (k == 0 ? !v2[0] || access("/sys/fs/cgroup/cgroup.controllers", F_OK) : !v1[0])
            continue;
        snprintf(self, sizeof self, "%s%s", kinds[k].root, strcmp(rel, "/") ? rel : "");
        snprintf(dir, cap, "%s/gmp-test-%d", self, (int)getpid());
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            continue;
        char limit[3200];
        snprintf(limit, sizeof limit, "%s/%s", dir, kinds[k].limit);
        FILE *l = fopen(limit, "w");
        int ok = l && fprintf(l, "%d\n", 96 << 20) > 0;
        if (l && fclose(l) != 0)
            ok = 0;
        if (!ok) {
            rmdir(dir);
            continue;
        }
        if (k == 1) { /* swap must not let it live on */
            snprintf(limit, sizeof limit, "%s/memory.memsw.limit_in_bytes", dir);
            if ((l = fopen(limit, "w"))) {
                fprintf(l, "%d\n", 96 << 20);
                fclose(l);
            }
        } else {
            snprintf(limit, sizeof limit, "%s/memory.swap.max", dir);
            if ((l = fopen(limit, "w"))) {
                fputs("0\n", l);
                fclose(l);
            }
        }
        snprintf(procs_out, procs_cap, "%s/cgroup.procs", dir);
        return 0;
    }
    return -1;
}

/* The test's own memory cgroup, or the test skips with a line. */
static void memory_cgroup_or_skip(char *dir, size_t cap, char *procs_out, size_t procs_cap)
{
    if (make_memory_cgroup(dir, cap, procs_out, procs_cap) < 0) {
        print_message("SKIP: cannot make a memory cgroup with a limit here\n");
        skip();
    }
}

static void test_kernel_oom_killer(void **state)
{
    (void)state;
    char cg[3000], procs[3100];
    memory_cgroup_or_skip(cg, sizeof cg, procs, sizeof procs);
    char script[8192];
    snprintf(script, sizeof script,
             "timeout 60 \"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- sh -c 'echo $$ > %s; "
             "exec python3 -c \"import time\nkeep = []\nwhile True:\n"
             "    keep.append(bytearray(8 << 20)); time.sleep(0.02)\"'",
             procs);
    /* growing 8 MiB each 20 ms: gmp-run's looks (20 a second) sample the
     * climb in the cgroup, however fast python3 starts */
    run(script);
    rmdir(cg);
    if (ends_with_status(124)) { /* swap the cgroup cannot limit, say */
        print_message("SKIP: the kernel did not OOM-kill within 60 s here\n");
        skip();
    }
    assert_true(ends_with_status(137));
    json_t *md = killed_bundle("SIGKILL", 2);
    assert_string_equal(json_str(md, "exception_type"), "oom_killer");
    if (!strstr(json_str(md, "evidence"), "oom_killer: "))
        fail_msg("evidence: %s", json_str(md, "evidence"));
    json_decref(md);
    expect_first_cause(bundle, "killed by the kernel's OOM killer");
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nWhat happened:    the process was killed by the kernel's OOM killer"))
        fail_msg("show says:\n%s", out);
    /* the plot draws what the limit counts: the cgroup's usage, from the
     * samples gmp-run took, up to the limit's line */
    char svg[1200];
    snprintf(svg, sizeof svg, "%s/killed.svg", paths.scratch);
    const char *drawn = plot_output(bundle, svg);
    if (!strstr(drawn, ">memory cgroup usage</text>") || !strstr(drawn, ">cgroup limit "))
        fail_msg("the plot does not draw the cgroup's usage against its limit:\n%.2000s", drawn);
}

/* A person's kill -9 of one process while the cgroup's OOM killer kills
 * another: the kernel log names the other, so this one was killed by
 * SIGKILL, not by the OOM killer, and is no death of memory.  Where this
 * user cannot read the log, its bundle says only that the killer ran while
 * it did, never that it was the victim. */
static void test_oom_killer_named_only_for_its_victim(void **state)
{
    (void)state;
    char cg[3000], procs[3100];
    memory_cgroup_or_skip(cg, sizeof cg, procs, sizeof procs);
    char script[8192];
    snprintf(script, sizeof script,
             "\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- sh -c 'echo $$ > %s; exec python3 -c "
             "\"import os, time\nkeep = bytearray(8 << 20)\n"
             "open(\\\"%s/sleeper\\\", \\\"w\\\").write(str(os.getpid()))\ntime.sleep(60)\"' & run=$!; "
             "for i in $(seq 100); do [ -s '%s/sleeper' ] && break; sleep 0.1; done; "
             "timeout 60 sh -c 'echo $$ > %s; exec python3 -c \"keep = []\nwhile True:\n"
             "    keep.append(bytearray(8 << 20))\"'; grower=$?; "
             "kill -9 $(cat '%s/sleeper'); wait $run; echo \"grower $grower\"",
             procs, paths.scratch, paths.scratch, procs, paths.scratch);
    run(script);
    rmdir(cg);
    if (strstr(out, "grower 124")) {
        print_message("SKIP: the kernel did not OOM-kill within 60 s here\n");
        skip();
    }
    assert_non_null(strstr(out, "grower 137"));
    assert_true(ends_with_status(0));
    json_t *md = killed_bundle("SIGKILL", 1);
    const char *type = json_str(md, "exception_type"), *evidence = json_str(md, "evidence");
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC), log_read = fd >= 0;
    if (fd >= 0)
        close(fd);
    if (!strcmp(type, "oom_killer") ||
        (log_read ? strncmp(evidence, "kernel_log: ", 12) || !strstr(evidence, ", not this one")
                  : strncmp(evidence, "cgroup_oom_kill: ", 17) ||
                        !strstr(evidence, "nothing here says which")) ||
        strcmp(json_str(md, "kind"), log_read ? "killed_cause_unknown"
                                              : "killed_while_cgroup_oom_killer_ran"))
        fail_msg("the victim was another process: type %s, kind %s, evidence %s", type,
                 json_str(md, "kind"), evidence);
    json_decref(md);
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    if (!strstr(out, log_read ? "\nWhat happened:    the process was killed by SIGKILL; not by "
                                "the OOM killer: the kernel log names its victim, pid "
                              : "\nWhat happened:    the process was killed (SIGKILL) while its "
                                "cgroup's OOM killer ran") ||
        strstr(out, "killed by the kernel's OOM killer"))
        fail_msg("show says:\n%s", out);
    if (log_read) { /* no death of memory in triage's count */
        const char *triage[] = {inspect_path(), "triage", bundle, NULL};
        run_capture(triage, out, sizeof out, err, sizeof err);
        if (!strstr(out, " 0 out-of-memory death(s), ") ||
            !strstr(out, " 1 killed or crashed with no sign of memory"))
            fail_msg("triage says:\n%s", out);
    }
}

/* A runtime whose heap never asks malloc for it, killed by the OOM killer
 * in a memory cgroup under gmp-run: gmp-run's proxy ring (or the preload's
 * own) holds its samples, so one bundle says "killed by the kernel's OOM
 * killer" with its command line, its cgroup and that cgroup's limit, and
 * the RSS climbing.  NAME the case, NEED the program that must exist (or
 * the case is skipped with a line), BUILD a shell command making it in the
 * scratch directory ("" none), CMD what runs there.  With --dump-dir, or
 * (expect_oom_killed_by_default) as a user types it, with neither that nor
 * GMP_DUMP_DIR: the bundle in ./oom_dumps. */
static void oom_killed_under_gmp_run(const char *name, const char *need, const char *build,
                                     const char *cmd, int by_default);

static void expect_runtime_oom_killed(const char *name, const char *need, const char *build,
                                      const char *cmd)
{
    oom_killed_under_gmp_run(name, need, build, cmd, 0);
}

static void expect_oom_killed_by_default(const char *name, const char *need, const char *build,
                                         const char *cmd)
{
    oom_killed_under_gmp_run(name, need, build, cmd, 1);
}

static void oom_killed_under_gmp_run(const char *name, const char *need, const char *build,
                                     const char *cmd, int by_default)
{
    char script[8192], cg[3000], procs[3100];
    snprintf(script, sizeof script, "command -v %s >/dev/null || exit 77; cd '%s' && %s", need,
             paths.scratch, build[0] ? build : "true");
    run(script);
    if (ends_with_status(77)) {
        print_message("SKIP  %s: %s is not installed\n", name, need);
        return;
    }
    if (!ends_with_status(0))
        fail_msg("%s: building: %s %s", name, out, err);
    if (make_memory_cgroup(cg, sizeof cg, procs, sizeof procs) < 0) {
        print_message("SKIP  %s: cannot make a memory cgroup with a limit here\n", name);
        return;
    }
    char dumps[1100];
    snprintf(dumps, sizeof dumps, "%s/oom_dumps", paths.scratch);
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf oom_dumps && %s timeout 50 \"$GMP_RUN\" %s -- sh -c "
             "'echo $$ > %s; exec %s' >/dev/null",
             paths.scratch, by_default ? "unset GMP_DUMP_DIR &&" : "",
             by_default ? "" : "--dump-dir \"$GMP_DUMP_DIR\"", procs, cmd);
    run(script);
    rmdir(cg);
    if (ends_with_status(124)) {
        print_message("SKIP  %s: the kernel did not OOM-kill within 50 s here\n", name);
        return;
    }
    if (!ends_with_status(137))
        fail_msg("%s: %s %s", name, out, err);
    json_t *md = only_bundle_file(by_default ? dumps : paths.dumps, "metadata.json", bundle,
                                  sizeof bundle);
    assert_string_equal(json_str(md, "exception_type"), "oom_killer");
    json_t *cgroup = json_object_get(json_object_get(md, "host_state"), "cgroup");
    if (json_int(cgroup, "memory_max") != 96 << 20 || !strstr(json_str(cgroup, "path"), "/gmp-test-"))
        fail_msg("%s: the bundle's cgroup is not the job's: %s, limit %lld", name,
                 json_str(cgroup, "path"), json_int(cgroup, "memory_max"));
    json_decref(md);
    json_t *events = bundle_file(bundle, "events.json");
    size_t i;
    json_t *ev;
    long long samples = 0, first = -1, last = 0;
    json_array_foreach(events, i, ev) {
        if (strcmp(json_str(ev, "event_type"), "sample"))
            continue;
        samples++;
        last = json_int(ev, "bytes_in_use");
        if (first < 0)
            first = last;
    }
    json_decref(events);
    if (samples < 2 || last <= first)
        fail_msg("%s: no climbing curve: %lld samples, RSS %lld then %lld", name, samples, first,
                 last);
    const char *shown = show_output(bundle);
    /* show's Process line names the program (its path, as it ran) */
    const char *line = strstr(shown, "\nProcess:          pid "), *program = cmd;
    if (!strncmp(program, "./", 2))
        program += 2;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(program, " "), program);
    if (!strstr(shown, "\nWhat happened:    the process was killed by the kernel's OOM killer") ||
        !line || !strstr(line, word) || strstr(line, word) > strchr(line + 1, '\n'))
        fail_msg("%s: show says:\n%s", name, shown);
    char rm[1200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", bundle);
    assert_int_equal(system(rm), 0);
}

static void test_runtimes_oom_killed_under_gmp_run(void **state)
{
    (void)state;
    if (preload_sanitizer()) { /* a sanitizer's runtime in a JVM, V8 or Go: not theirs to run */
        print_message("SKIP  jvm, node, go: the preload is under a sanitizer; python alone\n");
        expect_runtime_oom_killed("python", "python3", "",
                                  "python3 -c \"import time\nkeep = []\nwhile True:\n"
                                  "    keep.append(bytearray(1 << 20)); time.sleep(0.005)\"");
        return;
    }
    expect_runtime_oom_killed(
        "jvm", "javac",
        "printf '%s\\n' 'import java.util.*;' 'public class Grow {' "
        "'  public static void main(String[] a) throws Exception {' "
        "'    List<long[]> l = new ArrayList<>();' "
        "'    while (true) { l.add(new long[1 << 17]); Thread.sleep(5); } } }' > Grow.java && "
        "javac Grow.java",
        "java -Xmx2g -cp . Grow");
    /* node -e 0 first: the first read of node's 100 MB binary, charged to
     * the 96 MiB cgroup, has the kernel reclaim and read back its text for
     * ever instead of OOM-killing it (so it did on a fresh machine, with no
     * preload either); read once outside, the pages are charged there */
    expect_runtime_oom_killed("node", "node", "node -e 0",
                              "node -e \"const a = []; setInterval(() => "
                              "a.push(new Array(1e5).fill(a.length + 0.5)), 5)\"");
    expect_runtime_oom_killed(
        "go (static)", "go",
        "printf '%s\\n' 'package main' 'import \"time\"' 'func main() {' "
        "'  var keep [][]byte' '  for {' '    b := make([]byte, 1<<20)' "
        "'    for i := range b { b[i] = 1 }' '    keep = append(keep, b)' "
        "'    time.Sleep(5 * time.Millisecond)' '  }' '}' > grow.go && "
        "HOME=\"$PWD\" GOCACHE=\"$PWD/go-cache\" GOPATH=\"$PWD/go-path\" CGO_ENABLED=0 "
        "go build -o grow-go grow.go",
        "./grow-go");
    expect_runtime_oom_killed(
        "go (cgo)", "go",
        "printf '%s\n' 'package main' '// #include <stdlib.h>' 'import \"C\"' "
        "'import (\"time\"; \"unsafe\")' 'func main() {' '  C.free(unsafe.Pointer(C.malloc(16)))' "
        "'  var keep [][]byte' '  for {' '    b := make([]byte, 1<<20)' "
        "'    for i := range b { b[i] = 1 }' '    keep = append(keep, b)' "
        "'    time.Sleep(5 * time.Millisecond)' '  }' '}' > grow-cgo.go && "
        "HOME=\"$PWD\" GOCACHE=\"$PWD/go-cache\" GOPATH=\"$PWD/go-path\" CGO_ENABLED=1 "
        "go build -o grow-cgo grow-cgo.go",
        "./grow-cgo");
    expect_runtime_oom_killed("python", "python3", "",
                              "python3 -c \"import time\nkeep = []\nwhile True:\n"
                              "    keep.append(bytearray(1 << 20)); time.sleep(0.005)\"");
    /* a heap of its own from mmap (LuaJIT's, GHC's, PHP's): only gmp-run's
     * proxy knows it, and its bundle still goes to gmp-run's default; 4 MiB
     * every 20 ms, as fast as the others grow (every 2 ms, it reached the
     * limit between two of gmp-run's looks on a busy machine: one sample) */
    expect_oom_killed_by_default(
        "an mmap heap, gmp-run's default dump directory", "cc",
        "printf '%s\\n' '#include <string.h>' '#include <sys/mman.h>' '#include <unistd.h>' "
        "'int main(void) { for (;;) { char *p = mmap(0, 4 << 20, PROT_READ | PROT_WRITE, "
        "MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); if (p == MAP_FAILED) return 3; "
        "memset(p, 1, 4 << 20); usleep(20000); } }' > mmap_heap.c && cc -o mmap_heap mmap_heap.c",
        "./mmap_heap");
}

/* Go writes its out-of-memory words and exits 2 with raw system calls, past
 * the preload (which a static Go binary never loads).  Under gmp-run with
 * its stderr a file (a Slurm output file), gmp-run reads them back; with
 * its stderr a pipe (a CI runner's), it passes them on and keeps them: one
 * bundle each way that says the Go runtime ran out of memory, with its
 * words, and that it exited 2, and the words reach where they were going.
 * Skipped with a line where go is missing. */
static void test_go_last_words_under_gmp_run(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "command -v go >/dev/null || exit 77; cd '%s' && printf '%%s\n' 'package main' "
             "'import (\"fmt\"; \"time\")' 'func main() {' "
             "'  time.Sleep(300 * time.Millisecond)' '  b := make([]byte, 1<<46)' "
             "'  fmt.Println(len(b))' '}' > oom.go && HOME=\"$PWD\" GOCACHE=\"$PWD/go-cache\" "
             "GOPATH=\"$PWD/go-path\" CGO_ENABLED=0 go build -o go-oom oom.go",
             paths.scratch);
    run(script);
    if (ends_with_status(77)) {
        print_message("SKIP  test_go_last_words_under_gmp_run: go is not installed\n");
        return;
    }
    /* stderr a file, then a pipe (passed on through gmp-run's own) */
    static const char *const ways[] = {"2>go.err", "2>&1 | cat >go.err"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(script, sizeof script,
                 "cd '%s' && sh -c '\"$GMP_RUN\" --dump-dir \"$GMP_DUMP_DIR\" -- ./go-oom %s'; "
                 "grep -c \"^fatal error: runtime: out of memory\" go.err",
                 paths.scratch, ways[i]);
        run(script);
        if (!strstr(out, "1\n"))
            fail_msg("go, %s: the words did not reach the file: %s %s", ways[i], out, err);
        json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
        assert_string_equal(json_str(md, "exception_message"),
                            "fatal error: runtime: out of memory");
        json_t *outcome = json_object_get(md, "outcome");
        assert_string_equal(json_str(outcome, "state"), "exited");
        assert_int_equal(json_int(outcome, "exit_status"), 2);
        json_decref(md);
        expect_headline(bundle, "the Go runtime ran out of memory");
        assert_int_equal(count_prefixed(paths.rundir, "gmp-run-"), 0);
    }
}

/* `show`'s top sites of the bundle of a native process killed under
 * gmp-run: the program's own line, named from the stacks and objects its
 * ring kept, never a bare stack id. */
static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "oom_killer");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_oom_killer),
        cmocka_unit_test(test_runtimes_oom_killed_under_gmp_run),
        cmocka_unit_test(test_go_last_words_under_gmp_run),
        cmocka_unit_test(test_oom_killer_named_only_for_its_victim),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
