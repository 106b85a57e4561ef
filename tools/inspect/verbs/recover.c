/*
 * recover.c — `gmp-inspect recover [DIR]`: bundles for processes that died
 * without a word (SIGKILL, the kernel OOM killer), written from the rings
 * they left in the run directory.  The one verb that writes: it goes
 * through the recorder library (gmp_rings_recover), which writes the bundle
 * where the dead process would have and then removes its ring.  Rings of
 * live processes are left alone.
 */
#include "answer.h"
#include "gpumemprof.h"
#include "ring_recovery.h"
#include "rundir.h"
#include "verbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_VICTIMS 64

typedef struct recover_report {
    int count;
    int say; /* --say: one line per bundle on stderr, in the preload's words */
} recover_report;

static void report(const char *bundle_path, int pid, const char *reason, void *arg)
{
    recover_report *r = arg;
    if (r->say) {
        int signame = !strncmp(reason, "SIG", 3);
        fprintf(stderr, "gpumemprof: pid %d %s%s%s%s; bundle: ", pid,
                signame || !strncmp(reason, "killed", 6) ? "was " : "",
                signame ? "killed (" : "", reason, signame ? ")" : "");
        print_clean(stderr, bundle_path, 4096);
        fputc('\n', stderr);
    } else {
        printf("pid %d: %s; bundle: %s\n", pid, reason, bundle_path);
    }
    r->count++;
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect recover [RUN_DIR] [--dump-dir DIR] [--say]\n"
          "                           [--pid PID --signal SIG [--evidence TEXT]]\n"
          "                           [--oom-killed PID@USEC]...\n\n"
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
          "GMP_MAX_TOTAL_MB.\n\n"
          "What a supervisor saw of a death, for the processes it names alone\n"
          "(Slurm's plugin passes them, from what root reads of its own tasks):\n"
          "  --pid PID --signal SIG  PID was reaped, killed by signal SIG\n"
          "  --evidence TEXT         PID's evidence (\"oom_killer: ...\" names the\n"
          "                          kernel's OOM killer), instead of what you may read\n"
          "  --oom-killed PID@USEC   the kernel log says the OOM killer killed PID at\n"
          "                          USEC microseconds since boot (repeatable)\n"
          "  --say                   one line per bundle written on stderr, in the\n"
          "                          preload's words, and nothing else\n"
          "Exit 0, or 1 when RUN_DIR cannot be read or is refused.\n",
          f);
}

/* "PID@USEC" into v; 0, or -1 when it is not that. */
static int parse_victim(const char *text, gmp_oom_victim *v)
{
    char *end;
    errno = 0;
    long pid = strtol(text, &end, 10);
    if (end == text || *end != '@' || pid <= 0 || pid > 1 << 30)
        return -1;
    const char *us = end + 1;
    unsigned long long at = strtoull(us, &end, 10);
    if (end == us || *end || errno || *us == '-')
        return -1;
    *v = (gmp_oom_victim){(int)pid, at};
    return 0;
}

int cmd_recover(int argc, char **argv)
{
    static const struct option options[] = {{"dump-dir", required_argument, NULL, 'd'},
                                            {"pid", required_argument, NULL, 'p'},
                                            {"signal", required_argument, NULL, 's'},
                                            {"evidence", required_argument, NULL, 'e'},
                                            {"oom-killed", required_argument, NULL, 'o'},
                                            {"say", no_argument, NULL, 'S'},
                                            {0}};
    verb_args a = {.verb = "recover", .usage = usage, .longopts = options};
    const char *dir = NULL;
    static gmp_oom_victim victims[MAX_VICTIMS];
    gmp_recover_options opt = {0};
    recover_report said = {0};
    long number;
    char *end;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        switch (c) {
        case 'd':
            opt.dump_dir = optarg;
            break;
        case 'p':
        case 's':
            number = strtol(optarg, &end, 10);
            if (end == optarg || *end || number <= 0 || number > (c == 'p' ? 1 << 30 : 64))
                return VERB_EXIT(verb_misuse(&a, "--%s %.64s is not a %s", c == 'p' ? "pid" : "signal",
                                             optarg, c == 'p' ? "process id" : "signal number"));
            *(c == 'p' ? &opt.pid : &opt.signal) = (int)number;
            break;
        case 'e':
            opt.evidence = optarg;
            break;
        case 'o':
            if (opt.n_oom_victims == MAX_VICTIMS)
                break; /* the first ones: a step's OOM kills past these are rare */
            if (parse_victim(optarg, &victims[opt.n_oom_victims]) < 0)
                return VERB_EXIT(verb_misuse(&a, "--oom-killed %.64s is not PID@USEC", optarg));
            opt.n_oom_victims++;
            break;
        case 'S':
            said.say = 1;
            break;
        default:
            return VERB_EXIT(c);
        }
    }
    if (!opt.pid != !opt.signal)
        return VERB_EXIT(verb_misuse(&a, "--pid and --signal go together"));
    if (opt.evidence && !opt.pid)
        return VERB_EXIT(verb_misuse(&a, "--evidence is of the death --pid names"));
    opt.oom_victims = victims;
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
    opt.max_dumps = cfg.max_dumps;
    opt.max_total_mb = cfg.max_total_mb;
    /* and the job directories of every gmp-run that is gone (killed, say) */
    if (gmp_rings_recover(dir, &opt, report, &said) < 0 ||
        gmp_job_dirs_sweep(dir, &opt, report, &said) < 0) {
        fputs("gmp-inspect recover: cannot read ", stderr);
        print_clean(stderr, dir, 512);
        fputc('\n', stderr);
        return EXIT_INVALID;
    }
    if (!said.count && !said.say)
        printf("no ring of a dead process in %s\n", dir);
    return EXIT_OK;
}
