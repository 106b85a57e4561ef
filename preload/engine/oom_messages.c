/*
 * oom_messages.c — OOM deaths with no failing call.  TensorFlow's and JAX's BFC
 * allocators and PyTorch's memory fraction fail inside their own pool, so no
 * hook sees a failure; what the process writes to stderr says it.  What
 * stderr.c sees written there (write, writev, stdio, iostreams), at most
 * 4 KiB of each write, is assembled into lines across writes, and a line
 * about running out of memory (gmp_classify_oom_line: "CUDA out of memory",
 * an allocator's "failed to allocate 2.00GiB", an OOM exception's name; not
 * a bare "resource exhausted"), preferably one that names its exception
 * ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ..."),
 * gives exception_type/_module/_message:
 *   - to the open episode, whose bundle is not written yet;
 *   - else to the bundle written in the last 10 s (metadata.json rewritten
 *     atomically, bundle_patch.c);
 *   - else, when this process can mean it (message_speakers.c: the
 *     framework it names is loaded here; a runtime's last words are kept
 *     until the abort they announce, crash.c, and dropped if none comes),
 *     it is the only news of the OOM: a bundle of its own, with reason
 *     message_pattern:<pattern>, at most one per process (a framework that
 *     logs its OOM on every retry writes one bundle, not a directory full),
 *     whose failed request is its backend's newest failure in the 10 s
 *     before, when a later success closed that one's episode.
 * Python's own traceback as it prints it ("Traceback (most recent call
 * last):", the frames, the exception's line) is kept too: a failure in a
 * call that released the GIL (torch allocates so) has no Python stack of
 * its own, and the printed one becomes its python_traceback.txt (given to
 * the open episode, added to the bundle just written, or to the message's
 * own bundle).
 * A line is read past a rank's own "[rank3]: " prefix; a child's words a
 * launcher relays (torch.multiprocessing.spawn's "-- Process 1 terminated
 * with the following error:", torchrun's summary of its failed ranks, its
 * "[default3]:" copy of a rank's log) are not read at all: the child's
 * bundle tells that death (launcher_relays.c).
 * A line right after one that was taken, with PostgreSQL's "DETAIL:" in it
 * ("Failed on request of size 100663296 in memory context ..."), joins that
 * one's message: the program's own account of its failed request.
 * Lines are handled by one thread at a time (a busy flag: a concurrent line
 * is skipped, never waited for).
 */
#include "bundle.h"
#include "redact.h"
#include "preload.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SCAN_MAX 4096
#define TRACEBACK_MAX 8192
#define RECENT_NS (10ull * 1000000000ull)

typedef struct exception_text {
    int level; /* 0 none, 1 a matching line, 2 a line naming its exception type */
    gmp_oom_words said;
} exception_text;

static int busy;                      /* atomic try-lock over everything below */
static exception_text pending; /* for the open episode; its level is read
                                 * without the lock (stored atomically) */
static char last_bundle[GMP_PATH_MAX];
static uint64_t last_bundle_ns;
static int last_bundle_level; /* GMP_MESSAGES_PROGRAM: the program's own */
static int last_bundle_claimed; /* by the program's report of its failure */
static char patch_buf[64 * 1024];
static char traceback[TRACEBACK_MAX]; /* the last one printed */
static size_t traceback_len;
static int traceback_state;  /* 0 none, 1 being printed, 2 whole */
static int traceback_of_worker; /* it carries on with a DataLoader worker's frames */
static int pending_traceback; /* the whole one belongs to the open episode */
static const char *scanned_stream = "stderr"; /* the stream being read */

static int try_lock(void)
{
    return !__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE);
}

/* For what a bundle's fate hangs on (which bundle a program's report
 * joins): a writer of stderr may hold the lock for a moment, so wait for
 * it a while, yielding, rather than lose the note.  Bounded: a holder this
 * thread interrupted (a signal handler's) is never waited for long. */
static int lock_patiently(void)
{
    for (int i = 0; i < 4096; i++) {
        if (try_lock())
            return 1;
        sched_yield();
    }
    return 0;
}

static void unlock(void)
{
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

/* The whole traceback in a memfd for the bundle writer, or -1. */
static int traceback_fd(void)
{
    int fd = memfd_create("gmp-python-traceback", MFD_CLOEXEC);
    if (fd >= 0 && gmp_write_all(fd, traceback, traceback_len) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int gmp_messages_take(gmp_oom_words *said, int *python_fd)
{
    *python_fd = -1;
    if (!__atomic_load_n(&pending.level, __ATOMIC_RELAXED) || !try_lock())
        return 0;
    int level = pending.level;
    if (level) {
        *said = pending.said;
        __atomic_store_n(&pending.level, 0, __ATOMIC_RELAXED);
        if (pending_traceback && traceback_state == 2)
            *python_fd = traceback_fd();
        pending_traceback = 0;
    }
    unlock();
    return level;
}

int gmp_messages_exception_pending(void)
{
    return __atomic_load_n(&pending.level, __ATOMIC_RELAXED) >= 2;
}

/* Python's traceback, line by line as it is printed: the frames are
 * indented, the exception's line that ends it is not.  PyTorch re-raises a
 * DataLoader worker's exception in the main process with the worker's
 * traceback in its message ("RuntimeError: Caught RuntimeError in
 * DataLoader worker process 0." then "Original Traceback (most recent
 * call last):" and the worker's frames): one traceback, which the worker's
 * own exception's line ends. */
static void traceback_line(const char *line)
{
    static const char start[] = "Traceback (most recent call last):";
    static const char worker_start[] = "Original Traceback (most recent call last):";
    int first = !strcmp(line, start);
    if (first) {
        traceback_len = 0;
        traceback_state = 1;
        traceback_of_worker = 0;
    } else if (traceback_state == 2 && !strcmp(line, worker_start)) {
        traceback_state = 1; /* the worker's frames carry on the main process's */
        traceback_of_worker = 1;
        first = 1;
    } else if (traceback_state != 1) {
        return;
    }
    size_t n = strlen(line);
    if (traceback_len + n + 1 < sizeof traceback) {
        memcpy(traceback + traceback_len, line, n);
        /* its source lines are the program's text: a URL with a password */
        gmp_redact_text(traceback + traceback_len, n);
        traceback_len += n;
        traceback[traceback_len++] = '\n';
    }
    if (!first && line[0] != ' ')
        traceback_state = 2;
}

void gmp_messages_note_bundle(const char *path, int level)
{
    if (!lock_patiently())
        return;
    gmp_strlcpy(last_bundle, path, sizeof last_bundle);
    last_bundle_ns = gmp_now_realtime_ns();
    last_bundle_level = level;
    last_bundle_claimed = level >= GMP_MESSAGES_PROGRAM;
    unlock();
}

int gmp_messages_recent(char *path, size_t cap)
{
    if (!try_lock())
        return 0;
    int found = last_bundle[0] && gmp_now_realtime_ns() - last_bundle_ns < RECENT_NS;
    if (found)
        gmp_strlcpy(path, last_bundle, cap);
    unlock();
    return found;
}

int gmp_messages_claim_recent(char *path, size_t cap)
{
    if (!lock_patiently())
        return 0;
    int found = last_bundle[0] && !last_bundle_claimed &&
                gmp_now_realtime_ns() - last_bundle_ns < RECENT_NS;
    if (found) {
        gmp_strlcpy(path, last_bundle, cap);
        last_bundle_claimed = 1;
        last_bundle_level = GMP_MESSAGES_PROGRAM; /* a printed line says less */
    }
    unlock();
    return found;
}

/* "torch.OutOfMemoryError: CUDA out of memory..." -> type OutOfMemoryError,
 * module torch, the message; a line that is only an exception's name
 * ("MemoryError", as CPython prints one with no message) is the type. */
static void parse_line(const char *line, exception_text *t)
{
    size_t id = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:");
    const char *colon = NULL;
    for (size_t i = 0; i + 1 < id + 1 && line[i]; i++)
        if (line[i] == ':' && line[i + 1] == ' ') {
            colon = line + i;
            break;
        }
    size_t name_len = colon ? (size_t)(colon - line) : 0;
    if (!colon && id && line[id] == '\0' && !memchr(line, ':', id))
        name_len = id; /* the name alone */
    t->said.type[0] = t->said.module[0] = t->said.message[0] = '\0';
    if (name_len && line[0] != '.' && line[name_len - 1] != '.' &&
        name_len < sizeof t->said.type) {
        char name[sizeof t->said.type];
        memcpy(name, line, name_len);
        name[name_len] = '\0';
        const char *dot = strrchr(name, '.');
        gmp_strlcpy(t->said.type, dot ? dot + 1 : name, sizeof t->said.type);
        if (dot && (size_t)(dot - name) < sizeof t->said.module) {
            memcpy(t->said.module, name, (size_t)(dot - name));
            t->said.module[dot - name] = '\0';
        }
        gmp_strlcpy(t->said.message, colon ? colon + 2 : name, sizeof t->said.message);
        t->level = 2;
    } else {
        gmp_strlcpy(t->said.message, line, sizeof t->said.message);
        t->level = 1;
    }
    /* "cannot fetch https://u:p@h/..." */
    gmp_redact_text(t->said.message, strlen(t->said.message));
}

/* A matching line's exception, parsed (and its secrets masked) only where
 * something will use it: a test suite printing 200,000 lines of "expected
 * error: out of memory" is not parsed 200,000 times. */
static void line_text(const char *line, const char *pattern, int runtime, exception_text *t)
{
    const char *module = NULL, *type = NULL;
    if (gmp_message_last_words_said(runtime, &module, &type, NULL)) {
        /* a runtime's words, whole: the size they state is in them */
        gmp_strlcpy(t->said.type, type ? type : "", sizeof t->said.type);
        gmp_strlcpy(t->said.module, module ? module : "", sizeof t->said.module);
        gmp_strlcpy(t->said.message, line, sizeof t->said.message);
        gmp_redact_text(t->said.message, strlen(t->said.message));
        t->level = 2;
        return;
    }
    parse_line(line, t);
    /* lines that name their exception inside them */
    static const struct { const char *pattern, *type, *module; } named[] = {
        {"std::bad_alloc", "bad_alloc", "std"},
        {"java.lang.outofmemoryerror", "OutOfMemoryError", "java.lang"},
    };
    for (size_t i = 0; i < sizeof named / sizeof *named && !t->said.type[0]; i++)
        if (!strcmp(pattern, named[i].pattern)) {
            gmp_strlcpy(t->said.type, named[i].type, sizeof t->said.type);
            gmp_strlcpy(t->said.module, named[i].module, sizeof t->said.module);
            t->level = 2;
        }
}

static gmp_backend backend_of(const char *pattern, const char *line)
{
    if (strstr(pattern, "hip") || strstr(line, "HIP") || strstr(line, "ROCm"))
        return GMP_BACKEND_ROCM;
    if (strstr(pattern, "cuda") || strstr(line, "CUDA") || strstr(line, "GPU"))
        return GMP_BACKEND_CUDA;
    return GMP_BACKEND_CPU;
}

/* The message just taken, and where it went: a line that goes on with it
 * (PostgreSQL's DETAIL, GHC's maximum heap size) joins it there. */
static exception_text taken;
static enum { TAKEN_NONE, TAKEN_PENDING, TAKEN_BUNDLE, TAKEN_LAST_WORDS } taken_to;

/* The pid that wrote its message-only bundle (a forked child may write its own). */
static int message_bundle_pid;

/* A runtime's last words, kept until the death they announce (an abort)
 * writes them up; a process that goes on drops them.  Atomic: a signal
 * handler takes them. */
static struct {
    exception_text t;
    char pattern[64], line[1024];
    int pid; /* whose words (a forked child's death fulfils none) */
    uint64_t at_ns;
} last_words;
static int last_words_kept; /* atomic: 0 none, 1 being filled, 2 kept */

/* The only news of an OOM: a bundle of its own, once per process. */
static int write_bundle(const exception_text *t, const char *pattern, const char *line,
                        const gmp_failed_request *recent);

static void line_text(const char *line, const char *pattern, int runtime, exception_text *t);

/* runtime: the runtime whose words the line is in the form of (0: none);
 * own: that runtime wrote it. */
static void write_message_bundle(const char *pattern, const char *line, int ends_traceback,
                                 int runtime, int own)
{
    int pid = __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED);
    if (message_bundle_pid == pid)
        return;
    /* An allocation that failed shortly before is what the message is about
     * even when a later success of its size closed its episode as
     * recovered: CPython's malloc(64) fails, the MemoryError unwinds, its
     * traceback is printed with memory the unwinding gave back.  With no
     * such failure, the message is the only news of an OOM, and counts only
     * when this process can mean it (not a compiler quoting a source line,
     * nor a log or a scheduler relaying one). */
    gmp_failed_request recent = {0};
    uint64_t now = gmp_now_realtime_ns();
    gmp_episode_recent_failure(backend_of(pattern, line), now > RECENT_NS ? now - RECENT_NS : 0,
                               &recent);
    if (!recent.present && runtime != GMP_LAST_WORDS_NONE) {
        if (!own)
            return; /* quoted by another: a script, a log, a test */
        int own_limit = 0;
        gmp_message_last_words_said(runtime, NULL, NULL, &own_limit);
        if (!own_limit)
            return; /* it dies so only after a call failed, and none did */
        /* evidence only if the death follows: kept for it, handlers armed */
        int expected = 0;
        if (__atomic_compare_exchange_n(&last_words_kept, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            line_text(line, pattern, runtime, &last_words.t);
            gmp_strlcpy(last_words.pattern, pattern, sizeof last_words.pattern);
            gmp_strlcpy(last_words.line, line, sizeof last_words.line);
            last_words.pid = pid;
            last_words.at_ns = now;
            taken = last_words.t;
            taken_to = TAKEN_LAST_WORDS;
            __atomic_store_n(&last_words_kept, 2, __ATOMIC_RELEASE);
            gmp_crash_arm();
        }
        return;
    }
    if (!recent.present && !gmp_message_speaker_here(pattern, line, ends_traceback))
        return;
    exception_text t;
    line_text(line, pattern, own ? runtime : GMP_LAST_WORDS_NONE, &t);
    write_bundle(&t, pattern, line, &recent);
}

int gmp_messages_write_last_words(int exit_status)
{
    int pid = __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED);
    if (__atomic_load_n(&last_words_kept, __ATOMIC_ACQUIRE) != 2 || last_words.pid != pid ||
        message_bundle_pid == pid)
        return 0;
    /* a failing exit fulfils them only soon after: an interpreter that
     * caught its error and ran on for minutes died of something else */
    if (exit_status >= 0 &&
        (exit_status == 0 || gmp_now_realtime_ns() - last_words.at_ns > RECENT_NS))
        return 0;
    gmp_failed_request none = {0};
    return write_bundle(&last_words.t, last_words.pattern, last_words.line, &none);
}

/* The message's own bundle, once per process; 1 when written. */
static int write_bundle(const exception_text *t, const char *pattern, const char *line,
                        const gmp_failed_request *recent)
{
    int pid = __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED);
    char reason[96], path[GMP_PATH_MAX];
    gmp_strjoin(reason, sizeof reason, "message_pattern:", pattern, (char *)NULL);
    gmp_dump_request req = {
        .reason = reason,
        .exception_type = t->said.type[0] ? t->said.type : NULL,
        .exception_module = t->said.module[0] ? t->said.module : NULL,
        .exception_message = t->said.message,
        .backend = backend_of(pattern, line),
        .confirmed_by = "message",
        .failed = *recent,
        .python_traceback_fd = traceback_state == 2 ? traceback_fd() : -1,
    };
    int written = gmp_pl_dump(&req, path, sizeof path) != NULL;
    if (req.python_traceback_fd > 0)
        close(req.python_traceback_fd);
    if (written) {
        message_bundle_pid = pid;
        /* a death may follow (a framework's abort): our handlers, where the
         * action is still the default, then say so in the bundle's outcome */
        gmp_crash_arm();
        char said[GMP_PATH_MAX * 2 + 160];
        snprintf(said, sizeof said, "OOM message on %s (%s); bundle: %s" GMP_READ_IT "%s",
                 scanned_stream, pattern, path, path);
        gmp_printed_frames_expect(path);
        /* its "\tat" lines follow, whichever words matched ("unable to
         * create native thread: possibly out of memory" reads as "out of
         * memory") */
        if (strcasestr(line, "java.lang.OutOfMemoryError"))
            gmp_printed_frames_hold(said);
        else
            gmp_log("%s", said);
        gmp_strlcpy(last_bundle, path, sizeof last_bundle);
        last_bundle_ns = gmp_now_realtime_ns();
        last_bundle_level = t->level;
    }
    return written;
}

static int joined_detail(const char *line)
{
    int to = taken_to;
    taken_to = TAKEN_NONE;
    const char *detail = to ? strstr(line, "DETAIL:  ") : NULL;
    if (to && !detail)
        detail = strstr(line, ": Current maximum heap size is ");
    if (!detail)
        return 0;
    if (detail[0] == ':')
        detail += 2;
    size_t n = strlen(taken.said.message);
    if (n + 2 < sizeof taken.said.message) {
        taken.said.message[n] = ' ';
        gmp_strlcpy(taken.said.message + n + 1, detail, sizeof taken.said.message - n - 1);
        gmp_redact_text(taken.said.message, strlen(taken.said.message));
    }
    if (to == TAKEN_LAST_WORDS) {
        int expected = 2; /* a signal handler reads them whole or not at all */
        if (__atomic_compare_exchange_n(&last_words_kept, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            last_words.t.said = taken.said;
            __atomic_store_n(&last_words_kept, 2, __ATOMIC_RELEASE);
        }
    } else if (to == TAKEN_PENDING && pending.level) {
        pending.said = taken.said;
    } else if (to == TAKEN_BUNDLE && last_bundle[0]) {
        gmp_bundle_patch_exception(last_bundle, taken.said.type[0] ? taken.said.type : NULL,
                                   taken.said.module[0] ? taken.said.module : NULL,
                                   taken.said.message, patch_buf, sizeof patch_buf);
    }
    return 1;
}

static void on_line(const char *line)
{
    if (!strncmp(line, "gpumemprof: ", 12))
        return; /* our own */
    if (!(line = gmp_line_past_rank_prefix(line)) || gmp_line_in_relay(line))
        return;
    if (joined_detail(line) || gmp_printed_frames_line(line))
        return;
    traceback_line(line);
    if (gmp_line_relayed_traceback(line, traceback_state))
        return;
    if (traceback_state == 1)
        return; /* a frame or source line ("raise OutOfMemoryError(...)"): the
                 * exception's own line ends the traceback and says it */
    /* a runtime's words in their own form, if that runtime wrote them;
     * else what the line says in words of its own */
    int runtime = gmp_message_last_words(line);
    int own = runtime && gmp_message_last_words_own(runtime, gmp_stderr_writer);
    const char *pattern = own ? gmp_message_last_words_said(runtime, NULL, NULL, NULL) : NULL;
    if (!pattern)
        pattern = gmp_classify_oom_line(line);
    if (!pattern)
        return;
    int words_of = own ? runtime : GMP_LAST_WORDS_NONE;
    /* the traceback this line ends, if it ends one */
    int with_traceback = traceback_state == 2 && traceback_len > strlen(line) + 1 &&
                         !strncmp(traceback + traceback_len - strlen(line) - 1, line,
                                  strlen(line));
    exception_text t;
    if (gmp_any_episode_open()) {
        line_text(line, pattern, words_of, &t);
        if (t.level > pending.level) {
            pending.said = t.said;
            __atomic_store_n(&pending.level, t.level, __ATOMIC_RELAXED);
            taken = t;
            taken_to = TAKEN_PENDING;
        }
        pending_traceback |= with_traceback;
        return;
    }
    /* the clock only when a bundle was written: a test suite printing its
     * expected errors writes none, and reads it once a line less */
    if (last_bundle[0] && gmp_now_realtime_ns() - last_bundle_ns < RECENT_NS) {
        line_text(line, pattern, words_of, &t);
        gmp_printed_frames_expect(last_bundle);
        /* kept when the bundle has none of its own; the main process's
         * carried on by its DataLoader worker's, whose exception line ends
         * them, takes the place of its first part (written with the bundle) */
        if (with_traceback)
            (traceback_of_worker ? gmp_bundle_put_file : gmp_bundle_add_file)(
                last_bundle, "python_traceback.txt", traceback, traceback_len, patch_buf,
                sizeof patch_buf);
        if (t.level > last_bundle_level &&
            gmp_bundle_patch_exception(last_bundle, t.said.type[0] ? t.said.type : NULL,
                                       t.said.module[0] ? t.said.module : NULL, t.said.message,
                                       patch_buf, sizeof patch_buf) == 0) {
            last_bundle_level = t.level;
            taken = t;
            taken_to = TAKEN_BUNDLE;
        }
        return;
    }
    if (!with_traceback)
        traceback_state = 0; /* not this message's */
    write_message_bundle(pattern, line, with_traceback, runtime, own);
}

GMP_START_EXIT_TEXT void gmp_messages_end(void)
{
    if (!gmp_printed_frames_awaited())
        return; /* nothing held back: most processes, at their exit */
    if (!try_lock())
        return; /* a writer this thread interrupted: its line is lost */
    gmp_printed_frames_end();
    unlock();
}

/* Lines are assembled across writes, each stream's apart: Python prints
 * "torch", ".", "OutOfMemoryError", ": ", the message and "\n" as six writes. */
typedef struct line_assembly {
    const char *stream; /* as our line names it */
    char line[1024];
    size_t have;
} line_assembly;
static line_assembly from_stderr = {.stream = "stderr"}, from_stdout = {.stream = "stdout"};

static void scan(line_assembly *a, const char *buf, size_t n)
{
    if (!n || !buf || !gmp_pl_active() || !try_lock())
        return;
    {
        GMP_IN_HOOK_SCOPE();
        scanned_stream = a->stream;
        size_t len = n < SCAN_MAX ? n : SCAN_MAX;
        for (size_t at = 0; at < len;) {
            const char *nl = memchr(buf + at, '\n', len - at);
            size_t end = nl ? (size_t)(nl - buf) : len, take = end - at;
            if (take > sizeof a->line - 1 - a->have)
                take = sizeof a->line - 1 - a->have; /* a longer line is cut */
            memcpy(a->line + a->have, buf + at, take);
            a->have += take;
            if (nl || a->have == sizeof a->line - 1) {
                if (nl && a->have && a->line[a->have - 1] == '\r')
                    a->have--; /* a terminal's "\r\n" (erl -noshell) */
                a->line[a->have] = '\0';
                if (a->have > 8)
                    on_line(a->line);
                a->have = 0;
            }
            at = end + (nl ? 1 : 0);
            if (!nl)
                break;
        }
    }
    unlock();
}

void gmp_messages_scan(const char *buf, size_t n)
{
    scan(&from_stderr, buf, n);
}

void gmp_messages_scan_stdout(const char *buf, size_t n)
{
    scan(&from_stdout, buf, n);
}
