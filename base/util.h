/*
 * util.h — the base every folder shares: clocks, UTC formatting,
 * integer formatting, whole writes and reads, directories, one-line stderr
 * messages.  Everything here is safe on the emergency path: no heap, no
 * locks, only system calls and fixed buffers the caller owns.
 */
#ifndef GMP_UTIL_H
#define GMP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GMP_HIDDEN __attribute__((visibility("hidden")))
#define GMP_LIKELY(x) __builtin_expect(!!(x), 1)
#define GMP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Code that every preloaded process runs as it starts or exits, most of
 * them doing little else: kept together, after the constructor, so that it
 * is one page of text to fault in rather than one per file. */
#define GMP_START_EXIT_TEXT __attribute__((section(".text.startup")))
/* Constant data the start and exit read, beside that text: a first read of
 * .rodata costs a page fault and 64 KB of the library mapped (the kernel
 * maps a fault's neighbours too), and unmapped again at exit. */
#define GMP_START_EXIT_RODATA __attribute__((section(".text.startup.rodata")))

/* For the few variables every process reads or writes (most processes only
 * start and exit): in .data, on a page the loader has written already, so
 * they cost no page fault of their own. */
#define GMP_STARTUP_DATA __attribute__((section(".data.gmp_startup")))

/* CLOCK_REALTIME in ns, from the TSC where the kernel's clock is (clock.c). */
GMP_HIDDEN uint64_t gmp_now_realtime_ns(void);
/* In a forked child: a renewal of the clock's anchor cut off by the fork. */
GMP_HIDDEN void gmp_clock_after_fork(void);
/* 1 once the TSC stands for clock_gettime (the first 10 ms are measured). */
GMP_HIDDEN int gmp_clock_uses_tsc(void);
GMP_HIDDEN uint32_t gmp_gettid(void); /* cached per thread */
/* In a forked child (pthread_atfork): forget the parent thread's tid. */
GMP_HIDDEN void gmp_gettid_after_fork(void);

/* Seconds since the epoch as "2026-03-03T12:00:00Z" (iso) or
 * "20260303T120000Z" (compact, for names); out holds 21 bytes. */
GMP_HIDDEN void gmp_fmt_utc(int64_t secs, char out[21], int iso);

/* Decimal / hex into out (at least 24 bytes); returns the length. */
GMP_HIDDEN size_t gmp_fmt_u64(uint64_t v, char *out);
GMP_HIDDEN size_t gmp_fmt_i64(int64_t v, char *out);
GMP_HIDDEN size_t gmp_fmt_hex(uint64_t v, char *out);

/* Bytes for people: "512 B", "48.0 MiB", "2.5 GiB" (out: 32 bytes). */
GMP_HIDDEN void gmp_fmt_bytes(uint64_t v, char out[32]);

/* Bounded string copy/append that always terminates; returns -1 on truncation. */
GMP_HIDDEN int gmp_strlcpy(char *dst, const char *src, size_t cap);
GMP_HIDDEN int gmp_strlcat(char *dst, const char *src, size_t cap);

/* dst = the concatenation of the strings after cap, up to a NULL; always
 * terminated; -1 when truncated.  For messages and names on the dump path. */
GMP_HIDDEN int gmp_strjoin(char *dst, size_t cap, ...) __attribute__((sentinel));

/* write(2) until done or a real error; returns 0 or -1. */
GMP_HIDDEN int gmp_write_all(int fd, const void *buf, size_t len);
/* Case-insensitive (ASCII): where needle starts in s[0, n) (NULs allowed),
 * or NULL.  No allocation, no lock. */
GMP_HIDDEN const char *gmp_find_ci(const char *s, size_t n, const char *needle);

/* Read at most cap-1 bytes of a (proc) file, NUL-terminated; returns length,
 * or -1 (also for anything but a regular file: it never blocks on a FIFO). */
GMP_HIDDEN ssize_t gmp_read_file(const char *path, char *buf, size_t cap);
/* The same for /proc/PID/NAME (pid 0: this process), a file procfs makes
 * (stat, cgroup, cmdline, task/TID/children): a system call fewer, for
 * gmp-run's looks read them by the dozen. */
GMP_HIDDEN ssize_t gmp_read_proc_file(int pid, const char *name, char *buf, size_t cap);
/* /proc/PID/name opened to be read (pid 0: this process): the fd, or -1. */
GMP_HIDDEN int gmp_open_proc_file(int pid, const char *name);
/* "/proc/PID/name" ("/proc/self/name" for pid 0) into out: 0, or -1 when
 * it does not fit. */
GMP_HIDDEN int gmp_proc_path(char *out, size_t cap, int pid, const char *name);

/* A line written to stderr, with nothing else known: the pattern or OOM
 * exception name that makes it a message about running out of memory, or
 * NULL (classify.c; stricter than an exception's message patterns: no bare
 * "resource exhausted"). */
GMP_HIDDEN const char *gmp_classify_oom_line(const char *line);

/* This process's memory cgroup directory: returns 2 (cgroup v2), 1 (v1) or
 * -1 when there is none with the memory controller. */
GMP_HIDDEN int gmp_cgroup_memory_dir(char *out, size_t cap);
/* The file of this process's memory cgroup that counts OOM kills:
 * memory.events (cgroup v2) or memory.oom_control (v1).  0, or -1. */
GMP_HIDDEN int gmp_cgroup_oom_file(char *out, size_t cap);
/* The same of process pid (0: this one); -1 too for a process that has
 * begun to exit where cgroup v1 would name the root cgroup for it. */
GMP_HIDDEN int gmp_cgroup_memory_dir_of(int pid, char *out, size_t cap);
/* The same from the text of its /proc/PID/cgroup, already read. */
GMP_HIDDEN int gmp_cgroup_memory_dir_in(int pid, char *cgroup_text, char *out, size_t cap);
/* FNV-1a of the text s, continuing from h (GMP_TEXT_HASH_SEED, FNV's
 * offset basis, or an earlier text's hash). */
#define GMP_TEXT_HASH_SEED 14695981039346656037ull
GMP_HIDDEN uint64_t gmp_text_hash(uint64_t h, const char *s);
GMP_HIDDEN int gmp_cgroup_oom_file_of(int pid, char *out, size_t cap);
/* The same of a memory cgroup's directory (gmp_cgroup_memory_dir_of's). */
GMP_HIDDEN int gmp_cgroup_oom_file_in(const char *dir, int version, char *out, size_t cap);
/* Its "oom_kill N" count, or UINT64_MAX when it cannot be read or is not
 * such a file under /sys/fs/cgroup (the name may come from a ring). */
GMP_HIDDEN uint64_t gmp_cgroup_oom_kills(const char *file);

/* safe_dir.c: a directory named by a user's path, opened for reading
 * (created, mode, when create and missing) without following a symlink at
 * its last component, or one on the way that neither root nor the caller
 * owns; it must be the caller's.  A directory fd, or -1 with errno and why
 * (why may be NULL). */
GMP_HIDDEN int gmp_dir_open_safely(const char *path, int create, mode_t mode, char *why,
                                   size_t why_cap);

/* Calls fn for every entry of the directory but "." and ".." (getdents64:
 * no allocation, no lock); fn returning non-zero stops.  0, or -1. */
typedef int (*gmp_dir_entry_fn)(int dirfd, const char *name, void *arg);
GMP_HIDDEN int gmp_dir_foreach(int dirfd, gmp_dir_entry_fn fn, void *arg);

/* The start time of process pid (0: this one) in clock ticks since boot,
 * field 22 of /proc/PID/stat; 0 when it cannot be read (no such process). */
GMP_HIDDEN uint64_t gmp_proc_start_ticks(int pid);
/* Now, on the clock those start times count (CLOCK_BOOTTIME in clock
 * ticks); 0 when it cannot be read. */
GMP_HIDDEN uint64_t gmp_clock_ticks_now(void);
/* What one read of /proc/PID/stat says of a process: 0, or -1 (all zero)
 * when it cannot be read. */
typedef struct gmp_proc_look {
    char state;           /* 'R', 'S', 'Z' a zombie... */
    long threads;         /* field 20 */
    uint64_t start_ticks; /* field 22 */
    uint64_t resident;    /* bytes (field 24); 0 once it has begun to exit (its
                           * memory is still counted then, but what /proc says
                           * of it is the kernel's tidying) */
} gmp_proc_look;
GMP_HIDDEN int gmp_proc_look_at(int pid, gmp_proc_look *out);
/* The same of a /proc/PID/stat text already read. */
GMP_HIDDEN int gmp_proc_look_in(const char *stat_text, gmp_proc_look *out);
/* Whether it says a process dead and not yet reaped: a zombie with no live
 * thread, or one the kernel is tearing down.  A process whose main thread
 * ended before its other threads reads as a zombie too, and runs on; its
 * live threads are counted then. */
static inline int gmp_proc_look_dead(const gmp_proc_look *look)
{
    return (look->state == 'Z' && look->threads <= 1) || look->state == 'X';
}
/* Its state letter in /proc/PID/stat ('R', 'S', 'Z' a zombie), 0 if none;
 * its parent's pid, 0 if unknown (pid 0: this process, for both). */
GMP_HIDDEN char gmp_proc_state(int pid);
GMP_HIDDEN int gmp_proc_parent(int pid);

/* errno as English text, never translated, never allocating (strerror may
 * go through gettext, which can malloc). */
GMP_HIDDEN const char *gmp_strerror(int err);
/* errno's name ("ENOMEM"), or NULL: glibc's own list from 2.32, the
 * names allocations and mappings fail with before it. */
GMP_HIDDEN const char *gmp_errno_name(int err);
GMP_HIDDEN const char *gmp_signal_abbrev(int sig); /* "TERM", or NULL */
GMP_HIDDEN void gmp_close_from(int first);

/* One line on stderr: "gpumemprof: <msg>\n".  Formats with vsnprintf into a
 * stack buffer; keep formats to %s %d %u %l* %z* on emergency paths. */
GMP_HIDDEN void gmp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* When set, gmp_log writes its line (n bytes, its newline included) only
 * when this answers 1 (the preload: fd 2 still the stderr its process
 * started with, at the start of a line); on 0 the gate may keep the line
 * to write later itself. */
GMP_HIDDEN extern int (*gmp_log_gate)(const char *line, size_t n);

#endif
