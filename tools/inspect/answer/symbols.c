/*
 * symbols.c — an address in a program or library named as its function,
 * source file and line, with elfutils' libdw, for show's allocation sites
 * and export's frames.  The path comes from a bundle, so only a regular
 * file of this machine, named absolutely and outside the bundle, goes to
 * libdw (never a FIFO or a device that would block or never end, nor an
 * ELF the bundle's author shipped inside it for libdw's parser).  Each ELF
 * is opened once and kept (up to MAX_MODULES): a snapshot names thousands
 * of frames in a few libraries; and each answer is kept, by module and
 * offset: triage asks the same sites of thousands of bundles.  A C++ name
 * is given as C++ (c10::alloc_cpu(unsigned long), not _ZN3c109alloc_cpuEm)
 * and a Rust name as Rust (rust_oom::main, not _RNvCs..._8rust_oom4main),
 * by libiberty's demanglers (linked in statically).
 *
 * An optimised build inlines: the address's symbol is the function the
 * code was inlined into, its line the inlined code's (std's alloc.rs in
 * rust_oom::main).  So the name and line go together: of the inlined
 * functions the address lies in (DWARF's inlined subroutines, innermost
 * first), the first that is not a runtime's allocation machinery (std::,
 * alloc::, a standard library's source), at its line; where all of them
 * are, the function they were inlined into, at the line that called them.
 */
#include "answer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MODULES 32

typedef struct module_cache {
    char path[PATH_MAX];
    Dwfl *dwfl;        /* NULL: libdw could not read it */
    Dwfl_Module *mod;
    Dwarf_Addr bias;
} module_cache;

static module_cache cache[MAX_MODULES];
static int cached;
/* triage's reader threads (bundle_batch.c) name sites at once: one at a
 * time through the caches and libdw */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int inside(int dirfd, const char *path)
{
    struct stat dir, st;
    char real[PATH_MAX];
    if (dirfd < 0)
        return 0; /* a live ring, the caller's own: no bundle to be inside */
    if (fstat(dirfd, &dir) != 0 || !realpath(path, real))
        return 1; /* unsure: treated as inside */
    for (char *slash; (slash = strrchr(real, '/'));) {
        *(slash == real ? slash + 1 : slash) = '\0';
        if (stat(real, &st) == 0 && st.st_dev == dir.st_dev && st.st_ino == dir.st_ino)
            return 1;
        if (slash == real)
            break;
    }
    return 0;
}

static module_cache *module(int dirfd, const char *path)
{
    for (int i = 0; i < cached; i++)
        if (!strcmp(cache[i].path, path))
            return &cache[i];
    struct stat st;
    if (strlen(path) >= PATH_MAX || path[0] != '/' || stat(path, &st) != 0 ||
        !S_ISREG(st.st_mode) || access(path, R_OK) != 0 || inside(dirfd, path))
        return NULL;
    if (cached == MAX_MODULES)
        symbols_release();
    module_cache *m = &cache[cached++];
    memset(m, 0, sizeof *m);
    strcpy(m->path, path);
    static const Dwfl_Callbacks callbacks = {
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
    };
    const char *base = strrchr(path, '/');
    m->dwfl = dwfl_begin(&callbacks);
    if (m->dwfl) {
        m->mod = dwfl_report_offline(m->dwfl, base ? base + 1 : path, path, -1);
        dwfl_report_end(m->dwfl, NULL, NULL);
        if (!m->mod || !dwfl_module_getelf(m->mod, &m->bias)) {
            dwfl_end(m->dwfl);
            m->dwfl = NULL;
        }
    }
    return m;
}

/* A mangled name in fn as its language writes it, in place: Rust's (its
 * legacy mangling, "_ZN...17h<hash>E", without the hash; and v0, "_R...",
 * which rustc uses in its standard library from 1.95) as Rust paths
 * ("<alloc::raw_vec::RawVec<u8>>::reserve"), else C++'s; left as it is
 * otherwise.  Names come from this machine's ELF files; a bound on their
 * length keeps the demangler's work bounded too. */
static void demangle(char *fn, size_t fn_cap)
{
    if ((strncmp(fn, "_Z", 2) && strncmp(fn, "_R", 2)) || strlen(fn) > 1024)
        return;
    char *plain = rust_demangle(fn, DMGL_PARAMS);
    if (!plain && fn[1] == 'Z')
        plain = cplus_demangle(fn, DMGL_PARAMS | DMGL_ANSI);
    if (plain)
        snprintf(fn, fn_cap, "%s", plain);
    free(plain);
}

/* A compiler's copy of a function named as the function: GCC's clones
 * ("grow.constprop.0", "step.isra.0", "fill.part.0", "main.cold",
 * "f.lto_priv.0"), LLVM's ("g.llvm.123"), and C++'s " [clone .cold]" that
 * the demangler writes for them.  No C, C++ or Rust name holds a '.'
 * itself; a copy's suffix is the user's function all the same. */
static void drop_clone_suffix(char *fn)
{
    static const char *const suffixes[] = {".constprop.", ".isra.", ".part.", ".cold",
                                           ".lto_priv.", ".llvm.", ".localalias", ".clone."};
    char *clone = strstr(fn, " [clone .");
    if (clone) {
        *clone = '\0';
        return;
    }
    for (char *dot = strchr(fn, '.'); dot; dot = strchr(dot + 1, '.'))
        for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++)
            if (dot != fn && !strncmp(dot, suffixes[i], strlen(suffixes[i]))) {
                *dot = '\0';
                return;
            }
}

static int symbolise_now(module_cache *m, uint64_t offset, char *fn, size_t fn_cap, char *file,
                         size_t file_cap, int *line);

/* The answers given, by module and offset: triage of 20,000 bundles asks
 * the same few sites again and again, and libdw's line lookup is the
 * cost.  Emptied with the modules. */
#define ANSWERS_KEPT 1024
static struct answer {
    const module_cache *m; /* NULL: free */
    uint64_t offset;
    char fn[256], file[512];
    int line, found;
} answers[ANSWERS_KEPT];

static struct answer *answer_slot(const module_cache *m, uint64_t offset)
{
    uint64_t h = (offset ^ (uint64_t)(uintptr_t)m) * 0x9E3779B97F4A7C15ull;
    return &answers[h >> (64 - 10)];
}

static int symbolise_locked(int dirfd, const char *path, uint64_t offset, char *fn,
                            size_t fn_cap, char *file, size_t file_cap, int *line);

int symbolise(int dirfd, const char *path, uint64_t offset, char *fn, size_t fn_cap,
              char *file, size_t file_cap, int *line)
{
    pthread_mutex_lock(&lock);
    int found = symbolise_locked(dirfd, path, offset, fn, fn_cap, file, file_cap, line);
    pthread_mutex_unlock(&lock);
    return found;
}

static int symbolise_locked(int dirfd, const char *path, uint64_t offset, char *fn,
                            size_t fn_cap, char *file, size_t file_cap, int *line)
{
    fn[0] = file[0] = '\0';
    *line = 0;
    module_cache *m = module(dirfd, path);
    if (!m || !m->dwfl)
        return -1;
    struct answer *a = answer_slot(m, offset);
    if (a->m == m && a->offset == offset) {
        snprintf(fn, fn_cap, "%s", a->fn);
        snprintf(file, file_cap, "%s", a->file);
        *line = a->line;
        return a->found ? 0 : -1;
    }
    int found = symbolise_now(m, offset, fn, fn_cap, file, file_cap, line);
    if (strlen(fn) < sizeof a->fn && strlen(file) < sizeof a->file) {
        *a = (struct answer){.m = m, .offset = offset, .line = *line, .found = found == 0};
        snprintf(a->fn, sizeof a->fn, "%s", fn);
        snprintf(a->file, sizeof a->file, "%s", file);
    }
    return found;
}

/* Source of a standard library's inlined code: Rust's (rustc's own path,
 * /rustc/<hash>/library/...), C++'s headers. */
static int runtime_source(const char *file)
{
    return (strstr(file, "/rustc/") && strstr(file, "/library/")) ||
           strstr(file, "/include/c++/") || strstr(file, "/.rustup/toolchains/");
}

/* An inlined subroutine's function, demangled, in fn; 0, or -1 unnamed. */
static int inlined_name(Dwarf_Die *scope, char *fn, size_t fn_cap)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_name, &attr));
    if (!name)
        return -1;
    snprintf(fn, fn_cap, "%s", name);
    demangle(fn, fn_cap);
    return 0;
}

/* Where scope (an inlined subroutine) was called from: its call site's
 * file and line; 0, or -1 when DWARF does not say. */
static int call_site(Dwarf_Die *cu, Dwarf_Die *scope, char *file, size_t file_cap, int *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word file_index, call_line;
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &file_index) != 0 ||
        dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &attr), &call_line) != 0 ||
        dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || file_index >= nfiles)
        return -1;
    const char *name = dwarf_filesrc(files, file_index, NULL, NULL);
    if (!name)
        return -1;
    snprintf(file, file_cap, "%s", name);
    *line = (int)call_line;
    return 0;
}

/* The DIEs that hold pc below parent, outermost first, into chain from
 * depth on (at most cap in all); the depth reached.  Functions may lie in
 * namespaces and types (Rust puts each in its module's namespace, a
 * method in its type), which hold no address themselves; libdw's
 * dwarf_getscopes does not look inside them.  *budget bounds the DIEs
 * looked at, in a CU of thousands. */
static int scopes_at(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, int depth, int cap,
                     int *budget)
{
    Dwarf_Die child;
    if (depth >= cap || dwarf_child(parent, &child) != 0)
        return depth;
    do {
        if (--*budget < 0)
            return depth;
        if (dwarf_haspc(&child, pc) > 0) {
            chain[depth] = child;
            return scopes_at(&chain[depth], pc, chain, depth + 1, cap, budget);
        }
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_namespace || tag == DW_TAG_structure_type ||
            tag == DW_TAG_class_type || tag == DW_TAG_union_type ||
            tag == DW_TAG_enumeration_type) {
            int reached = scopes_at(&child, pc, chain, depth, cap, budget);
            if (reached > depth)
                return reached;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return depth;
}

#define SCOPES_MAX 64
#define DIES_LOOKED_AT_MAX 200000

/* The name and line an inlining build gives at, put together (above): fn,
 * file and line hold the symbol's name and at's line on entry. */
static void through_inlining(module_cache *m, Dwarf_Addr at, char *fn, size_t fn_cap,
                             char *file, size_t file_cap, int *line)
{
    Dwarf_Addr cu_bias;
    Dwarf_Die *cu = dwfl_module_addrdie(m->mod, at, &cu_bias);
    Dwarf_Die scopes[SCOPES_MAX];
    int budget = DIES_LOOKED_AT_MAX;
    int n = cu ? scopes_at(cu, at - cu_bias, scopes, 0, SCOPES_MAX, &budget) : 0;
    char name[256], here[PATH_MAX];
    int here_line = *line;
    snprintf(here, sizeof here, "%s", file);
    for (int i = n - 1; i >= 0; i--) { /* innermost first */
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram)
            break;
        if (tag != DW_TAG_inlined_subroutine)
            continue;
        if (inlined_name(&scopes[i], name, sizeof name) == 0 && !runtime_allocation_name(name) &&
            !runtime_source(here)) {
            snprintf(fn, fn_cap, "%s", name);
            snprintf(file, file_cap, "%s", here);
            *line = here_line;
            break;
        }
        /* machinery: where it was called from is the next one out's line */
        if (call_site(cu, &scopes[i], here, sizeof here, &here_line) != 0)
            break;
        snprintf(file, file_cap, "%s", here);
        *line = here_line;
    }
}

static int symbolise_now(module_cache *m, uint64_t offset, char *fn, size_t fn_cap, char *file,
                         size_t file_cap, int *line)
{
    Dwarf_Addr at = m->bias + offset - 1; /* the call, not the return address */
    const char *name = dwfl_module_addrname(m->mod, at);
    Dwfl_Line *src = dwfl_module_getsrc(m->mod, at);
    const char *where = src ? dwfl_lineinfo(src, NULL, line, NULL, NULL, NULL) : NULL;
    if (name) {
        snprintf(fn, fn_cap, "%s", name);
        demangle(fn, fn_cap);
        drop_clone_suffix(fn);
    }
    if (where)
        snprintf(file, file_cap, "%s", where);
    if (name && where)
        through_inlining(m, at, fn, fn_cap, file, file_cap, line);
    return name ? 0 : -1;
}

void symbols_release(void)
{
    pthread_mutex_lock(&lock);
    memset(answers, 0, sizeof answers);
    for (int i = 0; i < cached; i++)
        if (cache[i].dwfl)
            dwfl_end(cache[i].dwfl);
    cached = 0;
    pthread_mutex_unlock(&lock);
}
