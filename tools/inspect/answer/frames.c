/*
 * frames.c — whose a native frame is, and its name for a person.  A frame
 * is the program's own site unless it lies in the C library, the loader,
 * an allocator, a GPU runtime, an interpreter (interpreter.c) or us, or in
 * a language runtime's allocation machinery compiled into the program
 * (C++'s std:: templates, Rust's alloc::, OCaml's caml_ runtime, nvcc's
 * static cudart).  Its name: "fill (gpu_oom.c:70)" where the binary is on
 * this machine (symbols.c), OCaml's as its programmer wrote it
 * ("Grow.grow"), else module+offset, the same wherever the process ran.
 * sites.c, show's "Failed at" and triage read frames through these.
 */
#include "answer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Frames in these are the allocator, the loader, an interpreter's eval
 * loop, the glue of a foreign call (libffi, under ctypes and cffi) or us,
 * not the program's site.  The python executables hold the whole
 * interpreter when it is linked in statically. */
int is_library_frame(const char *path)
{
    static const char *const libs[] = {
        "libc.so", "libm.so", "libpthread", "libdl.so", "ld-linux", "ld-musl", "libcudart",
        "libcuda.so", "libamdhip64", "libgpumemprof", "libstdc++", "libpython", "python",
        "libtorch", "libc10", "libjemalloc", "libtcmalloc", "libmimalloc", "libgc.so", "libffi",
        "_ctypes",
        "_cffi_backend"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strncmp(base, libs[i], strlen(libs[i])))
            return 1;
    return interpreter_of(path) != NULL;
}

/* A frame of a language runtime's allocation machinery compiled into the
 * program itself (C++'s inlined std:: templates and operator new, Rust's
 * alloc:: and its __rust_alloc glue): where the runtime noticed the
 * failure, not the program's own site. */
int runtime_allocation_name(const char *fn)
{
    static const char *const machinery[] = {
        "std::", "__gnu_cxx::", "operator new", "alloc::", "<alloc::", "__rust_", "__rdl_",
        "__rg_", "core::", "<core::", "<std::",
        /* OCaml's runtime, linked into each native program: its heap grows
         * in caml_alloc_for_heap, called from expand_heap */
        "caml_", "expand_heap",
        /* nvcc's static cudart: the runtime's API and its own functions */
        "libcudart_static_", "cudaMalloc", "cudaHostAlloc"};
    for (size_t i = 0; i < sizeof machinery / sizeof *machinery; i++)
        if (!strncmp(fn, machinery[i], strlen(machinery[i])))
            return 1;
    /* Rust's handler of a failed allocation: that name alone (a program
     * may be called rust_oom, and its rust_oom::main is its own) */
    if (!strcmp(fn, "rust_oom"))
        return 1;
    /* a Rust trait's method as the standard library implements it for a
     * type: "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem" */
    static const char *const traits[] = {" as alloc::", " as core::", " as std::"};
    const char *qualifier_end = fn[0] == '<' ? strstr(fn, ">::") : NULL;
    for (size_t i = 0; qualifier_end && i < sizeof traits / sizeof *traits; i++) {
        const char *at = strstr(fn, traits[i]);
        if (at && at < qualifier_end)
            return 1;
    }
    /* Rust's v0 mangling, where no demangler named it: a path
     * through the crates alloc, std or core (crate roots "C<hash>_5alloc") */
    return !strncmp(fn, "_R", 2) &&
           (strstr(fn, "_5alloc") || strstr(fn, "_3std") || strstr(fn, "_4core"));
}

int runtime_allocation_frame(int dirfd, const char *path, uint64_t offset)
{
    char fn[256], file[PATH_MAX];
    int lineno;
    return symbolise(dirfd, path, offset, fn, sizeof fn, file, sizeof file, &lineno) == 0 &&
           runtime_allocation_name(fn);
}

/* OCaml's native symbols as its programmers write the function:
 * "camlGrow__grow_268" -> "Grow.grow", "camlA__B__f_12" -> "A.B.f". */
static void ocaml_name(char *fn, size_t cap)
{
    if (strncmp(fn, "caml", 4) || fn[4] < 'A' || fn[4] > 'Z' || !strstr(fn, "__"))
        return;
    char name[256];
    size_t n = 0;
    for (const char *p = fn + 4; *p && n + 1 < sizeof name; p++) {
        if (p[0] == '_' && p[1] == '_') {
            name[n++] = '.';
            p++;
        } else {
            name[n++] = *p;
        }
    }
    size_t whole = n;
    while (n && name[n - 1] >= '0' && name[n - 1] <= '9')
        n--;
    if (n < whole && n && name[n - 1] == '_') /* the stamp "_268" */
        n--;
    else
        n = whole;
    name[n] = '\0';
    snprintf(fn, cap, "%s", name);
}

/* "fill (gpu_oom.c:70)" with libdw, else "gpu_oom_cuda+0x1983". */
void name_frame(int dirfd, const char *path, uint64_t offset, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, cap, "%s+0x%llx", base, (unsigned long long)offset);
    char fn[256], file[PATH_MAX];
    int lineno;
    if (symbolise(dirfd, path, offset, fn, sizeof fn, file, sizeof file, &lineno) < 0)
        return;
    ocaml_name(fn, sizeof fn);
    const char *slash = strrchr(file, '/');
    if (file[0])
        snprintf(out, cap, "%s (%s:%d)", fn, slash ? slash + 1 : file, lineno);
    else
        snprintf(out, cap, "%s (%s)", fn, base);
}

