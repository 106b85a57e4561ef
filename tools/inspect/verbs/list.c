/*
 * list.c — `gmp-inspect list [DIR] [--json]`: one line per bundle in a dump
 * directory, oldest first (time, pid, backend, reason, events, name).  A
 * bundle that cannot be read is listed with why, and makes the exit status 1.
 * Without DIR, bundles waiting in $HOME/oom_dumps (where a process writes
 * them when its dump directory cannot be had) are counted on stderr.
 */
#include "dumpdir.h"
#include "answer.h"
#include "verbs.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct row {
    char name[256];
    char created[64];
    char backend[32];
    char reason[200];
    int64_t pid, events;
    char error[600];
} row;

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int c = strcmp(x->created, y->created);
    return c ? c : strcmp(x->name, y->name);
}

static void fill_row(row *r, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(r->name, sizeof r->name, "%s", name);
    /* an entry of the directory: a symlink there leads out of it */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char shown[300];
        clean_text(name, shown, sizeof shown);
        snprintf(r->error, sizeof r->error, "%s: is a symbolic link (not followed)", shown);
        return;
    }
    /* lean: the row is the manifest's, and whether the bundle reads */
    bundle b;
    if (bundle_open_lean(&b, path, r->error, sizeof r->error) < 0)
        return;
    const char *s;
    snprintf(r->created, sizeof r->created, "%s",
             (s = jstr(b.manifest, "created_at_utc")) ? s : "?");
    snprintf(r->backend, sizeof r->backend, "%s",
             (s = jstr(b.manifest, "backend")) ? s : "?");
    snprintf(r->reason, sizeof r->reason, "%s",
             (s = jstr(b.manifest, "reason")) ? s : "?");
    r->events = -1;
    jint(b.manifest, "event_count", &r->events);
    /* the pid: manifest (ours), else the name oom_dump_<time>_<pid>_... */
    r->pid = -1;
    if (jint(b.manifest, "pid", &r->pid) < 0) {
        const char *p = strchr(name + strlen("oom_dump_"), '_');
        if (p)
            r->pid = strtoll(p + 1, NULL, 10);
    }
    bundle_close(&b);
}

/* The bundles in $HOME/oom_dumps, when that is not dir: a process whose
 * dump directory was another user's, or a symlink, wrote there and said so
 * once, on a stderr nobody may have kept. */
static void mention_home_fallback(const char *dir)
{
    char fallback[4096];
    struct stat f, d;
    if (gmp_dump_dir_fallback(fallback, sizeof fallback) < 0 || stat(fallback, &f) != 0 ||
        !S_ISDIR(f.st_mode) ||
        (stat(dir, &d) == 0 && d.st_dev == f.st_dev && d.st_ino == f.st_ino))
        return;
    DIR *h = opendir(fallback);
    if (!h)
        return;
    size_t waiting = 0;
    for (struct dirent *de; (de = readdir(h));)
        waiting += strncmp(de->d_name, "oom_dump_", 9) == 0;
    closedir(h);
    if (waiting)
        fprintf(stderr,
                "gmp-inspect list: %zu more bundle(s) in %s, where a process writes them when "
                "its dump directory cannot be had (gmp-inspect list %s)\n",
                waiting, fallback, fallback);
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect list [DIR] [--json]\n"
          "One line per bundle in DIR (default: $GMP_DUMP_DIR, else ./oom_dumps),\n"
          "oldest first: time, pid, backend, reason, event count, name.  Without\n"
          "DIR, the bundles in $HOME/oom_dumps (the fallback) are counted on stderr.\n"
          "Exit status: 0, 1 when a bundle could not be read, 2 usage error.\n",
          f);
}

int cmd_list(int argc, char **argv)
{
    static const struct option options[] = {{"json", no_argument, NULL, 'j'}, {0}};
    verb_args a = {.verb = "list", .usage = usage, .longopts = options};
    int as_json = 0;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'j')
            return VERB_EXIT(c);
        as_json = inspect_raw_json = 1;
    }
    int n_operands = verb_operands(&a, argc, 0, 1);
    if (n_operands < 0)
        return EXIT_USAGE;
    const char *dir = n_operands ? argv[optind] : NULL;
    if (!dir)
        dir = getenv("GMP_DUMP_DIR") && *getenv("GMP_DUMP_DIR") ? getenv("GMP_DUMP_DIR")
                                                                : "./oom_dumps";
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "gmp-inspect list: cannot open %s: %m\n", dir);
        if (!n_operands)
            mention_home_fallback(dir);
        return EXIT_INVALID;
    }
    if (!n_operands)
        mention_home_fallback(dir);
    row *rows = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "oom_dump_", 9) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            row *grown = realloc(rows, cap * sizeof *rows);
            if (!grown) {
                fprintf(stderr, "gmp-inspect list: out of memory\n");
                free(rows);
                closedir(d);
                return EXIT_INVALID;
            }
            rows = grown;
        }
        memset(&rows[n], 0, sizeof rows[n]);
        fill_row(&rows[n++], dir, de->d_name);
    }
    closedir(d);
    if (n)
        qsort(rows, n, sizeof *rows, row_cmp);

    /* columns as wide as their widest cell, so they line up */
    int reason_w = 6, events_w = 1;
    for (size_t i = 0; i < n && !as_json; i++) {
        char shown[64];
        int w = (int)clean_text_n(rows[i].reason, strnlen(rows[i].reason, 40), shown, sizeof shown);
        int e = snprintf(NULL, 0, "%lld", (long long)rows[i].events);
        reason_w = w > reason_w ? w : reason_w;
        events_w = e > events_w ? e : events_w;
    }
    int bad = 0;
    json_t *out = as_json ? json_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        row *r = &rows[i];
        bad |= r->error[0] != 0;
        if (out) {
            json_t *o = r->error[0]
                ? json_pack("{s:s,s:s}", "name", r->name, "error", r->error)
                : json_pack("{s:s,s:s,s:I,s:s,s:s,s:I}", "name", r->name, "created_at_utc",
                            r->created, "pid", (json_int_t)r->pid, "backend", r->backend,
                            "reason", r->reason, "event_count", (json_int_t)r->events);
            json_array_append_new(out, o);
        } else if (r->error[0]) {
            printf("%-20s  %-8s  %-5s  unreadable: ", "?", "?", "?");
            print_clean(stdout, r->error, 300);
            putchar('\n');
        } else {
            char reason[64];
            clean_text_n(r->reason, strnlen(r->reason, 40), reason, sizeof reason);
            printf("%-20s  %-8lld  %-5s  %-*s  %*lld events  ", r->created, (long long)r->pid,
                   r->backend, reason_w, reason, events_w, (long long)r->events);
            print_clean(stdout, r->name, 255);
            putchar('\n');
        }
    }
    if (out) {
        print_json(out);
    } else if (!n) {
        printf("no bundles in %s\n", dir);
    }
    free(rows);
    return bad ? EXIT_INVALID : EXIT_OK;
}
