/*
 * runtime_words.c — what a language runtime's own out-of-memory words mean.
 * The JVM's OutOfMemoryError kinds, V8's heap limit, Go's runtime, C++'s
 * uncaught std::bad_alloc and Rust's failed allocation each name a
 * different limit, most of them the runtime's own and set by a flag, not
 * the machine's memory.  show's headline and diagnose's first cause read
 * the bundle's message through this table, and say which flag set the
 * limit when the command line or the runtime's options variable holds it.
 */
#include "inspect.h"

#include <string.h>

/* the runtime's own marker, the words that tell one limit from another
 * (NULL: any), who ran out, of what, and the flag that sets that limit */
#define FOR_EACH_RUNTIME_WORDS(X)                                                                 \
    X("OutOfMemoryError", "Java heap space", "the JVM", "its Java heap was full", "-Xmx")          \
    X("OutOfMemoryError", "GC overhead limit exceeded", "the JVM",                                 \
      "its Java heap was so nearly full that it spent almost all its time collecting garbage",     \
      "-Xmx")                                                                                      \
    X("OutOfMemoryError", "Metaspace", "the JVM", "its class metadata (Metaspace) reached its limit", \
      "-XX:MaxMetaspaceSize")                                                                      \
    X("OutOfMemoryError", "Compressed class space", "the JVM",                                     \
      "its compressed class space reached its limit", "-XX:CompressedClassSpaceSize")              \
    X("OutOfMemoryError", "Direct buffer memory", "the JVM",                                       \
      "its direct buffers reached their limit", "-XX:MaxDirectMemorySize")                         \
    X("OutOfMemoryError", "Requested array size exceeds VM limit", "the JVM",                      \
      "an array larger than the JVM allows was asked for", NULL)                                   \
    X("OutOfMemoryError", "native thread", "the JVM",                                              \
      "it could not start a thread (memory, or a limit on processes)", NULL)                       \
    X("OutOfMemoryError", NULL, "the JVM", "it ran out of a memory it manages itself", NULL)       \
    X("JavaScript heap out of memory", NULL, "Node (V8)", "its JavaScript heap reached its limit", \
      "--max-old-space-size")                                                                      \
    X("runtime: out of memory", NULL, "the Go runtime", "the system gave it no more memory",       \
      NULL)                                                                                        \
    X("std::bad_alloc", NULL, "the C++ runtime",                                                   \
      "an allocation threw std::bad_alloc and nothing caught it", NULL)                            \
    X("memory allocation of ", "failed", "the Rust runtime",                                       \
      "an allocation failed, and Rust aborts when one does", NULL)

#define AS_ENTRY(marker, words, runtime, what, flag) {marker, words, runtime, what, flag},
static const runtime_words table[] = {FOR_EACH_RUNTIME_WORDS(AS_ENTRY)};
#undef AS_ENTRY

/* where a runtime reads more of its command line from */
static const char *const option_variables[] = {"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
                                               "_JAVA_OPTIONS", "NODE_OPTIONS"};

const runtime_words *runtime_words_of(json_t *md)
{
    const char *said = jstr(md, "exception_message");
    if (!said)
        return NULL;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strstr(said, table[i].marker) && (!table[i].words || strstr(said, table[i].words)))
            return &table[i];
    return NULL;
}

/* The first word of TEXT that begins with FLAG, into out: "-Xmx64m". */
static int flag_in(const char *text, const char *flag, char *out, size_t cap)
{
    for (const char *p = text; p && (p = strstr(p, flag)) != NULL; p++) {
        if (p != text && p[-1] != ' ')
            continue;
        snprintf(out, cap, "%.*s", (int)strcspn(p, " "), p);
        return 1;
    }
    return 0;
}

void runtime_words_evidence(bundle *b, const runtime_words *w, const char *then, char *out,
                            size_t cap)
{
    const char *said = jstr(b->metadata, "exception_message");
    int n = snprintf(out, cap, "it said \"%.300s\"%s", said ? said : "", then);
    if (!w->flag || n < 0 || (size_t)n >= cap)
        return;
    char set[200] = "", where[40] = "";
    json_t *argv = json_object_get(json_object_get(b->environment, "process"), "cmdline");
    size_t i;
    json_t *arg;
    json_array_foreach(argv, i, arg) {
        if (json_is_string(arg) && flag_in(json_string_value(arg), w->flag, set, sizeof set)) {
            snprintf(where, sizeof where, "the command line");
            break;
        }
    }
    json_t *env = json_object_get(b->environment, "environment");
    for (size_t v = 0; !set[0] && v < sizeof option_variables / sizeof *option_variables; v++)
        if (flag_in(jstr(env, option_variables[v]), w->flag, set, sizeof set))
            snprintf(where, sizeof where, "%s", option_variables[v]);
    if (set[0])
        snprintf(out + n, cap - (size_t)n, "; %s sets %s", where, set);
    else
        snprintf(out + n, cap - (size_t)n, "; nothing here sets %s, so %s chose its default",
                 w->flag, w->runtime);
}
