/*
 * printed_frame.h — a line of the stack the JVM or V8 prints after its
 * out-of-memory line, read one way by the preload (which keeps the frames
 * that follow such a line for its bundle) and by gmp-inspect (which names
 * the program's own among them).
 */
#ifndef GMP_PRINTED_FRAME_H
#define GMP_PRINTED_FRAME_H

#include "util.h"

#include <stddef.h>

typedef struct gmp_printed_frame {
    const char *fn, *file; /* into the line, not NUL-terminated */
    size_t fn_len, file_len;
    long line;   /* 0: the frame names no place ("(Native Method)", "(<anonymous>)") */
    int library; /* the JDK's classes, Node's own modules, a package from node_modules */
} gmp_printed_frame;

/* 0 when the n bytes at line are such a frame ("\tat Heap.fill(Heap.java:5)",
 * "    at grow (/srv/app/grow.js:3:46)", "    at file:///srv/m.mjs:2:7",
 * "    at new ArrayBuffer (<anonymous>)"), with what it names in *f; -1
 * when they are not. */
GMP_HIDDEN int gmp_printed_frame_read(const char *line, size_t n, gmp_printed_frame *f);

#endif
