/*
 * interned.c — the tables that give a thing met again and again one small
 * id: the stacks of allocations (stack.c) and the Python frames in them
 * (python_frames.c).  An entry is named by a 64-bit hash of its key and
 * claimed by a compare-and-swap of that hash, so any thread, a signal
 * handler's too, adds one without a lock and without allocating; its owner
 * then fills it and publishes it.  The ids are also kept in the order they
 * were made: a new ring is given the known ones from that list, not by a
 * walk over the whole table, whose untouched pages would then be read in
 * (3.4 MB, 860 page faults, for the frames' table).
 */
#include "interned.h"
#include "preload.h"

#define MAX_PROBES 32

void *gmp_interned_entries(gmp_interned *t, int may_map)
{
    return may_map ? gmp_lazy_table(&t->entries, &t->state, (size_t)t->slots * t->entry_size)
                   : __atomic_load_n(&t->entries, __ATOMIC_ACQUIRE);
}

uint32_t gmp_interned_find(gmp_interned *t, void *entries, uint64_t hash, int *claimed)
{
    *claimed = 0;
    for (uint32_t probe = 0, i = (uint32_t)(hash >> 20) & (t->slots - 1); probe < MAX_PROBES;
         probe++, i = (i + 1) & (t->slots - 1)) {
        uint64_t *at = (uint64_t *)gmp_interned_entry(t, entries, i + 1);
        uint64_t cur = __atomic_load_n(at, __ATOMIC_ACQUIRE);
        if (cur == hash)
            return i + 1; /* the same key (or, rarely, one with its hash) */
        if (cur != 0)
            continue;
        if (__atomic_compare_exchange_n(at, &cur, hash, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *claimed = 1;
            return i + 1;
        }
        if (cur == hash) /* another thread claimed it for the same key */
            return i + 1;
    }
    return 0;
}

void gmp_interned_made(gmp_interned *t, uint32_t id)
{
    uint32_t k = __atomic_fetch_add(&t->made_count, 1, __ATOMIC_RELAXED);
    if (k < t->slots)
        __atomic_store_n(&t->made[k], (uint16_t)id, __ATOMIC_RELEASE);
}

uint32_t gmp_interned_made_count(gmp_interned *t)
{
    uint32_t n = __atomic_load_n(&t->made_count, __ATOMIC_ACQUIRE);
    return n < t->slots ? n : t->slots;
}

uint32_t gmp_interned_made_at(gmp_interned *t, uint32_t k)
{
    return __atomic_load_n(&t->made[k], __ATOMIC_ACQUIRE);
}
