/*
 * triage.c — `gmp-inspect triage PATH...`: every bundle under the paths
 * (many processes, ranks, hosts), grouped by signature — backend, failing
 * API, reason, top allocation site — with counts, first and last seen, the
 * largest request and the ranks and hosts affected; and, before them, one
 * verdict per distributed run (runs.c).  For CI: text, JSON,
 * Markdown (a job summary) or JUnit XML (a test report).  The exit status
 * and every format rest on one classification (kind.c): 3 when an
 * out-of-memory death is among the bundles; else 1 when a path is missing
 * or a bundle unreadable; else 0, memory-pressure warnings and kills or
 * crashes nothing ties to memory listed but never failures; 2 on usage.
 * The site is show's "Failed at" (name_failure_site): the innermost
 * Python frame of the program's own (else of a library's), the script
 * inside its interpreter, else the failing call's innermost frame of the
 * program's own, symbolised, or as module+offset (modules.json) where
 * nothing symbolises it: the same in every process whatever ASLR did.  A
 * process that died with no failing call (killed by the OOM killer, a
 * SIGKILL) is sited where it held the most, as show's "Held by" says.
 */
#include "answer.h"
#include "verbs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *name_set_next(const name_set *s, const char *at)
{
    if (!s->len)
        return NULL;
    if (!at)
        return s->text;
    at += strlen(at) + 1;
    return at < s->text + s->len ? at : NULL;
}

/* v added to s, unless there already; without memory, left out. */
static void add_name(name_set *s, const char *v)
{
    if (!v || !*v)
        return;
    size_t k = strnlen(v, 63);
    for (const char *at = NULL; (at = name_set_next(s, at)) != NULL;)
        if (strlen(at) == k && !strncmp(at, v, k))
            return;
    if (s->n == MAX_NAMES) {
        s->more = 1;
        return;
    }
    if (s->len + k + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        while (cap < s->len + k + 1)
            cap *= 2;
        char *grown = realloc(s->text, cap);
        if (!grown)
            return;
        s->text = grown;
        s->cap = cap;
    }
    memcpy(s->text + s->len, v, k);
    s->text[s->len + k] = '\0';
    s->len += k + 1;
    s->n++;
}

/* The failure's site as show names it (name_failure_site): the Python
 * frame of the program's own ("train.py:42 in step"), the script inside
 * its interpreter ("inside the Perl interpreter, running grow.pl"), the
 * native frame symbolised ("fill (gpu_oom.c:70)") or, where nothing
 * symbolises it, module+offset ("train+0x1a2b", the same whatever ASLR
 * did); with no failing call, the site that held the most (show's "Held
 * by"); "-" when the bundle says nothing of either. */
static void top_site(bundle *b, char *out, size_t cap)
{
    if (name_failure_site(b, out, cap) < 0 && name_holder_site(b, out, cap) < 0)
        snprintf(out, cap, "-");
}

static uint64_t group_hash(const char *run, gmp_verdict kind, const char *const sig[4])
{
    uint64_t h = gmp_text_hash(TEXT_HASH_START ^ (uint64_t)kind, run);
    for (int i = 0; i < 4; i++)
        h = gmp_text_hash(h, sig[i]);
    return h;
}

/* The group being looked for, for index_find's callbacks. */
typedef struct group_lookup {
    const group_list *l;
    const char *run;
    gmp_verdict kind;
    const char *const *sig;
} group_lookup;

static int group_is(size_t i, const void *arg)
{
    const group_lookup *k = arg;
    const group *g = &k->l->v[i];
    return g->kind == k->kind && !strcmp(g->run, k->run) && !strcmp(g->backend, k->sig[0]) &&
           !strcmp(g->api, k->sig[1]) && !strcmp(g->reason, k->sig[2]) &&
           !strcmp(g->site, k->sig[3]);
}

static uint64_t group_hash_at(size_t i, const void *arg)
{
    const group *g = &((const group_lookup *)arg)->l->v[i];
    const char *const its[4] = {g->backend, g->api, g->reason, g->site};
    return group_hash(g->run, g->kind, its);
}

/* The group of (run, kind, signature: backend, api, reason, site), made
 * when new with path as its example; NULL without memory. */
static group *group_of(group_list *l, const char *run, gmp_verdict kind,
                       const char *const sig[4], const char *path)
{
    group_lookup k = {l, run, kind, sig};
    long at = index_find(&l->index, l->n, group_hash(run, kind, sig), group_is, group_hash_at, &k);
    if (at < 0)
        return NULL;
    if (l->index.slots[at])
        return &l->v[l->index.slots[at] - 1];
    if (array_room((void **)&l->v, &l->cap, l->n, sizeof *l->v) < 0)
        return NULL;
    char *example = strdup(path);
    if (!example)
        return NULL;
    group *g = &l->v[l->n];
    memset(g, 0, sizeof *g);
    g->example = example;
    g->kind = kind;
    snprintf(g->run, sizeof g->run, "%s", run);
    snprintf(g->backend, sizeof g->backend, "%s", sig[0]);
    snprintf(g->api, sizeof g->api, "%s", sig[1]);
    snprintf(g->reason, sizeof g->reason, "%s", sig[2]);
    snprintf(g->site, sizeof g->site, "%s", sig[3]);
    l->index.slots[at] = ++l->n;
    return g;
}

static void group_list_free(group_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].example);
        free(l->v[i].ranks.text);
        free(l->v[i].hosts.text);
        free(l->v[i].jobs.text);
    }
    free(l->v);
    index_free(&l->index);
}

static void count_in(group *g, bundle *b, const bundle_failure *fr)
{
    g->count++;
    const char *when = jstr(b->manifest, "created_at_utc");
    if (when && (!g->first[0] || strcmp(when, g->first) < 0))
        snprintf(g->first, sizeof g->first, "%s", when);
    if (when && strcmp(when, g->last) > 0)
        snprintf(g->last, sizeof g->last, "%s", when);
    if (fr && fr->has_size && (!g->has_largest || fr->size > g->largest)) {
        g->largest = fr->size;
        g->has_largest = 1;
    }
    add_name(&g->ranks, bundle_rank(b));
    add_name(&g->hosts, bundle_host(b));
    char job[64];
    add_name(&g->jobs, bundle_job(b, job, sizeof job));
}

/* One bundle as a reader thread answered it (bundle_batch.c): opened,
 * its run, site and kind found; merged into the groups and runs in the
 * order the bundles were found. */
typedef struct triage_slot {
    int opened, of_another_run;
    char err[600];
    bundle b;
    char run[RUN_KEY_SIZE], site[320];
    gmp_verdict kind;
} triage_slot;

/* On a reader thread: everything that reads the bundle's files, so that
 * merge_bundle reads only what this left in memory. */
static void read_bundle(void *slot, const char *path, void *arg)
{
    triage_slot *s = slot;
    const triage *t = arg;
    /* environment.json read only where the manifest does not say enough */
    s->opened = bundle_open_lean(&s->b, path, s->err, sizeof s->err) == 0;
    if (!s->opened)
        return;
    s->of_another_run = t->only_run && (!run_key_of(&s->b, s->run) || strcmp(s->run, t->only_run));
    if (s->of_another_run)
        return;
    bundle_failure_of(&s->b);
    bundle_run_of(&s->b);
    bundle_outcome_of(&s->b);
    top_site(&s->b, s->site, sizeof s->site);
    s->kind = bundle_kind_of(&s->b);
}

static void merge_bundle(void *slot, void *arg)
{
    triage_slot *s = slot;
    triage *t = arg;
    if (!s->opened) {
        t->bundles += !t->only_run; /* of no run that can be told */
        if (!t->only_run && !t->unreadable++ && !t->missing)
            snprintf(t->first_unreadable, sizeof t->first_unreadable, "%s", s->err);
        return;
    }
    bundle *b = &s->b;
    if (!s->of_another_run) {
        t->bundles++;
        const char *v;
        const bundle_failure *fr = bundle_failure_of(b);
        char backend[32], api[64], reason[200];
        snprintf(backend, sizeof backend, "%s", (v = jstr(b->manifest, "backend")) ? v : "?");
        snprintf(api, sizeof api, "%s", fr && fr->api ? fr->api : "-");
        snprintf(reason, sizeof reason, "%s", (v = jstr(b->manifest, "reason")) ? v : "?");
        t->kinds[s->kind]++;
        t->ooms += gmp_verdict_is_death_of_memory(s->kind);

        const char *const sig[4] = {backend, api, reason, s->site};
        group *across = group_of(&t->signatures, "", s->kind, sig, b->path);
        if (across)
            count_in(across, b, fr);
        if (runs_add(&t->runs, b, b->path, s->kind, s->site, s->run) >= 0) {
            group *in_run = group_of(&t->per_run, s->run, s->kind, sig, b->path);
            if (in_run)
                count_in(in_run, b, fr);
        }
    }
    bundle_close(b);
}

/* Out-of-memory deaths first, then by count. */
static int by_count(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (gmp_verdict_is_death_of_memory(x->kind) != gmp_verdict_is_death_of_memory(y->kind))
        return gmp_verdict_is_death_of_memory(x->kind) ? -1 : 1;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->reason, y->reason);
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect triage PATH... [--format text|json|markdown|junit|line]\n"
          "                          [--run KEY]\n"
          "Every bundle under the PATHs (bundle directories, or directories searched\n"
          "8 levels deep), grouped by kind and signature: backend, failing API, reason\n"
          "and the failure's site (the innermost Python frame of the program's own,\n"
          "else the failing call's innermost frame of the program's own as\n"
          "module+offset).  Per group: count, first and last seen, largest request,\n"
          "ranks and hosts.  Before them, one verdict per distributed run (torchrun's\n"
          "run, a Slurm step, the ranks one launcher started): which rank ran out\n"
          "first, when and where, and what the others did after.  markdown suits a CI\n"
          "job summary, junit a CI test report (a failing test for each out-of-memory\n"
          "signature, per run for a run's ranks; an error for unreadable input); line\n"
          "a line per run, its verdict (gmp-run's last word).  The ends gmp-run noted\n"
          "of ranks that left no bundle (run_ends_*.txt in a PATH) are read too.\n"
          "--run KEY: that run alone (a manifest's \"run\").\n"
          "Exit status, the same in every format:\n"
          "  0  no out-of-memory death (memory-pressure warnings, and kills or crashes\n"
          "     nothing ties to memory, are listed but are not failures)\n"
          "  3  at least one out-of-memory death (whatever else was found)\n"
          "  1  no out-of-memory death, but a PATH does not exist or is not a directory,\n"
          "     or a bundle could not be read\n"
          "  2  usage error\n",
          f);
}

/* The notes gmp-run keeps beside a run's bundles (run_ends_*.txt, in the
 * directory itself) of how each rank ended: members of their runs where
 * no bundle tells that end.  A note of another shape is passed over. */
static void add_end_notes(const char *dir, triage *t)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "run_ends_", 9) || len < 4 || strcmp(e->d_name + len - 4, ".txt"))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        FILE *f = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char line[RUN_KEY_SIZE + 128], key[RUN_KEY_SIZE];
        while (fgets(line, sizeof line, f)) {
            if (t->only_run) { /* its key, the last field: that run's alone */
                const char *last = strrchr(line, ' ');
                size_t k = last ? strcspn(last + 1, "\n") : 0;
                if (!k || k >= sizeof key)
                    continue;
                memcpy(key, last + 1, k);
                key[k] = '\0';
                if (strcmp(key, t->only_run))
                    continue;
            }
            runs_add_end(&t->runs, line);
        }
        fclose(f);
    }
    closedir(d);
}

/* A PATH that is no directory to search: a sentence for stderr, else NULL. */
static const char *path_problem(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return strerror(errno);
    if (!S_ISDIR(st.st_mode))
        return "is not a directory";
    if (access(path, R_OK | X_OK) < 0)
        return strerror(errno);
    return NULL;
}

int cmd_triage(int argc, char **argv)
{
    static const struct option options[] = {{"format", required_argument, NULL, 'f'},
                                            {"run", required_argument, NULL, 'r'},
                                            {0}};
    verb_args a = {.verb = "triage", .usage = usage, .longopts = options};
    const char *format = "text", *only_run = NULL;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == 'f')
            format = optarg;
        else if (c == 'r')
            only_run = optarg;
        else
            return VERB_EXIT(c);
    }
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "markdown") &&
        strcmp(format, "junit") && strcmp(format, "line")) {
        fputs("gmp-inspect triage: unknown format '", stderr);
        print_clean(stderr, format, 40);
        fputs("' (text, json, markdown, junit or line)\n", stderr);
        return EXIT_USAGE;
    }
    if (verb_operands(&a, argc, 1, argc) < 0)
        return EXIT_USAGE;
    inspect_raw_json = !strcmp(format, "json");
    inspect_bundle_arenas = 1; /* groups and runs keep text, never a bundle's values */
    triage t = {.only_run = only_run};
    const bundle_batch_ops ops = {sizeof(triage_slot), read_bundle, merge_bundle, &t};
    for (int i = optind; i < argc; i++) {
        const char *problem = path_problem(argv[i]);
        if (problem) {
            char line[sizeof t.first_unreadable];
            snprintf(line, sizeof line, "%.3000s: %s", argv[i], problem);
            fputs("gmp-inspect triage: ", stderr);
            print_clean(stderr, line, sizeof line);
            fputc('\n', stderr);
            if (!t.missing++ && !t.unreadable)
                snprintf(t.first_unreadable, sizeof t.first_unreadable, "%s", line);
            continue;
        }
        if (for_each_bundle_read(argv[i], &ops) < 0) {
            fputs("gmp-inspect triage: out of memory\n", stderr);
            t.missing++;
        }
    }
    /* then the ends gmp-run noted of ranks that left no bundle */
    for (int i = optind; i < argc; i++)
        if (!path_problem(argv[i]))
            add_end_notes(argv[i], &t);
    for (group_list *l = &t.signatures; l; l = l == &t.signatures ? &t.per_run : NULL)
        if (l->n > 1)
            qsort(l->v, l->n, sizeof *l->v, by_count);
    runs_order(&t.runs);
    if (!strcmp(format, "json"))
        triage_print_json(&t);
    else if (!strcmp(format, "markdown"))
        triage_print_markdown(&t);
    else if (!strcmp(format, "junit"))
        triage_print_junit(&t);
    else if (!strcmp(format, "line"))
        triage_print_lines(&t);
    else
        triage_print_text(&t);
    int status = triage_exit_status(&t);
    group_list_free(&t.signatures);
    group_list_free(&t.per_run);
    runs_free(&t.runs);
    return status;
}
