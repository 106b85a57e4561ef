/*
 * stderr.c — what the program writes to stderr, for oom_messages.c.
 *
 * write and writev on fd 2 are one way (Python's sys.stderr); glibc's stdio
 * is another, and it writes through glibc's internal write, which no hook
 * sees: fprintf(stderr, ...), fputs, perror, and std::cerr (libstdc++'s
 * stdio_sync_filebuf: fwrite, putc).  So the stdio functions that write to
 * a FILE are hooked too.  Each calls the real function and returns its
 * exact result and errno; when the stream is stderr and the call wrote, the
 * bytes are handed to oom_messages.c.  Every other fd or stream costs one
 * comparison.  The formatted ones format once more, into a stack buffer, for
 * the scan (only on stderr): the real vfprintf does the program's output.
 * What the program writes there also decides where a line of ours may go
 * (may_speak, below).
 */
#include "preload.h"
#include "start_path.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* <bits/stdio.h> makes some of these macros when optimising: we define
 * the functions. */
#undef fwrite_unlocked
#undef fputc_unlocked
#undef putc_unlocked
#undef fputs_unlocked

/* At most this much of one formatted write is read (the rest is cut). */
#define FORMAT_SCAN_MAX 1024

__thread const void *gmp_stderr_writer __attribute__((tls_model("initial-exec")));

static inline int wants(int is_stderr)
{
    return GMP_UNLIKELY(is_stderr) && !gmp_in_hook;
}

/* ---- our own line: only where the program's stderr still is --------- */

/* What fd 2 was when the process started, and whether the program's last
 * write to it left a line open (atomic). */
static struct {
    dev_t dev;
    ino_t ino;
    int known;
} started_with GMP_STARTUP_DATA; /* written as every process starts */
static int mid_line;

/* A line of ours that came while one of the program's was open (a bundle
 * written at a line inside one long write: Python prints a pool worker's
 * traceback, quoted, in one): said when the program's next write ends a
 * line.  One at a time, by this process (a forked child's writes do not
 * say its parent's); a line that comes while one waits, or that waits
 * when the process ends with its last line open, is not said: the bundle
 * is written all the same. */
static struct {
    int state; /* atomic: HELD_* */
    int pid;
    size_t n;
    char line[1024];
} held;
enum { HELD_NONE, HELD_FILLING, HELD_WAITING, HELD_SAYING };

static int stderr_is_the_programs(void)
{
    struct stat st;
    return started_with.known && fstat(2, &st) == 0 && st.st_dev == started_with.dev &&
           st.st_ino == started_with.ino;
}

/* gmp_log's gate in this process: a line of ours goes only to the stderr
 * the process started with (a program that closed it and opened a data
 * file, which took fd 2, must not find our words in its data), and only
 * where the program's last write ended a line (never into the middle of
 * one of its own: kept until it ends).  System calls only: a signal
 * handler's line asks too. */
static int may_speak(const char *line, size_t n)
{
    if (!stderr_is_the_programs())
        return 0;
    if (!__atomic_load_n(&mid_line, __ATOMIC_RELAXED))
        return 1;
    int none = HELD_NONE;
    if (n <= sizeof held.line && __atomic_compare_exchange_n(&held.state, &none, HELD_FILLING, 0,
                                                             __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        memcpy(held.line, line, n);
        held.n = n;
        held.pid = gmp_start_getpid();
        __atomic_store_n(&held.state, HELD_WAITING, __ATOMIC_RELEASE);
    }
    return 0;
}

/* After each write of the program's: the line kept, once the program's
 * own has ended. */
static void say_held(void)
{
    if (GMP_LIKELY(__atomic_load_n(&held.state, __ATOMIC_ACQUIRE) != HELD_WAITING) ||
        __atomic_load_n(&mid_line, __ATOMIC_RELAXED))
        return;
    int waiting = HELD_WAITING;
    if (!__atomic_compare_exchange_n(&held.state, &waiting, HELD_SAYING, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return;
    if (held.pid == gmp_start_getpid() && stderr_is_the_programs()) {
        GMP_IN_HOOK_SCOPE(); /* our write: not the program's, not scanned */
        (void)gmp_write_all(2, held.line, held.n);
    }
    __atomic_store_n(&held.state, HELD_NONE, __ATOMIC_RELEASE);
}

GMP_START_EXIT_TEXT void gmp_stderr_start(void)
{
    struct stat st;
    started_with.known = gmp_start_fstat(2, &st) == 0;
    started_with.dev = started_with.known ? st.st_dev : 0;
    started_with.ino = started_with.known ? st.st_ino : 0;
    gmp_log_gate = may_speak;
}

/* The last byte the program wrote to stderr. */
static void ended_with(char last)
{
    __atomic_store_n(&mid_line, last != '\n', __ATOMIC_RELAXED);
}

/* The last of n bytes written that shows: a C string written with its NUL
 * (write(2, MSG, sizeof MSG), as PyTorch's DataLoader workers' signal
 * handlers write their words) ends its line where its newline is.  Bytes
 * that are all NUL leave the line as it was. */
static void ended_with_bytes(const char *bytes, size_t n)
{
    while (n && bytes[n - 1] == '\0')
        n--;
    if (n)
        ended_with(bytes[n - 1]);
}

/* The program wrote n bytes to stderr. */
static void wrote(const void *buf, size_t n)
{
    ended_with_bytes(buf, n);
    gmp_messages_scan(buf, n);
    say_held();
}

static void scan_keeping_errno(const void *buf, size_t n)
{
    int saved = errno;
    wrote(buf, n);
    errno = saved;
}

/* ---- file descriptors ------------------------------------------------- */

int gmp_jvm_started;

/* Whether code at writer is the JVM's own (libjvm): HotSpot writes its
 * last words to stdout ("Terminating due to java.lang.OutOfMemoryError:
 * Java heap space", then _exit(3), under -XX:+ExitOnOutOfMemoryError,
 * which containers set), where the program's own output goes through
 * libjava.  Asked only once a JVM was started here (gmp_jvm_started); the
 * object last asked about is kept per thread: a program's writes to stdout
 * come from one place, and cost two compares. */
static __thread uintptr_t seen_start __attribute__((tls_model("initial-exec")));
static __thread uintptr_t seen_end __attribute__((tls_model("initial-exec")));
static __thread int seen_jvm __attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) int jvm_wrote(const void *writer)
{
    uintptr_t at = (uintptr_t)writer;
    if (at >= seen_start && at < seen_end)
        return seen_jvm;
    gmp_found_object o;
    if (gmp_find_object(writer, &o) != 0)
        return 0;
    const char *base = strrchr(o.path, '/');
    seen_jvm = base && !strcmp(base, "/libjvm.so");
    seen_start = o.start;
    seen_end = o.end;
    return seen_jvm;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
GMP_EXPORT ssize_t write(int fd, const void *buf, size_t n);
ssize_t write(int fd, const void *buf, size_t n)
{
    GMP_REAL_FN(write, write_fn)
    ssize_t r = fn(fd, buf, n);
    if (wants(fd == 2) && r > 0) {
        gmp_stderr_writer = __builtin_return_address(0);
        scan_keeping_errno(buf, (size_t)r);
    } else if (GMP_UNLIKELY(fd == 1) && __atomic_load_n(&gmp_jvm_started, __ATOMIC_RELAXED) &&
               r > 0 && !gmp_in_hook && jvm_wrote(__builtin_return_address(0))) {
        int saved = errno;
        gmp_stderr_writer = __builtin_return_address(0);
        gmp_messages_scan_stdout(buf, (size_t)r);
        errno = saved;
    }
    return r;
}

typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
GMP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int count);
ssize_t writev(int fd, const struct iovec *iov, int count)
{
    GMP_REAL_FN(writev, writev_fn)
    ssize_t r = fn(fd, iov, count);
    if (wants(fd == 2) && r > 0) {
        gmp_stderr_writer = __builtin_return_address(0);
        int saved = errno;
        size_t left = (size_t)r;
        for (int i = 0; i < count && left; i++) { /* the bytes it wrote, in order */
            size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
            if (i < 8)
                gmp_messages_scan(iov[i].iov_base, n);
            ended_with_bytes(iov[i].iov_base, n);
            left -= n;
        }
        say_held(); /* as the whole write ended */
        errno = saved;
    }
    return r;
}

/* ---- stdio: bytes ----------------------------------------------------- */

/* The stdio functions that write bytes they are given: name, return type,
 * parameters, the real call's arguments, whether it wrote (r is its
 * result), and the bytes it wrote. */
#define GMP_STDIO_HOOKS(X)                                                                 \
    X(fwrite, size_t, (const void *p, size_t size, size_t n, FILE *s), (p, size, n, s),   \
      r > 0, p, r * size)                                                                  \
    X(fwrite_unlocked, size_t, (const void *p, size_t size, size_t n, FILE *s),            \
      (p, size, n, s), r > 0, p, r * size)                                                 \
    X(fputs, int, (const char *str, FILE *s), (str, s), r >= 0, str, strlen(str))         \
    X(fputs_unlocked, int, (const char *str, FILE *s), (str, s), r >= 0, str, strlen(str)) \
    X(fputc, int, (int c, FILE *s), (c, s), r != EOF, &(char){(char)c}, 1)                 \
    X(fputc_unlocked, int, (int c, FILE *s), (c, s), r != EOF, &(char){(char)c}, 1)        \
    X(putc, int, (int c, FILE *s), (c, s), r != EOF, &(char){(char)c}, 1)                  \
    X(putc_unlocked, int, (int c, FILE *s), (c, s), r != EOF, &(char){(char)c}, 1)         \
    X(_IO_putc, int, (int c, FILE *s), (c, s), r != EOF, &(char){(char)c}, 1)

#define STDIO_HOOK(name, ret, params, args, wrote, bytes, len)                             \
    GMP_EXPORT ret name params;                                                            \
    typedef ret (*name##_fn) params;                                                       \
    ret name params                                                                        \
    {                                                                                      \
        GMP_REAL_FN(name, name##_fn)                                                       \
        ret r = fn args;                                                                   \
        if (wants(s == stderr) && (wrote)) {                                               \
            gmp_stderr_writer = __builtin_return_address(0);                               \
            scan_keeping_errno(bytes, len);                                                \
        }                                                                                  \
        return r;                                                                          \
    }
GMP_STDIO_HOOKS(STDIO_HOOK)

/* ---- stdio: formatted ------------------------------------------------- */

/* The text a format makes, for the scan; errno as it was (for %m). */
static void scan_formatted(const char *fmt, va_list ap)
{
    int saved = errno;
    char text[FORMAT_SCAN_MAX];
    va_list copy;
    va_copy(copy, ap);
    int n;
    {
        GMP_IN_HOOK_SCOPE(); /* vsnprintf may allocate: not the program's */
        n = vsnprintf(text, sizeof text, fmt, copy);
    }
    va_end(copy);
    if (n > 0 && (size_t)n < sizeof text) {
        wrote(text, (size_t)n);
    } else if (n > 0) { /* cut: the end is the format's, as far as it can tell */
        gmp_messages_scan(text, sizeof text - 1);
        size_t f = strlen(fmt);
        ended_with(f ? fmt[f - 1] : '\n');
        say_held();
    }
    errno = saved;
}

typedef int (*vfprintf_fn)(FILE *, const char *, va_list);
typedef int (*vfprintf_chk_fn)(FILE *, int, const char *, va_list);

/* vfprintf and its fortified twin (flag >= 0), the one path of all four;
 * writer: the code that called the one of the four. */
static int formatted(FILE *s, int flag, const char *fmt, va_list ap, const void *writer)
{
    int scan = wants(s == stderr);
    if (scan)
        gmp_stderr_writer = writer;
    va_list mine;
    if (scan)
        va_copy(mine, ap);
    int r;
    if (flag < 0) {
        GMP_REAL_FN(vfprintf, vfprintf_fn)
        r = fn(s, fmt, ap);
    } else {
        GMP_REAL_FN(__vfprintf_chk, vfprintf_chk_fn)
        r = fn(s, flag, fmt, ap);
    }
    if (scan) {
        if (r > 0)
            scan_formatted(fmt, mine);
        va_end(mine);
    }
    return r;
}

GMP_EXPORT int vfprintf(FILE *s, const char *fmt, va_list ap);
int vfprintf(FILE *s, const char *fmt, va_list ap)
{
    return formatted(s, -1, fmt, ap, __builtin_return_address(0));
}

GMP_EXPORT int __vfprintf_chk(FILE *s, int flag, const char *fmt, va_list ap);
int __vfprintf_chk(FILE *s, int flag, const char *fmt, va_list ap)
{
    return formatted(s, flag < 0 ? 0 : flag, fmt, ap, __builtin_return_address(0));
}

GMP_EXPORT int fprintf(FILE *s, const char *fmt, ...);
int fprintf(FILE *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = formatted(s, -1, fmt, ap, __builtin_return_address(0));
    va_end(ap);
    return r;
}

GMP_EXPORT int __fprintf_chk(FILE *s, int flag, const char *fmt, ...);
int __fprintf_chk(FILE *s, int flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = formatted(s, flag < 0 ? 0 : flag, fmt, ap, __builtin_return_address(0));
    va_end(ap);
    return r;
}

/* perror writes "s: <strerror(errno)>\n" to stderr. */
typedef void (*perror_fn)(const char *);
GMP_EXPORT void perror(const char *s);
void perror(const char *s)
{
    int err = errno;
    GMP_REAL_FN(perror, perror_fn)
    fn(s);
    if (wants(1)) {
        gmp_stderr_writer = __builtin_return_address(0);
        int saved = errno;
        char text[512];
        gmp_strjoin(text, sizeof text, s && *s ? s : "", s && *s ? ": " : "",
                    gmp_strerror(err), "\n",
                    (char *)NULL);
        wrote(text, strlen(text));
        errno = saved;
    }
}
