/*
 * export_torch.c — `gmp-inspect export BUNDLE --format torch-snapshot -o
 * F.pickle`: a bundle as the snapshot PyTorch's memory visualiser reads
 * (pytorch.org/memory_viz, torch.cuda._memory_viz; the layout
 * torch.cuda.memory._snapshot() returns), for any framework's allocations,
 * with no PyTorch on this machine (pickle_out.c writes it):
 *   segments       the live allocations (allocations.json; else those the
 *                  events made and did not free), one segment each, holding
 *                  one active block, with its allocating frames
 *   device_traces  a list per device, from the events in order: alloc;
 *                  free_requested then free_completed; segment_alloc and
 *                  segment_free for a driver mapping (cuMemMap, cuMemUnmap);
 *                  oom for the failure, with the device's free bytes and the
 *                  failing thread's Python stack under its native frames.
 *                  The host's large allocations are the list after the
 *                  last device's, as PyTorch's own profiler export places
 *                  the CPU.
 * Frames are {filename, line, name}, innermost first: each address of
 * stacks.json symbolised (symbols.c; module+offset when the binary is not
 * here); a stack's list is written once and referred to after.
 * Several processes (a directory of one job's bundles, live rings): the
 * snapshot has one device list per GPU of each in turn, then its host, the
 * newest bundle of each process standing for it (its ring holds the
 * earlier ones' events), ranks in order; which slot is whose is printed,
 * as memory_viz names slots only by number.  A live ring has no stacks:
 * its entries have no frames.
 */
#include "gpumemprof.h"
#include "inspect.h"
#include "pickle_out.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMO 4096
#define MAX_SOURCES 1024

/* One process: its newest bundle, or a live ring's copy. */
typedef struct torch_source {
    bundle b; /* for a ring, only dirfd (-1) */
    ring_copy_t ring;
    int is_ring;
    json_t *stacks, *mods;
    int base;     /* its first device_traces slot */
    int ngpu;     /* its GPU slots: the largest device + 1 */
    int has_host; /* a slot after them for the host */
    char label[320];
} torch_source;

typedef struct torch_ctx {
    pickle_out p;
    torch_source *src; /* the one being written */
    struct {
        const torch_source *src;
        int64_t stack;
        uint32_t id;
    } memo[MAX_MEMO];
    size_t nmemo;
} torch_ctx;

static size_t source_events(const torch_source *s)
{
    return s->is_ring ? s->ring.n : s->b.events.n;
}

/* Event i as events.json holds it: a new reference, NULL without memory. */
static json_t *source_event(const torch_source *s, size_t i)
{
    return s->is_ring ? ring_event_json(&s->ring.events[i]) : event_at(&s->b.events, i);
}

#define source_foreach(s, i, ev) \
    for ((i) = 0; (i) < source_events(s) && ((ev) = source_event((s), (i)), 1); \
         json_decref(ev), (i)++)

/* The event's slot within its process: a GPU's number, or ngpu for the
 * host; -1 for a device past any list. */
static int slot_of(const torch_source *s, json_t *ev, const char *device_key)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, device_key, &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        return s->ngpu; /* the host, after the devices */
    return dev < 4096 ? (int)dev : -1;
}

static void frame(torch_ctx *c, const char *file, long line, const char *name)
{
    pickle_dict(&c->p);
    pickle_key(&c->p, "filename");
    pickle_str(&c->p, file);
    pickle_key(&c->p, "line");
    pickle_int(&c->p, line);
    pickle_key(&c->p, "name");
    pickle_str(&c->p, name);
    pickle_dict_end(&c->p);
}

/* The frame of one address ("0x..." text): symbolised; else, when
 * unnamed_too, module+offset or the bare address.  1 when one was written. */
static int address_frame(torch_ctx *c, const char *hex, int unnamed_too)
{
    uint64_t at = hex ? strtoull(hex, NULL, 16) : 0, bias = 0;
    const char *path = at ? module_of(c->src->mods, at, &bias) : NULL;
    char fn[256], file[1024], name[1100];
    int line = 0;
    if (path && symbolise(c->src->b.dirfd, path, at - bias, fn, sizeof fn, file, sizeof file,
                          &line) == 0) {
        frame(c, file[0] ? file : path, line, fn);
        return 1;
    }
    if (!unnamed_too)
        return 0;
    if (!path) {
        snprintf(name, sizeof name, "0x%llx", (unsigned long long)at);
        frame(c, "??", 0, name);
    } else {
        const char *base = strrchr(path, '/');
        snprintf(name, sizeof name, "%s+0x%llx", base ? base + 1 : path,
                 (unsigned long long)(at - bias));
        frame(c, path, 0, name);
    }
    return 1;
}

/* The native frames of stack `id`, innermost first (no list around them). */
static void native_frames(torch_ctx *c, int64_t id)
{
    size_t i;
    json_t *s;
    json_array_foreach(c->src->stacks, i, s) {
        int64_t sid;
        if (jint(s, "id", &sid) || sid != id)
            continue;
        size_t k;
        json_t *f;
        json_array_foreach(json_object_get(s, "frames"), k, f)
            address_frame(c, json_string_value(f), 1);
        return;
    }
}

/* The frames list of a stack: written once, then by reference. */
static void frames_of(torch_ctx *c, int64_t id)
{
    for (size_t i = 0; i < c->nmemo; i++)
        if (c->memo[i].src == c->src && c->memo[i].stack == id) {
            pickle_memo_get(&c->p, c->memo[i].id);
            return;
        }
    pickle_list(&c->p);
    if (id > 0)
        native_frames(c, id);
    pickle_list_end(&c->p);
    if (c->nmemo < MAX_MEMO) {
        c->memo[c->nmemo].src = c->src;
        c->memo[c->nmemo].stack = id;
        c->memo[c->nmemo++].id = pickle_memo_put(&c->p);
    }
}

/* The failure's frames: the failed request's native ones, then the Python
 * stack of the thread that failed. */
static void failure_frames(torch_ctx *c)
{
    pickle_list(&c->p);
    json_t *stack =
        json_object_get(json_object_get(c->src->b.metadata, "failed_request"), "stack");
    size_t i;
    json_t *f;
    json_array_foreach(stack, i, f)
        address_frame(c, json_string_value(f), 0); /* the named ones, then Python's */
    python_stack st;
    if (python_stack_read(&c->src->b, &st) == 0) {
        for (size_t k = 0; k < st.n; k++)
            frame(c, st.frames[k].file, st.frames[k].line, st.frames[k].fn ? st.frames[k].fn : "?");
        free(st.text);
    }
    pickle_list_end(&c->p);
}

/* The device's free bytes at the failure, from device_state; 0 unknown. */
static int64_t device_free(torch_ctx *c, json_t *ev)
{
    int64_t dev = -1, free_b = 0, d;
    jint(ev, "device_id", &dev);
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(c->src->b.metadata, "device_state"), i, st)
        if (jint(st, "device", &d) == 0 && d == dev && jint(st, "free", &free_b) == 0)
            return free_b;
    return 0;
}

static void entry(torch_ctx *c, const char *action, json_t *ev, int is_failure)
{
    int64_t size = 0, stack = 0;
    double t = 0;
    jint(ev, "size", &size);
    jint(ev, "stack_id", &stack);
    json_t *tv = json_object_get(ev, "timestamp");
    if (json_is_number(tv))
        t = json_number_value(tv) * 1e6;
    const char *addr = jstr(ev, "address");
    pickle_dict(&c->p);
    pickle_key(&c->p, "action");
    pickle_str(&c->p, action);
    pickle_key(&c->p, "addr");
    pickle_uint(&c->p, addr ? strtoull(addr, NULL, 16) : 0);
    pickle_key(&c->p, "size");
    pickle_int(&c->p, size > 0 ? size : 0);
    pickle_key(&c->p, "stream");
    pickle_int(&c->p, 0);
    pickle_key(&c->p, "time_us");
    pickle_int(&c->p, isfinite(t) && t > 0 && t < 9e18 ? (int64_t)t : 0);
    if (!strcmp(action, "oom")) {
        pickle_key(&c->p, "device_free");
        pickle_int(&c->p, device_free(c, ev));
    }
    pickle_key(&c->p, "frames");
    if (is_failure)
        failure_frames(c);
    else
        frames_of(c, stack);
    pickle_dict_end(&c->p);
}

/* One device's list (slot within the process being written): its events
 * in order, as PyTorch's allocator would have recorded them. */
static void device_trace(torch_ctx *c, int slot)
{
    pickle_list(&c->p);
    const torch_source *s = c->src;
    size_t i, failure = s->is_ring ? SIZE_MAX : s->b.events.failure;
    json_t *ev;
    source_foreach(s, i, ev) {
        const char *type = jstr(ev, "event_type");
        if (!type || slot_of(s, ev, "device_id") != slot)
            continue;
        if (!strcmp(type, "alloc")) {
            entry(c, "alloc", ev, 0);
        } else if (!strcmp(type, "free")) {
            entry(c, "free_requested", ev, 0);
            entry(c, "free_completed", ev, 0);
        } else if (!strcmp(type, "map")) {
            entry(c, "segment_alloc", ev, 0);
        } else if (!strcmp(type, "unmap")) {
            entry(c, "segment_free", ev, 0);
        } else if (!strcmp(type, "oom")) {
            entry(c, "oom", ev, i == failure);
        }
    }
    pickle_list_end(&c->p);
}

static void segment(torch_ctx *c, int slot, uint64_t address, int64_t size, int64_t stack)
{
    pickle_out *p = &c->p;
    pickle_dict(p);
    pickle_key(p, "device");
    pickle_int(p, c->src->base + slot);
    pickle_key(p, "address");
    pickle_uint(p, address);
    static const char *const sizes[] = {"total_size", "allocated_size", "active_size",
                                        "requested_size"};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        pickle_key(p, sizes[k]);
        pickle_int(p, size);
    }
    pickle_key(p, "stream");
    pickle_int(p, 0);
    pickle_key(p, "segment_type");
    pickle_str(p, size >= (1 << 20) ? "large" : "small");
    pickle_key(p, "segment_pool_id");
    pickle_int(p, 0);
    pickle_int(p, 0);
    pickle_tuple2_end(p);
    pickle_key(p, "is_expandable");
    pickle_bool(p, 0);
    pickle_key(p, "frames");
    frames_of(c, stack);
    pickle_key(p, "blocks");
    pickle_list(p);
    pickle_dict(p);
    pickle_key(p, "address");
    pickle_uint(p, address);
    pickle_key(p, "size");
    pickle_int(p, size);
    pickle_key(p, "requested_size");
    pickle_int(p, size);
    pickle_key(p, "state");
    pickle_str(p, "active_allocated");
    pickle_key(p, "frames");
    frames_of(c, stack);
    pickle_dict_end(p);
    pickle_list_end(p);
    pickle_dict_end(p);
}

/* A live allocation replayed from the events (no allocations.json). */
typedef struct live {
    uint64_t address;
    int64_t size, stack;
    int slot; /* -1: freed */
} live;

static void segments_from_events(torch_ctx *c)
{
    size_t n = 0, cap = 0, i;
    live *l = NULL;
    json_t *ev;
    source_foreach(c->src, i, ev) {
        const char *type = jstr(ev, "event_type"), *addr = jstr(ev, "address");
        if (!type || !addr || (strcmp(type, "alloc") && strcmp(type, "free")))
            continue;
        uint64_t at = strtoull(addr, NULL, 16);
        int slot = slot_of(c->src, ev, "device_id");
        if (!strcmp(type, "free")) {
            for (size_t k = n; k-- > 0;)
                if (l[k].slot == slot && l[k].address == at) {
                    l[k].slot = -1;
                    break;
                }
            continue;
        }
        if (n == cap) {
            live *grown = realloc(l, (cap = cap ? 2 * cap : 256) * sizeof *l);
            if (!grown) {
                json_decref(ev);
                break;
            }
            l = grown;
        }
        l[n] = (live){at, 0, 0, slot};
        jint(ev, "size", &l[n].size);
        jint(ev, "stack_id", &l[n].stack);
        n++;
    }
    for (size_t k = 0; k < n; k++)
        if (l[k].slot >= 0 && l[k].slot < c->src->ngpu)
            segment(c, l[k].slot, l[k].address, l[k].size, l[k].stack);
    free(l);
}

/* The live allocations of the process being written. */
static void segments(torch_ctx *c)
{
    json_t *held = c->src->is_ring ? NULL
                                   : load_json_at(c->src->b.dirfd, "allocations.json",
                                                  SMALL_FILE_MAX, NULL, 0);
    json_t *list = json_object_get(held, "allocations");
    if (json_is_array(list)) {
        size_t i;
        json_t *a;
        json_array_foreach(list, i, a) {
            const char *addr = jstr(a, "address") ? jstr(a, "address") : jstr(a, "handle");
            int64_t size = 0, stack = 0;
            jint(a, "size", &size);
            jint(a, "stack_id", &stack);
            int slot = slot_of(c->src, a, "device");
            if (addr && slot >= 0 && slot < c->src->ngpu)
                segment(c, slot, strtoull(addr, NULL, 16), size, stack);
        }
    } else {
        segments_from_events(c);
    }
    json_decref(held);
}


/* Slot's name on the map: "cuda:0" or "host", from its first event. */
static void slot_where(const torch_source *s, int slot, char *out, size_t cap)
{
    snprintf(out, cap, slot == s->ngpu ? "host" : "device %d (no events)", slot);
    size_t i;
    json_t *ev;
    source_foreach(s, i, ev) if (slot_of(s, ev, "device_id") == slot) {
        event_where(ev, out, cap);
        json_decref(ev);
        break;
    }
}

/* A process's slots: one per GPU up to the largest it used, then the host. */
static void count_slots(torch_source *s)
{
    size_t i;
    json_t *ev;
    source_foreach(s, i, ev) {
        const char *backend = jstr(ev, "backend");
        int64_t dev = -1;
        jint(ev, "device_id", &dev);
        if (backend && strcmp(backend, "cpu") && dev >= 0 && dev < 4096)
            s->ngpu = (int)dev + 1 > s->ngpu ? (int)dev + 1 : s->ngpu;
        else
            s->has_host = 1;
    }
}

typedef struct candidate {
    size_t path;
    int64_t pid;
    char host[256];
    long long rank; /* LLONG_MAX: none */
} candidate;

static int by_rank(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->path < y->path ? -1 : x->path > y->path;
}

/* The newest bundle of each process among paths (in time order), ranks
 * in order; *bad set for one that cannot be read. */
static size_t choose_bundles(char **paths, size_t n, candidate *out, int *bad)
{
    size_t chosen = 0;
    for (size_t i = 0; i < n; i++) {
        char err[600];
        bundle b;
        if (bundle_open(&b, paths[i], 1, 0, err, sizeof err) < 0) {
            fprintf(stderr, "gmp-inspect export: %s\n", err);
            *bad = 1;
            continue;
        }
        candidate c = {.path = i, .rank = LLONG_MAX};
        jint(b.manifest, "pid", &c.pid);
        const char *host = bundle_host(&b), *rank = bundle_rank(&b);
        snprintf(c.host, sizeof c.host, "%s", host ? host : "");
        if (rank)
            c.rank = atoll(rank);
        bundle_close(&b);
        size_t k = 0;
        while (k < chosen && (out[k].pid != c.pid || strcmp(out[k].host, c.host)))
            k++;
        out[k] = c; /* a later bundle of one process replaces its earlier */
        chosen += k == chosen;
    }
    qsort(out, chosen, sizeof *out, by_rank);
    return chosen;
}

/* Open the processes' sources (bundles with their events, rings copied):
 * how many, each with its slots counted and its first slot set. */
static size_t open_sources(char **operands, int n, char **paths, const candidate *chosen,
                           size_t nchosen, torch_source *src, int *bad)
{
    size_t nsrc = 0;
    int slots = 0;
    for (size_t k = 0; k < nchosen; k++) {
        torch_source *s = &src[nsrc];
        char err[600];
        if (bundle_open(&s->b, paths[chosen[k].path], 1, 1, err, sizeof err) < 0) {
            fprintf(stderr, "gmp-inspect export: %s\n", err);
            *bad = 1;
            continue;
        }
        s->stacks = load_json_at(s->b.dirfd, "stacks.json", SMALL_FILE_MAX, NULL, 0);
        s->mods = load_json_at(s->b.dirfd, "modules.json", SMALL_FILE_MAX, NULL, 0);
        export_process_label(&s->b, 1, s->label, sizeof s->label);
        nsrc++;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        torch_source *s = &src[nsrc];
        if (!is_ring_target(operands[i]))
            continue;
        if (ring_path_of("export", operands[i], path, sizeof path) < 0 ||
            ring_copy("export", path, &s->ring) < 0) {
            *bad = 1;
            continue;
        }
        s->is_ring = 1;
        s->b.dirfd = -1;
        export_ring_label(&s->ring, 1, s->label, sizeof s->label);
        nsrc++;
    }
    for (size_t k = 0; k < nsrc; k++) {
        count_slots(&src[k]);
        src[k].base = slots;
        slots += src[k].ngpu + src[k].has_host;
    }
    return nsrc;
}

static void close_source(torch_source *s)
{
    if (s->is_ring)
        free(s->ring.events);
    else
        bundle_close(&s->b);
    json_decref(s->stacks);
    json_decref(s->mods);
}

int export_torch(char **operands, int n, FILE *f, FILE *map)
{
    static torch_ctx c; /* the memo table is large for a stack */
    memset(&c, 0, sizeof c);
    size_t npaths = 0, nchosen = 0, nsrc = 0;
    int bad = 0, rings = 0;
    for (int i = 0; i < n; i++)
        rings += is_ring_target(operands[i]);
    char **paths = export_bundle_paths(operands, n, &npaths);
    candidate *chosen = paths ? calloc(npaths + 1, sizeof *chosen) : NULL;
    torch_source *src = chosen ? calloc(npaths + (size_t)rings + 1, sizeof *src) : NULL;
    if (!src) {
        fputs("gmp-inspect export: out of memory\n", stderr);
        free(chosen);
        export_paths_free(paths, npaths);
        return EXIT_INVALID;
    }
    nchosen = choose_bundles(paths, npaths, chosen, &bad);
    nsrc = open_sources(operands, n, paths, chosen, nchosen, src, &bad);
    if (!nsrc && !bad)
        fputs("gmp-inspect export: no bundle there\n", stderr);
    if (!nsrc)
        bad = 1;
    pickle_begin(&c.p, f);
    pickle_dict(&c.p);
    pickle_key(&c.p, "segments");
    pickle_list(&c.p);
    for (size_t k = 0; k < nsrc; k++) {
        c.src = &src[k];
        segments(&c);
    }
    pickle_list_end(&c.p);
    pickle_key(&c.p, "device_traces");
    pickle_list(&c.p);
    for (size_t k = 0; k < nsrc; k++) {
        c.src = &src[k];
        for (int slot = 0; slot < src[k].ngpu + src[k].has_host; slot++)
            device_trace(&c, slot);
    }
    pickle_list_end(&c.p);
    pickle_dict_end(&c.p);
    if (pickle_end(&c.p))
        bad = 1;
    for (size_t k = 0; k < nsrc; k++) {
        for (int slot = 0; nsrc > 1 && slot < src[k].ngpu + src[k].has_host; slot++) {
            char where[64];
            slot_where(&src[k], slot, where, sizeof where);
            fprintf(map, "memory_viz device %d: %s of %s\n", src[k].base + slot, where,
                    src[k].label);
        }
        close_source(&src[k]);
    }
    free(src);
    free(chosen);
    export_paths_free(paths, npaths);
    symbols_release();
    return bad ? EXIT_INVALID : EXIT_OK;
}
