/*
 * printed_frames.c — the stack a runtime prints after its out-of-memory
 * line, for the bundle that line went to: the JVM's "\tat Heap.fill(Heap.java:5)"
 * under "Exception in thread "main" java.lang.OutOfMemoryError: Java heap
 * space", V8's "    at grow (/srv/app/load.js:3:46)" under "RangeError:
 * Array buffer allocation failed".  Python prints its traceback before the
 * exception's line (oom_messages.c keeps that one); these runtimes print
 * theirs after it, and it is the only word of which line of the program
 * ran out.  The innermost frames go to the bundle as printed_stack.txt when
 * the frames end: at the next line that is not one, at the 16th, or at the
 * process's end (an uncaught error's frames are its last words).
 *
 * And our own line about that bundle waits until the frames end (the next
 * line that is not one, or the process's end): said between the
 * exception's line and its frames, it would split the one report that log
 * readers join by its indented lines.
 *
 * Called under oom_messages.c's lock: one thread at a time, no allocation.
 */
#include "bundle.h"
#include "preload.h"
#include "printed_frame.h"
#include "redact.h"

#include <string.h>

#define FRAMES_KEPT 16
#define FRAMES_MAX 4096

/* atomic: a line that may be followed by frames was taken.  Every
 * process's exit reads it, without the lock (gmp_printed_frames_awaited),
 * so it lies on a page the loader wrote: in .bss it was a page fault of
 * its own in each process */
static int expecting GMP_STARTUP_DATA;
static int owner;     /* the pid that took it: a forked child's lines are its own */
static char bundle[GMP_PATH_MAX]; /* where they go, until they are written */
static char frames[FRAMES_MAX];
static size_t frames_len, frames_n;
static char held[GMP_PATH_MAX * 2 + 160]; /* our line, said when the frames end */
static char patch_buf[64 * 1024];

static int is_frame(const char *line)
{
    gmp_printed_frame f;
    return gmp_printed_frame_read(line, strlen(line), &f) == 0;
}

/* The frames kept so far into the bundle, once (a bundle's file is never
 * written over). */
static void write_frames(void)
{
    if (bundle[0] && frames_n)
        gmp_bundle_add_file(bundle, "printed_stack.txt", frames, frames_len, patch_buf,
                            sizeof patch_buf);
    bundle[0] = '\0';
}

static int this_pid(void)
{
    return __atomic_load_n(&gmp_pl.pid, __ATOMIC_RELAXED);
}

void gmp_printed_frames_expect(const char *path)
{
    gmp_strlcpy(bundle, path, sizeof bundle);
    frames_len = frames_n = 0;
    __atomic_store_n(&expecting, 1, __ATOMIC_RELAXED);
    owner = this_pid();
    held[0] = '\0';
}

void gmp_printed_frames_hold(const char *line)
{
    gmp_strlcpy(held, line, sizeof held);
}

int gmp_printed_frames_line(const char *line)
{
    if (__atomic_load_n(&expecting, __ATOMIC_RELAXED) && owner != this_pid())
        __atomic_store_n(&expecting, 0, __ATOMIC_RELAXED); /* the parent's, from before the fork */
    if (!__atomic_load_n(&expecting, __ATOMIC_RELAXED))
        return 0;
    if (!is_frame(line)) {
        gmp_printed_frames_end();
        return 0;
    }
    size_t n = strlen(line);
    if (bundle[0] && frames_len + n + 1 <= sizeof frames) {
        memcpy(frames + frames_len, line, n);
        gmp_redact_text(frames + frames_len, n); /* a script's URL with a password */
        frames_len += n;
        frames[frames_len++] = '\n';
        if (++frames_n == FRAMES_KEPT)
            write_frames(); /* the program's own are among the innermost */
    }
    return 1;
}

/* Read without the lock, by the exit: whether there is anything for
 * gmp_printed_frames_end to do, so that a process that printed no runtime's
 * OOM line exits without the lock's page or this file's text. */
GMP_START_EXIT_TEXT int gmp_printed_frames_awaited(void)
{
    return __atomic_load_n(&expecting, __ATOMIC_RELAXED);
}

void gmp_printed_frames_end(void)
{
    if (!__atomic_load_n(&expecting, __ATOMIC_RELAXED) || owner != this_pid())
        return;
    write_frames();
    __atomic_store_n(&expecting, 0, __ATOMIC_RELAXED);
    if (held[0]) {
        gmp_log("%s", held);
        held[0] = '\0';
    }
}
