/*
 * next.c — the real function behind a hook, found without the dynamic
 * linker's lookup functions.  Every hook finds its real function here
 * (gmp_real_function): libc's allocator, the stderr, exit and wait hooks,
 * and the GPU families.
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
 * its first use in a thread, which may be right after malloc failed).
 * dl_iterate_phdr also lists the objects a program dlopen'ed RTLD_LOCAL,
 * where PyTorch and CuPy keep libcudart and libcuda: RTLD_NEXT would not
 * see those, the search here does.  An indirect function (IFUNC) needs its
 * resolver run: that, and any object we cannot read, falls back to dlsym.
 *
 * dl_iterate_phdr holds the loader's list lock while it walks, and fork
 * neither takes nor resets that lock: a thread forking while another walks
 * hands the child the lock held by a thread it does not have, and the
 * child's own first lookup (its first write, at exit) waits for ever.  So
 * every walk of the preload goes through gmp_each_object, and fork waits
 * for the walks under way (the atfork handlers below, which init.c
 * registers).  Walks do not exclude each other: a walk that waited on
 * another would turn a foreign dl_iterate_phdr callback that calls a hook
 * into a deadlock.
 */
#include "preload.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>

typedef struct next_search {
    const char *name;
    uint32_t gnu_hash, sysv_hash;
    uintptr_t self;   /* an address inside the preload (0: search every object) */
    int after_self;
    void *found;      /* NULL too when the next definition is an IFUNC */
    void *before;     /* the first definition before the preload (not an IFUNC) */
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

static int tables_at(uintptr_t base, const ElfW(Dyn) *dyn, object_tables *t)
{
    memset(t, 0, sizeof *t);
    t->base = base;
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

static int tables_of(const struct dl_phdr_info *info, object_tables *t)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return tables_at(info->dlpi_addr, dyn, t);
}

/* Symbol i defines the name (a function or data) at its default version:
 * 1, or 2 when it is an IFUNC (ours to leave to dlsym). */
static int defines(const object_tables *t, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &t->symtab[i];
    int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
    if (s->st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
        (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE &&
         type != STT_OBJECT) ||
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

/* Whether one of the object's loaded segments holds address. */
static int holds(const struct dl_phdr_info *info, uintptr_t address)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && address - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
            return 1;
    }
    return 0;
}

static next_search query(const char *name, uintptr_t self)
{
    return (next_search){.name = name,
                         .gnu_hash = gnu_hash_of(name),
                         .sysv_hash = sysv_hash_of(name),
                         .self = self,
                         .after_self = self == 0};
}

/* The address name is defined at in the object (not an IFUNC), or 0. */
static uintptr_t defined_in(const object_tables *t, const char *name)
{
    next_search q = query(name, 0);
    int kind = 0;
    uint32_t i = lookup(t, &q, &kind);
    return i && kind == 1 ? t->base + t->symtab[i].st_value : 0;
}

/* The loader's list of objects (its _r_debug), read from the loader's own
 * symbol table: it is mapped at AT_BASE, ELF header first (so the preload
 * needs no link to the loader). */
static const struct r_debug *loader_r_debug(void)
{
    uintptr_t base = (uintptr_t)getauxval(AT_BASE);
    if (!base)
        return NULL;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return NULL;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(base + ph[i].p_vaddr);
    object_tables t;
    return tables_at(base, dyn, &t) == 0 ? (const struct r_debug *)defined_in(&t, "_r_debug")
                                          : NULL;
}

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

/* glibc's own dl_iterate_phdr.  A sanitizer runtime preloaded after us
 * intercepts it, and our malloc runs while that runtime starts, before its
 * interceptor knows the real function (it would call NULL); so the real one
 * is read from libc's symbol table (the object that also defines
 * gnu_get_libc_version), found in the loader's list of objects.  Once, at
 * the first lookup: the first malloc, before any thread can dlopen. */
static iterate_fn iterate(void)
{
    static iterate_fn glibc_iterate; /* atomic */
    iterate_fn fn = __atomic_load_n(&glibc_iterate, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(fn != NULL))
        return fn;
    const struct r_debug *loader_list = loader_r_debug();
    for (const struct link_map *m = loader_list ? loader_list->r_map : NULL; m && !fn;
         m = m->l_next) {
        object_tables t;
        uintptr_t found;
        if (tables_at(m->l_addr, m->l_ld, &t) == 0 && defined_in(&t, "gnu_get_libc_version") &&
            (found = defined_in(&t, "dl_iterate_phdr")))
            fn = (iterate_fn)found;
    }
    if (!fn)
        fn = dl_iterate_phdr;
    __atomic_store_n(&glibc_iterate, fn, __ATOMIC_RELEASE);
    return fn;
}

static int search_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    next_search *q = arg;
    if (!q->after_self && holds(info, q->self)) {
        q->after_self = 1;
        return 0; /* we ourselves are not "next" */
    }
    if (!q->after_self && q->before)
        return 0;
    object_tables t;
    int kind = 0;
    if (tables_of(info, &t) < 0)
        return 0;
    uint32_t i = lookup(&t, q, &kind);
    if (!i)
        return 0;
    void *at = kind == 1 ? (void *)(t.base + t.symtab[i].st_value) : NULL;
    if (!q->after_self) {
        q->before = at;
        return 0;
    }
    q->found = at;
    return 1;
}

static unsigned walks_under_way, forks_under_way;
static __thread int walking __attribute__((tls_model("initial-exec")));

/* Until *word is 0, for a second at most: a foreign callback that holds
 * the loader's lock and calls a hook could otherwise make the fork and the
 * walk wait on each other; after the second, either goes on as it would
 * without the other (the child hang comes back, the program does not). */
static void wait_for_zero(const unsigned *word)
{
    for (int tries = 0; __atomic_load_n(word, __ATOMIC_SEQ_CST) && tries < 1100; tries++) {
        if (tries < 100) {
            sched_yield();
        } else {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
}

void gmp_each_object(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    if (walking) { /* a walk inside our own walk: counted already */
        iterate()(visit, arg);
        return;
    }
    /* the count before the fork check, the fork's mark before its check of
     * the count: one of the two sees the other */
    for (int tries = 0;; tries++) {
        __atomic_add_fetch(&walks_under_way, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&forks_under_way, __ATOMIC_SEQ_CST) || tries == 2)
            break;
        __atomic_sub_fetch(&walks_under_way, 1, __ATOMIC_SEQ_CST);
        wait_for_zero(&forks_under_way);
    }
    walking = 1;
    iterate()(visit, arg);
    walking = 0;
    __atomic_sub_fetch(&walks_under_way, 1, __ATOMIC_RELEASE);
}

void gmp_walks_fork_prepare(void)
{
    __atomic_add_fetch(&forks_under_way, 1, __ATOMIC_SEQ_CST);
    if (!walking) /* a fork from inside a walk's callback would wait for itself */
        wait_for_zero(&walks_under_way);
}

void gmp_walks_fork_parent(void)
{
    __atomic_sub_fetch(&forks_under_way, 1, __ATOMIC_RELEASE);
}

void gmp_walks_fork_child(void)
{
    /* the child has only the forking thread: no walk, no other fork */
    __atomic_store_n(&walks_under_way, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&forks_under_way, 0, __ATOMIC_RELAXED);
    walking = 0;
}

static next_search search(const char *name, uintptr_t self)
{
    next_search q = query(name, self);
    gmp_each_object(search_one, &q);
    return q;
}

/* After the preload, else what dlsym(RTLD_NEXT) finds (an IFUNC), else
 * before it: a preload that a library loaded itself (CUPTI's injection
 * path, CUDA_INJECTION64_PATH) comes after the libraries it records, and
 * interposes on nothing, so their functions are the real ones. */
void *gmp_real_function(const char *name)
{
    next_search q = search(name, (uintptr_t)&gmp_real_function);
    if (q.found)
        return q.found;
    GMP_IN_HOOK_SCOPE(); /* what dlsym allocates is not the program's */
    void *fn = gmp_dlsym_real(RTLD_NEXT, name);
    return fn ? fn : q.before;
}

void *gmp_global_symbol(const char *name)
{
    return search(name, 0).found;
}

typedef struct base_search {
    uintptr_t address, base;
} base_search;

static int find_base(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    base_search *b = arg;
    if (!holds(info, b->address))
        return 0;
    b->base = info->dlpi_addr + 1;
    return 1;
}

uintptr_t gmp_object_of(const void *address)
{
    base_search b = {(uintptr_t)address, 0};
    if (address)
        gmp_each_object(find_base, &b);
    return b.base;
}

#if defined(__x86_64__)
/* glibc's struct dl_find_object on x86-64 (2.35), as its ABI fixes it,
 * so the preload builds and loads where glibc is older */
typedef struct found_object {
    unsigned long long flags;
    void *map_start, *map_end;
    struct link_map *link_map;
    void *eh_frame; /* the object's PT_GNU_EH_FRAME, or NULL */
    unsigned long long reserved[7];
} found_object;
typedef int (*find_object_fn)(void *pc, found_object *out);

static find_object_fn find_object; /* atomic */
static int find_object_looked;     /* atomic */

/* glibc's _dl_find_object, looked up once in the symbol tables (no
 * allocation); NULL before 2.35 */
static find_object_fn glibc_find_object(void)
{
    if (!__atomic_load_n(&find_object_looked, __ATOMIC_ACQUIRE)) {
        find_object_fn f;
        *(void **)&f = gmp_global_symbol("_dl_find_object");
        __atomic_store_n(&find_object, f, __ATOMIC_RELEASE);
        __atomic_store_n(&find_object_looked, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&find_object, __ATOMIC_ACQUIRE);
}

int gmp_find_object(const void *pc, gmp_found_object *out)
{
    find_object_fn find = glibc_find_object();
    found_object o;
    if (!find)
        return -1;
    if (find((void *)pc, &o) != 0)
        return 1;
    out->start = (uintptr_t)o.map_start;
    out->end = (uintptr_t)o.map_end;
    out->eh_frame = o.eh_frame;
    out->path = o.link_map && o.link_map->l_name ? o.link_map->l_name : "";
    return 0;
}
#else
int gmp_find_object(const void *pc, gmp_found_object *out)
{
    (void)pc;
    (void)out;
    return -1;
}
#endif
