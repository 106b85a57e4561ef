/*
 * sites.c — the top allocation sites of a bundle by live bytes, for `show`:
 * allocations.json's live allocations at the failure (older bundles: the
 * allocations its events made and did not free), summed per stack
 * (stack_id, stacks.json), largest first.  Each site is named by its
 * Python line, the script inside its interpreter (interpreter.c), or its
 * first frame of the program's own (frames.c): symbolised when the binary
 * is on this machine (function, file:line), module+offset otherwise
 * (modules.json gives the load bias, so it is the same wherever the
 * process ran).  "Held by:" is the first of them in the memory that ran
 * out (the failed request's device, or the host).
 */
#include "answer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SITES 5

/* Which memory a site's allocations are of (kind_of): the host's, a GPU
 * runtime's pinned host memory, or one device's; a site from
 * allocations.json's top stacks alone is of every kind at once. */
#define KIND_UNKNOWN UINT32_MAX
typedef struct site {
    int64_t stack;
    uint64_t bytes, count;
    uint32_t kind;
} site;

static const char *const kind_backends[] = {"cpu", "cuda", "rocm"};
#define KIND_BACKENDS (sizeof kind_backends / sizeof *kind_backends)

static uint32_t kind_of(const char *backend, int64_t device)
{
    uint32_t b = 0;
    while (b < KIND_BACKENDS && (!backend || strcmp(backend, kind_backends[b])))
        b++;
    if (!backend || b == 0)
        return 0; /* the host's, whatever its device says */
    if (b == KIND_BACKENDS)
        return KIND_UNKNOWN; /* a name this reader does not know */
    return b << 16 | (uint32_t)(device >= 0 && device < 0xffff ? device + 1 : 0);
}

/* "host", "pinned host", "cuda:0" */
static void kind_words(uint32_t kind, char *out, size_t cap)
{
    uint32_t b = kind >> 16, dev = kind & 0xffff;
    if (kind == 0)
        snprintf(out, cap, "host");
    else if (!dev)
        snprintf(out, cap, "pinned host");
    else
        snprintf(out, cap, "%s:%u", kind_backends[b], dev - 1);
}

static int by_bytes(const void *a, const void *b)
{
    const site *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* size more bytes, one more allocation, at stack's site of that kind of
 * memory among *ns (a new
 * one at the end); -1 when it is new and cap are there already. */
static int site_add(site *sites, size_t *ns, size_t cap, int64_t stack, uint32_t kind,
                    uint64_t size)
{
    size_t k = 0;
    while (k < *ns && (sites[k].stack != stack || sites[k].kind != kind))
        k++;
    if (k == *ns) {
        if (*ns == cap)
            return -1;
        sites[(*ns)++] = (site){stack, 0, 0, kind};
    }
    sites[k].bytes += size;
    sites[k].count++;
    return 0;
}

static int describe(int dirfd, const stack_index *stacks, const module_table *mods, json_t *env,
                    json_t *cells, int64_t id, char *out, size_t cap);

int name_site(bundle *b, int64_t stack, char *out, size_t cap)
{
    return describe(b->dirfd, bundle_stacks(b), bundle_modules(b),
                    bundle_json(b, "environment.json"),
                    notebook_cells(b), stack, out, cap);
}

/* The program's entry, which calls main through the C library: "called
 * from _start" says nothing a reader of main wants. */
static int program_entry(const char *frame)
{
    return !strncmp(frame, "_start", 6) && (frame[6] == '\0' || frame[6] == ' ');
}

/* The innermost frame of the program's own, with the function of the next
 * one of its own outward ("keep (held.c:22), called from keep_batches": a
 * helper that wraps malloc is not the answer alone, and two calls from
 * one function are one site); else, when every frame is a library's, the
 * innermost outside the C library and us, said so. */
static int describe(int dirfd, const stack_index *stacks, const module_table *mods, json_t *env,
                    json_t *cells, int64_t id, char *out, size_t cap)
{
    snprintf(out, cap, "a stack this bundle does not hold (stack id %lld)", (long long)id);
    json_t *s = stack_with_id(stacks, id);
    if (!s)
        return SITE_UNKNOWN;
    /* a Python thread's stack: its own line, not the library's C */
    int python = python_frames_site(json_object_get(s, "python"), cells, out, cap);
    if (python == SITE_PROGRAM)
        return SITE_PROGRAM;
    /* a script's, inside its interpreter: the script */
    if (interpreter_site(json_object_get(s, "frames"), mods, env, out, cap))
        return SITE_PROGRAM;
    size_t k;
    json_t *f;
    const char *fallback = NULL;
    uint64_t fallback_offset = 0;
    int any = 0, found = 0;
    json_array_foreach(json_object_get(s, "frames"), k, f) {
        const char *hex = json_string_value(f);
        uint64_t at = hex ? strtoull(hex, NULL, 16) : 0, bias;
        const char *path = at ? module_of(mods, at, &bias) : NULL;
        if (path && !is_library_frame(path) && found) {
            char caller[300];
            name_frame(dirfd, path, at - bias, caller, sizeof caller);
            if (runtime_allocation_name(caller) || program_entry(caller))
                continue; /* Rust's std::rt, C++'s std::, the program's _start: not a caller */
            char *where = NULL; /* "fn (file:line)": the function; fn may hold " (" */
            for (char *p = strstr(caller, " ("); p; p = strstr(p + 1, " ("))
                where = p;
            if (where && where != caller)
                *where = '\0';
            size_t n = strlen(out);
            if (n + 16 < cap)
                snprintf(out + n, cap - n, ", called from %s", caller);
            return SITE_PROGRAM;
        }
        if (path && !is_library_frame(path)) {
            /* named once: "fn (file:line)" begins with the function */
            name_frame(dirfd, path, at - bias, out, cap);
            found = !runtime_allocation_name(out);
            continue;
        }
        any |= path != NULL;
        const char *base = path ? strrchr(path, '/') : NULL;
        base = base ? base + 1 : path;
        if (path && !fallback && strncmp(base, "libc.so", 7) &&
            strncmp(base, "libgpumemprof", 13)) {
            fallback = path;
            fallback_offset = at - bias;
        }
    }
    if (found)
        return SITE_PROGRAM; /* called from nothing of the program's */
    if (!fallback) {
        snprintf(out, cap, "%s (stack id %lld)",
                 any ? "only C-library frames" : "no frame this bundle can name",
                 (long long)id);
        return SITE_LIBRARY;
    }
    char frame[400];
    name_frame(dirfd, fallback, fallback_offset, frame, sizeof frame);
    snprintf(out, cap, "%s, inside a library or interpreter", frame);
    return SITE_LIBRARY;
}

int failure_frame(bundle *b, const module_table *mods, const char **path, uint64_t *offset,
                  const char **raw)
{
    const bundle_failure *f = bundle_failure_of(b);
    json_t *stack = f ? f->stack : NULL;
    size_t i;
    json_t *frame;
    int found = SITE_UNKNOWN;
    *path = *raw = NULL;
    *offset = 0;
    json_array_foreach(stack, i, frame) {
        const char *hex = json_string_value(frame);
        uint64_t at = hex ? strtoull(hex, NULL, 16) : 0, base = 0;
        const char *in = at ? module_of(mods, at, &base) : NULL;
        if (!in) {
            if (!*path && !*raw)
                *raw = hex;
            continue;
        }
        int library = is_library_frame(in) || runtime_allocation_frame(b->dirfd, in, at - base);
        if (!*path || !library) {
            *path = in;
            *offset = at - base;
            found = library ? SITE_LIBRARY : SITE_PROGRAM;
        }
        if (found == SITE_PROGRAM)
            break;
    }
    return *path ? found : SITE_UNKNOWN;
}

int name_failure_site(bundle *b, char *out, size_t cap)
{
    int python = python_site(b, out, cap);
    if (python == SITE_UNKNOWN)
        python = printed_stack_site(b, out, cap); /* the JVM's, V8's */
    if (python != SITE_UNKNOWN)
        return python;
    const module_table *mods = bundle_modules(b);
    const bundle_failure *f = bundle_failure_of(b);
    json_t *stack = f ? f->stack : NULL;
    if (interpreter_site(stack, mods, bundle_json(b, "environment.json"), out, cap))
        return SITE_PROGRAM;
    const char *path, *raw;
    uint64_t offset;
    int found = failure_frame(b, mods, &path, &offset, &raw);
    if (found != SITE_UNKNOWN)
        name_frame(b->dirfd, path, offset, out, cap);
    else if (raw)
        snprintf(out, cap, "%s", raw);
    if (found != SITE_UNKNOWN || raw)
        return found;
    /* no failed call: the place the runtime's own words name (PHP's) */
    return !f && runtime_words_site(b, out, cap) == 0 ? SITE_PROGRAM : -1;
}

typedef struct named_site {
    char where[512];
    uint64_t count, bytes;
    uint32_t kind;
} named_site;

/* Sites (largest first) named: at most cap of them, largest first again
 * after merging (merge: stacks that name the same site, as it was called
 * from two places, are one). */
static size_t name_sites(bundle *b, const site *sites, size_t ns, int merge, named_site *named,
                         size_t cap)
{
    int dirfd = b->dirfd;
    const stack_index *stacks = bundle_stacks(b);
    const module_table *mods = bundle_modules(b);
    json_t *env = bundle_json(b, "environment.json"), *cells = notebook_cells(b);
    size_t nn = 0;
    for (size_t i = 0; i < ns && nn < cap && (merge || nn < MAX_SITES); i++) {
        char where[512];
        describe(dirfd, stacks, mods, env, cells, sites[i].stack, where, sizeof where);
        size_t k = 0;
        while (merge && k < nn && (strcmp(named[k].where, where) || named[k].kind != sites[i].kind))
            k++;
        if (!merge || k == nn) {
            k = nn++;
            snprintf(named[k].where, sizeof named[k].where, "%s", where);
            named[k].count = named[k].bytes = 0;
            named[k].kind = sites[i].kind;
        }
        named[k].count += sites[i].count;
        named[k].bytes += sites[i].bytes;
    }
    for (size_t k = 0; k < nn; k++) {
        size_t best = k;
        for (size_t m = k + 1; m < nn; m++)
            if (named[m].bytes > named[best].bytes)
                best = m;
        if (best != k) {
            named_site tmp = named[k];
            named[k] = named[best];
            named[best] = tmp;
        }
    }
    return nn;
}

/* Sites named and printed under heading, MAX_SITES of them; where they
 * are of more than one kind of memory, each row says which. */
static void print_sites(bundle *b, const site *sites, size_t ns, const char *heading,
                        int merge)
{
    named_site named[16];
    size_t nn = name_sites(b, sites, ns, merge, named, 16);
    int mixed = 0;
    for (size_t k = 1; k < nn && k < MAX_SITES; k++)
        mixed |= named[k].kind != named[0].kind;
    printf("%s\n", heading);
    for (size_t k = 0; k < nn && k < MAX_SITES; k++) {
        char amount[32], kind[32] = "";
        fmt_bytes(named[k].bytes, amount, sizeof amount);
        if (mixed && named[k].kind != KIND_UNKNOWN)
            kind_words(named[k].kind, kind, sizeof kind);
        printf("  %10s in %llu allocation(s)%s%s%s  ", amount, (unsigned long long)named[k].count,
               kind[0] ? " of " : "", kind, kind[0] ? " memory" : "");
        print_clean(stdout, named[k].where, 400);
        putchar('\n');
    }
}

/* allocations.json's top stacks (at most cap); 0 when it has none. */
static size_t top_stacks_of(json_t *held, site *sites, size_t cap)
{
    size_t ns = 0, i;
    json_t *t;
    json_array_foreach(json_object_get(held, "top_stacks"), i, t) {
        int64_t id = 0, n = 0, sb = 0;
        if (ns == cap || jint(t, "stack_id", &id) || jint(t, "count", &n) || jint(t, "bytes", &sb))
            break;
        sites[ns++] = (site){id, (uint64_t)sb, (uint64_t)n, KIND_UNKNOWN};
    }
    return ns;
}

static size_t replayed_sites(bundle *b, site *sites, size_t cap);

/* The memory that ran out, when the bundle names a failed request: its
 * backend ("cuda", "rocm"; "cpu" for the host) and device.  0 when known. */
static int failed_memory(bundle *b, const char **backend, int64_t *device)
{
    const bundle_failure *f = bundle_failure_of(b);
    *backend = jstr(b->metadata, "backend");
    *device = -1;
    if (!f || !*backend ||
        (strcmp(*backend, "cpu") && strcmp(*backend, "cuda") && strcmp(*backend, "rocm")))
        return -1; /* and a bundle's own name for it is never printed */
    if (strcmp(*backend, "cpu") && (!f->has_device || (*device = f->device) < 0))
        return -1;
    return 0;
}

/* allocations.json's allocations in the memory that ran out, summed per
 * stack into sites (largest first, at most cap) and into *count and
 * *bytes; -1 when the list leaves some out or holds more stacks than
 * cap, where sites from it would come up short. */
static int sites_in(json_t *held, const char *backend, int64_t device, site *sites,
                    size_t cap, size_t *ns, int64_t *count, int64_t *bytes)
{
    int64_t omitted = 0;
    if (jint(held, "omitted_count", &omitted) || omitted)
        return -1;
    size_t i, n = 0;
    json_t *a;
    *count = *bytes = 0;
    json_array_foreach(json_object_get(held, "allocations"), i, a) {
        const char *be = jstr(a, "backend");
        int64_t dev = -1, size = 0, stack = 0;
        jint(a, "device", &dev);
        if (!be || strcmp(be, backend) || (strcmp(backend, "cpu") && dev != device) ||
            jint(a, "size", &size) || size < 0)
            continue;
        if (size > INT64_MAX - *bytes) /* no real process's; the totals say what they can */
            return -1;
        jint(a, "stack_id", &stack);
        if (site_add(sites, &n, cap, stack, kind_of(be, dev), (uint64_t)size))
            return -1;
        *count += 1;
        *bytes += size;
    }
    qsort(sites, n, sizeof *sites, by_bytes);
    *ns = n;
    return 0;
}

/* Which memory the sites are of: " on cuda:0", " on the host", or "" for
 * every kind at once. */
static void memory_words(const char *backend, int64_t device, char *out, size_t cap)
{
    if (!backend)
        snprintf(out, cap, "%s", "");
    else if (!strcmp(backend, "cpu"))
        snprintf(out, cap, " on the host");
    else
        snprintf(out, cap, " on %s:%lld", backend, (long long)device);
}

/* What held the memory that ran out, by site, largest first (named[0] the
 * most): allocations.json's live allocations in that memory (every kind
 * where the bundle does not say which ran out, or lists only some), else,
 * for a bundle recovered from a ring, the events' allocations not freed
 * before the end (events.json read here when the bundle was opened
 * without it); none where a runtime's words say a heap it manages itself
 * ran out (the JVM's, V8's: runtime_words.c), whose holders are its
 * objects, while the native blocks beside it hold something else.  The
 * count of sites named; the memory's words, and the totals held, in
 * *where, *count and *bytes. */
static size_t held_sites(bundle *b, named_site *named, size_t cap, char *where,
                         size_t where_cap, const char **backend_out, int64_t *count,
                         int64_t *bytes)
{
    json_t *held = bundle_json(b, "allocations.json");
    int64_t device = -1;
    const char *backend = NULL;
    site sites[256];
    size_t ns = 0;
    *count = *bytes = 0;
    const runtime_words *words = runtime_words_of(b);
    if (words && words->own_heap) { /* a heap of the runtime's own ran out: no site held it */
        memory_words(NULL, -1, where, where_cap);
        *backend_out = NULL;
        return 0;
    }
    if (json_is_object(held)) {
        if (failed_memory(b, &backend, &device) ||
            sites_in(held, backend, device, sites, 256, &ns, count, bytes)) {
            backend = NULL;
            ns = top_stacks_of(held, sites, 16);
            if (jint(held, "live_count", count) || jint(held, "live_bytes", bytes))
                ns = 0;
        }
    } else { /* recovered: the events' allocations, none freed before the end */
        if (!b->events.text && b->dirfd >= 0)
            events_load_at(b->dirfd, &b->events,
                           json_object_get(b->metadata, "failed_request"), NULL, 0);
        ns = replayed_sites(b, sites, 64);
        for (size_t i = 0; i < ns; i++) {
            *count += (int64_t)sites[i].count;
            *bytes += (int64_t)sites[i].bytes;
        }
    }
    memory_words(backend, device, where, where_cap);
    *backend_out = backend;
    return ns ? name_sites(b, sites, ns, 1, named, cap) : 0;
}

int name_holder_site(bundle *b, char *out, size_t cap)
{
    named_site named[16];
    char where[64];
    const char *backend;
    int64_t count, bytes;
    if (!held_sites(b, named, 16, where, sizeof where, &backend, &count, &bytes) ||
        !named[0].bytes)
        return -1;
    snprintf(out, cap, "%s", named[0].where);
    return 0;
}

void print_held_by(FILE *f, bundle *b, int labelled)
{
    named_site named[16];
    char where[64];
    const char *backend;
    int64_t count, bytes;
    size_t nn = held_sites(b, named, 16, where, sizeof where, &backend, &count, &bytes);
    if (!nn || !named[0].bytes) {
        if (backend && strcmp(backend, "cpu")) /* nothing of ours was on the full device */
            fprintf(f, "%-*sno live allocation%s at the failure%s", labelled ? 18 : 0,
                    labelled ? "Held by:" : "", where, labelled ? "\n" : "");
        return;
    }
    char amount[32], all[32], kind[32] = "";
    fmt_bytes(named[0].bytes, amount, sizeof amount);
    /* sites of every kind of memory at once: the largest says which it is */
    int mixed = 0;
    for (size_t k = 1; k < nn; k++)
        mixed |= named[k].kind != named[0].kind;
    if (mixed && named[0].kind != KIND_UNKNOWN)
        kind_words(named[0].kind, kind, sizeof kind);
    fprintf(f, "%-*s%s%s%s%s in %llu allocation(s) made %s", labelled ? 18 : 0,
            labelled ? "Held by:" : "", amount, kind[0] ? " of " : "", kind,
            kind[0] ? " memory" : "", (unsigned long long)named[0].count,
            strncmp(named[0].where, "inside ", 7) ? "at " : ""); /* "inside the Perl..." */
    print_clean(f, named[0].where, 400);
    if (bytes > 0 && named[0].bytes < (uint64_t)bytes) {
        fmt_bytes((uint64_t)bytes, all, sizeof all);
        fprintf(f, ", of %s held%s in all (%lld allocation(s))", all, where, (long long)count);
    }
    if (labelled)
        fputc('\n', f);
}

/* A live-allocations file (allocations.json, a leak report's leaks.json):
 * the total per device, then the top sites.  0 when there is no such file. */
int print_live_file(bundle *b, const char *file, const char *label, const char *what,
                    const char *sites_heading)
{
    json_t *held = bundle_json(b, file);
    int64_t count = 0, bytes = 0;
    if (!json_is_object(held) || jint(held, "live_count", &count) ||
        jint(held, "live_bytes", &bytes))
        return 0;
    char total[32];
    fmt_bytes((uint64_t)bytes, total, sizeof total);
    printf("%-18s%lld %s, %s", label, (long long)count, what, total);
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(held, "by_device"), i, d) {
        int64_t dev = -1, db = 0;
        jint(d, "device", &dev);
        jint(d, "bytes", &db);
        char amount[32];
        fmt_bytes((uint64_t)db, amount, sizeof amount);
        printf("%s", i ? ", " : " (");
        if (dev >= 0) {
            print_clean(stdout, jstr(d, "backend") ? jstr(d, "backend") : "?", 16);
            printf(":%lld %s", (long long)dev, amount);
        } else {
            const char *backend = jstr(d, "backend");
            printf("%s %s", backend && !strcmp(backend, "cpu") ? "host" : "pinned host", amount);
        }
    }
    printf("%s\n", json_array_size(json_object_get(held, "by_device")) ? ")" : "");
    site sites[16];
    size_t ns = top_stacks_of(held, sites, 16);
    if (ns)
        print_sites(b, sites, ns, sites_heading, 1);
    return 1;
}

/* The events' allocations not freed before the failure, by stack, largest
 * first (at most cap): what a bundle without allocations.json (one
 * recovered from a ring) knows of what was held. */
static size_t replayed_sites(bundle *b, site *sites, size_t cap)
{
    size_t i;
    json_t *ev;
    event_record r;
    live_set live;
    live_set_init(&live, REPLAY_LIVE_MAX);
    event_records_until(&b->events, events_until_failure(&b->events), i, ev, &r) {
        /* a device's addresses and the host's are apart: a space each */
        if (r.address && r.type == GMP_EV_ALLOC)
            live_alloc(&live, kind_of(r.backend, r.device), r.address, (uint64_t)r.size,
                       r.stack_id);
        else if (r.address && r.type == GMP_EV_FREE)
            live_free(&live, kind_of(r.backend, r.device), r.address);
    }
    size_t ns = 0;
    for (live_block *l = NULL; (l = live_next(&live, l)) != NULL;)
        if (l->stack > 0) /* a new stack past cap is left out */
            site_add(sites, &ns, cap, l->stack, l->space, l->size);
    live_set_release(&live);
    qsort(sites, ns, sizeof *sites, by_bytes);
    return ns;
}

void print_top_sites(bundle *b)
{
    if (print_live_file(b, "allocations.json", "Held:", "live allocation(s)",
                        "Top allocation sites by live bytes (allocations alive at the failure):"))
        return;
    site sites[64];
    size_t ns = replayed_sites(b, sites, 64);
    if (!ns)
        return;
    print_sites(b, sites, ns,
                "Top allocation sites by live bytes (the events' allocations not freed "
                "before the failure):", 0);
}
