/*
 * eh_frame_hdr.c — the FDE that may cover an address, found in the sorted
 * table the linker leaves in each object's .eh_frame_hdr (its
 * PT_GNU_EH_FRAME segment), without libgcc.  unwind.c's slow walk asks
 * here first.  libgcc's _Unwind_Find_FDE searches the same tables, but
 * reaching it means loading libgcc_s, a dlopen that maps and allocates:
 * where an allocation has just failed because RLIMIT_AS leaves no address
 * space, that dlopen fails too, and the failed call's stack, the first
 * the process walked, came out empty (Guile under `ulimit -v`, one run in
 * twenty).  Here nothing is mapped or allocated: the object that holds the
 * address is found by glibc's _dl_find_object (2.35 on, lock-free) or a
 * walk of the loaded objects, then its table is searched.  What is not in
 * such a table (frames a JIT registered with libgcc, a table in another
 * encoding) is left to libgcc; whether the FDE found covers the address
 * is cfi.c's to check, as it reads the FDE anyway.
 */
#include "preload.h"

#if defined(__x86_64__)

#include <link.h>
#include <string.h>

enum {
    HDR_VERSION = 1,
    PE_OMIT = 0xff,
    PE_DATAREL_SDATA4 = 0x3b, /* the table's encoding from every linker of this platform */
};

typedef struct header_search {
    uintptr_t pc;
    const uint8_t *header;
} header_search;

static int header_of_holder(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    header_search *s = arg;
    uint64_t lo, hi;
    if (!gmp_object_extent(info, s->pc, &lo, &hi))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
            s->header = (const uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return 1;
}

/* The .eh_frame_hdr of the object that holds pc; NULL when none does
 * (JIT code) or it has none. */
static const uint8_t *header_of(uintptr_t pc)
{
    gmp_found_object o;
    int found = gmp_find_object((const void *)pc, &o);
    if (found >= 0)
        return found == 0 ? o.eh_frame : NULL;
    header_search s = {pc, NULL};
    gmp_each_object(header_of_holder, &s);
    return s.header;
}

/* A value of the header before its table (eh_frame_ptr, fde_count): 4 or
 * 8 bytes, absolute, relative to itself or to the header; 0 on another. */
static int header_value(const uint8_t **at, uint8_t enc, const uint8_t *header, uint64_t *out)
{
    uintptr_t here = (uintptr_t)*at;
    uint64_t v;
    uint32_t u32;
    int32_t s32;
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        memcpy(&v, *at, 8);
        *at += 8;
        break;
    case 0x03: /* udata4 */
        memcpy(&u32, *at, 4);
        v = u32;
        *at += 4;
        break;
    case 0x0b: /* sdata4 */
        memcpy(&s32, *at, 4);
        v = (uint64_t)(int64_t)s32;
        *at += 4;
        break;
    default:
        return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += here; break;                /* pcrel */
    case 0x30: v += (uintptr_t)header; break;   /* datarel: to the header */
    default: return 0;
    }
    *out = v;
    return 1;
}

const void *gmp_fde_in_tables(void *pc, gmp_eh_bases *bases)
{
    const uint8_t *header = header_of((uintptr_t)pc);
    if (!header || header[0] != HDR_VERSION || header[2] == PE_OMIT ||
        header[3] != PE_DATAREL_SDATA4)
        return NULL;
    const uint8_t *at = header + 4;
    uint64_t eh_frame, count;
    if (!header_value(&at, header[1], header, &eh_frame) ||
        !header_value(&at, header[2], header, &count) || count == 0 || count >= (1u << 28))
        return NULL;
    /* pairs (the function's start, its FDE), sorted by start, each an
     * int32 from the header: the last whose start is at or below pc */
    uintptr_t want = (uintptr_t)pc, start = 0;
    size_t lo = 0, hi = (size_t)count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int32_t rel;
        memcpy(&rel, at + mid * 8, 4);
        if ((uintptr_t)header + (intptr_t)rel <= want)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL; /* below the first function */
    int32_t rel_start, rel_fde;
    memcpy(&rel_start, at + (lo - 1) * 8, 4);
    memcpy(&rel_fde, at + (lo - 1) * 8 + 4, 4);
    start = (uintptr_t)header + (intptr_t)rel_start;
    /* what libgcc gives on this platform: no text or data base */
    bases->tbase = NULL;
    bases->dbase = NULL;
    bases->func = (void *)start;
    return header + rel_fde;
}

#endif
