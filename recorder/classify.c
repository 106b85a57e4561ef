/*
 * classify.c — is this failure an out-of-memory, and under which name?
 *
 * Three ways in: an allocation API's return code (per backend); an
 * exception's type/module/message text (the Python recorder's rules, plus
 * MemoryError and numpy's _ArrayMemoryError, CuPy's and Java's
 * OutOfMemoryError, std::bad_alloc and RESOURCE_EXHAUSTED), for an
 * exception the caller knows is one; and a line a process wrote to stderr, which alone
 * must be about memory (an "out of memory", an allocator's "failed to
 * allocate <size>", an OOM exception's name), never a bare "resource
 * exhausted" (a cloud API's rate limit says that too).  Types are tried
 * before message patterns, and the specific patterns before the generic
 * "out of memory", so the reason names the most precise cause.
 */
#include "gpumemprof.h"
#include "util.h"

#include <errno.h>
#include <string.h>

static gmp_classification make(int is_oom, const char *prefix, const char *reason)
{
    gmp_classification c;
    memset(&c, 0, sizeof c);
    c.is_oom = is_oom;
    gmp_strlcpy(c.reason, prefix, sizeof c.reason);
    gmp_strlcat(c.reason, reason, sizeof c.reason);
    return c;
}

gmp_classification gmp_classify_result(gmp_backend backend, gmp_api api, long code)
{
    switch (backend) {
    case GMP_BACKEND_CUDA:
        /* cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2 */
        if (code == 2)
            return make(1, "", !strcmp(gmp_api_library(api), "libcuda") ? "CUDA_ERROR_OUT_OF_MEMORY"
                                                  : "cudaErrorMemoryAllocation");
        break;
    case GMP_BACKEND_ROCM:
        if (code == 2)
            return make(1, "", "hipErrorOutOfMemory");
        break;
    case GMP_BACKEND_CPU:
        if (code == ENOMEM)
            return make(1, "", "ENOMEM");
        /* a page of a shared mapping a full tmpfs could not back (shm_fault.c) */
        if (code == ENOSPC && api == GMP_API_MMAP)
            return make(1, "", "ENOSPC");
        break;
    default:
        break;
    }
    return make(0, "", code == 0 ? "success" : "not_oom");
}

/* Case-insensitive: where needle starts in hay, or NULL. */
static const char *find_ci(const char *hay, const char *needle)
{
    return gmp_find_ci(hay, strlen(hay), needle);
}

static int contains_ci(const char *hay, const char *needle)
{
    return find_ci(hay, needle) != NULL;
}

/* The last dotted component of a type name: "torch.cuda.OutOfMemoryError"
 * -> "OutOfMemoryError". */
static const char *base_name(const char *type)
{
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : type;
}

static const char *const message_patterns[] = {
    "cuda out of memory", "hip out of memory", "out of memory",
    "resource exhausted", "failed to allocate", "allocation failed",
};

/* "failed to allocate 2.00GiB", "Unable to allocate 74.5 TiB", "Failed to
 * allocate request for 1.2GiB": a size right after the words, as
 * allocators write it ("failed to allocate resources" is no such line). */
static int names_a_size_after(const char *line, size_t n, const char *words)
{
    const char *at = gmp_find_ci(line, n, words);
    if (!at)
        return 0;
    at += strlen(words);
    while (*at == ' ')
        at++;
    if (find_ci(at, "request for ") == at)
        at += strlen("request for ");
    return *at >= '0' && *at <= '9';
}

/* The bytes of a dotted name ("numpy.core._exceptions._ArrayMemoryError")
 * at the line's start: strspn with this set cost a table's set-up a line. */
static size_t name_span(const char *line)
{
    size_t i = 0;
    for (;; i++) {
        unsigned char c = (unsigned char)line[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return i;
    }
}

/* A line's "out of memory", first found at first: "cuda out of memory" or
 * "hip out of memory" where one of its "out of memory" follows those words,
 * as a search for each would find them, without two more passes. */
static const char *out_of_memory_pattern(const char *line, size_t n, const char *first)
{
    static const struct {
        const char *pattern, *before; /* the words before its "out of memory" */
    } named[] = {{"cuda out of memory", "cuda "}, {"hip out of memory", "hip "}};
    for (size_t k = 0; k < sizeof named / sizeof *named; k++) {
        size_t before = strlen(named[k].before);
        for (const char *at = first; at;
             at = gmp_find_ci(at + 1, n - (size_t)(at + 1 - line), "out of memory"))
            if ((size_t)(at - line) >= before &&
                gmp_find_ci(at - before, before, named[k].before) == at - before)
                return named[k].pattern;
    }
    return "out of memory";
}

/* The OOM pattern a line of n bytes names, if any.  Every pattern holds
 * "memory" or "alloc" (ResourceExhaustedError "exhausted"), and is looked
 * for only where its words are: nearly every line a program writes to
 * stderr holds none, and an ML job logs "memory allocated" every step. */
enum { MEMORY = 1, ALLOC = 2 };
static const char *oom_pattern(const char *line, size_t n)
{
    unsigned have = gmp_find_ci(line, n, "memory") ? MEMORY : 0;
    const char *out_of_memory = have ? gmp_find_ci(line, n, "out of memory") : NULL;
    if (out_of_memory) /* the first patterns, and the commonest */
        return out_of_memory_pattern(line, n, out_of_memory);
    have |= gmp_find_ci(line, n, "alloc") ? ALLOC : 0;
    if (!have && !gmp_find_ci(line, n, "exhausted"))
        return NULL;
    static const struct {
        const char *words;
        unsigned needs;
    } phrases[] = {
        {"oom when allocating", ALLOC},
        {"memory allocation failed", MEMORY | ALLOC},
        {"cannot allocate memory", MEMORY | ALLOC}, /* ENOMEM's perror */
        {"java.lang.outofmemoryerror", MEMORY},
        {"array buffer allocation failed", ALLOC}, /* V8's RangeError */
        /* PyTorch's shared tensors (a DataLoader's batches) in a full
         * /dev/shm: "unable to allocate shared memory(shm) for file
         * </torch_...>: No space left on device (28)" */
        {"unable to allocate shared memory", MEMORY | ALLOC},
    };
    for (size_t i = 0; i < sizeof phrases / sizeof *phrases; i++)
        if (!(phrases[i].needs & ~have) && gmp_find_ci(line, n, phrases[i].words))
            return phrases[i].words;
    /* "failed to allocate 2.00GiB" (XLA), "Unable to allocate 72.8 TiB"
     * (numpy), "you tried to allocate 8000000000000 bytes" (torch's
     * DefaultCPUAllocator), "memory allocation of 1024 bytes failed" (Rust) */
    static const char *const before_a_size[] = {"failed to allocate", "unable to allocate",
                                                "you tried to allocate",
                                                "memory allocation of"};
    for (size_t i = 0; (have & ALLOC) && i < sizeof before_a_size / sizeof *before_a_size; i++)
        if (names_a_size_after(line, n, before_a_size[i]))
            return before_a_size[i];
    if ((have & ALLOC) && strstr(line, "std::bad_alloc"))
        return "std::bad_alloc";
    /* a line that starts with an exception's name: "MemoryError",
     * "numpy.core._exceptions._ArrayMemoryError: ...", "...OutOfMemoryError: ..." */
    size_t id = name_span(line);
    if (id && (line[id] == '\0' || line[id] == ':' || line[id] == '\n' || line[id] == '\r')) {
        char type[160];
        if (id < sizeof type) {
            memcpy(type, line, id);
            type[id] = '\0';
            const char *base = base_name(type);
            size_t bl = strlen(base);
            if (bl >= 11 && !strcmp(base + bl - 11, "MemoryError"))
                return "MemoryError";
            if (!strcmp(base, "ResourceExhaustedError"))
                return "ResourceExhaustedError";
        }
    }
    return NULL;
}

const char *gmp_classify_oom_line(const char *line)
{
    size_t n = strlen(line);
    const char *pattern = oom_pattern(line, n);
    /* TensorFlow's BFC allocator warns so when a request with a fallback
     * did not fit, in jobs that run to the end: "Allocator (GPU_0_bfc) ran
     * out of memory trying to allocate 2.55GiB ... The caller indicates
     * that this is not a failure, but may mean that there could be
     * performance gains if more memory were available."  Looked for only
     * in a line that matched: every other stderr line costs nothing more. */
    return pattern && !gmp_find_ci(line, n, "this is not a failure") ? pattern : NULL;
}

gmp_classification gmp_classify_exception(const char *type, const char *module,
                                          const char *message)
{
    const char *t = type ? type : "";
    const char *m = module ? module : "";
    const char *msg = message ? message : "";
    const char *base = base_name(t);

    if (!strcmp(base, "OutOfMemoryError") &&
        (strstr(t, "torch") || strstr(m, "torch")))
        return make(1, "", "torch.cuda.OutOfMemoryError");
    if (!strcmp(base, "ResourceExhaustedError"))
        return make(1, "", "tensorflow.ResourceExhaustedError");
    if (!strcmp(base, "OutOfMemoryError") &&
        (strstr(t, "cupy") || strstr(m, "cupy") || strstr(t, "java.") || strstr(m, "java.")))
        return make(1, "", !strncmp(t, "java.", 5) || !strncmp(m, "java.", 5)
                               ? "java.lang.OutOfMemoryError"
                               : "cupy.OutOfMemoryError");
    if (!strcmp(base, "MemoryError") || !strcmp(base, "_ArrayMemoryError")) /* numpy's */
        return make(1, "", "MemoryError");
    if (!strcmp(t, "std::bad_alloc") || !strcmp(t, "bad_alloc") ||
        !strcmp(t, "std::bad_array_new_length"))
        return make(1, "", "std::bad_alloc");
    if (strstr(t, "RESOURCE_EXHAUSTED") || strstr(msg, "RESOURCE_EXHAUSTED"))
        return make(1, "", "RESOURCE_EXHAUSTED");
    for (size_t i = 0; i < sizeof message_patterns / sizeof *message_patterns; i++)
        if (contains_ci(msg, message_patterns[i]))
            return make(1, "message_pattern:", message_patterns[i]);
    return make(0, "", "not_oom");
}
