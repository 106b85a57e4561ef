/*
 * stack.c — the return addresses of a failing call, for its bundle.
 *
 * Captured only when an allocation fails (never on the hot path), with
 * glibc's backtrace(); its first call loads libgcc's unwinder, which is why
 * this runs in the failing hook and not in a signal handler.  Frames inside
 * the preload itself are left out: the first address is the program's call.
 */
#include "preload.h"

#include <execinfo.h>
#include <link.h>

static uintptr_t self_lo, self_hi; /* the preload's own mapped range */

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t probe = (uintptr_t)arg, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        lo = start < lo ? start : lo;
        hi = end > hi ? end : hi;
    }
    if (probe < lo || probe >= hi)
        return 0;
    self_lo = lo;
    self_hi = hi;
    return 1;
}

uint32_t gmp_stack_capture(uint64_t *out, uint32_t max)
{
    enum { SKIPPABLE = 16 };
    void *frames[GMP_STACK_MAX + SKIPPABLE];
    gmp_in_hook++; /* the unwinder's first load allocates */
    if (!self_hi)
        dl_iterate_phdr(find_self, (void *)(uintptr_t)gmp_stack_capture);
    int n = backtrace(frames, (int)(sizeof frames / sizeof *frames));
    gmp_in_hook--;
    uint32_t depth = 0;
    for (int i = 0; i < n && depth < max && depth < GMP_STACK_MAX; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        if (depth == 0 && a >= self_lo && a < self_hi)
            continue; /* our own frames, innermost ones only */
        out[depth++] = a;
    }
    return depth;
}
