/*
 * inspect.h — shared pieces of gmp-inspect: loading bundles safely (no
 * symlinked files, size caps, jansson's depth limit), formatting, and the
 * entry point of each verb.  gmp-inspect only reads; it never changes a
 * bundle or a live ring.
 */
#ifndef GMP_INSPECT_H
#define GMP_INSPECT_H

#include "verdict.h"

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes shared by every verb. */
enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

/* Every file but events.json is parsed whole, and jansson's document of it
 * takes about nine times its text: the cap is several times the largest
 * our writer makes (allocations.json lists at most 10000, about 2 MiB) and
 * keeps a hostile file's cost bounded.  events.json grows with the run; it
 * is indexed instead (events.c) and costs about its own size. */
#define SMALL_FILE_MAX (16u << 20)
/* The most a file's parse may cost (load_json_at refuses a denser file, or
 * one that would take more than ten times its size): the five files a
 * bundle's readers parse whole stay within 256 MB together. */
#define JSON_COST_MAX ((size_t)48 << 20)
#define EVENTS_FILE_MAX (512u << 20)

/* events.c: events.json as read, and where each event starts in it. */
typedef struct event_list {
    char *text;
    size_t len;
    uint32_t *at; /* the file is at most EVENTS_FILE_MAX, under 4 GiB */
    size_t n, cap;
    size_t first_non_object; /* SIZE_MAX when every event is a JSON object */
    size_t failure;          /* the failed request's event; SIZE_MAX: none */
} event_list;

#define BUNDLE_FILES_KEPT 8
typedef struct bundle {
    char path[4096];
    char name[4096];
    int dirfd;
    json_t *manifest, *metadata, *environment;
    event_list events; /* empty unless asked for */
    struct kept_file {  /* bundle_json's and bundle_text's: each file read once */
        char name[32];
        json_t *doc;    /* NULL: absent or unreadable, and not asked again */
        char *text;     /* a text file's bytes and a NUL (bundle_text), or NULL */
        size_t len;
    } kept[BUNDLE_FILES_KEPT];
    int kept_count;
} bundle;

/* Open a bundle directory and load manifest.json and metadata.json
 * (environment.json and events.json when asked).  On failure, err holds a
 * sentence and -1 is returned; the bundle is closed. */
int bundle_open(bundle *b, const char *path, int want_env, int want_events,
                char *err, size_t err_cap);
void bundle_close(bundle *b);
/* FILE of the bundle (stacks.json, modules.json, allocations.json,
 * environment.json, ...), parsed the first time it is asked for and kept
 * until bundle_close: every verb's parts ask, and each file is opened
 * once.  Borrowed; NULL when absent or unreadable. */
json_t *bundle_json(bundle *b, const char *file);
/* A text file of the bundle (python_traceback.txt), read once the same way:
 * its bytes, NUL-terminated, and their count in *len; NULL when absent. */
const char *bundle_text(bundle *b, const char *file, size_t *len);

/* Read and parse one JSON file inside a directory fd: refuses symlinks,
 * non-regular files and files over max_bytes. */
json_t *load_json_at(int dirfd, const char *name, size_t max_bytes, char *err,
                     size_t err_cap);

/* Read one regular file of at most max_bytes inside a directory fd (no
 * symlink, no FIFO): a NUL-terminated copy to free, its length in *len. */
char *read_file_at(int dirfd, const char *name, size_t max_bytes, size_t *len,
                   char *err, size_t err_cap);

/* events.c: index dirfd's events.json (an array of events, or an object
 * with an "events" array), each event parsed once to be checked and the
 * failed request's event found (metadata's failed_request, may be NULL); a
 * sentence in err and -1 when it cannot be read or is not valid JSON. */
int events_load_at(int dirfd, event_list *l, json_t *failed_request, char *err,
                   size_t err_cap);
/* How many events lead up to the failure, it included (all when none is
 * known): what happened after it, a teardown's frees, is no evidence. */
size_t events_until_failure(const event_list *l);
/* Event i parsed (a new reference, cleaned for a terminal unless
 * inspect_raw_json); NULL past the end or without memory. */
json_t *event_at(const event_list *l, size_t i);
/* Event i as the file holds it, on one line: its text without the spaces
 * between tokens, an integer past INT64_MAX as its digits (not the real
 * jansson reads), characters past ASCII as \u escapes; -1 past the end or
 * on a write error. */
int event_print_raw(const event_list *l, size_t i, FILE *out);
void events_free(event_list *l);
/* Every event (or the first end) in turn, each released at the end of its
 * turn (leave the loop early only after json_decref(ev)). */
#define event_foreach_until(l, end, i, ev) \
    for ((i) = 0; (i) < (end) && ((ev) = event_at((l), (i)), 1); json_decref(ev), (i)++)
#define event_foreach(l, i, ev) event_foreach_until(l, (l)->n, i, ev)

/* Calls fn for every bundle directory at or under path (8 levels deep, no
 * symlink followed, hidden names skipped); trailing slashes are trimmed. */
void for_each_bundle(char *path, void (*fn)(const char *bundle, void *arg), void *arg);
/* The rank (manifest, else RANK and friends in environment.json) and the
 * host of a bundle opened with its environment; NULL when unknown. */
const char *bundle_rank(bundle *b);
const char *bundle_host(bundle *b);
/* A Slurm task's "JOB.STEP" (the manifest's, else environment.json's) in
 * out, or NULL outside Slurm. */
const char *bundle_job(bundle *b, char *out, size_t cap);

/* Field helpers that tolerate any JSON type. */
const char *jstr(json_t *obj, const char *key);        /* NULL unless a string */
int jint(json_t *obj, const char *key, int64_t *out);  /* 0 when an integer */
/* wide_sizes.c: sizes to 2^64-1, past jansson's int64.  Reading, an integer
 * in (2^63-1, 2^64-1] becomes a marked string (json_is_wide_size) and one
 * past that a real; ju64 reads all three, and json_text_exact writes the
 * marked strings back as the integers they were. */
/* 0 when a size: an integer of 0 or more, marked or not, or a real. */
int ju64(json_t *obj, const char *key, uint64_t *out);
/* A size as a JSON value ju64 and json_text_exact read back exactly. */
json_t *json_u64(uint64_t v);
/* 1 when v is a size past INT64_MAX as the reader marks it; *out (if not
 * NULL) its value. */
int json_is_wide_size(json_t *v, uint64_t *out);
/* text with each integer past int64 marked or widened (a new buffer; text
 * is freed), else text itself.  *len is updated. */
char *json_text_widen_integers(char *text, size_t *len);
/* Where the integer of a number token at text[i] ends when the token is one
 * that json_text_widen_integers widened (its ".0" follows), else 0. */
size_t json_widened_integer_end(const char *text, size_t len, size_t i);
/* Where a marked string token at text[i] ends (past its closing quote), its
 * digits from *digits_at; 0 when there is none. */
size_t json_wide_size_end(const char *text, size_t len, size_t i, size_t *digits_at);
/* json_dumps, each marked size as its integer (free it); json_dumpf so. */
char *json_text_exact(json_t *v, size_t flags);
int json_dumpf_exact(json_t *v, FILE *f, size_t flags);

void fmt_bytes(uint64_t v, char *out, size_t cap);

/* clean.c: a bundle's strings for a terminal or a log, control characters
 * shown visibly (\n, \x1b, \u009b); out always ends in a NUL and never
 * holds half an escape.  Returns the length written. */
size_t clean_text(const char *s, char *out, size_t cap);
size_t clean_text_n(const char *s, size_t n, char *out, size_t cap);
/* At most max bytes of s, cleaned, then "..." when cut. */
void print_clean(FILE *f, const char *s, size_t max);
/* Every string and key of a document, cleaned in place. */
void json_clean_strings(json_t *v);
/* Set by a verb that prints JSON: documents are loaded as they are (the
 * encoder escapes them); otherwise load_json_at cleans what it loads. */
extern int inspect_raw_json;
/* The one way a verb prints a JSON document (list, triage, watch, info):
 * two-space indent, ASCII only, then a newline; releases doc.  0, or -1
 * (doc NULL, or stdout failed). */
int print_json(json_t *doc);
/* output.c: -o FILE, a new or regular file written to a 0600 temporary
 * file beside it and renamed over it when whole; a device written where it
 * is; a symlink followed only when the caller or root owns it; a FIFO
 * only when a reader has it open.  out_open gives the stream (NULL, errno set, when it cannot be
 * had); out_commit closes and renames it, 0 or -1 (nothing left behind). */
typedef struct out_file {
    FILE *f;
    int direct; /* written where it is: nothing to rename */
    char tmp[4096], path[4096];
} out_file;
FILE *out_open(out_file *o, const char *path);
int out_commit(out_file *o);
/* The code point of the UTF-8 character c (len bytes) when it is an
 * invisible format character clean_text escapes (bidi controls,
 * zero-width characters, U+2028/U+2029, the BOM), else 0. */
unsigned invisible_format_char(const unsigned char *c, size_t len);

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
 * none of ours; nothing when no site is known. */
void print_held_by(bundle *b);
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
/* The module of modules.json that holds a runtime address (the highest load
 * bias at or below it): its path, and the bias in *bias; NULL when none. */
const char *module_of(json_t *mods, uint64_t at, uint64_t *bias);
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
int failure_frame(bundle *b, json_t *mods, const char **path, uint64_t *offset,
                  const char **raw);
/* interpreter.c: the interpreter an object is (the Perl interpreter,
 * LuaJIT, the Erlang VM (BEAM)...), or NULL; interpreter_site: when no
 * frame of frames is the program's own and one is an interpreter's, "inside
 * the Perl interpreter, running grow.pl" (the script from env's recorded
 * command line), and 1. */
const char *interpreter_of(const char *path);
int interpreter_site(json_t *frames, json_t *mods, json_t *env, char *out, size_t cap);
/* The failure's site named for a person: the Python frame of the program's
 * own, else that native frame symbolised (libdw) or module+offset; -1 when
 * the bundle says nothing of it. */
int name_failure_site(bundle *b, char *out, size_t cap);

/* kind.c: what a bundle records: metadata.json's "kind" (verdict.h), or,
 * for a bundle written before it had one, what its facts decide, by the
 * same function the writer used. */
gmp_verdict bundle_kind_of(const bundle *b);
/* How the bundle's process ended, in words ("exited 0: it went on after the
 * failure", "killed by SIGSEGV", ...); NULL when the bundle does not say
 * (written before outcomes were, or by the Python recorder alone). */
const char *outcome_words(const bundle *b, char *out, size_t cap);

/* event_lines.c: one event on a line ("> " and a note for the failed
 * request); python_stack.c: python_traceback.txt, innermost frame first,
 * and its innermost frame, "grow.py:4 in load_batch" (0, or -1: none). */
void print_event(json_t *ev, int is_failure);
/* Where an event happened: "host", or "cuda:0" (plot's lines, export's counters). */
void event_where(json_t *ev, char *out, size_t cap);
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
void print_python_stack(bundle *b);
/* The failure's Python site ("train.py:42 in step"): the innermost frame of
 * the program's own (SITE_PROGRAM), else the innermost of a library's
 * (SITE_LIBRARY); SITE_UNKNOWN when the bundle has no Python stack. */
int python_site(bundle *b, char *out, size_t cap);
/* The same of a stack's "python" frames (stacks.json: file, line,
 * function), and the next frame of the program's own outward: "x.py:10 in
 * extract_features (called from x.py:17)". */
int python_frames_site(json_t *frames, char *out, size_t cap);
/* The stack of stacks.json (an array) whose id is id, or NULL. */
json_t *stack_with_id(json_t *stacks, int64_t id);

/* diagnose.c: the likely causes of the bundle's OOM, most certain first,
 * each with its evidence (ANSI bold and red when colour). */
void diagnose(bundle *b, int colour);
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
    const char *flag;           /* "-Xmx", or NULL */
    const char *variable;       /* "PYPY_GC_MAX": sets the limit itself, or NULL */
} runtime_words;
const runtime_words *runtime_words_of(bundle *b);
void runtime_words_evidence(bundle *b, const runtime_words *w, const char *then, char *out,
                            size_t cap);

int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_triage(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
/* ring_source.c: a live ring as a verb's operand (a ring file, or a PID's
 * newest ring in the run directory).  is_ring_target: the operand names
 * one; ring_path_of: its file in path, 0, or -1 with a line said, -2 when
 * the operand is neither (a usage error); ring_copy: its header's pid and
 * command and its events, copied once (free ->events), with sites its stack
 * and module records as stacks.json and modules.json hold them (release
 * ->stacks and ->mods); 0 or -1 with a line. */
typedef struct ring_copy_t {
    struct gmp_event *events;
    size_t n;
    int pid;
    char cmdline[1024];
    json_t *stacks, *mods; /* NULL unless asked for, or none */
} ring_copy_t;
int is_ring_target(const char *target);
int ring_path_of(const char *verb, const char *target, char *path, size_t cap);
int ring_copy(const char *verb, const char *path, int with_sites, ring_copy_t *out);
/* export.c: every bundle at or under the operands that are not rings, in
 * the order of their names (their times): a list to free with
 * export_paths_free, NULL without memory.  A process's name on a viewer:
 * "command (pid N, rank R, on HOST)", or a ring's "command (pid N, live
 * ring)"; without the pid where the viewer shows it. */
char **export_bundle_paths(char **operands, int n, size_t *count);
void export_paths_free(char **paths, size_t n);
void export_process_label(bundle *b, int with_pid, char *out, size_t cap);
void export_ring_label(const ring_copy_t *r, int with_pid, char *out, size_t cap);
/* A ring's record as events.json holds it (a new reference; NULL without
 * memory). */
json_t *ring_event_json(const struct gmp_event *e);
/* export_trace.c: every bundle at or under paths as Trace Event JSON on f. */
int export_trace(char **paths, int npaths, FILE *f);
/* export_torch.c: the bundles and rings as one PyTorch memory snapshot (a
 * pickle) on f; with several processes, which device slot is whose on map. */
int export_torch(char **paths, int npaths, FILE *f, FILE *map);
/* show of a leak report (leak_report.c): its exit status, or -1 when path is not one. */
int show_leak_report(const char *path);

/* True when argv holds -h or --help. */
/* args.c: a verb's arguments, through getopt_long.  A verb fills verb,
 * usage and its options (short ones as getopt spells them, long ones a
 * table ending in {0}; --help/-h are every verb's), then calls
 * verb_option until it returns -1; the operands are then argv[optind..].
 * VERB_DONE_OK (help printed) and VERB_DONE_USAGE (a mistake said) end the
 * verb: return VERB_EXIT(r). */
typedef struct verb_args {
    const char *verb;
    void (*usage)(FILE *f);
    const char *shortopts;
    const struct option *longopts;
    int started;
    struct option table[16];
    char shorts[40];
} verb_args;
#define VERB_DONE_OK (-2)
#define VERB_DONE_USAGE (-3)
#define VERB_EXIT(r) ((r) == VERB_DONE_OK ? EXIT_OK : EXIT_USAGE)
int verb_option(verb_args *a, int argc, char **argv);
/* How many operands, when from min to max; else VERB_DONE_USAGE, said. */
int verb_operands(verb_args *a, int argc, int min, int max);
/* "gmp-inspect VERB: <what>" and the usage on stderr; VERB_DONE_USAGE. */
int verb_misuse(verb_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
