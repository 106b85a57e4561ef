/*
 * printed_stack.c — the failure's site from the stack a runtime printed
 * after its out-of-memory line (the bundle's printed_stack.txt, kept by
 * the preload): the JVM's "\tat Heap.fill(Heap.java:5)", V8's "    at grow
 * (/srv/app/load.js:3:46)", read as the preload read them (printed_frame.c).
 * Its innermost frame of the program's own that names a place (not the
 * JDK's classes, not Node's own modules nor a package's from node_modules)
 * is "Failed at" for `show` and `triage`, named as a Python frame is:
 * "Heap.java:5 in Heap.fill", "load.js:3 in grow".  The file is the
 * program's output: a line that is not a frame of either form names
 * nothing.
 */
#include "answer.h"
#include "printed_frame.h"

#include <string.h>

int printed_stack_site(bundle *b, char *out, size_t cap)
{
    size_t len;
    const char *text = bundle_text(b, "printed_stack.txt", &len);
    gmp_printed_frame first = {0}, f;
    int have = 0;
    for (const char *line = text; line && line < text + len;) {
        const char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
        if (!gmp_printed_frame_read(line, n, &f) && f.line) {
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
