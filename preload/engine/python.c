/*
 * python.c — the Python stack of the thread that hit the OOM, for
 * python_traceback.txt.  In a CPython process (the interpreter's symbols are
 * found in the symbol tables, nothing links against it), when the failing thread holds
 * the GIL, CPython's own async-signal-safe dumper (_Py_DumpTraceback, the
 * one faulthandler uses: no allocation) writes the stack into a memfd at the
 * moment of the failure; the bundle copies it when it is written, perhaps
 * later and from another thread.  That stack also says whether the failure
 * happened under a worker loop that catches every exception (a pool's):
 * then the process does not die of it, whatever ends it later.
 */
#include "preload.h"
#include "worker_loops.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct {
    int state; /* atomic: 0 unknown, 1 CPython, 2 not */
    int (*is_initialized)(void);
    int (*holds_gil)(void);
    void *(*this_thread)(void);
    void (*dump)(int fd, void *tstate);
} py;

static int have_python(void)
{
    int state = __atomic_load_n(&py.state, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(state))
        return state == 1;
    *(void **)&py.is_initialized = gmp_global_symbol("Py_IsInitialized");
    *(void **)&py.holds_gil = gmp_global_symbol("PyGILState_Check");
    *(void **)&py.this_thread = gmp_global_symbol("PyGILState_GetThisThreadState");
    *(void **)&py.dump = gmp_global_symbol("_Py_DumpTraceback");
    state = py.is_initialized && py.holds_gil && py.this_thread && py.dump ? 1 : 2;
    __atomic_store_n(&py.state, state, __ATOMIC_RELEASE);
    return state == 1;
}

int gmp_python_traceback_fd(void)
{
    if (!have_python() || !py.is_initialized() || !py.holds_gil())
        return -1;
    void *tstate = py.this_thread();
    if (!tstate)
        return -1;
    int fd = memfd_create("gmp-python-traceback", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    py.dump(fd, tstate);
    if (lseek(fd, 0, SEEK_END) <= 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The pools' worker loops (worker_loops.h), by the file's end and the
 * function as the dumper writes a frame ("  File \"/usr/lib/python3.11/
 * multiprocessing/pool.py\", line 125 in worker"). */
#define WORKER_LOOP(file_end, function, name, owner, runs) {file_end, function, name},
static const struct worker_loop {
    const char *file_end, *function, *name;
} worker_loops[] = {GMP_FOR_EACH_WORKER_LOOP(WORKER_LOOP)};
#undef WORKER_LOOP

/* The worker loop one dumped frame line is in, or NULL. */
static const char *worker_loop_of(const char *line, size_t len)
{
    static const char file[] = "  File \"", mid[] = "\", line ";
    if (len < sizeof file || memcmp(line, file, sizeof file - 1))
        return NULL;
    const char *path = line + sizeof file - 1, *end = line + len, *close = NULL;
    for (const char *p = path; p + sizeof mid - 1 <= end; p++)
        if (!memcmp(p, mid, sizeof mid - 1))
            close = p; /* the last: a path may hold the same characters */
    const char *in = NULL;
    for (const char *p = close; p && p + 4 <= end; p++)
        if (!memcmp(p, " in ", 4))
            in = p + 4;
    if (!in)
        return NULL;
    for (size_t i = 0; i < sizeof worker_loops / sizeof *worker_loops; i++) {
        const struct worker_loop *w = &worker_loops[i];
        size_t tail = strlen(w->file_end), fn = strlen(w->function);
        if ((size_t)(close - path) >= tail && !memcmp(close - tail, w->file_end, tail) &&
            (size_t)(end - in) == fn && !memcmp(in, w->function, fn))
            return w->name;
    }
    return NULL;
}

const char *gmp_python_worker_loop(int traceback_fd)
{
    char buf[4096];
    size_t have = 0;
    off_t at = 0;
    int skipping = 0; /* the rest of a line longer than buf */
    while (traceback_fd > 0) {
        ssize_t got = pread(traceback_fd, buf + have, sizeof buf - have, at);
        if (got <= 0)
            return NULL;
        at += got;
        have += (size_t)got;
        size_t start = 0;
        for (char *nl; (nl = memchr(buf + start, '\n', have - start)) != NULL;
             start = (size_t)(nl - buf) + 1) {
            size_t len = (size_t)(nl - buf) - start;
            const char *loop = skipping ? NULL : worker_loop_of(buf + start, len);
            skipping = 0;
            if (loop)
                return loop;
        }
        if (start == 0 && have == sizeof buf) { /* one line fills it: passed over */
            skipping = 1;
            have = 0;
            continue;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    return NULL;
}
