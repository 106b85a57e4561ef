/*
 * test_retention.c — the dump directory's retention: the count cap and the
 * size cap remove oldest first, the newest bundle survives even alone over
 * the cap, foreign files and symlinks (and what they point to) are never
 * touched, two processes writing and pruning at once end at exactly
 * max_dumps valid bundles, and dead writers' temporaries are reaped, and
 * gmp-run's notes of a run's ranks with the last bundle of their runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "dump_request.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A hand-made bundle directory with one payload file of `bytes`, and the
 * manifest that names it (without one it is not a bundle to retention). */
static void fake_bundle(const char *dir, const char *name, size_t bytes)
{
    char path[1024], json[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    snprintf(json, sizeof json, "{\"schema_version\":1,\"bundle_name\":\"%s\"}", name);
    write_file(path, json, strlen(json));
    snprintf(path, sizeof path, "%s/%s/events.json", dir, name);
    char *data = calloc(1, bytes ? bytes : 1);
    write_file(path, data, bytes);
    free(data);
}

static int exists(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return lstat(path, &st) == 0;
}

static const char *const names[] = {
    "oom_dump_20260101T000000Z_10_cuda_1", "oom_dump_20260101T000001Z_10_cuda_2",
    "oom_dump_20260101T000002Z_11_cpu_1", "oom_dump_20260101T000003Z_12_rocm_1",
    "oom_dump_20260101T000004Z_13_cuda_1", "oom_dump_20260101T000005Z_14_cuda_1",
};

static void test_count_cap_removes_oldest(void **state)
{
    (void)state;
    char dir[256];
    scratch_make(dir, sizeof dir, "count");
    /* created out of name order: age comes from the name's timestamp */
    for (int i = 5; i >= 0; i--)
        fake_bundle(dir, names[i], 100);
    assert_int_equal(gmp_retention_apply(dir, 3, 256, names[5]), 3);
    for (int i = 0; i < 6; i++)
        assert_int_equal(exists(dir, names[i]), i >= 3);
    scratch_remove(dir);
}

/* gmp-run's notes of a run's ranks go with the last bundle older than
 * them; a newer one, a symlink and a file of another shape stay. */
static void test_run_notes_go_with_their_bundles(void **state)
{
    (void)state;
    char dir[256], path[1024];
    scratch_make(dir, sizeof dir, "run_ends");
    for (int i = 0; i < 6; i++)
        fake_bundle(dir, names[i], 100);
    /* 2026-01-01T00:00:00Z is 1767225600 s */
    static const char *const notes[] = {
        "run_ends_1767225601000000500_7.txt", /* after names[1]: its run's bundles go */
        "run_ends_1767225604000000000_8.txt", /* after names[3], which stays */
        "run_ends_1767225601000000500_9.link", "run_ends_x_1.txt",
    };
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, notes[i]);
        if (i == 2)
            assert_int_equal(symlink("/etc/hostname", path), 0);
        else
            write_file(path, "1 0 - 9 1 run\n", 14);
    }
    assert_int_equal(gmp_retention_apply(dir, 3, 256, names[5]), 3);
    assert_false(exists(dir, notes[0]));
    for (int i = 1; i < 4; i++)
        assert_true(exists(dir, notes[i]));
    /* nothing pruned, nothing of the notes looked at */
    snprintf(path, sizeof path, "%s/%s", dir, notes[0]);
    write_file(path, "1 0 - 9 1 run\n", 14);
    assert_int_equal(gmp_retention_apply(dir, 3, 256, names[5]), 0);
    assert_true(exists(dir, notes[0]));
    scratch_remove(dir);
}

/* A manifest with this reason in a hand-made bundle. */
static void give_reason(const char *dir, const char *name, const char *reason)
{
    char path[1024], json[512];
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    snprintf(json, sizeof json, "{\"schema_version\":1,\"bundle_name\":\"%s\",\"reason\":\"%s\"}",
             name, reason);
    write_file(path, json, strlen(json));
}

/* A bundle a stderr message alone made says less than one a failed
 * allocation made: it never evicts one, and goes first. */
static void test_message_bundles_never_evict_failures(void **state)
{
    (void)state;
    char dir[256];
    scratch_make(dir, sizeof dir, "message");
    for (int i = 0; i < 3; i++) {
        fake_bundle(dir, names[i], 100);
        give_reason(dir, names[i], i == 2 ? "message_pattern:out of memory" : "ENOMEM");
    }
    /* two failures, then a message over a cap of 2: nothing goes */
    assert_int_equal(gmp_retention_apply(dir, 2, 256, names[2]), 0);
    for (int i = 0; i < 3; i++)
        assert_true(exists(dir, names[i]));
    /* a second message: the older message goes, never a failure */
    fake_bundle(dir, names[3], 100);
    give_reason(dir, names[3], "message_pattern:cuda out of memory");
    assert_int_equal(gmp_retention_apply(dir, 2, 256, names[3]), 1);
    assert_false(exists(dir, names[2]));
    assert_true(exists(dir, names[0]) && exists(dir, names[1]) && exists(dir, names[3]));
    /* a failure: the message goes first, then the oldest failure */
    fake_bundle(dir, names[4], 100);
    give_reason(dir, names[4], "cudaErrorMemoryAllocation");
    assert_int_equal(gmp_retention_apply(dir, 2, 256, names[4]), 2);
    assert_false(exists(dir, names[3]));
    assert_false(exists(dir, names[0]));
    assert_true(exists(dir, names[1]) && exists(dir, names[4]));
    scratch_remove(dir);
}

static void test_size_cap_and_newest_kept(void **state)
{
    (void)state;
    char dir[256];
    scratch_make(dir, sizeof dir, "size");
    for (int i = 0; i < 5; i++)
        fake_bundle(dir, names[i], 700 * 1024);
    /* 5 x 700 KiB against a 2 MiB cap: the three oldest go */
    assert_int_equal(gmp_retention_apply(dir, 100, 2, names[4]), 3);
    assert_false(exists(dir, names[0]));
    assert_false(exists(dir, names[2]));
    assert_true(exists(dir, names[3]));
    assert_true(exists(dir, names[4]));

    /* a new bundle larger than the whole cap: everything else goes, it stays */
    fake_bundle(dir, names[5], 3 << 20);
    assert_int_equal(gmp_retention_apply(dir, 100, 2, names[5]), 2);
    assert_true(exists(dir, names[5]));
    assert_int_equal(count_prefixed(dir, "oom_dump_"), 1);
    scratch_remove(dir);
}

/* Same second, same mtime granularity: the manifest's nanoseconds decide. */
static void test_order_within_one_second(void **state)
{
    (void)state;
    char dir[256], path[1024];
    scratch_make(dir, sizeof dir, "order");
    static const char *const same[] = {"oom_dump_20260101T000000Z_9_cuda_1",
                                       "oom_dump_20260101T000000Z_10_cuda_1",
                                       "oom_dump_20260101T000000Z_8_cuda_1"};
    for (int i = 0; i < 3; i++) {
        fake_bundle(dir, same[i], 10);
        char man[256];
        int len = snprintf(man, sizeof man, "{\"bundle_name\":\"%s\",\"created_at_ns\":%d}",
                           same[i], 1000 + i);
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, same[i]);
        write_file(path, man, (size_t)len);
    }
    assert_int_equal(gmp_retention_apply(dir, 1, 256, NULL), 2);
    assert_true(exists(dir, same[2]));
    scratch_remove(dir);
}

static void test_foreign_files_and_symlinks_untouched(void **state)
{
    (void)state;
    char dir[256], outside[256], path[1024];
    scratch_make(dir, sizeof dir, "foreign");
    scratch_make(outside, sizeof outside, "outside");
    fake_bundle(outside, "precious", 10); /* a directory the symlink points to */

    fake_bundle(dir, names[1], 10);
    fake_bundle(dir, names[2], 10);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    write_file(path, "mine", 4);
    snprintf(path, sizeof path, "%s/oom_dump_20200101T000000Z_1_cpu_1", dir);
    write_file(path, "a file, not a bundle", 20);
    snprintf(path, sizeof path, "%s/oom_dump_20190101T000000Z_1_cpu_1", dir);
    char target[1024];
    snprintf(target, sizeof target, "%s/precious", outside);
    assert_int_equal(symlink(target, path), 0);
    fake_bundle(dir, "other_tool_output", 10);

    assert_int_equal(gmp_retention_apply(dir, 1, 256, names[2]), 1);
    assert_false(exists(dir, names[1]));
    assert_true(exists(dir, names[2]));
    assert_true(exists(dir, "notes.txt"));
    assert_true(exists(dir, "oom_dump_20200101T000000Z_1_cpu_1"));
    assert_true(exists(dir, "oom_dump_20190101T000000Z_1_cpu_1"));
    assert_true(exists(dir, "other_tool_output"));
    assert_true(exists(outside, "precious"));
    assert_true(exists(outside, "precious/events.json"));
    scratch_remove(dir);
    scratch_remove(outside);
}

static void test_stale_temporaries_reaped(void **state)
{
    (void)state;
    char dir[256], path[1024];
    scratch_make(dir, sizeof dir, "stale");
    /* pid 2^22+1 is above the default pid_max: no such process */
    const char *dead = ".tmp_oom_dump_20260101T000000Z_4194305_cuda_1";
    char live[128];
    snprintf(live, sizeof live, ".tmp_oom_dump_20260101T000000Z_%d_cuda_1", getpid());
    fake_bundle(dir, dead, 10);
    fake_bundle(dir, live, 10);
    struct timespec old[2] = {{1000, 0}, {1000, 0}};
    snprintf(path, sizeof path, "%s/%s", dir, dead);
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
    snprintf(path, sizeof path, "%s/%s", dir, live);
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
    gmp_retention_apply(dir, 5, 256, NULL);
    assert_false(exists(dir, dead));
    assert_true(exists(dir, live)); /* its writer may still be at work */
    scratch_remove(dir);
}

static void writer_process(const char *dir, int bundles)
{
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/dumps", dir);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", dir);
    cfg.max_dumps = 5;
    cfg.buffer_size = 64;
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CPU, .device = -1,
                    .api = GMP_API_MALLOC, .size = 4096};
    gmp_dump_request req = {.reason = "ENOMEM", .backend = GMP_BACKEND_CPU};
    char path[4096];
    for (int i = 0; i < bundles; i++) {
        gmp_record(rec, &ev);
        if (!gmp_dump(rec, &req, path, sizeof path))
            _exit(3);
    }
    gmp_recorder_destroy(rec);
    _exit(0);
}

static void test_two_processes_pruning_at_once(void **state)
{
    (void)state;
    char dir[256], dumps[512];
    scratch_make(dir, sizeof dir, "race");
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            writer_process(dir, 30);
    }
    for (int i = 0; i < 2; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    assert_int_equal(count_prefixed(dumps, "oom_dump_"), 5);
    DIR *d = opendir(dumps);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "oom_dump_", 9))
            continue;
        char path[4096], out[4096], err[4096];
        snprintf(path, sizeof path, "%s/%s", dumps, de->d_name);
        const char *argv[] = {inspect_path(), "validate", path, NULL};
        if (run_capture(argv, out, sizeof out, err, sizeof err) != 0)
            fail_msg("survivor does not validate: %s", out);
    }
    closedir(d);
    scratch_remove(dir);
}

/* A manifest naming a run and whether it was that run's first bundle. */
static void give_run(const char *dir, const char *name, const char *run, int first)
{
    char path[1024], json[700];
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    snprintf(json, sizeof json,
             "{\"schema_version\":2,\"bundle_name\":\"%s\",\"reason\":\"ENOMEM\","
             "\"run\":\"%s\",\"run_first\":%s}",
             name, run, first ? "true" : "false");
    write_file(path, json, strlen(json));
}

/* Every rank of a run ran out, the first the root cause: over the cap, the
 * ranks that followed it go before it, oldest first; with none of them
 * left, the oldest goes as ever. */
static void test_a_run_keeps_its_first(void **state)
{
    (void)state;
    char dir[256];
    scratch_make(dir, sizeof dir, "runs");
    for (int i = 0; i < 6; i++)
        fake_bundle(dir, names[i], 100);
    give_run(dir, names[0], "torchrun|a|0", 1);
    give_run(dir, names[1], "torchrun|a|0", 0);
    give_run(dir, names[2], "torchrun|a|0", 0);
    /* names[3]: no run */
    give_run(dir, names[4], "torchrun|b|0", 1);
    give_run(dir, names[5], "torchrun|b|0", 0);
    /* run a's first outlives the two newer bundles of its run */
    assert_int_equal(gmp_retention_apply(dir, 4, 256, names[5]), 2);
    static const int kept[] = {1, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++)
        if (exists(dir, names[i]) != kept[i])
            fail_msg("%s: %s", names[i], kept[i] ? "removed" : "kept");
    /* no follower left but the one just written: the oldest goes, as ever */
    assert_int_equal(gmp_retention_apply(dir, 3, 256, names[5]), 1);
    assert_false(exists(dir, names[0]));
    assert_true(exists(dir, names[3]) && exists(dir, names[4]) && exists(dir, names[5]));
    scratch_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_cap_removes_oldest),
        cmocka_unit_test(test_run_notes_go_with_their_bundles),
        cmocka_unit_test(test_a_run_keeps_its_first),
        cmocka_unit_test(test_size_cap_and_newest_kept),
        cmocka_unit_test(test_message_bundles_never_evict_failures),
        cmocka_unit_test(test_order_within_one_second),
        cmocka_unit_test(test_foreign_files_and_symlinks_untouched),
        cmocka_unit_test(test_stale_temporaries_reaped),
        cmocka_unit_test(test_two_processes_pruning_at_once),
    };
    return cmocka_run_group_tests_name("retention", tests, NULL, NULL);
}
