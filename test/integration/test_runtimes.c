/*
 * test_runtimes.c — deaths of runtimes that never ask malloc for their
 * heap.  LuaJIT, GHC, PHP, Guile and Mono map it themselves; the C
 * stand-ins here do what they do: grow a heap of their own from mmap
 * until RLIMIT_AS refuses (one bundle, its failed request that mmap, sited
 * at the program's line), and reserve a large range of address space then
 * settle for less, as V8 and the JVM do, or ask for huge pages then take
 * plain ones, as PostgreSQL does (no bundle: neither refusal is a failed
 * allocation).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <jansson.h>
#include <stdio.h>
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
        cmocka_unit_test(test_reservation_refused_is_no_failure),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
