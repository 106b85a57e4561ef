/*
 * start_pairs.c — what a library costs a short process's start and exit,
 * in pairs: PAIRS times, PROGRAM is run under LD_PRELOAD=BASE and under
 * LD_PRELOAD=TOOL, one after the other (A B, then B A), each a fork, an
 * exec and a wait timed on its own.  A pair's two processes start a
 * millisecond apart: on a shared VM whose speed drifts by a third between
 * loops a fifth of a second apart (the same loop under the same preload,
 * run twice in a row, read 0.62-1.23x of itself), the pair's ratio is what
 * holds.  Prints "WALL CPU WALL_RATIO CPU_RATIO FAULTS BASE_FAULTS": the
 * TOOL processes' wall and CPU time (user + system, from wait4) summed, in
 * seconds; the medians over the pairs of the TOOL process's time over the
 * BASE one's; and the page faults (without a read of the disk) a process
 * took under each, medians.  The programs' output is dropped.
 * Usage: start_pairs PAIRS BASE TOOL PROGRAM [ARG]...
 */
#include "median.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run {
    double wall, cpu;
    long faults;
} run;

static double seconds_of(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

/* PROGRAM once under LD_PRELOAD=preload; 0, or -1 when it did not run or
 * did not exit 0. */
static int run_once(const char *preload, char **argv, run *out)
{
    static char setting[4096];
    snprintf(setting, sizeof setting, "LD_PRELOAD=%s", preload);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        putenv(setting);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    out->wall = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    out->cpu = seconds_of(ru.ru_utime) + seconds_of(ru.ru_stime);
    out->faults = ru.ru_minflt;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 0;
    if (argc < 5 || pairs < 1 || pairs > 100000) {
        fprintf(stderr, "usage: start_pairs PAIRS BASE TOOL PROGRAM [ARG]...\n");
        return 2;
    }
    double *wall = calloc((size_t)pairs, sizeof *wall), *cpu = calloc((size_t)pairs, sizeof *cpu);
    double *faults = calloc((size_t)pairs, sizeof *faults);
    double *base_faults = calloc((size_t)pairs, sizeof *base_faults);
    if (!wall || !cpu || !faults || !base_faults)
        return 2;
    run sum = {0, 0, 0};
    int cpu_pairs = 0;
    for (int i = 0; i < pairs; i++) {
        run base, tool;
        char **program = argv + 4;
        int failed = i & 1 ? run_once(argv[3], program, &tool) | run_once(argv[2], program, &base)
                           : run_once(argv[2], program, &base) | run_once(argv[3], program, &tool);
        if (failed) {
            fprintf(stderr, "start_pairs: %s did not run and exit 0\n", argv[4]);
            return 1;
        }
        sum.wall += tool.wall;
        sum.cpu += tool.cpu;
        wall[i] = tool.wall / base.wall;
        if (base.cpu > 0)
            cpu[cpu_pairs++] = tool.cpu / base.cpu;
        faults[i] = (double)tool.faults;
        base_faults[i] = (double)base.faults;
    }
    printf("%.6f %.6f %.6f %.6f %.1f %.1f\n", sum.wall, sum.cpu, bench_median(wall, pairs),
           cpu_pairs ? bench_median(cpu, cpu_pairs) : 0.0, bench_median(faults, pairs),
           bench_median(base_faults, pairs));
    return 0;
}
