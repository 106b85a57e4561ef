/*
 * read.h — gmp-inspect's first room: bundles and rings read safely, and
 * nothing else.  A bundle is opened once (load.c: no symlinked file, size
 * caps, jansson's depth limit) and each of its files parsed the first time
 * a reader asks for it; events.json is indexed rather than held
 * (event_list.c); sizes past int64 keep their digits (wide_sizes.c);
 * strings are made inert for a terminal as they are loaded (clean.c); a
 * live ring is copied once (ring_source.c).  Every other room builds on
 * this one; it uses none of them.  gmp-inspect only reads: it never
 * changes a bundle or a live ring.
 */
#ifndef GMP_INSPECT_READ_H
#define GMP_INSPECT_READ_H

#include "gpumemprof.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes shared by every verb (and the parts that end one). */
enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

/* Every file but events.json is parsed whole, and jansson's document of it
 * takes about nine times its text: the cap is several times the largest
 * our writer makes (allocations.json lists at most 10000, about 2 MiB) and
 * keeps a hostile file's cost bounded.  events.json grows with the run; it
 * is indexed instead (event_list.c) and costs about its own size. */
#define SMALL_FILE_MAX (16u << 20)
/* The most a file's parse may cost (load_json_at refuses a denser file, or
 * one that would take more than ten times its size): the five files a
 * bundle's readers parse whole stay within 256 MB together. */
#define JSON_COST_MAX ((size_t)48 << 20)
#define EVENTS_FILE_MAX (512u << 20)

/* event_list.c: events.json as read, and where each event starts in it. */
typedef struct event_list {
    char *text;
    size_t len;
    uint32_t *at; /* the file is at most EVENTS_FILE_MAX, under 4 GiB */
    size_t n, cap;
    size_t first_non_object; /* SIZE_MAX when every event is a JSON object */
    size_t failure;          /* the failed request's event; SIZE_MAX: none */
} event_list;

/* facts.c: metadata.json's failed request, decoded once (bundle_failure):
 * the call that failed, as every reader reads it.  A field's has_ flag
 * says whether the bundle holds it (an integer; size up to 2^64-1). */
typedef struct bundle_failure {
    json_t *doc;        /* the object itself (borrowed): a reader of more */
    const char *api;    /* NULL when absent */
    int has_size, has_device, has_code, has_in_use, has_stack_id;
    uint64_t size;
    int64_t device;     /* -1 when absent: the host */
    int64_t code, in_use, stack_id;
    json_t *stack;      /* its return addresses, innermost first (an array), or NULL */
    json_t *timestamp;  /* as written: it names the failure's event */
} bundle_failure;
/* The code a call of API (its name as events and metadata.json spell it)
 * failed with, as its library names it ("ENOMEM",
 * "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"), into out; 0
 * when it is known by its number alone. */
int result_code_name(const char *api_name, int64_t code, char *out, size_t cap);

/* metadata.json's device_state, each device decoded once
 * (bundle_devices_of): as the collectors saw it when the process failed. */
typedef struct bundle_device {
    const char *backend, *name, *others_source; /* NULL when absent */
    int has_device, has_free, has_total, has_mine, has_others, has_others_count;
    int64_t device, free, total;
    int64_t mine;                 /* process_bytes: this process's */
    int64_t others, others_count; /* other_processes_bytes and _count */
} bundle_device;

/* metadata.json's host_state, decoded once (bundle_host_state_of): this process,
 * its memory cgroup, the machine, and RLIMIT_AS, when it was read. */
typedef struct bundle_host_state {
    const char *cgroup_limit_path; /* the ancestor whose limit binds, or NULL */
    int has_rss, has_hwm, has_vm_size, has_cgroup_current, has_cgroup_max, has_cgroup_kills,
        has_cgroup_kills_at_start, has_available, has_mem_total, has_swap_total, has_as_soft,
        has_shm;
    int64_t rss, hwm, vm_size;
    int64_t cgroup_current, cgroup_max, cgroup_kills, cgroup_kills_at_start;
    int64_t available, mem_total, swap_total;
    int64_t shm_total, shm_available; /* /dev/shm's (has_shm: both read) */
    int64_t as_soft; /* RLIMIT_AS's soft limit */
} bundle_host_state;

/* tables.c: arrays and indexes that grow.  array_room: room in *v (cap
 * elements of elem bytes) for element n, doubling; -1 without memory.
 * TEXT_HASH_START: the seed of the keys' hashes (gmp_text_hash).
 * index_table: the positions of an array's elements by a hash of their key,
 * open addressing, at most half full.  index_find: the slot of the element
 * same() accepts among those of hash h, or the empty slot it would take
 * (slots[at] == 0: then put element n there as n + 1); it grows first,
 * rehashing the n elements with hash_of; -1 without memory. */
int array_room(void **v, size_t *cap, size_t n, size_t elem);
#define TEXT_HASH_START 1469598103934665603ull
typedef struct index_table {
    size_t *slots, count;
} index_table;
typedef int (*index_same)(size_t i, const void *arg);
typedef uint64_t (*index_hash)(size_t i, const void *arg);
long index_find(index_table *t, size_t n, uint64_t h, index_same same, index_hash hash_of,
                const void *arg);
void index_free(index_table *t);

/* tables.c: modules.json as a table by load address, and stacks.json as
 * an index by id, each built once (a live ring's records too, read as
 * those files hold them). */
typedef struct module_entry {
    uint64_t base, end; /* end 0: not known */
    const char *path;   /* borrowed from the document */
    size_t order;       /* its place in the file */
} module_entry;
typedef struct module_table {
    module_entry *v;
    size_t n;
} module_table;
typedef struct stack_entry {
    int64_t id;
    json_t *stack; /* borrowed: {"id", "frames", "python"} */
    size_t order;
} stack_entry;
typedef struct stack_index {
    stack_entry *v;
    size_t n;
} stack_index;

/* metadata.json's outcome, decoded once (bundle_outcome_of): how the
 * process that wrote the bundle ended, as the preload last rewrote it. */
typedef enum bundle_end {
    BUNDLE_END_UNKNOWN, /* not recorded (an older writer, the Python recorder) */
    BUNDLE_END_RUNNING,
    BUNDLE_END_EXITED,
    BUNDLE_END_KILLED,
    BUNDLE_END_GONE,
    BUNDLE_END_OTHER /* a state this reader does not know */
} bundle_end;
typedef struct bundle_outcome {
    bundle_end end;
    int has_exit_status;
    long long exit_status; /* with has_exit_status: an exit's */
    const char *signal;    /* a kill's ("SIGTERM"), or NULL */
    const char *death_bundle; /* the later bundle its death is written up in, or NULL */
} bundle_outcome;

/* Where the bundle's process ran (bundle_run_of): its rank (the
 * manifest's, else RANK and friends in environment.json), its host, and
 * its Slurm task's "JOB.STEP"; the run it was a rank of, from the
 * launcher's variables environment.json recorded (torchrun's run id and
 * restart count, the rendezvous, the world and node), and the run's other
 * records (torchrun's error file, PyTorch's NCCL flight recorder's dump
 * prefix), and the launcher that started it with its own command line;
 * NULL where unknown. */
typedef struct bundle_run {
    const char *rank, *host, *job;
    char job_text[64];
    const char *run_id, *restart, *master_addr, *master_port;
    const char *world_size, *local_rank, *node;
    const char *error_file, *nccl_dump;
    const char *launcher; /* the process that started it, "PID:TICKS" */
    int multiprocessing;  /* started by Python's multiprocessing (torch's spawn) */
    char rank_text[24], world_text[24]; /* the manifest's numbers, as text */
} bundle_run;

#define BUNDLE_FILES_KEPT 8
/* json_arena.c: a bundle's documents' values cut from a few blocks and
 * handed back at once when it is closed (triage's thousands of bundles).
 * json_arena_install, before any JSON value is made, routes jansson's
 * allocations through it; json_arena_use makes a the calling thread's
 * arena (NULL: the heap) and returns the one before. */
typedef struct json_arena json_arena;
void json_arena_install(void);
json_arena *json_arena_new(void);
json_arena *json_arena_use(json_arena *a);
void json_arena_free(json_arena *a);
/* Whether the arenas' allocator is installed: only then are values cut
 * from an arena, and freeing it frees them (not where jansson allocates on
 * its own, as in a program that never installed it: a fuzzer) */
int json_arena_installed(void);
/* json_dumps' text, which jansson made by the allocator installed */
void json_arena_free_text(char *text);
/* Set by a verb that opens many bundles, one after another, and keeps no
 * value of theirs past bundle_close: each bundle's documents in an arena
 * where the arenas' allocator is installed, read only once loaded
 * (bundle_close frees the arena without walking them: a value set into
 * one would be lost with it). */
extern int inspect_bundle_arenas;

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
    bundle_failure failure; /* bundle_failure's, once read */
    int failure_read;
    bundle_device *devices; /* bundle_devices_of's, once read */
    size_t device_count;
    int devices_read;
    bundle_host_state host; /* bundle_host_state_of's, once read */
    int host_read, has_host;
    module_table modules; /* bundle_modules', once read */
    stack_index stacks;   /* bundle_stacks', once read */
    int modules_read, stacks_read;
    bundle_outcome outcome; /* bundle_outcome_of's, once read */
    int outcome_read;
    bundle_run run; /* bundle_run_of's, once read */
    int run_read;
    json_arena *arena; /* its documents' values, with inspect_bundle_arenas */
    int lean; /* set by a reader of many (triage): bundle_run_of takes the
               * manifest's run, rank, host and world size where it has
               * them, and reads no environment.json for the rest */
    int metadata_cut; /* a lean bundle's metadata without host_state and
                       * device_state, until bundle_metadata_whole */
} bundle;

/* Open a bundle directory and load manifest.json and metadata.json
 * (environment.json and events.json when asked).  On failure, err holds a
 * sentence and -1 is returned; the bundle is closed. */
int bundle_open(bundle *b, const char *path, int want_env, int want_events,
                char *err, size_t err_cap);
/* The same for a reader of many bundles (triage): lean, and metadata.json
 * parsed without host_state and device_state, which bundle_host_state_of,
 * bundle_devices_of and bundle_json read back whole when asked. */
int bundle_open_lean(bundle *b, const char *path, char *err, size_t err_cap);
void bundle_close(bundle *b);
/* A lean bundle's metadata made whole (the members cut put back). */
void bundle_metadata_whole(bundle *b);
/* FILE of the bundle (stacks.json, modules.json, allocations.json,
 * environment.json, ...), parsed the first time it is asked for and kept
 * until bundle_close: every verb's parts ask, and each file is opened
 * once.  Borrowed; NULL when absent or unreadable. */
json_t *bundle_json(bundle *b, const char *file);
/* A text file of the bundle (python_traceback.txt), read once the same way:
 * its bytes, NUL-terminated, and their count in *len; NULL when absent. */
const char *bundle_text(bundle *b, const char *file, size_t *len);

/* The failed request the bundle names (metadata.json's failed_request, an
 * object), decoded the first time it is asked for; NULL when it names
 * none. */
const bundle_failure *bundle_failure_of(bundle *b);

/* The devices of metadata.json's device_state in order (each entry an
 * object; the others left out), decoded the first time; their count in
 * *n.  NULL when there are none. */
const bundle_device *bundle_devices_of(bundle *b, size_t *n);
/* metadata.json's host_state, decoded the first time; NULL when the bundle
 * has none (not an object). */
const bundle_host_state *bundle_host_state_of(bundle *b);

/* Where the bundle's process ran, decoded the first time (a bundle opened
 * with its environment); never NULL. */
const bundle_run *bundle_run_of(bundle *b);
/* How the bundle's process ended (metadata.json's outcome), decoded the
 * first time it is asked for; never NULL (end UNKNOWN when not recorded). */
const bundle_outcome *bundle_outcome_of(bundle *b);

/* The bundle's modules and stacks as tables, built the first time (empty
 * when the file is absent; NULL without memory).  module_of: the module
 * that holds a runtime address (the highest load address at or below it
 * whose object reaches it), its path, and its load bias in *bias; NULL
 * when none.  stack_with_id: the stack of that id (the file's first), or
 * NULL.  _build from a document (an array as the file holds it), _free. */
const module_table *bundle_modules(bundle *b);
const stack_index *bundle_stacks(bundle *b);
const char *module_of(const module_table *t, uint64_t at, uint64_t *bias);
json_t *stack_with_id(const stack_index *x, int64_t id);
int module_table_build(module_table *t, json_t *mods);
void module_table_free(module_table *t);
int stack_index_build(stack_index *x, json_t *stacks);
void stack_index_free(stack_index *x);

/* Read and parse one JSON file inside a directory fd: refuses symlinks,
 * non-regular files and files over max_bytes. */
json_t *load_json_at(int dirfd, const char *name, size_t max_bytes, char *err,
                     size_t err_cap);

/* Read one regular file of at most max_bytes inside a directory fd (no
 * symlink, no FIFO): a NUL-terminated copy to free, its length in *len. */
char *read_file_at(int dirfd, const char *name, size_t max_bytes, size_t *len,
                   char *err, size_t err_cap);

/* event_list.c: index dirfd's events.json (an array of events, or an object
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
/* bundle_batch.c: the same bundles read by a thread per CPU (up to 8) and
 * merged in the order for_each_bundle finds them.  read() answers one
 * bundle into a slot of slot_size bytes (zeroed, or as the last merge left
 * it), on a reader thread, touching nothing shared; merge() takes the
 * slots in order, on the calling thread.  -1, having read nothing, when
 * its batches cannot be had. */
#define BUNDLE_PATH_MAX 4096
typedef struct bundle_batch_ops {
    size_t slot_size;
    void (*read)(void *slot, const char *bundle, void *arg);
    void (*merge)(void *slot, void *arg);
    void *arg;
} bundle_batch_ops;
int for_each_bundle_read(char *path, const bundle_batch_ops *ops);
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
/* 0 when a number, as a double: an integer, a real, or a size past int64
 * (a marked string), finite; what a drawing or a rule on amounts reads. */
int jreal(json_t *obj, const char *key, double *out);
/* A size as a JSON value ju64 and json_text_exact read back exactly. */
json_t *json_u64(uint64_t v);
/* 1 when v is a size past INT64_MAX as the reader marks it; *out (if not
 * NULL) its value. */
int json_is_wide_size(json_t *v, uint64_t *out);
/* lean_text.c: text (len bytes, NUL after them) without the top-level
 * members named in names (NULL-terminated), cut in place where the whole
 * text is one object by the strict grammar and jansson would take the cut
 * values; the new length, len when nothing was cut. */
size_t json_text_drop_members(char *text, size_t len, const char *const *names);
/* text with each integer past int64 marked or widened (a new buffer; text
 * is freed), else text itself.  *len is updated. */
char *json_text_widen_integers(char *text, size_t *len);
/* Where the integer of a number token at text[i] ends when the token is one
 * that json_text_widen_integers widened (its ".0" follows), else 0. */
size_t json_widened_integer_end(const char *text, size_t len, size_t i);
/* Where a marked string token at text[i] ends (past its closing quote), its
 * digits from *digits_at; 0 when there is none. */
size_t json_wide_size_end(const char *text, size_t len, size_t i, size_t *digits_at);
/* The markers of widened integers, made now: before threads parse. */
void json_wide_markers_ready(void);
/* json_dumps, each marked size as its integer (free it); json_dumpf so. */
char *json_text_exact(json_t *v, size_t flags);
int json_dumpf_exact(json_t *v, FILE *f, size_t flags);

void fmt_bytes(uint64_t v, char *out, size_t cap);

/* An event as the replays read it, decoded once from its document: its
 * type (GMP_EV_NONE for a kind we do not write: the Python recorder's
 * own), backend and api (borrowed from ev; NULL when absent), device
 * (device_id; -1 when absent), address (its hex; 0 when absent), size,
 * bytes in use and stack id (integers; has_size, has_in_use say whether
 * there were), and its time (has_time: a number). */
typedef struct event_record {
    gmp_event_type type;
    const char *type_name; /* as written; NULL when absent */
    const char *backend, *api;
    int64_t device;
    uint64_t address;
    int64_t size, in_use, stack_id;
    int has_size, has_in_use, has_time;
    double time;
    /* size and bytes in use as any number (jreal): the drawings' and the
     * leak rule's reading */
    int has_size_real, has_in_use_real;
    double size_real, in_use_real;
} event_record;
void event_record_of(json_t *ev, event_record *r);
/* Every event (or the first end) in turn as a record: ev its document
 * (released at the end of its turn), r its record. */
#define event_records_until(l, end, i, ev, r)                                     \
    for ((i) = 0; (i) < (end) && ((ev) = event_at((l), (i)), event_record_of((ev), (r)), 1); \
         json_decref(ev), (i)++)

/* Where an event happened: "host", or "cuda:0" (plot's lines, export's
 * counters, leaks' devices). */
void event_where(json_t *ev, char *out, size_t cap);

/* live_set.c: allocations paired with their frees by address in an
 * address space (space: a reader's process or device; 0 for one), the one
 * table every replay of events keeps what is alive in.  live_alloc: the
 * block made (one live at the address is made again), or NULL without
 * memory or past max_live live blocks (0: no bound); live_free: the block
 * the free ends, no longer live (its fields kept until the next
 * allocation), or NULL when none was live there; live_next: the live
 * blocks in turn (from NULL; NULL at the end).  mark and flag are the
 * reader's own. */
typedef struct live_block {
    uint64_t address, size;
    int64_t stack;
    int64_t mark;   /* a series, an index: whatever the reader keeps */
    uint32_t space;
    uint8_t state;  /* empty, live, or freed (a tombstone) */
    uint8_t flag;
} live_block;
/* The live blocks a replay of one bundle's events follows at once, at most:
 * a site table, not an audit (its slots stay under 40 MB for a hostile
 * file; a real program's events hold far fewer). */
#define REPLAY_LIVE_MAX ((size_t)1 << 18)
typedef struct live_set {
    live_block *slots;
    size_t cap, used, live, max_live;
    int no_memory;
} live_set;
void live_set_init(live_set *s, size_t max_live);
live_block *live_alloc(live_set *s, uint32_t space, uint64_t address, uint64_t size,
                       int64_t stack);
live_block *live_free(live_set *s, uint32_t space, uint64_t address);
live_block *live_find(const live_set *s, uint32_t space, uint64_t address);
live_block *live_next(const live_set *s, live_block *after);
/* Every block gone, the slots kept (the next process of a replay). */
void live_set_clear(live_set *s);
void live_set_release(live_set *s);

/* clean.c: a bundle's strings for a terminal or a log, control characters
 * shown visibly (\n, \x1b, \u009b); out always ends in a NUL and never
 * holds half an escape.  Returns the length written. */
size_t clean_text(const char *s, char *out, size_t cap);
size_t clean_text_n(const char *s, size_t n, char *out, size_t cap);
/* At most max bytes of s, cleaned, then "..." when cut. */
void print_clean(FILE *f, const char *s, size_t max);
/* Every string and key of a document, cleaned in place. */
void json_clean_strings(json_t *v);
/* Whether JSON text of len bytes may hold a string json_clean_strings would
 * change: one with DEL or a byte past ASCII, or an escape other than \" \\ \/
 * (a control character, or any character as \uNNNN).  Text without either
 * is left as it is, and the walk over its strings is saved. */
int json_text_needs_cleaning(const char *text, size_t len);
/* Set by a verb that prints JSON: documents are loaded as they are (the
 * encoder escapes them); otherwise load_json_at cleans what it loads. */
extern int inspect_raw_json;
/* The code point of the UTF-8 character c (len bytes) when it is an
 * invisible format character clean_text escapes (bidi controls,
 * zero-width characters, U+2028/U+2029, the BOM), else 0. */
unsigned invisible_format_char(const unsigned char *c, size_t len);

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
/* A ring's record as events.json holds it (a new reference; NULL without
 * memory). */
json_t *ring_event_json(const struct gmp_event *e);

#endif
