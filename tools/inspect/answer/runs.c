/*
 * runs.c — the bundles of one distributed run told as one story.  When one
 * rank of a torchrun, torch.multiprocessing.spawn or Slurm step runs out,
 * the others die within a second of it (a closed connection, then the
 * launcher's SIGTERM), and a directory holds a bundle per rank that died
 * with a failure open: the question is which rank ran out first, of what,
 * where, and what followed.
 *
 * A bundle belongs to a run by what its process was started with (read.h's
 * bundle_run): torchrun's run id and restart count (the same on every
 * node), else the Slurm step, else the launcher process that started it
 * (its pid and start on its host, with the rendezvous where one is named):
 * a rank, a world size, a rendezvous or multiprocessing's spawn says it is
 * one of several.  A bundle with none of these is a process on its own and
 * no run's; so is a pool's worker whose failure the pool's loop caught
 * (caught_by): the rank or program that raised it again tells that
 * failure, and the pool is the program's, not a run.
 *
 * Per run this keeps the first death of memory in full (its words, site
 * and bundle) and, per member, only what the verdict sorts and counts: a
 * rank, a time, a kind, a signal.  So 100,000 bundles cost a few MiB here.
 */
#include "answer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A number the environment gave ("3"), or -1. */
static long number_or_none(const char *s)
{
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

/* The title of a torchrun run or a Slurm step from its key alone
 * ("torchrun|ID|RESTART", "slurm|JOB.STEP"): "torchrun run ID (restart
 * 1)", "Slurm step JOB.STEP"; 0 for a key of another kind. */
static int title_of_key(const char *key, char *title, size_t title_cap)
{
    if (!strncmp(key, "slurm|", 6)) {
        snprintf(title, title_cap, "Slurm step %.100s", key + 6);
        return 1;
    }
    if (strncmp(key, "torchrun|", 9))
        return 0;
    const char *restart = strrchr(key + 9, '|'); /* none in a key cut short */
    int id_len = restart ? (int)(restart - (key + 9)) : (int)strlen(key + 9);
    restart = restart ? restart + 1 : "0";
    int again = strcmp(restart, "0") != 0;
    snprintf(title, title_cap, "torchrun run %.*s%s%.12s%s", id_len < 80 ? id_len : 80, key + 9,
             again ? " (restart " : "", again ? restart : "", again ? ")" : "");
    return 1;
}

/* The run b belongs to by the variables it recorded: its key (as the
 * writer's gmp_run_key makes it, for bundles written before manifests named
 * their run) and its title; 0 when it is in none. */
static int run_named_by(bundle *b, char *key, size_t key_cap, char *title, size_t title_cap)
{
    const bundle_run *r = bundle_run_of(b);
    const char *host = r->host ? r->host : "?";
    if (r->run_id && *r->run_id && strcmp(r->run_id, "none")) {
        snprintf(key, key_cap, "torchrun|%s|%s", r->run_id, r->restart ? r->restart : "0");
        return title_of_key(key, title, title_cap);
    }
    if (r->job) {
        snprintf(key, key_cap, "slurm|%s", r->job);
        return title_of_key(key, title, title_cap);
    }
    int ranked = r->rank || r->world_size || r->master_addr || r->multiprocessing;
    if (!ranked || !r->launcher)
        return 0;
    char launcher_pid[24];
    snprintf(launcher_pid, sizeof launcher_pid, "%.*s", (int)strcspn(r->launcher, ":"),
             r->launcher);
    snprintf(key, key_cap, "launcher|%.100s|%.60s|%.100s:%.20s", host, r->launcher,
             r->master_addr ? r->master_addr : "", r->master_port ? r->master_port : "");
    if (r->master_addr) /* torchrun's run id is "none" where no --rdzv-id was given */
        snprintf(title, title_cap, "%srun at rendezvous %.60s:%.12s (launcher pid %s)",
                 r->run_id ? "torchrun " : "", r->master_addr,
                 r->master_port ? r->master_port : "?", launcher_pid);
    else
        snprintf(title, title_cap, "%s run of launcher pid %s",
                 r->multiprocessing ? "multiprocessing" : "a", launcher_pid);
    return 1;
}

/* The run b belongs to: the manifest's "run" where the writer named it,
 * else the one its variables name; 0 when it is in none. */
static int run_of(bundle *b, char *key, size_t key_cap, char *title, size_t title_cap)
{
    if (json_is_string(json_object_get(b->metadata, "caught_by")))
        return 0; /* a pool's worker, its rank's helper (see above) */
    const char *written = jstr(b->manifest, "run");
    if (written && *written && title_of_key(written, title, title_cap)) {
        snprintf(key, key_cap, "%s", written);
        return 1; /* environment.json not asked: triage of many bundles */
    }
    int named = run_named_by(b, key, key_cap, title, title_cap);
    if (written && *written) {
        if (!named)
            snprintf(title, title_cap, "run %.180s", written);
        snprintf(key, key_cap, "%s", written);
        return 1;
    }
    return named;
}

int run_key_of(bundle *b, char key[RUN_KEY_SIZE])
{
    char title[200];
    if (!run_of(b, key, RUN_KEY_SIZE, title, sizeof title))
        key[0] = '\0';
    return key[0] != '\0';
}

/* The key being looked for, for index_find's callbacks. */
typedef struct run_lookup {
    const run_set *s;
    const char *key;
} run_lookup;

static int run_is(size_t i, const void *arg)
{
    const run_lookup *l = arg;
    return !strcmp(l->s->runs[i].key, l->key);
}

static uint64_t run_hash(size_t i, const void *arg)
{
    return gmp_text_hash(TEXT_HASH_START, ((const run_lookup *)arg)->s->runs[i].key);
}

/* The run of key, made when new; NULL without memory. */
static run_story *story_of(run_set *s, const char *key, const char *title)
{
    run_lookup l = {s, key};
    long at = index_find(&s->index, s->n, gmp_text_hash(TEXT_HASH_START, key), run_is, run_hash,
                         &l);
    if (at < 0)
        return NULL;
    if (s->index.slots[at])
        return &s->runs[s->index.slots[at] - 1];
    if (array_room((void **)&s->runs, &s->cap, s->n, sizeof *s->runs) < 0)
        return NULL;
    run_story *r = &s->runs[s->n];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    snprintf(r->title, sizeof r->title, "%s", title);
    r->world = -1;
    s->index.slots[at] = ++s->n;
    return r;
}

/* When the bundle's story starts: its failed request's time, else when it
 * was written. */
/* A time a bundle may hold (1970 to year 33658): a hostile 1e300 or NaN
 * is none, and never reaches a conversion to time_t. */
#define LATEST_TIME 1e12
static int plausible(double t)
{
    return t > 0 && t < LATEST_TIME;
}

static double time_of(bundle *b)
{
    const bundle_failure *f = bundle_failure_of(b);
    if (f && json_is_number(f->timestamp) && plausible(json_number_value(f->timestamp)))
        return json_number_value(f->timestamp);
    json_t *ns = json_object_get(b->manifest, "created_at_ns");
    double at = json_is_number(ns) ? json_number_value(ns) / 1e9 : 0;
    return plausible(at) ? at : 0;
}

/* "host memory", "cuda:1 memory", "V8's JavaScript heap". */
static void memory_words(bundle *b, char *out, size_t cap)
{
    const runtime_words *w = runtime_words_of(b);
    if (w && w->memory) { /* a limit of the runtime's own, or /dev/shm */
        snprintf(out, cap, "%s", w->memory);
        return;
    }
    const char *backend = jstr(b->manifest, "backend");
    const bundle_failure *f = bundle_failure_of(b);
    if (!backend || !strcmp(backend, "cpu") || !strcmp(backend, "host"))
        snprintf(out, cap, "host memory");
    else if (f && f->has_device)
        snprintf(out, cap, "%.20s:%lld memory", backend, (long long)f->device);
    else
        snprintf(out, cap, "%.20s memory", backend);
}

int runs_add(run_set *s, bundle *b, const char *path, gmp_verdict kind, const char *site,
             char key[RUN_KEY_SIZE])
{
    char title[sizeof s->runs->title];
    if (!run_of(b, key, RUN_KEY_SIZE, title, sizeof title)) {
        key[0] = '\0';
        return 0;
    }
    run_story *r = story_of(s, key, title);
    if (!r)
        return -1;
    if (array_room((void **)&r->members, &r->cap, r->n, sizeof *r->members) < 0)
        return -1;
    const bundle_run *where = bundle_run_of(b);
    const bundle_outcome *end = bundle_outcome_of(b);
    run_member *m = &r->members[r->n++];
    r->bundles++;
    memset(m, 0, sizeof *m);
    m->rank = number_or_none(where->rank);
    json_t *pid = json_object_get(b->manifest, "pid");
    m->pid = json_is_integer(pid) ? json_integer_value(pid) : -1;
    m->at = time_of(b);
    m->kind = kind;
    if (end->signal)
        snprintf(m->signal, sizeof m->signal, "%.*s", (int)sizeof m->signal - 1, end->signal);
    long world = number_or_none(where->world_size);
    if (world > r->world)
        r->world = world;
    if (where->host) {
        int known = 0;
        for (int i = 0; i < r->host_count && i < RUN_HOSTS_NAMED; i++)
            known |= !strcmp(r->hosts[i], where->host);
        if (!known && r->host_count < RUN_HOSTS_NAMED)
            snprintf(r->hosts[r->host_count], sizeof r->hosts[0], "%s", where->host);
        if (!known && r->host_count <= RUN_HOSTS_NAMED)
            r->host_count++; /* one past the named: "more", its hosts not told apart */
    }
    if (gmp_verdict_is_death_of_memory(kind)) {
        if (r->deaths == 0 || m->at < r->first.at) { /* the earliest death, in full */
            char *path_copy = strdup(path);
            if (!path_copy)
                return -1;
            free(r->first.bundle);
            r->first.bundle = path_copy;
            r->first.member = *m;
            r->first.at = m->at;
            memory_words(b, r->first.memory, sizeof r->first.memory);
            const bundle_failure *f = bundle_failure_of(b);
            const char *reason = jstr(b->manifest, "reason");
            snprintf(r->first.reason, sizeof r->first.reason, "%s", reason ? reason : "");
            snprintf(r->first.api, sizeof r->first.api, "%s", f && f->api ? f->api : "");
            snprintf(r->first.site, sizeof r->first.site, "%s", site ? site : "-");
        }
        r->deaths++;
    }
    return 1;
}

/* "-" or a number within [lo, hi], from one field; 0, else -1. */
static int note_field(const char *s, size_t len, long long lo, long long hi, long long *out)
{
    if (len == 1 && s[0] == '-') {
        *out = -1;
        return 0;
    }
    long long v = 0;
    if (!len || len > 19)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int runs_add_end(run_set *s, const char *line)
{
    long long v[5];
    static const long long hi[5] = {1ll << 31, 1ll << 31, 255, 64, 1ll << 62};
    const char *at = line;
    for (int f = 0; f < 5; f++) {
        const char *space = strchr(at, ' ');
        if (!space || note_field(at, (size_t)(space - at), 0, hi[f], &v[f]) < 0)
            return 0;
        at = space + 1;
    }
    size_t k = strcspn(at, "\n");
    if (!k || k >= RUN_KEY_SIZE || v[0] < 0 || (v[2] < 0) == (v[3] < 0))
        return 0; /* no pid, or not one of an exit and a signal */
    char key[RUN_KEY_SIZE], title[sizeof s->runs->title];
    memcpy(key, at, k);
    key[k] = '\0';
    snprintf(title, sizeof title, "run %.180s", key);
    run_story *r = story_of(s, key, title);
    if (!r)
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (r->members[i].pid == v[0])
            return 0; /* its own bundle tells its end */
    if (array_room((void **)&r->members, &r->cap, r->n, sizeof *r->members) < 0)
        return -1;
    run_member *m = &r->members[r->n++];
    memset(m, 0, sizeof *m);
    m->rank = v[1] >= 0 ? (long)v[1] : -1;
    m->pid = v[0];
    m->at = (double)v[4] / 1e9;
    m->ended = 1;
    m->exit_status = v[2] >= 0 ? (int)v[2] : -1;
    m->kind = GMP_VERDICT_KILLED_UNKNOWN;
    if (v[3] > 0) {
        const char *abbrev = gmp_signal_abbrev((int)v[3]);
        snprintf(m->signal, sizeof m->signal, "SIG%.8s", abbrev ? abbrev : "?");
    }
    return 1;
}

static int by_time(const void *a, const void *b)
{
    const run_member *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* A run's moment: its first death, else its first member. */
static double moment(const run_story *r)
{
    return r->deaths ? r->first.at : r->n ? r->members[0].at : 0;
}

static int by_first_death(const void *a, const void *b)
{
    const run_story *x = a, *y = b;
    if (!x->deaths != !y->deaths)
        return x->deaths ? -1 : 1;
    if (moment(x) != moment(y))
        return moment(x) < moment(y) ? -1 : 1;
    return strcmp(x->key, y->key);
}

void runs_order(run_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        qsort(s->runs[i].members, s->runs[i].n, sizeof *s->runs[i].members, by_time);
    if (s->n > 1) /* none: no array at all, and qsort must not be given NULL */
        qsort(s->runs, s->n, sizeof *s->runs, by_first_death);
    index_free(&s->index); /* the order changed: no key is looked up after this */
}

void runs_free(run_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->runs[i].members);
        free(s->runs[i].first.bundle);
    }
    free(s->runs);
    index_free(&s->index);
    memset(s, 0, sizeof *s);
}

/* A run's time in words: "2026-12-03T12:05:12.970Z". */
void run_time_text(double at, char *out, size_t cap)
{
    struct tm tm;
    time_t whole = plausible(at) ? (time_t)floor(at) : 0;
    if (!whole || !gmtime_r(&whole, &tm)) {
        snprintf(out, cap, "an unknown time");
        return;
    }
    int ms = (int)((at - (double)whole) * 1000);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03dZ", day, ms > 999 ? 999 : ms);
}
