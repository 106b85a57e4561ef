/*
 * next.c — the real function behind a hook, found without the dynamic
 * linker's lookup functions.
 *
 * A hook finds its real function the first time it runs.  dlsym would do,
 * but every dl* call frees the string the last dlerror() returned, and a
 * program that writes that string (fprintf(stderr, "%s\n", dlerror()), or
 * bash's `enable -f` error) would then print freed memory, because our
 * fprintf hook looked its real one up in between.  So the lookup here reads
 * the objects' own symbol tables: dl_iterate_phdr lists the objects in
 * search order; the first after the preload whose dynamic symbol table
 * (GNU or SysV hash) defines the name, at its default version, is the one
 * RTLD_NEXT would give (or, from the first object, what RTLD_DEFAULT
 * would: CPython's functions, without the allocation a dl* call makes on
 * its first use in a thread, which may be right after malloc failed).  An
 * indirect function (IFUNC) needs its resolver
 * run: that, and any object we cannot read, returns NULL, and the caller
 * falls back to dlsym.
 */
#include "preload.h"

#include <elf.h>
#include <link.h>
#include <string.h>

typedef struct next_search {
    const char *name;
    uint32_t gnu_hash, sysv_hash;
    uintptr_t self;   /* an address inside the preload (0: search every object) */
    int after_self;
    void *found;      /* NULL too when the next definition is an IFUNC */
} next_search;

static uint32_t gnu_hash_of(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash_of(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        uint32_t g = h & 0xf0000000u;
        h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

typedef struct object_tables {
    uintptr_t base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Half) *versym;
    const uint32_t *gnu_hash;
    const uint32_t *sysv_hash;
} object_tables;

/* A dynamic entry's address: relocated by the loader on most objects, an
 * offset from the base on others (the vDSO). */
static uintptr_t dyn_address(uintptr_t base, ElfW(Addr) value)
{
    return value < base ? base + value : value;
}

static int tables_of(const struct dl_phdr_info *info, object_tables *t)
{
    memset(t, 0, sizeof *t);
    t->base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return -1;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t at = dyn_address(t->base, dyn->d_un.d_ptr);
        switch (dyn->d_tag) {
        case DT_SYMTAB: t->symtab = (const ElfW(Sym) *)at; break;
        case DT_STRTAB: t->strtab = (const char *)at; break;
        case DT_VERSYM: t->versym = (const ElfW(Half) *)at; break;
        case DT_GNU_HASH: t->gnu_hash = (const uint32_t *)at; break;
        case DT_HASH: t->sysv_hash = (const uint32_t *)at; break;
        default: break;
        }
    }
    return t->symtab && t->strtab && (t->gnu_hash || t->sysv_hash) ? 0 : -1;
}

/* Symbol i defines the name at its default version: 1, or 2 when it is an
 * IFUNC (ours to leave to dlsym). */
static int defines(const object_tables *t, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &t->symtab[i];
    int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
    if (s->st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
        (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) ||
        (t->versym && (t->versym[i] & 0x8000)) || strcmp(t->strtab + s->st_name, name))
        return 0;
    return type == STT_GNU_IFUNC ? 2 : 1;
}

/* Symbol index of name in the object, 0 when absent; *kind as defines. */
static uint32_t lookup(const object_tables *t, const next_search *q, int *kind)
{
    if (t->gnu_hash) {
        uint32_t nbuckets = t->gnu_hash[0], symoffset = t->gnu_hash[1];
        uint32_t bloom_size = t->gnu_hash[2], bloom_shift = t->gnu_hash[3];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(t->gnu_hash + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        const unsigned bits = sizeof(ElfW(Addr)) * 8;
        if (!nbuckets || !bloom_size)
            return 0;
        ElfW(Addr) word = bloom[(q->gnu_hash / bits) % bloom_size];
        ElfW(Addr) mask = ((ElfW(Addr))1 << (q->gnu_hash % bits)) |
                          ((ElfW(Addr))1 << ((q->gnu_hash >> bloom_shift) % bits));
        if ((word & mask) != mask)
            return 0;
        uint32_t i = buckets[q->gnu_hash % nbuckets];
        if (i < symoffset)
            return 0;
        for (;; i++) {
            uint32_t h = chain[i - symoffset];
            if ((h | 1) == (q->gnu_hash | 1) && (*kind = defines(t, i, q->name)))
                return i;
            if (h & 1)
                return 0;
        }
    }
    uint32_t nbucket = t->sysv_hash[0];
    const uint32_t *bucket = t->sysv_hash + 2, *chain = bucket + nbucket;
    if (!nbucket)
        return 0;
    for (uint32_t i = bucket[q->sysv_hash % nbucket]; i; i = chain[i])
        if ((*kind = defines(t, i, q->name)))
            return i;
    return 0;
}

static int search_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    next_search *q = arg;
    if (!q->after_self) {
        for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
            if (ph->p_type == PT_LOAD &&
                q->self - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
                q->after_self = 1;
        }
        return 0; /* the objects before us, and we ourselves, are not "next" */
    }
    object_tables t;
    int kind = 0;
    if (tables_of(info, &t) < 0)
        return 0;
    uint32_t i = lookup(&t, q, &kind);
    if (!i)
        return 0;
    if (kind == 1)
        q->found = (void *)(t.base + t.symtab[i].st_value);
    return 1;
}

static void *search(const char *name, uintptr_t self)
{
    next_search q = {.name = name,
                     .gnu_hash = gnu_hash_of(name),
                     .sysv_hash = sysv_hash_of(name),
                     .self = self,
                     .after_self = self == 0};
    dl_iterate_phdr(search_one, &q);
    return q.found;
}

void *gmp_next_symbol(const char *name)
{
    return search(name, (uintptr_t)&gmp_next_symbol);
}

void *gmp_global_symbol(const char *name)
{
    return search(name, 0);
}
