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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_USAGE_KEYS 32

static const char *const bundle_files[] = {"events.json", "metadata.json",
                                           "environment.json", "manifest.json"};
#define BUNDLE_FILE_COUNT (sizeof bundle_files / sizeof *bundle_files)

typedef struct usage_key {
    uint8_t backend;
    int16_t device;
    uint64_t in_use;
} usage_key;

typedef struct events_state {
    gmp_jw *w;
    uint64_t count;
    usage_key usage[MAX_USAGE_KEYS];
    size_t usage_n;
} events_state;

static void note_usage(events_state *st, const gmp_event *ev)
{
    if (ev->type == GMP_EV_MARK || ev->type == GMP_EV_SIGNAL)
        return;
    for (size_t i = 0; i < st->usage_n; i++) {
        if (st->usage[i].backend == ev->backend && st->usage[i].device == ev->device) {
            st->usage[i].in_use = ev->in_use;
            return;
        }
    }
    if (st->usage_n < MAX_USAGE_KEYS)
        st->usage[st->usage_n++] = (usage_key){ev->backend, ev->device, ev->in_use};
}

static int write_event(const gmp_event *ev, void *arg)
{
    events_state *st = arg;
    gmp_jw *w = st->w;
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
    if (ev->flags)
        gmp_jw_ku64(w, "flags", ev->flags);
    gmp_jw_obj_end(w);
    st->count++;
    note_usage(st, ev);
    return w->err != 0;
}

static int open_new_file(int dirfd, const char *name)
{
    int fd = openat(dirfd, name,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        fchmod(fd, 0600); /* exact mode whatever the umask */
    return fd;
}

static int write_events(int dirfd, char *buf, const gmp_bundle_input *in,
                        events_state *st, uint64_t *torn)
{
    int fd = open_new_file(dirfd, "events.json");
    if (fd < 0)
        return -1;
    gmp_jw w;
    gmp_jw_init(&w, fd, buf, GMP_JW_BUF);
    st->w = &w;
    gmp_jw_arr_begin(&w);
    *torn = 0;
    if (in->ring)
        gmp_ring_foreach(in->ring, UINT64_MAX, write_event, st, torn);
    gmp_jw_space(&w, "\n");
    gmp_jw_arr_end(&w);
    gmp_jw_space(&w, "\n");
    int rc = gmp_jw_finish(&w);
    close(fd);
    return rc;
}

static int write_metadata(int dirfd, char *buf, const gmp_bundle_input *in,
                          const events_state *st, uint64_t torn)
{
    const gmp_dump_request *req = in->req;
    int fd = open_new_file(dirfd, "metadata.json");
    if (fd < 0)
        return -1;
    gmp_jw w;
    gmp_jw_init(&w, fd, buf, GMP_JW_BUF);
    gmp_jw_obj_begin(&w);
    gmp_jw_kstr(&w, "reason", req->reason ? req->reason : "unknown");
    gmp_jw_kstr(&w, "exception_type", req->exception_type);
    gmp_jw_kstr(&w, "exception_module", req->exception_module);
    gmp_jw_kstr(&w, "exception_message", req->exception_message);
    gmp_jw_kstr(&w, "context", in->context && *in->context ? in->context : NULL);
    gmp_jw_kstr(&w, "backend", gmp_backend_name(req->backend));
    gmp_jw_ku64(&w, "captured_event_count", st->count);
    gmp_jw_key(&w, "custom_metadata");
    gmp_jw_raw(&w, in->metadata_json, strlen(in->metadata_json));
    gmp_jw_key(&w, "failed_request");
    if (req->failed.present) {
        gmp_jw_obj_begin(&w);
        gmp_jw_kstr(&w, "api", gmp_api_name(req->failed.api));
        gmp_jw_ku64(&w, "size", req->failed.size);
        gmp_jw_ki64(&w, "device", req->failed.device);
        gmp_jw_ki64(&w, "code", req->failed.code);
        gmp_jw_obj_end(&w);
    } else {
        gmp_jw_null(&w);
    }
    gmp_jw_kstr(&w, "confirmed_by", req->confirmed_by);
    gmp_jw_ku64(&w, "recovered_episodes", req->recovered_episodes);
    gmp_jw_key(&w, "bytes_in_use");
    gmp_jw_arr_begin(&w);
    for (size_t i = 0; i < st->usage_n; i++) {
        gmp_jw_obj_begin(&w);
        gmp_jw_kstr(&w, "backend", gmp_backend_name(st->usage[i].backend));
        gmp_jw_ki64(&w, "device", st->usage[i].device);
        gmp_jw_ku64(&w, "bytes", st->usage[i].in_use);
        gmp_jw_obj_end(&w);
    }
    gmp_jw_arr_end(&w);
    gmp_jw_key(&w, "ring");
    gmp_jw_obj_begin(&w);
    gmp_jw_ku64(&w, "capacity", in->ring ? in->ring->capacity : 0);
    gmp_jw_ku64(&w, "recorded_total",
                in->ring ? __atomic_load_n(&in->ring->hdr->head, __ATOMIC_RELAXED) : 0);
    gmp_jw_ku64(&w, "dropped",
                in->ring ? __atomic_load_n(&in->ring->hdr->dropped, __ATOMIC_RELAXED) : 0);
    gmp_jw_ku64(&w, "torn", torn);
    gmp_jw_obj_end(&w);
    gmp_jw_kstr(&w, "generator", "gpumemprof " GMP_VERSION_STRING);
    gmp_jw_obj_end(&w);
    gmp_jw_space(&w, "\n");
    int rc = gmp_jw_finish(&w);
    close(fd);
    return rc;
}

static int write_manifest(int dirfd, char *buf, const gmp_bundle_input *in,
                          const char *name, uint64_t event_count)
{
    int fd = open_new_file(dirfd, "manifest.json");
    if (fd < 0)
        return -1;
    char when[21];
    gmp_fmt_utc_iso((int64_t)(in->time_ns / 1000000000ull), when);
    gmp_jw w;
    gmp_jw_init(&w, fd, buf, GMP_JW_BUF);
    gmp_jw_obj_begin(&w);
    gmp_jw_ku64(&w, "schema_version", GMP_BUNDLE_SCHEMA_VERSION);
    gmp_jw_kstr(&w, "bundle_name", name);
    gmp_jw_kstr(&w, "created_at_utc", when);
    gmp_jw_kstr(&w, "reason", in->req->reason ? in->req->reason : "unknown");
    gmp_jw_kstr(&w, "backend", gmp_backend_name(in->req->backend));
    gmp_jw_ku64(&w, "event_count", event_count);
    gmp_jw_key(&w, "files");
    gmp_jw_arr_begin(&w);
    gmp_jw_str(&w, "manifest.json");
    for (size_t i = 0; i + 1 < BUNDLE_FILE_COUNT; i++)
        gmp_jw_str(&w, bundle_files[i]);
    gmp_jw_arr_end(&w);
    gmp_jw_key(&w, "created_at_ns");
    gmp_jw_u64(&w, in->time_ns);
    gmp_jw_ki64(&w, "pid", getpid());
    gmp_jw_kstr(&w, "generator", "gpumemprof " GMP_VERSION_STRING);
    gmp_jw_obj_end(&w);
    gmp_jw_space(&w, "\n");
    int rc = gmp_jw_finish(&w);
    close(fd);
    return rc;
}

static void remove_partial(int dirfd, const char *tmp)
{
    int bfd = openat(dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd >= 0) {
        for (size_t i = 0; i < BUNDLE_FILE_COUNT; i++)
            unlinkat(bfd, bundle_files[i], 0);
        close(bfd);
    }
    unlinkat(dirfd, tmp, AT_REMOVEDIR);
}

/* "oom_dump_<compact>_<pid>_<backend>_<seq>" */
static void make_name(char *out, size_t cap, const char *prefix, uint64_t time_ns,
                      gmp_backend backend, uint64_t seq)
{
    char stamp[17], num[24];
    gmp_fmt_utc_compact((int64_t)(time_ns / 1000000000ull), stamp);
    gmp_strlcpy(out, prefix, cap);
    gmp_strlcat(out, stamp, cap);
    gmp_strlcat(out, "_", cap);
    gmp_fmt_u64((uint64_t)getpid(), num);
    gmp_strlcat(out, num, cap);
    gmp_strlcat(out, "_", cap);
    gmp_strlcat(out, gmp_backend_name(backend), cap);
    gmp_strlcat(out, "_", cap);
    gmp_fmt_u64(seq, num);
    gmp_strlcat(out, num, cap);
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

static int write_contents(int dirfd, const char *tmp, const char *name,
                          const gmp_bundle_input *in)
{
    char buf[GMP_JW_BUF];
    int bfd = openat(dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return -1;
    fchmod(bfd, 0700);
    events_state st;
    memset(&st, 0, sizeof st);
    uint64_t torn = 0;
    int rc = write_events(bfd, buf, in, &st, &torn);
    if (!rc)
        rc = write_metadata(bfd, buf, in, &st, torn);
    if (!rc) {
        int fd = open_new_file(bfd, "environment.json");
        rc = fd < 0 ? -1
                    : gmp_bundle_write_environment(fd, buf, sizeof buf,
                                                   gmp_backend_name(in->req->backend));
        if (fd >= 0)
            close(fd);
    }
    if (!rc)
        rc = write_manifest(bfd, buf, in, name, st.count);
    int saved = errno;
    close(bfd);
    errno = saved;
    return rc;
}

int gmp_bundle_write(const gmp_bundle_input *in, char *path_out, size_t path_cap,
                     char *name_out, size_t name_cap)
{
    if (gmp_mkdir_p(in->dump_dir, 0700) < 0) {
        gmp_log("cannot create dump directory %s: %s; no bundle written",
                in->dump_dir, gmp_strerror(errno));
        return -1;
    }
    int dirfd = open(in->dump_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0) {
        struct stat st;
        int is_link = lstat(in->dump_dir, &st) == 0 && S_ISLNK(st.st_mode);
        gmp_log("cannot open dump directory %s: %s; no bundle written", in->dump_dir,
                is_link ? "it is a symbolic link (refused)" : gmp_strerror(errno));
        return -1;
    }
    char name[160], tmp[176];
    int rc = -1;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint64_t seq = __atomic_add_fetch(&bundle_seq, 1, __ATOMIC_RELAXED);
        make_name(name, sizeof name, GMP_BUNDLE_PREFIX, in->time_ns, in->req->backend, seq);
        make_name(tmp, sizeof tmp, GMP_BUNDLE_TMP_PREFIX, in->time_ns, in->req->backend, seq);
        if (mkdirat(dirfd, tmp, 0700) < 0) {
            if (errno == EEXIST)
                continue;
            break;
        }
        if (write_contents(dirfd, tmp, name, in) < 0) {
            int saved = errno;
            remove_partial(dirfd, tmp);
            errno = saved;
            break;
        }
        for (; attempt < 64; attempt++) {
            if (rename_noreplace(dirfd, tmp, name) == 0) {
                rc = 0;
                break;
            }
            if (errno != EEXIST && errno != ENOTEMPTY)
                break;
            seq = __atomic_add_fetch(&bundle_seq, 1, __ATOMIC_RELAXED);
            make_name(name, sizeof name, GMP_BUNDLE_PREFIX, in->time_ns, in->req->backend, seq);
        }
        if (rc < 0) {
            int saved = errno;
            remove_partial(dirfd, tmp);
            errno = saved;
        }
        break;
    }
    int saved = errno;
    close(dirfd);
    if (rc < 0) {
        gmp_log("cannot write a bundle in %s: %s", in->dump_dir, gmp_strerror(saved));
        return -1;
    }
    if (gmp_strlcpy(path_out, in->dump_dir, path_cap) < 0 ||
        gmp_strlcat(path_out, "/", path_cap) < 0 ||
        gmp_strlcat(path_out, name, path_cap) < 0)
        path_out[0] = '\0';
    if (name_out)
        gmp_strlcpy(name_out, name, name_cap);
    return 0;
}
