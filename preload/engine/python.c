/*
 * python.c — the Python stack of the thread that hit the OOM, for
 * python_traceback.txt.  In a CPython process (the interpreter's symbols are
 * found in the symbol tables, nothing links against it), when the failing thread holds
 * the GIL, CPython's own async-signal-safe dumper (_Py_DumpTraceback, the
 * one faulthandler uses: no allocation) writes the stack into a memfd at the
 * moment of the failure; the bundle copies it when it is written, perhaps
 * later and from another thread.
 */
#include "preload.h"

#include <dlfcn.h>
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
