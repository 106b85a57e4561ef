/*
 * interned.h — tables that give a key met again and again (an allocation's
 * stack, a Python frame) one small id, lock-free: see interned.c.  Used by
 * stack.c and python_frames.c; the mapping is preload.h's gmp_lazy_table.
 */
#ifndef GMP_INTERNED_H
#define GMP_INTERNED_H

#include "util.h"

#include <stddef.h>
#include <stdint.h>

/* A table of entries named by a hash of their key, each entry starting
 * with that hash (uint64_t, atomic: 0 free), its 1-based index the key's
 * id; made on first use (gmp_lazy_table), never emptied.  Declared with
 * GMP_INTERNED; slots a power of two, ids kept in 16 bits. */
typedef struct gmp_interned {
    void *entries;       /* atomic: gmp_lazy_table's */
    int state;           /* atomic: gmp_lazy_table's */
    uint32_t slots, entry_size;
    uint32_t made_count; /* atomic */
    uint16_t *made;      /* the ids in the order they were made (atomic entries, 0 not yet) */
} gmp_interned;
#define GMP_INTERNED(name, entry_type, count)                                                     \
    _Static_assert((count) <= UINT16_MAX && !((count) & ((count) - 1)),                           \
                   #name ": ids fit 16 bits, a power of two of slots");                           \
    static uint16_t name##_made[count];                                                            \
    static gmp_interned name = {                                                                   \
        .slots = (count), .entry_size = sizeof(entry_type), .made = name##_made}
/* FNV-1a, by words: the key's hash, never 0 once finished */
#define GMP_INTERNED_HASH_START 0xcbf29ce484222325ull
static inline uint64_t gmp_interned_mix(uint64_t hash, uint64_t word)
{
    return (hash ^ word) * 0x100000001b3ull;
}
static inline uint64_t gmp_interned_hash_done(uint64_t hash)
{
    return hash | 1;
}
/* The entries, mapped now when may_map (not in a signal handler: the
 * first mapping), else as they are: NULL when not made (or never can be). */
GMP_HIDDEN void *gmp_interned_entries(gmp_interned *t, int may_map);
static inline void *gmp_interned_entry(const gmp_interned *t, void *entries, uint32_t id)
{
    return (char *)entries + (size_t)(id - 1) * t->entry_size;
}
/* The id of hash's entry, 0 when it is not there and the probes found no
 * room.  *claimed: this call took the entry; the caller fills it, publishes
 * it (its own ready flag) and then calls gmp_interned_made.  Another
 * thread's entry for the same hash may not be published yet. */
GMP_HIDDEN uint32_t gmp_interned_find(gmp_interned *t, void *entries, uint64_t hash,
                                      int *claimed);
GMP_HIDDEN void gmp_interned_made(gmp_interned *t, uint32_t id);
/* How many ids were made, and the k-th (0 while its maker has not written it) */
GMP_HIDDEN uint32_t gmp_interned_made_count(gmp_interned *t);
GMP_HIDDEN uint32_t gmp_interned_made_at(gmp_interned *t, uint32_t k);

#endif
