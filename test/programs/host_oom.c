/*
 * host_oom.c — a plain program (no gpumemprof code, but for `api`) that the
 * preload integration tests run in different ways of running out of host
 * memory.  Usage: host_oom MODE
 *   quiet        small allocations only; prints "ok" and its thread count
 *   grow         grows a buffer 1.5x until malloc fails; prints the size; exit 1
 *   fail-twice   malloc(2^60) fails twice; exit 0
 *   fail-then-wait FILE  malloc(2^60) fails once, FILE is made, then 10 s of sleep
 *                (a stop sent while the failure is open)
 *   fail-sleep   malloc(2^60) fails once, then sleeps 1.5 s; prints its thread
 *                count before and after; exit 0
 *   recover      under RLIMIT_AS: a big malloc fails, memory is freed, the
 *                same size succeeds; exit 0
 *   recover-then-fail   recover, then fail twice; exit 0
 *   recover-then-say    recover, then write "MemoryError" to stderr, as a
 *                runtime that raised it on the failure would; exit 0
 *   fork         a child fails twice and exits 0; the parent waits, exit 0
 *   threads      16 threads allocate and free; one fails twice; exit 0
 *   api          finds the preload's recorder with dlsym, sets context and
 *                metadata, records a mark, then fails twice; exit 0
 *   report WHEN  malloc(2^60) fails once (WHEN "after-second": twice, so
 *                the preload has written its bundle), then the program
 *                reports the OOM it "caught" through the preload's
 *                gmp_preload_dump_exception; prints the path; exit 0
 *   hold-fail N  holds N blocks of 16-128 MiB (every page touched), prints
 *                "held <bytes>", then malloc(2^62) fails once; exit 0
 *   hold-die HOW holds 16 MiB (so the preload has a ring), then dies HOW:
 *                a signal's name (PIPE, TERM, ...: the default action),
 *                segv (writes through NULL), exec-clean (execs sh -c
 *                'exit 3' with an empty environment: no preload)
 *   dispositions holds 16 MiB (a ring), then prints what sigaction and
 *                signal() say of SIGTERM and SIGHUP, sets, restores and
 *                asks again ("TERM dfl, set, dfl-back ..."), then dies of
 *                the SIGTERM it restored to the default
 *   fork-kill    holds 16 MiB, forks; the child holds 16 MiB more from the
 *                same call site (a stack its parent already knew), then is
 *                killed by SIGKILL; the parent exits with 128+signal
 *   slow-grow N  under RLIMIT_AS: N times, grows in 8 MiB steps (10 ms
 *                apart) to 95% of the limit, holds 500 ms, shrinks below
 *                80%, holds 300 ms; never fails an allocation; exit 0
 *   stderr-taken FILE  closes stderr and opens FILE, which takes fd 2, as a
 *                program keeping its data there does; writes "data", then
 *                malloc(2^60) fails twice, then writes "more data"; exit 0
 *   mmap-heap    grows a heap of its own from mmap (32 MiB at a time, every
 *                page touched) until mmap fails, as LuaJIT and GHC do; says
 *                "not enough memory"; exit 1
 *   spent        under RLIMIT_AS: reserves every 64 KiB of address space
 *                left, then malloc(64 MiB) fails in ask_when_spent; says "not
 *                enough memory"; exit 1
 *   reserve-less reserves 64 GiB of address space (PROT_NONE, MAP_NORESERVE),
 *                which RLIMIT_AS refuses, then 64 MiB, as V8 and the JVM
 *                do; then asks for 66 MiB of huge pages (refused where none
 *                are set aside) and takes 65 MiB of plain pages instead,
 *                as PostgreSQL does; exit 0
 *   mid-line     writes three quotes to stderr with no newline, then
 *                malloc(2^60) fails twice, then three quotes and a newline;
 *                exit 0
 *   slow-death   under RLIMIT_AS: grows in 8 MiB steps (10 ms apart) to 95%
 *                of the limit, takes and gives back 2 MiB 50 times 10 ms
 *                apart there (the pressure warning), then asks for a tenth
 *                of the limit at once, which fails; exit 1
 */
#include "gpumemprof.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HUGE_REQUEST ((size_t)1 << 60)

/* A chunk of a heap of its own, mapped: NULL when refused. */
__attribute__((noinline)) static char *map_heap_chunk(size_t n)
{
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    __asm__ volatile("" ::"r"(p) : "memory"); /* a real call, not a tail call */
    return p == MAP_FAILED ? NULL : p;
}

/* A request made when the address space is spent: its own frame, for the
 * bundle to be sited at. */
__attribute__((noinline)) static void *ask_when_spent(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::"r"(p) : "memory"); /* a real call, not a tail call */
    return p;
}

/* VmSize from /proc/self/status, in bytes. */
static size_t vm_size(void)
{
    char line[256];
    size_t kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            kb = strtoull(line + 7, NULL, 10);
    if (f)
        fclose(f);
    return kb * 1024;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A slow death, rounds times: near the address-space limit and back. */
static int slow_grow(int rounds)
{
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
        return 2;
    static void *chunks[4096];
    size_t n = 0, step = 8u << 20;
    for (int r = 0; r < rounds; r++) {
        while (vm_size() + step < as.rlim_cur / 100 * 95 && n < 4096) {
            if (!(chunks[n] = malloc(step)))
                return 3; /* too close: a failure is not what this mode shows */
            n++;
            sleep_ms(10);
        }
        sleep_ms(500);
        while (n > 0 && vm_size() >= as.rlim_cur / 100 * 80)
            free(chunks[--n]);
        sleep_ms(300);
    }
    while (n > 0)
        free(chunks[--n]);
    puts("grew and shrank");
    return 0;
}

/* The slow death whose end comes: near the limit, then past it. */
static int slow_death(void)
{
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
        return 2;
    size_t step = 8u << 20;
    while (vm_size() + step < as.rlim_cur / 100 * 95) {
        if (!malloc(step))
            return 3; /* too close: this mode fails only once it means to */
        sleep_ms(10);
    }
    for (int i = 0; i < 50; i++) { /* steps at the top: the watchdog checks after each */
        free(malloc(2u << 20));
        sleep_ms(10);
    }
    if (!malloc(as.rlim_cur / 10)) {
        puts("died of it");
        return 1;
    }
    return 0;
}

/* Threads of this process, from /proc (the preload must start none). */
static int thread_count(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

static void fail_twice(void)
{
    for (int i = 0; i < 2; i++) {
        errno = 0;
        void *p = malloc(HUGE_REQUEST);
        if (p || errno != ENOMEM) {
            fprintf(stderr, "host_oom: malloc(2^60) did not fail with ENOMEM\n");
            exit(2);
        }
    }
}

static int grow(void)
{
    size_t size = 1 << 20;
    char *held = NULL;
    for (;;) {
        char *p = malloc(size);
        if (!p) {
            printf("failed at %zu\n", size);
            fflush(stdout);
            free(held);
            return 1;
        }
        memset(p, 1, size);
        free(held);
        held = p;
        size = size / 2 * 3;
    }
}

static int recover(void)
{
    struct rlimit rl = {512u << 20, 512u << 20};
    if (setrlimit(RLIMIT_AS, &rl) < 0)
        return 2;
    void *ballast = malloc(300u << 20);
    memset(ballast, 1, 4096);
    size_t big = 300u << 20;
    void *p = malloc(big);
    if (p) {
        fprintf(stderr, "host_oom: expected the first request to fail\n");
        return 2;
    }
    free(ballast); /* what a caching allocator does before it retries */
    p = malloc(big);
    if (!p) {
        fprintf(stderr, "host_oom: the retry failed too\n");
        return 2;
    }
    free(p);
    puts("recovered");
    return 0;
}

/* What a training step holds when it asks for too much: large blocks, in
 * use, then one request no allocator can meet (2^60 is granted by some). */
static int hold_fail(int n)
{
    static char *held[256];
    size_t total = 0, page = 4096;
    if (n < 1 || n > 256)
        return 2;
    for (int i = 0; i < n; i++) {
        size_t size = (size_t)(16 + (i * 37) % 113) << 20;
        if (!(held[i] = malloc(size)))
            return 3;
        for (size_t at = 0; at < size; at += page)
            held[i][at] = (char)i;
        total += size;
    }
    printf("held %zu\n", total);
    fflush(stdout);
    errno = 0;
    void *p = malloc((size_t)1 << 62);
    if (p || errno != ENOMEM) {
        fprintf(stderr, "host_oom: malloc(2^62) did not fail with ENOMEM\n");
        return 2;
    }
    for (int i = 0; i < n; i++)
        free(held[i]);
    return 0;
}

/* A death that is not of memory, with a ring in place. */
static int hold_die(const char *how)
{
    static const struct { const char *name; int sig; } sigs[] = {
        {"PIPE", SIGPIPE}, {"INT", SIGINT},   {"TERM", SIGTERM}, {"HUP", SIGHUP},
        {"QUIT", SIGQUIT}, {"ALRM", SIGALRM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
        {"KILL", SIGKILL}, {"ABRT", SIGABRT}};
    char *held = malloc(16u << 20);
    if (!held)
        return 2;
    memset(held, 1, 16u << 20);
    if (!strcmp(how, "segv")) {
        volatile char *nowhere = NULL;
        *nowhere = 1;
    }
    if (!strcmp(how, "exec-clean")) {
        char *argv[] = {"sh", "-c", "exit 3", NULL}, *envp[] = {NULL};
        execve("/bin/sh", argv, envp);
        return 2;
    }
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (!strcmp(how, sigs[i].name)) {
            signal(sigs[i].sig, SIG_DFL);
            kill(getpid(), sigs[i].sig);
            pause();
        }
    return 2;
}

static void on_some_signal(int sig)
{
    (void)sig;
}

/* What the program sees of one signal's disposition: "dfl", "ign",
 * "mine" (on_some_signal) or "other". */
static const char *seen(int sig)
{
    struct sigaction now;
    if (sigaction(sig, NULL, &now) != 0)
        return "error";
    if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL)
        return "dfl";
    if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN)
        return "ign";
    return !(now.sa_flags & SA_SIGINFO) && now.sa_handler == on_some_signal ? "mine" : "other";
}

static int dispositions(void)
{
    char *held = malloc(16u << 20);
    if (!held)
        return 2;
    memset(held, 1, 16u << 20);
    static const struct { const char *name; int sig; } sigs[] = {{"TERM", SIGTERM},
                                                                {"HUP", SIGHUP}};
    for (size_t i = 0; i < 2; i++) {
        int sig = sigs[i].sig;
        printf("%s %s", sigs[i].name, seen(sig));
        void (*was)(int) = signal(sig, on_some_signal);
        printf(" signal-was-%s %s", was == SIG_DFL ? "dfl" : "other", seen(sig));
        struct sigaction dfl, old;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, &old);
        printf(" old-%s %s", old.sa_handler == on_some_signal ? "mine" : "other", seen(sig));
        was = signal(sig, SIG_DFL);
        printf(" signal-was-%s\n", was == SIG_DFL ? "dfl" : "other");
    }
    fflush(stdout);
    kill(getpid(), SIGTERM);
    pause();
    return 2;
}

/* 16 MiB, touched, kept: one call site for both processes of fork_kill. */
static __attribute__((noinline)) void *hold_16_mib(void)
{
    char *p = malloc(16u << 20);
    if (p)
        memset(p, 1, 16u << 20);
    return p;
}

static int fork_kill(void)
{
    pid_t pid = 1;
    for (int i = 0; i < 2; i++) {
        if (i == 1 && (pid = fork()) < 0)
            return 2;
        if (!hold_16_mib())
            return 2;
    }
    if (pid == 0) {
        kill(getpid(), SIGKILL);
        pause();
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 99;
}

static void *churn(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 20000; i++) {
        void *p = malloc((size_t)(16 + (i * 37 + id) % 5000));
        void *q = calloc(1, (size_t)(i % 3 ? 64 : (2 << 20)));
        free(p);
        free(q);
        if (id == 7 && i == 10000)
            fail_twice();
    }
    return NULL;
}

static int threads(void)
{
    pthread_t th[16];
    for (long i = 0; i < 16; i++)
        pthread_create(&th[i], NULL, churn, (void *)i);
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    puts("threads done");
    return 0;
}

static int api(void)
{
    gmp_preload_recorder_fn get =
        (gmp_preload_recorder_fn)dlsym(RTLD_DEFAULT, GMP_PRELOAD_RECORDER_SYMBOL);
    int (*set_context)(gmp_recorder *, const char *) =
        (int (*)(gmp_recorder *, const char *))dlsym(RTLD_DEFAULT, "gmp_recorder_set_context");
    int (*set_metadata)(gmp_recorder *, const char *) =
        (int (*)(gmp_recorder *, const char *))dlsym(RTLD_DEFAULT, "gmp_recorder_set_metadata");
    int (*record)(gmp_recorder *, const gmp_event *) =
        (int (*)(gmp_recorder *, const gmp_event *))dlsym(RTLD_DEFAULT, "gmp_record");
    gmp_recorder *rec = get ? get() : NULL;
    if (!rec || !set_context || !set_metadata || !record) {
        puts("no preload recorder");
        return 3;
    }
    set_context(rec, "epoch 3, step 120");
    set_metadata(rec, "{\"batch_size\":64,\"model\":\"toy\"}");
    gmp_event mark = {.type = GMP_EV_MARK, .api = GMP_API_USER, .device = -1, .size = 42};
    record(rec, &mark);
    fail_twice();
    return 0;
}

static int report(const char *when)
{
    gmp_preload_recorder_fn get =
        (gmp_preload_recorder_fn)dlsym(RTLD_DEFAULT, GMP_PRELOAD_RECORDER_SYMBOL);
    const char *(*dump)(gmp_recorder *, const char *, const char *, const char *, const char *,
                        const char *, const char *, const char *, int, char *, size_t) =
        (const char *(*)(gmp_recorder *, const char *, const char *, const char *, const char *,
                         const char *, const char *, const char *, int, char *,
                         size_t))dlsym(RTLD_DEFAULT, GMP_PRELOAD_DUMP_EXCEPTION_SYMBOL);
    gmp_recorder *rec = get ? get() : NULL;
    if (!rec || !dump) {
        puts("no preload recorder");
        return 3;
    }
    void *p = malloc(HUGE_REQUEST);
    if (!strcmp(when, "after-second"))
        p = malloc(HUGE_REQUEST);
    char path[4096];
    const char *written = dump(rec, "MemoryError", "MemoryError", "builtins", "caught it",
                               "epoch 7", "cpu", "{\"batch_size\":128}", -1, path, sizeof path);
    printf("%s\n", written ? written : "(none)");
    return p != NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "quiet";
    if (!strcmp(mode, "quiet")) {
        for (int i = 0; i < 1000; i++)
            free(malloc((size_t)i * 100));
        printf("ok threads=%d\n", thread_count());
        return 0;
    }
    if (!strcmp(mode, "grow"))
        return grow();
    if (!strcmp(mode, "report"))
        return report(argc > 2 ? argv[2] : "");
    if (!strcmp(mode, "fail-twice")) {
        fail_twice();
        return 0;
    }
    if (!strcmp(mode, "stderr-taken") && argc > 2) {
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd != 2)
            return 2;
        if (write(fd, "data\n", 5) != 5)
            return 3;
        fail_twice();
        return write(fd, "more data\n", 10) != 10;
    }
    if (!strcmp(mode, "mmap-heap")) {
        for (;;) {
            char *p = map_heap_chunk((size_t)32 << 20);
            if (!p) {
                fputs("not enough memory\n", stderr);
                return 1;
            }
            memset(p, 1, (size_t)32 << 20);
        }
    }
    if (!strcmp(mode, "spent")) {
        /* every 64 KiB of address space RLIMIT_AS leaves, reserved (no
         * allocation: the preload is quiet), then 64 MiB asked for */
        while (mmap(NULL, (size_t)64 << 10, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0) != MAP_FAILED)
            ;
        if (ask_when_spent((size_t)64 << 20))
            return 0;
        fputs("not enough memory\n", stderr);
        return 1;
    }
    if (!strcmp(mode, "reserve-less")) {
        void *big = mmap(NULL, (size_t)64 << 30, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *small = mmap(NULL, (size_t)64 << 20, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        /* the huge request rounded up to whole huge pages, the plain one not */
        void *huge = mmap(NULL, (size_t)66 << 20, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        void *plain = huge != MAP_FAILED ? huge
                                          : mmap(NULL, (size_t)65 << 20, PROT_READ | PROT_WRITE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        printf("%s then %s\n", big == MAP_FAILED ? "refused" : "reserved",
               small == MAP_FAILED ? "refused" : "reserved");
        return small == MAP_FAILED || plain == MAP_FAILED;
    }
    if (!strcmp(mode, "mid-line")) {
        if (write(2, "\"\"\"", 3) != 3)
            return 3;
        fail_twice();
        return write(2, "\"\"\"\n", 4) != 4;
    }
    if (!strcmp(mode, "fail-then-wait") && argc > 2) {
        /* the failure open, then FILE says so, then a wait to be stopped in */
        void *p = malloc(HUGE_REQUEST);
        FILE *said = fopen(argv[2], "w");
        if (said)
            fclose(said);
        sleep(10);
        return p != NULL;
    }
    if (!strcmp(mode, "fail-sleep")) {
        int before = thread_count();
        void *p = malloc(HUGE_REQUEST);
        usleep(1500 * 1000);
        printf("threads %d then %d\n", before, thread_count());
        return p != NULL;
    }
    if (!strcmp(mode, "recover"))
        return recover();
    if (!strcmp(mode, "recover-then-say")) {
        int rc = recover();
        fputs("MemoryError\n", stderr);
        return rc;
    }
    if (!strcmp(mode, "recover-then-fail")) {
        int rc = recover();
        fail_twice();
        return rc;
    }
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            printf("child %d\n", (int)getpid());
            fflush(stdout);
            fail_twice();
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
    }
    if (!strcmp(mode, "threads"))
        return threads();
    if (!strcmp(mode, "hold-die"))
        return hold_die(argc > 2 ? argv[2] : "");
    if (!strcmp(mode, "fork-kill"))
        return fork_kill();
    if (!strcmp(mode, "dispositions"))
        return dispositions();
    if (!strcmp(mode, "hold-fail"))
        return hold_fail(argc > 2 ? atoi(argv[2]) : 64);
    if (!strcmp(mode, "slow-grow"))
        return slow_grow(argc > 2 ? atoi(argv[2]) : 1);
    if (!strcmp(mode, "slow-death"))
        return slow_death();
    if (!strcmp(mode, "api"))
        return api();
    fprintf(stderr, "host_oom: unknown mode %s\n", mode);
    return 2;
}
