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
 */
#include "inspect.h"
#include "pickle_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMO 4096

typedef struct torch_ctx {
    pickle_out p;
    bundle *b;
    json_t *stacks, *mods;
    struct {
        int64_t stack;
        uint32_t id;
    } memo[MAX_MEMO];
    size_t nmemo;
    int ngpu;     /* device_traces slots for GPUs: the largest device + 1 */
    int has_host; /* a slot after them for the host */
} torch_ctx;

static int slot_of(const torch_ctx *c, json_t *ev, const char *device_key)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, device_key, &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        return c->ngpu; /* the host, after the devices */
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
    const char *path = at ? module_of(c->mods, at, &bias) : NULL;
    char fn[256], file[1024], name[1100];
    int line = 0;
    if (path && symbolise(c->b->dirfd, path, at - bias, fn, sizeof fn, file, sizeof file,
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
    json_array_foreach(c->stacks, i, s) {
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
        if (c->memo[i].stack == id) {
            pickle_memo_get(&c->p, c->memo[i].id);
            return;
        }
    pickle_list(&c->p);
    if (id > 0)
        native_frames(c, id);
    pickle_list_end(&c->p);
    if (c->nmemo < MAX_MEMO) {
        c->memo[c->nmemo].stack = id;
        c->memo[c->nmemo++].id = pickle_memo_put(&c->p);
    }
}

/* The failure's frames: the failed request's native ones, then the Python
 * stack of the thread that failed. */
static void failure_frames(torch_ctx *c)
{
    pickle_list(&c->p);
    json_t *stack = json_object_get(json_object_get(c->b->metadata, "failed_request"), "stack");
    size_t i;
    json_t *f;
    json_array_foreach(stack, i, f)
        address_frame(c, json_string_value(f), 0); /* the named ones, then Python's */
    python_stack st;
    if (python_stack_read(c->b, &st) == 0) {
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
    json_array_foreach(json_object_get(c->b->metadata, "device_state"), i, st)
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

/* One device's list: its events in order, as PyTorch's allocator would
 * have recorded them. */
static void device_trace(torch_ctx *c, int slot)
{
    pickle_list(&c->p);
    const event_list *l = &c->b->events;
    size_t i;
    json_t *ev;
    event_foreach(l, i, ev) {
        const char *type = jstr(ev, "event_type");
        if (!type || slot_of(c, ev, "device_id") != slot)
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
            entry(c, "oom", ev, i == l->failure);
        }
    }
    pickle_list_end(&c->p);
}

static void segment(torch_ctx *c, int slot, uint64_t address, int64_t size, int64_t stack)
{
    pickle_out *p = &c->p;
    pickle_dict(p);
    pickle_key(p, "device");
    pickle_int(p, slot);
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
    event_foreach(&c->b->events, i, ev) {
        const char *type = jstr(ev, "event_type"), *addr = jstr(ev, "address");
        if (!type || !addr || (strcmp(type, "alloc") && strcmp(type, "free")))
            continue;
        uint64_t at = strtoull(addr, NULL, 16);
        int slot = slot_of(c, ev, "device_id");
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
            if (!grown)
                break;
            l = grown;
        }
        l[n] = (live){at, 0, 0, slot};
        jint(ev, "size", &l[n].size);
        jint(ev, "stack_id", &l[n].stack);
        n++;
    }
    for (size_t k = 0; k < n; k++)
        if (l[k].slot >= 0 && l[k].slot < c->ngpu)
            segment(c, l[k].slot, l[k].address, l[k].size, l[k].stack);
    free(l);
}

static void segments(torch_ctx *c)
{
    pickle_list(&c->p);
    json_t *held = load_json_at(c->b->dirfd, "allocations.json", SMALL_FILE_MAX, NULL, 0);
    json_t *list = json_object_get(held, "allocations");
    if (json_is_array(list)) {
        size_t i;
        json_t *a;
        json_array_foreach(list, i, a) {
            const char *addr = jstr(a, "address") ? jstr(a, "address") : jstr(a, "handle");
            int64_t size = 0, stack = 0;
            jint(a, "size", &size);
            jint(a, "stack_id", &stack);
            int slot = slot_of(c, a, "device");
            if (addr && slot >= 0 && slot < c->ngpu)
                segment(c, slot, strtoull(addr, NULL, 16), size, stack);
        }
    } else {
        segments_from_events(c);
    }
    json_decref(held);
    pickle_list_end(&c->p);
}

int export_torch(const char *path, FILE *f)
{
    static torch_ctx c; /* the memo table is large for a stack */
    memset(&c, 0, sizeof c);
    char err[600];
    bundle b;
    if (bundle_open(&b, path, 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect export: %s\n", err);
        return EXIT_INVALID;
    }
    c.b = &b;
    c.stacks = load_json_at(b.dirfd, "stacks.json", SMALL_FILE_MAX, NULL, 0);
    c.mods = load_json_at(b.dirfd, "modules.json", SMALL_FILE_MAX, NULL, 0);
    size_t i;
    json_t *ev;
    event_foreach(&b.events, i, ev) {
        const char *backend = jstr(ev, "backend");
        int64_t dev = -1;
        jint(ev, "device_id", &dev);
        if (backend && strcmp(backend, "cpu") && dev >= 0 && dev < 4096)
            c.ngpu = (int)dev + 1 > c.ngpu ? (int)dev + 1 : c.ngpu;
        else
            c.has_host = 1;
    }
    pickle_begin(&c.p, f);
    pickle_dict(&c.p);
    pickle_key(&c.p, "segments");
    segments(&c);
    pickle_key(&c.p, "device_traces");
    pickle_list(&c.p);
    for (int slot = 0; slot < c.ngpu + c.has_host; slot++)
        device_trace(&c, slot);
    pickle_list_end(&c.p);
    pickle_dict_end(&c.p);
    int bad = pickle_end(&c.p);
    json_decref(c.stacks);
    json_decref(c.mods);
    bundle_close(&b);
    symbols_release();
    return bad ? EXIT_INVALID : EXIT_OK;
}
