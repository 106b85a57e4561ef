/*
 * last_words.c — a language runtime's last words about memory, in the form
 * that runtime writes them, and whether it was that runtime that wrote
 * them.  Many runtimes die of memory with no call of ours failing: a limit
 * of their own (PHP's memory_limit, GHC's -M, SBCL's dynamic space, Mono's
 * max-heap-size, the Boehm collector's GC_MAXIMUM_HEAP_SIZE under Guile,
 * R's vector limit), a heap they carve themselves.  What they write to
 * stderr before they go is then the only news.  Others (Lua, Ruby, Perl,
 * Tcl, BEAM, OCaml) die only after a malloc or mmap failed, and their words
 * name that failure better than "ENOMEM" does.
 *
 * Words count only as their runtime's: the code that called the C library
 * to write the line (gmp_stderr_writer) must lie in that runtime's object
 * (libstdc++ for C++'s, node, perl, libruby, libR, beam.smp...), in an
 * object its compiler built (rustc's and GHC's name themselves in the
 * object's .comment section; an OCaml program holds its runtime's message
 * text), or the program must be Go.  A Python script printing Go's words
 * and a test printing C++'s are quoting.  oom_messages.c then keeps them
 * until the death they announce, and drops them when none follows.
 *
 * Read for a line that matched one form only: no allocation, no lock (the
 * caller holds oom_messages.c's).
 */
#include "bundle.h"
#include "preload.h"
#include "word_pairs.h"

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The pairs of the line the forms are asked about (word_pairs.h), and its
 * length: one thread at a time, as the whole file. */
static gmp_word_pairs line_pairs;
static size_t line_len;

/* the first byte compared here: most forms start with another, and a
 * line that reads as an OOM message is asked about every form */
static inline int starts(const char *line, const char *words)
{
    return line[0] == words[0] && !strncmp(line, words, strlen(words));
}

/* line: the one whose length line_len is */
static inline int ends(const char *line, const char *words)
{
    size_t w = strlen(words);
    return line_len >= w && !memcmp(line + line_len - w, words, w);
}

static int has(const char *line, const char *words)
{
    return gmp_word_pairs_may_hold(&line_pairs, words) && strstr(line, words) != NULL;
}

/* "memory allocation of 1099511627776 bytes failed", the whole line. */
static int rust_form(const char *line)
{
    static const char head[] = "memory allocation of ", tail[] = " bytes failed";
    if (strncmp(line, head, sizeof head - 1))
        return 0;
    const char *p = line + sizeof head - 1;
    size_t digits = strspn(p, "0123456789");
    return digits && !strcmp(p + digits, tail);
}

static int cxx_form(const char *l)
{
    return starts(l, "terminate called after throwing an instance of 'std::bad_alloc'") ||
           starts(l, "terminate called after throwing an instance of 'std::bad_array_new_length'");
}
static int go_form(const char *l) { return starts(l, "fatal error: runtime: out of memory"); }
static int node_form(const char *l)
{
    return has(l, "FATAL ERROR:") && has(l, "JavaScript heap out of memory");
}
/* lua.c and LuaJIT's: "lua5.4: not enough memory" */
static int lua_form(const char *l) { return ends(l, ": not enough memory"); }
static int php_form(const char *l)
{
    return (has(l, "Allowed memory size of ") && has(l, " bytes exhausted")) ||
           has(l, "Out of memory (allocated ") || starts(l, "mmap() failed: [12] ");
}
/* the RTS's "prog: Heap exhausted;" (its -M), and "prog: out of memory"
 * (the address space it reserved is used up, or the system refused) */
static int ghc_form(const char *l) { return ends(l, ": Heap exhausted;"); }
static int ghc_rts_form(const char *l) { return ends(l, ": out of memory"); }
static int boehm_form(const char *l)
{
    return starts(l, "GC Warning: Out of Memory! Heap size: ") && has(l, "Returning NULL!");
}
static int guile_form(const char *l) { return starts(l, "Warning: Unwind-only out of memory exception"); }
static int sbcl_form(const char *l)
{
    return starts(l, "Heap exhausted during allocation: ") || has(l, "Heap exhausted, game over.");
}
static int mono_form(const char *l) { return has(l, "System.OutOfMemoryException"); }
static int ruby_form(const char *l) { return has(l, "failed to allocate memory (NoMemoryError)"); }
static int r_form(const char *l)
{
    return has(l, "cannot allocate vector of size ") ||
           has(l, "vector memory exhausted (limit reached?)") ||
           has(l, "cannot allocate memory block of size ");
}
/* "binary_alloc: Cannot allocate 8000000 bytes of memory (of type "binary")." */
static int beam_form(const char *l)
{
    return has(l, "_alloc: Cannot allocate ") && has(l, " bytes of memory (of type ");
}
static int perl_form(const char *l)
{
    return !strcmp(l, "Out of memory!") || starts(l, "Out of memory during ") ||
           starts(l, "Out of memory in perl:");
}
/* Tcl_Panic's "unable to alloc 8000000 bytes", and a script's error
 * "String size overflow, out of memory allocating 8000001 bytes" */
static int tcl_form(const char *l)
{
    return (starts(l, "unable to alloc ") && ends(l, " bytes")) ||
           has(l, "out of memory allocating ");
}
static int ocaml_form(const char *l) { return !strcmp(l, "Fatal error: exception Out_of_memory"); }

/* X(id, form, reason's pattern, the exception they name (module, type;
 *   NULL where the runtime names none: the words are the message), who
 *   writes them:
 *   object name prefixes, or an ELF section and what it holds,
 *   can die so with no call failing)
 * The id is GMP_LAST_WORDS_<id>, in this order. */
/* NAMES("a", "b"): "a\0b\0", the list's end an empty name */
#define NAMES_1(a) a "\0"
#define NAMES_2(a, b) a "\0" b "\0"
#define NAMES_3(a, b, c) a "\0" b "\0" c "\0"
#define NAMES_PICK(_1, _2, _3, pick, ...) pick
#define NAMES(...) NAMES_PICK(__VA_ARGS__, NAMES_3, NAMES_2, NAMES_1, _)(__VA_ARGS__)
#define FOR_EACH_LAST_WORDS(X)                                                                     \
    X(CXX, cxx_form, "std::bad_alloc", "std", "bad_alloc", NAMES("libstdc++"), NULL, NULL, 1)      \
    X(RUST, rust_form, "memory allocation of", NULL, NULL, NULL, ".comment", "rustc", 1)           \
    X(GO, go_form, "out of memory", NULL, NULL, NULL, NULL, NULL, 1)                               \
    X(NODE, node_form, "out of memory", NULL, NULL, NAMES("node", "libnode"), NULL, NULL, 1)      \
    X(LUA, lua_form, "lua: not enough memory", "lua", "LUA_ERRMEM",                               \
      NAMES("lua", "liblua"), NULL, NULL, 0)                                                       \
    X(PHP, php_form, "php: memory exhausted", "php", "E_ERROR", NAMES("php", "libphp"), NULL,      \
      NULL, 1)                                                                                     \
    X(GHC, ghc_form, "ghc: heap exhausted", "GHC.IO.Exception", "HeapOverflow",                    \
      NAMES("libHSrts"), ".comment", "GHC ", 1)                                                    \
    X(GHC_RTS, ghc_rts_form, "ghc: out of memory", NULL, NULL, NAMES("libHSrts"), ".comment",      \
      "GHC ", 1)                                                                                   \
    X(BOEHM, boehm_form, "gc: out of memory", NULL, NULL, NAMES("libgc"), NULL, NULL, 1)        \
    X(GUILE, guile_form, "guile: out of memory", "guile", "out-of-memory", NAMES("libguile"),     \
      NULL, NULL, 1)                                                                               \
    X(SBCL, sbcl_form, "sbcl: heap exhausted", "SB-KERNEL", "HEAP-EXHAUSTED-ERROR",                \
      NAMES("sbcl"), NULL, NULL, 1)                                                                \
    X(MONO, mono_form, "System.OutOfMemoryException", "System", "OutOfMemoryException",           \
      NAMES("mono", "libmono", "libcoreclr"), NULL, NULL, 1)                                       \
    X(RUBY, ruby_form, "ruby: NoMemoryError", NULL, "NoMemoryError", NAMES("ruby", "libruby"),     \
      NULL, NULL, 0)                                                                               \
    X(R, r_form, "R: cannot allocate", NULL, NULL, NAMES("libR."), NULL, NULL, 1)                   \
    X(BEAM, beam_form, "erts: cannot allocate", NULL, NULL, NAMES("beam"), NULL, NULL, 0)        \
    X(PERL, perl_form, "perl: out of memory", NULL, NULL, NAMES("perl", "libperl"), NULL, NULL, \
      0)                                                                                           \
    X(TCL, tcl_form, "tcl: unable to alloc", NULL, NULL, NAMES("libtcl", "tclsh"), NULL, NULL,   \
      0)                                                                                           \
    X(OCAML, ocaml_form, "ocaml: Out_of_memory", "Stdlib", "Out_of_memory",                        \
      NAMES("ocamlrun", "libasmrun", "libcamlrun"), ".rodata", "Fatal error: exception %s", 0)

typedef struct last_words_form {
    const char *pattern, *module, *type;
    const char *objects;          /* basename prefixes (NAMES), or NULL */
    const char *section, *marker; /* or an object whose section holds marker */
    int own_limit;
} last_words_form;

#define AS_CHECK(id, ...)                                                                          \
    _Static_assert(GMP_LAST_WORDS_##id > 0 && GMP_LAST_WORDS_##id < GMP_LAST_WORDS_COUNT, #id);
FOR_EACH_LAST_WORDS(AS_CHECK)
#undef AS_CHECK
#define PLUS_ONE(...) +1
_Static_assert(1 FOR_EACH_LAST_WORDS(PLUS_ONE) == GMP_LAST_WORDS_COUNT, "one form per id");
#undef PLUS_ONE

/* The form of id into *f, made by code as the test below is: a table of
 * their pointers would be relocated, a page of the library written by the
 * loader, in every process at start.  0, or -1 for no id. */
static int form_of(int id, last_words_form *f)
{
    switch (id) {
#define AS_FORM(id, form, pattern, module, type, objects, section, marker, own_limit)             \
    case GMP_LAST_WORDS_##id:                                                                      \
        *f = (last_words_form){pattern, module, type, objects, section, marker, own_limit};       \
        return 0;
        FOR_EACH_LAST_WORDS(AS_FORM)
#undef AS_FORM
    }
    return -1;
}

/* Whether the line is in the form of id's words. */
static int says(int id, const char *line)
{
    switch (id) {
#define AS_TEST(id, form, ...)                                                                     \
    case GMP_LAST_WORDS_##id:                                                                      \
        return form(line);
        FOR_EACH_LAST_WORDS(AS_TEST)
#undef AS_TEST
    }
    return 0;
}

int gmp_message_last_words(const char *line)
{
    /* every form holds one of these: a log line that holds none (nearly
     * all of them) costs four scans, not twenty */
    if (!strstr(line, "emory") && !strstr(line, "alloc") && !strstr(line, "Heap exhausted") &&
        !strstr(line, "bad_array_new_length"))
        return GMP_LAST_WORDS_NONE;
    gmp_word_pairs_of(&line_pairs, line);
    line_len = strlen(line);
    for (int i = 1; i < GMP_LAST_WORDS_COUNT; i++)
        if (says(i, line))
            return i;
    return GMP_LAST_WORDS_NONE;
}

const char *gmp_message_last_words_said(int runtime, const char **module, const char **type,
                                        int *own_limit)
{
    last_words_form f;
    if (form_of(runtime, &f) < 0)
        return NULL;
    if (module)
        *module = f.module;
    if (type)
        *type = f.type;
    if (own_limit)
        *own_limit = f.own_limit;
    return f.pattern;
}

/* Whether the ELF object at path has a section named section holding
 * marker (read 4 KiB at a time, each read overlapping the last by the
 * marker's length, so that one split across two reads is found). */
static int section_holds(const char *path, const char *section, const char *marker)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int found = 0;
    size_t want_len = strlen(section) + 1, mlen = strlen(marker);
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
        eh.e_shnum > 0 && eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum && want_len <= 32 &&
        mlen > 0 && mlen < 256) {
        Elf64_Shdr names;
        char name[32];
        if (pread(fd, &names, sizeof names, (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof names)) ==
            (ssize_t)sizeof names)
            for (unsigned i = 0; i < eh.e_shnum; i++) {
                Elf64_Shdr sh;
                if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
                        (ssize_t)sizeof sh ||
                    pread(fd, name, want_len, (off_t)(names.sh_offset + sh.sh_name)) !=
                        (ssize_t)want_len ||
                    memcmp(name, section, want_len) || sh.sh_type == SHT_NOBITS)
                    continue;
                char text[4096];
                uint64_t size = sh.sh_size < (64u << 20) ? sh.sh_size : (64u << 20);
                for (uint64_t at = 0; at < size && !found;) {
                    size_t want = size - at < sizeof text ? (size_t)(size - at) : sizeof text;
                    ssize_t n = pread(fd, text, want, (off_t)(sh.sh_offset + at));
                    if (n <= 0)
                        break;
                    found = memmem(text, (size_t)n, marker, mlen) != NULL;
                    if ((size_t)n < mlen || at + (uint64_t)n >= size)
                        break;
                    at += (uint64_t)n - mlen + 1;
                }
                break;
            }
    }
    close(fd);
    return found;
}

int gmp_message_last_words_own(int runtime, const void *writer)
{
    if (runtime <= 0 || runtime >= GMP_LAST_WORDS_COUNT)
        return 0;
    if (runtime == GMP_LAST_WORDS_GO)
        return gmp_main_program_is_go(); /* Go writes with its own system calls, past libc */
    /* the last answer, for the same code writing the same words again (a
     * test printing its expected error 200,000 times reads maps once) */
    static const void *asked_writer;
    static int asked_runtime, answer;
    if (writer == asked_writer && runtime == asked_runtime)
        return answer;
    static char buf[16384]; /* one line at a time: oom_messages.c's lock */
    char path[4096];
    gmp_maps_object_at(writer, buf, sizeof buf, path, sizeof path);
    last_words_form f;
    form_of(runtime, &f);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    int own = 0;
    for (const char *o = f.objects; path[0] && o && *o && !own; o += strlen(o) + 1)
        own = starts(base, o);
    if (path[0] && !own && f.section)
        own = section_holds(path, f.section, f.marker);
    asked_writer = writer;
    asked_runtime = runtime;
    answer = own;
    return own;
}
