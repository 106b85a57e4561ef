/*
 * triage.c — `gmp-inspect triage PATH...`: every bundle under the paths
 * (many processes, ranks, hosts), grouped by signature — backend, failing
 * API, reason, top allocation site — with counts, first and last seen, the
 * largest request and the ranks and hosts affected.  For CI: text, JSON,
 * Markdown (a job summary) or JUnit XML (a test report).  The exit status
 * and every format rest on one classification (kind.c): 3 when an
 * out-of-memory death is among the bundles; else 1 when a path is missing
 * or a bundle unreadable; else 0, memory-pressure warnings and kills or
 * crashes nothing ties to memory listed but never failures; 2 on usage.
 * The site is show's "Failed at" (name_failure_site): the innermost
 * Python frame of the program's own (else of a library's), the script
 * inside its interpreter, else the failing call's innermost frame of the
 * program's own, symbolised, or as module+offset (modules.json) where
 * nothing symbolises it: the same in every process whatever ASLR did.
 */
#include "answer.h"
#include "verbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMES 64 /* ranks or hosts listed per group */

typedef struct name_set {
    int n, more;
    char v[MAX_NAMES][64];
} name_set;

typedef struct group {
    gmp_verdict kind;
    char backend[32], api[64], reason[200], site[320];
    long count;
    char first[40], last[40];
    uint64_t largest; /* with has_largest */
    int has_largest;
    name_set ranks, hosts, jobs; /* jobs: Slurm's "JOB.STEP" */
    char example[4096];
} group;

typedef struct triage {
    group *groups;
    size_t n, cap;
    long bundles, ooms, unreadable, missing;
    long kinds[GMP_VERDICT_COUNT];
    char first_unreadable[4096];
} triage;

/* The one exit status every format reports. */
static int exit_status(const triage *t)
{
    return t->ooms ? 3 : t->unreadable || t->missing ? EXIT_INVALID : EXIT_OK;
}

static void add_name(name_set *s, const char *v)
{
    if (!v || !*v)
        return;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], v))
            return;
    if (s->n == MAX_NAMES) {
        s->more = 1;
        return;
    }
    snprintf(s->v[s->n++], sizeof s->v[0], "%s", v);
}

/* The failure's site as show names it (name_failure_site): the Python
 * frame of the program's own ("train.py:42 in step"), the script inside
 * its interpreter ("inside the Perl interpreter, running grow.pl"), the
 * native frame symbolised ("fill (gpu_oom.c:70)") or, where nothing
 * symbolises it, module+offset ("train+0x1a2b", the same whatever ASLR
 * did); "-" when the bundle says nothing of it. */
static void top_site(bundle *b, char *out, size_t cap)
{
    if (name_failure_site(b, out, cap) < 0)
        snprintf(out, cap, "-");
}

static void add_bundle(const char *path, void *arg)
{
    triage *t = arg;
    char err[600];
    bundle b;
    t->bundles++;
    if (bundle_open(&b, path, 1, 0, err, sizeof err) < 0) {
        if (!t->unreadable++ && !t->missing)
            snprintf(t->first_unreadable, sizeof t->first_unreadable, "%s", err);
        return;
    }
    const char *s;
    const bundle_failure *fr = bundle_failure_of(&b);
    char backend[32], api[64], reason[200], site[320];
    snprintf(backend, sizeof backend, "%s", (s = jstr(b.manifest, "backend")) ? s : "?");
    snprintf(api, sizeof api, "%s", fr && fr->api ? fr->api : "-");
    snprintf(reason, sizeof reason, "%s", (s = jstr(b.manifest, "reason")) ? s : "?");
    top_site(&b, site, sizeof site);
    gmp_verdict kind = bundle_kind_of(&b);
    t->kinds[kind]++;
    t->ooms += gmp_verdict_is_death_of_memory(kind);

    group *g = NULL;
    for (size_t i = 0; i < t->n && !g; i++)
        if (t->groups[i].kind == kind && !strcmp(t->groups[i].backend, backend) &&
            !strcmp(t->groups[i].api, api) &&
            !strcmp(t->groups[i].reason, reason) && !strcmp(t->groups[i].site, site))
            g = &t->groups[i];
    if (!g) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 8;
            group *more = realloc(t->groups, cap * sizeof *more);
            if (!more) {
                bundle_close(&b);
                return;
            }
            t->groups = more;
            t->cap = cap;
        }
        g = &t->groups[t->n++];
        memset(g, 0, sizeof *g);
        g->kind = kind;
        snprintf(g->backend, sizeof g->backend, "%s", backend);
        snprintf(g->api, sizeof g->api, "%s", api);
        snprintf(g->reason, sizeof g->reason, "%s", reason);
        snprintf(g->site, sizeof g->site, "%s", site);
        snprintf(g->example, sizeof g->example, "%s", path);
    }
    g->count++;
    const char *when = jstr(b.manifest, "created_at_utc");
    if (when && (!g->first[0] || strcmp(when, g->first) < 0))
        snprintf(g->first, sizeof g->first, "%s", when);
    if (when && strcmp(when, g->last) > 0)
        snprintf(g->last, sizeof g->last, "%s", when);
    if (fr && fr->has_size && (!g->has_largest || fr->size > g->largest)) {
        g->largest = fr->size;
        g->has_largest = 1;
    }
    add_name(&g->ranks, bundle_rank(&b));
    add_name(&g->hosts, bundle_host(&b));
    char job[64];
    add_name(&g->jobs, bundle_job(&b, job, sizeof job));
    bundle_close(&b);
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

static void join(const name_set *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < s->n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "," : "", s->v[i]);
    if (s->more)
        snprintf(out + strlen(out), cap - strlen(out), ",...");
    if (!out[0])
        snprintf(out, cap, "-");
}

/* ---- formats ------------------------------------------------------------- */

/* A group's cells as people read them: largest request, ranks, hosts. */
typedef struct cells {
    char big[32], ranks[1024], hosts[1024], jobs[1024];
} cells;

static void cells_of(const group *g, cells *c)
{
    snprintf(c->big, sizeof c->big, "-");
    if (g->has_largest)
        fmt_bytes(g->largest, c->big, sizeof c->big);
    join(&g->ranks, c->ranks, sizeof c->ranks);
    join(&g->hosts, c->hosts, sizeof c->hosts);
    join(&g->jobs, c->jobs, sizeof c->jobs);
}

/* "2 out-of-memory death(s), 1 memory-pressure warning(s), ..." */
static void summary(const triage *t, char *out, size_t cap)
{
    long not_memory = t->kinds[GMP_VERDICT_KILLED_UNKNOWN] + t->kinds[GMP_VERDICT_CRASH];
    snprintf(out, cap, "%ld out-of-memory death(s), %ld memory-pressure warning(s), %ld killed "
                       "or crashed with no sign of memory, %ld failure(s) survived, %ld unreadable",
             t->ooms, t->kinds[GMP_VERDICT_PRESSURE], not_memory, t->kinds[GMP_VERDICT_SURVIVED],
             t->unreadable + t->missing);
}

static void print_text(const triage *t)
{
    char sum[300];
    summary(t, sum, sizeof sum);
    printf("%zu signature(s) in %ld bundle(s): %s\n", t->n, t->bundles, sum);
    for (size_t i = 0; i < t->n; i++) {
        const group *g = &t->groups[i];
        cells c;
        cells_of(g, &c);
        /* every field may come from a bundle or a directory's entry names */
        const char *row[] = {g->backend, "  ", g->api, "  ", g->reason, "  at ", g->site,
                             "\n    first ", g->first, "  last ", g->last,
                             "  largest request ", c.big, "\n    ranks ", c.ranks,
                             "  hosts ", c.hosts, "  Slurm jobs ", c.jobs,
                             "\n    e.g. ", g->example};
        printf("\n#%zu  %ld bundle(s), %s  ", i + 1, g->count, gmp_verdict_words(g->kind));
        for (size_t k = 0; k < sizeof row / sizeof *row; k++)
            if (k % 2)
                fputs(row[k], stdout);
            else
                print_clean(stdout, row[k], 400);
        putchar('\n');
    }
    if (t->unreadable || t->missing) {
        fputs("\nunreadable, e.g.: ", stdout);
        print_clean(stdout, t->first_unreadable, 600);
        putchar('\n');
    }
}

static json_t *names_json(const name_set *s)
{
    json_t *a = json_array();
    for (int i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(s->v[i]));
    return a;
}

static void print_triage_json(const triage *t)
{
    json_t *root = json_object(), *groups = json_array();
    json_object_set_new(root, "bundles", json_integer(t->bundles));
    json_object_set_new(root, "oom_bundles", json_integer(t->ooms));
    json_object_set_new(root, "pressure_warnings", json_integer(t->kinds[GMP_VERDICT_PRESSURE]));
    json_object_set_new(root, "survived", json_integer(t->kinds[GMP_VERDICT_SURVIVED]));
    json_object_set_new(root, "not_memory",
                        json_integer(t->kinds[GMP_VERDICT_KILLED_UNKNOWN] + t->kinds[GMP_VERDICT_CRASH]));
    json_object_set_new(root, "unreadable", json_integer(t->unreadable));
    json_object_set_new(root, "missing_paths", json_integer(t->missing));
    json_object_set_new(root, "exit_status", json_integer(exit_status(t)));
    for (size_t i = 0; i < t->n; i++) {
        const group *g = &t->groups[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(gmp_verdict_words(g->kind)));
        json_object_set_new(o, "out_of_memory", json_boolean(gmp_verdict_is_death_of_memory(g->kind)));
        json_object_set_new(o, "backend", json_string(g->backend));
        json_object_set_new(o, "api", json_string(g->api));
        json_object_set_new(o, "reason", json_string(g->reason));
        json_object_set_new(o, "site", json_string(g->site));
        json_object_set_new(o, "count", json_integer(g->count));
        json_object_set_new(o, "first_seen", json_string(g->first));
        json_object_set_new(o, "last_seen", json_string(g->last));
        json_object_set_new(o, "largest_request",
                            g->has_largest ? json_u64(g->largest) : json_null());
        json_object_set_new(o, "ranks", names_json(&g->ranks));
        json_object_set_new(o, "hosts", names_json(&g->hosts));
        json_object_set_new(o, "slurm_jobs", names_json(&g->jobs));
        json_object_set_new(o, "example", json_string(g->example));
        json_array_append_new(groups, o);
    }
    json_object_set_new(root, "groups", groups);
    print_json(root);
}

/* Markdown and XML carry bundle text: control characters shown visibly
 * (XML 1.0 cannot hold most of them even as references), then the markup's
 * own escapes.  A Markdown cell is a code span: no link, image, emphasis or
 * HTML inside, and GitHub makes no autolink there either. */
static void put_escaped(const char *s, int xml)
{
    char shown[2048];
    clean_text(s, shown, sizeof shown);
    if (!xml)
        putchar('`');
    for (const char *p = shown; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (xml && c == '<')
            fputs("&lt;", stdout);
        else if (xml && c == '>')
            fputs("&gt;", stdout);
        else if (xml && c == '&')
            fputs("&amp;", stdout);
        else if (xml && c == '"')
            fputs("&quot;", stdout);
        else if (xml && c == '\'')
            fputs("&apos;", stdout);
        else if (!xml && c == '`')
            putchar('\''); /* a code span cannot hold its own delimiter */
        else if (!xml && c == '|')
            fputs("\\|", stdout); /* a table cell's end, even in a code span */
        else
            putchar(c);
    }
    if (!xml)
        putchar('`');
}

static void print_markdown(const triage *t)
{
    char sum[300];
    summary(t, sum, sizeof sum);
    printf("### gpumemprof: %s\n\n", sum);
    if (!t->n) {
        puts(t->unreadable + t->missing ? "No bundle could be read." : "No bundle found.");
        return;
    }
    puts("| # | bundles | kind | backend | API | reason | site | largest request | ranks | "
         "hosts | Slurm jobs | first seen | last seen |");
    puts("| ---: | ---: | --- | --- | --- | --- | --- | ---: | --- | --- | --- | --- | --- |");
    for (size_t i = 0; i < t->n; i++) {
        const group *g = &t->groups[i];
        cells c;
        cells_of(g, &c);
        printf("| %zu | %ld | %s | ", i + 1, g->count, gmp_verdict_words(g->kind));
        const char *row[] = {g->backend, g->api, g->reason, g->site, c.big, c.ranks, c.hosts,
                             c.jobs, g->first, g->last};
        for (size_t k = 0; k < sizeof row / sizeof *row; k++) {
            put_escaped(row[k], 0);
            fputs(" | ", stdout);
        }
        putchar('\n');
    }
    if (t->unreadable)
        printf("\n%ld bundle(s) could not be read.\n", t->unreadable);
    if (t->missing)
        printf("\n%ld path(s) do not exist or are not directories.\n", t->missing);
}

/* One test case per signature: an out-of-memory death is a failure, an
 * unreadable bundle or missing path one error case, anything else passes
 * with what was seen as its output, so the report fails exactly when the
 * exit status is not 0. */
static void print_junit(const triage *t)
{
    size_t failures = 0, errors = t->unreadable || t->missing;
    for (size_t i = 0; i < t->n; i++)
        failures += gmp_verdict_is_death_of_memory(t->groups[i].kind);
    size_t tests = t->n + errors;
    puts("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    for (int level = 0; level < 2; level++)
        printf("%s<%s name=\"gpumemprof%s\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\">\n",
               level ? "  " : "", level ? "testsuite" : "testsuites", level ? ".oom" : "",
               tests ? tests : 1, failures, errors);
    if (!tests)
        puts("    <testcase classname=\"gpumemprof.oom\" name=\"no out-of-memory bundle\"/>");
    for (size_t i = 0; i < t->n; i++) {
        const group *g = &t->groups[i];
        int oom = gmp_verdict_is_death_of_memory(g->kind);
        cells c;
        cells_of(g, &c);
        fputs("    <testcase classname=\"gpumemprof.oom\" name=\"", stdout);
        put_escaped(g->reason, 1);
        fputs(" in ", stdout);
        put_escaped(g->api, 1);
        fputs(" at ", stdout);
        put_escaped(g->site, 1);
        if (oom)
            printf("\">\n      <failure message=\"%ld bundle(s), %s\" type=\"", g->count,
                   gmp_verdict_words(g->kind));
        else
            printf("\">\n      <system-out>%ld bundle(s), %s (not an out-of-memory death): ",
                   g->count, gmp_verdict_words(g->kind));
        if (oom) {
            put_escaped(g->reason, 1);
            fputs("\">", stdout);
        }
        const char *text[] = {g->backend, " ", g->api, ", largest request ", c.big,
                              "; ranks ", c.ranks, "; hosts ", c.hosts, "; Slurm jobs ",
                              c.jobs, "; first ",
                              g->first, ", last ", g->last, "; e.g. ", g->example};
        for (size_t k = 0; k < sizeof text / sizeof *text; k++)
            if (k % 2)
                fputs(text[k], stdout);
            else
                put_escaped(text[k], 1);
        printf("</%s>\n    </testcase>\n", oom ? "failure" : "system-out");
    }
    if (errors) {
        printf("    <testcase classname=\"gpumemprof.oom\" name=\"bundles that could not be "
               "read\">\n      <error message=\"%ld unreadable bundle(s), %ld missing path(s)\">",
               t->unreadable, t->missing);
        put_escaped(t->first_unreadable, 1);
        puts("</error>\n    </testcase>");
    }
    puts("  </testsuite>\n</testsuites>");
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect triage PATH... [--format text|json|markdown|junit]\n"
          "Every bundle under the PATHs (bundle directories, or directories searched\n"
          "8 levels deep), grouped by kind and signature: backend, failing API, reason\n"
          "and the failure's site (the innermost Python frame of the program's own,\n"
          "else the failing call's innermost frame of the program's own as\n"
          "module+offset).  Per group: count, first and last seen, largest request,\n"
          "ranks and hosts.  markdown suits a CI job summary, junit a CI test report\n"
          "(a failing test for each out-of-memory signature, an error for unreadable\n"
          "input).\n"
          "Exit status, the same in every format:\n"
          "  0  no out-of-memory death (memory-pressure warnings, and kills or crashes\n"
          "     nothing ties to memory, are listed but are not failures)\n"
          "  3  at least one out-of-memory death (whatever else was found)\n"
          "  1  no out-of-memory death, but a PATH does not exist or is not a directory,\n"
          "     or a bundle could not be read\n"
          "  2  usage error\n",
          f);
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
    static const struct option options[] = {{"format", required_argument, NULL, 'f'}, {0}};
    verb_args a = {.verb = "triage", .usage = usage, .longopts = options};
    const char *format = "text";
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'f')
            return VERB_EXIT(c);
        format = optarg;
    }
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "markdown") &&
        strcmp(format, "junit")) {
        fputs("gmp-inspect triage: unknown format '", stderr);
        print_clean(stderr, format, 40);
        fputs("' (text, json, markdown or junit)\n", stderr);
        return EXIT_USAGE;
    }
    if (verb_operands(&a, argc, 1, argc) < 0)
        return EXIT_USAGE;
    inspect_raw_json = !strcmp(format, "json");
    triage t = {0};
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
        for_each_bundle(argv[i], add_bundle, &t);
    }
    if (t.n > 1)
        qsort(t.groups, t.n, sizeof *t.groups, by_count);
    if (!strcmp(format, "json"))
        print_triage_json(&t);
    else if (!strcmp(format, "markdown"))
        print_markdown(&t);
    else if (!strcmp(format, "junit"))
        print_junit(&t);
    else
        print_text(&t);
    free(t.groups);
    return exit_status(&t);
}
