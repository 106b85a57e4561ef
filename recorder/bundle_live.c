/*
 * bundle_live.c — allocations.json (and a leak report's leaks.json): the
 * allocations alive when the bundle is written (and, in a failure's bundle,
 * made before the failure), largest first, with totals per device, per API
 * and per allocating stack.  "What held the memory."
 *
 * gmp_bundle_live_snapshot writes the same at a failure, into a memfd, for
 * a bundle written later (at the process's exit, after it let go).
 *
 * Two passes over the live table, no allocation: the first totals
 * everything and keeps the largest LIST_MAX in a bounded min-heap (a static
 * array claimed by one writer at a time; a second, concurrent writer lists
 * fewer from its stack), the second is a heap sort of those, largest first.
 */
#include "bundle.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LIST_MAX 10000    /* allocations listed one by one */
#define LIST_FALLBACK 64  /* when another bundle holds the big list */
#define MAX_DEVICE_KEYS 32
#define MAX_STACK_KEYS 128
#define TOP_STACKS 10

typedef struct tally {
    uint64_t count, bytes;
} tally;

typedef struct live_ctx {
    gmp_live_allocation *heap; /* min-heap by size */
    uint32_t cap, n;
    tally all, omitted;
    struct { uint8_t backend; int16_t device; tally t; } devices[MAX_DEVICE_KEYS];
    uint32_t device_n;
    tally apis[GMP_API_COUNT];
    struct { uint32_t id; tally t; } stacks[MAX_STACK_KEYS];
    uint32_t stack_n;
    tally other_stacks; /* beyond MAX_STACK_KEYS distinct ones, or none */
    uint64_t until_ns;  /* made after this (the failure), not listed; 0: all */
    tally after;
} live_ctx;

static gmp_live_allocation big_list[LIST_MAX];
static int big_list_taken; /* atomic */

static void add(tally *t, uint64_t bytes)
{
    t->count++;
    t->bytes += bytes;
}

static void sift_down(gmp_live_allocation *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].size < h[m].size)
            m = l;
        if (r < n && h[r].size < h[m].size)
            m = r;
        if (m == i)
            return;
        gmp_live_allocation t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void sift_up(gmp_live_allocation *h, uint32_t i)
{
    while (i > 0 && h[(i - 1) / 2].size > h[i].size) {
        gmp_live_allocation t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static void visit(const gmp_live_allocation *a, void *arg)
{
    live_ctx *c = arg;
    if (c->until_ns && a->time_ns > c->until_ns) {
        add(&c->after, a->size); /* held nothing when it failed */
        return;
    }
    add(&c->all, a->size);
    uint32_t i;
    for (i = 0; i < c->device_n; i++)
        if (c->devices[i].backend == a->backend && c->devices[i].device == a->device)
            break;
    if (i == c->device_n && i < MAX_DEVICE_KEYS) {
        c->devices[i].backend = a->backend;
        c->devices[i].device = a->device;
        c->device_n++;
    }
    if (i < MAX_DEVICE_KEYS)
        add(&c->devices[i].t, a->size);
    if (a->api < GMP_API_COUNT)
        add(&c->apis[a->api], a->size);
    for (i = 0; a->stack_id && i < c->stack_n; i++)
        if (c->stacks[i].id == a->stack_id)
            break;
    if (a->stack_id && i == c->stack_n && i < MAX_STACK_KEYS)
        c->stacks[c->stack_n++].id = a->stack_id;
    add(a->stack_id && i < MAX_STACK_KEYS ? &c->stacks[i].t : &c->other_stacks, a->size);
    /* the largest cap, in a min-heap: the smallest kept is at the root */
    if (c->n < c->cap) {
        c->heap[c->n] = *a;
        sift_up(c->heap, c->n++);
    } else if (c->cap && a->size > c->heap[0].size) {
        add(&c->omitted, c->heap[0].size);
        c->heap[0] = *a;
        sift_down(c->heap, c->n, 0);
    } else {
        add(&c->omitted, a->size);
    }
}

static void write_tally(gmp_jw *w, const tally *t)
{
    gmp_jw_ku64(w, "count", t->count);
    gmp_jw_ku64(w, "bytes", t->bytes);
}

static void write_top_stacks(gmp_jw *w, live_ctx *c, uint64_t *stacks_seen,
                             uint32_t max_stack_id)
{
    gmp_jw_key(w, "top_stacks");
    gmp_jw_arr_begin(w);
    /* selection of the TOP_STACKS largest: few, and no allocation */
    for (int k = 0; k < TOP_STACKS; k++) {
        int best = -1;
        for (uint32_t i = 0; i < c->stack_n; i++)
            if (c->stacks[i].t.count &&
                (best < 0 || c->stacks[i].t.bytes > c->stacks[best].t.bytes))
                best = (int)i;
        if (best < 0)
            break;
        gmp_jw_obj_begin(w);
        uint32_t id = c->stacks[best].id;
        gmp_jw_ku64(w, "stack_id", id);
        write_tally(w, &c->stacks[best].t);
        if (id <= max_stack_id)
            stacks_seen[(id - 1) / 64] |= 1ull << ((id - 1) % 64);
        gmp_jw_obj_end(w);
        c->stacks[best].t.count = 0; /* taken */
    }
    gmp_jw_arr_end(w);
}

void gmp_bundle_fill_live(gmp_jw *w, const gmp_dump_request *req, uint64_t now_ns,
                          uint64_t *stacks_seen, uint32_t max_stack_id)
{
    gmp_live_allocation small[LIST_FALLBACK];
    live_ctx c;
    memset(&c, 0, sizeof c);
    int own_big = !__atomic_exchange_n(&big_list_taken, 1, __ATOMIC_ACQUIRE);
    c.heap = own_big ? big_list : small;
    c.cap = own_big ? LIST_MAX : LIST_FALLBACK;
    /* what held the memory when the failure happened: what the program
     * (or its runtime's panic printing, its exception's traceback) made
     * after it is counted apart */
    c.until_ns = req->failed.present ? req->failed.time_ns : 0;
    if (req->live_foreach)
        req->live_foreach(visit, &c, req->live_arg);
    /* heap sort: the smallest goes last each round, so largest first */
    for (uint32_t n = c.n; n > 1; n--) {
        gmp_live_allocation t = c.heap[0];
        c.heap[0] = c.heap[n - 1];
        c.heap[n - 1] = t;
        sift_down(c.heap, n - 1, 0);
    }

    gmp_jw_obj_begin(w);
    gmp_jw_ku64(w, "live_count", c.all.count);
    gmp_jw_ku64(w, "live_bytes", c.all.bytes);
    gmp_jw_ku64(w, "listed_count", c.n);
    gmp_jw_ku64(w, "omitted_count", c.omitted.count);
    gmp_jw_ku64(w, "omitted_bytes", c.omitted.bytes);
    if (c.until_ns) {
        gmp_jw_ku64(w, "made_after_failure_count", c.after.count);
        gmp_jw_ku64(w, "made_after_failure_bytes", c.after.bytes);
    }
    gmp_jw_key(w, "by_device");
    gmp_jw_arr_begin(w);
    for (uint32_t i = 0; i < c.device_n; i++) {
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "backend", gmp_backend_name(c.devices[i].backend));
        gmp_jw_ki64(w, "device", c.devices[i].device);
        write_tally(w, &c.devices[i].t);
        gmp_jw_obj_end(w);
    }
    gmp_jw_arr_end(w);
    gmp_jw_key(w, "by_api");
    gmp_jw_arr_begin(w);
    for (unsigned api = 0; api < GMP_API_COUNT; api++) {
        if (!c.apis[api].count)
            continue;
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "api", gmp_api_name(api));
        write_tally(w, &c.apis[api]);
        gmp_jw_obj_end(w);
    }
    gmp_jw_arr_end(w);
    write_top_stacks(w, &c, stacks_seen, max_stack_id);
    gmp_jw_key(w, "allocations");
    gmp_jw_arr_begin(w);
    for (uint32_t i = 0; i < c.n; i++) {
        const gmp_live_allocation *a = &c.heap[i];
        gmp_jw_next_line(w);
        gmp_jw_obj_begin(w);
        gmp_jw_key(w, a->api == GMP_API_CU_MEM_CREATE ? "handle" : "address");
        gmp_jw_hex(w, a->address);
        gmp_jw_ku64(w, "size", a->size);
        gmp_jw_kstr(w, "backend", gmp_backend_name(a->backend));
        gmp_jw_ki64(w, "device", a->device);
        gmp_jw_kstr(w, "api", gmp_api_name(a->api));
        gmp_jw_key(w, "allocated_at");
        gmp_jw_seconds(w, a->time_ns);
        gmp_jw_key(w, "age_s");
        gmp_jw_seconds(w, now_ns > a->time_ns ? now_ns - a->time_ns : 0);
        gmp_jw_ku64(w, "stack_id", a->stack_id);
        gmp_jw_obj_end(w);
        if (a->stack_id && a->stack_id <= max_stack_id)
            stacks_seen[(a->stack_id - 1) / 64] |= 1ull << ((a->stack_id - 1) % 64);
    }
    gmp_jw_space(w, "\n");
    gmp_jw_arr_end(w);
    gmp_jw_obj_end(w);
    if (own_big)
        __atomic_store_n(&big_list_taken, 0, __ATOMIC_RELEASE);
}

int gmp_bundle_live_snapshot(const gmp_dump_request *req, uint64_t now_ns,
                             uint64_t *stacks_seen)
{
    int fd = memfd_create("gmp-live-at-failure", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    gmp_jw w;
    gmp_jw_init(&w, fd, buf, sizeof buf);
    memset(stacks_seen, 0, GMP_BUNDLE_STACK_IDS / 8);
    gmp_bundle_fill_live(&w, req, now_ns, stacks_seen, GMP_BUNDLE_STACK_IDS);
    if (gmp_jw_finish(&w) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}
