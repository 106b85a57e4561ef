/*
 * jsonw.h — a streaming JSON writer for the bundle writer.  It writes into a
 * buffer the caller owns and flushes it to a file descriptor with write(2),
 * so it allocates nothing and can run after malloc failed or in a signal
 * handler.  Output is valid JSON for any input bytes: control characters are
 * escaped and invalid UTF-8 becomes U+FFFD.  Errors are sticky: check once,
 * at gmp_jw_finish().
 */
#ifndef GMP_JSONW_H
#define GMP_JSONW_H

#include "util.h"

#include <stddef.h>
#include <stdint.h>

#define GMP_JW_MAX_DEPTH 64

typedef struct gmp_jw {
    int fd;            /* -1: write into buf only (error when it fills) */
    char *buf;
    size_t cap, len;
    int err;
    int depth;
    int after_key;
    uint64_t has_items; /* bit d: the container at depth d has an item */
    uint64_t total;     /* bytes produced */
} gmp_jw;

GMP_HIDDEN void gmp_jw_init(gmp_jw *w, int fd, char *buf, size_t cap);
GMP_HIDDEN void gmp_jw_obj_begin(gmp_jw *w);
GMP_HIDDEN void gmp_jw_obj_end(gmp_jw *w);
GMP_HIDDEN void gmp_jw_arr_begin(gmp_jw *w);
GMP_HIDDEN void gmp_jw_arr_end(gmp_jw *w);
/* Before the next item of the current container: its comma, then a line
 * break, so long arrays read one item a line. */
GMP_HIDDEN void gmp_jw_next_line(gmp_jw *w);
/* White space only (no comma bookkeeping). */
GMP_HIDDEN void gmp_jw_space(gmp_jw *w, const char *ws);
GMP_HIDDEN void gmp_jw_key(gmp_jw *w, const char *key);
GMP_HIDDEN void gmp_jw_str(gmp_jw *w, const char *s);          /* NULL -> null */
GMP_HIDDEN void gmp_jw_strn(gmp_jw *w, const char *s, size_t n);
GMP_HIDDEN void gmp_jw_u64(gmp_jw *w, uint64_t v);
GMP_HIDDEN void gmp_jw_i64(gmp_jw *w, int64_t v);
GMP_HIDDEN void gmp_jw_hex(gmp_jw *w, uint64_t v);             /* "0x..." string */
GMP_HIDDEN void gmp_jw_bool(gmp_jw *w, int v);
GMP_HIDDEN void gmp_jw_null(gmp_jw *w);
/* ns since the epoch as a number of seconds with 9 decimals. */
GMP_HIDDEN void gmp_jw_seconds(gmp_jw *w, uint64_t ns);
/* A value that is already valid JSON (checked by the caller). */
GMP_HIDDEN void gmp_jw_raw(gmp_jw *w, const char *json, size_t n);
/* Key helpers: "key": value. */
GMP_HIDDEN void gmp_jw_kstr(gmp_jw *w, const char *key, const char *s);
GMP_HIDDEN void gmp_jw_ku64(gmp_jw *w, const char *key, uint64_t v);
GMP_HIDDEN void gmp_jw_ki64(gmp_jw *w, const char *key, int64_t v);
/* Flush; 0 when everything was written, -1 otherwise. */
GMP_HIDDEN int gmp_jw_finish(gmp_jw *w);

/* 0 when s[0..n) is exactly one JSON object (surrounding white space allowed),
 * with strict RFC 8259 grammar, valid UTF-8 and nesting <= max_depth. */
GMP_HIDDEN int gmp_json_check_object(const char *s, size_t n, int max_depth);
/* Where the JSON value that starts at s[at] ends (the index past it), by the
 * same grammar; 0 when none starts there.  long_numbers (NULL: not asked):
 * how many of its numbers have an exponent or more than 300 characters,
 * those a parser into doubles may refuse as out of range. */
GMP_HIDDEN size_t gmp_json_value_end(const char *s, size_t n, size_t at, int max_depth,
                                     unsigned *long_numbers);

#endif
