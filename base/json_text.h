/*
 * json_text.h — top-level values of JSON text our writer made (jsonw.h),
 * read in place: where a key's value starts and ends, a string or an
 * integer value.  For readers that must not allocate or link a JSON
 * library: the bundle patcher (in a signal handler), the bundle's kind
 * decided from its metadata.json, the Slurm plugin.  Keys are compared
 * whole and only at the top level of the object, so a program's metadata
 * that holds a key of the same name is never taken for one.
 */
#ifndef GMP_JSON_TEXT_H
#define GMP_JSON_TEXT_H

#include "util.h"

#include <stddef.h>

/* Where the value of the top-level key of the object that doc starts with
 * starts and ends (offsets into doc); -1 when it has none.  doc need not
 * end where the object does: a nested object's text is read so too. */
GMP_HIDDEN int gmp_json_value_span(const char *doc, const char *key, size_t *start,
                                   size_t *end);
/* The string value of key into out (escapes undone; a control character
 * or \u escape read as '?'): 0, or -1 with out "" (absent, null, not a
 * string). */
GMP_HIDDEN int gmp_json_string_value(const char *doc, const char *key, char *out, size_t cap);
/* The integer value of key: 0, or -1. */
GMP_HIDDEN int gmp_json_int_value(const char *doc, const char *key, long long *value);
/* The object value of key: where its '{' is, or NULL. */
GMP_HIDDEN const char *gmp_json_object_value(const char *doc, const char *key);

#endif
