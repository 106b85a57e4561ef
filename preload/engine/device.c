/*
 * device.c — live device allocations: address -> size, device, API; and
 * the live host blocks large enough for an event (GMP_HOST_EVENT_MIN_BYTES),
 * under backend cpu, which only the bundle's allocations.json reads: what
 * held the memory, host and device, with the stacks that made it.
 *
 * A lock-free open-addressing table (linear probing, tombstones) in an
 * anonymous mapping made on the first device or large host allocation, so
 * processes that make neither pay nothing.  It gives bytes in use per device at any
 * moment (per-device atomic counters), and the size of what cudaFree and
 * friends release.  When the table is full an allocation is still counted,
 * only its later free cannot be matched (said once on stderr).  cuMemCreate
 * handles live here too, in their own key space: a handle may equal some
 * device address, and cuMemRelease must only ever match a handle.
 */
#include "preload.h"


#define TABLE_BITS 18 /* 262144 live allocations */
#define TABLE_SIZE (1u << TABLE_BITS)
#define TOMBSTONE UINT64_MAX

typedef struct live_entry {
    uint64_t key;  /* atomic: 0 empty, TOMBSTONE removed, else address */
    uint64_t size;
    uint32_t time_ms; /* since time_base_ns: the entry stays 32 bytes, half a line */
    uint32_t stack_id;
    int16_t device;
    uint8_t backend;
    uint8_t ready; /* atomic: fields above are valid */
    uint16_t api;
    uint8_t space; /* what the key is: a pointer, or a VMM allocation handle */
} live_entry;
_Static_assert(sizeof(live_entry) == 32, "two entries a cache line");

static live_entry *table; /* atomic pointer */
static int table_state;   /* atomic: gmp_lazy_table's */
static uint64_t in_use[GMP_BACKEND_COUNT][GMP_MAX_DEVICES + 1];
static uint64_t peak[GMP_BACKEND_COUNT][GMP_MAX_DEVICES + 1];    /* atomic */
/* Calls, by cell (backend, index): what threads moved here from their
 * slots, or counted here without one (gmp_count_device_call). */
#define CELLS (GMP_BACKEND_COUNT * (GMP_MAX_DEVICES + 1))
static uint64_t allocs[CELLS]; /* atomic */
static uint64_t frees[CELLS];  /* atomic */
static int full_reported;
static uint64_t time_base_ns; /* atomic: the first allocation's time */

int gmp_device_index(int device)
{
    if (device < 0)
        return 0;
    return device < GMP_MAX_DEVICES ? device + 1 : GMP_MAX_DEVICES;
}

static live_entry *get_table(void)
{
    return gmp_lazy_table((void **)&table, &table_state, sizeof(live_entry) * TABLE_SIZE);
}

enum { SPACE_POINTER = 0, SPACE_VMM_HANDLE = 1 };

static uint8_t space_of(gmp_api api)
{
    return api == GMP_API_CU_MEM_CREATE || api == GMP_API_CU_MEM_RELEASE ? SPACE_VMM_HANDLE
                                                                         : SPACE_POINTER;
}

static uint64_t slot_of(uint64_t ptr)
{
    uint64_t h = ptr * 0x9E3779B97F4A7C15ull;
    return h >> (64 - TABLE_BITS);
}

/* An entry in the table for ptr; time_ms since time_base_ns. */
static void insert(live_entry *t, gmp_backend backend, int device, uint64_t ptr, uint64_t size,
                   gmp_api api, uint32_t time_ms, uint32_t stack_id)
{
    uint64_t i = slot_of(ptr);
    for (uint32_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        uint64_t cur = __atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE);
        if (cur != 0 && cur != TOMBSTONE)
            continue;
        if (!__atomic_compare_exchange_n(&t[i].key, &cur, ptr, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        /* atomic, each: a bundle's walk (gmp_device_foreach_live) may read
         * the slot while it is refilled, and checks it after */
        __atomic_store_n(&t[i].size, size, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].time_ms, time_ms, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].stack_id, stack_id, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].device, (int16_t)device, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].backend, (uint8_t)backend, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].api, (uint16_t)api, __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].space, space_of(api), __ATOMIC_RELAXED);
        __atomic_store_n(&t[i].ready, 1, __ATOMIC_RELEASE);
        return;
    }
    if (!__atomic_exchange_n(&full_reported, 1, __ATOMIC_RELAXED))
        gmp_log("more than %u live device allocations; later frees are not matched",
                TABLE_SIZE);
}

static uint32_t cell_of(gmp_backend backend, int index)
{
    return (uint32_t)backend * (GMP_MAX_DEVICES + 1) + (uint32_t)index;
}

void gmp_device_calls_shared(uint32_t cell, uint64_t alloc_count, uint64_t free_count)
{
    if (cell >= CELLS)
        return;
    if (alloc_count)
        __atomic_fetch_add(&allocs[cell], alloc_count, __ATOMIC_RELAXED);
    if (free_count)
        __atomic_fetch_add(&frees[cell], free_count, __ATOMIC_RELAXED);
}

static void count_in(gmp_backend backend, int device, uint64_t size)
{
    int d = gmp_device_index(device);
    uint64_t now = __atomic_add_fetch(&in_use[backend][d], size, __ATOMIC_RELAXED);
    uint64_t top = __atomic_load_n(&peak[backend][d], __ATOMIC_RELAXED);
    while (now > top && !__atomic_compare_exchange_n(&peak[backend][d], &top, now, 1,
                                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void record_live(gmp_backend backend, int device, uint64_t ptr, uint64_t size,
                        gmp_api api, uint64_t now_ns, uint32_t stack_id);

void gmp_device_add(gmp_backend backend, int device, uint64_t ptr, uint64_t size,
                    gmp_api api, uint64_t now_ns, uint32_t stack_id)
{
    count_in(backend, device, size);
    gmp_count_device_call(cell_of(backend, gmp_device_index(device)), 0, 1);
    record_live(backend, device, ptr, size, api, now_ns, stack_id);
}

/* An entry for ptr, its time since the first entry's. */
static void record_live(gmp_backend backend, int device, uint64_t ptr, uint64_t size,
                        gmp_api api, uint64_t now_ns, uint32_t stack_id)
{
    live_entry *t = get_table();
    if (!t || !ptr)
        return;
    uint64_t base = __atomic_load_n(&time_base_ns, __ATOMIC_RELAXED);
    if (GMP_UNLIKELY(!base)) {
        uint64_t none = 0;
        base = now_ns;
        if (!__atomic_compare_exchange_n(&time_base_ns, &none, base, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            base = none;
    }
    insert(t, backend, device, ptr, size, api,
           now_ns > base ? (uint32_t)((now_ns - base) / 1000000) : 0, stack_id);
}

/* ptr's entry of backend and space removed, into *out.  0, or -1. */
static int take(gmp_backend backend, uint8_t space, uint64_t ptr, gmp_live_taken *out)
{
    live_entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t || !ptr)
        return -1;
    uint64_t i = slot_of(ptr);
    for (uint32_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        uint64_t cur = __atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE);
        if (cur == 0)
            return -1;
        if (cur != ptr || !__atomic_load_n(&t[i].ready, __ATOMIC_ACQUIRE) ||
            t[i].backend != backend || t[i].space != space)
            continue;
        *out = (gmp_live_taken){
            .ptr = ptr,
            .size = t[i].size,
            .time_ms = t[i].time_ms,
            .stack_id = t[i].stack_id,
            .device = t[i].device,
            .backend = backend,
            .api = (gmp_api)t[i].api,
        };
        __atomic_store_n(&t[i].ready, 0, __ATOMIC_RELAXED);
        if (!__atomic_compare_exchange_n(&t[i].key, &cur, TOMBSTONE, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            return -1; /* a racing free of the same pointer took it */
        return 0;
    }
    return -1;
}

int gmp_device_take(gmp_backend backend, gmp_api api, uint64_t ptr, gmp_live_taken *out)
{
    if (take(backend, space_of(api), ptr, out) < 0)
        return -1;
    __atomic_fetch_sub(&in_use[backend][gmp_device_index(out->device)], out->size,
                       __ATOMIC_RELAXED);
    gmp_count_device_call(cell_of(backend, gmp_device_index(out->device)), 1, 1);
    return 0;
}

void gmp_host_live_add(uint64_t ptr, uint64_t size, gmp_api api, uint64_t now_ns,
                       uint32_t stack_id)
{
    record_live(GMP_BACKEND_CPU, -1, ptr, size, api, now_ns, stack_id);
}

int gmp_host_live_take(uint64_t ptr, gmp_live_taken *out)
{
    return take(GMP_BACKEND_CPU, SPACE_POINTER, ptr, out);
}

void gmp_host_live_put_back(const gmp_live_taken *taken)
{
    live_entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (t)
        insert(t, GMP_BACKEND_CPU, -1, taken->ptr, taken->size, taken->api, taken->time_ms,
               taken->stack_id);
}

void gmp_device_put_back(const gmp_live_taken *taken)
{
    count_in(taken->backend, taken->device, taken->size);
    gmp_count_device_call(cell_of(taken->backend, gmp_device_index(taken->device)), 1, -1);
    live_entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (t)
        insert(t, taken->backend, taken->device, taken->ptr, taken->size, taken->api,
               taken->time_ms, taken->stack_id);
}

void gmp_device_stats(gmp_backend backend, int index, uint64_t *bytes, uint64_t *top,
                      uint64_t *alloc_count, uint64_t *free_count)
{
    *bytes = __atomic_load_n(&in_use[backend][index], __ATOMIC_RELAXED);
    *top = __atomic_load_n(&peak[backend][index], __ATOMIC_RELAXED);
    uint32_t cell = cell_of(backend, index);
    gmp_thread_device_calls(cell, alloc_count, free_count);
    *alloc_count += __atomic_load_n(&allocs[cell], __ATOMIC_RELAXED);
    *free_count += __atomic_load_n(&frees[cell], __ATOMIC_RELAXED);
}

uint64_t gmp_device_in_use(gmp_backend backend, int device)
{
    return __atomic_load_n(&in_use[backend][gmp_device_index(device)], __ATOMIC_RELAXED);
}

/* Every live entry; gpu_only: those of a GPU API (pinned host memory
 * included), not the host heap's. */
static void foreach_live(gmp_live_visit_fn visit, void *ctx, int gpu_only)
{
    live_entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t)
        return;
    /* racing adds and frees may be seen or not: an entry is taken when it
     * was whole (ready) before its fields were read and still is after,
     * under the same key (a slot freed and refilled meanwhile is skipped) */
    for (uint32_t i = 0; i < TABLE_SIZE; i++) {
        uint64_t key = __atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE);
        if (key == 0 || key == TOMBSTONE || !__atomic_load_n(&t[i].ready, __ATOMIC_ACQUIRE))
            continue;
        gmp_live_allocation a = {
            .address = key,
            .size = __atomic_load_n(&t[i].size, __ATOMIC_RELAXED),
            .time_ns = __atomic_load_n(&time_base_ns, __ATOMIC_RELAXED) +
                       (uint64_t)__atomic_load_n(&t[i].time_ms, __ATOMIC_RELAXED) * 1000000,
            .stack_id = __atomic_load_n(&t[i].stack_id, __ATOMIC_RELAXED),
            .device = __atomic_load_n(&t[i].device, __ATOMIC_RELAXED),
            .backend = __atomic_load_n(&t[i].backend, __ATOMIC_RELAXED),
            .api = __atomic_load_n(&t[i].api, __ATOMIC_RELAXED),
        };
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!__atomic_load_n(&t[i].ready, __ATOMIC_RELAXED) ||
            __atomic_load_n(&t[i].key, __ATOMIC_RELAXED) != key ||
            (gpu_only && a.backend == GMP_BACKEND_CPU))
            continue;
        visit(&a, ctx);
    }
}

void gmp_device_foreach_live(gmp_live_visit_fn visit, void *ctx, void *arg)
{
    (void)arg;
    foreach_live(visit, ctx, 0);
}

void gmp_gpu_foreach_live(gmp_live_visit_fn visit, void *ctx, void *arg)
{
    (void)arg;
    foreach_live(visit, ctx, 1);
}

uint64_t gmp_device_allocations_ever(void)
{
    uint64_t n, unused;
    gmp_thread_device_calls(GMP_EVERY_CELL, &n, &unused);
    for (uint32_t cell = 0; cell < CELLS; cell++)
        n += __atomic_load_n(&allocs[cell], __ATOMIC_RELAXED);
    return n;
}
