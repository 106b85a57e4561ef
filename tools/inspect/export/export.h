/*
 * export.h — gmp-inspect's fourth room: bundles and live rings in formats
 * other viewers open, on the first two rooms (read.h, answer.h).  trace.c
 * writes Trace Event JSON (Perfetto, chrome://tracing); torch.c and
 * torch_sources.c the pickle PyTorch's memory visualiser opens (through
 * pickle_out.c); sources.c finds the bundles of the operands and names a
 * process the same way for both.
 */
#ifndef GMP_INSPECT_EXPORT_H
#define GMP_INSPECT_EXPORT_H

#include "answer.h"
#include "read.h"

/* sources.c: every bundle at or under the operands that are not rings, in
 * the order of their names (their times): a list to free with
 * export_paths_free, NULL without memory.  A process's name on a viewer:
 * "command (pid N, rank R, on HOST)", or a ring's "command (pid N, live
 * ring)"; without the pid where the viewer shows it. */
char **export_bundle_paths(char **operands, int n, size_t *count);
void export_paths_free(char **paths, size_t n);
void export_process_label(bundle *b, int with_pid, char *out, size_t cap);
void export_ring_label(const ring_copy_t *r, int with_pid, char *out, size_t cap);
/* trace.c: every bundle at or under paths as Trace Event JSON on f. */
int export_trace(char **paths, int npaths, FILE *f);
/* torch.c: the bundles and rings as one PyTorch memory snapshot (a
 * pickle) on f; with several processes, which device slot is whose on map. */
int export_torch(char **paths, int npaths, FILE *f, FILE *map);

#endif
