/*
 * messages.h — what the program says, as the preload reads it: what it
 * writes on stderr (stderr.c: write, writev, stdio, perror; the JVM's own
 * words on stdout), the OOM messages in it (oom_messages.c), the frames a
 * runtime prints after them (printed_frames.c), a launcher's relays and a
 * rank's prefixes (launcher_relays.c), whether this process can mean such
 * a line (message_speakers.c) and a runtime's last words (last_words.c).
 * A layer of preload.h, which includes it.
 */
#ifndef GMP_MESSAGES_H
#define GMP_MESSAGES_H

#include "util.h"

#include <stddef.h>

/* stderr.c: at start, what fd 2 is; from then on gmp_log speaks only there,
 * at a line's start (its gate). */
GMP_HIDDEN void gmp_stderr_start(void);

/* oom_messages.c: an OOM message seen on stderr while an episode was open, for
 * its bundle: copies it out and returns its level (0 none); *python_fd: the
 * Python traceback printed with it, in a memfd the caller closes, or -1.
 * note_bundle: an episode's bundle was written at path (level: what filled
 * its exception, 0 the hook's own words). */
typedef struct gmp_oom_words {
    char type[128], module[128], message[512]; /* "OutOfMemoryError", "torch", ... */
} gmp_oom_words;
GMP_HIDDEN int gmp_messages_take(gmp_oom_words *said, int *python_fd);
/* Whether such a message, one naming its exception ("MemoryError",
 * "torch.OutOfMemoryError: ..."), is waiting for an episode's bundle. */
GMP_HIDDEN int gmp_messages_exception_pending(void);
/* Bytes the program just wrote to stderr (stderr.c), at most 4 KiB read;
 * _stdout: bytes the JVM itself (libjvm, not the program) wrote to stdout. */
GMP_HIDDEN void gmp_messages_scan(const char *buf, size_t n);
GMP_HIDDEN void gmp_messages_scan_stdout(const char *buf, size_t n);
/* stderr.c: atomic, 1 once dlsym was asked for JNI_CreateJavaVM (dlsym.c):
 * a JVM runs in this process, and its own words on stdout are read. */
GMP_HIDDEN extern int gmp_jvm_started;
GMP_HIDDEN void gmp_messages_note_bundle(const char *path, int level);
/* printed_frames.c, under oom_messages.c's lock: the frames a runtime prints
 * after its OOM line (the JVM's, V8's) go to the bundle at path that line
 * went to (expect); our line about a bundle waits for them (hold: the text
 * after "gpumemprof: "); line: 1 when it was such a frame, kept; end: no
 * more frames, the held line said; awaited: whether frames are expected (read
 * without the lock, by every exit).  gmp_messages_end (oom_messages.c): the
 * process ends, the held line is said (async-signal-safe). */
GMP_HIDDEN void gmp_printed_frames_expect(const char *path);
GMP_HIDDEN void gmp_printed_frames_hold(const char *line);
GMP_HIDDEN int gmp_printed_frames_line(const char *line);
GMP_HIDDEN void gmp_printed_frames_end(void);
GMP_HIDDEN int gmp_printed_frames_awaited(void);
GMP_HIDDEN void gmp_messages_end(void);
/* launcher_relays.c, under oom_messages.c's lock, a line at a time: the
 * line past a rank's "[rank3]: " (NULL: torchrun's agent's copy of a rank's
 * log, "[default3]:"); in_relay: it is part of a child's words a launcher
 * relays, seen before the line reaches the traceback it may be part of;
 * relayed_traceback: after that (traceback_state: oom_messages.c's, 1 in a
 * traceback, 2 at its exception's line), it is, or it starts a summary of
 * failed ranks (torchrun's ChildFailedError). */
GMP_HIDDEN const char *gmp_line_past_rank_prefix(const char *line);
GMP_HIDDEN int gmp_line_in_relay(const char *line);
GMP_HIDDEN int gmp_line_relayed_traceback(const char *line, int traceback_state);
/* message_speakers.c: whether this process can mean the OOM line it wrote
 * (pattern: gmp_classify_oom_line's), so that it may be a bundle of its own:
 * the framework it names is loaded here, or it is a runtime's last words in
 * their own form; ends_traceback: it ends a traceback this process printed. */
GMP_HIDDEN int gmp_message_speaker_here(const char *pattern, const char *line, int ends_traceback);
/* last_words.c: a runtime's last words about memory in their own form
 * (C++'s terminate line, Rust's, Go's, Node's, PHP's memory_limit, GHC's
 * "Heap exhausted", SBCL's, Mono's, R's, BEAM's, Perl's, ...): whose they
 * are (GMP_LAST_WORDS_NONE: no such words).  Evidence only when that
 * runtime wrote them and the death they announce follows. */
enum {
    GMP_LAST_WORDS_NONE = 0,
    GMP_LAST_WORDS_CXX,
    GMP_LAST_WORDS_RUST,
    GMP_LAST_WORDS_GO,
    GMP_LAST_WORDS_NODE,
    GMP_LAST_WORDS_LUA,
    GMP_LAST_WORDS_PHP,
    GMP_LAST_WORDS_GHC,
    GMP_LAST_WORDS_GHC_RTS,
    GMP_LAST_WORDS_BOEHM,
    GMP_LAST_WORDS_GUILE,
    GMP_LAST_WORDS_SBCL,
    GMP_LAST_WORDS_MONO,
    GMP_LAST_WORDS_RUBY,
    GMP_LAST_WORDS_R,
    GMP_LAST_WORDS_BEAM,
    GMP_LAST_WORDS_PERL,
    GMP_LAST_WORDS_TCL,
    GMP_LAST_WORDS_OCAML,
    GMP_LAST_WORDS_COUNT
};
GMP_HIDDEN int gmp_message_last_words(const char *line);
/* Their reason's pattern ("php: memory exhausted"), the exception they name
 * (module and type, either NULL), and whether the runtime can die so with
 * no call failing (own_limit: a limit of its own); NULL for no runtime.
 * Any out pointer may be NULL. */
GMP_HIDDEN const char *gmp_message_last_words_said(int runtime, const char **module,
                                                   const char **type, int *own_limit);
/* And only when that runtime wrote them: writer is the code that called
 * the C library to write the line (gmp_stderr_writer): libstdc++ for C++'s,
 * an object rustc built for Rust's, node for Node's, a Go program for Go's,
 * perl for Perl's.  A script printing another runtime's words, then
 * aborting, is no death of memory. */
GMP_HIDDEN int gmp_message_last_words_own(int runtime, const void *writer);
/* stderr.c: the code that called the C library's write, stdio or perror for
 * the bytes being scanned now, in this thread. */
extern __thread const void *gmp_stderr_writer __attribute__((tls_model("initial-exec")));
/* The death that last words announced, now: an abort (crash.c,
 * exit_status -1) or an exit with a failing status within 10 s of the
 * words (outcome.c): their bundle, with the outcome; 1 when one was
 * written (async-signal-safe). */
GMP_HIDDEN int gmp_messages_write_last_words(int exit_status);
/* The OOM bundle written in the last 10 s and not yet claimed, for the
 * program's own report of that failure: 1 with its path (claimed now), or
 * 0.  A bundle noted with GMP_MESSAGES_PROGRAM is the program's own and
 * never claimed. */
#define GMP_MESSAGES_PROGRAM 3
GMP_HIDDEN int gmp_messages_claim_recent(char *path, size_t cap);
/* The OOM bundle written in the last 10 s, claimed or not: 1 with its path. */
GMP_HIDDEN int gmp_messages_recent(char *path, size_t cap);

#endif
