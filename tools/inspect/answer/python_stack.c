/*
 * python_stack.c — the Python stack of the thread that failed, from the
 * bundle's python_traceback.txt: printed by `show`, and its innermost frame
 * of the program's own (not an installed package's, not the standard
 * library's; the innermost of theirs when it has none) is the site of a
 * Python failure for `show` and `triage`.  A bundle without the file (a
 * device allocation's failure: its call may let go of the GIL, so no
 * traceback is printed then) has the failing call's own Python frames in
 * stacks.json, which stand in for it.
 *
 * A notebook's cell is named as Jupyter names it, "In [2], line 4": the
 * kernel compiles each cell to <tmp>/ipykernel_<pid>/<hash>.py, and the
 * kernel extension (gpumemprof.notebook) writes each hash's execution
 * count into the custom metadata's "jupyter_cells".
 *
 * The file holds faulthandler's words at the failure (innermost frame
 * first, `File "f.py", line 4 in fn`), or the traceback Python printed
 * (outermost first, `File "f.py", line 4, in fn`, its source lines
 * between); only its first stack is read (the thread that failed).
 */
#include "answer.h"

#include <stdlib.h>
#include <string.h>

#define PYTHON_FRAMES_SHOWN 12

/* A stack's "python" array (stacks.json) as frames, innermost first; the
 * strings are the JSON's own. */
static void frames_from_json(json_t *frames, python_stack *st)
{
    size_t i;
    json_t *f;
    st->n = 0;
    json_array_foreach(frames, i, f) {
        const char *file = jstr(f, "file");
        int64_t line = 0;
        jint(f, "line", &line);
        if (!file || st->n == PYTHON_FRAMES_READ)
            continue;
        st->frames[st->n].file = file;
        st->frames[st->n].fn = jstr(f, "function");
        st->frames[st->n].line = (long)line;
        st->n++;
    }
}

/* A frame of an installed package or the standard library (numpy's
 * numeric.py), not of the program; or a Cython module's source (CuPy's
 * memory.pyx, named as its package built it: "cupy/cuda/memory.pyx"). */
static int is_library_file(const char *file)
{
    size_t n = strlen(file);
    return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
           strstr(file, "/lib/python3") || !strncmp(file, "<frozen ", 8) ||
           (n > 4 && (!strcmp(file + n - 4, ".pyx") || !strcmp(file + n - 4, ".pxd") ||
                      !strcmp(file + n - 4, ".pxi")));
}

/* 1 when file is a notebook cell's, its execution count in *number (0 when
 * the bundle does not say it) */
static int notebook_cell(const char *file, json_t *cells, int64_t *number)
{
    const char *dir = strstr(file, "/ipykernel_"), *base = strrchr(file, '/');
    if (!dir || !base || dir >= base)
        return 0;
    base++;
    size_t n = strlen(base);
    char key[32];
    if (n < 4 || n - 3 >= sizeof key || strcmp(base + n - 3, ".py") ||
        strspn(base, "0123456789") != n - 3)
        return 0;
    memcpy(key, base, n - 3);
    key[n - 3] = '\0';
    json_t *v = json_object_get(cells, key);
    *number = json_is_integer(v) ? json_integer_value(v) : 0;
    return 1;
}

/* "x.py:10" (the whole path with full_path), or a cell's "In [2], line 10" */
static void frame_place(const char *file, long line, json_t *cells, int full_path, char *out,
                        size_t cap)
{
    int64_t number;
    if (notebook_cell(file, cells, &number)) {
        if (number > 0)
            snprintf(out, cap, "In [%lld], line %ld", (long long)number, line);
        else
            snprintf(out, cap, "a notebook cell, line %ld", line);
        return;
    }
    const char *slash = full_path ? NULL : strrchr(file, '/');
    snprintf(out, cap, "%s:%ld", slash ? slash + 1 : file, line);
}

json_t *notebook_cells(bundle *b)
{
    return json_object_get(json_object_get(b->metadata, "custom_metadata"), "jupyter_cells");
}

void python_frame_place(bundle *b, const char *file, long line, char *out, size_t cap)
{
    frame_place(file, line, notebook_cells(b), 1, out, cap);
}

static int has_program_frame(const python_stack *st)
{
    for (size_t k = 0; k < st->n; k++)
        if (!is_library_file(st->frames[k].file))
            return 1;
    return 0;
}



/* The failing call's own Python frames (stacks.json, by the failed
 * request's stack_id), for a failure with no traceback file: a device
 * allocation's, whose call may have let go of the GIL.  Their strings are
 * copied into st->text, as a traceback's are in it. */
static int failed_call_frames(bundle *b, python_stack *st)
{
    const bundle_failure *f = bundle_failure_of(b);
    int64_t id = f && f->has_stack_id ? f->stack_id : 0;
    if (id <= 0)
        return -1;
    frames_from_json(json_object_get(stack_with_id(bundle_stacks(b), id), "python"), st);
    size_t need = 0;
    for (size_t k = 0; k < st->n; k++)
        need += strlen(st->frames[k].file) + (st->frames[k].fn ? strlen(st->frames[k].fn) : 0) + 2;
    char *at = st->text = st->n ? malloc(need) : NULL;
    for (size_t k = 0; at && k < st->n; k++) {
        const char *fn = st->frames[k].fn;
        st->frames[k].file = strcpy(at, st->frames[k].file);
        at += strlen(at) + 1;
        st->frames[k].fn = fn ? strcpy(at, fn) : NULL;
        at += fn ? strlen(fn) + 1 : 0;
    }
    if (!st->text) {
        st->n = 0;
        return -1;
    }
    return 0;
}

int python_stack_read(bundle *b, python_stack *st)
{
    size_t len;
    st->n = st->dropped = 0;
    const char *kept = bundle_text(b, "python_traceback.txt", &len);
    st->text = kept ? malloc(len + 1) : NULL; /* its own copy: cut into lines below */
    if (!st->text)
        return failed_call_frames(b, st);
    memcpy(st->text, kept, len + 1);
    size_t stacks = 0;
    int outermost_first = 0;
    for (char *line = st->text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* PyTorch's re-raise of a DataLoader worker's exception carries on
         * with the worker's own frames, innermost last: one stack */
        if (strstr(line, "most recent call") &&
            strcmp(line, "Original Traceback (most recent call last):")) {
            if (++stacks > 1)
                break; /* another thread's stack */
            outermost_first = strstr(line, "most recent call last") != NULL;
        }
        char *file = strstr(line, "File \"");
        char *end = file ? strstr(file + 6, "\", line ") : NULL;
        if (!file || !end)
            continue;
        *end = '\0';
        char *rest = end + 7, *in = strstr(rest, " in ");
        if (st->n == PYTHON_FRAMES_READ) { /* keep the innermost */
            st->dropped++;
            if (!outermost_first)
                continue;
            memmove(st->frames, st->frames + 1, sizeof st->frames - sizeof *st->frames);
            st->n--;
        }
        st->frames[st->n].file = file + 6;
        st->frames[st->n].line = strtol(rest, NULL, 10);
        st->frames[st->n].fn = in ? in + 4 : NULL;
        st->n++;
    }
    for (size_t i = 0; outermost_first && i < st->n / 2; i++) {
        __typeof__(st->frames[0]) t = st->frames[i];
        st->frames[i] = st->frames[st->n - 1 - i];
        st->frames[st->n - 1 - i] = t;
    }
    if (!st->n) {
        free(st->text);
        return -1;
    }
    /* a traceback of the framework's machinery alone (CuPy's pool printed
     * its Cython frame, one frame): the failing call's own frames, walked
     * from the interpreter, reach the program's line */
    python_stack *walked = has_program_frame(st) ? NULL : malloc(sizeof *walked);
    if (walked && failed_call_frames(b, walked) == 0) {
        if (has_program_frame(walked)) {
            free(st->text);
            *st = *walked;
        } else {
            free(walked->text);
        }
    }
    free(walked);
    return 0;
}

void print_python_stack(bundle *b)
{
    python_stack st;
    if (python_stack_read(b, &st) < 0)
        return;
    for (size_t k = 0; k < st.n && k < PYTHON_FRAMES_SHOWN; k++) {
        printf("%-18s", k ? "" : "Python stack:");
        char place[400];
        python_frame_place(b, st.frames[k].file, st.frames[k].line, place, sizeof place);
        print_clean(stdout, place, 400);
        if (st.frames[k].fn) {
            fputs(" in ", stdout);
            print_clean(stdout, st.frames[k].fn, 200);
        }
        puts(k ? "" : "  (innermost first)");
    }
    size_t more = (st.n > PYTHON_FRAMES_SHOWN ? st.n - PYTHON_FRAMES_SHOWN : 0) + st.dropped;
    if (more)
        printf("%-18s... %zu outer frame(s) more in python_traceback.txt\n", "", more);
    free(st.text);
}

/* The site of a stack's frames (innermost first): its innermost frame of
 * the program's own, "x.py:10 in extract_features"; with_caller, the next
 * one of the program's own outward too, when there is one: " (called from
 * x.py:17)". */
static int pick_site(const python_stack *st, json_t *cells, int with_caller, char *out,
                     size_t cap)
{
    size_t k = 0;
    while (k < st->n && is_library_file(st->frames[k].file))
        k++;
    int found = SITE_PROGRAM;
    if (k == st->n) {
        /* Every frame is the standard library's or a package's (python -m
         * of an installed tool): the innermost one that is not runpy's or
         * importlib's frozen glue, which every such stack ends in. */
        found = SITE_LIBRARY;
        for (k = 0; k + 1 < st->n && !strncmp(st->frames[k].file, "<frozen ", 8); k++)
            ;
    }
    char place[300];
    frame_place(st->frames[k].file, st->frames[k].line, cells, 0, place, sizeof place);
    int n = snprintf(out, cap, "%s%s%s", place, st->frames[k].fn ? " in " : "",
                     st->frames[k].fn ? st->frames[k].fn : "");
    size_t caller = k + 1;
    while (with_caller && caller < st->n && is_library_file(st->frames[caller].file))
        caller++;
    if (with_caller && found == SITE_PROGRAM && caller < st->n && n > 0 && (size_t)n < cap) {
        frame_place(st->frames[caller].file, st->frames[caller].line, cells, 0, place,
                    sizeof place);
        snprintf(out + n, cap - (size_t)n, " (called from %s)", place);
    }
    return found;
}

int python_site(bundle *b, char *out, size_t cap)
{
    python_stack st;
    if (python_stack_read(b, &st) < 0)
        return SITE_UNKNOWN;
    int found = pick_site(&st, notebook_cells(b), 0, out, cap);
    free(st.text);
    return found;
}

int python_frames_site(json_t *frames, json_t *cells, char *out, size_t cap)
{
    python_stack st = {.n = 0};
    frames_from_json(frames, &st);
    return st.n ? pick_site(&st, cells, 1, out, cap) : SITE_UNKNOWN;
}
