/*
 * start_path.h — what the preload's start and exit call in place of the C
 * library.  Most processes it is loaded into start, do little and exit, so
 * its start is most of what it costs them.  Each C library function the
 * start calls first costs a lazy binding (the loader's symbol lookup) and,
 * often, a page of the library's text or data faulted in: together about
 * 6 us of a /bin/true's 520 us here, for a compare or a system call that
 * is a few instructions inline.  So the start path compares text and makes
 * its three system calls here; the rest of the preload uses the library.
 */
#ifndef GMP_START_PATH_H
#define GMP_START_PATH_H

#include <fcntl.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The C library functions every start calls (with init.c's
 * __register_atfork), bound as the library loads, a slot among its other
 * relocations, rather than at the first call through a lazy binding, whose
 * trampoline saves and restores the vector registers around the same
 * lookup. */
#if defined(__has_attribute)
#if __has_attribute(noplt)
#define GMP_BOUND_AT_LOAD __attribute__((noplt))
#endif
#endif
#ifndef GMP_BOUND_AT_LOAD
#define GMP_BOUND_AT_LOAD /* clang: lazily, as before */
#endif
extern __typeof__(on_exit) on_exit GMP_BOUND_AT_LOAD;
extern __typeof__(getauxval) getauxval GMP_BOUND_AT_LOAD;

/* Whether a and b are the same text. */
static inline int gmp_start_same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Whether s begins with prefix. */
static inline int gmp_start_begins(const char *s, const char *prefix)
{
    while (*prefix && *s == *prefix)
        s++, prefix++;
    return !*prefix;
}

#if defined(__x86_64__)
/* A system call as the C library makes it, without its entry point: the
 * same call numbers, so a seccomp filter that lets the library's through
 * lets these through.  The result, or -errno. */
static inline long gmp_start_syscall4(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

static inline int gmp_start_getpid(void)
{
    return (int)gmp_start_syscall4(SYS_getpid, 0, 0, 0, 0);
}

/* fstat(fd) as glibc makes it (newfstatat with "" and AT_EMPTY_PATH), the
 * "" on the stack: the kernel reads it from a page already in. */
static inline int gmp_start_fstat(int fd, struct stat *st)
{
    char empty[1] = "";
    return gmp_start_syscall4(SYS_newfstatat, fd, (long)empty, (long)st, AT_EMPTY_PATH) == 0
               ? 0
               : -1;
}

/* The working directory into buf; 0, or -1 (it does not fit, or is gone). */
static inline int gmp_start_getcwd(char *buf, size_t cap)
{
    /* an unreachable directory comes back as "(unreachable)/..." */
    return gmp_start_syscall4(SYS_getcwd, (long)buf, (long)cap, 0, 0) > 0 && buf[0] == '/' ? 0
                                                                                          : -1;
}
#else
static inline int gmp_start_getpid(void)
{
    return (int)getpid();
}

static inline int gmp_start_fstat(int fd, struct stat *st)
{
    return fstat(fd, st);
}

static inline int gmp_start_getcwd(char *buf, size_t cap)
{
    return getcwd(buf, cap) ? 0 : -1;
}
#endif

#endif
