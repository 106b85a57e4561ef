/*
 * stack.c — native stacks: the return addresses of a failing call, for its
 * bundle; and (GMP_STACKS, on by default) the stacks of device allocations
 * and large host allocations, deduplicated in a table whose 1-based index is
 * the events' stack_id, written to the bundle's stacks.json.  In a Python
 * thread such a stack ends with its Python frames (python_frames.c), so one
 * id names the line that asked and the library that allocated.
 *
 * Captured by unwind.c (rules learned per return address, the call-frame
 * information for the first stack through each), never in a signal handler
 * (its first call loads libgcc's FDE lookup), only for a device allocation
 * or a host one of GMP_HOST_EVENT_MIN_BYTES — never for a small malloc.
 * Frames inside the preload itself, and any above them, are left out: the
 * first address is the program's call.  The table is lock-free
 * (interned.c: a slot claimed by CAS on the stack's hash, then published
 * by a ready flag), in an anonymous mapping made on first use: its
 * untouched pages cost nothing.
 * Each new stack also goes to the ring (stack_ring.c), for a bundle
 * recovered after the process is killed.
 */
#include "interned.h"
#include "preload.h"
#include "ring.h"

#include <link.h>
#include <string.h>

static uintptr_t self_lo, self_hi; /* atomic: the preload's own mapped range */

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uint64_t lo, hi;
    if (!gmp_object_extent(info, (uintptr_t)arg, &lo, &hi))
        return 0;
    __atomic_store_n(&self_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&self_hi, hi, __ATOMIC_RELEASE); /* after lo: hi says both are set */
    return 1;
}

uint32_t gmp_stack_capture(uint64_t *out, uint32_t max)
{
    enum { SKIPPABLE = 16 };
    uint64_t frames[GMP_STACK_MAX + SKIPPABLE];
    if (!__atomic_load_n(&self_hi, __ATOMIC_ACQUIRE)) {
        GMP_IN_HOOK_SCOPE();
        gmp_each_object(find_self, (void *)(uintptr_t)gmp_stack_capture);
    }
    int n = (int)gmp_unwind(frames, sizeof frames / sizeof *frames);
    uintptr_t self_end = __atomic_load_n(&self_hi, __ATOMIC_ACQUIRE),
              self_start = __atomic_load_n(&self_lo, __ATOMIC_RELAXED);
    /* The program's call is the first frame after our innermost run of
     * frames; anything above that run (a sanitizer's backtrace interceptor)
     * goes with it. */
    int first = 0;
    for (int i = 0; i < n && i < SKIPPABLE; i++) {
        uintptr_t a = frames[i];
        if (a >= self_start && a < self_end)
            first = i + 1;
        else if (first)
            break;
    }
    uint32_t depth = 0;
    for (int i = first; i < n && depth < max && depth < GMP_STACK_MAX; i++)
        out[depth++] = frames[i];
    return depth;
}

/* ---- the table of allocation stacks ----------------------------------- */

#define TABLE_SLOTS 4096 /* distinct stacks kept; more get stack_id 0 */

typedef struct stack_entry {
    uint64_t hash;  /* atomic: the table's (interned.c) */
    uint32_t depth;
    uint32_t ready; /* atomic: frames and depth are whole */
    uint64_t frames[GMP_ALLOC_STACK_DEPTH];
} stack_entry;

GMP_INTERNED(stacks, stack_entry, TABLE_SLOTS);
_Static_assert(GMP_ALLOC_STACK_DEPTH <= GMP_RING_STACK_DEPTH, "the ring keeps a whole stack");

static uint32_t stack_id(int may_map)
{
    if (!gmp_pl.cfg->stacks)
        return 0;
    stack_entry *t = gmp_interned_entries(&stacks, may_map);
    if (!t)
        return 0;
    /* a Python thread's own lines first, then as many native frames as
     * room is left (at least NATIVE_MIN: the library that allocated) */
    enum { NATIVE_MIN = 5 };
    uint64_t frames[GMP_ALLOC_STACK_DEPTH], python[GMP_ALLOC_STACK_DEPTH - NATIVE_MIN];
    uint32_t in_python = gmp_python_frames(python, GMP_ALLOC_STACK_DEPTH - NATIVE_MIN, may_map);
    uint32_t depth = gmp_stack_capture(frames, GMP_ALLOC_STACK_DEPTH - in_python);
    memcpy(frames + depth, python, in_python * sizeof *python);
    depth += in_python;
    if (!depth)
        return 0;
    uint64_t hash = GMP_INTERNED_HASH_START; /* over the addresses */
    for (uint32_t i = 0; i < depth; i++)
        hash = gmp_interned_mix(hash, frames[i]);
    int claimed;
    uint32_t id = gmp_interned_find(&stacks, t, gmp_interned_hash_done(hash), &claimed);
    if (claimed) {
        stack_entry *e = &t[id - 1];
        memcpy(e->frames, frames, depth * sizeof *frames);
        e->depth = depth;
        __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
        gmp_interned_made(&stacks, id);
        gmp_stack_ring_note(id, frames, depth);
    }
    return id;
}

uint32_t gmp_stack_id_here(void)
{
    return stack_id(1);
}

uint32_t gmp_stack_id_in_tables_made(void)
{
    return stack_id(0);
}

uint32_t gmp_stack_lookup(uint32_t id, uint64_t *frames, uint32_t max, void *arg)
{
    (void)arg;
    stack_entry *t = gmp_interned_entries(&stacks, 0);
    if (!t || id == 0 || id > TABLE_SLOTS || !__atomic_load_n(&t[id - 1].ready, __ATOMIC_ACQUIRE))
        return 0;
    uint32_t depth = t[id - 1].depth < max ? t[id - 1].depth : max;
    memcpy(frames, t[id - 1].frames, depth * sizeof *frames);
    return depth;
}

void gmp_stack_foreach_known(void (*fn)(uint32_t id, const uint64_t *frames, uint32_t depth,
                                        void *arg),
                             void *arg)
{
    uint32_t n = gmp_interned_made_count(&stacks);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = gmp_interned_made_at(&stacks, k);
        uint64_t frames[GMP_ALLOC_STACK_DEPTH];
        uint32_t depth = id ? gmp_stack_lookup(id, frames, GMP_ALLOC_STACK_DEPTH, NULL) : 0;
        if (depth)
            fn(id, frames, depth, arg);
    }
}
