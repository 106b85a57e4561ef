/*
 * start_pairs.c — what a tool costs a process, in pairs: PAIRS times,
 * PROGRAM is run under LD_PRELOAD=BASE and under LD_PRELOAD=TOOL (an empty
 * BASE or TOOL: no preload), one right after the other (A B, then B A;
 * with -r, B A first), each a fork, an exec and a wait timed on its own.
 * With -w WRAPPER the TOOL run is WRAPPER PROGRAM [ARG]... (gmp-run, which
 * sets its own preload).  A pair's two processes start a millisecond
 * apart: on a shared VM whose speed drifts by a third between loops a
 * fifth of a second apart (the same loop under the same preload, run
 * twice in a row, read 0.62-1.23x of itself), the pair's ratio is what
 * holds.  Prints "WALL CPU WALL_RATIO CPU_RATIO FAULTS BASE_FAULTS
 * BASE_WALL BASE_CPU": a TOOL process's wall and CPU time (user + system,
 * from wait4) in seconds, the medians over the pairs of the TOOL
 * process's time over the BASE one's, the page faults (without a read of
 * the disk) a process took under each, and a BASE process's times; each a
 * median over the pairs.  The programs' output is dropped.
 * Usage: start_pairs [-r] [-w WRAPPER] PAIRS BASE TOOL PROGRAM [ARG]...
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

/* What is printed, each a median over the pairs. */
enum { TOOL_WALL, TOOL_CPU, WALL_RATIO, CPU_RATIO, TOOL_FAULTS, BASE_FAULTS, BASE_WALL,
       BASE_CPU, MEASURES };

int main(int argc, char **argv)
{
    int opt, reversed = 0;
    char *wrapper = NULL;
    while ((opt = getopt(argc, argv, "+rw:")) != -1) {
        if (opt == 'r')
            reversed = 1;
        else if (opt == 'w')
            wrapper = optarg;
        else
            return 2;
    }
    argv += optind - 1;
    argc -= optind - 1;
    int pairs = argc > 1 ? atoi(argv[1]) : 0;
    if (argc < 5 || pairs < 1 || pairs > 100000) {
        fprintf(stderr, "usage: start_pairs [-r] [-w WRAPPER] PAIRS BASE TOOL PROGRAM [ARG]...\n");
        return 2;
    }
    double *v[MEASURES];
    for (int m = 0; m < MEASURES; m++)
        if (!(v[m] = calloc((size_t)pairs, sizeof *v[m])))
            return 2;
    const char *tool_preload = argv[3];
    char **program = argv + 4, **tool_program = program;
    if (wrapper) { /* in the TOOL's slot, read above: just before the program */
        argv[3] = wrapper;
        tool_program = argv + 3;
    }
    long cpu_pairs = 0;
    for (int i = 0; i < pairs; i++) {
        run base, tool;
        int failed = (i + reversed) & 1
                         ? run_once(tool_preload, tool_program, &tool) |
                               run_once(argv[2], program, &base)
                         : run_once(argv[2], program, &base) |
                               run_once(tool_preload, tool_program, &tool);
        if (failed) {
            fprintf(stderr, "start_pairs: %s did not run and exit 0\n", argv[4]);
            return 1;
        }
        v[TOOL_WALL][i] = tool.wall;
        v[TOOL_CPU][i] = tool.cpu;
        v[WALL_RATIO][i] = tool.wall / base.wall;
        if (base.cpu > 0)
            v[CPU_RATIO][cpu_pairs++] = tool.cpu / base.cpu;
        v[TOOL_FAULTS][i] = (double)tool.faults;
        v[BASE_FAULTS][i] = (double)base.faults;
        v[BASE_WALL][i] = base.wall;
        v[BASE_CPU][i] = base.cpu;
    }
    for (int m = 0; m < MEASURES; m++) {
        long n = m == CPU_RATIO ? cpu_pairs : pairs;
        printf(m ? " %.6f" : "%.6f", n ? bench_median(v[m], n) : 0.0);
    }
    printf("\n");
    return 0;
}
