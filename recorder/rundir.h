/*
 * rundir.h — where live ring files go: a per-user runtime directory that
 * other users cannot read or plant files in (GMP_RUN_DIR, else
 * $XDG_RUNTIME_DIR/gpumemprof, else /tmp/gpumemprof-<uid>, or, when
 * another user made that one first, $HOME/.gpumemprof-run).
 */
#ifndef GMP_RUNDIR_H
#define GMP_RUNDIR_H

#include "util.h"

#include <stddef.h>

/* The directory to use (configured may be "" or NULL). */
GMP_HIDDEN void gmp_run_dir_resolve(const char *configured, char *out, size_t cap);
/* Whether the default /tmp/gpumemprof-<uid> is another user's (so that
 * resolve chose $HOME's, or found none), for the one line that says so. */
GMP_HIDDEN int gmp_run_dir_taken(const char *configured);
/* Create it 0700 if missing (with any missing parents); then insist it is
 * reached as gmp_dir_open_safely wants (no symlink at its end, none of
 * another user on the way, ours) and closed to group and others.  0, or -1
 * with why. */
GMP_HIDDEN int gmp_run_dir_ensure(const char *path, char *why, size_t why_cap);
/* Open it for reading rings, on the same terms (the readers trust it no
 * more than the preload does: another user may have made it first).  A
 * directory fd, or -1 with why (why may be NULL). */
GMP_HIDDEN int gmp_run_dir_open(const char *path, char *why, size_t why_cap);

#endif
