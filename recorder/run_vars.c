/*
 * run_vars.c — the distributed run a process is a rank of: the launcher's
 * variables (torchrun's, Slurm's, MPI's) kept as a block from the process's
 * start, in its ring too, so that a bundle written after it was killed names
 * its run and rank as its own would; the launcher that started it; and the
 * run's key, which the manifest holds so that retention keeps each run's
 * first bundle, its root cause, and triage groups the run's bundles.
 */
#include "bundle.h"
#include "verdict.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* The variables that name a run and a rank in it (show's Run line). */
static const char *const run_var_names[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_ERROR_FILE",
    "MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
};

/* The launcher of process pid (0: this one) into out: "PPID:TICKS". */
static void launcher_of(int pid, char *out)
{
    int parent = pid ? gmp_proc_parent(pid) : getppid();
    char num[24], ticks[24];
    out[0] = '\0';
    if (parent <= 0)
        return;
    gmp_fmt_u64((uint64_t)parent, num);
    gmp_fmt_u64(gmp_proc_start_ticks(parent), ticks);
    if (gmp_strjoin(out, GMP_LAUNCHER_SIZE, num, ":", ticks, (char *)NULL) < 0)
        out[0] = '\0';
}

void gmp_launcher_here(char *out)
{
    launcher_of(0, out);
}
/* NAME=VALUE appended at out + *n when it fits whole (a NUL after it). */
static void put_run_var(char *out, size_t cap, size_t *n, const char *name, const char *v)
{
    size_t k = strlen(name), l = strlen(v);
    if (*n + k + 1 + l + 2 > cap)
        return; /* no room: left out whole */
    memcpy(out + *n, name, k);
    out[*n + k] = '=';
    memcpy(out + *n + k + 1, v, l);
    out[*n + k + 1 + l] = '\0';
    *n += k + l + 2;
}

static long learned_rank = -1; /* atomic */

long gmp_run_rank_learned_here(void)
{
    return __atomic_load_n(&learned_rank, __ATOMIC_ACQUIRE);
}

void gmp_run_vars_here(char *out, size_t cap)
{
    size_t n = 0;
    char launcher[GMP_LAUNCHER_SIZE], learned[24];
    gmp_launcher_here(launcher);
    if (launcher[0])
        put_run_var(out, cap, &n, GMP_LAUNCHER_VAR, launcher);
    for (size_t i = 0; i < sizeof run_var_names / sizeof *run_var_names; i++) {
        const char *v = getenv(run_var_names[i]);
        if (v)
            put_run_var(out, cap, &n, run_var_names[i], v);
    }
    long rank = gmp_run_rank_learned_here();
    if (rank >= 0) {
        gmp_fmt_u64((uint64_t)rank, learned);
        put_run_var(out, cap, &n, GMP_SPAWN_RANK_VAR, learned);
    }
    if (n < cap)
        out[n] = '\0';
}

void gmp_run_rank_learned(long rank, char *ring_vars, size_t cap)
{
    long none = -1;
    if (rank >= 0 && __atomic_compare_exchange_n(&learned_rank, &none, rank, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE))
        gmp_run_rank_to_ring(ring_vars, cap);
}

void gmp_run_rank_to_ring(char *ring_vars, size_t cap)
{
    long rank = gmp_run_rank_learned_here();
    if (rank < 0 || !ring_vars || gmp_run_vars_value(ring_vars, cap, GMP_SPAWN_RANK_VAR))
        return;
    /* appended after the block's last variable: all of it but its first
     * byte, then that byte over the empty string that ended the block, so a
     * reader of the file (this process may be killed meanwhile) sees the
     * block as it was or with the variable whole */
    size_t name_len, end = 0;
    for (const char *at = ring_vars; (at = gmp_run_vars_next(at, ring_vars + cap, &name_len));
         at += strlen(at) + 1)
        end = (size_t)(at - ring_vars) + strlen(at) + 1;
    char entry[64], num[24];
    gmp_fmt_u64((uint64_t)rank, num);
    size_t len = 0;
    put_run_var(entry, sizeof entry, &len, GMP_SPAWN_RANK_VAR, num);
    if (!len || end + len + 1 > cap)
        return;
    memcpy(ring_vars + end + 1, entry + 1, len - 1);
    ring_vars[end + len] = '\0';
    __atomic_store_n(&ring_vars[end], entry[0], __ATOMIC_RELEASE);
}

/* NAME=VALUE of an environment kept when NAME is a run variable. */
static void keep_if_run_var(char *out, size_t cap, size_t *n, const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq)
        return;
    for (size_t i = 0; i < sizeof run_var_names / sizeof *run_var_names; i++)
        if (strlen(run_var_names[i]) == (size_t)(eq - entry) &&
            !memcmp(run_var_names[i], entry, (size_t)(eq - entry))) {
            put_run_var(out, cap, n, run_var_names[i], eq + 1);
            return;
        }
}

/* The run variables of another process (gmp-run's proxy of one that has no
 * ring of its own), from /proc/PID/environ, read in pieces: an entry
 * longer than `entry` is no run variable's and is passed over. */
static void run_vars_of(int pid, char *out, size_t cap)
{
    size_t n = 0;
    char launcher[GMP_LAUNCHER_SIZE], path[64], num[24], piece[4096], entry[1200];
    launcher_of(pid, launcher);
    if (launcher[0])
        put_run_var(out, cap, &n, GMP_LAUNCHER_VAR, launcher);
    gmp_fmt_u64((uint64_t)pid, num);
    gmp_strjoin(path, sizeof path, "/proc/", num, "/environ", (char *)NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    int overlong = 0;
    for (ssize_t got; fd >= 0 && (got = read(fd, piece, sizeof piece)) > 0;)
        for (ssize_t i = 0; i < got; i++) {
            if (piece[i] == '\0') {
                entry[len] = '\0';
                if (!overlong)
                    keep_if_run_var(out, cap, &n, entry);
                len = 0;
                overlong = 0;
            } else if (len + 1 < sizeof entry) {
                entry[len++] = piece[i];
            } else {
                overlong = 1;
            }
        }
    if (fd >= 0)
        close(fd);
    if (n < cap)
        out[n] = '\0';
}

void gmp_run_vars_of(int pid, char *out, size_t cap)
{
    if (pid)
        run_vars_of(pid, out, cap);
    else
        gmp_run_vars_here(out, cap);
}

const char *gmp_run_vars_value(const char *vars, size_t cap, const char *name)
{
    size_t name_len, want = strlen(name);
    const char *end = vars + cap;
    for (const char *at = vars; (at = gmp_run_vars_next(at, end, &name_len)) != NULL;
         at += strlen(at) + 1)
        if (name_len == want && !memcmp(at, name, want))
            return at + want + 1;
    return NULL;
}

long gmp_run_vars_rank(const char *vars, size_t cap)
{
    const char *v = gmp_run_vars_value(vars, cap, "RANK");
    if (!v)
        v = gmp_run_vars_value(vars, cap, GMP_SPAWN_RANK_VAR);
    return v ? gmp_decimal(v, strlen(v), 7) : -1;
}

const char *gmp_run_vars_next(const char *at, const char *end, size_t *name_len)
{
    if (at >= end || !*at)
        return NULL;
    size_t len = strnlen(at, (size_t)(end - at));
    const char *eq = memchr(at, '=', len);
    if (len == (size_t)(end - at) || !eq || eq == at)
        return NULL; /* not ended inside the block, or no NAME: the block stops */
    *name_len = (size_t)(eq - at);
    return at;
}

void gmp_bundle_fill_run_vars(gmp_jw *w, const char *vars, size_t cap)
{
    gmp_jw_key(w, "environment");
    gmp_jw_obj_begin(w);
    size_t name_len;
    const char *end = vars + cap;
    for (const char *at = vars; (at = gmp_run_vars_next(at, end, &name_len)) != NULL;
         at += strlen(at) + 1) {
        for (size_t i = 0; i < sizeof run_var_names / sizeof *run_var_names; i++)
            if (strlen(run_var_names[i]) == name_len && !memcmp(run_var_names[i], at, name_len))
                gmp_jw_kstr(w, run_var_names[i], at + name_len + 1); /* only the names we keep */
    }
    gmp_jw_obj_end(w);
}

/* s appended to out (at *n, within cap) with every character but letters,
 * digits and ._:-| as '_': a key a reader finds by plain text search. */
static void put_key_part(char *out, size_t cap, size_t *n, const char *s)
{
    for (; s && *s && *n + 1 < cap; s++) {
        char c = *s;
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-' || c == '|';
        out[(*n)++] = plain ? c : '_';
    }
    out[*n] = '\0';
}

void gmp_run_key(const char *vars, size_t cap, const gmp_job_place *place, char *out,
                 size_t out_cap)
{
    size_t n = 0;
    out[0] = '\0';
    const char *id = gmp_run_vars_value(vars, cap, "TORCHELASTIC_RUN_ID");
    const char *restart = gmp_run_vars_value(vars, cap, "TORCHELASTIC_RESTART_COUNT");
    char job[64];
    gmp_bundle_job_name(place, job, sizeof job);
    const char *launcher = gmp_run_vars_value(vars, cap, GMP_LAUNCHER_VAR);
    const char *addr = gmp_run_vars_value(vars, cap, "MASTER_ADDR");
    const char *parts[6] = {NULL};
    struct utsname u;
    if (id && *id && strcmp(id, "none")) {
        parts[0] = "torchrun|", parts[1] = id, parts[2] = "|", parts[3] = restart ? restart : "0";
    } else if (job[0]) {
        parts[0] = "slurm|", parts[1] = job;
    } else if (launcher && uname(&u) == 0 &&
               (addr || gmp_run_vars_value(vars, cap, "RANK") ||
                gmp_run_vars_value(vars, cap, GMP_SPAWN_RANK_VAR) ||
                gmp_run_vars_value(vars, cap, "WORLD_SIZE"))) {
        const char *port = gmp_run_vars_value(vars, cap, "MASTER_PORT");
        put_key_part(out, out_cap, &n, "launcher|");
        put_key_part(out, out_cap, &n, u.nodename);
        put_key_part(out, out_cap, &n, "|");
        put_key_part(out, out_cap, &n, launcher);
        put_key_part(out, out_cap, &n, "|");
        put_key_part(out, out_cap, &n, addr);
        put_key_part(out, out_cap, &n, ":");
        put_key_part(out, out_cap, &n, port);
        return;
    }
    for (int i = 0; parts[i]; i++)
        put_key_part(out, out_cap, &n, parts[i]);
}

/* Another bundle of the directory whose manifest names the run `key`, a
 * warning of memory pressure left out. */
typedef struct run_search {
    const char *key;
    int found;
} run_search;

static int same_run(int dirfd, const char *name, void *arg)
{
    run_search *r = arg;
    char text[4096];
    if (r->found || strncmp(name, GMP_BUNDLE_PREFIX, strlen(GMP_BUNDLE_PREFIX)))
        return 0;
    int bfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return 0;
    int read_it = gmp_manifest_read(bfd, name, text, sizeof text);
    close(bfd);
    if (read_it < 0)
        return 0;
    /* a memory-pressure warning is no failure: the death that follows it
     * replaces it, and is the run's first */
    if (strstr(text, "\"reason\":\"" GMP_REASON_PRESSURE "\""))
        return 0;
    const char *at = strstr(text, "\"run\":\"");
    size_t k = strlen(r->key);
    r->found = at && !strncmp(at + 7, r->key, k) && at[7 + k] == '"';
    return 0;
}

void gmp_bundle_fill_run(gmp_jw *w, const gmp_ring_header *dead, int self,
                         const gmp_job_place *place, int dump_dirfd, int warning)
{
    char vars[GMP_RUN_VARS_SIZE], key[GMP_RUN_KEY_SIZE];
    const char *of = vars;
    size_t cap = sizeof vars;
    if (dead) {
        of = dead->run_vars;
        cap = sizeof dead->run_vars;
    } else if (self) {
        gmp_run_vars_here(vars, sizeof vars);
    } else {
        return;
    }
    gmp_run_key(of, cap, place, key, sizeof key);
    if (!key[0])
        return;
    run_search search = {key, 0};
    if (!warning) /* a warning is never a run's first failure */
        gmp_dir_foreach(dump_dirfd, same_run, &search);
    gmp_jw_kstr(w, "run", key);
    gmp_jw_key(w, "run_first");
    gmp_jw_bool(w, !warning && !search.found);
    /* the run's size where its launcher said it (WORLD_SIZE, which readers
     * take first too): with rank and host, all that a reader of many
     * bundles (triage) asks of environment.json */
    const char *world_text = gmp_run_vars_value(of, cap, "WORLD_SIZE");
    long world = world_text ? gmp_decimal(world_text, strlen(world_text), 7) : -1;
    if (world > 0)
        gmp_jw_ki64(w, "world_size", world);
}
