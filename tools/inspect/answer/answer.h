/*
 * answer.h — gmp-inspect's second room: what a bundle means, read from the
 * first room (read.h).  Its kind as the writer decided it (kind.c), the
 * likely causes (diagnose.c; growth before the failure, window_growth.c),
 * the site that held the memory and the failure's own (sites.c, named
 * through libdw by symbols.c, whose a frame is by frames.c and
 * interpreter.c, the Python side by python_stack.c), a runtime's own words
 * and the limit they name (runtime_words.c), memory that grew and stayed
 * (leak_scan.c), PyTorch's blocks (torch_blocks.c), a leak report's
 * (leak_report.c).  Answers are said in words on stdout or handed back as
 * values; nothing here draws, exports or parses options.
 */
#ifndef GMP_INSPECT_ANSWER_H
#define GMP_INSPECT_ANSWER_H

#include "gpumemprof.h"
#include "read.h"
#include "verdict.h"

/* Counts of bytes past this (1 PiB) are a hostile file's, not a process's:
 * a rule weighs them as nothing rather than overflow on them. */
#define HOSTILE_BYTES ((int64_t)1 << 50)

/* sites.c: the top allocation sites by live bytes, symbolised (libdw);
 * name_site: one stack's site, its innermost frame of the program's own
 * (outside the C library, the loader, an interpreter and us), as
 * "fill (gpu_oom.c:70)" or "module+0x1983"; SITE_PROGRAM when it found
 * one, SITE_LIBRARY when every frame is a library's (named so). */
void print_top_sites(bundle *b);
/* The first answer: "Held by: 500.0 MiB in 125 allocation(s) made at
 * x.py:2 in extract_features (called from x.py:8)", the site that held the
 * most at the failure (allocations.json) in the memory that ran out (the
 * failed request's device, or the host; every kind where the bundle names
 * no failed request); "no live allocation on cuda:0" when that device held
 * none of ours; nothing when no site is known.  labelled: show's line
 * ("Held by:" and a newline), else the bare sentence. */
void print_held_by(FILE *f, bundle *b, int labelled);
/* That site alone, as print_held_by names it, into out; -1 when none is
 * known. */
int name_holder_site(bundle *b, char *out, size_t cap);
/* torch_blocks.c: torch_blocks.json's largest live blocks, when the bundle
 * has it. */
void print_torch_blocks(bundle *b);
/* allocations.json or leaks.json of b: totals, then the top sites;
 * 0 when the file is absent or unreadable. */
int print_live_file(bundle *b, const char *file, const char *label, const char *what,
                    const char *sites_heading);
enum { SITE_UNKNOWN, SITE_LIBRARY, SITE_PROGRAM }; /* what name_site found */
/* symbols.c: the function (fn), source file and line of offset in the ELF
 * at path, when path is a regular file of this machine outside the bundle
 * at dirfd; 0 when the function is known, else -1 (fn and file "", line
 * 0).  Each ELF is opened once; symbols_release closes them. */
int symbolise(int dirfd, const char *path, uint64_t offset, char *fn, size_t fn_cap,
              char *file, size_t file_cap, int *line);
void symbols_release(void);
int name_site(bundle *b, int64_t stack, char *out, size_t cap);
/* frames.c: a frame in the C library, the loader, an interpreter
 * (interpreter_of), a GPU runtime or us: never the program's site. */
int is_library_frame(const char *path);
/* A function of a language runtime's allocation machinery compiled into
 * the program (std::, alloc::, caml_...): where the runtime noticed the
 * failure, not the program's site; _frame: the frame at offset in path. */
int runtime_allocation_name(const char *fn);
int runtime_allocation_frame(int dirfd, const char *path, uint64_t offset);
/* "fill (gpu_oom.c:70)" (libdw), "Grow.grow (grow.ml:2)", else
 * "gpu_oom_cuda+0x1983". */
void name_frame(int dirfd, const char *path, uint64_t offset, char *out, size_t cap);
/* The failing call's innermost frame of the program's own (else its first
 * known one): its module's path and offset (SITE_PROGRAM or SITE_LIBRARY),
 * or, with no module known, the raw address in *raw (SITE_UNKNOWN). */
int failure_frame(bundle *b, const module_table *mods, const char **path, uint64_t *offset,
                  const char **raw);
/* interpreter.c: the interpreter an object is (the Perl interpreter,
 * LuaJIT, the Erlang VM (BEAM)...), or NULL; interpreter_site: when no
 * frame of frames is the program's own and one is an interpreter's, "inside
 * the Perl interpreter, running grow.pl" (the script from env's recorded
 * command line), and 1. */
const char *interpreter_of(const char *path);
int interpreter_site(json_t *frames, const module_table *mods, json_t *env, char *out,
                     size_t cap);
/* The failure's site named for a person: the Python frame of the program's
 * own, else that native frame symbolised (libdw) or module+offset; -1 when
 * the bundle says nothing of it. */
int name_failure_site(bundle *b, char *out, size_t cap);

/* kind.c: what a bundle records: metadata.json's "kind" (verdict.h), or,
 * for a bundle written before it had one, what its facts decide, by the
 * same function the writer used. */
gmp_verdict bundle_kind_of(bundle *b);
/* How the bundle's process ended, in words ("exited 0: it went on after the
 * failure", "killed by SIGSEGV", ...); NULL when the bundle does not say
 * (written before outcomes were, or by the Python recorder alone). */
const char *outcome_words(bundle *b, char *out, size_t cap);

/* runs.c: the bundles of each distributed run (torchrun's run, a Slurm
 * step, the ranks one launcher started), for triage's verdict per run.
 * runs_add: b's part in its run (1, its run's key in key), 0 when it is
 * in none (key ""), -1 without memory; site is its failure's
 * (name_failure_site), path its bundle's.
 * runs_order: members by time, runs by their first death (runs with none
 * last).  run_words.c: run_heading, "torchrun run 7f3a, 3 ranks on a and b";
 * run_verdict, "rank 1 ran out of host memory first at ... (ENOMEM in
 * malloc at train.py:29 in step); ranks 0 and 2 ended 0.9 s later
 * (SIGTERM, not of memory)". */
#define RUN_HOSTS_NAMED 4
#define RUN_KEY_SIZE 320
typedef struct run_member {
    long rank;      /* -1: none known */
    long long pid;  /* -1: none known */
    double at;      /* the failure's time, else the bundle's (s since 1970) */
    gmp_verdict kind;
    char signal[12]; /* what ended it ("SIGTERM"), "" none known */
    int ended;       /* from a note of its end alone (no bundle of its own) */
    int exit_status; /* with ended and no signal: its exit status */
} run_member;
typedef struct run_story {
    char key[RUN_KEY_SIZE], title[200];
    long world;                 /* the largest world size named, -1 none */
    char hosts[RUN_HOSTS_NAMED][64];
    int host_count;             /* hosts named; RUN_HOSTS_NAMED + 1: more than those */
    run_member *members;
    size_t n, cap;
    long bundles;               /* members with a bundle (not an end noted alone) */
    long deaths;                /* members that died of memory */
    struct {                    /* the earliest of them, in full */
        run_member member;
        double at;
        char memory[64], reason[64], api[48], site[200];
        char *bundle; /* its path (heap; runs_free frees it) */
    } first;
} run_story;
typedef struct run_set {
    run_story *runs;
    size_t n, cap;
    index_table index; /* runs by key, until runs_order */
} run_set;
int runs_add(run_set *s, bundle *b, const char *path, gmp_verdict kind, const char *site,
             char key[RUN_KEY_SIZE]);
/* runs_add_end: a note of how a rank ended ("PID RANK EXIT SIGNAL NS KEY",
 * as gmp-run keeps them beside the bundles in run_ends_*.txt), after the
 * bundles: a member of its run unless a bundle of that pid tells its end
 * already.  1 added, 0 not (another shape, or told), -1 without memory. */
int runs_add_end(run_set *s, const char *line);
/* The key of the run b belongs to in key (1), or "" (0). */
int run_key_of(bundle *b, char key[RUN_KEY_SIZE]);
void runs_order(run_set *s);
void runs_free(run_set *s);
void run_heading(const run_story *r, char *out, size_t cap);
void run_verdict(const run_story *r, char *out, size_t cap);
/* "2026-11-28T01:11:27.771Z" */
void run_time_text(double at, char *out, size_t cap);

/* python_stack.c: python_traceback.txt, innermost frame first, and its
 * innermost frame, "grow.py:4 in load_batch" (0, or -1: none). */
#define PYTHON_FRAMES_READ 256
typedef struct python_stack {
    char *text; /* the file, cut into the strings below */
    struct { const char *file, *fn; long line; } frames[PYTHON_FRAMES_READ]; /* innermost first */
    size_t n, dropped;
} python_stack;
/* The first stack of python_traceback.txt, else the failing call's own
 * Python frames (stacks.json): 0 with st filled (free st->text), -1 when
 * the bundle has neither. */
int python_stack_read(bundle *b, python_stack *st);
/* The custom metadata's "jupyter_cells": each notebook cell's file's hash
 * and its execution count (NULL: none); a frame's place, "/path/x.py:10",
 * or a notebook cell's "In [2], line 10". */
json_t *notebook_cells(bundle *b);
void python_frame_place(bundle *b, const char *file, long line, char *out, size_t cap);
void print_python_stack(bundle *b);
/* The failure's Python site ("train.py:42 in step"): the innermost frame of
 * the program's own (SITE_PROGRAM), else the innermost of a library's
 * (SITE_LIBRARY); SITE_UNKNOWN when the bundle has no Python stack. */
int python_site(bundle *b, char *out, size_t cap);
/* The same of a stack's "python" frames (stacks.json: file, line,
 * function), and the next frame of the program's own outward: "x.py:10 in
 * extract_features (called from x.py:17)". */
int python_frames_site(json_t *frames, json_t *cells, char *out, size_t cap);

/* printed_stack.c: the failure's site from the frames a runtime printed
 * after its OOM line (printed_stack.txt: the JVM's, V8's), named as
 * python_site names one ("Heap.java:5 in Heap.fill"), with its answers. */
int printed_stack_site(bundle *b, char *out, size_t cap);

/* window_growth.c: growth on the failed request's device (backend, device;
 * -1 the host) before the failure, as diagnose words it: a sentence of what
 * (into what) and of the evidence (into evidence, with the site of what
 * stayed when one site made it); the bytes it grew by, 0 when the events
 * show no such growth (what and evidence then untouched). */
int64_t window_growth(bundle *b, const char *backend, int64_t device, char *what,
                      size_t what_cap, char *evidence, size_t evidence_cap);
/* diagnose.c: the likely causes of the bundle's OOM, most certain first,
 * each with its evidence (ANSI bold and red when colour). */
void diagnose(bundle *b, int colour);
/* The same causes, each handed to fn in turn (evidence "" where none). */
void diagnose_each(bundle *b, void (*fn)(const char *what, const char *evidence, void *arg),
                   void *arg);
/* what_happened.c: the headline ("the process ran out of host memory
 * (ENOMEM)"), one sentence, no newline; reason and backend as the bundle
 * names them (metadata, else manifest). */
void what_happened(FILE *f, bundle *b, const char *reason, const char *backend);
/* The request the framework's message (exception_message) states ("Tried
 * to allocate 79.66 GiB") when the failed call of `piece` bytes was one
 * piece of it (expandable segments map it 20 MiB at a time), else -1. */
int64_t framework_whole_request(json_t *md, int64_t piece);

/* runtime_words.c: a language runtime's own out-of-memory words in the
 * bundle's message (the JVM's OutOfMemoryError kinds, V8's heap limit, Go,
 * C++'s std::bad_alloc, Rust, PHP, GHC, SBCL, Mono, R, Lua, Ruby, Perl...),
 * or NULL.  runtime_words_evidence: the words
 * quoted with what followed them (then: ", then aborted"), and where the
 * flag that sets the runtime's limit was set, or that nothing set it. */
typedef struct runtime_words {
    const char *marker, *words; /* both in the message (words NULL: any) */
    const char *runtime;        /* "the JVM" */
    const char *what;           /* "its Java heap was full" */
    const char *memory;         /* "the JVM's Java heap"; NULL: the system's memory */
    const char *flag;           /* "-Xmx", or NULL */
    const char *variable;       /* "PYPY_GC_MAX": sets the limit itself, or NULL */
    int own_heap;               /* the memory is a heap the runtime manages: no site held it */
} runtime_words;
const runtime_words *runtime_words_of(bundle *b);
/* The pool whose worker loop metadata.json's caught_by names
 * ("multiprocessing.pool.worker": "multiprocessing's Pool"). */
const char *worker_loop_owner(const char *caught_by);
/* Whether w tells a pool worker's error that this process raised again
 * (PyTorch's DataLoader, multiprocessing's Pool, ProcessPoolExecutor). */
int runtime_words_relay_worker(const runtime_words *w);
/* worker_bundle.c: the bundle of that worker, beside b: 0 with its path
 * in out, else -1. */
int worker_bundle_of(bundle *b, char *out, size_t cap);
/* Where the runtime's words say it ran out, into out: PHP ends a fatal
 * error with " in /srv/app/grow.php on line 4", "grow.php:4"; 0, or -1
 * where they name no place. */
int runtime_words_site(bundle *b, char *out, size_t cap);
void runtime_words_evidence(bundle *b, const runtime_words *w, const char *then, char *out,
                            size_t cap);

/* show of a leak report (leak_report.c): its exit status, or -1 when path is not one. */
int show_leak_report(const char *path);


/* leak_scan.c: every allocation and free up to the failure, as a series of
 * what each site (stack > 0, or 0: no stack) and each device ("host",
 * "cuda:0") held, judged over the window (its last seconds, 0: all); the
 * sites that grew named and merged by name, largest first; suggestions in
 * words.  The clock of a series is the events' order, not their time:
 * quarters of activity, so that a pause (a first CUDA call, a checkpoint)
 * is no flat stretch; stamp[k] is event k's time, for the window in
 * seconds.  NULL without memory; leaks_free releases it. */
#define LEAK_TRACKS_MAX 512
#define LEAK_SITES_MAX 32
typedef struct leak_track {
    int is_device;
    int64_t stack;
    char device[48];
    double *t, *v;
    size_t n, cap;
    double held;
    gmp_growth g;
} leak_track;
typedef struct leak_site {
    char where[400];
    double increase, held;
    int severity;
} leak_site;
typedef struct leak_scan {
    leak_track tr[LEAK_TRACKS_MAX];
    int ntr;
    live_set live; /* each live block's series (mark) */
    uint64_t allocs, frees;
    double *stamp;
    size_t nstamp, stamp_cap;
    double window_s;
    leak_site sites[LEAK_SITES_MAX];
    int nsites;
    json_t *suggestions; /* an array of strings */
} leak_scan;
leak_scan *leaks_find(bundle *b, double window);
/* The seed's leak-detection result (detected, severity,
 * memory_increase_mb, time_window_seconds, suggestions) with the sites and
 * devices behind it: a new reference. */
json_t *leaks_result(const leak_scan *s);
void leaks_free(leak_scan *s);

#endif
