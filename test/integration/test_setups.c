/*
 * test_setups.c — the preload in setups other than a plain glibc process:
 * disabled, with a dump directory it cannot make or garbage in its
 * variables (one line, the program runs on), an event ring that does not
 * fit under an address-space limit, and each allocator Debian ships
 * preloaded behind ours (the program's output unchanged, the bundle's
 * bytes in use what it held).  The plain process's cases are test_preload.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "preload_run.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static void test_disabled_and_unwritable(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s fail-twice", program);
    run_sh("GMP_ENABLED=0", cmd);
    assert_int_equal(exit_code(), 0);
    assert_string_equal(err, "");
    assert_int_equal(bundle_count(), 0);

    /* a dump directory that cannot be made: one line, the program runs on */
    run_sh("GMP_DUMP_DIR=/proc/gmp-no-such-dir", cmd);
    assert_int_equal(exit_code(), 0);
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "gpumemprof: cannot create dump directory"));

    /* garbage in the variables: one line each, the program runs on */
    run_sh("GMP_BUFFER_SIZE=lots GMP_OOM_POLICY=sometimes", cmd);
    assert_int_equal(exit_code(), 0);
    assert_non_null(strstr(err, "GMP_BUFFER_SIZE='lots'"));
    assert_non_null(strstr(err, "GMP_OOM_POLICY='sometimes'"));
    assert_int_equal(bundle_count(), 1);
}

/* Near an address-space limit the ring asked for may not fit: a shorter
 * one, said in one line, and the bundle still has its events. */
static void test_ring_that_does_not_fit(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ulimit -v 50000; %s fail-twice", program);
    run_sh("GMP_BUFFER_SIZE=1000000", cmd);
    assert_int_equal(exit_code(), 0);
    if (count_lines(err) != 2 ||
        !strstr(err, "gpumemprof: an event ring of 1000000 events did not fit (") ||
        !strstr(err, "); keeping the last 250000\n") || !strstr(err, "gpumemprof: OOM on host"))
        fail_msg("stderr: %s", err);
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
    json_t *ring = json_object_get(md, "ring");
    assert_int_equal(json_int(ring, "capacity"), 250000);
    assert_int_equal(json_int(ring, "recorded_total"), 2); /* the two failures */
    json_decref(md);
}

/* The file of a system library, or "" when it is not installed. */
static void system_library(const char *name, char *found, size_t cap)
{
    static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                       "/usr/lib64", "/usr/lib"};
    found[0] = '\0';
    for (size_t d = 0; d < sizeof dirs / sizeof *dirs && !found[0]; d++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dirs[d], name);
        if (access(p, R_OK) == 0)
            snprintf(found, cap, "%s", p);
    }
}

/* Any allocator behind ours keeps every program working, and a bundle's
 * bytes in use is what the program held, within 10%: gperftools' tcmalloc
 * and mimalloc export __libc_malloc as their own malloc (our glibc test was
 * fooled by it: SIGSEGV reading a chunk header that is not there), jemalloc
 * rounds large blocks up by up to a tenth, and an allocator with nothing
 * but malloc and free cannot be asked a block's size at all. */
static void test_allocators_behind_us(void **state)
{
    (void)state;
    static const char *const libs[] = {"", "libjemalloc.so.2", "libtcmalloc_minimal.so.4",
                                       "libmimalloc.so.2", "malloc-only double"};
    for (size_t l = 0; l < sizeof libs / sizeof *libs; l++) {
        char lib[1200] = "";
        if (l == 4)
            snprintf(lib, sizeof lib, "%s/test/doubles/libmalloc_only.so", paths.build);
        else if (l > 0)
            system_library(libs[l], lib, sizeof lib);
        if (l > 0 && access(lib, R_OK) != 0)
            fail_msg("%s is not installed (make test installs it)", libs[l]);
        char env[1400], cmd[4096], bare[sizeof out];
        snprintf(env, sizeof env, "LD_PRELOAD_AFTER='%s'", lib);

        /* the bare run: the allocator alone */
        snprintf(cmd, sizeof cmd, "LD_PRELOAD='%s' %s hold-fail 12", lib, program);
        status = run_script(&paths, cmd, out, sizeof out, err, sizeof err);
        if (exit_code() != 0 || strncmp(out, "held ", 5))
            fail_msg("bare %s: rc=%d out=%s err=%s", lib, exit_code(), out, err);
        snprintf(bare, sizeof bare, "%s", out);
        unsigned long long held = strtoull(out + 5, NULL, 10);

        snprintf(cmd, sizeof cmd, "%s hold-fail 12", program);
        run_sh(env, cmd);
        if (exit_code() != 0 || strcmp(out, bare))
            fail_msg("behind %s: rc=%d out=%s err=%s (bare: %s)", l ? lib : "glibc", exit_code(),
                     out, err, bare);
        assert_one_oom_line("host");
        json_t *meta = only_bundle_file(paths.dumps, "metadata.json", NULL, 0);
        json_t *failed = json_object_get(meta, "failed_request");
        /* the program's malloc, not the mmap an allocator made for it */
        if (strcmp(json_str(failed, "api"), "malloc"))
            fail_msg("behind %s the failed request is %s", l ? lib : "glibc",
                     json_str(failed, "api"));
        long long in_use = json_int(failed, "bytes_in_use");
        if (in_use < (long long)(held * 9 / 10) || in_use > (long long)(held * 11 / 10))
            fail_msg("behind %s the bundle says %lld bytes in use; the program held %llu",
                     l ? lib : "glibc", in_use, held);
        json_decref(meta);

        if (l == 4)
            continue; /* glibc's realloc on its blocks would crash python without us too */
        run_sh(env, "python3 -c 'import json; d={str(i): [i]*3 for i in range(200000)}; "
                    "print(len(json.loads(json.dumps(d))))'");
        if (exit_code() != 0 || strcmp(out, "200000\n"))
            fail_msg("python3 with %s behind us: rc=%d out=%s err=%s", lib, exit_code(), out,
                     err);
        /* small blocks only: nothing worth a ring, nothing on stderr */
        if (err[0])
            fail_msg("python3 with %s behind us wrote to stderr: %s", lib, err);
        assert_int_equal(count_prefixed(paths.rundir, "ring_"), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disabled_and_unwritable),
        cmocka_unit_test(test_allocators_behind_us),
        cmocka_unit_test(test_ring_that_does_not_fit),
    };
    return cmocka_run_group_tests_name("setups", tests, setup, preload_paths_teardown);
}
