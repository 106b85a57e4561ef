/*
 * stack_ring.c — allocation stacks that outlive the process.  A bundle the
 * process writes itself reads its stack table and /proc/self/maps; a
 * process killed without a word (SIGKILL, the kernel's OOM killer) leaves
 * only its ring.  So each new stack of the table (stack.c), the loaded
 * object each of its frames lies in, and each Python frame named
 * (python_frames.c) are also copied into the ring's site records, and
 * `gmp-inspect recover` names sites from them as the process would have.
 *
 * Objects are found with dl_iterate_phdr, only when a new stack has a frame
 * outside every object already known: a few times per process, in a call
 * that has just unwound its stack (libgcc's FDE lookup takes the same
 * loader lock), never in a signal handler.  The ring may be made after the first stacks (the
 * event that carries a stack makes it), and a forked child makes its own:
 * the recorder calls gmp_stack_ring_ready on each new ring, which copies
 * everything known so far.  A stack or object added while that copy runs
 * is copied by one side or both (sequentially consistent fences on either
 * side); a second copy is harmless, the reader takes the first.  So does
 * the rank that torch.multiprocessing.spawn gave the process, which its
 * Python frames tell (python_frames.c): a killed rank's bundle names it.
 */
#include "preload.h"
#include "recorder.h"
#include "ring.h"

#include <link.h>
#include <string.h>
#include <unistd.h>

#define MODULE_SLOTS 256

static gmp_ring_module_record *modules; /* atomic pointer, MODULE_SLOTS */
static int modules_state;               /* atomic: gmp_lazy_table's */
static uint32_t modules_used;           /* atomic: slots claimed */

static uint32_t known_modules(void)
{
    uint32_t n = __atomic_load_n(&modules_used, __ATOMIC_ACQUIRE);
    return n < MODULE_SLOTS ? n : MODULE_SLOTS;
}

static int is_known(const gmp_ring_module_record *t, uint64_t at)
{
    for (uint32_t i = 0, n = known_modules(); i < n; i++)
        if (__atomic_load_n(&t[i].ready, __ATOMIC_ACQUIRE) && at >= t[i].start && at < t[i].end)
            return 1;
    return 0;
}

typedef struct object_query {
    uint64_t at;
    gmp_ring_module_record found;
    int hit;
} object_query;

int gmp_object_extent(const struct dl_phdr_info *info, uint64_t at, uint64_t *lo,
                      uint64_t *hi)
{
    int holds = 0;
    *lo = UINT64_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        *lo = start < *lo ? start : *lo;
        *hi = end > *hi ? end : *hi;
        holds |= at >= start && at < end;
    }
    return holds;
}

/* dl_iterate_phdr's visitor: the object whose loaded segments hold q->at. */
static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    object_query *q = arg;
    uint64_t lo, hi;
    if (!gmp_object_extent(info, q->at, &lo, &hi))
        return 0;
    gmp_ring_module_record *m = &q->found;
    m->start = lo;
    m->end = hi;
    m->base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum && !m->build_id[0]; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t at = info->dlpi_addr + ph->p_vaddr, stop = at + ph->p_memsz;
        if (ph->p_type == PT_NOTE && at >= lo && stop <= hi && stop >= at)
            gmp_elf_build_id(at, stop, m->build_id, sizeof m->build_id);
    }
    const char *name = info->dlpi_name;
    if (name && name[0] == '/') {
        gmp_strlcpy(m->path, name, sizeof m->path);
    } else if (!name || !name[0]) { /* the program itself */
        ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[n > 0 ? n : 0] = '\0';
    }
    q->hit = m->path[0] != '\0'; /* the vDSO has no file to name */
    return 1;
}

static void copy_module(const gmp_ring_module_record *m)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    if (ring)
        gmp_ring_add_module(ring, m);
}

/* The object at address `at` into the table (and the ring), once. */
static void note_object(gmp_ring_module_record *t, uint64_t at)
{
    if (is_known(t, at))
        return;
    object_query q = {.at = at};
    gmp_each_object(find_object, &q);
    if (!q.hit)
        return;
    uint32_t i = __atomic_fetch_add(&modules_used, 1, __ATOMIC_RELAXED);
    if (i >= MODULE_SLOTS)
        return;
    /* every field but ready, which a reader may be loading (the slot is
     * counted already): it is written once, by the store that publishes */
    gmp_ring_module_record *slot = &t[i];
    slot->start = q.found.start;
    slot->end = q.found.end;
    slot->base = q.found.base;
    memcpy(slot->build_id, q.found.build_id, sizeof slot->build_id);
    memcpy(slot->path, q.found.path, sizeof slot->path);
    __atomic_store_n(&slot->ready, 1, __ATOMIC_RELEASE);
    copy_module(slot);
}

void gmp_stack_ring_note(uint32_t id, const uint64_t *frames, uint32_t depth)
{
    gmp_ring_module_record *t =
        gmp_lazy_table((void **)&modules, &modules_state, sizeof *modules * MODULE_SLOTS);
    {
        GMP_IN_HOOK_SCOPE();
        for (uint32_t i = 0; t && i < depth; i++)
            if (!(frames[i] & GMP_PYTHON_FRAME_TAG))
                note_object(t, frames[i]);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    if (ring)
        gmp_ring_add_stack(ring, id, frames, depth);
}

void gmp_python_frame_ring_note(uint32_t id, const gmp_python_frame *frame)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    if (ring)
        gmp_ring_add_python(ring, id, frame);
}

void gmp_spawn_index_note(long index)
{
    gmp_ring *ring = gmp_recorder_ring(gmp_pl.rec);
    gmp_run_rank_learned(index, ring ? ring->hdr->run_vars : NULL,
                         ring ? sizeof ring->hdr->run_vars : 0);
}

static void copy_stack(uint32_t id, const uint64_t *frames, uint32_t depth, void *ring)
{
    gmp_ring_add_stack(ring, id, frames, depth);
}

static void copy_python(uint32_t id, const gmp_python_frame *frame, void *ring)
{
    gmp_ring_add_python(ring, id, frame);
}

void gmp_stack_ring_ready(gmp_ring *ring)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gmp_ring_module_record *t = __atomic_load_n(&modules, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0, n = t ? known_modules() : 0; i < n; i++)
        if (__atomic_load_n(&t[i].ready, __ATOMIC_ACQUIRE))
            gmp_ring_add_module(ring, &t[i]);
    gmp_python_frames_foreach_known(copy_python, ring);
    gmp_stack_foreach_known(copy_stack, ring);
    gmp_run_rank_to_ring(ring->hdr->run_vars, sizeof ring->hdr->run_vars);
}
