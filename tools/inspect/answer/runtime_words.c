/*
 * runtime_words.c — what a language runtime's own out-of-memory words mean.
 * The JVM's OutOfMemoryError kinds, V8's heap limit, Go's runtime, C++'s
 * uncaught std::bad_alloc and Rust's failed allocation each name a
 * different limit, most of them the runtime's own and set by a flag, not
 * the machine's memory; PHP's memory_limit, GHC's -M, SBCL's dynamic
 * space, Mono's max-heap-size, R's vector limit and PyPy's and the Boehm
 * collector's variables likewise.  Lua, Ruby, Perl, Tcl, BEAM and OCaml
 * run out only when the system refuses them, and say so in words of their
 * own.  show's headline and diagnose's first cause read the bundle's
 * message through this table, and say which flag or variable set the
 * limit when the command line, the runtime's options variable or the
 * environment holds it.
 */
#include "answer.h"
#include "worker_loops.h"

#include <string.h>

/* the runtime's own marker, the words that tell one limit from another
 * (NULL: any), who ran out, of what (a clause, then the memory's name for
 * a run's verdict where it is not the system's: NULL when the system gave
 * no more), the flag that sets that limit (on the command line or in an
 * option variable) or the variable that does, and
 * what the memory that ran out is made of: ALLOCATIONS, blocks from malloc
 * and its kin, which the preload sees one by one (what held them can be
 * named); OWN_HEAP, a heap the runtime maps and manages itself (the JVM's,
 * V8's, Go's, PHP's Zend heap, GHC's, SBCL's, Mono's, the Boehm
 * collector's, BEAM's carriers, LuaJIT's arena), whose holders are the
 * runtime's objects: no native allocation site says what held it */
#define ALLOCATIONS 0
#define OWN_HEAP 1
#define FOR_EACH_RUNTIME_WORDS(X)                                                                  \
    X("OutOfMemoryError", "Java heap space", "the JVM", "its Java heap was full",                  \
      "the JVM's Java heap", "-Xmx", NULL, OWN_HEAP)                                               \
    X("OutOfMemoryError", "GC overhead limit exceeded", "the JVM",                                 \
      "its Java heap was so nearly full that it spent almost all its time collecting garbage",     \
      "the JVM's Java heap", "-Xmx", NULL, OWN_HEAP)                                               \
    X("OutOfMemoryError", "Metaspace", "the JVM",                                                  \
      "its class metadata (Metaspace) reached its limit", "the JVM's Metaspace",                   \
      "-XX:MaxMetaspaceSize", NULL, OWN_HEAP)                                                      \
    X("OutOfMemoryError", "Compressed class space", "the JVM",                                     \
      "its compressed class space reached its limit", "the JVM's compressed class space",          \
      "-XX:CompressedClassSpaceSize", NULL, OWN_HEAP)                                              \
    X("OutOfMemoryError", "Direct buffer memory", "the JVM",                                       \
      "its direct buffers reached their limit", "the JVM's direct buffer memory",                  \
      "-XX:MaxDirectMemorySize", NULL, ALLOCATIONS)                                                \
    /* JDK 17's: "Cannot reserve N bytes of direct buffer memory (allocated: A, limit: L)" */      \
    X("OutOfMemoryError", "bytes of direct buffer memory", "the JVM",                              \
      "its direct buffers reached their limit", "the JVM's direct buffer memory",                  \
      "-XX:MaxDirectMemorySize", NULL, ALLOCATIONS)                                                \
    X("OutOfMemoryError", "Requested array size exceeds VM limit", "the JVM",                      \
      "an array larger than the JVM allows was asked for", "the array size the JVM allows", NULL,  \
      NULL, OWN_HEAP)                                                                              \
    X("OutOfMemoryError", "native thread", "the JVM",                                              \
      "it could not start a thread (memory, or a limit on processes)",                             \
      "room for a thread (memory, or a limit on processes)", NULL, NULL, OWN_HEAP)                 \
    X("OutOfMemoryError", NULL, "the JVM", "it ran out of a memory it manages itself",             \
      "a memory the JVM manages itself", NULL, NULL, OWN_HEAP)                                     \
    X("JavaScript heap out of memory", NULL, "Node (V8)", "its JavaScript heap reached its limit", \
      "V8's JavaScript heap", "--max-old-space-size", NULL, OWN_HEAP)                              \
    X("runtime: out of memory", NULL, "the Go runtime", "the system gave it no more memory", NULL, \
      NULL, NULL, OWN_HEAP)                                                                        \
    X("std::bad_alloc", NULL, "the C++ runtime",                                                   \
      "an allocation threw std::bad_alloc and nothing caught it", NULL, NULL, NULL, ALLOCATIONS)   \
    X("memory allocation of ", "failed", "the Rust runtime",                                       \
      "an allocation failed, and Rust aborts when one does", NULL, NULL, NULL, ALLOCATIONS)        \
    X("Allowed memory size of ", "exhausted", "PHP", "its memory_limit was reached",               \
      "PHP's memory_limit", "memory_limit", NULL, OWN_HEAP)                                        \
    X("Out of memory (allocated ", NULL, "PHP", "the system gave it no more memory", NULL, NULL,   \
      NULL, OWN_HEAP)                                                                              \
    X("mmap() failed: [12]", NULL, "PHP", "the system gave it no more memory", NULL, NULL, NULL,   \
      OWN_HEAP)                                                                                    \
    X("luajit: not enough memory", NULL, "LuaJIT", "the system gave it no more memory", NULL,      \
      NULL, NULL, OWN_HEAP)                                                                        \
    X(": not enough memory", NULL, "Lua", "the system gave it no more memory", NULL, NULL, NULL,   \
      ALLOCATIONS)                                                                                 \
    X(": Heap exhausted;", NULL, "the GHC runtime", "its heap reached the size +RTS -M sets",      \
      "the GHC heap (+RTS -M)", "-M", NULL, OWN_HEAP)                                              \
    X("GC Warning: Out of Memory! Heap size:", NULL, "the Boehm garbage collector",                \
      "its heap could not grow (its limit, or the system's)", "the Boehm collector's heap", NULL,  \
      "GC_MAXIMUM_HEAP_SIZE", OWN_HEAP)                                                            \
    X("Unwind-only out of memory exception", NULL, "Guile", "its heap could not grow",             \
      "Guile's heap", NULL, "GC_MAXIMUM_HEAP_SIZE", OWN_HEAP)                                      \
    X("Heap exhausted during allocation", NULL, "SBCL", "its dynamic space was full",              \
      "SBCL's dynamic space", "--dynamic-space-size", NULL, OWN_HEAP)                              \
    X("Heap exhausted, game over", NULL, "SBCL", "its dynamic space was full",                     \
      "SBCL's dynamic space", "--dynamic-space-size", NULL, OWN_HEAP)                              \
    X("System.OutOfMemoryException", NULL, "the .NET runtime (Mono)",                              \
      "its managed heap could not grow", "the .NET managed heap", "max-heap-size", NULL, OWN_HEAP) \
    X("(NoMemoryError)", NULL, "Ruby", "the system gave it no more memory", NULL, NULL, NULL,      \
      ALLOCATIONS)                                                                                 \
    X("vector memory exhausted (limit reached?)", NULL, "R", "its vector heap reached its limit",  \
      "R's vector heap", "--max-vsize", "R_MAX_VSIZE", ALLOCATIONS)                                \
    X("cannot allocate vector of size ", NULL, "R", "the system gave it no more memory", NULL,     \
      NULL, NULL, ALLOCATIONS)                                                                     \
    X("cannot allocate memory block of size ", NULL, "R", "the system gave it no more memory",     \
      NULL, NULL, NULL, ALLOCATIONS)                                                               \
    X("_alloc: Cannot allocate ", "bytes of memory", "the Erlang VM (BEAM)",                       \
      "the system gave it no more memory", NULL, NULL, NULL, OWN_HEAP)                             \
    X("Out of memory!", NULL, "Perl", "the system gave it no more memory", NULL, NULL, NULL,       \
      ALLOCATIONS)                                                                                 \
    X("Out of memory during ", NULL, "Perl", "the system gave it no more memory", NULL, NULL,      \
      NULL, ALLOCATIONS)                                                                           \
    X("unable to alloc ", " bytes", "Tcl", "the system gave it no more memory", NULL, NULL, NULL,  \
      ALLOCATIONS)                                                                                 \
    X("out of memory allocating ", NULL, "Tcl", "the system gave it no more memory", NULL, NULL,   \
      NULL, ALLOCATIONS)                                                                           \
    X("Fatal error: exception Out_of_memory", NULL, "OCaml", "the system gave it no more memory",  \
      NULL, NULL, NULL, ALLOCATIONS)

/* GHC's RTS and others say only "prog: out of memory": theirs by the
 * reason the preload gave it (message_pattern:<pattern>) */
#define FOR_EACH_RUNTIME_REASON(X)                                                                 \
    X("message_pattern:ghc: out of memory", NULL, "the GHC runtime",                               \
      "the address space it reserved for its heap was used up, or the system gave it no more",     \
      NULL, NULL, NULL, OWN_HEAP)

#define AS_ENTRY(marker, words, runtime, what, memory, flag, variable, heap)                      \
    {marker, words, runtime, what, memory, flag, variable, heap},
static const runtime_words table[] = {FOR_EACH_RUNTIME_WORDS(AS_ENTRY)};
static const runtime_words by_reason[] = {FOR_EACH_RUNTIME_REASON(AS_ENTRY)};
#undef AS_ENTRY

/* where a runtime reads more of its command line from */
static const char *const option_variables[] = {"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
                                               "_JAVA_OPTIONS", "NODE_OPTIONS", "GHCRTS",
                                               "MONO_GC_PARAMS", "MONO_ENV_OPTIONS"};

/* PyPy's MemoryError is its garbage collector's limit (PYPY_GC_MAX) as
 * often as the system's: told by the interpreter that raised it */
static const runtime_words pypy = {"MemoryError", NULL, "PyPy",
                                   "its garbage-collected heap could not grow (its limit, or the "
                                   "system's)",
                                   "PyPy's garbage-collected heap", NULL, "PYPY_GC_MAX",
                                   ALLOCATIONS};

/* PyTorch puts a tensor it shares between processes (every batch a
 * DataLoader worker hands over) in /dev/shm, a tmpfs of its own size (a
 * container's: 64 MiB unless --shm-size says more): full, it says "unable
 * to allocate shared memory(shm) for file </torch_...>: No space left on
 * device" whatever the machine has free.  No native site held it. */
static const runtime_words torch_shm = {"unable to allocate shared memory", NULL, "PyTorch",
                                        "/dev/shm was full, the shared memory through which "
                                        "it hands tensors between processes (a DataLoader's "
                                        "batches)",
                                        "shared memory (/dev/shm)", NULL, NULL, OWN_HEAP};
/* PyTorch's DataLoader raises a worker's exception again in the main
 * process ("MemoryError: Caught MemoryError in DataLoader worker process
 * 0.", then the worker's traceback): the memory ran out in the worker, a
 * process with a bundle of its own, so nothing the main process held is
 * the cause (no "Held by" from it). */
static const runtime_words torch_worker = {" in DataLoader worker process ", NULL,
                                           "PyTorch's DataLoader",
                                           "in one of its worker processes, where the "
                                           "dataset's code runs; the main process raised the "
                                           "worker's error again (the worker's own bundle has "
                                           "its failed request)",
                                           NULL, NULL, NULL, OWN_HEAP};
/* A pool (worker_loops.h: multiprocessing's Pool, concurrent.futures'
 * ProcessPoolExecutor, joblib's) hands a worker's exception to the process
 * that waits for its result, which raises it again and prints the worker's
 * traceback first, as its cause ("multiprocessing.pool.RemoteTraceback: ",
 * then it between triple quotes): the traceback this process's bundle
 * keeps, whose outermost frame is the pool's loop in the worker (the
 * worker itself prints none: that loop catches every exception).  The
 * memory ran out in the worker.  (PyTorch's DataLoader prints the main
 * process's frames first: torch_worker, above.) */
#define POOL_LOOP(file_end, function, name, owner, runs)                                      \
    {file_end, function, name,                                                                 \
     {"", NULL, owner,                                                                         \
      "in one of its worker processes, where " runs " runs; this process raised the worker's " \
      "error again (the worker's own bundle has its failed request)",                          \
      NULL, NULL, NULL, OWN_HEAP}},
static const struct pool_loop {
    const char *file_end, *fn, *name; /* name: caught_by's */
    runtime_words words;
} pool_loops[] = {GMP_FOR_EACH_WORKER_LOOP(POOL_LOOP)};
#undef POOL_LOOP

const char *worker_loop_owner(const char *caught_by)
{
    for (size_t i = 0; caught_by && i < sizeof pool_loops / sizeof *pool_loops; i++)
        if (!strcmp(caught_by, pool_loops[i].name))
            return pool_loops[i].words.runtime;
    return "a pool of worker processes";
}

/* The pool whose worker's error this process raised again, told by the
 * outermost frame of the traceback it printed; NULL for any other.  Only
 * for a death its words alone told (no call of its own failed). */
static const runtime_words *pool_worker_relayed(bundle *b, const char *reason)
{
    if (!reason || strncmp(reason, "message_pattern:", 16) || bundle_failure_of(b))
        return NULL;
    size_t len;
    const char *text = bundle_text(b, "python_traceback.txt", &len);
    const char *file = text ? strstr(text, "File \"") : NULL;
    const char *end = file ? strstr(file + 6, "\", line ") : NULL;
    const char *in = end ? strstr(end, " in ") : NULL;
    if (!in || memchr(file, '\n', (size_t)(in - file))) /* all on the frame's line */
        return NULL;
    const char *path = file + 6, *fn = in + 4;
    size_t path_len = (size_t)(end - path), fn_len = strcspn(fn, "\r\n");
    for (size_t i = 0; i < sizeof pool_loops / sizeof *pool_loops; i++) {
        const struct pool_loop *l = &pool_loops[i];
        size_t tail = strlen(l->file_end);
        if (path_len >= tail && !memcmp(end - tail, l->file_end, tail) &&
            fn_len == strlen(l->fn) && !memcmp(fn, l->fn, fn_len))
            return &l->words;
    }
    return NULL;
}

int runtime_words_relay_worker(const runtime_words *w)
{
    for (size_t i = 0; w && i < sizeof pool_loops / sizeof *pool_loops; i++)
        if (w == &pool_loops[i].words)
            return 1;
    return w && w == &torch_worker;
}

/* A page of a shared mapping that a full tmpfs could not back: SIGBUS,
 * told in the preload's own words (shm_fault.c). */
static const runtime_words shm_fault = {", shared memory on a tmpfs of ", NULL, "the process",
                                        "a tmpfs it shared memory through (/dev/shm, as a "
                                        "rule) was full, and the kernel ends a touch of a page "
                                        "it cannot back with SIGBUS",
                                        "shared memory (a full tmpfs)", NULL, NULL, OWN_HEAP};

/* The program's file name: the manifest's, else the last part of
 * environment.json's exe, read now where a lean bundle (triage's) was
 * opened without it and its writer predates the manifest's. */
static const char *program_of(bundle *b)
{
    const char *name = jstr(b->manifest, "program");
    if (name)
        return name;
    const char *exe = jstr(json_object_get(bundle_json(b, "environment.json"), "process"), "exe");
    const char *slash = exe ? strrchr(exe, '/') : NULL;
    return slash ? slash + 1 : exe;
}

const runtime_words *runtime_words_of(bundle *b)
{
    json_t *md = b->metadata;
    const char *type = jstr(md, "exception_type");
    const char *program = type && !strcmp(type, "MemoryError") ? program_of(b) : NULL;
    if (program && !strncmp(program, "pypy", 4))
        return &pypy;
    const char *reason = jstr(md, "reason");
    for (size_t i = 0; reason && i < sizeof by_reason / sizeof *by_reason; i++)
        if (!strcmp(reason, by_reason[i].marker))
            return &by_reason[i];
    const char *said = jstr(md, "exception_message");
    if (!said)
        return NULL;
    const runtime_words *pool = pool_worker_relayed(b, reason);
    if (pool)
        return pool;
    if (strstr(said, torch_shm.marker))
        return &torch_shm;
    if (!strncmp(said, "Caught ", 7) && strstr(said, torch_worker.marker))
        return &torch_worker;
    if (type && !strcmp(type, "SIGBUS") && strstr(said, shm_fault.marker))
        return &shm_fault;
    /* "java.lang.OutOfMemoryError: Java heap space" alone on a line (the
     * JVM's before a heap dump) is read as its type and message apart */
    const char *module = jstr(md, "exception_module");
    const char *java_type = type && module && !strncmp(module, "java.", 5) ? type : "";
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if ((strstr(said, table[i].marker) || !strcmp(java_type, table[i].marker)) &&
            (!table[i].words || strstr(said, table[i].words)))
            return &table[i];
    return NULL;
}

/* The first word of TEXT that begins with FLAG, into out: "-Xmx64m". */
static int flag_in(const char *text, const char *flag, char *out, size_t cap)
{
    for (const char *p = text; p && (p = strstr(p, flag)) != NULL; p++) {
        if (p != text && p[-1] != ' ' && p[-1] != ',') /* MONO_GC_PARAMS: a,b=c */
            continue;
        snprintf(out, cap, "%.*s", (int)strcspn(p, " ,"), p);
        return 1;
    }
    return 0;
}

void runtime_words_evidence(bundle *b, const runtime_words *w, const char *then, char *out,
                            size_t cap)
{
    const char *said = jstr(b->metadata, "exception_message");
    const char *module = jstr(b->metadata, "exception_module");
    int n;
    if (w == &shm_fault) { /* the words are ours, and hold the numbers */
        snprintf(out, cap, "%.500s (in a container, docker run --shm-size sets the size of "
                           "/dev/shm)",
                 said ? said : "");
        return;
    }
    if (said && module && !strncmp(module, "java.", 5) && !strstr(said, w->marker))
        /* the type was read apart from it (runtime_words_of) */
        n = snprintf(out, cap, "it said \"%.100s.%.100s: %.300s\"%s", module, w->marker, said,
                     then);
    else
        n = snprintf(out, cap, "it said \"%.300s\"%s", said ? said : "", then);
    const bundle_host_state *h = w == &torch_shm ? bundle_host_state_of(b) : NULL;
    if (h && h->has_shm && n >= 0 && (size_t)n < cap) {
        char total[32], room[32];
        fmt_bytes((uint64_t)h->shm_total, total, sizeof total);
        fmt_bytes((uint64_t)(h->shm_available > 0 ? h->shm_available : 0), room, sizeof room);
        snprintf(out + n, cap - (size_t)n,
                 "; /dev/shm holds %s in all (%s free when this was written; in a container, "
                 "docker run --shm-size sets its size)",
                 total, room);
        return;
    }
    if ((!w->flag && !w->variable) || n < 0 || (size_t)n >= cap)
        return;
    char set[200] = "", where[40] = "";
    json_t *env = json_object_get(b->environment, "environment");
    const char *value = w->variable ? jstr(env, w->variable) : NULL;
    if (value) {
        snprintf(out + n, cap - (size_t)n, "; %s=%.60s sets it", w->variable, value);
        return;
    }
    if (!w->flag) {
        snprintf(out + n, cap - (size_t)n, "; %s is not set, so %s chose its default",
                 w->variable, w->runtime);
        return;
    }
    json_t *argv = json_object_get(json_object_get(b->environment, "process"), "cmdline");
    size_t i;
    json_t *arg;
    json_array_foreach(argv, i, arg) {
        if (json_is_string(arg) && flag_in(json_string_value(arg), w->flag, set, sizeof set)) {
            snprintf(where, sizeof where, "the command line");
            /* "--dynamic-space-size 256MB": its value is the next word */
            const char *next = json_string_value(json_array_get(argv, i + 1));
            if (!strcmp(set, w->flag) && next && next[0] != '-')
                snprintf(set + strlen(set), sizeof set - strlen(set), " %.60s", next);
            break;
        }
    }
    for (size_t v = 0; !set[0] && v < sizeof option_variables / sizeof *option_variables; v++)
        if (flag_in(jstr(env, option_variables[v]), w->flag, set, sizeof set))
            snprintf(where, sizeof where, "%s", option_variables[v]);
    if (set[0])
        snprintf(out + n, cap - (size_t)n, "; %s sets %s", where, set);
    else
        snprintf(out + n, cap - (size_t)n, "; nothing here sets %s, so %s chose its default",
                 w->flag, w->runtime);
}

int runtime_words_site(bundle *b, char *out, size_t cap)
{
    const runtime_words *w = runtime_words_of(b);
    const char *said = jstr(b->metadata, "exception_message");
    if (!w || !said || strcmp(w->runtime, "PHP"))
        return -1;
    const char *on = NULL, *in = NULL;
    for (const char *p = strstr(said, " on line "); p; p = strstr(p + 1, " on line "))
        on = p;
    for (const char *p = strstr(said, " in "); p && (!on || p < on); p = strstr(p + 1, " in "))
        in = p;
    if (!on || !in || in + 4 > on) /* " in on line 4": no file between */
        return -1;
    char *end;
    long line = strtol(on + 9, &end, 10);
    const char *file = in + 4;
    size_t len = (size_t)(on - file);
    for (const char *p = file; p < on; p++)
        if (*p == '/') { /* the script's name, as a Python site names its file */
            len = (size_t)(on - p - 1);
            file = p + 1;
        }
    if (end == on + 9 || line <= 0 || !len)
        return -1;
    snprintf(out, cap, "%.*s:%ld", (int)len, file, line);
    return 0;
}
