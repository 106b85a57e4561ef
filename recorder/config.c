/*
 * config.c — the recorder's configuration from GMP_* environment variables.
 *
 * The names and defaults follow those of the Python OOM flight recorder
 * this project generalises, so one environment drives both.  A
 * bad value never stops the program: it becomes one stderr line naming the
 * variable and the value used instead.  Reads the environment in one pass
 * over environ, at start-up, never on an emergency path.
 *
 * Each option is one line of GMP_OPTIONS: its field, name, default, range
 * or choices, and the user guide's words for it.  The defaults, the parser, its
 * complaints and the user guide's table of variables (gmp_config_doc_table,
 * which test_config holds against docs/user-guide.md) all come from that line.
 */
#include "gpumemprof.h"
#include "bundle.h"
#include "jsonw.h"
#include "recorder.h"
#include "redact.h"
#include "start_path.h"
#include "util.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GMP_METADATA_MAX_DEPTH 32

/* One line an option, in the user guide's order:
 *   BOOL(field, name, default, doc)
 *   NUM(field, name, default, low, high, doc)          uint32_t or uint64_t field
 *   TEXT(field, name, default, room, may_be_empty, default_doc, doc)
 *        (room: bytes of the field kept free for what is appended to it)
 *   CHOICE(field, name, "first|second|...", doc)       the field is the index;
 *        the first choice is the default
 *   JSON(field, name, doc)                             a JSON object, default {} */
#define GMP_OPTIONS(BOOL, NUM, TEXT, CHOICE, JSON)                                               \
    BOOL(enabled, "GMP_ENABLED", 1, "`0`/`false`/`no`/`off` records and writes nothing")         \
    TEXT(dump_dir, "GMP_DUMP_DIR", "./oom_dumps", 128, 0, "`./oom_dumps`",                        \
         "where bundles go (made absolute at start, created on the first bundle; when it "       \
         "cannot be had, `$HOME/oom_dumps`, said in one line)")                                  \
    NUM(buffer_size, "GMP_BUFFER_SIZE", 10000, 16, 1u << 24, "events kept in the ring")          \
    NUM(max_dumps, "GMP_MAX_DUMPS", 5, 1, 1000000,                                               \
        "bundles kept in the dump directory (unset: at least LOCAL_WORLD_SIZE)")                  \
    NUM(max_total_mb, "GMP_MAX_TOTAL_MB", 256, 1, 1ull << 40,                                    \
        "total size kept in the dump directory, in MiB")                                        \
    TEXT(context, "GMP_CONTEXT", "", 0, 1, "(empty)",                                            \
         "free text stored as `context` (e.g. `training`)")                                      \
    JSON(metadata_json, "GMP_METADATA",                                                          \
         "a JSON object stored as `custom_metadata` (≤ 8 KiB, checked strictly)")                \
    TEXT(run_dir, "GMP_RUN_DIR", "", 128, 0,                                                     \
         "`$XDG_RUNTIME_DIR/gpumemprof`, else `/tmp/gpumemprof-<uid>` (`$HOME/.gpumemprof-run` "  \
         "when another user made that first)",                                                   \
         "where live rings live (docs/architecture.md)")                                         \
    NUM(host_event_min_bytes, "GMP_HOST_EVENT_MIN_BYTES", 1 << 20, 0, 1ull << 50,                \
        "host allocations and frees of at least this size become events; failures always do")  \
    NUM(oom_confirm_ms, "GMP_OOM_CONFIRM_MS", 1000, 0, 3600000,                                  \
        "an episode still open after this long is written, as `timeout`")                          \
    CHOICE(oom_policy_first, "GMP_OOM_POLICY", "episode|first",                                  \
           "`first` writes a bundle at every failure, without waiting for confirmation")         \
    CHOICE(cuda_mode, "GMP_CUDA_MODE", "auto|interpose|cupti",                                   \
           "which path records CUDA (docs/architecture.md)")                                     \
    BOOL(stacks, "GMP_STACKS", 1, "`0`: no native stack per device (and large host) allocation") \
    CHOICE(on_crash, "GMP_ON_CRASH", "after-failure|always|never",                               \
           "when a fatal signal writes a bundle")                                                \
    BOOL(watchdog, "GMP_WATCHDOG", 1, "`0` turns the memory-pressure watchdog off")              \
    NUM(watchdog_min_mb, "GMP_WATCHDOG_MIN_MB", 256, 0, 1ull << 30,                              \
        "heap in use, in MiB, from which the allocating thread checks for pressure; any GPU "    \
        "memory does too")                                                                      \
    NUM(pressure_pct, "GMP_PRESSURE_PCT", 90, 1, 100,                                            \
        "usage of the nearest limit, in percent, that writes a `memory_pressure` bundle")        \
    TEXT(prom_file, "GMP_PROM_FILE", "", 64, 1, "(none)",                                        \
         "a Prometheus textfile to rewrite (`%p` = pid)")                                        \
    NUM(prom_interval_s, "GMP_PROM_INTERVAL_S", 15, 1, 3600, "how often, in seconds")            \
    BOOL(leak_check, "GMP_LEAK_CHECK", 0, "`1`: a leak report at exit of the GPU allocations "   \
                                          "never freed")                                        \
    NUM(sample_ms, "GMP_SAMPLE_MS", 0, 0, 3600000,                                               \
        "> 0: a `sample` event per device and the host every N ms")                             \
    CHOICE(nvml, "GMP_NVML", "auto|load|off",                                                    \
           "`auto`: NVML when the program loaded it; `load`: the preload loads it (other "       \
           "processes' usage in every CUDA bundle); `off`")

#define IGNORE(...)

/* The defaults that are not zero, onto a zeroed config, as stores: a
 * process's static one is set without touching its pages of empty strings
 * or reading a table (an empty metadata_json is read as "{}", so the static
 * one leaves it empty). */
/* Each default through a register the compiler cannot see into: it would
 * merge neighbouring ones into constants in .rodata, a read of a page the
 * start touches nowhere else. */
#define SET_BOOL(field, name, def, doc)                                                          \
    if ((def) != 0) {                                                                            \
        __typeof__(cfg->field) value = (def);                                                    \
        __asm__("" : "+r"(value));                                                               \
        cfg->field = value;                                                                      \
    }
#define SET_NUM(field, name, def, lo, hi, doc) SET_BOOL(field, name, def, doc)
#define SET_TEXT(field, name, def, room, empty, def_doc, doc)                                    \
    if (sizeof def > 1) /* an empty one's page is not touched */                                 \
        memcpy(cfg->field, def, sizeof def); /* stores, not a read of .rodata */
GMP_START_EXIT_TEXT static void set_nonzero_defaults(gmp_config *cfg)
{
    GMP_OPTIONS(SET_BOOL, SET_NUM, SET_TEXT, IGNORE, IGNORE)
}

void gmp_config_defaults(gmp_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    set_nonzero_defaults(cfg);
    memcpy(cfg->metadata_json, "{}", 3);
}

/* Every bad value of one reading, said in one stderr line at its end (a
 * program with garbage in all its GMP_ variables gets one line, not
 * twenty).  At most 64 bytes of each value are shown. */
static char complaints[1024];
/* read by every process gmp-run starts (it sets GMP_RUN_DIR): its page is
 * the loader's, and complaints' is touched only when there is one */
static int complaint_count GMP_STARTUP_DATA;

GMP_START_EXIT_TEXT static void forget_complaints(void)
{
    if (complaint_count) {
        complaints[0] = '\0';
        complaint_count = 0;
    }
}

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

GMP_START_EXIT_TEXT static int parse_string(const char *var, const char *s, char *dst,
                                            size_t cap, int allow_empty)
{
    /* counted here: every process under gmp-run comes here for GMP_RUN_DIR,
     * and strnlen was a lazy binding at its start */
    size_t len = 0;
    while (len < cap && s[len])
        len++;
    if ((!allow_empty && !*s) || len >= cap) {
        complain(var, s, *s ? "is too long" : "is empty", *dst ? dst : "\"\"");
        return -1;
    }
    gmp_strlcpy(dst, s, cap);
    return 0;
}

/* "a, b or c" from "a|b|c", each word between quote and quote, appended
 * to out: a complaint's words and the user guide's are the same list. */
static void append_choices(const char *choices, const char *quote, char *out, size_t cap)
{
    int count = 1;
    for (const char *c = choices; *c; c++)
        count += *c == '|';
    const char *c = choices;
    for (int i = 0; i < count; i++) {
        char word[48];
        size_t n = strcspn(c, "|");
        snprintf(word, sizeof word, "%s%s%.*s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ",
                 quote, (int)n, c, quote);
        gmp_strlcat(out, word, cap);
        c += n + 1;
    }
}

/* choices: "a|b|c"; *out becomes the index of s among them. */
static int parse_choice(const char *var, const char *s, const char *choices, int *out)
{
    int index = 0;
    for (const char *c = choices; *c; index++) {
        size_t n = strcspn(c, "|");
        if (n == strlen(s) && !strncmp(c, s, n)) {
            *out = index;
            return 0;
        }
        c += n + (c[n] == '|');
    }
    /* "is not after-failure, always or never; using after-failure" */
    char what[128] = "is not ", first[32];
    append_choices(choices, "", what, sizeof what);
    snprintf(first, sizeof first, "%.*s", (int)strcspn(choices, "|"), choices);
    complain(var, s, what, first);
    return -1;
}

static int parse_json(const char *var, const char *s, char *dst, size_t cap)
{
    size_t len = strlen(s);
    if (len >= cap) {
        complain(var, s, "is longer than 8191 bytes", "{}");
        return -1;
    }
    if (gmp_json_check_object(s, len, GMP_METADATA_MAX_DEPTH) < 0) {
        complain(var, s, "is not a JSON object", "{}");
        return -1;
    }
    gmp_strlcpy(dst, s, cap);
    return 0;
}

/* Each option's place among the values one pass over the environment
 * found (environment_options). */
#define OPTION_INDEX(field, ...) OPTION_##field,
enum { GMP_OPTIONS(OPTION_INDEX, OPTION_INDEX, OPTION_INDEX, OPTION_INDEX, OPTION_INDEX)
           OPTION_COUNT };
#undef OPTION_INDEX

/* What one pass over the environment found: each option's value (the first
 * of its name, as getenv would give it) and LOCAL_WORLD_SIZE's. */
typedef struct environment_options {
    const char *value[OPTION_COUNT];
    const char *local_world_size;
    int any; /* a GMP_ variable, named here or not */
} environment_options;

/* The names read_environment looks for, '=' included (GMP_WATCHDOG is not
 * GMP_WATCHDOG_MIN_MB's prefix), beside the start's text: as literals they
 * were in .rodata, and comparing the first one faulted 64 KB of it in. */
#define NAME_ROOM(field, name, ...) char field[sizeof name + 1];
#define NAME_TEXT(field, name, ...) .field = name "=",
static const struct start_names {
    char local_world_size[sizeof "LOCAL_WORLD_SIZE="];
    char gmp[sizeof "GMP_"];
    GMP_OPTIONS(NAME_ROOM, NAME_ROOM, NAME_ROOM, NAME_ROOM, NAME_ROOM)
} start_names GMP_START_EXIT_RODATA = {
    .local_world_size = "LOCAL_WORLD_SIZE=",
    .gmp = "GMP_",
    GMP_OPTIONS(NAME_TEXT, NAME_TEXT, NAME_TEXT, NAME_TEXT, NAME_TEXT)};
#undef NAME_ROOM
#undef NAME_TEXT

/* "NAME=value" against one name. */
#define FIND(field, ...)                                                                         \
    if (!found->value[OPTION_##field] && gmp_start_begins(entry, start_names.field)) {           \
        found->value[OPTION_##field] = entry + sizeof start_names.field - 1;                     \
        continue;                                                                                \
    }

/* One pass, where a getenv of each option would be two dozen: every process
 * the preload is loaded into reads them at its start (every one under
 * gmp-run has GMP_RUN_DIR), in an environment of a hundred variables on a
 * cluster. */
GMP_START_EXIT_TEXT static void read_environment(environment_options *found)
{
    extern char **environ;
    memset(found, 0, sizeof *found);
    for (char **e = environ; e && *e; e++) {
        const char *entry = *e;
        if (entry[0] == 'L' && !found->local_world_size &&
            gmp_start_begins(entry, start_names.local_world_size)) {
            found->local_world_size = entry + sizeof start_names.local_world_size - 1;
            continue;
        }
        if (entry[0] != 'G' || !gmp_start_begins(entry, start_names.gmp))
            continue;
        found->any = 1;
        GMP_OPTIONS(FIND, FIND, FIND, FIND, FIND)
    }
}
#undef FIND

/* A node's ranks share its dump directory, and when one runs out they all
 * end: unless GMP_MAX_DUMPS says otherwise, room for a bundle of each
 * (torchrun's LOCAL_WORLD_SIZE), so the node's first is not pruned by the
 * ranks that followed it. */
GMP_START_EXIT_TEXT static void keep_a_node_of_ranks(gmp_config *cfg,
                                                     const environment_options *found)
{
    const char *ranks = found->local_world_size;
    if (!ranks || found->value[OPTION_max_dumps])
        return;
    long n = gmp_decimal(ranks, strlen(ranks), 6);
    if (n > (long)cfg->max_dumps)
        cfg->max_dumps = (uint32_t)n;
}

static int parse_environment(gmp_config *cfg, const environment_options *found);

int gmp_config_from_env(gmp_config *cfg)
{
    environment_options found;
    read_environment(&found);
    gmp_config_defaults(cfg);
    int bad = parse_environment(cfg, &found);
    keep_a_node_of_ranks(cfg, &found);
    return bad;
}

/* GMP_RUN_DIR into held when it fits there (and is not empty, which is
 * parse_string's to refuse): 1 when it went there. */
GMP_START_EXIT_TEXT static int hold_run_dir(const char *v, char *held, size_t cap)
{
    size_t len = 0;
    while (v && len < cap && v[len])
        len++;
    if (!v || !len || len >= cap)
        return 0;
    gmp_strlcpy(held, v, cap);
    return 1;
}

GMP_START_EXIT_TEXT int gmp_config_from_env_onto_zero(gmp_config *cfg, char *run_dir_held,
                                                      size_t held_cap)
{
    environment_options found;
    read_environment(&found);
    set_nonzero_defaults(cfg);
    if (hold_run_dir(found.value[OPTION_run_dir], run_dir_held, held_cap))
        found.value[OPTION_run_dir] = NULL; /* cfg->run_dir stays "" */
    int bad = found.any ? parse_environment(cfg, &found) : 0;
    keep_a_node_of_ranks(cfg, &found);
    return bad;
}

#define PARSE_BOOL(field, name, def, doc)                                                        \
    if ((v = found->value[OPTION_##field]))                                                      \
        bad += parse_bool(name, v, &cfg->field) < 0;
#define PARSE_NUM(field, name, def, lo, hi, doc)                                                 \
    if ((v = found->value[OPTION_##field])) {                                                    \
        uint64_t n = cfg->field;                                                                 \
        bad += parse_u64(name, v, lo, hi, &n) < 0;                                               \
        cfg->field = (__typeof__(cfg->field))n;                                                  \
    }
#define PARSE_TEXT(field, name, def, room, empty, def_doc, doc)                                  \
    if ((v = found->value[OPTION_##field]))                                                      \
        bad += parse_string(name, v, cfg->field, sizeof cfg->field - (room), empty) < 0;
#define PARSE_CHOICE(field, name, choices, doc)                                                  \
    if ((v = found->value[OPTION_##field])) {                                                    \
        int index = (int)cfg->field;                                                             \
        bad += parse_choice(name, v, choices, &index) < 0;                                       \
        cfg->field = (__typeof__(cfg->field))index;                                              \
    }
#define PARSE_JSON(field, name, doc)                                                             \
    if ((v = found->value[OPTION_##field]))                                                      \
        bad += parse_json(name, v, cfg->field, sizeof cfg->field) < 0;

/* Under gmp-run every process has GMP_RUN_DIR: what it parses then is on
 * the start-up text, and the fields of what is not set are not read. */
GMP_START_EXIT_TEXT static int parse_environment(gmp_config *cfg,
                                                 const environment_options *found)
{
    forget_complaints();
    int bad = 0;
    const char *v;
    GMP_OPTIONS(PARSE_BOOL, PARSE_NUM, PARSE_TEXT, PARSE_CHOICE, PARSE_JSON)
    if (complaint_count)
        gmp_log("%s", complaints);
    /* the credentials environment.json masks in these variables are masked
     * wherever their values go (metadata.json's context and custom_metadata) */
    if (found->value[OPTION_context])
        gmp_redact_text(cfg->context, strlen(cfg->context));
    if (!found->value[OPTION_metadata_json])
        return bad;
    gmp_redact_text(cfg->metadata_json, strlen(cfg->metadata_json));
    if (cfg->metadata_json[0] && /* "" is read as {} */
        gmp_json_check_object(cfg->metadata_json, strlen(cfg->metadata_json), 32) != 0) {
        gmp_log("GMP_METADATA: masking a credential in it left no JSON object; using {}");
        memcpy(cfg->metadata_json, "{}", 3);
    }
    return bad;
}

/* One option by its variable's name, as if the environment said it: for a
 * binding (the Python package) that has no environment to give. */
#define SET_ONE_BOOL(field, name, def, doc)                                                      \
    if (!strcmp(variable, name))                                                                 \
        return parse_bool(name, value, &cfg->field) < 0 ? -1 : 0;
#define SET_ONE_NUM(field, name, def, lo, hi, doc)                                               \
    if (!strcmp(variable, name)) {                                                               \
        uint64_t n = cfg->field;                                                                 \
        int bad = parse_u64(name, value, lo, hi, &n) < 0;                                        \
        cfg->field = (__typeof__(cfg->field))n;                                                  \
        return bad ? -1 : 0;                                                                     \
    }
#define SET_ONE_TEXT(field, name, def, room, empty, def_doc, doc)                                \
    if (!strcmp(variable, name))                                                                 \
        return parse_string(name, value, cfg->field, sizeof cfg->field - (room), empty) < 0 ? -1 \
                                                                                            : 0;
#define SET_ONE_CHOICE(field, name, choices, doc)                                                \
    if (!strcmp(variable, name)) {                                                               \
        int index = (int)cfg->field;                                                             \
        int bad = parse_choice(name, value, choices, &index) < 0;                                \
        cfg->field = (__typeof__(cfg->field))index;                                              \
        return bad ? -1 : 0;                                                                     \
    }
#define SET_ONE_JSON(field, name, doc)                                                           \
    if (!strcmp(variable, name))                                                                 \
        return parse_json(name, value, cfg->field, sizeof cfg->field) < 0 ? -1 : 0;

static int set_one(gmp_config *cfg, const char *variable, const char *value)
{
    GMP_OPTIONS(SET_ONE_BOOL, SET_ONE_NUM, SET_ONE_TEXT, SET_ONE_CHOICE, SET_ONE_JSON)
    complain(variable, value, "is not a setting", "nothing");
    return -1;
}

int gmp_config_set(gmp_config *cfg, const char *variable, const char *value)
{
    if (!cfg || !variable || !value)
        return -1;
    forget_complaints();
    int rc = set_one(cfg, variable, value);
    if (complaint_count)
        gmp_log("%s", complaints);
    return rc;
}

gmp_config *gmp_config_new(void)
{
    gmp_config *cfg = malloc(sizeof *cfg);
    if (cfg)
        gmp_config_defaults(cfg);
    return cfg;
}

void gmp_config_free(gmp_config *cfg)
{
    free(cfg);
}

/* The user guide's table of variables: one row an option. */
#define ROW(name, def_doc, range, doc)                                                           \
    n += snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0, "| `%s` | %s | %s%s |\n",   \
                  name, def_doc, doc, range);
#define ROW_BOOL(field, name, def, doc) ROW(name, def ? "`1`" : "`0`", "", doc)
#define ROW_NUM(field, name, def, lo, hi, doc)                                                   \
    {                                                                                            \
        char def_s[32], range[96], lo_s[24], hi_s[24];                                           \
        gmp_fmt_u64(def, lo_s);                                                                  \
        snprintf(def_s, sizeof def_s, "`%s`", lo_s);                                             \
        gmp_fmt_u64(lo, lo_s);                                                                   \
        gmp_fmt_u64(hi, hi_s);                                                                   \
        snprintf(range, sizeof range, " (%s … %s)", lo_s, hi_s);                                \
        ROW(name, def_s, range, doc)                                                             \
    }
#define ROW_TEXT(field, name, def, room, empty, def_doc, doc) ROW(name, def_doc, "", doc)
#define ROW_CHOICE(field, name, choices, doc)                                                    \
    {                                                                                            \
        char def_s[40], range[160];                                                              \
        snprintf(def_s, sizeof def_s, "`%.*s`", (int)strcspn(choices, "|"), choices);           \
        choices_doc(choices, range, sizeof range);                                               \
        ROW(name, def_s, range, doc)                                                             \
    }
#define ROW_JSON(field, name, doc) ROW(name, "`{}`", "", doc)

/* " (one of `a`, `b` or `c`)" from "a|b|c" (a table cell holds no '|'). */
static void choices_doc(const char *choices, char *out, size_t cap)
{
    gmp_strlcpy(out, " (one of ", cap);
    append_choices(choices, "`", out, cap);
    gmp_strlcat(out, ")", cap);
}

size_t gmp_config_doc_table(char *out, size_t cap)
{
    size_t n = 0;
    n += snprintf(out, cap, "| variable | default | meaning |\n| --- | --- | --- |\n");
    GMP_OPTIONS(ROW_BOOL, ROW_NUM, ROW_TEXT, ROW_CHOICE, ROW_JSON)
    return n;
}
