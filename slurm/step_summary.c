/*
 * step_summary.c — the one line srun prints into the job's output when its
 * step's tasks left bundles: how many tasks ran out of memory, what ended
 * the first, where its bundle is (Slurm's own "Detected 1 oom-kill
 * event(s)" line points nowhere).  Runs in srun, as the job's user.
 *
 * The dump directory is the user's choice and may be a shared one (a
 * world-writable scratch directory) where another user can plant
 * directories named like bundles, with manifests naming this step.  So
 * only a directory the user owns is read, only bundle directories the user
 * owns are counted, and only files the user owns are read in them (opened
 * without following a symlink or waiting on a FIFO); and every name the
 * line prints is written with its control characters escaped, so a
 * planted name cannot move the terminal's cursor or forge a line.
 */
#include "spank_gmp.h"
#include "json_text.h"
#include "verdict.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* file in the bundle directory bfd, when the user owns it and it is a
 * regular file: its text in buf.  0, or -1. */
static int read_owned(int bfd, const char *file, char *buf, size_t cap)
{
    int fd = openat(bfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid())
        n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* s with its control characters (and backslash) as \xNN escapes. */
static void put_clean(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || c == '\\')
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

typedef struct step_tally {
    int memory, pressure, survived, other;
    char first[256], first_words[200];
    const char *first_dir;
} step_tally;

/* One bundle of the step, counted by its kind (verdict.h: the one its
 * writer decided, the one triage reads): a death of memory, a pressure
 * warning, a failure survived, or a kill or crash with no sign of memory. */
static void tally(step_tally *t, const char *dir, int bfd, const char *name)
{
    char text[16384], reason[128];
    if (read_owned(bfd, "metadata.json", text, sizeof text) < 0)
        return;
    gmp_verdict kind = gmp_verdict_of_text(text);
    if (kind == GMP_VERDICT_PRESSURE) {
        t->pressure++;
        return;
    }
    if (kind == GMP_VERDICT_SURVIVED) {
        t->survived++;
        return;
    }
    if (!gmp_verdict_is_death_of_memory(kind)) {
        t->other++;
        return;
    }
    t->memory++;
    if (!t->first[0] || strcmp(name, t->first) < 0) { /* names begin with their time */
        gmp_json_string_value(text, "reason", reason, sizeof reason);
        snprintf(t->first, sizeof t->first, "%s", name);
        snprintf(t->first_words, sizeof t->first_words, "%s",
                 kind == GMP_VERDICT_OOM_KILLED ? "killed by the kernel's OOM killer" : reason);
        t->first_dir = dir;
    }
}

/* dir, opened when it is a directory the user owns (not through a symlink
 * at its end); -1 otherwise. */
static int open_owned_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != getuid())) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The bundles in dir of step want, counted into t: how many. */
static int tally_dir(step_tally *t, const char *dir, const char *want)
{
    int dfd = open_owned_dir(dir);
    if (dfd < 0)
        return 0;
    int listed = dup(dfd);
    DIR *d = listed >= 0 ? fdopendir(listed) : NULL;
    if (!d) {
        if (listed >= 0)
            close(listed);
        close(dfd);
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (strncmp(e->d_name, "oom_dump_", 9) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        int bfd = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char text[8192], of[48];
        if (bfd < 0)
            continue;
        if (read_owned(bfd, "manifest.json", text, sizeof text) == 0) {
            gmp_json_string_value(text, "slurm_job", of, sizeof of);
            if (!strcmp(of, want)) {
                tally(t, dir, bfd, e->d_name);
                n++;
            }
        }
        close(bfd);
    }
    closedir(d);
    close(dfd);
    return n;
}

/* The same directory, by what it is, not how it is named. */
static int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

void step_summary(const char *step, const char *dump_dir)
{
    const char *dir = dump_dir[0] ? dump_dir : "oom_dumps";
    /* and where a task's bundle goes when that directory cannot be had */
    char fallback[PATH_MAX] = "";
    const char *home = getenv("HOME");
    if (home && home[0] == '/')
        snprintf(fallback, sizeof fallback, "%s/oom_dumps", home);
    if (fallback[0] && same_dir(dir, fallback))
        fallback[0] = '\0';
    step_tally t = {0};
    int in_dir = tally_dir(&t, dir, step);
    int in_fallback = fallback[0] ? tally_dir(&t, fallback, step) : 0;
    const char *first_of = in_dir || !in_fallback ? dir : "";
    const char *second = in_fallback ? fallback : "";
    const char *gap = in_dir && in_fallback ? " " : "";
    if (t.memory) {
        fprintf(stderr, "gpumemprof: step %s: %d task(s) ran out of memory; the first: ", step,
                t.memory);
        put_clean(stderr, t.first_words);
        fputs(" (", stderr);
        put_clean(stderr, t.first_dir);
        fputc('/', stderr);
        put_clean(stderr, t.first);
        fputs("); `gmp-inspect triage ", stderr);
        put_clean(stderr, first_of);
        fputs(gap, stderr);
        put_clean(stderr, second);
        fprintf(stderr, "` for all%s\n",
                t.pressure ? ", memory-pressure warnings included" : "");
    } else if (t.pressure || t.survived || t.other) {
        fprintf(stderr,
                "gpumemprof: step %s: no task ran out of memory; %d memory-pressure "
                "warning(s), %d failure(s) survived, %d kill(s) or crash(es) with no sign of "
                "memory, in ",
                step, t.pressure, t.survived, t.other);
        put_clean(stderr, first_of);
        fputs(gap, stderr);
        put_clean(stderr, second);
        fputc('\n', stderr);
    }
}
