/*
 * run_words.c — a run's verdict in plain words, from what runs.c gathered:
 * the heading ("run at rendezvous 127.0.0.1:29511 (launcher pid 4711), 3
 * ranks on a and b") and the verdict ("rank 1 ran out of host memory first,
 * at ... (ENOMEM in malloc at train.py:11 in fill); ranks 0 and 2 ended by
 * SIGTERM 1.6 s later, not of memory").  Members alike share one phrase;
 * ranks that left nothing are named last.  triage and gmp-run's last line
 * both print these.
 */
#include "answer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a member other than the first did, as a phrase around its time
 * ("%s" where the time goes: "0.9 s later"); members alike share it. */
static void member_words(const run_member *m, char *out, size_t cap)
{
    const char *sig = m->signal[0] ? m->signal : NULL;
    if (m->ended && !sig) { /* its end noted, no bundle: it exited */
        snprintf(out, cap, "exited %d %%s%s", m->exit_status,
                 m->exit_status ? ", not of memory" : "");
        return;
    }
    switch (m->kind) {
    case GMP_VERDICT_OUT_OF_MEMORY:
        snprintf(out, cap, "ran out of memory too, %%s%s%s", sig ? ", then ended by " : "",
                 sig ? sig : "");
        return;
    case GMP_VERDICT_CRASH_AFTER_FAILED:
        snprintf(out, cap, "crashed (%s) after a failed allocation, %%s", sig ? sig : "a signal");
        return;
    case GMP_VERDICT_OOM_KILLED:
        snprintf(out, cap, "fell to the OOM killer %%s");
        return;
    case GMP_VERDICT_CGROUP_OOM_KILL:
        snprintf(out, cap, "were killed while the cgroup's OOM killer ran, %%s");
        return;
    case GMP_VERDICT_KILLED_UNKNOWN:
        snprintf(out, cap, "ended %s%s %%s, not of memory", sig ? "by " : "killed",
                 sig ? sig : "");
        return;
    case GMP_VERDICT_CRASH:
        snprintf(out, cap, "crashed (%s) %%s, not of memory", sig ? sig : "a signal");
        return;
    case GMP_VERDICT_PRESSURE:
        snprintf(out, cap, "warned of memory pressure %%s");
        return;
    case GMP_VERDICT_SURVIVED:
    default:
        snprintf(out, cap, "survived a failed allocation %%s");
        return;
    }
}

/* "rank 1", "ranks 0 and 2", "ranks 0, 2, 3, 4, 5, 6 and 57 more",
 * "process 4084" where no rank is known. */
#define WHO_NAMED 6
static void who_words(const run_member *const *m, size_t n, char *out, size_t cap)
{
    int all_ranked = 1;
    for (size_t i = 0; i < n; i++)
        all_ranked &= m[i]->rank >= 0;
    out[0] = '\0';
    size_t named = n > WHO_NAMED + 1 ? WHO_NAMED : n;
    for (size_t i = 0; i < named; i++) {
        size_t len = strlen(out);
        const char *sep = !i ? "" : i + 1 == named && named == n ? " and " : ", ";
        if (all_ranked)
            snprintf(out + len, cap - len, "%s%s%ld", sep, i ? "" : n > 1 ? "ranks " : "rank ",
                     m[i]->rank);
        else if (m[i]->rank >= 0)
            snprintf(out + len, cap - len, "%srank %ld", sep, m[i]->rank);
        else
            snprintf(out + len, cap - len, "%sprocess %lld", sep, m[i]->pid);
    }
    if (named < n) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, " and %zu more", n - named);
    }
}

/* Members by rank, those without one after, by pid. */
static int by_rank(const void *a, const void *b)
{
    const run_member *x = *(const run_member *const *)a, *y = *(const run_member *const *)b;
    if ((x->rank < 0) != (y->rank < 0))
        return x->rank < 0 ? 1 : -1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* "0.9 s later", "0.2 to 0.9 s later", "at the same moment", "3.1 s before". */
static void delta_words(double lo, double hi, char *out, size_t cap)
{
    if (fabs(lo) < 0.05 && fabs(hi) < 0.05) {
        snprintf(out, cap, "at the same moment");
        return;
    }
    const char *side = hi <= 0 ? "before" : "later";
    if (hi <= 0) {
        double t = -lo;
        lo = -hi;
        hi = t;
    }
    if (lo < 0)
        lo = 0;
    if (hi - lo < 0.05)
        snprintf(out, cap, "%.1f s %s", hi, side);
    else
        snprintf(out, cap, "%.1f to %.1f s %s", lo, hi, side);
}

static int is_first(const run_story *r, const run_member *m)
{
    return r->deaths && m->at == r->first.member.at && m->rank == r->first.member.rank &&
           m->pid == r->first.member.pid && m->kind == r->first.member.kind;
}

/* "rank 1 ran out of host memory first, at T (ENOMEM in malloc at
 * train.py:29 in step)" */
static void first_words(const run_story *r, char *out, size_t cap)
{
    const run_member *first = &r->first.member;
    const run_member *self[] = {first};
    char who[64], when[48], how[200], detail[400] = "";
    who_words(self, 1, who, sizeof who);
    run_time_text(first->at, when, sizeof when);
    const char *sig = first->signal[0] ? first->signal : NULL;
    if (first->kind == GMP_VERDICT_CRASH_AFTER_FAILED)
        snprintf(how, sizeof how, "crashed (%s) after an allocation of %s failed",
                 sig ? sig : "a signal", r->first.memory);
    else if (first->kind == GMP_VERDICT_OOM_KILLED)
        snprintf(how, sizeof how, "was killed by the OOM killer");
    else if (first->kind == GMP_VERDICT_CGROUP_OOM_KILL)
        snprintf(how, sizeof how, "was killed while its cgroup's OOM killer ran");
    else
        snprintf(how, sizeof how, "ran out of %s", r->first.memory);
    const char *site = strcmp(r->first.site, "-") ? r->first.site : "";
    int named = r->first.reason[0] || r->first.api[0];
    if (named || *site)
        snprintf(detail, sizeof detail, " (%s%s%s%s%s)", r->first.reason,
                 r->first.reason[0] && r->first.api[0] ? " in " : "", r->first.api,
                 *site ? named ? " at " : "at " : "", site);
    snprintf(out, cap, "%s %s%s at %s%s%s%s", who, how, r->n > 1 ? " first," : "", when, detail,
             sig && first->kind == GMP_VERDICT_OUT_OF_MEMORY ? ", then was ended by " : "",
             sig && first->kind == GMP_VERDICT_OUT_OF_MEMORY ? sig : "");
}

/* The ranks below the world size that left nothing: "; ranks 0 and 2
 * left no bundle".  Only where every member's rank is known. */
static void missing_words(const run_story *r, char *out, size_t cap)
{
    if (r->world <= 0 || r->world > 1 << 20)
        return;
    unsigned char *seen = calloc((size_t)r->world, 1);
    run_member *gone = calloc((size_t)r->world, sizeof *gone);
    const run_member **list = calloc((size_t)r->world, sizeof *list);
    size_t n = 0;
    int all_ranked = seen && gone && list;
    for (size_t i = 0; i < r->n && all_ranked; i++) {
        all_ranked = r->members[i].rank >= 0;
        if (all_ranked && r->members[i].rank < r->world)
            seen[r->members[i].rank] = 1;
    }
    for (long k = 0; all_ranked && k < r->world; k++)
        if (!seen[k]) {
            gone[n].rank = k;
            list[n] = &gone[n];
            n++;
        }
    if (n) {
        char who[512];
        who_words(list, n, who, sizeof who);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "; %s left no bundle", who);
    }
    free(seen);
    free(gone);
    free(list);
}

void run_verdict(const run_story *r, char *out, size_t cap)
{
    out[0] = '\0';
    if (r->deaths)
        first_words(r, out, cap);
    else
        snprintf(out, cap, "no out-of-memory death");

    /* the others, by what they did, in the order the first of each did it */
    char *done = calloc(r->n ? r->n : 1, 1);
    const run_member **alike = calloc(r->n ? r->n : 1, sizeof *alike);
    for (size_t i = 0; done && alike && i < r->n; i++) {
        const run_member *m = &r->members[i];
        if (done[i] || is_first(r, m))
            continue;
        char how[200], other[200];
        member_words(m, how, sizeof how);
        size_t n = 0;
        double lo = m->at, hi = m->at;
        for (size_t k = i; k < r->n; k++) {
            if (done[k] || is_first(r, &r->members[k]))
                continue;
            member_words(&r->members[k], other, sizeof other);
            if (strcmp(how, other))
                continue;
            done[k] = 1;
            alike[n++] = &r->members[k];
            lo = fmin(lo, r->members[k].at);
            hi = fmax(hi, r->members[k].at);
        }
        char who[512], delta[112], said[400];
        qsort(alike, n, sizeof *alike, by_rank); /* "ranks 0 and 2", whoever ended first */
        who_words(alike, n, who, sizeof who);
        if (r->deaths) {
            delta_words(lo - r->first.at, hi - r->first.at, delta, sizeof delta);
        } else { /* no death to count from: the time itself, or its span */
            char when[48], until[48];
            run_time_text(lo, when, sizeof when);
            run_time_text(hi, until, sizeof until);
            if (hi - lo < 0.0005)
                snprintf(delta, sizeof delta, "at %s", when);
            else
                snprintf(delta, sizeof delta, "from %s to %s", when, until);
        }
        /* how holds one %s, put there by member_words */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(said, sizeof said, how, delta);
#pragma GCC diagnostic pop
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "; %s %s", who, said);
    }
    free(done);
    free(alike);
    missing_words(r, out, cap);
}

void run_heading(const run_story *r, char *out, size_t cap)
{
    snprintf(out, cap, "%s", r->title);
    if (r->world > 0) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, ", %ld rank%s", r->world, r->world == 1 ? "" : "s");
    }
    if (r->host_count) {
        size_t len = strlen(out);
        if (r->host_count > RUN_HOSTS_NAMED)
            snprintf(out + len, cap - len, " on more than %d hosts", RUN_HOSTS_NAMED);
        else
            for (int i = 0; i < r->host_count; i++) {
                len = strlen(out);
                snprintf(out + len, cap - len, "%s%s", !i ? " on " : i + 1 == r->host_count ? " and " : ", ",
                         r->hosts[i]);
            }
    }
}
