/*
 * test_hostile_bundles.c — a bundle made to hurt whoever reads it.  Its
 * strings (escape sequences, workflow commands, XML, Markdown, bidi and
 * invisible characters) reach no terminal, CI log, JUnit report or
 * Markdown summary as control characters or markup; a modules.json naming
 * an ELF inside the bundle makes libdw read nothing of it; files dense
 * with values, and 40 MB of events, are read in bounded memory, and one
 * too large for the memory there is called that, not invalid JSON.
 * test_trust.c holds what another user, or a ring's author, may not decide.
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
static char program[1200], inspector[1024]; /* absolute: scripts here change directory */
static char out[1 << 16], err[1 << 16];

static int run_preloaded(const char *script)
{
    return run_script_preloaded(&paths, script, out, sizeof out, err, sizeof err);
}

static int run_bare(const char *script)
{
    return run_script_bare(&paths, script, out, sizeof out, err, sizeof err);
}

/* Strings a hostile bundle carries: an escape sequence that retitles and
 * clears a terminal, GitHub Actions workflow commands on lines of their
 * own, XML that would close a JUnit test case and open one, a Markdown
 * link and image, a table cell's end. */
#define ESCAPES "\x1b]0;pwned\x07\x1b[2J\xc2\x9b" "31m"
#define WORKFLOW "\n::error file=x::injected\n::add-mask::secret"
#define XML "\"/></testcase><testcase classname=\"gpumemprof.oom\" name=\"planted\">"
#define MARKDOWN "[click](http://evil.example) ![img](http://evil.example/x.png) | `x`"
/* Trojan Source: a right-to-left override, a line separator, an isolate,
 * a zero-width space and a BOM, which reorder or hide what a reader sees */
#define BIDI "\xe2\x80\xae" "evil" "\xe2\x80\xa8" "\xe2\x81\xa6" "\xe2\x80\x8b" "\xef\xbb\xbf"

static void set_string(const char *file, const char *key, const char *value)
{
    json_error_t e;
    json_t *doc = json_load_file(file, 0, &e);
    assert_non_null(doc);
    json_object_set_new(doc, key, json_string(value));
    assert_int_equal(json_dump_file(doc, file, JSON_INDENT(1)), 0);
    json_decref(doc);
}

static void make_hostile_bundle(char *bundle, size_t cap)
{
    const char *fixtures = getenv("GMP_TEST_FIXTURES") ? getenv("GMP_TEST_FIXTURES")
                                                       : "test/fixtures";
    char script[4096], file[2048];
    /* a directory name that is an escape sequence too */
    snprintf(bundle, cap, "%s/hostile/oom_dump_20260303T120000Z_12345_cuda_1\x1b[2J",
             paths.scratch);
    snprintf(script, sizeof script,
             "rm -rf '%s/hostile' && mkdir -p '%s/hostile' && "
             "cp -r '%s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' \"$(printf '%s')\"",
             paths.scratch, paths.scratch, fixtures, bundle);
    assert_int_equal(system(script), 0);
    snprintf(file, sizeof file, "%s/metadata.json", bundle);
    set_string(file, "reason", ESCAPES MARKDOWN XML);
    set_string(file, "exception_message", "boom" WORKFLOW ESCAPES BIDI);
    set_string(file, "context", ESCAPES WORKFLOW BIDI);
    snprintf(file, sizeof file, "%s/manifest.json", bundle);
    set_string(file, "reason", ESCAPES MARKDOWN XML WORKFLOW);
    snprintf(file, sizeof file, "%s/events.json", bundle);
    json_error_t e;
    json_t *events = json_load_file(file, 0, &e);
    assert_non_null(events);
    json_t *first = json_array_get(json_is_array(events) ? events
                                                         : json_object_get(events, "events"),
                                   0);
    assert_non_null(first);
    json_object_set_new(first, "api", json_string("cudaMalloc" ESCAPES WORKFLOW BIDI));
    assert_int_equal(json_dump_file(events, file, JSON_INDENT(1)), 0);
    json_decref(events);
}

/* A bidi control, line or paragraph separator, zero-width character or
 * BOM at p (UTF-8). */
static int invisible_at(const unsigned char *p)
{
    return (p[0] == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x8b && p[2] <= 0x8f) ||
                                             (p[2] >= 0xa8 && p[2] <= 0xae))) ||
           (p[0] == 0xe2 && p[1] == 0x81 && ((p[2] >= 0xa0 && p[2] <= 0xa4) ||
                                             (p[2] >= 0xa6 && p[2] <= 0xa9))) ||
           (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) || (p[0] == 0xd8 && p[1] == 0x9c);
}

/* No control character but the line ends, no invisible format character,
 * and no line of a workflow command. */
static void expect_inert(const char *verb, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0) ||
            invisible_at(p))
            fail_msg("%s printed byte 0x%02x at %ld:\n%s", verb, *p,
                     (long)((const char *)p - text), text);
    if (!strncmp(text, "::", 2) || strstr(text, "\n::"))
        fail_msg("%s printed a workflow command on a line of its own:\n%s", verb, text);
}

/* show, events, list and triage print a hostile bundle's strings visibly
 * escaped; its JUnit report parses and holds one test case for its one
 * signature; its Markdown cells are code spans (no link, no image, no
 * extra cell); JSON output escapes by JSON's rules. */
static void test_bundle_strings_are_inert(void **state)
{
    (void)state;
    char bundle[1024], script[8192];
    make_hostile_bundle(bundle, sizeof bundle);
    const char *verbs[][2] = {{"show", ""}, {"events", ""}, {"list", "dir"},
                              {"triage", "dir"}, {"triage", "--format markdown"},
                              {"events", "--json"}, {"list", "dir --json"},
                              {"triage", "dir --format json"}};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/hostile", paths.scratch);
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
        int on_dir = !strncmp(verbs[i][1], "dir", 3);
        const char *opts = on_dir ? verbs[i][1] + 3 : verbs[i][1];
        snprintf(script, sizeof script, "%s %s \"$(printf '%s')\" %s 2>&1", inspector,
                 verbs[i][0], on_dir ? dir : bundle, opts);
        run_bare(script);
        char what[64];
        snprintf(what, sizeof what, "%s %s", verbs[i][0], verbs[i][1]);
        if (!out[0])
            fail_msg("%s printed nothing", what);
        expect_inert(what, out);
        if (!strstr(opts, "json") && !strstr(out, "\\x1b"))
            fail_msg("%s shows no escape visibly:\n%s", what, out);
        if (!strcmp(verbs[i][0], "show") && !strstr(out, "\\u202eevil\\u2028\\u2066\\u200b\\ufeff"))
            fail_msg("show does not make the format characters visible:\n%s", out);
    }
    /* the Markdown table: the reason is one code span in one cell */
    snprintf(script, sizeof script, "%s triage '%s/hostile' --format markdown", inspector,
             paths.scratch);
    run_bare(script);
    if (!strstr(out, "`\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m[click](http://evil.example) "
                     "![img](http://evil.example/x.png) \\| 'x'"))
        fail_msg("markdown:\n%s", out);
    /* JUnit: parses, one test case, and the planted name is text */
    snprintf(script, sizeof script,
             "%s triage '%s/hostile' --format junit | /usr/bin/python3 -c '"
             "import sys, xml.etree.ElementTree as E\n"
             "r = E.fromstring(sys.stdin.buffer.read())\n"
             "c = r.findall(\".//testcase\")\n"
             "print(len(c), \"planted\" in c[0].get(\"name\"))'",
             inspector, paths.scratch);
    run_bare(script);
    if (strcmp(out, "1 True\n"))
        fail_msg("junit: %s %s", out, err);
}

/* A bundle's modules.json may name an ELF inside the bundle, for libdw's
 * parser: the site is then named module+offset, never read from it.  The
 * same bundle naming the program where it lives gets function and line. */
static void test_libdw_reads_nothing_inside_a_bundle(void **state)
{
    (void)state;
    char dumps[700], script[4096], path[1400], bundle[1200];
    snprintf(dumps, sizeof dumps, "%s/sites", paths.scratch);
    snprintf(script, sizeof script,
             "GMP_OOM_POLICY=first GMP_DUMP_DIR='%s' %s hold-fail 1 >/dev/null 2>&1", dumps,
             program);
    run_preloaded(script);
    json_t *stacks = only_bundle_file(dumps, "stacks.json", bundle, sizeof bundle);
    assert_non_null(stacks);
    long long id = json_int(json_array_get(stacks, 0), "id");
    json_decref(stacks);
    char held[256];
    int len = snprintf(held, sizeof held,
                       "{\"live_count\":1,\"live_bytes\":4096,\"by_device\":[],"
                       "\"top_stacks\":[{\"stack_id\":%lld,\"count\":1,\"bytes\":4096}]}",
                       id);
    snprintf(path, sizeof path, "%s/allocations.json", bundle);
    write_file(path, held, (size_t)len);
    snprintf(script, sizeof script, "%s show '%s'", inspector, bundle);
    run_bare(script);
    if (!strstr(out, "(host_oom.c:"))
        fail_msg("the program itself is not named by line: %s %s", out, err);

    json_t *mods = bundle_file(bundle, "modules.json");
    assert_non_null(mods);
    snprintf(path, sizeof path, "%s/evil.so", bundle);
    snprintf(script, sizeof script, "cp '%s' '%s'", program, path);
    assert_int_equal(system(script), 0);
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m)
        if (strstr(json_str(m, "path"), "host_oom"))
            json_object_set_new(m, "path", json_string(path));
    snprintf(path, sizeof path, "%s/modules.json", bundle);
    assert_int_equal(json_dump_file(mods, path, 0), 0);
    json_decref(mods);
    run_bare(script);
    snprintf(script, sizeof script, "%s show '%s'", inspector, bundle);
    run_bare(script);
    if (strstr(out, "(host_oom.c:") || !strstr(out, "evil.so+0x"))
        fail_msg("an ELF inside the bundle went to libdw: %s", out);
}

/* Files dense with values ("[{},{},...]": jansson once took 80 times
 * their size, 5 GB for an 80 MB bundle): each is refused as too dense to
 * read, said by validate, and no verb's resident memory passes 256 MB. */
static void test_dense_files_in_bounded_memory(void **state)
{
    (void)state;
    char script[8192];
    char *fixtures = fixtures_dir_absolute();
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf dense && mkdir dense && "
             "cp -r '%.1000s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' "
             "dense/oom_dump_20260303T120000Z_12345_cuda_1 && "
             "/usr/bin/python3 -c 'import json, resource, subprocess, sys\n"
             "b = \"dense/oom_dump_20260303T120000Z_12345_cuda_1\"\n"
             "dense = \"[\" + \",\".join([\"{}\"] * 5000000) + \"]\"\n"
             "for name in (\"stacks.json\", \"allocations.json\", \"modules.json\"):\n"
             "    open(b + \"/\" + name, \"w\").write(dense)\n"
             "m = json.load(open(b + \"/manifest.json\"))\n"
             "m[\"files\"] += [\"stacks.json\", \"allocations.json\", \"modules.json\"]\n"
             "json.dump(m, open(b + \"/manifest.json\", \"w\"))\n"
             "said = subprocess.run([sys.argv[1], \"validate\", b], capture_output=True, text=True)\n"
             "print(said.returncode, \"holds too many values for its size\" in said.stdout + said.stderr)\n"
             "for verb in ([\"show\", b], [\"triage\", \"dense\"], [\"diff\", b, b], [\"metrics\", \"dense\"],\n"
             "             [\"export\", b, \"--format\", \"torch-snapshot\", \"-o\", \"dense.pickle\"]):\n"
             "    subprocess.run([sys.argv[1]] + verb, capture_output=True)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 256 * 1024)' '%s'",
             paths.scratch, fixtures, inspector);
    free(fixtures);
    run_bare(script);
    if (strcmp(out, "1 True\nTrue\n"))
        fail_msg("out: %s\nstderr: %s", out, err);
}

/* 40 MB of valid events: show reads them within 200 MB of address space
 * (jansson's document of them alone took 360 MB), and under 40 MB, where
 * the file cannot even be held, says "too large", not "invalid JSON". */
static void test_large_events_in_bounded_memory(void **state)
{
    (void)state;
    char bundle[1024], file[1200], script[4096];
    /* the probe's sanitizer report goes to stderr, not to the stage's log */
    snprintf(script, sizeof script,
             "ulimit -v 200000; ASAN_OPTIONS=log_path=stderr %s --version >/dev/null 2>&1",
             inspector);
    if (run_bare(script) != 0) {
        print_message("[     SKIP ] gmp-inspect cannot start under ulimit -v (a sanitizer's "
                      "shadow memory)\n");
        return;
    }
    make_hostile_bundle(bundle, sizeof bundle);
    snprintf(file, sizeof file, "%s/events.json", bundle);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("[\n", f);
    for (int i = 0; i < 200000; i++)
        fprintf(f, "%s{\"seq\":%d,\"timestamp\":1.5,\"event_type\":\"alloc\",\"backend\":"
                   "\"cuda\",\"device_id\":0,\"api\":\"cudaMalloc\",\"address\":"
                   "\"0x7f0000000000\",\"size\":1048576,\"result\":0,\"thread_id\":1,"
                   "\"bytes_in_use\":1048576,\"stack_id\":0}\n",
                i ? "," : "", i);
    fputs("]\n", f);
    fclose(f);
    snprintf(script, sizeof script,
             "ulimit -v 200000; %s show \"$(printf '%s')\" | grep -c '200000 captured'; "
             "echo \"status $?\"",
             inspector, bundle);
    run_bare(script);
    if (strcmp(out, "1\nstatus 0\n"))
        fail_msg("within 200 MB: out: %s\nstderr: %s", out, err);
    snprintf(script, sizeof script, "ulimit -v 40000; %s show \"$(printf '%s')\"; echo \"status $?\"",
             inspector, bundle);
    run_bare(script);
    if (strcmp(out, "status 1\n") || !strstr(err, "too large to read") ||
        strstr(err, "invalid JSON"))
        fail_msg("within 40 MB: out: %s\nstderr: %s", out, err);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "hostile-bundles");
    if (inspect_path_absolute(inspector, sizeof inspector) != 0)
        return -1;
    snprintf(program, sizeof program, "%s/test/programs/host_oom", paths.build);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bundle_strings_are_inert),
        cmocka_unit_test(test_libdw_reads_nothing_inside_a_bundle),
        cmocka_unit_test(test_dense_files_in_bounded_memory),
        cmocka_unit_test(test_large_events_in_bounded_memory),
    };
    return cmocka_run_group_tests_name("hostile bundles", tests, setup, preload_paths_teardown);
}
