/*
 * args.c — one way every verb reads its arguments: getopt_long over the
 * verb's own table of options, --help and -h for all of them, options
 * before or after the operands, and the same words for every mistake: one
 * line naming the verb and what was wrong, then the verb's usage, exit 2.
 */
#include "verbs.h"

#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#define MAX_OPTIONS 16

int verb_option(verb_args *a, int argc, char **argv)
{
    if (!a->started) {
        optind = 0; /* GNU: start over, for a verb run twice in one process */
        opterr = 0; /* our words, not getopt's */
        a->started = 1;
        size_t n = 0;
        for (const struct option *o = a->longopts; o && o->name && n < MAX_OPTIONS - 2; o++)
            a->table[n++] = *o;
        a->table[n++] = (struct option){"help", no_argument, NULL, 'h'};
        a->table[n] = (struct option){0};
        /* ':' first: a missing value is ':', not '?' */
        snprintf(a->shorts, sizeof a->shorts, ":h%s", a->shortopts ? a->shortopts : "");
    }
    int c = getopt_long(argc, argv, a->shorts, a->table, NULL);
    if (c == 'h') {
        a->usage(stdout);
        return VERB_DONE_OK;
    }
    if (c == '?' || c == ':') {
        const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        char letter[3] = {'-', (char)optopt, '\0'};
        if (c == '?' && optopt > ' ' && optopt < 127 && strncmp(arg, "--", 2))
            arg = letter; /* an unknown letter, maybe inside a cluster such as -xq */
        return verb_misuse(a, c == ':' ? "%.64s wants a value" : "unknown option %.64s", arg);
    }
    return c;
}

int verb_operands(verb_args *a, int argc, int min, int max)
{
    int n = argc - optind;
    if (n < min)
        return verb_misuse(a, n ? "too few operands" : "nothing to read");
    if (n > max)
        return verb_misuse(a, "too many operands");
    return n;
}

int verb_misuse(verb_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gmp-inspect %s: ", a->verb);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    a->usage(stderr);
    return VERB_DONE_USAGE;
}

typedef struct dir_bundles {
    long n;
    char *newest;
    size_t cap;
} dir_bundles;

static void note_bundle(const char *path, void *arg)
{
    dir_bundles *d = arg;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *newest = strrchr(d->newest, '/');
    newest = newest ? newest + 1 : d->newest;
    d->n++;
    if (!d->newest[0] || strcmp(base, newest) > 0) /* names begin with the UTC time */
        snprintf(d->newest, d->cap, "%s", path);
}

long verb_newest_bundle(const char *verb, const char *path, char *newest, size_t cap)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    dir_bundles d = {0, newest, cap};
    newest[0] = '\0';
    const char *base = strrchr(copy, '/');
    if (!strncmp(base ? base + 1 : copy, "oom_dump_", 9))
        return 0;
    for_each_bundle(copy, note_bundle, &d);
    if (!d.n)
        return 0;
    fprintf(stderr, "gmp-inspect %s: ", verb);
    print_clean(stderr, path, 1000);
    fprintf(stderr, " holds %ld bundle(s) (`gmp-inspect list` names them); the newest: ", d.n);
    print_clean(stderr, newest, 2000);
    fputc('\n', stderr);
    return d.n;
}
