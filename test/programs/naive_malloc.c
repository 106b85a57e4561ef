/*
 * naive_malloc.c — the classic unchecked-malloc program: allocates what it is told and writes
 * through the result without checking it.  Usage:
 *   naive_malloc SIZE          malloc(SIZE), then write "OK\n" into it
 *   naive_malloc segv          write through NULL with no allocation at all
 *   naive_malloc abort SIZE    malloc(SIZE) fails, then abort()
 *   naive_malloc larger-abort SIZE  malloc(SIZE) fails, then 3 ms later
 *                              malloc(2 * SIZE) fails (a second failure at least as
 *                              large: the bundle is written), then abort(): as
 *                              Erlang's allocators go down, one death
 *   naive_malloc handler SIZE  install a SIGSEGV handler that prints and
 *                              _exit(42)s, then as SIZE (handlers keep working)
 *   naive_malloc altstack SIZE set a 16 KiB alternate signal stack of its own,
 *                              as CPython's faulthandler does, then as SIZE
 *   naive_malloc other-thread SIZE  malloc(SIZE) fails; then another thread's
 *                              malloc(2^60) fails too; then write through NULL
 *   naive_malloc held-after SIZE  holds 16 MiB (hold_before), malloc(SIZE)
 *                              fails, then 64 MiB more (made_after), then
 *                              write through NULL
 * allocate_unchecked is the function a bundle's native stack must name.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *allocate_unchecked(size_t size);
__attribute__((noinline)) char *allocate_unchecked(size_t size)
{
    char *data = malloc(size);
    __asm__ volatile("" ::"r"(data) : "memory"); /* a real call, not a tail call */
    return data;
}

/* 16 MiB before the failure, 64 MiB after it, every page touched. */
__attribute__((noinline)) static char *hold_before(void)
{
    char *p = malloc(16u << 20);
    if (p)
        memset(p, 1, 16u << 20);
    return p;
}

__attribute__((noinline)) static char *made_after(void)
{
    char *p = malloc(64u << 20);
    if (p)
        memset(p, 1, 64u << 20);
    return p;
}

static void *fail_elsewhere(void *arg)
{
    (void)arg;
    void *volatile p = malloc((size_t)1 << 60);
    return p;
}

static void on_segv(int sig)
{
    (void)sig;
    static const char msg[] = "program handler\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(42);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (!strcmp(argv[1], "segv")) {
        volatile char *nothing = NULL;
        nothing[0] = 'X';
        return 0;
    }
    if (!strcmp(argv[1], "larger-abort") && argc > 2) {
        size_t size = strtoull(argv[2], NULL, 0);
        char *first = allocate_unchecked(size);
        usleep(3000);
        char *second = allocate_unchecked(2 * size);
        if (!first && !second)
            abort();
        return 0;
    }
    if (!strcmp(argv[1], "held-after") && argc > 2) {
        char *volatile before = hold_before();
        char *data = allocate_unchecked(strtoull(argv[2], NULL, 10));
        char *volatile after = made_after();
        (void)before;
        (void)after;
        data[0] = 'O';
        return 0;
    }
    if (!strcmp(argv[1], "abort") && argc > 2) {
        char *p = allocate_unchecked(strtoull(argv[2], NULL, 10));
        if (!p)
            abort();
        return 0;
    }
    const char *size_arg = argv[1];
    if (!strcmp(argv[1], "altstack") && argc > 2) {
        static char small_stack[16 * 1024];
        stack_t ss = {.ss_sp = small_stack, .ss_size = sizeof small_stack};
        sigaltstack(&ss, NULL);
        size_arg = argv[2];
    }
    if (!strcmp(argv[1], "handler") && argc > 2) {
        signal(SIGSEGV, on_segv);
        size_arg = argv[2];
    }
    int other_thread = !strcmp(argv[1], "other-thread") && argc > 2;
    if (other_thread)
        size_arg = argv[2];
    char *data = allocate_unchecked(strtoull(size_arg, NULL, 10));
    if (other_thread) {
        pthread_t th;
        if (pthread_create(&th, NULL, fail_elsewhere, NULL) == 0)
            pthread_join(th, NULL);
    }
    /* Uh oh, didn't check for NULL return result. */
    data[0] = 'O';
    data[1] = 'K';
    data[2] = '\n';
    data[3] = 0;
    printf("%s", data);
    return 0;
}
