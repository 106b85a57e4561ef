/*
 * run_verdict.c — when a distributed job run under gmp-run ends, its last
 * line on stderr says which rank ran out first and what followed, as the
 * Slurm step's line does for a step.  A rank the launcher stopped with
 * SIGTERM writes no bundle (nothing of it failed), so only its end tells
 * it: each process of the job that reaps a rank (the launcher, preloaded)
 * notes how it ended in the job directory (ring_recovery.c's note_end,
 * GMP_RUN_ENDS_FILE).  Here those notes are kept beside the run's bundles
 * in the dump directory, where `gmp-inspect triage` reads them again, and
 * triage, beside gmp-run, tells the verdict: one reader of runs, not two.
 * A run that left no bundle (a healthy one) leaves nothing and says nothing.
 */
#include "run_verdict.h"
#include "bundle.h"
#include "ring_recovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENDS_MAX (1 << 20) /* bytes of notes read: 4,000 ranks' and more */
#define RUNS_TOLD 16

/* The notes' text (NUL-ended, malloc'd) of job_dir, which then has none;
 * NULL when there are none. */
static char *take_ends(const char *job_dir)
{
    int dirfd = open(job_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return NULL;
    int fd = openat(dirfd, GMP_RUN_ENDS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char *text = NULL;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (text = malloc(ENDS_MAX + 1)) != NULL) {
        ssize_t n = read(fd, text, ENDS_MAX);
        text[n > 0 ? n : 0] = '\0';
    }
    if (fd >= 0)
        close(fd);
    unlinkat(dirfd, GMP_RUN_ENDS_FILE, 0);
    close(dirfd);
    return text;
}

/* A note's run key (its last field), in key; 0, or -1 for a line of
 * another shape. */
static int key_of(const char *line, size_t len, char *key, size_t cap)
{
    const char *at = line;
    for (int field = 0; field < 5; field++) {
        const char *space = memchr(at, ' ', len - (size_t)(at - line));
        if (!space)
            return -1;
        at = space + 1;
    }
    size_t k = len - (size_t)(at - line);
    if (!k || k >= cap)
        return -1;
    memcpy(key, at, k);
    key[k] = '\0';
    return 0;
}

/* Whether dump_dir holds a bundle whose manifest names the run key. */
static int run_has_bundle(const char *dump_dir, const char *key)
{
    DIR *d = opendir(dump_dir);
    if (!d)
        return 0;
    char needle[GMP_RUN_KEY_SIZE + 16], text[4096];
    snprintf(needle, sizeof needle, "\"run\":\"%s\"", key);
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, GMP_BUNDLE_PREFIX, strlen(GMP_BUNDLE_PREFIX)))
            continue;
        int bfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (bfd < 0)
            continue;
        found = gmp_manifest_read(bfd, e->d_name, text, sizeof text) == 0 && strstr(text, needle);
        close(bfd);
    }
    closedir(d);
    return found;
}

/* `inspect triage --format line --run KEY DUMP_DIR`, its words on stderr. */
static void tell(const char *inspect, const char *dump_dir, const char *key)
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1);
        execl(inspect, inspect, "triage", "--format", "line", "--run", key, dump_dir,
              (char *)NULL);
        _exit(127);
    }
    for (int st; pid > 0 && waitpid(pid, &st, 0) < 0;)
        ;
}

void run_verdict_tell(const char *job_dir, const char *dump_dir, const char *inspect)
{
    char *ends = take_ends(job_dir);
    if (!ends || !dump_dir)
        goto done;
    /* the runs among the notes that left a bundle: theirs are kept */
    char keys[RUNS_TOLD][GMP_RUN_KEY_SIZE];
    int n_keys = 0, told[RUNS_TOLD] = {0};
    FILE *kept = NULL;
    for (char *line = ends, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        char key[GMP_RUN_KEY_SIZE];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (key_of(line, len, key, sizeof key) < 0)
            continue;
        int k = 0;
        while (k < n_keys && strcmp(keys[k], key))
            k++;
        if (k == n_keys) {
            if (n_keys == RUNS_TOLD)
                continue;
            memcpy(keys[n_keys], key, strlen(key) + 1);
            told[n_keys++] = run_has_bundle(dump_dir, key);
        }
        if (!told[k])
            continue;
        if (!kept) {
            char path[4096];
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            snprintf(path, sizeof path, "%s/" GMP_RUN_ENDS_NOTE_PREFIX "%lld%09ld_%d.txt",
                     dump_dir, (long long)now.tv_sec, now.tv_nsec, (int)getpid());
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            kept = fd >= 0 ? fdopen(fd, "w") : NULL;
            if (!kept && fd >= 0)
                close(fd);
        }
        if (kept)
            fprintf(kept, "%.*s\n", (int)len, line);
    }
    if (kept)
        fclose(kept);
    for (int k = 0; k < n_keys && inspect; k++)
        if (told[k])
            tell(inspect, dump_dir, keys[k]);
done:
    free(ends);
}
