/*
 * test_export.c — `gmp-inspect export --format trace-json`: bundles of real
 * processes under the preload as Trace Event JSON, checked against the
 * format's rules (an object with a traceEvents array; each event a known
 * phase with a name, a pid, a tid and, but for metadata, a numeric ts;
 * instants scoped t/p/g; counters' args numbers) and against the bundle:
 * the device's counter peaks where its events do, one instant per
 * allocation named by API, one OOM instant per failure even when two
 * bundles of one process hold it, ranks named and ordered; a live ring by
 * its PID; a broken bundle
 * is a line and exit 1, the rest still a whole file.  `--format
 * torch-snapshot` of the same CUDA OOM and of a Python MemoryError, read by
 * a loader written from PyTorch's published format (torch_snapshot_check.py):
 * every field memory_viz reads, the trace's replayed peak the events' peak,
 * the segments the live bytes, the OOM's request, free bytes and frames
 * (native, symbolised; Python's), each allocation its own segment and a
 * cuMemMap range a mapped one, the trace walking back from its end as
 * memory_viz's segment view does; of a directory (each rank's devices in
 * turn, the map printed) and of a live ring.  Then the real viewers, from
 * PyPI (test/viewers/): the trace opened in Perfetto's UI and in the
 * Catapult viewer chrome://tracing was, in headless Chromium, each
 * understanding the same processes, counter peaks and instants with no
 * import error and drawing them; the snapshot read by PyTorch's own
 * torch.cuda._memory_viz, every view, its totals the bundle's live bytes.
 * When PyPI or Chromium cannot be had, those two say so and skip.
 * GMP_TORCH_HISTORY=1 under gmp-run:
 * without torch one line and nothing else changed; with (a stand-in) torch,
 * PyTorch's snapshot in the OOM's one bundle and its largest block in show.
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
#include <sys/wait.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];
static char cuda_bundle[1024]; /* test_cuda_bundle's, for the snapshot tests */

static int sh(const char *cmd)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
}

/* The trace of paths (a shell word list), checked against the format's
 * rules; a new reference. */
static json_t *export_checked(const char *what, int want_rc)
{
    char cmd[4096], file[600];
    snprintf(file, sizeof file, "%s/trace.json", paths.scratch);
    snprintf(cmd, sizeof cmd, "%s export %s --format trace-json -o '%s'", inspect_path(), what,
             file);
    int rc = sh(cmd);
    if (rc != want_rc)
        fail_msg("export %s: exit %d, %d wanted: %s", what, rc, want_rc, err);
    json_error_t jerr;
    json_t *doc = json_load_file(file, 0, &jerr);
    if (!doc)
        fail_msg("export %s: not JSON: %s (line %d)", what, jerr.text, jerr.line);
    json_t *events = json_object_get(doc, "traceEvents");
    assert_true(json_is_array(events));
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        if (!ph || !strchr("MCi", ph[0]) || ph[1] || !json_is_string(json_object_get(ev, "name")) ||
            !json_is_integer(json_object_get(ev, "pid")))
            fail_msg("event %zu breaks the format: %s", i, json_dumps(ev, JSON_COMPACT));
        if (ph[0] != 'M' && !json_is_number(json_object_get(ev, "ts")))
            fail_msg("event %zu has no ts: %s", i, json_dumps(ev, JSON_COMPACT));
        if (ph[0] == 'i') {
            const char *s = json_string_value(json_object_get(ev, "s"));
            if (!s || !strchr("tpg", s[0]) || !json_is_integer(json_object_get(ev, "tid")))
                fail_msg("instant %zu: %s", i, json_dumps(ev, JSON_COMPACT));
        }
        if (ph[0] == 'C') {
            const char *k;
            json_t *v;
            json_object_foreach(json_object_get(ev, "args"), k, v) if (!json_is_number(v))
                fail_msg("counter %zu: %s", i, json_dumps(ev, JSON_COMPACT));
        }
    }
    return doc;
}

/* How many events of phase ph have a name starting with prefix; the
 * largest "bytes" of those that are counters, in *peak. */
static int count(json_t *doc, char ph, const char *prefix, json_int_t *peak)
{
    int n = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, ev) {
        const char *p = json_string_value(json_object_get(ev, "ph"));
        const char *name = json_string_value(json_object_get(ev, "name"));
        if (p[0] != ph || strncmp(name, prefix, strlen(prefix)))
            continue;
        n++;
        json_int_t b = json_integer_value(json_object_get(json_object_get(ev, "args"), "bytes"));
        if (peak && b > *peak)
            *peak = b;
    }
    return n;
}

static void test_cuda_bundle(void **state)
{
    (void)state;
    char script[16384], bundle[1024];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_WATCHDOG=0; exec %s/test/gpu/gpu_oom_cuda until-oom 0",
             paths.preload, paths.build);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    json_t *events = only_bundle_file(paths.dumps, "events.json", bundle, sizeof bundle);
    snprintf(cuda_bundle, sizeof cuda_bundle, "%s/cuda", paths.scratch);
    snprintf(script, sizeof script, "rm -rf '%s' && cp -R '%s' '%s'", cuda_bundle, bundle,
             cuda_bundle);
    assert_int_equal(sh(script), 0);
    int allocs = 0;
    json_int_t peak = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *type = json_string_value(json_object_get(ev, "event_type"));
        if (json_integer_value(json_object_get(ev, "device_id")) != 0 ||
            strcmp(json_string_value(json_object_get(ev, "backend")), "cuda"))
            continue;
        allocs += !strcmp(type, "alloc");
        json_int_t b = json_integer_value(json_object_get(ev, "bytes_in_use"));
        peak = b > peak ? b : peak;
    }
    json_decref(events);
    char quoted[1100];
    snprintf(quoted, sizeof quoted, "'%s'", bundle);
    json_t *doc = export_checked(quoted, 0);
    json_int_t counter_peak = 0;
    assert_true(count(doc, 'C', "cuda:0 in use", &counter_peak) > 0);
    assert_int_equal(counter_peak, peak);
    assert_true(allocs > 0);
    assert_int_equal(count(doc, 'i', "cudaMalloc", NULL), allocs);
    assert_int_equal(count(doc, 'i', "OOM: cudaMalloc 256.0 MiB on cuda:0", NULL), 1);
    assert_int_equal(count(doc, 'i', "bundle: out of memory", NULL), 1);
    assert_int_equal(count(doc, 'M', "process_name", NULL), 1);
    json_decref(doc);
    snprintf(script, sizeof script, "%s export %s --format torch -o -", inspect_path(), quoted);
    assert_int_equal(sh(script), 2);
    snprintf(script, sizeof script, "%s export %s -o -", inspect_path(), quoted);
    assert_int_equal(sh(script), 2);
}

/* Two bundles of one process share events: each is in the trace once.
 * Two ranks: two processes, named and ordered by rank. */
static void test_directory_of_a_job(void **state)
{
    (void)state;
    char script[16384];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_OOM_POLICY=first GMP_WATCHDOG=0; "
             "RANK=0 %s/test/programs/host_oom fail-twice && "
             "RANK=1 %s/test/programs/host_oom fail-twice",
             paths.preload, paths.build, paths.build);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    char dir[1100];
    snprintf(dir, sizeof dir, "'%s'", paths.dumps);
    json_t *doc = export_checked(dir, 0);
    /* each rank went on after its failures and exited 0 */
    assert_int_equal(count(doc, 'i', "bundle: survived a failed allocation", NULL), 4);
    assert_int_equal(count(doc, 'i', "OOM: malloc", NULL), 4); /* not 6: 2 a process */
    assert_int_equal(count(doc, 'M', "process_name", NULL), 2);
    assert_int_equal(count(doc, 'M', "process_sort_index", NULL), 2);
    int ranks = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        const char *label = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        if (!strcmp(name, "process_name") && label &&
            (strstr(label, "host_oom (rank 0, on ") || strstr(label, "host_oom (rank 1, on ")))
            ranks++;
    }
    assert_int_equal(ranks, 2);
    json_decref(doc);

    /* as one snapshot: each rank's host list in rank order, the map said */
    snprintf(script, sizeof script,
             "%s export %s --format torch-snapshot -o '%s/job.pickle' && "
             "python3 test/integration/torch_snapshot_check.py '%s/job.pickle'",
             inspect_path(), dir, paths.scratch, paths.scratch);
    if (sh(script) != 0)
        fail_msg("torch-snapshot of the job: %s%s", out, err);
    char line0[512], line1[512];
    if (sscanf(out, "%511[^\n]\n%511[^\n]\n", line0, line1) != 2 ||
        strncmp(line0, "memory_viz device 0: host of host_oom (pid ", 43) ||
        !strstr(line0, ", rank 0, on ") ||
        strncmp(line1, "memory_viz device 1: host of host_oom (pid ", 43) ||
        !strstr(line1, ", rank 1, on "))
        fail_msg("the map of slots: %s", out);
    json_t *summary = json_loads(out + strlen(line0) + strlen(line1) + 2, 0, NULL);
    json_t *ooms = json_object_get(summary, "ooms");
    assert_int_equal(json_array_size(ooms), 4);
    for (size_t k = 0; k < 4; k++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ooms, k), "device")),
                         k / 2);
    json_decref(summary);

    /* a broken bundle among them: a line, exit 1, the others still written */
    snprintf(script, sizeof script,
             "mkdir -p '%s/oom_dump_20990101T000000Z_1_cpu_1' && "
             "echo '{' > '%s/oom_dump_20990101T000000Z_1_cpu_1/manifest.json'",
             paths.dumps, paths.dumps);
    assert_int_equal(sh(script), 0);
    doc = export_checked(dir, 1);
    assert_non_null(strstr(err, "gmp-inspect export: "));
    assert_int_equal(count(doc, 'i', "bundle: survived a failed allocation", NULL), 4);
    json_decref(doc);
}

/* The snapshot of bundle, read back by the format checker (a loader
 * written from PyTorch's published format: no PyTorch here); its summary. */
static json_t *torch_snapshot(const char *bundle)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s export '%s' --format torch-snapshot -o '%s/snapshot.pickle' && "
             "python3 test/integration/torch_snapshot_check.py '%s/snapshot.pickle'",
             inspect_path(), bundle, paths.scratch, paths.scratch);
    if (sh(cmd) != 0)
        fail_msg("torch-snapshot of %s: %s%s", bundle, out, err);
    json_t *summary = json_loads(out, 0, NULL);
    if (!summary)
        fail_msg("no summary: %s", out);
    return summary;
}

/* The bytes test_cuda_bundle's bundle held at the OOM (what show calls
 * Held), from its allocations.json. */
static json_int_t cuda_live_bytes(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/allocations.json", cuda_bundle);
    json_t *held = json_load_file(path, 0, NULL);
    assert_non_null(held);
    json_int_t live = json_integer_value(json_object_get(held, "live_bytes"));
    json_decref(held);
    assert_true(live > 0);
    return live;
}

/* The CUDA double's OOM as a memory_viz snapshot: the trace replays to the
 * peak the events reached, the segments hold what allocations.json holds,
 * the OOM entry has the request, the device's free bytes and the
 * allocating function's name. */
static void test_torch_snapshot_of_a_cuda_oom(void **state)
{
    (void)state;
    assert_true(cuda_bundle[0]); /* made by test_cuda_bundle */
    json_t *s = torch_snapshot(cuda_bundle);
    char path[1200];
    snprintf(path, sizeof path, "%s/metadata.json", cuda_bundle);
    json_t *md = json_load_file(path, 0, NULL);
    assert_non_null(md);
    json_int_t live = cuda_live_bytes();
    /* every allocation was live at the OOM: the peak is what was held */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "peaks"), "0")), live);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "segment_bytes"), "0")),
                     live);
    json_t *ooms = json_object_get(s, "ooms");
    assert_int_equal(json_array_size(ooms), 1);
    json_t *oom = json_array_get(ooms, 0);
    assert_int_equal(json_integer_value(json_object_get(oom, "size")),
                     json_integer_value(json_object_get(json_object_get(md, "failed_request"),
                                                        "size")));
    assert_int_equal(json_integer_value(json_object_get(oom, "device_free")),
                     json_integer_value(json_object_get(
                         json_array_get(json_object_get(md, "device_state"), 0), "free")));
    char *names = json_dumps(json_object_get(oom, "frames"), 0);
    if (!strstr(names, "\"until_oom\""))
        fail_msg("the OOM's frames do not name until_oom: %s", names);
    free(names);
    json_decref(md);
    json_decref(s);
}

/* Memory mapped as PyTorch's expandable segments map it (cuMemCreate, then
 * cuMemMap; the driver double): each mapping a mapped segment holding its
 * block, the handles out of it, the segments expandable, and the trace
 * walks back from the end as memory_viz's segment view does. */
static void test_torch_snapshot_of_mapped_memory(void **state)
{
    (void)state;
    char script[16384], bundle[1024];
    snprintf(script, sizeof script,
             "rm -rf '%s'; export LD_PRELOAD='%s' LD_LIBRARY_PATH='%s/test/doubles' "
             "GMP_WATCHDOG=0; exec %s/test/gpu/driver_oom vmm 0",
             paths.dumps, paths.preload, paths.build, paths.build);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    json_t *s = torch_snapshot(bundle);
    json_t *actions = json_object_get(s, "actions");
    char *text = json_dumps(s, JSON_COMPACT);
    if (json_integer_value(json_object_get(actions, "segment_map")) != 4 ||
        json_integer_value(json_object_get(actions, "alloc")) != 4 ||
        json_object_get(actions, "segment_alloc") ||
        json_integer_value(json_object_get(s, "expandable")) != 4 ||
        json_integer_value(json_object_get(json_object_get(s, "segment_bytes"), "0")) !=
            1ll << 30)
        fail_msg("the mapped memory's snapshot: %s", text);
    free(text);
    json_decref(s);
}

/* A Python MemoryError: the host's list holds the OOM, its frames end in
 * the Python function that asked; the segments are what was held at the
 * failure (five 8 MiB buffers), not what the teardown left after it. */
static void test_torch_snapshot_python_frames(void **state)
{
    (void)state;
    char script[16384], bundle[1024];
    snprintf(script, sizeof script,
             "rm -rf '%s'; export LD_PRELOAD='%s' GMP_WATCHDOG=0; exec python3 -c '\n"
             "held = [bytearray(8 << 20) for _ in range(5)]\n"
             "def load_everything():\n"
             "    return bytearray(1 << 45)\n"
             "load_everything()\n'",
             paths.dumps, paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    json_t *s = torch_snapshot(bundle);
    json_t *ooms = json_object_get(s, "ooms");
    assert_int_equal(json_array_size(ooms), 1);
    char *names = json_dumps(json_object_get(json_array_get(ooms, 0), "frames"), 0);
    if (!strstr(names, "\"load_everything\""))
        fail_msg("the OOM's frames do not name load_everything: %s", names);
    free(names);
    json_int_t held = json_integer_value(json_object_get(json_object_get(s, "segment_bytes"), "0"));
    if (held < 5ll * (8 << 20) || held > 5ll * (8 << 20) + (8 << 20))
        fail_msg("the segments hold %lld bytes at the failure, not the 40 MiB", (long long)held);
    json_decref(s);
}

/* A live process's ring, named by its PID as `watch` takes it: its events
 * as a trace while it runs (five 8 MiB allocations, the host's counter at
 * their sum), the process named as live; and as a snapshot, the host's
 * list replaying to the same sum, its frames named from the ring's own
 * stack and module records. */
static void test_live_ring(void **state)
{
    (void)state;
    char script[16384];
    snprintf(script, sizeof script,
             "mkdir -p -m 700 \"$GMP_RUN_DIR\"; rm -f \"$GMP_RUN_DIR/held\"; "
             "LD_PRELOAD='%s' python3 -c 'import os, time\n"
             "keep = [bytearray(8 << 20) for _ in range(5)]\n"
             "open(os.environ[\"GMP_RUN_DIR\"] + \"/held\", \"w\").close()\n"
             "time.sleep(5)' & "
             "i=0; while [ ! -e \"$GMP_RUN_DIR/held\" ] && [ $i -lt 300 ]; do sleep 0.1; "
             "i=$((i + 1)); done; "
             "%s export $! --format trace-json -o '%s/live.json'; rc=$?; "
             "%s export $! --format torch-snapshot -o '%s/live.pickle'; echo \"$rc $?\"; "
             "kill $!; python3 test/integration/torch_snapshot_check.py '%s/live.pickle'",
             paths.preload, inspect_path(), paths.scratch, inspect_path(), paths.scratch,
             paths.scratch);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    if (strncmp(out, "0 0\n", 4))
        fail_msg("export of the ring: %s%s", out, err);
    json_t *summary = json_loads(out + 4, 0, NULL);
    json_int_t host_peak = json_integer_value(json_object_get(json_object_get(summary, "peaks"),
                                                              "0"));
    if (host_peak < 5ll * (8 << 20) || host_peak > 5ll * (8 << 20) + (64 << 20))
        fail_msg("the ring's snapshot peaks at %lld: %s", (long long)host_peak, out);
    /* the ring's stack and module records name the allocations' frames */
    if (json_integer_value(json_object_get(summary, "named_frames")) < 5)
        fail_msg("the ring's allocations have no named frames: %s", out);
    json_decref(summary);
    char file[700];
    snprintf(file, sizeof file, "%s/live.json", paths.scratch);
    json_t *doc = json_load_file(file, 0, NULL);
    assert_non_null(doc);
    json_int_t peak = 0;
    assert_true(count(doc, 'C', "host in use", &peak) >= 5);
    if (peak < 5ll * (8 << 20) || peak > 5ll * (8 << 20) + (64 << 20))
        fail_msg("host counter peaks at %lld, want the 40 MiB held", (long long)peak);
    int live = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, ev) {
        const char *label = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        live += label && strstr(label, "(live ring)") != NULL;
    }
    assert_int_equal(live, 1);
    json_decref(doc);
}

/* The viewers from PyPI, fetched once into the build (test/viewers/);
 * NULL, the test skipped with a line, when PyPI cannot be reached. */
static const char *viewers(void)
{
    static char dir[1100];
    char cmd[1500];
    snprintf(dir, sizeof dir, "%s/viewers", paths.build);
    snprintf(cmd, sizeof cmd, "timeout 300 python3 test/viewers/fetch_viewers.py '%s'", dir);
    int rc = sh(cmd);
    if (rc == 3) {
        print_message("SKIP: %s", err);
        return NULL;
    }
    if (rc != 0)
        fail_msg("fetch_viewers: exit %d: %s", rc, err);
    return dir;
}

/* The CUDA OOM's trace opened in Perfetto's UI and in the Catapult viewer
 * (chrome://tracing's), in headless Chromium: each understood the process,
 * the device's counter at the events' peak and every instant, reported no
 * import error, and drew it. */
static void test_trace_in_the_viewers(void **state)
{
    (void)state;
    assert_true(cuda_bundle[0]); /* made by test_cuda_bundle */
    skip_under_preload_sanitizer("the viewers read the file; the plain build checks them");
    if (sh("command -v chromium") != 0 &&
        sh("sh mk/install-optional.sh chromium; command -v chromium") != 0) {
        print_message("SKIP: chromium cannot be installed here\n");
        skip();
    }
    const char *dir = viewers();
    if (!dir)
        skip();
    char what[1100], cmd[4096];
    snprintf(what, sizeof what, "'%s'", cuda_bundle);
    json_t *doc = export_checked(what, 0);
    json_int_t peak = 0;
    count(doc, 'C', "cuda:0 in use", &peak);
    int instants = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, ev)
        instants += !strcmp(json_string_value(json_object_get(ev, "ph")), "i");
    json_decref(doc);
    snprintf(cmd, sizeof cmd,
             "timeout 300 python3 test/viewers/render_trace.py '%s' '%s/trace.json' '%s'", dir,
             paths.scratch, paths.scratch);
    if (sh(cmd) != 0)
        fail_msg("render_trace: %s%s", out, err);
    json_t *report = json_loads(out, 0, NULL);
    if (!report)
        fail_msg("render_trace said: %s", out);
    static const char *const names[] = {"perfetto", "catapult"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(report, names[k]);
        char *text = json_dumps(v, JSON_COMPACT);
        json_t *procs = json_object_get(v, "processes");
        const char *proc = json_string_value(json_array_get(procs, 0));
        json_t *peak_seen = json_object_get(json_object_get(v, "counters"), "cuda:0 in use bytes");
        if (json_array_size(procs) != 1 || !proc || strncmp(proc, "gpu_oom_cuda (on ", 17) ||
            !json_is_number(peak_seen) || (json_int_t)json_number_value(peak_seen) != peak ||
            json_integer_value(json_object_get(v, "instants")) != instants ||
            json_array_size(json_object_get(v, "errors")) != 0 ||
            json_integer_value(json_object_get(v, "ink")) < 1000)
            fail_msg("%s showed %s; the trace has a %lld-byte peak and %d instants", names[k],
                     text, (long long)peak, instants);
        free(text);
    }
    json_decref(report);
}

/* The CUDA OOM's snapshot read by PyTorch's own torch.cuda._memory_viz:
 * every view runs, its totals are the bundle's live bytes (show's Held),
 * its trace has the OOM with the request show names, and the HTML plots
 * carry the snapshot. */
static void test_snapshot_in_memory_viz(void **state)
{
    (void)state;
    assert_true(cuda_bundle[0]);
    skip_under_preload_sanitizer("the viewers read the file; the plain build checks them");
    const char *dir = viewers();
    if (!dir)
        skip();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s export '%s' --format torch-snapshot -o '%s/viz.pickle' && "
             "python3 test/viewers/memory_viz_check.py '%s' '%s/viz.pickle'",
             inspect_path(), cuda_bundle, paths.scratch, dir, paths.scratch);
    if (sh(cmd) != 0)
        fail_msg("memory_viz: %s%s", out, err);
    json_t *r = json_loads(out, 0, NULL);
    assert_non_null(r);
    json_int_t live = cuda_live_bytes();
    static const char *const totals[] = {"total_reserved", "total_allocated",
                                         "segments_flame_bytes", "memory_flame_bytes",
                                         "compare_flame_bytes"};
    for (size_t k = 0; k < sizeof totals / sizeof *totals; k++)
        if (json_integer_value(json_object_get(r, totals[k])) != live)
            fail_msg("%s is not the %lld live bytes: %s", totals[k], (long long)live, out);
    assert_int_equal(json_array_size(json_object_get(r, "ooms")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "ooms"), 0)),
                        "256.0MiB requested, 0.0B free in CUDA");
    assert_true(json_is_true(json_object_get(r, "plots_hold_snapshot")));
    json_decref(r);
}

/* GMP_TORCH_HISTORY=1 in a Python that never imports torch: the program's
 * output and status as they were, one line saying why nothing was
 * recorded; a sitecustomize of the user's own still runs. */
static void test_torch_history_without_torch(void **state)
{
    (void)state;
    char script[16384];
    snprintf(script, sizeof script,
             "mkdir -p '%s/own' && echo 'print(\"own sitecustomize\")' > "
             "'%s/own/sitecustomize.py' && GMP_TORCH_HISTORY=1 PYTHONPATH='%s/own' "
             "%s/gmp-run -- python3 -c 'print(6 * 7)'",
             paths.scratch, paths.scratch, paths.scratch, paths.build);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 0);
    assert_string_equal(out, "own sitecustomize\n42\n");
    assert_string_equal(err, "gpumemprof: GMP_TORCH_HISTORY: this Python never imported torch; "
                             "nothing recorded\n");
}

/* With torch (test/wheel/standin: a stand-in with PyTorch's history API; the
 * real one is a case of `make gpu-check`): an OOM in PyTorch's allocator
 * that no failing call shows is one bundle holding PyTorch's snapshot, its
 * message torch's own, and show names the largest block's Python frame. */
static void test_torch_history_snapshot(void **state)
{
    (void)state;
    char script[16384], bundle[1024];
    snprintf(script, sizeof script,
             "cd '%s' && printf 'import torch\\n"
             "def build_model():\\n    torch.cuda.allocate(3 << 30)\\n"
             "def forward():\\n    torch.cuda.allocate(6 << 30)\\n"
             "build_model()\\nforward()\\n' > train.py && "
             "GMP_TORCH_HISTORY=1 PYTHONPATH='%s/test/wheel/standin' %s/gmp-run -- "
             "python3 train.py",
             paths.scratch, getenv("PWD") ? getenv("PWD") : ".", paths.build);
    int status = run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_int_equal(exit_code_of(status), 1); /* the OOM goes on up */
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle);
    assert_string_equal(json_str(md, "exception_type"), "OutOfMemoryError");
    if (!strstr(json_str(md, "exception_message"), "Tried to allocate 6.00 GiB"))
        fail_msg("not torch's message: %s", json_str(md, "exception_message"));
    json_decref(md);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s validate '%s' >/dev/null && python3 -c 'import pickle, sys; "
             "s = pickle.load(open(sys.argv[1], \"rb\")); "
             "print(s[\"segments\"][0][\"blocks\"][0][\"size\"])' '%s/torch_snapshot.pickle' && "
             "%s show '%s'",
             inspect_path(), bundle, bundle, inspect_path(), bundle);
    if (sh(cmd) != 0)
        fail_msg("%s%s", out, err);
    if (strncmp(out, "3221225472\n", 11) ||
        !strstr(out, "PyTorch's blocks:    3.0 GiB on cuda:0  train.py:3 in build_model"))
        fail_msg("the snapshot or show:\n%s", out);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "export");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_bundle),
        cmocka_unit_test(test_directory_of_a_job),
        cmocka_unit_test(test_live_ring),
        cmocka_unit_test(test_torch_snapshot_of_a_cuda_oom),
        cmocka_unit_test(test_torch_snapshot_python_frames),
        cmocka_unit_test(test_torch_snapshot_of_mapped_memory),
        cmocka_unit_test(test_trace_in_the_viewers),
        cmocka_unit_test(test_snapshot_in_memory_viz),
        cmocka_unit_test(test_torch_history_without_torch),
        cmocka_unit_test(test_torch_history_snapshot),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
