/*
 * recorder.c — the public recorder: a config, a lazily created ring in the
 * per-user run directory, and the dump entry point that writes a bundle and
 * then applies retention.  Allocation happens only in gmp_recorder_create;
 * recording, snapshots and dumps use fixed memory.
 *
 * The ring is created on the first event, not at create time, so a process
 * that never records anything (most children of a preloaded job) leaves no
 * file behind.  The first thread to record creates it; others arriving in
 * that instant drop their event (counted) rather than wait.
 */
#include "bundle.h"
#include "gpumemprof.h"
#include "recorder.h"
#include "ring.h"
#include "ring_recovery.h"
#include "rundir.h"
#include "start_path.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RING_NONE, RING_CREATING, RING_READY, RING_FAILED };

/* The numbers, then the config (its numbers and dump_dir first): a process
 * that starts, records nothing and exits writes only the first few hundred
 * bytes of the preload's static recorder. */
struct gmp_recorder {
    int ring_state;        /* atomic, RING_* */
    uint64_t early_drops;  /* events dropped while the ring was being made */
    /* set as every process starts: on the page the config's first fields share */
    void (*on_new_ring)(gmp_ring *ring); /* atomic */
    /* the static recorder's GMP_RUN_DIR, when short ("" otherwise: then
     * cfg.run_dir): on the page of the config's first fields, where
     * cfg.run_dir is two pages on (gmp_config_from_env_onto_zero) */
    char run_dir_held[256];
    gmp_config cfg;        /* dump_dir made absolute; metadata_json "" = "{}" */
    gmp_ring ring;
};

/* Bundles must land where the process was started, even after chdir; and a
 * ring outliving the process must name an absolute directory. */
GMP_START_EXIT_TEXT static void absolutize(char *path, size_t cap)
{
    if (path[0] == '/')
        return;
    char given[GMP_PATH_MAX];
    gmp_strlcpy(given, path, sizeof given);
    const char *rel = given;
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2;
    const char slash[] = {'/', '\0'}; /* on the stack: a literal is a page of .rodata */
    if (gmp_start_getcwd(path, cap) < 0 || gmp_strlcat(path, slash, cap) < 0 ||
        gmp_strlcat(path, rel, cap) < 0)
        gmp_strlcpy(path, given, cap);
}

/* The rest of a recorder whose config is in place. */
GMP_START_EXIT_TEXT static void init_recorder(gmp_recorder *rec)
{
    if (rec->cfg.buffer_size < GMP_RING_MIN_EVENTS)
        rec->cfg.buffer_size = GMP_RING_MIN_EVENTS;
    absolutize(rec->cfg.dump_dir, sizeof rec->cfg.dump_dir);
}

gmp_recorder *gmp_recorder_create(const gmp_config *cfg)
{
    gmp_recorder *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    if (cfg)
        rec->cfg = *cfg;
    else
        gmp_config_defaults(&rec->cfg);
    /* a config built by hand may carry anything: never embed bad JSON (the
     * environment's is checked as it is read) */
    if (gmp_json_check_object(rec->cfg.metadata_json,
                              strnlen(rec->cfg.metadata_json, GMP_METADATA_MAX), 32) < 0)
        rec->cfg.metadata_json[0] = '\0';
    init_recorder(rec);
    return rec;
}

/* In the preload, placed right after .data (mk/preload_layout.ld), on the
 * page the loader has written: the defaults stored at every start, and the
 * dump directory made absolute, cost no page of their own.  Aligned so
 * that those first bytes never straddle two pages (4096 is a multiple of
 * 128). */
static gmp_recorder static_one __attribute__((aligned(128), section(".bss.gmp_startup")));

GMP_START_EXIT_TEXT gmp_recorder *gmp_recorder_create_static_from_env(void)
{
    static int available = 1; /* atomic; initialised, so on a page the loader wrote */
    if (!__atomic_exchange_n(&available, 0, __ATOMIC_ACQ_REL))
        return NULL;
    gmp_config_from_env_onto_zero(&static_one.cfg, static_one.run_dir_held,
                                  sizeof static_one.run_dir_held);
    init_recorder(&static_one);
    return &static_one;
}

GMP_START_EXIT_TEXT const gmp_config *gmp_recorder_config(const gmp_recorder *rec)
{
    return &rec->cfg;
}

/* GMP_RUN_DIR as configured ("" unset) */
static const char *configured_run_dir(const gmp_recorder *rec)
{
    return rec->run_dir_held[0] ? rec->run_dir_held : rec->cfg.run_dir;
}

void gmp_recorder_run_dir(const gmp_recorder *rec, char *out, size_t cap)
{
    gmp_run_dir_resolve(configured_run_dir(rec), out, cap);
}

static void make_ring(gmp_recorder *rec)
{
    char dir[GMP_PATH_MAX], why[128];
    gmp_recorder_run_dir(rec, dir, sizeof dir);
    const char *use = dir;
    if (gmp_run_dir_taken(configured_run_dir(rec)) && strncmp(dir, "/tmp/gpumemprof-", 16))
        gmp_log("/tmp/gpumemprof-%u belongs to another user; rings go to %s", (unsigned)getuid(),
                dir);
    if (gmp_run_dir_ensure(dir, why, sizeof why) < 0) {
        gmp_log("run directory %s unusable (%s); recording in memory only, "
                "so a killed process leaves no ring", dir, why);
        use = NULL;
    }
    if (use) /* a ring of our own pid and start time is our image before an exec */
        gmp_rings_forget_exec(dir);
    /* near an address-space limit the ring asked for may not fit: a shorter
     * history beats none */
    uint32_t capacity = rec->cfg.buffer_size;
    int err = 0;
    while (gmp_ring_create(&rec->ring, use, capacity) < 0) {
        err = errno;
        if (capacity <= GMP_RING_MIN_EVENTS) {
            gmp_log("cannot map an event ring (%s): bundles will hold no events",
                    gmp_strerror(err));
            __atomic_store_n(&rec->ring_state, RING_FAILED, __ATOMIC_RELEASE);
            return;
        }
        capacity = capacity / 4 > GMP_RING_MIN_EVENTS ? capacity / 4 : GMP_RING_MIN_EVENTS;
    }
    if (capacity < rec->cfg.buffer_size)
        gmp_log("an event ring of %u events did not fit (%s); keeping the last %u",
                rec->cfg.buffer_size, gmp_strerror(err), capacity);
    if (use && !rec->ring.is_file)
        gmp_log("cannot create a ring file in %s; recording in memory only", dir);
    else if (use)
        gmp_rings_reap(dir, NULL); /* a ring nobody recovers must not stay for ever */
    gmp_ring_config_fill(&rec->ring.hdr->config, &rec->cfg, capacity);
    __atomic_store_n(&rec->ring_state, RING_READY, __ATOMIC_SEQ_CST);
    void (*fn)(gmp_ring *) = __atomic_load_n(&rec->on_new_ring, __ATOMIC_SEQ_CST);
    if (fn)
        fn(&rec->ring);
}

GMP_START_EXIT_TEXT void gmp_recorder_on_new_ring(gmp_recorder *rec, void (*fn)(gmp_ring *ring))
{
    if (rec)
        __atomic_store_n(&rec->on_new_ring, fn, __ATOMIC_SEQ_CST);
}

/* The ring once it is made, else NULL.  (A reader racing its making pairs
 * a fence of its own with make_ring's sequentially consistent store.) */
static inline gmp_ring *made_ring(const gmp_recorder *rec)
{
    return rec && __atomic_load_n(&rec->ring_state, __ATOMIC_ACQUIRE) == RING_READY
               ? (gmp_ring *)&rec->ring
               : NULL;
}

GMP_START_EXIT_TEXT gmp_ring *gmp_recorder_ring(gmp_recorder *rec)
{
    return made_ring(rec);
}

/* The ring, creating it on first use; NULL when unavailable right now. */
static gmp_ring *ring_of(gmp_recorder *rec)
{
    int state = __atomic_load_n(&rec->ring_state, __ATOMIC_ACQUIRE);
    if (state == RING_READY)
        return &rec->ring;
    if (state == RING_NONE) {
        int expected = RING_NONE;
        if (__atomic_compare_exchange_n(&rec->ring_state, &expected, RING_CREATING,
                                        0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            make_ring(rec);
            if (__atomic_load_n(&rec->ring_state, __ATOMIC_ACQUIRE) == RING_READY)
                return &rec->ring;
        }
    }
    return NULL;
}

int gmp_record(gmp_recorder *rec, const gmp_event *ev)
{
    if (!rec || !rec->cfg.enabled)
        return -1;
    gmp_ring *ring = ring_of(rec);
    if (!ring) {
        __atomic_fetch_add(&rec->early_drops, 1, __ATOMIC_RELAXED);
        return -1;
    }
    if (ev->type == GMP_EV_OOM)
        __atomic_fetch_or(&ring->hdr->flags, GMP_RING_FLAG_FAILED, __ATOMIC_RELAXED);
    if (ev->time_ns && ev->thread_id) /* no copy: the preload's events */
        return gmp_ring_push(ring, ev) == UINT64_MAX ? -1 : 0;
    gmp_event e = *ev;
    if (!e.time_ns)
        e.time_ns = gmp_now_realtime_ns();
    if (!e.thread_id)
        e.thread_id = gmp_gettid();
    return gmp_ring_push(ring, &e) == UINT64_MAX ? -1 : 0;
}

size_t gmp_snapshot(gmp_recorder *rec, gmp_event *out, size_t max)
{
    gmp_ring *ring = made_ring(rec);
    return ring ? gmp_ring_snapshot(ring, out, max, NULL) : 0;
}

const char *gmp_recorder_ring_path(const gmp_recorder *rec)
{
    const gmp_ring *ring = made_ring(rec);
    return ring ? ring->path : "";
}

const char *gmp_recorder_dump_dir(const gmp_recorder *rec)
{
    return rec ? rec->cfg.dump_dir : "";
}

gmp_dump_request gmp_exception_request(const char *reason, const char *exception_type,
                                       const char *exception_module,
                                       const char *exception_message, const char *context,
                                       const char *backend, const char *metadata_json,
                                       int traceback_fd)
{
    gmp_backend b = GMP_BACKEND_CPU;
    if (backend && !strcmp(backend, "cuda"))
        b = GMP_BACKEND_CUDA;
    else if (backend && (!strcmp(backend, "rocm") || !strcmp(backend, "hip")))
        b = GMP_BACKEND_ROCM;
    return (gmp_dump_request){
        .reason = reason,
        .exception_type = exception_type,
        .exception_module = exception_module,
        .exception_message = exception_message,
        .context = context,
        .backend = b,
        .metadata_json = metadata_json,
        .python_traceback_fd = traceback_fd,
    };
}

const char *gmp_dump_exception(gmp_recorder *rec, const char *reason,
                               const char *exception_type, const char *exception_module,
                               const char *exception_message, const char *context,
                               const char *backend, const char *metadata_json,
                               int traceback_fd, char *path_out, size_t path_cap)
{
    gmp_dump_request req =
        gmp_exception_request(reason, exception_type, exception_module, exception_message,
                              context, backend, metadata_json, traceback_fd);
    /* a program reporting its own exception runs in a normal context: what
     * its libraries say of themselves can be asked (the preload asks at its
     * own times; without it nobody else does) */
    gmp_python_probe_lookup();
    if (req.backend == GMP_BACKEND_CUDA || req.backend == GMP_BACKEND_ROCM)
        gmp_gpu_probe();
    else
        gmp_torch_probe();
    return gmp_dump(rec, &req, path_out, path_cap);
}

const char *gmp_dump(gmp_recorder *rec, const gmp_dump_request *req,
                     char *path_out, size_t path_cap)
{
    if (!rec || !rec->cfg.enabled || !req || !path_out || !path_cap)
        return NULL;
    const char *metadata = rec->cfg.metadata_json[0] ? rec->cfg.metadata_json : "{}";
    if (req->metadata_json) {
        if (gmp_json_check_object(req->metadata_json, strlen(req->metadata_json),
                                  32) == 0)
            metadata = req->metadata_json;
        else
            gmp_log("dump metadata is not a JSON object; using the configured one");
    }
    gmp_host_state host; /* /proc and /sys read into the struct: no allocation */
    if (req->host)
        host = *req->host; /* as the failure found it */
    else
        gmp_host_state_read(&host);
    gmp_bundle_input in = {
        .dump_dir = rec->cfg.dump_dir,
        .ring = made_ring(rec),
        .req = req,
        .context = req->context ? req->context : rec->cfg.context,
        .metadata_json = metadata,
        .time_ns = gmp_now_realtime_ns(),
        .host = &host,
        .software = gmp_gpu_probe_get(), /* as the caller last refreshed it */
    };
    char name[256];
    if (gmp_bundle_write(&in, path_out, path_cap, name, sizeof name) < 0)
        return NULL;
    /* retention where it was written: the dump directory or its fallback */
    char dir[GMP_PATH_MAX];
    size_t dir_len = strlen(path_out) - strlen(name) - 1;
    if (req->kind == GMP_BUNDLE_OOM && dir_len < sizeof dir) { /* leak reports are not oom_dump_ */
        memcpy(dir, path_out, dir_len);
        dir[dir_len] = '\0';
        gmp_retention_apply(dir, rec->cfg.max_dumps, rec->cfg.max_total_mb, name);
    }
    return path_out;
}

int gmp_recorder_set_context(gmp_recorder *rec, const char *context)
{
    if (!rec || !context || strlen(context) >= sizeof rec->cfg.context)
        return -1;
    gmp_strlcpy(rec->cfg.context, context, sizeof rec->cfg.context);
    return 0;
}

int gmp_recorder_set_metadata(gmp_recorder *rec, const char *json)
{
    if (!rec || !json || strlen(json) >= sizeof rec->cfg.metadata_json ||
        gmp_json_check_object(json, strlen(json), 32) < 0)
        return -1;
    gmp_strlcpy(rec->cfg.metadata_json, json, sizeof rec->cfg.metadata_json);
    return 0;
}

void gmp_recorder_after_fork(gmp_recorder *rec)
{
    if (!rec)
        return;
    /* munmap only: the file and its contents are the parent's */
    int state = __atomic_load_n(&rec->ring_state, __ATOMIC_ACQUIRE);
    if (state == RING_READY)
        gmp_ring_close(&rec->ring, 0);
    if (state != RING_NONE) /* else no store: a child that execs copies no page */
        __atomic_store_n(&rec->ring_state, RING_NONE, __ATOMIC_RELEASE);
}

GMP_START_EXIT_TEXT void gmp_recorder_release_ring(gmp_recorder *rec)
{
    const gmp_ring *ring = made_ring(rec);
    if (ring && ring->is_file && ring->path[0])
        unlink(ring->path);
}

void gmp_recorder_ring_flags(gmp_recorder *rec, uint32_t set, uint32_t clear)
{
    gmp_ring *ring = made_ring(rec);
    if (!ring)
        return;
    __atomic_fetch_or(&ring->hdr->flags, set, __ATOMIC_RELAXED);
    __atomic_fetch_and(&ring->hdr->flags, ~clear, __ATOMIC_RELAXED);
}

void gmp_recorder_destroy(gmp_recorder *rec)
{
    if (!rec)
        return;
    if (made_ring(rec))
        gmp_ring_close(&rec->ring, 1);
    if (rec != &static_one)
        free(rec);
}
