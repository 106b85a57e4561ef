/*
 * config.c — the recorder's configuration from GMP_* environment variables.
 *
 * The names and defaults follow those of the Python OOM flight recorder
 * this project generalises, so one environment drives both.  A
 * bad value never stops the program: it becomes one stderr line naming the
 * variable and the value used instead.  Reads the environment with getenv
 * only, at start-up, never on an emergency path.
 */
#include "gpumemprof.h"
#include "jsonw.h"
#include "recorder.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GMP_METADATA_MAX_DEPTH 32

/* The defaults that are not zero, onto a zeroed config: a process's
 * static one is set without touching its pages of empty strings (an empty
 * metadata_json is read as "{}", so the static one leaves it empty). */
GMP_START_EXIT_TEXT static void set_nonzero_defaults(gmp_config *cfg)
{
    cfg->enabled = 1;
    memcpy(cfg->dump_dir, "./oom_dumps", sizeof "./oom_dumps"); /* stores, not a read of .rodata */
    cfg->buffer_size = 10000;
    cfg->max_dumps = 5;
    cfg->max_total_mb = 256;
    cfg->host_event_min_bytes = 1 << 20;
    cfg->oom_confirm_ms = 1000;
    cfg->cuda_mode = GMP_CUDA_MODE_AUTO;
    cfg->stacks = 1;
    cfg->on_crash = GMP_ON_CRASH_AFTER_FAILURE;
    cfg->watchdog = 1;
    cfg->watchdog_min_mb = 256;
    cfg->pressure_pct = 90;
    cfg->prom_interval_s = 15;
}

void gmp_config_defaults(gmp_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    set_nonzero_defaults(cfg);
    memcpy(cfg->metadata_json, "{}", 3);
}

/* The index of v in names (n of them), or -1. */
static int one_of(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

/* Every bad value of one reading, said in one stderr line at its end (a
 * program with garbage in all its GMP_ variables gets one line, not
 * twenty).  At most 64 bytes of each value are shown. */
static char complaints[1024];
static int complaint_count;

static void complain(const char *var, const char *value, const char *what,
                     const char *used)
{
    char one[320];
    snprintf(one, sizeof one, "%s='%.64s%s' %s; using %s", var, value,
             strlen(value) > 64 ? "..." : "", what, used);
    if (complaint_count++)
        gmp_strlcat(complaints, "; ", sizeof complaints);
    if (gmp_strlcat(complaints, one, sizeof complaints) < 0)
        memcpy(complaints + sizeof complaints - 4, "...", 4); /* cut, and says so */
}

static int parse_u64(const char *var, const char *s, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    char used[24], range[96];
    const char *p = s;
    while (*p == ' ' || *p == '\t')
        p++;
    errno = 0;
    char *end = NULL;
    unsigned long long v = (*p >= '0' && *p <= '9') ? strtoull(p, &end, 10) : 0;
    int ok = end && end != p && errno == 0 && v >= lo && v <= hi;
    if (ok) {
        while (*end == ' ' || *end == '\t')
            end++;
        ok = *end == '\0';
    }
    if (ok) {
        *out = v;
        return 0;
    }
    gmp_fmt_u64(*out, used);
    char lo_s[24], hi_s[24];
    gmp_fmt_u64(lo, lo_s);
    gmp_fmt_u64(hi, hi_s);
    gmp_strlcpy(range, "is not a whole number from ", sizeof range);
    gmp_strlcat(range, lo_s, sizeof range);
    gmp_strlcat(range, " to ", sizeof range);
    gmp_strlcat(range, hi_s, sizeof range);
    complain(var, s, range, used);
    return -1;
}

static int parse_bool(const char *var, const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return 0;
        }
    }
    complain(var, s, "is not one of 1/0/true/false/yes/no/on/off",
             *out ? "1" : "0");
    return -1;
}

static int parse_string(const char *var, const char *s, char *dst, size_t cap,
                        int allow_empty)
{
    if ((!allow_empty && !*s) || strlen(s) >= cap) {
        complain(var, s, *s ? "is too long" : "is empty", *dst ? dst : "\"\"");
        return -1;
    }
    gmp_strlcpy(dst, s, cap);
    return 0;
}

static int parse_environment(gmp_config *cfg);

int gmp_config_from_env(gmp_config *cfg)
{
    gmp_config_defaults(cfg);
    return parse_environment(cfg);
}

/* Any GMP_ variable at all?  Most processes have none: one pass over the
 * environment instead of a getenv for each. */
GMP_START_EXIT_TEXT static int any_gmp_variable(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        if ((*e)[0] == 'G' && !strncmp(*e, "GMP_", 4))
            return 1;
    return 0;
}

GMP_START_EXIT_TEXT int gmp_config_from_env_onto_zero(gmp_config *cfg)
{
    set_nonzero_defaults(cfg);
    return any_gmp_variable() ? parse_environment(cfg) : 0;
}

static int parse_environment(gmp_config *cfg)
{
    complaints[0] = '\0';
    complaint_count = 0;
    int bad = 0;
    const char *v;
    uint64_t n;

    if ((v = getenv("GMP_ENABLED")))
        bad += parse_bool("GMP_ENABLED", v, &cfg->enabled) < 0;
    if ((v = getenv("GMP_DUMP_DIR")))
        bad += parse_string("GMP_DUMP_DIR", v, cfg->dump_dir,
                            sizeof cfg->dump_dir - 128, 0) < 0;
    if ((v = getenv("GMP_RUN_DIR")))
        bad += parse_string("GMP_RUN_DIR", v, cfg->run_dir,
                            sizeof cfg->run_dir - 128, 0) < 0;
    if ((v = getenv("GMP_PROM_FILE")))
        bad += parse_string("GMP_PROM_FILE", v, cfg->prom_file, sizeof cfg->prom_file - 64,
                            1) < 0;
    if ((v = getenv("GMP_PROM_INTERVAL_S"))) {
        n = cfg->prom_interval_s;
        bad += parse_u64("GMP_PROM_INTERVAL_S", v, 1, 3600, &n) < 0;
        cfg->prom_interval_s = (uint32_t)n;
    }
    if ((v = getenv("GMP_BUFFER_SIZE"))) {
        n = cfg->buffer_size;
        bad += parse_u64("GMP_BUFFER_SIZE", v, 16, 1u << 24, &n) < 0;
        cfg->buffer_size = (uint32_t)n;
    }
    if ((v = getenv("GMP_MAX_DUMPS"))) {
        n = cfg->max_dumps;
        bad += parse_u64("GMP_MAX_DUMPS", v, 1, 1000000, &n) < 0;
        cfg->max_dumps = (uint32_t)n;
    }
    if ((v = getenv("GMP_MAX_TOTAL_MB"))) {
        n = cfg->max_total_mb;
        bad += parse_u64("GMP_MAX_TOTAL_MB", v, 1, 1ull << 40, &n) < 0;
        cfg->max_total_mb = n;
    }
    if ((v = getenv("GMP_CONTEXT")))
        bad += parse_string("GMP_CONTEXT", v, cfg->context, sizeof cfg->context,
                            1) < 0;
    if ((v = getenv("GMP_HOST_EVENT_MIN_BYTES"))) {
        n = cfg->host_event_min_bytes;
        bad += parse_u64("GMP_HOST_EVENT_MIN_BYTES", v, 0, 1ull << 50, &n) < 0;
        cfg->host_event_min_bytes = n;
    }
    if ((v = getenv("GMP_OOM_CONFIRM_MS"))) {
        n = cfg->oom_confirm_ms;
        bad += parse_u64("GMP_OOM_CONFIRM_MS", v, 0, 3600000, &n) < 0;
        cfg->oom_confirm_ms = (uint32_t)n;
    }
    if ((v = getenv("GMP_OOM_POLICY"))) {
        if (!strcmp(v, "first") || !strcmp(v, "episode")) {
            cfg->oom_policy_first = !strcmp(v, "first");
        } else {
            complain("GMP_OOM_POLICY", v, "is not first or episode", "episode");
            bad++;
        }
    }
    if ((v = getenv("GMP_CUDA_MODE"))) {
        static const char *const modes[] = {"auto", "interpose", "cupti"};
        int found = one_of(v, modes, 3);
        if (found >= 0) {
            cfg->cuda_mode = (gmp_cuda_mode)found;
        } else {
            complain("GMP_CUDA_MODE", v, "is not auto, interpose or cupti", "auto");
            bad++;
        }
    }
    if ((v = getenv("GMP_STACKS")))
        bad += parse_bool("GMP_STACKS", v, &cfg->stacks) < 0;
    if ((v = getenv("GMP_WATCHDOG")))
        bad += parse_bool("GMP_WATCHDOG", v, &cfg->watchdog) < 0;
    if ((v = getenv("GMP_LEAK_CHECK")))
        bad += parse_bool("GMP_LEAK_CHECK", v, &cfg->leak_check) < 0;
    if ((v = getenv("GMP_SAMPLE_MS"))) {
        n = cfg->sample_ms;
        bad += parse_u64("GMP_SAMPLE_MS", v, 0, 3600000, &n) < 0;
        cfg->sample_ms = (uint32_t)n;
    }
    if ((v = getenv("GMP_NVML"))) {
        static const char *const modes[] = {"auto", "load", "off"};
        int found = one_of(v, modes, 3);
        if (found >= 0) {
            cfg->nvml = (gmp_nvml_mode)found;
        } else {
            complain("GMP_NVML", v, "is not auto, load or off", "auto");
            bad++;
        }
    }
    if ((v = getenv("GMP_WATCHDOG_MIN_MB"))) {
        n = cfg->watchdog_min_mb;
        bad += parse_u64("GMP_WATCHDOG_MIN_MB", v, 0, 1ull << 30, &n) < 0;
        cfg->watchdog_min_mb = n;
    }
    if ((v = getenv("GMP_PRESSURE_PCT"))) {
        n = cfg->pressure_pct;
        bad += parse_u64("GMP_PRESSURE_PCT", v, 1, 100, &n) < 0;
        cfg->pressure_pct = (uint32_t)n;
    }
    if ((v = getenv("GMP_ON_CRASH"))) {
        static const char *const modes[] = {"after-failure", "always", "never"};
        int found = one_of(v, modes, 3);
        if (found >= 0) {
            cfg->on_crash = (gmp_on_crash)found;
        } else {
            complain("GMP_ON_CRASH", v, "is not after-failure, always or never",
                     "after-failure");
            bad++;
        }
    }
    if ((v = getenv("GMP_METADATA"))) {
        size_t len = strlen(v);
        if (len >= sizeof cfg->metadata_json) {
            complain("GMP_METADATA", v, "is longer than 8191 bytes", "{}");
            bad++;
        } else if (gmp_json_check_object(v, len, GMP_METADATA_MAX_DEPTH) < 0) {
            complain("GMP_METADATA", v, "is not a JSON object", "{}");
            bad++;
        } else {
            gmp_strlcpy(cfg->metadata_json, v, sizeof cfg->metadata_json);
        }
    }
    if (complaint_count)
        gmp_log("%s", complaints);
    return bad;
}
