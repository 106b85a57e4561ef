/*
 * spank_spy.c — stands in for gmp-inspect where the Slurm plugin's tests
 * (test_spank) name it: it writes down what it was handed — every open
 * descriptor, its credentials, capabilities, signal mask, OOM score,
 * cgroups, session, arguments and environment — to $HOME/spy.report, and
 * then, when $HOME/spy.stop exists, stops itself as a hostile user would.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void copy_file(FILE *out, const char *label, const char *path)
{
    FILE *in = fopen(path, "r");
    char line[4096];
    while (in && fgets(line, sizeof line, in))
        fprintf(out, "%s %s", label, line);
    if (in)
        fclose(in);
}

int main(int argc, char **argv)
{
    /* the descriptors first: nothing of ours is open yet */
    char fds[64][600];
    int nfd = 0;
    DIR *d = opendir("/proc/self/fd");
    int own = d ? dirfd(d) : -1;
    struct dirent *e;
    while (d && (e = readdir(d)) && nfd < 64) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == own)
            continue;
        char path[300], target[512] = "";
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        snprintf(fds[nfd++], sizeof fds[0], "fd %s %s\n", e->d_name, target);
    }
    if (d)
        closedir(d);
    const char *home = getenv("HOME");
    char report[1024], stop[1024];
    snprintf(report, sizeof report, "%s/spy.report", home ? home : "/tmp");
    snprintf(stop, sizeof stop, "%s/spy.stop", home ? home : "/tmp");
    FILE *out = fopen(report, "w");
    if (!out)
        return 1;
    fprintf(out, "spy\npid %d\nsid %d\n", (int)getpid(), (int)getsid(0));
    for (int i = 0; i < nfd; i++)
        fputs(fds[i], out);
    for (int i = 0; i < argc; i++)
        fprintf(out, "arg %s\n", argv[i]);
    for (char **v = environ; *v; v++)
        fprintf(out, "env %s\n", *v);
    copy_file(out, "status", "/proc/self/status");
    copy_file(out, "oom_score_adj", "/proc/self/oom_score_adj");
    copy_file(out, "cgroup", "/proc/self/cgroup");
    fputs("end\n", out);
    fclose(out);
    if (access(stop, F_OK) == 0)
        raise(SIGSTOP);
    return 0;
}
