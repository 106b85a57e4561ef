/*
 * diagnose.c — the opening of `gmp-inspect show`: the likely causes of a
 * bundle's out-of-memory, most certain first, each with the evidence from
 * the bundle that supports it.  Every rule reads only what the bundle holds;
 * a rule whose data is absent (device free memory comes from the
 * collectors) says nothing rather than guess.
 */
#include "gpumemprof.h"
#include "answer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CAUSES 8

typedef struct cause {
    char what[200];
    char evidence[600];
} cause;

typedef struct causes {
    cause c[MAX_CAUSES];
    int n;
} causes;

static void add(causes *cs, const char *what, const char *evidence)
{
    if (cs->n == MAX_CAUSES)
        return;
    snprintf(cs->c[cs->n].what, sizeof cs->c[0].what, "%s", what);
    snprintf(cs->c[cs->n].evidence, sizeof cs->c[0].evidence, "%s", evidence ? evidence : "");
    cs->n++;
}

static int starts(const char *s, const char *prefix)
{
    return s && !strncmp(s, prefix, strlen(prefix));
}

/* A soft rlimit from environment.json's process.rlimits, or -1. */
static int64_t rlimit_of(json_t *env, const char *name)
{
    json_t *lim = json_object_get(json_object_get(json_object_get(env, "process"), "rlimits"), name);
    int64_t v;
    return jint(lim, "soft", &v) == 0 ? v : -1;
}

/* held as a whole percent of limit, rounded; under the limit never 100. */
static int share_of(int64_t held, int64_t limit)
{
    int64_t pct = (held * 100 + limit / 2) / limit;
    return (int)(held < limit && pct >= 100 ? 99 : pct);
}

/* A size as a framework writes it after "allocat": "79.66 GiB", "2.55GiB",
 * "170,034,987,008 bytes"; -1 when the text there is none. */
static int64_t size_in_words(const char *p)
{
    while (isalpha((unsigned char)*p)) /* the rest of "allocate", "allocating" */
        p++;
    for (int skipped = 0; *p && !isdigit((unsigned char)*p); p++)
        if (++skipped > 8 || (*p != ' ' && !isalpha((unsigned char)*p)))
            return -1; /* "allocate 79.66", "allocating 17", no further */
    double v = 0, scale = 0;
    for (int digits = 0; isdigit((unsigned char)*p) || *p == ',' || *p == '.'; p++) {
        if (*p == ',')
            continue;
        if (*p == '.') {
            if (scale)
                return -1;
            scale = 1;
            continue;
        }
        if (++digits > 19)
            return -1;
        v = v * 10 + (*p - '0');
        if (scale)
            scale *= 10;
    }
    if (scale)
        v /= scale;
    while (*p == ' ')
        p++;
    static const struct { const char *unit; double bytes; } units[] = {
        {"bytes", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
        {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"B", 1}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strncmp(p, units[i].unit, strlen(units[i].unit))) {
            v *= units[i].bytes;
            return v >= 1 && v < (double)((int64_t)1 << 62) ? (int64_t)v : -1;
        }
    return -1;
}

static int64_t framework_request(json_t *md)
{
    const char *msg = jstr(md, "exception_message");
    for (const char *p = msg; p && (p = strstr(p, "llocat")) != NULL; p++) {
        int64_t v = size_in_words(p);
        if (v > 0)
            return v;
    }
    return -1;
}

int64_t framework_whole_request(json_t *md, int64_t piece)
{
    int64_t stated = piece >= 0 ? framework_request(md) : -1;
    /* beyond a message's rounding (written not to overflow: piece may be INT64_MAX) */
    return stated > piece && stated - piece > piece / 50 ? stated : -1;
}

/* window_growth's finding, when there is one, as a cause. */
static int64_t growth(bundle *b, const char *backend, int64_t device, causes *cs)
{
    char what[200], evidence[600];
    int64_t grew_by = window_growth(b, backend, device, what, sizeof what, evidence,
                                    sizeof evidence);
    if (grew_by > 0)
        add(cs, what, evidence);
    return grew_by;
}

/* The failed request's device as the bundle saw it, or NULL. */
static const bundle_device *device_of(bundle *b, int64_t device)
{
    size_t n;
    const bundle_device *d = bundle_devices_of(b, &n);
    for (size_t i = 0; i < n; i++)
        if ((d[i].has_device ? d[i].device : -1) == device)
            return &d[i];
    return NULL;
}

/* Its free and total bytes; -1 when not known. */
static int64_t device_free(bundle *b, int64_t device)
{
    const bundle_device *d = device_of(b, device);
    return d && d->has_free ? d->free : -1;
}

static int64_t device_total(bundle *b, int64_t device)
{
    const bundle_device *d = device_of(b, device);
    return d && d->has_total ? d->total : -1;
}

/* The one device the bundle's device_state has, or -1 (none, or several). */
static int64_t only_device(bundle *b)
{
    size_t n;
    const bundle_device *d = bundle_devices_of(b, &n);
    return n == 1 && d[0].has_device && d[0].device >= 0 ? d[0].device : -1;
}

/* What the host could ever give one request: the machine's memory and
 * swap, the memory cgroup's limit, RLIMIT_AS, each said with its number;
 * the smallest in *least (-1 when none is known). */
static void host_ceilings(bundle *b, char *out, size_t cap, int64_t *least)
{
    const bundle_host_state *h = bundle_host_state_of(b);
    int64_t mem = h && h->has_mem_total ? h->mem_total : -1;
    int64_t swap = h && h->has_swap_total ? h->swap_total : 0;
    int64_t cg = h && h->has_cgroup_max ? h->cgroup_max : -1;
    int64_t as = h && h->has_as_soft ? h->as_soft : -1;
    if (as < 0)
        as = rlimit_of(b->environment, "as");
    char a[32], c[32];
    out[0] = '\0';
    *least = -1;
    if (mem > 0) {
        fmt_bytes((uint64_t)mem, a, sizeof a);
        fmt_bytes((uint64_t)(swap > 0 ? swap : 0), c, sizeof c);
        snprintf(out, cap, "the machine has %s of memory and %s", a,
                 swap > 0 ? c : "no swap");
        if (swap > 0)
            snprintf(out + strlen(out), cap - strlen(out), " of swap");
        *least = mem + (swap > 0 ? swap : 0);
    }
    const struct { int64_t v; const char *what; } limits[] = {
        {cg, "its memory cgroup allows"}, {as, "RLIMIT_AS is"}};
    for (size_t i = 0; i < 2; i++) {
        if (limits[i].v <= 0)
            continue;
        fmt_bytes((uint64_t)limits[i].v, a, sizeof a);
        snprintf(out + strlen(out), cap - strlen(out), "%s%s %s", out[0] ? "; " : "",
                 limits[i].what, a);
        if (*least < 0 || limits[i].v < *least)
            *least = limits[i].v;
    }
}

static void device_rules(bundle *b, int64_t size, int64_t device, causes *cs)
{
    size_t i, n;
    const bundle_device *devices = bundle_devices_of(b, &n);
    for (i = 0; i < n; i++) {
        const bundle_device *d = &devices[i];
        int64_t dev = d->has_device ? d->device : -1, free_b = d->has_free ? d->free : -1,
                total = d->has_total ? d->total : -1, others = d->has_others ? d->others : -1;
        if (dev != device || free_b < 0)
            continue;
        char req[32], fr[32], tot[32], ev[600];
        fmt_bytes((uint64_t)size, req, sizeof req);
        fmt_bytes((uint64_t)free_b, fr, sizeof fr);
        fmt_bytes((uint64_t)(total > 0 ? total : 0), tot, sizeof tot);
        if (others > 0 && total > 0 && others * 4 >= total) { /* a quarter: the story */
            char o[32];
            fmt_bytes((uint64_t)others, o, sizeof o);
            snprintf(ev, sizeof ev, "other processes hold %s of device %lld's %s", o,
                     (long long)dev, tot);
            add(cs, "other processes holding memory on the device", ev);
            others = 0; /* said once */
        }
        if (size > free_b && total > 0 && size > total) {
            /* said already: more than the device could ever give */
        } else if (size > free_b) {
            snprintf(ev, sizeof ev, "asked for %s; %s free of %s on device %lld", req, fr, tot,
                     (long long)dev);
            add(cs, "a single request larger than the device's free memory", ev);
        } else {
            snprintf(ev, sizeof ev, "%s free on device %lld, at least the %s asked for, yet it "
                                    "failed: no contiguous block that large", fr, (long long)dev, req);
            add(cs, "fragmentation", ev);
        }
        if (others > 0 && total > 0 && others * 10 > total) {
            char o[32];
            fmt_bytes((uint64_t)others, o, sizeof o);
            snprintf(ev, sizeof ev, "other processes hold %s of device %lld's %s", o,
                     (long long)dev, tot);
            add(cs, "other processes holding memory on the device", ev);
        }
    }
}

/* A runtime's own words name its limit ("the JVM ran out of memory: its
 * Java heap was full") and the flag that set it; other words, the cause as
 * the caller puts it.  ending: what the runtime did ("ran out of memory"),
 * then: what followed its words (", then aborted"). */
static void runtime_cause(bundle *b, causes *cs, const char *ending, const char *then,
                          const char *otherwise, const char *evidence)
{
    const runtime_words *w = runtime_words_of(b);
    if (!w) {
        add(cs, otherwise, evidence);
        return;
    }
    char what[200], ev[600];
    snprintf(what, sizeof what, "%s %s: %s", w->runtime, ending, w->what);
    runtime_words_evidence(b, w, then, ev, sizeof ev);
    add(cs, what, ev);
}

/* A pressure warning's evidence lists every limit it watched ("cgroup
 * usage 1.0 GiB of cgroup memory limit 48.0 GiB (2%); ..."): the memory
 * cgroup's share of its limit, or -1 where it lists none. */
static int cgroup_share(const char *evidence)
{
    const char *at = evidence ? strstr(evidence, "cgroup usage ") : NULL;
    if (!at)
        return -1;
    size_t entry = strcspn(at, ";");
    const char *open = memchr(at, '(', entry);
    int share;
    return open && sscanf(open, "(%d%%)", &share) == 1 ? share : -1;
}

/* The threshold a warning's message states ("... (threshold 90%)."), else
 * GMP_PRESSURE_PCT's default. */
static int warning_threshold(const char *message)
{
    const char *at = message ? strstr(message, "(threshold ") : NULL;
    int pct;
    return at && sscanf(at, "(threshold %d%%)", &pct) == 1 && pct > 0 && pct <= 100 ? pct : 90;
}

static void collect(bundle *b, causes *cs)
{
    json_t *md = b->metadata;
    const char *reason = jstr(md, "reason") ? jstr(md, "reason") : jstr(b->manifest, "reason");
    const char *etype = jstr(md, "exception_type"), *evidence = jstr(md, "evidence");
    const char *backend = jstr(md, "backend") ? jstr(md, "backend") : "cpu";
    const bundle_failure *f = bundle_failure_of(b);
    int64_t size = -1, device = f ? f->device : -1, in_use = f && f->has_in_use ? f->in_use : -1;
    uint64_t wide = 0; /* the size as written, up to 2^64-1, for the words */
    if (f && f->has_size) { /* past INT64_MAX: larger than anything here all the same */
        wide = f->size;
        size = wide > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)wide;
    }
    char ev[600], a[32], b2[32], c[32];
    /* a framework that maps one request in pieces (PyTorch's expandable
     * segments: cuMemCreate of 20 MiB at a time) says the whole in its
     * message: that is the request, and the pieces' growth is not a leak */
    int64_t stated, piece = size;
    int gpu = strcmp(backend, "cpu") != 0, from_message = 0;
    if (!f && (stated = framework_request(md)) > 0) {
        /* no call failed (a framework's own pool): what it says it asked
         * for, against the device it names by having one */
        from_message = 1;
        size = stated;
        device = gpu ? only_device(b) : -1;
    } else if ((stated = framework_whole_request(md, size)) > 0) {
        size = stated;
    }

    if (etype && !strcmp(etype, "oom_killer"))
        add(cs, "killed by the kernel's OOM killer", evidence);
    else if (evidence && !strncmp(evidence, "cgroup_oom_kill:", 16))
        add(cs, "killed while its cgroup's OOM killer ran (which process it killed, nothing here "
                "says)",
            evidence);
    else if (evidence && !strncmp(evidence, "kernel_log:", 11))
        add(cs,
            reason && !strcmp(reason, "killed")
                ? "ended by a signal nobody saw; not by the OOM killer, which the kernel log "
                  "says killed another process"
                : "killed by SIGKILL; not by the OOM killer, which the kernel log says killed "
                  "another process",
            evidence);
    else if (reason && !strcmp(reason, "SIGKILL"))
        add(cs, "killed without a word (SIGKILL)",
            "no evidence that the OOM killer did it: no memory cgroup counted a kill and the "
            "kernel log did not name it");
    else if (reason && !strcmp(reason, "killed")) /* nobody saw the signal */
        add(cs, "ended by a signal nobody saw (SIGKILL, or a crash with nobody to reap it)",
            "no evidence that the OOM killer did it: no memory cgroup counted a kill and the "
            "kernel log did not name it");
    if (reason && strstr(reason, " after failed allocation")) {
        /* an abort after the runtime said its last words (C++'s uncaught
         * std::bad_alloc, Rust's failed allocation): the runtime ended the
         * program, as it does when an allocation fails; no NULL was used */
        const char *said = jstr(md, "exception_message"); /* ours begins "SIGABRT ..." */
        const runtime_words *w = runtime_words_of(b);
        if (starts(reason, "SIGABRT") && said && !starts(said, "SIG")) {
            snprintf(ev, sizeof ev, "it said \"%.300s\", then aborted", said);
            runtime_cause(b, cs, "ended the program", ", then aborted",
                          "the language runtime ended the program when an allocation failed", ev);
        } else if (w && w->own_heap) { /* a memory of its own was full: a page of /dev/shm */
            runtime_cause(b, cs, "ran out of memory", "", NULL, NULL);
        } else {
            snprintf(ev, sizeof ev, "%s: the program used the NULL (or error) the failed "
                                    "allocation returned instead of checking it", reason);
            add(cs, "a crash caused by an unchecked failed allocation", ev);
        }
    }
    if (starts(reason, "message_pattern:") && !f)
        runtime_cause(b, cs, "ran out of memory", "",
                      "the framework's own memory pool ran out (no allocation call failed)",
                      jstr(md, "exception_message"));
    if (reason && !strcmp(reason, "memory_pressure"))
        add(cs, "memory close to a limit (a warning written before any failure)",
            jstr(md, "exception_message"));
    /* a request no memory here could ever hold: said with the numbers */
    char ceilings[400];
    int64_t least = -1;
    if (device < 0 && !(from_message && gpu))
        host_ceilings(b, ceilings, sizeof ceilings, &least);
    else if ((least = device_total(b, device)) > 0) {
        fmt_bytes((uint64_t)least, b2, sizeof b2);
        snprintf(ceilings, sizeof ceilings, "device %lld has %s in all", (long long)device, b2);
    }
    const char *said = from_message ? " (its message says)" : "";
    int impossible = 1; /* no growth or free memory would have made it fit */
    if (size >= 0 && size >= (int64_t)1 << 50) {
        fmt_bytes(size == INT64_MAX && wide > (uint64_t)INT64_MAX ? wide : (uint64_t)size, a,
                  sizeof a);
        snprintf(ev, sizeof ev, "asked for %s at once%s: an overflowed or uninitialised size?%s%s%s",
                 a, said, least > 0 ? " (" : "", least > 0 ? ceilings : "", least > 0 ? ")" : "");
        add(cs, "a request larger than any machine's memory", ev);
    } else if (size >= 0 && least > 0 && size > least) {
        fmt_bytes((uint64_t)size, a, sizeof a);
        fmt_bytes((uint64_t)(piece > 0 ? piece : 0), c, sizeof c);
        snprintf(ev, sizeof ev, "asked for %s at once%s%s%s%s; %s", a, said,
                 stated > 0 && !from_message ? " (its message says; the driver was asked for it "
                                             : "",
                 stated > 0 && !from_message ? c : "",
                 stated > 0 && !from_message ? " at a time)" : "", ceilings);
        add(cs, device < 0 ? "a request larger than this host could ever give"
                           : "a request larger than the device could ever give",
            ev);
    } else {
        impossible = 0;
    }
    /* Growth that ate the free memory is the story, and the request that
     * found none its last step; a request larger than what was free before
     * the growth is the story itself. */
    int growth_first = 0, grown_known = 0;
    causes grew = {.n = 0}; /* one pass over the events, however it ranks */
    if (f && size >= 0 && device >= 0 && !impossible) {
        int64_t grown = growth(b, backend, device, &grew), free_b = device_free(b, device);
        grown_known = 1;
        if (stated > 0 && grown <= stated + stated / 50) { /* the request's own pieces */
            grown = 0;
            grew.n = 0;
        }
        growth_first = grown > 0 && (free_b < 0 || size <= free_b + grown);
        if (growth_first)
            add(cs, grew.c[0].what, grew.c[0].evidence);
    }
    if (size >= 0 && device >= 0 && !impossible && !from_message)
        device_rules(b, size, device, cs);
    /* RLIMIT_AS limits the address space, of which malloc's bytes are a
     * part: an interpreter's arenas (CPython's, V8's), shared memory and
     * libraries are mapped directly.  VmSize at the failure counts them
     * (the preload reads it then); else VmSize when the bundle was written,
     * which may be after the program let go of memory. */
    int64_t as = rlimit_of(b->environment, "as"), mapped = -1;
    int at_failure = f && !jint(f->doc, "vm_size", &mapped) && mapped > 0;
    const bundle_host_state *host = bundle_host_state_of(b);
    if (!at_failure && host && host->has_vm_size)
        mapped = host->vm_size;
    int by_map = mapped > in_use;
    int64_t held = by_map ? mapped : in_use;
    if (size >= 0 && device < 0 && !(from_message && gpu) && as > 0 && held >= 0 &&
        held <= HOSTILE_BYTES && size <= HOSTILE_BYTES && (held + size) * 10 >= as * 8) {
        fmt_bytes((uint64_t)as, a, sizeof a);
        fmt_bytes((uint64_t)held, b2, sizeof b2);
        fmt_bytes((uint64_t)size, c, sizeof c);
        snprintf(ev, sizeof ev, "RLIMIT_AS is %s; %s (%d%% of it) %s%s, and %s more was asked for",
                 a, b2, share_of(held, as), by_map ? "was mapped (VmSize)" : "was in use",
                 at_failure ? " when it failed" : "", c);
        add(cs, "a host limit was reached (the address-space limit)", ev);
    } else if (size < 0 && !gpu && as > 0 && held > 0 && held <= HOSTILE_BYTES &&
               held * 10 >= as * 9 && bundle_kind_of(b) != GMP_VERDICT_PRESSURE) {
        /* no failed call seen (the Python API alone): the address space
         * near its limit is the same verdict the preload's bundle gives;
         * a warning written before anything failed says "near", itself */
        fmt_bytes((uint64_t)as, a, sizeof a);
        fmt_bytes((uint64_t)held, b2, sizeof b2);
        snprintf(ev, sizeof ev,
                 "RLIMIT_AS is %s; %s (%d%% of it) was mapped (VmSize) %s; the failed "
                 "request's size is not known",
                 a, b2, share_of(held, as),
                 at_failure ? "when it failed" : "when the bundle was written");
        add(cs, "a host limit was reached (the address-space limit)", ev);
    }
    /* near: at or above the threshold the warning was written at */
    if (cgroup_share(evidence) >= warning_threshold(jstr(md, "exception_message")) &&
        !(etype && !strcmp(etype, "oom_killer")))
        add(cs, "a host limit was near (the memory cgroup)", evidence);
    if (f && !growth_first && !impossible) {
        if (!grown_known)
            growth(b, device >= 0 ? backend : "cpu", device, cs);
        else if (grew.n)
            add(cs, grew.c[0].what, grew.c[0].evidence);
    }
}

void diagnose(bundle *b, int colour)
{
    causes cs = {.n = 0};
    collect(b, &cs);
    const char *on = colour ? "\033[1m" : "", *off = colour ? "\033[0m" : "";
    if (!cs.n) {
        printf("%sLikely cause:%s     nothing in this bundle points at one; see the events\n", on,
               off);
        return;
    }
    printf("%sLikely causes%s, most certain first:\n", on, off);
    for (int i = 0; i < cs.n; i++) {
        printf("  %d. %s%s%s\n", i + 1, colour ? "\033[31m" : "", cs.c[i].what, off);
        if (cs.c[i].evidence[0]) {
            printf("     evidence: ");
            print_clean(stdout, cs.c[i].evidence, 600);
            putchar('\n');
        }
    }
}

void diagnose_each(bundle *b, void (*fn)(const char *what, const char *evidence, void *arg),
                   void *arg)
{
    causes cs = {.n = 0};
    collect(b, &cs);
    for (int i = 0; i < cs.n; i++)
        fn(cs.c[i].what, cs.c[i].evidence, arg);
}
