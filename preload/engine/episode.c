/*
 * episode.c — OOM episodes: one bundle per failure, confirmed or recovered.
 *
 * Frameworks retry: PyTorch frees its cache and calls cudaMalloc again, a
 * BFC allocator tries smaller sizes.  So a failure opens an episode on its
 * (backend, device) and is recorded at once as an `oom` event; the bundle is
 * written only when the episode is confirmed:
 *   second_failure  another failure there, at least as large, with no success
 *                   between (of at least min(failed size, GMP_HOST_EVENT_MIN_BYTES):
 *                   other threads' small mallocs do not count)
 *   exit            the process exits with the episode open
 *   timeout         GMP_OOM_CONFIRM_MS pass (a watcher thread, started on the
 *                   first episode, or the next hook call notices)
 *   first           GMP_OOM_POLICY=first writes at the first failure
 *   caught          a pool's worker loop catches it (python.c): written at
 *                   once, for the process lives on, and its pool may
 *                   SIGKILL it at any moment
 *   message         a success that would close it comes after the program
 *                   wrote an OOM exception to stderr (oom_messages.c)
 * Once a bundle is written, a failure there within GMP_OOM_CONFIRM_MS is
 * the same crossing of the same limit: a retry of the request it is about
 * (CuPy frees its pool, collects garbage and asks a third time), or another
 * request of another size on the way down (BEAM's allocators), is an
 * event, not a second episode; and a fatal signal then is that episode's
 * death, which its bundle's outcome says (outcome.c), not a bundle of its
 * own.  One death, one bundle.  GMP_OOM_POLICY=first writes one for each.
 * A failure made from another Python stack than the episode's (both
 * known) is no retry: the program went on from the first (it caught the
 * MemoryError, or the OutOfMemoryError, and ran on to another line), so
 * the first is written up now (another_failure) and the second opens an
 * episode of its own, whose bundle tells how the process ended; the first
 * one's outcome then names it (outcome.c), and readers call the first
 * survived.
 * Else a later success there of at least the failed size closes the episode
 * as recovered (an event, counted in the next bundle).  Each episode's state
 * moves by CAS, so exactly one thread commits it: at most one bundle per
 * episode, no lock on the way to the dump.  A program that catches the OOM
 * and reports it (program_dump.c) adopts the open episode instead: its
 * report becomes the episode's one bundle.
 */
#include "bundle.h"
#include "preload.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

enum { EP_IDLE = 0, EP_OPENING, EP_OPEN, EP_COMMITTING };

typedef struct episode {
    int state;            /* atomic */
    int success_since;    /* atomic: a success on this device since the failure */
    /* atomic, both: read by threads that do not own the episode, which may
     * be reopened meanwhile */
    uint64_t deadline_ns;
    uint64_t failed_size;
    gmp_failed_request failed; /* the call that opened it */
    int python_traceback_fd;   /* its thread's Python stack then, or -1 */
    uint64_t written_ns; /* atomic: when its last bundle was written, monotonic; 0 none */
    uint64_t python_stack; /* atomic: gmp_python_stack_hash of the call that opened it */
} episode;

static episode episodes[GMP_BACKEND_COUNT][GMP_MAX_DEVICES + 1];

static int any_failure;         /* atomic */
int gmp_episodes_open GMP_STARTUP_DATA; /* atomic count; read at every exit */
static uint32_t recovered;      /* atomic: episodes closed as recovered */
static uint64_t opened;         /* atomic: episodes opened */
static int watcher_started;     /* atomic; reset in a forked child */

/* Every change of the count goes here: the malloc hooks' common case
 * holds only while it is zero. */
static void episodes_open_add(int delta)
{
    __atomic_fetch_add(&gmp_episodes_open, delta, __ATOMIC_RELAXED);
    gmp_host_fast_path_refresh();
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *library_of(gmp_backend backend, gmp_api api)
{
    const char *owner = gmp_api_library(api);
    if (owner[0])
        return owner;
    return backend == GMP_BACKEND_ROCM ? "libamdhip64"
           : backend == GMP_BACKEND_CPU ? "libc"
                                        : "libcudart";
}

/* "cuda:0" or "host" */
static void where(gmp_backend backend, int device, char *out, size_t cap)
{
    if (backend == GMP_BACKEND_CPU || device < 0) {
        gmp_strlcpy(out, "host", cap);
        return;
    }
    char num[24];
    gmp_fmt_i64(device, num);
    gmp_strjoin(out, cap, gmp_backend_name(backend), ":", num, (char *)NULL);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    default: return "signal";
    }
}

/* A fatal signal that writes the bundle: which, where it struck, and
 * whether it was a fault (a bad address, an illegal instruction: si_code
 * above 0) or sent (abort, kill: no address, and its si_addr holds the
 * sender's pid). */
typedef struct crash {
    int sig;
    uint64_t address;
    int fault;
    const char *detail; /* more of the message (" It touched ..."), or NULL */
} crash;

/* Write the bundle of a failed request (an episode this thread owns, or the
 * last failure when a signal kills the process); crash is NULL unless one
 * does. */
static int commit_failure(gmp_backend backend, const gmp_failed_request *f,
                          const char *confirmed_by, const crash *cr, int traceback_fd)
{
    gmp_classification c = gmp_classify_result(backend, f->api, f->code);
    char place[32], size[32], code[24], addr[24], reason[64], message[384];
    char line[GMP_PATH_MAX + 256];
    where(backend, f->device, place, sizeof place);
    gmp_fmt_bytes(f->size, size);
    gmp_fmt_i64(f->code, code);
    const char *signame = cr ? signal_name(cr->sig) : NULL;
    if (cr) {
        gmp_fmt_hex(cr->address, addr);
        gmp_strjoin(reason, sizeof reason, signame, " after failed allocation", (char *)NULL);
    }
    /* "cudaMalloc of 256.0 MiB on cuda:0 failed with cudaErrorMemoryAllocation (code 2)."
     * "SIGSEGV at address 0x0 after malloc of 1.0 TiB on host failed with ENOMEM (code 12)."
     * "SIGABRT after malloc of 32.0 TiB on host failed with ENOMEM (code 12)." */
    int at_address = cr && cr->fault;
    gmp_strjoin(message, sizeof message, cr ? signame : "", at_address ? " at address " : "",
                at_address ? addr : "", cr ? " after " : "", gmp_api_name(f->api), " of ", size,
                " on ", place, " failed with ", c.reason, " (code ", code, ").",
                cr && cr->detail ? cr->detail : "", (char *)NULL);

    /* a framework's own words on stderr, when it said something meanwhile;
     * for a sent signal too (abort after C++'s or Rust's last words), not
     * for a fault, which says nothing */
    gmp_oom_words said;
    int printed_traceback = -1; /* the Python stack as printed, when none was taken */
    int framework = cr && cr->fault ? 0 : gmp_messages_take(&said, &printed_traceback);
    if (traceback_fd <= 0)
        traceback_fd = printed_traceback;
    gmp_dump_request req = {
        .reason = cr ? reason : c.reason,
        .exception_type = framework && said.type[0] ? said.type : cr ? signame : c.reason,
        .exception_module = framework ? (said.module[0] ? said.module : NULL)
                                      : library_of(backend, f->api),
        .exception_message = framework ? said.message : message,
        .backend = backend,
        .confirmed_by = confirmed_by,
        /* under a pool's worker loop, which catches it: no death of this
         * process's, whatever ends it (its pool's SIGTERM, as a rule) */
        .caught_by = cr ? NULL : gmp_python_worker_loop(traceback_fd),
        .failed = *f,
        .recovered_episodes = __atomic_load_n(&recovered, __ATOMIC_RELAXED),
        .python_traceback_fd = traceback_fd,
    };
    req.failed.present = 1;
    char path[GMP_PATH_MAX];
    int written = gmp_pl_dump(&req, path, sizeof path) != NULL;
    if (printed_traceback > 0)
        close(printed_traceback);
    if (!written)
        return 0;
    if (!cr)
        gmp_messages_note_bundle(path, framework);
    /* the death the pressure warning of this crossing warned of: one
     * episode, one bundle, this one */
    char replaced[GMP_PATH_MAX];
    gmp_watchdog_replace_warning(replaced, sizeof replaced);
    /* gpumemprof: OOM on cuda:0 (cudaMalloc 256.0 MiB, cudaErrorMemoryAllocation); bundle: P
     * gpumemprof: SIGSEGV after failed allocation (malloc 1.0 TiB on host, ENOMEM); bundle: P
     * ...; bundle: P (replaces the memory-pressure warning W) */
    if (cr)
        gmp_strjoin(line, sizeof line, reason, " (", gmp_api_name(f->api), " ", size, " on ",
                    place, ", ", c.reason, "); bundle: ", path, replaced, (char *)NULL);
    else
        gmp_strjoin(line, sizeof line, "OOM on ", place, " (", gmp_api_name(f->api), " ",
                    size, ", ", c.reason, "); bundle: ", path, replaced, (char *)NULL);
    gmp_log("%s" GMP_READ_IT "%s", line, path);
    return 1;
}

/* Write the bundle of an episode this thread owns (state COMMITTING);
 * 1 when it was written. */
static int commit(gmp_backend backend, episode *ep, const char *confirmed_by,
                  const crash *cr)
{
    /* a stop sent meanwhile comes once the episode is settled: its
     * handler then finds the bundle written (see crash.c) */
    sigset_t held;
    if (!gmp_in_signal)
        gmp_stop_signals_hold(&held);
    int written = commit_failure(backend, &ep->failed, confirmed_by, cr,
                                 ep->python_traceback_fd);
    if (written)
        __atomic_store_n(&ep->written_ns, now_ns(), __ATOMIC_RELEASE);
    if (ep->python_traceback_fd > 0 && !cr) /* a dying process keeps it */
        close(ep->python_traceback_fd);
    ep->python_traceback_fd = -1;
    episodes_open_add(-1);
    __atomic_store_n(&ep->state, EP_IDLE, __ATOMIC_RELEASE);
    if (!gmp_in_signal)
        gmp_stop_signals_release(&held);
    return written;
}

static int try_take(episode *ep)
{
    int expected = EP_OPEN;
    return __atomic_compare_exchange_n(&ep->state, &expected, EP_COMMITTING, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void gmp_episode_check_deadlines(void)
{
    if (!__atomic_load_n(&gmp_episodes_open, __ATOMIC_RELAXED))
        return;
    uint64_t now = now_ns();
    for (int b = 0; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d <= GMP_MAX_DEVICES; d++) {
            episode *ep = &episodes[b][d];
            if (__atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) == EP_OPEN &&
                now >= __atomic_load_n(&ep->deadline_ns, __ATOMIC_RELAXED) && try_take(ep))
                commit((gmp_backend)b, ep, "timeout", NULL);
        }
}

static void *watcher_main(void *arg)
{
    (void)arg;
    GMP_IN_HOOK_SCOPE(); /* nothing this thread does is the program's */
    for (;;) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!gmp_pl_active())
            continue;
        gmp_episode_check_deadlines();
    }
    return NULL;
}

/* The watcher exists only in processes that had an episode. */
static void ensure_watcher(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&watcher_started, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    /* may fail when memory is gone; hooks then check deadlines themselves */
    if (gmp_spawn_thread(watcher_main, 256 * 1024) < 0)
        __atomic_store_n(&watcher_started, 0, __ATOMIC_RELEASE);
}

/* VmSize from /proc/self/statm (its first field, in pages), or 0: what
 * RLIMIT_AS counts, at the failure itself.  A read, no allocation. */
static uint64_t address_space_now(void)
{
    char buf[96];
    if (gmp_read_file("/proc/self/statm", buf, sizeof buf) <= 0)
        return 0;
    uint64_t pages = 0;
    for (const char *p = buf; *p >= '0' && *p <= '9' && pages < (UINT64_MAX >> 16); p++)
        pages = pages * 10 + (uint64_t)(*p - '0');
    long page = sysconf(_SC_PAGESIZE);
    return pages * (uint64_t)(page > 0 ? page : 4096);
}

/* A bundle written here less than GMP_OOM_CONFIRM_MS ago: what fails or
 * dies now is its episode's. */
static int written_lately(episode *ep)
{
    uint64_t written = __atomic_load_n(&ep->written_ns, __ATOMIC_ACQUIRE);
    return written && !gmp_pl.cfg->oom_policy_first && now_ns() - written < gmp_pl.confirm_ns;
}

void gmp_episode_failure(gmp_backend backend, int device, gmp_api api, uint64_t size,
                         long code, uint64_t in_use, const gmp_device_state *device_then)
{
    gmp_classification c = gmp_classify_result(backend, api, code);
    uint64_t now = gmp_now_realtime_ns();
    /* the failing line, as an allocation's: a device failure has no Python
     * traceback of its own (the call may have let go of the GIL).  Where
     * the host is short, in the tables already made only: their address
     * space is the program's to retry with (and CPython, holding the GIL
     * as its malloc fails, leaves its traceback) */
    uint32_t stack_id = backend == GMP_BACKEND_CPU ? gmp_stack_id_in_tables_made()
                                                   : gmp_stack_id_here();
    gmp_pl_event_at(now, stack_id, c.is_oom ? GMP_EV_OOM : GMP_EV_ALLOC_FAILED, backend, device,
                    api, 0, size, (int32_t)code, in_use);
    if (!c.is_oom)
        return;
    gmp_failed_request f = {.present = 1, .api = api, .size = size, .device = device,
                            .code = code, .in_use = in_use, .time_ns = now,
                            .stack_id = stack_id};
    uint64_t python_stack = gmp_python_stack_hash();
    if (backend == GMP_BACKEND_CPU)
        f.vm_size = address_space_now();
    f.stack_depth = gmp_stack_capture(f.stack, GMP_STACK_MAX);
    gmp_pl_probe_python(); /* now, not in the signal handler a crash may bring */
    gmp_recent_failure_note(backend, &f);
    __atomic_store_n(&any_failure, 1, __ATOMIC_RELEASE);
    gmp_crash_arm();
    episode *ep = &episodes[backend][gmp_device_index(device)];
    int state = __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE);
    uint64_t its_stack = __atomic_load_n(&ep->python_stack, __ATOMIC_RELAXED);
    int another = python_stack && its_stack && python_stack != its_stack;
    if (state == EP_OPEN && another) {
        if (try_take(ep))
            commit(backend, ep, "another_failure", NULL);
        state = __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE); /* this one opens its own */
    } else if (state == EP_OPEN) {
        if (!__atomic_exchange_n(&ep->success_since, 0, __ATOMIC_ACQ_REL) &&
            size >= __atomic_load_n(&ep->failed_size, __ATOMIC_RELAXED) && try_take(ep))
            commit(backend, ep, "second_failure", NULL);
        return; /* smaller retries (a BFC allocator's) keep the episode open */
    }
    if (state == EP_IDLE && written_lately(ep) && !another)
        return;
    int expected = EP_IDLE;
    if (state != EP_IDLE ||
        !__atomic_compare_exchange_n(&ep->state, &expected, EP_OPENING, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return; /* being opened or committed by another thread right now */
    ep->failed = f;
    __atomic_store_n(&ep->python_stack, python_stack, __ATOMIC_RELAXED);
    /* what was held, the host and the device then, not at the bundle's writing */
    gmp_failure_snapshot_take(backend, device, now, device_then);
    __atomic_fetch_add(&opened, 1, __ATOMIC_RELAXED);
    int traceback_fd = gmp_python_traceback_fd();
    ep->python_traceback_fd = traceback_fd;
    /* under a pool's worker loop, which catches it, the process lives on
     * (and its pool may SIGKILL it at any moment, as joblib's does): no
     * death to wait for, the bundle now.  Read before the episode is open:
     * from then on another thread's failure may commit it and close the fd */
    int caught = !gmp_pl.cfg->oom_policy_first && gmp_python_worker_loop(traceback_fd);
    __atomic_store_n(&ep->failed_size, size, __ATOMIC_RELAXED);
    __atomic_store_n(&ep->deadline_ns, now_ns() + gmp_pl.confirm_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&ep->success_since, 0, __ATOMIC_RELAXED);
    episodes_open_add(1);
    __atomic_store_n(&ep->state, EP_OPEN, __ATOMIC_RELEASE);
    if (gmp_pl.cfg->oom_policy_first || caught) {
        if (try_take(ep))
            commit(backend, ep, caught ? "caught" : "first", NULL);
        return;
    }
    ensure_watcher();
}

void gmp_episode_success(gmp_backend backend, int device, uint64_t size, uint64_t in_use)
{
    episode *ep = &episodes[backend][gmp_device_index(device)];
    if (GMP_LIKELY(__atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) != EP_OPEN))
        return;
    uint64_t failed_size = __atomic_load_n(&ep->failed_size, __ATOMIC_RELAXED);
    if (size < failed_size) {
        /* A small success (another thread's 64-byte malloc) says nothing
         * about whether the failed request could succeed now. */
        uint64_t meaningful = failed_size < gmp_pl.host_event_min ? failed_size
                                                                   : gmp_pl.host_event_min;
        if (size >= meaningful)
            __atomic_store_n(&ep->success_since, 1, __ATOMIC_RELEASE);
        return;
    }
    int expected = EP_OPEN;
    if (!__atomic_compare_exchange_n(&ep->state, &expected, EP_COMMITTING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    if (gmp_messages_exception_pending()) {
        /* The program raised an OOM since the failure: not a retry that
         * worked.  CPython's malloc(64) fails, and the MemoryError's
         * traceback is printed with memory the unwinding gave back. */
        commit(backend, ep, "message", NULL);
        return;
    }
    gmp_pl_event(GMP_EV_OOM_RECOVERED, backend, device, ep->failed.api, 0, failed_size, 0,
                 in_use);
    __atomic_fetch_add(&recovered, 1, __ATOMIC_RELAXED);
    episodes_open_add(-1);
    __atomic_store_n(&ep->state, EP_IDLE, __ATOMIC_RELEASE);
}

int gmp_episode_adopt(gmp_backend prefer, gmp_backend *backend, gmp_failed_request *f,
                      int *traceback_fd, uint32_t *recovered_episodes)
{
    *traceback_fd = -1;
    if (!__atomic_load_n(&gmp_episodes_open, __ATOMIC_RELAXED))
        return 0;
    for (int pass = 0; pass < 2; pass++) /* the backend the program names first */
        for (int b = 0; b < GMP_BACKEND_COUNT; b++) {
            if ((b == (int)prefer) != (pass == 0))
                continue;
            for (int d = 0; d <= GMP_MAX_DEVICES; d++) {
                episode *ep = &episodes[b][d];
                if (!try_take(ep))
                    continue;
                *backend = (gmp_backend)b;
                *f = ep->failed;
                f->present = 1;
                *traceback_fd = ep->python_traceback_fd;
                ep->python_traceback_fd = -1;
                *recovered_episodes = (uint32_t)__atomic_load_n(&recovered, __ATOMIC_RELAXED);
                episodes_open_add(-1);
                __atomic_store_n(&ep->state, EP_IDLE, __ATOMIC_RELEASE);
                return 1;
            }
        }
    return 0;
}

void gmp_episode_commit_backend(gmp_backend backend, const char *confirmed_by)
{
    if (!__atomic_load_n(&gmp_episodes_open, __ATOMIC_RELAXED))
        return;
    for (int d = 0; d <= GMP_MAX_DEVICES; d++)
        if (try_take(&episodes[backend][d]))
            commit(backend, &episodes[backend][d], confirmed_by, NULL);
}

GMP_START_EXIT_TEXT void gmp_episode_commit_all(const char *confirmed_by)
{
    if (!__atomic_load_n(&gmp_episodes_open, __ATOMIC_RELAXED))
        return;
    for (int b = 0; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d <= GMP_MAX_DEVICES; d++)
            if (try_take(&episodes[b][d]))
                commit((gmp_backend)b, &episodes[b][d], confirmed_by, NULL);
}

GMP_START_EXIT_TEXT void gmp_episode_wait_commits(unsigned max_ms)
{
    /* an episode being committed still counts as open until it is written */
    if (!__atomic_load_n(&gmp_episodes_open, __ATOMIC_ACQUIRE))
        return;
    for (unsigned waited = 0; waited < max_ms; waited += 10) {
        int busy = 0;
        for (int b = 0; b < GMP_BACKEND_COUNT && !busy; b++)
            for (int d = 0; d <= GMP_MAX_DEVICES && !busy; d++)
                busy = __atomic_load_n(&episodes[b][d].state, __ATOMIC_ACQUIRE) == EP_COMMITTING;
        if (!busy)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int gmp_episode_crash(int sig, const siginfo_t *info)
{
    int failed = __atomic_load_n(&any_failure, __ATOMIC_ACQUIRE);
    if (!gmp_pl_active() || gmp_pl.cfg->on_crash == GMP_ON_CRASH_NEVER)
        return 0;
    /* a page of shared memory a full tmpfs could not back: the failure,
     * which no call returned, is this fault (shm_fault.c) */
    gmp_failed_request shm;
    char detail[GMP_PATH_MAX + 96];
    if (sig == SIGBUS && gmp_shm_fault(info, &shm, detail, sizeof detail)) {
        int fault = info->si_code > 0; /* else raised again, by a handler of its own */
        crash cr = {sig, fault ? (uint64_t)(uintptr_t)info->si_addr : 0, fault, detail};
        return commit_failure(GMP_BACKEND_CPU, &shm, "signal", &cr, -1);
    }
    if (!failed && gmp_pl.cfg->on_crash != GMP_ON_CRASH_ALWAYS)
        return 0;
    if (gmp_signal_is_stop(sig)) {
        /* stopped from outside while a failure is open: that failure is the
         * death's cause, told as it is (no crash, nothing else written) */
        int written = 0;
        for (int b = 0; b < GMP_BACKEND_COUNT; b++)
            for (int d = 0; d <= GMP_MAX_DEVICES; d++)
                if (try_take(&episodes[b][d]))
                    written |= commit((gmp_backend)b, &episodes[b][d], "signal", NULL);
        return written;
    }
    int fault = info && info->si_code > 0;
    crash cr = {sig, fault ? (uint64_t)(uintptr_t)info->si_addr : 0, fault, NULL};
    /* an open episode is this death's cause: its bundle names the signal */
    int written = 0;
    for (int b = 0; b < GMP_BACKEND_COUNT; b++)
        for (int d = 0; d <= GMP_MAX_DEVICES; d++)
            if (try_take(&episodes[b][d]))
                written |= commit((gmp_backend)b, &episodes[b][d], "signal", &cr);
    if (written)
        return 1;
    gmp_failed_request f;
    gmp_backend backend;
    if (failed && gmp_recent_failure_for_crash(&f, &backend))
        return written_lately(&episodes[backend][gmp_device_index(f.device)]) ||
               commit_failure(backend, &f, "signal", &cr, -1);
    /* GMP_ON_CRASH=always, and no allocation ever failed */
    char addr[24], message[96], path[GMP_PATH_MAX];
    gmp_fmt_hex(cr.address, addr);
    gmp_strjoin(message, sizeof message, signal_name(sig), fault ? " at address " : "",
                fault ? addr : "", ".", (char *)NULL);
    gmp_dump_request req = {
        .reason = signal_name(sig),
        .exception_type = signal_name(sig),
        .exception_message = message,
        .backend = GMP_BACKEND_CPU,
        .confirmed_by = "signal",
        .recovered_episodes = __atomic_load_n(&recovered, __ATOMIC_RELAXED),
    };
    if (!gmp_pl_dump(&req, path, sizeof path))
        return 0;
    gmp_log("%s; bundle: %s" GMP_READ_IT "%s", signal_name(sig), path, path);
    return 1;
}

void gmp_episode_counts(uint64_t *opened_episodes, uint64_t *recovered_episodes)
{
    *opened_episodes = __atomic_load_n(&opened, __ATOMIC_RELAXED);
    *recovered_episodes = __atomic_load_n(&recovered, __ATOMIC_RELAXED);
}

void gmp_episode_after_fork(void)
{
    /* the child inherits no episode and no watcher thread; every episode
     * follows a noted failure, so without one there is nothing to clear
     * (and 64 KiB of pages not to touch in a child that execs at once) */
    if (gmp_recent_failures_after_fork())
        memset(episodes, 0, sizeof episodes);
    GMP_CLEAR_IN_CHILD(any_failure);
    GMP_CLEAR_IN_CHILD(gmp_episodes_open);
    GMP_CLEAR_IN_CHILD(watcher_started);
    gmp_host_fast_path_refresh();
}
