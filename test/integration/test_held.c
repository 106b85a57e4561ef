/*
 * test_held.c — a bundle says which line held the memory, the first
 * question a user asks.  Python that keeps every batch's 4 MiB buffer until
 * a large request fails under RLIMIT_AS: show's "Held by:" names the line
 * that made them and the line that called it, with the bytes the program
 * itself says it kept (within 5%), read at the failure, as is the RSS the
 * bundle reports; its limit verdict adds up (in use + asked > limit), and
 * the plot draws the request on the address space the call found, so the
 * box crosses the RLIMIT_AS line; the torch-snapshot export carries the
 * same Python frames for memory_viz.  A C program that holds memory
 * through three call paths of one malloc wrapper: the wrapper and each
 * caller, bytes exact, and a stack switched under its frames, as
 * greenlet's are, read only as far as it can be.  A Python run killed by SIGKILL under gmp-run: the
 * same line from its ring.  Under CPython 3.9 to 3.13 where pyenv has them,
 * and Debian unstable's 3.14 and 3.15; and a program that says it is 3.15
 * but lays its frames out otherwise runs unharmed, its frames not read.
 * And a stand-in of PyTorch's CPU allocator (an installed `torch` whose
 * tensors come from posix_memalign, 64-byte aligned, and whose failure
 * raises PyTorch's own words): the user's line, not the package's.  And
 * device memory alike: Python calling cudaMalloc (the CUDA double, 1 GiB)
 * until it fails is held by its own line; and a failed device call that
 * the program catches is named by its line, with no traceback printed.
 * "Held by:" is of the memory that ran out: a device's failure by the
 * device's line though the host holds more, a host's by the host's line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* The Python loop: extract_features (line 4) makes each batch, main (line
 * 10) keeps it; the join (line 12) asks for more than the limit leaves.
 * It prints what it kept when the MemoryError comes, then lets it go.
 * (A format string: its percent sign doubled.) */
#define BATCHES                                                                            \
    "import sys\n"                                                                         \
    "\n"                                                                                   \
    "def extract_features(step):\n"                                                        \
    "    return bytearray(4 << 20)\n"                                                      \
    "\n"                                                                                   \
    "def main():\n"                                                                        \
    "    feats = []\n"                                                                     \
    "    try:\n"                                                                           \
    "        for step in range(1000):\n"                                                   \
    "            feats.append(extract_features(step))\n"                                   \
    "            if step %% 25 == 24:\n"                                                    \
    "                b\"\".join(feats)\n"                                                  \
    "    except MemoryError:\n"                                                            \
    "        print(\"kept\", sum(len(f) for f in feats))\n"                                \
    "        raise\n"                                                                      \
    "\n"                                                                                   \
    "main()\n"

/* "Held by: N.N MiB in K allocation(s) made at SITE": the MiB (from MiB
 * or GiB), the count and the site (up to a ", of" that follows it). */
static void held_by(const char *shown, double *mib, unsigned *count, char *site, size_t cap)
{
    const char *line = strstr(shown, "\nHeld by:          ");
    char text[600] = "", unit[4] = "";
    if (!line ||
        sscanf(line, "\nHeld by: %lf %3s in %u allocation(s) made at %599[^\n]", mib, unit,
               count, text) != 4 ||
        (strcmp(unit, "MiB") && strcmp(unit, "GiB")))
        fail_msg("show says nothing held the memory:\n%s", shown);
    if (!strcmp(unit, "GiB"))
        *mib *= 1024;
    char *of = strstr(text, ", of ");
    if (of)
        *of = '\0';
    snprintf(site, cap, "%s", text);
}

/* What a bundle's show says held the memory. */
typedef struct held_answer {
    char bundle[1024], site[600];
    double mib;
    unsigned count;
    const char *shown;
} held_answer;

/* script's one bundle (it exits want_exit), and what its show says held
 * the memory. */
static void held_after(const char *script, int want_exit, held_answer *h)
{
    int code = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    if (code != want_exit)
        fail_msg("exit %d, not %d; stdout: %s; stderr: %s", code, want_exit, out, err);
    json_decref(only_bundle_file(paths.dumps, "metadata.json", h->bundle, sizeof h->bundle));
    h->shown = show_output(h->bundle);
    held_by(h->shown, &h->mib, &h->count, h->site, sizeof h->site);
}

/* python (a path) runs BATCHES under a 1 GiB address-space limit. */
static void batches_under(const char *python)
{
    char script[4096];
    snprintf(script, sizeof script,
             "cat > '%s/x.py' <<'EOF'\n" BATCHES "EOF\n"
             "ulimit -v 1048576; LD_PRELOAD=\"%s\" GMP_WATCHDOG=0 exec %s '%s/x.py'",
             paths.scratch, paths.preload, python, paths.scratch);
    held_answer h;
    held_after(script, 1, &h);
    unsigned long long kept = 0;
    if (sscanf(out, "kept %llu", &kept) != 1 || kept < (100ull << 20))
        fail_msg("%s kept too little to tell: %s%s", python, out, err);
    /* the host as the failure found it: the batches still resident, not
     * what was left when the bundle was written at exit */
    json_t *md = bundle_file(h.bundle, "metadata.json");
    long long rss = json_int(json_object_get(json_object_get(md, "host_state"), "process"),
                             "vm_rss");
    json_decref(md);
    if (rss < (long long)(kept / 10 * 9))
        fail_msg("%s: RSS %lld in the bundle, below the %llu bytes held at the failure", python,
                 rss, kept);
    if (strcmp(h.site, "x.py:4 in extract_features (called from x.py:10)"))
        fail_msg("%s: held by \"%s\", not x.py:4 (called from x.py:10):\n%s", python, h.site,
                 h.shown);
    double truth = (double)kept / (1 << 20);
    if (h.mib < truth * 0.95 || h.mib > truth * 1.05 || h.count != kept / (4u << 20))
        fail_msg("%s: held %.1f MiB in %u, the program kept %.1f MiB:\n%s", python, h.mib,
                 h.count, truth, h.shown);
    /* the limit, as the failing call found the address space */
    if (!strstr(h.shown, "1. a host limit was reached (the address-space limit)\n"
                         "     evidence: RLIMIT_AS is 1.0 GiB; ") ||
        !strstr(h.shown, "was mapped (VmSize) when it failed, and "))
        fail_msg("%s: the limit is not the first cause, as the failing call saw it:\n%s",
                 python, h.shown);
}

/* `show` of bundle opens each of its files once, however many of its
 * parts read them (the held-by line, the top sites, the failure's site,
 * the Python stack): strace's record of its opens. */
static void expect_show_reads_each_file_once(const char *bundle)
{
    char trace[600], text[1 << 16];
    snprintf(trace, sizeof trace, "%s/show.strace", paths.scratch);
    /* LeakSanitizer cannot run under ptrace: a sanitizer build's gmp-inspect
     * is counted without it */
    char asan[1024];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sdetect_leaks=0", was ? was : "",
             was && *was ? ":" : "");
    const char *argv[] = {"/usr/bin/strace", "-f", "-qq", "-e", "trace=open,openat", "-o", trace,
                          "/usr/bin/env", asan, inspect_path(), "show", bundle, NULL};
    if (access(argv[0], X_OK) != 0) {
        print_message("[     SKIP ] no strace to count show's opens (mk/ensure-deps.sh "
                      "installs it)\n");
        return;
    }
    if (exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)) != 0)
        fail_msg("strace, show: %s", err);
    FILE *f = fopen(trace, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    static const char *const files[] = {"manifest.json", "metadata.json", "events.json",
                                        "environment.json", "stacks.json", "modules.json",
                                        "allocations.json", "python_traceback.txt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", files[i]);
        int opens = 0;
        for (const char *p = text; (p = strstr(p, quoted)) != NULL; p++)
            opens++;
        if (opens > 1)
            fail_msg("show opened %s %d times:\n%s", files[i], opens, text);
    }
}

static void test_python_line_held_the_batches(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    batches_under("python3");
    char bundle[1024], pickle[1200];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    expect_show_reads_each_file_once(bundle);
    snprintf(pickle, sizeof pickle, "%s/snapshot.pickle", paths.scratch);
    const char *argv[] = {inspect_path(), "export", bundle, "--format", "torch-snapshot", "-o",
                          pickle, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
    /* the plot: the request's box reaches above the RLIMIT_AS line */
    char svg[1200];
    snprintf(svg, sizeof svg, "%s/plot.svg", paths.scratch);
    const char *drawn = plot_output(bundle, svg);
    /* the limit's line: its dashes, then its label */
    const char *dashes = strstr(drawn, "\" stroke=\"#ff7f0e\" stroke-width=\"2\" "
                                     "stroke-dasharray=\"8,3\"/>\n<text");
    const char *limit_line = dashes;
    while (limit_line && limit_line > drawn && strncmp(limit_line, "<line ", 6))
        limit_line--;
    const char *box = strstr(drawn, "fill=\"#d62728\" fill-opacity"); /* the request's */
    while (box && box > drawn && strncmp(box, "<rect ", 6))
        box--;
    double limit_y = -1, box_y = -1, box_h = 0;
    if (!dashes || !strstr(dashes, ">RLIMIT_AS 1.0 GiB</text>") || !box ||
        sscanf(limit_line, "<line x1=\"%*d\" y1=\"%lf\"", &limit_y) != 1 ||
        sscanf(strstr(box, " y=\""), " y=\"%lf\" width=\"16\" height=\"%lf\"", &box_y,
               &box_h) != 2 ||
        !strstr(drawn, "failed request (box, on VmSize)"))
        fail_msg("the plot has no RLIMIT_AS line or request box on VmSize:\n%.3000s", drawn);
    if (!(box_y < limit_y && box_y + box_h > limit_y))
        fail_msg("the request box (y %.1f to %.1f) does not cross the limit (y %.1f)", box_y,
                 box_y + box_h, limit_y);
    /* (run_script empties the dump directory: last) */
    char script[2400];
    snprintf(script, sizeof script,
             "python3 -c 'import pickle, sys\n"
             "d = pickle.load(open(sys.argv[1], \"rb\"))\n"
             "fs = [(f[\"filename\"].rsplit(\"/\", 1)[-1], f[\"line\"], f[\"name\"])\n"
             "      for t in d[\"device_traces\"] for e in t if e[\"action\"] == \"alloc\"\n"
             "      for f in e[\"frames\"] if f[\"filename\"].endswith(\".py\")]\n"
             "print(fs[:2])' '%s'",
             pickle);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    assert_string_equal(out, "[('x.py', 4, 'extract_features'), ('x.py', 10, 'main')]\n");
}

/* The same under each CPython pyenv has, 3.9 to 3.13, and Debian
 * unstable's 3.14 and 3.15 that `make test` fetches (mk/debian-python.sh):
 * each lays out its frames its own way. */
static void test_every_cpython_layout(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    glob_t g;
    size_t from_pyenv;
    if (!other_cpythons(&g, paths.build, &from_pyenv)) {
        printf("SKIP no other CPython here (pyenv's, or Debian unstable's that "
               "mk/debian-python.sh fetches): only the system python3 was tried\n");
        return;
    }
    for (size_t i = 0; i < g.gl_pathc; i++)
        batches_under(g.gl_pathv[i]);
    printf("tried %zu CPython version(s) from pyenv, %zu from Debian unstable\n", from_pyenv,
           g.gl_pathc - from_pyenv);
    globfree(&g);
}

/* A program that says it is CPython 3.15 but keeps its innermost frame
 * elsewhere, as its own _Py_DebugOffsets say; where 3.15 keeps it lies a
 * pointer into a page never mapped.  Its frames are not read by 3.15's
 * line: it runs as it runs bare, and leaves no bundle (a walk by the wrong
 * offsets crashed it with SIGSEGV). */
static void test_interpreter_laid_out_otherwise(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script, "LD_PRELOAD=\"%s\" exec %s/test/programs/fake_cpython",
             paths.preload, paths.build);
    int rc = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
    if (rc != 0 || strcmp(out, "allocated 4\n") || err[0])
        fail_msg("exit %d, out \"%s\", err:\n%s", rc, out, err);
    assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
}

/* An allocation on a stack whose words above its frames are not frames
 * (greenlet's, under gevent): the walk stops where it cannot read, the
 * program runs as it does bare (libgcc's unwinder read address 1, or
 * through a stale %rbp, and the program died of SIGSEGV), and the site is
 * what could be read: the allocating function and its caller. */
static void test_switched_stack_is_not_read_through(void **state)
{
    (void)state;
    static const char *const modes[] = {"pc", "fp"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        char script[4096];
        snprintf(script, sizeof script,
                 "rm -rf '%s'/*; LD_PRELOAD=\"%s\" exec %s/test/programs/switched_stack %s",
                 paths.dumps, paths.preload, paths.build, modes[i]);
        int rc = exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err));
        if (rc != 0 || strcmp(out, "allocated 4194304, then 2^62: refused\n"))
            fail_msg("%s: exit %d, out \"%s\", err:\n%s", modes[i], rc, out, err);
        glob_t g;
        char pattern[1200];
        snprintf(pattern, sizeof pattern, "%s/oom_dump_*", paths.dumps);
        if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc != 1)
            fail_msg("%s: not one bundle; err:\n%s", modes[i], err);
        const char *shown = show_output(g.gl_pathv[0]);
        if (!strstr(shown, "Held by:          4.0 MiB in 1 allocation(s) made at allocate_there "
                           "(switched_stack.c:") ||
            !strstr(shown, "called from switch_and_call\n"))
            fail_msg("%s: %s", modes[i], shown);
        globfree(&g);
    }
}

/* One malloc wrapper, three callers: each caller is its own site. */
static void test_native_call_paths(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script, "LD_PRELOAD=\"%s\" exec %s/test/programs/held_paths",
             paths.preload, paths.build);
    held_answer h;
    held_after(script, 1, &h);
    if (h.mib != 96.0 || h.count != 12 || !strstr(h.site, "keep (held_paths.c:") ||
        !strstr(h.site, "), called from keep_batches"))
        fail_msg("held by %.1f MiB in %u at \"%s\":\n%s", h.mib, h.count, h.site, h.shown);
    static const char *const lines[] = {
        "\nHeld:             19 live allocation(s), 116.0 MiB (host 116.0 MiB)\n",
        "    96.0 MiB in 12 allocation(s)  keep (held_paths.c:",
        "    12.0 MiB in 3 allocation(s)  keep (held_paths.c:",
        "     8.0 MiB in 4 allocation(s)  keep (held_paths.c:",
        "), called from keep_cache\n",
        "), called from keep_scratch\n",
    };
    expect_all_said(h.shown, lines, sizeof lines / sizeof *lines);
}

/* main itself holds the memory (make demo's grow-heap): held by main, and
 * nothing said of who called it (it said "called from _start"). */
static void test_main_holds_it(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[4096];
    snprintf(script, sizeof script,
             "ulimit -v 400000; LD_PRELOAD=\"%s\" exec %s/examples/grow-heap", paths.preload,
             paths.build);
    held_answer h;
    held_after(script, 1, &h);
    if (strncmp(h.site, "main (grow-heap.c:", 18) || strstr(h.site, "called from"))
        fail_msg("held by %.1f MiB in %u at \"%s\":\n%s", h.mib, h.count, h.site, h.shown);
}

/* python3 -c program under gmp-run, SIGKILLed at its end, nothing written
 * by the process: the bundle recovered from its ring says `count`
 * allocations of about `mib` MiB at `site` hold the memory. */
static void killed_holds(const char *program, unsigned count, double mib, const char *site)
{
    char script[4096];
    snprintf(script, sizeof script,
             "LD_PRELOAD=\"%s\" exec %s/gmp-run -- python3 -c '"
             "import os, signal\n%s"
             "os.kill(os.getpid(), signal.SIGKILL)\n'",
             paths.preload, paths.build, program);
    held_answer h;
    held_after(script, 128 + 9, &h);
    if (h.count != count || h.mib < mib - 1 || h.mib > mib + 1 || strcmp(h.site, site))
        fail_msg("held by %.1f MiB in %u at \"%s\":\n%s", h.mib, h.count, h.site, h.shown);
}

/* The line that holds the memory, though 700 other sites (more stacks and
 * Python frames than the ring has records for) came first. */
static void test_killed_names_the_line_from_its_ring(void **state)
{
    (void)state;
    killed_holds("def extract_features(step):\n"
                 "    return bytearray(4 << 20)\n"
                 "exec(\"\".join(\"def made%d(): return bytearray(1 << 20)\\n\" % i\n"
                 "             for i in range(700)), globals())\n"
                 "for i in range(700): globals()[\"made%d\" % i]()\n"
                 "feats = [extract_features(step) for step in range(50)]\n",
                 50, 200, "<string>:3 in extract_features (called from <string>:7)");
}

/* Its one large allocation the first event of all: the event makes the
 * ring after its Python frames were named, so the ring has them only from
 * the copy of what was known when it was made. */
static void test_killed_first_event_names_its_line(void **state)
{
    (void)state;
    killed_holds("def load_shard():\n"
                 "    return bytearray(96 << 20)\n"
                 "shard = load_shard()\n",
                 1, 96, "<string>:3 in load_shard (called from <string>:4)");
}

/* An installed package (site-packages/torch) standing in for PyTorch's
 * CPU allocator: torch.empty(n) is posix_memalign(64, 4n) as c10 asks, and
 * a failure raises what PyTorch raises. */
#define TORCH_STANDIN                                                                      \
    "import ctypes\n"                                                                      \
    "_libc = ctypes.CDLL(None)\n"                                                          \
    "class Tensor:\n"                                                                      \
    "    def __init__(self, p, nbytes):\n"                                                 \
    "        self.p, self.nbytes = p, nbytes\n"                                            \
    "    def __del__(self):\n"                                                             \
    "        _libc.free(self.p)\n"                                                         \
    "def empty(n):\n"                                                                      \
    "    p = ctypes.c_void_p()\n"                                                          \
    "    if _libc.posix_memalign(ctypes.byref(p), 64, ctypes.c_size_t(4 * n)):\n"          \
    "        raise RuntimeError(\"[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator:"  \
    " can't allocate memory: you tried to allocate %%d bytes. Error code 12 (Cannot"       \
    " allocate memory)\" %% (4 * n))\n"                                                     \
    "    ctypes.memset(p, 0, 4 * n)\n"                                                     \
    "    return Tensor(p, 4 * n)\n"

static void test_torch_cpu_standin(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    char script[8192];
    snprintf(script, sizeof script,
             "mkdir -p '%s/site-packages/torch'; "
             "cat > '%s/site-packages/torch/__init__.py' <<'EOF'\n" TORCH_STANDIN "EOF\n"
             "cat > '%s/t.py' <<'EOF'\n"
             "import torch\n"
             "\n"
             "def activations(step):\n"
             "    return torch.empty(1 << 20)\n"
             "\n"
             "kept = []\n"
             "try:\n"
             "    while True:\n"
             "        kept.append(activations(len(kept)))\n"
             "except RuntimeError:\n"
             "    print(\"kept\", sum(t.nbytes for t in kept))\n"
             "    raise\n"
             "EOF\n"
             "ulimit -v 1048576; PYTHONPATH='%s/site-packages' LD_PRELOAD=\"%s\" GMP_WATCHDOG=0 "
             "exec python3 '%s/t.py'",
             paths.scratch, paths.scratch, paths.scratch, paths.scratch, paths.preload,
             paths.scratch);
    held_answer h;
    held_after(script, 1, &h);
    unsigned long long kept = 0;
    if (sscanf(out, "kept %llu", &kept) != 1 || kept < (100ull << 20))
        fail_msg("the stand-in kept too little to tell: %s", out);
    double truth = (double)kept / (1 << 20);
    if (strcmp(h.site, "t.py:4 in activations (called from t.py:9)") || h.mib < truth * 0.95 ||
        h.mib > truth * 1.05)
        fail_msg("held by %.1f MiB at \"%s\"; the program kept %.1f MiB:\n%s", h.mib, h.site, truth,
                 h.shown);
    if (!strstr(h.shown, "DefaultCPUAllocator: can't allocate memory"))
        fail_msg("PyTorch's words are not the bundle's:\n%s", h.shown);
}

static void test_device_memory_held_by_a_python_line(void **state)
{
    (void)state;
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_LIBRARY_PATH='%s/test/doubles' LD_PRELOAD=\"%s\"; exec python3 -c '"
             "import ctypes\n"
             "cudart = ctypes.CDLL(\"libcudart.so.13\")\n"
             "def load_weights(step):\n"
             "    p = ctypes.c_void_p()\n"
             "    if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)):\n"
             "        raise RuntimeError(\"CUDA out of memory\")\n"
             "    return p\n"
             "kept = []\n"
             "while True:\n"
             "    kept.append(load_weights(len(kept)))\n'",
             paths.build, paths.preload);
    held_answer h;
    held_after(script, 1, &h);
    if (h.count != 16 || h.mib != 1024.0 ||
        strcmp(h.site, "<string>:5 in load_weights (called from <string>:10)") ||
        !strstr(h.shown, "\nHeld:             16 live allocation(s), 1.0 GiB (cuda:0 1.0 GiB)\n"))
        fail_msg("held by %.1f MiB in %u at \"%s\":\n%s", h.mib, h.count, h.site, h.shown);
}

/* "Held by:" is about the memory that ran out.  One process holds 512 MiB
 * of host memory at one line and 256 MiB of device memory at another:
 * when the device runs out, the device's line (not the host's larger one);
 * when the host's malloc fails (under a 2 GiB RLIMIT_AS), the host's line
 * (not the device's). */
#define BOTH_HELD(fail)                                                                            \
    "import ctypes\n"                                                                              \
    "cudart = ctypes.CDLL(\"libcudart.so.13\")\n"                                                  \
    "libc = ctypes.CDLL(\"libc.so.6\")\n"                                                          \
    "libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]\n"             \
    "def load_weights():\n"                                                                        \
    "    p = ctypes.c_void_p()\n"                                                                  \
    "    assert not cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(DEVICE_MIB << 20))\n"       \
    "    return p\n"                                                                               \
    "def read_batch():\n"                                                                          \
    "    return bytearray(HOST_MIB << 20)\n"                                                       \
    "weights = [load_weights() for _ in range(4)]\n"                                               \
    "batches = [read_batch() for _ in range(4)]\n"                                                 \
    fail

static void held_in(const char *limit, const char *sizes, const char *program,
                    const char *want_site, double want_mib)
{
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_LIBRARY_PATH='%s/test/doubles' LD_PRELOAD=\"%s\" GMP_WATCHDOG=0; "
             "cat > '%s/both.py' <<'EOF'\n%s%sEOF\n"
             "%s exec python3 '%s/both.py'",
             paths.build, paths.preload, paths.scratch, sizes, program, limit, paths.scratch);
    held_answer h;
    held_after(script, 1, &h);
    if (strcmp(h.site, want_site) || h.mib != want_mib || h.count != 4)
        fail_msg("held by %.1f MiB in %u at \"%s\", not %.1f MiB in 4 at \"%s\":\n%s", h.mib,
                 h.count, h.site, want_mib, want_site, h.shown);
}

static void test_held_in_the_memory_that_ran_out(void **state)
{
    (void)state;
    held_in("", "DEVICE_MIB, HOST_MIB = 64, 128\n",
            BOTH_HELD("p = ctypes.c_void_p()\n"
                      "assert not cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(2 << 30))\n"),
            "both.py:8 in load_weights (called from both.py:12)", 256.0);
    skip_under_preload_sanitizer("`ulimit -v`");
    held_in("ulimit -v 2097152;", "DEVICE_MIB, HOST_MIB = 128, 16\n",
            BOTH_HELD("assert libc.malloc(4 << 30) or libc.malloc(4 << 30)\n"),
            "both.py:11 in read_batch (called from both.py:13)", 64.0);
}

/* A device allocation that fails in a Python function and is caught: no
 * traceback is printed (and the call let go of the GIL), yet the bundle
 * names the failing line from the call's own Python frames, in show's
 * "Failed at" and Python stack and in triage's signature; and "Held by:"
 * says the device held none of ours, rather than name a host line. */
static void test_failed_device_call_names_its_line(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof script,
             "export LD_LIBRARY_PATH='%s/test/doubles' LD_PRELOAD=\"%s\" GMP_WATCHDOG=0; "
             "cat > '%s/batch.py' <<'EOF'\n"
             "import ctypes\n"
             "cudart = ctypes.CDLL(\"libcudart.so.13\")\n"
             "def try_batch(gib):\n"
             "    p = ctypes.c_void_p()\n"
             "    if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(int(gib * (1 << 30)))):\n"
             "        raise MemoryError(\"no room for the batch\")\n"
             "    return p\n"
             "for scale in (1.5, 1.2):\n"
             "    try:\n"
             "        try_batch(scale)\n"
             "    except MemoryError:\n"
             "        pass\n"
             "x = try_batch(0.5)\n"
             "EOF\n"
             "exec python3 '%s/batch.py'",
             paths.build, paths.preload, paths.scratch, paths.scratch);
    assert_int_equal(exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)),
                     0);
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "metadata.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    if (!strstr(shown, "\nFailed at:        batch.py:5 in try_batch\n") ||
        !strstr(shown, "\nPython stack:     ") || !strstr(shown, "/batch.py:5 in try_batch") ||
        !strstr(shown, "/batch.py:10 in <module>") ||
        !strstr(shown, "\nHeld by:          no live allocation on cuda:0 at the failure\n"))
        fail_msg("the failing line is not named, or show names a holder the device had not:\n%s",
                 shown);
    const char *argv[] = {inspect_path(), "triage", paths.dumps, NULL};
    assert_int_equal(exit_code_of(run_capture(argv, out, sizeof out, err, sizeof err)), 0);
    if (!strstr(out, " at batch.py:5 in try_batch\n"))
        fail_msg("triage's signature has no line of the program:\n%s", out);
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "held");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_line_held_the_batches),
        cmocka_unit_test(test_every_cpython_layout),
        cmocka_unit_test(test_interpreter_laid_out_otherwise),
        cmocka_unit_test(test_native_call_paths),
        cmocka_unit_test(test_main_holds_it),
        cmocka_unit_test(test_switched_stack_is_not_read_through),
        cmocka_unit_test(test_killed_names_the_line_from_its_ring),
        cmocka_unit_test(test_killed_first_event_names_its_line),
        cmocka_unit_test(test_torch_cpu_standin),
        cmocka_unit_test(test_device_memory_held_by_a_python_line),
        cmocka_unit_test(test_failed_device_call_names_its_line),
        cmocka_unit_test(test_held_in_the_memory_that_ran_out),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
