/*
 * modules.c — the module map of the calling process, for modules.json: each
 * mapped ELF object's path, load bias and GNU build-id, so that the return
 * addresses in a bundle can be symbolised later, on another machine
 * (addr2line -e PATH ADDRESS-BASE, or a debuginfod lookup by build-id).
 * A process that is gone has only what its ring recorded: the objects its
 * stacks pass through, written the same way with their ends.
 *
 * Runs on the emergency path (a fatal signal): /proc/self/maps is read with
 * read(2) into the caller's buffer and the ELF headers and notes are read in
 * place from the mapping, so no lock (dl_iterate_phdr takes the loader's)
 * and no allocation.
 */
#include "bundle.h"
#include "recorder.h"

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_hex(const char **s, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = *s;
    int digits = 0;
    for (;; p++, digits++) {
        char c = *p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v << 4 | (uint64_t)d;
    }
    *s = p;
    *out = v;
    return digits > 0;
}

/* The reads below are of other objects' mappings, which ThreadSanitizer
 * neither knows nor always shadows (it faults on some): it is kept out of
 * them, and out of memcmp, which it intercepts. */
#define NOT_FOR_TSAN __attribute__((no_sanitize("thread")))

NOT_FOR_TSAN static int same_bytes(uint64_t at, const char *want, size_t n)
{
    const volatile unsigned char *p = (const volatile unsigned char *)(uintptr_t)at;
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)want[i])
            return 0;
    return 1;
}

NOT_FOR_TSAN void gmp_elf_build_id(uint64_t at, uint64_t stop, char *out, size_t cap)
{
    out[0] = '\0';
    while (at + sizeof(Elf64_Nhdr) <= stop) {
        const Elf64_Nhdr *n = (const Elf64_Nhdr *)(uintptr_t)at;
        uint64_t name = at + sizeof *n, desc = name + ((n->n_namesz + 3) & ~3u);
        uint64_t next = desc + ((n->n_descsz + 3) & ~3u);
        if (next > stop || next <= at)
            return;
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && same_bytes(name, "GNU", 4) &&
            n->n_descsz * 2 < cap) {
            static const char hex[] = "0123456789abcdef";
            const unsigned char *d = (const unsigned char *)(uintptr_t)desc;
            for (uint32_t k = 0; k < n->n_descsz; k++) {
                out[2 * k] = hex[d[k] >> 4];
                out[2 * k + 1] = hex[d[k] & 15];
            }
            out[2 * n->n_descsz] = '\0';
            return;
        }
        at = next;
    }
}

/* The GNU build-id in the notes of the object mapped at [start, end), as
 * hex into out (empty when there is none); its load bias in *bias. */
NOT_FOR_TSAN static void read_elf(uint64_t start, uint64_t end, uint64_t *bias, char *out,
                                  size_t cap)
{
    out[0] = '\0';
    *bias = start;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(uintptr_t)start;
    if (end - start < sizeof *eh || !same_bytes(start, ELFMAG, SELFMAG) ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > end - start)
        return;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(uintptr_t)(start + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
            *bias = start - (ph[i].p_vaddr & ~(uint64_t)0xfff);
            break;
        }
    for (int i = 0; i < eh->e_phnum && !out[0]; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        uint64_t at = *bias + ph[i].p_vaddr, stop = at + ph[i].p_memsz;
        if (at < start || stop > end || stop < at)
            continue; /* only notes inside this readable mapping */
        gmp_elf_build_id(at, stop, out, cap);
    }
}

/* One object of modules.json; end 0: not known (the map's first mapping
 * of an object does not say where its last one ends). */
static void module_row(gmp_jw *w, const char *path, uint64_t base, const char *build_id,
                       uint64_t end)
{
    gmp_jw_next_line(w);
    gmp_jw_obj_begin(w);
    gmp_jw_kstr(w, "path", path);
    gmp_jw_key(w, "base");
    gmp_jw_hex(w, base);
    gmp_jw_kstr(w, "build_id", build_id[0] ? build_id : NULL);
    if (end) {
        gmp_jw_key(w, "end");
        gmp_jw_hex(w, end);
    }
    gmp_jw_obj_end(w);
}

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
static void module_line(gmp_jw *w, const char *line)
{
    uint64_t start, end, offset;
    const char *p = line;
    if (!parse_hex(&p, &start) || *p++ != '-' || !parse_hex(&p, &end) || *p++ != ' ')
        return;
    /* Objects are mapped private; a shared mapping (our ring, a program's
     * data file) may be written or truncated while we read its first bytes. */
    if (p[0] != 'r' || !p[1] || !p[2] || p[3] != 'p' || p[4] != ' ')
        return;
    p += 5;
    if (!parse_hex(&p, &offset) || offset != 0)
        return; /* the object's first mapping holds its ELF header */
    const char *path = strchr(p, '/');
    if (!path || end <= start)
        return;
    uint64_t bias;
    char build_id[129];
    read_elf(start, end, &bias, build_id, sizeof build_id);
    if (bias == start && !same_bytes(start, ELFMAG, SELFMAG))
        return; /* a mapped data file, not an object */
    module_row(w, path, bias, build_id, 0);
}

void gmp_maps_foreach(char *buf, size_t cap, void (*fn)(const char *line, void *arg), void *arg)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    size_t have = 0;
    while (fd >= 0) {
        ssize_t n = read(fd, buf + have, cap - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
            *nl = '\0';
            fn(line, arg);
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == cap - 1)
            have = 0; /* a line longer than the buffer: skipped */
    }
    if (fd >= 0)
        close(fd);
}

typedef struct object_at {
    uintptr_t addr;
    char *out;
    size_t cap;
} object_at;

static void holds(const char *line, void *arg)
{
    object_at *o = arg;
    char *end;
    uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
    uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, NULL, 16) : 0;
    const char *path = strchr(line, '/');
    if (o->addr >= lo && o->addr < hi && path)
        gmp_strlcpy(o->out, path, o->cap);
}

void gmp_maps_object_at(const void *addr, char *buf, size_t buf_cap, char *out, size_t cap)
{
    object_at o = {(uintptr_t)addr, out, cap};
    out[0] = '\0';
    if (addr)
        gmp_maps_foreach(buf, buf_cap, holds, &o);
}

static void module_line_of(const char *line, void *w)
{
    module_line(w, line);
}

void gmp_modules_write(gmp_jw *w, char *buf, size_t cap)
{
    gmp_jw_arr_begin(w);
    gmp_maps_foreach(buf, cap, module_line_of, w);
    gmp_jw_space(w, "\n");
    gmp_jw_arr_end(w);
}

static void ring_module_row(const gmp_ring_module_record *m, void *w)
{
    module_row(w, m->path, m->base, m->build_id, m->end);
}

void gmp_modules_write_from_ring(gmp_jw *w, const gmp_ring *ring)
{
    gmp_jw_arr_begin(w);
    gmp_ring_foreach_module(ring, ring_module_row, w);
    gmp_jw_space(w, "\n");
    gmp_jw_arr_end(w);
}
