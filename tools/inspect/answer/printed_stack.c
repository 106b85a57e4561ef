/*
 * printed_stack.c — the failure's site from the stack a runtime printed
 * after its out-of-memory line (the bundle's printed_stack.txt, kept by
 * the preload): the JVM's "\tat Heap.fill(Heap.java:5)", V8's "    at grow
 * (/srv/app/load.js:3:46)".  Its innermost frame of the program's own (not
 * the JDK's classes, not Node's own modules nor a package's from
 * node_modules) is "Failed at" for `show` and `triage`, named as a Python
 * frame is: "Heap.java:5 in Heap.fill", "load.js:3 in grow".  The file is
 * the program's output: a line that is not a frame of either form names
 * nothing.
 */
#include "answer.h"

#include <stdlib.h>
#include <string.h>

typedef struct printed_frame {
    const char *fn, *file; /* not NUL-terminated: fn_len, file_len */
    size_t fn_len, file_len;
    long line;
    int library;
} printed_frame;

static int starts(const char *s, size_t n, const char *with)
{
    size_t w = strlen(with);
    return n >= w && !memcmp(s, with, w);
}

/* The JVM's classes and the JVM languages' own libraries. */
static int jdk_class(const char *fn, size_t n)
{
    static const char *const packages[] = {"java.", "javax.", "jdk.", "sun.", "com.sun.",
                                           "kotlin.", "scala."};
    for (size_t i = 0; i < sizeof packages / sizeof *packages; i++)
        if (starts(fn, n, packages[i]))
            return 1;
    return 0;
}

/* "FILE:LINE" at s (n bytes), a JVM frame's place: 0 with it in f. */
static int jvm_place(const char *s, size_t n, printed_frame *f)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s)
        return -1;
    char *end;
    f->line = strtol(colon + 1, &end, 10);
    if (end != s + n || f->line <= 0)
        return -1;
    f->file = s;
    f->file_len = (size_t)(colon - s);
    return 0;
}

/* "\tat pkg.Class.method(File.java:12)", its place with a line. */
static int jvm_frame(const char *line, size_t n, printed_frame *f)
{
    if (!starts(line, n, "\tat ") || line[n - 1] != ')')
        return -1;
    const char *open = memchr(line + 4, '(', n - 4);
    if (!open || open == line + 4 || jvm_place(open + 1, (size_t)(line + n - 1 - open - 1), f))
        return -1;
    f->fn = line + 4;
    f->fn_len = (size_t)(open - f->fn);
    const char *slash = memchr(f->fn, '/', f->fn_len); /* "java.base/java.util..." */
    if (slash) {
        f->fn_len -= (size_t)(slash + 1 - f->fn);
        f->fn = slash + 1;
    }
    f->library = jdk_class(f->fn, f->fn_len);
    return 0;
}

/* "PATH:LINE:COL" (n bytes): 0 with the path and line in f. */
static int v8_place(const char *s, size_t n, printed_frame *f)
{
    const char *col = s + n;
    while (col > s && col[-1] >= '0' && col[-1] <= '9')
        col--;
    if (col == s + n || col == s || col[-1] != ':')
        return -1;
    const char *row = col - 1;
    while (row > s && row[-1] >= '0' && row[-1] <= '9')
        row--;
    if (row == col - 1 || row == s || row[-1] != ':')
        return -1;
    f->line = strtol(row, NULL, 10);
    f->file = s;
    f->file_len = (size_t)(row - 1 - s);
    if (starts(f->file, f->file_len, "file://")) {
        f->file += 7;
        f->file_len -= 7;
    }
    return f->line > 0 && f->file_len ? 0 : -1;
}

/* "    at fn (PATH:LINE:COL)" or "    at PATH:LINE:COL". */
static int v8_frame(const char *line, size_t n, printed_frame *f)
{
    if (!starts(line, n, "    at ") || n < 9)
        return -1;
    const char *s = line + 7;
    size_t left = n - 7;
    f->fn = NULL;
    f->fn_len = 0;
    if (line[n - 1] == ')') {
        const char *open = NULL;
        for (const char *p = s; p + 1 < line + n; p++)
            if (p[0] == ' ' && p[1] == '(')
                open = p;
        if (!open)
            return -1;
        f->fn = s;
        f->fn_len = (size_t)(open - s);
        s = open + 2;
        left = (size_t)(line + n - 1 - s);
    }
    if (v8_place(s, left, f))
        return -1;
    f->library = starts(f->file, f->file_len, "node:") ||
                 memmem(f->file, f->file_len, "/node_modules/", 14) != NULL;
    return 0;
}

int printed_stack_site(bundle *b, char *out, size_t cap)
{
    size_t len;
    const char *text = bundle_text(b, "printed_stack.txt", &len);
    printed_frame first = {0}, f;
    int have = 0;
    for (const char *line = text; line && line < text + len;) {
        const char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
        if (n > 4 && (!jvm_frame(line, n, &f) || !v8_frame(line, n, &f))) {
            if (!have || !f.library)
                first = f; /* the innermost, until one of the program's own */
            have = 1;
            if (!f.library)
                break;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!have)
        return SITE_UNKNOWN;
    const char *base = first.file;
    for (const char *p = first.file; p < first.file + first.file_len; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    int n = snprintf(out, cap, "%.*s:%ld", (int)(first.file + first.file_len - base), base,
                     first.line);
    if (first.fn_len && n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, " in %.*s", (int)first.fn_len, first.fn);
    return first.library ? SITE_LIBRARY : SITE_PROGRAM;
}
