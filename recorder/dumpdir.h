/*
 * dumpdir.h — the directory a bundle is written in: the configured dump
 * directory, or, when that cannot be had, the user's own $HOME/oom_dumps.
 */
#ifndef GMP_DUMPDIR_H
#define GMP_DUMPDIR_H

#include "util.h"

#include <stddef.h>

/* Open (making it 0700 if missing) the directory bundles go to: configured,
 * or the fallback, in which case one line says where.  A directory fd with
 * its path in used, or -1 having said in one line that no bundle is
 * written.  System calls and stack buffers only (a signal handler's). */
GMP_HIDDEN int gmp_dump_dir_open(const char *configured, char *used, size_t used_cap);
/* The fallback's path, $HOME/oom_dumps, when HOME is an absolute directory
 * of the caller's own (else -1): where gmp_dump_dir_open would go. */
GMP_HIDDEN int gmp_dump_dir_fallback(char *out, size_t cap);

#endif
