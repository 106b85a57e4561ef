/*
 * recorder.h — what the preload needs of the recorder beyond the public
 * API (gpumemprof.h): a recorder that allocates nothing, and the flags a
 * ring carries for whoever reads it after the process is gone.
 */
#ifndef GMP_RECORDER_H
#define GMP_RECORDER_H

#include "dump_request.h"
#include "util.h"

#include <stdint.h>

/* The process's one recorder in static storage, configured from the
 * environment as gmp_config_from_env would: no block of ours is left for a
 * leak checker in the program to find, and a process pays only for the
 * pages of the config it sets (starting is most of what most processes
 * do).  NULL when called twice.  Its config, for the caller to read. */
GMP_HIDDEN gmp_recorder *gmp_recorder_create_static_from_env(void);
GMP_HIDDEN const gmp_config *gmp_recorder_config(const gmp_recorder *rec);
/* The directory its ring goes to (gmp_run_dir_path of its config, with the
 * GMP_RUN_DIR the static recorder holds apart). */
GMP_HIDDEN void gmp_recorder_run_dir(const gmp_recorder *rec, char *out, size_t cap);
/* gmp_dump_exception's request from its plain arguments (the backend by
 * name: "cuda", "rocm" or "hip", anything else cpu). */
GMP_HIDDEN gmp_dump_request gmp_exception_request(const char *reason, const char *exception_type,
                                                  const char *exception_module,
                                                  const char *exception_message,
                                                  const char *context, const char *backend,
                                                  const char *metadata_json, int traceback_fd);

/* gmp_config_from_env onto a config that is all zero (static storage),
 * except that GMP_RUN_DIR, when shorter than held_cap, goes to run_dir_held
 * and cfg->run_dir stays "": under gmp-run every process has it, and
 * cfg->run_dir lies two pages into the config (a page each process would
 * fault in, for a directory it may never use). */
GMP_HIDDEN int gmp_config_from_env_onto_zero(gmp_config *cfg, char *run_dir_held,
                                             size_t held_cap);

/* The user guide's table of GMP_* variables, from the option list (markdown,
 * NUL-terminated into out); the length it needs, like snprintf. */
GMP_HIDDEN size_t gmp_config_doc_table(char *out, size_t cap);

/* Sets then clears GMP_RING_FLAG_* bits of the recorder's ring, when it
 * has one (async-signal-safe). */
GMP_HIDDEN void gmp_recorder_ring_flags(gmp_recorder *rec, uint32_t set, uint32_t clear);

/* The recorder's ring once it has one, else NULL. */
struct gmp_ring;
GMP_HIDDEN struct gmp_ring *gmp_recorder_ring(gmp_recorder *rec);

/* fn runs each time the recorder makes its ring (on its first event; in a
 * forked child, on the child's first), right after the ring is published,
 * so the preload can copy into it the stacks it collected before.  It runs
 * wherever that first event is recorded, a signal handler included. */
GMP_HIDDEN void gmp_recorder_on_new_ring(gmp_recorder *rec, void (*fn)(struct gmp_ring *ring));

/* The GNU build-id among the ELF notes mapped at [at, stop), as hex into
 * out; "" when there is none (modules.c).  Reads the notes in place: no
 * lock, no allocation. */
GMP_HIDDEN void gmp_elf_build_id(uint64_t at, uint64_t stop, char *out, size_t cap);

#endif
