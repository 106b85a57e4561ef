/*
 * bundle.c — writes one diagnostic bundle (see bundle.h).
 *
 * Order matters: events.json first (the ring is live, so the count is only
 * known once it is written), then metadata.json and environment.json, and
 * manifest.json last, listing exactly the files present.  Then one rename
 * makes the bundle visible.  Everything goes through a directory fd opened
 * with O_NOFOLLOW, so a symlink planted at the dump directory or at the
 * temporary name is refused rather than followed.
 */
#include "bundle.h"
#include "verdict.h"
#include "dumpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_USAGE_KEYS 32
#define MAX_STACK_IDS GMP_BUNDLE_STACK_IDS
#define NAME_ATTEMPTS 16

typedef struct usage_key {
    uint8_t backend;
    int16_t device;
    uint64_t in_use;
} usage_key;

/* What the files of one bundle share while it is written. */
typedef struct bundle_ctx {
    const gmp_bundle_input *in;
    const char *name;
    gmp_jw *w;          /* the file being written */
    uint64_t event_count;
    uint64_t torn;
    size_t buf_cap;     /* of the buffer files stream through */
    int dump_dirfd;     /* the directory the bundle goes in: its run's others */
    usage_key usage[MAX_USAGE_KEYS];
    size_t usage_n;
    uint64_t stacks_seen[MAX_STACK_IDS / 64]; /* stack ids the events name */
    char scratch[4096]; /* /proc reads for environment.json */
} bundle_ctx;

static void note_usage(bundle_ctx *ctx, const gmp_event *ev)
{
    if (ev->type == GMP_EV_MARK || ev->type == GMP_EV_SIGNAL)
        return;
    for (size_t i = 0; i < ctx->usage_n; i++) {
        if (ctx->usage[i].backend == ev->backend && ctx->usage[i].device == ev->device) {
            ctx->usage[i].in_use = ev->in_use;
            return;
        }
    }
    if (ctx->usage_n < MAX_USAGE_KEYS)
        ctx->usage[ctx->usage_n++] = (usage_key){ev->backend, ev->device, ev->in_use};
}

/* A stack stacks.json is to hold. */
static void note_stack(bundle_ctx *ctx, uint32_t id)
{
    if (id && id <= MAX_STACK_IDS)
        ctx->stacks_seen[(id - 1) / 64] |= 1ull << ((id - 1) % 64);
}

static int write_event(const gmp_event *ev, void *arg)
{
    bundle_ctx *ctx = arg;
    gmp_jw *w = ctx->w;
    gmp_jw_next_line(w); /* one event a line: greppable, diffable */
    gmp_jw_obj_begin(w);
    gmp_jw_ku64(w, "seq", ev->seq);
    gmp_jw_key(w, "timestamp");
    gmp_jw_seconds(w, ev->time_ns);
    gmp_jw_kstr(w, "event_type", gmp_event_type_name(ev->type));
    gmp_jw_kstr(w, "backend", gmp_backend_name(ev->backend));
    gmp_jw_ki64(w, "device_id", ev->device);
    gmp_jw_kstr(w, "api", gmp_api_name(ev->api));
    gmp_jw_key(w, "address");
    gmp_jw_hex(w, ev->address);
    gmp_jw_ku64(w, "size", ev->size);
    gmp_jw_ki64(w, "result", ev->result);
    gmp_jw_ku64(w, "thread_id", ev->thread_id);
    gmp_jw_ku64(w, "bytes_in_use", ev->in_use);
    gmp_jw_ku64(w, "stack_id", ev->stack_id);
    if (ev->type == GMP_EV_SAMPLE && ev->size) { /* a collector's reading (sampler.c); a
                                                  * program's own may have no total */
        gmp_jw_ku64(w, "free", ev->address);
        gmp_jw_ku64(w, "total", ev->size);
    }
    if (ev->flags)
        gmp_jw_ku64(w, "flags", ev->flags);
    gmp_jw_obj_end(w);
    ctx->event_count++;
    note_usage(ctx, ev);
    note_stack(ctx, ev->stack_id);
    return w->err != 0;
}

static void fill_events(gmp_jw *w, bundle_ctx *ctx)
{
    gmp_jw_arr_begin(w);
    if (ctx->in->ring)
        gmp_ring_foreach(ctx->in->ring, UINT64_MAX, write_event, ctx, &ctx->torn);
    gmp_jw_space(w, "\n");
    gmp_jw_arr_end(w);
}

static void fill_metadata(gmp_jw *w, bundle_ctx *ctx)
{
    const gmp_bundle_input *in = ctx->in;
    const gmp_dump_request *req = in->req;
    const gmp_ring_header *h = in->ring ? in->ring->hdr : NULL;
    gmp_jw_obj_begin(w);
    if (req->kind != GMP_BUNDLE_LEAKS) {
        /* what it records, decided here once for every reader, and first:
         * a reader that reads only the file's head has it */
        gmp_verdict_facts facts = {
            .reason = req->reason,
            .exception_type = req->exception_type,
            .evidence = req->evidence,
            .confirmed_by = req->confirmed_by,
            .caught = req->caught_by != NULL,
            .failed_request = req->failed.present,
            .exited = req->outcome.state == GMP_OUTCOME_EXITED,
            .exit_status = req->outcome.code,
        };
        gmp_jw_kstr(w, "kind", gmp_verdict_name(gmp_verdict_decide(&facts)));
    }
    gmp_jw_kstr(w, "reason", req->reason ? req->reason : "unknown");
    gmp_jw_kstr(w, "exception_type", req->exception_type);
    gmp_jw_kstr(w, "exception_module", req->exception_module);
    gmp_jw_kstr(w, "exception_message", req->exception_message);
    gmp_jw_kstr(w, "context", in->context && *in->context ? in->context : NULL);
    gmp_jw_kstr(w, "backend", gmp_backend_name(req->backend));
    gmp_jw_ku64(w, "captured_event_count", ctx->event_count);
    gmp_jw_key(w, "custom_metadata");
    gmp_jw_raw(w, in->metadata_json, strlen(in->metadata_json));
    gmp_jw_key(w, "failed_request");
    if (req->failed.present) {
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "api", gmp_api_name(req->failed.api));
        gmp_jw_ku64(w, "size", req->failed.size);
        gmp_jw_ki64(w, "device", req->failed.device);
        gmp_jw_ki64(w, "code", req->failed.code);
        gmp_jw_ku64(w, "bytes_in_use", req->failed.in_use);
        if (req->failed.time_ns) { /* as its event's, to name it among same-sized retries */
            gmp_jw_key(w, "timestamp");
            gmp_jw_seconds(w, req->failed.time_ns);
        }
        if (req->failed.vm_size)
            gmp_jw_ku64(w, "vm_size", req->failed.vm_size);
        if (req->failed.stack_id)
            gmp_jw_ku64(w, "stack_id", req->failed.stack_id);
        gmp_jw_key(w, "stack");
        gmp_jw_arr_begin(w);
        for (uint32_t i = 0; i < req->failed.stack_depth && i < GMP_STACK_MAX; i++)
            if (!(req->failed.stack[i] & GMP_PYTHON_FRAME_TAG)) /* those are in stacks.json */
                gmp_jw_hex(w, req->failed.stack[i]);
        gmp_jw_arr_end(w);
        gmp_jw_obj_end(w);
    } else {
        gmp_jw_null(w);
    }
    gmp_bundle_fill_device_state(w, "device_state", req->devices, req->device_count);
    /* the host as it is now; for this process, the cgroup's OOM kills
     * counted before it started recording (a recoverer's cgroup may not be
     * the dead process's) */
    int self = in->pid == 0;
    gmp_bundle_fill_host_state(w, in->host, self,
                               self && in->ring && in->ring->hdr
                                   ? in->ring->hdr->oom_kills_at_start
                                   : UINT64_MAX);
    gmp_jw_kstr(w, "confirmed_by", req->confirmed_by);
    if (req->caught_by)
        gmp_jw_kstr(w, "caught_by", req->caught_by);
    gmp_jw_key(w, "outcome");
    gmp_bundle_write_outcome(w, &req->outcome);
    gmp_jw_kstr(w, "evidence", req->evidence);
    gmp_jw_ku64(w, "recovered_episodes", req->recovered_episodes);
    gmp_jw_key(w, "bytes_in_use");
    gmp_jw_arr_begin(w);
    for (size_t i = 0; i < ctx->usage_n; i++) {
        gmp_jw_obj_begin(w);
        gmp_jw_kstr(w, "backend", gmp_backend_name(ctx->usage[i].backend));
        gmp_jw_ki64(w, "device", ctx->usage[i].device);
        gmp_jw_ku64(w, "bytes", ctx->usage[i].in_use);
        gmp_jw_obj_end(w);
    }
    gmp_jw_arr_end(w);
    gmp_jw_key(w, "ring");
    gmp_jw_obj_begin(w);
    gmp_jw_ku64(w, "capacity", in->ring ? in->ring->capacity : 0);
    gmp_jw_ku64(w, "recorded_total", h ? __atomic_load_n(&h->head, __ATOMIC_RELAXED) : 0);
    gmp_jw_ku64(w, "dropped", h ? __atomic_load_n(&h->dropped, __ATOMIC_RELAXED) : 0);
    gmp_jw_ku64(w, "torn", ctx->torn);
    gmp_jw_obj_end(w);
    gmp_jw_kstr(w, "generator", "gpumemprof " GMP_VERSION_STRING);
    gmp_jw_obj_end(w);
}

static void fill_environment(gmp_jw *w, bundle_ctx *ctx)
{
    const char *backend = gmp_backend_name(ctx->in->req->backend);
    if (ctx->in->pid == 0)
        gmp_bundle_fill_environment(w, ctx->scratch, sizeof ctx->scratch, backend,
                                    ctx->in->software);
    else
        gmp_bundle_fill_environment_of(w, ctx->in->ring ? ctx->in->ring->hdr : NULL, backend);
}

static void fill_live(gmp_jw *w, bundle_ctx *ctx)
{
    const gmp_dump_request *req = ctx->in->req;
    if (req->live_snapshot_fd <= 0 || !req->live_snapshot_stacks) {
        gmp_bundle_fill_live(w, req, ctx->in->time_ns, ctx->stacks_seen, MAX_STACK_IDS);
        return;
    }
    /* as it was at the failure: the snapshot's text, its stacks named */
    for (off_t at = 0;;) {
        ssize_t n = pread(req->live_snapshot_fd, ctx->scratch, sizeof ctx->scratch, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        gmp_jw_raw(w, ctx->scratch, (size_t)n);
        at += n;
    }
    for (size_t i = 0; i < MAX_STACK_IDS / 64; i++)
        ctx->stacks_seen[i] |= req->live_snapshot_stacks[i];
}

/* stacks.json: the frames of every stack an event, a live allocation or
 * the failed request names, innermost first: "frames" the return
 * addresses, "python" the Python frames of a Python thread (file, line,
 * function). */
static void fill_stacks(gmp_jw *w, bundle_ctx *ctx)
{
    const gmp_dump_request *req = ctx->in->req;
    if (req->failed.present)
        note_stack(ctx, req->failed.stack_id);
    gmp_jw_arr_begin(w);
    for (uint32_t id = 1; id <= MAX_STACK_IDS; id++) {
        if (!(ctx->stacks_seen[(id - 1) / 64] & (1ull << ((id - 1) % 64))))
            continue;
        uint64_t frames[GMP_STACK_MAX];
        uint32_t n = req->stack_lookup(id, frames, GMP_STACK_MAX, req->stack_lookup_arg);
        if (!n)
            continue; /* a stack the table had no room for */
        gmp_jw_next_line(w);
        gmp_jw_obj_begin(w);
        gmp_jw_ku64(w, "id", id);
        gmp_jw_key(w, "frames");
        gmp_jw_arr_begin(w);
        uint32_t python = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (frames[i] & GMP_PYTHON_FRAME_TAG)
                python++;
            else
                gmp_jw_hex(w, frames[i]);
        }
        gmp_jw_arr_end(w);
        if (python && req->python_frame_lookup) {
            gmp_jw_key(w, "python");
            gmp_jw_arr_begin(w);
            for (uint32_t i = 0; i < n; i++) {
                gmp_python_frame f;
                if (!(frames[i] & GMP_PYTHON_FRAME_TAG) ||
                    req->python_frame_lookup((uint32_t)(frames[i] & 0xffffffffu), &f,
                                             req->python_frame_lookup_arg) != 0)
                    continue;
                gmp_jw_obj_begin(w);
                gmp_jw_kstr(w, "file", f.file);
                gmp_jw_ku64(w, "line", f.line);
                gmp_jw_kstr(w, "function", f.function);
                gmp_jw_obj_end(w);
            }
            gmp_jw_arr_end(w);
        }
        gmp_jw_obj_end(w);
    }
    gmp_jw_space(w, "\n");
    gmp_jw_arr_end(w);
}

/* modules.json: the process's own map; for a process that is gone, the
 * objects its ring recorded (those its stacks pass through). */
static void fill_modules(gmp_jw *w, bundle_ctx *ctx)
{
    if (ctx->in->pid == 0)
        gmp_modules_write(w, ctx->scratch, sizeof ctx->scratch);
    else
        gmp_modules_write_from_ring(w, ctx->in->ring);
}

static void fill_manifest(gmp_jw *w, bundle_ctx *ctx);

/* python_traceback.txt: the bytes the preload captured at the failure. */
static int copy_python_traceback(int fd, char *buf, bundle_ctx *ctx)
{
    int from = ctx->in->req->python_traceback_fd;
    for (off_t at = 0;;) {
        ssize_t n = pread(from, buf, ctx->buf_cap, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : 0;
        if (gmp_write_all(fd, buf, (size_t)n) < 0)
            return -1;
        at += n;
    }
}

/* The files of a bundle in the order they are written: the manifest last,
 * once the event count is known, listing exactly those written; the live
 * allocations before stacks.json, which holds their stacks too.  Files of
 * the live process (self_only) are left out of a bundle written for
 * another, dead one.  kinds: the gmp_bundle_kind bits a file belongs to. */
#define KIND(k) (1u << (k))
#define OOM KIND(GMP_BUNDLE_OOM)
#define LEAKS KIND(GMP_BUNDLE_LEAKS)
static const struct bundle_file {
    const char *name;
    void (*fill)(gmp_jw *w, bundle_ctx *ctx);       /* a JSON file, or */
    int (*copy)(int fd, char *buf, bundle_ctx *ctx); /* a text file */
    int self_only;
    unsigned kinds;
} bundle_files[] = {
    {"events.json", fill_events, NULL, 0, OOM},
    {"allocations.json", fill_live, NULL, 1, OOM},
    {"leaks.json", fill_live, NULL, 1, LEAKS},
    {"metadata.json", fill_metadata, NULL, 0, OOM},
    {"environment.json", fill_environment, NULL, 0, OOM | LEAKS},
    {"stacks.json", fill_stacks, NULL, 0, OOM | LEAKS},
    {"modules.json", fill_modules, NULL, 0, OOM | LEAKS},
    {"python_traceback.txt", NULL, copy_python_traceback, 1, OOM},
    {"manifest.json", fill_manifest, NULL, 0, OOM | LEAKS},
};
#define BUNDLE_FILE_COUNT (sizeof bundle_files / sizeof *bundle_files)

static int wanted(const struct bundle_file *file, const gmp_bundle_input *in)
{
    if (!(file->kinds & KIND(in->req->kind)))
        return 0;
    if (file->copy == copy_python_traceback && in->req->python_traceback_fd <= 0)
        return 0;
    if (file->fill == fill_stacks && !in->req->stack_lookup)
        return 0;
    if (file->fill == fill_modules && in->pid != 0 &&
        !(in->ring && __atomic_load_n(&in->ring->hdr->modules_used, __ATOMIC_ACQUIRE)))
        return 0;
    if (file->fill == fill_live && !in->req->live_foreach)
        return 0;
    return !file->self_only || in->pid == 0;
}

static int32_t subject_pid(const gmp_bundle_input *in)
{
    return in->pid ? in->pid : (int32_t)getpid();
}

/* The rank of the bundle's process: this one's, or a dead one's from its
 * ring (its Slurm task, else its launcher's RANK or the spawn index its
 * preload read); -1 for none. */
static long subject_rank(const gmp_bundle_input *in)
{
    if (in->pid == 0)
        return gmp_bundle_rank();
    if (!in->ring)
        return -1;
    const gmp_ring_header *h = in->ring->hdr;
    long r = gmp_decimal(h->place.task, sizeof h->place.task, 7);
    return r >= 0 ? r : gmp_run_vars_rank(h->run_vars, sizeof h->run_vars);
}

static void fill_manifest(gmp_jw *w, bundle_ctx *ctx)
{
    const gmp_bundle_input *in = ctx->in;
    char when[21];
    gmp_fmt_utc((int64_t)(in->time_ns / 1000000000ull), when, 1);
    gmp_jw_obj_begin(w);
    gmp_jw_ku64(w, "schema_version", GMP_BUNDLE_SCHEMA_VERSION);
    gmp_jw_kstr(w, "bundle_name", ctx->name);
    gmp_jw_kstr(w, "created_at_utc", when);
    gmp_jw_kstr(w, "reason", in->req->reason ? in->req->reason : "unknown");
    gmp_jw_kstr(w, "backend", gmp_backend_name(in->req->backend));
    gmp_jw_ku64(w, "event_count", ctx->event_count);
    gmp_jw_key(w, "files");
    gmp_jw_arr_begin(w);
    gmp_jw_str(w, "manifest.json");
    for (size_t i = 0; i < BUNDLE_FILE_COUNT; i++)
        if (bundle_files[i].fill != fill_manifest && wanted(&bundle_files[i], in))
            gmp_jw_str(w, bundle_files[i].name);
    gmp_jw_arr_end(w);
    gmp_jw_ku64(w, "created_at_ns", in->time_ns);
    gmp_jw_ki64(w, "pid", subject_pid(in));
    gmp_jw_kstr(w, "kind", in->req->kind == GMP_BUNDLE_LEAKS ? "leak_report" : "oom_dump");
    gmp_job_place here;
    const gmp_job_place *place = &here;
    if (in->pid == 0) { /* a recovered bundle's process was another's */
        struct utsname u;
        gmp_jw_kstr(w, "host", uname(&u) == 0 ? u.nodename : NULL);
        gmp_job_place_here(&here);
    } else {
        place = in->ring ? &in->ring->hdr->place : NULL;
    }
    gmp_bundle_fill_program(w, in->pid == 0, in->ring ? in->ring->hdr : NULL);
    long rank = subject_rank(in);
    if (in->pid == 0 || rank >= 0) {
        gmp_jw_key(w, "rank");
        if (rank >= 0)
            gmp_jw_i64(w, rank);
        else
            gmp_jw_null(w);
    }
    /* a Slurm job's bundles name it, for triage to group them across nodes */
    char job[64];
    gmp_bundle_job_name(place, job, sizeof job);
    if (job[0])
        gmp_jw_kstr(w, "slurm_job", job);
    /* a pool worker's caught failure is told by the process that raised it
     * again: never its run's, nor that run's first */
    if (in->req->kind == GMP_BUNDLE_OOM && !in->req->caught_by)
        gmp_bundle_fill_run(w, in->pid != 0 && in->ring ? in->ring->hdr : NULL, in->pid == 0,
                            place, ctx->dump_dirfd,
                            in->req->reason && !strcmp(in->req->reason, GMP_REASON_PRESSURE));
    gmp_jw_kstr(w, "generator", "gpumemprof " GMP_VERSION_STRING);
    gmp_jw_obj_end(w);
}

/* Create one member file (O_EXCL, no symlink followed, exactly 0600) and
 * stream its JSON through the shared buffer. */
static int write_json_file(int dirfd, const struct bundle_file *file, char *buf,
                           bundle_ctx *ctx)
{
    int fd = openat(dirfd, file->name,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    fchmod(fd, 0600); /* whatever the umask */
    if (file->copy) {
        int rc = file->copy(fd, buf, ctx);
        int saved = errno;
        close(fd);
        errno = saved;
        return rc;
    }
    gmp_jw w;
    gmp_jw_init(&w, fd, buf, ctx->buf_cap);
    ctx->w = &w;
    file->fill(&w, ctx);
    gmp_jw_space(&w, "\n");
    int rc = gmp_jw_finish(&w);
    int saved = w.err ? w.err : errno;
    close(fd);
    errno = saved;
    return rc;
}

static void remove_partial(int dirfd, const char *tmp)
{
    int bfd = openat(dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd >= 0) {
        for (size_t i = 0; i < BUNDLE_FILE_COUNT; i++)
            unlinkat(bfd, bundle_files[i].name, 0);
        close(bfd);
    }
    unlinkat(dirfd, tmp, AT_REMOVEDIR);
}

/* "oom_dump_<compact>_<pid>_<backend>[_r<rank>]_<seq>" (leak_report_ alike) */
static void make_name(char *out, size_t cap, int tmp, const gmp_bundle_input *in, uint64_t seq)
{
    char stamp[21], pid[24], num[24], rank[26] = "";
    gmp_backend backend = in->req->backend;
    const char *prefix = in->req->kind == GMP_BUNDLE_LEAKS
                             ? (tmp ? GMP_LEAK_REPORT_TMP_PREFIX : GMP_LEAK_REPORT_PREFIX)
                             : (tmp ? GMP_BUNDLE_TMP_PREFIX : GMP_BUNDLE_PREFIX);
    long r = subject_rank(in);
    if (r >= 0) {
        rank[0] = '_';
        rank[1] = 'r';
        gmp_fmt_u64((uint64_t)r, rank + 2);
    }
    gmp_fmt_utc((int64_t)(in->time_ns / 1000000000ull), stamp, 0);
    gmp_fmt_u64((uint64_t)subject_pid(in), pid);
    gmp_fmt_u64(seq, num);
    gmp_strjoin(out, cap, prefix, stamp, "_", pid, "_", gmp_backend_name(backend), rank, "_",
                num, (char *)NULL);
}

/* renameat2(RENAME_NOREPLACE) so an existing bundle is never replaced; a
 * file system without it gets renameat, which replaces only an empty dir. */
static int rename_noreplace(int dirfd, const char *from, const char *to)
{
    if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    return renameat(dirfd, from, dirfd, to);
}

static uint64_t bundle_seq; /* per process; names stay unique across recorders */

/* The buffer files stream through: a static one when no other bundle is
 * being written, else a small one on the stack.  A bundle may be written in
 * a signal handler, on an alternate stack the program may have made small
 * (CPython's faulthandler): the stack is kept for what must be there. */
static char shared_buf[GMP_JW_BUF];
static int shared_buf_taken; /* atomic */
#define STACK_BUF 2048

static int write_contents(int dirfd, const char *tmp, const char *name,
                          const gmp_bundle_input *in)
{
    char small[STACK_BUF];
    bundle_ctx ctx;
    int bfd = openat(dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return -1;
    fchmod(bfd, 0700);
    int own_shared = !__atomic_exchange_n(&shared_buf_taken, 1, __ATOMIC_ACQUIRE);
    char *buf = own_shared ? shared_buf : small;
    memset(&ctx, 0, offsetof(bundle_ctx, scratch));
    ctx.in = in;
    ctx.name = name;
    ctx.buf_cap = own_shared ? sizeof shared_buf : sizeof small;
    ctx.dump_dirfd = dirfd;
    int rc = 0;
    for (size_t i = 0; i < BUNDLE_FILE_COUNT && !rc; i++)
        if (wanted(&bundle_files[i], in))
            rc = write_json_file(bfd, &bundle_files[i], buf, &ctx);
    int saved = errno;
    close(bfd);
    if (own_shared)
        __atomic_store_n(&shared_buf_taken, 0, __ATOMIC_RELEASE);
    errno = saved;
    return rc;
}

int gmp_bundle_write(const gmp_bundle_input *in, char *path_out, size_t path_cap,
                     char *name_out, size_t name_cap)
{
    char dir[GMP_PATH_MAX];
    int dirfd = gmp_dump_dir_open(in->dump_dir, dir, sizeof dir);
    if (dirfd < 0)
        return -1;
    /* The name is inside the manifest, so a name taken meanwhile (another
     * container whose pid is also 1, say) means writing it all again. */
    char name[160], tmp[176];
    int rc = -1;
    for (int attempt = 0; attempt < NAME_ATTEMPTS && rc < 0; attempt++) {
        uint64_t seq = __atomic_add_fetch(&bundle_seq, 1, __ATOMIC_RELAXED);
        make_name(name, sizeof name, 0, in, seq);
        make_name(tmp, sizeof tmp, 1, in, seq);
        if (faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        if (mkdirat(dirfd, tmp, 0700) < 0) {
            if (errno == EEXIST)
                continue;
            break;
        }
        if (write_contents(dirfd, tmp, name, in) == 0 &&
            rename_noreplace(dirfd, tmp, name) == 0) {
            rc = 0;
            break;
        }
        int saved = errno;
        remove_partial(dirfd, tmp);
        errno = saved;
        if (saved != EEXIST && saved != ENOTEMPTY)
            break;
    }
    int saved = errno;
    close(dirfd);
    if (rc < 0) {
        gmp_log("cannot write a bundle in %s: %s", dir, gmp_strerror(saved));
        return -1;
    }
    if (gmp_strjoin(path_out, path_cap, dir, "/", name, (char *)NULL) < 0)
        path_out[0] = '\0';
    if (name_out)
        gmp_strlcpy(name_out, name, name_cap);
    return 0;
}
