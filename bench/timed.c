/*
 * timed.c — runs a command and prints its wall time and the CPU time
 * (user + system) it and its children took, in seconds, and the page
 * faults they took without a read of the disk: "WALL CPU FAULTS" on
 * stdout; the command's own output is dropped.  bench/run.sh times every
 * whole-process workload with it, so that each row has both ratios.
 * Usage: timed COMMAND [ARG]...; exits with the command's status.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: timed COMMAND [ARG]...\n");
        return 2;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0) {
        perror("timed: fork");
        return 2;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execvp(argv[1], argv + 1);
        perror("timed: exec");
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("timed: wait4");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* wait4's usage covers the child and the descendants it waited for */
    printf("%.6f %.6f %ld\n",
            (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
            seconds(ru.ru_utime) + seconds(ru.ru_stime), ru.ru_minflt);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
