/*
 * python_layouts.c — prints preload/engine/python_frames.c's FOR_EACH_PYTHON_LAYOUT
 * line for the CPython whose headers it is built against, from the
 * structures themselves (internal headers included), so a new version's
 * line is measured, not guessed; from 3.13 on, a second line, for
 * FOR_EACH_DEBUG_OFFSETS (where that version's _Py_DebugOffsets keeps
 * the same offsets):
 *
 *   inc=$(python3.15 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
 *   cc -I"$inc" -I"$inc/internal" -o layouts mk/python_layouts.c && ./layouts
 *
 * Not built by make: the lines it printed for 3.9-3.15 are in the table.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030e0000
#include "internal/pycore_debug_offsets.h"
#include "internal/pycore_interpframe_structs.h"
#include "internal/pycore_stackref.h"
#elif PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030d0000
#include "internal/pycore_runtime.h" /* _Py_DebugOffsets */
#endif
#else
#include "frameobject.h"
#endif

int main(void)
{
    int minor = PY_MINOR_VERSION;
#if PY_VERSION_HEX < 0x030b0000
    /* frame objects: f_lasti in bytes (3.9) or code units (3.10) */
    printf("X(%d, 1, %zu, -1, -1, %zu, %zu, %zu, %d, -1, -1, -1, -1, -1, ", minor,
           offsetof(PyThreadState, frame), offsetof(PyFrameObject, f_code),
           offsetof(PyFrameObject, f_back), offsetof(PyFrameObject, f_lasti),
           PY_VERSION_HEX >= 0x030a0000 ? 2 : 1);
    printf("%zu, %zu, ", offsetof(PyCodeObject, co_filename), offsetof(PyCodeObject, co_name));
#else
#if PY_VERSION_HEX < 0x030d0000
    printf("X(%d, 2, -1, %zu, %zu, %zu, %zu, %zu, 0, %zu, %d, ", minor,
           offsetof(PyThreadState, cframe), offsetof(_PyCFrame, current_frame),
           offsetof(_PyInterpreterFrame, f_code), offsetof(_PyInterpreterFrame, previous),
           offsetof(_PyInterpreterFrame, prev_instr), offsetof(_PyInterpreterFrame, owner),
           FRAME_OWNED_BY_GENERATOR);
#else
    printf("X(%d, 2, %zu, -1, -1, %zu, %zu, %zu, 0, %zu, %d, ", minor,
           offsetof(PyThreadState, current_frame), offsetof(_PyInterpreterFrame, f_executable),
           offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, instr_ptr),
           offsetof(_PyInterpreterFrame, owner), FRAME_OWNED_BY_GENERATOR);
#endif
#if PY_VERSION_HEX >= 0x030e0000
    /* the entry frames, renamed, and below them a new owner of C frames */
    printf("%d, ", FRAME_OWNED_BY_INTERPRETER);
#elif PY_VERSION_HEX >= 0x030c0000
    printf("%d, ", FRAME_OWNED_BY_CSTACK);
#else
    printf("-1, ");
#endif
    printf("%zu, %zu, %zu, %zu, ", offsetof(PyCodeObject, co_code_adaptive),
           offsetof(PyCodeObject, _co_firsttraceable), offsetof(PyCodeObject, co_filename),
           offsetof(PyCodeObject, co_qualname));
#endif
    printf("%zu, %zu, ", sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject));
#if PY_VERSION_HEX >= 0x030e0000
    printf("%d, ", (int)Py_TAG_BITS); /* f_executable is a tagged _PyStackRef */
#else
    printf("0, ");
#endif
    /* a frame's locals (its arguments first), and an int's first digit */
#if PY_VERSION_HEX < 0x030b0000
    printf("%zu, ", offsetof(PyFrameObject, f_localsplus));
#else
    printf("%zu, ", offsetof(_PyInterpreterFrame, localsplus));
#endif
#if PY_VERSION_HEX >= 0x030c0000
    printf("%zu)\n", offsetof(PyLongObject, long_value.ob_digit));
#else
    printf("%zu)\n", offsetof(PyLongObject, ob_digit));
#endif
#if PY_VERSION_HEX >= 0x030d0000
    /* FOR_EACH_DEBUG_OFFSETS's line: where this version's _Py_DebugOffsets
     * keeps offsets that the line above also gives */
#define AT(field) offsetof(_Py_DebugOffsets, field)
    printf("X(%d, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu)\n", minor,
           AT(free_threaded), AT(thread_state.current_frame), AT(interpreter_frame.executable),
           AT(interpreter_frame.previous), AT(interpreter_frame.instr_ptr),
           AT(interpreter_frame.owner), AT(code_object.co_code_adaptive),
           AT(code_object.filename), AT(code_object.qualname), AT(pyobject.ob_type),
           AT(unicode_object.asciiobject_size), AT(interpreter_frame.localsplus));
#endif
    return 0;
}
