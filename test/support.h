/*
 * support.h — helpers for the cmocka test programs: scratch directories,
 * running a command with its output captured, capturing our own stderr,
 * and making bundles by hand.
 */
#ifndef GMP_TEST_SUPPORT_H
#define GMP_TEST_SUPPORT_H

#include <stddef.h>
#include <sys/types.h>

/* A fresh directory under $TMPDIR (or /tmp); removed by scratch_remove. */
void scratch_make(char *out, size_t cap, const char *tag);
void scratch_remove(const char *path);

/* Run argv with stdout/stderr captured (NUL-terminated, truncated to cap).
 * Returns the wait status. */
int run_capture(const char *const argv[], char *out, size_t out_cap, char *err,
                size_t err_cap);
/* The gmp-inspect binary under test ($GMP_INSPECT, else build/gmp-inspect). */
const char *inspect_path(void);

/* Capture what this process writes to fd 2 between begin and end. */
void stderr_capture_begin(void);
size_t stderr_capture_end(char *buf, size_t cap);

/* Count lines in a string. */
int count_lines(const char *s);
/* Count the entries of dir whose name starts with prefix (not . or ..). */
int count_prefixed(const char *dir, const char *prefix);

/* The one bundle in dumps (fails the test unless there is exactly one and
 * `gmp-inspect validate` accepts it): its file parsed, its path in path_out
 * when given.  The caller owns the JSON. */
struct json_t;
struct json_t *only_bundle_file(const char *dumps, const char *file, char *path_out,
                                size_t cap);
/* FILE inside BUNDLE, parsed (fails the test when it does not parse). */
struct json_t *bundle_file(const char *bundle, const char *file);
/* A string member ("(missing)" when absent or not a string), an integer member. */
const char *json_str(struct json_t *obj, const char *key);
long long json_int(struct json_t *obj, const char *key);

/* Write a whole file (mode 0600). */
void write_file(const char *path, const void *data, size_t len);

#endif
