/*
 * inspect.h — shared pieces of gmp-inspect: loading bundles safely (no
 * symlinked files, size caps, jansson's depth limit), formatting, and the
 * entry point of each verb.  gmp-inspect only reads; it never changes a
 * bundle or a live ring.
 */
#ifndef GMP_INSPECT_H
#define GMP_INSPECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes shared by every verb. */
enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

#define SMALL_FILE_MAX (16u << 20)    /* manifest, metadata, environment */
#define EVENTS_FILE_MAX (512u << 20)  /* events.json */

typedef struct bundle {
    char path[4096];
    char name[4096];
    int dirfd;
    json_t *manifest, *metadata, *environment, *events;
} bundle;

/* Open a bundle directory and load manifest.json and metadata.json
 * (environment.json and events.json when asked).  On failure, err holds a
 * sentence and -1 is returned; the bundle is closed. */
int bundle_open(bundle *b, const char *path, int want_env, int want_events,
                char *err, size_t err_cap);
void bundle_close(bundle *b);

/* Read and parse one JSON file inside a directory fd: refuses symlinks,
 * non-regular files and files over max_bytes. */
json_t *load_json_at(int dirfd, const char *name, size_t max_bytes, char *err,
                     size_t err_cap);

/* events.json is an array, or an object with an "events" array. */
json_t *events_array(json_t *events);

/* Calls fn for every bundle directory at or under path (8 levels deep, no
 * symlink followed, hidden names skipped); trailing slashes are trimmed. */
void for_each_bundle(char *path, void (*fn)(const char *bundle, void *arg), void *arg);
/* The rank (manifest, else RANK and friends in environment.json) and the
 * host of a bundle opened with its environment; NULL when unknown. */
const char *bundle_rank(bundle *b);
const char *bundle_host(bundle *b);

/* Field helpers that tolerate any JSON type. */
const char *jstr(json_t *obj, const char *key);        /* NULL unless a string */
int jint(json_t *obj, const char *key, int64_t *out);  /* 0 when an integer */

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

/* sites.c: the top allocation sites by live bytes, symbolised (libdw);
 * name_site: one stack's site, "fill (gpu_oom.c:70)" or "module+0x1983". */
void print_top_sites(bundle *b, json_t *events);
/* allocations.json or leaks.json in dirfd: totals, then the top sites;
 * 0 when the file is absent or unreadable. */
int print_live_file(int dirfd, const char *file, const char *label, const char *what,
                    const char *sites_heading);
void name_site(bundle *b, int64_t stack, char *out, size_t cap);
/* The module of modules.json that holds a runtime address (the highest load
 * bias at or below it): its path, and the bias in *bias; NULL when none. */
const char *module_of(json_t *mods, uint64_t at, uint64_t *bias);

/* diagnose.c: the likely causes of the bundle's OOM, most certain first,
 * each with its evidence (ANSI bold and red when colour). */
void diagnose(bundle *b, json_t *events, int colour);

int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_triage(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_info(int argc, char **argv);
/* show of a leak report (leaks.c): its exit status, or -1 when path is not one. */
int show_leak_report(const char *path);

/* True when argv holds -h or --help. */
int wants_help(int argc, char **argv);

#endif
