/*
 * bundle.h — the bundle writer: one oom_dump_<time>_<pid>_<backend>_<seq>
 * directory with manifest.json, events.json, metadata.json and
 * environment.json.  Written under a hidden temporary name and renamed when
 * whole, so a reader (or retention) never sees half a bundle, even when the
 * writer is killed.  No heap allocation anywhere on this path.
 */
#ifndef GMP_BUNDLE_H
#define GMP_BUNDLE_H

#include "gpumemprof.h"
#include "jsonw.h"
#include "ring.h"

#define GMP_BUNDLE_PREFIX "oom_dump_"
#define GMP_BUNDLE_TMP_PREFIX ".tmp_oom_dump_"
#define GMP_JW_BUF 16384

typedef struct gmp_bundle_input {
    const char *dump_dir;
    const gmp_ring *ring;          /* NULL: no events */
    const gmp_dump_request *req;
    const char *context;           /* resolved: request, else config */
    const char *metadata_json;     /* a checked JSON object */
    uint64_t time_ns;              /* when the bundle is made */
    int32_t pid;                   /* whose bundle: 0 = the calling process */
} gmp_bundle_input;

/* Writes the bundle; returns 0 with its path in path_out (and its name in
 * name_out when given), or -1 after one stderr line. */
GMP_HIDDEN int gmp_bundle_write(const gmp_bundle_input *in, char *path_out,
                                size_t path_cap, char *name_out, size_t name_cap);

/* The environment.json object of the calling process (bundle_env.c);
 * scratch holds /proc reads. */
GMP_HIDDEN void gmp_bundle_fill_environment(gmp_jw *w, char *scratch, size_t cap,
                                            const char *backend);

/* environment.json of a dead process, from what its ring header kept. */
GMP_HIDDEN void gmp_bundle_fill_environment_of(gmp_jw *w, const gmp_ring_header *h,
                                               const char *backend);

/* modules.json of the calling process (modules.c); buf holds /proc reads. */
GMP_HIDDEN void gmp_modules_write(gmp_jw *w, char *buf, size_t cap);

/* Is the environment variable name one whose value must never be written? */
GMP_HIDDEN int gmp_env_name_is_secret(const char *name, size_t len);

#endif
