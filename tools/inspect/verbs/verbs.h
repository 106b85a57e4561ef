/*
 * verbs.h — gmp-inspect's last room: the verbs, one file each, that parse
 * their options (args.c) and call the other rooms (read.h, answer.h,
 * draw.h, export.h); gmp_inspect.c is the table of them.  What a verb
 * writes goes through output.c: its JSON on stdout, a file with -o.
 */
#ifndef GMP_INSPECT_VERBS_H
#define GMP_INSPECT_VERBS_H

#include "answer.h"
#include "draw.h"
#include "read.h"

#include <getopt.h>
#include <stdio.h>

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

/* output.c: the one way a verb prints a JSON document (list, triage,
 * watch, info, leaks): two-space indent, ASCII only, then a newline;
 * releases doc.  0, or -1 (doc NULL, or stdout failed). */
int print_json(json_t *doc);
/* -o FILE, a new or regular file written to a 0600 temporary file beside
 * it and renamed over it when whole; a device written where it is; a
 * symlink followed only when the caller or root owns it; a FIFO only when
 * a reader has it open.  out_open gives the stream (NULL, errno set, when
 * it cannot be had); out_commit closes and renames it, 0 or -1 (nothing
 * left behind). */
typedef struct out_file {
    FILE *f;
    int direct; /* written where it is: nothing to rename */
    char tmp[4096], path[4096];
} out_file;
FILE *out_open(out_file *o, const char *path);
int out_commit(out_file *o);

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
/* A dump directory given where one bundle is meant (show, plot): its
 * newest bundle (names begin with the UTC time) in newest, said on stderr
 * with how many it holds; that count, or 0 where path is a bundle, or no
 * directory of bundles. */
long verb_newest_bundle(const char *verb, const char *path, char *newest, size_t cap);
/* show_json.c: show's answer for b as one JSON object (the caller's). */
json_t *show_json(bundle *b);
/* report.c: the HTML page of a chart: for a bundle (b), show's answer above
 * it; page_title its heading. */
void report_page(FILE *f, plot *p, const char *chart_title, const char *page_title, bundle *b);

/* triage.c gathers bundles into groups and runs; triage_formats.c says
 * them in a format and decides the exit status (3: an out-of-memory death;
 * 1: a path missing or a bundle unreadable; else 0). */
#define MAX_NAMES 64 /* ranks or hosts listed per group */

/* Up to MAX_NAMES names, each cut at 63 bytes, one after another in text
 * (each NUL-ended; heap, grown as they come: a run's group of a thousand
 * ranks holds a few hundred bytes, not MAX_NAMES full slots). */
typedef struct name_set {
    int n, more;
    char *text;
    size_t len, cap;
} name_set;
/* The name after `at` (NULL: the first), or NULL after the last. */
const char *name_set_next(const name_set *s, const char *at);

typedef struct group {
    char run[RUN_KEY_SIZE]; /* "" in the groups across runs, and outside a run */
    gmp_verdict kind;
    char backend[32], api[64], reason[200], site[320];
    long count;
    char first[40], last[40];
    uint64_t largest; /* with has_largest */
    int has_largest;
    name_set ranks, hosts, jobs; /* jobs: Slurm's "JOB.STEP" */
    char *example; /* a bundle's path (heap) */
} group;

/* Groups found by key in a hash table of their indexes (100,000 bundles in
 * a thousand runs make a thousand groups per run and signature). */
typedef struct group_list {
    group *v;
    size_t n, cap;
    index_table index; /* groups by key */
} group_list;

typedef struct triage {
    group_list signatures; /* across runs: the text, JSON and Markdown */
    group_list per_run;    /* per run and signature: JUnit's test cases */
    run_set runs;
    const char *only_run; /* --run: the one run looked at, or NULL */
    long bundles, ooms, unreadable, missing;
    long kinds[GMP_VERDICT_COUNT];
    char first_unreadable[4096];
} triage;
int triage_exit_status(const triage *t);
void triage_print_text(const triage *t);
void triage_print_json(const triage *t);
void triage_print_markdown(const triage *t);
void triage_print_junit(const triage *t);
void triage_print_lines(const triage *t);

#endif
