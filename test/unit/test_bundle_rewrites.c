/*
 * test_bundle_rewrites.c — a bundle rewritten after it was written: a
 * program's report of the failure patched in (exception, context and
 * custom metadata, nothing else), files a binding attaches, and the
 * bundle's kind, written first by its writer and decided again from the
 * same facts each time its outcome is learned, as readers decide it for a
 * bundle written before it had one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "recorder_fixtures.h"
#include "support.h"
#include "verdict.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A program's report of the failure a bundle was written for replaces the
 * exception, context and custom metadata, and nothing else, even when the
 * metadata it replaces holds keys named like the bundle's own. */
static void test_patch_program(void **state)
{
    (void)state;
    char dir[256], path[4096], md_path[4200], buf[64 * 1024];
    scratch_make(dir, sizeof dir, "patch");
    gmp_recorder *rec = make_recorder(dir, 100, 5);
    record_allocs(rec, 3);
    gmp_dump_request req = cuda_oom;
    req.metadata_json = "{\"failed_request\": {\"context\": \"}\\\"{\"}, \"exception_type\": [1, {}]}";
    assert_non_null(gmp_dump(rec, &req, path, sizeof path));
    snprintf(md_path, sizeof md_path, "%s/metadata.json", path);
    assert_int_equal(gmp_bundle_patch_program(path, "OutOfMemoryError", "torch.cuda",
                                              "CUDA out of memory. \"Tried\" 2 GiB", "train_loop",
                                              "{\"batch_size\": 64}", buf, sizeof buf),
                     0);
    json_t *md = json_load_file(md_path, 0, NULL);
    assert_non_null(md);
    assert_string_equal(json_string_value(json_object_get(md, "exception_type")),
                        "OutOfMemoryError");
    assert_string_equal(json_string_value(json_object_get(md, "exception_module")), "torch.cuda");
    assert_string_equal(json_string_value(json_object_get(md, "exception_message")),
                        "CUDA out of memory. \"Tried\" 2 GiB");
    assert_string_equal(json_string_value(json_object_get(md, "context")), "train_loop");
    json_t *custom = json_object_get(md, "custom_metadata");
    assert_int_equal(json_object_size(custom), 1);
    assert_int_equal(json_integer_value(json_object_get(custom, "batch_size")), 64);
    /* the bundle's own fields as they were */
    assert_string_equal(json_string_value(json_object_get(md, "reason")),
                        "cudaErrorMemoryAllocation");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(md, "failed_request"),
                                                        "size")),
                     2ll << 30);
    json_decref(md);
    /* exception only: context and metadata stay; bad metadata changes nothing */
    assert_int_equal(gmp_bundle_patch_exception(path, "MemoryError", "builtins", NULL, buf,
                                                sizeof buf),
                     0);
    assert_int_equal(gmp_bundle_patch_program(path, "X", "y", "z", "c", "[1]", buf, sizeof buf),
                     -1);
    md = json_load_file(md_path, 0, NULL);
    assert_non_null(md);
    assert_string_equal(json_string_value(json_object_get(md, "exception_type")), "MemoryError");
    assert_true(json_is_null(json_object_get(md, "exception_message")));
    assert_string_equal(json_string_value(json_object_get(md, "context")), "train_loop");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(md, "custom_metadata"),
                                                        "batch_size")),
                     64);
    json_decref(md);
    /* a file attached by a binding: listed, never over one the bundle has,
     * and only under a plain name */
    assert_int_equal(gmp_bundle_attach(path, "recorded_events.json", "[1]", 3), 0);
    assert_int_equal(gmp_bundle_attach(path, "recorded_events.json", "[2]", 3), -1);
    assert_int_equal(gmp_bundle_attach(path, "metadata.json", "{}", 2), -1);
    static const char *const bad[] = {"../escape.json", "a\"b.json", ".hidden", "", "x/y"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(gmp_bundle_attach(path, bad[i], "{}", 2), -1);
    json_t *man = bundle_file(path, "manifest.json");
    json_t *files = json_object_get(man, "files");
    int listed = 0;
    for (size_t i = 0; i < json_array_size(files); i++)
        listed += !strcmp(json_string_value(json_array_get(files, i)), "recorded_events.json");
    assert_int_equal(listed, 1);
    json_decref(man);
    char gone[300];
    snprintf(gone, sizeof gone, "%s/no_such_bundle", dir);
    assert_int_equal(gmp_bundle_patch_program(gone, "X", NULL, NULL, NULL, NULL, buf, sizeof buf),
                     -1);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

/* What a bundle records is decided once: written first in metadata.json
 * by its writer, decided again when its outcome is learned (a failure the
 * process went on from and exited 0 was survived; a later failing exit
 * makes it a death again, unless a pool's worker loop caught the failure:
 * survived however the process ends), never from a key of the program's
 * metadata. */
static void test_kind_decided_by_writer_and_patcher(void **state)
{
    (void)state;
    char dir[256], path[4096], md_path[4200], buf[64 * 1024], text[64 * 1024];
    scratch_make(dir, sizeof dir, "kind");
    static const struct {
        gmp_outcome_state state;
        int code;
        const char *kind, *caught_kind;
    } steps[] = {{GMP_OUTCOME_RUNNING, 0, "out_of_memory", "survived"},
                 {GMP_OUTCOME_EXITED, 0, "survived", "survived"},
                 {GMP_OUTCOME_EXITED, 1, "out_of_memory", "survived"},
                 {GMP_OUTCOME_KILLED, 15, "out_of_memory", "survived"}};
    for (size_t k = 0; k < 2 * (sizeof steps / sizeof *steps); k++) {
        size_t i = k % (sizeof steps / sizeof *steps);
        int caught = k >= sizeof steps / sizeof *steps;
        if (i == 0) {
            gmp_recorder *rec = make_recorder(dir, 100, 5);
            record_allocs(rec, 3);
            gmp_dump_request req = cuda_oom;
            req.metadata_json = "{\"kind\": \"survived\", \"outcome\": {\"state\": "
                                "\"exited\", \"exit_status\": 0}}";
            req.caught_by = caught ? "multiprocessing.pool.worker" : NULL;
            assert_non_null(gmp_dump(rec, &req, path, sizeof path));
            gmp_recorder_destroy(rec);
            snprintf(md_path, sizeof md_path, "%s/metadata.json", path);
        }
        const char *kind = caught ? steps[i].caught_kind : steps[i].kind;
        gmp_outcome o = {steps[i].state, steps[i].code};
        if (i)
            assert_int_equal(gmp_bundle_patch_outcome(path, &o, buf, sizeof buf), 0);
        FILE *f = fopen(md_path, "r");
        assert_non_null(f);
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        assert_memory_equal(text, "{\"kind\":", 8); /* first, for a reader of the head */
        json_t *md = json_loads(text, 0, NULL);
        assert_non_null(md);
        assert_string_equal(json_string_value(json_object_get(md, "kind")), kind);
        assert_int_equal(gmp_verdict_of_text(text), gmp_verdict_parse(kind));
        json_decref(md);
    }
    /* a bundle written before it had a kind: its facts decide, the same way */
    static const struct {
        const char *metadata;
        gmp_verdict kind;
    } old[] = {
        {"{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1},\"outcome\":{\"state\":"
         "\"exited\",\"exit_status\":0}}",
         GMP_VERDICT_SURVIVED},
        {"{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1},\"outcome\":{\"state\":"
         "\"exited\",\"exit_status\":1}}",
         GMP_VERDICT_OUT_OF_MEMORY},
        {"{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1},\"caught_by\":\"x\","
         "\"outcome\":{\"state\":\"killed\",\"signal\":\"SIGTERM\"}}",
         GMP_VERDICT_SURVIVED},
        {"{\"reason\":\"SIGSEGV after failed allocation\",\"caught_by\":\"x\"}",
         GMP_VERDICT_CRASH_AFTER_FAILED},
        {"{\"reason\":\"SIGKILL\",\"failed_request\":null}", GMP_VERDICT_KILLED_UNKNOWN},
        {"{\"reason\":\"SIGSEGV\",\"confirmed_by\":\"signal\"}", GMP_VERDICT_CRASH},
        {"{\"reason\":\"killed\",\"exception_type\":\"oom_killer\"}", GMP_VERDICT_OOM_KILLED},
        {"{\"reason\":\"killed\",\"evidence\":\"cgroup_oom_kill: oom_kill rose\"}",
         GMP_VERDICT_CGROUP_OOM_KILL},
        {"{\"reason\":\"memory_pressure\"}", GMP_VERDICT_PRESSURE},
        {"{\"custom_metadata\":{\"reason\":\"memory_pressure\"},\"reason\":\"ENOMEM\"}",
         GMP_VERDICT_OUT_OF_MEMORY},
    };
    for (size_t i = 0; i < sizeof old / sizeof *old; i++)
        if (gmp_verdict_of_text(old[i].metadata) != old[i].kind)
            fail_msg("%s: %s", old[i].metadata, gmp_verdict_name(gmp_verdict_of_text(old[i].metadata)));
    scratch_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patch_program),
        cmocka_unit_test(test_kind_decided_by_writer_and_patcher),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
