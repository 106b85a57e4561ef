/*
 * triage_formats.c — what `gmp-inspect triage` found (triage.c gathers it),
 * said in each format: text for a person, JSON for a program, Markdown for
 * a CI job summary, JUnit XML for a CI test report.  Every format opens
 * with the runs' verdicts (runs.c) and rests on one exit status.
 */
#include "answer.h"
#include "verbs.h"

#include <string.h>

/* The one exit status every format reports. */
int triage_exit_status(const triage *t)
{
    return t->ooms ? 3 : t->unreadable || t->missing ? EXIT_INVALID : EXIT_OK;
}

static void join(const name_set *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (const char *at = NULL; (at = name_set_next(s, at)) != NULL;)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", at != s->text ? "," : "", at);
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

/* Each run's verdict, the runs with a death first, in the order they
 * died; what a text, a JSON and a Markdown reader are told alike. */
static void print_runs_text(const triage *t)
{
    long dying = 0;
    for (size_t i = 0; i < t->runs.n; i++)
        dying += t->runs.runs[i].deaths > 0;
    if (!t->runs.n)
        return;
    printf("\n%zu run(s), %ld with an out-of-memory death:\n", t->runs.n, dying);
    char heading[400], verdict[2048];
    for (size_t i = 0; i < t->runs.n; i++) {
        const run_story *r = &t->runs.runs[i];
        run_heading(r, heading, sizeof heading);
        run_verdict(r, verdict, sizeof verdict);
        printf("  run %zu  ", i + 1);
        print_clean(stdout, heading, sizeof heading);
        printf(" (%ld bundle(s))\n    ", r->bundles);
        print_clean(stdout, verdict, sizeof verdict);
        if (r->deaths) {
            fputs("\n    first death: ", stdout);
            print_clean(stdout, r->first.bundle, 600);
        }
        putchar('\n');
    }
}

void triage_print_text(const triage *t)
{
    char sum[300];
    summary(t, sum, sizeof sum);
    printf("%zu signature(s) in %ld bundle(s): %s\n", t->signatures.n, t->bundles, sum);
    print_runs_text(t);
    for (size_t i = 0; i < t->signatures.n; i++) {
        const group *g = &t->signatures.v[i];
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
    for (const char *at = NULL; (at = name_set_next(s, at)) != NULL;)
        json_array_append_new(a, json_string(at));
    return a;
}

static json_t *runs_json(const triage *t)
{
    json_t *runs = json_array();
    char heading[400], verdict[2048], when[48];
    for (size_t i = 0; i < t->runs.n; i++) {
        const run_story *r = &t->runs.runs[i];
        json_t *o = json_object(), *members = json_array();
        run_heading(r, heading, sizeof heading);
        run_verdict(r, verdict, sizeof verdict);
        json_object_set_new(o, "run", json_string(heading));
        json_object_set_new(o, "key", json_string(r->key));
        json_object_set_new(o, "world_size", r->world >= 0 ? json_integer(r->world) : json_null());
        json_object_set_new(o, "bundles", json_integer(r->bundles));
        json_object_set_new(o, "out_of_memory_deaths", json_integer(r->deaths));
        json_object_set_new(o, "verdict", json_string(verdict));
        json_object_set_new(o, "first_death_bundle",
                            r->deaths ? json_string(r->first.bundle) : json_null());
        json_object_set_new(o, "first_death_site",
                            r->deaths ? json_string(r->first.site) : json_null());
        for (size_t k = 0; k < r->n; k++) {
            const run_member *m = &r->members[k];
            json_t *mo = json_object();
            run_time_text(m->at, when, sizeof when);
            json_object_set_new(mo, "rank", m->rank >= 0 ? json_integer(m->rank) : json_null());
            json_object_set_new(mo, "pid", m->pid >= 0 ? json_integer(m->pid) : json_null());
            json_object_set_new(mo, "at", json_string(when));
            json_object_set_new(mo, "kind", json_string(gmp_verdict_words(m->kind)));
            json_object_set_new(mo, "out_of_memory",
                                json_boolean(gmp_verdict_is_death_of_memory(m->kind)));
            json_object_set_new(mo, "signal", m->signal[0] ? json_string(m->signal) : json_null());
            json_object_set_new(mo, "bundle", json_boolean(!m->ended)); /* else gmp-run's note */
            json_object_set_new(mo, "exit_status", m->ended && m->exit_status >= 0
                                                       ? json_integer(m->exit_status)
                                                       : json_null());
            json_array_append_new(members, mo);
        }
        json_object_set_new(o, "members", members);
        json_array_append_new(runs, o);
    }
    return runs;
}

void triage_print_json(const triage *t)
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
    json_object_set_new(root, "exit_status", json_integer(triage_exit_status(t)));
    json_object_set_new(root, "runs", runs_json(t));
    for (size_t i = 0; i < t->signatures.n; i++) {
        const group *g = &t->signatures.v[i];
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

void triage_print_markdown(const triage *t)
{
    char sum[300];
    summary(t, sum, sizeof sum);
    printf("### gpumemprof: %s\n\n", sum);
    if (!t->signatures.n) {
        puts(t->unreadable + t->missing ? "No bundle could be read." : "No bundle found.");
        return;
    }
    char heading[400], verdict[2048];
    for (size_t i = 0; i < t->runs.n; i++) {
        const run_story *r = &t->runs.runs[i];
        run_heading(r, heading, sizeof heading);
        run_verdict(r, verdict, sizeof verdict);
        fputs("- **Run** ", stdout);
        put_escaped(heading, 0);
        fputs(": ", stdout);
        put_escaped(verdict, 0);
        putchar('\n');
    }
    if (t->runs.n)
        putchar('\n');
    puts("| # | bundles | kind | backend | API | reason | site | largest request | ranks | "
         "hosts | Slurm jobs | first seen | last seen |");
    puts("| ---: | ---: | --- | --- | --- | --- | --- | ---: | --- | --- | --- | --- | --- |");
    for (size_t i = 0; i < t->signatures.n; i++) {
        const group *g = &t->signatures.v[i];
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
static const run_story *run_named(const triage *t, const char *key)
{
    for (size_t i = 0; i < t->runs.n; i++)
        if (!strcmp(t->runs.runs[i].key, key))
            return &t->runs.runs[i];
    return NULL;
}

void triage_print_junit(const triage *t)
{
    const group_list *l = &t->per_run;
    size_t failures = 0, errors = t->unreadable || t->missing;
    for (size_t i = 0; i < l->n; i++)
        failures += gmp_verdict_is_death_of_memory(l->v[i].kind);
    size_t tests = l->n + errors;
    puts("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    for (int level = 0; level < 2; level++)
        printf("%s<%s name=\"gpumemprof%s\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\">\n",
               level ? "  " : "", level ? "testsuite" : "testsuites", level ? ".oom" : "",
               tests ? tests : 1, failures, errors);
    if (!tests)
        puts("    <testcase classname=\"gpumemprof.oom\" name=\"no out-of-memory bundle\"/>");
    char heading[400], verdict[2048];
    for (size_t i = 0; i < l->n; i++) {
        const group *g = &l->v[i];
        const run_story *r = g->run[0] ? run_named(t, g->run) : NULL;
        int oom = gmp_verdict_is_death_of_memory(g->kind);
        cells c;
        cells_of(g, &c);
        fputs("    <testcase classname=\"gpumemprof.oom\" name=\"", stdout);
        if (r) { /* one test per run and signature, whatever its ranks */
            run_heading(r, heading, sizeof heading);
            run_verdict(r, verdict, sizeof verdict);
            put_escaped(heading, 1);
            fputs(": ", stdout);
        }
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
        if (r) {
            fputs("the run: ", stdout);
            put_escaped(verdict, 1);
            fputs("; this signature: ", stdout);
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

/* One line a run, for gmp-run's last word: "gpumemprof: HEADING: VERDICT". */
void triage_print_lines(const triage *t)
{
    char heading[400], verdict[2048];
    for (size_t i = 0; i < t->runs.n; i++) {
        const run_story *r = &t->runs.runs[i];
        run_heading(r, heading, sizeof heading);
        run_verdict(r, verdict, sizeof verdict);
        fputs("gpumemprof: ", stdout);
        print_clean(stdout, heading, sizeof heading);
        fputs(": ", stdout);
        print_clean(stdout, verdict, sizeof verdict);
        putchar('\n');
    }
}
