/*
 * window_growth.c — growth before the failure, one of the likely causes
 * `gmp-inspect show` opens with (diagnose.c): the events of the failed
 * request's device replayed up to the failure, the in-use series judged by
 * the recorder's growth rule (gmp_growth_judge, as `gmp-inspect leaks` and
 * the Python package judge it), and the site of what stayed named when one
 * site made nearly all of it.
 */
#include "gpumemprof.h"
#include "answer.h"

#include <stdlib.h>
#include <string.h>

/* "93 µs", "1.5 s", "2.0 min" */
static void fmt_duration(double secs, char *out, size_t cap)
{
    if (secs < 1e-3)
        snprintf(out, cap, "%.0f \xc2\xb5s", secs * 1e6);
    else if (secs < 1)
        snprintf(out, cap, "%.0f ms", secs * 1e3);
    else if (secs < 120)
        snprintf(out, cap, "%.1f s", secs);
    else
        snprintf(out, cap, "%.1f min", secs / 60);
}

/* An allocation of the growth window, and whether it was freed by the
 * failure (for the site of what stayed). */
typedef struct window_alloc {
    int64_t stack, size;
    int freed, quarter;
    double at; /* its place among the events */
} window_alloc;

/* One that counts for the site of what stayed: not freed, with a stack,
 * and (for a loop that frees) made after the first quarter. */
static int stayed_in_window(const window_alloc *a, int few_frees)
{
    return !a->freed && a->stack > 0 && (a->quarter > 0 || few_frees);
}

/* Growth on the failed request's device up to the failure.  Two shapes:
 * allocations with few frees (the in-use count climbs), and a loop that
 * frees most of what it makes each step but keeps some (a cache, a list of
 * losses): what stays after the frees climbs in every quarter of the
 * window — the rule `gmp-inspect leaks` and the Python package apply
 * (gmp_growth_judge).  Either way the growth must be half of what was in
 * use at the failure.  The site is the one that made (nearly) all the
 * bytes still held at the failure of the allocations made after the first
 * quarter (before it: what the growth started from). */
int64_t window_growth(bundle *b, const char *backend, int64_t device, char *what,
                      size_t what_cap, char *evidence, size_t evidence_cap)
{
    size_t i, n = 0, cap = 0, np = 0, pcap = 0, total = events_until_failure(&b->events);
    json_t *ev;
    int64_t first = -1, last = -1, allocs = 0, frees = 0;
    double t0 = 0, t1 = 0, *pt = NULL, *pv = NULL; /* t0, t1: seconds, for the words */
    window_alloc *made = NULL;
    live_set live; /* each live allocation's index in made */
    live_set_init(&live, REPLAY_LIVE_MAX);
    event_record r;
    event_records_until(&b->events, total, i, ev, &r) {
        int64_t use = r.in_use;
        if (!r.backend || strcmp(r.backend, backend) || r.device != device || !r.has_in_use ||
            use < 0 || use > HOSTILE_BYTES)
            continue;
        if (r.type != GMP_EV_ALLOC && r.type != GMP_EV_FREE)
            continue;
        double t = r.time;
        if (first < 0) {
            first = use;
            t0 = t;
        }
        last = use;
        t1 = t;
        if (np == pcap) { /* the in-use series, for the rule */
            double *gt = realloc(pt, (pcap = pcap ? 2 * pcap : 256) * sizeof *pt);
            pt = gt ? gt : pt;
            double *gv = gt ? realloc(pv, pcap * sizeof *pv) : NULL;
            if (!gv) {
                json_decref(ev);
                break;
            }
            pv = gv;
        }
        pt[np] = (double)i; /* the clock of activity: the event's place */
        pv[np++] = (double)use;
        uint64_t addr = r.address;
        if (r.type == GMP_EV_FREE) {
            frees++;
            live_block *gone = addr ? live_free(&live, 0, addr) : NULL;
            if (gone)
                made[gone->mark].freed = 1;
            continue;
        }
        allocs++;
        if (n == cap) {
            window_alloc *grown = realloc(made, (cap = cap ? 2 * cap : 256) * sizeof *made);
            if (!grown) {
                json_decref(ev);
                break;
            }
            made = grown;
        }
        made[n] = (window_alloc){r.stack_id, r.size, 0, 0, (double)i};
        if (made[n].size < 0 || made[n].size > HOSTILE_BYTES)
            made[n].size = 0; /* a hostile count weighs nothing */
        live_block *held = addr ? live_alloc(&live, 0, addr, 0, 0) : NULL;
        if (held)
            held->mark = (int64_t)n;
        n++;
    }
    live_set_release(&live);
    gmp_growth g;
    gmp_growth_judge(pt, pv, np, 0, 0, &g);
    double x0 = np ? pt[0] : 0, x1 = np ? pt[np - 1] : 0;
    for (size_t k = 0; k < n; k++) { /* the quarters the rule cut */
        int q = x1 > x0 ? (int)((made[k].at - x0) / (x1 - x0) * 4) : 0;
        made[k].quarter = q < 0 ? 0 : q > 3 ? 3 : q;
    }
    free(pt);
    free(pv);
    int climbs = allocs >= 8 && g.detected;
    int few_frees = allocs >= 4 && frees * 2 < allocs && last > first;
    int64_t grew_by = few_frees ? last - first : climbs ? (int64_t)g.increase : 0;
    if (grew_by <= 0 || grew_by < last - grew_by) { /* half of it, at least */
        free(made);
        return 0;
    }
    /* the site of what stayed: the majority's stack by bytes (a vote, then
     * a count) */
    int64_t site = 0, votes = 0, from_site = 0, stayed = 0;
    for (size_t k = 0; k < n; k++) {
        if (!stayed_in_window(&made[k], few_frees))
            continue;
        if (votes <= 0) {
            site = made[k].stack;
            votes = 0;
        }
        votes += made[k].stack == site ? made[k].size : -made[k].size;
    }
    for (size_t k = 0; k < n; k++) {
        if (!stayed_in_window(&made[k], few_frees))
            continue;
        stayed += made[k].size;
        from_site += made[k].stack == site ? made[k].size : 0;
    }
    free(made);
    char grew[32], took[32];
    fmt_bytes((uint64_t)grew_by, grew, sizeof grew);
    fmt_duration(t1 - t0, took, sizeof took);
    snprintf(what, what_cap, "steady growth, like a leak or a cache that never lets go");
    if (few_frees && !frees)
        snprintf(evidence, evidence_cap,
                 "+%s over %s in %lld allocations and no frees before the failure", grew, took,
                 (long long)allocs);
    else if (few_frees)
        snprintf(evidence, evidence_cap,
                 "+%s over %s in %lld allocations and only %lld free%s before the failure", grew,
                 took, (long long)allocs, (long long)frees, frees == 1 ? "" : "s");
    else
        snprintf(evidence, evidence_cap,
                 "what stays after the frees climbed in every quarter of the last %s, by %s "
                 "(%lld allocations, %lld frees) before the failure",
                 took, grew, (long long)allocs, (long long)frees);
    /* a stack of interpreter frames alone is every Python allocation's, no
     * site (show prints the Python stack of the failure instead) */
    char where[320];
    if (site && from_site * 10 >= stayed * 8 &&
        name_site(b, site, where, sizeof where) == SITE_PROGRAM)
        snprintf(evidence + strlen(evidence), evidence_cap - strlen(evidence),
                 ", from one site: %s", where);
    return grew_by;
}
