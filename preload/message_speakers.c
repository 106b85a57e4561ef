/*
 * message_speakers.c — whether this process can mean an OOM line it wrote.
 * A line on stderr is evidence of an OOM only when its writer can mean it:
 * compilers quote source lines ("CUDA out of memory. Tried to allocate"),
 * log viewers and test runners print old logs, schedulers relay another
 * process's fate ("srun: error: task 0: Out Of Memory").  So a line that
 * would make a bundle of its own (no failing call was seen) counts only
 *   - when the framework it names is loaded in this process: its library
 *     is in a mapped path (libtorch/libc10 for PyTorch's words, numpy's
 *     _multiarray_umath, XLA's, TensorFlow's, CuPy's, the JVM's libjvm,
 *     HIP's, the CUDA driver's or runtime's), or, for words no framework
 *     owns ("out of memory"), some GPU runtime or framework is;
 *   - for Python's MemoryError, when it ends a traceback that this process,
 *     a Python interpreter, printed;
 *   - for the runtimes whose last words have a fixed form (C++'s
 *     "terminate called after throwing an instance of 'std::bad_alloc'",
 *     Rust's "memory allocation of N bytes failed", Go's "fatal error:
 *     runtime: out of memory", Node's "FATAL ERROR: ... JavaScript heap out
 *     of memory"), when that runtime wrote them (the code that called the
 *     C library's write is libstdc++, an object rustc built, node, a Go
 *     program: a script printing them is quoting) and the death they
 *     announce follows: oom_messages.c keeps such words until the abort
 *     (crash.c), and drops them when the process goes on.
 * /proc/self/maps is read only for a line that matched, with no allocation
 * and no lock, and its answer for each set of names is kept: a program
 * printing 200,000 such lines (a test suite's expected errors) read it
 * 200,000 times, 100x its own time.  A "loaded" answer is kept for good (a
 * framework is not unloaded); a "not loaded" one is asked again only after
 * NOT_LOADED_KEPT_NS, for a library dlopen'ed since: the loader's own count
 * of loads is read under its lock, which a write from a signal handler must
 * not wait on, and a dlopen of ours in the program's place would lose its
 * caller's RUNPATH.
 */
#include "bundle.h"
#include "preload.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int has_ci(const char *hay, const char *needle)
{
    return gmp_find_ci(hay, strlen(hay), needle) != NULL; /* strcasestr's set-up costs more */
}

typedef struct wanted {
    const char *const *names;
    int found;
} wanted;

static void look(const char *line, void *arg)
{
    wanted *w = arg;
    const char *path = strchr(line, '/');
    for (size_t i = 0; path && !w->found && w->names[i]; i++)
        if (strstr(path, w->names[i]))
            w->found = 1;
}

#define NOT_LOADED_KEPT_NS 250000000ull
#define ANSWERS_KEPT 16

static struct kept_answer {
    const char *const *names; /* the set asked about (its array) */
    int found;
    uint64_t at_ns; /* when maps was read for it (CLOCK_MONOTONIC_COARSE) */
} answers[ANSWERS_KEPT];

static uint64_t coarse_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t); /* the vDSO's: no system call */
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Whether a mapped object's path holds one of names (NULL-terminated), as
 * kept above.  One thread at a time: the caller holds oom_messages.c's
 * lock. */
static int loaded(const char *const *names)
{
    static char buf[16384];
    uint64_t now = coarse_now_ns();
    struct kept_answer *a = NULL;
    for (int i = 0; i < ANSWERS_KEPT && !a; i++)
        if (answers[i].names == names || !answers[i].names)
            a = &answers[i];
    if (a && a->names == names && (a->found || now - a->at_ns < NOT_LOADED_KEPT_NS))
        return a->found;
    wanted w = {names, 0};
    gmp_maps_foreach(buf, sizeof buf, look, &w);
    if (a)
        *a = (struct kept_answer){names, w.found, now};
    return w.found;
}

static int starts(const char *line, const char *words)
{
    return !strncmp(line, words, strlen(words));
}

/* "memory allocation of 1099511627776 bytes failed", the whole line. */
static int rust_last_words(const char *line)
{
    static const char head[] = "memory allocation of ", tail[] = " bytes failed";
    if (strncmp(line, head, sizeof head - 1))
        return 0;
    const char *p = line + sizeof head - 1;
    size_t digits = strspn(p, "0123456789");
    return digits && !strcmp(p + digits, tail);
}

int gmp_message_last_words(const char *line)
{
    if (starts(line, "terminate called after throwing an instance of 'std::bad_alloc'") ||
        starts(line, "terminate called after throwing an instance of "
                     "'std::bad_array_new_length'"))
        return GMP_LAST_WORDS_CXX;
    if (rust_last_words(line))
        return GMP_LAST_WORDS_RUST;
    if (starts(line, "fatal error: runtime: out of memory"))
        return GMP_LAST_WORDS_GO;
    if (strstr(line, "FATAL ERROR:") && strstr(line, "JavaScript heap out of memory"))
        return GMP_LAST_WORDS_NODE;
    return GMP_LAST_WORDS_NONE;
}

/* The object at path was built by rustc: its .comment section says so
 * ("rustc version 1.95.0"), as every Rust binary's does. */
static int built_by_rustc(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int found = 0;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
        eh.e_shnum > 0 && eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum) {
        Elf64_Shdr names;
        char name[16];
        if (pread(fd, &names, sizeof names, (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof names)) ==
            (ssize_t)sizeof names)
            for (unsigned i = 0; i < eh.e_shnum && !found; i++) {
                Elf64_Shdr sh;
                if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
                        (ssize_t)sizeof sh ||
                    pread(fd, name, sizeof name, (off_t)(names.sh_offset + sh.sh_name)) !=
                        (ssize_t)sizeof name ||
                    strncmp(name, ".comment", sizeof ".comment"))
                    continue;
                char text[1024];
                size_t want = sh.sh_size < sizeof text - 1 ? sh.sh_size : sizeof text - 1;
                ssize_t n = pread(fd, text, want, (off_t)sh.sh_offset);
                for (ssize_t k = 0; k + 5 <= n && !found; k++) /* NUL-separated strings */
                    found = !memcmp(text + k, "rustc", 5);
                break;
            }
    }
    close(fd);
    return found;
}

int gmp_message_last_words_own(int runtime, const void *writer)
{
    static char buf[16384]; /* one line at a time: oom_messages.c's lock */
    char path[4096];
    gmp_maps_object_at(writer, buf, sizeof buf, path, sizeof path);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    switch (runtime) {
    case GMP_LAST_WORDS_CXX:
        return !strncmp(base, "libstdc++", 9);
    case GMP_LAST_WORDS_GO:
        return gmp_main_program_is_go();
    case GMP_LAST_WORDS_NODE:
        return !strcmp(base, "node") || !strcmp(base, "nodejs") || !strncmp(base, "libnode", 7);
    case GMP_LAST_WORDS_RUST:
        return path[0] && built_by_rustc(path);
    default:
        return 0;
    }
}

int gmp_message_speaker_here(const char *pattern, const char *line, int ends_traceback)
{
    static const char *const torch[] = {"libtorch", "libc10", NULL};
    static const char *const numpy[] = {"_multiarray_umath", NULL};
    static const char *const cupy[] = {"cupy", NULL};
    static const char *const xla[] = {"xla_extension", "jaxlib", "libxla", "libtensorflow",
                                      "_pywrap_tensorflow", NULL};
    static const char *const tensorflow[] = {"libtensorflow", "_pywrap_tensorflow", NULL};
    static const char *const jvm[] = {"libjvm", NULL};
    static const char *const python[] = {"python", NULL}; /* libpython, or the interpreter */
    static const char *const hip[] = {"libamdhip64", NULL};
    static const char *const cuda[] = {"libcuda.so", "libcudart", "libtorch", "libc10", NULL};
    static const char *const any_gpu[] = {"libcuda.so", "libcudart", "libamdhip64", "libtorch",
                                          "libc10", "xla_extension", "jaxlib", "libtensorflow",
                                          "_pywrap_tensorflow", "cupy", NULL};
    if (!strcmp(pattern, "std::bad_alloc") || !strcmp(pattern, "memory allocation of"))
        return 0; /* those runtimes' words in another form: quoted */
    if (!strcmp(pattern, "MemoryError") && !has_ci(line, "numpy"))
        return ends_traceback && loaded(python);
    if (has_ci(line, "java.lang.OutOfMemoryError"))
        return loaded(jvm);
    if (has_ci(line, "torch") || has_ci(line, "tried to allocate"))
        return loaded(torch);
    if (has_ci(line, "numpy") || !strcmp(pattern, "unable to allocate"))
        return loaded(numpy);
    if (has_ci(line, "cupy"))
        return loaded(cupy);
    if (has_ci(line, "tensorflow") || has_ci(line, "bfc_allocator") ||
        !strcmp(pattern, "oom when allocating") || !strcmp(pattern, "ResourceExhaustedError"))
        return loaded(tensorflow);
    if (has_ci(line, "xla") || has_ci(line, "jax") || has_ci(line, "RESOURCE_EXHAUSTED") ||
        !strcmp(pattern, "failed to allocate"))
        return loaded(xla);
    if (!strcmp(pattern, "hip out of memory") || strstr(line, "HIP") || strstr(line, "ROCm"))
        return loaded(hip);
    if (!strcmp(pattern, "cuda out of memory") || strstr(line, "CUDA"))
        return loaded(cuda);
    return loaded(any_gpu);
}
