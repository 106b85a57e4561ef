/*
 * diff.c — `gmp-inspect diff A B`: what changed between two bundles, for
 * "it ran yesterday": the reason, the failed request, the peak in use per
 * device (from the events), the top allocation site, and the configuration
 * that shapes memory (GMP_*, PYTORCH_*, CUDA_VISIBLE_DEVICES, ... from
 * environment.json).  Lines that are the same are not printed.
 */
#include "answer.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PEAKS 32

typedef struct facts {
    char reason[200], api[64], site[320];
    char size[32]; /* the failed request's, or "-" */
    int npeaks;
    char where[MAX_PEAKS][48];
    int64_t peak[MAX_PEAKS];
} facts;

static void read_facts(bundle *b, facts *f)
{
    memset(f, 0, sizeof *f);
    const char *s;
    json_t *md = b->metadata;
    const bundle_failure *fr = bundle_failure_of(b);
    snprintf(f->reason, sizeof f->reason, "%s", (s = jstr(md, "reason")) ? s : "?");
    snprintf(f->api, sizeof f->api, "%s", fr && fr->api ? fr->api : "-");
    if (!fr || !fr->has_size)
        snprintf(f->size, sizeof f->size, "-");
    else
        fmt_bytes(fr->size, f->size, sizeof f->size);
    size_t i;
    json_t *ev;
    event_record r;
    event_records_until(&b->events, b->events.n, i, ev, &r) {
        int64_t use = r.in_use;
        if (!r.has_in_use)
            continue;
        char w[48];
        event_where(ev, w, sizeof w);
        int k = 0;
        while (k < f->npeaks && strcmp(f->where[k], w))
            k++;
        if (k == f->npeaks && f->npeaks < MAX_PEAKS) {
            snprintf(f->where[f->npeaks], sizeof f->where[0], "%s", w);
            f->peak[f->npeaks++] = use;
        } else if (k < f->npeaks && use > f->peak[k]) {
            f->peak[k] = use;
        }
    }
}

static void bytes_or_dash(int64_t v, char *out, size_t cap)
{
    if (v < 0)
        snprintf(out, cap, "-");
    else
        fmt_bytes((uint64_t)v, out, cap);
}

static int line_if_differs(const char *what, const char *a, const char *b)
{
    if (!strcmp(a, b))
        return 0;
    printf("%-22s ", what);
    print_clean(stdout, a, 300);
    printf("  ->  ");
    print_clean(stdout, b, 300);
    putchar('\n');
    return 1;
}

static int is_config_var(const char *name)
{
    static const char *const prefixes[] = {"GMP_", "PYTORCH_", "CUDA_", "HIP_", "TF_", "XLA_",
                                           "NCCL_", "JAX_", "OMP_", "MALLOC_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

/* Variables set in one environment.json and not the same in the other. */
static int config_diff(json_t *ea, json_t *eb, int first_pass)
{
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(ea, key, v) {
        if (!is_config_var(key))
            continue;
        const char *a = json_string_value(v), *b = jstr(eb, key);
        if (!first_pass && b)
            continue; /* seen from the other side */
        char what[80];
        snprintf(what, sizeof what, "%.60s", key);
        n += first_pass ? line_if_differs(what, a ? a : "?", b ? b : "(unset)")
                        : line_if_differs(what, "(unset)", a ? a : "?");
    }
    return n;
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect diff BUNDLE_A BUNDLE_B\n"
          "What changed from A to B: reason, failed request, peak in use per device,\n"
          "and the configuration that shapes memory (GMP_*, PYTORCH_*, CUDA_*, XLA_*,\n"
          "...).  Only what differs is printed.\n"
          "Exit status: 0 when nothing differs, 1 when something does or a bundle\n"
          "cannot be read, 2 usage error (as diff(1)).\n",
          f);
}

int cmd_diff(int argc, char **argv)
{
    verb_args args = {.verb = "diff", .usage = usage};
    for (int c; (c = verb_option(&args, argc, argv)) != -1;)
        return VERB_EXIT(c);
    if (verb_operands(&args, argc, 2, 2) < 0)
        return EXIT_USAGE;
    argv += optind - 1; /* the two bundles: argv[1] and argv[2] */
    bundle a, b;
    char err[1024];
    if (bundle_open(&a, argv[1], 1, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect diff: %s\n", err);
        return EXIT_INVALID;
    }
    if (bundle_open(&b, argv[2], 1, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect diff: %s\n", err);
        bundle_close(&a);
        return EXIT_INVALID;
    }
    facts fa, fb;
    read_facts(&a, &fa);
    read_facts(&b, &fb);
    int n = 0;
    n += line_if_differs("reason", fa.reason, fb.reason);
    n += line_if_differs("failed API", fa.api, fb.api);
    n += line_if_differs("request", fa.size, fb.size);
    char sa[32], sb[32];
    for (int i = 0; i < fa.npeaks; i++) {
        int64_t other = -1;
        for (int k = 0; k < fb.npeaks; k++)
            if (!strcmp(fa.where[i], fb.where[k]))
                other = fb.peak[k];
        char what[80];
        snprintf(what, sizeof what, "peak %s", fa.where[i]);
        bytes_or_dash(fa.peak[i], sa, sizeof sa);
        bytes_or_dash(other, sb, sizeof sb);
        n += line_if_differs(what, sa, sb);
    }
    for (int k = 0; k < fb.npeaks; k++) {
        int seen = 0;
        for (int i = 0; i < fa.npeaks; i++)
            seen |= !strcmp(fa.where[i], fb.where[k]);
        if (seen)
            continue;
        char what[80];
        snprintf(what, sizeof what, "peak %s", fb.where[k]);
        bytes_or_dash(fb.peak[k], sb, sizeof sb);
        n += line_if_differs(what, "-", sb);
    }
    json_t *ea = json_object_get(a.environment, "environment"),
           *eb = json_object_get(b.environment, "environment");
    n += config_diff(ea, eb, 1);
    n += config_diff(eb, ea, 0);
    if (!n)
        puts("no difference in reason, request, peaks or configuration");
    bundle_close(&a);
    bundle_close(&b);
    return n ? EXIT_INVALID : EXIT_OK;
}
