/*
 * python_frames.c — the Python lines of an allocation.  A large host or a
 * device allocation made from Python (numpy's arrays, torch's tensors) is
 * named by the C code of the library that made it; the user wants the line
 * of their own that asked.  So the stack of such an allocation (stack.c)
 * also holds the calling thread's Python frames, innermost first, each as
 * GMP_PYTHON_FRAME_TAG | id of the table below.
 *
 * The frames are read from the interpreter's own structures, as its
 * faulthandler reads them: no Python API call, no reference taken, no
 * allocation, no GIL (a thread's frame chain is changed only by that
 * thread, which is here, inside an allocation).  Where a structure lies
 * differs by CPython version: one line of FOR_EACH_PYTHON_LAYOUT per
 * version (3.9 to 3.15), each printed by mk/python_layouts.c built against
 * that version's own headers; another version, a free-threading build
 * (its objects have another header) and, from 3.13, a build whose own
 * offsets (_Py_DebugOffsets) differ from its line, is left alone.  Every
 * code object is checked to be one (its type is PyCode_Type) before it is
 * read, and a frame that holds anything else is passed over.
 *
 * The table interns (code object, instruction offset) pairs and names each
 * the first time it is seen, while its code object is alive: file, line
 * (PyCode_Addr2Line: no allocation) and function (the qualified name where
 * the code object has one).  A code object freed and another made at its
 * address is told apart by its file and name objects too.  Lock-free, as
 * stack.c's table is (interned.c): a slot is claimed by CAS on its key's
 * hash and published by a ready flag.
 */
#include "interned.h"
#include "preload.h"

#include <string.h>

/* How one CPython version keeps its frames.  walk: 1 frame objects (3.9,
 * 3.10: PyThreadState.frame, PyFrameObject.f_back, an int f_lasti), 2
 * interpreter frames (3.11-3.15: _PyInterpreterFrame.previous and an
 * instruction pointer into the code object).  Offsets in bytes; -1: none.
 *   ts_frame     the thread state's innermost frame (3.9, 3.10, 3.13-3.15)
 *   ts_cframe    or its _PyCFrame (3.11, 3.12), then that one's frame
 *   f_code, f_back, f_instr (f_lasti, or prev_instr / instr_ptr)
 *   lasti_scale  f_lasti to bytes: 1 (3.9), 2 (3.10: code units)
 *   f_owner, owner_gen  the frame's owner, a generator's value
 *   owner_cstack the first owner of frames not of Python code (entry
 *                frames and C frames: that value and those above it)
 *   co_code, co_first   where instructions start, _co_firsttraceable
 *   co_file, co_name    co_filename; co_qualname, else co_name
 *   str_ascii, str_compact  sizeof PyASCIIObject, PyCompactUnicodeObject
 *   code_tags    low bits of f_code that tag the reference, not the address
 *                (3.14's and 3.15's _PyStackRef: Py_TAG_BITS; their locals
 *                are tagged alike)
 *   f_locals     the frame's locals, its arguments first (f_localsplus)
 *   long_digit   an int's first 30-bit digit; its size is the word at 16
 *                (ob_size to 3.11; from 3.12 lv_tag: the sign in its low
 *                two bits, the number of digits from bit 3) */
#define FOR_EACH_PYTHON_LAYOUT(X)                                                                 \
    /* minor walk ts_frame ts_cframe cf_frame f_code f_back f_instr lasti_scale f_owner          \
     * owner_gen owner_cstack co_code co_first co_file co_name str_ascii str_compact         \
     * code_tags f_locals long_digit */                                                       \
    X(9, 1, 24, -1, -1, 32, 24, 104, 1, -1, -1, -1, -1, -1, 104, 112, 48, 72, 0, 360, 24)         \
    X(10, 1, 24, -1, -1, 32, 24, 96, 2, -1, -1, -1, -1, -1, 104, 112, 48, 72, 0, 352, 24)         \
    X(11, 2, -1, 56, 8, 32, 48, 56, 0, 69, 1, -1, 184, 168, 112, 128, 48, 72, 0, 72, 24)          \
    X(12, 2, -1, 56, 0, 0, 8, 56, 0, 70, 1, 3, 192, 176, 112, 128, 40, 56, 0, 72, 24)             \
    X(13, 2, 72, -1, -1, 0, 8, 56, 0, 70, 1, 3, 200, 184, 112, 128, 40, 56, 0, 72, 24)            \
    X(14, 2, 72, -1, -1, 0, 8, 56, 0, 74, 1, 3, 208, 192, 112, 128, 40, 56, 3, 80, 24)            \
    X(15, 2, 72, -1, -1, 0, 8, 56, 0, 74, 1, 3, 208, 192, 112, 128, 40, 56, 3, 80, 24)

typedef struct py_layout {
    int minor, walk, ts_frame, ts_cframe, cf_frame, f_code, f_back, f_instr, lasti_scale,
        f_owner, owner_gen, owner_cstack, co_code, co_first, co_file, co_name, str_ascii,
        str_compact, code_tags, f_locals, long_digit;
} py_layout;

#define AS_LAYOUT(...) {__VA_ARGS__},
static const py_layout layouts[] = {FOR_EACH_PYTHON_LAYOUT(AS_LAYOUT)};

/* From 3.13 on, the interpreter describes itself: _PyRuntime starts with
 * _Py_DebugOffsets, the offsets that debuggers reading a process from
 * outside go by.  Its own layout is fixed within a minor version; one line
 * per version says where in it lie the offsets its line above also gives
 * (mk/python_layouts.c prints both).  A build whose offsets differ from its
 * version's line (a field moved in a patch release, another build
 * configuration, a free-threading build that says nothing of it in its
 * version) gets no Python frames: a walk by the wrong offsets would follow
 * pointers that are not pointers.
 *   free_threaded  its flag, 0 here; the rest as FOR_EACH_PYTHON_LAYOUT's
 *   ob_type        PyObject's type pointer, read at 8 by is_code */
#define FOR_EACH_DEBUG_OFFSETS(X)                                                                 \
    /* minor free_threaded ts_frame f_code f_back f_instr f_owner co_code co_file co_name         \
     * ob_type str_ascii f_locals */                                                              \
    X(13, 16, 184, 240, 232, 248, 264, 344, 280, 296, 360, 560, 256)                              \
    X(14, 16, 208, 264, 256, 272, 288, 384, 320, 336, 408, 640, 280)                              \
    X(15, 16, 208, 328, 320, 336, 352, 448, 384, 400, 472, 736, 344)

typedef struct debug_offsets_at {
    int minor, free_threaded, ts_frame, f_code, f_back, f_instr, f_owner, co_code, co_file,
        co_name, ob_type, str_ascii, f_locals;
} debug_offsets_at;

static const debug_offsets_at debug_offsets[] = {FOR_EACH_DEBUG_OFFSETS(AS_LAYOUT)};
#undef AS_LAYOUT

#define MAX_WALK 256 /* frames walked at most: a deeper chain is cut */

/* 1 when the running interpreter's own offsets agree with its line l, or
 * l is older than 3.13 (nothing to check against); 0 when they differ,
 * when _PyRuntime does not describe itself as l's version, or when l has
 * no FOR_EACH_DEBUG_OFFSETS line.  _PyRuntime's offsets are static data,
 * set when the interpreter was built: readable before it starts. */
static int agrees_with_runtime(const py_layout *l)
{
    const debug_offsets_at *at = NULL;
    for (size_t i = 0; i < sizeof debug_offsets / sizeof *debug_offsets; i++)
        if (debug_offsets[i].minor == l->minor)
            at = &debug_offsets[i];
    if (!at)
        return l->minor < debug_offsets[0].minor;
    const char *runtime = gmp_global_symbol("_PyRuntime");
    uint64_t version;
    if (!runtime || memcmp(runtime, "xdebugpy", 8))
        return 0;
    memcpy(&version, runtime + 8, sizeof version); /* PY_VERSION_HEX */
    if (version >> 24 != 3 || ((version >> 16) & 0xff) != (uint64_t)l->minor)
        return 0;
    const int pairs[][2] = {{at->free_threaded, 0},   {at->ts_frame, l->ts_frame},
                            {at->f_code, l->f_code},   {at->f_back, l->f_back},
                            {at->f_instr, l->f_instr}, {at->f_owner, l->f_owner},
                            {at->co_code, l->co_code}, {at->co_file, l->co_file},
                            {at->co_name, l->co_name}, {at->ob_type, 8},
                            {at->str_ascii, l->str_ascii}, {at->f_locals, l->f_locals}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        uint64_t offset;
        memcpy(&offset, runtime + pairs[i][0], sizeof offset);
        if (offset != (uint64_t)pairs[i][1])
            return 0;
    }
    return 1;
}

static struct {
    int state; /* atomic: 0 unknown, 1 a known CPython, 2 not, 3 being found out */
    const py_layout *layout;
    const void *code_type, *long_type;
    int (*is_initialized)(void);
    void *(*this_thread)(void);
    int (*addr2line)(void *code, int offset);
} py;

static int have_python(void)
{
    int state = __atomic_load_n(&py.state, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(state))
        return state == 1;
    /* one thread finds out; another meanwhile takes no Python frames */
    if (!__atomic_compare_exchange_n(&py.state, &state, 3, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_ACQUIRE))
        return state == 1;
    const char *(*version)(void);
    *(void **)&version = gmp_global_symbol("Py_GetVersion");
    *(void **)&py.is_initialized = gmp_global_symbol("Py_IsInitialized");
    *(void **)&py.this_thread = gmp_global_symbol("PyGILState_GetThisThreadState");
    *(void **)&py.addr2line = gmp_global_symbol("PyCode_Addr2Line");
    py.code_type = gmp_global_symbol("PyCode_Type");
    py.long_type = gmp_global_symbol("PyLong_Type");
    state = 2;
    const char *v = version ? version() : NULL; /* "3.11.2 (main, ...": a static buffer */
    /* "3.13.0 experimental free-threading build (main, ...": no line fits */
    if (v && v[0] == '3' && v[1] == '.' && !strstr(v, "free-threading") && py.is_initialized &&
        py.this_thread && py.addr2line && py.code_type) {
        int minor = 0;
        for (const char *p = v + 2; *p >= '0' && *p <= '9' && minor < 1000; p++)
            minor = minor * 10 + (*p - '0');
        for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
            if (layouts[i].minor == minor && agrees_with_runtime(&layouts[i])) {
                py.layout = &layouts[i];
                state = 1;
            }
    }
    __atomic_store_n(&py.state, state, __ATOMIC_RELEASE);
    return state == 1;
}

static const void *ptr_at(const void *base, int offset)
{
    const void *p;
    memcpy(&p, (const char *)base + offset, sizeof p);
    return p;
}

static int is_code(const void *code)
{
    return code && !((uintptr_t)code & 7) && ptr_at(code, 8) == py.code_type; /* ob_type */
}

/* ---- the rank of a torch.multiprocessing.spawn process ------------------ */

/* torch.multiprocessing.spawn runs each process of its world as
 * _wrap(fn, i, args, error_file), which calls the program's fn(i, *args):
 * i is the process's index, the rank the program gives init_process_group
 * in a spawn of one node.  Nothing in the environment says it (RANK is
 * torchrun's), so without it a bundle names the process by pid only.
 * While _wrap runs, its frame lies under every Python stack of the
 * process's main thread: the first walk that passes it reads i, once. */
static int spawn_index_read; /* atomic: 1 once tried */

static int is_spawn_wrap(const gmp_python_frame *named)
{
    static const char file[] = "torch/multiprocessing/spawn.py";
    size_t n = strlen(named->file), k = sizeof file - 1;
    return !strcmp(named->function, "_wrap") && n > k && named->file[n - k - 1] == '/' &&
           !strcmp(named->file + n - k, file);
}

/* The value of a Python int that fits one digit (below 2^30), or -1 for
 * anything else (another type, a negative or larger int, no object). */
static long small_int(const void *o)
{
    const py_layout *l = py.layout;
    if (!o || ((uintptr_t)o & 7) || !py.long_type || ptr_at(o, 8) != py.long_type)
        return -1; /* an exact int: a bool or a subclass is not the index */
    uint64_t size;
    uint32_t digit;
    memcpy(&size, (const char *)o + 16, sizeof size);
    memcpy(&digit, (const char *)o + l->long_digit, sizeof digit);
    if (l->minor < 12)
        return size == 0 ? 0 : size == 1 ? (long)digit : -1;
    unsigned sign = (unsigned)(size & 3);
    uint64_t digits = size >> 3;
    return sign == 1 ? 0 : sign == 0 && digits == 1 ? (long)digit : -1;
}

/* f, a running _wrap's frame: its second local, i, is the spawn index. */
static void read_spawn_index(const void *f)
{
    int none = 0;
    if (!__atomic_compare_exchange_n(&spawn_index_read, &none, 1, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
        return;
    const py_layout *l = py.layout;
    const void *i = (const void *)((uintptr_t)ptr_at(f, l->f_locals + 8) &
                                   ~(uintptr_t)l->code_tags);
    long index = small_int(i);
    if (index >= 0 && index < (1L << 20))
        gmp_spawn_index_note(index);
}

/* ---- the table of frames ----------------------------------------------- */

#define TABLE_SLOTS 8192 /* distinct (code, offset) pairs named; more get none */

typedef struct frame_entry {
    uint64_t hash; /* atomic: the table's (interned.c) */
    const void *code, *file_obj, *name_obj;
    uint32_t offset;
    uint32_t ready; /* atomic: the rest is whole */
    uint32_t spawn_wrap; /* torch.multiprocessing.spawn's _wrap: see spawn_index */
    gmp_python_frame named;
} frame_entry;

GMP_INTERNED(frames_named, frame_entry, TABLE_SLOTS);

/* A str object's text as UTF-8 (compact strings: all that code objects
 * hold); "?" for anything else. */
static void str_text(const void *s, char *out, size_t cap)
{
    const py_layout *l = py.layout;
    gmp_strlcpy(out, "?", cap);
    if (!s || ((uintptr_t)s & 7))
        return;
    int64_t length;
    uint32_t state;
    memcpy(&length, (const char *)s + 16, sizeof length);
    memcpy(&state, (const char *)s + 32, sizeof state);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4))
        return;
    const unsigned char *data = (const unsigned char *)s + (ascii ? l->str_ascii : l->str_compact);
    size_t o = 0;
    for (int64_t i = 0; i < length; i++) {
        uint32_t c = kind == 1   ? data[i]
                     : kind == 2 ? ((const uint16_t *)(const void *)data)[i]
                                 : ((const uint32_t *)(const void *)data)[i];
        char enc[4];
        size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (n == 1) {
            enc[0] = (char)c;
        } else {
            for (size_t k = n - 1; k > 0; k--, c >>= 6)
                enc[k] = (char)(0x80 | (c & 0x3f));
            enc[0] = (char)((n == 2 ? 0xc0 : n == 3 ? 0xe0 : 0xf0) | c);
        }
        if (o + n + 1 > cap)
            break; /* cut at a whole character */
        memcpy(out + o, enc, n);
        o += n;
    }
    out[o] = '\0';
}

/* The id of (code, offset), named now if new; 0 when the table is full. */
static uint32_t frame_id(frame_entry *t, const void *code, uint32_t offset)
{
    const py_layout *l = py.layout;
    const void *file_obj = ptr_at(code, l->co_file), *name_obj = ptr_at(code, l->co_name);
    uint64_t hash = GMP_INTERNED_HASH_START;
    uint64_t key[4] = {(uintptr_t)code, offset, (uintptr_t)file_obj, (uintptr_t)name_obj};
    for (int i = 0; i < 4; i++)
        hash = gmp_interned_mix(hash, key[i]);
    int claimed;
    uint32_t id = gmp_interned_find(&frames_named, t, gmp_interned_hash_done(hash), &claimed);
    if (claimed) {
        frame_entry *e = &t[id - 1];
        e->code = code;
        e->file_obj = file_obj;
        e->name_obj = name_obj;
        e->offset = offset;
        str_text(file_obj, e->named.file, sizeof e->named.file);
        str_text(name_obj, e->named.function, sizeof e->named.function);
        int line = py.addr2line((void *)code, (int)offset);
        e->named.line = line > 0 ? (uint32_t)line : 0;
        e->spawn_wrap = is_spawn_wrap(&e->named);
        __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
        gmp_interned_made(&frames_named, id);
        gmp_python_frame_ring_note(id, &e->named);
    }
    return id;
}

/* ---- the walk ----------------------------------------------------------- */

/* The innermost frame of the thread state, or NULL. */
static const void *innermost(const py_layout *l, const void *ts)
{
    if (l->ts_frame >= 0)
        return ptr_at(ts, l->ts_frame);
    const void *cframe = ptr_at(ts, l->ts_cframe);
    return cframe && !((uintptr_t)cframe & 7) ? ptr_at(cframe, l->cf_frame) : NULL;
}

/* A frame's code object and offset in bytes; 0 when the frame is not (yet)
 * running Python code: a C shim, or one whose first instruction has not
 * been reached. */
static int frame_place(const py_layout *l, const void *f, const void **code, uint32_t *offset)
{
    *code = (const void *)((uintptr_t)ptr_at(f, l->f_code) & ~(uintptr_t)l->code_tags);
    if (!is_code(*code))
        return 0;
    if (l->walk == 1) {
        int lasti;
        memcpy(&lasti, (const char *)f + l->f_instr, sizeof lasti);
        *offset = lasti > 0 ? (uint32_t)lasti * (uint32_t)l->lasti_scale : 0;
        return 1;
    }
    unsigned char owner = *((const unsigned char *)f + l->f_owner);
    if (l->owner_cstack >= 0 && owner >= l->owner_cstack)
        return 0;
    const char *start = (const char *)*code + l->co_code;
    const char *instr = ptr_at(f, l->f_instr);
    int first;
    memcpy(&first, (const char *)*code + l->co_first, sizeof first);
    if (owner != l->owner_gen && instr < start + 2 * (int64_t)first)
        return 0; /* incomplete: its prologue still runs */
    if (instr < start || instr - start > (1 << 30))
        return 0;
    *offset = (uint32_t)(instr - start);
    return 1;
}

uint32_t gmp_python_frames(uint64_t *out, uint32_t max, int may_map)
{
    if (!max || !have_python() || !py.is_initialized())
        return 0;
    const py_layout *l = py.layout;
    const void *ts = py.this_thread();
    frame_entry *t =
        !ts || ((uintptr_t)ts & 7) ? NULL : gmp_interned_entries(&frames_named, may_map);
    if (!t)
        return 0;
    uint32_t n = 0;
    const void *f = innermost(l, ts);
    for (int walked = 0; f && !((uintptr_t)f & 7) && n < max && walked < MAX_WALK; walked++) {
        const void *code;
        uint32_t offset;
        if (frame_place(l, f, &code, &offset)) {
            uint32_t id = frame_id(t, code, offset);
            if (id) {
                out[n++] = GMP_PYTHON_FRAME_TAG | id;
                if (!__atomic_load_n(&spawn_index_read, __ATOMIC_RELAXED) &&
                    __atomic_load_n(&t[id - 1].ready, __ATOMIC_ACQUIRE) &&
                    GMP_UNLIKELY(t[id - 1].spawn_wrap))
                    read_spawn_index(f);
            }
        }
        f = ptr_at(f, l->f_back);
    }
    return n;
}

uint64_t gmp_python_stack_hash(void)
{
    if (!have_python() || !py.is_initialized())
        return 0;
    const py_layout *l = py.layout;
    const void *ts = py.this_thread();
    if (!ts || ((uintptr_t)ts & 7))
        return 0;
    uint64_t hash = GMP_INTERNED_HASH_START;
    int frames = 0;
    const void *f = innermost(l, ts);
    for (int walked = 0; f && !((uintptr_t)f & 7) && walked < MAX_WALK; walked++) {
        const void *code;
        uint32_t offset;
        if (frame_place(l, f, &code, &offset)) { /* by line: `f() or f()` asks once */
            hash = gmp_interned_mix(hash, (uintptr_t)code);
            hash = gmp_interned_mix(hash, (uint32_t)py.addr2line((void *)code, (int)offset));
            frames++;
        }
        f = ptr_at(f, l->f_back);
    }
    return frames ? hash | 1 : 0;
}

int gmp_python_frame_lookup(uint32_t id, gmp_python_frame *out, void *arg)
{
    (void)arg;
    frame_entry *t = gmp_interned_entries(&frames_named, 0);
    if (!t || id == 0 || id > TABLE_SLOTS || !__atomic_load_n(&t[id - 1].ready, __ATOMIC_ACQUIRE))
        return -1;
    *out = t[id - 1].named;
    return 0;
}

void gmp_python_frames_foreach_known(void (*fn)(uint32_t id, const gmp_python_frame *f,
                                                void *arg),
                                     void *arg)
{
    frame_entry *t = gmp_interned_entries(&frames_named, 0);
    uint32_t n = gmp_interned_made_count(&frames_named);
    for (uint32_t k = 0; t && k < n; k++) {
        uint32_t id = gmp_interned_made_at(&frames_named, k);
        if (id && __atomic_load_n(&t[id - 1].ready, __ATOMIC_ACQUIRE))
            fn(id, &t[id - 1].named, arg);
    }
}
