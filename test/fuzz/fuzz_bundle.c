/*
 * fuzz_bundle.c — libFuzzer harness for gmp-inspect's bundle reader: the
 * input is a bundle, its files separated by lines "--8<-- NAME" (NAME one
 * of the files a bundle or a leak report may hold), written into a scratch
 * bundle directory; then validate, show (and --json), events --json, triage (text, json,
 * junit, markdown), diff, leaks, plot, metrics and export (trace-json,
 * torch-snapshot) read it as they would a hostile bundle from another
 * machine.  Each must return (0, 1
 * or 3) without a crash, a leak, or a hang.  The input is also a string to
 * show (clean_text: no control character may come out) and a text to mask
 * credentials in.
 */
#include "bundle.h"
#include "redact.h"
#include "fuzz_common.h"
#include "export.h"
#include "verbs.h"

#include <stdint.h>

static const char *const names[] = {
    "manifest.json", "metadata.json", "events.json", "environment.json",
    "allocations.json", "stacks.json", "modules.json", "leaks.json", "python_traceback.txt",
    "printed_stack.txt",
};
#define NAMES (sizeof names / sizeof *names)

static char bundle_dir[512], leak_report[512], svg_out[512], html_out[512];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("bundle");
    snprintf(bundle_dir, sizeof bundle_dir, "%s/oom_dump_20260303T120000Z_42_cuda_1", fuzz_dir);
    snprintf(leak_report, sizeof leak_report, "%s/leak_report_20260303T120000Z_42_cuda_1",
             fuzz_dir);
    snprintf(svg_out, sizeof svg_out, "%s.svg", fuzz_dir); /* beside: emptied with it never */
    snprintf(html_out, sizeof html_out, "%s.html", fuzz_dir);
    return 0;
}

/* Split the input at "--8<-- NAME\n" lines into the files of dir. */
static void unpack(const char *dir, const uint8_t *data, size_t size)
{
    static const char mark[] = "--8<-- ";
    const char *p = (const char *)data, *end = p + size;
    const char *name = NULL;
    const char *body = p;
    mkdir(dir, 0700);
    for (;;) {
        const char *next = memmem(p, (size_t)(end - p), mark, sizeof mark - 1);
        const char *stop = next ? next : end;
        if (name) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            fuzz_write(path, body, (size_t)(stop - body));
        }
        if (!next)
            return;
        const char *nl = memchr(next, '\n', (size_t)(end - next));
        if (!nl)
            return;
        const char *n = next + sizeof mark - 1;
        name = NULL;
        for (size_t i = 0; i < NAMES; i++)
            if ((size_t)(nl - n) == strlen(names[i]) && !memcmp(n, names[i], strlen(names[i])))
                name = names[i];
        body = p = nl + 1;
    }
}

static void run(int (*verb)(int, char **), const char *a, const char *b, const char *c)
{
    char *argv[] = {(char *)"verb", (char *)a, (char *)b, (char *)c, NULL};
    int argc = 1 + (a != NULL) + (b != NULL) + (c != NULL);
    inspect_raw_json = 0; /* as in a fresh gmp-inspect */
    int rc = verb(argc, argv);
    if (rc != 0 && rc != 1 && rc != 3)
        abort(); /* a usage error here would be ours */
    fflush(stdout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_empty(fuzz_dir);
    unpack(bundle_dir, data, size);
    run(cmd_validate, bundle_dir, NULL, NULL);
    run(cmd_show, bundle_dir, NULL, NULL);
    run(cmd_show, bundle_dir, "--json", NULL);
    run(cmd_events, bundle_dir, "--json", NULL);
    run(cmd_triage, fuzz_dir, "--format", "json");
    run(cmd_triage, fuzz_dir, "--format", "junit");
    run(cmd_triage, fuzz_dir, "--format", "markdown");
    run(cmd_triage, fuzz_dir, NULL, NULL);
    run(cmd_diff, bundle_dir, bundle_dir, NULL);
    run(cmd_leaks, bundle_dir, "--json", NULL);
    run(cmd_leaks, bundle_dir, "--window", "5");
    run(cmd_plot, bundle_dir, "-o", svg_out);
    run(cmd_plot, bundle_dir, "-o", html_out);
    run(cmd_metrics, fuzz_dir, NULL, NULL);
    run(cmd_list, fuzz_dir, NULL, NULL);
    FILE *trace = fopen("/dev/null", "w");
    char *export_paths[] = {(char *)fuzz_dir}, *one[] = {(char *)bundle_dir};
    if (trace && (export_trace(export_paths, 1, trace) > 1 ||
                  export_torch(one, 1, trace, trace) > 1 ||
                  export_torch(export_paths, 1, trace, trace) > 1))
        abort();
    if (trace)
        fclose(trace);
    unpack(leak_report, data, size);
    run(cmd_show, leak_report, NULL, NULL);
    run(cmd_prune, fuzz_dir, "--max-dumps", "1"); /* last: it may remove the bundle */

    static char text[4096], shown[6 * sizeof text + 1];
    size_t n = size < sizeof text ? size : sizeof text;
    clean_text_n((const char *)data, n, shown, sizeof shown);
    for (const unsigned char *p = (const unsigned char *)shown; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
            abort(); /* a control character would reach a terminal */
    memcpy(text, data, n);
    gmp_redact_text(text, n);
    return 0;
}
