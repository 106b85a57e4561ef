/*
 * torch.c — `gmp-inspect export PATH... --format torch-snapshot -o
 * F.pickle`: bundles or live rings as the snapshot PyTorch's memory
 * visualiser reads (pytorch.org/memory_viz, torch.cuda._memory_viz; the
 * layout torch.cuda.memory._snapshot() returns), for any framework's
 * allocations, with no PyTorch on this machine (pickle_out.c writes it):
 *   device_traces  a list per device, from the events in order (see
 *                  device_trace: each allocation its own segment, a
 *                  cuMemMap range a mapped one), oom for the failure with
 *                  the device's free bytes and the failing thread's Python
 *                  stack under its native frames.  The host's large
 *                  allocations are the list after the last device's, as
 *                  PyTorch's own profiler export places the CPU.
 *   segments       what those lists leave alive at their end (a bundle's
 *                  at its failure, as PyTorch's snapshot at an OOM), with the
 *                  allocations.json entries made before the ring's oldest
 *                  event: one segment each, holding one active block.
 * Frames are {filename, line, name}, innermost first: each address of
 * stacks.json symbolised (symbols.c; module+offset when the binary is not
 * here); a stack's list is written once and referred to after.
 * Several processes (torch_sources.c) are one snapshot, each one's
 * slots after the last one's.  A live ring's stacks and modules are its own
 * site records (ring_source.c).
 */
#include "torch.h"
#include "pickle_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMO 4096

/* What the replay knows of an address it saw (live_block's flag): a
 * cuMemMap range (its segment is mapped, not allocated), and gone.  A
 * block freed stays in the set, so that allocations.json's blocks the
 * trace never mentions are told from the ones it saw come and go. */
enum { SEEN_MAPPED = 1, SEEN_GONE = 2 };

/* A segment alive at the end: its process, slot (within it) and block. */
typedef struct end_segment {
    const torch_source *src;
    int slot, mapped;
    uint64_t addr, size;
    int64_t stack;
} end_segment;

typedef struct torch_ctx {
    pickle_out p;
    torch_source *src; /* the one being written */
    struct {
        const torch_source *src;
        int64_t stack;
        uint32_t id;
    } memo[MAX_MEMO];
    size_t nmemo;
    live_set live; /* per process: every address a slot's trace saw (space: the slot) */
    end_segment *ends;
    size_t nends, ends_cap;
    int no_memory;
} torch_ctx;

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
    const char *path = at ? module_of(&c->src->modules, at, &bias) : NULL;
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

/* The frames of stack `id`, innermost first (no list around them): its
 * native ones, then the Python ones of a Python thread's allocation. */
static void stack_frames(torch_ctx *c, int64_t id)
{
    json_t *s = stack_with_id(&c->src->stack_ids, id), *f;
    size_t k;
    json_array_foreach(json_object_get(s, "frames"), k, f)
        address_frame(c, json_string_value(f), 1);
    json_array_foreach(json_object_get(s, "python"), k, f) {
        int64_t line = 0;
        jint(f, "line", &line);
        const char *file = jstr(f, "file"), *fn = jstr(f, "function");
        frame(c, file ? file : "??", (long)line, fn ? fn : "?");
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
        stack_frames(c, id);
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
    const bundle_failure *failed = bundle_failure_of(&c->src->b);
    json_t *stack = failed ? failed->stack : NULL;
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
    int64_t dev = -1;
    jint(ev, "device_id", &dev);
    size_t n;
    const bundle_device *d = bundle_devices_of(&c->src->b, &n);
    for (size_t i = 0; i < n; i++)
        if (d[i].has_device && d[i].device == dev && d[i].has_free)
            return d[i].free;
    return 0;
}

/* One trace entry: the event's time; size and frames (a stack id, or the
 * failure's) as the replay decided. */
static void entry(torch_ctx *c, const char *action, json_t *ev, uint64_t addr, uint64_t size,
                  int64_t stack, int is_failure)
{
    double t = 0;
    json_t *tv = json_object_get(ev, "timestamp");
    if (json_is_number(tv))
        t = json_number_value(tv) * 1e6;
    pickle_dict(&c->p);
    pickle_key(&c->p, "action");
    pickle_str(&c->p, action);
    pickle_key(&c->p, "addr");
    pickle_uint(&c->p, addr);
    pickle_key(&c->p, "size");
    pickle_uint(&c->p, size);
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

static void end_add(torch_ctx *c, int slot, int mapped, uint64_t addr, uint64_t size,
                    int64_t stack)
{
    if (c->nends == c->ends_cap) {
        size_t cap = c->ends_cap ? 2 * c->ends_cap : 256;
        end_segment *grown = realloc(c->ends, cap * sizeof *grown);
        if (!grown) {
            c->no_memory = 1;
            return;
        }
        c->ends = grown;
        c->ends_cap = cap;
    }
    c->ends[c->nends++] = (end_segment){c->src, slot, mapped, addr, size, stack};
}

/* One event of a slot as its trace entries (see device_trace). */
static void device_entry(torch_ctx *c, int slot, json_t *ev, int is_failure)
{
    const char *type = jstr(ev, "event_type"), *api = jstr(ev, "api");
    const char *hex = jstr(ev, "address");
    if (!type)
        return;
    int64_t stack = 0;
    uint64_t size = 0;
    ju64(ev, "size", &size);
    jint(ev, "stack_id", &stack);
    if (!strcmp(type, "oom")) {
        entry(c, "oom", ev, hex ? strtoull(hex, NULL, 16) : 0, size, stack, is_failure);
        return;
    }
    int is_alloc = !strcmp(type, "alloc"), is_map = !strcmp(type, "map");
    int is_free = !strcmp(type, "free"), is_unmap = !strcmp(type, "unmap");
    if (!hex || !(is_alloc || is_map || is_free || is_unmap) ||
        (api && (!strcmp(api, "cuMemCreate") || !strcmp(api, "cuMemRelease"))))
        return;
    uint64_t addr = strtoull(hex, NULL, 16);
    if (is_alloc || is_map) {
        entry(c, is_map ? "segment_map" : "segment_alloc", ev, addr, size, stack, 0);
        entry(c, "alloc", ev, addr, size, stack, 0);
        live_block *h = live_alloc(&c->live, (uint32_t)slot, addr, size, stack);
        if (h)
            h->flag = is_map ? SEEN_MAPPED : 0;
    } else {
        live_block *h = live_find(&c->live, (uint32_t)slot, addr);
        int live = h && !(h->flag & SEEN_GONE);
        int mapped = live ? h->flag & SEEN_MAPPED : is_unmap;
        if (live) { /* the block as it was made, so the page rebuilds it whole */
            size = h->size;
            stack = h->stack;
        }
        entry(c, "free_requested", ev, addr, size, stack, 0);
        entry(c, "free_completed", ev, addr, size, stack, 0);
        entry(c, mapped ? "segment_unmap" : "segment_free", ev, addr, size, stack, 0);
        if (!h)
            h = live_alloc(&c->live, (uint32_t)slot, addr, 0, 0);
        if (h)
            h->flag |= SEEN_GONE;
    }
}

/* One device's list (slot within the process being written): its events
 * in order, as PyTorch's allocator records its own.  An allocation made
 * through the runtime or driver (cudaMalloc, hipMalloc, malloc) is a
 * segment of its own, as it is to the device: segment_alloc then alloc;
 * its free, free_requested, free_completed then segment_free, with the
 * allocation's frames as PyTorch gives a free.  A cuMemMap range is a
 * mapped segment (segment_map) holding one block; cuMemCreate's handles are
 * no addresses and stay out.  Every block then lies in a segment at every
 * point of the trace, which memory_viz's Allocator State History needs
 * (it walks back from the end).  A bundle's list ends at its failure. */
static void device_trace(torch_ctx *c, int slot)
{
    pickle_list(&c->p);
    const torch_source *s = c->src;
    size_t i, failure = s->is_ring ? SIZE_MAX : s->b.events.failure;
    /* up to the failure, as PyTorch's own snapshot at an OOM: what the
     * teardown freed after it would leave the views empty */
    size_t end = s->is_ring ? source_events(s) : events_until_failure(&s->b.events);
    for (size_t j = s->slot_start ? s->slot_start[slot] : 0;
         s->slot_start && j < s->slot_start[slot + 1] && (i = s->order[j]) < end; j++) {
        json_t *ev = source_event(s, i);
        device_entry(c, slot, ev, i == failure);
        json_decref(ev);
    }
    pickle_list_end(&c->p);
}

/* What the process's lists left alive: segments at the end. */
static void ends_of_the_traces(torch_ctx *c)
{
    for (live_block *h = NULL; (h = live_next(&c->live, h)) != NULL;)
        if (!(h->flag & SEEN_GONE))
            end_add(c, (int)h->space, h->flag & SEEN_MAPPED, h->address, h->size, h->stack);
}
/* The allocations.json entries the trace never mentions (made before the
 * ring's oldest event, alive at the dump, so at the failure too): segments
 * from the start. */
static void ends_before_the_trace(torch_ctx *c)
{
    if (c->src->is_ring)
        return;
    json_t *held_doc = load_json_at(c->src->b.dirfd, "allocations.json", SMALL_FILE_MAX, NULL, 0);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(held_doc, "allocations"), i, a) {
        const char *hex = jstr(a, "address"); /* a cuMemCreate handle has none */
        int64_t stack = 0;
        uint64_t size = 0;
        ju64(a, "size", &size);
        jint(a, "stack_id", &stack);
        int slot = slot_of(c->src, a, "device");
        if (!hex || slot < 0 || slot >= c->src->ngpu + c->src->has_host)
            continue;
        uint64_t addr = strtoull(hex, NULL, 16);
        if (!live_find(&c->live, (uint32_t)slot, addr))
            end_add(c, slot, 0, addr, size, stack);
    }
    json_decref(held_doc);
}

static void segment(torch_ctx *c, const end_segment *e)
{
    pickle_out *p = &c->p;
    c->src = (torch_source *)e->src;
    pickle_dict(p);
    pickle_key(p, "device");
    pickle_int(p, e->src->base + e->slot);
    pickle_key(p, "address");
    pickle_uint(p, e->addr);
    static const char *const sizes[] = {"total_size", "allocated_size", "active_size",
                                        "requested_size"};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        pickle_key(p, sizes[k]);
        pickle_uint(p, e->size);
    }
    pickle_key(p, "stream");
    pickle_int(p, 0);
    pickle_key(p, "segment_type");
    pickle_str(p, e->size >= (1 << 20) ? "large" : "small");
    pickle_key(p, "segment_pool_id");
    pickle_int(p, 0);
    pickle_int(p, 0);
    pickle_tuple2_end(p);
    pickle_key(p, "is_expandable");
    pickle_bool(p, e->mapped);
    pickle_key(p, "frames");
    frames_of(c, e->stack);
    pickle_key(p, "blocks");
    pickle_list(p);
    pickle_dict(p);
    pickle_key(p, "address");
    pickle_uint(p, e->addr);
    pickle_key(p, "size");
    pickle_uint(p, e->size);
    pickle_key(p, "requested_size");
    pickle_uint(p, e->size);
    pickle_key(p, "state");
    pickle_str(p, "active_allocated");
    pickle_key(p, "frames");
    frames_of(c, e->stack);
    pickle_dict_end(p);
    pickle_list_end(p);
    pickle_dict_end(p);
}

int export_torch(char **operands, int n, FILE *f, FILE *map)
{
    static torch_ctx c; /* the memo table is large for a stack */
    memset(&c, 0, sizeof c);
    live_set_init(&c.live, 0); /* a memo of every address: no bound */
    size_t nsrc = 0;
    int bad = 0;
    torch_source *src = torch_sources_open(operands, n, &nsrc, &bad);
    if (!src)
        return EXIT_INVALID;
    if (!nsrc)
        bad = 1;
    /* the traces first, replayed: the segments are where they end */
    pickle_begin(&c.p, f);
    pickle_dict(&c.p);
    pickle_key(&c.p, "device_traces");
    pickle_list(&c.p);
    for (size_t k = 0; k < nsrc; k++) {
        c.src = &src[k];
        live_set_clear(&c.live);
        for (int slot = 0; slot < src[k].ngpu + src[k].has_host; slot++)
            device_trace(&c, slot);
        ends_of_the_traces(&c);
        ends_before_the_trace(&c);
    }
    pickle_list_end(&c.p);
    pickle_key(&c.p, "segments");
    pickle_list(&c.p);
    for (size_t k = 0; k < c.nends; k++)
        segment(&c, &c.ends[k]);
    pickle_list_end(&c.p);
    pickle_dict_end(&c.p);
    if (pickle_end(&c.p))
        bad = 1;
    if (c.no_memory || c.live.no_memory) {
        fputs("gmp-inspect export: out of memory; the snapshot is not whole\n", stderr);
        bad = 1;
    }
    torch_sources_map(src, nsrc, map);
    torch_sources_close(src, nsrc);
    live_set_release(&c.live);
    free(c.ends);
    symbols_release();
    return bad ? EXIT_INVALID : EXIT_OK;
}
