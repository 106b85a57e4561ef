/*
 * live_set.c — allocations paired with their frees by address: the one
 * table every reader that replays a bundle's events keeps what is alive in
 * (the sites that held memory, the growth diagnose and leaks judge, the
 * torch export's segments).  A key is an address in an address space: a
 * reader that replays several processes or devices at once names which
 * (space), so that one's address is never another's.
 *
 * Open addressing with linear probing, a power of two of slots.  A free
 * leaves a tombstone that the next new address on its probe path reuses;
 * the table doubles when live blocks and tombstones fill half of it and
 * leaves the tombstones behind when it does, so it grows with what is
 * alive at once, not with every address a long run ever used.
 */
#include "read.h"

#include <stdlib.h>
#include <string.h>

enum { SLOT_EMPTY, SLOT_HELD, SLOT_GONE };

static size_t slot_of(uint32_t space, uint64_t address, size_t cap)
{
    uint64_t h = (address ^ ((uint64_t)space << 48)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

void live_set_init(live_set *s, size_t max_live)
{
    memset(s, 0, sizeof *s);
    s->max_live = max_live;
}

void live_set_release(live_set *s)
{
    free(s->slots);
    live_set_init(s, s->max_live);
}

void live_set_clear(live_set *s)
{
    if (s->slots)
        memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->live = s->used = 0;
}

/* Twice the slots (at least 1024), the live blocks moved in; 0 or -1. */
static int grow(live_set *s)
{
    size_t cap = s->cap ? 2 * s->cap : 1024;
    live_block *grown = calloc(cap, sizeof *grown);
    if (!grown) {
        s->no_memory = 1;
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slots[i].state != SLOT_HELD)
            continue;
        size_t k = slot_of(s->slots[i].space, s->slots[i].address, cap);
        while (grown[k].state)
            k = (k + 1) & (cap - 1);
        grown[k] = s->slots[i];
    }
    free(s->slots);
    s->slots = grown;
    s->cap = cap;
    s->used = s->live;
    return 0;
}

/* The slot of (space, address) when it is live, else NULL; *free_slot
 * (when asked) the first tombstone or empty slot on its path. */
static live_block *find(const live_set *s, uint32_t space, uint64_t address,
                        live_block **free_slot)
{
    if (free_slot)
        *free_slot = NULL;
    if (!s->cap)
        return NULL;
    size_t k = slot_of(space, address, s->cap);
    for (size_t probes = 0; probes < s->cap; probes++, k = (k + 1) & (s->cap - 1)) {
        live_block *b = &s->slots[k];
        if (b->state == SLOT_HELD && b->address == address && b->space == space)
            return b;
        if (b->state != SLOT_HELD && free_slot && !*free_slot)
            *free_slot = b;
        if (b->state == SLOT_EMPTY)
            return NULL;
    }
    return NULL;
}

live_block *live_alloc(live_set *s, uint32_t space, uint64_t address, uint64_t size,
                       int64_t stack)
{
    live_block *slot, *b = find(s, space, address, &slot);
    if (!b) { /* new: a block made twice without a free between is made again */
        if (s->max_live && s->live >= s->max_live)
            return NULL; /* the reader's bound: past it, not followed */
        if ((s->used + 1) * 2 > s->cap) {
            if (grow(s) < 0)
                return NULL;
            find(s, space, address, &slot);
        }
        if (!slot)
            return NULL;
        if (slot->state == SLOT_EMPTY)
            s->used++;
        s->live++;
        b = slot;
    }
    *b = (live_block){.address = address, .size = size, .stack = stack, .space = space,
                      .state = SLOT_HELD};
    return b;
}

live_block *live_free(live_set *s, uint32_t space, uint64_t address)
{
    live_block *b = find(s, space, address, NULL);
    if (!b)
        return NULL;
    b->state = SLOT_GONE; /* a tombstone; its fields stay for the caller */
    s->live--;
    return b;
}

live_block *live_find(const live_set *s, uint32_t space, uint64_t address)
{
    return find(s, space, address, NULL);
}

live_block *live_next(const live_set *s, live_block *after)
{
    size_t k = after ? (size_t)(after - s->slots) + 1 : 0;
    for (; k < s->cap; k++)
        if (s->slots[k].state == SLOT_HELD)
            return &s->slots[k];
    return NULL;
}
