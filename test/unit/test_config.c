/*
 * test_config.c — configuration from GMP_* variables: documented defaults,
 * good values taken, and each bad value (huge, negative, non-numeric, 1 MiB
 * long, invalid JSON) reported in exactly one short stderr line naming the
 * variable and the value used instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "recorder.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {"GMP_ENABLED", "GMP_DUMP_DIR", "GMP_RUN_DIR",
                                   "GMP_BUFFER_SIZE", "GMP_MAX_DUMPS", "GMP_MAX_TOTAL_MB",
                                   "GMP_CONTEXT", "GMP_METADATA", "GMP_CUDA_MODE",
                                   "GMP_ON_CRASH", "GMP_WATCHDOG", "GMP_WATCHDOG_MIN_MB",
                                   "GMP_PRESSURE_PCT", "GMP_STACKS"};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    return 0;
}

static void test_defaults(void **state)
{
    (void)state;
    gmp_config c;
    char err[256];
    stderr_capture_begin();
    assert_int_equal(gmp_config_from_env(&c), 0);
    stderr_capture_end(err, sizeof err);
    assert_string_equal(err, "");
    assert_int_equal(c.enabled, 1);
    assert_string_equal(c.dump_dir, "./oom_dumps");
    assert_int_equal(c.buffer_size, 10000);
    assert_int_equal(c.max_dumps, 5);
    assert_int_equal(c.max_total_mb, 256);
    assert_string_equal(c.context, "");
    assert_string_equal(c.metadata_json, "{}");
    assert_int_equal(c.cuda_mode, GMP_CUDA_MODE_AUTO);
    assert_int_equal(c.on_crash, GMP_ON_CRASH_AFTER_FAILURE);
    assert_int_equal(c.watchdog, 1);
    assert_int_equal(c.watchdog_min_mb, 256);
    assert_int_equal(c.pressure_pct, 90);
}

static void test_good_values(void **state)
{
    (void)state;
    setenv("GMP_ENABLED", "false", 1);
    setenv("GMP_DUMP_DIR", "/var/tmp/dumps", 1);
    setenv("GMP_BUFFER_SIZE", " 5000 ", 1);
    setenv("GMP_MAX_DUMPS", "10", 1);
    setenv("GMP_MAX_TOTAL_MB", "1024", 1);
    setenv("GMP_CONTEXT", "training", 1);
    setenv("GMP_METADATA", "{\"batch_size\": 32, \"model\": \"resnet50\"}", 1);
    setenv("GMP_CUDA_MODE", "cupti", 1);
    setenv("GMP_ON_CRASH", "never", 1);
    setenv("GMP_WATCHDOG", "off", 1);
    setenv("GMP_WATCHDOG_MIN_MB", "1024", 1);
    setenv("GMP_PRESSURE_PCT", "75", 1);
    gmp_config c;
    assert_int_equal(gmp_config_from_env(&c), 0);
    assert_int_equal(c.cuda_mode, GMP_CUDA_MODE_CUPTI);
    assert_int_equal(c.on_crash, GMP_ON_CRASH_NEVER);
    assert_int_equal(c.watchdog, 0);
    assert_int_equal(c.watchdog_min_mb, 1024);
    assert_int_equal(c.pressure_pct, 75);
    assert_int_equal(c.enabled, 0);
    assert_string_equal(c.dump_dir, "/var/tmp/dumps");
    assert_int_equal(c.buffer_size, 5000);
    assert_int_equal(c.max_dumps, 10);
    assert_int_equal(c.max_total_mb, 1024);
    assert_string_equal(c.context, "training");
    assert_string_equal(c.metadata_json, "{\"batch_size\": 32, \"model\": \"resnet50\"}");
}

static void expect_one_line(const char *var, const char *value, const char *used)
{
    clear_env(NULL);
    setenv(var, value, 1);
    gmp_config c;
    char err[4096];
    stderr_capture_begin();
    int bad = gmp_config_from_env(&c);
    stderr_capture_end(err, sizeof err);
    if (bad != 1 || count_lines(err) != 1 || !strstr(err, var) || !strstr(err, used) ||
        strlen(err) > 300 || strncmp(err, "gpumemprof: ", 12) != 0)
        fail_msg("%s=%.40s: bad=%d stderr=%s", var, value, bad, err);
}

static void test_bad_values_one_line_each(void **state)
{
    (void)state;
    expect_one_line("GMP_BUFFER_SIZE", "abc", "using 10000");
    expect_one_line("GMP_BUFFER_SIZE", "-5", "using 10000");
    expect_one_line("GMP_BUFFER_SIZE", "99999999999999999999999", "using 10000");
    expect_one_line("GMP_BUFFER_SIZE", "12abc", "using 10000");
    expect_one_line("GMP_BUFFER_SIZE", "", "using 10000");
    expect_one_line("GMP_MAX_DUMPS", "0", "using 5");
    expect_one_line("GMP_MAX_TOTAL_MB", "lots", "using 256");
    expect_one_line("GMP_ENABLED", "maybe", "using 1");
    expect_one_line("GMP_DUMP_DIR", "", "using ./oom_dumps");
    expect_one_line("GMP_METADATA", "{not json", "using {}");
    expect_one_line("GMP_METADATA", "[1,2]", "using {}");
    expect_one_line("GMP_CUDA_MODE", "nvtx", "using auto");
    expect_one_line("GMP_CUDA_MODE", "CUPTI", "using auto");
    expect_one_line("GMP_ON_CRASH", "sometimes", "using after-failure");
    expect_one_line("GMP_WATCHDOG", "maybe", "using 1");
    expect_one_line("GMP_STACKS", "sometimes", "using 1");
    expect_one_line("GMP_PRESSURE_PCT", "0", "using 90");
    expect_one_line("GMP_PRESSURE_PCT", "101", "using 90");
    expect_one_line("GMP_WATCHDOG_MIN_MB", "-1", "using 256");
    char *huge = malloc(1 << 20);
    memset(huge, '7', (1 << 20) - 1);
    huge[(1 << 20) - 1] = '\0';
    expect_one_line("GMP_BUFFER_SIZE", huge, "using 10000");
    expect_one_line("GMP_CONTEXT", huge, "using");
    expect_one_line("GMP_DUMP_DIR", huge, "using ./oom_dumps");
    huge[0] = '{';
    expect_one_line("GMP_METADATA", huge, "using {}");
    free(huge);
    /* a bad value leaves the others as set */
    clear_env(NULL);
    setenv("GMP_MAX_DUMPS", "x", 1);
    setenv("GMP_BUFFER_SIZE", "64", 1);
    gmp_config c;
    char err[1024];
    stderr_capture_begin();
    assert_int_equal(gmp_config_from_env(&c), 1);
    stderr_capture_end(err, sizeof err);
    assert_int_equal(c.buffer_size, 64);
    assert_int_equal(c.max_dumps, 5);
}

/* A binding's setter: the same checks as the environment's, one option at
 * a time, by its variable's name; a refused value keeps the one before. */
static void test_set_by_name(void **state)
{
    (void)state;
    gmp_config *c = gmp_config_new();
    assert_non_null(c);
    assert_int_equal(c->buffer_size, 10000);
    char err[1024];
    stderr_capture_begin();
    assert_int_equal(gmp_config_set(c, "GMP_DUMP_DIR", "/tmp/x"), 0);
    assert_int_equal(gmp_config_set(c, "GMP_BUFFER_SIZE", "64"), 0);
    assert_int_equal(gmp_config_set(c, "GMP_CUDA_MODE", "cupti"), 0);
    assert_int_equal(gmp_config_set(c, "GMP_METADATA", "{\"a\": 1}"), 0);
    stderr_capture_end(err, sizeof err);
    assert_string_equal(err, "");
    assert_string_equal(c->dump_dir, "/tmp/x");
    assert_int_equal(c->buffer_size, 64);
    assert_int_equal(c->cuda_mode, GMP_CUDA_MODE_CUPTI);
    assert_string_equal(c->metadata_json, "{\"a\": 1}");
    stderr_capture_begin();
    assert_int_equal(gmp_config_set(c, "GMP_MAX_DUMPS", "0"), -1);
    stderr_capture_end(err, sizeof err);
    assert_non_null(strstr(err, "GMP_MAX_DUMPS='0'"));
    assert_int_equal(c->max_dumps, 5);
    stderr_capture_begin();
    assert_int_equal(gmp_config_set(c, "GMP_NO_SUCH", "1"), -1);
    stderr_capture_end(err, sizeof err);
    assert_non_null(strstr(err, "GMP_NO_SUCH='1' is not a setting"));
    assert_int_equal(gmp_config_set(c, NULL, "1"), -1);
    gmp_config_free(c);
}

/* Garbage in every variable: still one line, naming the first of them. */
static void test_all_bad_one_line(void **state)
{
    (void)state;
    static const char *const all[] = {
        "GMP_ENABLED", "GMP_BUFFER_SIZE", "GMP_MAX_DUMPS", "GMP_MAX_TOTAL_MB",
        "GMP_HOST_EVENT_MIN_BYTES", "GMP_OOM_CONFIRM_MS", "GMP_OOM_POLICY", "GMP_CUDA_MODE",
        "GMP_STACKS", "GMP_ON_CRASH", "GMP_WATCHDOG", "GMP_WATCHDOG_MIN_MB",
        "GMP_PRESSURE_PCT", "GMP_PROM_INTERVAL_S", "GMP_LEAK_CHECK", "GMP_SAMPLE_MS",
        "GMP_NVML", "GMP_METADATA",
    };
    static const char *const garbage[] = {"-1", "99999999999999999999999", "ten", "\x01\xff"};
    for (size_t g = 0; g < 4; g++) {
        clear_env(NULL);
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            setenv(all[i], garbage[g], 1);
        gmp_config c;
        char err[4096];
        stderr_capture_begin();
        int bad = gmp_config_from_env(&c);
        stderr_capture_end(err, sizeof err);
        if (bad < 17 || count_lines(err) != 1 || !strstr(err, "GMP_BUFFER_SIZE=") ||
            c.buffer_size != 10000 || c.max_dumps != 5)
            fail_msg("garbage '%s': bad=%d stderr=%s", garbage[g], bad, err);
    }
    clear_env(NULL);
}

/* The user guide's table of variables is the option list's, row for row:
 * a new option, a changed default or range shows up in both or fails here
 * (`make docs` writes the table from the option list). */
/* A node of eight ranks sharing a dump directory keeps a bundle of each
 * unless GMP_MAX_DUMPS says how many: its first is not pruned by the seven
 * that followed it.  Fewer ranks than the default change nothing. */
static void test_a_node_of_ranks_is_kept(void **state)
{
    (void)state;
    gmp_config c;
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    gmp_config_from_env(&c);
    assert_int_equal(c.max_dumps, 8);
    setenv("GMP_MAX_DUMPS", "2", 1);
    gmp_config_from_env(&c);
    assert_int_equal(c.max_dumps, 2);
    unsetenv("GMP_MAX_DUMPS");
    setenv("LOCAL_WORLD_SIZE", "3", 1);
    gmp_config_from_env(&c);
    assert_int_equal(c.max_dumps, 5);
    setenv("LOCAL_WORLD_SIZE", "lots", 1);
    gmp_config_from_env(&c);
    assert_int_equal(c.max_dumps, 5);
    unsetenv("LOCAL_WORLD_SIZE");
}

/* The options are read in one pass over the environment: an environment
 * built by hand with a name twice (execve allows it) gives the first, as
 * getenv does, and a name that begins another's is not taken for it. */
static void test_environment_read_as_getenv_reads_it(void **state)
{
    (void)state;
    extern char **environ;
    char **saved = environ;
    char *twice[] = {"PATH=/usr/bin", "GMP_WATCHDOG_MIN_MB=512", "GMP_MAX_DUMPS=7",
                     "LOCAL_WORLD_SIZE=16", "GMP_MAX_DUMPS=9", "GMP_WATCHDOG=0", NULL};
    environ = twice;
    gmp_config c;
    int bad = gmp_config_from_env(&c);
    environ = saved;
    assert_int_equal(bad, 0);
    assert_int_equal(c.max_dumps, 7); /* the first; GMP_MAX_DUMPS beats LOCAL_WORLD_SIZE */
    assert_int_equal(c.watchdog_min_mb, 512);
    assert_int_equal(c.watchdog, 0);
}

/* The preload's start holds a short GMP_RUN_DIR apart from the config (its
 * page of the config is not touched): the directory the rings go to is the
 * same, however long the value, and an empty one is still refused. */
static int start_reading(const char *run_dir_entry, gmp_config *c, char *held, size_t cap)
{
    extern char **environ;
    char **saved = environ;
    char *only[] = {(char *)run_dir_entry, NULL};
    environ = only;
    memset(c, 0, sizeof *c);
    memset(held, 0, cap);
    int bad = gmp_config_from_env_onto_zero(c, held, cap);
    environ = saved;
    return bad;
}

static void test_run_dir_held_apart_at_start(void **state)
{
    (void)state;
    static gmp_config c;
    char held[16], err[512];
    assert_int_equal(start_reading("GMP_RUN_DIR=/run/short", &c, held, sizeof held), 0);
    assert_string_equal(held, "/run/short");
    assert_string_equal(c.run_dir, "");
    assert_string_equal(c.dump_dir, "./oom_dumps");

    assert_int_equal(start_reading("GMP_RUN_DIR=/run/longer/than/held", &c, held, sizeof held),
                     0);
    assert_string_equal(held, "");
    assert_string_equal(c.run_dir, "/run/longer/than/held");

    stderr_capture_begin();
    int bad = start_reading("GMP_RUN_DIR=", &c, held, sizeof held);
    stderr_capture_end(err, sizeof err);
    assert_int_equal(bad, 1);
    assert_non_null(strstr(err, "GMP_RUN_DIR"));
    assert_string_equal(held, "");
    assert_string_equal(c.run_dir, "");

    /* the static recorder's rings go to the variable's directory */
    setenv("GMP_RUN_DIR", "/run/short", 1);
    gmp_recorder *rec = gmp_recorder_create_static_from_env();
    unsetenv("GMP_RUN_DIR");
    assert_non_null(rec);
    char dir[4096];
    gmp_recorder_run_dir(rec, dir, sizeof dir);
    assert_string_equal(dir, "/run/short");
}

static void test_guide_table_is_the_option_list(void **state)
{
    (void)state;
    static char want[16384], page[1 << 20];
    size_t n = gmp_config_doc_table(want, sizeof want);
    assert_true(n > 0 && n < sizeof want);
    const char *fixtures = getenv("GMP_TEST_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/../../docs/user-guide.md", fixtures ? fixtures : "test/fixtures");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(page, 1, sizeof page - 1, f);
    fclose(f);
    page[got] = '\0';
    const char *table = strstr(page, "| variable | default | meaning |");
    assert_non_null(table);
    if (strncmp(table, want, n) || (table[n] != '\n' && table[n] != '\0'))
        fail_msg("docs/user-guide.md's table of GMP_* variables is not the option list of "
                 "recorder/config.c: `make docs` writes it; it should read:\n%s", want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, clear_env),
        cmocka_unit_test_setup(test_good_values, clear_env),
        cmocka_unit_test_setup(test_bad_values_one_line_each, clear_env),
        cmocka_unit_test_setup(test_all_bad_one_line, clear_env),
        cmocka_unit_test(test_set_by_name),
        cmocka_unit_test_setup(test_a_node_of_ranks_is_kept, clear_env),
        cmocka_unit_test(test_environment_read_as_getenv_reads_it),
        cmocka_unit_test(test_guide_table_is_the_option_list),
        cmocka_unit_test_setup(test_run_dir_held_apart_at_start, clear_env),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
