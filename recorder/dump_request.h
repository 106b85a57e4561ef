/*
 * dump_request.h — what the writers of a bundle hand the recorder's
 * gmp_dump: the failed request, the live allocations and the stacks behind
 * them (as callbacks, so nothing is copied on an emergency path), the
 * devices and the host at the failure, how the process ended.  Internal:
 * the preload, the recovery of rings and the tests build requests; a
 * program or a binding dumps through gmp_dump_exception
 * (include/gpumemprof.h).
 */
#ifndef GMP_DUMP_REQUEST_H
#define GMP_DUMP_REQUEST_H

#include "gpumemprof.h"

#define GMP_STACK_MAX 32

typedef struct gmp_failed_request {
    int present;
    gmp_api api;
    uint64_t size;
    int device;
    long code;
    uint64_t in_use; /* bytes in use on that device when it failed */
    /* the failing call's return addresses, innermost first (the program's
     * frames: the recorder's own are left out); symbolise with modules.json */
    uint32_t stack_depth;
    uint64_t stack[GMP_STACK_MAX];
    /* the time of its "oom" event (CLOCK_REALTIME), which names that event
     * among retries of the same size; 0: not known */
    uint64_t time_ns;
    /* the process's address space when it failed (VmSize), which RLIMIT_AS
     * limits; read then, not when the bundle is written, after the program
     * let go of memory; 0: not known */
    uint64_t vm_size;
    /* the failing call's stack as the events name stacks (stacks.json: its
     * Python frames, a Python thread's own lines, with its native ones);
     * 0: none */
    uint32_t stack_id;
} gmp_failed_request;

/* One live device allocation (or cuMemCreate handle), for allocations.json
 * and the leak report. */
typedef struct gmp_live_allocation {
    uint64_t address;  /* the handle, for cuMemCreate */
    uint64_t size;
    uint64_t time_ns;  /* when it was made (CLOCK_REALTIME) */
    uint32_t stack_id; /* 0 none */
    int16_t device;    /* -1: pinned host memory */
    uint8_t backend;
    uint16_t api;
} gmp_live_allocation;
typedef void (*gmp_live_visit_fn)(const gmp_live_allocation *a, void *ctx);
/* Calls visit once per live allocation (lock-free, no allocation). */
typedef void (*gmp_live_foreach_fn)(gmp_live_visit_fn visit, void *ctx, void *arg);

/* What gmp_dump writes. */
typedef enum gmp_bundle_kind {
    GMP_BUNDLE_OOM = 0, /* oom_dump_...: the bundle */
    GMP_BUNDLE_LEAKS    /* leak_report_...: leaks.json, stacks, modules, environment */
} gmp_bundle_kind;

/* Fills frames (at most max) of stack `id`; returns how many, 0 unknown. */
typedef uint32_t (*gmp_stack_lookup_fn)(uint32_t id, uint64_t *frames, uint32_t max, void *arg);

/* A stack's frame that is a Python frame, not a return address: the tag
 * and the frame's id, which a gmp_python_frame_lookup_fn names (innermost
 * first, after the native frames). */
#define GMP_PYTHON_FRAME_TAG (1ull << 63)
typedef struct gmp_python_frame {
    char file[256];     /* co_filename, UTF-8 */
    char function[128]; /* the qualified name where the code has one */
    uint32_t line;      /* 0: not known */
} gmp_python_frame;
/* 0 with *out filled, or -1 (an id not known). */
typedef int (*gmp_python_frame_lookup_fn)(uint32_t id, gmp_python_frame *out, void *arg);

/* How the process that wrote a bundle ended: metadata.json's "outcome".
 * RUNNING (zero) while it still runs; the preload rewrites it at the end. */
typedef enum gmp_outcome_state {
    GMP_OUTCOME_RUNNING = 0,
    GMP_OUTCOME_EXITED, /* code: the exit status (0: it survived) */
    GMP_OUTCOME_KILLED, /* code: the signal */
    GMP_OUTCOME_GONE,   /* ended without exiting, by a signal nobody saw */
} gmp_outcome_state;

typedef struct gmp_outcome {
    gmp_outcome_state state;
    int code;
} gmp_outcome;

typedef struct gmp_dump_request {
    const char *reason;            /* classification reason */
    const char *exception_type;    /* NULL -> null */
    const char *exception_module;
    const char *exception_message;
    const char *context;           /* NULL -> config context */
    gmp_backend backend;
    const char *metadata_json;     /* JSON object; NULL -> config metadata */
    const char *confirmed_by;      /* how the OOM episode was confirmed, or NULL */
    /* the loop, by name, that catches every exception of the failed call's
     * task and hands it to another process (a pool's worker loop): the
     * process went on from the failure, however it ends; NULL: none */
    const char *caught_by;
    gmp_failed_request failed;
    uint32_t recovered_episodes;
    const char *evidence;          /* why we believe the reason, e.g. the kernel OOM killer */
    int python_traceback_fd;       /* > 0: its contents become python_traceback.txt */
    /* the frames of the events' stack_id (1-based), for stacks.json; NULL: none */
    gmp_stack_lookup_fn stack_lookup;
    void *stack_lookup_arg;
    /* metadata.json's device_state: every device whose memory is known */
    const gmp_device_state *devices;
    uint32_t device_count;
    /* allocations.json (or leaks.json): the live allocations; NULL none */
    gmp_live_foreach_fn live_foreach;
    void *live_arg;
    gmp_bundle_kind kind;
    gmp_outcome outcome;           /* how the process ended; zero: it still runs */
    /* the Python frames those stacks hold (GMP_PYTHON_FRAME_TAG); NULL: none */
    gmp_python_frame_lookup_fn python_frame_lookup;
    void *python_frame_lookup_arg;
    /* > 0: allocations.json as it was at the failure (a memfd that
     * gmp_bundle_live_snapshot wrote), used instead of live_foreach now,
     * after the program may have let go; live_snapshot_stacks: the stack
     * ids it names, a bitmap of GMP_BUNDLE_STACK_IDS bits */
    int live_snapshot_fd;
    const uint64_t *live_snapshot_stacks;
    /* the host as it was at the failure (metadata.json's host_state); NULL:
     * read when the bundle is written */
    const struct gmp_host_state *host;
} gmp_dump_request;

#define GMP_BUNDLE_STACK_IDS 4096 /* stacks.json holds ids up to this */

/* Write a bundle into the dump directory, apply retention, and return the
 * bundle's path in path_out.  Returns path_out, or NULL when disabled or on
 * failure (one stderr line says why).  Allocates nothing. */
GMP_API const char *gmp_dump(gmp_recorder *rec, const gmp_dump_request *req,
                             char *path_out, size_t path_cap);
/* Set exception_type, exception_module and exception_message of the bundle
 * at path (a framework said more than the failing call); metadata.json is
 * rewritten atomically.  buf is scratch (64 KiB is plenty).  0, or -1. */
GMP_API int gmp_bundle_patch_exception(const char *bundle, const char *type,
                                       const char *module, const char *message, char *buf,
                                       size_t cap);

#endif
