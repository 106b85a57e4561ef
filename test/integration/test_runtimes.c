/*
 * test_runtimes.c — the out-of-memory deaths of language runtimes, as
 * their users meet them.  Each runtime Debian ships (LuaJIT, Lua, PHP,
 * Guile, SBCL, PyPy, Ruby, R, Erlang, Perl, Tcl, OCaml, Mono; GHC where
 * installed) runs a program of test/fixtures/runtimes/ that keeps memory
 * until the runtime's own limit or RLIMIT_AS stops it: the same exit
 * status as without the preload, one bundle, whose headline names the
 * runtime and what ran out, whose message quotes the runtime's words with
 * the size they state, and whose failure site is the script inside its
 * interpreter ("inside the Perl interpreter, running grow.pl"), the
 * program's own native function (OCaml) or, where no call failed, the
 * place the runtime's words name (PHP's "grow.php:4"), the same in triage
 * as in show;
 * where the heap that ran out is one the runtime maps itself (SBCL's
 * dynamic space, PHP's Zend heap, GHC's, Mono's, the Boehm collector's,
 * BEAM's carriers, LuaJIT's arena), show names no native block as what
 * held it.
 * A runtime that is not installed skips with a line.  Words a runtime
 * wrote are no death when the process goes on, nor when another program
 * prints them.
 * The C stand-ins do what the runtimes that map their heap do: grow a
 * heap of their own from mmap until RLIMIT_AS refuses (one bundle, its
 * failed request that mmap, sited at the program's line), and reserve a
 * large range of address space then settle for less, as V8 and the JVM do,
 * or ask for huge pages then take plain ones, as PostgreSQL does (no
 * bundle: neither refusal is a failed allocation).
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

/* host_oom MODE under `ulimit -v LIMIT_KB` with the preload: its exit code. */
static int run_limited(const char *mode, int limit_kb)
{
    char script[4096];
    snprintf(script, sizeof script, "ulimit -v %d; export LD_PRELOAD='%s'; exec %s/test/programs/host_oom %s",
             limit_kb, paths.preload, paths.build, mode);
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

/* A heap of its own from mmap, refused at the address-space limit: the
 * program's own words and status, and one bundle whose failed request is
 * the mmap, sited at the program's own function. */
static void test_mmap_heap_refused(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    assert_int_equal(run_limited("mmap-heap", 400000), 1);
    if (!strstr(err, "not enough memory\n") ||
        !strstr(err, "gpumemprof: OOM on host (mmap 32.0 MiB, ENOMEM); bundle: "))
        fail_msg("stderr: %s", err);
    char bundle[1024];
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    json_t *fr = json_object_get(md, "failed_request");
    assert_string_equal(json_str(fr, "api"), "mmap");
    assert_int_equal(json_int(fr, "size"), 32 << 20);
    assert_int_equal(json_int(fr, "code"), 12);
    json_decref(md);
    const char *shown = show_output(bundle);
    if (!strstr(shown, "\nFailed at:        map_heap_chunk") ||
        !strstr(shown, "a host limit was reached (the address-space limit)"))
        fail_msg("show says:\n%s", shown);
}

/* A malloc that fails once RLIMIT_AS leaves no address space at all, the
 * process's first stack to walk: the bundle is sited at the program's
 * function.  The walk's lookups map and allocate nothing; through libgcc
 * (a dlopen, refused here) the stack was empty and show named no site. */
static void test_stack_when_address_space_is_spent(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    assert_int_equal(run_limited("spent", 200000), 1);
    if (!strstr(err, "gpumemprof: OOM on host (malloc 64.0 MiB, ENOMEM); bundle: "))
        fail_msg("stderr: %s", err);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    /* the function's name, not GCC's copy of it ("ask_when_spent.constprop.0") */
    if (!strstr(shown, "\nFailed at:        ask_when_spent ("))
        fail_msg("show says:\n%s", shown);
}

/* Address space reserved and refused, then less reserved; huge pages
 * refused, then plain ones taken: the program goes on as it would, and
 * nothing is written. */
static void test_reservation_refused_is_no_failure(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    assert_int_equal(run_limited("reserve-less", 400000), 0);
    assert_string_equal(out, "refused then reserved\n");
    assert_string_equal(err, "");
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

/* A runtime's death, as a test: what it needs, how it runs, what show says. */
typedef struct runtime_case {
    const char *needs;    /* commands on PATH, space-separated */
    const char *build;    /* shell run first in the work directory (a compiler), or NULL */
    const char *run;      /* the command, in the work directory; $F is the fixtures */
    int limit_kb;         /* `ulimit -v` (0: none: the runtime's own limit) */
    const char *headline; /* show's "What happened:" line begins so */
    const char *site;     /* show's "Failed at:" begins so (NULL: no call failed) */
    const char *said;     /* in show's "Message:" line: the runtime's words */
    const char *evidence; /* in show's causes, or NULL */
    int own_heap;         /* its heap is its own (mapped, not malloc's): show names no holder */
} runtime_case;

static const char *fixtures(void)
{
    static char dir[1100];
    const char *f = getenv("GMP_TEST_FIXTURES");
    snprintf(dir, sizeof dir, "%s/runtimes", f ? f : "test/fixtures");
    return dir;
}

/* Every command in needs on PATH; else the test skips with a line. */
static void need_commands(const char *needs)
{
    char script[512];
    snprintf(script, sizeof script, "for c in %s; do command -v $c >/dev/null || echo $c; done",
             needs);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    if (out[0]) {
        out[strcspn(out, "\n")] = '\0';
        /* mk/ensure-deps.sh installs every runtime here but GHC (775 MB) */
        print_message("[     SKIP ] %s is not installed%s\n", out,
                      strcmp(out, "ghc") ? " (mk/ensure-deps.sh installs it)"
                                         : " (mk/ensure-deps.sh leaves GHC out: 775 MB)");
        skip();
    }
}

/* The case's command in the work directory, with the preload or not: its
 * exit code. */
static int run_case(const runtime_case *c, const char *work, int preloaded)
{
    char limit[64] = "", preload[2600] = "", script[8192];
    if (c->limit_kb)
        snprintf(limit, sizeof limit, "ulimit -v %d && ", c->limit_kb);
    if (preloaded)
        snprintf(preload, sizeof preload, "export LD_PRELOAD='%s' && ", paths.preload);
    snprintf(script, sizeof script, "cd '%s' && export F='%s' && %s%sexec timeout 120 %s", work,
             fixtures(), limit, preload, c->run);
    return exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
}

static void runtime_death(const runtime_case *c)
{
    need_commands(c->needs);
    /* ASan's runtime refuses PHP's RTLD_DEEPBIND extensions and fails to
     * unmap in SBCL's and Mono's heaps: their own quarrel, not the
     * preload's, which the pass under UBSan alone runs them against */
    skip_under_preload_sanitizer("a language runtime under ASan's or TSan's own runtime");
    char work[600], script[4096];
    snprintf(work, sizeof work, "%s/work", paths.scratch);
    snprintf(script, sizeof script, "rm -rf '%s' && mkdir -p '%s' && cd '%s' && export F='%s'%s%s",
             work, work, work, fixtures(), c->build ? " && " : "", c->build ? c->build : "");
    if (exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("building it: %s%s", out, err);
    int bare = run_case(c, work, 0);
    int preloaded = run_case(c, work, 1);
    if (bare != preloaded || bare == 0 || bare == 124)
        fail_msg("exit %d bare, %d preloaded; stderr: %s", bare, preloaded, err);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    char want[600];
    snprintf(want, sizeof want, "\nWhat happened:    %s", c->headline);
    int ok = strstr(shown, want) != NULL;
    snprintf(want, sizeof want, "\nFailed at:        %s", c->site ? c->site : "");
    ok &= c->site ? strstr(shown, want) != NULL : strstr(shown, "\nFailed at:") == NULL;
    const char *message = strstr(shown, "\nMessage:");
    const char *said = message ? strstr(message, c->said) : NULL;
    ok &= said && said < strchr(message + 1, '\n');
    ok &= !c->evidence || strstr(shown, c->evidence);
    /* the native blocks beside a heap the runtime manages did not hold it */
    ok &= !c->own_heap || !strstr(shown, "\nHeld by:");
    if (!ok)
        fail_msg("show says:\n%s\nstderr: %s", shown, err);
    if (c->site) { /* triage names the site as show does */
        const char *argv[] = {inspect_path(), "triage", paths.dumps, NULL};
        static char triaged[1 << 14], terr[4096];
        run_capture(argv, triaged, sizeof triaged, terr, sizeof terr);
        snprintf(want, sizeof want, " at %s", c->site);
        if (!strstr(triaged, want))
            fail_msg("triage says:\n%s", triaged);
    }
}

/* each case a test of its own name: test_luajit, test_php_limit... */
#define RUNTIME_CASE(name, ...)                                                                    \
    static void test_##name(void **state)                                                         \
    {                                                                                              \
        static const runtime_case c = {__VA_ARGS__};                                              \
        (void)state;                                                                               \
        runtime_death(&c);                                                                         \
    }
RUNTIME_CASE(luajit, "luajit", NULL, "luajit $F/grow.lua", 1000000,
             "LuaJIT ran out of memory: the system gave it no more memory",
             "inside LuaJIT, running grow.lua", "luajit: not enough memory", NULL, 1)
RUNTIME_CASE(lua, "lua5.4", NULL, "lua5.4 $F/grow.lua", 1000000,
             "Lua ran out of memory: the system gave it no more memory",
             "inside the Lua interpreter, running grow.lua", "lua5.4: not enough memory", NULL, 0)
RUNTIME_CASE(php_limit, "php", NULL, "php -d memory_limit=256M -d display_errors=stderr -d log_errors=0 $F/grow.php", 0,
             "PHP ran out of memory: its memory_limit was reached", "grow.php:4",
             "Allowed memory size of 268435456 bytes exhausted (tried to allocate ",
             "the command line sets memory_limit=256M", 1)
RUNTIME_CASE(php_mmap, "php", NULL, "php -d memory_limit=-1 -d display_errors=stderr -d log_errors=0 $F/grow.php",
             1000000,
             "PHP ran out of memory: the system gave it no more memory",
             "inside the PHP interpreter, running grow.php",
             "mmap() failed: [12] Cannot allocate memory", NULL, 1)
RUNTIME_CASE(ghc, "ghc", "ghc -v0 -O0 -rtsopts -outputdir . -o grow_hs $F/grow.hs",
             "./grow_hs +RTS -M256m", 0,
             "the GHC runtime ran out of memory: its heap reached the size +RTS -M sets", NULL,
             "Heap exhausted; Current maximum heap size is 268435456 bytes",
             "the command line sets -M256m", 1)
RUNTIME_CASE(guile_limit, "guile", NULL,
             "env GC_MAXIMUM_HEAP_SIZE=300000000 guile --no-auto-compile $F/grow.scm", 0,
             "the Boehm garbage collector ran out of memory", NULL,
             "GC Warning: Out of Memory! Heap size: ", "GC_MAXIMUM_HEAP_SIZE=300000000 sets it",
             1)
RUNTIME_CASE(guile, "guile", NULL, "guile --no-auto-compile $F/grow.scm", 1000000,
             "the Boehm garbage collector ran out of memory",
             "inside the Guile interpreter, running grow.scm",
             "GC Warning: Out of Memory! Heap size: ", NULL, 1)
RUNTIME_CASE(sbcl, "sbcl", NULL,
             "sbcl --dynamic-space-size 256MB --script $F/grow.lisp",
             0, "SBCL ran out of memory: its dynamic space was full", NULL,
             "Heap exhausted during allocation: ",
             "the command line sets --dynamic-space-size 256MB", 1)
RUNTIME_CASE(mono, "mcs mono", "mcs -out:Grow.exe $F/Grow.cs",
             "env MONO_GC_PARAMS=max-heap-size=256m mono Grow.exe", 0,
             "the .NET runtime (Mono) ran out of memory: its managed heap could not grow", NULL,
             "System.OutOfMemoryException: ", "MONO_GC_PARAMS sets max-heap-size=256m", 1)
RUNTIME_CASE(pypy, "pypy3", NULL, "env PYPY_GC_MAX=256MB pypy3 $F/grow.py", 0,
             "PyPy ran out of memory", "grow.py:4 in <module>", "MemoryError",
             "PYPY_GC_MAX=256MB sets it", 0)
RUNTIME_CASE(ruby, "ruby", NULL, "ruby $F/grow.rb", 1000000,
             "Ruby ran out of memory: the system gave it no more memory",
             "inside the Ruby interpreter, running grow.rb",
             "failed to allocate memory (NoMemoryError)", NULL, 0)
RUNTIME_CASE(r, "Rscript", NULL, "Rscript $F/grow.R", 1500000,
             "R ran out of memory: the system gave it no more memory",
             "inside the R interpreter, running grow.R", "cannot allocate vector of size 7.6 Mb",
             NULL, 0)
RUNTIME_CASE(beam, "erl erlc", "erlc $F/grow.erl", "erl -noshell -s grow main", 1500000,
             "the Erlang VM (BEAM) ran out of memory: the system gave it no more memory",
             "inside the Erlang VM (BEAM), running grow",
             "binary_alloc: Cannot allocate 8000000 bytes of memory", NULL, 1)
RUNTIME_CASE(perl, "perl", NULL, "perl $F/grow.pl", 1000000,
             "Perl ran out of memory: the system gave it no more memory",
             "inside the Perl interpreter, running grow.pl", "Out of memory!", NULL, 0)
RUNTIME_CASE(tcl, "tclsh", NULL, "tclsh $F/grow.tcl", 1000000,
             "Tcl ran out of memory: the system gave it no more memory",
             "inside the Tcl interpreter, running grow.tcl",
             "out of memory allocating 8000001 bytes", NULL, 0)
RUNTIME_CASE(ocaml, "ocamlopt", "cp $F/grow.ml . && ocamlopt -g grow.ml -o grow_ml",
             "./grow_ml", 1000000, "OCaml ran out of memory: the system gave it no more memory",
             "Grow.grow (grow.ml:2)", "Fatal error: exception Out_of_memory", NULL, 0)
#undef RUNTIME_CASE

/* PyPy's MemoryError as a torchrun rank's: triage, which opens such a
 * bundle's manifest alone, names PyPy's heap as show does, by the
 * manifest's program; and for a bundle written before the manifest named
 * it, by environment.json's exe, read for that. */
static void test_pypy_rank_in_triage(void **state)
{
    (void)state;
    static const runtime_case c = {
        "pypy3", NULL,
        "env PYPY_GC_MAX=256MB RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=pp "
        "TORCHELASTIC_RESTART_COUNT=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 pypy3 $F/grow.py",
        0, NULL, NULL, NULL, NULL, 0};
    need_commands(c.needs);
    skip_under_preload_sanitizer("a language runtime under ASan's or TSan's own runtime");
    char work[600], script[4096];
    snprintf(work, sizeof work, "%s/work", paths.scratch);
    snprintf(script, sizeof script, "rm -rf '%s' && mkdir -p '%s'", work, work);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(run_case(&c, work, 1), 1);
    char bundle[1024];
    json_t *manifest = only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle);
    const char *program = json_str(manifest, "program");
    if (strncmp(program, "pypy3", 5))
        fail_msg("the manifest's program: %s", program);
    json_decref(manifest);
    static const char *const want = "rank 1 ran out of PyPy's garbage-collected heap at ";
    const char *argv[] = {inspect_path(), "triage", paths.dumps, NULL};
    static char triaged[1 << 14], terr[4096];
    run_capture(argv, triaged, sizeof triaged, terr, sizeof terr);
    if (!strstr(triaged, want))
        fail_msg("triage says:\n%s", triaged);
    /* the same bundle as an older writer left it, no program in its
     * manifest (run_script would empty the dump directory) */
    snprintf(script, sizeof script,
             "sed -i 's/\"program\":\"[^\"]*\",//' '%s/manifest.json' && "
             "! grep -q program '%s/manifest.json'",
             bundle, bundle);
    const char *strip[] = {"/bin/sh", "-c", script, NULL};
    if (exit_code_of(run_capture(strip, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("taking program out: %s", err);
    run_capture(argv, triaged, sizeof triaged, terr, sizeof terr);
    if (!strstr(triaged, want))
        fail_msg("triage of the older bundle says:\n%s", triaged);
}

/* A runtime's words are its death only when the death follows, and only
 * in its own mouth: SBCL that catches its heap's exhaustion and exits 0
 * wrote them and went on; Perl printing GHC's and PHP's, then exiting with
 * their statuses, quotes them.  No bundle. */
static void test_words_without_their_death(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("SBCL under ASan's or TSan's own runtime");
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s'; cd '%s'; "
             "perl -e 'print STDERR \"grow_hs: Heap exhausted;\\n\"; exit 251'; echo $?; "
             "perl -e 'print STDERR \"PHP Fatal error:  Allowed memory size of 268435456 bytes "
             "exhausted (tried to allocate 8003584 bytes)\\n\"; exit 255'; echo $?; "
             "if command -v sbcl >/dev/null; then sbcl --dynamic-space-size 256MB "
             "--script '%s/caught.lisp'; echo $?; "
             "else echo caught; echo 0; fi",
             paths.preload, paths.scratch, fixtures());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "251\n255\ncaught\n0\n");
    if (count_prefixed(paths.dumps, "oom_dump_") != 0)
        fail_msg("bundles written; stderr: %s", err);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "runtimes");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mmap_heap_refused),
        cmocka_unit_test(test_stack_when_address_space_is_spent),
        cmocka_unit_test(test_reservation_refused_is_no_failure),
        cmocka_unit_test(test_luajit),
        cmocka_unit_test(test_lua),
        cmocka_unit_test(test_php_limit),
        cmocka_unit_test(test_php_mmap),
        cmocka_unit_test(test_ghc),
        cmocka_unit_test(test_guile_limit),
        cmocka_unit_test(test_guile),
        cmocka_unit_test(test_sbcl),
        cmocka_unit_test(test_mono),
        cmocka_unit_test(test_pypy),
        cmocka_unit_test(test_pypy_rank_in_triage),
        cmocka_unit_test(test_ruby),
        cmocka_unit_test(test_r),
        cmocka_unit_test(test_beam),
        cmocka_unit_test(test_perl),
        cmocka_unit_test(test_tcl),
        cmocka_unit_test(test_ocaml),
        cmocka_unit_test(test_words_without_their_death),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
