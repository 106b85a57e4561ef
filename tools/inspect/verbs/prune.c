/*
 * prune.c — `gmp-inspect prune DIR [--max-dumps N] [--max-total-mb M]`:
 * the recorder's retention rules (gmp_retention_apply) applied by hand, as
 * a cron job or a CI step would: oldest bundles first, never a foreign file
 * or a symlink.
 */
#include "gpumemprof.h"
#include "answer.h"
#include "verbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect prune DIR [--max-dumps N] [--max-total-mb M]\n"
          "Keep at most N bundles and M MiB in DIR (defaults: GMP_MAX_DUMPS and\n"
          "GMP_MAX_TOTAL_MB, else 5 and 256), removing the oldest first, as the\n"
          "recorder does after each bundle.  Only oom_dump_* directories are ever\n"
          "removed, never a symlink or a foreign file.\n"
          "Exit status: 0, 1 when DIR cannot be pruned, 2 usage error.\n",
          f);
}

static int parse_count(const char *s, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || end == s || s[0] == '-' || v == 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

int cmd_prune(int argc, char **argv)
{
    static const struct option options[] = {{"max-dumps", required_argument, NULL, 'd'},
                                            {"max-total-mb", required_argument, NULL, 'm'},
                                            {0}};
    verb_args a = {.verb = "prune", .usage = usage, .longopts = options};
    gmp_config cfg;
    gmp_config_from_env(&cfg);
    uint64_t dumps = cfg.max_dumps, mb = cfg.max_total_mb;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == 'd' && parse_count(optarg, 1000000, &dumps) < 0)
            return VERB_EXIT(verb_misuse(&a, "--max-dumps wants a whole number > 0"));
        else if (c == 'm' && parse_count(optarg, 1ull << 40, &mb) < 0)
            return VERB_EXIT(verb_misuse(&a, "--max-total-mb wants a whole number > 0"));
        else if (c != 'd' && c != 'm')
            return VERB_EXIT(c);
    }
    if (verb_operands(&a, argc, 1, 1) < 0)
        return EXIT_USAGE;
    const char *dir = argv[optind];
    int removed = gmp_retention_apply(dir, (uint32_t)dumps, mb, NULL);
    if (removed < 0) {
        fprintf(stderr, "gmp-inspect prune: cannot prune %s\n", dir);
        return EXIT_INVALID;
    }
    printf("removed %d bundle(s) from %s\n", removed, dir);
    return EXIT_OK;
}
