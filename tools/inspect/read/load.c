/*
 * load.c — reading bundle files defensively.  Bundles may come from another
 * machine, a crashed writer or an attacker: every file is opened relative to
 * the bundle directory with O_NOFOLLOW, must be a regular file under a size
 * cap, and goes through jansson (whose parser refuses nesting deeper than
 * 2048 levels rather than recursing without bound); events.json is indexed
 * rather than held as one document (event_list.c).
 */
#include "read.h"
#include "util.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "<what>: <why>" into err, when the caller wants it (what may be a name
 * from the bundle's directory). */
static void set_err(char *err, size_t cap, const char *what, const char *why)
{
    char shown[1024];
    clean_text(what, shown, sizeof shown);
    if (err && cap)
        snprintf(err, cap, "%s: %s", shown, why);
}

char *read_file_at(int dirfd, const char *name, size_t max_bytes, size_t *len_out,
                   char *err, size_t err_cap)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_err(err, err_cap, name,
                errno == ELOOP ? "is a symbolic link (refused)" : strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        set_err(err, err_cap, name, "is not a regular file");
        return NULL;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        char lim[32];
        fmt_bytes(max_bytes, lim, sizeof lim);
        char why[64];
        snprintf(why, sizeof why, "larger than the %s this tool reads", lim);
        set_err(err, err_cap, name, why);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    if (!buf) {
        close(fd);
        set_err(err, err_cap, name, "too large to read in the memory this process may use");
        return NULL;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *len_out = got;
    return buf;
}

/* What parsing text would cost in memory, about: jansson keeps every value
 * as a node of its own (an object's with a hash table), so a file of
 * "[{},{},...]" costs some 80 times its size.  Counted from the structure
 * alone (strings skipped), before a byte is parsed. */
static size_t json_text_cost(const char *s, size_t n)
{
    size_t objects = 0, arrays = 0, values = 1;
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
            continue;
        }
        in_string = c == '"';
        objects += c == '{';
        arrays += c == '[';
        values += c == ',';
    }
    return objects * 200 + arrays * 80 + values * 64;
}

/* load_json_at's, the members named in drop (NULL: none) cut before the
 * parse where lean_text.c can (*cut set then). */
static json_t *load_json_cut(int dirfd, const char *name, size_t max_bytes,
                             const char *const *drop, int *cut, char *err, size_t err_cap)
{
    size_t len;
    char *buf = read_file_at(dirfd, name, max_bytes, &len, err, err_cap);
    if (!buf)
        return NULL;
    if (drop) {
        size_t whole = len;
        len = json_text_drop_members(buf, len, drop);
        *cut = len != whole;
    }
    buf = json_text_widen_integers(buf, &len);
    /* at most 200 a byte (all "{"): a short text cannot pass the bound */
    size_t cost = len * 190 + 64 <= (1u << 20) ? 0 : json_text_cost(buf, len);
    if (cost > JSON_COST_MAX || cost > 10 * len + (1u << 20)) {
        char why[200], size[32], need[32];
        fmt_bytes(len, size, sizeof size);
        fmt_bytes(cost, need, sizeof need);
        snprintf(why, sizeof why,
                 "holds too many values for its size to read (%s would take some %s)", size,
                 need);
        set_err(err, err_cap, name, why);
        free(buf);
        return NULL;
    }
    json_error_t jerr;
    errno = 0;
    json_t *root = json_loadb(buf, len, JSON_ALLOW_NUL, &jerr);
    int no_memory = !root && (json_error_code(&jerr) == json_error_out_of_memory ||
                              (!jerr.text[0] && errno == ENOMEM)); /* not always said */
    int to_clean = root && !inspect_raw_json && json_text_needs_cleaning(buf, len);
    free(buf);
    if (!root) {
        char where[300], size[32];
        fmt_bytes(len, size, sizeof size);
        if (no_memory)
            snprintf(where, sizeof where,
                     "too large to read in the memory this process may use (%s)", size);
        else
            snprintf(where, sizeof where, "invalid JSON at line %d column %d: %s", jerr.line,
                     jerr.column, jerr.text);
        set_err(err, err_cap, name, where);
    } else if (to_clean) {
        json_clean_strings(root);
    }
    return root;
}

json_t *load_json_at(int dirfd, const char *name, size_t max_bytes, char *err,
                     size_t err_cap)
{
    return load_json_cut(dirfd, name, max_bytes, NULL, NULL, err, err_cap);
}

/* What triage never reads of metadata.json, cut from a lean bundle's. */
static const char *const lean_cut[] = {"host_state", "device_state", NULL};

void bundle_metadata_whole(bundle *b)
{
    if (!b->metadata_cut)
        return;
    b->metadata_cut = 0;
    json_arena *was = json_arena_use(b->arena);
    json_t *whole = b->dirfd >= 0 ? load_json_at(b->dirfd, "metadata.json", SMALL_FILE_MAX,
                                                 NULL, 0)
                                  : NULL;
    for (int k = 0; json_is_object(whole) && lean_cut[k]; k++) {
        json_t *v = json_object_get(whole, lean_cut[k]);
        if (v) /* into the document every pointer already taken points into */
            json_object_set(b->metadata, lean_cut[k], v);
    }
    json_decref(whole);
    json_arena_use(was);
}

const char *jstr(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int jint(json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

json_t *bundle_json(bundle *b, const char *file)
{
    if (!strcmp(file, "manifest.json"))
        return b->manifest;
    if (!strcmp(file, "metadata.json")) {
        bundle_metadata_whole(b); /* asked for whole, whatever it is for */
        return b->metadata;
    }
    int env = !strcmp(file, "environment.json");
    if (env && b->environment)
        return b->environment;
    for (int i = 0; i < b->kept_count; i++)
        if (!strcmp(b->kept[i].name, file))
            return b->kept[i].doc;
    json_arena *was = json_arena_use(b->arena);
    json_t *doc = b->dirfd >= 0 ? load_json_at(b->dirfd, file, SMALL_FILE_MAX, NULL, 0) : NULL;
    json_arena_use(was);
    if (env && json_is_object(doc)) {
        b->environment = doc;
        return doc;
    }
    if (b->kept_count < BUNDLE_FILES_KEPT && strlen(file) < sizeof b->kept[0].name) {
        struct kept_file *k = &b->kept[b->kept_count++];
        snprintf(k->name, sizeof k->name, "%s", file);
        k->doc = doc; /* NULL too: not read again */
        k->text = NULL;
    } else if (doc) {
        json_decref(doc); /* nowhere to keep it: not handed out unowned */
        doc = NULL;
    }
    return doc;
}

const char *bundle_text(bundle *b, const char *file, size_t *len)
{
    *len = 0;
    for (int i = 0; i < b->kept_count; i++)
        if (!strcmp(b->kept[i].name, file)) {
            *len = b->kept[i].len;
            return b->kept[i].text;
        }
    if (b->kept_count >= BUNDLE_FILES_KEPT || strlen(file) >= sizeof b->kept[0].name)
        return NULL;
    struct kept_file *k = &b->kept[b->kept_count++];
    snprintf(k->name, sizeof k->name, "%s", file);
    k->doc = NULL;
    k->text = b->dirfd >= 0 ? read_file_at(b->dirfd, file, 1u << 20, &k->len, NULL, 0) : NULL;
    *len = k->text ? k->len : 0;
    return k->text;
}

/* A document of the bundle let go.  An arena's are not walked, value by
 * value, to reach frees that do nothing: its values go with the arena
 * (json_arena.c), and nothing is set into a document after its load. */
static void let_go(const bundle *b, json_t *doc)
{
    if (!b->arena)
        json_decref(doc);
}

void bundle_close(bundle *b)
{
    for (int i = 0; i < b->kept_count; i++) {
        let_go(b, b->kept[i].doc);
        free(b->kept[i].text);
    }
    b->kept_count = 0;
    module_table_free(&b->modules);
    stack_index_free(&b->stacks);
    b->modules_read = b->stacks_read = b->outcome_read = b->run_read = 0;
    free(b->devices);
    b->devices = NULL;
    b->device_count = 0;
    b->devices_read = b->failure_read = b->host_read = 0;
    let_go(b, b->manifest);
    let_go(b, b->metadata);
    let_go(b, b->environment);
    events_free(&b->events);
    b->manifest = b->metadata = b->environment = NULL;
    json_arena_free(b->arena); /* after every value of its documents is let go */
    b->arena = NULL;
    if (b->dirfd >= 0)
        close(b->dirfd);
    b->dirfd = -1;
}

static int open_bundle(bundle *b, const char *path, int want_env, int want_events, int lean,
                       char *err, size_t err_cap)
{
    memset(b, 0, sizeof *b);
    b->dirfd = -1;
    snprintf(b->path, sizeof b->path, "%s", path);
    size_t len = strlen(b->path);
    while (len > 1 && b->path[len - 1] == '/')
        b->path[--len] = '\0';
    const char *slash = strrchr(b->path, '/');
    snprintf(b->name, sizeof b->name, "%s", slash ? slash + 1 : b->path);

    /* a symlink named as a bundle is refused, as list refuses it: a
     * directory of bundles must not send a reader elsewhere */
    b->dirfd = open(b->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (b->dirfd < 0) {
        int was = errno;
        struct stat st;
        int link = lstat(b->path, &st) == 0 && S_ISLNK(st.st_mode);
        set_err(err, err_cap, path,
                link ? "is a symbolic link (refused)"
                     : was == ENOTDIR ? "is not a bundle directory" : strerror(was));
        return -1;
    }
    char why[512];
    /* an arena only where its allocator cuts the values from it */
    b->arena = inspect_bundle_arenas && json_arena_installed() ? json_arena_new() : NULL;
    json_arena *was = json_arena_use(b->arena);
    int failed = !(b->manifest = load_json_at(b->dirfd, "manifest.json", SMALL_FILE_MAX, why,
                                              sizeof why)) ||
                 !(b->metadata = load_json_cut(b->dirfd, "metadata.json", SMALL_FILE_MAX,
                                               lean ? lean_cut : NULL, &b->metadata_cut, why,
                                               sizeof why)) ||
                 (want_env && !(b->environment = load_json_at(b->dirfd, "environment.json",
                                                              SMALL_FILE_MAX, why, sizeof why))) ||
                 (want_events && events_load_at(b->dirfd, &b->events,
                                                json_object_get(b->metadata, "failed_request"),
                                                why, sizeof why) < 0);
    json_arena_use(was);
    if (failed) {
        set_err(err, err_cap, b->name, why);
        bundle_close(b);
        return -1;
    }
    if (!json_is_object(b->manifest) || !json_is_object(b->metadata) ||
        (b->environment && !json_is_object(b->environment))) {
        set_err(err, err_cap, b->name,
                "manifest, metadata and environment must be JSON objects");
        bundle_close(b);
        return -1;
    }
    return 0;
}

int bundle_open(bundle *b, const char *path, int want_env, int want_events,
                char *err, size_t err_cap)
{
    return open_bundle(b, path, want_env, want_events, 0, err, err_cap);
}

int bundle_open_lean(bundle *b, const char *path, char *err, size_t err_cap)
{
    if (open_bundle(b, path, 0, 0, 1, err, err_cap) < 0)
        return -1;
    b->lean = 1;
    return 0;
}

void fmt_bytes(uint64_t v, char *out, size_t cap)
{
    char text[32];
    gmp_fmt_bytes(v, text); /* the recorder's words for a size, in every tool */
    snprintf(out, cap, "%s", text);
}

static int is_bundle_name(const char *name)
{
    return !strncmp(name, "oom_dump_", 9);
}

static void walk(const char *path, int depth, void (*fn)(const char *, void *), void *arg)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (is_bundle_name(base)) {
        fn(path, arg);
        return;
    }
    if (depth > 8)
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue; /* ., .., hidden temporaries of writers */
        char child[BUNDLE_PATH_MAX];
        if ((size_t)snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= sizeof child)
            continue;
        /* never follow a symlink; one named as a bundle goes to the reader,
         * which refuses it and counts it unreadable (not a silent pass).
         * The entry's type where the file system tells it (a stat of each of
         * 100,000 bundles saved), else lstat's. */
        unsigned char type = e->d_type;
        struct stat st;
        if (type == DT_UNKNOWN && lstat(child, &st) == 0)
            type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
        if (type == DT_DIR || (type == DT_LNK && is_bundle_name(e->d_name)))
            walk(child, depth + 1, fn, arg);
    }
    closedir(d);
}

void for_each_bundle(char *path, void (*fn)(const char *bundle, void *arg), void *arg)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    walk(path, 0, fn, arg);
}

/* Whether the manifest alone says what triage asks of a bundle's run (a
 * writer that names the run also writes its rank, host and world size):
 * then a lean bundle opened without environment.json is not made to read
 * it.  A launcher's run is titled from environment.json's variables, and
 * is read there. */
static int manifest_tells_run(const bundle *b)
{
    const char *run = jstr(b->manifest, "run");
    return run && (!strncmp(run, "torchrun|", 9) || !strncmp(run, "slurm|", 6)) &&
           json_is_integer(json_object_get(b->manifest, "rank")) &&
           json_is_integer(json_object_get(b->manifest, "world_size")) &&
           jstr(b->manifest, "host");
}

const bundle_run *bundle_run_of(bundle *b)
{
    if (!b->run_read && b->lean && !b->environment && manifest_tells_run(b)) {
        b->run_read = 1;
        bundle_run *r = &b->run;
        memset(r, 0, sizeof *r);
        snprintf(r->rank_text, sizeof r->rank_text, "%lld",
                 (long long)json_integer_value(json_object_get(b->manifest, "rank")));
        snprintf(r->world_text, sizeof r->world_text, "%lld",
                 (long long)json_integer_value(json_object_get(b->manifest, "world_size")));
        r->rank = r->rank_text;
        r->world_size = r->world_text;
        r->host = jstr(b->manifest, "host");
        const char *named = jstr(b->manifest, "slurm_job");
        if (named)
            snprintf(r->job_text, sizeof r->job_text, "%.60s", named);
        r->job = named ? r->job_text : NULL;
    }
    if (!b->run_read) {
        b->run_read = 1;
        bundle_run *r = &b->run;
        memset(r, 0, sizeof *r);
        bundle_json(b, "environment.json"); /* where the bundle was opened without it */
        static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                           "PMI_RANK", "LOCAL_RANK"};
        r->rank = jstr(b->manifest, "rank");
        json_t *written = json_object_get(b->manifest, "rank");
        if (json_is_integer(written) && json_integer_value(written) >= 0) {
            /* the writer's: RANK and friends, or a rank the process's own
             * code gave it (torch.multiprocessing.spawn's index) */
            snprintf(r->rank_text, sizeof r->rank_text, "%lld",
                     (long long)json_integer_value(written));
            r->rank = r->rank_text;
        }
        json_t *vals = json_object_get(b->environment, "environment");
        for (size_t i = 0; i < sizeof vars / sizeof *vars && !r->rank; i++)
            r->rank = jstr(vals, vars[i]);
        r->host = jstr(b->manifest, "host");
        if (!r->host)
            r->host = jstr(json_object_get(b->environment, "system"), "hostname");
        const char *named = jstr(b->manifest, "slurm_job");
        json_t *slurm = json_object_get(json_object_get(b->environment, "process"), "slurm");
        const char *job = jstr(slurm, "job_id"), *step = jstr(slurm, "step_id");
        static const struct {
            size_t at;
            const char *vars[3];
        } run_vars[] = {
            {offsetof(bundle_run, run_id), {"TORCHELASTIC_RUN_ID"}},
            {offsetof(bundle_run, restart), {"TORCHELASTIC_RESTART_COUNT"}},
            {offsetof(bundle_run, master_addr), {"MASTER_ADDR"}},
            {offsetof(bundle_run, master_port), {"MASTER_PORT"}},
            {offsetof(bundle_run, world_size), {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}},
            {offsetof(bundle_run, local_rank), {"LOCAL_RANK", "SLURM_LOCALID"}},
            {offsetof(bundle_run, node), {"GROUP_RANK", "NODE_RANK", "SLURM_NODEID"}},
            {offsetof(bundle_run, error_file), {"TORCHELASTIC_ERROR_FILE"}},
            {offsetof(bundle_run, nccl_dump), {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}},
        };
        for (size_t i = 0; i < sizeof run_vars / sizeof *run_vars; i++) {
            const char **field = (const char **)((char *)r + run_vars[i].at);
            for (size_t k = 0; k < 3 && run_vars[i].vars[k] && !*field; k++)
                *field = jstr(vals, run_vars[i].vars[k]);
        }
        json_t *process = json_object_get(b->environment, "process");
        r->launcher = jstr(process, "launcher");
        /* multiprocessing's spawn: "python -c 'from multiprocessing.spawn import
         * spawn_main; ...' --multiprocessing-fork" (a ring's command, joined) */
        const char *command = jstr(process, "command");
        json_t *argv = json_object_get(process, "cmdline");
        r->multiprocessing = command && strstr(command, " --multiprocessing-fork");
        for (size_t i = 0; i < json_array_size(argv) && !r->multiprocessing; i++) {
            const char *arg = json_string_value(json_array_get(argv, i));
            r->multiprocessing = arg && !strcmp(arg, "--multiprocessing-fork");
        }
        r->job = r->job_text;
        if (named)
            snprintf(r->job_text, sizeof r->job_text, "%.60s", named);
        else if (job)
            snprintf(r->job_text, sizeof r->job_text, "%.30s%s%.20s", job, step ? "." : "",
                     step ? step : "");
        else
            r->job = NULL;
    }
    return &b->run;
}

const char *bundle_rank(bundle *b)
{
    return bundle_run_of(b)->rank;
}

const char *bundle_job(bundle *b, char *out, size_t cap)
{
    const char *job = bundle_run_of(b)->job;
    if (!job)
        return NULL;
    snprintf(out, cap, "%s", job);
    return out;
}

const char *bundle_host(bundle *b)
{
    return bundle_run_of(b)->host;
}
