/*
 * stress.c — a plain program for the stress tests (test_stress.c).  Usage:
 *   stress oom-threads N   N threads meet at a barrier, then each asks
 *                          malloc for 2^60 bytes twice; exit 0
 *   stress fork-alloc N    N times: allocate 2 MiB (an event) and fork; the
 *                          child allocates 2 MiB three times and asks for
 *                          2^60 twice (its bundle), then exits 0; the
 *                          parent, allocating meanwhile, waits for them all
 *                          and prints how many exited 0
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HUGE_REQUEST ((size_t)1 << 60)
#define MIB ((size_t)1 << 20)

static pthread_barrier_t start;

static void fail_twice(void)
{
    void *volatile p = malloc(HUGE_REQUEST);
    void *volatile q = malloc(HUGE_REQUEST);
    if (p || q)
        abort(); /* the machine cannot have 1 EiB */
}

static void *oom_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    fail_twice();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[2]);
    if (n < 1 || n > 1000)
        return 2;
    if (!strcmp(argv[1], "oom-threads")) {
        pthread_t th[1000];
        pthread_barrier_init(&start, NULL, (unsigned)n);
        for (int i = 0; i < n; i++)
            pthread_create(&th[i], NULL, oom_thread, NULL);
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        return 0;
    }
    if (!strcmp(argv[1], "fork-alloc")) {
        void *keep[1000];
        for (int i = 0; i < n; i++) {
            keep[i] = malloc(2 * MIB);
            pid_t pid = fork();
            if (pid == 0) {
                void *mine[3];
                for (int k = 0; k < 3; k++)
                    mine[k] = malloc(2 * MIB);
                fail_twice();
                for (int k = 0; k < 3; k++)
                    free(mine[k]);
                exit(0);
            }
        }
        int ok = 0, status;
        while (wait(&status) > 0)
            ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        for (int i = 0; i < n; i++)
            free(keep[i]);
        printf("%d children exited 0\n", ok);
        return 0;
    }
    return 2;
}
