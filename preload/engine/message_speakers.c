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
 *   - for a runtime's last words in their own form (last_words.c: C++'s
 *     terminate line, Rust's, Go's, Node's, PHP's, GHC's, SBCL's...),
 *     when that runtime wrote them and the death they announce follows:
 *     oom_messages.c keeps such words until the abort (crash.c) or the
 *     failing exit (outcome.c), and drops them when the process goes on.
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
#include "word_pairs.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

/* The line in lower case, and its pairs (word_pairs.h), made once for
 * the dozen words looked for in it (a test suite printing its expected
 * "out of memory" errors asks for each of its lines); a line longer than
 * the copy is searched as it is.  One thread at a time, as loaded() below. */
typedef struct lowered {
    const char *line;
    int whole;            /* the copy holds all of line */
    gmp_word_pairs pairs; /* the copy's */
    char text[1024];
} lowered;

static void lower_line(lowered *l, const char *line)
{
    size_t i = 0;
    memset(&l->pairs, 0, sizeof l->pairs);
    for (unsigned char before = 0; line[i] && i + 1 < sizeof l->text; i++) {
        unsigned char c = (unsigned char)line[i];
        c = (unsigned char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
        l->text[i] = (char)c;
        if (i)
            gmp_word_pairs_add(&l->pairs, before, c);
        before = c;
    }
    l->text[i] = '\0';
    l->line = line;
    l->whole = line[i] == '\0';
}

/* needle in lower case */
static int has_ci(const lowered *l, const char *needle)
{
    if (l->whole)
        return gmp_word_pairs_may_hold(&l->pairs, needle) && strstr(l->text, needle) != NULL;
    return gmp_find_ci(l->line, strlen(l->line), needle) != NULL; /* strcasestr's set-up costs more */
}

/* word (its own case) in the line, whose copy holds it in lower case */
static int has_cs(const lowered *l, const char *word, const char *lower)
{
    return (!l->whole || gmp_word_pairs_may_hold(&l->pairs, lower)) &&
           strstr(l->line, word) != NULL;
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

/* The names of sets[0..n) into out (cap entries, NULL-terminated), each
 * once; -1 when they do not fit. */
static int union_of(const char *const *const *sets, size_t n, const char **out, size_t cap)
{
    size_t have = 0;
    for (size_t s = 0; s < n; s++)
        for (const char *const *name = sets[s]; *name; name++) {
            size_t i = 0;
            while (i < have && strcmp(out[i], *name))
                i++;
            if (i < have)
                continue;
            if (have + 1 >= cap)
                return -1;
            out[have++] = *name;
        }
    out[have] = NULL;
    return 0;
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
    static const char *const python[] = {"python", "pypy", NULL}; /* libpython, libpypy, or the
                                                                * interpreter */
    static const char *const hip[] = {"libamdhip64", NULL};
    static const char *const cuda[] = {"libcuda.so", "libcudart", "libtorch", "libc10", NULL};
    static const char *const any_gpu[] = {"libcuda.so", "libcudart", "libamdhip64", "libtorch",
                                          "libc10", "xla_extension", "jaxlib", "libtensorflow",
                                          "_pywrap_tensorflow", "cupy", NULL};
    /* every set asked about below but python's: in a process with none of
     * them loaded (a test suite printing its expected errors), no answer
     * below is yes but a traceback's MemoryError's, and the line is looked
     * at no further; their names, made once, are asked about as one set */
    static const char *const *const speakers[] = {torch, numpy, cupy, xla, tensorflow,
                                                  jvm, hip, cuda, any_gpu};
    static const char *any_speaker[32];
    static int any_speaker_made;
    if (!any_speaker_made)
        any_speaker_made = union_of(speakers, sizeof speakers / sizeof *speakers, any_speaker,
                                    sizeof any_speaker / sizeof *any_speaker) == 0
                               ? 1
                               : -1;
    if (!strcmp(pattern, "std::bad_alloc") || !strcmp(pattern, "memory allocation of"))
        return 0; /* those runtimes' words in another form: quoted */
    if (any_speaker_made > 0 && !(ends_traceback && !strcmp(pattern, "MemoryError")) &&
        !loaded(any_speaker))
        return 0;
    static lowered l;
    lower_line(&l, line);
    if (!strcmp(pattern, "MemoryError") && !has_ci(&l, "numpy"))
        return ends_traceback && loaded(python);
    if (has_ci(&l, "java.lang.outofmemoryerror"))
        return loaded(jvm);
    if (has_ci(&l, "torch") || has_ci(&l, "tried to allocate"))
        return loaded(torch);
    if (has_ci(&l, "numpy") || !strcmp(pattern, "unable to allocate"))
        return loaded(numpy);
    if (has_ci(&l, "cupy"))
        return loaded(cupy);
    if (has_ci(&l, "tensorflow") || has_ci(&l, "bfc_allocator") ||
        !strcmp(pattern, "oom when allocating") || !strcmp(pattern, "ResourceExhaustedError"))
        return loaded(tensorflow);
    if (has_ci(&l, "xla") || has_ci(&l, "jax") || has_ci(&l, "resource_exhausted") ||
        !strcmp(pattern, "failed to allocate"))
        return loaded(xla);
    if (!strcmp(pattern, "hip out of memory") || has_cs(&l, "HIP", "hip") ||
        has_cs(&l, "ROCm", "rocm"))
        return loaded(hip);
    if (!strcmp(pattern, "cuda out of memory") || has_cs(&l, "CUDA", "cuda"))
        return loaded(cuda);
    return loaded(any_gpu);
}
