/*
 * test_crash.c — the corrupted death: a program that writes
 * through the NULL a failed malloc returned.  Under the preload it dies
 * exactly as without (status, signal, output), with one bundle that names
 * the signal, the failed request and a native stack that symbolises to the
 * allocating function; GMP_ON_CRASH decides when a signal writes at all,
 * and the program's own handlers still run.
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define HUGE "10000000000000000" /* 8.9 PiB: malloc says ENOMEM */

static preload_paths paths;
static char program[2048], out[1 << 16], err[1 << 16];

/* naive_malloc ARG [ARG2] under the preload (unless `env` is
 * "GMP_ENABLED=0" or another NAME=VALUE for it); run without a shell, so
 * that no shell reports the death on stderr.  out ends with "status N"
 * (128+signal for a death by signal, as a shell would say). */
static void run(const char *env, const char *arg, const char *arg2)
{
    char name[64] = "", value[64] = "";
    if (env)
        sscanf(env, "%63[^=]=%63s", name, value);
    setenv("LD_PRELOAD", paths.preload, 1);
    setenv("GMP_DUMP_DIR", paths.dumps, 1);
    setenv("GMP_RUN_DIR", paths.rundir, 1);
    if (*name)
        setenv(name, value, 1);
    scratch_remove(paths.dumps);
    const char *argv[] = {program, arg, arg2, NULL};
    int status = run_capture(argv, out, sizeof out - 32, err, sizeof err);
    unsetenv("LD_PRELOAD");
    if (*name)
        unsetenv(name);
    int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    snprintf(out + strlen(out), 32, "status %d\n", code);
}

static int bundles(void)
{
    return count_prefixed(paths.dumps, "oom_dump_");
}

/* The same output and status with and without the preload. */
static void same_death(const char *env, const char *arg, const char *arg2, const char *want_out)
{
    run("GMP_ENABLED=0", arg, arg2);
    assert_string_equal(out, want_out);
    run(env, arg, arg2);
    assert_string_equal(out, want_out);
}

/* build/test/programs/NAME, absolute (the tests run from elsewhere). */
static void program_path(const char *name, char *path, size_t cap)
{
    char cwd[512] = "";
    if (paths.build[0] != '/')
        assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(path, cap, "%s%s%s/test/programs/%s", cwd, cwd[0] ? "/" : "", paths.build, name);
}

/* The one bundle's metadata; its stderr line starts with `line`. */
static json_t *crash_bundle(const char *line, char *path, size_t cap)
{
    char own[1024], read_it[1200];
    if (!path) {
        path = own;
        cap = sizeof own;
    }
    if (strncmp(err, line, strlen(line)) || count_lines(err) != 1)
        fail_msg("want one line \"%s...\", got: %s", line, err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", path, cap);
    assert_string_equal(json_str(md, "confirmed_by"), "signal");
    /* the line ends with how to read the bundle */
    snprintf(read_it, sizeof read_it, "; read it: gmp-inspect show %s\n", path);
    size_t n = strlen(err), k = strlen(read_it);
    if (n < k || strcmp(err + n - k, read_it))
        fail_msg("the line does not end \"%s\": %s", read_it, err);
    return md;
}

/* Seed 002: exit status 139, one bundle naming SIGSEGV and the failed size. */
static void test_segv_after_failed_malloc(void **state)
{
    (void)state;
    char bundle[1024];
    same_death(NULL, HUGE, NULL, "status 139\n");
    json_t *md = crash_bundle("gpumemprof: SIGSEGV after failed allocation (malloc 8.9 PiB on "
                              "host, ENOMEM); bundle: ",
                              bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "SIGSEGV after failed allocation");
    assert_string_equal(json_str(md, "exception_type"), "SIGSEGV");
    assert_string_equal(json_str(md, "exception_message"),
                        "SIGSEGV at address 0x0 after malloc of 8.9 PiB on host failed with "
                        "ENOMEM (code 12).");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), "malloc");
    assert_int_equal(json_int(fr, "size"), 10000000000000000ll);
    assert_int_equal(json_int(fr, "code"), 12);
    json_t *outcome = json_object_get(md, "outcome");
    assert_string_equal(json_str(outcome, "state"), "killed");
    assert_string_equal(json_str(outcome, "signal"), "SIGSEGV");

    /* the stack's first address, against the program's load bias in
     * modules.json, is in allocate_unchecked according to addr2line */
    const char *first = json_string_value(json_array_get(json_object_get(fr, "stack"), 0));
    assert_non_null(first);
    unsigned long long base = bundle_module_base(bundle, program), at = strtoull(first, NULL, 16);
    json_decref(md);
    expect_first_cause(bundle, "a crash caused by an unchecked failed allocation");
    expect_headline(bundle, "the process crashed (SIGSEGV) after an allocation of host memory "
                            "failed");
    assert_true(base != 0 && at > base);
    if (access("/usr/bin/addr2line", X_OK) != 0) {
        print_message("SKIP: no addr2line to symbolise with\n");
        return;
    }
    char cmd[2400], sym[1024], none[64];
    snprintf(cmd, sizeof cmd, "addr2line -f -e '%s' 0x%llx", program, at - base - 1);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_capture(argv, sym, sizeof sym, none, sizeof none);
    if (strncmp(sym, "allocate_unchecked\n", 19))
        fail_msg("the stack symbolises to %s", sym);
    /* show names the same function as the failure's site (libdw) */
    static char shown[1 << 16], shown_err[4096];
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    run_capture(show, shown, sizeof shown, shown_err, sizeof shown_err);
    if (!strstr(shown, "\nFailed at:        allocate_unchecked ("))
        fail_msg("show does not name the failing function:\n%s", shown);
}

/* A segfault with no failed allocation is not ours to report... */
static void test_plain_segv_writes_nothing(void **state)
{
    (void)state;
    same_death(NULL, "segv", NULL, "status 139\n");
    assert_string_equal(err, "");
    assert_int_equal(bundles(), 0);
}

/* ...unless GMP_ON_CRASH=always. */
static void test_on_crash_always(void **state)
{
    (void)state;
    same_death("GMP_ON_CRASH=always", "segv", NULL, "status 139\n");
    char bundle[1024];
    json_t *md = crash_bundle("gpumemprof: SIGSEGV; bundle: ", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "SIGSEGV");
    assert_true(json_is_null(json_object_get(md, "failed_request")));
    json_decref(md);
    expect_headline(bundle, "the process crashed (SIGSEGV); no allocation had failed");
}

/* GMP_ON_CRASH=never: the failure still records, the signal writes nothing. */
static void test_on_crash_never(void **state)
{
    (void)state;
    same_death("GMP_ON_CRASH=never", HUGE, NULL, "status 139\n");
    assert_string_equal(err, "");
    assert_int_equal(bundles(), 0);
}

/* abort() after the failure: SIGABRT, status 134, as without us. */
static void test_abort_after_failed_malloc(void **state)
{
    (void)state;
    same_death(NULL, "abort", HUGE, "status 134\n");
    json_t *md = crash_bundle("gpumemprof: SIGABRT after failed allocation (malloc 8.9 PiB on "
                              "host, ENOMEM); bundle: ",
                              NULL, 0);
    assert_string_equal(json_str(md, "reason"), "SIGABRT after failed allocation");
    json_decref(md);
}

/* Two failures of different sizes 3 ms apart (the second, at least as large,
 * writes the first's bundle), then abort(): one death, one bundle, whose
 * outcome is the abort; triage counts one death. */
static void test_one_death_after_two_sizes(void **state)
{
    (void)state;
    same_death(NULL, "larger-abort", "0x10000000000000", "status 134\n");
    if (count_lines(err) != 1)
        fail_msg("want one line of ours, got: %s", err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    json_t *outcome = json_object_get(md, "outcome");
    assert_string_equal(json_str(outcome, "state"), "killed");
    assert_string_equal(json_str(outcome, "signal"), "SIGABRT");
    json_decref(md);
}

/* The program's own SIGSEGV handler (installed before the failure) stays in
 * front: it runs, it decides the exit status, and no crash bundle is made of
 * a signal that did not end the process by itself; the failure is still
 * written, when the program's _exit commits its episode. */
static void test_program_handler_still_runs(void **state)
{
    (void)state;
    same_death(NULL, "handler", HUGE, "program handler\nstatus 42\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "reason"), "ENOMEM");
    assert_string_equal(json_str(md, "confirmed_by"), "exit");
    json_t *outcome = json_object_get(md, "outcome"); /* the handler's _exit(42) */
    assert_string_equal(json_str(outcome, "state"), "exited");
    assert_int_equal(json_int(outcome, "exit_status"), 42);
    json_decref(md);
}

/* A runtime that handles SIGSEGV itself (the JVM, V8, Go): its handler
 * sees every fault and stays its own whether it came before or after the
 * failed allocation, and whatever GMP_ON_CRASH says; no crash bundle. */
static void test_runtime_keeps_its_signals(void **state)
{
    (void)state;
    program_path("own_signals", program, sizeof program);
    static const char *const modes[] = {"before", "after"};
    static const char *const envs[] = {NULL, "GMP_ON_CRASH=always"};
    for (size_t m = 0; m < 2; m++)
        for (size_t e = 0; e < 2; e++) {
            same_death(envs[e], modes[m], HUGE,
                       "malloc failed, checked\ncaught 3 faults\nhandlers intact\nstatus 0\n");
            if (strstr(err, "SIGSEGV") || strstr(err, "SIGBUS"))
                fail_msg("%s, %s: a crash line for a fault the program handled: %s", modes[m],
                         envs[e] ? envs[e] : "default", err);
            json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
            assert_string_equal(json_str(md, "reason"), "ENOMEM");
            json_decref(md);
        }
}

/* C++'s uncaught std::bad_alloc: terminate's words, then abort.  The cause
 * is the runtime's end, in its words, with no fault address (abort's
 * siginfo holds a pid there), sited in the program's own frame. */
static void test_uncaught_bad_alloc(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("ASan's own operator new, which reports and exits 1");
    char bundle[1024];
    program_path("bad_alloc", program, sizeof program);
    same_death(NULL, NULL, NULL, "start\nstatus 134\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "SIGABRT after failed allocation");
    assert_string_equal(json_str(md, "exception_type"), "bad_alloc");
    assert_string_equal(json_str(md, "exception_module"), "std");
    assert_string_equal(json_str(md, "exception_message"),
                        "terminate called after throwing an instance of 'std::bad_alloc'");
    json_decref(md);
    expect_headline(bundle, "the C++ runtime ended the program (SIGABRT): an allocation threw "
                            "std::bad_alloc and nothing caught it");
    expect_first_cause(bundle, "the C++ runtime ended the program: an allocation threw "
                               "std::bad_alloc and nothing caught it");
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    if (strstr(out, "address") || strstr(out, "unchecked") ||
        !strstr(out, "\nFailed at:        model::grow_table") || !strstr(out, ") (bad_alloc.cc:") ||
        !strstr(out, "\nException:        std::bad_alloc\n"))
        fail_msg("show:\n%s", out);
}

/* Rust's failed allocation: "memory allocation of N bytes failed", then
 * abort.  Built here with rustc when it is installed (skipped with a line
 * otherwise): the runtime's end in its words, sited in the program's
 * grow_table, not in alloc::raw_vec. */
static void test_rust_allocation_failure(void **state)
{
    (void)state;
    char script[4096], rust[1200], bundle[1024];
    snprintf(rust, sizeof rust, "%s/rustoom", paths.scratch);
    snprintf(script, sizeof script,
             "command -v rustc >/dev/null || exit 77; printf '%%s\\n' "
             "'fn grow_table(bytes: usize) -> Vec<u8> {' "
             "'    let mut table: Vec<u8> = Vec::new();' '    table.reserve_exact(bytes);' "
             "'    table' '}' 'fn main() {' '    let t = grow_table(1usize << 44);' "
             "'    println!(\"{}\", t.capacity());' '}' > '%s.rs' && "
             "rustc -g -C opt-level=0 -o '%s' '%s.rs'",
             rust, rust, rust);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    int built = exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
    if (built == 77) {
        printf("SKIP  test_rust_allocation_failure: rustc is not installed\n");
        return;
    }
    if (built != 0)
        fail_msg("rustc: %s", err);
    snprintf(program, sizeof program, "%s", rust);
    same_death(NULL, NULL, NULL, "status 134\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "SIGABRT after failed allocation");
    assert_string_equal(json_str(md, "exception_message"),
                        "memory allocation of 17592186044416 bytes failed");
    json_decref(md);
    expect_headline(bundle, "the Rust runtime ended the program (SIGABRT)");
    expect_first_cause(bundle, "the Rust runtime ended the program: an allocation failed");
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    run_capture(show, out, sizeof out, err, sizeof err);
    if (strstr(out, "address") || !strstr(out, "\nFailed at:        rustoom::grow_table") ||
        !strstr(out, "evidence: it said \"memory allocation of 17592186044416 bytes failed\", "
                     "then aborted\n"))
        fail_msg("show:\n%s", out);
}

/* Rust's names as Rust writes them: a program named rust_oom (the name of
 * Rust's own handler of a failed allocation) built with v0 mangling (as
 * rustc builds its standard library from 1.95; legacy where this rustc has
 * no v0), its vec! growing under `ulimit -v` until the runtime aborts:
 * "Failed at" and "Held by" are the program's rust_oom::main at its line,
 * not the C main shim nor <u8 as alloc::...>::from_elem, and nothing show
 * prints is mangled. */
static void test_rust_names_demangled(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[8192], rust[600];
    snprintf(rust, sizeof rust, "%s/rust_oom", paths.scratch);
    snprintf(script, sizeof script,
             "command -v rustc >/dev/null || exit 77; printf '%%s\\n' 'fn main() {' "
             "'    let mut kept: Vec<Vec<u8>> = Vec::new();' '    loop {' "
             "'        let v = vec![1u8; 64 << 20];' '        kept.push(v);' '    }' '}' "
             "> '%s.rs' && { rustc -g -C symbol-mangling-version=v0 -o '%s' '%s.rs' 2>/dev/null || "
             "rustc -g -o '%s' '%s.rs'; }",
             rust, rust, rust, rust, rust);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    int built = exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
    if (built == 77) {
        printf("SKIP  test_rust_names_demangled: rustc is not installed\n");
        return;
    }
    if (built != 0)
        fail_msg("rustc: %s", err);
    snprintf(script, sizeof script,
             "ulimit -v 1000000; LD_PRELOAD='%s' '%s' 2>/dev/null; echo \"status $?\"",
             paths.preload, rust);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "status 134\n");
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    run_capture(show, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nFailed at:        rust_oom::main (rust_oom.rs:4)\n") ||
        !strstr(out, "\nHeld by:          ") || !strstr(out, " made at rust_oom::main (rust_oom.rs:4)") ||
        strstr(out, "_R") || strstr(out, "$LT$") || strstr(out, "17h"))
        fail_msg("show:\n%s", out);

    /* optimised, its own function inlined into main and std's allocation
     * code into that: the inlined function at its own line, never main at
     * std's alloc.rs line, nor a caller in std's runtime */
    snprintf(script, sizeof script,
             "printf '%%s\\n' '#[inline(always)]' 'fn grow_table(kept: &mut Vec<Vec<u8>>) {' "
             "'    let v = vec![1u8; 64 << 20];' '    kept.push(v);' '}' 'fn main() {' "
             "'    let mut kept: Vec<Vec<u8>> = Vec::new();' '    loop {' "
             "'        grow_table(&mut kept);' '    }' '}' > '%s.rs' && "
             "{ rustc -g -C opt-level=2 -C symbol-mangling-version=v0 -o '%s' '%s.rs' 2>/dev/null "
             "|| rustc -g -C opt-level=2 -o '%s' '%s.rs'; }",
             rust, rust, rust, rust, rust);
    if (exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("rustc -C opt-level=2: %s", err);
    snprintf(script, sizeof script,
             "rm -rf '%s'/*; ulimit -v 1000000; LD_PRELOAD='%s' '%s' 2>/dev/null; "
             "echo \"status $?\"",
             paths.dumps, paths.preload, rust);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "status 134\n");
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    run_capture(show, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nFailed at:        rust_oom::grow_table (rust_oom.rs:3)\n") ||
        !strstr(out, " made at rust_oom::grow_table (rust_oom.rs:3)") ||
        strstr(out, "alloc.rs") || strstr(out, "called from std::"))
        fail_msg("optimised, show:\n%s", out);
}

/* 16 MiB held, a failed malloc, 64 MiB more, then the crash: what held the
 * memory when it failed is the 16 MiB; the 64 MiB made after is counted
 * apart and named nowhere. */
static void test_held_by_is_what_was_live_at_the_failure(void **state)
{
    (void)state;
    char bundle[1024];
    same_death(NULL, "held-after", HUGE, "status 139\n");
    json_decref(crash_bundle("gpumemprof: SIGSEGV after failed allocation", bundle,
                             sizeof bundle));
    json_t *held = bundle_file(bundle, "allocations.json");
    if (json_int(held, "made_after_failure_count") != 1 ||
        json_int(held, "made_after_failure_bytes") != 64 << 20 ||
        json_int(held, "live_bytes") >= 64 << 20)
        fail_msg("allocations.json: after %lld (%lld B), live %lld B",
                 json_int(held, "made_after_failure_count"),
                 json_int(held, "made_after_failure_bytes"), json_int(held, "live_bytes"));
    json_decref(held);
    const char *show[] = {inspect_path(), "show", bundle, NULL};
    run_capture(show, out, sizeof out, err, sizeof err);
    if (!strstr(out, "\nHeld by:          16.0 MiB in 1 allocation(s) made at hold_before") ||
        strstr(out, "made_after") || strstr(out, "64.0 MiB"))
        fail_msg("show:\n%s", out);
}

/* A small alternate stack of the program's own: the bundle is written on
 * ours, and the death is the same. */
static void test_program_alt_stack_too_small(void **state)
{
    (void)state;
    same_death(NULL, "altstack", HUGE, "status 139\n");
    json_t *md = crash_bundle("gpumemprof: SIGSEGV after failed allocation", NULL, 0);
    assert_int_equal(json_int(json_object_get(md, "failed_request"), "code"), 12);
    json_decref(md);
}

/* Another thread's failure after this thread's own, then the crash: one
 * death, one bundle (the second failure wrote it), which names the request
 * whose NULL the crashing thread wrote through, and whose outcome is the
 * SIGSEGV. */
static void test_crash_names_its_own_thread_failure(void **state)
{
    (void)state;
    same_death(NULL, "other-thread", HUGE, "status 139\n");
    assert_int_equal(count_lines(err), 1);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    assert_string_equal(json_str(md, "confirmed_by"), "second_failure");
    assert_int_equal(json_int(json_object_get(md, "failed_request"), "size"), 10000000000000000ll);
    json_t *outcome = json_object_get(md, "outcome");
    assert_string_equal(json_str(outcome, "state"), "killed");
    assert_string_equal(json_str(outcome, "signal"), "SIGSEGV");
    json_decref(md);
}

/* ctypes.CDLL("libc.so.6").malloc: a lookup through libc's own handle,
 * which starts past the preload.  It gets the hook all the same: the
 * failed 8.9 PiB request, then the write through its NULL, is one bundle,
 * "crashed (SIGSEGV) after an allocation of host memory failed" — not a
 * death with no line.  Its free through the same handle is the hook's too
 * (the block's bytes leave the count it entered). */
static void test_malloc_through_a_library_handle(void **state)
{
    (void)state;
    /* there the sanitizer's malloc is the allocator our hook forwards to:
     * glibc's, found through libc's handle, is another, left as found */
    skip_under_preload_sanitizer("the sanitizer's own malloc");
    char script[4096], bundle[1024];
    snprintf(script, sizeof script,
             "LD_PRELOAD=\"%s\" python3 -c '"
             "import ctypes\n"
             "libc = ctypes.CDLL(\"libc.so.6\")\n"
             "libc.malloc.restype = ctypes.c_void_p\n"
             "kept = libc.malloc(ctypes.c_size_t(64 << 20))\n"
             "libc.free(ctypes.c_void_p(kept))\n"
             "p = libc.malloc(ctypes.c_size_t(" HUGE "))\n"
             "print(\"got\", p, flush=True)\n"
             "ctypes.memmove(p or 0, b\"x\" * 8, 8)\n' 2>/dev/null; echo status $?",
             paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "got None\nstatus 139\n");
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "reason"), "SIGSEGV after failed allocation");
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), "malloc");
    assert_int_equal(json_int(fr, "size"), 10000000000000000ll);
    json_decref(md);
    expect_headline(bundle, "the process crashed (SIGSEGV) after an allocation of host memory "
                            "failed");
    /* the 64 MiB block: an alloc and a free, both seen */
    const char *argv[] = {inspect_path(), "events", bundle, NULL};
    run_capture(argv, out, sizeof out, err, sizeof err);
    if (!strstr(out, "alloc         malloc             cpu       64.0 MiB") ||
        !strstr(out, "free          free               cpu       64.0 MiB"))
        fail_msg("events:\n%s", out);
}

/* Each test's program is naive_malloc unless it says otherwise, whatever
 * a test before it (which may have failed half-way) left. */
/* A stop sent from outside (a launcher's SIGTERM to the ranks left when
 * one died) while an allocation's failure is still open: that failure's
 * bundle, killed by SIGTERM, with the status a SIGTERM gives; without a
 * failure, or with GMP_ON_CRASH=always and none, a stop writes nothing. */
static void test_stopped_while_a_failure_is_open(void **state)
{
    (void)state;
    if (huge_malloc_may_succeed())
        skip();
    char host_oom[1100], script[8192];
    program_path("host_oom", host_oom, sizeof host_oom);
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_OOM_CONFIRM_MS=20000; rm -f '%s/failed'; "
             "'%s' fail-then-wait '%s/failed' & p=$!; i=0; "
             "while [ ! -e '%s/failed' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; "
             "kill -TERM $p; wait $p; echo $?",
             paths.preload, paths.scratch, host_oom, paths.scratch, paths.scratch);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "143\n");
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *outcome = json_object_get(md, "outcome");
    if (strcmp(json_str(md, "kind"), "out_of_memory") || strcmp(json_str(md, "reason"), "ENOMEM") ||
        strcmp(json_str(json_object_get(md, "failed_request"), "api"), "malloc") ||
        strcmp(json_str(outcome, "state"), "killed") ||
        strcmp(json_str(outcome, "signal"), "SIGTERM"))
        fail_msg("kind %s, reason %s, outcome %s %s", json_str(md, "kind"), json_str(md, "reason"),
                 json_str(outcome, "state"), json_str(outcome, "signal"));
    json_decref(md);
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; sleep 5 & p=$!; sleep 0.3; kill -TERM $p; wait $p; "
             "echo $?; GMP_ON_CRASH=always sleep 5 & p=$!; sleep 0.3; kill -TERM $p; wait $p; "
             "echo $?",
             paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "143\n143\n");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

static int naive_program(void **state)
{
    (void)state;
    program_path("naive_malloc", program, sizeof program);
    return 0;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "crash");
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* the children dump no core */
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_segv_after_failed_malloc, naive_program),
        cmocka_unit_test_setup(test_plain_segv_writes_nothing, naive_program),
        cmocka_unit_test_setup(test_on_crash_always, naive_program),
        cmocka_unit_test_setup(test_on_crash_never, naive_program),
        cmocka_unit_test_setup(test_abort_after_failed_malloc, naive_program),
        cmocka_unit_test_setup(test_one_death_after_two_sizes, naive_program),
        cmocka_unit_test_setup(test_program_handler_still_runs, naive_program),
        cmocka_unit_test_setup(test_runtime_keeps_its_signals, naive_program),
        cmocka_unit_test_setup(test_malloc_through_a_library_handle, naive_program),
        cmocka_unit_test_setup(test_uncaught_bad_alloc, naive_program),
        cmocka_unit_test_setup(test_rust_allocation_failure, naive_program),
        cmocka_unit_test(test_rust_names_demangled),
        cmocka_unit_test_setup(test_program_alt_stack_too_small, naive_program),
        cmocka_unit_test_setup(test_held_by_is_what_was_live_at_the_failure, naive_program),
        cmocka_unit_test_setup(test_crash_names_its_own_thread_failure, naive_program),
        cmocka_unit_test(test_stopped_while_a_failure_is_open),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
