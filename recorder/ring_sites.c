/*
 * ring_sites.c — the ring's site records: the allocation stacks its events
 * name, the objects those stacks pass through and the Python frames they
 * hold.  The process keeps its
 * own tables of both (the preload's); each entry is copied here too, so
 * that when the process is killed without a word (SIGKILL, the kernel's
 * OOM killer) the bundle recovered from its ring names sites as the
 * process's own bundle would, instead of bare stack ids.
 *
 * Writers claim a record with one fetch-add and publish it with a release
 * store of its id or ready flag, written last; they never wait.  Readers run
 * in another process, often after the writer died mid-record, and often on
 * a file another user could have written: every count is clamped, every
 * string copied bounded, and an unpublished record is skipped.
 *
 * A process may name more stacks and Python frames than the regions hold.
 * The first half of each is kept for the first sites (a model's weights,
 * buffers made at start-up and held to the end); past the region's end
 * the second half is written over in turn, so the newest sites, where
 * memory grew just before a kill, are named too.  A record written over
 * has its id cleared first, and a reader checks the id again after its
 * copy: a record that changed under it is skipped.
 */
#include "ring.h"

#include <string.h>

/* The record claim number i writes in a region of n records; -1 none. */
static int64_t record_at(uint64_t i, uint32_t n)
{
    if (i < n)
        return (int64_t)i;
    uint32_t kept = n / 2, turn = n - kept;
    return turn ? (int64_t)(kept + (i - n) % turn) : -1;
}

/* A record about to be written over (claim i past the region's n) is
 * unpublished first, before anything of it changes. */
static void unpublish(uint32_t *id, uint64_t i, uint32_t n)
{
    if (i >= n) {
        __atomic_store_n(id, 0, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }
}

/* After a reader's copy of a record published as id: 1 when it is still
 * that id, so the copy is whole. */
static int still(const uint32_t *record_id, uint32_t id)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(record_id, __ATOMIC_RELAXED) == id;
}

int gmp_ring_add_stack(gmp_ring *ring, uint32_t id, const uint64_t *frames, uint32_t depth)
{
    if (!ring || !ring->hdr || id == 0 || depth == 0)
        return -1;
    uint64_t i = __atomic_fetch_add(&ring->hdr->stacks_used, 1, __ATOMIC_RELAXED);
    int64_t at = record_at(i, ring->stack_records);
    if (at < 0)
        return -1;
    gmp_ring_stack_record *r = &ring->stacks[at];
    unpublish(&r->id, i, ring->stack_records);
    r->depth = depth < GMP_RING_STACK_DEPTH ? depth : GMP_RING_STACK_DEPTH;
    memcpy(r->frames, frames, r->depth * sizeof *frames);
    __atomic_store_n(&r->id, id, __ATOMIC_RELEASE);
    return 0;
}

int gmp_ring_add_module(gmp_ring *ring, const gmp_ring_module_record *module)
{
    if (!ring || !ring->hdr)
        return -1;
    uint64_t i = __atomic_fetch_add(&ring->hdr->modules_used, 1, __ATOMIC_RELAXED);
    if (i >= ring->module_records)
        return -1;
    gmp_ring_module_record *r = &ring->modules[i];
    r->start = module->start;
    r->end = module->end;
    r->base = module->base;
    memcpy(r->build_id, module->build_id, sizeof r->build_id);
    memcpy(r->path, module->path, sizeof r->path);
    __atomic_store_n(&r->ready, 1, __ATOMIC_RELEASE);
    return 0;
}

static uint64_t used(const uint64_t *counter, uint64_t max)
{
    uint64_t n = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    return n < max ? n : max;
}

uint32_t gmp_ring_stack_lookup(uint32_t id, uint64_t *frames, uint32_t max, void *arg)
{
    const gmp_ring *ring = arg;
    if (!ring || !ring->hdr || id == 0)
        return 0;
    uint64_t n = used(&ring->hdr->stacks_used, ring->stack_records);
    for (uint64_t i = 0; i < n; i++) {
        const gmp_ring_stack_record *r = &ring->stacks[i];
        if (__atomic_load_n(&r->id, __ATOMIC_ACQUIRE) != id)
            continue;
        uint32_t depth = r->depth;
        if (depth > GMP_RING_STACK_DEPTH)
            depth = GMP_RING_STACK_DEPTH;
        if (depth > max)
            depth = max;
        memcpy(frames, r->frames, depth * sizeof *frames);
        if (!still(&r->id, id))
            continue;
        return depth;
    }
    return 0;
}

void gmp_ring_foreach_module(const gmp_ring *ring,
                             void (*fn)(const gmp_ring_module_record *m, void *arg), void *arg)
{
    if (!ring || !ring->hdr)
        return;
    uint64_t n = used(&ring->hdr->modules_used, ring->module_records);
    for (uint64_t i = 0; i < n; i++) {
        const gmp_ring_module_record *r = &ring->modules[i];
        if (!__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE))
            continue;
        gmp_ring_module_record copy = *r;
        copy.path[sizeof copy.path - 1] = '\0';
        copy.build_id[sizeof copy.build_id - 1] = '\0';
        if (strspn(copy.build_id, "0123456789abcdef") != strlen(copy.build_id))
            copy.build_id[0] = '\0';
        if (copy.path[0] && copy.end > copy.start && copy.base <= copy.start)
            fn(&copy, arg);
    }
}

int gmp_ring_add_python(gmp_ring *ring, uint32_t id, const gmp_python_frame *frame)
{
    if (!ring || !ring->hdr || id == 0)
        return -1;
    uint64_t i = __atomic_fetch_add(&ring->hdr->python_used, 1, __ATOMIC_RELAXED);
    int64_t at = record_at(i, ring->python_records);
    if (at < 0)
        return -1;
    gmp_ring_python_record *r = &ring->python[at];
    unpublish(&r->id, i, ring->python_records);
    r->line = frame->line;
    size_t n = strlen(frame->file);
    if (n < sizeof r->file) { /* else its end, which names the module */
        memcpy(r->file, frame->file, n + 1);
    } else {
        memcpy(r->file, "...", 3);
        memcpy(r->file + 3, frame->file + n - (sizeof r->file - 4), sizeof r->file - 4);
        r->file[sizeof r->file - 1] = '\0';
    }
    gmp_strlcpy(r->function, frame->function, sizeof r->function);
    __atomic_store_n(&r->id, id, __ATOMIC_RELEASE);
    return 0;
}

int gmp_ring_python_lookup(uint32_t id, gmp_python_frame *out, void *arg)
{
    const gmp_ring *ring = arg;
    if (!ring || !ring->hdr || id == 0)
        return -1;
    uint64_t n = used(&ring->hdr->python_used, ring->python_records);
    for (uint64_t i = 0; i < n; i++) {
        const gmp_ring_python_record *r = &ring->python[i];
        if (__atomic_load_n(&r->id, __ATOMIC_ACQUIRE) != id)
            continue;
        memset(out, 0, sizeof *out);
        memcpy(out->file, r->file, sizeof r->file);
        out->file[sizeof r->file - 1] = '\0';
        memcpy(out->function, r->function, sizeof r->function);
        out->function[sizeof r->function - 1] = '\0';
        out->line = r->line;
        if (!still(&r->id, id))
            continue;
        return 0;
    }
    return -1;
}
