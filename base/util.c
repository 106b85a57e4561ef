/*
 * util.c — emergency-safe helpers shared by the recorder (see util.h):
 * numbers, times and sizes as text, whole writes, a case-blind search,
 * errno's and signals' names, the log line, a directory's entries; what
 * /proc and the cgroup files say is proc_files.c's.  No function here
 * allocates or takes a lock, so the bundle writer can use all of them from
 * a signal handler or after malloc has failed.
 */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread uint32_t cached_tid __attribute__((tls_model("initial-exec")));

uint32_t gmp_gettid(void)
{
    if (!cached_tid)
        cached_tid = (uint32_t)syscall(SYS_gettid);
    return cached_tid;
}

void gmp_gettid_after_fork(void)
{
    cached_tid = 0; /* the child's one thread has a tid of its own */
}

/* Howard Hinnant's days -> civil date; gmtime_r is avoided because it is not
 * async-signal-safe. */
static void civil_from_secs(int64_t secs, int *y, int *mo, int *d, int *h,
                            int *mi, int *s)
{
    int64_t days = secs / 86400, rem = secs % 86400;
    if (rem < 0) {
        rem += 86400;
        days--;
    }
    *h = (int)(rem / 3600);
    *mi = (int)(rem % 3600 / 60);
    *s = (int)(rem % 60);
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *mo = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yy + (*mo <= 2));
}

static char *put_digits(char *p, int v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

void gmp_fmt_utc(int64_t secs, char out[21], int iso)
{
    int y, mo, d, h, mi, s;
    civil_from_secs(secs, &y, &mo, &d, &h, &mi, &s);
    char *p = put_digits(out, y, 4);
    if (iso)
        *p++ = '-';
    p = put_digits(p, mo, 2);
    if (iso)
        *p++ = '-';
    p = put_digits(p, d, 2);
    *p++ = 'T';
    p = put_digits(p, h, 2);
    if (iso)
        *p++ = ':';
    p = put_digits(p, mi, 2);
    if (iso)
        *p++ = ':';
    p = put_digits(p, s, 2);
    *p++ = 'Z';
    *p = '\0';
}

size_t gmp_fmt_u64(uint64_t v, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

size_t gmp_fmt_i64(int64_t v, char *out)
{
    if (v < 0) {
        out[0] = '-';
        return 1 + gmp_fmt_u64((uint64_t)0 - (uint64_t)v, out + 1);
    }
    return gmp_fmt_u64((uint64_t)v, out);
}

size_t gmp_fmt_hex(uint64_t v, char *out)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v);
    out[0] = '0';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++)
        out[2 + i] = tmp[n - 1 - i];
    out[2 + n] = '\0';
    return n + 2;
}

void gmp_fmt_bytes(uint64_t v, char out[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    uint64_t scale = 1;
    while (u < 6 && v / scale >= 1024) {
        scale *= 1024;
        u++;
    }
    uint64_t whole = v / scale, tenth = 0;
    if (u) { /* one decimal, rounded to nearest: integer math, no printf */
        tenth = ((v % scale) * 10 + scale / 2) / scale;
        if (tenth == 10) {
            whole++;
            tenth = 0;
        }
    }
    size_t n = gmp_fmt_u64(whole, out);
    if (u) {
        out[n++] = '.';
        out[n++] = (char)('0' + tenth);
    }
    out[n++] = ' ';
    out[n] = '\0';
    gmp_strlcat(out, units[u], 32);
}

/* A byte at a time, for its texts are short (names, paths) and every
 * process's start copies one (the dump directory made absolute): strnlen
 * and memcpy there were two lazy bindings of the loader's in each. */
GMP_START_EXIT_TEXT int gmp_strlcpy(char *dst, const char *src, size_t cap)
{
    if (!cap)
        return -1;
    size_t i = 0;
    for (; i + 1 < cap && src[i]; i++)
        dst[i] = src[i];
    dst[i] = '\0';
    return src[i] ? -1 : 0;
}

GMP_START_EXIT_TEXT int gmp_strlcat(char *dst, const char *src, size_t cap)
{
    size_t have = 0;
    while (have < cap && dst[have])
        have++;
    if (have == cap)
        return -1;
    return gmp_strlcpy(dst + have, src, cap - have);
}

int gmp_strjoin(char *dst, size_t cap, ...)
{
    if (!cap)
        return -1;
    dst[0] = '\0';
    int rc = 0;
    va_list ap;
    va_start(ap, cap);
    for (const char *part; (part = va_arg(ap, const char *));)
        if (gmp_strlcat(dst, part, cap) < 0)
            rc = -1;
    va_end(ap);
    return rc;
}

int gmp_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint64_t gmp_text_hash(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static inline unsigned char ascii_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c | 0x20) : c;
}

/* Candidates are found by their first byte, in either case, with memchr
 * (the C library's vector code); only they are compared.  Every line a
 * program writes to stderr is searched for a dozen phrases: a byte-by-byte
 * search through the locale's tolower cost more than the write. */
const char *gmp_find_ci(const char *s, size_t n, const char *needle)
{
    size_t nl = strlen(needle);
    if (nl == 0)
        return s;
    if (nl > n)
        return NULL;
    unsigned char lo = ascii_lower((unsigned char)needle[0]);
    unsigned char up = lo >= 'a' && lo <= 'z' ? (unsigned char)(lo & ~0x20) : lo;
    const char *p = s, *last = s + (n - nl); /* the last place it may start */
    const char *at_lo = NULL, *at_up = NULL;  /* the next candidate of each case */
    int lo_done = 0, up_done = up == lo;      /* no more of that case */
    while (p <= last) {
        size_t left = (size_t)(last - p) + 1;
        if (!lo_done && (!at_lo || at_lo < p) && !(at_lo = memchr(p, lo, left)))
            lo_done = 1;
        if (!up_done && (!at_up || at_up < p) && !(at_up = memchr(p, up, left)))
            up_done = 1;
        const char *c = lo_done   ? (up_done ? NULL : at_up)
                        : up_done ? at_lo
                                  : (at_lo < at_up ? at_lo : at_up);
        if (!c)
            return NULL;
        size_t k = 1;
        while (k < nl && ascii_lower((unsigned char)c[k]) == ascii_lower((unsigned char)needle[k]))
            k++;
        if (k == nl)
            return c;
        p = c + 1;
    }
    return NULL;
}

/* Both read glibc's table as it is, with no lock and no locale: they run in
 * signal handlers.  strerrordesc_np is glibc 2.32's; the wheel is built on
 * an older glibc (it must run on 2.28), whose table is sys_errlist. */
const char *gmp_strerror(int err)
{
#if __GLIBC_PREREQ(2, 32)
    const char *s = strerrordesc_np(err);
#else
    const char *s = err >= 0 && err < sys_nerr ? sys_errlist[err] : NULL;
#endif
    return s ? s : "unknown error";
}

const char *gmp_errno_name(int err)
{
#if __GLIBC_PREREQ(2, 32)
    return strerrorname_np(err);
#else
    /* the names an allocation or a mapping fails with */
    switch (err) {
    case EPERM: return "EPERM";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EBADF: return "EBADF";
    case EEXIST: return "EEXIST";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case EOVERFLOW: return "EOVERFLOW";
    default: return NULL;
    }
#endif
}

/* glibc's sigabbrev_np, which glibc 2.28 lacks, by each signal's number
 * on this architecture */
const char *gmp_signal_abbrev(int sig)
{
    static const char *const abbrev[] = {
        [SIGHUP] = "HUP",       [SIGINT] = "INT",     [SIGQUIT] = "QUIT",   [SIGILL] = "ILL",
        [SIGTRAP] = "TRAP",     [SIGABRT] = "ABRT",   [SIGBUS] = "BUS",     [SIGFPE] = "FPE",
        [SIGKILL] = "KILL",     [SIGUSR1] = "USR1",   [SIGSEGV] = "SEGV",   [SIGUSR2] = "USR2",
        [SIGPIPE] = "PIPE",     [SIGALRM] = "ALRM",   [SIGTERM] = "TERM",   [SIGCHLD] = "CHLD",
        [SIGCONT] = "CONT",     [SIGSTOP] = "STOP",   [SIGTSTP] = "TSTP",   [SIGTTIN] = "TTIN",
        [SIGTTOU] = "TTOU",     [SIGURG] = "URG",     [SIGXCPU] = "XCPU",   [SIGXFSZ] = "XFSZ",
        [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",   [SIGWINCH] = "WINCH", [SIGPOLL] = "POLL",
        [SIGPWR] = "PWR",       [SIGSYS] = "SYS",
#ifdef SIGSTKFLT
        [SIGSTKFLT] = "STKFLT",
#endif
    };
    return sig > 0 && sig < (int)(sizeof abbrev / sizeof *abbrev) ? abbrev[sig] : NULL;
}

int (*gmp_log_gate)(const char *, size_t) GMP_STARTUP_DATA; /* set as every process starts */

void gmp_log(const char *fmt, ...)
{
    char line[1024];
    int saved = errno;
    size_t off = (size_t)snprintf(line, sizeof line, "gpumemprof: ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + off, sizeof line - off - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    off += (size_t)n < sizeof line - off - 1 ? (size_t)n : sizeof line - off - 2;
    line[off++] = '\n';
    /* the preload's gate: not where fd 2 is no longer the program's
     * stderr, and not into a line of the program's (kept for its end) */
    if (!gmp_log_gate || gmp_log_gate(line, off))
        (void)gmp_write_all(2, line, off);
    errno = saved;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int gmp_dir_foreach(int dirfd, gmp_dir_entry_fn fn, void *arg)
{
    char buf[8192] __attribute__((aligned(8)));
    if (lseek(dirfd, 0, SEEK_SET) < 0)
        return -1;
    for (;;) {
        long n = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
                continue;
            if (fn(dirfd, d->d_name, arg))
                return 0;
        }
    }
}
