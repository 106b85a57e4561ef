/*
 * fake_cpython.c — a program that says it is CPython 3.15 (it exports the
 * symbols the preload looks up to read a thread's Python frames) but lays
 * out its thread state otherwise, as a build of another configuration or
 * a patch release that moved a field would: its _PyRuntime's own offsets
 * (the _Py_DebugOffsets that CPython 3.13 on keeps for debuggers) put the
 * innermost frame at 80, not at 72 where 3.15 keeps it, and the word at 72
 * points into a page that is never mapped.  A preload that went by the
 * version alone would follow that pointer on the first large allocation
 * and crash the program; one that checks the interpreter's own offsets
 * takes no Python frames.  Built with --export-dynamic, so the symbols are
 * found as a real interpreter's are.  Makes 4 blocks of 2 MiB (each large
 * enough for an event and its stack), prints "allocated 4", exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the offsets of CPython 3.15's own _Py_DebugOffsets, and the values it
 * holds there in a default build (mk/python_layouts.c prints both) */
enum {
    AT_FREE_THREADED = 16,
    AT_TS_FRAME = 208,
    AT_F_CODE = 328,
    AT_F_BACK = 320,
    AT_F_INSTR = 336,
    AT_F_OWNER = 352,
    AT_CO_CODE = 448,
    AT_CO_FILE = 384,
    AT_CO_NAME = 400,
    AT_OB_TYPE = 472,
    AT_STR_ASCII = 736,
};

/* CPython's names, exported as the interpreter exports them (the build
 * hides symbols by default) */
#define CPYTHON_NAME __attribute__((visibility("default")))
CPYTHON_NAME const char *Py_GetVersion(void);
CPYTHON_NAME int Py_IsInitialized(void);
CPYTHON_NAME void *PyGILState_GetThisThreadState(void);
CPYTHON_NAME int PyCode_Addr2Line(void *code, int offset);
CPYTHON_NAME _Alignas(64) unsigned char _PyRuntime[1024];
CPYTHON_NAME _Alignas(64) unsigned char PyCode_Type[512];

static _Alignas(64) unsigned char thread_state[256];

const char *Py_GetVersion(void)
{
    return "3.15.2 (main, Nov 27 2026, 00:00:00) [a build laid out otherwise]";
}

int Py_IsInitialized(void)
{
    return 1;
}

void *PyGILState_GetThisThreadState(void)
{
    return thread_state;
}

int PyCode_Addr2Line(void *code, int offset)
{
    (void)code;
    (void)offset;
    return -1;
}

static void put(unsigned char *base, size_t at, uint64_t value)
{
    memcpy(base + at, &value, sizeof value);
}

int main(void)
{
    memcpy(_PyRuntime, "xdebugpy", 8);
    put(_PyRuntime, 8, 0x030f02f0); /* PY_VERSION_HEX of 3.15.2 */
    put(_PyRuntime, AT_FREE_THREADED, 0);
    put(_PyRuntime, AT_TS_FRAME, 80); /* 3.15 keeps it at 72 */
    put(_PyRuntime, AT_F_CODE, 0);
    put(_PyRuntime, AT_F_BACK, 8);
    put(_PyRuntime, AT_F_INSTR, 56);
    put(_PyRuntime, AT_F_OWNER, 74);
    put(_PyRuntime, AT_CO_CODE, 208);
    put(_PyRuntime, AT_CO_FILE, 112);
    put(_PyRuntime, AT_CO_NAME, 128);
    put(_PyRuntime, AT_OB_TYPE, 8);
    put(_PyRuntime, AT_STR_ASCII, 40);
    put(thread_state, 72, 0x1000); /* below mmap_min_addr: never mapped */
    put(thread_state, 80, 0);      /* where this build keeps it: no frame */

    void *blocks[4];
    for (int i = 0; i < 4; i++) {
        blocks[i] = malloc(2u << 20);
        if (!blocks[i])
            return 2;
        memset(blocks[i], 1, 2u << 20);
    }
    printf("allocated 4\n");
    for (int i = 0; i < 4; i++)
        free(blocks[i]);
    return 0;
}
