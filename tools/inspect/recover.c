/*
 * recover.c — `gmp-inspect recover [DIR]`: bundles for processes that died
 * without a word (SIGKILL, the kernel OOM killer), written from the rings
 * they left in the run directory.  The one verb that writes: it goes
 * through the recorder library (gmp_rings_recover), which writes the bundle
 * where the dead process would have and then removes its ring.  Rings of
 * live processes are left alone.
 */
#include "gpumemprof.h"
#include "inspect.h"
#include "rundir.h"

#include <string.h>
#include <unistd.h>

static void report(const char *bundle_path, int pid, const char *reason, void *arg)
{
    int *count = arg;
    printf("pid %d: %s; bundle: %s\n", pid, reason, bundle_path);
    ++*count;
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect recover [RUN_DIR] [--dump-dir DIR]\n\n"
          "Write the bundles of processes that died without writing one (killed\n"
          "by SIGKILL, say by the kernel OOM killer) from the event rings they\n"
          "left in RUN_DIR (default: $GMP_RUN_DIR, else the per-user run\n"
          "directory) and in the job directories there of every gmp-run that is\n"
          "gone (one killed with its command), into the dump directory each\n"
          "process used, or DIR; a job directory left empty is removed.  The\n"
          "reason is the signal when the parent that reaped it was preloaded,\n"
          "else \"killed\"; evidence names the kernel OOM killer when the\n"
          "process's cgroup counted an OOM kill or the kernel log says so.\n"
          "Rings of live processes are left alone.  RUN_DIR must be yours and\n"
          "closed to others, as the preload wants it; a ring that another user\n"
          "owns goes to DIR or ./oom_dumps, under your GMP_MAX_DUMPS and\n"
          "GMP_MAX_TOTAL_MB.  Exit 0, or 1 when RUN_DIR cannot be read or is\n"
          "refused.\n",
          f);
}

int cmd_recover(int argc, char **argv)
{
    static const struct option options[] = {{"dump-dir", required_argument, NULL, 'd'}, {0}};
    verb_args a = {.verb = "recover", .usage = usage, .longopts = options};
    const char *dir = NULL, *dump_dir = NULL;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c != 'd')
            return VERB_EXIT(c);
        dump_dir = optarg;
    }
    int n = verb_operands(&a, argc, 0, 1);
    if (n < 0)
        return EXIT_USAGE;
    if (n)
        dir = argv[optind];
    char path[4096], why[128];
    static gmp_config cfg;
    gmp_config_from_env(&cfg);
    if (!dir) {
        gmp_run_dir_path(&cfg, path, sizeof path);
        dir = path;
    }
    int fd = gmp_run_dir_open(dir, why, sizeof why);
    if (fd < 0) {
        fputs("gmp-inspect recover: refusing ", stderr);
        print_clean(stderr, dir, 512);
        fprintf(stderr, ": %s\n", why);
        return EXIT_INVALID;
    }
    close(fd);
    gmp_recover_options opt = {
        .dump_dir = dump_dir, .max_dumps = cfg.max_dumps, .max_total_mb = cfg.max_total_mb};
    int count = 0;
    /* and the job directories of every gmp-run that is gone (killed, say) */
    if (gmp_rings_recover(dir, &opt, report, &count) < 0 ||
        gmp_job_dirs_sweep(dir, &opt, report, &count) < 0) {
        fputs("gmp-inspect recover: cannot read ", stderr);
        print_clean(stderr, dir, 512);
        fputc('\n', stderr);
        return EXIT_INVALID;
    }
    if (!count)
        printf("no ring of a dead process in %s\n", dir);
    return EXIT_OK;
}
