/*
 * sizes.c — the sizes of heap blocks whose allocator cannot be asked.
 *
 * With glibc's malloc behind us a block's size is in its chunk header, and
 * libc.c reads it there.  Another allocator behind us (jemalloc, tcmalloc,
 * mimalloc) answers malloc_usable_size with its size class, up to a tenth
 * more than was asked; one that exports nothing but malloc and free cannot
 * be asked at all (glibc's malloc_usable_size would read garbage from its
 * blocks).  So libc.c keeps the requested size of those blocks here: every
 * block of an allocator that cannot be asked, only the large ones of one
 * that can.
 *
 * An open-addressed table of (address, size) in an anonymous mapping made on
 * first use; slots are claimed by CAS, so a hook never takes a lock (a
 * signal handler that frees cannot deadlock).  A freed slot becomes a
 * tombstone that later inserts reuse.  Probes are bounded: when the table is
 * that full a block is not kept, and libc.c counts it as the allocator says
 * (or not at all), the same way when it is freed, so the counts stay paired.
 * A block is inserted by the thread that got it and removed by the one that
 * frees it, which the program orders after the insert.
 */
#include "preload.h"

#define SLOT_BITS 20                       /* 1 Mi slots, 16 MiB of address space */
#define SLOT_COUNT (1u << SLOT_BITS)
#define MAX_PROBES 64
#define TOMBSTONE ((uintptr_t)1)           /* no block lives at addresses 1 and 2 */
#define CLAIMED ((uintptr_t)2)

typedef struct size_slot {
    uintptr_t address; /* atomic: 0 empty, TOMBSTONE freed, CLAIMED being filled,
                        * else a live block */
    uint64_t size;     /* atomic */
} size_slot;

static void *table;
static int table_state;

static size_t home_of(uintptr_t address)
{
    /* heap addresses are 16-byte aligned: the low bits say nothing */
    return (size_t)(((uint64_t)(address >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - SLOT_BITS));
}

int gmp_sizes_put(const void *p, uint64_t size)
{
    size_slot *slots = gmp_lazy_table(&table, &table_state, SLOT_COUNT * sizeof(size_slot));
    if (!slots || !p)
        return -1;
    uintptr_t key = (uintptr_t)p;
    size_t at = home_of(key);
    for (int i = 0; i < MAX_PROBES; i++, at = (at + 1) & (SLOT_COUNT - 1)) {
        uintptr_t seen = __atomic_load_n(&slots[at].address, __ATOMIC_RELAXED);
        if (seen > TOMBSTONE ||
            !__atomic_compare_exchange_n(&slots[at].address, &seen, CLAIMED, 0,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue; /* live, being filled, or taken by another thread just now */
        __atomic_store_n(&slots[at].size, size, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[at].address, key, __ATOMIC_RELEASE);
        return 0;
    }
    return -1;
}

/* The slot holding p, or NULL.  An empty slot ends the search: tombstones
 * keep the chains whole. */
static size_slot *find(const void *p)
{
    size_slot *slots = __atomic_load_n((size_slot **)&table, __ATOMIC_ACQUIRE);
    if (!slots || !p)
        return NULL;
    uintptr_t key = (uintptr_t)p;
    size_t at = home_of(key);
    for (int i = 0; i < MAX_PROBES; i++, at = (at + 1) & (SLOT_COUNT - 1)) {
        uintptr_t seen = __atomic_load_n(&slots[at].address, __ATOMIC_ACQUIRE);
        if (seen == key)
            return &slots[at];
        if (seen == 0)
            return NULL;
    }
    return NULL;
}

int gmp_sizes_get(const void *p, uint64_t *size)
{
    size_slot *s = find(p);
    if (!s)
        return -1;
    *size = __atomic_load_n(&s->size, __ATOMIC_RELAXED);
    return 0;
}

int gmp_sizes_take(const void *p, uint64_t *size)
{
    size_slot *s = find(p);
    if (!s)
        return -1;
    *size = __atomic_load_n(&s->size, __ATOMIC_RELAXED);
    __atomic_store_n(&s->address, TOMBSTONE, __ATOMIC_RELEASE);
    return 0;
}
