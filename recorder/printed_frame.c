/*
 * printed_frame.c — a line of the JVM's or V8's printed stack, and the
 * place it names (printed_frame.h).  A frame of the JDK's classes, of
 * Node's own modules or of a package in node_modules is a library's; the
 * place is the file and line, a V8 column dropped.
 */
#include "printed_frame.h"

#include <stdlib.h>
#include <string.h>

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

/* The digits that end at end, not before start: their first, or NULL. */
static const char *digits_before(const char *start, const char *end)
{
    const char *p = end;
    while (p > start && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p < end ? p : NULL;
}

/* "FILE:LINE" (the JVM's) or "PATH:LINE:COL" (V8's, columns > 0) at s, n
 * bytes: the file and line into f, else f->line stays 0. */
static void read_place(const char *s, size_t n, int columns, gmp_printed_frame *f)
{
    const char *end = s + n;
    if (columns) {
        const char *col = digits_before(s, end);
        if (!col || col == s || col[-1] != ':')
            return;
        end = col - 1;
    }
    const char *row = digits_before(s, end);
    if (!row || row == s || row[-1] != ':' || row - 1 == s)
        return;
    long line = strtol(row, NULL, 10);
    if (line <= 0)
        return;
    f->file = s;
    f->file_len = (size_t)(row - 1 - s);
    if (starts(f->file, f->file_len, "file://")) { /* an ES module's URL */
        f->file += 7;
        f->file_len -= 7;
    }
    f->line = f->file_len ? line : 0;
}

/* "\tat pkg.Class.method(File.java:12)", a module's name before the class
 * ("java.base/java.util.Arrays.copyOf(...)") left out. */
static int jvm_frame(const char *line, size_t n, gmp_printed_frame *f)
{
    const char *open = memchr(line + 4, '(', n - 4);
    if (line[n - 1] != ')' || !open || open == line + 4)
        return -1;
    f->fn = line + 4;
    f->fn_len = (size_t)(open - f->fn);
    const char *slash = memchr(f->fn, '/', f->fn_len);
    if (slash) {
        f->fn_len -= (size_t)(slash + 1 - f->fn);
        f->fn = slash + 1;
    }
    read_place(open + 1, (size_t)(line + n - 1 - open - 1), 0, f);
    f->library = jdk_class(f->fn, f->fn_len);
    return 0;
}

/* "    at fn (PLACE)", "    at PLACE" */
static int v8_frame(const char *line, size_t n, gmp_printed_frame *f)
{
    const char *s = line + 7, *end = line + n;
    if (line[n - 1] == ')') {
        const char *open = NULL;
        for (const char *p = s; p + 1 < end; p++)
            if (p[0] == ' ' && p[1] == '(')
                open = p;
        if (!open || open == s)
            return -1;
        f->fn = s;
        f->fn_len = (size_t)(open - s);
        read_place(open + 2, (size_t)(end - 1 - (open + 2)), 1, f);
    } else {
        read_place(s, (size_t)(end - s), 1, f);
        if (!f->line)
            return -1; /* neither a call nor a place */
    }
    f->library = f->line && (starts(f->file, f->file_len, "node:") ||
                             memmem(f->file, f->file_len, "/node_modules/", 14) != NULL);
    return 0;
}

int gmp_printed_frame_read(const char *line, size_t n, gmp_printed_frame *f)
{
    memset(f, 0, sizeof *f);
    if (n > 5 && starts(line, n, "\tat ") && line[4] != ' ')
        return jvm_frame(line, n, f);
    if (n > 8 && starts(line, n, "    at ") && line[7] != ' ')
        return v8_frame(line, n, f);
    return -1;
}
