/*
 * leader_exits.c — a process whose main thread ends first: it holds four
 * blocks of 8 MiB (four events, so a ring of its own under the preload),
 * starts a thread, and 0.3 s later (gmp-run has seen it by then) calls
 * pthread_exit.  From then on /proc says the
 * process is a zombie ("Z"), with its live threads counted, though it runs
 * on.  The thread sleeps MS milliseconds (1500 unless given), then kills
 * the process with SIGKILL, MS after its start.  Usage: leader_exits [MS]
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long ms = 1500;

static void sleep_ms(long n)
{
    struct timespec t = {n / 1000, (n % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0)
        ;
}

static void *kill_later(void *unused)
{
    (void)unused;
    sleep_ms(ms);
    raise(SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    static char *held[4];
    for (int i = 0; i < 4; i++) {
        held[i] = malloc(8 << 20);
        if (!held[i])
            return 1;
        memset(held[i], 1, 8 << 20);
    }
    if (argc > 1)
        ms = atol(argv[1]);
    pthread_t t;
    if (pthread_create(&t, NULL, kill_later, NULL) != 0)
        return 1;
    sleep_ms(300);
    pthread_exit(NULL);
}
