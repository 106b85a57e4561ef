/*
 * program_dump.c — a bundle the program asks for while the preload runs
 * (the Python package's OOMFlightRecorder.dump and MemoryTracker's
 * capture_oom, through gmp_preload_dump_exception): one OOM, one bundle.
 *
 * An OOM the program catches is mostly a failure the preload saw already:
 *   - its episode is open (the bundle not written yet): the program adopts
 *     it, and its report — exception, context, metadata, Python stack — is
 *     written with the episode's failed request as that episode's bundle
 *     (confirmed_by "exception"), which replaces the memory-pressure
 *     warning of the crossing, as the episode's own would;
 *   - its bundle was written in the last 10 s (a second failure confirmed
 *     it, as PyTorch's retry does): the report is patched into that bundle
 *     (bundle_patch.c), whose path is returned;
 *   - the preload saw no failure (a framework's own pool ran out): a bundle
 *     of its own, with the preload's device state and live allocations.
 * A report that is not an OOM (a manual dump) is always a bundle of its own.
 * PyTorch's own snapshot at a CUDA OOM (GMP_TORCH_HISTORY=1, through
 * gmp_preload_torch_snapshot) joins the same way: the episode is written
 * then, and the snapshot is added to the OOM's bundle.
 */
#include "bundle.h"
#include "preload.h"
#include "recorder.h"

#include <string.h>
#include <unistd.h>

#define TRACEBACK_MAX (64 * 1024)

static char scratch[64 * 1024];
static int busy; /* over scratch: two reports at once, the second is not added */

static int take_scratch(const char *bundle)
{
    if (!__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
        return 1;
    gmp_log("the program's report was not added to %s (another was being added)", bundle);
    return 0;
}

/* The program's report into the bundle already written for its failure,
 * and its traceback (the file it passed) when that bundle has none. */
static void patch_written(const char *bundle, const gmp_dump_request *req, int traceback_fd)
{
    static char text[TRACEBACK_MAX];
    if (!take_scratch(bundle))
        return;
    if (gmp_bundle_patch_program(bundle, req->exception_type, req->exception_module,
                                 req->exception_message, req->context, req->metadata_json,
                                 scratch, sizeof scratch) != 0)
        gmp_log("could not add the program's report to %s", bundle);
    ssize_t n = traceback_fd >= 0 ? pread(traceback_fd, text, sizeof text, 0) : -1;
    if (n > 0)
        gmp_bundle_add_file(bundle, "python_traceback.txt", text, (size_t)n, scratch,
                            sizeof scratch);
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

GMP_EXPORT const char *gmp_preload_dump_exception(gmp_recorder *rec, const char *reason,
                                                  const char *exception_type,
                                                  const char *exception_module,
                                                  const char *exception_message,
                                                  const char *context, const char *backend,
                                                  const char *metadata_json, int traceback_fd,
                                                  char *path_out, size_t path_cap)
{
    if (!rec || rec != gmp_pl.rec || !gmp_pl_active() || !path_out || !path_cap)
        return gmp_dump_exception(rec, reason, exception_type, exception_module,
                                  exception_message, context, backend, metadata_json,
                                  traceback_fd, path_out, path_cap);
    GMP_IN_HOOK_SCOPE();
    gmp_dump_request req =
        gmp_exception_request(reason, exception_type, exception_module, exception_message,
                              context, backend, metadata_json, traceback_fd);
    int oom = gmp_classify_exception(exception_type, exception_module, exception_message).is_oom;
    int episode_fd = -1;
    if (oom && gmp_episode_adopt(req.backend, &req.backend, &req.failed, &episode_fd,
                                 &req.recovered_episodes)) {
        /* words printed meanwhile were about this failure: the report says it */
        gmp_oom_words said;
        int printed = -1;
        gmp_messages_take(&said, &printed);
        if (printed > 0)
            close(printed);
        if (req.python_traceback_fd < 0)
            req.python_traceback_fd = episode_fd;
        req.confirmed_by = "exception";
        const char *path = gmp_pl_dump(&req, path_out, path_cap);
        if (episode_fd > 0)
            close(episode_fd);
        if (path) {
            gmp_messages_note_bundle(path, GMP_MESSAGES_PROGRAM);
            /* the death the pressure warning of this crossing warned of */
            char replaced[GMP_PATH_MAX];
            gmp_watchdog_replace_warning(replaced, sizeof replaced);
            gmp_log("OOM on %s caught by the program (%s); bundle: %s%s" GMP_READ_IT "%s",
                    gmp_backend_name(req.backend), exception_type ? exception_type : "?", path,
                    replaced, path);
        }
        return path;
    }
    if (oom && gmp_messages_claim_recent(path_out, path_cap)) {
        patch_written(path_out, &req, traceback_fd);
        return path_out;
    }
    const char *path = gmp_pl_dump(&req, path_out, path_cap);
    if (path && oom)
        gmp_messages_note_bundle(path, GMP_MESSAGES_PROGRAM);
    return path;
}

GMP_EXPORT int gmp_preload_torch_snapshot(int device, uint64_t request, uint64_t device_free,
                                          const char *snapshot, size_t snapshot_len,
                                          const char *blocks_json, size_t blocks_len)
{
    if (!gmp_pl_active() || !snapshot || !snapshot_len)
        return -1;
    GMP_IN_HOOK_SCOPE();
    /* PyTorch gave up: its retries are over, the open episode is confirmed */
    gmp_episode_commit_backend(GMP_BACKEND_CUDA, "framework");
    char path[GMP_PATH_MAX];
    if (!gmp_messages_recent(path, sizeof path)) {
        /* no failing call was seen (a memory fraction, the allocator's own
         * limit): the observer's words are the only news of it */
        char want[32], free_b[32], dev[24], message[256];
        gmp_fmt_bytes(request, want);
        gmp_fmt_bytes(device_free, free_b);
        gmp_fmt_i64(device, dev);
        gmp_strjoin(message, sizeof message, "CUDA out of memory: PyTorch's allocator could not "
                    "give ", want, " on cuda:", dev, " (", free_b, " free), as its "
                    "out-of-memory observer said", (char *)NULL);
        gmp_dump_request req = {
            .reason = "torch.cuda.OutOfMemoryError",
            .exception_type = "OutOfMemoryError",
            .exception_module = "torch.cuda",
            .exception_message = message,
            .backend = GMP_BACKEND_CUDA,
            .confirmed_by = "framework",
            .python_traceback_fd = -1,
        };
        if (!gmp_pl_dump(&req, path, sizeof path))
            return -1;
        gmp_messages_note_bundle(path, 1); /* torch's printed message says more */
        gmp_log("OOM in PyTorch's allocator on cuda:%s; bundle: %s" GMP_READ_IT "%s", dev, path,
                path);
    }
    if (!take_scratch(path))
        return -1;
    int rc = gmp_bundle_add_file(path, "torch_snapshot.pickle", snapshot, snapshot_len, scratch,
                                 sizeof scratch);
    if (rc == 0 && blocks_json && blocks_len)
        gmp_bundle_add_file(path, "torch_blocks.json", blocks_json, blocks_len, scratch,
                            sizeof scratch);
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
    if (rc == 0)
        gmp_log("PyTorch's memory snapshot added to %s", path);
    return rc;
}
