/*
 * test_metrics.c — Prometheus textfiles: GMP_PROM_FILE written by the
 * preload while a process runs (python3 holding 104 MiB in 9 threads: its
 * live bytes) and at its exit (the CUDA double: bytes, peaks, counts, one
 * episode opened and recovered; calls from threads that changed device or
 * exited), an exec while the file is rewritten, and `gmp-inspect metrics`
 * over bundles.  Every file passes a strict reading of the text format, and
 * `promtool check metrics` where Debian's prometheus package can be
 * installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];
static int have_promtool = -1;

/* The text format, strictly: HELP and TYPE comments, then samples
 * name{label="value",...} number, names and labels well-formed, and no
 * series (name and labels) twice. */
static void check_format(const char *text)
{
    char copy[1 << 16];
    static char seen[1 << 16];
    size_t seen_len = 0;
    seen[0] = '\n';
    seen[1] = '\0';
    snprintf(copy, sizeof copy, "%s", text);
    int samples = 0;
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(l, "# HELP gpumemprof_", 18) || !strncmp(l, "# TYPE gpumemprof_", 18)) {
            if (!strncmp(l, "# TYPE", 6) && !strstr(l, " gauge") && !strstr(l, " counter"))
                fail_msg("bad TYPE: %s", l);
            continue;
        }
        const char *p = l;
        if (strncmp(p, "gpumemprof_", 11))
            fail_msg("not ours: %s", l);
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        if (*p++ != '{')
            fail_msg("no labels: %s", l);
        while (*p != '}') {
            while (isalnum((unsigned char)*p) || *p == '_')
                p++;
            if (p[0] != '=' || p[1] != '"')
                fail_msg("bad label: %s", l);
            p += 2;
            while (*p && *p != '"')
                p += *p == '\\' ? 2 : 1;
            if (*p++ != '"')
                fail_msg("unterminated label: %s", l);
            if (*p == ',')
                p++;
            else if (*p != '}')
                fail_msg("bad label list: %s", l);
        }
        p++;
        char series[1200], needle[1210];
        snprintf(series, sizeof series, "%.*s", (int)(p - l), l);
        snprintf(needle, sizeof needle, "\n%s\n", series);
        if (strstr(seen, needle))
            fail_msg("series twice: %s\n%s", series, text);
        if (seen_len + strlen(series) + 3 < sizeof seen) {
            snprintf(seen + seen_len + 1, sizeof seen - seen_len - 1, "%s\n", series);
            seen_len += strlen(series) + 1;
        }
        if (*p++ != ' ' || !isdigit((unsigned char)*p))
            fail_msg("bad value: %s", l);
        while (isdigit((unsigned char)*p))
            p++;
        if (*p)
            fail_msg("trailing text: %s", l);
        samples++;
    }
    assert_true(samples > 0);
}

static void promtool(const char *file)
{
    if (have_promtool < 0) {
        const char *argv[] = {"/bin/sh", "-c",
                              "command -v promtool || { sh mk/install-optional.sh prometheus "
                              ">/dev/null; command -v promtool; }",
                              NULL};
        have_promtool = exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)) == 0;
        if (!have_promtool)
            print_message("promtool cannot be installed here: the strict reading only\n");
    }
    if (!have_promtool)
        return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", file);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    if (exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("promtool: %s%s", out, err);
}

static void read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("no %s", path);
    buf[fread(buf, 1, cap - 1, f)] = '\0';
    fclose(f);
}

static long long value_of(const char *text, const char *series)
{
    const char *p = strstr(text, series);
    if (!p)
        fail_msg("no %s in:\n%s", series, text);
    p = strchr(p, '}');
    return p ? strtoll(p + 2, NULL, 10) : -1;
}

/* The CUDA double's gpu_oom in MODE under the preload, exiting 0, and the
 * metrics file NAME it left at exit, read into text and checked for form;
 * returns the file's path. */
static const char *cuda_double_metrics(const char *mode, const char *name, char *text,
                                       size_t cap)
{
    static char file[700];
    char script[6144];
    snprintf(file, sizeof file, "%s/%s", paths.scratch, name);
    snprintf(script, sizeof script,
             "export GMP_PROM_FILE='%s' GMP_WATCHDOG=0 LD_PRELOAD='%s'; "
             "exec %s/test/gpu/gpu_oom_cuda %s",
             file, paths.preload, paths.build, mode);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)), 0);
    read_file(file, text, cap);
    check_format(text);
    return file;
}

static void test_preload_textfile(void **state)
{
    (void)state;
    static char text[1 << 16];
    char script[4096];
    /* while it runs: python3 holding 40 MiB in its main thread and 8 MiB
     * in each of 8 threads still alive (each counts in its own slot), the
     * file rewritten every second. Python reads its own file until a
     * rewrite shows at least what it holds (at most 30 s: a loaded machine
     * may take seconds to start it, so no fixed sleep), prints the last
     * one read, and only then lets its threads go.  A run still going
     * after 45 s prints every thread's stack and exits (a CI run once
     * passed the 60 s that kill it, and said nothing of where it was). */
    snprintf(script, sizeof script,
             "export GMP_PROM_FILE='%s/live_%%p.prom' GMP_PROM_INTERVAL_S=1; "
             "LD_PRELOAD='%s' python3 -c 'import faulthandler, os, re, threading, time\n"
             "faulthandler.dump_traceback_later(45, exit=True)\n"
             "keep = [bytearray(8 << 20) for _ in range(5)]\n"
             "done = threading.Event()\n"
             "held = threading.Semaphore(0)\n"
             "def hold():\n"
             "    block = bytearray(8 << 20)\n"
             "    held.release()\n"
             "    done.wait()\n"
             "threads = [threading.Thread(target=hold) for _ in range(8)]\n"
             "for t in threads: t.start()\n"
             "for t in threads: held.acquire()\n"
             "path = \"%s/live_%%d.prom\" %% os.getpid()\n"
             "text = \"\"\n"
             "deadline = time.monotonic() + 30\n"
             "while time.monotonic() < deadline:\n"
             "    try: text = open(path).read()\n"
             "    except OSError: pass\n"
             "    m = re.search(r\"gpumemprof_bytes_in_use\\{[^}]*\\} (\\d+)\", text)\n"
             "    if m and int(m.group(1)) >= 104 << 20: break\n"
             "    time.sleep(0.1)\n"
             "print(text, end=\"\")\n"
             "done.set()'",
             paths.scratch, paths.preload, paths.scratch);
    int status = run_script(&paths, script, text, sizeof text, err, sizeof err);
    if (exit_code_of(status) != 0)
        fail_msg("python3 exited with status %d:\n%s", exit_code_of(status), err);
    check_format(text);
    long long host = value_of(text, "gpumemprof_bytes_in_use{");
    if (host < 104ll << 20)
        fail_msg("live host bytes %lld, not the 40 MiB of the main thread and 64 of the others",
                 host);

    /* at exit: the CUDA double, an episode opened and recovered */
    promtool(cuda_double_metrics("retry-recover", "gpu.prom", text, sizeof text));
    assert_int_equal(value_of(text, "gpumemprof_bytes_in_use{pid"), 1ll << 30);
    char *cuda = strstr(text, "gpumemprof_allocations_total{");
    assert_non_null(cuda);
    assert_non_null(strstr(cuda, "backend=\"cuda\",device=\"0\"} 5\n"));
    assert_non_null(strstr(text, "backend=\"cuda\",device=\"0\"} 2\n")); /* frees */
    assert_int_equal(value_of(text, "gpumemprof_oom_episodes_total{"), 1);
    assert_int_equal(value_of(text, "gpumemprof_recovered_episodes_total{"), 1);
    assert_int_equal(value_of(text, "gpumemprof_bundles_written_total{"), 0);
}

/* Calls are counted per thread while a thread stays on one device: they
 * must all be there at exit, from threads that turned to another device
 * and threads that have exited, and the main thread's still running. */
static void test_calls_counted_across_threads_and_devices(void **state)
{
    (void)state;
    static char text[1 << 16];
    cuda_double_metrics("device-threads", "threads.prom", text, sizeof text);
    const char *want[] = {
        "gpumemprof_allocations_total{", "device=\"0\"} 8000\n",
        "gpumemprof_allocations_total{", "device=\"1\"} 8003\n",
        "gpumemprof_frees_total{", "device=\"0\"} 8000\n",
        "gpumemprof_frees_total{", "device=\"1\"} 8001\n",
        "gpumemprof_bytes_in_use{", "device=\"1\"} 2097152\n",
        "gpumemprof_bytes_in_use{", "device=\"0\"} 0\n",
    };
    for (int i = 0; i < 12; i += 2) {
        const char *family = strstr(text, want[i]);
        const char *end = family ? strstr(family, "\n# ") : NULL;
        const char *line = family ? strstr(family, want[i + 1]) : NULL;
        if (!line || (end && line > end))
            fail_msg("no %s...%s in:\n%s", want[i], want[i + 1], text);
    }
}

/* A process that execs while its thread rewrites the file: strace holds
 * every rename for 0.3 s, python3 (and a child it forked) waits until its
 * temporary file is there, then execs a program without the preload.  The
 * image that went must not leave its temporary file behind: the exec waits
 * for the rewrite.  Both pids' files are there, and no temporary one. */
static void test_exec_mid_rewrite(void **state)
{
    (void)state;
    static char script[16384];
    char dir[600];
    snprintf(dir, sizeof dir, "%s/exec", paths.scratch);
    snprintf(script, sizeof script,
             "rm -rf '%s' && mkdir '%s' && py=$(python3 -c 'import sys; print(sys.executable)') "
             "&& GMP_PROM_FILE='%s/m_%%p.prom' GMP_PROM_INTERVAL_S=1 "
             "strace -f -qq -o /dev/null -e trace=rename,renameat,renameat2 "
             "-e inject=rename,renameat,renameat2:delay_enter=300000 "
             "env LD_PRELOAD='%s' \"$py\" -c 'import os, sys, time\n"
             "def exec_mid_rewrite():\n"
             "    tmp = \"%s/m_%%d.prom.%%d.tmp\" %% (os.getpid(), os.getpid())\n"
             "    for _ in range(500):\n"
             "        if os.path.exists(tmp): os.execve(\"/bin/true\", [\"true\"], {})\n"
             "        time.sleep(0.01)\n"
             "    os._exit(3)\n"
             "child = os.fork()\n"
             "if child == 0: exec_mid_rewrite()\n"
             "_, status = os.waitpid(child, 0)\n"
             "if status: sys.exit(4)\n"
             "exec_mid_rewrite()'; echo \"status $?\"; ls '%s'",
             dir, dir, dir, paths.preload, dir, dir);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    if (!strstr(out, "status 0\n"))
        fail_msg("no rewrite was seen under way (3: by the parent, 4: by its child): %s%s", out,
                 err);
    if (strstr(out, ".tmp\n"))
        fail_msg("a temporary file left by an exec:\n%s", out);
    int files = 0;
    for (const char *l = strstr(out, "status 0\n"); (l = strstr(l, ".prom\n")); l++)
        files++;
    if (files != 2)
        fail_msg("not a file for each of the two pids:\n%s", out);
}

static void test_metrics_from_bundles(void **state)
{
    (void)state;
    static char text[1 << 16];
    char script[4096], file[700];
    snprintf(script, sizeof script,
             "export GMP_WATCHDOG=0 LD_PRELOAD='%s'; %s/test/gpu/gpu_oom_cuda until-oom 1",
             paths.preload, paths.build);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    const char *argv[] = {inspect_path(), "metrics", paths.dumps, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, text, sizeof text, err, sizeof err)), 0);
    check_format(text);
    snprintf(file, sizeof file, "%s/bundles.prom", paths.scratch);
    write_file(file, text, strlen(text));
    promtool(file);
    assert_int_equal(value_of(text, "gpumemprof_peak_bytes{"), 1ll << 30);
    assert_non_null(strstr(text, "backend=\"cuda\",device=\"1\"} 4\n")); /* allocations */
    assert_int_equal(value_of(text, "gpumemprof_oom_episodes_total{"), 1);
    assert_int_equal(value_of(text, "gpumemprof_bundles_written_total{"), 1);
    /* a backend named past 15 bytes and a host past 127: still one series
     * per name and label set (the lookup once compared the whole name with
     * the kept, cut one, and wrote a series per event) */
    snprintf(script, sizeof script,
             "python3 -c 'import glob, json, os, sys\n"
             "b = glob.glob(sys.argv[1] + \"/oom_dump_*\")[0]\n"
             "for name, edit in ((\"manifest.json\", lambda d: d.update(host=\"h\" * 200)),\n"
             "                   (\"events.json\", lambda d: [e.update(backend=\"cuda_with_a_long_name\")\n"
             "                                            for e in (d if isinstance(d, list) else d[\"events\"])])):\n"
             "    d = json.load(open(os.path.join(b, name)))\n"
             "    edit(d)\n"
             "    json.dump(d, open(os.path.join(b, name), \"w\"))' '%s'",
             paths.dumps);
    const char *edit[] = {"/bin/sh", "-c", script, NULL};
    assert_int_equal(exit_code_of(run_capture(edit, out, sizeof out, err, sizeof err)), 0);
    assert_int_equal(exit_code_of(run_capture(argv, text, sizeof text, err, sizeof err)), 0);
    check_format(text);
    write_file(file, text, strlen(text));
    promtool(file);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "metrics");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preload_textfile),
        cmocka_unit_test(test_calls_counted_across_threads_and_devices),
        cmocka_unit_test(test_exec_mid_rewrite),
        cmocka_unit_test(test_metrics_from_bundles),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
