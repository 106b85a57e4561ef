/*
 * interpreter.c — a failure inside an interpreter, named by the script it
 * ran.  When every frame of a failing stack is a library's and one of them
 * is an interpreter's (Perl, Ruby, Lua, PHP, Tcl, R, Guile, BEAM, Mono,
 * PyPy), the C function it failed in (Perl_safesysmalloc, Rf_allocVector3)
 * says nothing to the person whose script it was: the site is "inside the
 * Perl interpreter, running grow.pl", the script read from the command
 * line the bundle recorded; where the walk stopped inside a library the
 * interpreter uses (the Boehm collector under Guile), the interpreter the
 * process runs.  CPython is not here: its own frames give the
 * line (python_stack.c).  A program that embeds an interpreter has frames
 * of its own, and they are its site.
 */
#include "answer.h"

#include <string.h>

/* X(object name prefix, what it is); the first prefix that matches counts,
 * and one that begins with '=' is the whole name */
#define FOR_EACH_INTERPRETER(X)                                                                   \
    X("perl", "the Perl interpreter")                                                             \
    X("libperl", "the Perl interpreter")                                                          \
    X("ruby", "the Ruby interpreter")                                                             \
    X("libruby", "the Ruby interpreter")                                                          \
    X("luajit", "LuaJIT")                                                                         \
    X("libluajit", "LuaJIT")                                                                      \
    X("lua", "the Lua interpreter")                                                               \
    X("liblua", "the Lua interpreter")                                                            \
    X("php", "the PHP interpreter")                                                               \
    X("libphp", "the PHP interpreter")                                                            \
    X("tclsh", "the Tcl interpreter")                                                             \
    X("libtcl", "the Tcl interpreter")                                                            \
    X("libR.", "the R interpreter")                                                               \
    X("=R", "the R interpreter")                                                                  \
    X("libguile", "the Guile interpreter")                                                        \
    X("guile", "the Guile interpreter")                                                           \
    X("beam", "the Erlang VM (BEAM)")                                                             \
    X("mono", "the Mono runtime")                                                                 \
    X("libmono", "the Mono runtime")                                                              \
    X("libcoreclr", "the .NET runtime")                                                           \
    X("libpypy", "the PyPy interpreter")                                                          \
    X("pypy", "the PyPy interpreter")                                                             \
    X("ocamlrun", "the OCaml bytecode interpreter")

static const struct {
    const char *prefix, *name;
} interpreters[] = {
#define AS_ROW(prefix, name) {prefix, name},
    FOR_EACH_INTERPRETER(AS_ROW)
#undef AS_ROW
};

const char *interpreter_of(const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t n = strlen(base);
    if (strstr(path, "/guile/") && n > 3 && !strcmp(base + n - 3, ".go"))
        return "the Guile interpreter"; /* Scheme Guile compiled, as ELF */
    for (size_t i = 0; i < sizeof interpreters / sizeof *interpreters; i++) {
        const char *prefix = interpreters[i].prefix;
        if (prefix[0] == '=' ? !strcmp(base, prefix + 1) : !strncmp(base, prefix, strlen(prefix)))
            return interpreters[i].name;
    }
    return NULL;
}

static int script_named(const char *arg)
{
    static const char *const extensions[] = {
        ".pl", ".pm", ".t", ".rb", ".lua", ".php", ".tcl", ".tk", ".R", ".r", ".scm",
        ".ss", ".exe", ".dll", ".py", ".lisp", ".lsp", ".erl", ".escript", ".js"};
    const char *dot = strrchr(arg, '.');
    for (size_t i = 0; dot && i < sizeof extensions / sizeof *extensions; i++)
        if (!strcmp(dot, extensions[i]))
            return 1;
    return 0;
}

/* The script the interpreter ran, from the recorded command line: the
 * first word that names a script file (its base name: the same in every
 * job's directory), R's --file=, BEAM's -s module, or a one-liner's -e. */
static int script_of(json_t *env, char *out, size_t cap)
{
    json_t *argv = json_object_get(json_object_get(env, "process"), "cmdline");
    for (size_t i = 1; i < json_array_size(argv); i++) {
        const char *arg = json_string_value(json_array_get(argv, i));
        const char *next = json_string_value(json_array_get(argv, i + 1));
        if (!arg)
            continue;
        if (!strncmp(arg, "--file=", 7))
            arg += 7;
        else if (!strcmp(arg, "-s") && next && next[0] != '-')
            arg = next; /* erl -s grow main: the module */
        else if (!strcmp(arg, "-e") || !strcmp(arg, "-E"))
            arg = "a one-line program (-e)";
        else if (arg[0] == '-' || !script_named(arg))
            continue;
        const char *slash = strrchr(arg, '/');
        snprintf(out, cap, "%s", slash ? slash + 1 : arg);
        return 1;
    }
    return 0;
}

int interpreter_site(json_t *frames, const module_table *mods, json_t *env, char *out,
                     size_t cap)
{
    const char *name = NULL;
    size_t i;
    json_t *f;
    json_array_foreach(frames, i, f) {
        const char *hex = json_string_value(f);
        uint64_t at = hex ? strtoull(hex, NULL, 16) : 0, bias;
        const char *path = at ? module_of(mods, at, &bias) : NULL;
        if (!path)
            continue;
        const char *here = interpreter_of(path);
        if (!here && !is_library_frame(path))
            return 0; /* a frame of the program's own: that is its site */
        if (here && !name)
            name = here;
    }
    /* the collector's frames alone (Guile's heap is the Boehm GC's, whose
     * own frames stop the walk): the interpreter the process runs */
    const char *exe = jstr(json_object_get(env, "process"), "exe");
    if (!name && exe && json_array_size(frames))
        name = interpreter_of(exe);
    if (!name)
        return 0;
    char script[256];
    if (script_of(env, script, sizeof script))
        snprintf(out, cap, "inside %s, running %s", name, script);
    else
        snprintf(out, cap, "inside %s", name);
    return 1;
}
