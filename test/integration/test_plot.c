/*
 * test_plot.c — `gmp-inspect plot`: for a bundle of the CUDA double run out
 * of memory, a well-formed SVG (xmllint) with the device's line, the OOM
 * marked, the device's total drawn and labelled, a legend for all of it and
 * round tick values, and an HTML page that answers before it draws, as
 * headless Chromium shows it (Chromium is installed when it can be; the
 * test skips with a message where it cannot).  Host and device lines in
 * colours no mark has.  A bundle with no events still plots.
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
static char bundle[1024], out[1 << 16], err[1 << 16];

static int sh(const char *cmd)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err));
}

static void make_bundle(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' GMP_WATCHDOG=0; exec %s/test/gpu/gpu_oom_cuda until-oom 0",
             paths.preload, paths.build);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
}

static void test_svg(void **state)
{
    (void)state;
    char cmd[4096], svg[600];
    snprintf(svg, sizeof svg, "%s/plot.svg", paths.scratch);
    snprintf(cmd, sizeof cmd, "%s plot '%s' -o '%s' && xmllint --noout '%s' && cat '%s'",
             inspect_path(), bundle, svg, svg, svg);
    if (sh(cmd) != 0)
        fail_msg("plot or xmllint failed: %s", err);
    assert_non_null(strstr(out, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(out, "<polyline"));
    assert_non_null(strstr(out, ">cuda:0 in use</text>"));
    assert_non_null(strstr(out, ">OOM: cudaMalloc 256.0 MiB</text>"));
    /* the limit it ran into, as a line labelled on the chart and in the
     * legend, with everything else drawn */
    const char *limit = strstr(out, ">cuda:0 total 1.0 GiB</text>");
    assert_non_null(limit);
    assert_non_null(strstr(limit + 1, ">cuda:0 total 1.0 GiB</text>"));
    assert_non_null(strstr(out, ">allocation (tick)</text>"));
    assert_non_null(strstr(out, ">failed request (box: size)</text>"));
    /* round ticks: binary steps on the bytes, 1-2-5 on the time */
    assert_non_null(strstr(out, "text-anchor=\"end\">512 MiB</text>"));
    assert_non_null(strstr(out, "text-anchor=\"end\">1 GiB</text>"));
    /* the second time tick is 1, 2 or 5 times a power of ten */
    const char *tick = strstr(out, "text-anchor=\"middle\">0 ");
    double second = 0;
    if (!tick || !(tick = strstr(tick + 1, "text-anchor=\"middle\">")) ||
        sscanf(tick + strlen("text-anchor=\"middle\">"), "%lf", &second) != 1 || second <= 0)
        fail_msg("no time ticks:\n%s", out);
    double mantissa = second;
    while (mantissa >= 9.999)
        mantissa /= 10;
    while (mantissa < 0.999)
        mantissa *= 10;
    if ((mantissa < 0.999 || mantissa > 1.001) && (mantissa < 1.999 || mantissa > 2.001) &&
        (mantissa < 4.999 || mantissa > 5.001))
        fail_msg("time tick %g is not round", second);
    assert_null(strstr(out, "e+"));
    snprintf(cmd, sizeof cmd, "%s plot '%s' -o '%s/plot.png'", inspect_path(), bundle,
             paths.scratch);
    assert_int_equal(sh(cmd), 2); /* only .svg or .html */
}

/* The page as a reader gets it, in headless Chromium at a wide window:
 * it loads with nothing on the console and no request beyond itself; its
 * text holds show's answer (the headline and who held the memory, as show
 * --json says them) before the chart; the chart fills the window's width;
 * the failed request and the limit have hover text; it is not blank. */
static void test_html_renders(void **state)
{
    (void)state;
    if (sh("command -v chromium") != 0 &&
        sh("sh mk/install-optional.sh chromium; command -v chromium") != 0) {
        print_message("SKIP: chromium cannot be installed here\n");
        skip();
    }
    char cmd[8192], html[600], png[600];
    snprintf(html, sizeof html, "%s/plot.html", paths.scratch);
    snprintf(png, sizeof png, "%s/plot.png", paths.scratch);
    /* no script, and no address but the SVG namespace: self-contained */
    snprintf(cmd, sizeof cmd, "%s plot '%s' -o '%s' && grep -c '<script\\|http://\\|https://' '%s'",
             inspect_path(), bundle, html, html);
    assert_int_equal(sh(cmd), 0);
    assert_string_equal(out, "1\n");
    snprintf(cmd, sizeof cmd, "%s show --json '%s'", inspect_path(), bundle);
    assert_int_equal(sh(cmd), 0);
    json_t *answer = json_loads(out, 0, NULL);
    assert_non_null(answer);
    const char *headline = json_string_value(json_object_get(answer, "what_happened"));
    const char *held = json_string_value(json_object_get(answer, "held_by"));
    assert_non_null(headline);
    assert_non_null(held);
    snprintf(cmd, sizeof cmd,
             "timeout 120 python3 test/viewers/chromium.py report '%s' 1600 900 '%s' && "
             "python3 test/viewers/chromium.py ink '%s'",
             html, png, png);
    if (sh(cmd) != 0)
        fail_msg("chromium: %s %s", out, err);
    json_error_t jerr;
    json_t *page = json_loadb(out, strcspn(out, "\n"), 0, &jerr);
    if (!page)
        fail_msg("chromium.py said: %s", out);
    assert_true(json_is_true(json_object_get(page, "loaded")));
    if (json_array_size(json_object_get(page, "console")) ||
        json_array_size(json_object_get(page, "requests")))
        fail_msg("the page's console or requests: %s", out);
    const char *text = json_string_value(json_object_get(page, "text"));
    assert_non_null(text);
    const char *said_headline = strstr(text, headline), *said_held = strstr(text, held),
               *chart = strstr(text, "Memory over time");
    if (!said_headline || !said_held || !chart || said_headline > chart || said_held > chart)
        fail_msg("the answer is not above the chart in the page's text:\n%s\n(want '%s' and '%s')",
                 text, headline, held);
    double chart_width = json_number_value(json_object_get(page, "chart_width")),
           window_width = json_number_value(json_object_get(page, "window_width"));
    if (!(window_width > 1500 && chart_width > 0.9 * window_width))
        fail_msg("the chart is %.0f px wide in a %.0f px window", chart_width, window_width);
    static const char request[] = "the failed request: cudaMalloc of 256.0 MiB at ";
    int failed_request = 0, limit = 0;
    size_t i;
    json_t *title;
    json_array_foreach(json_object_get(page, "hover"), i, title) {
        failed_request |= !strncmp(json_string_value(title), request, strlen(request));
        limit |= !strcmp(json_string_value(title), "the limit: cuda:0 total 1.0 GiB");
    }
    if (!failed_request || !limit)
        fail_msg("no hover text on the failed request or the limit: %s", out);
    int w = 0, h = 0, ink = 0;
    if (sscanf(strchr(out, '\n') + 1, "%d %d %d", &w, &h, &ink) != 3 || w != 1600 || ink < 1000)
        fail_msg("the screenshot: %s", strchr(out, '\n') + 1);
    json_decref(page);
    json_decref(answer);
}

/* A host that grew into RLIMIT_AS: the limit drawn and labelled, the
 * watchdog's memory-pressure moment marked, both in the legend. */
static void test_host_limit_and_pressure(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096];
    snprintf(script, sizeof script,
             "ulimit -v 700000; export LD_PRELOAD='%s'; exec python3 -c '\n"
             "import time\n"
             "chunks = []\n"
             "while True:\n"
             "    chunks.append(bytearray(20 << 20))\n"
             "    time.sleep(0.15 if len(chunks) > 25 else 0.01)\n'",
             paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "for d in '%s'/oom_dump_*; do grep -q '\"reason\":\"ENOMEM\"' \"$d/manifest.json\" && "
             "%s plot \"$d\" -o '%s/host.svg' && xmllint --noout '%s/host.svg' && "
             "cat '%s/host.svg'; done",
             paths.dumps, inspect_path(), paths.scratch, paths.scratch, paths.scratch);
    if (sh(cmd) != 0 || !strstr(out, "<svg"))
        fail_msg("no plot of the ENOMEM bundle: %s%s", out, err);
    const char *limit = strstr(out, ">RLIMIT_AS ");
    if (!limit || !strstr(limit + 1, ">RLIMIT_AS ") || !strstr(out, ">pressure</text>") ||
        !strstr(out, ">memory-pressure warning</text>"))
        fail_msg("the limit or the pressure moment is missing:\n%s", out);
}

/* Host and device memory on one chart (Python holding host buffers while
 * it fills the CUDA double): the legend tells each thing drawn by its
 * colour, so no line (width 3) shares one with a mark (width 2: the
 * allocation ticks, the failed request, the device's total). */
static void test_lines_and_marks_apart(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_LIBRARY_PATH='%s/test/doubles' LD_PRELOAD='%s' GMP_WATCHDOG=0; "
             "exec python3 -c 'import ctypes\n"
             "cudart = ctypes.CDLL(\"libcudart.so.13\")\n"
             "host, p = [], ctypes.c_void_p()\n"
             "while cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0:\n"
             "    host.append(bytearray(8 << 20))\n'",
             paths.build, paths.preload);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    char b[1024], svg[600];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", b, sizeof b));
    snprintf(svg, sizeof svg, "%s/two.svg", paths.scratch);
    const char *drawn = plot_output(b, svg);
    char lines[8][16], marks[8][16], colour[16];
    int nl = 0, nm = 0, width;
    for (const char *r = drawn; (r = strstr(r, "stroke=\"#")) != NULL; r++) {
        const char *row_end = strstr(r, "/>\n<text x=\"");
        if (row_end && memchr(r, '<', (size_t)(row_end - r)))
            row_end = NULL; /* another element's end: this one has a <title> */
        const char *text_end = row_end ? strchr(row_end + 3, '>') : NULL;
        /* a legend row's swatch: its text is plain, where a label on the
         * chart has a colour of its own (fill) */
        if (sscanf(r, "stroke=\"%15[#0-9a-f]\" stroke-width=\"%d\" stroke-dasharray=", colour,
                   &width) != 2 || !text_end || strncmp(text_end - 14, "font-size=\"11\">", 15))
            continue;
        if (width == 3 && nl < 8)
            snprintf(lines[nl++], sizeof lines[0], "%s", colour);
        else if (width == 2 && nm < 8)
            snprintf(marks[nm++], sizeof marks[0], "%s", colour);
    }
    if (nl < 2 || nm < 3 || !strstr(drawn, ">host in use</text>") ||
        !strstr(drawn, ">cuda:0 in use</text>"))
        fail_msg("want the host's and cuda:0's lines and three marks in the legend, found %d "
                 "and %d:\n%s", nl, nm, drawn);
    for (int i = 0; i < nl; i++)
        for (int k = 0; k < nm; k++)
            if (!strcmp(lines[i], marks[k]))
                fail_msg("a line and a mark share %s in the legend:\n%s", lines[i], drawn);
}

static void test_no_events_still_plots(void **state)
{
    (void)state;
    char cmd[4096], svg[600];
    snprintf(svg, sizeof svg, "%s/empty.svg", paths.scratch);
    snprintf(cmd, sizeof cmd, "%s plot '%s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' "
                              "-o '%s' && xmllint --noout '%s' && grep -c polyline '%s'",
             inspect_path(), getenv("GMP_TEST_FIXTURES") ? getenv("GMP_TEST_FIXTURES")
                                                          : "test/fixtures",
             svg, svg, svg);
    sh(cmd);
    assert_string_equal(out, "0\n");
}

/* Events with times of +-1e308 and a count of 1e300 (a hostile bundle):
 * validate refuses them, and plot draws what is left, in time (the axes
 * once stretched to infinity and never finished). */
static void test_absurd_values_end(void **state)
{
    (void)state;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "b='%s/absurd/oom_dump_20260303T120000Z_12345_cuda_1' && rm -rf '%s/absurd' && "
             "mkdir -p '%s/absurd' && cp -r '%s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' "
             "\"$b\" && python3 -c 'import json, sys\n"
             "ev = [{\"event_type\": \"alloc\", \"timestamp\": t, \"bytes_in_use\": u, "
             "\"backend\": \"cpu\", \"device_id\": -1, \"size\": 1}\n"
             "      for t, u in ((1e308, 1), (-1e308, 5), (100.0, 1e300), (101.0, 7), (102.0, 9))]\n"
             "json.dump(ev, open(sys.argv[1] + \"/events.json\", \"w\"))\n"
             "for f, k in ((\"manifest.json\", \"event_count\"), (\"metadata.json\", "
             "\"captured_event_count\")):\n"
             "    d = json.load(open(sys.argv[1] + \"/\" + f)); d[k] = 5\n"
             "    json.dump(d, open(sys.argv[1] + \"/\" + f, \"w\"))' \"$b\" && "
             "timeout 20 %s plot \"$b\" -o '%s/absurd.svg' && grep -c '<polyline' '%s/absurd.svg'; "
             "%s validate \"$b\" >/dev/null 2>&1; echo validate=$?; %s validate \"$b\" 2>&1 | "
             "grep -c 'timestamp is not a time since 1970'",
             paths.scratch, paths.scratch, paths.scratch,
             getenv("GMP_TEST_FIXTURES") ? getenv("GMP_TEST_FIXTURES") : "test/fixtures",
             inspect_path(), paths.scratch, paths.scratch, inspect_path(), inspect_path());
    sh(cmd);
    assert_string_equal(out, "1\nvalidate=1\n1\n");
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "plot");
    make_bundle();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_html_renders),
        cmocka_unit_test(test_host_limit_and_pressure),
        cmocka_unit_test(test_lines_and_marks_apart),
        cmocka_unit_test(test_no_events_still_plots),
        cmocka_unit_test(test_absurd_values_end),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
